/* Modules the host records through bb.wasm's ABI (wasm/bb_wasm.h, "Modules the host
 * records"), driven as js/src/dsl drives it — natively, under the sanitizers, and under
 * Node in the wasm build:
 *   - federated_digits, gossip_digits and split_cnn's SplitCnn recorded through
 *     bb_wasm_rec_* are byte for byte the Modules the examples record in C, and compile;
 *   - sub-modules (calls, their outputs, a composed bootstrap), constants and every
 *     attribute type cross the ABI;
 *   - the recorder's refusals end the build with its message, values of another build are
 *     refused as such, and the ABI's own misuse (outside a callback, a nested build,
 *     malformed attributes and literals) is a code with a message. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/artifact.h"
#include "bb/graph.h"
#include "bb_wasm.h"
#include "harness.h"
#include "bb/bytes.h"

/* ---- bytes the host writes ------------------------------------------------------------------ */

typedef struct out {
  uint8_t b[4096];
  size_t n;
} out;

static void put_u32(out *o, uint32_t v) { bb_le_put_u32(o->b + o->n, v), o->n += 4; }
static void put_u64(out *o, uint64_t v) { bb_le_put_u64(o->b + o->n, v), o->n += 8; }
static void put_u8(out *o, uint8_t v) { o->b[o->n++] = v; }
static void put_text(out *o, const char *s) {
  put_u32(o, (uint32_t)strlen(s));
  memcpy(o->b + o->n, s, strlen(s));
  o->n += strlen(s);
}
static void put_f32(out *o, float f) { bb_le_put_f32(o->b + o->n, f), o->n += 4; }

/* One INT attribute. */
static out int_attr(const char *name, int64_t v) {
  out o = {.n = 0};
  put_u32(&o, 1);
  put_text(&o, name);
  put_u32(&o, BB_ATTR_INT);
  put_u64(&o, (uint64_t)v);
  return o;
}

/* A literal: int64 [n] with the values. */
static out i64_literal(const int64_t *v, uint32_t n) {
  out o = {.n = 0};
  put_u32(&o, BB_DTYPE_INT64);
  put_u32(&o, 1);
  put_u64(&o, n);
  put_u8(&o, 1);
  put_u32(&o, n * 8);
  for (uint32_t i = 0; i < n; i++) put_u64(&o, (uint64_t)v[i]);
  return o;
}

/* ---- recording helpers ---------------------------------------------------------------------- */

static int32_t role1(int32_t role, const char *slot, const char *method, const int32_t *in, size_t n_in) {
  int32_t v = BB_WASM_VALUE_EMPTY;
  CHECK_EQ_INT(bb_wasm_rec_role_call(role, slot, NULL, method, in, n_in, NULL, 0, &v, 1), 0);
  return v;
}

static int32_t sys1(const char *op, const int32_t *in, size_t n_in, const out *attrs) {
  int32_t v = BB_WASM_VALUE_EMPTY;
  CHECK_EQ_INT(bb_wasm_rec_syscall(op, in, n_in, attrs ? attrs->b : NULL, attrs ? attrs->n : 0, &v, 1), 0);
  return v;
}

/* ---- the two examples, recorded by the host ----------------------------------------------------- */

static void fed_digits(void) {
  int32_t clients = bb_wasm_rec_input("clients", BB_TYPE_PEER_ID_VEC);
  int32_t server = bb_wasm_rec_input("server", BB_TYPE_PEER_ID_VEC);
  int32_t test_x = bb_wasm_rec_input("test_x", BB_TYPE_TENSOR_F32);
  int32_t test_y = bb_wasm_rec_input("test_y", BB_TYPE_TENSOR_F32);
  out period = int_attr("period_ns", 200000000);
  int32_t tick = sys1("Interval", NULL, 0, &period);
  int32_t agg[2];
  CHECK_EQ_INT(bb_wasm_rec_role_call(BB_ROLE_AGGREGATOR, "aggregator", NULL, "Aggregate", &tick, 1, NULL, 0, agg, 2), 0);
  int32_t loaded = role1(BB_ROLE_MODEL, "model", "LoadParameters", &agg[0], 1);
  int32_t accuracy = role1(BB_ROLE_MODEL, "model", "Evaluate", (int32_t[]){test_x, test_y, loaded}, 3);
  bb_wasm_rec_output("accuracy", accuracy);
  bb_wasm_rec_output("round", agg[1]);
  bb_wasm_rec_output("model", agg[0]);
  bb_wasm_rec_net_out("global", clients, bb_wasm_rec_bundle(agg, 2));
  static const char types[] = BB_TYPE_TENSOR_F32 "\0";
  int32_t parts[2];
  CHECK_EQ_INT(bb_wasm_rec_unbundle(bb_wasm_rec_lookup_output("global"), types, sizeof types, parts, 2), 0);
  int32_t fit[2];
  CHECK_EQ_INT(bb_wasm_rec_role_call(BB_ROLE_MODEL, "model", NULL, "Fit", &parts[0], 1, NULL, 0, fit, 2), 0);
  bb_wasm_rec_net_out("update", server, bb_wasm_rec_bundle((int32_t[]){fit[0], fit[1], parts[1]}, 3));
  int32_t received = bb_wasm_rec_lookup_output("update");
  role1(BB_ROLE_AGGREGATOR, "aggregator", "Contribute", (int32_t[]){received, received}, 2);
}

static void gossip_digits(void) {
  int32_t test_x = bb_wasm_rec_input("test_x", BB_TYPE_TENSOR_F32);
  int32_t test_y = bb_wasm_rec_input("test_y", BB_TYPE_TENSOR_F32);
  out period = int_attr("period_ns", 100000000);
  int32_t tick = sys1("Interval", NULL, 0, &period);
  int32_t params = role1(BB_ROLE_MODEL, "model", "Params", &tick, 1);
  int32_t accuracy = role1(BB_ROLE_MODEL, "model", "Evaluate", (int32_t[]){test_x, test_y, params}, 3);
  bb_wasm_rec_output("accuracy", accuracy);
  int32_t fit[2];
  CHECK_EQ_INT(bb_wasm_rec_role_call(BB_ROLE_MODEL, "model", NULL, "Fit", (int32_t[]){params, accuracy}, 2, NULL, 0,
                                     fit, 2),
               0);
  out n = int_attr("n", 1);
  int32_t peer = BB_WASM_VALUE_EMPTY;
  CHECK_EQ_INT(bb_wasm_rec_role_call(BB_ROLE_PEER_SELECTOR, "view", NULL, "Sample", &tick, 1, n.b, n.n, &peer, 1), 0);
  bb_wasm_rec_net_out("share", peer, fit[0]);
  int32_t received = bb_wasm_rec_lookup_output("share");
  role1(BB_ROLE_AGGREGATOR, "aggregator", "Contribute", (int32_t[]){received, received}, 2);
}

/* split_cnn's SplitCnn: a vanilla split of the CNN after its convolutions */
static void split_cnn(void) {
  int32_t server = bb_wasm_rec_input("server", BB_TYPE_PEER_ID_VEC);
  int32_t test_x = bb_wasm_rec_input("test_x", BB_TYPE_TENSOR_F32);
  int32_t test_y = bb_wasm_rec_input("test_y", BB_TYPE_TENSOR_F32);
  out step = int_attr(BB_ATTR_PERIOD_NS, 1000000), eval = int_attr(BB_ATTR_PERIOD_NS, 1000000000);
  int32_t tick = sys1("Interval", NULL, 0, &step);
  int32_t eval_tick = sys1("Interval", NULL, 0, &eval);
  static const char cuts[] = "/MaxPool_1_output_0";
  int32_t values[6] = {server, tick, test_x, test_y, eval_tick, BB_WASM_VALUE_EMPTY};
  CHECK_EQ_INT(bb_wasm_rec_split(BB_SPLIT_VANILLA, cuts, sizeof cuts, "client_model", "server_model", NULL, values, 6), 0);
  /* the sender of a port this function declared, and refusals */
  CHECK(bb_wasm_rec_lookup_sender("split_activations") != BB_WASM_VALUE_EMPTY);
}

/* ---- composition: a root with a leaf, a bootstrap, constants and every attribute type -------- */

static int32_t leaf_module; /* the handle the root calls */

static void leaf_body(void) {
  int32_t a = bb_wasm_rec_input("a", NULL);
  bb_wasm_rec_output("b", sys1("PassThrough", &a, 1, NULL));
}

static void leaf_bootstrap(void) { bb_wasm_rec_output("ready", sys1("Pulse", NULL, 0, NULL)); }

static void root_body(void) {
  int32_t x = bb_wasm_rec_input("x", BB_TYPE_TENSOR_F32);
  CHECK_STR(bb_wasm_rec_value_name(x), "x");
  CHECK_STR(bb_wasm_rec_value_type(x), BB_TYPE_TENSOR_F32);
  static const char names[] = "a";
  int32_t call = bb_wasm_rec_call(leaf_module, 0, names, sizeof names, &x, 1);
  int32_t b = bb_wasm_rec_call_output(call, "b");
  if (b != BB_WASM_VALUE_EMPTY) CHECK_STR(bb_wasm_rec_value_type(b), BB_TYPE_TENSOR_F32); /* the callee's port */
  /* a Backend op with every attribute type, and an omitted input */
  out attrs = {.n = 0};
  put_u32(&attrs, 7);
  put_text(&attrs, "i"), put_u32(&attrs, BB_ATTR_INT), put_u64(&attrs, (uint64_t)-3);
  put_text(&attrs, "f"), put_u32(&attrs, BB_ATTR_FLOAT), put_f32(&attrs, 0.5f);
  put_text(&attrs, "s"), put_u32(&attrs, BB_ATTR_STRING), put_text(&attrs, "text");
  put_text(&attrs, "is"), put_u32(&attrs, BB_ATTR_INTS), put_u32(&attrs, 2), put_u64(&attrs, 1), put_u64(&attrs, 2);
  put_text(&attrs, "fs"), put_u32(&attrs, BB_ATTR_FLOATS), put_u32(&attrs, 1), put_f32(&attrs, 2.5f);
  put_text(&attrs, "ss"), put_u32(&attrs, BB_ATTR_STRINGS), put_u32(&attrs, 2), put_text(&attrs, "p"),
      put_text(&attrs, "q");
  out lit = i64_literal((const int64_t[]){4, 5}, 2);
  put_text(&attrs, "t"), put_u32(&attrs, BB_ATTR_TENSOR);
  memcpy(attrs.b + attrs.n, lit.b, lit.n), attrs.n += lit.n;
  int32_t y = BB_WASM_VALUE_EMPTY;
  CHECK_EQ_INT(bb_wasm_rec_role_call(BB_ROLE_BACKEND, "compute", NULL, "Clip", (int32_t[]){b, BB_WASM_VALUE_OMITTED}, 2,
                                     attrs.b, attrs.n, &y, 1),
               0);
  bb_wasm_rec_output("y", y);
}

static void root_bootstrap(void) {
  out peer = i64_literal((const int64_t[]){100}, 1);
  int32_t server = bb_wasm_rec_constant("server_peer", BB_TYPE_PEER_ID, peer.b, peer.n);
  bb_wasm_rec_announce(server);
  int32_t looked = bb_wasm_rec_address_book_lookup(server);
  bb_wasm_rec_address_book_insert(server, looked, 1);
  int32_t call = bb_wasm_rec_call(leaf_module, 1, NULL, 0, NULL, 0);
  bb_wasm_rec_output("ready", bb_wasm_rec_call_output(call, "ready"));
}

/* ---- the host's callback --------------------------------------------------------------------- */

typedef void (*script)(void);
static script scripts[16][2]; /* [host id][bootstrap] */
static int records;

/* No node of this test signs (installed with signs = 0). */
int32_t bb_host_sign(int32_t node, const char *slot, const uint8_t *message, size_t len) {
  (void)node, (void)slot, (void)message, (void)len;
  return -1;
}

void bb_host_module_record(int32_t host_id, int32_t bootstrap) {
  records++;
  CHECK(host_id >= 0 && host_id < 16 && scripts[host_id][bootstrap] != NULL);
  if (host_id >= 0 && host_id < 16 && scripts[host_id][bootstrap]) scripts[host_id][bootstrap]();
}

/* Records module `handle`: the bytes (free them), or NULL with *rc the code. */
static uint8_t *build(int32_t handle, size_t *len, int32_t *rc) {
  *rc = bb_wasm_module_build(handle);
  *len = bb_wasm_result_len();
  if (*rc != 0) return NULL;
  uint8_t *copy = malloc(*len);
  memcpy(copy, bb_wasm_result_ptr(), *len);
  return copy;
}

static uint8_t *example_bytes(const char *name, size_t *len) {
  CHECK_EQ_INT(bb_wasm_example_record(name, 0), 0);
  *len = bb_wasm_result_len();
  uint8_t *copy = malloc(*len);
  memcpy(copy, bb_wasm_result_ptr(), *len);
  return copy;
}

static void test_examples_byte_identical(void) {
  static const struct {
    const char *example, *module;
    script body;
  } CASES[] = {{"federated_digits", "FedDigits", fed_digits},
               {"gossip_digits", "GossipDigits", gossip_digits},
               {"split_cnn", "SplitCnn", split_cnn}};
  for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
    scripts[1][0] = CASES[i].body;
    int32_t m = bb_wasm_module_new(CASES[i].module, 1, 0);
    CHECK(m > 0);
    size_t len = 0, want_len = 0;
    int32_t rc;
    uint8_t *got = build(m, &len, &rc);
    CHECK_MSG(rc == 0, "%s: %s", CASES[i].module, bb_wasm_last_error());
    uint8_t *want = example_bytes(CASES[i].example, &want_len);
    CHECK_EQ_INT(len, want_len);
    CHECK_MSG(got && len == want_len && memcmp(got, want, len) == 0, "%s differs from the C recording",
              CASES[i].module);
    /* and the host's recording compiles with the example's configuration */
    int32_t c = bb_wasm_compiler_new();
    CHECK_EQ_INT(bb_wasm_compiler_configure_example(c, CASES[i].example, 0), 0);
    if (got) CHECK_MSG(bb_wasm_compiler_compile(c, got, len) == 0, "%s", bb_wasm_last_error());
    bb_wasm_compiler_free(c);
    CHECK_EQ_INT(bb_wasm_module_free(m), 0);
    free(got);
    free(want);
  }
}

static void test_composition(void) {
  scripts[2][0] = leaf_body, scripts[2][1] = leaf_bootstrap;
  scripts[3][0] = root_body, scripts[3][1] = root_bootstrap;
  leaf_module = bb_wasm_module_new("Leaf", 2, 1);
  int32_t root = bb_wasm_module_new("Root", 3, 1);
  CHECK_EQ_INT(bb_wasm_module_add_submodule(root, leaf_module), 0);
  /* the root keeps its submodule alive: the leaf's handle may go first */
  CHECK_EQ_INT(bb_wasm_module_free(leaf_module), 0);
  leaf_module = bb_wasm_module_new("Leaf", 2, 1); /* a different module of the same name */
  size_t len;
  int32_t rc;
  uint8_t *bytes = build(root, &len, &rc);
  CHECK_EQ_INT(rc, BB_ERR_NOT_FOUND);
  CHECK_MSG(strstr(bb_wasm_last_error(), "module 'Root': calls module 'Leaf', which is not one of its submodules"),
            "%s", bb_wasm_last_error());
  CHECK_EQ_INT(bb_wasm_module_add_submodule(root, leaf_module), 0);
  bb_wasm_module_free(root);
  root = bb_wasm_module_new("Root", 3, 1);
  CHECK_EQ_INT(bb_wasm_module_add_submodule(root, leaf_module), 0);
  records = 0;
  bytes = build(root, &len, &rc);
  CHECK_MSG(rc == 0, "%s", bb_wasm_last_error());
  CHECK_EQ_INT(records, 4); /* Root, Leaf, Root__bootstrap, Leaf__bootstrap */
  bb_model *m = NULL;
  bb_error err;
  CHECK_MSG(bytes && bb_model_decode(bytes, len, NULL, NULL, &m, &err) == 0, "%s", err.message);
  if (m) {
    CHECK_EQ_INT(m->functions.len, 4);
    const bb_function *f = bb_model_find_function(m, BB_DOMAIN_MODULE, "Root");
    const bb_ir_node *clip = f && f->nodes.len >= 2 ? f->nodes.items[1] : NULL;
    CHECK(clip && strcmp(clip->op_type, "Clip") == 0 && clip->inputs.len == 2 && !*clip->inputs.items[1]);
    if (clip) {
      CHECK_EQ_INT(bb_attr_get_int(&clip->attrs, "i", 0), -3);
      CHECK(bb_attr_get_float(&clip->attrs, "f", 0) == 0.5f);
      CHECK_STR(bb_attr_get_string(&clip->attrs, "s", ""), "text");
      const bb_attr *t = bb_attr_find(&clip->attrs, "t"), *ss = bb_attr_find(&clip->attrs, "ss");
      CHECK(t && t->t && t->t->n_dims == 1 && t->t->dims[0] == 2);
      CHECK(ss && ss->n_strings == 2);
    }
    const bb_function *boot = bb_model_find_function(m, BB_DOMAIN_MODULE, "Root" BB_BOOTSTRAP_SUFFIX);
    CHECK(boot && boot->nodes.len == 6); /* Constant, Announce, Lookup, InsertMany, the call, "ready" */
    bb_model_free(m);
  }
  free(bytes);
  CHECK_EQ_INT(bb_wasm_module_free(root), 0);
  CHECK_EQ_INT(bb_wasm_module_free(leaf_module), 0);
  CHECK_EQ_INT(bb_wasm_module_free(leaf_module), BB_ERR_INVALID_ARGUMENT); /* stale */
}

/* ---- refusals ------------------------------------------------------------------------------------- */

static int32_t kept; /* a value kept from an earlier build */

static void keep_value(void) {
  kept = bb_wasm_rec_input("x", NULL);
  bb_wasm_rec_output("y", kept);
}
static void reuse_value(void) { bb_wasm_rec_output("y", kept); }
static void host_fails(void) {
  bb_wasm_rec_input("x", NULL);
  CHECK_EQ_INT(bb_wasm_rec_failed(), 0);
  CHECK_EQ_INT(bb_wasm_rec_fail(BB_ERR_LIMIT, "the callback threw: no model"), 0);
  CHECK_EQ_INT(bb_wasm_rec_failed(), 1);
  /* everything after the first error records nothing */
  CHECK_EQ_INT(bb_wasm_rec_input("z", NULL), BB_WASM_VALUE_EMPTY);
}
static void wrong_method(void) { role1(BB_ROLE_MODEL, "model", "Foward", NULL, 0); }
static void nested_build(void) {
  CHECK_EQ_INT(bb_wasm_module_build(1), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(bb_wasm_last_error(), "a build is in progress") != NULL);
  int32_t x = bb_wasm_rec_input("x", NULL);
  CHECK(bb_wasm_rec_value_name(BB_WASM_VALUE_FOREIGN) == NULL);
  CHECK(strstr(bb_wasm_last_error(), "is not a value of this build") != NULL);
  /* malformed attributes and literals are the ABI's codes, not the recorder's */
  static const uint8_t short_attrs[] = {1, 0, 0, 0, 9, 0};
  int32_t v;
  CHECK_EQ_INT(bb_wasm_rec_syscall("Sleep", &x, 1, short_attrs, sizeof short_attrs, &v, 1), BB_ERR_MALFORMED);
  CHECK(strstr(bb_wasm_last_error(), "attribute 0: its name is cut short") != NULL);
  out lit = i64_literal((const int64_t[]){1}, 1);
  lit.n -= 3;
  CHECK_EQ_INT(bb_wasm_rec_constant(NULL, NULL, lit.b, lit.n), BB_ERR_MALFORMED);
  CHECK_EQ_INT(bb_wasm_rec_unbundle(x, "a", 2, &v, 2), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_wasm_rec_call(999, 0, NULL, 0, NULL, 0), BB_ERR_INVALID_ARGUMENT);
  bb_wasm_rec_output("y", x);
}

static void test_refusals(void) {
  int32_t rc;
  size_t len;
  scripts[4][0] = keep_value;
  int32_t m = bb_wasm_module_new("T", 4, 0);
  free(build(m, &len, &rc));
  CHECK_EQ_INT(rc, 0);
  scripts[4][0] = reuse_value;
  CHECK(build(m, &len, &rc) == NULL);
  CHECK_EQ_INT(rc, BB_ERR_INVALID_ARGUMENT);
  CHECK_MSG(strstr(bb_wasm_last_error(), "module 'T': the value of output port 'y' is not a value of this recording"),
            "%s", bb_wasm_last_error());
  CHECK_EQ_INT(len, 0);

  scripts[4][0] = host_fails;
  CHECK(build(m, &len, &rc) == NULL);
  CHECK_EQ_INT(rc, BB_ERR_LIMIT);
  CHECK_STR(bb_wasm_last_error(), "module 'T': the callback threw: no model");

  scripts[4][0] = wrong_method;
  CHECK(build(m, &len, &rc) == NULL);
  CHECK_EQ_INT(rc, BB_ERR_NOT_FOUND);
  CHECK_MSG(strstr(bb_wasm_last_error(), "Model slot 'model' has no method 'Foward'"), "%s", bb_wasm_last_error());

  scripts[4][0] = nested_build;
  free(build(m, &len, &rc));
  CHECK_MSG(rc == 0, "%s", bb_wasm_last_error());
  bb_wasm_module_free(m);

  m = bb_wasm_module_new("Bad-Name", 4, 0);
  CHECK(build(m, &len, &rc) == NULL);
  CHECK_MSG(strstr(bb_wasm_last_error(), "module name 'Bad-Name' is not allowed"), "%s", bb_wasm_last_error());
  bb_wasm_module_free(m);

  /* outside a recording callback */
  CHECK_EQ_INT(bb_wasm_rec_input("x", NULL), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(bb_wasm_last_error(), "only while a module's body or bootstrap is being recorded") != NULL);
  CHECK_EQ_INT(bb_wasm_rec_failed(), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_wasm_module_build(12345), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_wasm_module_new(NULL, 1, 0), BB_ERR_INVALID_ARGUMENT);
}

static void frobnicate(void) {
  int32_t x = bb_wasm_rec_input("x", BB_TYPE_TENSOR_F32);
  bb_wasm_rec_output("y", role1(BB_ROLE_BACKEND, "compute", "Frobnicate", &x, 1));
}

static void test_op_sets(void) {
  /* CpuBackend's op set comes declared: an op it lacks fails the compile */
  scripts[5][0] = frobnicate;
  int32_t m = bb_wasm_module_new("Frob", 5, 0);
  size_t len;
  int32_t rc;
  uint8_t *model = build(m, &len, &rc);
  bb_wasm_module_free(m);
  int32_t c = bb_wasm_compiler_new();
  CHECK_EQ_INT(bb_wasm_compiler_bind(c, BB_ROLE_BACKEND, "compute", "CpuBackend", NULL), 0);
  CHECK(model && bb_wasm_compiler_compile(c, model, len) < 0);
  CHECK_MSG(strstr(bb_wasm_last_error(), "UnknownOp") && strstr(bb_wasm_last_error(), "Frobnicate"), "%s",
            bb_wasm_last_error());
  bb_wasm_compiler_free(c);
  /* a host backend's op set is declared through the ABI */
  c = bb_wasm_compiler_new();
  CHECK_EQ_INT(bb_wasm_compiler_bind(c, BB_ROLE_BACKEND, "compute", "HostGpu", NULL), 0);
  static const char frob[] = "\0Frobnicate";
  CHECK_EQ_INT(bb_wasm_compiler_declare_op_set(c, "HostGpu", frob, sizeof frob), 0);
  CHECK_MSG(model && bb_wasm_compiler_compile(c, model, len) == 0, "%s", bb_wasm_last_error());
  bb_wasm_compiler_free(c);
  free(model);
  c = bb_wasm_compiler_new();
  static const char ops[] = "\0Add\0ai.onnx\0Relu";
  CHECK_EQ_INT(bb_wasm_compiler_declare_op_set(c, "HostGpu", ops, sizeof ops), 0);
  CHECK_EQ_INT(bb_wasm_compiler_declare_op_set(c, "HostGpu", ops, sizeof ops - 5), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(bb_wasm_last_error(), "do not pair") != NULL);
  bb_wasm_compiler_free(c);
}

int main(void) {
  CHECK_EQ_INT(bb_wasm_abi_version(), 10);
  RUN(test_examples_byte_identical);
  RUN(test_composition);
  RUN(test_refusals);
  RUN(test_op_sets);
  return bb_test_finish();
}
