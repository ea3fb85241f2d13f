/* Bad input is an error, never a crash: recorded models with bytes flipped, truncated
 * or with fields removed compile to an artifact or to an error, and every artifact can
 * be described. Deterministic (a fixed LCG), and meant to run under the sanitizers. */
#include "cctest.h"

static const bb_slot LOADER = {BB_ROLE_DATA_SOURCE, "loader", NULL};
static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};
static const bb_slot AGGREGATOR = {BB_ROLE_AGGREGATOR, "aggregator", NULL};

static void leaf_body(bb_rec *g, void *user) {
  (void)user;
  bb_rec_output(g, "y", bb_rec_model_forward(g, &MODEL, bb_rec_input(g, "x", NULL)));
}
static void leaf_bootstrap(bb_rec *g, void *user) {
  (void)user;
  bb_value batch, labels;
  bb_rec_data_source_next_batch(g, &LOADER, &batch, &labels);
  bb_rec_model_load_parameters(g, &MODEL, batch);
}
static const bb_module LEAF = {sizeof(bb_module), "Leaf", leaf_body, leaf_bootstrap, NULL, NULL, 0};

static void top_body(bb_rec *g, void *user) {
  (void)user;
  bb_value peers = bb_rec_input(g, "peers", NULL);
  bb_value x = bb_rec_model_params(g, &MODEL);
  for (int i = 0; i < 2; i++) x = bb_rec_call_output(g, bb_rec_call(g, &LEAF, (bb_binding[]){{"x", x}}, 1), "y");
  bb_rec_net_out(g, "p", peers, x);
  bb_value got = bb_rec_lookup_output(g, "p");
  bb_rec_aggregator_contribute(g, &AGGREGATOR, got, got);
  bb_rec_output(g, "tick", bb_rec_interval(g, 0));
}
static void top_bootstrap(bb_rec *g, void *user) {
  (void)user;
  bb_rec_call_bootstrap(g, &LEAF, NULL, 0);
  bb_rec_output(g, "seeded", bb_rec_pass_through(g, bb_rec_input(g, "seed", NULL)));
}
static const bb_module *const SUBS[] = {&LEAF};
static const bb_module TOP = {sizeof(bb_module), "Top", top_body, top_bootstrap, NULL, SUBS, 1};

static uint32_t lcg(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

static void test_mutations(void) {
  bb_model *rec = dt_build(&TOP);
  uint8_t *bytes;
  size_t len;
  if (!rec || dt_encode(rec, &bytes, &len)) {
    bb_model_free(rec);
    return;
  }
  bb_compiler *c = bb_compiler_new(NULL);
  ct_declare(c, "Loader", F32);
  ct_declare(c, "Mlp", F32);
  ct_declare(c, "FedAvg", F32);
  ct_bind(c, BB_ROLE_DATA_SOURCE, "loader", "Loader");
  ct_bind(c, BB_ROLE_MODEL, "model", "Mlp");
  ct_bind(c, BB_ROLE_AGGREGATOR, "aggregator", "FedAvg");
  uint8_t *copy = malloc(len);
  uint32_t seed = 12345;
  int compiled = 0, rejected = 0, undecodable = 0;
  for (int round = 0; round < 3000 && copy; round++) {
    memcpy(copy, bytes, len);
    size_t n = len;
    int flips = 1 + (int)(lcg(&seed) % 3);
    for (int k = 0; k < flips; k++) copy[lcg(&seed) % len] ^= (uint8_t)(1u << (lcg(&seed) % 8));
    if (round % 10 == 0) n = lcg(&seed) % len; /* truncated */
    uint8_t *out = NULL;
    size_t out_len = 0;
    bb_error err;
    int rc = bb_compiler_compile(c, copy, n, &out, &out_len, &err);
    if (rc == 0) {
      compiled++;
      bb_model *m = NULL;
      CHECK(bb_model_decode(out, out_len, NULL, NULL, &m, &err) == 0);
      for (int fmt = 0; m && fmt < 3; fmt++) {
        char *text = NULL;
        CHECK(bb_artifact_describe(m, (bb_artifact_format)fmt, &text, NULL, &err) == 0);
        bb_buffer_free(NULL, text);
      }
      bb_model_free(m);
      bb_buffer_free(NULL, out);
    } else {
      CHECK(rc < 0);
      CHECK(out == NULL);
      CHECK(err.message[0] != 0);
      if (bb_compiler_error_kind(c) == BB_COMPILE_BAD_INPUT) undecodable++;
      else rejected++;
    }
  }
  printf("    %d compiled, %d rejected by the compiler, %d not ONNX\n", compiled, rejected, undecodable);
  CHECK(compiled > 0 && rejected > 0);
  free(copy);
  bb_compiler_free(c);
  bb_buffer_free(NULL, bytes);
  bb_model_free(rec);
}

/* Structural damage the byte flips rarely reach: missing names, op types, metadata. */
static void test_missing_fields(void) {
  bb_compiler *c = bb_compiler_new(NULL);
  bb_compiler_set_permissive_types(c, true);
  ct_bind(c, BB_ROLE_DATA_SOURCE, "loader", "Loader");
  ct_bind(c, BB_ROLE_MODEL, "model", "Mlp");
  ct_bind(c, BB_ROLE_AGGREGATOR, "aggregator", "FedAvg");
  for (int damage = 0; damage < 6; damage++) {
    bb_model *m = dt_build(&TOP);
    if (!m) break;
    for (size_t f = 0; f < m->functions.len; f++) {
      bb_function *fn = m->functions.items[f];
      if (damage == 0 && f == 1) fn->name = NULL;
      for (size_t i = 0; i < fn->nodes.len; i++) {
        bb_ir_node *n = fn->nodes.items[i];
        if (damage == 1 && i == 0) n->op_type = NULL;
        if (damage == 2) n->domain = NULL;
        if (damage == 3 && n->metadata.len) n->metadata.items[0].value = NULL;
        if (damage == 4 && n->metadata.len) n->metadata.items[0].key = NULL;
        if (damage == 5 && n->outputs.len) n->outputs.items[0] = (char *)"";
      }
    }
    bb_model *out = NULL;
    bb_error err;
    int rc = bb_compiler_compile_model(c, m, &out, &err);
    CHECK(rc <= 0);
    if (rc == 0) {
      char *text = NULL;
      CHECK(bb_artifact_describe(out, BB_ARTIFACT_JSON, &text, NULL, &err) == 0);
      bb_buffer_free(NULL, text);
    } else {
      CHECK(err.message[0] != 0);
    }
    bb_model_free(out);
    bb_model_free(m);
  }
  bb_compiler_free(c);
}

int main(void) {
  RUN(test_mutations);
  RUN(test_missing_fields);
  return bb_test_finish();
}
