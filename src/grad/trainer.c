/* Training steps: the training graph and the optimizer graph, each planned once as a CPU
 * session, with the parameters, running statistics and optimizer state held as tensors
 * between steps and handed to the sessions in place of their initializers. A step whose
 * loss, gradients or new parameters are not all finite changes nothing. A training graph
 * whose gradients come in from outside (BB_GRAD_LOSS_UPSTREAM) runs as two sessions, its
 * forward and backward phases (phases.h): a step is a forward call, then a backward call
 * with the upstream gradients. */
#include <math.h>
#include <string.h>

#include "bb/cpu.h"
#include "bb/grad.h"
#include "cpu/run_memory.h"
#include "grad/phases.h"
#include "tensor/kernels/kernels.h"
#include "bb/common.h"
#include "util/mem.h"

/* A data input of the training graph with what it declares (dims[d] < 0: any). */
typedef struct declared {
  const char *name;
  int32_t dtype;
  int rank; /* -1: any */
  int64_t dims[BB_MAX_RANK];
} declared;

/* Named tensors the trainer keeps between steps. */
typedef struct held {
  size_t n;
  const char **names;
  bb_tensor **values;
} held;

struct bb_grad_trainer {
  const bb_grad_graph *graph;
  const bb_grad_optimizer *opt;
  const bb_allocator *alloc;
  /* train runs the training graph, or its forward phase when back runs its backward
   * phase; back's outputs follow train's in outs */
  bb_cpu_session *train, *back, *optim;
  bb_model *phase[2];
  const char **saved; /* the values the forward phase hands the backward phase */
  size_t n_saved, n_train_out, n_back_out;
  held params, state, opt_state;
  bb_tensor *seed;
  uint64_t seed0, steps, refused;
  declared *inputs;
  size_t n_inputs;
  /* a forward phase waiting for its upstream gradients: the data inputs it ran on (held),
   * its outputs in outs[0..n_train_out) */
  bool pending;
  const char **pending_names;
  bb_tensor **pending_inputs;
  size_t n_pending;
  bb_tensor **input_grads; /* d loss / d input of the last step, kept until the next */
  /* run scratch, sized once */
  const char **names;
  bb_tensor **args, **outs;
  size_t cap_args, cap_outs;
  size_t *grad_out, *state_out, *input_grad_out, *upstream_out, prediction_out;
};

/* Where an output of the training graph lands in outs. */
static int find_output(const bb_grad_trainer *t, const char *name, size_t *index, bb_error *err) {
  for (size_t i = 0; i < t->n_train_out; i++)
    if (strcmp(bb_cpu_session_output_name(t->train, i), name) == 0) {
      *index = i;
      return 0;
    }
  for (size_t i = 0; i < t->n_back_out; i++)
    if (strcmp(bb_cpu_session_output_name(t->back, i), name) == 0) {
      *index = t->n_train_out + i;
      return 0;
    }
  return bb_error_set(err, BB_ERR_NOT_FOUND, "the graph has no output %s", name);
}

static const bb_tensor_proto *find_init(const bb_model *m, const char *name) {
  for (size_t i = 0; i < m->graph->initializers.len; i++)
    if (strcmp(m->graph->initializers.items[i]->name, name) == 0) return m->graph->initializers.items[i];
  return NULL;
}

/* Loads the initializers named in names[0..n) of m into h. */
static int hold(bb_grad_trainer *t, held *h, const bb_model *m, const char *const *names, size_t n, bb_error *err) {
  h->n = 0;
  h->names = bbi_mem_calloc(t->alloc, n + 1, sizeof *h->names);
  h->values = bbi_mem_calloc(t->alloc, n + 1, sizeof *h->values);
  if (!h->names || !h->values) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  for (size_t i = 0; i < n; i++) {
    const bb_tensor_proto *p = find_init(m, names[i]);
    if (!p) return bb_error_set(err, BB_ERR_NOT_FOUND, "%s is not an initializer of its graph", names[i]);
    int rc = bb_tensor_from_proto(p, t->alloc, &h->values[i], err);
    if (rc) return rc;
    h->names[i] = names[i];
    h->n++;
  }
  return 0;
}

static void release_held(bb_grad_trainer *t, held *h) {
  for (size_t i = 0; i < h->n; i++) bb_tensor_release(h->values[i]);
  bbi_mem_free(t->alloc, h->names);
  bbi_mem_free(t->alloc, h->values);
}

static void release_outs(bb_grad_trainer *t, size_t from, size_t to) {
  for (size_t i = from; i < to; i++) {
    bb_tensor_release(t->outs[i]);
    t->outs[i] = NULL;
  }
}

/* Forgets a forward phase that waits for its upstream gradients. */
static void drop_pending(bb_grad_trainer *t) {
  if (!t->pending) return;
  for (size_t i = 0; i < t->n_pending; i++) bb_tensor_release(t->pending_inputs[i]);
  t->n_pending = 0;
  release_outs(t, 0, t->n_train_out);
  t->pending = false;
}

static void drop_input_grads(bb_grad_trainer *t) {
  for (size_t i = 0; t->input_grads && i < t->graph->n_input_grads; i++) {
    bb_tensor_release(t->input_grads[i]);
    t->input_grads[i] = NULL;
  }
}

void bb_grad_trainer_free(bb_grad_trainer *t) {
  if (!t) return;
  drop_pending(t);
  drop_input_grads(t);
  bb_cpu_session_free(t->train);
  bb_cpu_session_free(t->back);
  bb_cpu_session_free(t->optim);
  bb_model_free(t->phase[0]);
  bb_model_free(t->phase[1]);
  release_held(t, &t->params);
  release_held(t, &t->state);
  release_held(t, &t->opt_state);
  bb_tensor_release(t->seed);
  bbi_mem_free(t->alloc, t->inputs);
  bbi_mem_free(t->alloc, t->pending_names);
  bbi_mem_free(t->alloc, t->pending_inputs);
  bbi_mem_free(t->alloc, t->input_grads);
  bbi_mem_free(t->alloc, t->names);
  bbi_mem_free(t->alloc, t->args);
  bbi_mem_free(t->alloc, t->outs);
  bbi_mem_free(t->alloc, t->grad_out);
  bbi_mem_free(t->alloc, t->state_out);
  bbi_mem_free(t->alloc, t->input_grad_out);
  bbi_mem_free(t->alloc, t->upstream_out);
  bbi_mem_free(t->alloc, t);
}

static bool is_upstream(const bb_grad_graph *g, const char *name) {
  for (size_t i = 0; i < g->n_upstream; i++)
    if (strcmp(g->upstream[i], name) == 0) return true;
  return false;
}

/* The training graph's data inputs (neither initializers, the seed nor upstream gradients)
 * and their types. */
static int collect_inputs(bb_grad_trainer *t, bb_error *err) {
  const bb_graph *g = t->graph->model->graph;
  t->inputs = bbi_mem_calloc(t->alloc, g->inputs.len + 1, sizeof *t->inputs);
  t->pending_names = bbi_mem_calloc(t->alloc, g->inputs.len + 1, sizeof *t->pending_names);
  t->pending_inputs = bbi_mem_calloc(t->alloc, g->inputs.len + 1, sizeof *t->pending_inputs);
  if (!t->inputs || !t->pending_names || !t->pending_inputs) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  for (size_t i = 0; i < g->inputs.len; i++) {
    const bb_value_info *vi = g->inputs.items[i];
    if (find_init(t->graph->model, vi->name) || (t->graph->seed && strcmp(vi->name, t->graph->seed) == 0) ||
        is_upstream(t->graph, vi->name))
      continue;
    declared *d = &t->inputs[t->n_inputs++];
    d->name = vi->name;
    d->rank = -1;
    const bb_type *ty = vi->type;
    if (!ty || ty->kind != BB_TYPE_TENSOR) continue;
    d->dtype = ty->has_elem_type ? ty->elem_type : 0;
    if (!ty->shape || ty->shape->rank > BB_MAX_RANK) continue;
    d->rank = (int)ty->shape->rank;
    for (int k = 0; k < d->rank; k++)
      d->dims[k] = ty->shape->dims[k].kind == BB_DIM_VALUE ? ty->shape->dims[k].value : -1;
  }
  return 0;
}

/* The sessions: the training graph, or its two phases, then the optimizer graph; all
 * share one run memory (each runs after the other and reuses what it freed). Training
 * convolutions keep the direct path's bits: no Winograd (whose gradients are not checked
 * against PyTorch's), even for a frozen layer's constant weights. */
static int make_sessions(bb_grad_trainer *t, bb_error *err) {
  const bb_grad_graph *g = t->graph;
  bbi_cpu_run_memory *memory = bbi_cpu_run_memory_new(t->alloc);
  if (!memory) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  int rc = 0;
  const bb_model *first = g->model;
  const bb_cpu_session_options direct = {sizeof direct, BB_CPU_REWRITE_WINOGRAD};
  if (g->n_upstream) {
    rc = bbi_grad_phases(g, t->alloc, &t->phase[0], &t->phase[1], &t->saved, &t->n_saved, err);
    first = t->phase[0];
  }
  if (!rc && (rc = bbi_cpu_session_new_shared(first, t->alloc, memory, &direct, &t->train, err)))
    bb_error_prefix(err, g->n_upstream ? "forward phase: " : "training graph: ");
  if (!rc && g->n_upstream && (rc = bbi_cpu_session_new_shared(t->phase[1], t->alloc, memory, &direct, &t->back, err)))
    bb_error_prefix(err, "backward phase: ");
  if (!rc && (rc = bbi_cpu_session_new_shared(t->opt->model, t->alloc, memory, NULL, &t->optim, err)))
    bb_error_prefix(err, "optimizer graph: ");
  bbi_cpu_run_memory_release(memory);
  if (rc) return rc;
  t->n_train_out = bb_cpu_session_output_count(t->train);
  t->n_back_out = t->back ? bb_cpu_session_output_count(t->back) : 0;
  return 0;
}

/* Where each output the trainer reads lands in outs. */
static int locate_outputs(bb_grad_trainer *t, bb_error *err) {
  const bb_grad_graph *g = t->graph;
  t->grad_out = bbi_mem_calloc(t->alloc, g->n_params + 1, sizeof *t->grad_out);
  t->state_out = bbi_mem_calloc(t->alloc, g->n_state + 1, sizeof *t->state_out);
  t->input_grad_out = bbi_mem_calloc(t->alloc, g->n_input_grads + 1, sizeof *t->input_grad_out);
  t->upstream_out = bbi_mem_calloc(t->alloc, g->n_upstream + 1, sizeof *t->upstream_out);
  t->input_grads = bbi_mem_calloc(t->alloc, g->n_input_grads + 1, sizeof *t->input_grads);
  if (!t->grad_out || !t->state_out || !t->input_grad_out || !t->upstream_out || !t->input_grads)
    return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  int rc = 0;
  for (size_t i = 0; i < g->n_params && !rc; i++) rc = find_output(t, g->grads[i], &t->grad_out[i], err);
  for (size_t i = 0; i < g->n_state && !rc; i++) rc = find_output(t, g->state_next[i], &t->state_out[i], err);
  for (size_t i = 0; i < g->n_input_grads && !rc; i++) rc = find_output(t, g->input_grads[i], &t->input_grad_out[i], err);
  for (size_t i = 0; i < g->n_upstream && !rc; i++) rc = find_output(t, g->upstream_outputs[i], &t->upstream_out[i], err);
  if (!rc && g->prediction) rc = find_output(t, g->prediction, &t->prediction_out, err);
  return rc;
}

static int prepare(bb_grad_trainer *t, bb_error *err) {
  const bb_grad_graph *g = t->graph;
  const bb_grad_optimizer *o = t->opt;
  if (o->n_params != g->n_params) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "the optimizer was built for other parameters");
  for (size_t i = 0; i < g->n_params; i++)
    if (strcmp(o->params[i], g->params[i]) != 0 || strcmp(o->grads[i], g->grads[i]) != 0)
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "the optimizer was built for other parameters (%s)", o->params[i]);
  int rc;
  if ((rc = make_sessions(t, err)) || (rc = hold(t, &t->params, g->model, g->params, g->n_params, err)) ||
      (rc = hold(t, &t->state, g->model, g->state, g->n_state, err)) ||
      (rc = hold(t, &t->opt_state, o->model, o->state, o->n_state, err)) || (rc = collect_inputs(t, err)) ||
      (rc = locate_outputs(t, err)))
    return rc;
  size_t n_opt_out = bb_cpu_session_output_count(t->optim);
  t->cap_outs = t->n_train_out + t->n_back_out + n_opt_out;
  t->cap_args = t->n_inputs + 1 + g->n_params + g->n_state + g->n_upstream + t->n_saved;
  size_t opt_args = 2 * g->n_params + o->n_state;
  if (opt_args > t->cap_args) t->cap_args = opt_args;
  t->names = bbi_mem_calloc(t->alloc, t->cap_args + 1, sizeof *t->names);
  t->args = bbi_mem_calloc(t->alloc, t->cap_args + 1, sizeof *t->args);
  t->outs = bbi_mem_calloc(t->alloc, t->cap_outs + 1, sizeof *t->outs);
  if (g->seed) {
    t->seed = bb_tensor_new_zeros(t->alloc, BB_DTYPE_INT64, 0, NULL);
    if (!t->seed) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  }
  if (!t->names || !t->args || !t->outs) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  return 0;
}

int bb_grad_trainer_new(const bb_grad_graph *graph, const bb_grad_optimizer *opt, uint64_t dropout_seed,
                        const bb_allocator *alloc, bb_grad_trainer **out, bb_error *err) {
  *out = NULL;
  if (!graph || !opt) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "a trainer needs a training and an optimizer graph");
  if (!alloc) alloc = bb_default_allocator();
  bb_grad_trainer *t = bbi_mem_calloc(alloc, 1, sizeof *t);
  if (!t) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  t->graph = graph;
  t->opt = opt;
  t->alloc = alloc;
  t->seed0 = dropout_seed;
  int rc = prepare(t, err);
  if (rc) {
    bb_grad_trainer_free(t);
    return rc;
  }
  *out = t;
  return 0;
}

static bool finite(const bb_tensor *x) {
  if (x->dtype == BB_DTYPE_FLOAT)
    return bbi_f32_first_nonfinite(bb_tensor_data(x), (size_t)x->numel) == (size_t)x->numel;
  if (x->dtype == BB_DTYPE_DOUBLE) {
    const double *d = bb_tensor_data(x);
    for (int64_t i = 0; i < x->numel; i++)
      if (!isfinite(d[i])) return false;
  }
  return true;
}

static const char *describe(const bb_tensor *x, char *buf, size_t size) { return bb_tensor_describe(x, buf, size); }

/* Each given input must be a data input of the graph, with its declared type and known dims. */
static int check_inputs(bb_grad_trainer *t, const char *const *names, bb_tensor *const *inputs, size_t n, bb_error *err) {
  if (n > t->n_inputs) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%zu inputs, the graph takes %zu", n, t->n_inputs);
  for (size_t i = 0; i < n; i++) {
    const declared *d = NULL;
    for (size_t k = 0; names[i] && k < t->n_inputs && !d; k++)
      if (strcmp(t->inputs[k].name, names[i]) == 0) d = &t->inputs[k];
    if (!d || !inputs[i])
      return bb_error_set(err, BB_ERR_NOT_FOUND, "%s is not a data input of the training graph", names[i] ? names[i] : "(null)");
    char buf[96];
    if (d->dtype && inputs[i]->dtype != d->dtype)
      return bb_error_set(err, BB_ERR_TYPE, "input %s: the graph declares %s, got %s", d->name,
                          bb_dtype_name(d->dtype) ? bb_dtype_name(d->dtype) : "?", describe(inputs[i], buf, sizeof buf));
    if (d->rank < 0) continue;
    bool ok = inputs[i]->rank == d->rank;
    for (int k = 0; ok && k < d->rank; k++) ok = d->dims[k] < 0 || d->dims[k] == inputs[i]->dims[k];
    if (!ok) return bb_error_set(err, BB_ERR_TYPE, "input %s: got %s, which does not fit the declared shape", d->name, describe(inputs[i], buf, sizeof buf));
  }
  return 0;
}

static double scalar_value(const bb_tensor *x) {
  if (x->numel != 1) return NAN;
  return x->dtype == BB_DTYPE_DOUBLE ? *(const double *)bb_tensor_data(x)
         : x->dtype == BB_DTYPE_FLOAT ? *(const float *)bb_tensor_data(x)
                                      : NAN;
}

/* MSE and BCE broadcast a target of another shape silently: refuse it instead. */
static int check_target(bb_grad_trainer *t, const char *const *names, bb_tensor *const *inputs, size_t n, bb_error *err) {
  const bb_grad_graph *g = t->graph;
  if (!g->target || g->kind == BB_GRAD_LOSS_SOFTMAX_CROSS_ENTROPY) return 0;
  const bb_tensor *pred = t->outs[t->prediction_out];
  for (size_t i = 0; i < n; i++)
    if (strcmp(names[i], g->target) == 0 && !bb_tensor_same_shape(inputs[i], pred)) {
      char a[96], b[96];
      return bb_error_set(err, BB_ERR_TYPE, "target %s is %s, but the prediction %s is %s", g->target,
                          describe(inputs[i], a, sizeof a), g->prediction, describe(pred, b, sizeof b));
    }
  return 0;
}

static void replace(bb_tensor **slot, bb_tensor *with) {
  bb_tensor_release(*slot);
  *slot = with;
}

/* The arguments of the training graph (or its forward phase): data, seed, parameters,
 * state. Returns their count. */
static size_t train_args(bb_grad_trainer *t, const char *const *names, bb_tensor *const *inputs, size_t n_inputs) {
  size_t k = 0;
  for (size_t i = 0; i < n_inputs; i++) t->names[k] = names[i], t->args[k++] = inputs[i];
  if (t->seed) {
    *(int64_t *)bb_tensor_data(t->seed) = (int64_t)(t->seed0 + t->steps);
    t->names[k] = t->graph->seed, t->args[k++] = t->seed;
  }
  for (size_t i = 0; i < t->params.n; i++) t->names[k] = t->params.names[i], t->args[k++] = t->params.values[i];
  for (size_t i = 0; i < t->state.n; i++) t->names[k] = t->state.names[i], t->args[k++] = t->state.values[i];
  return k;
}

/* The step's end, once every output of the training graph is in outs (n_out of them):
 * keeps the inputs' gradients, then runs the optimizer graph and adopts the new parameters,
 * optimizer state and running statistics unless something is not finite (the loss, when
 * the graph has one, a gradient or a new parameter): then nothing changes and the step is
 * refused. */
static int finish_step(bb_grad_trainer *t, size_t n_out, bb_grad_step *out, bb_error *err) {
  const bb_grad_graph *g = t->graph;
  const bb_grad_optimizer *o = t->opt;
  t->steps++;
  double loss = g->loss ? scalar_value(t->outs[0]) : 0;
  out->loss = g->loss ? (float)loss : NAN;
  bool ok = isfinite(loss);
  for (size_t i = 0; ok && i < g->n_params; i++) ok = finite(t->outs[t->grad_out[i]]);
  for (size_t i = 0; ok && i < g->n_input_grads; i++) ok = finite(t->outs[t->input_grad_out[i]]);
  drop_input_grads(t);
  bb_tensor **opt_outs = t->outs + n_out;
  size_t n_opt = 0;
  int rc = 0;
  if (ok) {
    for (size_t i = 0; i < g->n_input_grads; i++) t->input_grads[i] = bb_tensor_retain(t->outs[t->input_grad_out[i]]);
    size_t k = 0;
    for (size_t i = 0; i < g->n_params; i++) t->names[k] = o->params[i], t->args[k++] = t->params.values[i];
    for (size_t i = 0; i < g->n_params; i++) t->names[k] = o->grads[i], t->args[k++] = t->outs[t->grad_out[i]];
    for (size_t i = 0; i < t->opt_state.n; i++) t->names[k] = t->opt_state.names[i], t->args[k++] = t->opt_state.values[i];
    rc = bb_cpu_session_run(t->optim, t->names, t->args, k, opt_outs, err);
    n_opt = rc ? 0 : bb_cpu_session_output_count(t->optim);
    for (size_t i = 0; !rc && ok && i < g->n_params; i++) ok = finite(opt_outs[i]);
    if (!rc && ok) { /* adopt everything at once */
      for (size_t i = 0; i < g->n_params; i++) replace(&t->params.values[i], opt_outs[i]), opt_outs[i] = NULL;
      for (size_t i = 0; i < o->n_state; i++) replace(&t->opt_state.values[i], opt_outs[g->n_params + i]), opt_outs[g->n_params + i] = NULL;
      for (size_t i = 0; i < g->n_state; i++) replace(&t->state.values[i], t->outs[t->state_out[i]]), t->outs[t->state_out[i]] = NULL;
    }
    if (rc || !ok) drop_input_grads(t);
  }
  release_outs(t, 0, n_out + n_opt);
  if (rc) return rc;
  if (!ok) t->refused++;
  out->applied = ok;
  return 0;
}

/* Splits a step's named inputs into data inputs and upstream gradients (in the graph's
 * order); *n_up must come out as n_upstream. */
static int sort_upstream(bb_grad_trainer *t, const char *const *names, bb_tensor *const *inputs, size_t n, const char **data_names,
                         bb_tensor **data, size_t *n_data, bb_tensor **upstream, bb_error *err) {
  const bb_grad_graph *g = t->graph;
  size_t n_up = 0;
  *n_data = 0;
  for (size_t i = 0; i < n; i++) {
    size_t u = g->n_upstream;
    for (size_t k = 0; names[i] && k < g->n_upstream && u == g->n_upstream; k++)
      if (strcmp(g->upstream[k], names[i]) == 0) u = k;
    if (u == g->n_upstream) {
      data_names[*n_data] = names[i], data[(*n_data)++] = inputs[i];
      continue;
    }
    if (upstream[u]) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "upstream gradient %s is given twice", names[i]);
    upstream[u] = inputs[i], n_up++;
  }
  if (n_up != g->n_upstream)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "a step needs every upstream gradient (%zu of %zu given)", n_up,
                        g->n_upstream);
  return 0;
}

int bb_grad_trainer_step(bb_grad_trainer *t, const char *const *names, bb_tensor *const *inputs, size_t n_inputs,
                         bb_grad_step *out, bb_error *err) {
  out->loss = NAN;
  out->applied = false;
  if (t->graph->n_upstream) {
    const char *data_names[64];
    bb_tensor *data[64], *upstream[64] = {0};
    size_t n_data;
    if (n_inputs > 64 || t->graph->n_upstream > 64)
      return bb_error_set(err, BB_ERR_LIMIT, "a step of a graph with upstream gradients takes at most 64 inputs");
    int rc = sort_upstream(t, names, inputs, n_inputs, data_names, data, &n_data, upstream, err);
    if (!rc) rc = bb_grad_trainer_forward(t, data_names, data, n_data, NULL, err);
    return rc ? rc : bb_grad_trainer_backward(t, upstream, t->graph->n_upstream, out, err);
  }
  int rc = check_inputs(t, names, inputs, n_inputs, err);
  if (rc) return rc;
  size_t k = train_args(t, names, inputs, n_inputs);
  if ((rc = bb_cpu_session_run(t->train, t->names, t->args, k, t->outs, err))) return rc;
  if ((rc = check_target(t, names, inputs, n_inputs, err))) {
    release_outs(t, 0, t->n_train_out);
    return rc;
  }
  return finish_step(t, t->n_train_out, out, err);
}

int bb_grad_trainer_forward(bb_grad_trainer *t, const char *const *names, bb_tensor *const *inputs, size_t n_inputs,
                            bb_tensor **outputs, bb_error *err) {
  const bb_grad_graph *g = t->graph;
  if (!g->n_upstream)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "forward and backward are for a graph whose gradients come in (BB_GRAD_LOSS_UPSTREAM)");
  int rc = check_inputs(t, names, inputs, n_inputs, err);
  if (rc) return rc;
  drop_pending(t);
  size_t k = train_args(t, names, inputs, n_inputs);
  if ((rc = bb_cpu_session_run(t->train, t->names, t->args, k, t->outs, err))) return rc;
  for (size_t i = 0; i < n_inputs; i++)
    t->pending_names[i] = names[i], t->pending_inputs[i] = bb_tensor_retain(inputs[i]);
  t->n_pending = n_inputs;
  t->pending = true;
  for (size_t i = 0; outputs && i < g->n_upstream; i++) outputs[i] = bb_tensor_retain(t->outs[t->upstream_out[i]]);
  return 0;
}

/* An upstream gradient must have its output's element type and shape. */
static int check_upstream(const bb_grad_trainer *t, bb_tensor *const *upstream, bb_error *err) {
  const bb_grad_graph *g = t->graph;
  for (size_t i = 0; i < g->n_upstream; i++) {
    const bb_tensor *y = t->outs[t->upstream_out[i]], *dy = upstream[i];
    char a[96], b[96];
    if (!dy) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "no gradient for %s", g->upstream_outputs[i]);
    if (dy->dtype != y->dtype || !bb_tensor_same_shape(dy, y))
      return bb_error_set(err, BB_ERR_TYPE, "the gradient of %s is %s, but %s is %s", g->upstream_outputs[i],
                          describe(dy, a, sizeof a), g->upstream_outputs[i], describe(y, b, sizeof b));
  }
  return 0;
}

int bb_grad_trainer_backward(bb_grad_trainer *t, bb_tensor *const *upstream, size_t n_upstream, bb_grad_step *out,
                             bb_error *err) {
  const bb_grad_graph *g = t->graph;
  out->loss = NAN;
  out->applied = false;
  if (!t->pending) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "no forward waits for its gradients");
  int rc = n_upstream != g->n_upstream
               ? bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%zu upstream gradients, the graph takes %zu", n_upstream, g->n_upstream)
               : check_upstream(t, upstream, err);
  bool ok = !rc;
  for (size_t i = 0; ok && i < n_upstream; i++) ok = finite(upstream[i]);
  if (rc || !ok) { /* the forward's step is lost: a wrong gradient is an error, a non-finite one a refused step */
    drop_pending(t);
    if (!rc) t->steps++, t->refused++;
    return rc;
  }
  size_t k = train_args(t, t->pending_names, t->pending_inputs, t->n_pending);
  for (size_t i = 0; i < n_upstream; i++) t->names[k] = g->upstream[i], t->args[k++] = upstream[i];
  for (size_t i = 0; i < t->n_saved; i++) {
    size_t at = 0;
    find_output(t, t->saved[i], &at, err); /* a forward-phase output by construction */
    t->names[k] = t->saved[i], t->args[k++] = t->outs[at];
  }
  rc = bb_cpu_session_run(t->back, t->names, t->args, k, t->outs + t->n_train_out, err);
  for (size_t i = 0; i < t->n_pending; i++) bb_tensor_release(t->pending_inputs[i]);
  t->n_pending = 0;
  t->pending = false;
  if (rc) {
    release_outs(t, 0, t->n_train_out);
    return rc;
  }
  return finish_step(t, t->n_train_out + t->n_back_out, out, err);
}

const bb_tensor *bb_grad_trainer_input_grad(const bb_grad_trainer *t, const char *input) {
  for (size_t i = 0; input && i < t->graph->n_input_grads; i++)
    if (strcmp(t->graph->inputs[i], input) == 0) return t->input_grads[i];
  return NULL;
}

void bb_grad_trainer_memory(const bb_grad_trainer *t, bb_grad_trainer_memory_stats *out) {
  memset(out, 0, sizeof *out);
  const held *lists[3] = {&t->params, &t->state, &t->opt_state};
  for (int k = 0; k < 3; k++)
    for (size_t i = 0; i < lists[k]->n; i++) out->held_bytes += bb_tensor_nbytes(lists[k]->values[i]);
  bb_cpu_session_memory_stats m; /* both sessions share one run memory */
  bb_cpu_session_memory(t->train, &m);
  out->step_in_use_high_water = m.in_use_high_water;
  out->step_high_water = m.held_high_water;
  out->allocations = m.allocations;
}

int bb_grad_trainer_set_limits(bb_grad_trainer *t, const bb_cpu_limits *limits, bb_error *err) {
  bb_cpu_session *sessions[] = {t->train, t->back, t->optim};
  for (size_t i = 0; i < sizeof sessions / sizeof sessions[0]; i++) {
    /* a struct_size the first session refuses is refused before any session changed */
    int rc = sessions[i] ? bb_cpu_session_set_limits(sessions[i], limits, err) : 0;
    if (rc) {
      bb_error_prefix(err, "trainer: ");
      return rc;
    }
  }
  return 0;
}

uint64_t bb_grad_trainer_steps(const bb_grad_trainer *t) { return t->steps; }
uint64_t bb_grad_trainer_refused(const bb_grad_trainer *t) { return t->refused; }

static bb_tensor *lookup(const held *h, const char *name) {
  for (size_t i = 0; i < h->n; i++)
    if (strcmp(h->names[i], name) == 0) return h->values[i];
  return NULL;
}

const bb_tensor *bb_grad_trainer_value(const bb_grad_trainer *t, const char *name) {
  const bb_tensor *v = lookup(&t->params, name);
  if (!v) v = lookup(&t->state, name);
  if (!v) v = lookup(&t->opt_state, name);
  return v;
}

size_t bb_grad_trainer_value_count(const bb_grad_trainer *t) { return t->params.n + t->state.n + t->opt_state.n; }

/* The held list and index of overall index i. */
static const held *nth(const bb_grad_trainer *t, size_t *i) {
  const held *lists[3] = {&t->params, &t->state, &t->opt_state};
  for (int k = 0; k < 3; k++) {
    if (*i < lists[k]->n) return lists[k];
    *i -= lists[k]->n;
  }
  return NULL;
}

const char *bb_grad_trainer_value_name(const bb_grad_trainer *t, size_t i) {
  const held *h = nth(t, &i);
  return h ? h->names[i] : NULL;
}

int bb_grad_trainer_set_value(bb_grad_trainer *t, const char *name, const bb_tensor *value, bb_error *err) {
  bb_tensor *x = name ? (bb_tensor *)bb_grad_trainer_value(t, name) : NULL;
  if (!x) return bb_error_set(err, BB_ERR_NOT_FOUND, "the trainer holds no tensor %s", name ? name : "(null)");
  char a[96], b[96];
  if (!value || value->dtype != x->dtype || !bb_tensor_same_shape(value, x))
    return bb_error_set(err, BB_ERR_TYPE, "%s is %s; got %s", name, describe(x, a, sizeof a),
                        value ? describe(value, b, sizeof b) : "nothing");
  /* the held tensor is the trainer's alone (made by a session or from an initializer) */
  memcpy(bb_tensor_data(x), bb_tensor_data(value), bb_tensor_nbytes(x));
  return 0;
}

int bb_grad_trainer_load(bb_grad_trainer *t, const bb_model *m, bb_error *err) {
  if (!m || !m->graph) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "the model has no main graph");
  for (size_t i = 0; i < m->graph->initializers.len; i++) {
    const bb_tensor_proto *p = m->graph->initializers.items[i];
    if (!p->name || !bb_grad_trainer_value(t, p->name)) continue;
    bb_tensor *x = NULL;
    int rc = bb_tensor_from_proto(p, t->alloc, &x, err);
    if (!rc) rc = bb_grad_trainer_set_value(t, p->name, x, err);
    bb_tensor_release(x);
    if (rc) return rc;
  }
  return 0;
}

/* Overwrites an initializer's data in place when it has the tensor's type, shape and raw
 * storage (no growth of the model's arena); replaces it otherwise. */
static int store_one(bb_model *m, size_t index, const bb_tensor *x, bb_error *err) {
  bb_tensor_proto *p = m->graph->initializers.items[index];
  bool same = p->has_raw_data && p->data_type == x->dtype && p->n_dims == (size_t)x->rank &&
              p->raw_data.len == bb_tensor_nbytes(x);
  for (size_t d = 0; same && d < p->n_dims; d++) same = p->dims[d] == x->dims[d];
  if (same) {
    memcpy(p->raw_data.data, bb_tensor_data(x), p->raw_data.len);
    return 0;
  }
  bb_tensor_proto *fresh;
  int rc = bb_tensor_to_proto(m, x, p->name, &fresh, err);
  if (!rc) m->graph->initializers.items[index] = fresh;
  return rc;
}

int bb_grad_trainer_store(const bb_grad_trainer *t, bb_model *m, bb_error *err) {
  if (!m || !m->graph) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "the model has no main graph");
  for (size_t i = 0; i < m->graph->initializers.len; i++) {
    const bb_tensor_proto *p = m->graph->initializers.items[i];
    const bb_tensor *x = p->name ? bb_grad_trainer_value(t, p->name) : NULL;
    int rc = x ? store_one(m, i, x, err) : 0;
    if (rc) return rc;
  }
  return 0;
}
