/* The compiler on a 10,000-node module: time to compile the recorded bytes into an
 * artifact, against the ONNX codec alone (decode the same bytes and encode the result),
 * the floor any bytes-to-bytes compile pays, and time to describe the artifact in each
 * format. Goal natively: under 100 ms to compile. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bb/compiler.h"
#include "compiler/big_module.h"

#define RUNS 7

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* bb_artifact_describe of the compiled artifact in each format: median of RUNS. */
static int describe_artifact(bb_compiler *c, const uint8_t *bytes, size_t len) {
  static const char *const FORMATS[] = {"text", "dot", "json"};
  bb_error err;
  uint8_t *out;
  size_t out_len;
  bb_model *m = NULL;
  if (bb_compiler_compile(c, bytes, len, &out, &out_len, &err) || bb_model_decode(out, out_len, NULL, NULL, &m, &err)) {
    fprintf(stderr, "bench_compiler: %s\n", err.message);
    return 1;
  }
  bb_buffer_free(NULL, out);
  for (int fmt = 0; fmt < 3; fmt++) {
    double took[RUNS];
    size_t text_len = 0;
    for (int r = 0; r < RUNS; r++) {
      char *text;
      double t0 = now_ms();
      if (bb_artifact_describe(m, (bb_artifact_format)fmt, &text, &text_len, &err)) {
        fprintf(stderr, "bench_compiler: %s\n", err.message);
        return 1;
      }
      took[r] = now_ms() - t0;
      bb_buffer_free(NULL, text);
    }
    qsort(took, RUNS, sizeof *took, cmp);
    char label[64];
    snprintf(label, sizeof label, "describe as %s (%zu B)", FORMATS[fmt], text_len);
    printf("  %-34s min %8.2f ms  median %8.2f ms\n", label, took[0], took[RUNS / 2]);
  }
  bb_model_free(m);
  return 0;
}

int main(void) {
  bb_model *rec;
  bb_error err;
  uint8_t *bytes, *out;
  size_t len, out_len;
  if (bb_module_build(&BIG, NULL, &rec, &err) || bb_model_encode(rec, &bytes, &len, &err)) {
    fprintf(stderr, "bench_compiler: %s\n", err.message);
    return 1;
  }
  size_t nodes = rec->functions.items[0]->nodes.len;
  bb_compiler *c = bb_compiler_new(NULL);
  const bb_component_port tensor[] = {{"tensor", BB_TYPE_TENSOR_F32}},
                          element[] = {{"element", BB_TYPE_TENSOR_F32}};
  const bb_component_decl decls[] = {{sizeof(bb_component_decl), "Mlp", tensor, 1, NULL, 0},
                                     {sizeof(bb_component_decl), "Cpu", tensor, 1, NULL, 0},
                                     {sizeof(bb_component_decl), "FedAvg", element, 1, NULL, 0}};
  for (size_t i = 0; i < 3; i++) bb_compiler_declare_component(c, &decls[i], &err);
  bb_compiler_bind_model(c, "model", "Mlp", NULL, &err);
  bb_compiler_bind_backend(c, "compute", "Cpu", NULL, &err);
  bb_compiler_bind_aggregator(c, "aggregator", "FedAvg", NULL, &err);
  double compile[RUNS], codec[RUNS];
  for (int r = 0; r < RUNS; r++) {
    double t0 = now_ms();
    if (bb_compiler_compile(c, bytes, len, &out, &out_len, &err)) {
      fprintf(stderr, "bench_compiler: %s\n", err.message);
      return 1;
    }
    compile[r] = now_ms() - t0;
    bb_buffer_free(NULL, out);
    t0 = now_ms();
    bb_model *d;
    uint8_t *again;
    size_t again_len;
    if (bb_model_decode(bytes, len, NULL, NULL, &d, &err) || bb_model_encode(d, &again, &again_len, &err)) return 1;
    codec[r] = now_ms() - t0;
    bb_buffer_free(NULL, again);
    bb_model_free(d);
  }
  qsort(compile, RUNS, sizeof *compile, cmp);
  qsort(codec, RUNS, sizeof *codec, cmp);
  printf("compile a %zu-node module (%zu bytes in, %zu bytes out), %d runs\n", nodes, len, out_len, RUNS);
  printf("  %-34s min %8.2f ms  median %8.2f ms\n", "bb_compiler_compile", compile[0], compile[RUNS / 2]);
  printf("  %-34s min %8.2f ms  median %8.2f ms\n", "codec alone (decode + encode)", codec[0], codec[RUNS / 2]);
  printf("  compile / codec: %.2fx; %.0f nodes per ms; goal < 100 ms: %s\n", compile[RUNS / 2] / codec[RUNS / 2],
         (double)nodes / compile[RUNS / 2], compile[RUNS / 2] < 100.0 ? "met" : "NOT met");
  if (describe_artifact(c, bytes, len)) return 1;
  bb_compiler_free(c);
  bb_buffer_free(NULL, bytes);
  bb_model_free(rec);
  return 0;
}
