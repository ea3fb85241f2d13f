/* The SecAgg+ server (Bell et al. 2020, after Bonawitz et al. 2017) as a sans-IO state
 * machine. Per stage it waits for the clients still in the round, until all answered or
 * the deadline passed; a client that did not answer, or whose message broke the rules, has
 * dropped. Between stages it drops every client with fewer neighbours left than the
 * threshold (their secrets could not be recovered) and aborts when fewer than min_clients
 * remain or a secret the sum needs is held by fewer than a threshold of live clients.
 *
 * What the server holds of a client: its public keys and their signature, the sealed
 * shares it addressed to its neighbours (forwarded, never opened here), the commitment to
 * its self-mask seed, and after unmasking the shares it was sent. Masked vectors are added
 * into one running sum on arrival; the server never holds one client's vector apart. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <sodium/crypto_scalarmult_curve25519.h>
#include <sodium/utils.h>

#include "bb/bytes.h"
#include "bb/privacy.h"
#include "privacy/secagg_codec.h"
#include "privacy/secagg_crypto.h"
#include "privacy/secagg_graph.h"
#include "privacy/secagg_params.h"
#include "privacy/secagg_quant.h"
#include "privacy/secagg_reason.h"
#include "privacy/shamir.h"
#include "util/mem.h"

#define DEFAULT_STAGE_TIMEOUT_NS (30ull * 1000000000ull)

/* What the server knows of one client. `live` is false once it dropped. */
typedef struct sa_peer {
  bool live;
  bool answered;  /* this stage's message arrived */
  bool keyed;     /* its keys were forwarded (in the round after ADVERTISE_KEYS) */
  bool shared;    /* its shares arrived and were forwarded (after SHARE_KEYS) */
  bool masked;    /* its masked vector is in the sum (after MASKED_INPUT) */
  uint8_t c_pk[32], s_pk[32], sig[64];
  uint8_t commit[32];
} sa_peer;

struct bb_secagg_server {
  const bb_allocator *alloc;
  bb_secagg_params p;
  bb_secagg_caps caps;
  uint64_t timeout_ns;
  bb_random_source random;
  uint8_t round[SA_ROUND_BYTES], setup_hash[32];
  uint8_t *identities; /* n × 32 */
  sa_graph graph;
  uint32_t *nbr;       /* n × degree: each client's neighbours, ascending */
  sa_peer *peers;
  uint8_t *sealed;     /* n × degree × SA_CIPHER_BYTES: owner's sealed shares, by holder's x - 1 */
  uint8_t *held;       /* n × degree × SA_SHARE_BYTES: shares sent back at unmasking, by holder's x - 1 */
  uint8_t *held_kind;  /* n × degree: which kind held[...] is (0: none yet) */
  uint64_t *sum;       /* vector_len: the running sum of masked vectors */
  bb_secagg_stage stage;
  bb_secagg_reason abort_reason;
  uint64_t expiry;
  uint32_t waiting;    /* live clients this stage still waits for */
  /* the outbox: every client whose flag is set gets this stage's message, built when asked */
  uint8_t out_type;
  uint8_t *out_pending; /* n flags */
  uint32_t out_next;
  bb_le_writer out;
  bb_secagg_server_stats stats;
};

static sa_peer *peer(bb_secagg_server *s, uint32_t i) { return &s->peers[i]; }
static const uint32_t *nbrs(const bb_secagg_server *s, uint32_t i) { return s->nbr + (size_t)i * s->p.degree; }

/* ---- creation ----------------------------------------------------------------------- */

static int copy_config(const bb_secagg_server_config *config, bb_secagg_server_config *c, bb_error *err) {
  memset(c, 0, sizeof *c);
  if (!config || config->struct_size < sizeof config->struct_size || config->struct_size > sizeof *c)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg server: config struct_size %zu (this library knows %zu)",
                        config ? config->struct_size : 0, sizeof *c);
  memcpy(c, config, config->struct_size);
  return 0;
}

int bb_secagg_server_new(const bb_secagg_server_config *config, const uint8_t *identity_keys,
                         const bb_allocator *alloc, bb_secagg_server **out, bb_error *err) {
  if (!out) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg server: no out pointer");
  *out = NULL;
  if (!alloc) alloc = bb_default_allocator();
  bb_secagg_server_config c;
  int rc = copy_config(config, &c, err);
  if (rc) return rc;
  if (!identity_keys) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg server: no identity keys");
  const bb_secagg_caps caps = sa_caps_resolve(&c.caps);
  const bb_secagg_params p = sa_params_from_config(&c);
  bb_secagg_reason why;
  if (sa_params_check(&p, &caps, &why, err)) {
    bb_error_prefix(err, "secagg server config: ");
    if (err) err->code = BB_ERR_INVALID_ARGUMENT;
    return BB_ERR_INVALID_ARGUMENT;
  }

  bb_secagg_server *s = bbi_mem_calloc(alloc, 1, sizeof *s);
  if (!s) return bb_error_set(err, BB_ERR_NOMEM, "secagg server: out of memory");
  s->alloc = alloc;
  s->p = p;
  s->caps = caps;
  s->timeout_ns = c.stage_timeout_ns ? c.stage_timeout_ns : DEFAULT_STAGE_TIMEOUT_NS;
  s->random = c.random;
  s->expiry = UINT64_MAX;
  s->out = bb_le_writer_growing(alloc);
  const size_t n = p.n_clients, k = p.degree;
  s->identities = bbi_mem_alloc(alloc, n * 32);
  s->peers = bbi_mem_calloc(alloc, n, sizeof *s->peers);
  s->nbr = bbi_mem_calloc(alloc, n * k, sizeof *s->nbr);
  s->sealed = bbi_mem_calloc(alloc, n * k, SA_CIPHER_BYTES);
  s->held = bbi_mem_calloc(alloc, n * k, SA_SHARE_BYTES);
  s->held_kind = bbi_mem_calloc(alloc, n * k, 1);
  s->sum = bbi_mem_calloc(alloc, p.vector_len, sizeof *s->sum);
  s->out_pending = bbi_mem_calloc(alloc, n, 1);
  if (!s->identities || !s->peers || !s->nbr || !s->sealed || !s->held || !s->held_kind || !s->sum ||
      !s->out_pending) {
    bb_secagg_server_free(s);
    return bb_error_set(err, BB_ERR_NOMEM, "secagg server: out of memory for %zu clients of degree %zu", n, k);
  }
  memcpy(s->identities, identity_keys, n * 32);
  rc = bbi_random_fill(&s->random, s->round, sizeof s->round, err);
  if (rc) {
    bb_secagg_server_free(s);
    return rc;
  }
  sa_setup_hash(s->round, &s->p, s->identities, s->setup_hash);
  if (sa_graph_init(&s->graph, s->setup_hash, p.n_clients, p.degree, alloc)) {
    bb_secagg_server_free(s);
    return bb_error_set(err, BB_ERR_NOMEM, "secagg server: out of memory for the masking graph");
  }
  for (uint32_t i = 0; i < p.n_clients; i++) {
    sa_graph_neighbours(&s->graph, i, s->nbr + (size_t)i * k);
    s->peers[i].live = true;
  }
  *out = s;
  return 0;
}

static void wipe_free(bb_secagg_server *s, void *p, size_t len) {
  if (!p) return;
  sodium_memzero(p, len);
  bbi_mem_free(s->alloc, p);
}

void bb_secagg_server_free(bb_secagg_server *s) {
  if (!s) return;
  const size_t n = s->p.n_clients, k = s->p.degree;
  wipe_free(s, s->held, n * k * SA_SHARE_BYTES);
  wipe_free(s, s->sum, s->p.vector_len * sizeof *s->sum);
  bbi_mem_free(s->alloc, s->held_kind);
  bbi_mem_free(s->alloc, s->identities);
  bbi_mem_free(s->alloc, s->peers);
  bbi_mem_free(s->alloc, s->nbr);
  bbi_mem_free(s->alloc, s->sealed);
  bbi_mem_free(s->alloc, s->out_pending);
  bb_buffer_free(s->alloc, s->out.buf);
  sa_graph_free(&s->graph, s->alloc);
  bbi_mem_free(s->alloc, s);
}

/* ---- stages ---------------------------------------------------------------------------- */

/* Every live client gets a message of this type (built when the caller asks). */
static void queue_all_live(bb_secagg_server *s, uint8_t type) {
  s->out_type = type;
  s->out_next = 0;
  s->waiting = 0;
  for (uint32_t i = 0; i < s->p.n_clients; i++) {
    s->out_pending[i] = s->peers[i].live;
    s->peers[i].answered = false;
    s->waiting += s->peers[i].live;
  }
}

static void enter(bb_secagg_server *s, bb_secagg_stage stage, uint8_t message, uint64_t now_ns) {
  s->stage = stage;
  s->expiry = now_ns > UINT64_MAX - s->timeout_ns ? UINT64_MAX : now_ns + s->timeout_ns;
  queue_all_live(s, message);
}

static int abort_round(bb_secagg_server *s, bb_secagg_reason why, bb_error *err, const char *fmt, ...)
    BB_PRINTF(4, 5);

/* Ends the round without a sum: the sum and every share are wiped, the live clients told. */
static int abort_round(bb_secagg_server *s, bb_secagg_reason why, bb_error *err, const char *fmt, ...) {
  char detail[BB_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  const bb_secagg_stage at = s->stage;
  sodium_memzero(s->sum, (size_t)s->p.vector_len * sizeof *s->sum);
  sodium_memzero(s->held, (size_t)s->p.n_clients * s->p.degree * SA_SHARE_BYTES);
  s->abort_reason = why;
  s->stage = BB_SECAGG_ABORTED;
  s->expiry = UINT64_MAX;
  queue_all_live(s, SA_ABORT);
  s->waiting = 0;
  return sa_fail(err, NULL, why, "secagg server: the round aborted in stage %s: %s", bb_secagg_stage_name(at),
                 detail);
}

static uint32_t live_count(const bb_secagg_server *s) {
  uint32_t c = 0;
  for (uint32_t i = 0; i < s->p.n_clients; i++) c += s->peers[i].live;
  return c;
}

static uint32_t live_neighbours(const bb_secagg_server *s, uint32_t i) {
  uint32_t c = 0;
  const uint32_t *nb = nbrs(s, i);
  for (uint32_t r = 0; r < s->p.degree; r++) c += s->peers[nb[r]].live;
  return c;
}

/* Neighbours whose masked vectors are in the sum: the holders who can still answer. */
static uint32_t summed_neighbours(const bb_secagg_server *s, uint32_t i) {
  uint32_t c = 0;
  const uint32_t *nb = nbrs(s, i);
  for (uint32_t r = 0; r < s->p.degree; r++) c += s->peers[nb[r]].masked;
  return c;
}

/* Whether owner i's shares are needed, and which kind: a summed client's self-mask seed, a
 * dropped client's mask key when summed neighbours masked with it. */
static uint8_t needed_kind(const bb_secagg_server *s, uint32_t i) {
  const sa_peer *q = &s->peers[i];
  if (q->masked) return SA_KIND_SELF_MASK;
  return q->shared && summed_neighbours(s, i) > 0 ? SA_KIND_MASK_KEY : 0;
}

/* Drops the clients that did not answer, then, until nothing changes, every client with
 * fewer live neighbours than the threshold: nobody could recover its secrets. */
static void drop_silent_and_isolated(bb_secagg_server *s) {
  for (uint32_t i = 0; i < s->p.n_clients; i++)
    if (!s->peers[i].answered) s->peers[i].live = false;
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t i = 0; i < s->p.n_clients; i++)
      if (s->peers[i].live && live_neighbours(s, i) < s->p.threshold) {
        s->peers[i].live = false;
        changed = true;
      }
  }
}


/* A client whose message broke the rules is out of the round from now on. */
static void expel(bb_secagg_server *s, uint32_t i) {
  if (!s->peers[i].live) return;
  s->peers[i].live = false;
  if (!s->peers[i].answered && s->waiting) s->waiting--;
  s->out_pending[i] = 0;
}

static int close_unmask(bb_secagg_server *s, uint64_t now_ns, bb_error *err);
static bool every_secret_recoverable(const bb_secagg_server *s);

/* A stage ends early once nobody is left to wait for; unmasking as soon as every secret
 * the sum needs has a threshold of shares. */
static bool stage_ready(const bb_secagg_server *s) {
  if (s->waiting == 0) return true;
  return s->stage == BB_SECAGG_UNMASK && every_secret_recoverable(s);
}

/* The end of a stage every client that stays must answer: the silent and the isolated
 * drop, and the round aborts if fewer than min_clients are left; *count gets how many. */
static int keep_answering(bb_secagg_server *s, const char *what, uint32_t *count, bb_error *err) {
  drop_silent_and_isolated(s);
  *count = live_count(s);
  if (*count < s->p.min_clients)
    return abort_round(s, BB_SECAGG_TOO_FEW_CLIENTS, err, "%u clients %s, min_clients is %u", *count, what,
                       s->p.min_clients);
  return 0;
}

static int close_stage(bb_secagg_server *s, uint64_t now_ns, bb_error *err) {
  switch (s->stage) {
  case BB_SECAGG_ADVERTISE_KEYS: {
    int rc = keep_answering(s, "sent their keys", &s->stats.advertised, err);
    if (rc) return rc;
    for (uint32_t i = 0; i < s->p.n_clients; i++) s->peers[i].keyed = s->peers[i].live;
    enter(s, BB_SECAGG_SHARE_KEYS, SA_KEYS, now_ns);
    return 0;
  }
  case BB_SECAGG_SHARE_KEYS: {
    int rc = keep_answering(s, "shared their secrets", &s->stats.shared, err);
    if (rc) return rc;
    for (uint32_t i = 0; i < s->p.n_clients; i++) s->peers[i].shared = s->peers[i].live;
    enter(s, BB_SECAGG_MASKED_INPUT, SA_CIPHERTEXTS, now_ns);
    return 0;
  }
  case BB_SECAGG_MASKED_INPUT: {
    for (uint32_t i = 0; i < s->p.n_clients; i++) {
      s->peers[i].masked = s->peers[i].live && s->peers[i].answered;
      s->peers[i].live = s->peers[i].masked;
    }
    const uint32_t masked = live_count(s);
    s->stats.masked = masked;
    if (masked < s->p.min_clients)
      return abort_round(s, BB_SECAGG_TOO_FEW_CLIENTS, err, "%u masked vectors arrived, min_clients is %u", masked,
                         s->p.min_clients);
    /* every secret the sum needs must have a threshold of holders still live: the
     * self-mask seed of each summed client, the mask key of each client that shared and
     * dropped, whose masks summed neighbours added */
    for (uint32_t i = 0; i < s->p.n_clients; i++) {
      const uint8_t kind = needed_kind(s, i);
      const uint32_t holders = summed_neighbours(s, i);
      if (kind && holders < s->p.threshold)
        return abort_round(s, BB_SECAGG_BELOW_THRESHOLD, err,
                           "client %u's %s is held by %u summed neighbours, the threshold is %u", i,
                           kind == SA_KIND_SELF_MASK ? "self-mask seed" : "mask key", holders, s->p.threshold);
    }
    enter(s, BB_SECAGG_UNMASK, SA_UNMASK_REQUEST, now_ns);
    return 0;
  }
  case BB_SECAGG_UNMASK: return close_unmask(s, now_ns, err);
  default: return 0;
  }
}

int bb_secagg_server_start(bb_secagg_server *s, uint64_t now_ns, bb_error *err) {
  if (!s) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg server: NULL");
  if (s->stage != BB_SECAGG_SETUP)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg server: started already (stage %s)",
                        bb_secagg_stage_name(s->stage));
  enter(s, BB_SECAGG_ADVERTISE_KEYS, SA_SETUP, now_ns);
  return 0;
}

/* ---- unmasking --------------------------------------------------------------------------- */

static uint32_t shares_held(const bb_secagg_server *s, uint32_t owner) {
  uint32_t c = 0;
  for (uint32_t r = 0; r < s->p.degree; r++) c += s->held_kind[(size_t)owner * s->p.degree + r] != 0;
  return c;
}

static bool every_secret_recoverable(const bb_secagg_server *s) {
  for (uint32_t i = 0; i < s->p.n_clients; i++)
    if (needed_kind(s, i) && shares_held(s, i) < s->p.threshold) return false;
  return true;
}

/* Reconstructs owner's secret from the first threshold shares held. */
static int reconstruct(bb_secagg_server *s, uint32_t owner, uint8_t secret[32], bb_error *err) {
  uint8_t picked[BB_SECAGG_MAX_DEGREE * SA_SHARE_BYTES];
  uint32_t n = 0;
  for (uint32_t r = 0; r < s->p.degree && n < s->p.threshold; r++) {
    const size_t slot = (size_t)owner * s->p.degree + r;
    if (s->held_kind[slot]) memcpy(picked + (size_t)n++ * SA_SHARE_BYTES, s->held + slot * SA_SHARE_BYTES, SA_SHARE_BYTES);
  }
  int rc = bb_shamir_combine(picked, n, SA_SHARE_BYTES, secret, err);
  sodium_memzero(picked, sizeof picked);
  return rc;
}

static int close_unmask(bb_secagg_server *s, uint64_t now_ns, bb_error *err) {
  (void)now_ns;
  for (uint32_t i = 0; i < s->p.n_clients; i++) {
    const uint8_t kind = needed_kind(s, i);
    if (kind && shares_held(s, i) < s->p.threshold)
      return abort_round(s, BB_SECAGG_BELOW_THRESHOLD, err, "%u shares of client %u's %s arrived, the threshold is %u",
                         shares_held(s, i), i, kind == SA_KIND_SELF_MASK ? "self-mask seed" : "mask key",
                         s->p.threshold);
  }
  uint8_t secret[32], check[32], key[32];
  int rc = 0;
  for (uint32_t i = 0; i < s->p.n_clients && !rc; i++) {
    const uint8_t kind = needed_kind(s, i);
    if (!kind) continue;
    rc = reconstruct(s, i, secret, err);
    if (rc) break;
    if (kind == SA_KIND_SELF_MASK) {
      sa_commit(secret, check);
      if (sodium_memcmp(check, s->peers[i].commit, 32) != 0) {
        rc = abort_round(s, BB_SECAGG_BAD_SHARES, err, "client %u's self-mask shares do not open its commitment", i);
        break;
      }
      sa_self_mask_key(secret, key);
      sa_mask_apply(s->sum, s->p.vector_len, s->p.modulus_bits, key, true);
      continue;
    }
    crypto_scalarmult_curve25519_base(check, secret);
    if (sodium_memcmp(check, s->peers[i].s_pk, 32) != 0) {
      rc = abort_round(s, BB_SECAGG_BAD_SHARES, err, "client %u's mask-key shares do not give its public key", i);
      break;
    }
    /* each summed neighbour j added +mask when j < i, -mask when j > i: take it back out */
    const uint32_t *nb = nbrs(s, i);
    for (uint32_t r = 0; r < s->p.degree; r++) {
      const uint32_t j = nb[r];
      if (!s->peers[j].masked) continue;
      if (!sa_pair_key(secret, s->peers[j].s_pk, s->setup_hash, i, j, SA_KDF_MASK, key)) {
        rc = abort_round(s, BB_SECAGG_BAD_SHARES, err, "client %u's key is of low order", j);
        break;
      }
      sa_mask_apply(s->sum, s->p.vector_len, s->p.modulus_bits, key, j < i);
    }
    s->stats.recovered++;
  }
  sodium_memzero(secret, sizeof secret);
  sodium_memzero(key, sizeof key);
  sodium_memzero(s->held, (size_t)s->p.n_clients * s->p.degree * SA_SHARE_BYTES);
  if (rc) return rc;
  s->stage = BB_SECAGG_DONE;
  s->expiry = UINT64_MAX;
  s->waiting = 0;
  return 0;
}

/* ---- messages in ------------------------------------------------------------------------- */

static int take_advertise(bb_secagg_server *s, uint32_t i, const sa_msg *m, bb_secagg_reason *why, bb_error *err) {
  const uint8_t *c_pk = m->u.advertise.c_pk, *s_pk = m->u.advertise.s_pk;
  if (sodium_memcmp(c_pk, s_pk, 32) == 0) return sa_fail(err, why, BB_SECAGG_BAD_KEY, "its two public keys are one");
  if (!sa_signature_ok(s->identities + (size_t)i * 32, s->setup_hash, i, c_pk, s_pk, m->u.advertise.sig))
    return sa_fail(err, why, BB_SECAGG_BAD_SIGNATURE, "its keys are not signed by its identity key");
  sa_peer *q = peer(s, i);
  memcpy(q->c_pk, c_pk, 32);
  memcpy(q->s_pk, s_pk, 32);
  memcpy(q->sig, m->u.advertise.sig, 64);
  return 0;
}

static int take_shares(bb_secagg_server *s, uint32_t i, const sa_msg *m, bb_secagg_reason *why, bb_error *err) {
  /* exactly one sealed share pair for each neighbour whose keys it was sent */
  const uint32_t *nb = nbrs(s, i);
  uint32_t at = 0;
  for (uint32_t r = 0; r < s->p.degree; r++) {
    if (!s->peers[nb[r]].keyed) continue;
    if (at >= m->u.shares.count || bb_le_get_u32(m->u.shares.entries + (size_t)at * SA_CIPHER_ENTRY_BYTES) != nb[r])
      return sa_fail(err, why, BB_SECAGG_NOT_NEIGHBOUR, "entry %u is not for neighbour %u, whose keys it was sent", at,
                     nb[r]);
    at++;
  }
  if (at != m->u.shares.count)
    return sa_fail(err, why, BB_SECAGG_NOT_NEIGHBOUR, "%u entries for the %u neighbours whose keys it was sent",
                   m->u.shares.count, at);
  at = 0;
  for (uint32_t r = 0; r < s->p.degree; r++) {
    if (!s->peers[nb[r]].keyed) continue;
    memcpy(s->sealed + ((size_t)i * s->p.degree + r) * SA_CIPHER_BYTES,
           m->u.shares.entries + (size_t)at++ * SA_CIPHER_ENTRY_BYTES + 4, SA_CIPHER_BYTES);
  }
  memcpy(peer(s, i)->commit, m->u.shares.commit, 32);
  return 0;
}

static int take_masked(bb_secagg_server *s, const sa_msg *m, bb_secagg_reason *why, bb_error *err) {
  if (m->u.masked.len != s->p.vector_len)
    return sa_fail(err, why, BB_SECAGG_BAD_LENGTH, "a vector of %u elements, the round's are %u", m->u.masked.len,
                   s->p.vector_len);
  const uint32_t width = sa_width(s->p.modulus_bits);
  const uint64_t mask = sa_ring_mask(s->p.modulus_bits);
  for (uint32_t e = 0; e < s->p.vector_len; e++)
    s->sum[e] = (s->sum[e] + sa_get_element(m->u.masked.data + (size_t)e * width, width)) & mask;
  return 0;
}

/* What the unmask request to client i asked for owner j: its kind, or 0. */
static uint8_t asked_kind(const bb_secagg_server *s, uint32_t i, uint32_t j) {
  if (!sa_graph_adjacent(&s->graph, i, j) || !s->peers[j].shared) return 0;
  return s->peers[j].masked ? SA_KIND_SELF_MASK : SA_KIND_MASK_KEY;
}

static int take_unmask(bb_secagg_server *s, uint32_t i, const sa_msg *m, bb_secagg_reason *why, bb_error *err) {
  const uint32_t *nb = nbrs(s, i);
  uint32_t at = 0;
  for (uint32_t r = 0; r < s->p.degree; r++) {
    const uint8_t kind = asked_kind(s, i, nb[r]);
    if (!kind) continue;
    if (at >= m->u.list.count || bb_le_get_u32(m->u.list.entries + (size_t)at * SA_UNMASK_ENTRY_BYTES) != nb[r])
      return sa_fail(err, why, BB_SECAGG_NOT_NEIGHBOUR, "entry %u is not for client %u, whose share it was asked for",
                     at, nb[r]);
    const uint8_t *e = m->u.list.entries + (size_t)at * SA_UNMASK_ENTRY_BYTES;
    if (e[4] != kind) return sa_fail(err, why, BB_SECAGG_BAD_VALUE, "client %u's share is of kind %u, not %u", nb[r], e[4], kind);
    if (e[4 + 1 + 32] != sa_share_x(nbrs(s, nb[r]), s->p.degree, i))
      return sa_fail(err, why, BB_SECAGG_BAD_VALUE, "client %u's share has x coordinate %u, not %u", nb[r], e[37],
                     sa_share_x(nbrs(s, nb[r]), s->p.degree, i));
    at++;
  }
  if (at != m->u.list.count)
    return sa_fail(err, why, BB_SECAGG_NOT_NEIGHBOUR, "%u entries for the %u shares it was asked for", m->u.list.count, at);
  for (uint32_t k = 0; k < m->u.list.count; k++) {
    const uint8_t *e = m->u.list.entries + (size_t)k * SA_UNMASK_ENTRY_BYTES;
    const uint32_t owner = bb_le_get_u32(e);
    const size_t slot = (size_t)owner * s->p.degree + (e[37] - 1u);
    memcpy(s->held + slot * SA_SHARE_BYTES, e + 5, SA_SHARE_BYTES);
    s->held_kind[slot] = e[4];
  }
  return 0;
}

static uint8_t expected_type(bb_secagg_stage stage) {
  switch (stage) {
  case BB_SECAGG_ADVERTISE_KEYS: return SA_ADVERTISE;
  case BB_SECAGG_SHARE_KEYS: return SA_SHARES;
  case BB_SECAGG_MASKED_INPUT: return SA_MASKED;
  case BB_SECAGG_UNMASK: return SA_UNMASK;
  default: return 0;
  }
}

/* Checks and takes one message; a refusal returns its code with *keep saying whether the
 * client may stay in the round. */
static int take(bb_secagg_server *s, uint32_t client, const uint8_t *data, size_t len, bool *keep, sa_msg *m,
                bb_error *err) {
  bb_secagg_reason why;
  sa_peer *q = peer(s, client);
  const bool stage_open = expected_type(s->stage) != 0;
  /* bytes that are not a message cost a live client its place, and nothing else */
  *keep = !stage_open || !q->live || q->answered;
  int rc = sa_decode(data, len, &s->caps, s->p.modulus_bits, m, &why, err);
  if (rc) return rc;
  *keep = true;
  if (memcmp(m->round, s->round, SA_ROUND_BYTES) != 0)
    return sa_fail(err, &why, BB_SECAGG_OTHER_ROUND, "a message of another round");
  if (!stage_open)
    return sa_fail(err, &why, BB_SECAGG_WRONG_STAGE, "the round is past taking messages (stage %s)",
                   bb_secagg_stage_name(s->stage));
  if (m->type != expected_type(s->stage) || !q->live || q->answered)
    return sa_fail(err, &why, BB_SECAGG_WRONG_STAGE, "stage %s, the client %s", bb_secagg_stage_name(s->stage),
                   !q->live ? "is out of the round" : q->answered ? "answered already" : "owes another message");
  *keep = false;
  if (m->index != client) return sa_fail(err, &why, BB_SECAGG_WRONG_SENDER, "it says it is client %u", m->index);
  switch (m->type) {
  case SA_ADVERTISE: return take_advertise(s, client, m, &why, err);
  case SA_SHARES: return take_shares(s, client, m, &why, err);
  case SA_MASKED: return take_masked(s, m, &why, err);
  default: return take_unmask(s, client, m, &why, err);
  }
}

int bb_secagg_server_receive(bb_secagg_server *s, uint32_t client, const uint8_t *data, size_t len, uint64_t now_ns,
                             bb_error *err) {
  if (!s) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg server: NULL");
  if (client >= s->p.n_clients)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg server: client %u of %u", client, s->p.n_clients);
  s->stats.messages_received++;
  s->stats.bytes_received += len;
  sa_msg m;
  bool keep;
  int rc = take(s, client, data, len, &keep, &m, err);
  if (rc) {
    s->stats.refused++;
    if (err)
      bb_error_prefix(err, "secagg server: client %u's %s message refused%s: ", client,
                      m.type ? sa_type_name(m.type) : "", keep ? "" : " (it leaves the round)");
    if (keep) return rc;
    expel(s, client);
    /* the stage may have waited for this client alone: its end (or abort) shows in the stage */
    if (stage_ready(s)) close_stage(s, now_ns, NULL);
    return rc;
  }
  s->peers[client].answered = true;
  s->waiting--;
  if (m.type == SA_UNMASK) s->stats.unmasked++;
  return stage_ready(s) ? close_stage(s, now_ns, err) : 0;
}

uint64_t bb_secagg_server_expiry(const bb_secagg_server *s) { return s ? s->expiry : UINT64_MAX; }

int bb_secagg_server_handle_expiry(bb_secagg_server *s, uint64_t now_ns, bb_error *err) {
  if (!s) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg server: NULL");
  if (now_ns < s->expiry || !expected_type(s->stage)) return 0;
  return close_stage(s, now_ns, err);
}

/* ---- messages out ------------------------------------------------------------------------ */

static void build_setup(bb_secagg_server *s, uint32_t i) {
  sa_put_header(&s->out, SA_SETUP, s->round, i);
  sa_put_params(&s->out, &s->p);
  bb_le_write(&s->out, s->identities, (size_t)s->p.n_clients * 32);
}

static void build_keys(bb_secagg_server *s, uint32_t i) {
  sa_put_header(&s->out, SA_KEYS, s->round, i);
  const uint32_t *nb = nbrs(s, i);
  uint32_t count = 0;
  for (uint32_t r = 0; r < s->p.degree; r++) count += s->peers[nb[r]].keyed;
  bb_le_write_u32(&s->out, count);
  for (uint32_t r = 0; r < s->p.degree; r++) {
    const sa_peer *q = &s->peers[nb[r]];
    if (!q->keyed) continue;
    bb_le_write_u32(&s->out, nb[r]);
    bb_le_write(&s->out, q->c_pk, 32);
    bb_le_write(&s->out, q->s_pk, 32);
    bb_le_write(&s->out, q->sig, 64);
  }
}

/* The sealed shares i's neighbours that shared addressed to i. */
static void build_ciphertexts(bb_secagg_server *s, uint32_t i) {
  sa_put_header(&s->out, SA_CIPHERTEXTS, s->round, i);
  const uint32_t *nb = nbrs(s, i);
  uint32_t count = 0;
  for (uint32_t r = 0; r < s->p.degree; r++) count += s->peers[nb[r]].shared;
  bb_le_write_u32(&s->out, count);
  for (uint32_t r = 0; r < s->p.degree; r++) {
    const uint32_t j = nb[r];
    if (!s->peers[j].shared) continue;
    const uint8_t x = sa_share_x(nbrs(s, j), s->p.degree, i);
    bb_le_write_u32(&s->out, j);
    bb_le_write(&s->out, s->sealed + ((size_t)j * s->p.degree + (x - 1u)) * SA_CIPHER_BYTES, SA_CIPHER_BYTES);
  }
}

static void build_unmask_request(bb_secagg_server *s, uint32_t i) {
  sa_put_header(&s->out, SA_UNMASK_REQUEST, s->round, i);
  const uint32_t *nb = nbrs(s, i);
  for (uint8_t kind = SA_KIND_SELF_MASK; kind <= SA_KIND_MASK_KEY; kind++) {
    uint32_t count = 0;
    for (uint32_t r = 0; r < s->p.degree; r++) count += asked_kind(s, i, nb[r]) == kind;
    bb_le_write_u32(&s->out, count);
    for (uint32_t r = 0; r < s->p.degree; r++)
      if (asked_kind(s, i, nb[r]) == kind) bb_le_write_u32(&s->out, nb[r]);
  }
}

int bb_secagg_server_next_message(bb_secagg_server *s, uint32_t *client, const uint8_t **data, size_t *len) {
  if (!s) return 0;
  while (s->out_next < s->p.n_clients && !s->out_pending[s->out_next]) s->out_next++;
  if (s->out_next >= s->p.n_clients) return 0;
  const uint32_t i = s->out_next++;
  s->out_pending[i] = 0;
  s->out.len = 0;
  s->out.failed = false;
  switch (s->out_type) {
  case SA_SETUP: build_setup(s, i); break;
  case SA_KEYS: build_keys(s, i); break;
  case SA_CIPHERTEXTS: build_ciphertexts(s, i); break;
  case SA_UNMASK_REQUEST: build_unmask_request(s, i); break;
  case SA_ABORT:
    sa_put_header(&s->out, SA_ABORT, s->round, i);
    bb_le_write_u8(&s->out, (uint8_t)s->abort_reason);
    break;
  }
  if (!bb_le_writer_ok(&s->out)) return 0;
  s->stats.messages_sent++;
  s->stats.bytes_sent += s->out.len;
  *client = i;
  *data = s->out.buf;
  *len = s->out.len;
  return 1;
}

/* ---- results ----------------------------------------------------------------------------- */

bb_secagg_stage bb_secagg_server_stage(const bb_secagg_server *s) { return s ? s->stage : BB_SECAGG_ABORTED; }
bb_secagg_reason bb_secagg_server_abort_reason(const bb_secagg_server *s) { return s ? s->abort_reason : BB_SECAGG_OK; }

void bb_secagg_server_params(const bb_secagg_server *s, bb_secagg_params *out) {
  if (s && out) *out = s->p;
}

static int result_ready(const bb_secagg_server *s, size_t len, bb_error *err) {
  if (!s) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg server: NULL");
  if (s->stage == BB_SECAGG_ABORTED)
    return bb_error_set(err, BB_ERR_LIMIT, "secagg server: the round aborted (%s): it has no sum",
                        bb_secagg_reason_name(s->abort_reason));
  if (s->stage != BB_SECAGG_DONE)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg server: no sum yet (stage %s)",
                        bb_secagg_stage_name(s->stage));
  if (len != s->p.vector_len)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg server: room for %zu elements, the sum has %u", len,
                        s->p.vector_len);
  return 0;
}

int bb_secagg_server_result(const bb_secagg_server *s, float *out, size_t len, uint32_t *n_summed, bb_error *err) {
  int rc = result_ready(s, len, err);
  if (rc) return rc;
  sa_dequantize(s->sum, s->p.vector_len, &s->p, s->stats.masked, out);
  if (n_summed) *n_summed = s->stats.masked;
  return 0;
}

int bb_secagg_server_result_ring(const bb_secagg_server *s, uint64_t *out, size_t len, bb_error *err) {
  int rc = result_ready(s, len, err);
  if (rc) return rc;
  memcpy(out, s->sum, len * sizeof *out);
  return 0;
}

bool bb_secagg_server_summed(const bb_secagg_server *s, uint32_t client) {
  return s && s->stage == BB_SECAGG_DONE && client < s->p.n_clients && s->peers[client].masked;
}

void bb_secagg_server_get_stats(const bb_secagg_server *s, bb_secagg_server_stats *out) {
  if (s && out) *out = s->stats;
}
