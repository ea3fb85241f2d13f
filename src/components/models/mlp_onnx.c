/* A bbi_mlp as a standalone ONNX model: the graph its forward pass computes, with the
 * parameters as initializers, so onnxruntime (or `bb run`) gives what bbi_mlp_forward
 * gives. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "bb/artifact.h"
#include "bb/ir.h"
#include "components/models/mlp.h"
#include "bb/common.h"

static bool initializer(bb_model *m, const char *name, const float *data, size_t n_dims, const int64_t *dims,
                        size_t count) {
  bb_tensor_proto *t = bb_tensor_proto_new(m, name, BB_DTYPE_FLOAT, n_dims, dims);
  return t && !bb_tensor_proto_set_raw(m, t, data, count * sizeof(float)) &&
         !bb_tensorlist_append(m, &m->graph->initializers, t);
}

static bb_ir_node *node(bb_model *m, const char *op, const char *a, const char *b, const char *c, const char *out) {
  bb_ir_node *n = bb_ir_node_new(m, op, "", NULL);
  const char *in[3] = {a, b, c};
  if (!n) return NULL;
  for (size_t i = 0; i < 3 && in[i]; i++)
    if (bb_strlist_append(m, &n->inputs, in[i])) return NULL;
  if (bb_strlist_append(m, &n->outputs, out) || bb_nodelist_append(m, &m->graph->nodes, n)) return NULL;
  return n;
}

/* float [N, width] with N symbolic. */
static bb_type *rows(bb_model *m, size_t width) {
  int64_t dims[2] = {-1, (int64_t)width};
  bb_type *t = bb_type_new_tensor(m, BB_DTYPE_FLOAT, 2, dims);
  if (t && t->shape && t->shape->rank == 2) {
    t->shape->dims[0].kind = BB_DIM_PARAM;
    t->shape->dims[0].param = "N";
  }
  return t;
}

static bool any_not(const float *v, size_t n, float value) {
  for (size_t i = 0; v && i < n; i++)
    if (v[i] != value) return true;
  return false;
}

/* The graph; false when out of memory. */
static bool build(bb_model *m, const bbi_mlp_shape *sh) {
  static const char *const ACTIVATIONS[] = {"Relu", "Tanh", "Sigmoid", NULL}; /* by bbi_mlp_activation */
  const size_t in = sh->widths[0], out = sh->widths[sh->n_layers];
  const bool xent = sh->loss == BBI_MLP_SOFTMAX_CROSS_ENTROPY;
  const char *result = xent ? "probabilities" : "y";
  m->has_ir_version = true;
  m->ir_version = BB_ONNX_IR_VERSION;
  m->producer_name = "bytesandbrains";
  if (!(m->graph = bb_graph_new(m, "CpuMlp")) || bb_opset_set(m, &m->opsets, "", BB_ONNX_OPSET_VERSION) ||
      !bb_vilist_add(m, &m->graph->inputs, "x", rows(m, in)) || !bb_vilist_add(m, &m->graph->outputs, result, rows(m, out)))
    return false;
  const int64_t width = (int64_t)in;
  char x[32] = "x";
  if (any_not(sh->input_scale, in, 1.0f)) {
    if (!initializer(m, "input_scale", sh->input_scale, 1, &width, in) || !node(m, "Mul", x, "input_scale", NULL, "scaled"))
      return false;
    snprintf(x, sizeof x, "scaled");
  }
  if (any_not(sh->input_shift, in, 0.0f)) {
    if (!initializer(m, "input_shift", sh->input_shift, 1, &width, in) || !node(m, "Add", x, "input_shift", NULL, "shifted"))
      return false;
    snprintf(x, sizeof x, "shifted");
  }
  const float *p = sh->params;
  for (size_t l = 0; l < sh->n_layers; l++) {
    const size_t a = sh->widths[l], b = sh->widths[l + 1];
    const bool last = l + 1 == sh->n_layers;
    const char *act = last ? NULL : ACTIVATIONS[sh->activation];
    char w[32], bias[32], z[32], h[32];
    snprintf(w, sizeof w, "W%zu", l);
    snprintf(bias, sizeof bias, "b%zu", l);
    if (last && !xent) snprintf(z, sizeof z, "%s", result);
    else snprintf(z, sizeof z, "z%zu", l);
    int64_t wd[2] = {(int64_t)b, (int64_t)a}, bd[1] = {(int64_t)b};
    if (!initializer(m, w, p, 2, wd, a * b) || !initializer(m, bias, p + a * b, 1, bd, b)) return false;
    p += b * (a + 1);
    bb_ir_node *gemm = node(m, "Gemm", x, w, bias, z);
    if (!gemm || !bb_attr_set_int(m, &gemm->attrs, "transB", 1)) return false;
    snprintf(x, sizeof x, "%s", z);
    if (act) {
      snprintf(h, sizeof h, "h%zu", l);
      if (!node(m, act, x, NULL, NULL, h)) return false;
      snprintf(x, sizeof x, "%s", h);
    }
  }
  if (!xent) return true;
  bb_ir_node *softmax = node(m, "Softmax", x, NULL, NULL, result);
  return softmax && bb_attr_set_int(m, &softmax->attrs, "axis", 1);
}

int bbi_mlp_export_onnx(const bbi_mlp *mlp, uint8_t **out, size_t *len, bb_error *err) {
  bbi_mlp_shape sh;
  bbi_mlp_describe(mlp, &sh);
  bb_model *m = bb_model_new(NULL);
  int rc = m && build(m, &sh) ? bb_model_encode(m, out, len, err) : bb_error_set(err, BB_ERR_NOMEM, "mlp: export: out of memory");
  bb_model_free(m);
  return rc;
}
