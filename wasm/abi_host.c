/* bytesandbrains — components whose methods run in the host (JavaScript): the concrete
 * types the host registers, the registry every node installs from, and the calls the host
 * makes back while one of its callbacks runs — as much as a C component reaches through
 * its bb_ctx: ops, control-plane messages, timers, events, counters, dependencies, and
 * state for snapshots. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi_internal.h"
#include "bb/roles.h"
#include "bb_wasm.h"
#include "programs/fixtures.h"

/* One type whose methods run in the host. Its bb_component_type carries the type itself
 * as type_data, so one create function serves every host type. */
typedef struct host_type {
  bb_component_type type;
  int32_t id; /* what the host's imports are called with */
  char name[BBW_NAME_MAX];
  char protocol_domain[BBW_NAME_MAX];
} host_type;

typedef struct host_instance {
  int32_t id; /* the host's instance id */
} host_instance;

static int32_t n_host_types;
/* The shipped types, the examples' fixtures (so that every example installs) and the
 * host's; made on first use, and alive as long as the module (with the host types). */
static bb_registry *registry;

/* The callback in progress (callbacks nest when one component calls another): what it
 * may reach — the node (ctx: invoke, on_message, on_timer), the op (invoke) or the state
 * being saved (save). */
typedef struct host_call {
  bb_ctx *ctx;
  const bb_op_call *call;
  uint64_t deferred; /* the command, once deferred */
  const bb_allocator *save_alloc;
  uint8_t *state;
  size_t state_len;
  int32_t error_code;
  char error[BB_ERROR_MESSAGE_MAX];
} host_call;

static host_call *current_call;

/* Explains a failed component callback in the bb_error the runtime handed it; returns
 * code. */
__attribute__((format(printf, 3, 4))) static int component_fail(bb_error *err, int code, const char *format, ...) {
  if (err == NULL) return code;
  err->code = code;
  va_list args;
  va_start(args, format);
  vsnprintf(err->message, sizeof err->message, format, args);
  va_end(args);
  return code;
}

static int host_create(const bb_component_init *init, void **self, bb_error *err) {
  const host_type *t = init->type_data;
  if (t == NULL)
    return component_fail(err, BB_ERR_INVALID_ARGUMENT, "host component for slot `%s`: created without its type",
                          init->slot);
  host_instance *inst = malloc(sizeof *inst);
  if (inst == NULL) return component_fail(err, BB_ERR_NOMEM, "%s: out of memory", t->name);
  host_call frame = {0};
  host_call *outer = current_call;
  current_call = &frame;
  int32_t id = bb_host_create(t->id, init->slot, init->config ? init->config : "", init->config_len, init->seed);
  current_call = outer;
  if (id <= 0) {
    free(inst);
    int code = id < 0 ? id : BB_ERR_INVALID_ARGUMENT;
    return component_fail(err, code, "%s for slot `%s`: %s", t->name, init->slot,
                          frame.error[0] ? frame.error : "the host's create failed");
  }
  inst->id = id;
  *self = inst;
  return 0;
}

static void host_destroy(void *self) {
  host_instance *inst = self;
  if (inst == NULL) return;
  bb_host_destroy(inst->id);
  free(inst);
}

static int host_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  const host_instance *inst = self;
  host_call frame = {.ctx = ctx, .call = call};
  host_call *outer = current_call;
  current_call = &frame;
  int32_t rc = bb_host_invoke(inst->id, call->op_type, (int32_t)call->n_inputs, (int32_t)call->n_outputs);
  current_call = outer;
  if (rc < 0) {
    for (size_t i = 0; i < call->n_outputs; i++) {
      bb_val_release(call->outputs[i]);
      call->outputs[i] = NULL;
    }
    return component_fail(err, rc, "%s", frame.error[0] ? frame.error : "the host's method failed");
  }
  if (rc == BB_LATER && frame.deferred == 0)
    return component_fail(err, BB_ERR_INVALID_ARGUMENT, "%s: the host answered later without deferring the call",
                          call->op_type);
  return rc == BB_LATER ? BB_LATER : 0;
}

/* Runs a host callback in `frame`; a failure's message goes to err. */
static int finish(host_call *frame, int32_t rc, const char *what, bb_error *err) {
  if (rc >= 0) return 0;
  return component_fail(err, rc, "%s", frame->error[0] ? frame->error : what);
}

static int host_on_message(void *self, bb_ctx *ctx, const char *op, const bb_peer_id *from, const uint8_t *payload,
                           size_t len, bb_error *err) {
  const host_instance *inst = self;
  char peer[BBW_PEER_TEXT_MAX];
  bb_peer_id_to_text(from, peer, sizeof peer);
  host_call frame = {.ctx = ctx};
  host_call *outer = current_call;
  current_call = &frame;
  int32_t rc = bb_host_on_message(inst->id, op, peer, payload, len);
  current_call = outer;
  return finish(&frame, rc, "the host's on_message failed", err);
}

static int host_on_timer(void *self, bb_ctx *ctx, uint64_t token, bb_error *err) {
  const host_instance *inst = self;
  host_call frame = {.ctx = ctx};
  host_call *outer = current_call;
  current_call = &frame;
  int32_t rc = bb_host_on_timer(inst->id, token);
  current_call = outer;
  return finish(&frame, rc, "the host's on_timer failed", err);
}

static int host_save(const void *self, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err) {
  const host_instance *inst = self;
  host_call frame = {.save_alloc = alloc};
  host_call *outer = current_call;
  current_call = &frame;
  int32_t rc = bb_host_save(inst->id);
  current_call = outer;
  if (rc < 0) {
    if (frame.state != NULL) alloc->free(frame.state, alloc->user_data);
    return finish(&frame, rc, "the host's save failed", err);
  }
  *out = frame.state;
  *len = frame.state_len;
  return 0;
}

static int host_load(void *self, const uint8_t *data, size_t len, bb_error *err) {
  const host_instance *inst = self;
  host_call frame = {0};
  host_call *outer = current_call;
  current_call = &frame;
  int32_t rc = bb_host_load(inst->id, data, len);
  current_call = outer;
  return finish(&frame, rc, "the host's load failed", err);
}

bb_registry *bbw_registry(void) {
  if (registry != NULL) return registry;
  bb_error err;
  bb_error_clear(&err);
  bb_registry *r = bb_registry_new(NULL);
  if (r == NULL) {
    bbw_fail(BB_ERR_NOMEM, "registry: out of memory");
    return NULL;
  }
  int rc = bb_registry_add_shipped(r, &err);
  if (rc == 0) rc = bb_fixtures_register(r, &err);
  if (rc < 0) {
    bb_registry_free(r);
    bbw_fail_from(rc, &err, "registry");
    return NULL;
  }
  registry = r;
  return r;
}

int32_t bb_wasm_host_type_add(const char *name, uint32_t roles, const char *protocol_domain) {
  bbw_error_clear();
  if (name == NULL || name[0] == '\0' || strlen(name) >= BBW_NAME_MAX)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "host type: a name of 1 to %d bytes is needed", BBW_NAME_MAX - 1);
  if (roles == 0 || (roles & ~((1u << (BB_ROLE_PROTOCOL + 1)) - 2u)) != 0)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "host type %s: roles 0x%x are not a set of (1 << bb_role) bits", name,
                    (unsigned)roles);
  size_t domain_len = protocol_domain ? strlen(protocol_domain) : 0;
  size_t prefix = sizeof BB_DOMAIN_PROTOCOL_PREFIX - 1;
  if (domain_len && (domain_len >= BBW_NAME_MAX || domain_len <= prefix ||
                     strncmp(protocol_domain, BB_DOMAIN_PROTOCOL_PREFIX, prefix) != 0))
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "host type %s: protocol domain \"%.*s\" is not " BB_DOMAIN_PROTOCOL_PREFIX
                    "<name>", name, BBW_NAME_MAX, protocol_domain);
  bb_registry *r = bbw_registry();
  if (r == NULL) return bbw_last();
  if (bb_registry_find(r, name) != NULL)
    return bbw_fail(BB_ERR_EXISTS, "host type %s: a type of that name is already registered", name);
  if (n_host_types == BB_WASM_MAX_HOST_TYPES)
    return bbw_fail(BB_ERR_LIMIT, "host type %s: at most %d host types", name, BB_WASM_MAX_HOST_TYPES);
  host_type *t = malloc(sizeof *t);
  if (t == NULL) return bbw_fail(BB_ERR_NOMEM, "host type %s: out of memory", name);
  memcpy(t->name, name, strlen(name) + 1);
  memcpy(t->protocol_domain, domain_len ? protocol_domain : "", domain_len + 1);
  t->id = n_host_types + 1;
  t->type = (bb_component_type){.struct_size = sizeof t->type,
                                .type_name = t->name,
                                .roles = roles,
                                .protocol_domain = domain_len ? t->protocol_domain : NULL,
                                .create = host_create,
                                .destroy = host_destroy,
                                .invoke = host_invoke,
                                .on_message = host_on_message,
                                .on_timer = host_on_timer,
                                .save = host_save,
                                .load = host_load,
                                .type_data = t};
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_registry_add(r, &t->type, &err);
  if (rc < 0) {
    free(t);
    return bbw_fail_from(rc, &err, "host type");
  }
  return ++n_host_types;
}

/* ---- calls back from the host ------------------------------------------------------------ */

/* What a call back needs of the callback in progress. */
typedef enum call_need { NEED_ANY, NEED_CTX, NEED_OP, NEED_SAVE } call_need;

static host_call *call_now(const char *what, call_need need) {
  static const char *const WHEN[] = {"callback", "invoke, on_message or on_timer", "invoke", "save"};
  host_call *c = current_call;
  bool ok = c != NULL && (need == NEED_ANY || (need == NEED_CTX && c->ctx != NULL) ||
                          (need == NEED_OP && c->call != NULL) || (need == NEED_SAVE && c->save_alloc != NULL));
  if (!ok) {
    bbw_fail(BB_ERR_INVALID_ARGUMENT, "%s: only while a host component's %s runs", what, WHEN[need]);
    return NULL;
  }
  return c;
}

int32_t bb_wasm_call_inputs(void) {
  bbw_error_clear();
  bbw_result_clear();
  host_call *c = call_now("call inputs", NEED_OP);
  if (c == NULL) return bbw_last();
  bb_le_writer w = bbw_writer();
  bb_le_write_u64(&w, c->call->n_inputs);
  for (size_t i = 0; i < c->call->n_inputs; i++) bbw_write_value(&w, c->call->inputs[i]);
  return bbw_result_from(&w, "call inputs");
}

/* One attribute's value in the attribute layout; types without one there get none. */
static void write_attr_value(bb_le_writer *w, const bb_attr *a) {
  switch (a->type) {
  case BB_ATTR_INT: bb_le_write_u64(w, (uint64_t)a->i); break;
  case BB_ATTR_FLOAT: bb_le_write_f32(w, a->f); break;
  case BB_ATTR_STRING: bbw_write_field(w, a->s.data, a->s.len); break;
  case BB_ATTR_INTS:
    bb_le_write_u32(w, (uint32_t)a->n_ints);
    for (size_t i = 0; i < a->n_ints; i++) bb_le_write_u64(w, (uint64_t)a->ints[i]);
    break;
  case BB_ATTR_FLOATS:
    bb_le_write_u32(w, (uint32_t)a->n_floats);
    for (size_t i = 0; i < a->n_floats; i++) bb_le_write_f32(w, a->floats[i]);
    break;
  case BB_ATTR_STRINGS:
    bb_le_write_u32(w, (uint32_t)a->n_strings);
    for (size_t i = 0; i < a->n_strings; i++) bbw_write_field(w, a->strings[i].data, a->strings[i].len);
    break;
  default: break;
  }
}

int32_t bb_wasm_call_attributes(void) {
  bbw_error_clear();
  bbw_result_clear();
  host_call *c = call_now("call attributes", NEED_OP);
  if (c == NULL) return bbw_last();
  const bb_attrlist *attrs = c->call->node ? &c->call->node->attrs : NULL;
  size_t n = attrs ? attrs->len : 0;
  bb_le_writer w = bbw_writer();
  bb_le_write_u32(&w, (uint32_t)n);
  for (size_t i = 0; i < n; i++) {
    const bb_attr *a = attrs->items[i];
    bbw_write_text(&w, a->name);
    bb_le_write_u32(&w, (uint32_t)a->type);
    /* a TENSOR would need its literal: it is listed with its type and no value */
    if (a->type != BB_ATTR_TENSOR) write_attr_value(&w, a);
  }
  return bbw_result_from(&w, "call attributes");
}

int32_t bb_wasm_call_set_outputs(const uint8_t *list, size_t len) {
  bbw_error_clear();
  host_call *c = call_now("call outputs", NEED_OP);
  if (c == NULL) return bbw_last();
  bbw_value_list values;
  if (bbw_value_list_decode(list, len, "call outputs", &values) < 0) return bbw_last();
  if (values.n > c->call->n_outputs) {
    size_t n = values.n;
    bbw_value_list_free(&values);
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "call outputs: %zu values for %s's %zu outputs", n, c->call->op_type,
                    c->call->n_outputs);
  }
  for (size_t i = 0; i < values.n; i++) {
    bb_val_release(c->call->outputs[i]);
    c->call->outputs[i] = values.items[i];
    values.items[i] = NULL;
  }
  bbw_value_list_free(&values);
  return BB_OK;
}

uint64_t bb_wasm_call_defer(void) {
  bbw_error_clear();
  host_call *c = call_now("call defer", NEED_OP);
  if (c == NULL) return 0;
  if (c->deferred == 0) c->deferred = bb_ctx_defer(c->ctx);
  return c->deferred;
}

uint64_t bb_wasm_call_now(void) {
  bbw_error_clear();
  host_call *c = call_now("call now", NEED_CTX);
  return c ? bb_ctx_now(c->ctx) : 0;
}

int32_t bb_wasm_call_fail(int32_t code, const char *message) {
  bbw_error_clear();
  host_call *c = call_now("call fail", NEED_ANY);
  if (c == NULL) return bbw_last();
  c->error_code = code < 0 ? code : BB_ERR_INVALID_ARGUMENT;
  size_t len = message ? strlen(message) : 0;
  if (len >= sizeof c->error) len = sizeof c->error - 1;
  if (len) memcpy(c->error, message, len);
  c->error[len] = '\0';
  return BB_OK;
}

/* A peer id as text into the result ("" for none). */
static int32_t peer_result(const bb_peer_id *peer, const char *what) {
  char text[BBW_PEER_TEXT_MAX] = "";
  if (peer != NULL) bb_peer_id_to_text(peer, text, sizeof text);
  bb_le_writer w = bbw_writer();
  bb_le_write(&w, text, strlen(text));
  return bbw_result_from(&w, what);
}

int32_t bb_wasm_call_self(void) {
  bbw_error_clear();
  bbw_result_clear();
  host_call *c = call_now("call self", NEED_CTX);
  return c ? peer_result(bb_ctx_self(c->ctx), "call self") : bbw_last();
}

int32_t bb_wasm_call_source(void) {
  bbw_error_clear();
  bbw_result_clear();
  host_call *c = call_now("call source", NEED_CTX);
  return c ? peer_result(bb_ctx_source(c->ctx), "call source") : bbw_last();
}

uint64_t bb_wasm_call_random(void) {
  bbw_error_clear();
  host_call *c = call_now("call random", NEED_CTX);
  return c ? bb_ctx_random(c->ctx) : 0;
}

int32_t bb_wasm_call_send_message(const char *to, const char *op, const uint8_t *payload, size_t len) {
  bbw_error_clear();
  host_call *c = call_now("call send_message", NEED_CTX);
  if (c == NULL) return bbw_last();
  if (payload == NULL && len > 0) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "call send_message: NULL payload of %zu bytes", len);
  if (op == NULL) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "call send_message: no op");
  bb_peer_id peer;
  if (bbw_peer_parse(to, "call send_message", &peer) < 0) return bbw_last();
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_ctx_send_message(c->ctx, &peer, op, payload, len, &err);
  return rc < 0 ? bbw_fail_from(rc, &err, "call send_message") : BB_OK;
}

int32_t bb_wasm_call_set_timer(uint64_t at_ns, uint64_t token) {
  bbw_error_clear();
  host_call *c = call_now("call set_timer", NEED_CTX);
  if (c == NULL) return bbw_last();
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_ctx_set_timer(c->ctx, at_ns, token, &err);
  return rc < 0 ? bbw_fail_from(rc, &err, "call set_timer") : BB_OK;
}

int32_t bb_wasm_call_emit(const char *topic, const uint8_t *value, size_t len) {
  bbw_error_clear();
  host_call *c = call_now("call emit", NEED_CTX);
  if (c == NULL) return bbw_last();
  if (topic == NULL || topic[0] == '\0') return bbw_fail(BB_ERR_INVALID_ARGUMENT, "call emit: no topic");
  bbw_value_list values;
  if (bbw_value_list_decode(value, len, "call emit", &values) < 0) return bbw_last();
  if (values.n != 1 || values.items[0] == NULL) {
    bbw_value_list_free(&values);
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "call emit: one value is needed");
  }
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_ctx_emit(c->ctx, topic, values.items[0], &err);
  bbw_value_list_free(&values);
  return rc < 0 ? bbw_fail_from(rc, &err, "call emit") : BB_OK;
}

int32_t bb_wasm_call_count(const char *name, uint64_t delta) {
  bbw_error_clear();
  host_call *c = call_now("call count", NEED_CTX);
  if (c == NULL) return bbw_last();
  if (name == NULL || name[0] == '\0') return bbw_fail(BB_ERR_INVALID_ARGUMENT, "call count: no counter name");
  bb_ctx_count(c->ctx, name, delta);
  return BB_OK;
}

int32_t bb_wasm_call_dependency(const char *slot, const char *op, const uint8_t *inputs, size_t len, int32_t n_outputs) {
  bbw_error_clear();
  bbw_result_clear();
  host_call *c = call_now("call dependency", NEED_CTX);
  if (c == NULL) return bbw_last();
  if (slot == NULL || op == NULL) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "call dependency: a slot and an op are needed");
  if (n_outputs < 0 || n_outputs > BBW_VALUE_LIST_MAX)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "call dependency: %d outputs (0 to %d)", (int)n_outputs, BBW_VALUE_LIST_MAX);
  bbw_value_list in;
  if (bbw_value_list_decode(inputs, len, "call dependency", &in) < 0) return bbw_last();
  bb_val **out = calloc((size_t)n_outputs + 1, sizeof *out);
  if (out == NULL) {
    bbw_value_list_free(&in);
    return bbw_fail(BB_ERR_NOMEM, "call dependency: out of memory");
  }
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_ctx_call(c->ctx, slot, op, in.items, in.n, out, (size_t)n_outputs, &err);
  bbw_value_list_free(&in);
  int32_t result = rc < 0 ? bbw_fail_from(rc, &err, "call dependency") : BB_OK;
  if (rc >= 0) {
    bb_le_writer w = bbw_writer();
    bb_le_write_u64(&w, (uint64_t)n_outputs);
    for (int32_t i = 0; i < n_outputs; i++) bbw_write_value(&w, out[i]);
    result = bbw_result_from(&w, "call dependency");
  }
  for (int32_t i = 0; i < n_outputs; i++) bb_val_release(out[i]);
  free(out);
  return result;
}

int32_t bb_wasm_call_set_state(const uint8_t *state, size_t len) {
  bbw_error_clear();
  host_call *c = call_now("call set_state", NEED_SAVE);
  if (c == NULL) return bbw_last();
  if (state == NULL && len > 0) return bbw_fail(BB_ERR_INVALID_ARGUMENT, "call set_state: NULL state of %zu bytes", len);
  const bb_allocator *alloc = c->save_alloc;
  uint8_t *copy = alloc->malloc(len ? len : 1, alloc->user_data);
  if (copy == NULL) return bbw_fail(BB_ERR_NOMEM, "call set_state: out of memory");
  if (len) memcpy(copy, state, len);
  if (c->state != NULL) alloc->free(c->state, alloc->user_data);
  c->state = copy;
  c->state_len = len;
  return BB_OK;
}
