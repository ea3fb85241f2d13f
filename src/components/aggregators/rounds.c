/* Federated-averaging round bookkeeping (see rounds.h). Entries of the open round are
 * kept sorted by key, so replacement is a binary search and the fold order is fixed.
 * `recent` remembers, per contributor, the last round id its vector was closed into;
 * that is what keeps a late copy from being applied a second time. Records older than
 * max_staleness rounds can no longer matter and are pruned when a round closes. `step`
 * (with centered clipping) is the last closed round's result minus its reference: the
 * next round's center. The reductions themselves are robust.c's, the ascent screen's
 * memory ascent.c's. */
#include "components/aggregators/rounds.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "components/aggregators/ascent.h"
#include "components/aggregators/robust.h"

#include "bb/bytes.h"
#include "bb/common.h"
#include "tensor/kernels/kernels.h"
#include "util/hash.h"
#include "util/mem.h"

typedef struct key {
  uint8_t len;
  uint8_t bytes[BBI_FEDROUND_KEY_MAX];
} key;

typedef struct entry {
  key key;
  uint64_t origin_round; /* the round id the contributor tagged it with */
  uint64_t num_samples;
  float *params;
} entry;

typedef struct recent {
  key key;
  uint64_t last_round; /* last closed round this contributor's vector was part of */
} recent;

/* Opening times remembered (for bbi_fedround_window_start). */
#define HISTORY 64

struct bbi_fedround {
  bb_allocator alloc;
  bbi_fedround_config cfg;
  uint64_t round_id;
  uint64_t opened_ns;
  uint64_t opened[HISTORY]; /* opened[r % HISTORY]: when round r opened, for the last HISTORY */
  int overdue_reported;
  entry *entries;
  size_t n_entries, cap_entries;
  recent *recents;
  size_t n_recents, cap_recents;
  float *step; /* param_len floats with centered clipping, else NULL */
  bbi_ascent *ascent; /* with the ascent screen, else NULL */
  bbi_fedround_counters counters;
};

static int key_cmp(const key *a, const key *b) {
  const size_t n = a->len < b->len ? a->len : b->len;
  const int c = n ? memcmp(a->bytes, b->bytes, n) : 0;
  if (c) return c;
  return (a->len > b->len) - (a->len < b->len);
}

/* Index of k in the sorted entries, or where it would go (*found says which). */
static size_t find_entry(const bbi_fedround *fr, const key *k, int *found) {
  size_t lo = 0, hi = fr->n_entries;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    const int c = key_cmp(&fr->entries[mid].key, k);
    if (c == 0) {
      *found = 1;
      return mid;
    }
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  *found = 0;
  return lo;
}

static size_t find_recent(const bbi_fedround *fr, const key *k, int *found) {
  size_t lo = 0, hi = fr->n_recents;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    const int c = key_cmp(&fr->recents[mid].key, k);
    if (c == 0) {
      *found = 1;
      return mid;
    }
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  *found = 0;
  return lo;
}

static int check_config(const bbi_fedround_config *c, bb_error *err) {
  if (c->param_len == 0)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "fedround: param_len must be > 0");
  if (c->param_len > SIZE_MAX / sizeof(double))
    return bb_error_set(err, BB_ERR_LIMIT, "fedround: param_len %zu is too large", c->param_len);
  if (c->quorum == 0)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "fedround: quorum must be >= 1");
  if (c->target != 0 && c->target < c->quorum)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "fedround: target %u is below quorum %u", c->target, c->quorum);
  if (c->on_no_quorum != BBI_FEDROUND_EXTEND && c->on_no_quorum != BBI_FEDROUND_ABANDON)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "fedround: unknown no-quorum policy %d",
                        (int)c->on_no_quorum);
  if (c->late != BBI_FEDROUND_LATE_DROP && c->late != BBI_FEDROUND_LATE_COUNT)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "fedround: unknown late policy %d",
                        (int)c->late);
  if ((unsigned)c->method > BBI_FEDROUND_MULTI_KRUM || (unsigned)c->weighting > BBI_FEDROUND_UNIFORM ||
      (unsigned)c->beyond_bound > BBI_FEDROUND_DROP)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "fedround: unknown method %d, weighting %d or beyond-bound %d",
                        (int)c->method, (int)c->weighting, (int)c->beyond_bound);
  if (!(c->trim >= 0 && c->trim < 0.5))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "fedround: trim %g is outside [0, 0.5)", c->trim);
  /* written as negations so that NaN fails too */
  if (!(c->samples_factor >= 0 && c->samples_factor <= 1e300) || !(c->max_norm >= 0 && c->max_norm <= 1e300) ||
      !(c->norm_factor >= 0 && c->norm_factor <= 1e300) || !(c->drop_factor >= 0 && c->drop_factor <= 1e300) ||
      !(c->center_clip >= 0 && c->center_clip <= 1e300) || !(c->ascent_screen >= 0 && c->ascent_screen <= 1e300))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "fedround: samples_factor, max_norm, norm_factor, drop_factor, center_clip and ascent_screen "
                        "must be finite and >= 0");
  return 0;
}

/* The most contributions a round of this config holds. */
static size_t max_entries(const bbi_fedround_config *c) {
  return c->method == BBI_FEDROUND_KRUM || c->method == BBI_FEDROUND_MULTI_KRUM ? BBI_FEDROUND_MAX_KRUM
                                                                               : BBI_FEDROUND_MAX_ENTRIES;
}

static int make(const bb_allocator *alloc, const bbi_fedround_config *config, bbi_fedround **out,
                bb_error *err) {
  if (!alloc) alloc = bb_default_allocator();
  bbi_fedround *fr = bbi_mem_calloc(alloc, 1, sizeof *fr);
  if (!fr) return bb_error_set(err, BB_ERR_NOMEM, "fedround: out of memory");
  fr->alloc = *alloc;
  fr->cfg = *config;
  fr->round_id = config->first_round;
  if ((config->center_clip > 0 && !(fr->step = bbi_mem_calloc(alloc, config->param_len, sizeof *fr->step))) ||
      (config->ascent_screen > 0 && bbi_ascent_new(alloc, config->param_len, &fr->ascent, err))) {
    bbi_mem_free(alloc, fr->step);
    bbi_mem_free(alloc, fr);
    return bb_error_set(err, BB_ERR_NOMEM, "fedround: out of memory");
  }
  *out = fr;
  return 0;
}

int bbi_fedround_new(const bb_allocator *alloc, const bbi_fedround_config *config,
                    uint64_t now_ns, bbi_fedround **out, bb_error *err) {
  if (!config || !out) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "fedround: NULL argument");
  *out = NULL;
  const int rc = check_config(config, err);
  if (rc) return rc;
  const int mk = make(alloc, config, out, err);
  if (mk) return mk;
  (*out)->opened_ns = now_ns;
  (*out)->opened[config->first_round % HISTORY] = now_ns;
  return 0;
}

static void drop_entries(bbi_fedround *fr) {
  for (size_t i = 0; i < fr->n_entries; i++) bbi_mem_free(&fr->alloc, fr->entries[i].params);
  fr->n_entries = 0;
}

void bbi_fedround_free(bbi_fedround *fr) {
  if (!fr) return;
  drop_entries(fr);
  const bb_allocator a = fr->alloc;
  bbi_mem_free(&a, fr->entries);
  bbi_mem_free(&a, fr->recents);
  bbi_mem_free(&a, fr->step);
  bbi_ascent_free(fr->ascent);
  bbi_mem_free(&a, fr);
}

size_t bbi_fedround_key_from_u64(uint64_t id, uint8_t k[8]) {
  for (int i = 0; i < 8; i++) k[i] = (uint8_t)(id >> (56 - 8 * i));
  return 8;
}

/* Counts a rejection and explains it; the state is otherwise untouched. */
static int rejected(bbi_fedround *fr, bbi_fedround_status why, bbi_fedround_status *status,
                    int code) {
  fr->counters.rejected++;
  *status = why;
  return code;
}

/* Whether a vector tagged with an earlier round `round` may enter the open round. */
static bbi_fedround_status late_verdict(const bbi_fedround *fr, const key *k, uint64_t round) {
  if (fr->cfg.late == BBI_FEDROUND_LATE_DROP) return BBI_FEDROUND_LATE_DROPPED;
  if (fr->round_id - round > fr->cfg.max_staleness) return BBI_FEDROUND_LATE_DROPPED;
  int found;
  const size_t r = find_recent(fr, k, &found);
  if (found && fr->recents[r].last_round >= round) return BBI_FEDROUND_LATE_DROPPED;
  return BBI_FEDROUND_LATE_COUNTED;
}

static void describe_key(const key *k, char *out, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; i < k->len && o + 3 < cap; i++) {
    static const char hex[] = "0123456789abcdef";
    out[o++] = hex[k->bytes[i] >> 4];
    out[o++] = hex[k->bytes[i] & 15];
  }
  out[o] = '\0';
}

int bbi_fedround_contribute(bbi_fedround *fr, uint64_t round_id, const uint8_t *key_bytes,
                           size_t key_len, const float *params, uint64_t num_samples,
                           uint64_t now_ns, bbi_fedround_status *status, bb_error *err) {
  (void)now_ns; /* arrival time does not matter: only poll moves the clock */
  bbi_fedround_status local;
  if (!status) status = &local;
  if (!fr || !params || (!key_bytes && key_len))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "fedround: NULL argument");
  if (key_len == 0 || key_len > BBI_FEDROUND_KEY_MAX) {
    bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                 "fedround: contributor key of %zu bytes (1 to %d allowed)", key_len,
                 BBI_FEDROUND_KEY_MAX);
    return rejected(fr, BBI_FEDROUND_REJECTED_KEY, status, BB_ERR_INVALID_ARGUMENT);
  }
  key k = {(uint8_t)key_len, {0}};
  memcpy(k.bytes, key_bytes, key_len);
  char who[2 * BBI_FEDROUND_KEY_MAX + 1];
  describe_key(&k, who, sizeof who);

  if (round_id > fr->round_id) {
    bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                 "fedround: peer %s sent round %llu, but round %llu is the open one", who,
                 (unsigned long long)round_id, (unsigned long long)fr->round_id);
    return rejected(fr, BBI_FEDROUND_REJECTED_FUTURE, status, BB_ERR_INVALID_ARGUMENT);
  }
  if (num_samples == 0) {
    bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                 "fedround: peer %s sent num_samples = 0 (a degenerate weight)", who);
    return rejected(fr, BBI_FEDROUND_REJECTED_SAMPLES, status, BB_ERR_INVALID_ARGUMENT);
  }
  const size_t bad = bbi_f32_first_nonfinite(params, fr->cfg.param_len);
  if (bad < fr->cfg.param_len) {
    bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "fedround: peer %s sent a non-finite value (%g) at index %zu", who,
                 (double)params[bad], bad);
    return rejected(fr, BBI_FEDROUND_REJECTED_NONFINITE, status, BB_ERR_INVALID_ARGUMENT);
  }

  bbi_fedround_status verdict = BBI_FEDROUND_ACCEPTED;
  if (round_id < fr->round_id) {
    verdict = late_verdict(fr, &k, round_id);
    if (verdict == BBI_FEDROUND_LATE_DROPPED) {
      fr->counters.late_dropped++;
      *status = verdict;
      return 0;
    }
  }

  int found;
  const size_t at = find_entry(fr, &k, &found);
  if (found) {
    entry *e = &fr->entries[at];
    /* A copy older than what the round already holds from this peer never wins. */
    if (round_id < e->origin_round) {
      fr->counters.late_dropped++;
      *status = BBI_FEDROUND_LATE_DROPPED;
      return 0;
    }
    memcpy(e->params, params, fr->cfg.param_len * sizeof *params);
    e->origin_round = round_id;
    e->num_samples = num_samples;
    fr->counters.replaced++;
    if (verdict == BBI_FEDROUND_LATE_COUNTED) fr->counters.late_counted++;
    *status = BBI_FEDROUND_REPLACED;
    return 0;
  }

  if (fr->n_entries >= max_entries(&fr->cfg)) {
    bb_error_set(err, BB_ERR_LIMIT, "fedround: round %llu holds %zu contributions, its most; peer %s refused",
                 (unsigned long long)fr->round_id, fr->n_entries, who);
    return rejected(fr, BBI_FEDROUND_REJECTED_FULL, status, BB_ERR_LIMIT);
  }
  if (bbi_mem_grow(&fr->alloc, (void **)&fr->entries, &fr->cap_entries, fr->n_entries + 1, sizeof(entry)))
    return bb_error_set(err, BB_ERR_NOMEM, "fedround: out of memory storing peer %s", who);
  float *copy = bbi_mem_alloc(&fr->alloc, fr->cfg.param_len * sizeof *copy);
  if (!copy) return bb_error_set(err, BB_ERR_NOMEM, "fedround: out of memory storing peer %s", who);
  memcpy(copy, params, fr->cfg.param_len * sizeof *copy);
  memmove(fr->entries + at + 1, fr->entries + at, (fr->n_entries - at) * sizeof(entry));
  fr->entries[at] = (entry){k, round_id, num_samples, copy};
  fr->n_entries++;
  if (verdict == BBI_FEDROUND_LATE_COUNTED) fr->counters.late_counted++;
  *status = verdict;
  return 0;
}

static int deadline_passed(const bbi_fedround *fr, uint64_t now_ns) {
  return fr->cfg.deadline_ns != 0 && now_ns >= fr->opened_ns &&
         now_ns - fr->opened_ns >= fr->cfg.deadline_ns;
}

static int can_close(const bbi_fedround *fr, uint64_t now_ns) {
  if (fr->cfg.target && fr->n_entries >= fr->cfg.target) return 1;
  if (fr->n_entries < fr->cfg.quorum) return 0;
  return fr->cfg.deadline_ns == 0 || deadline_passed(fr, now_ns);
}

static void open_round(bbi_fedround *fr, uint64_t round_id, uint64_t now_ns) {
  fr->round_id = round_id;
  fr->opened_ns = now_ns;
  fr->opened[fr->round_id % HISTORY] = now_ns;
  fr->overdue_reported = 0;
}

static void open_next(bbi_fedround *fr, uint64_t now_ns) { open_round(fr, fr->round_id + 1, now_ns); }

int bbi_fedround_follow(bbi_fedround *fr, uint64_t round_id, uint64_t now_ns, bb_error *err) {
  if (!fr) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "fedround: NULL argument");
  if (round_id <= fr->round_id)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "fedround: cannot follow to round %llu: round %llu is open",
                        (unsigned long long)round_id, (unsigned long long)fr->round_id);
  if (fr->n_entries) {
    drop_entries(fr);
    fr->counters.rounds_abandoned++;
  }
  /* The tier above may have prompted round_id any time since the open round's window began
   * (its prompt is what moved this tier on, and others of the round may be prompted earlier
   * than the first contribution arrives): the window of round_id, and of rounds skipped over,
   * begins there. Its deadline counts from now. */
  const uint64_t window = bbi_fedround_window_start(fr, fr->round_id);
  const uint64_t from = fr->round_id;
  open_round(fr, round_id, now_ns);
  for (uint64_t r = round_id - from > HISTORY ? round_id - (HISTORY - 1) : from + 1; r <= round_id; r++)
    fr->opened[r % HISTORY] = window;
  return 0;
}

uint64_t bbi_fedround_window_start(const bbi_fedround *fr, uint64_t round_id) {
  if (round_id <= fr->cfg.first_round) return 0;
  const uint64_t oldest = fr->round_id - fr->cfg.first_round >= HISTORY ? fr->round_id - (HISTORY - 1) : 0;
  if (round_id > fr->round_id) round_id = fr->round_id;
  if (round_id < oldest) round_id = oldest;
  return fr->opened[round_id % HISTORY];
}

/* Records that every entry was closed into the open round, and forgets contributors
 * whose last round is too old for any late copy to be considered again. `recents` has
 * room for n_recents + n_entries records already, so this cannot fail. */
static void remember_contributors(bbi_fedround *fr) {
  for (size_t i = 0; i < fr->n_entries; i++) {
    int found;
    const size_t at = find_recent(fr, &fr->entries[i].key, &found);
    if (!found) {
      memmove(fr->recents + at + 1, fr->recents + at, (fr->n_recents - at) * sizeof(recent));
      fr->recents[at].key = fr->entries[i].key;
      fr->n_recents++;
    }
    fr->recents[at].last_round = fr->round_id;
  }
  /* The next round is round_id + 1; a late copy tagged r is only looked at when
   * round_id + 1 - r <= max_staleness, and a record matters only when last_round >= r. */
  const uint64_t next = fr->round_id + 1;
  const uint64_t oldest = next > fr->cfg.max_staleness ? next - fr->cfg.max_staleness : 0;
  size_t kept = 0;
  for (size_t i = 0; i < fr->n_recents; i++)
    if (fr->recents[i].last_round >= oldest) fr->recents[kept++] = fr->recents[i];
  fr->n_recents = kept;
}

/* Everything a close needs, allocated before anything changes (so a failure changes
 * nothing). */
typedef struct closing {
  bbi_ascent_update *updates; /* k: the entries as the ascent screen reads them */
  double *share, *trust; /* k each: the share of its weight each entry keeps, its trust after */
  size_t n;             /* updates kept: all, but those left out by the screen or for their distance */
  size_t *entry;        /* k: the entry each kept update comes from */
  const float **vecs;   /* k: each kept update, or its pulled-back copy */
  float *pulled;        /* the pulled-back copies (k·d floats), when any update is */
  float *fscratch;      /* k floats: a coordinate's values */
  double *scale, *weights; /* k doubles each */
  double *dscratch;     /* 2k doubles */
  size_t *order;        /* k indexes (a ranking) */
  double *acc;          /* d doubles */
  uint32_t clipped, dropped; /* updates past the distance bound: pulled back, left out */
  uint32_t screened, weighed; /* updates the ascent screen left out, gave part of their weight */
} closing;

static void closing_free(bbi_fedround *fr, closing *c) {
  bbi_mem_free(&fr->alloc, c->updates);
  bbi_mem_free(&fr->alloc, c->share);
  bbi_mem_free(&fr->alloc, c->trust);
  bbi_mem_free(&fr->alloc, c->entry);
  bbi_mem_free(&fr->alloc, (void *)c->vecs);
  bbi_mem_free(&fr->alloc, c->pulled);
  bbi_mem_free(&fr->alloc, c->fscratch);
  bbi_mem_free(&fr->alloc, c->scale);
  bbi_mem_free(&fr->alloc, c->dscratch);
  bbi_mem_free(&fr->alloc, c->weights);
  bbi_mem_free(&fr->alloc, c->order);
  bbi_mem_free(&fr->alloc, c->acc);
}

static bool closing_alloc(bbi_fedround *fr, closing *c, size_t k, size_t d) {
  memset(c, 0, sizeof *c);
  c->updates = bbi_mem_calloc(&fr->alloc, k, sizeof *c->updates);
  c->share = bbi_mem_calloc(&fr->alloc, k, sizeof *c->share);
  c->trust = bbi_mem_calloc(&fr->alloc, k, sizeof *c->trust);
  c->entry = bbi_mem_calloc(&fr->alloc, k, sizeof *c->entry);
  c->vecs = bbi_mem_calloc(&fr->alloc, k, sizeof *c->vecs);
  c->fscratch = bbi_mem_calloc(&fr->alloc, k, sizeof *c->fscratch);
  c->scale = bbi_mem_calloc(&fr->alloc, k, sizeof *c->scale);
  c->dscratch = bbi_mem_calloc(&fr->alloc, 2 * k, sizeof *c->dscratch);
  c->weights = bbi_mem_calloc(&fr->alloc, k, sizeof *c->weights);
  c->order = bbi_mem_calloc(&fr->alloc, k, sizeof *c->order);
  c->acc = bbi_mem_calloc(&fr->alloc, d, sizeof *c->acc);
  if (k > SIZE_MAX / sizeof(float) / d) return false;
  return c->updates && c->share && c->trust && c->entry && c->vecs && c->fscratch && c->scale && c->dscratch &&
         c->weights && c->order && c->acc;
}

/* The share of its weight each entry keeps (1 without the screen), and room for the screen
 * to remember the round once it closes; false when memory runs out. */
static bool screen_ascent(bbi_fedround *fr, closing *c, const float *ref) {
  const size_t k = fr->n_entries;
  for (size_t i = 0; i < k; i++) c->share[i] = 1.0;
  if (!fr->ascent) return true;
  for (size_t i = 0; i < k; i++) {
    const entry *e = &fr->entries[i];
    c->updates[i] = (bbi_ascent_update){e->key.bytes, e->key.len, e->params, e->origin_round == fr->round_id};
  }
  bbi_ascent_weigh(fr->ascent, fr->round_id, ref, c->updates, k, fr->cfg.ascent_screen, c->trust, c->share,
                  c->dscratch);
  return bbi_ascent_reserve(fr->ascent, c->updates, k, NULL) == 0;
}

/* Holds every update the ascent screen kept to the distance bound: one farther from the
 * reference is dropped (DROP) or pulled back onto the bound (CLIP): ref + scale·(x - ref),
 * in double, so the copy lies between ref and x (finite floats both) — unless it is
 * farther than drop_factor × the median distance (with norm_factor on), which drops it
 * under CLIP too. Counts all three in c; false when memory runs out. */
static bool bound_distances(bbi_fedround *fr, closing *c, const float *ref) {
  const size_t d = fr->cfg.param_len;
  size_t m = 0; /* the entries the screen kept, in c->entry and c->vecs */
  for (size_t i = 0; i < fr->n_entries; i++) {
    if (!(c->share[i] > 0)) continue;
    c->entry[m] = i;
    c->vecs[m++] = fr->entries[i].params;
  }
  c->screened = (uint32_t)(fr->n_entries - m);
  double *distance = c->dscratch, median;
  const size_t beyond = bbi_robust_norm_scales(c->vecs, m, d, ref, fr->cfg.max_norm, fr->cfg.norm_factor, c->scale,
                                              distance, &median);
  const bool clipping = fr->cfg.beyond_bound == BBI_FEDROUND_CLIP;
  /* the drop bound is part of the adaptive one: norm_factor=0 turns both off */
  const bool dropping_far = clipping && fr->cfg.norm_factor > 0 && fr->cfg.drop_factor > 0;
  const double far = dropping_far ? fr->cfg.drop_factor * median : INFINITY;
  if (beyond && clipping && !(c->pulled = bbi_mem_alloc(&fr->alloc, m * d * sizeof(float)))) return false;
  c->n = 0;
  c->clipped = c->dropped = c->weighed = 0;
  for (size_t t = 0; t < m; t++) { /* c->n <= t: the kept ones move down in place */
    const size_t i = c->entry[t];
    const float *x = fr->entries[i].params;
    if ((c->scale[t] < 1.0 && !clipping) || distance[t] > far) {
      c->dropped++;
      continue;
    }
    if (c->scale[t] < 1.0) {
      float *y = c->pulled + t * d;
      for (size_t j = 0; j < d; j++) {
        const double r = ref ? (double)ref[j] : 0.0;
        y[j] = (float)(r + c->scale[t] * ((double)x[j] - r));
      }
      x = y;
      c->clipped++;
    }
    c->weighed += fr->cfg.method == BBI_FEDROUND_MEAN && c->share[i] < 1.0;
    c->entry[c->n] = i;
    c->vecs[c->n++] = x;
  }
  return true;
}

/* What a closed round weighs one tier up: the weights its mean used (rounded to the
 * nearest count, at least 1), or the updates kept when the method weighs none. */
static uint64_t result_weight(const bbi_fedround *fr, const closing *c) {
  if (c->n == 0) return 0;
  if (fr->cfg.method != BBI_FEDROUND_MEAN) return c->n;
  double sum = 0.0;
  for (size_t i = 0; i < c->n; i++) sum += c->weights[i];
  if (!(sum < 18446744073709549568.0)) return UINT64_MAX;
  const uint64_t w = (uint64_t)(sum + 0.5);
  return w ? w : 1;
}

/* Each kept update's weight in the mean (its bounded sample count, or 1, times the share
 * the ascent screen left it); returns how many sample counts were cut. */
static uint32_t mean_weights(const bbi_fedround *fr, closing *c) {
  if (fr->cfg.weighting == BBI_FEDROUND_UNIFORM) {
    for (size_t i = 0; i < c->n; i++) c->weights[i] = c->share[c->entry[i]];
    return 0;
  }
  double cap = fr->cfg.max_samples ? (double)fr->cfg.max_samples : INFINITY;
  if (fr->cfg.samples_factor > 0) {
    for (size_t i = 0; i < c->n; i++) c->dscratch[i] = (double)fr->entries[c->entry[i]].num_samples;
    const double adaptive = fr->cfg.samples_factor * bbi_robust_median_f64(c->dscratch, c->n);
    if (adaptive < cap) cap = adaptive;
  }
  uint32_t cut = 0;
  for (size_t i = 0; i < c->n; i++) {
    const double n = (double)fr->entries[c->entry[i]].num_samples;
    c->weights[i] = (n > cap ? cap : n) * c->share[c->entry[i]];
    cut += n > cap;
  }
  return cut;
}

/* The mean of vecs[idx[0..m)] with these weights (NULL: equal), into out. */
static void weighted_mean(closing *c, const size_t *idx, size_t m, const double *weights, size_t d, float *out) {
  double total = 0.0;
  for (size_t t = 0; t < m; t++) total += weights ? weights[idx[t]] : 1.0;
  for (size_t j = 0; j < d; j++) c->acc[j] = 0.0;
  for (size_t t = 0; t < m; t++) {
    const double w = (weights ? weights[idx[t]] : 1.0) / total;
    const float *x = c->vecs[idx[t]];
    for (size_t j = 0; j < d; j++) c->acc[j] += w * (double)x[j];
  }
  for (size_t j = 0; j < d; j++) out[j] = (float)c->acc[j];
}

/* Reduces the kept updates by the configured method into out; with none kept, the
 * reference (zeros without one) stays the model. */
static int reduce(bbi_fedround *fr, closing *c, const float *ref, float *out, uint32_t *samples_clipped,
                  uint32_t *center_clipped, bb_error *err) {
  const size_t k = c->n, d = fr->cfg.param_len;
  const bbi_fedround_config *cfg = &fr->cfg;
  *samples_clipped = *center_clipped = 0;
  if (k == 0) {
    for (size_t j = 0; j < d; j++) out[j] = ref ? ref[j] : 0.0f;
    return 0;
  }
  switch (cfg->method) {
  case BBI_FEDROUND_MEAN:
    *samples_clipped = mean_weights(fr, c);
    if (cfg->center_clip > 0) {
      *center_clipped = (uint32_t)bbi_robust_centered_clip(c->vecs, c->weights, k, d, ref, fr->step, cfg->center_clip,
                                                          out, c->dscratch, c->acc);
      return 0;
    }
    for (size_t i = 0; i < k; i++) c->order[i] = i;
    weighted_mean(c, c->order, k, c->weights, d, out);
    return 0;
  case BBI_FEDROUND_MEDIAN: return bbi_robust_median(c->vecs, k, d, out, c->fscratch, err);
  case BBI_FEDROUND_TRIMMED: return bbi_robust_trimmed_mean(c->vecs, k, d, cfg->trim, out, c->fscratch, err);
  case BBI_FEDROUND_KRUM:
  case BBI_FEDROUND_MULTI_KRUM: {
    const size_t f = cfg->byzantine ? cfg->byzantine : k >= 3 ? (k - 3) / 2 : 0;
    int rc = bbi_robust_krum_scores(c->vecs, k, d, f, c->weights, c->dscratch, err);
    if (rc) return rc;
    bbi_robust_lowest(c->weights, k, c->order);
    size_t m = 1;
    if (cfg->method == BBI_FEDROUND_MULTI_KRUM) m = cfg->select ? cfg->select : k > f ? k - f : 1;
    weighted_mean(c, c->order, m < k ? m : k, NULL, d, out);
    return 0;
  }
  }
  return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "fedround: unknown method %d", (int)cfg->method);
}

/* The step the round took, held to the range of floats: the next round's center. */
static void remember_step(bbi_fedround *fr, const float *ref, const float *out) {
  if (!fr->step) return;
  for (size_t j = 0; j < fr->cfg.param_len; j++) {
    const double moved = (double)out[j] - (ref ? (double)ref[j] : 0.0);
    fr->step[j] = (float)(moved > FLT_MAX ? FLT_MAX : moved < -FLT_MAX ? -FLT_MAX : moved);
  }
}

static int close_round(bbi_fedround *fr, uint64_t now_ns, const float *ref, bbi_fedround_result *result,
                       bb_error *err) {
  const size_t k = fr->n_entries, d = fr->cfg.param_len;
  closing c;
  float *out = bbi_mem_alloc(&fr->alloc, d * sizeof *out);
  const int room = bbi_mem_grow(&fr->alloc, (void **)&fr->recents, &fr->cap_recents, fr->n_recents + k,
                               sizeof(recent));
  const bool ready =
      closing_alloc(fr, &c, k, d) && out && !room && screen_ascent(fr, &c, ref) && bound_distances(fr, &c, ref);
  uint32_t samples_clipped = 0, center_clipped = 0;
  int rc = !ready ? bb_error_set(err, BB_ERR_NOMEM, "fedround: out of memory closing round %llu (nothing was dropped)",
                                 (unsigned long long)fr->round_id)
                  : reduce(fr, &c, ref, out, &samples_clipped, &center_clipped, err);
  const size_t kept = c.n;
  const uint32_t clipped = c.clipped, dropped = c.dropped, screened = c.screened, weighed = c.weighed;
  const uint64_t weight = rc ? 0 : result_weight(fr, &c);
  if (!rc && fr->ascent) bbi_ascent_commit(fr->ascent, fr->round_id, ref, c.updates, k, c.trust);
  closing_free(fr, &c);
  if (rc) {
    bbi_mem_free(&fr->alloc, out);
    return rc;
  }
  uint64_t total = 0;
  for (size_t i = 0; i < k; i++)
    total = fr->entries[i].num_samples > UINT64_MAX - total ? UINT64_MAX : total + fr->entries[i].num_samples;
  result->event = BBI_FEDROUND_CLOSED;
  result->round_id = fr->round_id;
  result->total_samples = total;
  result->weight = weight;
  result->contributors = (uint32_t)kept;
  result->norm_clipped = clipped;
  result->norm_dropped = dropped;
  result->samples_clipped = samples_clipped;
  result->center_clipped = center_clipped;
  result->ascent_dropped = screened;
  result->ascent_weighed = weighed;
  result->params = out;
  fr->counters.norm_clipped += clipped;
  fr->counters.norm_dropped += dropped;
  fr->counters.samples_clipped += samples_clipped;
  fr->counters.center_clipped += center_clipped;
  fr->counters.ascent_dropped += screened;
  fr->counters.ascent_weighed += weighed;
  remember_step(fr, ref, out);
  remember_contributors(fr);
  drop_entries(fr);
  fr->counters.rounds_closed++;
  open_next(fr, now_ns);
  return 0;
}

int bbi_fedround_poll(bbi_fedround *fr, uint64_t now_ns, const float *reference, bbi_fedround_result *result,
                     bb_error *err) {
  if (!fr || !result) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "fedround: NULL argument");
  memset(result, 0, sizeof *result);
  result->event = BBI_FEDROUND_IDLE;
  result->round_id = fr->round_id;
  if (can_close(fr, now_ns)) return close_round(fr, now_ns, reference, result, err);
  if (!deadline_passed(fr, now_ns)) return 0;
  /* Past the deadline without quorum. */
  result->contributors = (uint32_t)fr->n_entries;
  if (fr->cfg.on_no_quorum == BBI_FEDROUND_ABANDON) {
    result->event = BBI_FEDROUND_ABANDONED;
    drop_entries(fr);
    fr->counters.rounds_abandoned++;
    open_next(fr, now_ns);
    return 0;
  }
  if (!fr->overdue_reported) {
    result->event = BBI_FEDROUND_OVERDUE;
    fr->overdue_reported = 1;
  }
  return 0;
}

uint64_t bbi_fedround_next_deadline(const bbi_fedround *fr, uint64_t now_ns) {
  if (can_close(fr, now_ns)) return now_ns;
  if (fr->cfg.deadline_ns == 0) return UINT64_MAX;
  if (deadline_passed(fr, now_ns))
    return fr->cfg.on_no_quorum == BBI_FEDROUND_ABANDON || !fr->overdue_reported ? now_ns
                                                                                 : UINT64_MAX;
  return fr->opened_ns + fr->cfg.deadline_ns < fr->opened_ns ? UINT64_MAX
                                                             : fr->opened_ns + fr->cfg.deadline_ns;
}

uint64_t bbi_fedround_round_id(const bbi_fedround *fr) { return fr->round_id; }
size_t bbi_fedround_param_len(const bbi_fedround *fr) { return fr->cfg.param_len; }
size_t bbi_fedround_pending(const bbi_fedround *fr) { return fr->n_entries; }
bbi_fedround_counters bbi_fedround_get_counters(const bbi_fedround *fr) { return fr->counters; }
const bb_allocator *bbi_fedround_allocator(const bbi_fedround *fr) { return &fr->alloc; }
double bbi_fedround_max_norm(const bbi_fedround *fr) { return fr->cfg.max_norm; }

int bbi_fedround_set_max_norm(bbi_fedround *fr, double max_norm, bb_error *err) {
  if (!(max_norm > 0 && max_norm <= 1e300))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "fedround: a distance bound of %g (finite, > 0)", max_norm);
  fr->cfg.max_norm = max_norm;
  return 0;
}

/* ---- snapshot ---------------------------------------------------------------------- */

#define SNAPSHOT_MAGIC "BBFR"
#define SNAPSHOT_VERSION 4u
/* magic, version, config (8+4+4+8+1+1+8+8), round state (8+8+1), 6 counters, 2 counts:
 * all that version 1 has */
#define SNAPSHOT_FIXED_V1 (4 + 4 + 42 + 17 + 6 * 8 + 2 * 8)
/* version 2 adds the closing config (1+1+8+4+4+8+8+8+8+1), the opening times and three
 * counters; version 3 the drop factor and centered clipping (8+8) and a counter (the
 * step, param_len floats with centered clipping, comes after the records); version 4 the
 * ascent screen (8) and two counters (its records, with the screen on, come after the
 * step) */
#define SNAPSHOT_FIXED (SNAPSHOT_FIXED_V1 + 51 + HISTORY * 8 + 3 * 8 + 16 + 8 + 8 + 2 * 8)

static void put_f64(bb_le_writer *w, double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  bb_le_write_u64(w, bits);
}

static void put_key(bb_le_writer *w, const key *k) {
  bb_le_write_u8(w, k->len);
  bb_le_write(w, k->bytes, k->len);
}

size_t bbi_fedround_snapshot_size(const bbi_fedround *fr) {
  size_t n = SNAPSHOT_FIXED + 8;
  for (size_t i = 0; i < fr->n_entries; i++)
    n += 1 + fr->entries[i].key.len + 16 + 4 * fr->cfg.param_len;
  for (size_t i = 0; i < fr->n_recents; i++) n += 1 + fr->recents[i].key.len + 8;
  if (fr->step) n += 4 * fr->cfg.param_len;
  if (fr->ascent) n += bbi_ascent_snapshot_size(fr->ascent);
  return n;
}

int bbi_fedround_snapshot(const bbi_fedround *fr, uint8_t *buf, size_t cap, size_t *written,
                         bb_error *err) {
  if (!fr || !buf) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "fedround: NULL argument");
  const size_t need = bbi_fedround_snapshot_size(fr);
  if (cap < need)
    return bb_error_set(err, BB_ERR_LIMIT, "fedround: snapshot needs %zu bytes, buffer has %zu",
                        need, cap);
  bb_le_writer w = bb_le_writer_fixed(buf, need);
  bb_le_write(&w, SNAPSHOT_MAGIC, 4);
  bb_le_write_u32(&w, SNAPSHOT_VERSION);
  bb_le_write_u64(&w, fr->cfg.param_len);
  bb_le_write_u32(&w, fr->cfg.quorum);
  bb_le_write_u32(&w, fr->cfg.target);
  bb_le_write_u64(&w, fr->cfg.deadline_ns);
  bb_le_write_u8(&w, (uint8_t)fr->cfg.on_no_quorum);
  bb_le_write_u8(&w, (uint8_t)fr->cfg.late);
  bb_le_write_u64(&w, fr->cfg.max_staleness);
  bb_le_write_u64(&w, fr->cfg.first_round);
  bb_le_write_u8(&w, (uint8_t)fr->cfg.method);
  bb_le_write_u8(&w, (uint8_t)fr->cfg.weighting);
  put_f64(&w, fr->cfg.trim);
  bb_le_write_u32(&w, fr->cfg.byzantine);
  bb_le_write_u32(&w, fr->cfg.select);
  bb_le_write_u64(&w, fr->cfg.max_samples);
  put_f64(&w, fr->cfg.samples_factor);
  put_f64(&w, fr->cfg.max_norm);
  put_f64(&w, fr->cfg.norm_factor);
  bb_le_write_u8(&w, (uint8_t)fr->cfg.beyond_bound);
  put_f64(&w, fr->cfg.drop_factor);
  put_f64(&w, fr->cfg.center_clip);
  put_f64(&w, fr->cfg.ascent_screen);
  bb_le_write_u64(&w, fr->round_id);
  bb_le_write_u64(&w, fr->opened_ns);
  bb_le_write_u8(&w, (uint8_t)fr->overdue_reported);
  for (size_t i = 0; i < HISTORY; i++) bb_le_write_u64(&w, fr->opened[i]);
  const bbi_fedround_counters *c = &fr->counters;
  bb_le_write_u64(&w, c->rounds_closed);
  bb_le_write_u64(&w, c->rounds_abandoned);
  bb_le_write_u64(&w, c->rejected);
  bb_le_write_u64(&w, c->late_counted);
  bb_le_write_u64(&w, c->late_dropped);
  bb_le_write_u64(&w, c->replaced);
  bb_le_write_u64(&w, c->norm_clipped);
  bb_le_write_u64(&w, c->norm_dropped);
  bb_le_write_u64(&w, c->samples_clipped);
  bb_le_write_u64(&w, c->center_clipped);
  bb_le_write_u64(&w, c->ascent_dropped);
  bb_le_write_u64(&w, c->ascent_weighed);
  bb_le_write_u64(&w, fr->n_entries);
  for (size_t i = 0; i < fr->n_entries; i++) {
    const entry *e = &fr->entries[i];
    put_key(&w, &e->key);
    bb_le_write_u64(&w, e->origin_round);
    bb_le_write_u64(&w, e->num_samples);
    for (size_t j = 0; j < fr->cfg.param_len; j++) bb_le_write_f32(&w, e->params[j]);
  }
  bb_le_write_u64(&w, fr->n_recents);
  for (size_t i = 0; i < fr->n_recents; i++) {
    put_key(&w, &fr->recents[i].key);
    bb_le_write_u64(&w, fr->recents[i].last_round);
  }
  if (fr->step)
    for (size_t j = 0; j < fr->cfg.param_len; j++) bb_le_write_f32(&w, fr->step[j]);
  if (fr->ascent) bbi_ascent_write(fr->ascent, &w);
  bb_le_write_u64(&w, bbi_fnv1a64(buf, w.len));
  if (written) *written = w.len;
  return 0;
}

/* A bounds-checked read of the records; the first failure is kept in rc (and err), and
 * every later read returns zeros. */
typedef struct reader {
  bb_le_reader in;
  bb_error *err;
  int rc;
  uint32_t version;
} reader;

static int truncated(reader *r, const char *what) {
  if (!r->rc)
    r->rc = bb_error_set(r->err, BB_ERR_MALFORMED,
                         "fedround snapshot: truncated at byte %zu reading %s (%zu bytes total)",
                         r->in.at, what, r->in.len);
  return r->rc;
}

static int bad(reader *r, size_t at, const char *what) {
  if (!r->rc)
    r->rc = bb_error_set(r->err, BB_ERR_MALFORMED, "fedround snapshot: %s at byte %zu", what, at);
  return r->rc;
}

static uint8_t get_u8(reader *r, const char *what) {
  uint8_t v = 0;
  if (!r->rc && !bb_le_read_u8(&r->in, &v)) truncated(r, what);
  return v;
}

static uint32_t get_u32(reader *r, const char *what) {
  uint32_t v = 0;
  if (!r->rc && !bb_le_read_u32(&r->in, &v)) truncated(r, what);
  return v;
}

static uint64_t get_u64(reader *r, const char *what) {
  uint64_t v = 0;
  if (!r->rc && !bb_le_read_u64(&r->in, &v)) truncated(r, what);
  return v;
}

static double get_f64(reader *r, const char *what) {
  const uint64_t bits = get_u64(r, what);
  double v;
  memcpy(&v, &bits, sizeof v);
  return v;
}

static void get_key(reader *r, key *k) {
  const size_t at = r->in.at;
  k->len = get_u8(r, "a key length");
  if (r->rc) return;
  if (k->len == 0 || k->len > BBI_FEDROUND_KEY_MAX) {
    bad(r, at, "key length out of range");
    return;
  }
  if (!bb_le_read(&r->in, k->bytes, k->len)) truncated(r, "a key");
}

static void get_floats(reader *r, float *x, size_t n) {
  for (size_t i = 0; i < n && !r->rc; i++) {
    const size_t at = r->in.at;
    if (!bb_le_read_f32(&r->in, &x[i])) truncated(r, "a parameter");
    else if (!isfinite(x[i])) bad(r, at, "non-finite parameter");
  }
}

/* Reads the config and round state into fresh object *out (entries follow). */
static int read_header(reader *r, const bb_allocator *alloc, bbi_fedround **out) {
  const uint8_t *magic = bb_le_read_span(&r->in, 4);
  if (!magic) return truncated(r, "the magic");
  if (memcmp(magic, SNAPSHOT_MAGIC, 4) != 0) return bad(r, 0, "wrong magic (not a fedround snapshot)");
  const uint32_t version = get_u32(r, "the version");
  if (r->rc) return r->rc;
  if (version < 1 || version > SNAPSHOT_VERSION)
    return r->rc = bb_error_set(r->err, BB_ERR_UNSUPPORTED,
                                "fedround snapshot: version %u (this build reads 1 to %u)", version,
                                SNAPSHOT_VERSION);
  r->version = version;
  bbi_fedround_config cfg;
  memset(&cfg, 0, sizeof cfg);
  const uint64_t param_len = get_u64(r, "param_len");
  cfg.param_len = (size_t)param_len;
  cfg.quorum = get_u32(r, "quorum");
  cfg.target = get_u32(r, "target");
  cfg.deadline_ns = get_u64(r, "deadline");
  cfg.on_no_quorum = (bbi_fedround_no_quorum)get_u8(r, "the no-quorum policy");
  cfg.late = (bbi_fedround_late)get_u8(r, "the late policy");
  cfg.max_staleness = get_u64(r, "max_staleness");
  cfg.first_round = get_u64(r, "first_round");
  if (version >= 2) {
    cfg.method = (bbi_fedround_method)get_u8(r, "the method");
    cfg.weighting = (bbi_fedround_weighting)get_u8(r, "the weighting");
    cfg.trim = get_f64(r, "trim");
    cfg.byzantine = get_u32(r, "byzantine");
    cfg.select = get_u32(r, "select");
    cfg.max_samples = get_u64(r, "max_samples");
    cfg.samples_factor = get_f64(r, "samples_factor");
    cfg.max_norm = get_f64(r, "max_norm");
    cfg.norm_factor = get_f64(r, "norm_factor");
    cfg.beyond_bound = (bbi_fedround_beyond)get_u8(r, "the beyond-bound policy");
  }
  if (version >= 3) {
    cfg.drop_factor = get_f64(r, "drop_factor");
    cfg.center_clip = get_f64(r, "center_clip");
  }
  if (version >= 4) cfg.ascent_screen = get_f64(r, "ascent_screen");
  if (r->rc) return r->rc;
  bb_error cfg_err;
  if (param_len != cfg.param_len || check_config(&cfg, &cfg_err))
    return bad(r, 8, "invalid config");
  if (cfg.center_clip > 0 && param_len > bb_le_left(&r->in) / 4) /* the step it carries */
    return bad(r, 8, "param_len larger than the input");
  if (make(alloc, &cfg, out, r->err)) return r->rc = BB_ERR_NOMEM;
  bbi_fedround *fr = *out;
  fr->round_id = get_u64(r, "the round id");
  fr->opened_ns = get_u64(r, "the open time");
  const size_t at = r->in.at;
  const uint8_t overdue = get_u8(r, "the overdue flag");
  if (!r->rc && overdue > 1) return bad(r, at, "overdue flag is not 0 or 1");
  fr->overdue_reported = overdue;
  if (version >= 2)
    for (size_t i = 0; i < HISTORY; i++) fr->opened[i] = get_u64(r, "an opening time");
  else /* unknown: every remembered round opened when the open one did (the strict side) */
    for (size_t i = 0; i < HISTORY; i++) fr->opened[i] = fr->opened_ns;
  bbi_fedround_counters *c = &fr->counters;
  c->rounds_closed = get_u64(r, "a counter");
  c->rounds_abandoned = get_u64(r, "a counter");
  c->rejected = get_u64(r, "a counter");
  c->late_counted = get_u64(r, "a counter");
  c->late_dropped = get_u64(r, "a counter");
  c->replaced = get_u64(r, "a counter");
  if (version >= 2) {
    c->norm_clipped = get_u64(r, "a counter");
    c->norm_dropped = get_u64(r, "a counter");
    c->samples_clipped = get_u64(r, "a counter");
  }
  if (version >= 3) c->center_clipped = get_u64(r, "a counter");
  if (version >= 4) {
    c->ascent_dropped = get_u64(r, "a counter");
    c->ascent_weighed = get_u64(r, "a counter");
  }
  if (!r->rc && fr->round_id < cfg.first_round) bad(r, 8, "round id before the first round");
  return r->rc;
}

/* A count of records of at least `min_size` bytes each that the rest of the input
 * could hold; anything larger is corrupt (and would be a huge allocation). */
static size_t get_count(reader *r, size_t min_size, const char *what) {
  const size_t at = r->in.at;
  const uint64_t n = get_u64(r, what);
  if (r->rc) return 0;
  if (n > bb_le_left(&r->in) / min_size) {
    bad(r, at, "record count larger than the input");
    return 0;
  }
  return (size_t)n;
}

static int read_entries(reader *r, bbi_fedround *fr) {
  const size_t d = fr->cfg.param_len;
  if (d > (SIZE_MAX - 18) / 4) return bad(r, 8, "param_len too large");
  const size_t count_at = r->in.at;
  const size_t n = get_count(r, 18 + 4 * d, "the entry count");
  if (r->rc) return r->rc;
  if (n > max_entries(&fr->cfg)) return bad(r, count_at, "more entries than a round holds");
  if (bbi_mem_grow(&fr->alloc, (void **)&fr->entries, &fr->cap_entries, n, sizeof(entry)))
    return r->rc = bb_error_set(r->err, BB_ERR_NOMEM, "fedround snapshot: out of memory");
  for (size_t i = 0; i < n; i++) {
    const size_t at = r->in.at;
    entry e = {{0, {0}}, 0, 0, NULL};
    get_key(r, &e.key);
    e.origin_round = get_u64(r, "a round id");
    e.num_samples = get_u64(r, "num_samples");
    if (r->rc) return r->rc;
    if (i > 0 && key_cmp(&fr->entries[i - 1].key, &e.key) >= 0)
      return bad(r, at, "entries not in strictly ascending key order");
    if (e.origin_round > fr->round_id) return bad(r, at, "entry from a future round");
    if (e.num_samples == 0) return bad(r, at, "entry num_samples is 0");
    e.params = bbi_mem_alloc(&fr->alloc, d * sizeof(float));
    if (!e.params)
      return r->rc = bb_error_set(r->err, BB_ERR_NOMEM, "fedround snapshot: out of memory");
    fr->entries[fr->n_entries++] = e;
    get_floats(r, e.params, d);
    if (r->rc) return r->rc;
  }
  return 0;
}

static int read_recents(reader *r, bbi_fedround *fr) {
  const size_t n = get_count(r, 10, "the recent-contributor count");
  if (r->rc) return r->rc;
  if (bbi_mem_grow(&fr->alloc, (void **)&fr->recents, &fr->cap_recents, n, sizeof(recent)))
    return r->rc = bb_error_set(r->err, BB_ERR_NOMEM, "fedround snapshot: out of memory");
  for (size_t i = 0; i < n; i++) {
    const size_t at = r->in.at;
    recent rec;
    memset(&rec, 0, sizeof rec);
    get_key(r, &rec.key);
    rec.last_round = get_u64(r, "a round id");
    if (r->rc) return r->rc;
    if (i > 0 && key_cmp(&fr->recents[i - 1].key, &rec.key) >= 0)
      return bad(r, at, "recent contributors not in strictly ascending key order");
    if (rec.last_round >= fr->round_id) return bad(r, at, "recent contributor from an open round");
    fr->recents[fr->n_recents++] = rec;
  }
  return 0;
}

int bbi_fedround_restore(const bb_allocator *alloc, const uint8_t *bytes, size_t len,
                        bbi_fedround **out, bb_error *err) {
  if (!out || (!bytes && len)) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "fedround: NULL argument");
  *out = NULL;
  /* Records are parsed and checked first (their errors name a byte offset); the trailing
   * checksum then catches corruption that still parses. */
  if (len < SNAPSHOT_FIXED_V1 + 8)
    return bb_error_set(err, BB_ERR_MALFORMED,
                        "fedround snapshot: %zu bytes is shorter than any snapshot (%d)", len,
                        SNAPSHOT_FIXED_V1 + 8);
  reader r = {bb_le_reader_of(bytes, len - 8), err, 0, 0};
  bbi_fedround *fr = NULL;
  if (!read_header(&r, alloc, &fr) && !read_entries(&r, fr) && !read_recents(&r, fr)) {
    if (fr->step) get_floats(&r, fr->step, fr->cfg.param_len);
    if (!r.rc && fr->ascent) r.rc = bbi_ascent_read(fr->ascent, &r.in, fr->round_id, err);
  }
  if (!r.rc && r.in.at != r.in.len)
    bad(&r, r.in.at, "trailing bytes after the records");
  if (!r.rc && bb_le_get_u64(bytes + len - 8) != bbi_fnv1a64(bytes, len - 8))
    bad(&r, len - 8, "checksum mismatch");
  if (r.rc) {
    bbi_fedround_free(fr);
    return r.rc;
  }
  *out = fr;
  return 0;
}
