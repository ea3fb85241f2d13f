/* bytesandbrains — components whose methods run in the host (JavaScript): the concrete
 * types the host registers, the registry every node installs from, and the calls the host
 * makes back while one of its methods runs. */
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
} host_type;

typedef struct host_instance {
  int32_t id; /* the host's instance id */
} host_instance;

static int32_t n_host_types;
/* The shipped types, the examples' fixtures (so that every example installs) and the
 * host's; made on first use, and alive as long as the module (with the host types). */
static bb_registry *registry;

/* The callback in progress (callbacks nest when one component calls another). */
typedef struct host_call {
  bb_ctx *ctx;
  const bb_op_call *call;
  uint64_t deferred; /* the command, once deferred */
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
  host_call frame = {ctx, call, 0, 0, {0}};
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

int32_t bb_wasm_host_type_add(const char *name, uint32_t roles) {
  bbw_error_clear();
  if (name == NULL || name[0] == '\0' || strlen(name) >= BBW_NAME_MAX)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "host type: a name of 1 to %d bytes is needed", BBW_NAME_MAX - 1);
  if (roles == 0 || (roles & ~((1u << (BB_ROLE_PROTOCOL + 1)) - 2u)) != 0)
    return bbw_fail(BB_ERR_INVALID_ARGUMENT, "host type %s: roles 0x%x are not a set of (1 << bb_role) bits", name,
                    (unsigned)roles);
  bb_registry *r = bbw_registry();
  if (r == NULL) return bbw_last();
  if (bb_registry_find(r, name) != NULL)
    return bbw_fail(BB_ERR_EXISTS, "host type %s: a type of that name is already registered", name);
  if (n_host_types == BB_WASM_MAX_HOST_TYPES)
    return bbw_fail(BB_ERR_LIMIT, "host type %s: at most %d host types", name, BB_WASM_MAX_HOST_TYPES);
  host_type *t = malloc(sizeof *t);
  if (t == NULL) return bbw_fail(BB_ERR_NOMEM, "host type %s: out of memory", name);
  memcpy(t->name, name, strlen(name) + 1);
  t->id = n_host_types + 1;
  t->type = (bb_component_type){.struct_size = sizeof t->type,
                                .type_name = t->name,
                                .roles = roles,
                                .create = host_create,
                                .destroy = host_destroy,
                                .invoke = host_invoke,
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

static host_call *call_now(const char *what, bool needs_op) {
  if (current_call == NULL || (needs_op && current_call->call == NULL)) {
    bbw_fail(BB_ERR_INVALID_ARGUMENT, "%s: only while a host component's %s runs", what,
             needs_op ? "method" : "create or method");
    return NULL;
  }
  return current_call;
}

int32_t bb_wasm_call_inputs(void) {
  bbw_error_clear();
  bbw_result_clear();
  host_call *c = call_now("call inputs", true);
  if (c == NULL) return bbw_last();
  bb_le_writer w = bbw_writer();
  bb_le_write_u64(&w, c->call->n_inputs);
  for (size_t i = 0; i < c->call->n_inputs; i++) bbw_write_value(&w, c->call->inputs[i]);
  return bbw_result_from(&w, "call inputs");
}

int32_t bb_wasm_call_set_outputs(const uint8_t *list, size_t len) {
  bbw_error_clear();
  host_call *c = call_now("call outputs", true);
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
  host_call *c = call_now("call defer", true);
  if (c == NULL) return 0;
  if (c->deferred == 0) c->deferred = bb_ctx_defer(c->ctx);
  return c->deferred;
}

uint64_t bb_wasm_call_now(void) {
  bbw_error_clear();
  host_call *c = call_now("call now", true);
  return c ? bb_ctx_now(c->ctx) : 0;
}

int32_t bb_wasm_call_fail(int32_t code, const char *message) {
  bbw_error_clear();
  host_call *c = call_now("call fail", false);
  if (c == NULL) return bbw_last();
  c->error_code = code < 0 ? code : BB_ERR_INVALID_ARGUMENT;
  size_t len = message ? strlen(message) : 0;
  if (len >= sizeof c->error) len = sizeof c->error - 1;
  if (len) memcpy(c->error, message, len);
  c->error[len] = '\0';
  return BB_OK;
}
