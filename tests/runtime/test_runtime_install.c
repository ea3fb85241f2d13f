/* bb_install: every install error a host can meet, the registry as the only source of
 * concrete types, target names resolved by their prefix before '#', one component per
 * slot however many targets bind it, and an allocation failure at every allocation of an
 * install leaving nothing behind. */
#include "failalloc.h"
#include "rtir.h"
#include "rttest.h"

/* the node tables below leave the optional fields out */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define MODEL_BINDING "Model|StubModel|-1"

/* Counts creations, to tell one shared component from two. */
static int n_created;

static int counting_create(const bb_component_init *init, void **self, bb_error *err) {
  n_created++;
  return stub_create(init, self, err);
}

static int refusing_create(const bb_component_init *init, void **self, bb_error *err) {
  (void)self;
  return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "slot %s: this model refuses to exist", init->slot);
}

static const bb_component_type COUNTING_MODEL = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "StubModel",
    .roles = 1u << BB_ROLE_MODEL,
    .create = counting_create,
    .destroy = stub_destroy,
    .invoke = stub_invoke,
};
static const bb_component_type REFUSING_MODEL = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "StubModel",
    .roles = 1u << BB_ROLE_MODEL,
    .create = refusing_create,
    .destroy = stub_destroy,
    .invoke = stub_invoke,
};

static bb_registry *registry_of(const bb_component_type *model) {
  bb_registry *r = bb_registry_new(NULL);
  CHECK(r && bb_registry_add(r, model, NULL) == 0 && bb_registry_add(r, &STUB_AGGREGATOR, NULL) == 0);
  return r;
}

/* Two targets, T#a1 and U#b2, each running Forward on slot "model"; T also sends its
 * result on wire T.y, which U's Recv listens to. */
static const ir_node_spec T_NODES[] = {
    {BB_DOMAIN_ROLE_MODEL "::Forward", {"x"}, {"y"}, "model"},
    {BB_DOMAIN_WIRE "::Send", {"y", "peers"}, {"sent"}, .meta = {BB_KEY_DEST_SITE_PREFIX "y", "T.y"}}};
static const ir_node_spec U_NODES[] = {
    {BB_DOMAIN_WIRE "::Recv", {NULL}, {"r", "r_from"}, .meta = {BB_KEY_WIRE_ID, "T.y"}},
    {BB_DOMAIN_ROLE_MODEL "::Forward", {"r"}, {"z"}, "model"}};

static bb_model *two_targets(const char *passport) {
  bb_model *m = ir_model(passport);
  ir_wire(m, false, "T.y", "");
  ir_wire(m, true, "T.y", "");
  ir_add_fn(m, &(ir_fn_spec){.name = "T#a1", .in = {"x", "peers"}, .out = {"y"}, IR_NODES(T_NODES)});
  ir_add_fn(m, &(ir_fn_spec){.name = "U#b2", .out = {"z"}, IR_NODES(U_NODES)});
  return m;
}

static bb_model *bound_two_targets(void) {
  bb_model *m = two_targets(BB_COMPILED_VERSION);
  ir_bind(m, "T#a1", "model", MODEL_BINDING);
  ir_bind(m, "U#b2", "model", MODEL_BINDING);
  return m;
}

/* Installs and returns the error kind (the node, if any, is freed); the message lands in
 * *err. */
static bb_install_error_kind try_install(const uint8_t *art, size_t len, const char *const *targets, size_t n_targets,
                                         const bb_registry *reg, bb_error *err) {
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = bb_peer_id_from_u64(7);
  a.artifact = art;
  a.artifact_len = len;
  a.targets = targets;
  a.n_targets = n_targets;
  a.registry = reg;
  bb_node *n = (bb_node *)1;
  bb_install_error_kind kind = BB_INSTALL_OK;
  int rc = bb_install(&a, &n, &kind, err);
  CHECK((rc == 0) == (kind == BB_INSTALL_OK));
  CHECK((rc == 0) == (n != NULL));
  bb_node_free(n);
  return kind;
}

/* Installs `m` (freed) for `targets` and expects `want`, with `needle` in the message. */
static void expect_error(bb_model *m, const char *const *targets, size_t n_targets, const bb_registry *reg,
                         bb_install_error_kind want, const char *needle) {
  size_t len = 0;
  uint8_t *art = ir_encode(m, &len);
  bb_error err;
  bb_error_clear(&err);
  bb_install_error_kind got = try_install(art, len, targets, n_targets, reg, &err);
  CHECK_MSG(got == want, "got %s, want %s: %s", bb_install_error_name(got), bb_install_error_name(want), err.message);
  if (needle) CHECK_MSG(strstr(err.message, needle) != NULL, "`%s` not in: %s", needle, err.message);
  free(art);
}

static const char *const T[] = {"T"};
static const char *const TU[] = {"T", "U"};

static void test_argument_and_artifact_errors(void) {
  bb_registry *reg = registry_of(&STUB_MODEL);
  bb_error err;
  size_t len;
  uint8_t *art = ir_encode(bound_two_targets(), &len);
  CHECK(try_install(art, len, T, 0, reg, &err) == BB_INSTALL_EMPTY_TARGETS);
  CHECK(try_install(art, len, NULL, 1, reg, &err) == BB_INSTALL_EMPTY_TARGETS);
  static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff};
  CHECK(try_install(junk, sizeof junk, T, 1, reg, &err) == BB_INSTALL_BAD_ARTIFACT);
  CHECK(try_install(art, len / 2, T, 1, reg, &err) == BB_INSTALL_BAD_ARTIFACT); /* cut short */
  const char *null_target[] = {NULL};
  CHECK(try_install(art, len, null_target, 1, reg, &err) == BB_INSTALL_INVALID_ARGUMENT);
  bb_install_args a = {0}; /* no struct_size */
  bb_node *n = NULL;
  bb_install_error_kind kind;
  CHECK(bb_install(&a, &n, &kind, &err) == BB_ERR_INVALID_ARGUMENT && kind == BB_INSTALL_INVALID_ARGUMENT && !n);
  free(art);

  expect_error(two_targets(NULL), T, 1, reg, BB_INSTALL_NOT_COMPILED, "ai.bytesandbrains.compiled");
  expect_error(two_targets("v1"), T, 1, reg, BB_INSTALL_INCOMPATIBLE_VERSION,
               "compiled as `v1`, this runtime requires `v2`");
  /* the message lists what the artifact offers */
  const char *nope[] = {"Nope"};
  expect_error(bound_two_targets(), nope, 1, reg, BB_INSTALL_UNKNOWN_TARGET, "available: [T#a1, U#b2]");
  /* a prefix that stops inside a name is not a match */
  const char *partial[] = {"T#a"};
  expect_error(bound_two_targets(), partial, 1, reg, BB_INSTALL_UNKNOWN_TARGET, "`T#a`");
  bb_registry_free(reg);
}

static void test_binding_errors(void) {
  bb_registry *reg = registry_of(&STUB_MODEL);
  bb_model *m = bound_two_targets();
  ir_meta(m, "ai.bytesandbrains.binding.T#a1", "Model|StubModel|-1"); /* no slot */
  expect_error(m, T, 1, reg, BB_INSTALL_INVALID_BINDING_TABLE, "ai.bytesandbrains.binding.T#a1");
  static const char *const bad_values[] = {"Backend|X", "Model|StubModel", "Wizard|StubModel|-1",
                                           "Model||-1", "Model|StubModel|one", "Model|StubModel|"};
  for (size_t i = 0; i < sizeof bad_values / sizeof *bad_values; i++) {
    m = two_targets(BB_COMPILED_VERSION);
    ir_bind(m, "T#a1", "model", bad_values[i]);
    expect_error(m, T, 1, reg, BB_INSTALL_INVALID_BINDING_TABLE, bad_values[i]);
  }
  /* two targets bind one slot to different types: both bindings are named */
  m = two_targets(BB_COMPILED_VERSION);
  ir_bind(m, "T#a1", "model", MODEL_BINDING);
  ir_bind(m, "U#b2", "model", "Aggregator|StubAggregator|-1");
  expect_error(m, TU, 2, reg, BB_INSTALL_SLOT_BINDING_CONFLICT, "T#a1 → StubModel (Model), U#b2 → StubAggregator");
  /* ... which is no conflict for a peer running only one of them */
  m = two_targets(BB_COMPILED_VERSION);
  ir_bind(m, "T#a1", "model", MODEL_BINDING);
  ir_bind(m, "U#b2", "model", "Aggregator|StubAggregator|-1");
  expect_error(m, T, 1, reg, BB_INSTALL_OK, NULL);

  m = two_targets(BB_COMPILED_VERSION);
  ir_bind(m, "T#a1", "model", "Model|NoSuchModel|-1");
  expect_error(m, T, 1, reg, BB_INSTALL_UNREGISTERED_CONCRETE, "NoSuchModel");
  bb_registry_free(reg);

  reg = registry_of(&REFUSING_MODEL);
  expect_error(bound_two_targets(), T, 1, reg, BB_INSTALL_CONSTRUCTION_FAILED, "this model refuses to exist");
  bb_registry_free(reg);
}

/* The runtime knows no concrete type of its own: an artifact that binds CpuMlp installs
 * only with a registry holding it, and the refusal says how to add it. A registry holds
 * any number of types. */
static void test_registry_is_the_hosts(void) {
  bb_model *m = two_targets(BB_COMPILED_VERSION);
  ir_bind(m, "T#a1", "model", "Model|CpuMlp|-1");
  ir_meta(m, "ai.bytesandbrains.config.model", "inputs=1,outputs=2");
  size_t len;
  uint8_t *art = ir_encode(m, &len);
  bb_error err;
  bb_error_clear(&err);
  CHECK(try_install(art, len, T, 1, NULL, &err) == BB_INSTALL_UNREGISTERED_CONCRETE);
  CHECK_MSG(strstr(err.message, "slot `model` to `CpuMlp`") && strstr(err.message, "no registry was given") &&
                strstr(err.message, "bb_registry_add_shipped"),
            "%s", err.message);
  bb_registry *empty = bb_registry_new(NULL);
  CHECK(try_install(art, len, T, 1, empty, &err) == BB_INSTALL_UNREGISTERED_CONCRETE);
  CHECK_MSG(strstr(err.message, "`CpuMlp`, which the registry does not hold") &&
                strstr(err.message, "bb_registry_add"),
            "%s", err.message);
  bb_registry_free(empty);
  CHECK_MSG(try_install(art, len, T, 1, shipped_registry(), &err) == BB_INSTALL_OK, "%s", err.message);
  free(art);

  enum { MANY = 100 };
  static bb_component_type many[MANY];
  static char names[MANY][16];
  bb_registry *big = bb_registry_new(NULL);
  for (int i = 0; i < MANY; i++) {
    snprintf(names[i], sizeof names[i], "Model%d", i);
    many[i] = STUB_MODEL;
    many[i].type_name = names[i];
    CHECK(bb_registry_add(big, &many[i], NULL) == 0);
  }
  CHECK(bb_registry_add_shipped(big, NULL) == 0);
  CHECK_EQ_INT(bb_registry_count(big), MANY + bb_registry_count(shipped_registry()));
  CHECK(bb_registry_find(big, "Model99") == &many[99] && bb_registry_at(big, 99) == &many[99]);
  CHECK(bb_registry_find(big, "CpuMlp") != NULL);
  CHECK(bb_registry_add(big, &many[7], &err) == BB_ERR_EXISTS && strstr(err.message, "`Model7`"));
  m = two_targets(BB_COMPILED_VERSION);
  ir_bind(m, "T#a1", "model", "Model|Model99|-1");
  art = ir_encode(m, &len);
  bb_node *n = install_peer(art, len, 1, T, 1, big, NULL);
  const bb_component_type *type = NULL;
  CHECK(n && bb_node_component(n, "model", &type) && type == &many[99]);
  bb_node_free(n);
  free(art);
  bb_registry_free(big);
}

static void test_unresolved(void) {
  bb_registry *reg = registry_of(&STUB_MODEL);
  /* an op on a slot my targets do not bind */
  bb_model *m = two_targets(BB_COMPILED_VERSION);
  ir_bind(m, "U#b2", "model", MODEL_BINDING);
  expect_error(m, T, 1, reg, BB_INSTALL_UNRESOLVED_OP, "slot `model` is not bound");
  /* a syscall nobody implements, and a call to a function the artifact lacks */
  static const ir_node_spec frob[] = {{"Frobnicate", {"x"}, {"y"}}};
  static const ir_node_spec call[] = {{BB_DOMAIN_MODULE "::Missing", {"x"}, {"y"}}};
  m = ir_model(BB_COMPILED_VERSION);
  ir_add_fn(m, &(ir_fn_spec){.name = "T", .in = {"x"}, .out = {"y"}, IR_NODES(frob)});
  expect_error(m, T, 1, reg, BB_INSTALL_UNRESOLVED_OP, "Frobnicate");
  m = ir_model(BB_COMPILED_VERSION);
  ir_add_fn(m, &(ir_fn_spec){.name = "T", .in = {"x"}, .out = {"y"}, IR_NODES(call)});
  expect_error(m, T, 1, reg, BB_INSTALL_UNRESOLVED_OP, "Missing");
  /* a Send whose destination is not a wire name */
  static const ir_node_spec send[] = {
      {BB_DOMAIN_WIRE "::Send", {"x", "peers"}, {"sent"}, .meta = {BB_KEY_DEST_SITE_PREFIX "x", "no where"}}};
  m = ir_model(BB_COMPILED_VERSION);
  ir_add_fn(m, &(ir_fn_spec){.name = "T", .in = {"x", "peers"}, IR_NODES(send)});
  expect_error(m, T, 1, reg, BB_INSTALL_UNRESOLVED_DESTINATION, "`no where`, but that is not a wire name");
  /* ... one whose wire the artifact's wire table does not declare */
  static const ir_node_spec undeclared[] = {
      {BB_DOMAIN_WIRE "::Send", {"x", "peers"}, {"sent"}, .meta = {BB_KEY_DEST_SITE_PREFIX "x", "T.x"}}};
  m = ir_model(BB_COMPILED_VERSION);
  ir_add_fn(m, &(ir_fn_spec){.name = "T", .in = {"x", "peers"}, IR_NODES(undeclared)});
  expect_error(m, T, 1, reg, BB_INSTALL_BAD_ARTIFACT, "wire table has no `ai.bytesandbrains.wire_out.T.x`");
  /* ... and one that names none at all */
  static const ir_node_spec bare_send[] = {{BB_DOMAIN_WIRE "::Send", {"x", "peers"}, {"sent"}}};
  m = ir_model(BB_COMPILED_VERSION);
  ir_add_fn(m, &(ir_fn_spec){.name = "T", .in = {"x", "peers"}, IR_NODES(bare_send)});
  expect_error(m, T, 1, reg, BB_INSTALL_UNRESOLVED_DESTINATION, "names no wire");
  bb_registry_free(reg);
}

static void test_prefix_and_shared_slot(void) {
  bb_registry *reg = registry_of(&COUNTING_MODEL);
  size_t len;
  uint8_t *art = ir_encode(bound_two_targets(), &len);
  n_created = 0;
  bb_node *n = install_peer(art, len, 1, TU, 2, reg, NULL);
  CHECK_EQ_INT(n_created, 1); /* one slot, one component, two targets */
  if (n) {
    CHECK_EQ_INT(bb_node_target_count(n), 2);
    CHECK_STR(bb_node_target(n, 0), "T#a1");
    CHECK_STR(bb_node_target(n, 1), "U#b2");
    CHECK(bb_node_target(n, 2) == NULL);
    /* both partitions reach the same instance */
    bb_val *x = f32_val((const float[]){1}, 1);
    bb_named_value in = {"x", x};
    CHECK(bb_node_invoke(n, "T", &in, 1, 0, NULL) == 0); /* by prefix */
    CHECK(bb_node_invoke(n, "T#a1", &in, 1, 0, NULL) == 0); /* by resolved name */
    CHECK(bb_node_invoke(n, "T#a", &in, 1, 0, NULL) == BB_ERR_NOT_FOUND);
    bb_val_release(x);
    const bb_step *s;
    size_t count;
    CHECK(bb_node_poll(n, 0, &s, &count, NULL) == 0);
    CHECK_EQ_INT(count_steps(s, count, BB_STEP_APP_EVENT), 2);
    stub_state *st = bb_node_component(n, "model", NULL);
    CHECK(st && st->calls == 2);
    /* U's Recv and T's Send agree on the site */
    CHECK(bb_node_site(n, "U", "r") != UINT64_MAX);
    bb_node_free(n);
  }
  /* a target named twice (by prefix and by name) is one target */
  const char *twice[] = {"T", "T#a1"};
  n = install_peer(art, len, 1, twice, 2, reg, NULL);
  if (n) CHECK_EQ_INT(bb_node_target_count(n), 1);
  bb_node_free(n);
  free(art);
  bb_registry_free(reg);
}

/* A node carrying only a slot id (as the compiler stamps it) runs on the component its
 * target's binding gives that id; an id no binding of my targets gives is unresolved. */
static void test_slot_id_dispatch(void) {
  bb_registry *reg = registry_of(&STUB_MODEL);
  static const ir_node_spec by_id[] = {
      {BB_DOMAIN_ROLE_MODEL "::Forward", {"x"}, {"y"}, .meta = {"ai.bytesandbrains.slot_id", "3"}}};
  bb_model *m = ir_model(BB_COMPILED_VERSION);
  ir_add_fn(m, &(ir_fn_spec){.name = "T", .in = {"x"}, .out = {"y"}, IR_NODES(by_id)});
  ir_bind(m, "T", "model", "Model|StubModel|3");
  size_t len;
  uint8_t *art = ir_encode(m, &len);
  bb_node *n = install_peer(art, len, 1, T, 1, reg, NULL);
  if (n) {
    bb_val *x = f32_val((const float[]){2}, 1);
    bb_named_value in = {"x", x};
    CHECK(bb_node_invoke(n, "T", &in, 1, 0, NULL) == 0);
    bb_val_release(x);
    const bb_step *s;
    size_t count;
    CHECK(bb_node_poll(n, 0, &s, &count, NULL) == 0);
    CHECK_EQ_INT(count_steps(s, count, BB_STEP_APP_EVENT), 1);
    stub_state *st = bb_node_component(n, "model", NULL);
    CHECK(st && st->calls == 1);
    bb_node_free(n);
  }
  free(art);
  m = ir_model(BB_COMPILED_VERSION);
  ir_add_fn(m, &(ir_fn_spec){.name = "T", .in = {"x"}, .out = {"y"}, IR_NODES(by_id)});
  ir_bind(m, "T", "model", "Model|StubModel|4");
  expect_error(m, T, 1, reg, BB_INSTALL_UNRESOLVED_OP, "Forward");
  bb_registry_free(reg);
}

/* Every allocation of a full install (targets, addresses, components, sites, graphs, Send
 * destinations) fails once in turn: the install reports OutOfMemory and frees everything,
 * or — past the last allocation — succeeds. */
static void test_allocation_failures(void) {
  bb_registry *reg = registry_of(&STUB_MODEL);
  size_t len;
  bb_model *m = bound_two_targets();
  ir_meta(m, "ai.bytesandbrains.config.model", "lr=0.1");
  uint8_t *art = ir_encode(m, &len);
  bool succeeded = false;
  for (long budget = 0; budget < 5000 && !succeeded; budget++) {
    failing f = {budget, 0};
    bb_allocator alloc = failing_allocator(&f);
    bb_install_args a = {0};
    a.struct_size = sizeof a;
    a.self = bb_peer_id_from_u64(3);
    bb_address addr = p2p_address(&a.self);
    a.addresses = &addr;
    a.n_addresses = 1;
    a.artifact = art;
    a.artifact_len = len;
    a.targets = TU;
    a.n_targets = 2;
    a.registry = reg;
    a.alloc = &alloc;
    bb_node *n = NULL;
    bb_install_error_kind kind;
    bb_error err;
    int rc = bb_install(&a, &n, &kind, &err);
    if (rc == 0) {
      succeeded = true;
      CHECK(n && bb_node_target_count(n) == 2);
      bb_node_free(n);
    } else {
      CHECK_MSG(rc == BB_ERR_NOMEM && kind == BB_INSTALL_OUT_OF_MEMORY, "budget %ld: %s (%s)", budget, err.message,
                bb_install_error_name(kind));
      CHECK(n == NULL);
    }
    CHECK_MSG(f.live == 0, "budget %ld: %ld blocks leaked", budget, f.live);
  }
  CHECK(succeeded);
  free(art);
  bb_registry_free(reg);
}

int main(void) {
  RUN(test_argument_and_artifact_errors);
  RUN(test_binding_errors);
  RUN(test_registry_is_the_hosts);
  RUN(test_unresolved);
  RUN(test_prefix_and_shared_slot);
  RUN(test_slot_id_dispatch);
  RUN(test_allocation_failures);
  return bb_test_finish();
}
