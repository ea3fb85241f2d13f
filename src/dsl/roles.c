/* Role slot placeholders: each role's methods (their arity, attribute and output types),
 * slot ids, and the typed wrappers. Backend ops are not checked here: which operators a
 * backend runs is declared by its type and checked by the compiler when it is bound. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "dsl/recorder.h"

typedef struct role_method {
  const char *op;
  uint8_t n_inputs, n_outputs;
  uint8_t n_after;                   /* optional trailing inputs: ordering triggers, or a
                                        codec's reference tensor */
  const char *output_type;
  const char *meta_key, *meta_value; /* extra metadata, or NULL */
  const char *int_attr;              /* the required INT attribute, or NULL */
} role_method;

static const role_method MODEL_METHODS[] = {
    {"Forward", 1, 1, 0, BB_TYPE_ABSTRACT, NULL, NULL, NULL},
    {"Backward", 1, 1, 0, BB_TYPE_ABSTRACT, NULL, NULL, NULL},
    {"ComputeLoss", 2, 1, 0, BB_TYPE_ABSTRACT, NULL, NULL, NULL},
    {"ApplyDelta", 1, 1, 0, BB_TYPE_ABSTRACT, NULL, NULL, NULL},
    {"LoadParameters", 1, 1, 0, BB_TYPE_ABSTRACT, NULL, NULL, NULL},
    {"Params", 0, 1, 1, BB_TYPE_ABSTRACT, NULL, NULL, NULL},
    /* local training and evaluation (docs/DEVIATIONS.md) */
    {"Fit", 1, 2, 1, BB_TYPE_ABSTRACT, NULL, NULL, NULL},
    {"Evaluate", 2, 1, 1, BB_TYPE_ABSTRACT, NULL, NULL, NULL},
    /* the model as standalone ONNX bytes */
    {"Export", 0, 1, 1, BB_TYPE_BYTES, NULL, NULL, NULL},
    /* one part of a split model (bb_rec_split, docs/SPLIT.md) */
    {"SplitForward", 1, 3, 0, BB_TYPE_ABSTRACT, NULL, NULL, NULL},
    {"SplitRelay", 2, 1, 0, BB_TYPE_ABSTRACT, NULL, NULL, NULL},
    {"SplitLoss", 2, 2, 0, BB_TYPE_ABSTRACT, NULL, NULL, NULL},
    {"SplitBackward", 2, 1, 0, BB_TYPE_ABSTRACT, NULL, NULL, NULL},
    {"SplitShare", 1, 1, 0, BB_TYPE_ABSTRACT, NULL, NULL, NULL},
};
static const role_method INDEX_METHODS[] = {
    {"Add", 1, 1, 0, BB_TYPE_ABSTRACT, NULL, NULL, NULL},
    {"Search", 1, 1, 0, BB_TYPE_ABSTRACT, NULL, NULL, "k"},
    {"Remove", 1, 1, 0, BB_TYPE_ABSTRACT, NULL, NULL, NULL},
    {"Train", 1, 1, 0, BB_TYPE_TRIGGER, BB_KEY_INDEX_PORT, "samples", NULL},
};
static const role_method AGGREGATOR_METHODS[] = {
    {"Contribute", 2, 1, 0, BB_TYPE_ABSTRACT, NULL, NULL, NULL},
    {"Aggregate", 1, 2, 0, BB_TYPE_ABSTRACT, NULL, NULL, NULL},
};
static const role_method CODEC_METHODS[] = {
    {"Train", 1, 1, 0, BB_TYPE_TRIGGER, BB_KEY_CODEC_PORT, BB_CODEC_PORT_IN, NULL},
    /* Encode(x[, reference]), Decode(y[, reference]) */
    {"Encode", 1, 1, 1, BB_TYPE_ABSTRACT, BB_KEY_CODEC_PORT, BB_CODEC_PORT_OUT, NULL},
    {"Decode", 1, 1, 1, BB_TYPE_ABSTRACT, BB_KEY_CODEC_PORT, BB_CODEC_PORT_IN, NULL},
};
static const role_method DATA_SOURCE_METHODS[] = {
    {"NextBatch", 0, 2, 1, BB_TYPE_ABSTRACT, NULL, NULL, NULL},
    {"Reset", 1, 1, 0, BB_TYPE_ABSTRACT, NULL, NULL, NULL},
    {"OnDataLoaded", 0, 1, 0, BB_TYPE_ABSTRACT, NULL, NULL, NULL},
};
static const role_method PEER_SELECTOR_METHODS[] = {
    {"Sample", 0, 1, 1, BB_TYPE_PEER_ID, NULL, NULL, "n"},
    {"CurrentView", 0, 1, 1, BB_TYPE_PEER_ID, NULL, NULL, NULL},
};

/* A role as the recorder sees it: its vocabulary (name, trait, op domain) and methods. */
typedef struct role_info {
  bb_role role;
  const char *name, *trait, *domain;
  const role_method *methods;
  size_t n_methods;
} role_info;

static const struct {
  bb_role role;
  const role_method *methods;
  size_t n_methods;
} METHODS[] = {
#define ROLE_METHODS(r, a) {r, a, sizeof a / sizeof a[0]}
    {BB_ROLE_BACKEND, NULL, 0},
    ROLE_METHODS(BB_ROLE_MODEL, MODEL_METHODS),
    ROLE_METHODS(BB_ROLE_INDEX, INDEX_METHODS),
    ROLE_METHODS(BB_ROLE_AGGREGATOR, AGGREGATOR_METHODS),
    ROLE_METHODS(BB_ROLE_CODEC, CODEC_METHODS),
    ROLE_METHODS(BB_ROLE_DATA_SOURCE, DATA_SOURCE_METHODS),
    ROLE_METHODS(BB_ROLE_PEER_SELECTOR, PEER_SELECTOR_METHODS),
    {BB_ROLE_PROTOCOL, NULL, 0},
#undef ROLE_METHODS
};

/* False for a role the vocabulary does not know. */
static bool find_role(bb_role role, role_info *out) {
  if (!bb_role_name(role)) return false;
  *out = (role_info){role, bb_role_name(role), bb_role_trait(role), bb_role_domain(role), NULL, 0};
  for (size_t i = 0; i < sizeof METHODS / sizeof METHODS[0]; i++)
    if (METHODS[i].role == role) out->methods = METHODS[i].methods, out->n_methods = METHODS[i].n_methods;
  return true;
}

/* ---- slots ---------------------------------------------------------------------- */

/* True when the slot is well formed; *ri is then its role. */
static bool check_slot(bb_rec *r, const bb_slot *slot, role_info *ri) {
  if (!slot) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "slot is NULL");
    return false;
  }
  if (!find_role(slot->role, ri)) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "slot '%s' has unknown role %d", slot->name ? slot->name : "(unnamed)",
              (int)slot->role);
    return false;
  }
  if (!rec_is_identifier(slot->name)) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "%s slot name '%.*s' is not a C identifier of at most %d characters",
              ri->name, REC_NAME_MAX, slot->name ? slot->name : "(null)", REC_NAME_MAX);
    return false;
  }
  if (slot->peer_class && slot->role != BB_ROLE_PEER_SELECTOR) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "%s slot '%s' has a peer_class; only PeerSelector slots have one",
              ri->name, slot->name);
    return false;
  }
  if (slot->peer_class && strcmp(slot->peer_class, BB_SELF_CLASS) != 0 && !rec_is_identifier(slot->peer_class)) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "PeerSelector slot '%s' has peer class '%.*s'; use \"%s\" or a C identifier",
              slot->name, REC_NAME_MAX, slot->peer_class, BB_SELF_CLASS);
    return false;
  }
  return true;
}

/* The slot's id in this build, minted on first use: that first use also lists
 * "__slot_<id>" among the current function's attributes. Slots are the same slot when
 * their names are. */
static const rec_slot *use_slot(bb_rec *r, const bb_slot *slot, const role_info *ri) {
  for (size_t i = 0; i < r->slots.len; i++) {
    const rec_slot *s = &r->slots.items[i];
    if (strcmp(s->name, slot->name) != 0) continue;
    if (s->role != slot->role) {
      rec_error(r, BB_ERR_EXISTS, "slot '%s' has role %s; it cannot also have role %s", slot->name,
                bb_role_name(s->role), ri->name);
      return NULL;
    }
    return s;
  }
  char attr[32];
  snprintf(attr, sizeof attr, BB_SLOT_ATTR_PREFIX "%" PRIu32, r->next_slot_id);
  rec_slot s = {rec_copy(r, slot->name), slot->role, r->next_slot_id};
  if (!s.name || BBI_ARENA_PUSH(r->scratch, &r->slots, s) ||
      bb_strlist_append(r->model, &rec_cur(r)->fn->attr_names, attr)) {
    rec_nomem(r);
    return NULL;
  }
  r->next_slot_id++;
  return &r->slots.items[r->slots.len - 1];
}

/* ---- the generic call --------------------------------------------------------------- */

static const role_method *find_method(bb_rec *r, const bb_slot *slot, const role_info *ri, const char *method) {
  for (size_t i = 0; i < ri->n_methods; i++)
    if (strcmp(ri->methods[i].op, method) == 0) return &ri->methods[i];
  char list[256] = "";
  for (size_t i = 0; i < ri->n_methods; i++) {
    size_t used = strlen(list);
    snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", ri->methods[i].op);
  }
  rec_error(r, BB_ERR_NOT_FOUND, "%s slot '%s' has no method '%.*s' (%s%s)", ri->name, slot->name, REC_NAME_MAX,
            method, ri->n_methods ? "its methods: " : "",
            ri->n_methods ? list : "Protocol slots have none; protocol ops come from helpers such as bb_rec_announce");
  return NULL;
}

/* Arity and attributes of a role method (a Backend op's are its backend's business). */
static bool check_shape(bb_rec *r, const bb_slot *slot, const role_info *ri, const role_method *rm,
                        size_t n_inputs, const bb_op_attr *attrs, size_t n_attrs, size_t n_outputs) {
  const char *op = rm ? rm->op : NULL;
  if (!rm) {
    if (n_outputs) return true;
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "Backend slot '%s': an op needs at least one output", slot->name);
    return false;
  }
  if (n_inputs < rm->n_inputs || n_inputs > (size_t)rm->n_inputs + rm->n_after || n_outputs != rm->n_outputs) {
    if (rm->n_after)
      rec_error(r, BB_ERR_INVALID_ARGUMENT,
                "%s.%s (slot '%s') takes %u inputs (plus up to %u ordering triggers) and gives %u outputs; called with "
                "%zu and %zu",
                ri->name, op, slot->name, rm->n_inputs, rm->n_after, rm->n_outputs, n_inputs, n_outputs);
    else
      rec_error(r, BB_ERR_INVALID_ARGUMENT,
                "%s.%s (slot '%s') takes %u inputs and gives %u outputs; called with %zu and %zu", ri->name, op,
                slot->name, rm->n_inputs, rm->n_outputs, n_inputs, n_outputs);
    return false;
  }
  bool has_int_attr = false;
  for (size_t i = 0; i < n_attrs; i++) {
    if (!rm->int_attr || !attrs[i].name || strcmp(attrs[i].name, rm->int_attr) != 0 || attrs[i].type != BB_ATTR_INT) {
      rec_error(r, BB_ERR_INVALID_ARGUMENT, "%s.%s (slot '%s') takes %s%s%s; got attribute '%s'", ri->name, op,
                slot->name, rm->int_attr ? "only the INT attribute '" : "no attributes",
                rm->int_attr ? rm->int_attr : "", rm->int_attr ? "'" : "", attrs[i].name ? attrs[i].name : "(null)");
      return false;
    }
    has_int_attr = true;
  }
  if (rm->int_attr && !has_int_attr) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "%s.%s (slot '%s') needs the INT attribute '%s'", ri->name, op, slot->name,
              rm->int_attr);
    return false;
  }
  return true;
}

static bool check_inputs(bb_rec *r, const char *op, bool backend, const bb_value *inputs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (backend && !inputs[i].rec && inputs[i].name && !*inputs[i].name) continue; /* BB_VALUE_OMITTED */
    char what[REC_NAME_MAX + 32];
    snprintf(what, sizeof what, "input %zu of %s", i, op);
    if (!rec_check_value(r, inputs[i], what)) return false;
  }
  return true;
}

int bb_rec_role_call(bb_rec *rec, const bb_slot *slot, const char *method, const bb_value *inputs,
                     size_t n_inputs, const bb_op_attr *attrs, size_t n_attrs, bb_value *outputs,
                     size_t n_outputs) {
  if (outputs) memset(outputs, 0, n_outputs * sizeof *outputs);
  if (!rec) return BB_ERR_INVALID_ARGUMENT;
  if (rec->failed) return rec->error.code;
  role_info role;
  const role_info *ri = &role;
  if (!check_slot(rec, slot, &role)) return rec->error.code;
  if (!method) return rec_error(rec, BB_ERR_INVALID_ARGUMENT, "%s slot '%s': method is NULL", ri->name, slot->name);
  if ((n_inputs && !inputs) || (n_attrs && !attrs) || (n_outputs && !outputs))
    return rec_error(rec, BB_ERR_INVALID_ARGUMENT,
                     "%s slot '%s': %s counts inputs, attributes or outputs it does not give", ri->name, slot->name,
                     method);
  bool backend = slot->role == BB_ROLE_BACKEND;
  const role_method *rm = NULL;
  if (backend) {
    if (!rec_is_identifier(method))
      return rec_error(rec, BB_ERR_INVALID_ARGUMENT,
                       "Backend slot '%s': op '%.*s' is not an ONNX operator name (a C identifier of at most %d "
                       "characters)",
                       slot->name, REC_NAME_MAX, method, REC_NAME_MAX);
  } else if (!(rm = find_method(rec, slot, ri, method))) {
    return rec->error.code;
  }
  if (!check_shape(rec, slot, ri, rm, n_inputs, attrs, n_attrs, n_outputs) ||
      !check_inputs(rec, method, backend, inputs, n_inputs))
    return rec->error.code;

  const rec_slot *s = use_slot(rec, slot, ri);
  if (!s) return rec->error.code;
  char id[16];
  snprintf(id, sizeof id, "%" PRIu32, s->id);
  const char **outs = bbi_arena_alloc(rec->scratch, n_outputs * sizeof *outs);
  if (!outs) return rec_nomem(rec);
  bb_ir_node *n = rec_node_begin(rec, backend ? method : rm->op, ri->domain, inputs, n_inputs);
  if (!n) return rec->error.code;
  for (size_t i = 0; i < n_outputs; i++)
    if (!(outs[i] = rec_mint_name(rec)) || rec_node_output(rec, n, outs[i])) return rec->error.code;
  for (size_t i = 0; i < n_attrs; i++)
    if (rec_set_attr(rec, n, &attrs[i], method)) return rec->error.code;
  if (rec_node_meta(rec, n, BB_KEY_REQUIRED_TRAIT, ri->trait) || rec_node_meta(rec, n, BB_KEY_SLOT_ID, id) ||
      rec_node_meta(rec, n, BB_KEY_SLOT_NAME, s->name) ||
      (rm && rm->meta_key && rec_node_meta(rec, n, rm->meta_key, rm->meta_value)) ||
      (slot->role == BB_ROLE_PEER_SELECTOR &&
       rec_node_meta(rec, n, BB_KEY_PEER_CLASS, slot->peer_class ? slot->peer_class : BB_SELF_CLASS)) ||
      rec_node_push(rec, n))
    return rec->error.code;
  const char *type = backend ? bb_tensor_type(BB_DTYPE_FLOAT) : rm->output_type;
  for (size_t i = 0; i < n_outputs; i++)
    if (!(outputs[i] = rec_define(rec, outs[i], type)).name) {
      memset(outputs, 0, n_outputs * sizeof *outputs);
      return rec->error.code;
    }
  return 0;
}

/* ---- typed wrappers --------------------------------------------------------------- */

static bb_value call1(bb_rec *r, const bb_slot *s, const char *method, const bb_value *in, size_t n_in,
                      const bb_op_attr *attrs, size_t n_attrs) {
  bb_value out;
  bb_rec_role_call(r, s, method, in, n_in, attrs, n_attrs, &out, 1);
  return out;
}

/* Two-output methods: fill whichever outputs the caller wants. */
static int call2(bb_rec *r, const bb_slot *s, const char *method, const bb_value *in, size_t n_in, bb_value *a,
                 bb_value *b) {
  bb_value out[2];
  int rc = bb_rec_role_call(r, s, method, in, n_in, NULL, 0, out, 2);
  if (a) *a = out[0];
  if (b) *b = out[1];
  return rc;
}

bb_value bb_rec_backend(bb_rec *rec, const bb_slot *slot, const char *op, const bb_value *inputs, size_t n_inputs,
                        const bb_op_attr *attrs, size_t n_attrs) {
  return call1(rec, slot, op, inputs, n_inputs, attrs, n_attrs);
}

bb_value bb_rec_model_forward(bb_rec *rec, const bb_slot *slot, bb_value x) {
  return call1(rec, slot, "Forward", &x, 1, NULL, 0);
}
bb_value bb_rec_model_backward(bb_rec *rec, const bb_slot *slot, bb_value grad) {
  return call1(rec, slot, "Backward", &grad, 1, NULL, 0);
}
bb_value bb_rec_model_compute_loss(bb_rec *rec, const bb_slot *slot, bb_value prediction, bb_value target) {
  bb_value in[2] = {prediction, target};
  return call1(rec, slot, "ComputeLoss", in, 2, NULL, 0);
}
bb_value bb_rec_model_apply_delta(bb_rec *rec, const bb_slot *slot, bb_value delta) {
  return call1(rec, slot, "ApplyDelta", &delta, 1, NULL, 0);
}
bb_value bb_rec_model_load_parameters(bb_rec *rec, const bb_slot *slot, bb_value params) {
  return call1(rec, slot, "LoadParameters", &params, 1, NULL, 0);
}
bb_value bb_rec_model_params(bb_rec *rec, const bb_slot *slot) { return call1(rec, slot, "Params", NULL, 0, NULL, 0); }
bb_value bb_rec_model_params_after(bb_rec *rec, const bb_slot *slot, bb_value after) {
  return call1(rec, slot, "Params", &after, 1, NULL, 0);
}
int bb_rec_model_fit(bb_rec *rec, const bb_slot *slot, bb_value params, bb_value *trained, bb_value *samples) {
  return call2(rec, slot, "Fit", &params, 1, trained, samples);
}
bb_value bb_rec_model_evaluate(bb_rec *rec, const bb_slot *slot, bb_value x, bb_value labels) {
  bb_value in[2] = {x, labels};
  return call1(rec, slot, "Evaluate", in, 2, NULL, 0);
}
bb_value bb_rec_model_export(bb_rec *rec, const bb_slot *slot) { return call1(rec, slot, "Export", NULL, 0, NULL, 0); }
bb_value bb_rec_model_export_after(bb_rec *rec, const bb_slot *slot, bb_value after) {
  return call1(rec, slot, "Export", &after, 1, NULL, 0);
}

bb_value bb_rec_index_add(bb_rec *rec, const bb_slot *slot, bb_value vector) {
  return call1(rec, slot, "Add", &vector, 1, NULL, 0);
}
bb_value bb_rec_index_search(bb_rec *rec, const bb_slot *slot, bb_value query, int64_t k) {
  bb_op_attr a = BB_OP_ATTR_INT("k", k);
  return call1(rec, slot, "Search", &query, 1, &a, 1);
}
bb_value bb_rec_index_remove(bb_rec *rec, const bb_slot *slot, bb_value id) {
  return call1(rec, slot, "Remove", &id, 1, NULL, 0);
}
bb_value bb_rec_index_train(bb_rec *rec, const bb_slot *slot, bb_value samples) {
  return call1(rec, slot, "Train", &samples, 1, NULL, 0);
}

bb_value bb_rec_aggregator_contribute(bb_rec *rec, const bb_slot *slot, bb_value contribution, bb_value metadata) {
  bb_value in[2] = {contribution, metadata};
  return call1(rec, slot, "Contribute", in, 2, NULL, 0);
}
int bb_rec_aggregator_aggregate(bb_rec *rec, const bb_slot *slot, bb_value trigger, bb_value *params,
                                bb_value *metadata) {
  return call2(rec, slot, "Aggregate", &trigger, 1, params, metadata);
}

bb_value bb_rec_codec_train(bb_rec *rec, const bb_slot *slot, bb_value samples) {
  return call1(rec, slot, "Train", &samples, 1, NULL, 0);
}
bb_value bb_rec_codec_encode(bb_rec *rec, const bb_slot *slot, bb_value x) {
  return call1(rec, slot, "Encode", &x, 1, NULL, 0);
}
bb_value bb_rec_codec_decode(bb_rec *rec, const bb_slot *slot, bb_value y) {
  return call1(rec, slot, "Decode", &y, 1, NULL, 0);
}
bb_value bb_rec_codec_encode_against(bb_rec *rec, const bb_slot *slot, bb_value x, bb_value reference) {
  bb_value in[2] = {x, reference};
  return call1(rec, slot, "Encode", in, 2, NULL, 0);
}
bb_value bb_rec_codec_decode_against(bb_rec *rec, const bb_slot *slot, bb_value y, bb_value reference) {
  bb_value in[2] = {y, reference};
  return call1(rec, slot, "Decode", in, 2, NULL, 0);
}

int bb_rec_data_source_next_batch(bb_rec *rec, const bb_slot *slot, bb_value *batch, bb_value *labels) {
  return call2(rec, slot, "NextBatch", NULL, 0, batch, labels);
}
int bb_rec_data_source_next_batch_after(bb_rec *rec, const bb_slot *slot, bb_value after, bb_value *batch,
                                        bb_value *labels) {
  return call2(rec, slot, "NextBatch", &after, 1, batch, labels);
}
bb_value bb_rec_data_source_reset(bb_rec *rec, const bb_slot *slot, bb_value trigger) {
  return call1(rec, slot, "Reset", &trigger, 1, NULL, 0);
}
bb_value bb_rec_data_source_on_data_loaded(bb_rec *rec, const bb_slot *slot) {
  return call1(rec, slot, "OnDataLoaded", NULL, 0, NULL, 0);
}

bb_value bb_rec_peer_selector_sample(bb_rec *rec, const bb_slot *slot, int64_t n) {
  bb_op_attr a = BB_OP_ATTR_INT("n", n);
  return call1(rec, slot, "Sample", NULL, 0, &a, 1);
}
bb_value bb_rec_peer_selector_current_view(bb_rec *rec, const bb_slot *slot) {
  return call1(rec, slot, "CurrentView", NULL, 0, NULL, 0);
}
bb_value bb_rec_peer_selector_sample_after(bb_rec *rec, const bb_slot *slot, int64_t n, bb_value after) {
  bb_op_attr a = BB_OP_ATTR_INT("n", n);
  return call1(rec, slot, "Sample", &after, 1, &a, 1);
}
