/* SecAgg+ rounds end to end (bb/privacy.h): the unmasked sum is the plain sum within the
 * quantisation bound; clients dropping after sharing or after masking still unmask; too
 * few survivors abort without revealing anything; the sparse graph at 100 clients; a host
 * that signs for its client; deadlines on both ends. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sodium/crypto_sign_ed25519.h>

#include "harness.h"
#include "privacy/secagg_round.h"

#define LEN 64

static float inputs[SR_MAX_CLIENTS][LEN];

static void make_inputs(uint32_t n, uint64_t seed) {
  uint64_t s = seed;
  for (uint32_t i = 0; i < n; i++)
    for (int e = 0; e < LEN; e++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      inputs[i][e] = (float)((double)(s >> 11) * 0x1.0p-53 * 4.0 - 2.0); /* in [-2, 2) */
    }
}

static void give_inputs(sr_round *r) {
  bb_error err = {0};
  for (uint32_t i = 0; i < r->n; i++) CHECK_EQ_INT(bb_secagg_client_set_input(r->clients[i], inputs[i], LEN, &err), 0);
}

/* The server's sum against the plain sum of the clients it says it summed: within one
 * quantisation step per summed client, plus float rounding of the result. */
static void check_sum(sr_round *r, uint32_t expect_summed) {
  bb_secagg_params p;
  bb_secagg_server_params(r->server, &p);
  float sum[LEN];
  uint32_t summed = 0;
  bb_error err = {0};
  CHECK_EQ_INT(bb_secagg_server_result(r->server, sum, LEN, &summed, &err), 0);
  CHECK_EQ_INT(summed, expect_summed);
  const double step = 2 * p.clip_range / (double)p.quant_range;
  double worst = 0;
  for (int e = 0; e < LEN; e++) {
    double plain = 0;
    uint32_t count = 0;
    for (uint32_t i = 0; i < r->n; i++)
      if (bb_secagg_server_summed(r->server, i)) plain += inputs[i][e], count++;
    CHECK_EQ_INT(count, expect_summed);
    const double off = fabs(sum[e] - plain), bound = summed * step + 1e-6 * (fabs(plain) + 1);
    if (off > worst) worst = off;
    CHECK_MSG(off <= bound, "element %d: %.9g vs plain %.9g (bound %.3g)", e, sum[e], plain, bound);
  }
  printf("  %u summed, largest error %.3g (bound %.3g)\n", summed, worst, summed * step);
}

static bb_secagg_server_config config(uint32_t n) {
  return (bb_secagg_server_config){.struct_size = sizeof(bb_secagg_server_config), .n_clients = n, .vector_len = LEN};
}

static void test_all_present(void) {
  sr_round r;
  bb_secagg_server_config c = config(10);
  CHECK_EQ_INT(sr_init(&r, &c, 1), 0);
  make_inputs(10, 11);
  give_inputs(&r);
  sr_start_and_run(&r);
  CHECK_EQ_INT(bb_secagg_server_stage(r.server), BB_SECAGG_DONE);
  CHECK_MSG(r.client_refusals + r.server_refusals == 0, "%d client refusals (%s), %d server refusals (%s)",
            r.client_refusals, r.last_client_error.message, r.server_refusals, r.last_server_error.message);
  check_sum(&r, 10);
  for (uint32_t i = 0; i < 10; i++) CHECK_EQ_INT(bb_secagg_client_stage(r.clients[i]), BB_SECAGG_DONE);
  bb_secagg_params p;
  bb_secagg_server_params(r.server, &p);
  for (uint32_t i = 0; i < 10; i++) { /* every client took the round the server set up */
    uint32_t index = UINT32_MAX;
    bb_secagg_params cp = {0};
    CHECK(bb_secagg_client_round(r.clients[i], &index, &cp));
    CHECK(index < 10 && cp.degree == p.degree && cp.threshold == p.threshold && cp.vector_len == p.vector_len);
  }
  /* Flower's defaults, and for 10 clients the complete graph with a majority threshold */
  CHECK(p.clip_range == 8.0 && p.quant_range == (1u << 22) && p.modulus_bits == 32);
  CHECK_EQ_INT(p.degree, 9);
  CHECK_EQ_INT(p.threshold, 5);
  bb_secagg_server_stats st;
  bb_secagg_server_get_stats(r.server, &st);
  CHECK_EQ_INT(st.masked, 10);
  CHECK_EQ_INT(st.recovered, 0);
  sr_free(&r);
}

/* 10 clients of whom `who` drop at `stage`; the round must sum `summed` and rebuild the
 * mask keys of `recovered` dropped clients. */
static void drop_round(uint64_t seed, const uint32_t who[3], bb_secagg_stage stage, uint32_t summed,
                       uint32_t recovered) {
  sr_round r;
  bb_secagg_server_config c = config(10);
  CHECK_EQ_INT(sr_init(&r, &c, seed), 0);
  make_inputs(10, seed * 11);
  give_inputs(&r);
  for (int k = 0; k < 3; k++) r.drop_at[who[k]] = stage;
  sr_start_and_run(&r);
  CHECK_EQ_INT(bb_secagg_server_stage(r.server), BB_SECAGG_DONE);
  check_sum(&r, summed);
  bb_secagg_server_stats st;
  bb_secagg_server_get_stats(r.server, &st);
  CHECK_EQ_INT(st.recovered, recovered);
  sr_free(&r);
}

/* 3 of 10 clients drop after sending their shares, before their masked vectors: the
 * survivors' masks with them are rebuilt from the survivors' shares. */
static void test_three_drop_after_sharing(void) {
  const uint32_t who[3] = {1, 4, 8};
  drop_round(2, who, BB_SECAGG_MASKED_INPUT, 7, 3);
}

/* 3 of 10 drop after masking (their vectors are in the sum, they send no shares back):
 * their self-masks are rebuilt from their neighbours' shares. */
static void test_three_drop_after_masking(void) {
  const uint32_t who[3] = {0, 5, 9};
  drop_round(3, who, BB_SECAGG_UNMASK, 10, 0);
}

/* Clients drop at every stage at once: 2 before sending keys, 1 before sharing, 1 before
 * masking, 1 before unmasking; 12 clients. */
static void test_drops_at_every_stage(void) {
  sr_round r;
  bb_secagg_server_config c = config(12);
  CHECK_EQ_INT(sr_init(&r, &c, 4), 0);
  make_inputs(12, 44);
  give_inputs(&r);
  r.drop_at[2] = r.drop_at[3] = BB_SECAGG_ADVERTISE_KEYS;
  r.drop_at[6] = BB_SECAGG_SHARE_KEYS;
  r.drop_at[7] = BB_SECAGG_MASKED_INPUT;
  r.drop_at[11] = BB_SECAGG_UNMASK;
  sr_start_and_run(&r);
  CHECK_EQ_INT(bb_secagg_server_stage(r.server), BB_SECAGG_DONE);
  check_sum(&r, 8);
  sr_free(&r);
}

/* Below the threshold the round aborts before anyone is asked for a share: 5 of 10 drop
 * after sharing, so each survivor's self-mask seed has 4 live holders, threshold 5. The
 * server has no sum (and holds no partial one), every live client is told and wipes its
 * secrets, and no unmask message ever left a client. */
static int unmask_sent;
static bool count_unmask(void *user, uint32_t client, bool to_server, const uint8_t **data, size_t *len) {
  (void)user, (void)client, (void)len;
  if (to_server && (*data)[5] == 8) unmask_sent++;
  return true;
}

static void test_below_threshold_aborts(void) {
  sr_round r;
  bb_secagg_server_config c = config(10);
  CHECK_EQ_INT(sr_init(&r, &c, 5), 0);
  make_inputs(10, 55);
  give_inputs(&r);
  for (uint32_t i = 0; i < 5; i++) r.drop_at[i * 2] = BB_SECAGG_MASKED_INPUT;
  unmask_sent = 0;
  r.hook = count_unmask;
  sr_start_and_run(&r);
  CHECK_EQ_INT(bb_secagg_server_stage(r.server), BB_SECAGG_ABORTED);
  CHECK_EQ_INT(bb_secagg_server_abort_reason(r.server), BB_SECAGG_BELOW_THRESHOLD);
  CHECK_EQ_INT(unmask_sent, 0);
  float sum[LEN];
  uint64_t ring[LEN];
  bb_error err = {0};
  CHECK_EQ_INT(bb_secagg_server_result(r.server, sum, LEN, NULL, &err), BB_ERR_LIMIT);
  CHECK(strstr(err.message, "below_threshold") != NULL);
  CHECK_EQ_INT(bb_secagg_server_result_ring(r.server, ring, LEN, &err), BB_ERR_LIMIT);
  for (uint32_t i = 1; i < 10; i += 2) {
    CHECK_EQ_INT(bb_secagg_client_stage(r.clients[i]), BB_SECAGG_ABORTED);
    CHECK_EQ_INT(bb_secagg_client_abort_reason(r.clients[i]), BB_SECAGG_SERVER_ABORT);
  }
  sr_free(&r);
}

/* Too few clients left at a stage: min_clients decides, whatever the thresholds. */
static void test_too_few_clients_abort(void) {
  sr_round r;
  bb_secagg_server_config c = config(10);
  c.min_clients = 9;
  CHECK_EQ_INT(sr_init(&r, &c, 6), 0);
  make_inputs(10, 66);
  give_inputs(&r);
  r.drop_at[3] = r.drop_at[4] = BB_SECAGG_ADVERTISE_KEYS;
  sr_start_and_run(&r);
  CHECK_EQ_INT(bb_secagg_server_stage(r.server), BB_SECAGG_ABORTED);
  CHECK_EQ_INT(bb_secagg_server_abort_reason(r.server), BB_SECAGG_TOO_FEW_CLIENTS);
  sr_free(&r);
}

/* 100 clients on the sparse graph (degree 40, threshold 21), 10 dropping at various stages. */
static void test_sparse_hundred(void) {
  static sr_round r;
  bb_secagg_server_config c = config(100);
  CHECK_EQ_INT(sr_init(&r, &c, 7), 0);
  bb_secagg_params p;
  bb_secagg_server_params(r.server, &p);
  CHECK_EQ_INT(p.degree, 40);
  CHECK_EQ_INT(p.threshold, 21);
  make_inputs(100, 77);
  give_inputs(&r);
  for (uint32_t i = 0; i < 10; i++) r.drop_at[i * 9 + 3] = (bb_secagg_stage)(BB_SECAGG_ADVERTISE_KEYS + i % 4);
  sr_start_and_run(&r);
  CHECK_EQ_INT(bb_secagg_server_stage(r.server), BB_SECAGG_DONE);
  CHECK_MSG(r.client_refusals + r.server_refusals == 0, "%d client refusals (%s), %d server refusals (%s)",
            r.client_refusals, r.last_client_error.message, r.server_refusals, r.last_server_error.message);
  /* the 8 that dropped before masking are out; the 2 that dropped at unmasking count */
  check_sum(&r, 92);
  sr_free(&r);
}

/* A client whose identity key the host keeps (a non-extractable WebCrypto key): the client
 * hands out what to sign, and the round goes on once the host signs. A signature by
 * another key is refused. */
static void test_host_signs(void) {
  sr_round r;
  bb_secagg_server_config c = config(5);
  CHECK_EQ_INT(sr_init(&r, &c, 8), 0);
  bb_secagg_client_free(r.clients[2]);
  bb_secagg_client_config cc = {.struct_size = sizeof cc, .identity_public_key = r.pk[2]};
  cc.random = sr_source(&r.client_rng[2]);
  bb_error err = {0};
  CHECK_EQ_INT(bb_secagg_client_new(&cc, NULL, &r.clients[2], &err), 0);
  make_inputs(5, 88);
  give_inputs(&r);
  CHECK_EQ_INT(bb_secagg_server_start(r.server, 0, &err), 0);
  uint32_t to;
  const uint8_t *data;
  size_t len;
  while (bb_secagg_server_next_message(r.server, &to, &data, &len))
    CHECK_EQ_INT(bb_secagg_client_receive(r.clients[to], data, len, 0, &err), 0);
  CHECK_EQ_INT(bb_secagg_client_stage(r.clients[2]), BB_SECAGG_ADVERTISE_KEYS);
  const uint8_t *payload;
  size_t plen;
  CHECK_EQ_INT(bb_secagg_client_sign_payload(r.clients[2], &payload, &plen), 1);
  CHECK_EQ_INT(bb_secagg_client_next_message(r.clients[2], &data, &len), 0);
  uint8_t sig[64];
  crypto_sign_ed25519_detached(sig, NULL, payload, plen, r.sk[3]);
  CHECK_EQ_INT(bb_secagg_client_set_signature(r.clients[2], sig, 0, &err), BB_ERR_INVALID_ARGUMENT);
  crypto_sign_ed25519_detached(sig, NULL, payload, plen, r.sk[2]);
  CHECK_EQ_INT(bb_secagg_client_set_signature(r.clients[2], sig, 0, &err), 0);
  CHECK_EQ_INT(bb_secagg_client_sign_payload(r.clients[2], &payload, &plen), 0);
  sr_run(&r);
  CHECK_EQ_INT(bb_secagg_server_stage(r.server), BB_SECAGG_DONE);
  check_sum(&r, 5);
  sr_free(&r);
}

/* The input may come late: the client waits in the masked-input stage for it. */
static void test_late_input(void) {
  sr_round r;
  bb_secagg_server_config c = config(4);
  CHECK_EQ_INT(sr_init(&r, &c, 9), 0);
  make_inputs(4, 99);
  bb_error err = {0};
  for (uint32_t i = 1; i < 4; i++) CHECK_EQ_INT(bb_secagg_client_set_input(r.clients[i], inputs[i], LEN, &err), 0);
  CHECK_EQ_INT(bb_secagg_server_start(r.server, 0, &err), 0);
  for (int pass = 0; pass < 4; pass++) {
    uint32_t to;
    const uint8_t *data;
    size_t len;
    while (bb_secagg_server_next_message(r.server, &to, &data, &len))
      bb_secagg_client_receive(r.clients[to], data, len, 0, &err);
    for (uint32_t i = 0; i < 4; i++)
      while (bb_secagg_client_next_message(r.clients[i], &data, &len))
        CHECK_EQ_INT(bb_secagg_server_receive(r.server, i, data, len, 0, &err), 0);
  }
  CHECK(bb_secagg_client_wants_input(r.clients[0]));
  CHECK_EQ_INT(bb_secagg_server_stage(r.server), BB_SECAGG_MASKED_INPUT);
  /* a vector of the wrong length is refused; the right one is masked at once */
  CHECK_EQ_INT(bb_secagg_client_set_input(r.clients[0], inputs[0], LEN - 1, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_secagg_client_set_input(r.clients[0], inputs[0], LEN, &err), 0);
  CHECK(!bb_secagg_client_wants_input(r.clients[0]));
  sr_run(&r);
  CHECK_EQ_INT(bb_secagg_server_stage(r.server), BB_SECAGG_DONE);
  check_sum(&r, 4);
  sr_free(&r);
}

/* Elements beyond the clip range are cut there (and counted); ring inputs sum exactly. */
static void test_clipping_and_ring_inputs(void) {
  sr_round r;
  bb_secagg_server_config c = config(3);
  c.clip_range = 1.0;
  CHECK_EQ_INT(sr_init(&r, &c, 10), 0);
  make_inputs(3, 10);
  inputs[0][0] = 5.0f;   /* clipped to 1 */
  inputs[0][1] = -3.0f;  /* clipped to -1 */
  bb_error err = {0};
  CHECK_EQ_INT(bb_secagg_client_set_input(r.clients[0], inputs[0], LEN, &err), 0);
  uint64_t ring[2][LEN];
  for (int e = 0; e < LEN; e++) ring[0][e] = (uint64_t)e * 1000, ring[1][e] = 4194304 - (uint64_t)e;
  CHECK_EQ_INT(bb_secagg_client_set_input_ring(r.clients[1], ring[0], LEN, &err), 0);
  CHECK_EQ_INT(bb_secagg_client_set_input_ring(r.clients[2], ring[1], LEN, &err), 0);
  sr_start_and_run(&r);
  CHECK_EQ_INT(bb_secagg_server_stage(r.server), BB_SECAGG_DONE);
  uint64_t beyond = 0;
  for (int e = 0; e < LEN; e++) beyond += fabsf(inputs[0][e]) > 1.0f;
  CHECK_EQ_INT(bb_secagg_client_clipped(r.clients[0]), beyond);
  uint64_t sum[LEN];
  CHECK_EQ_INT(bb_secagg_server_result_ring(r.server, sum, LEN, &err), 0);
  /* client 0's quantised element 0 is the top of the range, element 1 the bottom */
  CHECK(sum[0] == 4194304 + 0 + 4194304);
  CHECK(sum[1] == 0 + 1000 + 4194304 - 1);
  sr_free(&r);
}

/* Deadlines: a server whose clients fall silent closes the stage at its expiry and
 * aborts; a client whose server falls silent aborts at its own and wipes its secrets. */
static void test_deadlines(void) {
  sr_round r;
  bb_secagg_server_config c = config(5);
  c.stage_timeout_ns = 1000;
  CHECK_EQ_INT(sr_init(&r, &c, 12), 0);
  bb_error err = {0};
  CHECK_EQ_INT(bb_secagg_server_start(r.server, 5000, &err), 0);
  CHECK(bb_secagg_server_expiry(r.server) == 6000);
  CHECK_EQ_INT(bb_secagg_server_handle_expiry(r.server, 5999, &err), 0);
  CHECK_EQ_INT(bb_secagg_server_stage(r.server), BB_SECAGG_ADVERTISE_KEYS);
  uint32_t to;
  const uint8_t *data;
  size_t len;
  while (bb_secagg_server_next_message(r.server, &to, &data, &len))
    CHECK_EQ_INT(bb_secagg_client_receive(r.clients[to], data, len, 5000, &err), 0);
  CHECK(bb_secagg_client_expiry(r.clients[0]) == 5000 + 300ull * 1000000000ull);
  CHECK_EQ_INT(bb_secagg_server_handle_expiry(r.server, 6000, &err), BB_ERR_LIMIT);
  CHECK(strstr(err.message, "too_few_clients") != NULL);
  CHECK_EQ_INT(bb_secagg_server_stage(r.server), BB_SECAGG_ABORTED);
  CHECK(bb_secagg_server_expiry(r.server) == UINT64_MAX);
  CHECK_EQ_INT(bb_secagg_client_handle_expiry(r.clients[0], 5000 + 300ull * 1000000000ull, &err), BB_ERR_LIMIT);
  CHECK_EQ_INT(bb_secagg_client_stage(r.clients[0]), BB_SECAGG_ABORTED);
  CHECK_EQ_INT(bb_secagg_client_abort_reason(r.clients[0]), BB_SECAGG_DEADLINE);
  sr_free(&r);
}

/* Parameters that break the protocol's rules are refused when the server is made. */
static void test_config_rules(void) {
  static const uint8_t ids[64 * 32];
  struct {
    uint32_t n, degree, threshold, bits;
    uint64_t quant;
  } bad[] = {
      {2, 0, 0, 0, 0},        /* two clients: each learns the other's vector */
      {40, 9, 0, 0, 0},       /* an odd degree on the sparse graph */
      {10, 9, 4, 0, 0},       /* a threshold of half the degree or less */
      {10, 9, 10, 0, 0},      /* a threshold above the degree */
      {10, 0, 0, 8, 0},       /* 2^8 cannot hold 10 × 2^22 */
      {10, 0, 0, 32, 1ull << 30}, /* nor 2^32 10 × 2^30 */
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    bb_secagg_server_config c = config(bad[k].n);
    c.degree = bad[k].degree, c.threshold = bad[k].threshold, c.modulus_bits = bad[k].bits;
    c.quant_range = bad[k].quant;
    bb_secagg_server *s = NULL;
    bb_error err = {0};
    CHECK_MSG(bb_secagg_server_new(&c, ids, NULL, &s, &err) == BB_ERR_INVALID_ARGUMENT, "case %zu", k);
    CHECK_MSG(strstr(err.message, "bad_params") != NULL, "case %zu: %s", k, err.message);
    CHECK(s == NULL);
  }
  /* 1,000 clients fit Flower's 2^22 range in 2^32; 1,024 do not, 2^40 holds them */
  bb_secagg_server_config c = config(1024);
  bb_secagg_server *s = NULL;
  bb_error err = {0};
  static uint8_t many[1024 * 32];
  CHECK_EQ_INT(bb_secagg_server_new(&c, many, NULL, &s, &err), BB_ERR_INVALID_ARGUMENT);
  c.modulus_bits = 40;
  CHECK_EQ_INT(bb_secagg_server_new(&c, many, NULL, &s, &err), 0);
  bb_secagg_params p;
  bb_secagg_server_params(s, &p);
  CHECK_EQ_INT(p.degree, 60); /* the even number nearest 6 log2 1024 */
  bb_secagg_server_free(s);
}

/* Wider rings: 40-bit and 64-bit moduli sum as the 32-bit one does. */
static void test_other_moduli(void) {
  const uint32_t bits[] = {24, 40, 64};
  for (size_t k = 0; k < 3; k++) {
    sr_round r;
    bb_secagg_server_config c = config(6);
    c.modulus_bits = bits[k];
    c.quant_range = bits[k] == 24 ? 1u << 20 : 1u << 22;
    CHECK_EQ_INT(sr_init(&r, &c, 20 + k), 0);
    make_inputs(6, 200 + k);
    give_inputs(&r);
    r.drop_at[2] = BB_SECAGG_MASKED_INPUT;
    sr_start_and_run(&r);
    CHECK_EQ_INT(bb_secagg_server_stage(r.server), BB_SECAGG_DONE);
    check_sum(&r, 5);
    sr_free(&r);
  }
}

int main(void) {
  RUN(test_all_present);
  RUN(test_three_drop_after_sharing);
  RUN(test_three_drop_after_masking);
  RUN(test_drops_at_every_stage);
  RUN(test_below_threshold_aborts);
  RUN(test_too_few_clients_abort);
  RUN(test_sparse_hundred);
  RUN(test_host_signs);
  RUN(test_late_input);
  RUN(test_clipping_and_ring_inputs);
  RUN(test_deadlines);
  RUN(test_config_rules);
  RUN(test_other_moduli);
  return bb_test_finish();
}
