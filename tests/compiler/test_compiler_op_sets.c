/* Backend op sets: a Backend slot accepts exactly the ops its bound type declared
 * (bb_compiler_declare_op_set); CpuBackend's set is the CPU executor's registry; a
 * second backend declaring another set runs an op the CPU does not have; types nobody
 * declared accept any op. The check covers nodes in sub-module functions and hand-built
 * nodes bound by role, and bad declarations are refused. */
#include "bb/cpu.h"
#include "bb/roles.h"
#include "cctest.h"

static const bb_slot COMPUTE = {BB_ROLE_BACKEND, "compute", NULL};

/* x -> Relu -> <user's op> -> output "y" */
static void probe_body(bb_rec *g, void *user) {
  bb_value x = bb_rec_input(g, "x", BB_TYPE_TENSOR_F32);
  bb_value r = bb_rec_backend(g, &COMPUTE, "Relu", &x, 1, NULL, 0);
  bb_rec_output(g, "y", bb_rec_backend(g, &COMPUTE, (const char *)user, &r, 1, NULL, 0));
}

/* Records the probe with `op` as its second backend op. */
static bb_model *probe(const char *op) {
  bb_module m = {sizeof m, "Probe", probe_body, NULL, (void *)op, NULL, 0};
  return dt_build(&m);
}

/* A compiler with compute bound to `type`. */
static bb_compiler *bound_to(const char *type) {
  bb_compiler *c = bb_compiler_new(NULL);
  ct_bind(c, BB_ROLE_BACKEND, "compute", type);
  return c;
}

static void declare(bb_compiler *c, const char *type, const bb_component_op *ops, size_t n) {
  bb_error err;
  CHECK_MSG(bb_compiler_declare_op_set(c, type, ops, n, &err) == 0, "declare_op_set %s: %s", type, err.message);
}

static void test_cpu_backend_op_set(void) {
  /* every operator of the CPU registry passes; "Zeros" is none of them */
  CHECK(!bb_cpu_supports(BB_DOMAIN_ONNX, "Zeros", BB_ONNX_OPSET_VERSION));
  bb_compiler *c = bound_to("CpuBackend");
  bb_error err;
  CHECK_EQ_INT(bb_cpu_backend_declare_op_set(c, &err), 0);
  for (size_t i = 0; i < bb_cpu_op_count(); i++) {
    bb_model *rec = probe(bb_cpu_op_name(i));
    bb_model *out = NULL;
    int rc = rec ? bb_compiler_compile_model(c, rec, &out, &err) : -1;
    CHECK_MSG(rc == 0, "CPU op %s refused: %s", bb_cpu_op_name(i), rc ? err.message : "");
    bb_model_free(out);
    bb_model_free(rec);
  }
  bb_model *rec = probe("Zeros");
  if (rec) ct_compile_fails(c, rec, BB_COMPILE_UNKNOWN_OP,
                            STRS("UnknownOp: ", "node `ai.onnx::Zeros#1` of `Probe`", "runs op Zeros",
                                 "Backend slot \"compute\"", "bound to CpuBackend", "does not declare that op"));
  bb_model_free(rec);
  bb_compiler_free(c);
}

static void test_second_backend(void) {
  static const bb_component_op GPU[] = {{BB_DOMAIN_ONNX, "Relu"}, {BB_DOMAIN_ONNX_ALIAS, "Zeros"}};
  bb_model *rec = probe("Zeros");
  if (!rec) return;
  /* FakeGpu runs Zeros, which the CPU lacks */
  bb_compiler *c = bound_to("FakeGpu");
  bb_error err;
  CHECK_EQ_INT(bb_cpu_backend_declare_op_set(c, &err), 0);
  declare(c, "FakeGpu", GPU, 2);
  bb_model *m = ct_compile(c, rec);
  if (m) {
    const bb_function *p = ct_partition(m, "Probe");
    CHECK(p != NULL);
    CHECK(ct_op(p, "Zeros", 0) != NULL);
    CHECK_STR(ct_binding(m, p, "compute"), "Backend|FakeGpu|0");
  }
  bb_model_free(m);
  /* the same model bound to CpuBackend fails, and to a type nobody declared passes */
  CHECK_EQ_INT(bb_compiler_unbind(c, "compute", &err), 0);
  ct_bind(c, BB_ROLE_BACKEND, "compute", "CpuBackend");
  ct_compile_fails(c, rec, BB_COMPILE_UNKNOWN_OP, STRS("runs op Zeros", "bound to CpuBackend"));
  CHECK_EQ_INT(bb_compiler_unbind(c, "compute", &err), 0);
  ct_bind(c, BB_ROLE_BACKEND, "compute", "SomeoneElsesBackend");
  m = ct_compile(c, rec);
  CHECK(m != NULL);
  bb_model_free(m);
  /* re-declaring replaces: without Relu, FakeGpu refuses the first node */
  CHECK_EQ_INT(bb_compiler_unbind(c, "compute", &err), 0);
  ct_bind(c, BB_ROLE_BACKEND, "compute", "FakeGpu");
  declare(c, "FakeGpu", GPU + 1, 1);
  ct_compile_fails(c, rec, BB_COMPILE_UNKNOWN_OP,
                   STRS("node `ai.onnx::Relu#0` of `Probe`", "runs op Relu", "bound to FakeGpu", "1 ops"));
  /* an empty op set runs nothing */
  declare(c, "FakeGpu", NULL, 0);
  ct_compile_fails(c, rec, BB_COMPILE_UNKNOWN_OP, STRS("runs op Relu", "0 ops"));
  /* duplicates collapse */
  static const bb_component_op TWICE[] = {{"", "Zeros"}, {NULL, "Relu"}, {"ai.onnx", "Zeros"}, {"", "Relu"}};
  declare(c, "FakeGpu", TWICE, 4);
  m = ct_compile(c, rec);
  CHECK(m != NULL);
  bb_model_free(m);
  bb_compiler_free(c);
  bb_model_free(rec);
}

/* A backend op inside a sub-module's own function: called twice, not pure ONNX and off
 * the wire, Leaf stays a function of its own. */
static void leaf_body(bb_rec *g, void *user) {
  (void)user;
  static const float ONE = 1.0f;
  static const bb_literal SCALE = {BB_DTYPE_FLOAT, NULL, 0, &ONE, sizeof ONE};
  bb_value in[2] = {bb_rec_input(g, "x", BB_TYPE_TENSOR_F32), bb_rec_constant(g, "scale", NULL, &SCALE)};
  bb_rec_output(g, "y", bb_rec_backend(g, &COMPUTE, "Zeros", in, 2, NULL, 0));
}
static const bb_module LEAF = {sizeof(bb_module), "Leaf", leaf_body, NULL, NULL, NULL, 0};

static void outer_body(bb_rec *g, void *user) {
  (void)user;
  bb_binding b = {"x", bb_rec_input(g, "x", BB_TYPE_TENSOR_F32)};
  bb_call first = bb_rec_call(g, &LEAF, &b, 1);
  b.value = bb_rec_call_output(g, first, "y");
  bb_rec_output(g, "y", bb_rec_call_output(g, bb_rec_call(g, &LEAF, &b, 1), "y"));
}
static const bb_module *const OUTER_SUBS[] = {&LEAF};
static const bb_module OUTER = {sizeof(bb_module), "Outer", outer_body, NULL, NULL, OUTER_SUBS, 1};

static void test_nodes_in_sub_functions(void) {
  bb_model *rec = dt_build(&OUTER);
  if (!rec) return;
  CHECK(dt_fn(rec, "Leaf") != NULL);
  bb_compiler *c = bound_to("CpuBackend");
  bb_error err;
  CHECK_EQ_INT(bb_cpu_backend_declare_op_set(c, &err), 0);
  ct_compile_fails(c, rec, BB_COMPILE_UNKNOWN_OP, STRS("of `Leaf`", "runs op Zeros", "bound to CpuBackend"));
  bb_compiler_free(c);
  bb_model_free(rec);
}

/* Hand-built IR: a backend node without a slot name is bound by role. */
static void test_node_bound_by_role(void) {
  bb_function *f;
  bb_model *m = ct_model("Hand", &f);
  ct_input(m, f, "x", BB_TYPE_TENSOR_F32);
  bb_ir_node *n = ct_node(m, f, "Zeros", BB_DOMAIN_ONNX_ALIAS, STRS("x"), STRS("y"));
  bb_kv_append(m, &n->metadata, BB_KEY_REQUIRED_TRAIT, bb_role_trait(BB_ROLE_BACKEND));
  bb_kv_append(m, &n->metadata, BB_KEY_SLOT_ID, "0");
  bb_strlist_append(m, &f->outputs, "y");
  bb_compiler *c = bound_to("FakeGpu");
  static const bb_component_op ADD[] = {{"", "Add"}};
  declare(c, "FakeGpu", ADD, 1);
  ct_compile_fails(c, m, BB_COMPILE_UNKNOWN_OP, STRS("runs op Zeros (domain \"ai.onnx\")", "bound to FakeGpu"));
  static const bb_component_op ZEROS[] = {{"", "Zeros"}};
  declare(c, "FakeGpu", ZEROS, 1);
  bb_model *out = ct_compile(c, m);
  CHECK(out != NULL);
  bb_model_free(out);
  bb_compiler_free(c);
  bb_model_free(m);
}

static void test_bad_declarations(void) {
  bb_compiler *c = bb_compiler_new(NULL);
  bb_error err;
  static const bb_component_op OK[] = {{"", "Add"}};
  static const bb_component_op NO_OP[] = {{"", NULL}};
  static const bb_component_op EMPTY_OP[] = {{"", ""}};
  static const bb_component_op SPACED[] = {{"my domain", "Add"}};
  CHECK_EQ_INT(bb_compiler_declare_op_set(NULL, "T", OK, 1, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_compiler_declare_op_set(c, NULL, OK, 1, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_compiler_declare_op_set(c, "a type", OK, 1, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_compiler_declare_op_set(c, "T", NULL, 1, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_compiler_declare_op_set(c, "T", NO_OP, 1, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "op 0") != NULL);
  CHECK_EQ_INT(bb_compiler_declare_op_set(c, "T", EMPTY_OP, 1, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_compiler_declare_op_set(c, "T", SPACED, 1, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_compiler_declare_op_set(c, "T", OK, 1, NULL), 0);
  bb_compiler_free(c);
}

int main(void) {
  RUN(test_cpu_backend_op_set);
  RUN(test_second_backend);
  RUN(test_nodes_in_sub_functions);
  RUN(test_node_bound_by_role);
  RUN(test_bad_declarations);
  return bb_test_finish();
}
