/* bb_rec_syscall and bb_rec_protocol_call: every syscall of the table recorded with the
 * shape it declares (inputs, outputs, attributes, output types), the same node as the
 * dedicated helpers where there is one, and each refusal with its message; protocol ops
 * in their own domain, imported by the function, and their refusals. */
#include "dsltest.h"

#define MI BB_KEY_MODULE_INSTANCE, "Table"

static bb_value output1(bb_rec *g, const char *op, const bb_value *in, size_t n_in, const bb_op_attr *attrs,
                        size_t n_attrs) {
  bb_value out = {0};
  CHECK_MSG(bb_rec_syscall(g, op, in, n_in, attrs, n_attrs, &out, 1) == 0, "%s", op);
  return out;
}

static void table_body(bb_rec *g, void *user) {
  (void)user;
  bb_value t = bb_rec_input(g, "t", BB_TYPE_TENSOR_F32);
  bb_value raw = bb_rec_input(g, "raw", NULL);
  bb_value tick = output1(g, "Interval", NULL, 0, (bb_op_attr[]){BB_OP_ATTR_INT("period_ns", 5)}, 1); /* v0 */
  CHECK_STR(tick.type, BB_TYPE_TRIGGER);
  bb_value tees[3];
  CHECK_EQ_INT(bb_rec_syscall(g, "Tee", &t, 1, NULL, 0, tees, 3), 0); /* v1..v3 */
  CHECK_STR(tees[2].type, BB_TYPE_TENSOR_F32);
  bb_value gated = output1(g, "Gate", (bb_value[]){t, tick}, 2, NULL, 0); /* v4 */
  CHECK_STR(gated.type, BB_TYPE_TENSOR_F32);
  bb_value any_same = output1(g, "Any", (bb_value[]){t, gated}, 2, NULL, 0);
  CHECK_STR(any_same.type, BB_TYPE_TENSOR_F32);
  bb_value any_mixed =
      output1(g, "Any", (bb_value[]){t, tick}, 2, (bb_op_attr[]){BB_OP_ATTR_STRING("group", "first")}, 1);
  CHECK_STR(any_mixed.type, BB_TYPE_ABSTRACT);
  bb_value now = output1(g, "Clock", &tick, 1, NULL, 0);
  CHECK_STR(now.type, BB_TYPE_ABSTRACT);
  bb_value slept = output1(g, "Sleep", &tick, 1, (bb_op_attr[]){BB_OP_ATTR_INT("duration_ns", 0)}, 1);
  CHECK_STR(slept.type, BB_TYPE_TRIGGER);
  bb_op_attr limit[] = {BB_OP_ATTR_STRING("name", "uploads"), BB_OP_ATTR_INT("n", 2)};
  output1(g, "Limit.Acquire", &slept, 1, limit, 2);
  bb_value queued = output1(g, "Serialize.Enqueue", &raw, 1, (bb_op_attr[]){BB_OP_ATTR_STRING("queue", "q")}, 1);
  bb_value dequeued = output1(g, "Serialize.Dequeue", &queued, 1, (bb_op_attr[]){BB_OP_ATTR_STRING("queue", "q")}, 1);
  CHECK_STR(dequeued.type, BB_TYPE_BYTES);
  CHECK_EQ_INT(bb_rec_syscall(g, "Hold.Stash", &dequeued, 1, (bb_op_attr[]){BB_OP_ATTR_STRING("slot", "s")}, 1, NULL, 0),
               0);
  CHECK_EQ_INT(bb_rec_syscall(g, "AppEmit", &now, 1, (bb_op_attr[]){BB_OP_ATTR_STRING("name", "time")}, 1, NULL, 0),
               0);
  CHECK_EQ_INT(bb_rec_syscall(g, "IncrMetric", &tick, 1,
                              (bb_op_attr[]){BB_OP_ATTR_STRING("name", "ticks"), BB_OP_ATTR_INT("delta", 3)}, 2, NULL, 0),
               0);
  bb_rec_output(g, "any", any_mixed);
}

static const bb_module TABLE = {sizeof(bb_module), "Table", table_body, NULL, NULL, NULL, 0};

static void test_node_shapes(void) {
  bb_model *m = dt_build(&TABLE);
  if (!m) return;
  const bb_function *f = dt_fn(m, "Table");
  CHECK_NODE(dt_node(f, 0), "Interval", BB_DOMAIN_SYSCALL, NONE, STRS("v0"), STRS(MI));
  CHECK_EQ_INT(bb_attr_get_int(&dt_node(f, 0)->attrs, "period_ns", 0), 5);
  CHECK_NODE(dt_node(f, 1), "Tee", BB_DOMAIN_SYSCALL, STRS("t"), STRS("v1", "v2", "v3"), STRS(MI));
  CHECK_NODE(dt_node(f, 2), "Gate", BB_DOMAIN_SYSCALL, STRS("t", "v0"), STRS("v4"), STRS(MI));
  CHECK_NODE(dt_node(f, 4), "Any", BB_DOMAIN_SYSCALL, STRS("t", "v0"), STRS("v6"), STRS(MI));
  CHECK_STR(bb_attr_get_string(&dt_node(f, 4)->attrs, "group", ""), "first");
  CHECK_NODE(dt_node(f, 7), "Limit.Acquire", BB_DOMAIN_SYSCALL, STRS("v8"), STRS("v9"), STRS(MI));
  CHECK_STR(bb_attr_get_string(&dt_node(f, 7)->attrs, "name", ""), "uploads");
  CHECK_EQ_INT(bb_attr_get_int(&dt_node(f, 7)->attrs, "n", 0), 2);
  CHECK_NODE(dt_node(f, 10), "Hold.Stash", BB_DOMAIN_SYSCALL, STRS("v11"), NONE, STRS(MI));
  CHECK_NODE(dt_node(f, 11), "AppEmit", BB_DOMAIN_SYSCALL, STRS("v7"), NONE, STRS(MI));
  CHECK_NODE(dt_node(f, 12), "IncrMetric", BB_DOMAIN_SYSCALL, STRS("v0"), NONE, STRS(MI));
  CHECK_EQ_INT(bb_attr_get_int(&dt_node(f, 12)->attrs, "delta", 0), 3);
  CHECK_OPAQUE(f, "v7", "");
  CHECK_OPAQUE(f, "v11", BB_TYPE_BYTES);
  bb_model_free(m);
}

/* The generic form of PassThrough, Interval and GateDispatch records what the helpers do. */
static void helpers_body(bb_rec *g, void *user) {
  (void)user;
  bb_value x = bb_rec_input(g, "x", BB_TYPE_PEER_ID);
  bb_value tick = bb_rec_interval(g, 7);
  bb_rec_output(g, "a", bb_rec_pass_through(g, x));
  bb_rec_output(g, "b", bb_rec_gate_dispatch(g, &tick, 1));
}
static void generic_body(bb_rec *g, void *user) {
  (void)user;
  bb_value x = bb_rec_input(g, "x", BB_TYPE_PEER_ID);
  bb_value tick = output1(g, "Interval", NULL, 0, (bb_op_attr[]){BB_OP_ATTR_INT("period_ns", 7)}, 1);
  bb_rec_output(g, "a", output1(g, "PassThrough", &x, 1, NULL, 0));
  bb_rec_output(g, "b", output1(g, "GateDispatch", &tick, 1, NULL, 0));
}

static void test_same_as_helpers(void) {
  bb_module helpers = {sizeof(bb_module), "Same", helpers_body, NULL, NULL, NULL, 0};
  bb_module generic = {sizeof(bb_module), "Same", generic_body, NULL, NULL, NULL, 0};
  bb_model *a = dt_build(&helpers), *b = dt_build(&generic);
  uint8_t *ab = NULL, *bbytes = NULL;
  size_t alen = 0, blen = 0;
  if (a && b && !dt_encode(a, &ab, &alen) && !dt_encode(b, &bbytes, &blen)) {
    CHECK_EQ_INT(alen, blen);
    CHECK(alen == blen && memcmp(ab, bbytes, alen) == 0);
  }
  bb_buffer_free(NULL, ab);
  bb_buffer_free(NULL, bbytes);
  bb_model_free(a);
  bb_model_free(b);
}

static void test_every_op_records(void) {
  CHECK(bb_rec_syscall_count() >= 27);
  CHECK(bb_rec_syscall_name(bb_rec_syscall_count()) == NULL);
  for (size_t i = 0; i < bb_rec_syscall_count(); i++) CHECK(bb_rec_syscall_name(i) != NULL);
}

/* ---- refusals ----------------------------------------------------------------------- */

static bb_value trig(bb_rec *g) { return bb_rec_input(g, "go", BB_TYPE_TRIGGER); }

static void unknown_op(bb_rec *g, void *u) {
  (void)u;
  bb_value out;
  bb_rec_syscall(g, "Wait", NULL, 0, NULL, 0, &out, 1);
}
static void compiler_op(bb_rec *g, void *u) {
  (void)u;
  bb_value out, in = trig(g);
  bb_rec_syscall(g, "DeadlineCheck", &in, 1, NULL, 0, &out, 1);
}
static void constant_op(bb_rec *g, void *u) {
  (void)u;
  bb_value out;
  bb_rec_syscall(g, "Constant", NULL, 0, NULL, 0, &out, 1);
}
static void too_many_inputs(bb_rec *g, void *u) {
  (void)u;
  bb_value out, in[2] = {trig(g), trig(g)};
  bb_rec_syscall(g, "OnTrigger", in, 2, NULL, 0, &out, 1);
}
static void no_tee_outputs(bb_rec *g, void *u) {
  (void)u;
  bb_value in = trig(g);
  bb_rec_syscall(g, "Tee", &in, 1, NULL, 0, NULL, 0);
}
static void stray_attribute(bb_rec *g, void *u) {
  (void)u;
  bb_value out, in = trig(g);
  bb_op_attr a = BB_OP_ATTR_INT("duration", 5);
  bb_rec_syscall(g, "Sleep", &in, 1, &a, 1, &out, 1);
}
static void wrong_attribute_type(bb_rec *g, void *u) {
  (void)u;
  bb_value out, in = trig(g);
  bb_op_attr a = BB_OP_ATTR_INT("name", 5);
  bb_rec_syscall(g, "Limit.Release", &in, 1, &a, 1, &out, 1);
}
static void missing_name(bb_rec *g, void *u) {
  (void)u;
  bb_value out, in = trig(g);
  bb_rec_syscall(g, "Hold.Flush", &in, 1, NULL, 0, &out, 1);
}
static void empty_name(bb_rec *g, void *u) {
  (void)u;
  bb_value out, in = trig(g);
  bb_op_attr a = BB_OP_ATTR_STRING("queue", "");
  bb_rec_syscall(g, "Serialize.Dequeue", &in, 1, &a, 1, &out, 1);
}
static void limit_of_zero(bb_rec *g, void *u) {
  (void)u;
  bb_value out, in = trig(g);
  bb_op_attr a[] = {BB_OP_ATTR_STRING("name", "x"), BB_OP_ATTR_INT("n", 0)};
  bb_rec_syscall(g, "Limit.Acquire", &in, 1, a, 2, &out, 1);
}
static void reserved_topic(bb_rec *g, void *u) {
  (void)u;
  bb_value in = trig(g);
  bb_op_attr a = BB_OP_ATTR_STRING("name", "bb.rounds");
  bb_rec_syscall(g, "AppEmit", &in, 1, &a, 1, NULL, 0);
}
static void stash_a_tensor(bb_rec *g, void *u) {
  (void)u;
  bb_value in = bb_rec_input(g, "t", BB_TYPE_TENSOR_F32);
  bb_op_attr a = BB_OP_ATTR_STRING("slot", "s");
  bb_rec_syscall(g, "Hold.Stash", &in, 1, &a, 1, NULL, 0);
}
static void empty_input(bb_rec *g, void *u) {
  (void)u;
  bb_value out, none = {0};
  bb_rec_syscall(g, "Clock", &none, 1, NULL, 0, &out, 1);
}
static void bad_protocol_domain(bb_rec *g, void *u) {
  (void)u;
  bb_value out;
  bb_rec_protocol_call(g, "ai.bytesandbrains.role.model", "Hello", NULL, 0, NULL, 0, &out, 1);
}
static void bad_protocol_op(bb_rec *g, void *u) {
  (void)u;
  bb_rec_protocol_call(g, BB_DOMAIN_PROTOCOL_PREFIX "chat", "say hi", NULL, 0, NULL, 0, NULL, 0);
}
static void protocol_value_from_nowhere(bb_rec *g, void *u) {
  (void)u;
  bb_value none = {0};
  bb_rec_protocol_call(g, BB_DOMAIN_PROTOCOL_PREFIX "chat", "Say", &none, 1, NULL, 0, NULL, 0);
}

typedef struct refusal {
  bb_module_fn body;
  int code;
  const char *const *fragments;
} refusal;

static const refusal REFUSALS[] = {
    {unknown_op, BB_ERR_NOT_FOUND, STRS("module 'T': 'Wait' is not a syscall the runtime implements", "Limit.Acquire")},
    {compiler_op, BB_ERR_INVALID_ARGUMENT, STRS("syscall DeadlineCheck is inserted by the compiler")},
    {constant_op, BB_ERR_INVALID_ARGUMENT, STRS("syscall Constant takes a literal", "bb_rec_constant")},
    {too_many_inputs, BB_ERR_INVALID_ARGUMENT, STRS("syscall OnTrigger takes 1 inputs and gives 1 outputs; called with 2 and 1")},
    {no_tee_outputs, BB_ERR_INVALID_ARGUMENT, STRS("syscall Tee takes 1 inputs and gives one or more outputs")},
    {stray_attribute, BB_ERR_INVALID_ARGUMENT,
     STRS("syscall Sleep takes the attributes 'duration_ns' (INT); got attribute 'duration' (INT)")},
    {wrong_attribute_type, BB_ERR_INVALID_ARGUMENT, STRS("syscall Limit.Release takes the attributes 'name' (STRING)")},
    {missing_name, BB_ERR_INVALID_ARGUMENT, STRS("syscall Hold.Flush needs the STRING attribute 'slot'")},
    {empty_name, BB_ERR_INVALID_ARGUMENT, STRS("syscall Serialize.Dequeue: attribute 'queue' is empty")},
    {limit_of_zero, BB_ERR_INVALID_ARGUMENT, STRS("syscall Limit.Acquire: attribute 'n' is 0; it must be at least 1")},
    {reserved_topic, BB_ERR_INVALID_ARGUMENT, STRS("syscall AppEmit: topic 'bb.rounds' uses a reserved prefix")},
    {stash_a_tensor, BB_ERR_TYPE,
     STRS("syscall Hold.Stash keeps Bytes; input 0 is value 't' of type ai.bytesandbrains.tensor.f32")},
    {empty_input, BB_ERR_INVALID_ARGUMENT, STRS("input 0 of Clock is an empty value")},
    {bad_protocol_domain, BB_ERR_INVALID_ARGUMENT,
     STRS("protocol domain 'ai.bytesandbrains.role.model' is not ai.bytesandbrains.protocol.<name>")},
    {bad_protocol_op, BB_ERR_INVALID_ARGUMENT, STRS("protocol ai.bytesandbrains.protocol.chat: op 'say hi'")},
    {protocol_value_from_nowhere, BB_ERR_INVALID_ARGUMENT, STRS("input 0 of Say is an empty value")},
};

static void test_refusals(void) {
  for (size_t i = 0; i < sizeof REFUSALS / sizeof REFUSALS[0]; i++) {
    bb_module m = {sizeof(bb_module), "T", REFUSALS[i].body, NULL, NULL, NULL, 0};
    int before = bb_test_failures;
    dt_build_fails(&m, REFUSALS[i].code, REFUSALS[i].fragments);
    if (bb_test_failures != before) fprintf(stderr, "    (refusal %zu)\n", i);
  }
  CHECK_EQ_INT(bb_rec_syscall(NULL, "Clock", NULL, 0, NULL, 0, NULL, 0), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_rec_protocol_call(NULL, "x", "y", NULL, 0, NULL, 0, NULL, 0), BB_ERR_INVALID_ARGUMENT);
}

/* ---- protocol ops --------------------------------------------------------------------- */

static void chat_body(bb_rec *g, void *user) {
  (void)user;
  bb_value peer = bb_rec_input(g, "peer", BB_TYPE_PEER_ID);
  bb_value said[2];
  bb_op_attr a = BB_OP_ATTR_STRING("greeting", "hi");
  CHECK_EQ_INT(bb_rec_protocol_call(g, BB_DOMAIN_PROTOCOL_PREFIX "chat", "Say", &peer, 1, &a, 1, said, 2), 0);
  CHECK_STR(said[1].type, BB_TYPE_ABSTRACT);
  bb_rec_output(g, "said", said[0]);
}

static void test_protocol_ops(void) {
  bb_module chat = {sizeof(bb_module), "Chat", chat_body, NULL, NULL, NULL, 0};
  bb_model *m = dt_build(&chat);
  if (!m) return;
  const bb_function *f = dt_fn(m, "Chat");
  CHECK_NODE(dt_node(f, 0), "Say", BB_DOMAIN_PROTOCOL_PREFIX "chat", STRS("peer"), STRS("v0", "v1"),
             STRS(BB_KEY_MODULE_INSTANCE, "Chat"));
  CHECK_STR(bb_attr_get_string(&dt_node(f, 0)->attrs, "greeting", ""), "hi");
  CHECK_EQ_INT(bb_opset_get(&f->opsets, BB_DOMAIN_PROTOCOL_PREFIX "chat"), BB_FRAMEWORK_OPSET_VERSION);
  CHECK_EQ_INT(bb_opset_get(&m->opsets, BB_DOMAIN_PROTOCOL_PREFIX "chat"), BB_FRAMEWORK_OPSET_VERSION);
  bb_model_free(m);
}

int main(void) {
  RUN(test_node_shapes);
  RUN(test_same_as_helpers);
  RUN(test_every_op_records);
  RUN(test_refusals);
  RUN(test_protocol_ops);
  return bb_test_finish();
}
