/* single_node_federated_learning: a client target and a server target on
 * one node, sharing one Model and one FedAvg.
 *
 *   single_node_federated_learning [--quiet]
 *
 * FederatedRound compiles into a client side (MyData.next_batch → MyModel.forward, send
 * MyModel.params to the server peers) and a server side (FedAvg.contribute of what
 * arrives). Both are installed on peer 7, which is its own server. The program watches
 * the constructions of "model" and "aggregator" through thin wrappers around the real
 * MyModel and FedAvg types, and shows:
 *   - one instance per slot for the two targets (one construction each, and the node's
 *     component for the slot is that instance);
 *   - SlotBindingConflict when the two targets bind "model" to different types;
 *   - a round: the parameters the client target read from the shared Model reach the
 *     server target's FedAvg (from peer 7, accepted); after a write to the shared Model,
 *     the next round delivers the new value.
 * Exits 0 only when all of that held. */
#include <stdio.h>
#include <string.h>

#include "bb/roles.h"
#include "programs/examples.h"
#include "programs/fixtures.h"

static int quiet;

static int check(int cond, const char *what) {
  printf("  [%s] %s\n", cond ? "ok" : "FAILED", what);
  return cond ? 0 : 1;
}

static int die(const char *what, const bb_error *err) {
  fprintf(stderr, "single_node_federated_learning: %s: %s\n", what, err->message);
  return 1;
}

/* ---- watching a type: a wrapper that counts constructions and sees Contribute -------- */

typedef struct watch {
  const bb_component_type *inner;
  size_t created;
  void *instance; /* the inner instance last created */
  uint64_t contributions, accepted;
  float last_update;
  int64_t last_len;
  uint64_t last_from;
} watch;

typedef struct watched {
  watch *w;
  void *self; /* the inner instance */
  const bb_allocator *alloc;
} watched;

static int watched_create(const bb_component_init *init, void **self, bb_error *err) {
  watch *w = (watch *)init->host_data; /* the slot config hands each wrapper its watch */
  watched *x = init->alloc->malloc(sizeof *x, init->alloc->user_data);
  if (!x) return BB_ERR_NOMEM;
  bb_component_init inner = *init;
  inner.host_data = NULL;
  inner.type_data = w->inner->type_data; /* the wrapped type's, not the wrapper's */
  int rc = w->inner->create(&inner, &x->self, err);
  if (rc) {
    init->alloc->free(x, init->alloc->user_data);
    return rc;
  }
  x->w = w;
  x->alloc = init->alloc;
  w->created++;
  w->instance = x->self;
  *self = x;
  return 0;
}

static void watched_destroy(void *self) {
  watched *x = self;
  x->w->inner->destroy(x->self);
  x->alloc->free(x, x->alloc->user_data);
}

static int watched_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  watched *x = self;
  int rc = x->w->inner->invoke(x->self, ctx, call, err);
  if (strcmp(call->op_type, "Contribute") == 0) {
    watch *w = x->w;
    const bb_val *u = call->n_inputs ? call->inputs[0] : NULL;
    const bb_peer_id *from = bb_ctx_source(ctx) ? bb_ctx_source(ctx) : bb_ctx_self(ctx);
    w->contributions++;
    w->accepted += rc == 0;
    w->last_len = u && bb_val_kind_of(u) == BB_VAL_TENSOR ? bb_val_as_tensor(u)->numel : -1;
    w->last_update = w->last_len > 0 ? *(const float *)bb_tensor_data(bb_val_as_tensor(u)) : 0.0f;
    bb_peer_id_as_u64(from, &w->last_from);
  }
  return rc;
}

static int watched_on_message(void *self, bb_ctx *ctx, const char *op, const bb_peer_id *from, const uint8_t *payload,
                              size_t len, bb_error *err) {
  watched *x = self;
  return x->w->inner->on_message(x->self, ctx, op, from, payload, len, err);
}

static int watched_on_timer(void *self, bb_ctx *ctx, uint64_t token, bb_error *err) {
  watched *x = self;
  return x->w->inner->on_timer(x->self, ctx, token, err);
}

static int watched_save(const void *self, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err) {
  const watched *x = self;
  return x->w->inner->save(x->self, alloc, out, len, err);
}

static int watched_load(void *self, const uint8_t *data, size_t len, bb_error *err) {
  watched *x = self;
  return x->w->inner->load(x->self, data, len, err);
}

/* The inner type's description with the wrapper's callbacks (same name, roles, deps). */
static bb_component_type watching(const bb_component_type *inner) {
  bb_component_type t = *inner;
  t.create = watched_create;
  t.destroy = watched_destroy;
  t.invoke = watched_invoke;
  t.on_message = inner->on_message ? watched_on_message : NULL;
  t.on_timer = inner->on_timer ? watched_on_timer : NULL;
  t.save = inner->save ? watched_save : NULL;
  t.load = inner->load ? watched_load : NULL;
  return t;
}

/* ---- the example --------------------------------------------------------------------- */

static size_t count_op(const bb_function *f, const char *domain, const char *op) {
  size_t n = 0;
  for (size_t i = 0; i < f->nodes.len; i++) {
    const bb_ir_node *node = f->nodes.items[i];
    n += node->domain && strcmp(node->domain, domain) == 0 && strcmp(node->op_type, op) == 0;
  }
  return n;
}

/* The artifact with the server target's "model" bound to another type. */
static int conflicting(const uint8_t *artifact, size_t len, uint8_t **out, size_t *out_len, bb_error *err) {
  bb_model *m = NULL;
  int rc = bb_model_decode(artifact, len, NULL, NULL, &m, err);
  if (rc) return rc;
  for (size_t i = 0; i < m->functions.len && !rc; i++) {
    const char *name = m->functions.items[i]->name;
    if (strncmp(name, "FederatedRound_server_peers#", 28) != 0) continue;
    char key[256], value[128];
    snprintf(key, sizeof key, BB_KEY_BINDING_PREFIX "%s.model", name);
    const char *was = bb_kv_get(&m->metadata, key);
    const char *id = was ? strrchr(was, '|') : NULL;
    snprintf(value, sizeof value, "Model|StubModel%s", id ? id : "|-1");
    rc = bb_kv_upsert(m, &m->metadata, key, bb_model_strdup(m, value));
  }
  if (!rc) rc = bb_model_encode(m, out, out_len, err);
  bb_model_free(m);
  return rc;
}

static int install(const uint8_t *artifact, size_t len, const bb_registry *reg, watch *model, watch *aggregator,
                   bb_node **out, bb_install_error_kind *kind, bb_error *err) {
  bb_peer_id self = bb_peer_id_from_u64(7);
  bb_address addr = bb_address_p2p(&self);
  const char *targets[] = {"FederatedRound", "FederatedRound_server_peers"};
  bb_slot_config slots[] = {{"model", "w=0.5", model}, {"aggregator", NULL, aggregator}};
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = self;
  a.addresses = &addr;
  a.n_addresses = 1;
  a.artifact = artifact;
  a.artifact_len = len;
  a.targets = targets;
  a.n_targets = 2;
  a.registry = reg;
  a.slots = slots;
  a.n_slots = 2;
  int rc = bb_install(&a, out, kind, err);
  if (!rc) rc = bb_node_add_peer(*out, &self, &addr, err);
  return rc;
}

/* One round: invoke the client with server_peers = [7] and poll until idle, handing every
 * envelope the node sends to itself back to it (the node is its own server). */
static int round_trip(bb_node *node, size_t *failed, bb_error *err) {
  bb_peer_id self = bb_peer_id_from_u64(7);
  bb_named_value in = {"server_peers", bb_val_peers(NULL, &self, 1)};
  int rc = in.value ? bb_node_invoke(node, "FederatedRound", &in, 1, 0, err) : BB_ERR_NOMEM;
  bb_val_release(in.value);
  for (int poll = 0; !rc && poll < 64 && bb_node_has_work(node); poll++) {
    const bb_step *steps;
    size_t n;
    if ((rc = bb_node_poll(node, 0, &steps, &n, err))) break;
    for (size_t i = 0; i < n && !rc; i++) {
      const bb_step *s = &steps[i];
      *failed += s->kind == BB_STEP_OP_FAILED || s->kind == BB_STEP_WIRE_RECEIVE_FAILED;
      if (!quiet || s->kind == BB_STEP_OP_FAILED)
        printf("  %-16s %s %s\n", bb_step_kind_name(s->kind), s->module ? s->module : "", s->detail ? s->detail : "");
      if (s->kind == BB_STEP_SEND && bb_peer_id_equal(&s->peer, &self))
        rc = bb_node_deliver(node, &self, s->bytes, s->len, 0, err); /* copied: safe before the next poll */
    }
  }
  return rc;
}

int main(int argc, char **argv) {
  quiet = argc > 1 && strcmp(argv[1], "--quiet") == 0;
  bb_error err = {0};
  int failures = 0;
  uint8_t *artifact = NULL;
  size_t artifact_len = 0;
  if (bb_example_compile(&BB_EXAMPLE_SINGLE_NODE_FEDERATED_LEARNING, 0, &artifact, &artifact_len, &err))
    return die("compile", &err);

  /* the two targets of one compile */
  bb_model *m = NULL;
  if (bb_model_decode(artifact, artifact_len, NULL, NULL, &m, &err)) return die("decode", &err);
  size_t targets = 0, client_sends = 0, server_recvs = 0;
  for (size_t i = 0; i < m->functions.len; i++) {
    const bb_function *f = m->functions.items[i];
    if (!bb_kv_get(&f->metadata, BB_KEY_PEER_CLASS)) continue;
    targets++;
    size_t sends = count_op(f, BB_DOMAIN_WIRE, "Send"), recvs = count_op(f, BB_DOMAIN_WIRE, "Recv");
    printf("target %s: %zu Send, %zu Recv\n", f->name, sends, recvs);
    if (strncmp(f->name, "FederatedRound#", 15) == 0) client_sends = sends;
    if (strncmp(f->name, "FederatedRound_server_peers#", 28) == 0) server_recvs = recvs;
  }
  bb_model_free(m);
  failures += check(targets == 2 && client_sends == 1 && server_recvs == 1,
                    "two targets: the client sends, the server (…_server_peers#) receives");

  /* the registry: the shipped types and the fixtures, with MyModel and FedAvg watched */
  bb_registry *shipped = bb_registry_new(NULL), *reg = bb_registry_new(NULL);
  if (!shipped || !reg || bb_registry_add_shipped(shipped, &err)) return die("registry", &err);
  watch model = {&BB_FIXTURE_MY_MODEL, 0, NULL, 0, 0, 0, 0, 0};
  watch aggregator = {bb_registry_find(shipped, "FedAvg"), 0, NULL, 0, 0, 0, 0, 0};
  if (!aggregator.inner) return fprintf(stderr, "single_node_federated_learning: no shipped FedAvg\n"), 1;
  const bb_component_type model_type = watching(model.inner), aggregator_type = watching(aggregator.inner);
  for (size_t i = 0; i < bb_registry_count(shipped); i++)
    if (bb_registry_at(shipped, i) != aggregator.inner && bb_registry_add(reg, bb_registry_at(shipped, i), &err))
      return die("registry", &err);
  if (bb_registry_add(reg, &aggregator_type, &err) || bb_registry_add(reg, &BB_FIXTURE_MY_DATA, &err) ||
      bb_registry_add(reg, &model_type, &err) || bb_registry_add(reg, &BB_FIXTURE_STUB_MODEL, &err))
    return die("registry", &err);

  /* both targets on peer 7: one instance per slot */
  bb_node *node = NULL;
  bb_install_error_kind kind = BB_INSTALL_OK;
  if (install(artifact, artifact_len, reg, &model, &aggregator, &node, &kind, &err)) return die("install", &err);
  printf("loaded targets: [%s, %s]\n", bb_node_target(node, 0), bb_node_target(node, 1));
  const watched *node_model = bb_node_component(node, "model", NULL);
  const watched *node_aggregator = bb_node_component(node, "aggregator", NULL);
  printf("shared slot bindings: model=%p (%zu built), aggregator=%p (%zu built)\n", model.instance, model.created,
         aggregator.instance, aggregator.created);
  failures += check(bb_node_target_count(node) == 2 && model.created == 1 && aggregator.created == 1,
                    "two targets, one MyModel and one FedAvg constructed");
  failures += check(node_model && node_model->self == model.instance && node_aggregator &&
                        node_aggregator->self == aggregator.instance,
                    "the node's model and aggregator are those instances");

  /* the same slot bound to two types by the two targets */
  uint8_t *bad = NULL;
  size_t bad_len = 0;
  bb_node *refused = NULL;
  bb_error conflict = {0};
  watch m2 = model, a2 = aggregator;
  if (conflicting(artifact, artifact_len, &bad, &bad_len, &err)) return die("conflicting artifact", &err);
  int rc = install(bad, bad_len, reg, &m2, &a2, &refused, &kind, &conflict);
  printf("install with model = MyModel (client) / StubModel (server): %s: %s\n", bb_install_error_name(kind),
         rc ? conflict.message : "installed");
  failures += check(rc != 0 && !refused && kind == BB_INSTALL_SLOT_BINDING_CONFLICT && strstr(conflict.message, "model"),
                    "SlotBindingConflict naming the slot");
  bb_node_free(refused);
  bb_buffer_free(NULL, bad);

  /* a round: what the client target reads from the shared Model reaches the server's FedAvg */
  size_t failed = 0;
  if (bb_node_run_bootstrap(node, 0, &err) || round_trip(node, &failed, &err)) return die("round 1", &err);
  const bb_fixture_my_model *mm = model.instance;
  printf("round 1: MyModel w=%.2f (%llu forward, %llu params); FedAvg got [%.2f] from peer %llu (%llu accepted)\n",
         (double)mm->w, (unsigned long long)mm->forwards, (unsigned long long)mm->params_reads,
         (double)aggregator.last_update, (unsigned long long)aggregator.last_from,
         (unsigned long long)aggregator.accepted);
  failures += check(failed == 0 && mm->forwards == 1 && mm->params_reads == 1 && aggregator.contributions == 1 &&
                        aggregator.accepted == 1 && aggregator.last_len == 1 && aggregator.last_update == 0.5f &&
                        aggregator.last_from == 7,
                    "the client's params [0.5] reached the server target's FedAvg from peer 7, accepted");

  /* the host writes to the shared Model (w += 0.25); the next round's client read and
   * server contribution both see it */
  ((bb_fixture_my_model *)model.instance)->w += 0.25f;
  if (round_trip(node, &failed, &err)) return die("round 2", &err);
  printf("round 2: FedAvg got [%.2f] (%llu contributions)\n", (double)aggregator.last_update,
         (unsigned long long)aggregator.contributions);
  failures += check(failed == 0 && aggregator.contributions == 2 && aggregator.accepted == 2 &&
                        aggregator.last_update == 0.75f,
                    "after the write, the server target's FedAvg receives [0.75]");
  if (!failures) printf("Two targets on one node share one Model and one FedAvg.\n");

  bb_node_free(node);
  bb_registry_free(reg);
  bb_registry_free(shipped);
  bb_buffer_free(NULL, artifact);
  return failures ? 1 : 0;
}
