/* Whether two artifacts compiled apart can talk, from their wire tables alone
 * (bb_artifact_wires_compare, behind `bb inspect --wires`): wires that pair, wires whose
 * types disagree, wires one side lacks, and distinct wires whose ids collide. */
#include "cctest.h"

static void sender(bb_rec *g, void *user) {
  bb_value x = bb_rec_input(g, "x", (const char *)user);
  bb_rec_net_out(g, "out", bb_rec_input(g, "peers", BB_TYPE_PEER_ID_VEC), x);
}
static void receiver(bb_rec *g, void *user) {
  bb_rec_output(g, "got", bb_rec_net_in(g, "Sender.out", (const char *)user, NULL));
}
/* Receives Sender.out and answers on Echo.back (a ping-pong pair with Sender). */
static void echo(bb_rec *g, void *user) {
  (void)user;
  bb_value from;
  bb_value got = bb_rec_net_in(g, "Sender.out", BB_TYPE_TENSOR_F32, &from);
  bb_rec_net_out_wire(g, "back", "Echo.back", from, got);
}
static void colliding(bb_rec *g, void *user) {
  bb_rec_output(g, "got", bb_rec_net_in(g, (const char *)user, BB_TYPE_TENSOR_F32, NULL));
}

static const bb_module SENDER = {sizeof(bb_module), "Sender", sender, NULL, (void *)F32, NULL, 0};
static const bb_module SENDER_ABSTRACT = {sizeof(bb_module), "Sender", sender, NULL, (void *)BB_TYPE_ABSTRACT,
                                          NULL, 0};
static const bb_module RECEIVER = {sizeof(bb_module), "Receiver", receiver, NULL, (void *)F32, NULL, 0};
static const bb_module RECEIVER16 = {sizeof(bb_module), "Receiver", receiver, NULL, (void *)BB_TYPE_TENSOR_F16,
                                     NULL, 0};
static const bb_module ECHO = {sizeof(bb_module), "Echo", echo, NULL, NULL, NULL, 0};
/* Two names with one FNV-1a-64 (see tests/runtime/test_runtime_apart.c). */
static const bb_module COLLIDE_A = {sizeof(bb_module), "CollideA", colliding, NULL, (void *)"bf13eaba83dea434",
                                    NULL, 0};
static const bb_module COLLIDE_B = {sizeof(bb_module), "CollideB", colliding, NULL, (void *)"b3b828bb3655e2a7",
                                    NULL, 0};

static bb_model *compiled(const bb_module *module) {
  bb_model *rec = NULL;
  bb_error err;
  CHECK_MSG(bb_module_build(module, NULL, &rec, &err) == 0, "%s", err.message);
  if (!rec) return NULL;
  bb_compiler *c = bb_compiler_new(NULL);
  bb_compiler_set_permissive_types(c, true);
  bb_model *m = ct_compile(c, rec);
  bb_compiler_free(c);
  bb_model_free(rec);
  return m;
}

/* The text report of a and b, with *talk. */
static char *report(const bb_model *a, const bb_model *b, bb_artifact_format format, bool *talk) {
  char *text = NULL;
  size_t len = 0;
  bb_error err;
  *talk = false;
  CHECK_MSG(bb_artifact_wires_compare(a, "a", b, "b", format, &text, &len, talk, &err) == 0, "%s", err.message);
  if (text) CHECK_EQ_INT(strlen(text), len);
  return text;
}

static void expect(const char *text, const char *line) {
  CHECK_MSG(text && strstr(text, line) != NULL, "report lacks \"%s\":\n%s", line, text ? text : "(none)");
}

static void test_pairs_and_missing(void) {
  bb_model *tx = compiled(&SENDER), *rx = compiled(&RECEIVER), *echo_m = compiled(&ECHO);
  bool talk = false; /* stays false, and fails the check, unless the report says so */
  char *text = tx && rx ? report(tx, rx, BB_ARTIFACT_TEXT, &talk) : NULL;
  expect(text, "wires of a and b: 1 pair, 0 disagree, 0 missing, 0 collide\n");
  expect(text, "  pairs      Sender.out  a -> b  Tensor ai.bytesandbrains.tensor.f32\n");
  expect(text, "a and b can talk\n");
  CHECK(talk);
  bb_buffer_free(NULL, text);
  /* either order: the pair is reported from its sender */
  text = tx && rx ? report(rx, tx, BB_ARTIFACT_TEXT, &talk) : NULL;
  expect(text, "  pairs      Sender.out  b -> a");
  CHECK(talk);
  bb_buffer_free(NULL, text);
  /* the echo answers on a wire the sender does not listen to: reported missing, but
   * Sender.out pairs, so they can talk */
  text = tx && echo_m ? report(tx, echo_m, BB_ARTIFACT_TEXT, &talk) : NULL;
  expect(text, "1 pair, 0 disagree, 1 missing, 0 collide");
  expect(text, "  missing    Echo.back  b sends it, a does not receive it\n");
  CHECK(talk);
  bb_buffer_free(NULL, text);
  /* two receivers: nothing pairs */
  text = rx && echo_m ? report(rx, echo_m, BB_ARTIFACT_JSON, &talk) : NULL;
  expect(text, "{\"can_talk\":false,\"wires\":[");
  expect(text, "{\"verdict\":\"missing\",\"wire\":\"Sender.out\",\"from\":\"a\",\"direction\":\"in\"}");
  CHECK(!talk);
  bb_buffer_free(NULL, text);
  bb_model_free(tx);
  bb_model_free(rx);
  bb_model_free(echo_m);
}

static void test_disagreement_and_collision(void) {
  bb_model *tx = compiled(&SENDER), *rx16 = compiled(&RECEIVER16), *loose = compiled(&SENDER_ABSTRACT);
  bool talk = true; /* stays true, and fails the check, unless the report says otherwise */
  char *text = tx && rx16 ? report(tx, rx16, BB_ARTIFACT_TEXT, &talk) : NULL;
  expect(text, "  disagrees  Sender.out  a sends ai.bytesandbrains.tensor.f32, b expects "
               "ai.bytesandbrains.tensor.f16\n");
  expect(text, "a and b cannot talk: a wire's types disagree\n");
  CHECK(!talk);
  bb_buffer_free(NULL, text);
  text = tx && rx16 ? report(tx, rx16, BB_ARTIFACT_JSON, &talk) : NULL;
  expect(text, "{\"verdict\":\"disagrees\",\"wire\":\"Sender.out\",\"from\":\"a\","
               "\"sent\":\"ai.bytesandbrains.tensor.f32\","
               "\"expected\":\"ai.bytesandbrains.tensor.f16\"}");
  bb_buffer_free(NULL, text);
  /* an abstract type agrees with any */
  text = loose && rx16 ? report(loose, rx16, BB_ARTIFACT_TEXT, &talk) : NULL;
  expect(text, "  pairs      Sender.out  a -> b  Tensor ai.bytesandbrains.tensor.f16\n");
  CHECK(talk);
  bb_buffer_free(NULL, text);
  bb_model *ca = compiled(&COLLIDE_A), *cb = compiled(&COLLIDE_B);
  text = ca && cb ? report(ca, cb, BB_ARTIFACT_TEXT, &talk) : NULL;
  expect(text, "  collides   bf13eaba83dea434 (a) and b3b828bb3655e2a7 (b) share id 0x5e08d54d78217e0e\n");
  expect(text, "a and b cannot talk: distinct wires share an id\n");
  CHECK(!talk);
  bb_buffer_free(NULL, text);
  /* what is not an artifact, or asked for as DOT */
  bb_error err;
  char *out = NULL;
  bb_model *plain = bb_model_new(NULL);
  CHECK(bb_artifact_wires_compare(plain, "p", tx, "t", BB_ARTIFACT_TEXT, &out, NULL, NULL, &err) == BB_ERR_MALFORMED);
  CHECK(strstr(err.message, "p is not a compiled artifact") != NULL);
  CHECK(tx && bb_artifact_wires_compare(tx, NULL, tx, NULL, BB_ARTIFACT_DOT, &out, NULL, NULL, &err) ==
                  BB_ERR_INVALID_ARGUMENT);
  /* a wire table entry that is not what the compiler writes */
  if (tx) {
    bb_kv_upsert(tx, &tx->metadata, BB_KEY_WIRE_OUT_PREFIX "Sender.out", "Tensor|ai.bytesandbrains.tensor.f32|0x0");
    CHECK(bb_artifact_wires_compare(tx, NULL, rx16, NULL, BB_ARTIFACT_TEXT, &out, NULL, NULL, &err) ==
          BB_ERR_MALFORMED);
    CHECK(strstr(err.message, "wire table entry `ai.bytesandbrains.wire_out.Sender.out`") != NULL);
  }
  bb_model_free(plain);
  bb_model_free(ca);
  bb_model_free(cb);
  bb_model_free(tx);
  bb_model_free(rx16);
  bb_model_free(loose);
}

int main(void) {
  RUN(test_pairs_and_missing);
  RUN(test_disagreement_and_collision);
  return bb_test_finish();
}
