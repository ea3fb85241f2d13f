/* A CpuMlp's parameters as an ONNX graph: Mul(scale) → Gemm → Relu → … → Gemm → Softmax. */
#include "export_mlp.h"

#include <stdio.h>
#include <string.h>

#include "bb/ir.h"
#include "bb/common.h"

static bb_tensor_proto *initializer(bb_model *m, const char *name, const float *data, size_t n_dims,
                                    const int64_t *dims, size_t count) {
  bb_tensor_proto *t = bb_tensor_proto_new(m, name, BB_DTYPE_FLOAT, n_dims, dims);
  if (!t || bb_tensor_proto_set_raw(m, t, data, count * sizeof(float)) ||
      bb_tensorlist_append(m, &m->graph->initializers, t))
    return NULL;
  return t;
}

static bb_ir_node *node(bb_model *m, const char *op, const char *const *in, size_t n_in, const char *out) {
  bb_ir_node *n = bb_ir_node_new(m, op, "", NULL);
  if (!n) return NULL;
  for (size_t i = 0; i < n_in; i++)
    if (bb_strlist_append(m, &n->inputs, in[i])) return NULL;
  if (bb_strlist_append(m, &n->outputs, out) || bb_nodelist_append(m, &m->graph->nodes, n)) return NULL;
  return n;
}

static bb_type *row_type(bb_model *m, int64_t width) {
  int64_t dims[2] = {-1, width};
  bb_type *t = bb_type_new_tensor(m, BB_DTYPE_FLOAT, 2, dims);
  if (t && t->shape && t->shape->rank == 2) {
    t->shape->dims[0].kind = BB_DIM_PARAM;
    t->shape->dims[0].param = "N";
  }
  return t;
}

int bb_export_mlp(const float *params, size_t n_params, const size_t *sizes, size_t n_sizes, float input_scale,
                  const char *path, bb_error *err) {
  size_t need = 0;
  for (size_t l = 0; l + 1 < n_sizes; l++) need += sizes[l + 1] * (sizes[l] + 1);
  if (n_sizes < 2 || need != n_params)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "export: %zu parameters do not fit the layer sizes (%zu)",
                        n_params, need);
  bb_model *m = bb_model_new(NULL);
  if (!m) return bb_error_set(err, BB_ERR_NOMEM, "export: out of memory");
  int rc = BB_ERR_NOMEM;
  m->has_ir_version = true;
  m->ir_version = BB_ONNX_IR_VERSION;
  m->producer_name = "bytesandbrains";
  m->graph = bb_graph_new(m, "digits_mlp");
  if (!m->graph || bb_opset_set(m, &m->opsets, "", BB_ONNX_OPSET_VERSION)) goto done;
  if (!bb_vilist_add(m, &m->graph->inputs, "pixels", row_type(m, (int64_t)sizes[0])) ||
      !bb_vilist_add(m, &m->graph->outputs, "probabilities", row_type(m, (int64_t)sizes[n_sizes - 1])))
    goto done;
  int64_t one = 1;
  if (!initializer(m, "input_scale", &input_scale, 1, &one, 1)) goto done;
  const char *mul_in[] = {"pixels", "input_scale"};
  if (!node(m, "Mul", mul_in, 2, "x0")) goto done;
  const float *p = params;
  char x[32], w[32], b[32], y[32], a[32];
  snprintf(x, sizeof x, "x0");
  for (size_t l = 0; l + 1 < n_sizes; l++) {
    size_t in = sizes[l], out = sizes[l + 1];
    int64_t wd[2] = {(int64_t)out, (int64_t)in}, bd[1] = {(int64_t)out};
    snprintf(w, sizeof w, "W%zu", l);
    snprintf(b, sizeof b, "b%zu", l);
    snprintf(y, sizeof y, "z%zu", l);
    if (!initializer(m, w, p, 2, wd, out * in) || !initializer(m, b, p + out * in, 1, bd, out)) goto done;
    p += out * (in + 1);
    const char *gemm_in[] = {x, w, b};
    bb_ir_node *g = node(m, "Gemm", gemm_in, 3, y);
    if (!g || !bb_attr_set_int(m, &g->attrs, "transB", 1)) goto done;
    bool last = l + 2 == n_sizes;
    snprintf(a, sizeof a, "h%zu", l);
    const char *act_in[] = {y};
    bb_ir_node *act = node(m, last ? "Softmax" : "Relu", act_in, 1, last ? "probabilities" : a);
    if (!act || (last && !bb_attr_set_int(m, &act->attrs, "axis", 1))) goto done;
    snprintf(x, sizeof x, "%s", a);
  }
  uint8_t *bytes;
  size_t len;
  if ((rc = bb_model_encode(m, &bytes, &len, err))) goto done;
  FILE *f = fopen(path, "wb");
  rc = !f || fwrite(bytes, 1, len, f) != len ? bb_error_set(err, BB_ERR_IO, "export: cannot write %s", path) : 0;
  if (f && fclose(f) && !rc) rc = bb_error_set(err, BB_ERR_IO, "export: cannot write %s", path);
  bb_buffer_free(NULL, bytes);
  bb_model_free(m);
  return rc;
done:
  bb_model_free(m);
  return rc == BB_ERR_NOMEM ? bb_error_set(err, BB_ERR_NOMEM, "export: out of memory") : rc;
}
