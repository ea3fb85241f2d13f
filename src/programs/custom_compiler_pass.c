/* custom_compiler_pass: Module `App` —
 *   payload, peers = inputs; net_out("payload_out", peers, payload);
 *   downstream = lookup_output("payload_out"); call sub-module B with x = downstream,
 *   where B records y = compute.Identity(x) (a Backend op) and outputs "y".
 * Default binding: backend "compute" = CpuBackend, plus the user pass
 * "stamp_tracing_ids", added with bb_compiler_add_pass at the reference's point (per
 * partition, after every canonical pass): it stamps metadata
 * example.tracing_id = "trace-<n>" on every ai.bytesandbrains.wire Send, n counting the
 * Sends stamped so far in the whole compile. The count is read back from the model, not
 * kept in a global, so every compile starts at trace-0 and the bytes stay deterministic.
 * Compiles into App#<hash> (@self: the Send, stamped trace-0) and App_peers#<hash>
 * (Recv, Identity). */
#include <stdio.h>
#include <string.h>

#include "programs/examples.h"

static const bb_slot COMPUTE = {BB_ROLE_BACKEND, "compute", NULL};

static void b_body(bb_rec *g, void *user) {
  (void)user;
  bb_value x = bb_rec_input(g, "x", NULL);
  bb_rec_output(g, "y", bb_rec_backend(g, &COMPUTE, "Identity", &x, 1, NULL, 0));
}

static const bb_module B = {sizeof(bb_module), "B", b_body, NULL, NULL, NULL, 0};

static void app_body(bb_rec *g, void *user) {
  (void)user;
  bb_value payload = bb_rec_input(g, "payload", BB_TYPE_TENSOR_F32);
  bb_value peers = bb_rec_input(g, "peers", NULL);
  bb_rec_net_out(g, "payload_out", peers, payload);
  bb_binding to_b[] = {{"x", bb_rec_lookup_output(g, "payload_out")}};
  bb_rec_call(g, &B, to_b, 1);
}

static const bb_module *const APP_SUBMODULES[] = {&B};
static const bb_module APP = {sizeof(bb_module), "App", app_body, NULL, NULL, APP_SUBMODULES, 1};
static const bb_module *const MODULES[] = {&APP};

static bool is_send(const bb_ir_node *n) {
  return n->domain && strcmp(n->domain, BB_DOMAIN_WIRE) == 0 && strcmp(n->op_type, "Send") == 0;
}

static int stamp_tracing_ids(bb_model *model, bb_function *function, const char *peer_class, void *user,
                             bb_error *err) {
  (void)peer_class;
  (void)user;
  size_t stamped = 0;
  for (size_t f = 0; f < model->functions.len; f++) {
    const bb_function *fn = model->functions.items[f];
    for (size_t i = 0; i < fn->nodes.len; i++)
      stamped += is_send(fn->nodes.items[i]) && bb_kv_get(&fn->nodes.items[i]->metadata, BB_EXAMPLE_TRACING_KEY);
  }
  for (size_t i = 0; i < function->nodes.len; i++) {
    bb_ir_node *n = function->nodes.items[i];
    if (!is_send(n) || bb_kv_get(&n->metadata, BB_EXAMPLE_TRACING_KEY)) continue;
    char id[32];
    snprintf(id, sizeof id, "trace-%zu", stamped++);
    const char *copy = bb_model_strdup(model, id);
    if (!copy || bb_kv_upsert(model, &n->metadata, BB_EXAMPLE_TRACING_KEY, copy)) {
      if (err) {
        err->code = BB_ERR_NOMEM;
        snprintf(err->message, sizeof err->message, "stamp_tracing_ids: out of memory");
      }
      return BB_ERR_NOMEM;
    }
  }
  return 0;
}

static int configure(bb_compiler *c, size_t module, bb_error *err) {
  (void)module;
  if (bb_example_declare_cpu_backend(c, err) ||
      bb_compiler_bind_backend(c, "compute", "CpuBackend", NULL, err) ||
      bb_compiler_add_pass(c, NULL, "stamp_tracing_ids", stamp_tracing_ids, NULL, err))
    return err ? err->code : BB_ERR_INVALID_ARGUMENT;
  return 0;
}

const bb_example BB_EXAMPLE_CUSTOM_COMPILER_PASS = {
    "custom_compiler_pass", "a user pass (stamp_tracing_ids) tags every wire Send with example.tracing_id", MODULES,
    1, configure};
