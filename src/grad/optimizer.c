/* Optimizers as ONNX graphs: SGD, momentum (heavy-ball or Nesterov), Adam and AdamW with
 * torch.optim's update rules, optional weight decay and global gradient-norm clipping.
 * Hyper-parameters and state are initializers of the graph, so an encoded optimizer is a
 * complete snapshot of it, and a step is one run: params and grads in, the next params and
 * the next state out. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bb/grad.h"
#include "util/arena.h"
#include "bb/common.h"
#include "util/mem.h"

bb_optimizer_config bb_optimizer_defaults(bb_optimizer_kind kind) {
  bb_optimizer_config c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.kind = kind;
  c.lr = kind == BB_OPTIMIZER_ADAM || kind == BB_OPTIMIZER_ADAMW ? 1e-3f : 1e-2f;
  c.momentum = 0.9f;
  c.beta1 = 0.9f;
  c.beta2 = 0.999f;
  c.eps = 1e-8f;
  c.weight_decay = kind == BB_OPTIMIZER_ADAMW ? 1e-2f : 0.0f;
  return c;
}

typedef struct ob {
  const bb_allocator *alloc;
  bb_model *m;
  bb_graph *g;
  int32_t dtype; /* of every parameter */
  uint64_t counter;
  int rc;
  bb_error *err;
} ob;

static int ob_oom(ob *o) {
  if (!o->rc) o->rc = bb_error_set(o->err, BB_ERR_NOMEM, "out of memory building the optimizer graph");
  return o->rc;
}

/* One node of op over the inputs (NULL-terminated), with a fresh output name (or `out`). */
static const char *node(ob *o, const char *out, const char *op, ...) {
  if (o->rc) return NULL;
  char name[48];
  snprintf(name, sizeof name, "opt/%s_%llu", op, (unsigned long long)++o->counter);
  bb_ir_node *n = bb_ir_node_new(o->m, op, NULL, name);
  if (!n || bb_strlist_append(o->m, &n->outputs, out ? out : name)) {
    ob_oom(o);
    return NULL;
  }
  va_list ap;
  va_start(ap, op);
  for (const char *in; (in = va_arg(ap, const char *));)
    if (bb_strlist_append(o->m, &n->inputs, in)) ob_oom(o);
  va_end(ap);
  if (o->rc || bb_nodelist_append(o->m, &o->g->nodes, n)) {
    ob_oom(o);
    return NULL;
  }
  return n->outputs.items[0];
}

/* An initializer holding zeros or a scalar. */
static const char *initializer(ob *o, const char *name, int32_t dtype, size_t rank, const int64_t *dims, double value) {
  if (o->rc) return NULL;
  bb_tensor_proto *t = bb_tensor_proto_new(o->m, name, dtype, rank, dims);
  int64_t numel = t ? bb_tensor_proto_numel(t) : -1;
  size_t size = bb_dtype_size(dtype);
  uint8_t *data = numel >= 0 ? bbi_mem_calloc(o->alloc, (size_t)numel + 1, size) : NULL;
  if (data && value != 0) { /* scalars only */
    if (dtype == BB_DTYPE_DOUBLE) memcpy(data, &value, sizeof value);
    else if (dtype == BB_DTYPE_INT64) *(int64_t *)(void *)data = (int64_t)value;
    else {
      float f = (float)value;
      memcpy(data, &f, sizeof f);
    }
  }
  int rc = !data || bb_tensor_proto_set_raw(o->m, t, data, (size_t)numel * size) || bb_tensorlist_append(o->m, &o->g->initializers, t);
  bbi_mem_free(o->alloc, data);
  if (rc) {
    ob_oom(o);
    return NULL;
  }
  return t->name;
}

static const char *scalar(ob *o, const char *name, double v) { return initializer(o, name, o->dtype, 0, NULL, v); }

/* A graph input or output typed like an initializer. */
static void declare(ob *o, bb_vilist *list, const char *name, const bb_tensor_proto *like) {
  if (o->rc) return;
  bb_type *t = bb_type_new_tensor(o->m, like->data_type, (int)like->n_dims, like->dims);
  if (!t || !bb_vilist_add(o->m, list, name, t)) ob_oom(o);
}

static const bb_tensor_proto *find_init(const bb_model *m, const char *name) {
  for (size_t i = 0; i < m->graph->initializers.len; i++)
    if (strcmp(m->graph->initializers.items[i]->name, name) == 0) return m->graph->initializers.items[i];
  return NULL;
}

/* fmt with its one %s replaced by s, in the model's arena (state and output names). */
static char *strf(ob *o, const char *fmt, const char *s) {
  size_t len = strlen(fmt) + strlen(s);
  char *out = o->rc ? NULL : bbi_arena_alloc(o->m->arena, len + 1);
  if (!out) {
    ob_oom(o);
    return NULL;
  }
  snprintf(out, len + 1, fmt, s);
  return out;
}

/* The names an optimizer graph exposes, in the order of its outputs. */
typedef struct names {
  const char **params, **grads, **next;
  const char **state, **state_next;
  size_t n_state;
} names;

static void add_state(names *nm, const char *init, const char *next) {
  nm->state[nm->n_state] = init;
  nm->state_next[nm->n_state++] = next;
}

/* The update of parameter i: next = p - lr * direction, the direction from g (already
 * clipped) by the kind's rule, with torch.optim's order of operations. */
static void update(ob *o, const bb_optimizer_config *c, size_t i, const bb_tensor_proto *like, const char *g,
                   const char *t_float, names *nm) {
  const char *p = nm->params[i], *name = like->name, *lr = "optimizer.lr", *one = "optimizer.one";
  const char *wd = c->weight_decay != 0 ? "optimizer.weight_decay" : NULL;
  bool decoupled = c->kind == BB_OPTIMIZER_ADAMW;
  if (wd && !decoupled) g = node(o, NULL, "Add", g, node(o, NULL, "Mul", p, wd, NULL), NULL); /* L2: g + wd * p */
  if (c->kind == BB_OPTIMIZER_SGD) {
    node(o, nm->next[i], "Sub", p, node(o, NULL, "Mul", g, lr, NULL), NULL);
    return;
  }
  if (c->kind == BB_OPTIMIZER_MOMENTUM) { /* buf = mu * buf + g; Nesterov steps along g + mu * buf */
    const char *mu = "optimizer.momentum";
    const char *buf = initializer(o, strf(o, "%s.momentum", name), like->data_type, like->n_dims, like->dims, 0);
    const char *buf_next =
        node(o, strf(o, "%s.momentum.next", name), "Add", node(o, NULL, "Mul", buf, mu, NULL), g, NULL);
    const char *dir = c->nesterov ? node(o, NULL, "Add", g, node(o, NULL, "Mul", buf_next, mu, NULL), NULL) : buf_next;
    node(o, nm->next[i], "Sub", p, node(o, NULL, "Mul", dir, lr, NULL), NULL);
    add_state(nm, buf, buf_next);
    return;
  }
  /* Adam: m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g², and
   * p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps); AdamW first scales p by 1 - lr wd */
  const char *b1 = "optimizer.beta1", *b2 = "optimizer.beta2", *eps = "optimizer.eps";
  const char *m = initializer(o, strf(o, "%s.exp_avg", name), like->data_type, like->n_dims, like->dims, 0);
  const char *v = initializer(o, strf(o, "%s.exp_avg_sq", name), like->data_type, like->n_dims, like->dims, 0);
  if (decoupled && wd) p = node(o, NULL, "Mul", p, node(o, NULL, "Sub", one, node(o, NULL, "Mul", lr, wd, NULL), NULL), NULL);
  const char *m_next = node(o, strf(o, "%s.exp_avg.next", name), "Add", node(o, NULL, "Mul", m, b1, NULL),
                            node(o, NULL, "Mul", g, node(o, NULL, "Sub", one, b1, NULL), NULL), NULL);
  const char *g2 = node(o, NULL, "Mul", g, g, NULL);
  const char *v_next = node(o, strf(o, "%s.exp_avg_sq.next", name), "Add", node(o, NULL, "Mul", v, b2, NULL),
                            node(o, NULL, "Mul", g2, node(o, NULL, "Sub", one, b2, NULL), NULL), NULL);
  const char *bc1 = node(o, NULL, "Sub", one, node(o, NULL, "Pow", b1, t_float, NULL), NULL);
  const char *bc2 = node(o, NULL, "Sub", one, node(o, NULL, "Pow", b2, t_float, NULL), NULL);
  const char *denom =
      node(o, NULL, "Add", node(o, NULL, "Div", node(o, NULL, "Sqrt", v_next, NULL), node(o, NULL, "Sqrt", bc2, NULL), NULL), eps,
           NULL);
  const char *step = node(o, NULL, "Mul", node(o, NULL, "Div", lr, bc1, NULL), node(o, NULL, "Div", m_next, denom, NULL), NULL);
  node(o, nm->next[i], "Sub", p, step, NULL);
  add_state(nm, m, m_next);
  add_state(nm, v, v_next);
}

/* A session runs nodes of at most this many inputs (cpu/session.c). */
#define SUM_INPUTS 64

/* The sum of terms[0..n): Sums of at most SUM_INPUTS inputs, each taking the one before as
 * its first, so the terms are added in their order as by one Sum. */
static const char *sum_of(ob *o, const char **terms, size_t n) {
  const char *total = NULL;
  for (size_t at = 0; at < n && !o->rc;) {
    const char *sum = node(o, NULL, "Sum", total ? total : terms[at++], NULL);
    bb_ir_node *s = o->rc ? NULL : o->g->nodes.items[o->g->nodes.len - 1];
    for (size_t k = 1; s && k < SUM_INPUTS && at < n; k++)
      if (bb_strlist_append(o->m, &s->inputs, terms[at++])) ob_oom(o);
    total = sum;
  }
  return total;
}

/* Scales every gradient by min(1, max_norm / (‖g‖₂ + 1e-6)), ‖g‖₂ over all of them. */
static void clip(ob *o, const char **grads, size_t n) {
  const char **squares = o->rc ? NULL : bbi_arena_alloc(o->m->arena, (n + 1) * sizeof *squares);
  if (!squares) {
    ob_oom(o);
    return;
  }
  for (size_t i = 0; i < n && !o->rc; i++) {
    squares[i] = node(o, NULL, "ReduceSumSquare", grads[i], NULL);
    if (squares[i] && !bb_attr_set_int(o->m, &o->g->nodes.items[o->g->nodes.len - 1]->attrs, "keepdims", 0)) ob_oom(o);
  }
  const char *norm = node(o, NULL, "Sqrt", sum_of(o, squares, n), NULL);
  const char *coef = node(o, NULL, "Min", "optimizer.one",
                          node(o, NULL, "Div", "optimizer.max_grad_norm", node(o, NULL, "Add", norm, "optimizer.norm_eps", NULL), NULL),
                          NULL);
  for (size_t i = 0; i < n; i++) grads[i] = node(o, NULL, "Mul", grads[i], coef, NULL);
}

static int build(ob *o, const bb_grad_graph *tg, const bb_optimizer_config *c, bb_grad_optimizer *out) {
  size_t n = tg->n_params;
  names nm;
  nm.params = bbi_arena_alloc(o->m->arena, (n + 1) * sizeof *nm.params);
  nm.grads = bbi_arena_alloc(o->m->arena, (n + 1) * sizeof *nm.grads);
  nm.next = bbi_arena_alloc(o->m->arena, (n + 1) * sizeof *nm.next);
  nm.state = bbi_arena_alloc(o->m->arena, (2 * n + 2) * sizeof *nm.state);
  nm.state_next = bbi_arena_alloc(o->m->arena, (2 * n + 2) * sizeof *nm.state_next);
  const char **clipped = bbi_arena_alloc(o->m->arena, (n + 1) * sizeof *clipped);
  nm.n_state = 0;
  if (!nm.params || !nm.grads || !nm.next || !nm.state || !nm.state_next || !clipped) return ob_oom(o);
  const bb_tensor_proto **likes = bbi_arena_alloc(o->m->arena, (n + 1) * sizeof *likes);
  if (!likes) return ob_oom(o);
  for (size_t i = 0; i < n; i++) {
    likes[i] = find_init(tg->model, tg->params[i]);
    if (!likes[i]) return o->rc = bb_error_set(o->err, BB_ERR_NOT_FOUND, "parameter %s is not an initializer of the training graph", tg->params[i]);
    if (i == 0) o->dtype = likes[i]->data_type;
    if (likes[i]->data_type != o->dtype || (o->dtype != BB_DTYPE_FLOAT && o->dtype != BB_DTYPE_DOUBLE))
      return o->rc = bb_error_set(o->err, BB_ERR_UNSUPPORTED,
                                  "parameter %s: an optimizer graph updates parameters of one type, float or double", tg->params[i]);
    nm.params[i] = bb_model_strdup(o->m, tg->params[i]);
    nm.grads[i] = bb_model_strdup(o->m, tg->grads[i]);
    nm.next[i] = strf(o, "%s.next", tg->params[i]);
    clipped[i] = nm.grads[i];
    declare(o, &o->g->inputs, nm.params[i], likes[i]);
    declare(o, &o->g->inputs, nm.grads[i], likes[i]);
  }
  if (c->lr <= 0 || c->weight_decay < 0 || c->max_grad_norm < 0)
    return o->rc = bb_error_set(o->err, BB_ERR_INVALID_ARGUMENT, "lr must be positive, weight_decay and max_grad_norm not negative");
  scalar(o, "optimizer.lr", c->lr);
  scalar(o, "optimizer.one", 1.0);
  if (c->weight_decay != 0) scalar(o, "optimizer.weight_decay", c->weight_decay);
  if (c->kind == BB_OPTIMIZER_MOMENTUM) scalar(o, "optimizer.momentum", c->momentum);
  const char *t_float = NULL, *step = NULL, *step_next = NULL;
  if (c->kind == BB_OPTIMIZER_ADAM || c->kind == BB_OPTIMIZER_ADAMW) {
    scalar(o, "optimizer.beta1", c->beta1);
    scalar(o, "optimizer.beta2", c->beta2);
    scalar(o, "optimizer.eps", c->eps);
    step = initializer(o, "optimizer.step", BB_DTYPE_INT64, 0, NULL, 0);
    step_next = node(o, "optimizer.step.next", "Add", step, initializer(o, "optimizer.step_one", BB_DTYPE_INT64, 0, NULL, 1), NULL);
    t_float = node(o, NULL, "Cast", step_next, NULL);
    if (!o->rc && !bb_attr_set_int(o->m, &o->g->nodes.items[o->g->nodes.len - 1]->attrs, "to", o->dtype)) ob_oom(o);
  }
  if (c->max_grad_norm > 0) {
    scalar(o, "optimizer.max_grad_norm", c->max_grad_norm);
    scalar(o, "optimizer.norm_eps", 1e-6);
    clip(o, clipped, n);
  }
  for (size_t i = 0; i < n && !o->rc; i++) update(o, c, i, likes[i], clipped[i], t_float, &nm);
  if (step) add_state(&nm, step, step_next);
  for (size_t i = 0; i < n; i++) declare(o, &o->g->outputs, nm.next[i], likes[i]);
  for (size_t i = 0; i < nm.n_state && !o->rc; i++) {
    const bb_tensor_proto *like = find_init(o->m, nm.state[i]);
    declare(o, &o->g->outputs, nm.state_next[i], like);
  }
  if (o->rc) return o->rc;
  out->n_params = n;
  out->params = nm.params, out->grads = nm.grads, out->params_next = nm.next;
  out->n_state = nm.n_state;
  out->state = nm.state, out->state_next = nm.state_next;
  return 0;
}

int bb_grad_optimizer_build(const bb_grad_graph *graph, const bb_optimizer_config *config, bb_grad_optimizer **out,
                            bb_error *err) {
  *out = NULL;
  if (!graph || !config) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "an optimizer needs a training graph and a config");
  if (config->struct_size < sizeof config->struct_size || config->struct_size > sizeof(bb_optimizer_config))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "optimizer config: struct_size %zu (this library knows %zu)",
                        config->struct_size, sizeof(bb_optimizer_config));
  /* fields an older caller's struct does not cover keep their defaults */
  bb_optimizer_config full = bb_optimizer_defaults(config->kind);
  memcpy(&full, config, config->struct_size);
  full.struct_size = sizeof full;
  config = &full;
  if (config->kind > BB_OPTIMIZER_ADAMW) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "unknown optimizer kind %d", (int)config->kind);
  const bb_allocator *alloc = graph->alloc ? graph->alloc : bb_default_allocator();
  ob o;
  memset(&o, 0, sizeof o);
  o.err = err;
  o.alloc = alloc;
  o.dtype = BB_DTYPE_FLOAT;
  bb_grad_optimizer *opt = bbi_mem_calloc(alloc, 1, sizeof *opt);
  o.m = bb_model_new(alloc);
  if (!opt || !o.m || !(o.g = bb_graph_new(o.m, "optimizer"))) ob_oom(&o);
  else {
    o.m->graph = o.g;
    o.m->has_ir_version = true;
    o.m->ir_version = BB_ONNX_IR_VERSION;
    if (bb_model_set_string(o.m, &o.m->producer_name, "bytesandbrains") ||
        bb_opset_set(o.m, &o.m->opsets, "", BB_ONNX_OPSET_VERSION))
      ob_oom(&o);
    else
      build(&o, graph, config, opt);
  }
  if (o.rc) {
    bb_model_free(o.m);
    bbi_mem_free(alloc, opt);
    return o.rc;
  }
  opt->model = o.m;
  opt->alloc = alloc;
  *out = opt;
  return 0;
}

void bb_grad_optimizer_free(bb_grad_optimizer *opt) {
  if (!opt) return;
  bb_model_free(opt->model);
  bbi_mem_free(opt->alloc, opt);
}
