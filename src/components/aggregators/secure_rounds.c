/* FedAvg's rounds under SecAgg+ (secure_rounds.h). One bbi_secure serves either end: a
 * server holds the open round's joins and its SecAgg+ server, a client the SecAgg+ client
 * of the last round it contributed to. Every SecAgg+ call is followed by after_server or
 * after_client (its messages leave as control messages, a timer is armed at its expiry),
 * so the stages' deadlines run on the node's clock. */
#include "components/aggregators/secure_rounds.h"

#include <math.h>
#include <string.h>

#include "bb/bytes.h"
#include "bb/privacy.h"
#include "components/aggregators/intake.h"
#include "util/mem.h"

#define JOIN_OP "SecAggJoin"
#define SERVER_OP "SecAggServer"
#define CLIENT_OP "SecAggClient"
#define TYPE "FedAvg"
#define COUNTER "fedavg"
/* the most clients one secure round invites */
#define MAX_JOINED 10000u

typedef struct joined {
  bb_peer_id peer;
  uint8_t key[32];
} joined;

struct bbi_secure {
  const bb_allocator *alloc;
  bbi_secure_config cfg;
  /* server */
  uint64_t round, opened_ns;
  bool open;
  float *global; /* the open round's model */
  size_t len;    /* its length (the vector's is len + 1) */
  joined *joined;
  size_t n_joined, cap_joined;
  bb_secagg_server *server;
  float *result; /* the new global model, once the sum is in */
  bool has_result, abandoned;
  /* client */
  bb_secagg_client *client;
  bb_peer_id to;
  uint64_t client_round;
  bool signing; /* the node's signer answers later (BB_SIGNED_OP) */
  /* the earliest timer set and not yet fired (UINT64_MAX: none): one pending timer serves
     every later expiry, so timers never pile up however many messages arrive */
  uint64_t armed;
};

uint32_t bbi_secure_min_clients(const bbi_secure_config *cfg) { return cfg->quorum > 3 ? cfg->quorum : 3; }

int bbi_secure_new(const bb_allocator *alloc, const bbi_secure_config *cfg, bbi_secure **out, bb_error *err) {
  bbi_secure *s = bbi_mem_calloc(alloc, 1, sizeof *s);
  if (!s) return bb_error_set(err, BB_ERR_NOMEM, "FedAvg: out of memory");
  s->alloc = alloc;
  s->cfg = *cfg;
  s->armed = UINT64_MAX;
  *out = s;
  return 0;
}

static void end_server(bbi_secure *s) {
  bb_secagg_server_free(s->server);
  s->server = NULL;
}

static void end_client(bbi_secure *s) {
  bb_secagg_client_free(s->client);
  s->client = NULL;
  s->signing = false;
}

void bbi_secure_free(bbi_secure *s) {
  if (!s) return;
  end_server(s);
  end_client(s);
  bbi_mem_free(s->alloc, s->global);
  bbi_mem_free(s->alloc, s->result);
  bbi_mem_free(s->alloc, s->joined);
  bbi_mem_free(s->alloc, s);
}

/* ---- the wire ---------------------------------------------------------------------------- */

static int send_framed(bb_ctx *ctx, const bb_peer_id *to, const char *op, uint64_t round, const uint8_t *data,
                       size_t len, bb_error *err) {
  const bb_allocator *alloc = bb_ctx_allocator(ctx);
  uint8_t *buf = bbi_mem_alloc(alloc, 8 + len);
  if (!buf) return bb_error_set(err, BB_ERR_NOMEM, "FedAvg: out of memory");
  bb_le_put_u64(buf, round);
  if (len) memcpy(buf + 8, data, len);
  int rc = bb_ctx_send_message(ctx, to, op, buf, 8 + len, err);
  bbi_mem_free(alloc, buf);
  if (!rc) bbi_intake_count(ctx, COUNTER, "secagg_bytes_sent", 8 + len);
  return rc;
}

/* A timer at `at` unless one set earlier is still to fire (its on_timer arms the next). */
static void arm(bbi_secure *s, bb_ctx *ctx, uint64_t at) {
  bb_error err;
  if (at == UINT64_MAX || s->armed <= at) return;
  if (bb_ctx_set_timer(ctx, at, 0, &err)) bbi_intake_count(ctx, COUNTER, "secagg_timer_refused", 1);
  else s->armed = at;
}

/* ---- server -------------------------------------------------------------------------------- */

int bbi_secure_open(bbi_secure *s, uint64_t round, const float *global, size_t len, uint64_t now_ns, bb_error *err) {
  if (len != s->len || !s->global) {
    bbi_mem_free(s->alloc, s->global);
    bbi_mem_free(s->alloc, s->result);
    s->global = bbi_mem_calloc(s->alloc, len, sizeof(float));
    s->result = bbi_mem_calloc(s->alloc, len + 1, sizeof(float));
    s->len = len;
    if (!s->global || !s->result) return bb_error_set(err, BB_ERR_NOMEM, "FedAvg: out of memory");
  }
  memcpy(s->global, global, len * sizeof(float));
  end_server(s);
  s->round = round;
  s->opened_ns = now_ns;
  s->open = true;
  s->n_joined = 0;
  s->has_result = s->abandoned = false;
  return 0;
}

int bbi_secure_take(bbi_secure *s, float *out, size_t len, bool *abandoned) {
  *abandoned = false;
  if (s->abandoned) {
    s->abandoned = false;
    *abandoned = true;
    return 0;
  }
  if (!s->has_result || len != s->len) return 0;
  memcpy(out, s->result, len * sizeof(float));
  s->has_result = false;
  return 1;
}

static void flush_server(bbi_secure *s, bb_ctx *ctx) {
  uint32_t to;
  const uint8_t *data;
  size_t len;
  bb_error err;
  while (s->server && bb_secagg_server_next_message(s->server, &to, &data, &len) == 1)
    if (to < s->n_joined && send_framed(ctx, &s->joined[to].peer, SERVER_OP, s->round, data, len, &err))
      bbi_intake_count(ctx, COUNTER, "secagg_unsent", 1);
  if (s->server) arm(s, ctx, bb_secagg_server_expiry(s->server));
}

/* The round ends without a sum: the FedAvg round is abandoned. */
static void abandon(bbi_secure *s, bb_ctx *ctx, const char *counter) {
  end_server(s);
  s->open = false;
  s->abandoned = true;
  bbi_intake_count(ctx, COUNTER, counter, 1);
}

/* The sum is in: the mean step (sum / weight) added to the round's model. */
static void finish(bbi_secure *s, bb_ctx *ctx) {
  uint32_t summed = 0;
  bb_error err;
  int rc = bb_secagg_server_result(s->server, s->result, s->len + 1, &summed, &err);
  const double weight = rc ? 0 : s->result[s->len];
  if (!(weight > 0)) {
    abandon(s, ctx, "secagg_weightless");
    return;
  }
  for (size_t i = 0; i < s->len; i++) s->result[i] = (float)(s->global[i] + s->result[i] / weight);
  bb_secagg_server_stats st;
  bb_secagg_server_get_stats(s->server, &st);
  bbi_intake_count(ctx, COUNTER, "secagg_rounds", 1);
  bbi_intake_count(ctx, COUNTER, "secagg_summed", summed);
  bbi_intake_count(ctx, COUNTER, "secagg_recovered", st.recovered);
  end_server(s);
  s->open = false;
  s->has_result = true;
}

/* After any call on the server: its messages out, then the round's end if it came. */
static void after_server(bbi_secure *s, bb_ctx *ctx) {
  flush_server(s, ctx);
  if (!s->server) return;
  bb_secagg_stage stage = bb_secagg_server_stage(s->server);
  if (stage == BB_SECAGG_DONE) finish(s, ctx);
  else if (stage == BB_SECAGG_ABORTED) abandon(s, ctx, "secagg_aborted");
}

static int start(bbi_secure *s, bb_ctx *ctx, bb_error *err) {
  const uint32_t n = (uint32_t)s->n_joined;
  uint8_t *keys = bbi_mem_alloc(s->alloc, (size_t)n * 32);
  if (!keys) return bb_error_set(err, BB_ERR_NOMEM, "FedAvg: out of memory");
  for (uint32_t i = 0; i < n; i++) memcpy(keys + 32 * i, s->joined[i].key, 32);
  /* the sum of n vectors of quant_range steps never wraps the ring */
  const uint64_t quant = 1u << 22;
  /* `shares` at or past the clients that joined is every other client; a threshold the
     round cannot meet is refused (secagg_refused_setup), never lowered */
  const uint32_t degree = s->cfg.shares >= n ? n - 1 : s->cfg.shares;
  bb_secagg_server_config c = {.struct_size = sizeof c,
                               .n_clients = n,
                               .degree = degree,
                               .threshold = s->cfg.threshold,
                               .min_clients = bbi_secure_min_clients(&s->cfg),
                               .vector_len = (uint32_t)(s->len + 1),
                               .modulus_bits = (uint64_t)n * quant < (1ull << 32) ? 32 : 64,
                               .clip_range = s->cfg.range,
                               .quant_range = quant,
                               .stage_timeout_ns = s->cfg.stage_timeout_ns};
  int rc = bb_secagg_server_new(&c, keys, s->alloc, &s->server, err);
  bbi_mem_free(s->alloc, keys);
  if (rc) {
    abandon(s, ctx, "secagg_refused_setup");
    return rc;
  }
  if ((rc = bb_secagg_server_start(s->server, bb_ctx_now(ctx), err))) {
    abandon(s, ctx, "secagg_aborted");
    return rc;
  }
  bbi_intake_count(ctx, COUNTER, "secagg_started", 1);
  after_server(s, ctx);
  return 0;
}

/* Whether the joins so far start the round now: target reached, or (past the deadline, or
 * with neither target nor deadline) enough for a sum. */
static bool ready(const bbi_secure *s, uint64_t now_ns) {
  if (s->cfg.target && s->n_joined >= s->cfg.target) return true;
  const bool past = s->cfg.deadline_ns && now_ns - s->opened_ns >= s->cfg.deadline_ns;
  return (past || (!s->cfg.target && !s->cfg.deadline_ns)) && s->n_joined >= bbi_secure_min_clients(&s->cfg);
}

static int refuse(bb_ctx *ctx, const char *what, bb_error *err, const char *why) {
  bbi_intake_count(ctx, COUNTER, what, 1);
  return bb_error_set(err, BB_ERR_DENIED, "FedAvg: %s", why);
}

/* A message for a round that ended (unmasking ends once every secret has a threshold of
 * shares, so the last answers come after it) is expected: counted, not refused. */
static int late(bb_ctx *ctx) {
  bbi_intake_count(ctx, COUNTER, "secagg_late", 1);
  return 0;
}

static int on_join(bbi_secure *s, bb_ctx *ctx, const bb_peer_id *from, const uint8_t *p, size_t len, bb_error *err) {
  if (len != 8 + 4 + 32) return refuse(ctx, "secagg_refused_malformed", err, "a SecAgg join is 44 bytes");
  const uint64_t round = bb_le_get_u64(p);
  if (round > s->round || (round == s->round && !s->open))
    return refuse(ctx, "secagg_refused_round", err, "a SecAgg join for a round not open");
  if (round < s->round || s->server) return late(ctx); /* too slow: the round started without it */
  if (bb_le_get_u32(p + 8) != s->len + 1)
    return refuse(ctx, "secagg_refused_length", err, "a SecAgg join for a vector of another length");
  /* the round lists each client by its own identity: the key its peer id holds */
  uint8_t identity[32];
  if (!bb_peer_id_ed25519(from, identity) || memcmp(identity, p + 12, 32) != 0)
    return refuse(ctx, "secagg_refused_identity", err,
                  "a SecAgg join must name the Ed25519 key the sender's peer id holds (a key-bound peer id)");
  int rc = bbi_intake_contributor(ctx, TYPE, COUNTER, from, s->cfg.members_only, round, s->opened_ns, err);
  if (rc) return rc;
  size_t at = 0;
  while (at < s->n_joined && !bb_peer_id_equal(&s->joined[at].peer, from)) at++;
  if (at == s->n_joined) {
    if (s->n_joined >= MAX_JOINED) return refuse(ctx, "secagg_refused_full", err, "the secure round is full");
    if (bbi_mem_grow(s->alloc, (void **)&s->joined, &s->cap_joined, s->n_joined + 1, sizeof *s->joined))
      return bb_error_set(err, BB_ERR_NOMEM, "FedAvg: out of memory");
    s->joined[s->n_joined++].peer = *from;
  }
  memcpy(s->joined[at].key, identity, 32);
  if (s->n_joined == 1 && s->cfg.deadline_ns) arm(s, ctx, s->opened_ns + s->cfg.deadline_ns);
  return ready(s, bb_ctx_now(ctx)) ? start(s, ctx, err) : 0;
}

static int on_client_message(bbi_secure *s, bb_ctx *ctx, const bb_peer_id *from, const uint8_t *p, size_t len,
                             bb_error *err) {
  if (len < 8) return refuse(ctx, "secagg_refused_malformed", err, "a SecAgg message shorter than its round id");
  const uint64_t round = bb_le_get_u64(p);
  if (round < s->round || (round == s->round && !s->server)) return late(ctx);
  if (round != s->round) return refuse(ctx, "secagg_refused_round", err, "a SecAgg message for a round not open");
  uint32_t index = 0;
  while (index < s->n_joined && !bb_peer_id_equal(&s->joined[index].peer, from)) index++;
  if (index == s->n_joined) return refuse(ctx, "secagg_refused_stranger", err, "a SecAgg message from a non-member");
  bbi_intake_count(ctx, COUNTER, "secagg_bytes_received", len);
  int rc = bb_secagg_server_receive(s->server, index, p + 8, len - 8, bb_ctx_now(ctx), err);
  if (rc) bbi_intake_count(ctx, COUNTER, "secagg_refused", 1);
  after_server(s, ctx);
  return rc;
}

/* ---- client -------------------------------------------------------------------------------- */

static void after_client(bbi_secure *s, bb_ctx *ctx);

/* The client's keys await its identity's signature: the node's signer gives it now, or
 * later as BB_SIGNED_OP (then on_signed hands it over). */
static void sign_keys(bbi_secure *s, bb_ctx *ctx) {
  const uint8_t *payload;
  size_t len;
  if (s->signing || bb_secagg_client_sign_payload(s->client, &payload, &len) != 1) return;
  uint8_t sig[64];
  bb_error err;
  int rc = bb_ctx_sign(ctx, payload, len, sig, &err);
  if (rc == BB_LATER) {
    s->signing = true;
    return;
  }
  if (rc || bb_secagg_client_set_signature(s->client, sig, bb_ctx_now(ctx), &err)) {
    bbi_intake_count(ctx, COUNTER, "secagg_sign_failed", 1);
    end_client(s);
  }
}

static int on_signed(bbi_secure *s, bb_ctx *ctx, const bb_peer_id *from, const uint8_t *p, size_t len, bb_error *err) {
  if (!bb_peer_id_equal(from, bb_ctx_self(ctx)) || len != 64)
    return refuse(ctx, "secagg_refused_malformed", err, "a signature comes from this node's own signer, 64 bytes");
  if (!s->client || !s->signing) return late(ctx); /* its round ended while the host signed */
  /* a signature over another payload (asked for by the part of an earlier round, which a
     new round replaced) is dropped; the current part waits on for its own */
  if (bb_secagg_client_set_signature(s->client, p, bb_ctx_now(ctx), err)) return late(ctx);
  s->signing = false;
  after_client(s, ctx);
  return 0;
}

static void after_client(bbi_secure *s, bb_ctx *ctx) {
  const uint8_t *data;
  size_t len;
  bb_error err;
  if (s->client) sign_keys(s, ctx);
  while (s->client && bb_secagg_client_next_message(s->client, &data, &len) == 1)
    if (send_framed(ctx, &s->to, CLIENT_OP, s->client_round, data, len, &err))
      bbi_intake_count(ctx, COUNTER, "secagg_unsent", 1);
  if (!s->client) return;
  const bb_secagg_stage stage = bb_secagg_client_stage(s->client);
  if (stage == BB_SECAGG_DONE || stage == BB_SECAGG_ABORTED) {
    bbi_intake_count(ctx, COUNTER, stage == BB_SECAGG_DONE ? "secagg_client_done" : "secagg_client_aborted", 1);
    bbi_intake_count(ctx, COUNTER, "secagg_clipped", bb_secagg_client_clipped(s->client));
    end_client(s);
    return;
  }
  arm(s, ctx, bb_secagg_client_expiry(s->client));
}

/* The vector: [w × step, w], the step clipped (and noised) for DP when asked. */
static int client_vector(const bbi_secure *s, const float *trained, const float *global, size_t len,
                         uint64_t samples, float *v, bb_error *err) {
  for (size_t i = 0; i < len; i++) v[i] = trained[i] - global[i];
  if (s->cfg.dp_clip > 0) {
    bb_dp_client_options o = {.struct_size = sizeof o,
                              .clip = s->cfg.dp_clip,
                              .noise_multiplier = s->cfg.dp_noise,
                              .clients = bbi_secure_min_clients(&s->cfg)};
    /* the noise grid a power-of-two multiple of the ring's step 2 range / 2^22, so that
       quantising the noised step is exact */
    if (s->cfg.dp_noise > 0) {
      const double stddev = s->cfg.dp_noise * s->cfg.dp_clip / sqrt((double)o.clients);
      const double step = 2 * s->cfg.range / (double)(1u << 22);
      double grid = step;
      while (grid * 2 <= stddev / 65536.0) grid *= 2;
      o.grid = grid;
    }
    int rc = bb_dp_client_privatize(v, len, &o, NULL, err);
    if (rc) return rc;
  }
  double w = 1;
  if (s->cfg.max_samples) w = (double)(samples < s->cfg.max_samples ? samples : s->cfg.max_samples) / s->cfg.max_samples;
  for (size_t i = 0; i < len; i++) v[i] = (float)(w * v[i]);
  v[len] = (float)w;
  return 0;
}

int bbi_secure_contribute(bbi_secure *s, bb_ctx *ctx, const bb_peer_id *server, uint64_t round, const float *trained,
                          const float *global, size_t len, uint64_t samples, bb_error *err) {
  if (len + 1 > UINT32_MAX) return bb_error_set(err, BB_ERR_LIMIT, "FedAvg: %zu parameters is too many", len);
  end_client(s); /* a new round's update replaces the last one's part */
  float *v = bbi_mem_alloc(s->alloc, (len + 1) * sizeof(float));
  if (!v) return bb_error_set(err, BB_ERR_NOMEM, "FedAvg: out of memory");
  /* the client's keys are signed by its own identity (the node's signer), the key its
     peer id holds: what its neighbours check them against */
  uint8_t pk[32];
  int rc = 0;
  if (!bb_peer_id_ed25519(bb_ctx_self(ctx), pk) || !bb_ctx_can_sign(ctx)) {
    bbi_intake_count(ctx, COUNTER, "secagg_no_identity", 1);
    rc = bb_error_set(err, BB_ERR_UNSUPPORTED,
                      "FedAvg secure=1: a client signs its SecAgg+ keys with its own identity: it needs a key-bound "
                      "(Ed25519) peer id and a signer (bb_install_args.sign; in JavaScript the install's signer)");
  }
  if (!rc) rc = client_vector(s, trained, global, len, samples, v, err);
  bb_secagg_client_config c = {.struct_size = sizeof c,
                               .identity_public_key = pk,
                               .min_clients = bbi_secure_min_clients(&s->cfg),
                               .timeout_ns = s->cfg.stage_timeout_ns * 5 + s->cfg.deadline_ns};
  if (!rc) rc = bb_secagg_client_new(&c, s->alloc, &s->client, err);
  if (!rc) rc = bb_secagg_client_set_input(s->client, v, len + 1, err);
  bbi_mem_free(s->alloc, v);
  if (rc) {
    end_client(s);
    return rc;
  }
  s->to = *server;
  s->client_round = round;
  uint8_t join[4 + 32];
  bb_le_put_u32(join, (uint32_t)(len + 1));
  memcpy(join + 4, pk, 32);
  if ((rc = send_framed(ctx, server, JOIN_OP, round, join, sizeof join, err))) {
    end_client(s);
    return rc;
  }
  bbi_intake_count(ctx, COUNTER, "secagg_joined", 1);
  arm(s, ctx, bb_secagg_client_expiry(s->client));
  return 0;
}

static int on_server_message(bbi_secure *s, bb_ctx *ctx, const bb_peer_id *from, const uint8_t *p, size_t len,
                             bb_error *err) {
  if (len < 8) return refuse(ctx, "secagg_refused_malformed", err, "a SecAgg message shorter than its round id");
  if (!bb_peer_id_equal(from, &s->to) || bb_le_get_u64(p) > s->client_round)
    return refuse(ctx, "secagg_refused_round", err, "a SecAgg message from no server this node joined, or for no round");
  if (!s->client || bb_le_get_u64(p) < s->client_round) return late(ctx);
  bbi_intake_count(ctx, COUNTER, "secagg_bytes_received", len);
  int rc = bb_secagg_client_receive(s->client, p + 8, len - 8, bb_ctx_now(ctx), err);
  if (rc) bbi_intake_count(ctx, COUNTER, "secagg_refused", 1);
  after_client(s, ctx);
  return rc;
}

/* ---- both -------------------------------------------------------------------------------- */

int bbi_secure_message(bbi_secure *s, bb_ctx *ctx, const char *op, const bb_peer_id *from, const uint8_t *payload,
                       size_t len, bb_error *err) {
  if (strcmp(op, JOIN_OP) == 0) return on_join(s, ctx, from, payload, len, err);
  if (strcmp(op, CLIENT_OP) == 0) return on_client_message(s, ctx, from, payload, len, err);
  if (strcmp(op, SERVER_OP) == 0) return on_server_message(s, ctx, from, payload, len, err);
  if (strcmp(op, BB_SIGNED_OP) == 0) return on_signed(s, ctx, from, payload, len, err);
  return bb_error_set(err, BB_ERR_UNSUPPORTED, "FedAvg: unknown message `%s`", op);
}

static int expired(bbi_secure *s, bb_ctx *ctx, uint64_t now, bb_error *err);

int bbi_secure_timer(bbi_secure *s, bb_ctx *ctx, bb_error *err) {
  const uint64_t now = bb_ctx_now(ctx);
  if (now >= s->armed) s->armed = UINT64_MAX;
  int rc = expired(s, ctx, now, err);
  /* whatever is still to come gets its timer */
  if (s->client) arm(s, ctx, bb_secagg_client_expiry(s->client));
  if (s->server) arm(s, ctx, bb_secagg_server_expiry(s->server));
  if (s->open && !s->server && s->cfg.deadline_ns && s->n_joined && s->opened_ns + s->cfg.deadline_ns > now)
    arm(s, ctx, s->opened_ns + s->cfg.deadline_ns);
  return rc;
}

/* What has passed its time at now: a stage, a client's patience, the joins' deadline. */
static int expired(bbi_secure *s, bb_ctx *ctx, uint64_t now, bb_error *err) {
  if (s->client && now >= bb_secagg_client_expiry(s->client)) {
    bb_error ignored;
    bb_secagg_client_handle_expiry(s->client, now, &ignored);
    after_client(s, ctx);
  }
  if (s->server && now >= bb_secagg_server_expiry(s->server)) {
    bb_error ignored;
    bb_secagg_server_handle_expiry(s->server, now, &ignored);
    after_server(s, ctx);
  } else if (s->open && !s->server && s->cfg.deadline_ns && now - s->opened_ns >= s->cfg.deadline_ns) {
    if (ready(s, now)) return start(s, ctx, err);
    if (s->cfg.abandon) abandon(s, ctx, "secagg_too_few");
  }
  return 0;
}
