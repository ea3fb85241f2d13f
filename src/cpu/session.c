/* Running a whole ONNX graph on the CPU backend.
 *
 * Preparation resolves every value name to an integer id and every node to its operator
 * implementation once, orders the nodes topologically (stable: among ready nodes, model
 * order wins), rewrites the graph into the session's two plans (session.h) and records,
 * per plan, after which step each intermediate value is dead, so a run releases it as soon
 * as its last consumer has fired. Initializers are converted to tensors once and shared by
 * every run; runs allocate through a recycling allocator, so the next run reuses the
 * buffers this one freed. */
#include <string.h>

#include "bb/cpu.h"
#include "bb/common.h"
#include "cpu/session.h"
#include "util/mem.h"
#include "util/options.h"

/* The id of a value name, minting one for a new name. */
static int intern(bb_cpu_session *s, const char *name, uint32_t *id) {
  if (bbi_strmap_get(&s->ids, name, id)) return 0;
  if (s->n_values >= s->cap_values) return BB_ERR_LIMIT;
  *id = s->n_values;
  s->names[s->n_values++] = name;
  return bbi_strmap_put(&s->ids, name, *id);
}

static void free_plan_caches(bb_cpu_session *s, bbi_plan *p) {
  for (uint32_t i = 0; p->steps && i < p->n_steps; i++) bbi_mem_free(s->alloc, p->steps[i].cache.data);
}

void bb_cpu_session_free(bb_cpu_session *s) {
  if (!s) return;
  for (uint32_t i = 0; s->initial && i < s->n_values; i++) bb_tensor_release(s->initial[i]);
  for (uint32_t i = 0; s->folded && i < s->n_values; i++) bb_tensor_release(s->folded[i]);
  free_plan_caches(s, &s->general);
  free_plan_caches(s, &s->constant);
  bbi_band_slots_free(s);
  bbi_strmap_free(&s->ids);
  bbi_cpu_run_memory_release(s->memory);
  bbi_arena_free(s->arena);
  bbi_mem_free(s->alloc, s);
}

static const char *node_label(const bb_ir_node *n) { return n->name && *n->name ? n->name : "(unnamed)"; }

/* Orders the steps: Kahn's algorithm with a FIFO seeded in model order. */
static int order_nodes(bb_cpu_session *s, bbi_plan_step *steps, uint32_t n, uint32_t *order, bb_error *err) {
  uint32_t *producer = bbi_mem_calloc(s->alloc, s->n_values, sizeof *producer);
  uint32_t *pending = bbi_mem_calloc(s->alloc, n, sizeof *pending);
  uint32_t *queue = bbi_mem_calloc(s->alloc, n, sizeof *queue);
  bool *available = bbi_mem_calloc(s->alloc, s->n_values, sizeof *available);
  uint32_t *first = bbi_mem_calloc(s->alloc, s->n_values + 1, sizeof *first);
  size_t n_edges = 0;
  for (uint32_t i = 0; i < n; i++) n_edges += steps[i].n_in;
  uint32_t *consumer = bbi_mem_calloc(s->alloc, n_edges, sizeof *consumer);
  int rc = 0;
  if (!producer || !pending || !queue || !available || !first || !consumer) {
    rc = bb_error_set(err, BB_ERR_NOMEM, "out of memory ordering nodes");
    goto done;
  }
  for (uint32_t v = 0; v < s->n_values; v++) producer[v] = BBI_NO_VALUE;
  for (uint32_t i = 0; i < n && !rc; i++)
    for (uint32_t k = 0; k < steps[i].n_out; k++) {
      uint32_t id = steps[i].out[k];
      if (id == BBI_NO_VALUE) continue;
      if (producer[id] != BBI_NO_VALUE) {
        rc = bb_error_set(err, BB_ERR_MALFORMED, "value %s is produced by two nodes (%s and %s)", s->names[id],
                          node_label(steps[producer[id]].node), node_label(steps[i].node));
        break;
      }
      producer[id] = i;
    }
  if (rc) goto done;
  for (uint32_t v = 0; v < s->n_values; v++) available[v] = producer[v] == BBI_NO_VALUE;
  size_t head = 0, tail = 0;
  for (uint32_t i = 0; i < n; i++) {
    for (uint32_t k = 0; k < steps[i].n_in; k++) {
      uint32_t v = steps[i].in[k];
      if (v != BBI_NO_VALUE && !available[v]) pending[i]++;
    }
    if (!pending[i]) queue[tail++] = i;
  }
  /* consumers of each value, as compressed rows (a node reading v twice appears twice) */
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t k = 0; k < steps[i].n_in; k++)
      if (steps[i].in[k] != BBI_NO_VALUE) first[steps[i].in[k] + 1]++;
  for (uint32_t v = 0; v < s->n_values; v++) first[v + 1] += first[v];
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t k = 0; k < steps[i].n_in; k++) {
      uint32_t v = steps[i].in[k];
      if (v != BBI_NO_VALUE) consumer[first[v]++] = i;
    }
  for (uint32_t v = s->n_values; v > 0; v--) first[v] = first[v - 1]; /* undo the fill's advance */
  first[0] = 0;
  uint32_t done_count = 0;
  while (head < tail) {
    uint32_t i = queue[head++];
    order[done_count++] = i;
    for (uint32_t k = 0; k < steps[i].n_out; k++) {
      uint32_t v = steps[i].out[k];
      if (v == BBI_NO_VALUE) continue;
      for (uint32_t c = first[v]; c < first[v + 1]; c++)
        if (--pending[consumer[c]] == 0) queue[tail++] = consumer[c];
    }
  }
  if (done_count != n) {
    for (uint32_t i = 0; i < n; i++)
      if (pending[i]) {
        rc = bb_error_set(err, BB_ERR_MALFORMED, "node %s (%s) can never run: the graph has a cycle through it",
                          node_label(steps[i].node), steps[i].node->op_type);
        break;
      }
  }
done:
  bbi_mem_free(s->alloc, producer);
  bbi_mem_free(s->alloc, pending);
  bbi_mem_free(s->alloc, queue);
  bbi_mem_free(s->alloc, available);
  bbi_mem_free(s->alloc, first);
  bbi_mem_free(s->alloc, consumer);
  return rc;
}

/* One step per node, with every name interned. */
static int make_steps(bb_cpu_session *s, bbi_plan *p, bb_error *err) {
  const bb_graph *g = s->graph;
  p->n_steps = (uint32_t)g->nodes.len;
  p->steps = bbi_arena_alloc(s->arena, (g->nodes.len + 1) * sizeof *p->steps);
  if (!p->steps) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  for (size_t i = 0; i < g->nodes.len; i++) {
    const bb_ir_node *n = g->nodes.items[i];
    bbi_plan_step *st = &p->steps[i];
    st->node = n;
    st->addend = BBI_NO_VALUE;
    st->op = bbi_cpu_resolve(n->domain, n->op_type, s->opset);
    if (!st->op)
      return bb_error_set(err, BB_ERR_UNSUPPORTED, "node %s: %s%s%s is not supported by the CPU backend at opset %lld",
                          node_label(n), n->domain && *n->domain ? n->domain : "", n->domain && *n->domain ? "::" : "",
                          n->op_type, (long long)s->opset);
    st->n_in = (uint32_t)n->inputs.len;
    st->n_out = (uint32_t)n->outputs.len;
    st->in = bbi_arena_alloc(s->arena, (st->n_in + 1) * sizeof *st->in);
    st->out = bbi_arena_alloc(s->arena, (st->n_out + 1) * sizeof *st->out);
    if (!st->in || !st->out) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
    for (uint32_t k = 0; k < st->n_in; k++) {
      st->in[k] = BBI_NO_VALUE;
      if (*n->inputs.items[k] && intern(s, n->inputs.items[k], &st->in[k]))
        return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
    }
    for (uint32_t k = 0; k < st->n_out; k++) {
      st->out[k] = BBI_NO_VALUE;
      if (*n->outputs.items[k] && intern(s, n->outputs.items[k], &st->out[k]))
        return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
    }
    st->produced = st->n_out ? st->out[0] : BBI_NO_VALUE;
  }
  return 0;
}

/* Every value read must come from somewhere: a graph input, an initializer or a node. */
static int check_defined(bb_cpu_session *s, const bbi_plan *p, bb_error *err) {
  bool *defined = bbi_mem_calloc(s->alloc, s->n_values, sizeof *defined);
  if (!defined) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  int rc = 0;
  for (uint32_t i = 0; i < s->n_inputs; i++) defined[s->inputs[i]] = true;
  for (uint32_t v = 0; v < s->n_values; v++) defined[v] = defined[v] || s->initial[v];
  for (uint32_t i = 0; i < p->n_steps && !rc; i++) {
    const bbi_plan_step *st = &p->steps[i];
    for (uint32_t k = 0; k < st->n_in && !rc; k++)
      if (st->in[k] != BBI_NO_VALUE && !defined[st->in[k]])
        rc = bb_error_set(err, BB_ERR_MALFORMED, "node %s (%s) reads %s, which no node, input or initializer defines",
                          node_label(st->node), st->node->op_type, s->names[st->in[k]]);
    for (uint32_t k = 0; k < st->n_out; k++)
      if (st->out[k] != BBI_NO_VALUE) defined[st->out[k]] = true;
  }
  for (uint32_t i = 0; i < s->n_outputs && !rc; i++)
    if (!defined[s->outputs[i]])
      rc = bb_error_set(err, BB_ERR_MALFORMED, "graph output %s is never produced", s->names[s->outputs[i]]);
  bbi_mem_free(s->alloc, defined);
  return rc;
}

/* Per step of p, the values whose last use it is (unused outputs die at once; graph
 * outputs live to the end). */
static int plan_deaths(bb_cpu_session *s, bbi_plan *p, bb_error *err) {
  uint32_t *last_use = bbi_mem_calloc(s->alloc, s->n_values, sizeof *last_use);
  uint32_t *count = bbi_mem_calloc(s->alloc, p->n_steps + 1, sizeof *count);
  if (!last_use || !count) {
    bbi_mem_free(s->alloc, last_use);
    bbi_mem_free(s->alloc, count);
    return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  }
  for (uint32_t v = 0; v < s->n_values; v++) last_use[v] = BBI_NO_VALUE;
  for (uint32_t i = 0; i < p->n_steps; i++) {
    const bbi_plan_step *st = &p->steps[i];
    for (uint32_t k = 0; k < st->n_in; k++)
      if (st->in[k] != BBI_NO_VALUE) last_use[st->in[k]] = i;
    if (st->addend != BBI_NO_VALUE) last_use[st->addend] = i;
    for (uint32_t c = 0; c < st->n_chain; c++) /* what the fused nodes read, should they run as written */
      for (uint32_t k = 0; k < st->chain[c].n_in; k++)
        if (st->chain[c].in[k] != BBI_NO_VALUE) last_use[st->chain[c].in[k]] = i;
    for (uint32_t k = 0; k < st->n_out; k++)
      if (st->out[k] != BBI_NO_VALUE && last_use[st->out[k]] == BBI_NO_VALUE) last_use[st->out[k]] = i;
  }
  for (uint32_t i = 0; i < s->n_outputs; i++) last_use[s->outputs[i]] = BBI_NO_VALUE;
  for (uint32_t v = 0; v < s->n_values; v++)
    if (last_use[v] != BBI_NO_VALUE) count[last_use[v]]++;
  int rc = 0;
  for (uint32_t i = 0; i < p->n_steps && !rc; i++) {
    p->steps[i].n_dead = 0;
    p->steps[i].dead = bbi_arena_alloc(s->arena, (count[i] + 1) * sizeof(uint32_t));
    if (!p->steps[i].dead) rc = bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  }
  for (uint32_t v = 0; v < s->n_values && !rc; v++)
    if (last_use[v] != BBI_NO_VALUE) {
      bbi_plan_step *st = &p->steps[last_use[v]];
      st->dead[st->n_dead++] = v;
    }
  bbi_mem_free(s->alloc, last_use);
  bbi_mem_free(s->alloc, count);
  return rc;
}

/* p->initials (session.h): every initializer the plan reads or returns, once, in id order. */
static int plan_initials(bb_cpu_session *s, bbi_plan *p, bb_error *err) {
  bool *read = bbi_mem_calloc(s->alloc, s->n_values, sizeof *read);
  if (!read) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  for (uint32_t i = 0; i < p->n_steps; i++) {
    const bbi_plan_step *st = &p->steps[i];
    for (uint32_t k = 0; k < st->n_in; k++)
      if (st->in[k] != BBI_NO_VALUE) read[st->in[k]] = true;
    if (st->addend != BBI_NO_VALUE) read[st->addend] = true;
    for (uint32_t c = 0; c < st->n_chain; c++)
      for (uint32_t k = 0; k < st->chain[c].n_in; k++)
        if (st->chain[c].in[k] != BBI_NO_VALUE) read[st->chain[c].in[k]] = true;
  }
  for (uint32_t i = 0; i < s->n_outputs; i++) read[s->outputs[i]] = true;
  for (uint32_t i = 0; i < p->n_constants; i++) read[p->constants[i]] = false;
  uint32_t n = 0;
  for (uint32_t v = 0; v < s->n_values; v++) n += read[v] && s->initial[v];
  p->initials = bbi_arena_alloc(s->arena, ((size_t)n + 1) * sizeof *p->initials);
  if (p->initials) {
    p->n_initials = 0;
    for (uint32_t v = 0; v < s->n_values; v++)
      if (read[v] && s->initial[v]) p->initials[p->n_initials++] = v;
  }
  bbi_mem_free(s->alloc, read);
  return p->initials ? 0 : bb_error_set(err, BB_ERR_NOMEM, "out of memory");
}

/* A copy of p whose steps the rewrites may change without touching p. */
static int copy_plan(bb_cpu_session *s, const bbi_plan *from, bbi_plan *to, bb_error *err) {
  *to = *from;
  to->steps = bbi_arena_memdup(s->arena, from->steps, (from->n_steps + 1) * sizeof *to->steps);
  to->constants = from->n_constants ? bbi_arena_memdup(s->arena, from->constants, from->n_constants * sizeof(uint32_t)) : NULL;
  if (!to->steps || (from->n_constants && !to->constants)) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  for (uint32_t i = 0; i < to->n_steps; i++) {
    bbi_plan_step *st = &to->steps[i];
    st->in = bbi_arena_memdup(s->arena, st->in, (st->n_in + 1) * sizeof *st->in);
    st->out = bbi_arena_memdup(s->arena, st->out, (st->n_out + 1) * sizeof *st->out);
    if (!st->in || !st->out) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  }
  return 0;
}

/* The general plan from the graph as written, then the constant plan from the general one. */
static int rewrite(bb_cpu_session *s, const bbi_plan *written, bb_error *err) {
  const uint32_t on = BB_CPU_REWRITE_ALL & ~s->rewrites_off;
  int rc = copy_plan(s, written, &s->general, err);
  bbi_plan *g = &s->general, *c = &s->constant;
  g->stats.nodes = s->graph->nodes.len;
  if (!rc && (on & BB_CPU_REWRITE_FOLD_CONSTANTS)) rc = bbi_plan_fold_constants(s, g, false, err);
  if (!rc && (on & BB_CPU_REWRITE_ELIDE_IDENTITY)) rc = bbi_plan_elide_identities(s, g);
  if (!rc) rc = copy_plan(s, g, c, err);
  if (!rc && (on & BB_CPU_REWRITE_FOLD_CONSTANTS)) rc = bbi_plan_fold_constants(s, c, true, err);
  if (!rc && (on & BB_CPU_REWRITE_FOLD_BATCHNORM)) rc = bbi_plan_fold_batchnorm(s, c, err);
  if (!rc && (on & BB_CPU_REWRITE_FUSE_OPTIMIZER)) rc = bbi_plan_fuse_updates(s, g);
  if (!rc && (on & BB_CPU_REWRITE_FUSE_OPTIMIZER)) rc = bbi_plan_fuse_updates(s, c);
  if (!rc && (on & BB_CPU_REWRITE_FUSE_ACTIVATIONS)) rc = bbi_plan_fuse_activations(s, g);
  if (!rc && (on & BB_CPU_REWRITE_FUSE_ACTIVATIONS)) rc = bbi_plan_fuse_activations(s, c);
  if (!rc && (on & BB_CPU_REWRITE_FUSE_TRANSPOSE)) rc = bbi_plan_fuse_transposes(s, g);
  if (!rc && (on & BB_CPU_REWRITE_FUSE_TRANSPOSE)) rc = bbi_plan_fuse_transposes(s, c);
  if (!rc && (on & BB_CPU_REWRITE_BATCH_BANDS)) rc = bbi_plan_find_bands(s, c);
  if (rc == BB_ERR_NOMEM) return bb_error_set(err, rc, "out of memory rewriting the graph");
  if (rc) return rc;
  g->stats.steps = g->n_steps;
  c->stats.steps = c->n_steps;
  if ((rc = plan_deaths(s, g, err)) || (rc = plan_deaths(s, c, err))) return rc;
  if ((rc = plan_initials(s, g, err)) || (rc = plan_initials(s, c, err))) return rc;
  return 0;
}

static int build(bb_cpu_session *s, bb_error *err) {
  const bb_graph *g = s->graph;
  /* an upper bound on distinct names: every mention; the rewrites add at most two values
   * per node (a folded Conv's weights and bias) */
  size_t mentions = g->inputs.len + g->outputs.len + g->initializers.len + 2 * g->nodes.len;
  for (size_t i = 0; i < g->nodes.len; i++) mentions += g->nodes.items[i]->inputs.len + g->nodes.items[i]->outputs.len;
  if (mentions >= BBI_NO_VALUE - 1) return bb_error_set(err, BB_ERR_LIMIT, "graph is too large");
  for (size_t i = 0; i < g->inputs.len; i++)
    if (!g->inputs.items[i]->name || !*g->inputs.items[i]->name)
      return bb_error_set(err, BB_ERR_MALFORMED, "graph input %zu has no name", i);
  for (size_t i = 0; i < g->outputs.len; i++)
    if (!g->outputs.items[i]->name || !*g->outputs.items[i]->name)
      return bb_error_set(err, BB_ERR_MALFORMED, "graph output %zu has no name", i);
  s->cap_values = (uint32_t)mentions + 1;
  size_t cap = s->cap_values;
  s->names = bbi_arena_alloc(s->arena, cap * sizeof *s->names);
  s->initial = bbi_arena_alloc(s->arena, cap * sizeof *s->initial);
  s->folded = bbi_arena_alloc(s->arena, cap * sizeof *s->folded);
  s->assumed = bbi_arena_alloc(s->arena, cap * sizeof *s->assumed);
  s->declared_type = bbi_arena_alloc(s->arena, cap * sizeof *s->declared_type);
  s->is_output = bbi_arena_alloc(s->arena, cap * sizeof *s->is_output);
  s->values = bbi_arena_alloc(s->arena, cap * sizeof *s->values);
  s->inputs = bbi_arena_alloc(s->arena, (g->inputs.len + 1) * sizeof *s->inputs);
  s->outputs = bbi_arena_alloc(s->arena, (g->outputs.len + 1) * sizeof *s->outputs);
  if (!s->names || !s->initial || !s->folded || !s->assumed || !s->declared_type || !s->is_output || !s->values ||
      !s->inputs || !s->outputs)
    return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  uint32_t id;
  for (size_t i = 0; i < g->initializers.len; i++)
    if (intern(s, g->initializers.items[i]->name ? g->initializers.items[i]->name : "", &id))
      return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  for (size_t i = 0; i < g->inputs.len; i++)
    if (intern(s, g->inputs.items[i]->name, &id)) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  bbi_plan written = {0};
  int rc = make_steps(s, &written, err);
  if (rc) return rc;
  for (size_t i = 0; i < g->outputs.len; i++)
    if (intern(s, g->outputs.items[i]->name, &id)) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");

  for (size_t i = 0; i < g->initializers.len; i++) {
    const bb_tensor_proto *p = g->initializers.items[i];
    bbi_strmap_get(&s->ids, p->name ? p->name : "", &id);
    bb_tensor_release(s->initial[id]);
    s->initial[id] = NULL;
    if ((rc = bb_tensor_from_proto(p, s->alloc, &s->initial[id], err))) return bb_error_prefix(err, "initializer: ");
  }
  for (size_t i = 0; i < g->inputs.len; i++) {
    const bb_value_info *vi = g->inputs.items[i];
    bbi_strmap_get(&s->ids, vi->name, &id);
    if (vi->type && vi->type->kind == BB_TYPE_TENSOR && vi->type->has_elem_type)
      s->declared_type[id] = vi->type->elem_type;
    if (!s->initial[id]) s->inputs[s->n_inputs++] = id;
  }
  for (size_t i = 0; i < g->outputs.len; i++) {
    bbi_strmap_get(&s->ids, g->outputs.items[i]->name, &s->outputs[s->n_outputs]);
    s->is_output[s->outputs[s->n_outputs++]] = true;
  }

  uint32_t *order = bbi_mem_calloc(s->alloc, written.n_steps + 1, sizeof *order);
  if (!order) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  rc = order_nodes(s, written.steps, written.n_steps, order, err);
  if (!rc) {
    bbi_plan_step *sorted = bbi_arena_alloc(s->arena, (written.n_steps + 1) * sizeof *sorted);
    if (!sorted) rc = bb_error_set(err, BB_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; sorted && i < written.n_steps; i++) sorted[i] = written.steps[order[i]];
    written.steps = sorted;
  }
  bbi_mem_free(s->alloc, order);
  if (rc || (rc = check_defined(s, &written, err))) return rc;
  return rewrite(s, &written, err);
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
                              const bb_cpu_session_options *options, bb_cpu_session **out, bb_error *err) {
  *out = NULL;
  bb_cpu_session_options opts = {0};
  if (options && !bbi_options_read(&opts, sizeof opts, options))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "cpu session: options have struct_size %zu; set it to sizeof(bb_cpu_session_options), %zu",
                        options->struct_size, sizeof opts);
  if (!model || !model->graph) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "the model has no main graph");
  if (!alloc) alloc = bb_default_allocator();
  bb_cpu_session *s = bbi_mem_calloc(alloc, 1, sizeof *s);
  if (!s) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  s->model = model;
  s->graph = model->graph;
  s->alloc = alloc;
  s->rewrites_off = opts.rewrites_off;
  bbi_strmap_init(&s->ids, alloc);
  s->opset = bb_opset_get(&model->opsets, "");
  s->arena = bbi_arena_new(alloc);
  s->memory = memory ? bbi_cpu_run_memory_retain(memory) : bbi_cpu_run_memory_new(alloc);
  if (!s->memory || !s->arena) {
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

int bb_cpu_session_new_with_options(const bb_model *model, const bb_allocator *alloc,
                                    const bb_cpu_session_options *options, bb_cpu_session **out, bb_error *err) {
  return bbi_cpu_session_new_shared(model, alloc, NULL, options, out, err);
}

int bb_cpu_session_new(const bb_model *model, const bb_allocator *alloc, bb_cpu_session **out, bb_error *err) {
  return bbi_cpu_session_new_shared(model, alloc, NULL, NULL, out, err);
}

void bb_cpu_session_rewrites_made(const bb_cpu_session *s, bool general, bb_cpu_session_rewrites *out) {
  *out = general ? s->general.stats : s->constant.stats;
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

/* ---- running ------------------------------------------------------------------------------ */

/* Live intermediate bytes: a buffer counts from the step whose op created it (the only
 * holder is the new tensor) until the release that frees it. Views and retained inputs
 * share buffers and add nothing; inputs and initializers are held by their owners and
 * never freed during a run. */
static bool sole_holder(const bb_tensor *t) { return t->refcount == 1 && t->buffer->refcount == 1; }

typedef struct run_state {
  size_t live;
  bb_error *err;
} run_state;

static void clear_values(bb_cpu_session *s) {
  for (uint32_t v = 0; v < s->n_values; v++) {
    bb_tensor_release(s->values[v]);
    s->values[v] = NULL;
  }
}

/* Stores a step's outputs as the values `ids` (dropping unnamed ones), counting new buffers. */
static int store_outputs(bb_cpu_session *s, const bbi_plan_step *st, const uint32_t *ids, bb_tensor **outs,
                         run_state *r) {
  for (uint32_t k = 0; k < st->n_out; k++) {
    if (ids[k] == BBI_NO_VALUE) {
      bb_tensor_release(outs[k]);
      continue;
    }
    if (outs[k] && sole_holder(outs[k])) r->live += outs[k]->buffer->size, s->produced_bytes += outs[k]->buffer->size;
    bb_tensor_release(s->values[ids[k]]);
    s->values[ids[k]] = outs[k];
  }
  if (r->live > s->peak_bytes) s->peak_bytes = r->live;
  size_t cap = s->limits.max_total_bytes ? s->limits.max_total_bytes : BB_CPU_DEFAULT_MAX_TOTAL_BYTES;
  if (r->live > cap)
    return bb_error_set(r->err, BB_ERR_LIMIT,
                        "node %s: the run's values would hold %zu bytes at once, over the cap of %zu "
                        "(bb_cpu_limits.max_total_bytes)",
                        node_label(st->node), r->live, cap);
  return 0;
}

static void drop_value(bb_cpu_session *s, uint32_t v, run_state *r) {
  bb_tensor *t = s->values[v];
  if (t && sole_holder(t)) r->live -= t->buffer->size;
  bb_tensor_release(t);
  s->values[v] = NULL;
}

/* Runs one step's op on its inputs; outs gets its outputs. With `swapped`, a step with a
 * Transpose fused: *swapped says whether the op wrote output 0 in its layout. */
static int run_op_as(bb_cpu_session *s, bbi_plan_step *st, bbi_cpu_epilogue *epilogue, bool *swapped, bb_tensor **outs,
                     run_state *r) {
  bb_tensor *ins[64];
  if (st->n_in > 64 || st->n_out > 64)
    return bb_error_set(r->err, BB_ERR_LIMIT, "node %s has more than 64 inputs or outputs", node_label(st->node));
  for (uint32_t k = 0; k < st->n_in; k++) ins[k] = st->in[k] == BBI_NO_VALUE ? NULL : s->values[st->in[k]];
  bbi_cpu_node_state state = {&st->cache, &st->memo, bbi_session_own_inputs(s, st, ins), epilogue,
                              !(s->rewrites_off & BB_CPU_REWRITE_WINOGRAD), false, false, swapped ? st->swap_rank : 0,
                              false};
  st->cache.alloc = s->alloc;
  const int rc = bbi_cpu_run_op(st->op, st->node, s->opset, ins, st->n_in, outs, st->n_out, s->run_alloc, &s->limits,
                                &s->memory->workspace, &state, r->err);
  if (swapped) *swapped = state.swapped;
  return rc;
}

static int run_op(bb_cpu_session *s, bbi_plan_step *st, bbi_cpu_epilogue *epilogue, bb_tensor **outs, run_state *r) {
  return run_op_as(s, st, epilogue, NULL, outs, r);
}

/* A fused step whose epilogue neither the op nor the session can apply: its output goes
 * under the node's own name and the fused nodes run as written. */
static int run_chain(bb_cpu_session *s, bbi_plan_step *st, bb_tensor **outs, run_state *r) {
  uint32_t *ids = st->out, saved = ids[0];
  ids[0] = st->produced;
  int rc = store_outputs(s, st, ids, outs, r);
  ids[0] = saved;
  bb_tensor *chain_outs[64];
  for (uint32_t i = 0; i < st->n_chain && !rc; i++) {
    bbi_plan_step *link = &st->chain[i];
    if (!(rc = run_op(s, link, NULL, chain_outs, r))) rc = store_outputs(s, link, link->out, chain_outs, r);
  }
  /* the values inside the chain die with it */
  drop_value(s, st->produced, r);
  for (uint32_t i = 0; i + 1 < st->n_chain; i++)
    for (uint32_t k = 0; k < st->chain[i].n_out; k++)
      if (st->chain[i].out[k] != BBI_NO_VALUE) drop_value(s, st->chain[i].out[k], r);
  return rc;
}

/* Whether v is one of the step's outputs. */
static bool is_step_output(const bbi_plan_step *st, uint32_t v) {
  for (uint32_t k = 0; k < st->n_out; k++)
    if (st->out[k] == v) return true;
  return false;
}

/* One parameter's optimizer update: the one pass, or the graph's nodes as written (their
 * values inside the update die with it). */
static int run_update(bb_cpu_session *s, bbi_plan_step *st, run_state *r) {
  bb_tensor *ins[BBI_UPDATE_INPUTS], *outs[64] = {NULL, NULL, NULL};
  for (uint32_t k = 0; k < BBI_UPDATE_INPUTS; k++) ins[k] = st->in[k] == BBI_NO_VALUE ? NULL : s->values[st->in[k]];
  size_t cap = s->limits.max_output_bytes ? s->limits.max_output_bytes : BB_CPU_DEFAULT_MAX_OUTPUT_BYTES;
  int rc = bbi_run_update(st->update_rule, ins, s->run_alloc, cap, outs);
  if (rc == 0) return store_outputs(s, st, st->out, outs, r);
  if (rc != 1) return bb_error_set(r->err, rc, "node %s (an optimizer update): out of memory", node_label(st->node));
  rc = 0;
  for (uint32_t i = 0; i < st->n_chain && !rc; i++) {
    bbi_plan_step *link = &st->chain[i];
    if (!(rc = run_op(s, link, NULL, outs, r))) rc = store_outputs(s, link, link->out, outs, r);
  }
  for (uint32_t i = 0; i < st->n_chain; i++) {
    const bbi_plan_step *link = &st->chain[i];
    for (uint32_t k = 0; k < link->n_out; k++) {
      uint32_t v = link->out[k];
      if (v != BBI_NO_VALUE && !is_step_output(st, v)) drop_value(s, v, r);
    }
  }
  return rc;
}

/* A Conv with a Transpose fused: its output in the Transpose's layout, or in its own with
 * the Transpose run as written. */
static int run_swapped(bb_cpu_session *s, bbi_plan_step *st, run_state *r) {
  bb_tensor *outs[64];
  bool swapped = false;
  const int rc = run_op_as(s, st, NULL, &swapped, outs, r);
  if (rc || swapped) return rc ? rc : store_outputs(s, st, st->out, outs, r);
  return run_chain(s, st, outs, r);
}

static int run_step(bb_cpu_session *s, bbi_plan_step *st, run_state *r) {
  if (st->update) return run_update(s, st, r);
  if (st->swap_rank) return run_swapped(s, st, r);
  bb_tensor *outs[64];
  bbi_cpu_epilogue epilogue = {st->act, st->addend == BBI_NO_VALUE ? NULL : s->values[st->addend], false};
  int rc = run_op(s, st, st->n_chain ? &epilogue : NULL, outs, r);
  if (rc || !st->n_chain || epilogue.applied) return rc ? rc : store_outputs(s, st, st->out, outs, r);
  bb_tensor *y = outs[0];
  const bb_tensor *addend = epilogue.addend;
  if (y && y->dtype == BB_DTYPE_FLOAT && sole_holder(y) &&
      (!addend || (addend->dtype == BB_DTYPE_FLOAT && bb_tensor_same_shape(addend, y)))) {
    bbi_f32_vactivate(&st->act, (size_t)y->numel, addend ? bb_tensor_data(addend) : NULL, bb_tensor_data(y));
    return store_outputs(s, st, st->out, outs, r);
  }
  return run_chain(s, st, outs, r);
}

/* A batch band (session_band.c) as one step: its last step's output from the chunks, or
 * BBI_BAND_DECLINED when its steps must run one by one. */
static int run_band(bb_cpu_session *s, bbi_plan_step *first, run_state *r) {
  bb_tensor *outs[64] = {NULL};
  const int rc = bbi_band_run(s, first, &outs[0], r->err);
  if (rc) return rc;
  const bbi_plan_step *last = &first[first->band - 1];
  return store_outputs(s, last, last->out, outs, r);
}

/* The plan for a run: the constant one unless an input replaces an initializer it folded. */
static bbi_plan *plan_for(bb_cpu_session *s, const char *const *input_names, size_t n_inputs) {
  for (size_t i = 0; i < n_inputs; i++) {
    uint32_t id;
    if (input_names[i] && bbi_strmap_get(&s->ids, input_names[i], &id) && s->assumed[id]) return &s->general;
  }
  return &s->constant;
}

int bb_cpu_session_run(bb_cpu_session *s, const char *const *input_names, bb_tensor *const *inputs, size_t n_inputs,
                       bb_tensor **outputs, bb_error *err) {
  for (uint32_t i = 0; i < s->n_outputs; i++) outputs[i] = NULL;
  bbi_plan *plan = plan_for(s, input_names, n_inputs);
  /* every value is NULL between runs (clear_values); a run holds only what its plan reads */
  for (uint32_t i = 0; i < plan->n_initials; i++) {
    uint32_t v = plan->initials[i];
    s->values[v] = bb_tensor_retain(s->initial[v]);
  }
  for (uint32_t i = 0; i < plan->n_constants; i++) {
    uint32_t v = plan->constants[i];
    bb_tensor_release(s->values[v]);
    s->values[v] = bb_tensor_retain(s->folded[v]);
  }
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

  run_state r = {0, err};
  s->peak_bytes = s->produced_bytes = 0;
  for (uint32_t i = 0; i < plan->n_steps && !rc; i++) {
    bbi_plan_step *st = &plan->steps[i];
    if (st->band > 1 && (rc = run_band(s, st, &r)) != BBI_BAND_DECLINED) {
      for (uint32_t b = 0; b < st->band && !rc; b++)
        for (uint32_t k = 0; k < st[b].n_dead && !rc; k++) drop_value(s, st[b].dead[k], &r);
      i += st->band - 1;
      continue;
    }
    rc = run_step(s, st, &r);
    for (uint32_t k = 0; k < st->n_dead && !rc; k++) drop_value(s, st->dead[k], &r);
  }
  if (!rc)
    for (uint32_t i = 0; i < s->n_outputs; i++) outputs[i] = bb_tensor_retain(s->values[s->outputs[i]]);
  clear_values(s);
  return rc;
}
