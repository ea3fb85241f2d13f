/* A SecAgg+ round run in one process for the tests: n clients with Ed25519 identities made
 * from seeds, one server, and a loop that carries every message to its end point. A
 * client can be made to drop at a stage (it sends nothing from then on), and a hook can
 * read or replace each message on its way, so a test can act as a lying server or a
 * hostile client. Randomness is seeded, so every run is reproducible. */
#ifndef BB_TESTS_PRIVACY_SECAGG_ROUND_H
#define BB_TESTS_PRIVACY_SECAGG_ROUND_H

#include <stdlib.h>
#include <string.h>

#include <sodium/crypto_sign_ed25519.h>

#include "bb/bytes.h"
#include "bb/privacy.h"
#include "harness.h"
#include "privacy/seeded_random.h"

#define SR_MAX_CLIENTS 1024

/* Identity i: an Ed25519 key pair from a seed of i. */
static inline void sr_identity(uint32_t i, uint64_t salt, uint8_t pk[32], uint8_t sk[64]) {
  uint8_t seed[32] = {0};
  bb_le_put_u32(seed, i);
  bb_le_put_u64(seed + 8, salt);
  crypto_sign_ed25519_seed_keypair(pk, sk, seed);
}

/* Where a message is on its way: from client `client` to the server (to_server), or the
 * other way. The hook may change *data / *len (pointing to its own buffer) or return
 * false to drop the message. */
typedef bool (*sr_hook)(void *user, uint32_t client, bool to_server, const uint8_t **data, size_t *len);

typedef struct sr_round {
  uint32_t n;
  bb_secagg_server *server;
  bb_secagg_client *clients[SR_MAX_CLIENTS];
  uint8_t pk[SR_MAX_CLIENTS][32], sk[SR_MAX_CLIENTS][64];
  sr_rng server_rng, client_rng[SR_MAX_CLIENTS];
  /* drop_at[i]: the client says nothing once it would send this stage's message
   * (BB_SECAGG_SETUP: never drops) */
  bb_secagg_stage drop_at[SR_MAX_CLIENTS];
  sr_hook hook;
  void *hook_user;
  uint64_t now;
  /* every refusal seen on the way, for tests that expect none */
  int client_refusals, server_refusals;
  bb_error last_client_error, last_server_error;
} sr_round;

/* Stage whose message client i sends next (the stage it waits in, moved back one: what it
 * has to send answers the previous server message). */
static inline bb_secagg_stage sr_sending_stage(uint8_t type) {
  switch (type) {
  case 2: return BB_SECAGG_ADVERTISE_KEYS;
  case 4: return BB_SECAGG_SHARE_KEYS;
  case 6: return BB_SECAGG_MASKED_INPUT;
  case 8: return BB_SECAGG_UNMASK;
  default: return BB_SECAGG_SETUP;
  }
}

/* Makes the server and n clients (with config tweaks applied by the caller afterwards if
 * needed). Returns 0 or the failing code. */
static inline int sr_init(sr_round *r, const bb_secagg_server_config *base, uint64_t seed) {
  memset(r, 0, sizeof *r);
  r->n = base->n_clients;
  static uint8_t ids[SR_MAX_CLIENTS * 32];
  for (uint32_t i = 0; i < r->n; i++) {
    sr_identity(i, seed, r->pk[i], r->sk[i]);
    memcpy(ids + 32 * i, r->pk[i], 32);
  }
  sr_rng_seed(&r->server_rng, seed * 1000003u + 7);
  bb_secagg_server_config sc = *base;
  sc.random = sr_source(&r->server_rng);
  bb_error err = {0};
  int rc = bb_secagg_server_new(&sc, ids, NULL, &r->server, &err);
  if (rc) {
    fprintf(stderr, "sr_init: %s\n", err.message);
    return rc;
  }
  for (uint32_t i = 0; i < r->n; i++) {
    sr_rng_seed(&r->client_rng[i], seed * 7919u + i + 1);
    bb_secagg_client_config cc = {.struct_size = sizeof cc, .identity_secret_key = r->sk[i]};
    cc.random = sr_source(&r->client_rng[i]);
    rc = bb_secagg_client_new(&cc, NULL, &r->clients[i], &err);
    if (rc) return rc;
  }
  return 0;
}

static inline void sr_free(sr_round *r) {
  bb_secagg_server_free(r->server);
  for (uint32_t i = 0; i < r->n; i++) bb_secagg_client_free(r->clients[i]);
  r->server = NULL;
}

/* Carries messages until none is left to carry; then, while the server waits on a
 * deadline, moves the clock past it. Stops when the server is done or aborted and every
 * message is delivered. */
static inline void sr_run(sr_round *r) {
  bb_error err;
  for (int guard = 0; guard < 100000; guard++) {
    bool moved = false;
    uint32_t to;
    const uint8_t *data;
    size_t len;
    while (bb_secagg_server_next_message(r->server, &to, &data, &len)) {
      moved = true;
      if (r->hook && !r->hook(r->hook_user, to, false, &data, &len)) continue;
      bb_error_clear(&err);
      if (bb_secagg_client_receive(r->clients[to], data, len, r->now, &err)) {
        r->client_refusals++;
        r->last_client_error = err;
      }
    }
    for (uint32_t i = 0; i < r->n; i++) {
      while (bb_secagg_client_next_message(r->clients[i], &data, &len)) {
        moved = true;
        const bb_secagg_stage stage = sr_sending_stage(data[5]);
        if (r->drop_at[i] != BB_SECAGG_SETUP && stage >= r->drop_at[i]) continue;
        if (r->hook && !r->hook(r->hook_user, i, true, &data, &len)) continue;
        bb_error_clear(&err);
        const bb_secagg_stage before = bb_secagg_server_stage(r->server);
        /* unmasking ends once every secret can be rebuilt: later shares are refused, as
         * they should be, and are not counted */
        if (bb_secagg_server_receive(r->server, i, data, len, r->now, &err) && before != BB_SECAGG_DONE) {
          r->server_refusals++;
          r->last_server_error = err;
        }
      }
    }
    if (moved) continue;
    const bb_secagg_stage st = bb_secagg_server_stage(r->server);
    if (st == BB_SECAGG_DONE || st == BB_SECAGG_ABORTED) return;
    r->now = bb_secagg_server_expiry(r->server);
    bb_secagg_server_handle_expiry(r->server, r->now, &err);
  }
}

/* Starts the round and runs it to its end. */
static inline void sr_start_and_run(sr_round *r) {
  bb_error err = {0};
  CHECK_EQ_INT(bb_secagg_server_start(r->server, r->now, &err), 0);
  sr_run(r);
}

#endif
