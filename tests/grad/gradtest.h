/* Shared by the gradient tests: loading models and reference tensors, running a training
 * graph once, and comparing tensors with a tolerance relative to their scale. */
#ifndef BB_TESTS_GRAD_GRADTEST_H
#define BB_TESTS_GRAD_GRADTEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/cpu.h"
#include "bb/grad.h"
#include "harness.h"

static inline bb_model *gt_load(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
  size_t got = buf && n > 0 ? fread(buf, 1, (size_t)n, f) : 0;
  fclose(f);
  bb_model *m = NULL;
  bb_error err;
  if (buf && got == (size_t)n && bb_model_decode(buf, got, NULL, NULL, &m, &err))
    fprintf(stderr, "%s: %s\n", path, err.message);
  free(buf);
  return m;
}

/* A case of tests/data/grad (torch_make_grad_models.py): DIR/NAME.onnx and its reference
 * NAME.ref.onnx, both loaded (true), or neither (false, with a failed check). */
static inline bool gt_load_case(const char *dir, const char *name, bb_model **model, bb_model **ref) {
  char path[1024];
  snprintf(path, sizeof path, "%s%s.onnx", dir, name);
  *model = gt_load(path);
  snprintf(path, sizeof path, "%s%s.ref.onnx", dir, name);
  *ref = gt_load(path);
  CHECK_MSG(*model && *ref, "%s: cannot load the model or its reference", name);
  if (*model && *ref) return true;
  bb_model_free(*model);
  bb_model_free(*ref);
  *model = *ref = NULL;
  return false;
}

/* An initializer of m as a tensor (new reference), or NULL. */
static inline bb_tensor *gt_tensor(const bb_model *m, const char *name) {
  for (size_t i = 0; i < m->graph->initializers.len; i++) {
    const bb_tensor_proto *p = m->graph->initializers.items[i];
    if (p->name && strcmp(p->name, name) == 0) {
      bb_tensor *t = NULL;
      bb_error err;
      return bb_tensor_from_proto(p, NULL, &t, &err) ? NULL : t;
    }
  }
  return NULL;
}

static inline double gt_value(const bb_tensor *t, int64_t i) {
  return t->dtype == BB_DTYPE_DOUBLE ? ((const double *)bb_tensor_data(t))[i] : ((const float *)bb_tensor_data(t))[i];
}

/* max |got - want| / max(max |want|, floor): the error relative to the tensor's scale. */
static inline double gt_rel_error(const bb_tensor *got, const bb_tensor *want, double floor) {
  if (!got || !want || got->numel != want->numel) return INFINITY;
  double diff = 0, scale = floor;
  for (int64_t i = 0; i < want->numel; i++) {
    double g = gt_value(got, i), w = gt_value(want, i);
    if (!(fabs(g - w) <= diff)) diff = fabs(g - w); /* NaN counts as infinitely wrong */
    if (fabs(w) > scale) scale = fabs(w);
  }
  return diff != diff ? INFINITY : diff / scale;
}

/* Runs the training graph once on named inputs (plus seed 0 when it has one); out gets
 * every graph output (release them with gt_release). */
static inline int gt_run(const bb_grad_graph *g, const char **names, bb_tensor **inputs, size_t n, bb_tensor ***out,
                         size_t *n_out, bb_error *err) {
  bb_cpu_session *s;
  int rc = bb_cpu_session_new(g->model, NULL, &s, err);
  if (rc) return rc;
  bb_tensor *seed = NULL;
  if (g->seed) {
    seed = bb_tensor_new_zeros(NULL, BB_DTYPE_INT64, 0, NULL);
    names[n] = g->seed;
    inputs[n++] = seed;
  }
  *n_out = bb_cpu_session_output_count(s);
  *out = calloc(*n_out + 1, sizeof **out);
  rc = bb_cpu_session_run(s, names, inputs, n, *out, err);
  bb_tensor_release(seed);
  bb_cpu_session_free(s);
  return rc;
}

static inline void gt_release(bb_tensor **ts, size_t n) {
  for (size_t i = 0; i < n; i++) bb_tensor_release(ts[i]);
  free(ts);
}

/* The index of a graph output by name, or -1. */
static inline long gt_output(const bb_model *m, const char *name) {
  for (size_t i = 0; i < m->graph->outputs.len; i++)
    if (strcmp(m->graph->outputs.items[i]->name, name) == 0) return (long)i;
  return -1;
}

/* A key's number in a reference's "key=value key=value" spec, or dflt. */
static inline double gt_spec_value(const char *spec, const char *key, double dflt) {
  char pat[64];
  snprintf(pat, sizeof pat, "%s=", key);
  for (const char *p = spec; (p = strstr(p, pat)); p++)
    if (p == spec || p[-1] == ' ') return atof(p + strlen(pat));
  return dflt;
}

/* The optimizer a reference's "opt:NAME" spec describes (torch_make_grad_models.py). */
static inline bb_optimizer_config gt_optimizer_config(const char *spec) {
  bb_optimizer_kind kind = strstr(spec, "kind=sgd")        ? BB_OPTIMIZER_SGD
                           : strstr(spec, "kind=momentum") ? BB_OPTIMIZER_MOMENTUM
                           : strstr(spec, "kind=adamw")    ? BB_OPTIMIZER_ADAMW
                                                           : BB_OPTIMIZER_ADAM;
  bb_optimizer_config c = bb_optimizer_defaults(kind);
  c.lr = (float)gt_spec_value(spec, "lr", c.lr);
  c.momentum = (float)gt_spec_value(spec, "momentum", c.momentum);
  c.nesterov = gt_spec_value(spec, "nesterov", 0) != 0;
  c.beta1 = (float)gt_spec_value(spec, "beta1", c.beta1);
  c.beta2 = (float)gt_spec_value(spec, "beta2", c.beta2);
  c.eps = (float)gt_spec_value(spec, "eps", c.eps);
  c.weight_decay = (float)gt_spec_value(spec, "weight_decay", 0);
  c.max_grad_norm = (float)gt_spec_value(spec, "max_grad_norm", 0);
  return c;
}

/* Writes m to dir/<name><suffix> (nothing when dir is NULL): the graphs onnx.checker reads. */
static inline void gt_save(const char *dir, const char *name, const char *suffix, const bb_model *m) {
  if (!dir) return;
  char path[1024];
  snprintf(path, sizeof path, "%s/%s%s", dir, name, suffix);
  uint8_t *bytes;
  size_t len;
  bb_error err;
  FILE *f = fopen(path, "wb");
  CHECK_MSG(f && !bb_model_encode(m, &bytes, &len, &err), "cannot write %s", path);
  if (!f) return;
  fwrite(bytes, 1, len, f);
  fclose(f);
  bb_buffer_free(NULL, bytes);
}

#endif
