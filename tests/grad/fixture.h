/* Small graphs for the gradient tests, written with the IR API: float64 parameters with
 * random values, data inputs (dims may be symbols), nodes from comma-separated names, and
 * a loss that weighs every element of a value differently and is odd in it, so a
 * gradient that lands on the wrong element or with the wrong sign shows. */
#ifndef BB_TESTS_GRAD_FIXTURE_H
#define BB_TESTS_GRAD_FIXTURE_H

#include "cpu/optest.h"
#include "gradtest.h"

#define FX_MAX 16

typedef struct fx {
  bb_model *m;
  const char *names[FX_MAX];
  bb_tensor *values[FX_MAX];
  size_t n_inputs;
  const char *params[FX_MAX];
  size_t n_params;
} fx;

static inline void fx_init(fx *f, int64_t opset) {
  memset(f, 0, sizeof *f);
  f->m = bb_model_new(NULL);
  f->m->graph = bb_graph_new(f->m, "fixture");
  f->m->has_ir_version = true;
  f->m->ir_version = BB_ONNX_IR_VERSION;
  bb_opset_set(f->m, &f->m->opsets, "", opset);
}

static inline bb_tensor *fx_random(int32_t dtype, int rank, const int64_t *dims, double lo, double hi) {
  bb_tensor *t = bb_tensor_new_empty(NULL, dtype, rank, dims);
  for (int64_t i = 0; i < t->numel; i++) {
    double v = rng_real(lo, hi);
    if (dtype == BB_DTYPE_DOUBLE) ((double *)bb_tensor_data(t))[i] = v;
    else ((float *)bb_tensor_data(t))[i] = (float)v;
  }
  return t;
}

/* A float64 parameter with values in [-1, 1). */
static inline void fx_param(fx *f, const char *name, int rank, const int64_t *dims) {
  bb_tensor *t = fx_random(BB_DTYPE_DOUBLE, rank, dims, -1, 1);
  bb_tensor_proto *p;
  bb_error err;
  bb_tensor_to_proto(f->m, t, name, &p, &err);
  bb_tensorlist_append(f->m, &f->m->graph->initializers, p);
  bb_tensor_release(t);
  f->params[f->n_params++] = bb_model_strdup(f->m, name);
}

/* A data input fed `value` (the fixture keeps the reference); symbols[d] non-NULL declares
 * dim d as that dim_param. */
static inline void fx_input(fx *f, const char *name, bb_tensor *value, const char *const *symbols) {
  bb_type *t = bb_type_new_tensor(f->m, value->dtype, 0, NULL);
  for (int d = 0; d < value->rank; d++) bb_type_add_dim(f->m, t, symbols && symbols[d] ? -1 : value->dims[d], symbols ? symbols[d] : NULL);
  bb_vilist_add(f->m, &f->m->graph->inputs, name, t);
  f->names[f->n_inputs] = bb_model_strdup(f->m, name);
  f->values[f->n_inputs++] = value;
}

/* Appends a node; inputs and outputs are comma-separated (an empty item is omitted). */
static inline bb_ir_node *fx_node(fx *f, const char *op, const char *domain, const char *ins, const char *outs) {
  char name[128]; /* named after its first output */
  snprintf(name, sizeof name, "%.*s", (int)strcspn(outs, ","), outs);
  bb_ir_node *n = bb_ir_node_new(f->m, op, domain, name);
  char buf[512];
  for (int pass = 0; pass < 2; pass++) {
    snprintf(buf, sizeof buf, "%s", pass ? outs : ins);
    if (!*buf) continue;
    for (char *p = buf;;) {
      char *comma = strchr(p, ',');
      if (comma) *comma = '\0';
      bb_strlist_append(f->m, pass ? &n->outputs : &n->inputs, p);
      if (!comma) break;
      p = comma + 1;
    }
  }
  bb_nodelist_append(f->m, &f->m->graph->nodes, n);
  return n;
}

static inline void fx_ints(fx *f, const char *name, const int64_t *v, size_t n) {
  bb_tensor *t = bb_tensor_new_empty(NULL, BB_DTYPE_INT64, 1, (int64_t[]){(int64_t)n});
  memcpy(bb_tensor_data(t), v, n * sizeof *v);
  bb_tensor_proto *p;
  bb_error err;
  bb_tensor_to_proto(f->m, t, name, &p, &err);
  bb_ir_node *c = fx_node(f, "Constant", NULL, "", name);
  bb_attr_set_tensor(f->m, &c->attrs, "value", p);
  bb_tensor_release(t);
}

static inline void fx_scalar(fx *f, const char *name, int32_t dtype, double v) {
  bb_tensor *t = bb_tensor_new_empty(NULL, dtype, 0, NULL);
  if (dtype == BB_DTYPE_DOUBLE) *(double *)bb_tensor_data(t) = v;
  else if (dtype == BB_DTYPE_FLOAT) *(float *)bb_tensor_data(t) = (float)v;
  else if (dtype == BB_DTYPE_BOOL) *(uint8_t *)bb_tensor_data(t) = v != 0;
  else *(int64_t *)bb_tensor_data(t) = (int64_t)v;
  bb_tensor_proto *p;
  bb_error err;
  bb_tensor_to_proto(f->m, t, name, &p, &err);
  bb_ir_node *c = fx_node(f, "Constant", NULL, "", name);
  bb_attr_set_tensor(f->m, &c->attrs, "value", p);
  bb_tensor_release(t);
}

/* loss = Σ w_i (y_i³ + y_i), w_i = (i + 1) / numel: every element weighed differently. */
static inline void fx_loss(fx *f, const char *y) {
  fx_node(f, "Size", NULL, y, "fx.size");
  fx_scalar(f, "fx.one", BB_DTYPE_INT64, 1);
  fx_node(f, "Add", NULL, "fx.size,fx.one", "fx.end");
  fx_node(f, "Range", NULL, "fx.one,fx.end,fx.one", "fx.range");
  bb_ir_node *c = fx_node(f, "Cast", NULL, "fx.range", "fx.rangef");
  bb_attr_set_int(f->m, &c->attrs, "to", BB_DTYPE_DOUBLE);
  c = fx_node(f, "Cast", NULL, "fx.size", "fx.sizef");
  bb_attr_set_int(f->m, &c->attrs, "to", BB_DTYPE_DOUBLE);
  fx_node(f, "Shape", NULL, y, "fx.shape");
  fx_node(f, "Reshape", NULL, "fx.rangef,fx.shape", "fx.w0");
  fx_node(f, "Div", NULL, "fx.w0,fx.sizef", "fx.w");
  char ins[256];
  snprintf(ins, sizeof ins, "%s,%s", y, y);
  fx_node(f, "Mul", NULL, ins, "fx.y2");
  snprintf(ins, sizeof ins, "fx.y2,%s", y);
  fx_node(f, "Mul", NULL, ins, "fx.y3");
  snprintf(ins, sizeof ins, "fx.y3,%s", y);
  fx_node(f, "Add", NULL, ins, "fx.odd");
  fx_node(f, "Mul", NULL, "fx.odd,fx.w", "fx.weighted");
  bb_ir_node *r = fx_node(f, "ReduceSum", NULL, "fx.weighted", "loss");
  bb_attr_set_int(f->m, &r->attrs, "keepdims", 0);
  bb_vilist_add(f->m, &f->m->graph->outputs, "loss", bb_type_new_tensor(f->m, BB_DTYPE_DOUBLE, 0, NULL));
}

static inline void fx_free(fx *f) {
  for (size_t i = 0; i < f->n_inputs; i++) bb_tensor_release(f->values[i]);
  bb_model_free(f->m);
}

/* How many nodes of op_type the graph has. */
static inline int fx_count(const bb_model *m, const char *op_type) {
  int n = 0;
  for (size_t i = 0; i < m->graph->nodes.len; i++) n += strcmp(m->graph->nodes.items[i]->op_type, op_type) == 0;
  return n;
}

#endif
