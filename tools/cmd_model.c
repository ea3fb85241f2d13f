/* bb inspect / bb reencode: look at and normalise ONNX models. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/compiler.h"
#include "cli.h"

/* bb inspect --wires A B: whether two artifacts can talk; exit 0 when they can, 1 when
 * they cannot (or a file is bad). */
static int inspect_wires(const char *a_path, const char *b_path, bool json) {
  bb_model *a = NULL, *b = NULL;
  if (cli_load_model(a_path, &a)) return 1;
  if (cli_load_model(b_path, &b)) {
    bb_model_free(a);
    return 1;
  }
  char *text;
  size_t len;
  bool talk = false;
  bb_error err;
  int rc = bb_artifact_wires_compare(a, a_path, b, b_path, json ? BB_ARTIFACT_JSON : BB_ARTIFACT_TEXT, &text, &len,
                                     &talk, &err);
  bb_model_free(b);
  if (rc) {
    bb_model_free(a);
    fprintf(stderr, "bb inspect: %s\n", err.message);
    return 1;
  }
  fwrite(text, 1, len, stdout);
  bb_buffer_free(NULL, text);
  bb_model_free(a);
  return talk ? 0 : 1;
}

int cmd_inspect(int argc, char **argv) {
  const char *path = NULL, *other = NULL;
  bool json = false, dot = false, wires = false;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) json = true;
    else if (strcmp(argv[i], "--dot") == 0) dot = true;
    else if (strcmp(argv[i], "--wires") == 0) wires = true;
    else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "bb inspect: unknown option %s\n", argv[i]);
      return 2;
    } else if (!path) path = argv[i];
    else if (!other) other = argv[i];
    else {
      fprintf(stderr, "bb inspect: too many models (%s, %s, %s)\n", path, other, argv[i]);
      return 2;
    }
  }
  if (!path || (wires && !other)) {
    fprintf(stderr, "usage: bb inspect MODEL.onnx [--json|--dot]\n       bb inspect --wires A.onnx B.onnx [--json]\n");
    return 2;
  }
  if (other && !wires) {
    fprintf(stderr, "bb inspect: one model at a time (got %s and %s); --wires compares two\n", path, other);
    return 2;
  }
  if (json && dot) {
    fprintf(stderr, "bb inspect: --json and --dot exclude each other\n");
    return 2;
  }
  if (wires && dot) {
    fprintf(stderr, "bb inspect: --wires reports as text or --json\n");
    return 2;
  }
  if (wires) return inspect_wires(path, other, json);
  bb_model *m;
  if (cli_load_model(path, &m)) return 1;
  char *text;
  size_t len;
  bb_error err;
  /* a compiled artifact (it carries the passport) is shown as partitions and edges */
  bool artifact = bb_kv_get(&m->metadata, BB_KEY_COMPILED) != NULL;
  if (dot && !artifact) {
    bb_model_free(m);
    fprintf(stderr, "bb inspect: %s is not a compiled artifact; --dot draws artifacts\n", path);
    return 1;
  }
  int rc = artifact ? bb_artifact_describe(m, json ? BB_ARTIFACT_JSON : dot ? BB_ARTIFACT_DOT : BB_ARTIFACT_TEXT,
                                           &text, &len, &err)
                    : bb_model_summary(m, json, &text, &len, &err);
  bb_model_free(m);
  if (rc) {
    fprintf(stderr, "bb inspect: %s\n", err.message);
    return 1;
  }
  fwrite(text, 1, len, stdout);
  bb_buffer_free(NULL, text);
  return 0;
}

int cmd_reencode(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: bb reencode IN.onnx OUT.onnx\n"
                    "  decodes a model into the IR and encodes it again (canonical field order)\n");
    return 2;
  }
  bb_model *m;
  if (cli_load_model(argv[0], &m)) return 1;
  uint8_t *bytes;
  size_t len;
  bb_error err;
  int rc = bb_model_encode(m, &bytes, &len, &err);
  bb_model_free(m);
  if (rc) {
    fprintf(stderr, "bb reencode: %s\n", err.message);
    return 1;
  }
  rc = cli_write_file(argv[1], bytes, len);
  bb_buffer_free(NULL, bytes);
  return rc;
}
