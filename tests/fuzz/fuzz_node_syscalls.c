/* libFuzzer target: a hostile peer's values reaching the framework ops that keep state or
 * read typed inputs. The module of fuzz_node_deliver (a value sent to `peers`) is compiled
 * once, and on the receiving side its Recv payload is also wired straight into Serialize,
 * Hold, Record, Limit, Any, DeadlineMatch, Gate, AppEmit, CorrelateTag, BootstrapOutput,
 * Bundle/Unbundle and the address book. Each input is one delivery (its first byte picks
 * the value's type hash; the rest is the payload), made twice, so the stores see a second
 * execution. Nothing may crash or leak; every failure has its words; after the polls no
 * execution, parked op or budget is held, and the stores keep to their caps. */
#include <stdlib.h>
#include <string.h>

#include "bb/compiler.h"
#include "bb/runtime.h"
#include "runtime/node.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define RECV "out__recv_0"

static void body(bb_rec *g, void *user) {
  (void)user;
  bb_value peers = bb_rec_input(g, "peers", BB_TYPE_PEER_ID_VEC);
  bb_rec_net_out(g, "out", peers, bb_rec_input(g, "x", NULL));
  bb_rec_output(g, "y", bb_rec_pass_through(g, bb_rec_lookup_output(g, "out")));
}
static const bb_module MODULE = {sizeof(bb_module), "Fuzz", body, NULL, NULL, NULL, 0};

typedef struct extra_op {
  const char *domain, *op, *in[2], *out[2];
  const char *sattr, *sval;
  const char *iattr;
  int64_t ival;
} extra_op;

static const extra_op EXTRA[] = {
    {BB_DOMAIN_SYSCALL, "Serialize.Enqueue", {RECV}, {"q_t"}, "queue", "q", NULL, 0},
    {BB_DOMAIN_SYSCALL, "Serialize.Dequeue", {"q_t"}, {"q_v"}, "queue", "q", NULL, 0},
    {BB_DOMAIN_SYSCALL, "Hold.Stash", {RECV}, {NULL}, "slot", "s", NULL, 0},
    {BB_DOMAIN_SYSCALL, "Hold.Flush", {RECV}, {"h_v"}, "slot", "s", NULL, 0},
    {BB_DOMAIN_SYSCALL, "Record", {RECV}, {NULL}, "name", "r", NULL, 0},
    {BB_DOMAIN_SYSCALL, "Limit.Acquire", {RECV}, {"l_t"}, "name", "l", "n", 1},
    {BB_DOMAIN_SYSCALL, "Limit.Release", {"l_t"}, {NULL}, "name", "l", NULL, 0},
    {BB_DOMAIN_SYSCALL, "Any", {RECV}, {"any"}, "group", "g", NULL, 0},
    {BB_DOMAIN_SYSCALL, "DeadlineMatch", {RECV}, {"dm"}, NULL, NULL, NULL, 0},
    {BB_DOMAIN_SYSCALL, "Gate", {RECV, "dm"}, {"gated"}, NULL, NULL, NULL, 0},
    {BB_DOMAIN_SYSCALL, "AppEmit", {RECV}, {NULL}, "name", "fuzz", NULL, 0},
    {BB_DOMAIN_SYSCALL, "CorrelateTag", {RECV}, {"tag"}, NULL, NULL, NULL, 0},
    {BB_DOMAIN_SYSCALL, "BootstrapOutput", {RECV}, {"bo"}, NULL, NULL, NULL, 0},
    {BB_DOMAIN_COMPOSITE, "Bundle", {RECV, "tag"}, {"b"}, NULL, NULL, NULL, 0},
    {BB_DOMAIN_COMPOSITE, "Unbundle", {"b"}, {"u0", "u1"}, NULL, NULL, BB_ATTR_CHILD_COUNT, 2},
    {BB_DOMAIN_COMPOSITE, "Unbundle", {RECV}, {"v0"}, NULL, NULL, NULL, 0},
    {BB_DOMAIN_ADDRESS_BOOK, "Insert", {RECV, RECV}, {NULL}, NULL, NULL, NULL, 0},
    {BB_DOMAIN_ADDRESS_BOOK, "Lookup", {RECV}, {"addrs"}, NULL, NULL, NULL, 0},
};

static uint8_t *artifact;
static size_t artifact_len;

/* The function holding the Recv whose payload is RECV. */
static bb_function *receiver(const bb_model *m) {
  for (size_t f = 0; f < m->functions.len; f++) {
    bb_function *fn = m->functions.items[f];
    for (size_t k = 0; k < fn->nodes.len; k++)
      for (size_t o = 0; o < fn->nodes.items[k]->outputs.len; o++)
        if (strcmp(fn->nodes.items[k]->outputs.items[o], RECV) == 0) return fn;
  }
  return NULL;
}

static void compile_once(void) {
  bb_model *m = NULL;
  uint8_t *bytes = NULL, *compiled = NULL;
  size_t len = 0, compiled_len = 0;
  bb_error err;
  if (bb_module_build(&MODULE, NULL, &m, &err) || bb_model_encode(m, &bytes, &len, &err)) abort();
  bb_model_free(m);
  bb_compiler *c = bb_compiler_new(NULL);
  bb_compiler_set_permissive_types(c, true);
  if (bb_compiler_compile(c, bytes, len, &compiled, &compiled_len, &err)) abort();
  bb_compiler_free(c);
  bb_buffer_free(NULL, bytes);
  if (bb_model_decode(compiled, compiled_len, NULL, NULL, &m, &err)) abort();
  bb_buffer_free(NULL, compiled);
  bb_function *fn = receiver(m);
  if (!fn) abort();
  for (size_t k = 0; k < sizeof EXTRA / sizeof *EXTRA; k++) {
    const extra_op *x = &EXTRA[k];
    bb_ir_node *nd = bb_ir_node_new(m, x->op, x->domain, NULL);
    for (int i = 0; i < 2 && x->in[i]; i++) bb_strlist_append(m, &nd->inputs, x->in[i]);
    for (int i = 0; i < 2 && x->out[i]; i++) bb_strlist_append(m, &nd->outputs, x->out[i]);
    if (x->sattr) bb_attr_set_string(m, &nd->attrs, x->sattr, x->sval);
    if (x->iattr) bb_attr_set_int(m, &nd->attrs, x->iattr, x->ival);
    bb_nodelist_append(m, &fn->nodes, nd);
  }
  if (bb_model_encode(m, &artifact, &artifact_len, &err)) abort();
  bb_model_free(m);
}

static void deliver(bb_node *n, const uint8_t *data, size_t size, uint64_t request, uint64_t now) {
  uint64_t hash = bb_val_kind_hash(data[0] % BB_VAL_KIND_COUNT);
  bb_address site = {.n = 1};
  site.seg[0].kind = BB_ADDR_SITE;
  site.seg[0].value = bb_wire_id("Fuzz.out"); /* the wire RECV arrives on */
  uint8_t suffix[16];
  bb_slot_fill fill = {.dest_suffix = {suffix, bb_address_to_bytes(&site, suffix, sizeof suffix)},
                       .payload = {(uint8_t *)data + 1, size - 1},
                       .trigger_only = (data[0] & 0x80) != 0,
                       .type_hash = hash};
  bb_envelope e = {0};
  e.fills = &fill;
  e.n_fills = 1;
  e.has_correlation = true;
  e.correlation_kind = BB_CORR_REQUEST;
  e.wire_req_id = request;
  e.schema_version = BB_ENVELOPE_SCHEMA_VERSION;
  uint8_t *env = NULL;
  size_t env_len = 0;
  if (bb_envelope_encode(&e, NULL, &env, &env_len, NULL)) abort();
  bb_peer_id from = bb_peer_id_from_u64(1);
  bb_node_deliver(n, &from, env, env_len, now, NULL);
  bb_buffer_free(NULL, env);
  const bb_step *steps;
  size_t count;
  bb_node_poll(n, now, &steps, &count, NULL);
  for (size_t i = 0; i < count; i++)
    if ((steps[i].kind == BB_STEP_WIRE_RECEIVE_FAILED || steps[i].kind == BB_STEP_OP_FAILED) &&
        (!steps[i].reason || !steps[i].detail || !steps[i].detail[0]))
      abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!artifact) compile_once();
  if (!size) return 0;
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = bb_peer_id_from_u64(2);
  a.artifact = artifact;
  a.artifact_len = artifact_len;
  const char *target = "Fuzz_peers";
  a.targets = &target;
  a.n_targets = 1;
  bb_node_config cfg = {.struct_size = sizeof cfg, .ingress_byte_budget = 1 << 20};
  a.config = &cfg;
  bb_node *n = NULL;
  if (bb_install(&a, &n, NULL, NULL)) abort();
  deliver(n, data, size, 7, 1);
  deliver(n, data, size, 8, 2);
  bb_node_stats st;
  bb_node_stats_get(n, &st);
  /* nothing here mints a command, so nothing can stay parked */
  if (st.executions || st.pending_async || st.ingress_bytes || st.frontier) abort();
  if (n->named_bytes > cfg.ingress_byte_budget || n->n_named > 4 * 1024) abort();
  bb_node_free(n);
  return 0;
}
