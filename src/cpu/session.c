/* Running a whole ONNX graph on the CPU backend.
 *
 * Preparation resolves every value name to an integer id and every node to its operator
 * implementation once, orders the nodes topologically (stable: among ready nodes, model
 * order wins), and records after which step each intermediate value is dead, so a run
 * releases it as soon as its last consumer has fired. Initializers are converted to
 * tensors once and shared by every run; runs allocate through a recycling allocator, so
 * the next run reuses the buffers this one freed. */
#include <string.h>

#include "bb/cpu.h"
#include "cpu/cpu_op.h"
#include "bb/common.h"
#include "util/mem.h"
#include "cpu/run_memory.h"
#include "util/options.h"
#include "util/strmap.h"

#define NO_VALUE UINT32_MAX

typedef struct step {
  const bb_ir_node *node;
  const bbi_cpu_op *op; /* resolved once, when the session is built */
  uint32_t *in, *out; /* value ids; NO_VALUE for omitted ones */
  uint32_t n_in, n_out;
  uint32_t *dead; /* values whose last use is this step */
  uint32_t n_dead;
} step;

struct bb_cpu_session {
  const bb_model *model;
  const bb_graph *graph;
  const bb_allocator *alloc;
  /* what runs allocate from: the tensors of one run are recycled by the next, so a warm
   * session takes nothing from `alloc` per run */
  bbi_cpu_run_memory *memory;
  const bb_allocator *run_alloc;
  int64_t opset;
  bbi_strmap ids;
  const char **names; /* id → name */
  uint32_t n_values;
  bb_tensor **initial; /* id → initializer tensor (or NULL) */
  int32_t *declared_type; /* id → elem type from the graph inputs (0 = unknown) */
  step *steps;
  uint32_t n_steps;
  uint32_t *inputs, *outputs; /* ids of required graph inputs and of graph outputs */
  uint32_t n_inputs, n_outputs;
  bb_tensor **values; /* scratch for a run */
  size_t peak_bytes, produced_bytes;
  bb_cpu_limits limits;
};

/* The id of a value name, minting one for a new name. */
static int intern(bb_cpu_session *s, const char *name, uint32_t *id, uint32_t cap) {
  if (bbi_strmap_get(&s->ids, name, id)) return 0;
  if (s->n_values >= cap) return BB_ERR_LIMIT;
  *id = s->n_values;
  s->names[s->n_values++] = name;
  return bbi_strmap_put(&s->ids, name, *id);
}

void bb_cpu_session_free(bb_cpu_session *s) {
  if (!s) return;
  for (uint32_t i = 0; i < s->n_steps; i++) {
    bbi_mem_free(s->alloc, s->steps[i].in);
    bbi_mem_free(s->alloc, s->steps[i].out);
    bbi_mem_free(s->alloc, s->steps[i].dead);
  }
  if (s->initial)
    for (uint32_t i = 0; i < s->n_values; i++) bb_tensor_release(s->initial[i]);
  bbi_mem_free(s->alloc, s->steps);
  bbi_mem_free(s->alloc, s->initial);
  bbi_mem_free(s->alloc, s->declared_type);
  bbi_mem_free(s->alloc, s->inputs);
  bbi_mem_free(s->alloc, s->outputs);
  bbi_mem_free(s->alloc, s->values);
  bbi_mem_free(s->alloc, (void *)s->names);
  bbi_strmap_free(&s->ids);
  bbi_cpu_run_memory_release(s->memory);
  bbi_mem_free(s->alloc, s);
}

static const char *node_label(const bb_ir_node *n) { return n->name && *n->name ? n->name : "(unnamed)"; }

/* Orders the graph's nodes: Kahn's algorithm with a FIFO seeded in model order. */
static int order_nodes(bb_cpu_session *s, uint32_t *order, bb_error *err) {
  const bb_nodelist *nodes = &s->graph->nodes;
  size_t n = nodes->len;
  uint32_t *producer = bbi_mem_calloc(s->alloc, s->n_values, sizeof *producer);
  uint32_t *pending = bbi_mem_calloc(s->alloc, n, sizeof *pending);
  uint32_t *queue = bbi_mem_calloc(s->alloc, n, sizeof *queue);
  bool *available = bbi_mem_calloc(s->alloc, s->n_values, sizeof *available);
  int rc = 0;
  if (!producer || !pending || !queue || !available) {
    rc = bb_error_set(err, BB_ERR_NOMEM, "out of memory ordering nodes");
    goto done;
  }
  for (uint32_t v = 0; v < s->n_values; v++) producer[v] = NO_VALUE;
  for (uint32_t i = 0; i < n; i++)
    for (size_t k = 0; k < nodes->items[i]->outputs.len; k++) {
      const char *name = nodes->items[i]->outputs.items[k];
      uint32_t id;
      if (!*name || !bbi_strmap_get(&s->ids, name, &id)) continue;
      if (producer[id] != NO_VALUE) {
        rc = bb_error_set(err, BB_ERR_MALFORMED, "value %s is produced by two nodes (%s and %s)", name,
                          node_label(nodes->items[producer[id]]), node_label(nodes->items[i]));
        goto done;
      }
      producer[id] = i;
    }
  for (uint32_t v = 0; v < s->n_values; v++) available[v] = producer[v] == NO_VALUE;
  size_t head = 0, tail = 0;
  for (uint32_t i = 0; i < n; i++) {
    for (uint32_t k = 0; k < s->steps[i].n_in; k++) {
      uint32_t v = s->steps[i].in[k];
      if (v != NO_VALUE && !available[v]) pending[i]++;
    }
    if (!pending[i]) queue[tail++] = i;
  }
  /* consumers of each value, as compressed rows (a node reading v twice appears twice) */
  uint32_t *first = bbi_mem_calloc(s->alloc, s->n_values + 1, sizeof *first);
  size_t n_edges = 0;
  for (uint32_t i = 0; i < n; i++) n_edges += s->steps[i].n_in;
  uint32_t *consumer = bbi_mem_calloc(s->alloc, n_edges, sizeof *consumer);
  if (!first || !consumer) {
    bbi_mem_free(s->alloc, first);
    bbi_mem_free(s->alloc, consumer);
    rc = bb_error_set(err, BB_ERR_NOMEM, "out of memory ordering nodes");
    goto done;
  }
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t k = 0; k < s->steps[i].n_in; k++)
      if (s->steps[i].in[k] != NO_VALUE) first[s->steps[i].in[k] + 1]++;
  for (uint32_t v = 0; v < s->n_values; v++) first[v + 1] += first[v];
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t k = 0; k < s->steps[i].n_in; k++) {
      uint32_t v = s->steps[i].in[k];
      if (v != NO_VALUE) consumer[first[v]++] = i;
    }
  for (uint32_t v = s->n_values; v > 0; v--) first[v] = first[v - 1]; /* undo the fill's advance */
  first[0] = 0;
  uint32_t done_count = 0;
  while (head < tail) {
    uint32_t i = queue[head++];
    order[done_count++] = i;
    for (uint32_t k = 0; k < s->steps[i].n_out; k++) {
      uint32_t v = s->steps[i].out[k];
      if (v == NO_VALUE) continue;
      for (uint32_t c = first[v]; c < first[v + 1]; c++)
        if (--pending[consumer[c]] == 0) queue[tail++] = consumer[c];
    }
  }
  bbi_mem_free(s->alloc, first);
  bbi_mem_free(s->alloc, consumer);
  if (done_count != n) {
    for (uint32_t i = 0; i < n; i++)
      if (pending[i]) {
        rc = bb_error_set(err, BB_ERR_MALFORMED, "node %s (%s) can never run: the graph has a cycle through it",
                          node_label(nodes->items[i]), nodes->items[i]->op_type);
        break;
      }
  }
done:
  bbi_mem_free(s->alloc, producer);
  bbi_mem_free(s->alloc, pending);
  bbi_mem_free(s->alloc, queue);
  bbi_mem_free(s->alloc, available);
  return rc;
}

static int build(bb_cpu_session *s, bb_error *err) {
  const bb_graph *g = s->graph;
  /* an upper bound on distinct names: every mention */
  size_t mentions = g->inputs.len + g->outputs.len + g->initializers.len;
  for (size_t i = 0; i < g->nodes.len; i++) mentions += g->nodes.items[i]->inputs.len + g->nodes.items[i]->outputs.len;
  if (mentions >= NO_VALUE) return bb_error_set(err, BB_ERR_LIMIT, "graph is too large");
  for (size_t i = 0; i < g->inputs.len; i++)
    if (!g->inputs.items[i]->name || !*g->inputs.items[i]->name)
      return bb_error_set(err, BB_ERR_MALFORMED, "graph input %zu has no name", i);
  for (size_t i = 0; i < g->outputs.len; i++)
    if (!g->outputs.items[i]->name || !*g->outputs.items[i]->name)
      return bb_error_set(err, BB_ERR_MALFORMED, "graph output %zu has no name", i);
  uint32_t cap = (uint32_t)mentions + 1;
  s->names = bbi_mem_calloc(s->alloc, cap, sizeof *s->names);
  s->steps = bbi_mem_calloc(s->alloc, g->nodes.len, sizeof *s->steps);
  if (!s->names || !s->steps) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  uint32_t id;
  for (size_t i = 0; i < g->initializers.len; i++)
    if (intern(s, g->initializers.items[i]->name ? g->initializers.items[i]->name : "", &id, cap))
      return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  for (size_t i = 0; i < g->inputs.len; i++)
    if (intern(s, g->inputs.items[i]->name, &id, cap)) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  s->n_steps = (uint32_t)g->nodes.len;
  for (size_t i = 0; i < g->nodes.len; i++) {
    const bb_ir_node *n = g->nodes.items[i];
    step *st = &s->steps[i];
    st->node = n;
    st->op = bbi_cpu_resolve(n->domain, n->op_type, s->opset);
    if (!st->op)
      return bb_error_set(err, BB_ERR_UNSUPPORTED, "node %s: %s%s%s is not supported by the CPU backend at opset %lld",
                          node_label(n), n->domain && *n->domain ? n->domain : "", n->domain && *n->domain ? "::" : "",
                          n->op_type, (long long)s->opset);
    st->n_in = (uint32_t)n->inputs.len;
    st->n_out = (uint32_t)n->outputs.len;
    st->in = bbi_mem_calloc(s->alloc, st->n_in, sizeof *st->in);
    st->out = bbi_mem_calloc(s->alloc, st->n_out, sizeof *st->out);
    if (!st->in || !st->out) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
    for (uint32_t k = 0; k < st->n_in; k++) {
      st->in[k] = NO_VALUE;
      if (*n->inputs.items[k] && intern(s, n->inputs.items[k], &st->in[k], cap))
        return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
    }
    for (uint32_t k = 0; k < st->n_out; k++) {
      st->out[k] = NO_VALUE;
      if (*n->outputs.items[k] && intern(s, n->outputs.items[k], &st->out[k], cap))
        return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
    }
  }
  for (size_t i = 0; i < g->outputs.len; i++)
    if (intern(s, g->outputs.items[i]->name, &id, cap)) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");

  s->initial = bbi_mem_calloc(s->alloc, s->n_values, sizeof *s->initial);
  s->declared_type = bbi_mem_calloc(s->alloc, s->n_values, sizeof *s->declared_type);
  s->values = bbi_mem_calloc(s->alloc, s->n_values, sizeof *s->values);
  s->inputs = bbi_mem_calloc(s->alloc, g->inputs.len + 1, sizeof *s->inputs);
  s->outputs = bbi_mem_calloc(s->alloc, g->outputs.len + 1, sizeof *s->outputs);
  if (!s->initial || !s->declared_type || !s->values || !s->inputs || !s->outputs)
    return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  for (size_t i = 0; i < g->initializers.len; i++) {
    const bb_tensor_proto *p = g->initializers.items[i];
    bbi_strmap_get(&s->ids, p->name ? p->name : "", &id);
    bb_tensor_release(s->initial[id]);
    s->initial[id] = NULL;
    int rc = bb_tensor_from_proto(p, s->alloc, &s->initial[id], err);
    if (rc) return bb_error_prefix(err, "initializer: ");
  }
  for (size_t i = 0; i < g->inputs.len; i++) {
    const bb_value_info *vi = g->inputs.items[i];
    bbi_strmap_get(&s->ids, vi->name, &id);
    if (vi->type && vi->type->kind == BB_TYPE_TENSOR && vi->type->has_elem_type)
      s->declared_type[id] = vi->type->elem_type;
    if (!s->initial[id]) s->inputs[s->n_inputs++] = id;
  }
  for (size_t i = 0; i < g->outputs.len; i++) bbi_strmap_get(&s->ids, g->outputs.items[i]->name, &s->outputs[s->n_outputs++]);

  uint32_t *order = bbi_mem_calloc(s->alloc, s->n_steps, sizeof *order);
  if (!order) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  int rc = order_nodes(s, order, err);
  if (!rc) {
    step *sorted = bbi_mem_calloc(s->alloc, s->n_steps, sizeof *sorted);
    if (!sorted) rc = bb_error_set(err, BB_ERR_NOMEM, "out of memory");
    else {
      for (uint32_t i = 0; i < s->n_steps; i++) sorted[i] = s->steps[order[i]];
      bbi_mem_free(s->alloc, s->steps);
      s->steps = sorted;
    }
  }
  bbi_mem_free(s->alloc, order);
  if (rc) return rc;

  /* Every value read must come from somewhere: a graph input, an initializer or a node. */
  bool *defined = bbi_mem_calloc(s->alloc, s->n_values, sizeof *defined);
  uint32_t *last_use = bbi_mem_calloc(s->alloc, s->n_values, sizeof *last_use);
  if (!defined || !last_use) {
    bbi_mem_free(s->alloc, defined);
    bbi_mem_free(s->alloc, last_use);
    return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  }
  for (uint32_t i = 0; i < s->n_inputs; i++) defined[s->inputs[i]] = true;
  for (uint32_t v = 0; v < s->n_values; v++) {
    if (s->initial[v]) defined[v] = true;
    last_use[v] = NO_VALUE;
  }
  for (uint32_t i = 0; i < s->n_steps && !rc; i++) {
    step *st = &s->steps[i];
    for (uint32_t k = 0; k < st->n_in; k++) {
      uint32_t v = st->in[k];
      if (v == NO_VALUE) continue;
      if (!defined[v]) {
        rc = bb_error_set(err, BB_ERR_MALFORMED, "node %s (%s) reads %s, which no node, input or initializer defines",
                          node_label(st->node), st->node->op_type, s->names[v]);
        break;
      }
      last_use[v] = i;
    }
    for (uint32_t k = 0; k < st->n_out; k++)
      if (st->out[k] != NO_VALUE) {
        defined[st->out[k]] = true;
        if (last_use[st->out[k]] == NO_VALUE) last_use[st->out[k]] = i; /* unused outputs die at once */
      }
  }
  for (uint32_t i = 0; i < s->n_outputs && !rc; i++) {
    if (!defined[s->outputs[i]])
      rc = bb_error_set(err, BB_ERR_MALFORMED, "graph output %s is never produced", s->names[s->outputs[i]]);
    last_use[s->outputs[i]] = NO_VALUE; /* outputs live to the end */
  }
  /* initializers stay with the session; a run only drops its own references */
  for (uint32_t v = 0; v < s->n_values && !rc; v++) {
    if (last_use[v] == NO_VALUE) continue;
    step *st = &s->steps[last_use[v]];
    uint32_t *grown = bbi_mem_realloc(s->alloc, st->dead, (st->n_dead + 1) * sizeof *grown);
    if (!grown) rc = bb_error_set(err, BB_ERR_NOMEM, "out of memory");
    else {
      st->dead = grown;
      st->dead[st->n_dead++] = v;
    }
  }
  bbi_mem_free(s->alloc, defined);
  bbi_mem_free(s->alloc, last_use);
  return rc;
}

bbi_cpu_run_memory *bbi_cpu_run_memory_new(const bb_allocator *alloc) {
  if (!alloc) alloc = bb_default_allocator();
  bbi_cpu_run_memory *m = bbi_mem_calloc(alloc, 1, sizeof *m);
  if (!m) return NULL;
  if (!(m->pool = bbi_mem_pool_new(alloc))) {
    bbi_mem_free(alloc, m);
    return NULL;
  }
  m->refcount = 1;
  m->alloc = alloc;
  m->workspace.alloc = bbi_mem_pool_allocator(m->pool);
  return m;
}

bbi_cpu_run_memory *bbi_cpu_run_memory_retain(bbi_cpu_run_memory *m) {
  if (m) m->refcount++;
  return m;
}

void bbi_cpu_run_memory_release(bbi_cpu_run_memory *m) {
  if (!m || --m->refcount) return;
  bbi_cpu_workspace_free(&m->workspace);
  bbi_mem_pool_close(m->pool);
  bbi_mem_free(m->alloc, m);
}

int bbi_cpu_session_new_shared(const bb_model *model, const bb_allocator *alloc, bbi_cpu_run_memory *memory,
                              bb_cpu_session **out, bb_error *err) {
  *out = NULL;
  if (!model || !model->graph) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "the model has no main graph");
  if (!alloc) alloc = bb_default_allocator();
  bb_cpu_session *s = bbi_mem_calloc(alloc, 1, sizeof *s);
  if (!s) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  s->model = model;
  s->graph = model->graph;
  s->alloc = alloc;
  bbi_strmap_init(&s->ids, alloc);
  s->opset = bb_opset_get(&model->opsets, "");
  s->memory = memory ? bbi_cpu_run_memory_retain(memory) : bbi_cpu_run_memory_new(alloc);
  if (!s->memory) {
    bb_cpu_session_free(s);
    return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  }
  s->run_alloc = bbi_mem_pool_allocator(s->memory->pool);
  int rc = s->opset < 0 ? bb_error_set(err, BB_ERR_MALFORMED, "the model imports no ai.onnx opset") : build(s, err);
  if (rc) {
    bb_cpu_session_free(s);
    return rc;
  }
  *out = s;
  return 0;
}

int bb_cpu_session_new(const bb_model *model, const bb_allocator *alloc, bb_cpu_session **out, bb_error *err) {
  return bbi_cpu_session_new_shared(model, alloc, NULL, out, err);
}

size_t bb_cpu_session_input_count(const bb_cpu_session *s) { return s->n_inputs; }
const char *bb_cpu_session_input_name(const bb_cpu_session *s, size_t i) {
  return i < s->n_inputs ? s->names[s->inputs[i]] : NULL;
}
size_t bb_cpu_session_output_count(const bb_cpu_session *s) { return s->n_outputs; }
const char *bb_cpu_session_output_name(const bb_cpu_session *s, size_t i) {
  return i < s->n_outputs ? s->names[s->outputs[i]] : NULL;
}
size_t bb_cpu_session_peak_bytes(const bb_cpu_session *s) { return s->peak_bytes; }

void bb_cpu_session_memory(const bb_cpu_session *s, bb_cpu_session_memory_stats *out) {
  bbi_mem_pool_stats ps;
  bbi_mem_pool_get_stats(s->memory->pool, &ps);
  out->peak_bytes = s->peak_bytes;
  out->produced_bytes = s->produced_bytes;
  out->in_use_high_water = ps.high_water;
  out->held_bytes = ps.outstanding + ps.cached;
  out->held_high_water = ps.held_high_water;
  out->allocations = ps.base_allocations;
}

int bb_cpu_session_set_limits(bb_cpu_session *s, const bb_cpu_limits *limits, bb_error *err) {
  bb_cpu_limits lim = {0};
  if (limits && !bbi_options_read(&lim, sizeof lim, limits))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "cpu session: limits have struct_size %zu; set it to sizeof(bb_cpu_limits), %zu",
                        limits->struct_size, sizeof lim);
  s->limits = lim;
  return 0;
}

/* Live intermediate bytes: a buffer counts from the step whose op created it (the only
 * holder is the new tensor) until the release that frees it. Views and retained inputs
 * share buffers and add nothing; inputs and initializers are held by their owners and
 * never freed during a run. */
static bool sole_holder(const bb_tensor *t) { return t->refcount == 1 && t->buffer->refcount == 1; }

static void clear_values(bb_cpu_session *s) {
  for (uint32_t v = 0; v < s->n_values; v++) {
    bb_tensor_release(s->values[v]);
    s->values[v] = NULL;
  }
}

int bb_cpu_session_run(bb_cpu_session *s, const char *const *input_names, bb_tensor *const *inputs, size_t n_inputs,
                       bb_tensor **outputs, bb_error *err) {
  for (uint32_t i = 0; i < s->n_outputs; i++) outputs[i] = NULL;
  for (uint32_t v = 0; v < s->n_values; v++) s->values[v] = bb_tensor_retain(s->initial[v]);
  int rc = 0;
  for (size_t i = 0; i < n_inputs && !rc; i++) {
    uint32_t id;
    if (!input_names[i] || !inputs[i]) {
      rc = bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "input %zu has no name or no tensor", i);
      break;
    }
    bool is_input = bbi_strmap_get(&s->ids, input_names[i], &id) &&
                    (s->initial[id] || bb_vilist_find(&s->graph->inputs, input_names[i]));
    if (!is_input) {
      rc = bb_error_set(err, BB_ERR_NOT_FOUND, "the graph has no input named %s", input_names[i]);
      break;
    }
    if (s->declared_type[id] && s->declared_type[id] != inputs[i]->dtype) {
      char desc[96];
      rc = bb_error_set(err, BB_ERR_TYPE, "input %s: the graph declares %s, got %s", input_names[i],
                        bb_dtype_name(s->declared_type[id]) ? bb_dtype_name(s->declared_type[id]) : "?",
                        bb_tensor_describe(inputs[i], desc, sizeof desc));
      break;
    }
    bb_tensor_release(s->values[id]);
    s->values[id] = bb_tensor_retain(inputs[i]);
  }
  for (uint32_t i = 0; i < s->n_inputs && !rc; i++)
    if (!s->values[s->inputs[i]])
      rc = bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "graph input %s was not given", s->names[s->inputs[i]]);

  bb_tensor *ins[64], *outs[64];
  size_t live = 0;
  s->peak_bytes = s->produced_bytes = 0;
  for (uint32_t i = 0; i < s->n_steps && !rc; i++) {
    const step *st = &s->steps[i];
    if (st->n_in > 64 || st->n_out > 64) {
      rc = bb_error_set(err, BB_ERR_LIMIT, "node %s has more than 64 inputs or outputs", node_label(st->node));
      break;
    }
    for (uint32_t k = 0; k < st->n_in; k++) ins[k] = st->in[k] == NO_VALUE ? NULL : s->values[st->in[k]];
    rc = bbi_cpu_run_op(st->op, st->node, s->opset, ins, st->n_in, outs, st->n_out, s->run_alloc, &s->limits,
                       &s->memory->workspace, err);
    if (rc) break;
    for (uint32_t k = 0; k < st->n_out; k++) {
      if (st->out[k] == NO_VALUE) {
        bb_tensor_release(outs[k]);
        continue;
      }
      if (outs[k] && sole_holder(outs[k])) live += outs[k]->buffer->size, s->produced_bytes += outs[k]->buffer->size;
      bb_tensor_release(s->values[st->out[k]]);
      s->values[st->out[k]] = outs[k];
    }
    if (live > s->peak_bytes) s->peak_bytes = live;
    size_t cap = s->limits.max_total_bytes ? s->limits.max_total_bytes : BB_CPU_DEFAULT_MAX_TOTAL_BYTES;
    if (live > cap) {
      rc = bb_error_set(err, BB_ERR_LIMIT,
                        "node %s: the run's values would hold %zu bytes at once, over the cap of %zu "
                        "(bb_cpu_limits.max_total_bytes)",
                        node_label(st->node), live, cap);
      break;
    }
    for (uint32_t k = 0; k < st->n_dead; k++) {
      bb_tensor *t = s->values[st->dead[k]];
      if (t && sole_holder(t)) live -= t->buffer->size;
      bb_tensor_release(t);
      s->values[st->dead[k]] = NULL;
    }
  }
  if (!rc)
    for (uint32_t i = 0; i < s->n_outputs; i++) outputs[i] = bb_tensor_retain(s->values[s->outputs[i]]);
  clear_values(s);
  return rc;
}
