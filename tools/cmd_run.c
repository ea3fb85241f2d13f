/* bb run: run a plain ONNX model on the CPU backend; bb ops: what the backend supports. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bb/artifact.h"
#include "bb/cpu.h"
#include "cli.h"

#define MAX_INPUTS 64

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Loads a TensorProto file into a tensor; *name is the proto's own name (may be NULL). */
static int load_tensor(bb_model *m, const char *path, bb_tensor **out, const char **name) {
  uint8_t *bytes;
  size_t len;
  if (cli_read_file(path, &bytes, &len)) return 1;
  bb_tensor_proto *p;
  bb_error err;
  int rc = bb_tensor_proto_decode(m, bytes, len, &p, &err);
  free(bytes);
  if (!rc) rc = bb_tensor_from_proto(p, NULL, out, &err);
  if (rc) {
    fprintf(stderr, "bb run: %s: %s\n", path, err.message);
    return 1;
  }
  *name = p->name;
  return 0;
}

static void print_tensor(const char *name, const bb_tensor *t) {
  char desc[128];
  printf("%s: %s", name, bb_tensor_describe(t, desc, sizeof desc));
  int64_t show = t->numel < 8 ? t->numel : 8;
  if (show) printf(" = [");
  for (int64_t i = 0; i < show; i++) {
    const void *d = bb_tensor_data(t);
    if (i) printf(", ");
    switch (t->dtype) {
    case BB_DTYPE_FLOAT: printf("%g", ((const float *)d)[i]); break;
    case BB_DTYPE_DOUBLE: printf("%g", ((const double *)d)[i]); break;
    case BB_DTYPE_INT64: printf("%lld", (long long)((const int64_t *)d)[i]); break;
    case BB_DTYPE_INT32: printf("%d", ((const int32_t *)d)[i]); break;
    case BB_DTYPE_BOOL: printf("%s", ((const uint8_t *)d)[i] ? "true" : "false"); break;
    case BB_DTYPE_UINT8: printf("%u", ((const uint8_t *)d)[i]); break;
    case BB_DTYPE_INT8: printf("%d", ((const int8_t *)d)[i]); break;
    default: printf("?"); break;
    }
  }
  if (show) printf("%s]", show < t->numel ? ", ..." : "");
  printf("\n");
}

/* Writes a tensor as OUTDIR/NAME.pb, with characters unsafe in file names replaced. */
static int write_output(bb_model *m, const char *dir, const char *name, const bb_tensor *t) {
  bb_tensor_proto *p;
  bb_error err;
  uint8_t *bytes;
  size_t len;
  if (bb_tensor_to_proto(m, t, name, &p, &err) || bb_tensor_proto_encode(p, &bytes, &len, &err)) {
    fprintf(stderr, "bb run: output %s: %s\n", name, err.message);
    return 1;
  }
  char file[1024];
  size_t n = (size_t)snprintf(file, sizeof file, "%s/", dir);
  for (const char *c = name; *c && n < sizeof file - 4; c++)
    file[n++] = (*c == '/' || *c == '\\' || *c == ':' || (unsigned char)*c < 0x20) ? '_' : *c;
  snprintf(file + n, sizeof file - n, ".pb");
  int rc = cli_write_file(file, bytes, len);
  bb_buffer_free(NULL, bytes);
  if (!rc) printf("  wrote %s\n", file);
  return rc;
}

int cmd_run(int argc, char **argv) {
  const char *model_path = NULL, *out_dir = NULL;
  const char *input_specs[MAX_INPUTS];
  int n_specs = 0;
  long repeat = 1;
  bb_cpu_limits limits = {.struct_size = sizeof limits};
  bb_cpu_session_options options = {.struct_size = sizeof options};
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--input") == 0 && i + 1 < argc) {
      if (n_specs == MAX_INPUTS) {
        fprintf(stderr, "bb run: at most %d inputs\n", MAX_INPUTS);
        return 2;
      }
      input_specs[n_specs++] = argv[++i];
    } else if (strcmp(argv[i], "--output-dir") == 0 && i + 1 < argc) {
      out_dir = argv[++i];
    } else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
      char *end;
      repeat = strtol(argv[++i], &end, 10);
      if (*end || repeat < 1 || repeat > 1000000) {
        fprintf(stderr, "bb run: --repeat takes a count from 1 to 1000000\n");
        return 2;
      }
    } else if (strcmp(argv[i], "--max-total-bytes") == 0 && i + 1 < argc) {
      char *end;
      unsigned long long v = strtoull(argv[++i], &end, 10);
      if (*end || !v || argv[i][0] == '-' || v > SIZE_MAX) {
        fprintf(stderr, "bb run: --max-total-bytes takes a positive count of bytes\n");
        return 2;
      }
      limits.max_total_bytes = (size_t)v;
    } else if (strcmp(argv[i], "--no-rewrites") == 0) {
      options.rewrites_off = BB_CPU_REWRITE_ALL;
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "bb run: unknown option %s\n", argv[i]);
      return 2;
    } else if (!model_path) {
      model_path = argv[i];
    } else {
      fprintf(stderr, "bb run: unexpected argument %s\n", argv[i]);
      return 2;
    }
  }
  if (!model_path) {
    fprintf(stderr, "usage: bb run MODEL.onnx --input [NAME=]TENSOR.pb ... [--output-dir DIR] [--repeat N]\n"
                    "              [--max-total-bytes N] [--no-rewrites]\n");
    return 2;
  }
  bb_model *m;
  if (cli_load_model(model_path, &m)) return 1;
  bb_cpu_session *s = NULL;
  bb_error err;
  int status = 1;
  bb_tensor *inputs[MAX_INPUTS] = {0};
  const char *names[MAX_INPUTS];
  bb_tensor **outputs = NULL;
  double *times = NULL;
  if (bb_cpu_session_new_with_options(m, NULL, &options, &s, &err)) {
    fprintf(stderr, "bb run: %s: %s\n", model_path, err.message);
    goto done;
  }
  if (bb_cpu_session_set_limits(s, &limits, &err)) {
    fprintf(stderr, "bb run: %s\n", err.message);
    goto done;
  }
  for (int i = 0; i < n_specs; i++) {
    const char *eq = strchr(input_specs[i], '=');
    const char *path = eq ? eq + 1 : input_specs[i];
    const char *proto_name;
    if (load_tensor(m, path, &inputs[i], &proto_name)) goto done;
    if (eq) {
      char *copy = bb_model_strdup(m, input_specs[i]);
      if (!copy) goto done;
      copy[eq - input_specs[i]] = '\0';
      names[i] = copy;
    } else if (proto_name && *proto_name) {
      names[i] = proto_name;
    } else if ((size_t)i < bb_cpu_session_input_count(s)) {
      names[i] = bb_cpu_session_input_name(s, (size_t)i);
    } else {
      fprintf(stderr, "bb run: %s names no input and the model has only %zu\n", path, bb_cpu_session_input_count(s));
      goto done;
    }
  }
  size_t n_out = bb_cpu_session_output_count(s);
  outputs = calloc(n_out ? n_out : 1, sizeof *outputs);
  times = calloc((size_t)repeat, sizeof *times);
  if (!outputs || !times) goto done;
  for (long r = 0; r < repeat; r++) {
    for (size_t k = 0; k < n_out; k++) bb_tensor_release(outputs[k]), outputs[k] = NULL;
    double t0 = now_ms();
    if (bb_cpu_session_run(s, names, inputs, (size_t)n_specs, outputs, &err)) {
      fprintf(stderr, "bb run: %s\n", err.message);
      goto done;
    }
    times[r] = now_ms() - t0;
  }
  for (size_t k = 0; k < n_out; k++) print_tensor(bb_cpu_session_output_name(s, k), outputs[k]);
  qsort(times, (size_t)repeat, sizeof *times, cmp_double);
  printf("ran %ld time%s: min %.3f ms, median %.3f ms; peak intermediate memory %zu bytes\n", repeat,
         repeat == 1 ? "" : "s", times[0], times[repeat / 2], bb_cpu_session_peak_bytes(s));
  bb_cpu_session_rewrites rw;
  bb_cpu_session_rewrites_made(s, false, &rw);
  printf("rewrites: %zu nodes as %zu steps; folded_constants=%zu folded_batchnorms=%zu fused_activations=%zu "
         "fused_adds=%zu elided_identities=%zu batch_bands=%zu\n",
         rw.nodes, rw.steps, rw.folded_constants, rw.folded_batchnorms, rw.fused_activations, rw.fused_adds,
         rw.elided_identities, rw.batch_bands);
  if (out_dir) {
    mkdir(out_dir, 0777);
    for (size_t k = 0; k < n_out; k++)
      if (write_output(m, out_dir, bb_cpu_session_output_name(s, k), outputs[k])) goto done;
  }
  status = 0;
done:
  if (outputs)
    for (size_t k = 0; k < bb_cpu_session_output_count(s); k++) bb_tensor_release(outputs[k]);
  free(outputs);
  free(times);
  for (int i = 0; i < n_specs; i++) bb_tensor_release(inputs[i]);
  bb_cpu_session_free(s);
  bb_model_free(m);
  return status;
}

int cmd_ops(int argc, char **argv) {
  (void)argv;
  if (argc) {
    fprintf(stderr, "usage: bb ops\n");
    return 2;
  }
  size_t n = bb_cpu_op_count();
  printf("%zu ai.onnx operators on the CPU backend:\n", n);
  for (size_t i = 0; i < n; i++) printf("  %-26s %s\n", bb_cpu_op_name(i), bb_cpu_op_types(i));
  n = bb_cpu_grad_op_count();
  printf("%zu %s operators (training graphs, docs/GRAD.md):\n", n, BB_DOMAIN_GRAD);
  for (size_t i = 0; i < n; i++) printf("  %-26s %s\n", bb_cpu_grad_op_name(i), bb_cpu_grad_op_types(i));
  return 0;
}
