/* The ascent screen (see ascent.h). Contributors are kept sorted by key, each with its
 * trust and, while it can still be compared, its last step; the references of the last
 * BBI_ASCENT_RING closed rounds sit in a ring, slot r % BBI_ASCENT_RING holding round r. */
#include "components/aggregators/ascent.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "components/aggregators/robust.h"
#include "util/mem.h"

/* A round judges only when at least this many of its updates could be scored: a median of
 * fewer says nothing about a majority. */
#define JUDGED_AT_LEAST 3
/* A score counts against its sender only this many robust standard deviations (1.4826 ×
 * the median absolute deviation) below the round's median. */
#define OUTLIER_SIGMAS 2.0
/* The share of a sender's trust a judged round keeps (the rest is the round's evidence). */
#define MEMORY 0.5
/* The trust an honest sender's noise may reach: below it an update loses weight. */
#define NOISE_TRUST (-0.1)

typedef struct trail {
  uint8_t key_len;
  uint8_t key[BBI_ASCENT_KEY_MAX];
  uint64_t round; /* the round of its last fresh update */
  double trust;
  float *step; /* that update minus that round's reference, or NULL once too old to compare */
} trail;

struct bbi_ascent {
  bb_allocator alloc;
  size_t d;
  float *refs; /* BBI_ASCENT_RING × d, made with the first round remembered */
  uint64_t ref_round[BBI_ASCENT_RING];
  bool ref_held[BBI_ASCENT_RING];
  trail *trails;
  size_t n_trails, cap_trails;
  float **spare; /* step buffers bbi_ascent_reserve set aside for commit */
  size_t n_spare, cap_spare;
};

int bbi_ascent_new(const bb_allocator *alloc, size_t param_len, bbi_ascent **out, bb_error *err) {
  if (!alloc) alloc = bb_default_allocator();
  *out = NULL;
  bbi_ascent *a = bbi_mem_calloc(alloc, 1, sizeof *a);
  if (!a) return bb_error_set(err, BB_ERR_NOMEM, "ascent screen: out of memory");
  a->alloc = *alloc;
  a->d = param_len;
  *out = a;
  return 0;
}

void bbi_ascent_free(bbi_ascent *a) {
  if (!a) return;
  for (size_t i = 0; i < a->n_trails; i++) bbi_mem_free(&a->alloc, a->trails[i].step);
  for (size_t i = 0; i < a->n_spare; i++) bbi_mem_free(&a->alloc, a->spare[i]);
  bbi_mem_free(&a->alloc, a->trails);
  bbi_mem_free(&a->alloc, a->spare);
  bbi_mem_free(&a->alloc, a->refs);
  bbi_mem_free(&a->alloc, a);
}

static int key_cmp(const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len) {
  const size_t n = a_len < b_len ? a_len : b_len;
  const int c = n ? memcmp(a, b, n) : 0;
  if (c) return c;
  return (a_len > b_len) - (a_len < b_len);
}

/* Index of the key's trail, or where it would go (*found says which). */
static size_t find(const bbi_ascent *a, const uint8_t *key, size_t key_len, bool *found) {
  size_t lo = 0, hi = a->n_trails;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    const int c = key_cmp(a->trails[mid].key, a->trails[mid].key_len, key, key_len);
    if (c == 0) {
      *found = true;
      return mid;
    }
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  *found = false;
  return lo;
}

static const trail *trail_of(const bbi_ascent *a, const bbi_ascent_update *u) {
  bool found;
  const size_t at = find(a, u->key, u->key_len, &found);
  return found ? &a->trails[at] : NULL;
}

/* Round `round`'s reference while the ring holds it, else NULL. */
static const float *reference_of(const bbi_ascent *a, uint64_t round) {
  const size_t slot = round % BBI_ASCENT_RING;
  return a->ref_held[slot] && a->ref_round[slot] == round ? a->refs + slot * a->d : NULL;
}

/* -cos(this step - the trail's step, ref - the trail's reference), or NAN when the two
 * cannot be compared (no step, too old, or either difference zero). */
static double score(const bbi_ascent *a, const trail *t, uint64_t round, const float *ref, const float *params) {
  if (!t->step || t->round >= round || round - t->round > BBI_ASCENT_RING) return NAN;
  const float *before = reference_of(a, t->round);
  if (!before) return NAN;
  double dot = 0.0, changed = 0.0, moved = 0.0;
  for (size_t j = 0; j < a->d; j++) {
    const double r = ref ? (double)ref[j] : 0.0;
    const double change = ((double)params[j] - r) - (double)t->step[j], move = r - (double)before[j];
    dot += change * move;
    changed += change * change;
    moved += move * move;
  }
  if (!(changed > 0 && moved > 0 && isfinite(dot) && isfinite(changed * moved))) return NAN;
  const double s = -dot / sqrt(changed) / sqrt(moved);
  return s > 1 ? 1 : s < -1 ? -1 : s;
}

/* Where a judged round moves each scored sender's trust: a negative score that lies
 * OUTLIER_SIGMAS below the round's median as itself, any other score as max(0, score) — an
 * honest sender's noise, however negative, never counts against it. A round is judged
 * when it has JUDGED_AT_LEAST scores whose median lies a robust standard deviation above
 * zero (its descent steps answer clearly); otherwise nothing moves. */
static void judge(double *trust, const double *scores, size_t n, double *spread) {
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (!isnan(scores[i])) spread[m++] = scores[i];
  if (m < JUDGED_AT_LEAST) return;
  const double median = bbi_robust_median_f64(spread, m);
  for (size_t j = 0; j < m; j++) spread[j] = fabs(spread[j] - median);
  const double sigma = 1.4826 * bbi_robust_median_f64(spread, m);
  if (!(median > sigma)) return;
  const double cut = median - OUTLIER_SIGMAS * sigma;
  for (size_t i = 0; i < n; i++) {
    if (isnan(scores[i])) continue;
    const double evidence = scores[i] < 0 && scores[i] < cut ? scores[i] : scores[i] > 0 ? scores[i] : 0.0;
    trust[i] = MEMORY * trust[i] + (1 - MEMORY) * evidence;
  }
}

void bbi_ascent_weigh(const bbi_ascent *a, uint64_t round, const float *ref, const bbi_ascent_update *u, size_t n,
                     double tau, double *trust, double *weight, double *scratch) {
  double *scores = scratch;
  for (size_t i = 0; i < n; i++) {
    const trail *t = trail_of(a, &u[i]);
    trust[i] = t ? t->trust : 0.0;
    scores[i] = t && u[i].fresh ? score(a, t, round, ref, u[i].params) : NAN;
  }
  judge(trust, scores, n, scratch + n);
  for (size_t i = 0; i < n; i++) {
    const double w = 1.0 + (trust[i] - NOISE_TRUST) / tau;
    weight[i] = w > 1 ? 1 : w < 0 ? 0 : w;
  }
}

int bbi_ascent_reserve(bbi_ascent *a, const bbi_ascent_update *u, size_t n, bb_error *err) {
  size_t new_trails = 0, steps = 0;
  for (size_t i = 0; i < n; i++) {
    if (!u[i].fresh) continue;
    const trail *t = trail_of(a, &u[i]);
    new_trails += !t;
    steps += !t || !t->step;
  }
  if (!a->refs && !(a->refs = bbi_mem_calloc(&a->alloc, BBI_ASCENT_RING * a->d, sizeof *a->refs)))
    return bb_error_set(err, BB_ERR_NOMEM, "ascent screen: out of memory for %d references of %zu floats",
                        BBI_ASCENT_RING, a->d);
  if (bbi_mem_grow(&a->alloc, (void **)&a->trails, &a->cap_trails, a->n_trails + new_trails, sizeof(trail)) ||
      bbi_mem_grow(&a->alloc, (void **)&a->spare, &a->cap_spare, steps, sizeof(float *)))
    return bb_error_set(err, BB_ERR_NOMEM, "ascent screen: out of memory for %zu contributors", new_trails);
  while (a->n_spare < steps) {
    float *step = bbi_mem_alloc(&a->alloc, a->d * sizeof *step);
    if (!step) return bb_error_set(err, BB_ERR_NOMEM, "ascent screen: out of memory for %zu steps", steps);
    a->spare[a->n_spare++] = step;
  }
  return 0;
}

static void remember_step(bbi_ascent *a, const bbi_ascent_update *u, uint64_t round, const float *ref, double trust) {
  bool found;
  const size_t at = find(a, u->key, u->key_len, &found);
  if (!found) {
    memmove(a->trails + at + 1, a->trails + at, (a->n_trails - at) * sizeof(trail));
    trail *t = &a->trails[at];
    memset(t, 0, sizeof *t);
    t->key_len = (uint8_t)u->key_len;
    memcpy(t->key, u->key, u->key_len);
    a->n_trails++;
  }
  trail *t = &a->trails[at];
  if (!t->step) t->step = a->spare[--a->n_spare];
  t->round = round;
  t->trust = trust;
  for (size_t j = 0; j < a->d; j++) {
    const double step = (double)u->params[j] - (ref ? (double)ref[j] : 0.0);
    t->step[j] = (float)(step > FLT_MAX ? FLT_MAX : step < -FLT_MAX ? -FLT_MAX : step);
  }
}

/* Frees the steps no later round can compare with and drops the trails forgotten. */
static void forget(bbi_ascent *a, uint64_t round) {
  size_t kept = 0;
  for (size_t i = 0; i < a->n_trails; i++) {
    trail *t = &a->trails[i];
    if (t->step && t->round + BBI_ASCENT_RING <= round) {
      bbi_mem_free(&a->alloc, t->step);
      t->step = NULL;
    }
    if (t->round + BBI_ASCENT_FORGET > round) a->trails[kept++] = *t;
  }
  a->n_trails = kept;
}

void bbi_ascent_commit(bbi_ascent *a, uint64_t round, const float *ref, const bbi_ascent_update *u, size_t n,
                      const double *trust) {
  for (size_t i = 0; i < n; i++)
    if (u[i].fresh) remember_step(a, &u[i], round, ref, trust[i]);
  const size_t slot = round % BBI_ASCENT_RING;
  float *held = a->refs + slot * a->d;
  if (ref) memcpy(held, ref, a->d * sizeof *held);
  else memset(held, 0, a->d * sizeof *held);
  a->ref_round[slot] = round;
  a->ref_held[slot] = true;
  forget(a, round);
}

/* ---- snapshot ---------------------------------------------------------------------- */

size_t bbi_ascent_snapshot_size(const bbi_ascent *a) {
  size_t n = 8;
  for (size_t s = 0; s < BBI_ASCENT_RING; s++) n += 1 + (a->ref_held[s] ? 8 + 4 * a->d : 0);
  for (size_t i = 0; i < a->n_trails; i++) n += 1 + a->trails[i].key_len + 17 + (a->trails[i].step ? 4 * a->d : 0);
  return n;
}

static void write_floats(bb_le_writer *w, const float *x, size_t n) {
  for (size_t j = 0; j < n; j++) bb_le_write_f32(w, x[j]);
}

/* Per slot: u8 held, then u64 round and the reference; u64 count, then per contributor:
 * u8 key length, the key, u64 round, f64 trust, u8 has step, then the step. */
void bbi_ascent_write(const bbi_ascent *a, bb_le_writer *w) {
  for (size_t s = 0; s < BBI_ASCENT_RING; s++) {
    bb_le_write_u8(w, a->ref_held[s]);
    if (!a->ref_held[s]) continue;
    bb_le_write_u64(w, a->ref_round[s]);
    write_floats(w, a->refs + s * a->d, a->d);
  }
  bb_le_write_u64(w, a->n_trails);
  for (size_t i = 0; i < a->n_trails; i++) {
    const trail *t = &a->trails[i];
    uint64_t trust;
    memcpy(&trust, &t->trust, sizeof trust);
    bb_le_write_u8(w, t->key_len);
    bb_le_write(w, t->key, t->key_len);
    bb_le_write_u64(w, t->round);
    bb_le_write_u64(w, trust);
    bb_le_write_u8(w, t->step != NULL);
    if (t->step) write_floats(w, t->step, a->d);
  }
}

static int malformed(bb_error *err, size_t at, const char *what) {
  return bb_error_set(err, BB_ERR_MALFORMED, "fedround snapshot: ascent screen: %s at byte %zu", what, at);
}

static int read_floats(bb_le_reader *in, float *x, size_t n, bb_error *err) {
  for (size_t j = 0; j < n; j++) {
    const size_t at = in->at;
    if (!bb_le_read_f32(in, &x[j])) return malformed(err, at, "truncated floats");
    if (!isfinite(x[j])) return malformed(err, at, "non-finite float");
  }
  return 0;
}

static int read_refs(bbi_ascent *a, bb_le_reader *in, uint64_t open_round, bb_error *err) {
  for (size_t s = 0; s < BBI_ASCENT_RING; s++) {
    const size_t at = in->at;
    uint8_t held;
    if (!bb_le_read_u8(in, &held)) return malformed(err, at, "truncated reference flag");
    if (held > 1) return malformed(err, at, "reference flag is not 0 or 1");
    if (!held) continue;
    uint64_t round;
    if (!bb_le_read_u64(in, &round)) return malformed(err, at + 1, "truncated reference round");
    if (round >= open_round || round % BBI_ASCENT_RING != s) return malformed(err, at + 1, "reference of the wrong round");
    if (a->d > bb_le_left(in) / 4) return malformed(err, at + 9, "reference longer than the input");
    if (!a->refs && !(a->refs = bbi_mem_calloc(&a->alloc, BBI_ASCENT_RING * a->d, sizeof *a->refs)))
      return bb_error_set(err, BB_ERR_NOMEM, "fedround snapshot: out of memory");
    a->ref_round[s] = round;
    a->ref_held[s] = true;
    const int rc = read_floats(in, a->refs + s * a->d, a->d, err);
    if (rc) return rc;
  }
  return 0;
}

static int read_trail(bbi_ascent *a, bb_le_reader *in, uint64_t open_round, bb_error *err) {
  const size_t at = in->at;
  trail t;
  memset(&t, 0, sizeof t);
  uint64_t trust_bits;
  uint8_t has_step;
  if (!bb_le_read_u8(in, &t.key_len)) return malformed(err, at, "truncated key length");
  if (t.key_len == 0 || t.key_len > BBI_ASCENT_KEY_MAX) return malformed(err, at, "key length out of range");
  if (!bb_le_read(in, t.key, t.key_len) || !bb_le_read_u64(in, &t.round) || !bb_le_read_u64(in, &trust_bits) ||
      !bb_le_read_u8(in, &has_step))
    return malformed(err, at, "truncated contributor");
  memcpy(&t.trust, &trust_bits, sizeof t.trust);
  if (a->n_trails && key_cmp(a->trails[a->n_trails - 1].key, a->trails[a->n_trails - 1].key_len, t.key, t.key_len) >= 0)
    return malformed(err, at, "contributors not in strictly ascending key order");
  if (t.round >= open_round) return malformed(err, at, "contributor from a round not closed");
  if (!(t.trust >= -1 && t.trust <= 1)) return malformed(err, at, "trust outside [-1, 1]");
  if (has_step > 1) return malformed(err, at, "step flag is not 0 or 1");
  if (has_step && a->d > bb_le_left(in) / 4) return malformed(err, in->at, "step longer than the input");
  if (has_step && !(t.step = bbi_mem_alloc(&a->alloc, a->d * sizeof *t.step)))
    return bb_error_set(err, BB_ERR_NOMEM, "fedround snapshot: out of memory");
  a->trails[a->n_trails++] = t; /* owned by a from here, freed with it on failure */
  return has_step ? read_floats(in, t.step, a->d, err) : 0;
}

int bbi_ascent_read(bbi_ascent *a, bb_le_reader *in, uint64_t open_round, bb_error *err) {
  int rc = read_refs(a, in, open_round, err);
  if (rc) return rc;
  const size_t at = in->at;
  uint64_t n;
  if (!bb_le_read_u64(in, &n)) return malformed(err, at, "truncated contributor count");
  if (n > bb_le_left(in) / 19) return malformed(err, at, "contributor count larger than the input");
  if (bbi_mem_grow(&a->alloc, (void **)&a->trails, &a->cap_trails, (size_t)n, sizeof(trail)))
    return bb_error_set(err, BB_ERR_NOMEM, "fedround snapshot: out of memory");
  for (uint64_t i = 0; i < n && !rc; i++) rc = read_trail(a, in, open_round, err);
  return rc;
}
