/* bb vocab: the names recorded models and compiled artifacts are written in (the table
 * of bb/artifact.h), for people and for tools written in other languages. */
#include <stdio.h>
#include <string.h>

#include "bb/artifact.h"
#include "cli.h"

int cmd_vocab(int argc, char **argv) {
  if (argc > 1 || (argc == 1 && strcmp(argv[0], "--json") != 0)) {
    fprintf(stderr, "usage: bb vocab [--json]\n");
    return 2;
  }
  char *out;
  size_t len;
  bb_error err;
  if (bb_vocab_describe(argc == 1, NULL, &out, &len, &err)) {
    fprintf(stderr, "bb vocab: %s\n", err.message);
    return 1;
  }
  fwrite(out, 1, len, stdout);
  bb_buffer_free(NULL, out);
  return 0;
}
