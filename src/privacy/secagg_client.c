/* The SecAgg+ client as a sans-IO state machine. It checks everything the server sends
 * against what it can know itself: its place in the setup, its neighbours in the masking
 * graph (computed here from the setup hash), each neighbour's keys against that
 * neighbour's identity, and, before it reveals anything at unmasking, that it is never
 * asked for both kinds of share of one client. Anything an honest server never sends
 * aborts the round and wipes the client's secrets; bytes that are not a message change
 * nothing, so a garbled copy cannot stop an honest round. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <sodium/crypto_sign_ed25519.h>
#include <sodium/utils.h>

#include "bb/bytes.h"
#include "bb/privacy.h"
#include "privacy/random.h"
#include "privacy/secagg_codec.h"
#include "privacy/secagg_crypto.h"
#include "privacy/secagg_graph.h"
#include "privacy/secagg_params.h"
#include "privacy/secagg_quant.h"
#include "privacy/secagg_reason.h"
#include "util/mem.h"

#define DEFAULT_TIMEOUT_NS (300ull * 1000000000ull)

/* What the client knows of one graph neighbour, by its place among the neighbours. */
typedef struct sa_neighbour {
  uint32_t index;
  bool keyed;  /* its keys arrived and were checked */
  bool holds;  /* its shares arrived: it is in the round's sharing set, and we mask with it */
  uint8_t c_pk[32], s_pk[32];
  uint8_t transport_key[32], mask_key[32]; /* what this client and it share, derived once */
  uint8_t self_share[SA_SHARE_BYTES], key_share[SA_SHARE_BYTES]; /* its secrets' shares held here */
} sa_neighbour;

struct bb_secagg_client {
  const bb_allocator *alloc;
  uint8_t *identity_sk; /* 64, or NULL when the host signs */
  uint8_t identity_pk[32];
  uint32_t min_clients, min_threshold;
  uint64_t timeout_ns;
  bb_secagg_caps caps;
  bb_random_source random;

  bb_secagg_stage stage;
  bb_secagg_reason abort_reason;
  uint64_t expiry;
  bool have_round, awaiting_signature;
  bool got_shares; /* the neighbours' shares arrived: masking waits only for the input */
  uint8_t round[SA_ROUND_BYTES], setup_hash[32];
  uint32_t index;
  bb_secagg_params p;
  uint8_t *identities; /* n × 32 */
  sa_graph graph;      /* the round's masking graph */
  sa_neighbour *nb;    /* degree, ascending by index */
  uint8_t c_sk[32], c_pk[32], s_sk[32], s_pk[32];
  uint8_t self_key[32]; /* the key the self-mask expands from, kept until masking */
  uint8_t sign_payload[SA_SIGN_PAYLOAD_BYTES];

  /* the input: floats to quantise, or ring elements */
  float *input_f;
  uint64_t *input_q;
  size_t input_len;
  uint64_t clipped;

  bb_le_writer out;
  bool out_ready;
};

/* ---- creation and wiping --------------------------------------------------------------- */

int bb_secagg_client_new(const bb_secagg_client_config *config, const bb_allocator *alloc, bb_secagg_client **out,
                         bb_error *err) {
  if (!out) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg client: no out pointer");
  *out = NULL;
  if (!alloc) alloc = bb_default_allocator();
  bb_secagg_client_config c;
  memset(&c, 0, sizeof c);
  if (!config || config->struct_size < sizeof config->struct_size || config->struct_size > sizeof c)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg client: config struct_size %zu (this library knows %zu)",
                        config ? config->struct_size : 0, sizeof c);
  memcpy(&c, config, config->struct_size);
  if (!c.identity_secret_key && !c.identity_public_key)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "secagg client: an identity is required (its secret key, or its public key when the host signs)");
  if (c.identity_secret_key && c.identity_public_key && memcmp(c.identity_secret_key + 32, c.identity_public_key, 32))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg client: the public key is not the secret key's");
  bb_secagg_client *cl = bbi_mem_calloc(alloc, 1, sizeof *cl);
  if (!cl) return bb_error_set(err, BB_ERR_NOMEM, "secagg client: out of memory");
  cl->alloc = alloc;
  if (c.identity_secret_key) {
    cl->identity_sk = bbi_mem_alloc(alloc, BB_SECAGG_SECRET_KEY_BYTES);
    if (!cl->identity_sk) {
      bbi_mem_free(alloc, cl);
      return bb_error_set(err, BB_ERR_NOMEM, "secagg client: out of memory");
    }
    memcpy(cl->identity_sk, c.identity_secret_key, BB_SECAGG_SECRET_KEY_BYTES);
    memcpy(cl->identity_pk, c.identity_secret_key + 32, 32);
  } else {
    memcpy(cl->identity_pk, c.identity_public_key, 32);
  }
  cl->min_clients = c.min_clients ? c.min_clients : 2;
  cl->min_threshold = c.min_threshold ? c.min_threshold : 2;
  cl->timeout_ns = c.timeout_ns ? c.timeout_ns : DEFAULT_TIMEOUT_NS;
  cl->caps = sa_caps_resolve(&c.caps);
  cl->random = c.random;
  cl->expiry = UINT64_MAX;
  cl->out = bb_le_writer_growing(alloc);
  *out = cl;
  return 0;
}

/* Wipes and frees the input; its length stays, so the client knows it had one. */
static void drop_input(bb_secagg_client *cl) {
  if (cl->input_f) sodium_memzero(cl->input_f, cl->input_len * sizeof *cl->input_f);
  if (cl->input_q) sodium_memzero(cl->input_q, cl->input_len * sizeof *cl->input_q);
  bbi_mem_free(cl->alloc, cl->input_f);
  bbi_mem_free(cl->alloc, cl->input_q);
  cl->input_f = NULL;
  cl->input_q = NULL;
}

/* Forgets every secret of the round: keys, shares held, the input. */
static void wipe(bb_secagg_client *cl) {
  sodium_memzero(cl->c_sk, sizeof cl->c_sk);
  sodium_memzero(cl->s_sk, sizeof cl->s_sk);
  sodium_memzero(cl->self_key, sizeof cl->self_key);
  if (cl->nb) sodium_memzero(cl->nb, (size_t)cl->p.degree * sizeof *cl->nb);
  drop_input(cl);
}

void bb_secagg_client_free(bb_secagg_client *cl) {
  if (!cl) return;
  wipe(cl);
  if (cl->identity_sk) sodium_memzero(cl->identity_sk, BB_SECAGG_SECRET_KEY_BYTES);
  bbi_mem_free(cl->alloc, cl->identity_sk);
  bbi_mem_free(cl->alloc, cl->identities);
  sa_graph_free(&cl->graph, cl->alloc);
  bbi_mem_free(cl->alloc, cl->nb);
  if (cl->out.buf) sodium_memzero(cl->out.buf, cl->out.cap);
  bb_buffer_free(cl->alloc, cl->out.buf);
  bbi_mem_free(cl->alloc, cl);
}

static int abort_round(bb_secagg_client *cl, int rc, bb_secagg_reason why) {
  wipe(cl);
  cl->stage = BB_SECAGG_ABORTED;
  cl->abort_reason = why;
  cl->expiry = UINT64_MAX;
  cl->out_ready = false;
  cl->awaiting_signature = false;
  return rc;
}

/* ---- input ------------------------------------------------------------------------------- */

static int check_input_len(const bb_secagg_client *cl, size_t len, bb_error *err) {
  if (cl->stage != BB_SECAGG_SETUP && cl->stage != BB_SECAGG_ADVERTISE_KEYS && cl->stage != BB_SECAGG_SHARE_KEYS &&
      cl->stage != BB_SECAGG_MASKED_INPUT)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg client: its input was masked already (stage %s)",
                        bb_secagg_stage_name(cl->stage));
  if (len < 1 || len > cl->caps.max_vector_len)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg client: an input of %zu elements (1..%u)", len,
                        cl->caps.max_vector_len);
  if (cl->have_round && len != cl->p.vector_len)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg client: an input of %zu elements, the round's are %u", len,
                        cl->p.vector_len);
  return 0;
}

static int mask_and_send(bb_secagg_client *cl, bb_error *err);

/* The masked-input stage may have waited for the input. */
static int input_given(bb_secagg_client *cl, bb_error *err) {
  return cl->stage == BB_SECAGG_MASKED_INPUT && cl->got_shares ? mask_and_send(cl, err) : 0;
}

/* Keeps a copy of the input, wiping the one it replaces, and masks it at once if the
 * masked-input stage waited for it. */
static int keep_input(bb_secagg_client *cl, const void *data, size_t len, bool ring, bb_error *err) {
  const size_t bytes = len * (ring ? sizeof *cl->input_q : sizeof *cl->input_f);
  void *copy = bbi_mem_alloc(cl->alloc, bytes);
  if (!copy) return bb_error_set(err, BB_ERR_NOMEM, "secagg client: out of memory for the input");
  memcpy(copy, data, bytes);
  drop_input(cl);
  if (ring) cl->input_q = copy;
  else cl->input_f = copy;
  cl->input_len = len;
  return input_given(cl, err);
}

int bb_secagg_client_set_input(bb_secagg_client *cl, const float *x, size_t len, bb_error *err) {
  if (!cl || (!x && len)) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg client: NULL");
  int rc = check_input_len(cl, len, err);
  if (rc) return rc;
  for (size_t e = 0; e < len; e++)
    if (!isfinite(x[e])) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg client: input element %zu is not finite", e);
  return keep_input(cl, x, len, false, err);
}

int bb_secagg_client_set_input_ring(bb_secagg_client *cl, const uint64_t *q, size_t len, bb_error *err) {
  if (!cl || (!q && len)) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg client: NULL");
  int rc = check_input_len(cl, len, err);
  return rc ? rc : keep_input(cl, q, len, true, err);
}

bool bb_secagg_client_wants_input(const bb_secagg_client *cl) {
  return cl && cl->stage == BB_SECAGG_MASKED_INPUT && cl->got_shares && !cl->input_len;
}

/* ---- stages ------------------------------------------------------------------------------ */

static void start_message(bb_secagg_client *cl, uint8_t type) {
  cl->out.len = 0;
  cl->out.failed = false;
  sa_put_header(&cl->out, type, cl->round, cl->index);
}

static int finish_message(bb_secagg_client *cl, bb_error *err) {
  if (!bb_le_writer_ok(&cl->out)) return bb_error_set(err, BB_ERR_NOMEM, "secagg client: out of memory for a message");
  cl->out_ready = true;
  return 0;
}

static int send_keys(bb_secagg_client *cl, const uint8_t sig[64], bb_error *err) {
  start_message(cl, SA_ADVERTISE);
  bb_le_write(&cl->out, cl->c_pk, 32);
  bb_le_write(&cl->out, cl->s_pk, 32);
  bb_le_write(&cl->out, sig, 64);
  cl->stage = BB_SECAGG_SHARE_KEYS;
  cl->awaiting_signature = false;
  return finish_message(cl, err);
}

static int take_setup(bb_secagg_client *cl, const sa_msg *m, bb_secagg_reason *why, bb_error *err) {
  const bb_secagg_params *p = &m->u.setup.params;
  int rc = sa_params_check(p, &cl->caps, why, err);
  if (rc) return rc;
  if (p->min_clients < cl->min_clients || p->threshold < cl->min_threshold)
    return sa_fail(err, why, BB_SECAGG_WEAK_PARAMS, "min_clients %u and threshold %u, this client demands %u and %u",
                   p->min_clients, p->threshold, cl->min_clients, cl->min_threshold);
  if (m->index >= p->n_clients || memcmp(m->u.setup.identities + (size_t)m->index * 32, cl->identity_pk, 32) != 0)
    return sa_fail(err, why, BB_SECAGG_NOT_PARTICIPANT, "the setup does not list this client's identity at index %u",
                   m->index);
  if (cl->input_len && cl->input_len != p->vector_len)
    return sa_fail(err, why, BB_SECAGG_BAD_PARAMS, "vectors of %u elements, this client's input has %zu", p->vector_len,
                   cl->input_len);
  cl->p = *p;
  cl->index = m->index;
  memcpy(cl->round, m->round, SA_ROUND_BYTES);
  cl->identities = bbi_mem_alloc(cl->alloc, (size_t)p->n_clients * 32);
  cl->nb = bbi_mem_calloc(cl->alloc, p->degree, sizeof *cl->nb);
  uint32_t *list = bbi_mem_calloc(cl->alloc, p->degree, sizeof *list);
  if (!cl->identities || !cl->nb || !list) {
    bbi_mem_free(cl->alloc, list);
    return bb_error_set(err, BB_ERR_NOMEM, "secagg client: out of memory for a round of %u clients", p->n_clients);
  }
  memcpy(cl->identities, m->u.setup.identities, (size_t)p->n_clients * 32);
  sa_setup_hash(cl->round, p, cl->identities, cl->setup_hash);
  if (sa_graph_init(&cl->graph, cl->setup_hash, p->n_clients, p->degree, cl->alloc)) {
    bbi_mem_free(cl->alloc, list);
    return bb_error_set(err, BB_ERR_NOMEM, "secagg client: out of memory for the masking graph");
  }
  sa_graph_neighbours(&cl->graph, cl->index, list);
  for (uint32_t r = 0; r < p->degree; r++) cl->nb[r].index = list[r];
  bbi_mem_free(cl->alloc, list);
  cl->have_round = true;
  rc = sa_keypair(&cl->random, cl->c_sk, cl->c_pk, err);
  if (!rc) rc = sa_keypair(&cl->random, cl->s_sk, cl->s_pk, err);
  if (rc) return rc;
  sa_sign_payload(cl->setup_hash, cl->index, cl->c_pk, cl->s_pk, cl->sign_payload);
  if (!cl->identity_sk) {
    cl->stage = BB_SECAGG_ADVERTISE_KEYS;
    cl->awaiting_signature = true;
    return 0;
  }
  uint8_t sig[64];
  crypto_sign_ed25519_detached(sig, NULL, cl->sign_payload, sizeof cl->sign_payload, cl->identity_sk);
  return send_keys(cl, sig, err);
}

static sa_neighbour *neighbour(bb_secagg_client *cl, uint32_t index) {
  uint32_t lo = 0, hi = cl->p.degree;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (cl->nb[mid].index < index) lo = mid + 1;
    else hi = mid;
  }
  return lo < cl->p.degree && cl->nb[lo].index == index ? &cl->nb[lo] : NULL;
}

/* The keys of one neighbour: signed by its identity, distinct from every key seen. */
static int check_keys(bb_secagg_client *cl, sa_neighbour *o, const uint8_t *e, bb_secagg_reason *why,
                      bb_error *err) {
  const uint32_t j = bb_le_get_u32(e);
  const uint8_t *c_pk = e + 4, *s_pk = e + 36, *sig = e + 68;
  if (!o)
    return sa_fail(err, why, BB_SECAGG_NOT_NEIGHBOUR, "keys of client %u, which the masking graph does not make a neighbour",
                   j);
  if (!sa_signature_ok(cl->identities + (size_t)j * 32, cl->setup_hash, j, c_pk, s_pk, sig))
    return sa_fail(err, why, BB_SECAGG_BAD_SIGNATURE, "client %u's keys are not signed by its identity key", j);
  const uint8_t *mine[2] = {cl->c_pk, cl->s_pk}, *theirs[2] = {c_pk, s_pk};
  for (int a = 0; a < 2; a++) {
    for (int b = 0; b < 2; b++)
      if (sodium_memcmp(theirs[a], mine[b], 32) == 0)
        return sa_fail(err, why, BB_SECAGG_BAD_KEY, "client %u presents this client's own key", j);
    for (uint32_t r = 0; r < cl->p.degree; r++) {
      const sa_neighbour *other = &cl->nb[r];
      if (!other->keyed) continue;
      if (sodium_memcmp(theirs[a], other->c_pk, 32) == 0 || sodium_memcmp(theirs[a], other->s_pk, 32) == 0)
        return sa_fail(err, why, BB_SECAGG_BAD_KEY, "client %u presents client %u's key", j, other->index);
    }
  }
  if (sodium_memcmp(c_pk, s_pk, 32) == 0)
    return sa_fail(err, why, BB_SECAGG_BAD_KEY, "client %u's two keys are one", j);
  if (!sa_pair_key(cl->c_sk, c_pk, cl->setup_hash, cl->index, j, SA_KDF_TRANSPORT, o->transport_key) ||
      !sa_pair_key(cl->s_sk, s_pk, cl->setup_hash, cl->index, j, SA_KDF_MASK, o->mask_key))
    return sa_fail(err, why, BB_SECAGG_BAD_KEY, "client %u presents a key of low order", j);
  return 0;
}

static int take_keys(bb_secagg_client *cl, const sa_msg *m, bb_secagg_reason *why, bb_error *err) {
  const uint32_t count = m->u.list.count;
  if (count < cl->p.threshold)
    return sa_fail(err, why, BB_SECAGG_TOO_FEW_NEIGHBOURS, "keys of %u neighbours, the threshold is %u", count,
                   cl->p.threshold);
  for (uint32_t k = 0; k < count; k++) {
    const uint8_t *e = m->u.list.entries + (size_t)k * SA_KEY_ENTRY_BYTES;
    sa_neighbour *o = neighbour(cl, bb_le_get_u32(e));
    int rc = check_keys(cl, o, e, why, err);
    if (rc || !o) return rc;
    memcpy(o->c_pk, e + 4, 32);
    memcpy(o->s_pk, e + 36, 32);
    o->keyed = true;
  }
  /* share the mask key and a fresh self-mask seed with every neighbour: x = its place */
  const uint32_t k_deg = cl->p.degree;
  uint8_t seed[32], commit[32];
  uint8_t *key_shares = bbi_mem_alloc(cl->alloc, (size_t)k_deg * SA_SHARE_BYTES);
  uint8_t *self_shares = bbi_mem_alloc(cl->alloc, (size_t)k_deg * SA_SHARE_BYTES);
  int rc = key_shares && self_shares ? 0 : bb_error_set(err, BB_ERR_NOMEM, "secagg client: out of memory for shares");
  if (!rc) rc = bbi_random_fill(&cl->random, seed, sizeof seed, err);
  if (!rc) rc = bb_shamir_split(cl->s_sk, 32, k_deg, cl->p.threshold, NULL, &cl->random, key_shares, err);
  if (!rc) rc = bb_shamir_split(seed, 32, k_deg, cl->p.threshold, NULL, &cl->random, self_shares, err);
  if (!rc) {
    sa_commit(seed, commit);
    sa_self_mask_key(seed, cl->self_key);
    start_message(cl, SA_SHARES);
    bb_le_write(&cl->out, commit, 32);
    bb_le_write_u32(&cl->out, count);
    uint8_t plain[SA_PLAIN_BYTES];
    for (uint32_t r = 0; r < k_deg && !rc; r++) {
      const sa_neighbour *o = &cl->nb[r];
      if (!o->keyed) continue;
      bb_le_put_u32(plain, cl->index);
      bb_le_put_u32(plain + 4, o->index);
      memcpy(plain + 8, key_shares + (size_t)r * SA_SHARE_BYTES, SA_SHARE_BYTES);
      memcpy(plain + 8 + SA_SHARE_BYTES, self_shares + (size_t)r * SA_SHARE_BYTES, SA_SHARE_BYTES);
      bb_le_write_u32(&cl->out, o->index);
      uint8_t *sealed = bb_le_write_span(&cl->out, SA_CIPHER_BYTES);
      if (sealed) sa_seal(o->transport_key, cl->setup_hash, cl->index, o->index, plain, sizeof plain, sealed);
    }
    sodium_memzero(plain, sizeof plain);
    if (!rc) rc = finish_message(cl, err);
  }
  sodium_memzero(seed, sizeof seed);
  if (key_shares) sodium_memzero(key_shares, (size_t)k_deg * SA_SHARE_BYTES);
  if (self_shares) sodium_memzero(self_shares, (size_t)k_deg * SA_SHARE_BYTES);
  bbi_mem_free(cl->alloc, key_shares);
  bbi_mem_free(cl->alloc, self_shares);
  if (rc) return rc;
  cl->stage = BB_SECAGG_MASKED_INPUT;
  return 0;
}

/* The x coordinate j gave this client's shares of its secrets: 1 + this client's place
 * among j's neighbours, which the graph says. */
static uint8_t my_x_at(const bb_secagg_client *cl, uint32_t j) {
  uint32_t list[BB_SECAGG_MAX_DEGREE];
  sa_graph_neighbours(&cl->graph, j, list);
  return sa_share_x(list, cl->p.degree, cl->index);
}

static int take_ciphertexts(bb_secagg_client *cl, const sa_msg *m, bb_secagg_reason *why, bb_error *err) {
  const uint32_t count = m->u.list.count;
  if (count < cl->p.threshold)
    return sa_fail(err, why, BB_SECAGG_TOO_FEW_NEIGHBOURS, "shares from %u neighbours, the threshold is %u", count,
                   cl->p.threshold);
  uint8_t plain[SA_PLAIN_BYTES];
  int rc = 0;
  for (uint32_t k = 0; k < count && !rc; k++) {
    const uint8_t *e = m->u.list.entries + (size_t)k * SA_CIPHER_ENTRY_BYTES;
    const uint32_t j = bb_le_get_u32(e);
    sa_neighbour *o = neighbour(cl, j);
    if (!o || !o->keyed) {
      rc = sa_fail(err, why, BB_SECAGG_NOT_NEIGHBOUR, "shares from client %u, %s", j,
                   o ? "whose keys never came" : "which the masking graph does not make a neighbour");
      break;
    }
    if (!sa_open(o->transport_key, cl->setup_hash, j, cl->index, e + 4, SA_CIPHER_BYTES, plain)) {
      rc = sa_fail(err, why, BB_SECAGG_BAD_CIPHERTEXT, "the shares from client %u do not open", j);
      break;
    }
    /* shares at another x would fail at the server, in this client's name */
    const uint8_t x = my_x_at(cl, j);
    if (bb_le_get_u32(plain) != j || bb_le_get_u32(plain + 4) != cl->index || plain[8 + 32] != x ||
        plain[8 + SA_SHARE_BYTES + 32] != x) {
      rc = sa_fail(err, why, BB_SECAGG_BAD_CIPHERTEXT, "the shares from client %u name other clients or coordinates", j);
      break;
    }
    memcpy(o->key_share, plain + 8, SA_SHARE_BYTES);
    memcpy(o->self_share, plain + 8 + SA_SHARE_BYTES, SA_SHARE_BYTES);
    o->holds = true;
  }
  sodium_memzero(plain, sizeof plain);
  if (rc) return rc;
  cl->got_shares = true;
  return cl->input_len ? mask_and_send(cl, err) : 0;
}

/* y = q(x) + PRG(self) + Σ_j ±PRG(s_ij) mod 2^bits over the neighbours whose shares came:
 * + when this client's index is the lower of the pair. */
static int mask_and_send(bb_secagg_client *cl, bb_error *err) {
  const uint32_t len = cl->p.vector_len;
  uint64_t *y = bbi_mem_alloc(cl->alloc, (size_t)len * sizeof *y);
  if (!y) return bb_error_set(err, BB_ERR_NOMEM, "secagg client: out of memory for the masked vector");
  int rc = 0;
  bb_secagg_reason why = BB_SECAGG_BAD_PARAMS;
  if (cl->input_f) {
    bbi_prng prng;
    rc = bbi_prng_init(&prng, &cl->random, err);
    if (!rc) cl->clipped = sa_quantize(cl->input_f, len, &cl->p, &prng, y);
    bbi_prng_wipe(&prng);
  } else {
    const uint64_t mask = sa_ring_mask(cl->p.modulus_bits);
    for (uint32_t e = 0; e < len && !rc; e++) {
      if (cl->input_q[e] > mask)
        rc = bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg client: input element %u is not below 2^%u", e,
                          cl->p.modulus_bits);
      y[e] = cl->input_q[e];
    }
  }
  sa_mask_apply(y, len, cl->p.modulus_bits, cl->self_key, false);
  for (uint32_t r = 0; r < cl->p.degree; r++)
    if (cl->nb[r].holds) sa_mask_apply(y, len, cl->p.modulus_bits, cl->nb[r].mask_key, cl->index > cl->nb[r].index);
  if (!rc) {
    const uint32_t width = sa_width(cl->p.modulus_bits);
    start_message(cl, SA_MASKED);
    bb_le_write_u32(&cl->out, len);
    uint8_t *data = bb_le_write_span(&cl->out, (size_t)len * width);
    if (data)
      for (uint32_t e = 0; e < len; e++) sa_put_element(data + (size_t)e * width, y[e], width);
    rc = finish_message(cl, err);
  }
  sodium_memzero(y, (size_t)len * sizeof *y);
  bbi_mem_free(cl->alloc, y);
  if (rc) return abort_round(cl, rc, why);
  /* what masked the input is no longer needed; the shares held for others are */
  sodium_memzero(cl->self_key, sizeof cl->self_key);
  sodium_memzero(cl->s_sk, sizeof cl->s_sk);
  sodium_memzero(cl->c_sk, sizeof cl->c_sk);
  drop_input(cl);
  cl->stage = BB_SECAGG_UNMASK;
  return 0;
}

/* The unmask request: for each listed survivor its self-mask seed's share, for each
 * listed dropped client its mask key's share, never both for one client, only clients
 * whose shares this client holds, and enough survivors that this client's own self-mask
 * can be rebuilt (so the sum is not of too few). */
static int take_unmask_request(bb_secagg_client *cl, const sa_msg *m, bb_secagg_reason *why, bb_error *err) {
  const uint32_t ns = m->u.request.n_survivors, nd = m->u.request.n_dropped;
  const uint8_t *sv = m->u.request.survivors, *dr = m->u.request.dropped;
  for (uint32_t a = 0, b = 0; a < ns && b < nd;) {
    const uint32_t x = bb_le_get_u32(sv + 4 * a), y = bb_le_get_u32(dr + 4 * b);
    if (x == y)
      return sa_fail(err, why, BB_SECAGG_BOTH_SHARES,
                     "the server asks for both client %u's self-mask share (it survived) and its mask-key share (it "
                     "dropped): that would reveal its vector",
                     x);
    if (x < y) a++;
    else b++;
  }
  for (int list = 0; list < 2; list++) {
    const uint32_t n = list ? nd : ns;
    const uint8_t *items = list ? dr : sv;
    for (uint32_t k = 0; k < n; k++) {
      const uint32_t j = bb_le_get_u32(items + 4 * k);
      const sa_neighbour *o = neighbour(cl, j);
      if (!o || !o->holds)
        return sa_fail(err, why, BB_SECAGG_NOT_NEIGHBOUR, "a share of client %u, whose shares this client does not hold",
                       j);
    }
  }
  if (ns < cl->p.threshold)
    return sa_fail(err, why, BB_SECAGG_TOO_FEW_NEIGHBOURS,
                   "%u neighbours survived, fewer than the threshold %u: this client's own mask could not be removed",
                   ns, cl->p.threshold);
  start_message(cl, SA_UNMASK);
  bb_le_write_u32(&cl->out, ns + nd);
  for (uint32_t a = 0, b = 0; a < ns || b < nd;) {
    const bool take_survivor = b >= nd || (a < ns && bb_le_get_u32(sv + 4 * a) < bb_le_get_u32(dr + 4 * b));
    const uint32_t j = bb_le_get_u32(take_survivor ? sv + 4 * a++ : dr + 4 * b++);
    const sa_neighbour *o = neighbour(cl, j);
    bb_le_write_u32(&cl->out, j);
    bb_le_write_u8(&cl->out, take_survivor ? SA_KIND_SELF_MASK : SA_KIND_MASK_KEY);
    bb_le_write(&cl->out, take_survivor ? o->self_share : o->key_share, SA_SHARE_BYTES);
  }
  int rc = finish_message(cl, err);
  if (rc) return rc;
  wipe(cl);
  cl->stage = BB_SECAGG_DONE;
  cl->expiry = UINT64_MAX;
  return 0;
}

/* ---- messages in and out -------------------------------------------------------------------- */

static uint8_t expected_type(const bb_secagg_client *cl) {
  switch (cl->stage) {
  case BB_SECAGG_SETUP: return SA_SETUP;
  case BB_SECAGG_SHARE_KEYS: return SA_KEYS;
  case BB_SECAGG_MASKED_INPUT: return cl->got_shares ? 0 : SA_CIPHERTEXTS;
  case BB_SECAGG_UNMASK: return SA_UNMASK_REQUEST;
  default: return 0;
  }
}

int bb_secagg_client_receive(bb_secagg_client *cl, const uint8_t *data, size_t len, uint64_t now_ns, bb_error *err) {
  if (!cl) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg client: NULL");
  sa_msg m;
  bb_secagg_reason why = BB_SECAGG_OK;
  int rc = sa_decode(data, len, &cl->caps, cl->have_round ? cl->p.modulus_bits : 0, &m, &why, err);
  if (rc) {
    bb_error_prefix(err, "secagg client: a message refused: ");
    return rc;
  }
  const char *type = sa_type_name(m.type);
  if (cl->have_round && memcmp(m.round, cl->round, SA_ROUND_BYTES) != 0)
    rc = sa_fail(err, &why, BB_SECAGG_OTHER_ROUND, "a message of another round");
  else if (cl->have_round && m.index != cl->index)
    rc = sa_fail(err, &why, BB_SECAGG_WRONG_SENDER, "a message for client %u, this is client %u", m.index, cl->index);
  else if (m.type == SA_ABORT && cl->stage != BB_SECAGG_DONE && cl->stage != BB_SECAGG_ABORTED && cl->have_round) {
    abort_round(cl, 0, BB_SECAGG_SERVER_ABORT);
    return 0;
  } else if (m.type != expected_type(cl))
    rc = sa_fail(err, &why, BB_SECAGG_WRONG_STAGE, "the client is in stage %s", bb_secagg_stage_name(cl->stage));
  if (rc) {
    bb_error_prefix(err, "secagg client: the server's %s message refused: ", type);
    return rc;
  }
  switch (m.type) {
  case SA_SETUP: rc = take_setup(cl, &m, &why, err); break;
  case SA_KEYS: rc = take_keys(cl, &m, &why, err); break;
  case SA_CIPHERTEXTS: rc = take_ciphertexts(cl, &m, &why, err); break;
  default: rc = take_unmask_request(cl, &m, &why, err); break;
  }
  if (rc) {
    bb_error_prefix(err, "secagg client: the server's %s message refused, the round aborted: ", type);
    return abort_round(cl, rc, why == BB_SECAGG_OK ? BB_SECAGG_BAD_PARAMS : why);
  }
  if (cl->stage != BB_SECAGG_DONE)
    cl->expiry = now_ns > UINT64_MAX - cl->timeout_ns ? UINT64_MAX : now_ns + cl->timeout_ns;
  return 0;
}

int bb_secagg_client_next_message(bb_secagg_client *cl, const uint8_t **data, size_t *len) {
  if (!cl || !cl->out_ready) return 0;
  cl->out_ready = false;
  *data = cl->out.buf;
  *len = cl->out.len;
  return 1;
}

int bb_secagg_client_sign_payload(const bb_secagg_client *cl, const uint8_t **data, size_t *len) {
  if (!cl || !cl->awaiting_signature) return 0;
  *data = cl->sign_payload;
  *len = sizeof cl->sign_payload;
  return 1;
}

int bb_secagg_client_set_signature(bb_secagg_client *cl, const uint8_t signature[64], uint64_t now_ns, bb_error *err) {
  if (!cl || !signature) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg client: NULL");
  if (!cl->awaiting_signature)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg client: no signature is awaited (stage %s)",
                        bb_secagg_stage_name(cl->stage));
  if (crypto_sign_ed25519_verify_detached(signature, cl->sign_payload, sizeof cl->sign_payload, cl->identity_pk) != 0)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "secagg client: the signature is not this client's identity's over the payload");
  cl->expiry = now_ns > UINT64_MAX - cl->timeout_ns ? UINT64_MAX : now_ns + cl->timeout_ns;
  return send_keys(cl, signature, err);
}

uint64_t bb_secagg_client_expiry(const bb_secagg_client *cl) { return cl ? cl->expiry : UINT64_MAX; }

int bb_secagg_client_handle_expiry(bb_secagg_client *cl, uint64_t now_ns, bb_error *err) {
  if (!cl) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg client: NULL");
  if (now_ns < cl->expiry) return 0;
  abort_round(cl, 0, BB_SECAGG_DEADLINE);
  return sa_fail(err, NULL, BB_SECAGG_DEADLINE, "secagg client: the server said nothing for %llu ns: the round aborted",
                 (unsigned long long)cl->timeout_ns);
}

bb_secagg_stage bb_secagg_client_stage(const bb_secagg_client *cl) { return cl ? cl->stage : BB_SECAGG_ABORTED; }
bb_secagg_reason bb_secagg_client_abort_reason(const bb_secagg_client *cl) { return cl ? cl->abort_reason : BB_SECAGG_OK; }

bool bb_secagg_client_round(const bb_secagg_client *cl, uint32_t *index, bb_secagg_params *params) {
  if (!cl || !cl->have_round) return false;
  if (index) *index = cl->index;
  if (params) *params = cl->p;
  return true;
}

uint64_t bb_secagg_client_clipped(const bb_secagg_client *cl) { return cl ? cl->clipped : 0; }

int bb_identity_sign(void *user, const char *slot, const uint8_t *msg, size_t len, uint8_t signature[64],
                     bb_error *err) {
  (void)slot;
  if (!user || (!msg && len)) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "identity sign: no secret key");
  crypto_sign_ed25519_detached(signature, NULL, msg, len, user);
  return 0;
}

int bb_secagg_identity_new(uint8_t public_key[32], uint8_t secret_key[64], const bb_random_source *random,
                           bb_error *err) {
  if (!public_key || !secret_key) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "secagg: NULL argument");
  uint8_t seed[crypto_sign_ed25519_SEEDBYTES];
  int rc = bbi_random_fill(random, seed, sizeof seed, err);
  if (!rc) crypto_sign_ed25519_seed_keypair(public_key, secret_key, seed);
  sodium_memzero(seed, sizeof seed);
  return rc;
}
