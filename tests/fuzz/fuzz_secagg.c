/* libFuzzer target: arbitrary bytes as SecAgg+ messages. The first byte picks where they
 * land: the codec alone, a client waiting in one of its stages, or the server waiting in
 * one of its stages (reached by running a small seeded round that far). Whatever is
 * accepted must leave both ends consistent; whatever is refused must be named. */
#include <stdlib.h>
#include <string.h>

#include <sodium/crypto_sign_ed25519.h>

#include "bb/privacy.h"
#include "privacy/secagg_codec.h"
#include "privacy/seeded_random.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N 4
#define LEN 4

static void identity(uint32_t i, uint8_t pk[32], uint8_t sk[64]) {
  uint8_t seed[32] = {0};
  seed[0] = (uint8_t)(i + 1);
  crypto_sign_ed25519_seed_keypair(pk, sk, seed);
}

/* Refusals carry their reason's name. */
static void check_refusal(int rc, const bb_error *err) {
  if (rc >= 0) return;
  if (!err->message[0] || !strchr(err->message, '(')) abort();
  if (rc != BB_ERR_MALFORMED && rc != BB_ERR_LIMIT && rc != BB_ERR_DENIED && rc != BB_ERR_NOMEM) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const uint8_t where = data[0] % 9;
  data++, size--;
  bb_error err = {0};
  if (where == 0) {
    sa_msg m;
    bb_secagg_reason why;
    const int rc = sa_decode(data, size, NULL, 20, &m, &why, &err);
    if (rc && (why == BB_SECAGG_OK || !err.message[0])) abort();
    if (!rc && (m.type < 1 || m.type > 9)) abort();
    return 0;
  }
  /* a seeded round of N clients run up to stage (where - 1) % 4 + 1 */
  uint8_t pk[N][32], sk[N][64], ids[N * 32];
  for (uint32_t i = 0; i < N; i++) identity(i, pk[i], sk[i]), memcpy(ids + 32 * i, pk[i], 32);
  sr_rng srv_rng, cl_rng[N];
  sr_rng_seed(&srv_rng, 1);
  bb_secagg_server_config sc = {.struct_size = sizeof sc, .n_clients = N, .vector_len = LEN, .modulus_bits = 20,
                                .quant_range = 1u << 16};
  sc.random = sr_source(&srv_rng);
  bb_secagg_server *srv = NULL;
  bb_secagg_client *cl[N] = {0};
  if (bb_secagg_server_new(&sc, ids, NULL, &srv, &err)) abort();
  const float x[LEN] = {1, -2, 0.5f, 3};
  for (uint32_t i = 0; i < N; i++) {
    sr_rng_seed(&cl_rng[i], 10 + i);
    bb_secagg_client_config cc = {.struct_size = sizeof cc, .identity_secret_key = sk[i]};
    cc.random = sr_source(&cl_rng[i]);
    if (bb_secagg_client_new(&cc, NULL, &cl[i], &err) || bb_secagg_client_set_input(cl[i], x, LEN, &err)) abort();
  }
  /* 1..4: the stage (advertise keys .. unmask) whose messages the server has sent and
   * the clients taken; the fuzz bytes then go to client 1 (1-4) or come from it (5-8) */
  const bb_secagg_stage target = (bb_secagg_stage)((where - 1) % 4 + 1);
  const bool to_server = where > 4;
  bb_secagg_server_start(srv, 0, &err);
  for (int step = 0; step < 8; step++) {
    uint32_t to;
    const uint8_t *msg;
    size_t len;
    while (bb_secagg_server_next_message(srv, &to, &msg, &len)) bb_secagg_client_receive(cl[to], msg, len, 0, &err);
    if (bb_secagg_server_stage(srv) >= target) break;
    for (uint32_t i = 0; i < N; i++)
      while (bb_secagg_client_next_message(cl[i], &msg, &len)) bb_secagg_server_receive(srv, i, msg, len, 0, &err);
  }
  bb_error_clear(&err);
  if (to_server) check_refusal(bb_secagg_server_receive(srv, 1, data, size, 0, &err), &err);
  else check_refusal(bb_secagg_client_receive(cl[1], data, size, 0, &err), &err);
  /* both ends still run the round to its end without crashing */
  for (int step = 0; step < 8; step++) {
    uint32_t to;
    const uint8_t *msg;
    size_t len;
    for (uint32_t i = 0; i < N; i++)
      while (bb_secagg_client_next_message(cl[i], &msg, &len)) bb_secagg_server_receive(srv, i, msg, len, 0, &err);
    while (bb_secagg_server_next_message(srv, &to, &msg, &len)) bb_secagg_client_receive(cl[to], msg, len, 0, &err);
    bb_secagg_server_handle_expiry(srv, bb_secagg_server_expiry(srv), &err);
  }
  const bb_secagg_stage end = bb_secagg_server_stage(srv);
  if (end != BB_SECAGG_DONE && end != BB_SECAGG_ABORTED) abort();
  if (end == BB_SECAGG_DONE) {
    float sum[LEN];
    uint32_t summed;
    if (bb_secagg_server_result(srv, sum, LEN, &summed, &err) || summed < 2) abort();
  }
  bb_secagg_server_free(srv);
  for (uint32_t i = 0; i < N; i++) bb_secagg_client_free(cl[i]);
  return 0;
}
