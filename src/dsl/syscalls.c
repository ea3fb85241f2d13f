/* Syscall helpers: framework ops a Module records directly (pass-through, constants,
 * timers, gates, the address book, registry announcements), and bb_rec_syscall, which
 * records any syscall the runtime implements from one table of their shapes. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "dsl/recorder.h"

bb_value bb_rec_pass_through(bb_rec *rec, bb_value x) {
  bb_value none = {0};
  if (!rec || !rec_check_value(rec, x, "the input of PassThrough")) return none;
  bb_ir_node *n = rec_node_begin(rec, "PassThrough", BB_DOMAIN_SYSCALL, &x, 1);
  return n ? rec_node_end(rec, n, rec_value_type(rec, x)) : none;
}

bb_value bb_rec_constant(bb_rec *rec, const char *label, const char *type, const bb_literal *value) {
  bb_value none = {0};
  if (!rec || rec->failed) return none;
  if (type && !rec_check_type(rec, type)) return none;
  const char *vtype = type ? rec_copy(rec, type) : value ? bb_tensor_type(value->dtype) : NULL;
  bb_tensor_proto *t = rec_literal(rec, value, "Constant");
  if (!t) return none;
  if (!vtype) {
    rec_error(rec, BB_ERR_INVALID_ARGUMENT, "Constant of element type %d needs an explicit type", (int)value->dtype);
    return none;
  }
  bb_ir_node *n = rec_node_begin(rec, "Constant", BB_DOMAIN_SYSCALL, NULL, 0);
  if (!n) return none;
  if (!bb_attr_set_tensor(rec->model, &n->attrs, BB_ATTR_VALUE, t)) {
    rec_nomem(rec);
    return none;
  }
  if (label && rec_node_meta(rec, n, BB_KEY_BOOTSTRAP_SEED, label)) return none;
  return rec_node_end(rec, n, vtype);
}

bb_value bb_rec_interval(bb_rec *rec, int64_t period_ns) {
  bb_value none = {0};
  if (!rec || rec->failed) return none;
  if (period_ns < 0) {
    rec_error(rec, BB_ERR_INVALID_ARGUMENT, "Interval period %lld ns is negative", (long long)period_ns);
    return none;
  }
  bb_ir_node *n = rec_node_begin(rec, "Interval", BB_DOMAIN_SYSCALL, NULL, 0);
  if (!n) return none;
  if (period_ns && !bb_attr_set_int(rec->model, &n->attrs, BB_ATTR_PERIOD_NS, period_ns)) {
    rec_nomem(rec);
    return none;
  }
  return rec_node_end(rec, n, BB_TYPE_TRIGGER);
}

bb_value bb_rec_gate_dispatch(bb_rec *rec, const bb_value *inputs, size_t n_inputs) {
  bb_value none = {0};
  if (!rec || rec->failed) return none;
  if (!n_inputs || !inputs) {
    rec_error(rec, BB_ERR_INVALID_ARGUMENT, "GateDispatch needs at least one input");
    return none;
  }
  for (size_t i = 0; i < n_inputs; i++) {
    char what[64];
    snprintf(what, sizeof what, "input %zu of GateDispatch", i);
    if (!rec_check_value(rec, inputs[i], what)) return none;
  }
  bb_ir_node *n = rec_node_begin(rec, "GateDispatch", BB_DOMAIN_SYSCALL, inputs, n_inputs);
  return n ? rec_node_end(rec, n, BB_TYPE_BYTES) : none;
}

/* A checked value naming one peer: a peer id, or an untyped or abstract value. */
static bool check_peer(bb_rec *r, bb_value peer, const char *op) {
  char what[64];
  snprintf(what, sizeof what, "the peer of %s", op);
  if (!rec_check_value(r, peer, what)) return false;
  if (!rec_is_peer_type(rec_value_type(r, peer), false)) {
    rec_error(r, BB_ERR_TYPE, "%s is value '%s' of type %s; expected %s or an untyped input", what, peer.name,
              rec_value_type(r, peer), BB_TYPE_PEER_ID);
    return false;
  }
  return true;
}

/* op(peer[, second]) in `domain`, one output of `type`. */
static bb_value peer_op(bb_rec *r, const char *op, const char *domain, bb_value peer, const bb_value *second,
                        const char *type) {
  bb_value none = {0};
  if (!r || !check_peer(r, peer, op)) return none;
  char what[64];
  snprintf(what, sizeof what, "input 1 of %s", op);
  if (second && !rec_check_value(r, *second, what)) return none;
  bb_value in[2] = {peer, second ? *second : none};
  bb_ir_node *n = rec_node_begin(r, op, domain, in, second ? 2 : 1);
  return n ? rec_node_end(r, n, type) : none;
}

bb_value bb_rec_address_book_insert(bb_rec *rec, bb_value peer, bb_value address) {
  return peer_op(rec, "Insert", BB_DOMAIN_ADDRESS_BOOK, peer, &address, BB_TYPE_TRIGGER);
}

bb_value bb_rec_address_book_insert_many(bb_rec *rec, bb_value peer, bb_value addresses) {
  return peer_op(rec, "InsertMany", BB_DOMAIN_ADDRESS_BOOK, peer, &addresses, BB_TYPE_TRIGGER);
}

bb_value bb_rec_address_book_lookup(bb_rec *rec, bb_value peer) {
  return peer_op(rec, "Lookup", BB_DOMAIN_ADDRESS_BOOK, peer, NULL, BB_TYPE_ADDRESS_VEC);
}

bb_value bb_rec_announce(bb_rec *rec, bb_value server_peer) {
  bb_value none = {0};
  if (!rec || !check_peer(rec, server_peer, "Announce")) return none;
  bb_ir_node *n = rec_node_begin(rec, "Announce", BB_DOMAIN_GLOBAL_REGISTRY, &server_peer, 1);
  if (!n || rec_node_meta(rec, n, BB_KEY_INPUT_SERVER_PEER, server_peer.name)) return none;
  return rec_node_end(rec, n, BB_TYPE_TRIGGER);
}

/* ---- every syscall, from one table ------------------------------------------------- */

#define SYS_ANY UINT8_MAX /* inputs: no upper bound; outputs: as many as the caller asks, at least one */

/* How a syscall's outputs are typed. */
typedef enum sys_output {
  SYS_OUT_TRIGGER,  /* bb.trigger */
  SYS_OUT_BYTES,    /* untyped bytes */
  SYS_OUT_ABSTRACT, /* a value the compiler may refine (counters, timestamps, tokens) */
  SYS_OUT_SAME,     /* input 0's type */
  SYS_OUT_SAME_ALL  /* the inputs' type when they all share one, else abstract */
} sys_output;

/* An attribute a syscall reads: required or not, and for INT attributes the least value. */
typedef struct sys_attr {
  const char *name;
  bb_attr_type type;
  bool required;
  int64_t min;
} sys_attr;

typedef struct sys_spec {
  const char *op;
  uint8_t min_inputs, max_inputs, n_outputs;
  sys_output output;
  bool stores_bytes; /* input 0 is kept as Bytes (the runtime refuses other kinds) */
  bool topic;        /* the name attribute is an application topic: no reserved prefix */
  sys_attr attrs[2];
} sys_spec;

#define NAMED(attr) {{attr, BB_ATTR_STRING, true, 0}}
static const sys_spec SYSCALLS[] = {
    {"PassThrough", 1, 1, 1, SYS_OUT_SAME, false, false, {{0}}},
    {"Tee", 1, 1, SYS_ANY, SYS_OUT_SAME, false, false, {{0}}},
    {"Gate", 1, SYS_ANY, 1, SYS_OUT_SAME, false, false, {{0}}},
    {"Any", 1, SYS_ANY, 1, SYS_OUT_SAME_ALL, false, false, {{"group", BB_ATTR_STRING, false, 0}}},
    {"OnTrigger", 1, 1, 1, SYS_OUT_TRIGGER, false, false, {{0}}},
    {"Pulse", 0, SYS_ANY, 1, SYS_OUT_TRIGGER, false, false, {{0}}},
    {"EventSource", 0, SYS_ANY, 1, SYS_OUT_TRIGGER, false, false, {{0}}},
    {"LifecyclePhase", 0, SYS_ANY, 1, SYS_OUT_TRIGGER, false, false, {{0}}},
    {"GateDispatch", 1, SYS_ANY, 1, SYS_OUT_BYTES, false, false, {{0}}},
    {"Interval", 0, 0, 1, SYS_OUT_TRIGGER, false, false, {{BB_ATTR_PERIOD_NS, BB_ATTR_INT, false, 1}}},
    {"Clock", 0, SYS_ANY, 1, SYS_OUT_ABSTRACT, false, false, {{0}}},
    {"RngU64", 0, SYS_ANY, 1, SYS_OUT_ABSTRACT, false, false, {{0}}},
    {"After", 0, SYS_ANY, 1, SYS_OUT_TRIGGER, false, false, {{"delay_ns", BB_ATTR_INT, false, 0}}},
    {"Sleep", 0, SYS_ANY, 1, SYS_OUT_TRIGGER, false, false, {{"duration_ns", BB_ATTR_INT, false, 0}}},
    {"Limit.Acquire", 0, SYS_ANY, 1, SYS_OUT_TRIGGER, false, false,
     {{"name", BB_ATTR_STRING, true, 0}, {"n", BB_ATTR_INT, false, 1}}},
    {"Limit.Release", 0, SYS_ANY, 1, SYS_OUT_TRIGGER, false, false, NAMED("name")},
    {"Serialize.Enqueue", 1, 1, 1, SYS_OUT_TRIGGER, true, false, NAMED("queue")},
    {"Serialize.Dequeue", 0, SYS_ANY, 1, SYS_OUT_BYTES, false, false, NAMED("queue")},
    {"Hold.Stash", 1, 1, 0, SYS_OUT_BYTES, true, false, NAMED("slot")},
    {"Hold.Flush", 0, SYS_ANY, 1, SYS_OUT_BYTES, false, false, NAMED("slot")},
    {"Record", 1, 1, 0, SYS_OUT_BYTES, true, false, NAMED("name")},
    {"AppEmit", 1, 1, 0, SYS_OUT_BYTES, false, true, NAMED("name")},
    {"AppNotify", 0, SYS_ANY, 0, SYS_OUT_BYTES, false, true, NAMED("name")},
    {"IncrMetric", 0, SYS_ANY, 0, SYS_OUT_BYTES, false, false,
     {{"name", BB_ATTR_STRING, true, 0}, {"delta", BB_ATTR_INT, false, 0}}},
    {"CorrelateTag", 0, SYS_ANY, 1, SYS_OUT_ABSTRACT, false, false, {{0}}},
    {"BootstrapDispatch", 0, SYS_ANY, 1, SYS_OUT_ABSTRACT, false, false, {{0}}},
    {"BootstrapOutput", 1, 1, 1, SYS_OUT_ABSTRACT, false, false, {{0}}},
};
#undef NAMED
#define N_SYSCALLS (sizeof SYSCALLS / sizeof SYSCALLS[0])

/* Syscalls the compiler inserts (gates and deadlines): a Module never records them. */
static const char *const COMPILER_SYSCALLS[] = {"DeadlineCheck",   "DeadlineMatch",  "DedupGateRx",     "PeerHealthGateRx",
                                                "BackoffGateRx",   "PeerHealthGateTx", "BackoffGateTx"};

size_t bb_rec_syscall_count(void) { return N_SYSCALLS; }

const char *bb_rec_syscall_name(size_t i) { return i < N_SYSCALLS ? SYSCALLS[i].op : NULL; }

static const sys_spec *find_syscall(bb_rec *r, const char *op) {
  for (size_t i = 0; i < N_SYSCALLS; i++)
    if (strcmp(SYSCALLS[i].op, op) == 0) return &SYSCALLS[i];
  for (size_t i = 0; i < sizeof COMPILER_SYSCALLS / sizeof *COMPILER_SYSCALLS; i++)
    if (strcmp(COMPILER_SYSCALLS[i], op) == 0) {
      rec_error(r, BB_ERR_INVALID_ARGUMENT, "syscall %s is inserted by the compiler; a Module does not record it", op);
      return NULL;
    }
  if (strcmp(op, "Constant") == 0) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "syscall Constant takes a literal: record it with bb_rec_constant");
    return NULL;
  }
  char list[640] = "";
  for (size_t i = 0; i < N_SYSCALLS; i++) {
    size_t used = strlen(list);
    snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", SYSCALLS[i].op);
  }
  rec_error(r, BB_ERR_NOT_FOUND, "'%.*s' is not a syscall the runtime implements (its syscalls: %s, Constant)",
            REC_NAME_MAX, op, list);
  return NULL;
}

static const sys_attr *find_attr(const sys_spec *s, const char *name) {
  for (size_t k = 0; k < 2 && s->attrs[k].name; k++)
    if (strcmp(s->attrs[k].name, name) == 0) return &s->attrs[k];
  return NULL;
}

/* What a syscall's attributes may be, for messages: "'name' (STRING), 'n' (INT)". */
static void describe_attrs(const sys_spec *s, char *buf, size_t size) {
  buf[0] = '\0';
  for (size_t k = 0; k < 2 && s->attrs[k].name; k++) {
    size_t used = strlen(buf);
    snprintf(buf + used, size - used, "%s'%s' (%s)", k ? ", " : "", s->attrs[k].name,
             bb_attr_type_name(s->attrs[k].type));
  }
}

static bool reserved_topic(const char *t) {
  return strncmp(t, "bb.", 3) == 0 || strncmp(t, BB_DOMAIN_FRAMEWORK ".", sizeof BB_DOMAIN_FRAMEWORK) == 0;
}

/* The attributes given against the spec: only its own, each of its type, the required
 * ones present, INT ones at least their least value, names non-empty. */
static bool check_sys_attrs(bb_rec *r, const sys_spec *s, const bb_op_attr *attrs, size_t n) {
  char allowed[128];
  describe_attrs(s, allowed, sizeof allowed);
  for (size_t i = 0; i < n; i++) {
    const bb_op_attr *a = &attrs[i];
    const sys_attr *want = a->name ? find_attr(s, a->name) : NULL;
    if (!want || a->type != want->type) {
      rec_error(r, BB_ERR_INVALID_ARGUMENT, "syscall %s takes %s%s; got attribute '%s' (%s)", s->op,
                allowed[0] ? "the attributes " : "no attributes", allowed, a->name ? a->name : "(null)",
                bb_attr_type_name(a->type) ? bb_attr_type_name(a->type) : "(unknown type)");
      return false;
    }
    if (want->type == BB_ATTR_INT && a->i < want->min) {
      rec_error(r, BB_ERR_INVALID_ARGUMENT, "syscall %s: attribute '%s' is %" PRId64 "; it must be at least %" PRId64,
                s->op, a->name, a->i, want->min);
      return false;
    }
    if (want->type == BB_ATTR_STRING && (!a->s || !*a->s)) {
      rec_error(r, BB_ERR_INVALID_ARGUMENT, "syscall %s: attribute '%s' is empty", s->op, a->name);
      return false;
    }
    if (want->type == BB_ATTR_STRING && s->topic && reserved_topic(a->s)) {
      rec_error(r, BB_ERR_INVALID_ARGUMENT, "syscall %s: topic '%s' uses a reserved prefix (bb., %s.)", s->op, a->s,
                BB_DOMAIN_FRAMEWORK);
      return false;
    }
  }
  for (size_t k = 0; k < 2 && s->attrs[k].name; k++) {
    if (!s->attrs[k].required) continue;
    bool given = false;
    for (size_t i = 0; i < n && !given; i++) given = strcmp(attrs[i].name, s->attrs[k].name) == 0;
    if (!given) {
      rec_error(r, BB_ERR_INVALID_ARGUMENT, "syscall %s needs the %s attribute '%s'", s->op,
                bb_attr_type_name(s->attrs[k].type), s->attrs[k].name);
      return false;
    }
  }
  return true;
}

static bool check_sys_inputs(bb_rec *r, const sys_spec *s, const bb_value *inputs, size_t n_inputs,
                             size_t n_outputs) {
  bool variadic_out = s->n_outputs == SYS_ANY;
  if (n_inputs < s->min_inputs || (s->max_inputs != SYS_ANY && n_inputs > s->max_inputs) ||
      (variadic_out ? n_outputs == 0 : n_outputs != s->n_outputs)) {
    char ins[48], outs[32];
    if (s->max_inputs == SYS_ANY) snprintf(ins, sizeof ins, "at least %u inputs", s->min_inputs);
    else if (s->max_inputs == s->min_inputs) snprintf(ins, sizeof ins, "%u inputs", s->min_inputs);
    else snprintf(ins, sizeof ins, "%u to %u inputs", s->min_inputs, s->max_inputs);
    if (variadic_out) snprintf(outs, sizeof outs, "one or more outputs");
    else snprintf(outs, sizeof outs, "%u outputs", s->n_outputs);
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "syscall %s takes %s and gives %s; called with %zu and %zu", s->op, ins, outs,
              n_inputs, n_outputs);
    return false;
  }
  for (size_t i = 0; i < n_inputs; i++) {
    char what[REC_NAME_MAX + 32];
    snprintf(what, sizeof what, "input %zu of %s", i, s->op);
    if (!rec_check_value(r, inputs[i], what)) return false;
  }
  if (s->stores_bytes) {
    const char *type = rec_value_type(r, inputs[0]);
    if (*type && strcmp(type, BB_TYPE_BYTES) != 0) {
      rec_error(r, BB_ERR_TYPE, "syscall %s keeps Bytes; input 0 is value '%s' of type %s", s->op, inputs[0].name,
                type);
      return false;
    }
  }
  return true;
}

static const char *sys_output_type(const bb_rec *r, const sys_spec *s, const bb_value *inputs, size_t n_inputs) {
  switch (s->output) {
  case SYS_OUT_TRIGGER: return BB_TYPE_TRIGGER;
  case SYS_OUT_BYTES: return BB_TYPE_BYTES;
  case SYS_OUT_SAME: return rec_value_type(r, inputs[0]);
  case SYS_OUT_SAME_ALL:
    for (size_t i = 1; i < n_inputs; i++)
      if (strcmp(rec_value_type(r, inputs[i]), rec_value_type(r, inputs[0])) != 0) return BB_TYPE_ABSTRACT;
    return rec_value_type(r, inputs[0]);
  default: return BB_TYPE_ABSTRACT;
  }
}

int bb_rec_syscall(bb_rec *rec, const char *op, const bb_value *inputs, size_t n_inputs, const bb_op_attr *attrs,
                   size_t n_attrs, bb_value *outputs, size_t n_outputs) {
  if (outputs) memset(outputs, 0, n_outputs * sizeof *outputs);
  if (!rec) return BB_ERR_INVALID_ARGUMENT;
  if (rec->failed) return rec->error.code;
  if (!op) return rec_error(rec, BB_ERR_INVALID_ARGUMENT, "syscall name is missing");
  if ((n_inputs && !inputs) || (n_attrs && !attrs) || (n_outputs && !outputs))
    return rec_error(rec, BB_ERR_INVALID_ARGUMENT, "syscall %.*s counts inputs, attributes or outputs it does not give",
                     REC_NAME_MAX, op);
  const sys_spec *s = find_syscall(rec, op);
  if (!s || !check_sys_inputs(rec, s, inputs, n_inputs, n_outputs) || !check_sys_attrs(rec, s, attrs, n_attrs))
    return rec->error.code;
  const char *type = sys_output_type(rec, s, inputs, n_inputs);
  const char **outs = bbi_arena_alloc(rec->scratch, (n_outputs + 1) * sizeof *outs);
  if (!outs) return rec_nomem(rec);
  bb_ir_node *n = rec_node_begin(rec, s->op, BB_DOMAIN_SYSCALL, inputs, n_inputs);
  if (!n) return rec->error.code;
  for (size_t i = 0; i < n_attrs; i++)
    if (rec_set_attr(rec, n, &attrs[i], s->op)) return rec->error.code;
  for (size_t i = 0; i < n_outputs; i++)
    if (!(outs[i] = rec_mint_name(rec)) || rec_node_output(rec, n, outs[i])) return rec->error.code;
  if (rec_node_push(rec, n)) return rec->error.code;
  for (size_t i = 0; i < n_outputs; i++)
    if (!(outputs[i] = rec_define(rec, outs[i], type)).name) {
      memset(outputs, 0, n_outputs * sizeof *outputs);
      return rec->error.code;
    }
  return 0;
}
