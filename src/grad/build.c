/* The gradient builder: copies the inference graph, infers what can be known about every
 * value, appends the loss, finds the nodes on a path from a parameter to the loss, then
 * walks them in reverse topological order, each backward rule adding the gradients of its
 * inputs (several contributions to one value are summed), and exposes the loss, one
 * gradient per parameter and the running-statistic updates as graph outputs. */
#include <string.h>

#include "bb/artifact.h"
#include "grad/builder.h"
#include "util/mem.h"

static bool is_float(int32_t dt) {
  return dt == BB_DTYPE_FLOAT || dt == BB_DTYPE_DOUBLE || dt == BB_DTYPE_FLOAT16 || dt == BB_DTYPE_BFLOAT16;
}

static bool is_onnx(const bb_ir_node *n) { return bb_domain_is_onnx(n->domain); }

static int oom(gb *b) { return gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph"); }

static int warn(gb *b, const char *text) {
  return !text || bb_strlist_append(b->m, &b->warnings, text) ? oom(b) : 0;
}

/* ---- the value table from the graph's inputs and initializers --------------------------- */

int gb_add_sources(gb *b) {
  const bb_graph *g = b->g;
  for (size_t i = 0; i < g->initializers.len; i++) {
    const bb_tensor_proto *p = g->initializers.items[i];
    if (!p->name || gb_val(b, p->name))
      return gb_fail(b, BB_ERR_MALFORMED, "initializer %zu (%s) has no name or repeats one", i, p->name ? p->name : "");
    gb_value *v = gb_val_add(b, p->name);
    if (!v) return b->rc;
    if (p->n_dims <= BB_MAX_RANK) gb_val_set_shape(v, p->data_type, (int)p->n_dims, p->dims);
    bool small_ints = (p->data_type == BB_DTYPE_INT64 || p->data_type == BB_DTYPE_INT32) && bb_tensor_proto_numel(p) >= 0 &&
                      bb_tensor_proto_numel(p) <= GB_KNOWN_MAX;
    bb_error ignored;
    int rc = small_ints ? bb_tensor_from_proto(p, b->alloc, &v->known, &ignored) : 0;
    if (rc == BB_ERR_NOMEM) return oom(b);
    if (rc) v->known = NULL; /* malformed data: the run will say so */
  }
  for (size_t i = 0; i < g->inputs.len; i++) {
    const bb_value_info *vi = g->inputs.items[i];
    if (gb_val(b, vi->name)) continue; /* an initializer also listed as an input */
    gb_value *v = gb_val_add(b, vi->name);
    if (!v) return b->rc;
    gb_val_set_type(b, v, vi->type);
  }
  return b->rc;
}

/* A parameter's data must be what its dims say: optimizer state is sized from them. */
static int check_param_data(gb *b, const char *name) {
  const bb_tensor_proto *p = NULL;
  for (size_t k = 0; k < b->g->initializers.len && !p; k++)
    if (strcmp(b->g->initializers.items[k]->name, name) == 0) p = b->g->initializers.items[k];
  int64_t numel = bb_tensor_proto_numel(p);
  size_t have = p->has_raw_data ? p->raw_data.len / (bb_dtype_size(p->data_type) ? bb_dtype_size(p->data_type) : 1)
                : p->data_type == BB_DTYPE_DOUBLE ? p->n_double_data
                : p->data_type == BB_DTYPE_FLOAT ? p->n_float_data
                                                  : p->n_int32_data; /* float16 and bfloat16 are stored as int32 */
  if (numel < 0 || (p->has_data_location && p->data_location == 1) || (uint64_t)numel != have)
    return gb_fail(b, BB_ERR_MALFORMED, "parameter %s: its data (%zu values) does not match its dims", name, have);
  return 0;
}

static bool is_initializer(gb *b, const char *name) {
  for (size_t k = 0; k < b->g->initializers.len; k++)
    if (strcmp(b->g->initializers.items[k]->name, name) == 0) return true;
  return false;
}

/* The initializers never trained: the caller's freeze list (checked) and the buffers the
 * model's metadata names (names it lists that the graph lacks are skipped: an exporter may
 * have folded them away). */
static int mark_frozen(gb *b, const bb_grad_options *opt) {
  for (size_t i = 0; i < opt->n_freeze; i++) {
    const char *name = opt->freeze[i];
    gb_value *v = name ? gb_val(b, name) : NULL;
    if (!v || !is_initializer(b, name))
      return gb_fail(b, BB_ERR_NOT_FOUND, "frozen parameter %s is not an initializer of the graph", name ? name : "(null)");
    v->frozen = true;
  }
  const char *list = bb_kv_get(&b->m->metadata, BB_KEY_BUFFERS);
  while (list && *list) {
    const char *end = strchr(list, ',');
    size_t len = end ? (size_t)(end - list) : strlen(list);
    for (size_t k = 0; k < b->g->initializers.len; k++) {
      const char *name = b->g->initializers.items[k]->name;
      if (strlen(name) == len && memcmp(name, list, len) == 0) gb_val(b, name)->frozen = true;
    }
    list = end ? end + 1 : NULL;
  }
  return 0;
}

/* The trainable parameters: the caller's list (checked), or every floating-point
 * initializer that is neither frozen nor a batch-normalisation running statistic. */
static int mark_params(gb *b, const bb_grad_options *opt) {
  if (mark_frozen(b, opt)) return b->rc;
  if (opt->params) {
    for (size_t i = 0; i < opt->n_params; i++) {
      const char *name = opt->params[i];
      gb_value *v = name ? gb_val(b, name) : NULL;
      if (!v || !is_initializer(b, name))
        return gb_fail(b, BB_ERR_NOT_FOUND, "parameter %s is not an initializer of the graph", name ? name : "(null)");
      if (!is_float(v->dtype))
        return gb_fail(b, BB_ERR_TYPE, "parameter %s is %s, not floating point", name,
                       bb_dtype_name(v->dtype) ? bb_dtype_name(v->dtype) : "of an unknown type");
      if (v->is_param) return gb_fail(b, BB_ERR_INVALID_ARGUMENT, "parameter %s is listed twice", name);
      if (v->frozen) return gb_fail(b, BB_ERR_INVALID_ARGUMENT, "parameter %s is both trained and frozen", name);
      if (check_param_data(b, name)) return b->rc;
      v->is_param = true;
    }
    return 0;
  }
  for (size_t k = 0; k < b->g->initializers.len; k++) {
    gb_value *v = gb_val(b, b->g->initializers.items[k]->name);
    if (is_float(v->dtype) && !v->frozen) {
      if (check_param_data(b, v->name)) return b->rc;
      v->is_param = true;
    }
  }
  for (size_t i = 0; i < b->g->nodes.len; i++) {
    const bb_ir_node *n = b->g->nodes.items[i];
    if (is_onnx(n) && strcmp(n->op_type, "BatchNormalization") == 0)
      for (size_t k = 3; k < 5 && k < n->inputs.len; k++) {
        gb_value *v = gb_val(b, n->inputs.items[k]);
        if (v) v->is_param = false;
      }
  }
  return 0;
}

/* The graph inputs whose gradient is asked for: each a data input (not an initializer) of a
 * floating-point type, listed once. */
static int mark_grad_inputs(gb *b, const bb_grad_options *opt) {
  for (size_t i = 0; i < opt->n_input_grads; i++) {
    const char *name = opt->input_grads ? opt->input_grads[i] : NULL;
    gb_value *v = name ? gb_val(b, name) : NULL;
    if (!v || is_initializer(b, name) || !bb_vilist_find(&b->g->inputs, name))
      return gb_fail(b, BB_ERR_NOT_FOUND, "input %s, whose gradient is asked for, is not a data input of the graph",
                     name ? name : "(null)");
    if (!is_float(v->dtype))
      return gb_fail(b, BB_ERR_TYPE, "input %s is %s; only a floating-point input has a gradient", name,
                     bb_dtype_name(v->dtype) ? bb_dtype_name(v->dtype) : "of an unknown type");
    if (v->grad_input) return gb_fail(b, BB_ERR_INVALID_ARGUMENT, "input %s is listed twice for its gradient", name);
    v->grad_input = true;
  }
  return 0;
}

/* ---- the forward pass ------------------------------------------------------------------- */

/* A training-mode ai.onnx Dropout that may drop becomes the seeded Dropout of
 * ai.bytesandbrains.grad (same data and ratio inputs, the graph's seed input third); each
 * gets its own stream, so two Dropouts never share a mask. */
static int seed_dropout(gb *b, bb_ir_node *n) {
  if (!is_onnx(n) || strcmp(n->op_type, "Dropout") != 0) return 0;
  double training = 0, ratio = 0.5;
  if (gb_has_input(n, 2) && !gb_known_scalar(gb_val(b, n->inputs.items[2]), &training))
    return gb_fail(b, BB_ERR_UNSUPPORTED, "%s: training_mode must be a constant", gb_node_label(b, n));
  bool ratio_known = !gb_has_input(n, 1) || gb_known_scalar(gb_val(b, n->inputs.items[1]), &ratio);
  if (!training || (ratio_known && ratio == 0)) return 0; /* the identity */
  if (!b->seed) {
    const char *name = gb_fresh_name(b, "dropout_seed");
    gb_value *v = name ? gb_val_add(b, name) : NULL;
    if (!v) return b->rc;
    gb_val_set_shape(v, BB_DTYPE_INT64, 0, NULL);
    bb_type *type = gb_val_type(b, v);
    if (!type || !bb_vilist_add(b->m, &b->g->inputs, name, type)) return oom(b);
    b->seed = name;
  }
  while (n->inputs.len < 3)
    if (bb_strlist_append(b->m, &n->inputs, "")) return oom(b);
  n->inputs.items[2] = (char *)b->seed;
  if (!(n->domain = bb_model_strdup(b->m, BB_GRAD_DOMAIN))) return oom(b);
  gb_attr_int(b, n, "stream", b->n_dropouts++);
  b->grad_domain = true;
  return b->rc;
}

int gb_check_node(gb *b, const bb_ir_node *n) {
  for (size_t k = 0; k < n->outputs.len; k++)
    if (*n->outputs.items[k] && gb_val(b, n->outputs.items[k]))
      return gb_fail(b, BB_ERR_MALFORMED, "%s defines %s, which is already defined", gb_node_label(b, n), n->outputs.items[k]);
  for (size_t k = 0; k < n->inputs.len; k++)
    if (*n->inputs.items[k] && !gb_val(b, n->inputs.items[k]))
      return gb_fail(b, BB_ERR_MALFORMED, "%s reads %s, which no earlier node, graph input or initializer defines",
                     gb_node_label(b, n), n->inputs.items[k]);
  return 0;
}

static int forward(gb *b) {
  size_t count = b->g->nodes.len;
  for (size_t i = 0; i < count && !b->rc; i++) {
    bb_ir_node *n = b->g->nodes.items[i];
    if (gb_check_node(b, n) || seed_dropout(b, n)) return b->rc;
    gb_infer_node(b, n);
  }
  return b->rc;
}

/* ---- which nodes carry gradients ---------------------------------------------------------- */

/* requires_grad, origin and cut for every value the forward nodes make. */
static void trace_params(gb *b, size_t n_fwd) {
  for (size_t i = 0; i < b->n_values; i++)
    if (b->values[i]->is_param || b->values[i]->grad_input)
      b->values[i]->requires_grad = true, b->values[i]->origin = b->values[i]->name;
  for (size_t i = 0; i < n_fwd; i++) {
    const bb_ir_node *n = b->g->nodes.items[i];
    const gb_rule *r = gb_rule_find(n->domain, n->op_type);
    const char *origin = NULL;
    const bb_ir_node *cut = NULL;
    bool flows = false;
    for (size_t k = 0; k < n->inputs.len; k++) {
      gb_value *v = gb_input_val(b, n, k);
      if (!v || !v->origin) continue;
      bool differentiable = !r || (k < 32 && (r->diff_inputs & (1u << k)));
      if (v->requires_grad && differentiable) flows = true, origin = v->origin;
      if (!origin) origin = v->origin;
      if (!cut) cut = v->cut;
    }
    if (!origin) continue;
    for (size_t k = 0; k < n->outputs.len; k++) {
      gb_value *o = gb_output_val(b, n, k);
      if (!o) continue;
      o->origin = origin;
      o->requires_grad = flows && is_float(o->dtype);
      o->cut = o->requires_grad ? NULL : flows || !cut ? n : cut;
    }
  }
}

/* Marks the values and nodes on a path from a parameter to the roots; refuses an operator
 * without a gradient there. */
static int mark_active(gb *b, size_t n_fwd) {
  for (size_t i = 0; i < b->n_roots; i++) gb_val(b, b->roots[i])->active = true;
  for (size_t i = n_fwd; i-- > 0;) {
    const bb_ir_node *n = b->g->nodes.items[i];
    bool active = false;
    for (size_t k = 0; k < n->outputs.len; k++) {
      gb_value *o = gb_output_val(b, n, k);
      active = active || (o && o->active);
    }
    if (!active) continue;
    const gb_rule *r = gb_rule_find(n->domain, n->op_type);
    const char *origin = gb_val(b, n->outputs.items[0])->origin;
    if (!r || !r->backward)
      return gb_fail(b, BB_ERR_UNSUPPORTED, "%s is on a path from %s %s to %s, and %s%s%s has no gradient",
                     gb_node_label(b, n), origin && gb_val(b, origin)->grad_input ? "input" : "parameter",
                     origin ? origin : "?", b->roots_label, n->domain && *n->domain ? n->domain : "",
                     n->domain && *n->domain ? "::" : "", n->op_type);
    for (size_t k = 0; k < n->outputs.len; k++) {
      gb_value *o = gb_output_val(b, n, k);
      if (o && o->active && k < 32 && !(r->diff_outputs & (1u << k)))
        return gb_fail(b, BB_ERR_UNSUPPORTED, "%s depends on output %zu (%s) of %s, which carries no gradient", b->roots_label,
                       k, o->name, gb_node_label(b, n));
    }
    for (size_t k = 0; k < n->inputs.len; k++) {
      gb_value *v = gb_input_val(b, n, k);
      if (v && v->requires_grad && k < 32 && (r->diff_inputs & (1u << k))) v->active = true;
    }
  }
  return 0;
}

/* Operators whose output depends on their input's shape only, never on its values. */
static bool reads_shape_only(const bb_ir_node *n) {
  return is_onnx(n) && (strcmp(n->op_type, "Shape") == 0 || strcmp(n->op_type, "Size") == 0);
}

/* Marks every value the roots depend on by any path, gradient or not. */
static void mark_reaches(gb *b, size_t n_fwd) {
  for (size_t i = 0; i < b->n_roots; i++) gb_val(b, b->roots[i])->reaches = true;
  for (size_t i = n_fwd; i-- > 0;) {
    const bb_ir_node *n = b->g->nodes.items[i];
    bool reaches = false;
    for (size_t k = 0; k < n->outputs.len; k++) {
      gb_value *o = gb_output_val(b, n, k);
      reaches = reaches || (o && o->reaches);
    }
    if (!reaches || reads_shape_only(n)) continue;
    for (size_t k = 0; k < n->inputs.len; k++) {
      gb_value *v = gb_input_val(b, n, k);
      if (v) v->reaches = true;
    }
  }
}

/* Why a node passes no gradient from input k to output o, for messages. */
static const char *why_no_gradient(gb *b, const bb_ir_node *n, size_t k, const gb_value *o) {
  const gb_rule *r = gb_rule_find(n->domain, n->op_type);
  if (!r || !r->backward) return gb_printf(b, "%s has no gradient", n->op_type);
  if (k < 32 && !(r->diff_inputs & (1u << k))) return gb_printf(b, "%s has no gradient for its input %zu", n->op_type, k);
  if (!o->dtype) return gb_printf(b, "the element type of its output %s is not known at build time", o->name);
  return gb_printf(b, "its output %s is %s", o->name, bb_dtype_name(o->dtype) ? bb_dtype_name(o->dtype) : "not floating point");
}

/* A parameter the loss depends on only through values without a gradient would silently
 * stay untrained: refused, naming the first node on a path to the loss where the gradient
 * from it stops. */
static int refuse_cut_param(gb *b, size_t n_fwd, gb_value *p) {
  for (size_t i = 0; i < b->n_values; i++) b->values[i]->mark = false;
  p->mark = true; /* carries a gradient from p */
  for (size_t i = 0; i < n_fwd; i++) {
    const bb_ir_node *n = b->g->nodes.items[i];
    const gb_rule *r = gb_rule_find(n->domain, n->op_type);
    bool flows = false;
    size_t from = SIZE_MAX; /* the input that brings p's gradient (a differentiable one if any) */
    for (size_t k = 0; k < n->inputs.len && !reads_shape_only(n); k++) {
      gb_value *v = gb_input_val(b, n, k);
      if (!v || !v->mark) continue;
      if (from == SIZE_MAX) from = k;
      if (r && r->backward && (k >= 32 || (r->diff_inputs & (1u << k)))) flows = true, from = k;
    }
    for (size_t k = 0; from != SIZE_MAX && k < n->outputs.len; k++) {
      gb_value *o = gb_output_val(b, n, k);
      if (!o) continue;
      o->mark = flows && is_float(o->dtype);
      if (o->reaches && !o->mark)
        return gb_fail(b, BB_ERR_UNSUPPORTED,
                       "parameter %s reaches %s only through values without a gradient: at %s, %s; "
                       "freeze %s to train the other parameters",
                       p->name, b->roots_label, gb_node_label(b, n), why_no_gradient(b, n, from, o), p->name);
    }
  }
  return gb_fail(b, BB_ERR_UNSUPPORTED, "parameter %s reaches %s only through values without a gradient", p->name,
                 b->roots_label);
}

static int check_params_reach(gb *b, size_t n_fwd) {
  mark_reaches(b, n_fwd);
  for (size_t k = 0; k < b->g->initializers.len; k++) {
    gb_value *v = gb_val(b, b->g->initializers.items[k]->name);
    if (v->is_param && !v->active && v->reaches) return refuse_cut_param(b, n_fwd, v);
  }
  return 0;
}

/* ---- the backward pass --------------------------------------------------------------------- */

/* d loss / d v: its one contribution or the Sum of them (NULL when nothing reached it). */
static const char *total_grad(gb *b, gb_value *v) {
  if (v->grad || !v->n_contrib) return v->grad;
  if (v->n_contrib == 1) return v->grad = v->contrib[0];
  bb_ir_node *sum = gb_new(b, "Sum", NULL, 1, 0);
  for (size_t i = 0; sum && i < v->n_contrib; i++)
    if (bb_strlist_append(b->m, &sum->inputs, v->contrib[i])) oom(b);
  gb_rename_output(b, sum, 0, gb_printf(b, "%s_grad", v->name));
  const char *g = gb_add(b, sum);
  if ((v = gb_val(b, v->name))) v->grad = g;
  return g;
}

/* Starts each root's gradient (before any rule adds to it): the loss's is 1, an upstream
 * output's is its input. */
static int seed_roots(gb *b, const char *const *seeds) {
  for (size_t i = 0; i < b->n_roots; i++) {
    if (!seeds[i]) return b->rc ? b->rc : oom(b);
    gb_value *v = gb_val(b, b->roots[i]);
    v->contrib = bbi_arena_alloc(b->scratch, 4 * sizeof *v->contrib);
    if (!v->contrib) return oom(b);
    v->contrib[0] = seeds[i], v->n_contrib = 1, v->cap_contrib = 4;
  }
  return 0;
}

static int backward(gb *b, size_t n_fwd, const char **upstream) {
  b->prefix = "grad";
  const char *one = NULL;
  if (!upstream) {
    gb_value *lv = gb_val(b, b->roots[0]);
    int64_t dims[BB_MAX_RANK];
    for (int d = 0; d < lv->rank; d++) dims[d] = 1;
    one = gb_tensor(b, lv->dtype, lv->rank, dims, (double[]){1.0});
  }
  if (seed_roots(b, upstream ? (const char *const *)upstream : &one)) return b->rc;
  for (size_t i = n_fwd; i-- > 0 && !b->rc;) {
    bb_ir_node *n = b->g->nodes.items[i];
    const char **dy = bbi_arena_alloc(b->scratch, (n->outputs.len + 1) * sizeof *dy);
    if (!dy) return oom(b);
    const gb_rule *r = gb_rule_find(n->domain, n->op_type);
    bool any = false;
    for (size_t k = 0; k < n->outputs.len; k++) {
      gb_value *o = gb_output_val(b, n, k);
      if (o && o->active && r && (k >= 32 || (r->diff_outputs & (1u << k)))) dy[k] = total_grad(b, o);
      any = any || dy[k];
    }
    /* single-output rules read dy[0]; a multi-output rule (Split) takes NULLs */
    if (!any || (!dy[0] && r->diff_outputs == 1)) continue;
    b->prefix = gb_printf(b, "%s_grad", n->name && *n->name ? n->name : n->op_type);
    r->backward(b, n, dy);
  }
  return b->rc;
}

/* ---- outputs -------------------------------------------------------------------------------- */

/* The output "<param>_grad": the Sum of the parameter's contributions, or an Identity
 * naming its one contribution. */
static const char *param_grad(gb *b, const gb_value *v) {
  bb_ir_node *n = gb_new(b, v->n_contrib == 1 ? "Identity" : "Sum", NULL, 1, 0);
  for (size_t i = 0; n && i < v->n_contrib; i++)
    if (bb_strlist_append(b->m, &n->inputs, v->contrib[i])) oom(b);
  gb_rename_output(b, n, 0, gb_printf(b, "%s_grad", v->name));
  return gb_add(b, n);
}

static int add_output(gb *b, const char *name) {
  bb_type *t = gb_val_type(b, gb_val(b, name));
  return !t || !bb_vilist_add(b->m, &b->g->outputs, name, t) ? oom(b) : 0;
}

/* The running statistics each training-mode BatchNormalization updates. */
static int collect_state(gb *b, size_t n_fwd, bb_grad_graph *out) {
  size_t cap = 0;
  for (size_t i = 0; i < n_fwd; i++) {
    bb_ir_node *n = b->g->nodes.items[i];
    if (!is_onnx(n) || strcmp(n->op_type, "BatchNormalization") || b->opset < 14 ||
        !bb_attr_get_int(&n->attrs, "training_mode", 0))
      continue;
    for (size_t k = 1; k < 3 && k + 2 < n->inputs.len; k++) {
      const char *stat = n->inputs.items[k + 2];
      bool init = false;
      for (size_t j = 0; j < b->g->initializers.len && !init; j++) init = strcmp(b->g->initializers.items[j]->name, stat) == 0;
      if (!init) continue;
      const char *next = gb_ensure_output(b, n, k, k == 1 ? ":running_mean" : ":running_var");
      if (!next) return b->rc;
      if (out->n_state == cap) {
        cap = cap ? 2 * cap : 4;
        const char **s = bbi_arena_alloc(b->m->arena, cap * sizeof *s), **nx = bbi_arena_alloc(b->m->arena, cap * sizeof *nx);
        if (!s || !nx) return oom(b);
        if (out->n_state) memcpy(s, out->state, out->n_state * sizeof *s), memcpy(nx, out->state_next, out->n_state * sizeof *nx);
        out->state = s, out->state_next = nx;
      }
      out->state[out->n_state] = stat;
      out->state_next[out->n_state++] = next;
    }
  }
  return 0;
}

/* The outputs "<input>_grad" of the inputs whose gradient is asked for (zeros, with a
 * warning, for an input the roots do not depend on). */
static int input_grads(gb *b, bb_grad_graph *out) {
  size_t n = 0;
  for (size_t i = 0; i < b->n_values; i++) n += b->values[i]->grad_input;
  out->inputs = bbi_arena_alloc(b->m->arena, (n + 1) * sizeof *out->inputs);
  out->input_grads = bbi_arena_alloc(b->m->arena, (n + 1) * sizeof *out->input_grads);
  if (!out->inputs || !out->input_grads) return oom(b);
  for (size_t i = 0; i < b->g->inputs.len && !b->rc; i++) {
    gb_value *v = gb_val(b, b->g->inputs.items[i]->name);
    if (!v || !v->grad_input) continue;
    const char *g;
    if (v->n_contrib) {
      g = param_grad(b, v);
    } else {
      if (warn(b, gb_printf(b, "input %s does not reach %s; its gradient is zeros", v->name, b->roots_label))) return b->rc;
      bb_ir_node *id = gb_new(b, "Identity", NULL, 1, 1, gb_zeros_like(b, v->name));
      gb_rename_output(b, id, 0, gb_printf(b, "%s_grad", v->name));
      g = gb_add(b, id);
    }
    out->inputs[out->n_input_grads] = v->name;
    out->input_grads[out->n_input_grads++] = g;
  }
  return b->rc;
}

static int finish(gb *b, size_t n_fwd, const char *loss, bb_grad_graph *out) {
  size_t n_params = 0;
  for (size_t k = 0; k < b->g->initializers.len; k++) {
    gb_value *v = gb_val(b, b->g->initializers.items[k]->name);
    if (!v->is_param) continue;
    if (v->active) {
      n_params++;
      continue;
    }
    if (warn(b, gb_printf(b, "parameter %s does not reach %s; it is left out of training", v->name, b->roots_label)))
      return b->rc;
  }
  out->params = bbi_arena_alloc(b->m->arena, (n_params + 1) * sizeof *out->params);
  out->grads = bbi_arena_alloc(b->m->arena, (n_params + 1) * sizeof *out->grads);
  if (!out->params || !out->grads) return oom(b);
  b->prefix = "grad";
  for (size_t k = 0; k < b->g->initializers.len && !b->rc; k++) {
    gb_value *v = gb_val(b, b->g->initializers.items[k]->name);
    if (!v->is_param || !v->active) continue;
    out->params[out->n_params] = v->name;
    out->grads[out->n_params++] = param_grad(b, v);
  }
  if (b->rc || input_grads(b, out) || collect_state(b, n_fwd, out)) return b->rc;
  /* outputs: the loss, the gradients, the state updates, the inputs' gradients, then the
   * graph's own */
  bb_vilist own = b->g->outputs;
  memset(&b->g->outputs, 0, sizeof b->g->outputs);
  if (loss && add_output(b, loss)) return b->rc;
  for (size_t i = 0; i < out->n_params; i++)
    if (add_output(b, out->grads[i])) return b->rc;
  for (size_t i = 0; i < out->n_state; i++)
    if (add_output(b, out->state_next[i])) return b->rc;
  for (size_t i = 0; i < out->n_input_grads; i++)
    if (add_output(b, out->input_grads[i])) return b->rc;
  for (size_t i = 0; i < own.len; i++)
    if ((!loss || strcmp(own.items[i]->name, loss) != 0) && BBI_ARENA_PUSH(b->m->arena, &b->g->outputs, own.items[i]))
      return oom(b);
  if (out->prediction && !bb_vilist_find(&b->g->outputs, out->prediction) && add_output(b, out->prediction)) return b->rc;
  for (size_t i = 0; i < out->n_upstream; i++)
    if (!bb_vilist_find(&b->g->outputs, out->upstream_outputs[i]) && add_output(b, out->upstream_outputs[i])) return b->rc;
  if (b->grad_domain && bb_opset_set(b->m, &b->m->opsets, BB_GRAD_DOMAIN, 1)) return oom(b);
  out->loss = loss;
  out->seed = b->seed;
  out->n_warnings = b->warnings.len;
  out->warnings = (const char **)b->warnings.items;
  return 0;
}

/* ---- the entry point ------------------------------------------------------------------------ */

int gb_copy_model(const bb_model *model, const bb_allocator *alloc, bb_model **out, bb_error *err) {
  uint8_t *bytes = NULL;
  size_t len = 0;
  *out = NULL;
  int rc = bb_model_encode(model, &bytes, &len, err);
  if (!rc) rc = bb_model_decode(bytes, len, alloc, NULL, out, err);
  bb_buffer_free(bbi_arena_allocator(model->arena), bytes); /* made with the model's allocator */
  return rc ? bb_error_prefix(err, "copying the model: ") : 0;
}

int gb_open(gb *b, const bb_model *model, const bb_allocator *alloc, bb_error *err) {
  memset(b, 0, sizeof *b);
  int rc = gb_copy_model(model, alloc, &b->m, err);
  if (rc) return rc;
  b->g = b->m->graph;
  b->opset = bb_opset_get(&b->m->opsets, "");
  b->alloc = alloc;
  b->err = err;
  b->scratch = bbi_arena_new(alloc);
  bbi_strmap_init(&b->ids, alloc);
  if (!b->scratch) oom(b);
  if (!b->g) gb_fail(b, BB_ERR_INVALID_ARGUMENT, "the model has no main graph");
  if (b->rc) {
    gb_close(b);
    bb_model_free(b->m);
  }
  return b->rc;
}

void gb_close(gb *b) {
  for (size_t i = 0; i < b->n_values; i++) bb_tensor_release(b->values[i]->known);
  bbi_mem_free(b->alloc, b->values);
  bbi_mem_free(b->alloc, b->symbol_names);
  bbi_strmap_free(&b->ids);
  bbi_arena_free(b->scratch);
  b->values = NULL, b->symbol_names = NULL, b->scratch = NULL, b->n_values = 0;
}

static const char *first_output(gb *b, const bb_grad_options *opt) {
  const char *name = opt->output;
  if (!name) {
    if (!b->g->outputs.len) {
      gb_fail(b, BB_ERR_INVALID_ARGUMENT, "the graph has no outputs");
      return NULL;
    }
    name = b->g->outputs.items[0]->name;
  }
  if (!gb_val(b, name)) {
    gb_fail(b, BB_ERR_NOT_FOUND, "the graph has no value named %s", name);
    return NULL;
  }
  return gb_val(b, name)->name;
}

static int check_loss(gb *b, const char *loss) {
  gb_value *v = gb_val(b, loss);
  if (!is_float(v->dtype))
    return gb_fail(b, BB_ERR_TYPE, "the loss %s is %s; it must be a floating-point scalar", loss,
                   bb_dtype_name(v->dtype) ? bb_dtype_name(v->dtype) : "of an unknown type");
  if (gb_val_numel(v) != 1)
    return gb_fail(b, BB_ERR_TYPE, "the loss %s must be a scalar (one element); its shape is %s", loss,
                   v->rank < 0 ? "not known" : "not [] or all ones");
  if (!v->requires_grad) {
    if (v->cut)
      return gb_fail(b, BB_ERR_TYPE,
                     "the loss %s depends on parameter %s only through values without gradients: the path loses "
                     "its gradient at %s",
                     loss, v->origin ? v->origin : "?", gb_node_label(b, v->cut));
    return gb_fail(b, BB_ERR_INVALID_ARGUMENT, "the loss %s depends on no trainable parameter", loss);
  }
  return 0;
}

/* BB_GRAD_LOSS_UPSTREAM: the values whose gradients come in become the roots, each with a
 * new input of its type for d loss / d value, named in *seeds. */
static int add_upstream(gb *b, const bb_grad_options *opt, const char *output, bb_grad_graph *out, const char ***seeds) {
  size_t n = opt->upstream ? opt->n_upstream : 1;
  if (!n) return gb_fail(b, BB_ERR_INVALID_ARGUMENT, "BB_GRAD_LOSS_UPSTREAM needs at least one value whose gradient comes in");
  b->roots = bbi_arena_alloc(b->m->arena, n * sizeof *b->roots);
  *seeds = bbi_arena_alloc(b->m->arena, n * sizeof **seeds);
  if (!b->roots || !*seeds) return oom(b);
  for (size_t i = 0; i < n; i++) {
    const char *name = opt->upstream ? opt->upstream[i] : output;
    gb_value *v = name ? gb_val(b, name) : NULL;
    if (!v) return gb_fail(b, BB_ERR_NOT_FOUND, "the graph has no value named %s", name ? name : "(null)");
    if (!bb_nodelist_producer(&b->g->nodes, name))
      return gb_fail(b, BB_ERR_INVALID_ARGUMENT, "%s is not computed by the graph; its gradient cannot come in", name);
    for (size_t k = 0; k < i; k++)
      if (strcmp(b->roots[k], v->name) == 0) return gb_fail(b, BB_ERR_INVALID_ARGUMENT, "%s is listed twice as upstream", name);
    const char *in = gb_fresh_name(b, gb_printf(b, "%s_upstream_grad", name));
    gb_value *g = in ? gb_val_add(b, in) : NULL;
    if (!g) return b->rc;
    gb_val_set_shape(g, v->dtype, v->rank, v->dims);
    bb_type *type = gb_val_type(b, g);
    if (!type || !bb_vilist_add(b->m, &b->g->inputs, in, type)) return oom(b);
    b->roots[i] = v->name;
    (*seeds)[i] = in;
  }
  b->n_roots = out->n_upstream = n;
  out->upstream_outputs = b->roots;
  out->upstream = *seeds;
  out->kind = BB_GRAD_LOSS_UPSTREAM;
  b->roots_label = n == 1 ? gb_printf(b, "the output %s", b->roots[0]) : gb_printf(b, "the outputs %s, ...", b->roots[0]);
  return b->roots_label ? 0 : oom(b);
}

/* An upstream root must be floating point and carry a gradient from something trained or
 * from an input whose gradient is asked for. */
static int check_upstream(gb *b) {
  for (size_t i = 0; i < b->n_roots; i++) {
    gb_value *v = gb_val(b, b->roots[i]);
    if (!is_float(v->dtype))
      return gb_fail(b, BB_ERR_TYPE, "output %s is %s; a gradient comes in only for a floating-point value", v->name,
                     bb_dtype_name(v->dtype) ? bb_dtype_name(v->dtype) : "of an unknown type");
    if (!v->requires_grad)
      return gb_fail(b, BB_ERR_INVALID_ARGUMENT,
                     "output %s depends on no trainable parameter and on no input whose gradient is asked for", v->name);
  }
  return 0;
}

static int build(gb *b, const bb_grad_options *opt, bb_grad_graph *out) {
  if (b->opset < 13)
    return gb_fail(b, BB_ERR_UNSUPPORTED, "the gradient builder needs ai.onnx opset 13 or newer; the model imports %lld",
                   (long long)b->opset);
  if (opt->loss > BB_GRAD_LOSS_UPSTREAM) return gb_fail(b, BB_ERR_INVALID_ARGUMENT, "unknown loss %d", (int)opt->loss);
  if (gb_add_sources(b) || mark_params(b, opt) || mark_grad_inputs(b, opt) || forward(b)) return b->rc;
  const char *output = opt->loss == BB_GRAD_LOSS_UPSTREAM && opt->upstream ? "" : first_output(b, opt);
  const char *loss = output, *target = NULL, **upstream = NULL;
  if (!output) return b->rc;
  if (opt->loss == BB_GRAD_LOSS_UPSTREAM) {
    loss = NULL;
    if (add_upstream(b, opt, output, out, &upstream)) return b->rc;
  } else {
    if (opt->loss != BB_GRAD_LOSS_OUTPUT) {
      if (gb_add_loss(b, opt, output, &target, &loss)) return b->rc;
      out->prediction = output;
      out->target = target;
      out->kind = opt->loss;
    }
    b->roots = &loss;
    b->n_roots = 1;
    if (!(b->roots_label = gb_printf(b, "the loss %s", loss))) return b->rc;
  }
  size_t n_fwd = b->g->nodes.len;
  trace_params(b, n_fwd);
  if ((loss ? check_loss(b, loss) : check_upstream(b)) || mark_active(b, n_fwd) || check_params_reach(b, n_fwd) ||
      backward(b, n_fwd, upstream))
    return b->rc;
  return finish(b, n_fwd, loss, out);
}

int bb_grad_build(const bb_model *model, const bb_grad_options *options, const bb_allocator *alloc, bb_grad_graph **out,
                  bb_error *err) {
  *out = NULL;
  if (!alloc) alloc = bb_default_allocator();
  bb_grad_options opt;
  memset(&opt, 0, sizeof opt);
  if (options) {
    if (options->struct_size < sizeof options->struct_size || options->struct_size > sizeof opt)
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "grad options: struct_size %zu (this library knows %zu)",
                          options->struct_size, sizeof opt);
    memcpy(&opt, options, options->struct_size);
  }
  opt.struct_size = sizeof opt;
  options = &opt;
  if (!model) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "no model");
  gb b;
  int rc = gb_open(&b, model, alloc, err);
  if (rc) return rc;
  bb_grad_graph *g = bbi_mem_calloc(alloc, 1, sizeof *g);
  if (!g) oom(&b);
  else build(&b, options, g);
  gb_close(&b);
  if (b.rc) {
    bbi_mem_free(alloc, g);
    bb_model_free(b.m);
    return b.rc;
  }
  g->model = b.m;
  g->alloc = alloc;
  *out = g;
  return 0;
}

void bb_grad_graph_free(bb_grad_graph *graph) {
  if (!graph) return;
  bb_model_free(graph->model);
  bbi_mem_free(graph->alloc, graph);
}
