/* SecAgg+ under attack (bb/privacy.h). As a lying server: asking a client for both kinds
 * of share of one neighbour is refused and aborts it; telling some neighbours a client
 * survived and others that it dropped never yields both its secrets; weakened parameters
 * are refused. As hostile bytes: every malformed or protocol-breaking message, to a client
 * and to the server, is refused with its reason named, and what is only garbled changes
 * nothing, so the genuine message still goes through afterwards. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <sodium/crypto_scalarmult_curve25519.h>
#include <sodium/crypto_sign_ed25519.h>

#include "harness.h"
#include "privacy/secagg_codec.h"
#include "privacy/secagg_crypto.h"
#include "privacy/secagg_round.h"

#define LEN 8
#define MAX_MSG 65536

static float ones[LEN] = {1, 1, 1, 1, 1, 1, 1, 1};

static bb_secagg_server_config config(uint32_t n) {
  return (bb_secagg_server_config){.struct_size = sizeof(bb_secagg_server_config), .n_clients = n, .vector_len = LEN};
}

static void start(sr_round *r, uint32_t n, uint64_t seed) {
  bb_secagg_server_config c = config(n);
  CHECK_EQ_INT(sr_init(r, &c, seed), 0);
  bb_error err = {0};
  for (uint32_t i = 0; i < n; i++) bb_secagg_client_set_input(r->clients[i], ones, LEN, &err);
  CHECK_EQ_INT(bb_secagg_server_start(r->server, 0, &err), 0);
}

/* Carries messages until the server sends one of `type` to client `c`: that message is
 * kept in msg (and not delivered), and the run stops there. On the way it keeps what the
 * server saw of client 0: its mask key (advertise) and its self-mask commitment (shares),
 * and the setup client c got. */
static uint8_t setup_msg[MAX_MSG];
static size_t setup_len;
static uint8_t seen_s_pk[32], seen_commit[32];
static bool run_until(sr_round *r, uint32_t c, uint8_t type, uint8_t *msg, size_t *len) {
  bb_error err;
  for (int guard = 0; guard < 100; guard++) {
    uint32_t to;
    const uint8_t *data;
    size_t n;
    while (bb_secagg_server_next_message(r->server, &to, &data, &n)) {
      if (data[5] == SA_SETUP && to == c) memcpy(setup_msg, data, setup_len = n);
      if (to == c && data[5] == type) {
        memcpy(msg, data, *len = n);
        return true;
      }
      bb_secagg_client_receive(r->clients[to], data, n, 0, &err);
    }
    for (uint32_t i = 0; i < r->n; i++)
      while (bb_secagg_client_next_message(r->clients[i], &data, &n)) {
        if (i == 0 && data[5] == SA_ADVERTISE) memcpy(seen_s_pk, data + SA_HEADER_BYTES + 32, 32);
        if (i == 0 && data[5] == SA_SHARES) memcpy(seen_commit, data + SA_HEADER_BYTES, 32);
        bb_secagg_server_receive(r->server, i, data, n, 0, &err);
      }
  }
  return false;
}

/* The setup hash of the round client c was set up in (from its setup message). */
static void setup_hash_of(uint8_t out[32]) {
  sa_msg m;
  bb_secagg_reason why;
  CHECK_EQ_INT(sa_decode(setup_msg, setup_len, NULL, 0, &m, &why, NULL), 0);
  sa_setup_hash(m.round, &m.u.setup.params, m.u.setup.identities, out);
}

/* Delivers bytes to client c and checks the refusal: its code, its reason in the message,
 * and whether the client aborted. */
static void expect_client_refuses(sr_round *r, uint32_t c, const uint8_t *msg, size_t len, int code, const char *reason,
                                  bool aborts) {
  bb_error err = {0};
  const bb_secagg_stage before = bb_secagg_client_stage(r->clients[c]);
  CHECK_MSG(bb_secagg_client_receive(r->clients[c], msg, len, 0, &err) == code, "expected %s: %s", reason, err.message);
  char want[64];
  snprintf(want, sizeof want, "(%s)", reason);
  CHECK_MSG(strstr(err.message, want) != NULL, "expected %s in: %s", want, err.message);
  if (aborts) {
    CHECK_EQ_INT(bb_secagg_client_stage(r->clients[c]), BB_SECAGG_ABORTED);
    const uint8_t *out;
    size_t n;
    CHECK_EQ_INT(bb_secagg_client_next_message(r->clients[c], &out, &n), 0);
  } else {
    CHECK_EQ_INT(bb_secagg_client_stage(r->clients[c]), before);
  }
}

/* ---- the lying server ---------------------------------------------------------------------- */

/* An unmask request naming the given survivors and dropped clients. */
static size_t craft_request(uint8_t *out, const uint8_t *round, uint32_t to, const uint32_t *sv, uint32_t ns,
                            const uint32_t *dr, uint32_t nd) {
  bb_le_writer w = bb_le_writer_fixed(out, MAX_MSG);
  sa_put_header(&w, SA_UNMASK_REQUEST, round, to);
  bb_le_write_u32(&w, ns);
  for (uint32_t i = 0; i < ns; i++) bb_le_write_u32(&w, sv[i]);
  bb_le_write_u32(&w, nd);
  for (uint32_t i = 0; i < nd; i++) bb_le_write_u32(&w, dr[i]);
  return w.len;
}

/* Asked for client 3's self-mask share and its mask-key share at once, client 0 refuses,
 * aborts and sends nothing: with both the server would unmask client 3's vector. */
static void test_both_shares_refused(void) {
  sr_round r;
  start(&r, 6, 1);
  uint8_t msg[MAX_MSG];
  size_t len;
  CHECK(run_until(&r, 0, SA_UNMASK_REQUEST, msg, &len));
  const uint32_t sv[] = {1, 2, 3, 4, 5}, dr[] = {3};
  len = craft_request(msg, msg + 6, 0, sv, 5, dr, 1);
  expect_client_refuses(&r, 0, msg, len, BB_ERR_DENIED, "both_shares", true);
  CHECK_EQ_INT(bb_secagg_client_abort_reason(r.clients[0]), BB_SECAGG_BOTH_SHARES);
  sr_free(&r);
}

/* The split view: the server tells some of client 0's neighbours that it survived (asking
 * for its self-mask share) and the others that it dropped (asking for its mask-key
 * share). Every honest neighbour answers once, and the threshold exceeds half the degree,
 * so for every split at most one of the two secrets can be rebuilt: the server checks its
 * loot as an attacker would, against client 0's commitment and public key. */
static void split_view(uint32_t survived_told, bool *self_rebuilt, bool *key_rebuilt) {
  sr_round r;
  start(&r, 10, 2);
  uint8_t msg[MAX_MSG];
  size_t len;
  /* stop when client 1 is about to be asked; by then every client has masked */
  CHECK(run_until(&r, 1, SA_UNMASK_REQUEST, msg, &len));
  uint8_t round[SA_ROUND_BYTES];
  memcpy(round, msg + 6, sizeof round);
  static uint8_t self_shares[9 * 33], key_shares[9 * 33];
  uint32_t n_self = 0, n_key = 0;
  bb_error err = {0};
  for (uint32_t i = 1; i < 10; i++) {
    /* neighbours 1..survived_told hear that client 0 survived, the rest that it dropped */
    uint32_t sv[9], dr[1], ns = 0, nd = 0;
    for (uint32_t j = 0; j < 10; j++) {
      if (j == i) continue;
      if (j == 0 && i > survived_told) dr[nd++] = 0;
      else sv[ns++] = j;
    }
    len = craft_request(msg, round, i, sv, ns, dr, nd);
    CHECK_EQ_INT(bb_secagg_client_receive(r.clients[i], msg, len, 0, &err), 0);
    const uint8_t *out;
    size_t n;
    CHECK_EQ_INT(bb_secagg_client_next_message(r.clients[i], &out, &n), 1);
    sa_msg m;
    bb_secagg_reason why;
    CHECK_EQ_INT(sa_decode(out, n, NULL, 32, &m, &why, &err), 0);
    for (uint32_t k = 0; k < m.u.list.count; k++) {
      const uint8_t *e = m.u.list.entries + (size_t)k * SA_UNMASK_ENTRY_BYTES;
      if (bb_le_get_u32(e) != 0) continue;
      if (e[4] == SA_KIND_SELF_MASK) memcpy(self_shares + 33 * n_self++, e + 5, 33);
      else memcpy(key_shares + 33 * n_key++, e + 5, 33);
    }
    /* asked again, the client has nothing more to give */
    CHECK(bb_secagg_client_receive(r.clients[i], msg, len, 0, &err) != 0);
    CHECK_EQ_INT(bb_secagg_client_next_message(r.clients[i], &out, &n), 0);
  }
  CHECK_EQ_INT(n_self + n_key, 9);
  /* the attacker's test of its loot: does it open client 0's commitment, or give its key? */
  uint8_t secret[32], check[32];
  *self_rebuilt = *key_rebuilt = false;
  if (n_self && bb_shamir_combine(self_shares, n_self, 33, secret, &err) == 0) {
    sa_commit(secret, check);
    *self_rebuilt = memcmp(check, seen_commit, 32) == 0;
  }
  if (n_key && bb_shamir_combine(key_shares, n_key, 33, secret, &err) == 0) {
    crypto_scalarmult_curve25519_base(check, secret);
    *key_rebuilt = memcmp(check, seen_s_pk, 32) == 0;
  }
  sr_free(&r);
}

static void test_split_view_learns_one_secret_at_most(void) {
  for (uint32_t told = 0; told <= 9; told++) {
    bool self, key;
    split_view(told, &self, &key);
    CHECK_MSG(!(self && key), "told %u of 9 that client 0 survived: both its secrets rebuilt", told);
    /* the threshold (5) decides which one the attacker gets */
    CHECK_MSG(self == (told >= 5) && key == (9 - told >= 5), "told %u: self %d key %d", told, self, key);
  }
}

/* A server that lowers the threshold to half the degree (which would let a split view
 * rebuild both) is refused at setup, as is one below the client's own demands. */
static void test_weakened_parameters_refused(void) {
  sr_round r;
  start(&r, 10, 3);
  uint8_t msg[MAX_MSG];
  size_t len;
  CHECK(run_until(&r, 4, SA_SETUP, msg, &len));
  /* the threshold field: header, then n, degree, threshold */
  uint8_t weak[MAX_MSG];
  memcpy(weak, msg, len);
  bb_le_put_u32(weak + SA_HEADER_BYTES + 8, 4);
  expect_client_refuses(&r, 4, weak, len, BB_ERR_MALFORMED, "bad_params", true);
  sr_free(&r);

  start(&r, 10, 3);
  bb_secagg_client_free(r.clients[4]);
  bb_secagg_client_config cc = {.struct_size = sizeof cc, .identity_secret_key = r.sk[4], .min_threshold = 6};
  bb_error err = {0};
  CHECK_EQ_INT(bb_secagg_client_new(&cc, NULL, &r.clients[4], &err), 0);
  CHECK(run_until(&r, 4, SA_SETUP, msg, &len));
  expect_client_refuses(&r, 4, msg, len, BB_ERR_DENIED, "weak_params", true);
  sr_free(&r);
}

/* ---- hostile bytes to a client --------------------------------------------------------------- */

/* Garbled copies of each server message: refused, named, and harmless (the client stays
 * where it was and takes the genuine message next). */
static void test_client_garbled_messages_change_nothing(void) {
  const uint8_t types[] = {SA_SETUP, SA_KEYS, SA_CIPHERTEXTS, SA_UNMASK_REQUEST};
  for (size_t t = 0; t < sizeof types; t++) {
    sr_round r;
    start(&r, 5, 10 + t);
    uint8_t msg[MAX_MSG], bad[MAX_MSG + 1];
    size_t len;
    CHECK(run_until(&r, 2, types[t], msg, &len));
    /* every truncation */
    for (size_t cut = 0; cut < len; cut += (cut < 64 ? 1 : 97)) {
      bb_error err = {0};
      CHECK_MSG(bb_secagg_client_receive(r.clients[2], msg, cut, 0, &err) == BB_ERR_MALFORMED, "%s cut at %zu: %s",
                sa_type_name(types[t]), cut, err.message);
      CHECK(strstr(err.message, "(truncated)") != NULL || strstr(err.message, "(bad_length)") != NULL);
    }
    memcpy(bad, msg, len);
    bad[0] = 'X';
    expect_client_refuses(&r, 2, bad, len, BB_ERR_MALFORMED, "bad_magic", false);
    memcpy(bad, msg, len);
    bad[4] = 2;
    expect_client_refuses(&r, 2, bad, len, BB_ERR_MALFORMED, "bad_version", false);
    memcpy(bad, msg, len);
    bad[5] = 42;
    expect_client_refuses(&r, 2, bad, len, BB_ERR_MALFORMED, "bad_type", false);
    memcpy(bad, msg, len);
    bad[len] = 0;
    expect_client_refuses(&r, 2, bad, len + 1, BB_ERR_MALFORMED, "bad_length", false);
    if (types[t] != SA_SETUP) {
      memcpy(bad, msg, len);
      bad[10] ^= 1; /* the round id */
      expect_client_refuses(&r, 2, bad, len, BB_ERR_DENIED, "other_round", false);
      memcpy(bad, msg, len);
      bad[22] ^= 1; /* the recipient */
      expect_client_refuses(&r, 2, bad, len, BB_ERR_DENIED, "wrong_sender", false);
      /* a later stage's message, early */
      memcpy(bad, msg, len);
      bad[5] = types[t] == SA_UNMASK_REQUEST ? SA_KEYS : SA_UNMASK_REQUEST;
      bb_error err = {0};
      CHECK(bb_secagg_client_receive(r.clients[2], bad, len, 0, &err) != 0);
      CHECK_EQ_INT(bb_secagg_client_stage(r.clients[2]), types[t] == SA_KEYS ? BB_SECAGG_SHARE_KEYS
                                                         : types[t] == SA_CIPHERTEXTS ? BB_SECAGG_MASKED_INPUT
                                                                                      : BB_SECAGG_UNMASK);
    }
    /* the genuine message still goes through */
    bb_error err = {0};
    CHECK_MSG(bb_secagg_client_receive(r.clients[2], msg, len, 0, &err) == 0, "%s: %s", sa_type_name(types[t]),
              err.message);
    /* and once taken, again it is refused as out of its stage */
    CHECK_EQ_INT(bb_secagg_client_receive(r.clients[2], msg, len, 0, &err), BB_ERR_DENIED);
    CHECK(strstr(err.message, "(wrong_stage)") != NULL);
    sr_free(&r);
  }
}

static void test_client_caps(void) {
  sr_round r;
  start(&r, 5, 20);
  bb_secagg_client_free(r.clients[1]);
  bb_secagg_client_config cc = {.struct_size = sizeof cc, .identity_secret_key = r.sk[1]};
  cc.caps.max_clients = 4;
  bb_error err = {0};
  CHECK_EQ_INT(bb_secagg_client_new(&cc, NULL, &r.clients[1], &err), 0);
  uint8_t msg[MAX_MSG];
  size_t len;
  CHECK(run_until(&r, 1, SA_SETUP, msg, &len));
  expect_client_refuses(&r, 1, msg, len, BB_ERR_LIMIT, "over_cap", false);
  /* a vector longer than the cap, too */
  bb_secagg_client_free(r.clients[1]);
  cc.caps.max_clients = 0;
  cc.caps.max_vector_len = LEN - 1;
  CHECK_EQ_INT(bb_secagg_client_new(&cc, NULL, &r.clients[1], &err), 0);
  expect_client_refuses(&r, 1, msg, len, BB_ERR_LIMIT, "over_cap", false);
  /* a setup that does not list this client where it says */
  bb_secagg_client_free(r.clients[1]);
  cc.caps.max_vector_len = 0;
  CHECK_EQ_INT(bb_secagg_client_new(&cc, NULL, &r.clients[1], &err), 0);
  bb_le_put_u32(msg + 22, 3);
  expect_client_refuses(&r, 1, msg, len, BB_ERR_DENIED, "not_participant", true);
  sr_free(&r);
}

/* A fresh round of 6 clients run until client 2 is about to get its message of `type`. */
static void client_2_awaiting(sr_round *r, uint64_t seed, uint8_t type, uint8_t *msg, size_t *len) {
  start(r, 6, seed);
  CHECK(run_until(r, 2, type, msg, len));
}

/* A keys message re-signed as client j would (the test holds every identity): keys that
 * verify, but are hostile. Entry k of the message is replaced. */
static size_t resign_entry(const sr_round *r, uint8_t *msg, size_t len, uint32_t k, uint32_t as, const uint8_t c_pk[32],
                           const uint8_t s_pk[32]) {
  uint8_t hash[32], payload[SA_SIGN_PAYLOAD_BYTES];
  setup_hash_of(hash);
  uint8_t *e = msg + SA_HEADER_BYTES + 4 + (size_t)k * SA_KEY_ENTRY_BYTES;
  bb_le_put_u32(e, as);
  memcpy(e + 4, c_pk, 32);
  memcpy(e + 36, s_pk, 32);
  sa_sign_payload(hash, as, c_pk, s_pk, payload);
  crypto_sign_ed25519_detached(e + 68, NULL, payload, sizeof payload, r->sk[as]);
  return len;
}

static void test_client_hostile_keys(void) {
  static const uint8_t zero[32];
  for (int attack = 0; attack < 7; attack++) {
    sr_round r;
    uint8_t msg[MAX_MSG];
    size_t len;
    client_2_awaiting(&r, 30 + attack, SA_KEYS, msg, &len);
    /* entries: clients 0, 1, 3, 4, 5; entry 0 is client 0's */
    uint8_t *e0 = msg + SA_HEADER_BYTES + 4, *e1 = e0 + SA_KEY_ENTRY_BYTES;
    switch (attack) {
    case 0: /* a forged signature */
      e0[100] ^= 1;
      expect_client_refuses(&r, 2, msg, len, BB_ERR_DENIED, "bad_signature", true);
      break;
    case 1: /* a low-order key, signed by its owner */
      resign_entry(&r, msg, len, 0, 0, e0 + 4, zero);
      expect_client_refuses(&r, 2, msg, len, BB_ERR_DENIED, "bad_key", true);
      break;
    case 2: { /* client 1 presents client 0's key as its own, signed by itself */
      uint8_t c_pk[32], s_pk[32];
      memcpy(c_pk, e1 + 4, 32);
      memcpy(s_pk, e0 + 36, 32);
      resign_entry(&r, msg, len, 1, 1, c_pk, s_pk);
      expect_client_refuses(&r, 2, msg, len, BB_ERR_DENIED, "bad_key", true);
      break;
    }
    case 3: /* keys of the client itself, as if it were its own neighbour: entry 1 (client 1)
             * becomes client 2, keeping the order 0, 2, 3, 4, 5 */
      resign_entry(&r, msg, len, 1, 2, e1 + 4, e1 + 36);
      expect_client_refuses(&r, 2, msg, len, BB_ERR_DENIED, "not_neighbour", true);
      break;
    case 4: /* fewer neighbours than the threshold (3 of 5): keep two entries */
      bb_le_put_u32(msg + SA_HEADER_BYTES, 2);
      expect_client_refuses(&r, 2, msg, SA_HEADER_BYTES + 4 + 2 * SA_KEY_ENTRY_BYTES, BB_ERR_DENIED,
                            "too_few_neighbours", true);
      break;
    case 5: { /* entries out of order */
      uint8_t tmp[SA_KEY_ENTRY_BYTES];
      memcpy(tmp, e0, sizeof tmp);
      memcpy(e0, e1, sizeof tmp);
      memcpy(e1, tmp, sizeof tmp);
      expect_client_refuses(&r, 2, msg, len, BB_ERR_MALFORMED, "bad_value", false);
      break;
    }
    case 6: /* a count past the cap on a list */
      bb_le_put_u32(msg + SA_HEADER_BYTES, 100000);
      expect_client_refuses(&r, 2, msg, len, BB_ERR_LIMIT, "over_cap", false);
      break;
    }
    sr_free(&r);
  }
}

static void test_client_hostile_ciphertexts(void) {
  for (int attack = 0; attack < 3; attack++) {
    sr_round r;
    uint8_t msg[MAX_MSG];
    size_t len;
    client_2_awaiting(&r, 40 + attack, SA_CIPHERTEXTS, msg, &len);
    uint8_t *e0 = msg + SA_HEADER_BYTES + 4;
    if (attack == 0) { /* a share pair altered in transit */
      e0[4 + 20] ^= 1;
      expect_client_refuses(&r, 2, msg, len, BB_ERR_DENIED, "bad_ciphertext", true);
    } else if (attack == 1) { /* client 0's sealed shares presented as client 1's */
      memcpy(e0 + SA_CIPHER_ENTRY_BYTES + 4, e0 + 4, SA_CIPHER_BYTES);
      expect_client_refuses(&r, 2, msg, len, BB_ERR_DENIED, "bad_ciphertext", true);
    } else { /* too few */
      bb_le_put_u32(msg + SA_HEADER_BYTES, 2);
      expect_client_refuses(&r, 2, msg, SA_HEADER_BYTES + 4 + 2 * SA_CIPHER_ENTRY_BYTES, BB_ERR_DENIED,
                            "too_few_neighbours", true);
    }
    sr_free(&r);
  }
}

static void test_client_hostile_unmask_requests(void) {
  for (int attack = 0; attack < 3; attack++) {
    sr_round r;
    uint8_t msg[MAX_MSG];
    size_t len;
    client_2_awaiting(&r, 50 + attack, SA_UNMASK_REQUEST, msg, &len);
    if (attack == 0) { /* a share of itself */
      const uint32_t sv[] = {0, 1, 2, 3, 4};
      len = craft_request(msg, msg + 6, 2, sv, 5, NULL, 0);
      expect_client_refuses(&r, 2, msg, len, BB_ERR_DENIED, "not_neighbour", true);
    } else if (attack == 1) { /* a client that is no one */
      const uint32_t sv[] = {0, 1, 3}, dr[] = {77};
      len = craft_request(msg, msg + 6, 2, sv, 3, dr, 1);
      expect_client_refuses(&r, 2, msg, len, BB_ERR_DENIED, "not_neighbour", true);
    } else { /* everyone else dropped: client 2's own vector would be the sum */
      const uint32_t sv[] = {0, 1}, dr[] = {3, 4, 5};
      len = craft_request(msg, msg + 6, 2, sv, 2, dr, 3);
      expect_client_refuses(&r, 2, msg, len, BB_ERR_DENIED, "too_few_neighbours", true);
    }
    sr_free(&r);
  }
}

static void test_client_server_abort(void) {
  sr_round r;
  start(&r, 5, 60);
  uint8_t msg[MAX_MSG];
  size_t len;
  CHECK(run_until(&r, 3, SA_CIPHERTEXTS, msg, &len));
  uint8_t ab[SA_HEADER_BYTES + 1];
  bb_le_writer w = bb_le_writer_fixed(ab, sizeof ab);
  sa_put_header(&w, SA_ABORT, msg + 6, 3);
  bb_le_write_u8(&w, 200);
  expect_client_refuses(&r, 3, ab, sizeof ab, BB_ERR_MALFORMED, "bad_value", false);
  ab[SA_HEADER_BYTES] = BB_SECAGG_TOO_FEW_CLIENTS;
  bb_error err = {0};
  CHECK_EQ_INT(bb_secagg_client_receive(r.clients[3], ab, sizeof ab, 0, &err), 0);
  CHECK_EQ_INT(bb_secagg_client_stage(r.clients[3]), BB_SECAGG_ABORTED);
  CHECK_EQ_INT(bb_secagg_client_abort_reason(r.clients[3]), BB_SECAGG_SERVER_ABORT);
  sr_free(&r);
}

/* A hostile client 0 plays its part itself: its own keys, signed by its identity, then
 * shares sealed properly but at x coordinates other than the graph gives its neighbours.
 * Accepted, they would get the honest neighbours expelled at unmasking (the server checks
 * the coordinates); each neighbour refuses them at once instead. */
static struct {
  uint8_t c_sk[32], c_pk[32], s_pk[32], hash[32];
  uint8_t c_pks[8][32];
  bool have_hash;
  sr_round *r;
} evil;

static uint8_t evil_msg[MAX_MSG];
static bool evil_hook(void *user, uint32_t client, bool to_server, const uint8_t **data, size_t *len) {
  (void)user;
  const uint8_t type = (*data)[5];
  if (!to_server && type == SA_SETUP && !evil.have_hash) {
    sa_msg m;
    bb_secagg_reason why;
    CHECK_EQ_INT(sa_decode(*data, *len, NULL, 0, &m, &why, NULL), 0);
    sa_setup_hash(m.round, &m.u.setup.params, m.u.setup.identities, evil.hash);
    evil.have_hash = true;
  }
  if (!to_server) return true;
  if (type == SA_ADVERTISE && client != 0) memcpy(evil.c_pks[client], *data + SA_HEADER_BYTES, 32);
  if (client != 0) return true;
  if (type == SA_ADVERTISE) {
    uint8_t s_sk[32], payload[SA_SIGN_PAYLOAD_BYTES];
    sa_keypair(NULL, evil.c_sk, evil.c_pk, NULL);
    sa_keypair(NULL, s_sk, evil.s_pk, NULL);
    memcpy(evil_msg, *data, SA_HEADER_BYTES);
    memcpy(evil_msg + SA_HEADER_BYTES, evil.c_pk, 32);
    memcpy(evil_msg + SA_HEADER_BYTES + 32, evil.s_pk, 32);
    sa_sign_payload(evil.hash, 0, evil.c_pk, evil.s_pk, payload);
    crypto_sign_ed25519_detached(evil_msg + SA_HEADER_BYTES + 64, NULL, payload, sizeof payload, evil.r->sk[0]);
    *data = evil_msg;
    return true;
  }
  if (type == SA_SHARES) {
    /* the shares of a secret at x = 2..5 (the graph gives neighbours 1..4 x = 1..4) */
    uint8_t secret[32] = {7}, shares[4 * 33];
    const uint8_t xs[4] = {2, 3, 4, 5};
    CHECK_EQ_INT(bb_shamir_split(secret, 32, 4, 3, xs, NULL, shares, NULL), 0);
    bb_le_writer w = bb_le_writer_fixed(evil_msg, MAX_MSG);
    sa_put_header(&w, SA_SHARES, *data + 6, 0);
    bb_le_write(&w, secret, 32); /* a commitment that will never be opened */
    bb_le_write_u32(&w, 4);
    for (uint32_t j = 1; j <= 4; j++) {
      uint8_t plain[SA_PLAIN_BYTES], key[32];
      bb_le_put_u32(plain, 0);
      bb_le_put_u32(plain + 4, j);
      memcpy(plain + 8, shares + 33 * (j - 1), 33);
      memcpy(plain + 41, shares + 33 * (j - 1), 33);
      CHECK(sa_pair_key(evil.c_sk, evil.c_pks[j], evil.hash, 0, j, SA_KDF_TRANSPORT, key));
      bb_le_write_u32(&w, j);
      sa_seal(key, evil.hash, 0, j, plain, sizeof plain, bb_le_write_span(&w, SA_CIPHER_BYTES));
    }
    *data = evil_msg;
    *len = w.len;
    return true;
  }
  return false; /* the rest of client 0's own messages never leave */
}

static void test_client_refuses_shares_at_other_coordinates(void) {
  static sr_round r;
  bb_secagg_server_config c = config(5);
  CHECK_EQ_INT(sr_init(&r, &c, 90), 0);
  for (uint32_t i = 0; i < 5; i++) bb_secagg_client_set_input(r.clients[i], ones, LEN, NULL);
  memset(&evil, 0, sizeof evil);
  evil.r = &r;
  r.hook = evil_hook;
  sr_start_and_run(&r);
  for (uint32_t i = 1; i <= 4; i++) {
    CHECK_EQ_INT(bb_secagg_client_stage(r.clients[i]), BB_SECAGG_ABORTED);
    CHECK_EQ_INT(bb_secagg_client_abort_reason(r.clients[i]), BB_SECAGG_BAD_CIPHERTEXT);
  }
  CHECK(strstr(r.last_client_error.message, "(bad_ciphertext)") != NULL &&
        strstr(r.last_client_error.message, "coordinates") != NULL);
  sr_free(&r);
}

/* ---- hostile bytes to the server ---------------------------------------------------------------- */

/* Runs a round in which client 1's message of `type` is passed through `mutate` on its way. */
typedef size_t (*mutator)(sr_round *r, uint8_t *msg, size_t len);
static mutator active;
static uint8_t active_type;
static sr_round *active_round;
static uint8_t hostile[MAX_MSG];
static bool mutate_hook(void *user, uint32_t client, bool to_server, const uint8_t **data, size_t *len) {
  (void)user;
  if (!to_server || client != 1 || (*data)[5] != active_type) return true;
  memcpy(hostile, *data, *len);
  *len = active(active_round, hostile, *len);
  *data = hostile;
  return true;
}

static void expect_server_refuses(uint8_t type, mutator m, int code, const char *reason, bb_secagg_stage end,
                                  uint64_t seed) {
  static sr_round r;
  bb_secagg_server_config c = config(6);
  c.modulus_bits = 20; /* 3 bytes an element, the top 4 bits unused */
  c.quant_range = 1u << 16;
  CHECK_EQ_INT(sr_init(&r, &c, seed), 0);
  for (uint32_t i = 0; i < 6; i++) bb_secagg_client_set_input(r.clients[i], ones, LEN, NULL);
  active = m, active_type = type, active_round = &r;
  r.hook = mutate_hook;
  sr_start_and_run(&r);
  char want[64];
  snprintf(want, sizeof want, "(%s)", reason);
  CHECK_MSG(r.server_refusals >= 1 && r.last_server_error.code == code &&
                strstr(r.last_server_error.message, want) != NULL,
            "%s to the server: expected %s, got %d: %s", sa_type_name(type), want, r.last_server_error.code,
            r.last_server_error.message);
  CHECK_MSG(bb_secagg_server_stage(r.server) == end, "%s: the round ended %s", reason,
            bb_secagg_stage_name(bb_secagg_server_stage(r.server)));
  if (end == BB_SECAGG_DONE) {
    /* the hostile client is out of the sum, everyone else in: 5 × 1.0 per element */
    float sum[LEN];
    uint32_t summed = 0;
    CHECK_EQ_INT(bb_secagg_server_result(r.server, sum, LEN, &summed, NULL), 0);
    CHECK(!bb_secagg_server_summed(r.server, 1) || type == SA_UNMASK);
    for (int e = 0; e < LEN; e++) CHECK_MSG(fabsf(sum[e] - (float)summed) < 1e-3f, "%s: %g", reason, sum[e]);
  }
  sr_free(&r);
}

static size_t forge_signature(sr_round *r, uint8_t *msg, size_t len) { (void)r, msg[len - 1] ^= 1; return len; }
static size_t same_keys(sr_round *r, uint8_t *msg, size_t len) {
  (void)r, memcpy(msg + SA_HEADER_BYTES + 32, msg + SA_HEADER_BYTES, 32);
  return len;
}
static size_t other_sender(sr_round *r, uint8_t *msg, size_t len) { (void)r, bb_le_put_u32(msg + 22, 4); return len; }
static size_t other_round(sr_round *r, uint8_t *msg, size_t len) { (void)r, msg[6] ^= 0x80; return len; }
static size_t drop_one_share(sr_round *r, uint8_t *msg, size_t len) {
  (void)r;
  bb_le_put_u32(msg + SA_HEADER_BYTES + 32, bb_le_get_u32(msg + SA_HEADER_BYTES + 32) - 1);
  return len - SA_CIPHER_ENTRY_BYTES;
}
static size_t short_vector(sr_round *r, uint8_t *msg, size_t len) {
  (void)r, bb_le_put_u32(msg + SA_HEADER_BYTES, LEN - 1);
  return len - 3; /* one 3-byte element less, consistently */
}
static size_t past_modulus(sr_round *r, uint8_t *msg, size_t len) {
  (void)r, msg[SA_HEADER_BYTES + 4 + 2] |= 0xf0; /* element 0 at 2^20 or more */
  return len;
}
static size_t wrong_kind(sr_round *r, uint8_t *msg, size_t len) {
  (void)r, msg[SA_HEADER_BYTES + 4 + 4] ^= 3; /* 1 <-> 2 */
  return len;
}
static size_t wrong_x(sr_round *r, uint8_t *msg, size_t len) {
  (void)r, msg[SA_HEADER_BYTES + 4 + 37] ^= 0x40;
  return len;
}
static size_t corrupt_share(sr_round *r, uint8_t *msg, size_t len) {
  (void)r;
  for (uint32_t k = 0; k < bb_le_get_u32(msg + SA_HEADER_BYTES); k++) msg[SA_HEADER_BYTES + 4 + k * 38 + 5] ^= 0x5a;
  return len;
}
static size_t garble(sr_round *r, uint8_t *msg, size_t len) { (void)r, msg[0] = 0; return len; }

static void test_server_hostile_messages(void) {
  expect_server_refuses(SA_ADVERTISE, forge_signature, BB_ERR_DENIED, "bad_signature", BB_SECAGG_DONE, 70);
  expect_server_refuses(SA_ADVERTISE, same_keys, BB_ERR_DENIED, "bad_key", BB_SECAGG_DONE, 71);
  expect_server_refuses(SA_ADVERTISE, other_sender, BB_ERR_DENIED, "wrong_sender", BB_SECAGG_DONE, 72);
  expect_server_refuses(SA_ADVERTISE, garble, BB_ERR_MALFORMED, "bad_magic", BB_SECAGG_DONE, 73);
  expect_server_refuses(SA_SHARES, drop_one_share, BB_ERR_DENIED, "not_neighbour", BB_SECAGG_DONE, 74);
  expect_server_refuses(SA_SHARES, other_round, BB_ERR_DENIED, "other_round", BB_SECAGG_DONE, 75);
  expect_server_refuses(SA_MASKED, short_vector, BB_ERR_MALFORMED, "bad_length", BB_SECAGG_DONE, 76);
  expect_server_refuses(SA_MASKED, past_modulus, BB_ERR_MALFORMED, "bad_value", BB_SECAGG_DONE, 79);
  expect_server_refuses(SA_UNMASK, wrong_kind, BB_ERR_MALFORMED, "bad_value", BB_SECAGG_DONE, 77);
  expect_server_refuses(SA_UNMASK, wrong_x, BB_ERR_MALFORMED, "bad_value", BB_SECAGG_DONE, 78);
}

/* Shares that decode but were altered: whether the server rebuilds from them depends on
 * which arrive first; when it does, the commitment or the public key catches it and the
 * round aborts rather than giving a wrong sum. */
static bool corrupt_all_hook(void *user, uint32_t client, bool to_server, const uint8_t **data, size_t *len) {
  (void)user, (void)client;
  if (!to_server || (*data)[5] != SA_UNMASK) return true;
  memcpy(hostile, *data, *len);
  corrupt_share(NULL, hostile, *len);
  *data = hostile;
  return true;
}

static void test_server_catches_bad_shares(void) {
  sr_round r;
  bb_secagg_server_config c = config(6);
  CHECK_EQ_INT(sr_init(&r, &c, 80), 0);
  for (uint32_t i = 0; i < 6; i++) bb_secagg_client_set_input(r.clients[i], ones, LEN, NULL);
  r.hook = corrupt_all_hook;
  sr_start_and_run(&r);
  CHECK_EQ_INT(bb_secagg_server_stage(r.server), BB_SECAGG_ABORTED);
  CHECK_EQ_INT(bb_secagg_server_abort_reason(r.server), BB_SECAGG_BAD_SHARES);
  sr_free(&r);
}

/* A repeated message is refused and changes nothing: the round ends as it would have. */
static bool repeat_hook(void *user, uint32_t client, bool to_server, const uint8_t **data, size_t *len) {
  sr_round *r = user;
  if (to_server && client == 2) {
    bb_error err = {0};
    /* deliver it once ahead: the loop's own delivery is then the repeat */
    CHECK_EQ_INT(bb_secagg_server_receive(r->server, client, *data, *len, r->now, &err), 0);
  }
  return true;
}

static void test_server_repeats_change_nothing(void) {
  static sr_round r;
  bb_secagg_server_config c = config(6);
  CHECK_EQ_INT(sr_init(&r, &c, 81), 0);
  for (uint32_t i = 0; i < 6; i++) bb_secagg_client_set_input(r.clients[i], ones, LEN, NULL);
  r.hook = repeat_hook;
  r.hook_user = &r;
  sr_start_and_run(&r);
  CHECK_EQ_INT(bb_secagg_server_stage(r.server), BB_SECAGG_DONE);
  CHECK(r.server_refusals >= 3 && strstr(r.last_server_error.message, "(wrong_stage)") != NULL);
  float sum[LEN];
  uint32_t summed;
  CHECK_EQ_INT(bb_secagg_server_result(r.server, sum, LEN, &summed, NULL), 0);
  CHECK_EQ_INT(summed, 6);
  CHECK(fabsf(sum[0] - 6.0f) < 1e-3f);
  sr_free(&r);
}

int main(void) {
  RUN(test_both_shares_refused);
  RUN(test_split_view_learns_one_secret_at_most);
  RUN(test_weakened_parameters_refused);
  RUN(test_client_garbled_messages_change_nothing);
  RUN(test_client_caps);
  RUN(test_client_hostile_keys);
  RUN(test_client_hostile_ciphertexts);
  RUN(test_client_hostile_unmask_requests);
  RUN(test_client_server_abort);
  RUN(test_client_refuses_shares_at_other_coordinates);
  RUN(test_server_hostile_messages);
  RUN(test_server_catches_bad_shares);
  RUN(test_server_repeats_change_nothing);
  return bb_test_finish();
}
