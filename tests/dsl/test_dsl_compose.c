/* Sub-module composition and bootstrap recording: a sub-module called two and three
 * times (every call keeps its own outputs), nesting and module_instance
 * chains, CALL inputs bound by name, CALL outputs typed like the callee's ports, and the
 * bootstrap recording (shared slot counter, sub-bootstraps, dropped empty bootstraps). */
#include "dsltest.h"

typedef struct counter {
  int runs;
} counter;

/* Leaf(a) -> b = PassThrough(PassThrough(a)) */
static void leaf_body(bb_rec *g, void *user) {
  ((counter *)user)->runs++;
  bb_rec_output(g, "b", bb_rec_pass_through(g, bb_rec_input(g, "a", NULL)));
}

static counter leaf_runs;
static const bb_module LEAF = {sizeof(bb_module), "Leaf", leaf_body, NULL, &leaf_runs, NULL, 0};

static void thrice_body(bb_rec *g, void *user) {
  int calls = *(const int *)user;
  bb_value v = bb_rec_input(g, "x", NULL);
  for (int i = 0; i < calls; i++) {
    bb_binding b[] = {{"a", v}};
    v = bb_rec_call_output(g, bb_rec_call(g, &LEAF, b, 1), "b");
  }
  bb_rec_output(g, "y", v);
}

static const bb_module *const LEAF_ONLY[] = {&LEAF};

static void test_submodule_called_repeatedly(void) {
  for (int calls = 1; calls <= 3; calls++) {
    leaf_runs.runs = 0;
    bb_module top = {sizeof(bb_module), "Top", thrice_body, NULL, &calls, LEAF_ONLY, 1};
    bb_model *m = dt_build(&top);
    if (!m) continue;
    CHECK_EQ_INT(leaf_runs.runs, 1); /* the first recording is the function; later calls reuse it */
    CHECK_EQ_INT(m->functions.len, 2);
    const bb_function *leaf = dt_fn(m, "Leaf"), *root = dt_fn(m, "Top");
    CHECK(leaf && root);
    if (!leaf || !root) continue;
    CHECK_STRS(&leaf->inputs, STRS("a"));
    CHECK_STRS(&leaf->outputs, STRS("b"));
    CHECK_NODE(dt_node(leaf, 0), "PassThrough", BB_DOMAIN_SYSCALL, STRS("a"), STRS("v0"),
               STRS(BB_KEY_MODULE_INSTANCE, "Top_Leaf"));
    CHECK_NODE(dt_node(leaf, 1), "PassThrough", BB_DOMAIN_SYSCALL, STRS("v0"), STRS("b"),
               STRS(BB_KEY_MODULE_INSTANCE, "Top_Leaf"));
    CHECK_EQ_INT(root->nodes.len, calls + 1);
    /* every CALL, the third included, has its output: x -> v1 -> v2 -> v3 */
    for (int i = 0; i < calls; i++) {
      char in[16], out[16];
      snprintf(in, sizeof in, "v%d", i);
      snprintf(out, sizeof out, "v%d", i + 1);
      CHECK_NODE(dt_node(root, (size_t)i), "Leaf", BB_DOMAIN_MODULE, STRS(i ? in : "x"), STRS(out),
                 STRS(BB_KEY_MODULE_INSTANCE, "Top"));
    }
    char last[16];
    snprintf(last, sizeof last, "v%d", calls);
    CHECK_NODE(dt_node(root, (size_t)calls), "PassThrough", BB_DOMAIN_SYSCALL, STRS(last), STRS("y"),
               STRS(BB_KEY_MODULE_INSTANCE, "Top"));
    dt_check_roundtrip(m);
    bb_model_free(m);
  }
}

/* ---- nesting: Top -> Outer -> Inner, and Top -> Inner directly ------------------------- */

static const bb_slot TICKS = {BB_ROLE_DATA_SOURCE, "ticks", NULL};

static void inner_body(bb_rec *g, void *user) {
  (void)user;
  bb_rec_output(g, "tick", bb_rec_interval(g, 5000));
  bb_rec_output(g, "loaded", bb_rec_data_source_on_data_loaded(g, &TICKS));
}
static const bb_module INNER = {sizeof(bb_module), "Inner", inner_body, NULL, NULL, NULL, 0};
static const bb_module *const INNER_ONLY[] = {&INNER};

static void outer_body(bb_rec *g, void *user) {
  (void)user;
  bb_call c = bb_rec_call(g, &INNER, NULL, 0);
  bb_value tick = bb_rec_call_output(g, c, "tick");
  CHECK_STR(tick.type, BB_TYPE_TRIGGER);
  bb_rec_output(g, "tick", tick);
}
static const bb_module OUTER = {sizeof(bb_module), "Outer", outer_body, NULL, NULL, INNER_ONLY, 1};

static void nest_body(bb_rec *g, void *user) {
  (void)user;
  bb_value t1 = bb_rec_call_output(g, bb_rec_call(g, &OUTER, NULL, 0), "tick");
  bb_value t2 = bb_rec_call_output(g, bb_rec_call(g, &INNER, NULL, 0), "loaded");
  bb_rec_output(g, "both", bb_rec_gate_dispatch(g, (bb_value[]){t1, t2}, 2));
}
static const bb_module *const NEST_SUBS[] = {&OUTER, &INNER};
static const bb_module NEST = {sizeof(bb_module), "Nest", nest_body, NULL, NULL, NEST_SUBS, 2};

static void test_nesting_and_module_instance(void) {
  bb_model *m = dt_build(&NEST);
  if (!m) return;
  /* pre-order: a function is created when its first call starts */
  CHECK_EQ_INT(m->functions.len, 3);
  if (m->functions.len == 3) {
    CHECK_STR(m->functions.items[0]->name, "Nest");
    CHECK_STR(m->functions.items[1]->name, "Outer");
    CHECK_STR(m->functions.items[2]->name, "Inner");
  }
  const bb_function *inner = dt_fn(m, "Inner"), *outer = dt_fn(m, "Outer"), *root = dt_fn(m, "Nest");
  if (!inner || !outer || !root) return;
  /* Inner's first caller was Outer: its nodes carry that chain, shared by every caller */
  const bb_ir_node *interval = dt_node(inner, 0);
  CHECK_NODE(interval, "Interval", BB_DOMAIN_SYSCALL, NONE, STRS("v0"),
             STRS(BB_KEY_MODULE_INSTANCE, "Nest_Outer_Inner"));
  if (interval) CHECK_EQ_INT(bb_attr_get_int(&interval->attrs, "period_ns", 0), 5000);
  CHECK_OPAQUE(inner, "tick", BB_TYPE_TRIGGER);
  CHECK_STRS(&inner->outputs, STRS("tick", "loaded"));
  CHECK_STRS(&inner->attr_names, STRS("__slot_0"));
  CHECK_NODE(dt_node(outer, 0), "Inner", BB_DOMAIN_MODULE, NONE, STRS("v2", "v3"),
             STRS(BB_KEY_MODULE_INSTANCE, "Nest_Outer"));
  /* the CALL's outputs are typed like the callee's ports */
  CHECK_OPAQUE(outer, "v2", BB_TYPE_TRIGGER);
  CHECK_OPAQUE(outer, "v3", "");
  CHECK_NODE(dt_node(root, 0), "Outer", BB_DOMAIN_MODULE, NONE, STRS("v4"), STRS(BB_KEY_MODULE_INSTANCE, "Nest"));
  CHECK_NODE(dt_node(root, 1), "Inner", BB_DOMAIN_MODULE, NONE, STRS("v5", "v6"), STRS(BB_KEY_MODULE_INSTANCE, "Nest"));
  CHECK_NODE(dt_node(root, 2), "GateDispatch", BB_DOMAIN_SYSCALL, STRS("v4", "v6"), STRS("v7"),
             STRS(BB_KEY_MODULE_INSTANCE, "Nest"));
  CHECK_OPAQUE(root, "v7", BB_TYPE_BYTES);
  CHECK_OPAQUE(root, "both", BB_TYPE_BYTES);
  bb_model_free(m);
}

/* ---- CALL inputs follow the callee's declared inputs, not the binding order ------------- */

static void pair_body(bb_rec *g, void *user) {
  (void)user;
  bb_value first = bb_rec_input(g, "first", NULL);
  bb_value second = bb_rec_input(g, "second", BB_TYPE_PEER_ID);
  bb_rec_output(g, "sent", bb_rec_address_book_lookup(g, second));
  bb_rec_output(g, "kept", first);
}
static const bb_module PAIR = {sizeof(bb_module), "Pair", pair_body, NULL, NULL, NULL, 0};
static const bb_module *const PAIR_ONLY[] = {&PAIR};

static void by_name_body(bb_rec *g, void *user) {
  (void)user;
  bb_value p = bb_rec_input(g, "p", BB_TYPE_PEER_ID);
  bb_value q = bb_rec_input(g, "q", bb_tensor_type(BB_DTYPE_INT64));
  bb_binding b[] = {{"second", p}, {"first", q}};
  bb_call c = bb_rec_call(g, &PAIR, b, 2);
  bb_value kept = bb_rec_call_output(g, c, "kept");
  CHECK_STR(kept.type, "ai.bytesandbrains.tensor.i64");
  bb_rec_output(g, "kept", kept);
  bb_rec_output(g, "addresses", bb_rec_call_output(g, c, "sent"));
}
static const bb_module BY_NAME = {sizeof(bb_module), "ByName", by_name_body, NULL, NULL, PAIR_ONLY, 1};

static void test_call_inputs_bound_by_name(void) {
  bb_model *m = dt_build(&BY_NAME);
  if (!m) return;
  const bb_function *pair = dt_fn(m, "Pair"), *root = dt_fn(m, "ByName");
  if (pair && root) {
    CHECK_STRS(&pair->inputs, STRS("first", "second"));
    CHECK_TENSOR(pair, "first", "ai.bytesandbrains.tensor.i64", BB_DTYPE_INT64); /* from the actual */
    CHECK_OPAQUE(pair, "second", BB_TYPE_PEER_ID);
    CHECK_NODE(dt_node(root, 0), "Pair", BB_DOMAIN_MODULE, STRS("q", "p"), STRS("v1", "v2"),
               STRS(BB_KEY_MODULE_INSTANCE, "ByName"));
    CHECK_OPAQUE(root, "v1", BB_TYPE_ADDRESS_VEC);
    CHECK_TENSOR(root, "v2", "ai.bytesandbrains.tensor.i64", BB_DTYPE_INT64);
  }
  bb_model_free(m);
}

/* ---- bootstrap -------------------------------------------------------------------------- */

static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};
static const bb_slot INDEX = {BB_ROLE_INDEX, "index", NULL};
static const bb_slot CODEC = {BB_ROLE_CODEC, "codec", NULL};

static void child_body(bb_rec *g, void *user) {
  (void)user;
  bb_rec_output(g, "params", bb_rec_model_params(g, &MODEL));
}
static void child_bootstrap(bb_rec *g, void *user) {
  (void)user;
  bb_rec_codec_train(g, &CODEC, bb_rec_input(g, "samples", NULL));
}
static void nothing(bb_rec *g, void *user) {
  (void)g;
  (void)user;
}
static const bb_module CHILD = {sizeof(bb_module), "Child", child_body, child_bootstrap, NULL, NULL, 0};
static const bb_module QUIET = {sizeof(bb_module), "Quiet", child_body, nothing, NULL, NULL, 0};
static const bb_module PLAIN = {sizeof(bb_module), "Plain", child_body, NULL, NULL, NULL, 0};

static void boot_top_body(bb_rec *g, void *user) {
  (void)user;
  bb_value x = bb_rec_input(g, "x", NULL);
  bb_rec_output(g, "y", bb_rec_model_forward(g, &MODEL, x));
}

static void boot_top_bootstrap(bb_rec *g, void *user) {
  (void)user;
  bb_value seed = bb_rec_input(g, "seed", NULL);
  bb_rec_index_train(g, &INDEX, seed);        /* new slot: id 1, after the body's model 0 */
  bb_rec_model_load_parameters(g, &MODEL, seed); /* the body's slot keeps id 0 */
  bb_binding b[] = {{"samples", seed}};
  bb_call child = bb_rec_call_bootstrap(g, &CHILD, b, 1);
  bb_rec_call_bootstrap(g, &QUIET, NULL, 0); /* records nothing: no function, no CALL */
  bb_call plain = bb_rec_call_bootstrap(g, &PLAIN, NULL, 0); /* has no bootstrap at all */
  (void)child;
  (void)plain;
  bb_rec_call(g, &CHILD, NULL, 0); /* a body function used only by the bootstrap */
}

static const bb_module *const BOOT_SUBS[] = {&CHILD, &QUIET, &PLAIN};
static const bb_module BOOT_TOP = {sizeof(bb_module), "BootTop", boot_top_body, boot_top_bootstrap, NULL, BOOT_SUBS, 3};

static void test_bootstrap_recording(void) {
  bb_model *m = dt_build(&BOOT_TOP);
  if (!m) return;
  CHECK_EQ_INT(m->functions.len, 4);
  static const char *const names[] = {"BootTop", "BootTop__bootstrap", "Child__bootstrap", "Child"};
  for (size_t i = 0; i < 4 && i < m->functions.len; i++) CHECK_STR(m->functions.items[i]->name, names[i]);
  const bb_function *body = dt_fn(m, "BootTop"), *boot = dt_fn(m, "BootTop__bootstrap"),
                    *child_boot = dt_fn(m, "Child__bootstrap"), *child = dt_fn(m, "Child");
  if (!body || !boot || !child_boot || !child) return;
  CHECK_KVS(&body->metadata, STRS(BB_KEY_MODULE_PHASE, "body"));
  CHECK_KVS(&boot->metadata, STRS(BB_KEY_MODULE_PHASE, "bootstrap"));
  CHECK_EQ_INT(child_boot->metadata.len, 0); /* composed bootstraps run through their CALL only */
  CHECK_EQ_INT(child->metadata.len, 0);
  CHECK_STRS(&body->attr_names, STRS("__slot_0"));
  CHECK_STRS(&boot->attr_names, STRS("__slot_1"));
  CHECK_STRS(&child_boot->attr_names, STRS("__slot_2"));
  CHECK_STRS(&boot->inputs, STRS("seed"));
  CHECK_OPAQUE(boot, "seed", BB_TYPE_BYTES);
  /* value names restart at v0 in the bootstrap recording; slot ids do not */
  CHECK_NODE(dt_node(boot, 0), "Train", BB_DOMAIN_ROLE_INDEX, STRS("seed"), STRS("v0"),
             STRS(BB_KEY_REQUIRED_TRAIT, "IndexRuntime", BB_KEY_SLOT_ID, "1", BB_KEY_SLOT_NAME, "index",
                  BB_KEY_INDEX_PORT, "samples", BB_KEY_MODULE_INSTANCE, "BootTop__bootstrap"));
  CHECK_NODE(dt_node(boot, 1), "LoadParameters", BB_DOMAIN_ROLE_MODEL, STRS("seed"), STRS("v1"),
             STRS(BB_KEY_REQUIRED_TRAIT, "ModelRuntime", BB_KEY_SLOT_ID, "0", BB_KEY_SLOT_NAME, "model",
                  BB_KEY_MODULE_INSTANCE, "BootTop__bootstrap"));
  CHECK_NODE(dt_node(boot, 2), "Child__bootstrap", BB_DOMAIN_MODULE, STRS("seed"), NONE,
             STRS(BB_KEY_MODULE_INSTANCE, "BootTop__bootstrap"));
  CHECK_NODE(dt_node(boot, 3), "Child", BB_DOMAIN_MODULE, NONE, STRS("v4"),
             STRS(BB_KEY_MODULE_INSTANCE, "BootTop__bootstrap"));
  CHECK_EQ_INT(boot->nodes.len, 4);
  CHECK_NODE(dt_node(child_boot, 0), "Train", BB_DOMAIN_ROLE_CODEC, STRS("samples"), STRS("v2"),
             STRS(BB_KEY_REQUIRED_TRAIT, "CodecRuntime", BB_KEY_SLOT_ID, "2", BB_KEY_SLOT_NAME, "codec",
                  BB_KEY_CODEC_PORT, "in", BB_KEY_MODULE_INSTANCE, "BootTop__bootstrap_Child__bootstrap"));
  CHECK_NODE(dt_node(child, 0), "Params", BB_DOMAIN_ROLE_MODEL, NONE, STRS("v3"),
             STRS(BB_KEY_REQUIRED_TRAIT, "ModelRuntime", BB_KEY_SLOT_ID, "0", BB_KEY_SLOT_NAME, "model",
                  BB_KEY_MODULE_INSTANCE, "BootTop__bootstrap_Child"));
  dt_check_roundtrip(m);
#ifndef __EMSCRIPTEN__
  CHECK_MSG(dt_onnx_check(m, "bootstrap") == 0, "onnx.checker rejected the bootstrap model");
#endif
  bb_model_free(m);
}

static void boot_then_body_body(bb_rec *g, void *user) {
  (void)user;
  bb_rec_output(g, "p", bb_rec_call_output(g, bb_rec_call(g, &CHILD, NULL, 0), "params"));
}
static void reuse_bootstrap(bb_rec *g, void *user) {
  (void)user;
  bb_rec_output(g, "p", bb_rec_call_output(g, bb_rec_call(g, &CHILD, NULL, 0), "params"));
}
static const bb_module *const CHILD_ONLY[] = {&CHILD};

static void test_bootstrap_reuses_body_functions_and_empty_is_dropped(void) {
  /* the bootstrap calls a sub-module the body already recorded: one function, two CALLs */
  bb_module reuse = {sizeof(bb_module), "Reuse", boot_then_body_body, reuse_bootstrap, NULL, CHILD_ONLY, 1};
  bb_model *m = dt_build(&reuse);
  if (m) {
    CHECK_EQ_INT(m->functions.len, 3);
    const bb_function *boot = dt_fn(m, "Reuse__bootstrap");
    CHECK(dt_fn(m, "Child") != NULL);
    CHECK(boot != NULL);
    if (boot) CHECK_NODE(dt_node(boot, 0), "Child", BB_DOMAIN_MODULE, NONE, STRS("v0"),
                         STRS(BB_KEY_MODULE_INSTANCE, "Reuse__bootstrap"));
    bb_model_free(m);
  }
  /* a bootstrap callback that records nothing leaves no function */
  bb_module quiet = {sizeof(bb_module), "QuietTop", boot_top_body, nothing, NULL, NULL, 0};
  m = dt_build(&quiet);
  if (m) {
    CHECK_EQ_INT(m->functions.len, 1);
    CHECK(dt_fn(m, "QuietTop__bootstrap") == NULL);
    bb_model_free(m);
  }
}

int main(void) {
  RUN(test_submodule_called_repeatedly);
  RUN(test_nesting_and_module_instance);
  RUN(test_call_inputs_bound_by_name);
  RUN(test_bootstrap_recording);
  RUN(test_bootstrap_reuses_body_functions_and_empty_is_dropped);
  return bb_test_finish();
}
