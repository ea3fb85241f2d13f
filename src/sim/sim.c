/* The network simulator (bb/sim.h): attached nodes, a heap of messages in flight ordered
 * by (arrival time, sequence number), and a splitmix64 generator for every decision. A
 * peer may be a device (bb_sim_set_device): its compute time, uplink, drop-outs and
 * online sessions draw from a generator of its own, so the network's draws stay as they
 * were. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bb/sim.h"
#include "bb/common.h"
#include "util/hash.h"
#include "util/splitmix.h"

/* A device's state beside its settings: when it is busy computing, whether it is away
 * (between sessions) and when that changes, its generator and its counts. */
typedef struct sim_device {
  bb_sim_device cfg;
  uint64_t rng;
  uint64_t computing_until; /* not polled before; what it computed leaves then */
  bool away;                /* offline between two sessions */
  uint64_t next_toggle;     /* when it goes away or comes back (UINT64_MAX: never) */
  uint64_t since;           /* when it last came online (for online_ns) */
  bb_sim_device_stats stats;
} sim_device;

/* A peer keeps its index (messages name peers by index) once detached: its node is NULL. */
typedef struct sim_peer {
  bb_peer_id id;
  bb_node *node;
  bool alive;
  int side;                 /* partition side: 0 none, 1 or 2 */
  uint64_t busy_until;      /* bandwidth: when the sender's link is free */
  uint64_t *last_arrival;   /* per destination index: per-link FIFO */
  size_t n_last;
  sim_device *device;       /* NULL: a plain peer */
} sim_peer;

typedef struct sim_msg {
  uint64_t at, seq, sent;
  uint32_t from, to; /* peer indices */
  uint8_t *bytes;
  size_t len;
} sim_msg;

struct bb_sim {
  bb_sim_config cfg;
  uint64_t now, seq, rng;
  sim_peer *peers;
  size_t n_peers, cap_peers;
  sim_msg *heap;
  size_t n_msgs, cap_msgs;
  bb_sim_observer observer;
  void *user;
  bb_sim_tracer tracer;
  void *tracer_user;
  bb_sim_stats stats;
  uint64_t digest;
};

static uint64_t next_random(bb_sim *s) { return bbi_splitmix64(&s->rng); }

/* Uniform in [0, 1). */
static double uniform(bb_sim *s) { return (double)(next_random(s) >> 11) * (1.0 / 9007199254740992.0); }

static uint64_t below(bb_sim *s, uint64_t bound) { return bound ? next_random(s) % (bound + 1) : 0; }

int bb_sim_new(const bb_sim_config *config, bb_sim **out, bb_error *err) {
  *out = NULL;
  if (!config || config->struct_size < sizeof config->struct_size || config->struct_size > sizeof *config)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "sim: config struct_size %zu (this library knows %zu)",
                        config ? config->struct_size : 0, sizeof *config);
  bb_sim_config cfg = {0};
  memcpy(&cfg, config, config->struct_size);
  cfg.struct_size = sizeof cfg;
  if (!(cfg.loss >= 0 && cfg.loss <= 1) || !(cfg.duplicate >= 0 && cfg.duplicate <= 1) ||
      !(cfg.reorder >= 0 && cfg.reorder <= 1))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "sim: loss %g, duplicate %g and reorder %g must each be in [0, 1]", cfg.loss, cfg.duplicate,
                        cfg.reorder);
  bb_sim *s = calloc(1, sizeof *s);
  if (!s) return bb_error_set(err, BB_ERR_NOMEM, "sim: out of memory");
  s->cfg = cfg;
  if (!s->cfg.max_in_flight) s->cfg.max_in_flight = 1000000;
  if (!s->cfg.reorder_delay_ns) s->cfg.reorder_delay_ns = 10 * (s->cfg.latency_ns ? s->cfg.latency_ns : 1000000);
  s->rng = config->seed ^ 0x5851F42D4C957F2Dull;
  s->digest = BBI_FNV1A64_INIT;
  *out = s;
  return 0;
}

void bb_sim_free(bb_sim *s) {
  if (!s) return;
  for (size_t i = 0; i < s->n_msgs; i++) free(s->heap[i].bytes);
  for (size_t i = 0; i < s->n_peers; i++) {
    free(s->peers[i].last_arrival);
    free(s->peers[i].device);
  }
  free(s->heap);
  free(s->peers);
  free(s);
}

void bb_sim_set_observer(bb_sim *s, bb_sim_observer fn, void *user) {
  s->observer = fn;
  s->user = user;
}

void bb_sim_set_tracer(bb_sim *s, bb_sim_tracer fn, void *user) {
  s->tracer = fn;
  s->tracer_user = user;
}

/* Whether a peer takes part now: not crashed, and not a device away between sessions. */
static bool present(const sim_peer *p) { return p->alive && !(p->device && p->device->away); }

/* The index of a peer id ever attached (detached ones included), or -1. */
static long slot_of(const bb_sim *s, const bb_peer_id *p) {
  for (size_t i = 0; i < s->n_peers; i++)
    if (bb_peer_id_equal(&s->peers[i].id, p)) return (long)i;
  return -1;
}

/* The index of an attached peer, or -1. */
static long find(const bb_sim *s, const bb_peer_id *p) {
  long i = slot_of(s, p);
  return i >= 0 && s->peers[i].node ? i : -1;
}

int bb_sim_attach(bb_sim *s, bb_node *node, const bb_peer_id *peer, bb_error *err) {
  if (!node || !peer) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "sim: attach needs a node and a peer id");
  long again = slot_of(s, peer);
  if (again >= 0) {
    sim_peer *p = &s->peers[again];
    if (p->node) return bb_error_set(err, BB_ERR_EXISTS, "sim: peer %zu is attached already", (size_t)again);
    /* a new link: nothing of the old one's FIFO order or busy time carries over */
    for (size_t i = 0; i < s->n_peers; i++)
      if ((size_t)again < s->peers[i].n_last) s->peers[i].last_arrival[again] = 0;
    if (p->n_last) memset(p->last_arrival, 0, p->n_last * sizeof *p->last_arrival);
    p->node = node;
    p->alive = true;
    p->side = 0;
    p->busy_until = 0;
    return 0;
  }
  if (s->n_peers == s->cap_peers) {
    size_t cap = s->cap_peers ? s->cap_peers * 2 : 16;
    sim_peer *p = realloc(s->peers, cap * sizeof *p);
    if (!p) return bb_error_set(err, BB_ERR_NOMEM, "sim: out of memory");
    s->peers = p;
    s->cap_peers = cap;
  }
  s->peers[s->n_peers++] = (sim_peer){*peer, node, true, 0, 0, NULL, 0, NULL};
  return 0;
}

/* Drops the messages from or to peer index i (they are counted as crashed). */
static void drop_messages_of(bb_sim *s, size_t i) {
  size_t kept = 0;
  for (size_t k = 0; k < s->n_msgs; k++) {
    if (s->heap[k].from == i || s->heap[k].to == i) {
      free(s->heap[k].bytes);
      s->stats.crashed++;
      continue;
    }
    s->heap[kept++] = s->heap[k];
  }
  s->n_msgs = kept;
  /* the heap property may be broken: rebuild by sorting (order is (at, seq)) */
  for (size_t a = 1; a < s->n_msgs; a++) { /* insertion sort keeps equal keys stable */
    sim_msg m = s->heap[a];
    size_t b = a;
    while (b && (s->heap[b - 1].at > m.at || (s->heap[b - 1].at == m.at && s->heap[b - 1].seq > m.seq))) {
      s->heap[b] = s->heap[b - 1];
      b--;
    }
    s->heap[b] = m;
  }
}

bb_node *bb_sim_detach(bb_sim *s, const bb_peer_id *peer) {
  long i = find(s, peer);
  if (i < 0) return NULL;
  bb_node *node = s->peers[i].node;
  drop_messages_of(s, (size_t)i);
  s->peers[i].alive = false;
  s->peers[i].node = NULL;
  return node;
}

int bb_sim_crash(bb_sim *s, const bb_peer_id *peer) {
  long i = find(s, peer);
  if (i < 0) return BB_ERR_NOT_FOUND;
  s->peers[i].alive = false;
  drop_messages_of(s, (size_t)i);
  return 0;
}

bb_node *bb_sim_restart(bb_sim *s, const bb_peer_id *peer, bb_node *node) {
  long i = slot_of(s, peer);
  if (i < 0) return NULL;
  bb_node *old = s->peers[i].node;
  s->peers[i].node = node;
  s->peers[i].alive = node != NULL;
  return old;
}

bool bb_sim_alive(const bb_sim *s, const bb_peer_id *peer) {
  long i = find(s, peer);
  return i >= 0 && present(&s->peers[i]);
}

/* ---- devices -------------------------------------------------------------------------------- */

static double device_uniform(sim_device *d) { return bbi_splitmix_unit(&d->rng); }

/* An exponential duration of this mean, at least 1 ns. */
static uint64_t exponential(sim_device *d, double mean_ns) {
  double x = -log(device_uniform(d)) * mean_ns;
  return x < 1.0 ? 1 : x > 1e18 ? (uint64_t)1e18 : (uint64_t)x;
}

#define SIM_DAY_NS 86400000000000ull

/* 1 + a·cos(2π (t − peak) / day): how much shorter gaps are at time t. */
static double diurnal_factor(const bb_sim_device *c, uint64_t t) {
  if (c->diurnal == 0) return 1.0;
  const uint64_t day = c->day_ns ? c->day_ns : SIM_DAY_NS;
  const uint64_t phase = (t % day + day - c->diurnal_peak_ns % day) % day;
  return 1.0 + c->diurnal * cos(2.0 * 3.14159265358979323846 * (double)phase / (double)day);
}

/* The device goes away for a gap: what is in flight to or from it is lost. */
static void go_away(bb_sim *s, size_t i) {
  sim_device *d = s->peers[i].device;
  d->away = true;
  d->stats.online_ns += s->now - d->since;
  d->next_toggle = s->now + exponential(d, (double)d->cfg.gap_mean_ns / diurnal_factor(&d->cfg, s->now));
  drop_messages_of(s, i);
}

/* The device starts a session (to its end, or for good without sessions). */
static void come_back(bb_sim *s, sim_device *d) {
  d->away = false;
  d->since = s->now;
  d->stats.sessions++;
  d->next_toggle = d->cfg.session_mean_ns ? s->now + exponential(d, (double)d->cfg.session_mean_ns) : UINT64_MAX;
}

/* Sessions that end and gaps that end by now. */
static void toggle_due(bb_sim *s) {
  for (size_t i = 0; i < s->n_peers; i++) {
    sim_device *d = s->peers[i].device;
    if (!d || !s->peers[i].node) continue;
    while (d->next_toggle <= s->now) {
      if (d->away) come_back(s, d);
      else go_away(s, i);
    }
  }
}

int bb_sim_set_device(bb_sim *s, const bb_peer_id *peer, const bb_sim_device *device, bb_error *err) {
  long i = find(s, peer);
  if (i < 0) return bb_error_set(err, BB_ERR_NOT_FOUND, "sim: set_device: the peer is not attached");
  if (!device || device->struct_size < sizeof device->struct_size || device->struct_size > sizeof *device)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "sim: device struct_size %zu (this library knows %zu)",
                        device ? device->struct_size : 0, sizeof *device);
  bb_sim_device c = {0};
  memcpy(&c, device, device->struct_size);
  c.struct_size = sizeof c;
  if (!(c.dropout >= 0 && c.dropout <= 1) || !(c.diurnal >= 0 && c.diurnal < 1))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "sim: device dropout %g must be in [0, 1], diurnal %g in [0, 1)",
                        c.dropout, c.diurnal);
  if ((c.session_mean_ns || c.dropout > 0) && !c.gap_mean_ns)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "sim: a device with sessions or drop-outs needs gap_mean_ns");
  sim_device *d = s->peers[i].device ? s->peers[i].device : calloc(1, sizeof *d);
  if (!d) return bb_error_set(err, BB_ERR_NOMEM, "sim: out of memory");
  bool was_away = d->away;
  *d = (sim_device){.cfg = c, .rng = c.seed ^ 0xD1B54A32D192ED03ull, .since = s->now};
  s->peers[i].device = d;
  const double on = (double)c.session_mean_ns, off = (double)c.gap_mean_ns / diurnal_factor(&c, s->now);
  if (c.session_mean_ns && device_uniform(d) > on / (on + off)) {
    d->away = true;
    d->next_toggle = s->now + exponential(d, off);
    if (!was_away) drop_messages_of(s, (size_t)i);
  } else {
    come_back(s, d);
  }
  return 0;
}

int bb_sim_get_device_stats(const bb_sim *s, const bb_peer_id *peer, bb_sim_device_stats *out) {
  long i = slot_of(s, peer);
  if (i < 0 || !s->peers[i].device) return BB_ERR_NOT_FOUND;
  const sim_device *d = s->peers[i].device;
  *out = d->stats;
  if (!d->away) out->online_ns += s->now - d->since;
  return 0;
}

int bb_sim_partition(bb_sim *s, const bb_peer_id *a, size_t n_a, const bb_peer_id *b, size_t n_b, bb_error *err) {
  for (size_t k = 0; k < n_a + n_b; k++) {
    const bb_peer_id *p = k < n_a ? &a[k] : &b[k - n_a];
    if (find(s, p) < 0)
      return bb_error_set(err, BB_ERR_NOT_FOUND, "sim: partition %s[%zu] is not an attached peer", k < n_a ? "a" : "b",
                          k < n_a ? k : k - n_a);
  }
  for (size_t k = 0; k < n_a; k++) s->peers[find(s, &a[k])].side = 1;
  for (size_t k = 0; k < n_b; k++) s->peers[find(s, &b[k])].side = 2;
  return 0;
}

void bb_sim_heal(bb_sim *s) {
  for (size_t i = 0; i < s->n_peers; i++) s->peers[i].side = 0;
}

uint64_t bb_sim_now(const bb_sim *s) { return s->now; }
void bb_sim_get_stats(const bb_sim *s, bb_sim_stats *out) { *out = s->stats; }
uint64_t bb_sim_digest(const bb_sim *s) { return s->digest; }

/* ---- the message heap --------------------------------------------------------------------- */

static bool earlier(const sim_msg *a, const sim_msg *b) { return a->at < b->at || (a->at == b->at && a->seq < b->seq); }

static int heap_push(bb_sim *s, sim_msg m) {
  if (s->n_msgs == s->cap_msgs) {
    size_t cap = s->cap_msgs ? s->cap_msgs * 2 : 64;
    sim_msg *h = realloc(s->heap, cap * sizeof *h);
    if (!h) return BB_ERR_NOMEM;
    s->heap = h;
    s->cap_msgs = cap;
  }
  size_t i = s->n_msgs++;
  s->heap[i] = m;
  while (i && earlier(&s->heap[i], &s->heap[(i - 1) / 2])) {
    sim_msg t = s->heap[i];
    s->heap[i] = s->heap[(i - 1) / 2];
    s->heap[(i - 1) / 2] = t;
    i = (i - 1) / 2;
  }
  return 0;
}

static sim_msg heap_pop(bb_sim *s) {
  sim_msg top = s->heap[0];
  s->heap[0] = s->heap[--s->n_msgs];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < s->n_msgs && earlier(&s->heap[l], &s->heap[m])) m = l;
    if (r < s->n_msgs && earlier(&s->heap[r], &s->heap[m])) m = r;
    if (m == i) break;
    sim_msg t = s->heap[i];
    s->heap[i] = s->heap[m];
    s->heap[m] = t;
    i = m;
  }
  return top;
}

/* ---- sending -------------------------------------------------------------------------------- */

static uint64_t *last_arrival(sim_peer *p, size_t to) {
  if (to >= p->n_last) {
    size_t n = to + 16;
    uint64_t *grown = realloc(p->last_arrival, n * sizeof *grown);
    if (!grown) return NULL;
    memset(grown + p->n_last, 0, (n - p->n_last) * sizeof *grown);
    p->last_arrival = grown;
    p->n_last = n;
  }
  return &p->last_arrival[to];
}

/* Queues a message from `from` leaving at `depart` (now, or when a device finished computing). */
static int enqueue(bb_sim *s, size_t from, size_t to, uint64_t depart, const uint8_t *bytes, size_t len, bool copy_of) {
  if (s->n_msgs >= s->cfg.max_in_flight) {
    s->stats.overflow++;
    return 0;
  }
  sim_peer *src = &s->peers[from];
  uint64_t at = depart + s->cfg.latency_ns + below(s, s->cfg.jitter_ns);
  const uint64_t bandwidth = src->device && src->device->cfg.upload_bytes_per_s ? src->device->cfg.upload_bytes_per_s
                                                                                : s->cfg.bandwidth_bytes_per_s;
  if (bandwidth) { /* the sender's link sends one message after the other */
    uint64_t start = src->busy_until > depart ? src->busy_until : depart;
    uint64_t tx = (uint64_t)((double)len * 1e9 / (double)bandwidth);
    src->busy_until = start + tx;
    at += src->busy_until - depart;
  }
  uint64_t *last = last_arrival(src, to);
  if (!last) return BB_ERR_NOMEM;
  if (s->cfg.reorder > 0 && uniform(s) < s->cfg.reorder) {
    /* held back: later messages on the link do not wait for it, so they overtake it */
    at += below(s, s->cfg.reorder_delay_ns);
  } else { /* per-link FIFO: never before the previous message on the link */
    if (at < *last) at = *last;
    *last = at;
  }
  uint8_t *b = malloc(len ? len : 1);
  if (!b) return BB_ERR_NOMEM;
  memcpy(b, bytes, len);
  if (heap_push(s, (sim_msg){at, s->seq++, depart, (uint32_t)from, (uint32_t)to, b, len})) {
    free(b);
    return BB_ERR_NOMEM;
  }
  if (copy_of) s->stats.duplicated++;
  return 0;
}

static int route(bb_sim *s, size_t from, uint64_t depart, const bb_step *step) {
  s->stats.sent++;
  s->stats.bytes += step->len;
  long to = find(s, &step->peer);
  if (to < 0) {
    s->stats.unknown++;
    return 0;
  }
  if (!present(&s->peers[to])) {
    s->stats.crashed++;
    return 0;
  }
  if (s->peers[from].side && s->peers[to].side && s->peers[from].side != s->peers[to].side) {
    s->stats.partitioned++;
    return 0;
  }
  if (s->cfg.loss > 0 && uniform(s) < s->cfg.loss) {
    s->stats.lost++;
    return 0;
  }
  int rc = enqueue(s, from, (size_t)to, depart, step->bytes, step->len, false);
  if (!rc && s->cfg.duplicate > 0 && uniform(s) < s->cfg.duplicate)
    rc = enqueue(s, from, (size_t)to, depart, step->bytes, step->len, true);
  return rc;
}

/* ---- stepping ------------------------------------------------------------------------------- */

uint64_t bb_sim_next_event(const bb_sim *s) {
  uint64_t t = s->n_msgs ? s->heap[0].at : UINT64_MAX;
  for (size_t i = 0; i < s->n_peers; i++) {
    const sim_peer *p = &s->peers[i];
    const sim_device *d = p->device;
    if (d && p->node && p->alive && d->next_toggle < t) t = d->next_toggle;
    if (!present(p)) continue;
    uint64_t e = bb_node_expiry(p->node);
    if (d && e < d->computing_until) e = d->computing_until;
    if (e < t) t = e;
  }
  return t;
}

static void mix(bb_sim *s, const void *data, size_t len) { s->digest = bbi_fnv1a64_update(s->digest, data, len); }

static void deliver_due(bb_sim *s) {
  while (s->n_msgs && s->heap[0].at <= s->now) {
    sim_msg m = heap_pop(s);
    sim_peer *to = &s->peers[m.to];
    if (!present(to) || !present(&s->peers[m.from])) {
      s->stats.crashed++;
    } else if (to->side && s->peers[m.from].side && to->side != s->peers[m.from].side) {
      s->stats.partitioned++;
    } else {
      mix(s, &m.at, sizeof m.at);
      mix(s, &m.from, sizeof m.from);
      mix(s, &m.to, sizeof m.to);
      mix(s, m.bytes, m.len);
      bool accepted = bb_node_deliver(to->node, &s->peers[m.from].id, m.bytes, m.len, s->now, NULL) == 0;
      if (accepted) {
        s->stats.delivered++;
        s->stats.bytes_delivered += m.len;
      } else {
        s->stats.refused++;
      }
      if (s->tracer) {
        bb_sim_delivery d = {&s->peers[m.from].id, &to->id, m.sent, s->now, m.bytes, m.len, accepted};
        s->tracer(s->tracer_user, &d);
      }
    }
    free(m.bytes);
  }
}

/* A device's poll that trained: it computes until now + steps × step_ns (when what it
 * sent leaves), or drops out. Returns when the poll's sends depart; *dropped says they
 * never will. */
static uint64_t device_trained(bb_sim *s, sim_device *d, uint64_t steps, bool *dropped) {
  const uint64_t compute = steps * d->cfg.step_ns;
  d->stats.trained_polls++;
  d->stats.steps += steps;
  d->stats.busy_ns += compute;
  d->computing_until = s->now + compute;
  *dropped = d->cfg.dropout > 0 && device_uniform(d) <= d->cfg.dropout;
  return d->computing_until;
}

static int poll_node(bb_sim *s, size_t i, bb_error *err) {
  const bb_step *steps;
  size_t n;
  s->stats.polls++;
  sim_device *d = s->peers[i].device;
  const uint64_t steps_before = d ? bb_node_counter(s->peers[i].node, "train.steps") : 0;
  int rc = bb_node_poll(s->peers[i].node, s->now, &steps, &n, err);
  if (rc) return rc;
  uint64_t depart = s->now;
  bool dropped = false;
  const uint64_t trained = d ? bb_node_counter(s->peers[i].node, "train.steps") - steps_before : 0;
  if (trained) depart = device_trained(s, d, trained, &dropped);
  for (size_t k = 0; k < n; k++) {
    if (s->observer) s->observer(s->user, &s->peers[i].id, &steps[k]);
    if (steps[k].kind != BB_STEP_SEND) continue;
    if (dropped) d->stats.sends_lost++;
    else if ((rc = route(s, i, depart, &steps[k]))) return bb_error_set(err, rc, "sim: out of memory routing a message");
  }
  if (dropped) {
    d->stats.dropouts++;
    go_away(s, i);
  }
  return 0;
}

int bb_sim_step(bb_sim *s, bb_error *err) {
  uint64_t t = bb_sim_next_event(s);
  if (t == UINT64_MAX) return 1;
  if (t > s->now) s->now = t;
  toggle_due(s);
  deliver_due(s);
  for (size_t i = 0; i < s->n_peers; i++) {
    const sim_peer *p = &s->peers[i];
    if (!present(p) || bb_node_expiry(p->node) > s->now || (p->device && p->device->computing_until > s->now)) continue;
    int rc = poll_node(s, i, err);
    if (rc) return rc;
  }
  return 0;
}

int bb_sim_run_until(bb_sim *s, uint64_t until, bb_error *err) {
  while (bb_sim_next_event(s) <= until) {
    int rc = bb_sim_step(s, err);
    if (rc) return rc < 0 ? rc : 0;
  }
  if (until > s->now) s->now = until;
  return 0;
}

int bb_sim_run_until_idle(bb_sim *s, uint64_t max_time, bb_error *err) {
  for (;;) {
    uint64_t next = bb_sim_next_event(s);
    if (next == UINT64_MAX) return 0;
    if (next > max_time)
      return bb_error_set(err, BB_ERR_LIMIT, "sim: still busy at %" PRIu64 " ns (next event at %" PRIu64 " ns)",
                          s->now, next);
    int rc = bb_sim_step(s, err);
    if (rc) return rc < 0 ? rc : 0;
  }
}
