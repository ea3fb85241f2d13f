#include "components/aggregators/buffered.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "bb/bytes.h"
#include "util/hash.h"
#include "util/mem.h"

#define MAGIC "BBFB"
#define FORMAT_VERSION 1u

struct bbi_fedbuff {
  const bb_allocator *alloc;
  uint32_t buffer;
  bool deltas;
  uint64_t max_staleness;
  size_t param_len;
  bbi_fedround *fr;  /* the open buffer; its round id is the current version */
  float *versions;   /* (max_staleness + 1) × param_len: version v at slot v mod that */
  float *rebased;    /* param_len floats of scratch */
};

double bbi_fedbuff_staleness_weight(uint64_t staleness) { return 1.0 / sqrt(1.0 + (double)staleness); }

static size_t slots(const bbi_fedbuff *fb) { return (size_t)fb->max_staleness + 1; }

static float *version_at(const bbi_fedbuff *fb, uint64_t version) {
  return fb->versions + (size_t)(version % slots(fb)) * fb->param_len;
}

uint64_t bbi_fedbuff_version(const bbi_fedbuff *fb) { return bbi_fedround_round_id(fb->fr); }
const float *bbi_fedbuff_global(const bbi_fedbuff *fb) { return version_at(fb, bbi_fedbuff_version(fb)); }
size_t bbi_fedbuff_param_len(const bbi_fedbuff *fb) { return fb->param_len; }
size_t bbi_fedbuff_pending(const bbi_fedbuff *fb) { return bbi_fedround_pending(fb->fr); }
uint64_t bbi_fedbuff_window_start(const bbi_fedbuff *fb, uint64_t version) {
  return bbi_fedround_window_start(fb->fr, version);
}

void bbi_fedbuff_free(bbi_fedbuff *fb) {
  if (!fb) return;
  bbi_fedround_free(fb->fr);
  bbi_mem_free(fb->alloc, fb->versions);
  bbi_mem_free(fb->alloc, fb->rebased);
  bbi_mem_free(fb->alloc, fb);
}

/* The buffer and the versions, with nothing held yet. */
static int make(const bb_allocator *alloc, uint32_t buffer, bool deltas, uint64_t max_staleness, size_t param_len,
                bbi_fedbuff **out, bb_error *err) {
  *out = NULL;
  if (!buffer || buffer > BBI_FEDROUND_MAX_ENTRIES || max_staleness > BBI_FEDBUFF_MAX_STALENESS || !param_len ||
      param_len > SIZE_MAX / sizeof(float) / (BBI_FEDBUFF_MAX_STALENESS + 1))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "FedBuff: need 1 <= buffer <= %d, max_staleness <= %d and parameters, got buffer=%u, "
                        "max_staleness=%llu, %zu parameters",
                        BBI_FEDROUND_MAX_ENTRIES, BBI_FEDBUFF_MAX_STALENESS, buffer,
                        (unsigned long long)max_staleness, param_len);
  alloc = alloc ? alloc : bb_default_allocator();
  bbi_fedbuff *fb = bbi_mem_calloc(alloc, 1, sizeof *fb);
  if (!fb) return bb_error_set(err, BB_ERR_NOMEM, "FedBuff: out of memory");
  *fb = (bbi_fedbuff){alloc, buffer, deltas, max_staleness, param_len, NULL, NULL, NULL};
  fb->versions = bbi_mem_calloc(alloc, ((size_t)max_staleness + 1) * param_len, sizeof(float));
  fb->rebased = bbi_mem_calloc(alloc, param_len, sizeof(float));
  if (!fb->versions || !fb->rebased) {
    bbi_fedbuff_free(fb);
    return bb_error_set(err, BB_ERR_NOMEM, "FedBuff: out of memory for %llu versions of %zu parameters",
                        (unsigned long long)max_staleness + 1, param_len);
  }
  *out = fb;
  return 0;
}

int bbi_fedbuff_new(const bb_allocator *alloc, const bbi_fedbuff_config *config, const float *initial,
                    uint64_t now_ns, bbi_fedbuff **out, bb_error *err) {
  bbi_fedbuff *fb = NULL;
  int rc = make(alloc, config->buffer, config->deltas, config->max_staleness, config->closing.param_len, &fb, err);
  if (rc) return rc;
  bbi_fedround_config c = config->closing;
  c.quorum = c.target = config->buffer;
  c.deadline_ns = 0;
  c.late = BBI_FEDROUND_LATE_DROP;
  c.max_staleness = 0;
  c.first_round = 0;
  if ((rc = bbi_fedround_new(fb->alloc, &c, now_ns, &fb->fr, err))) {
    bbi_fedbuff_free(fb);
    return rc;
  }
  if (initial) memcpy(fb->versions, initial, fb->param_len * sizeof(float));
  *out = fb;
  return 0;
}

static int refuse(bbi_fedbuff_status *status, bbi_fedbuff_status why, int code) {
  if (status) *status = why;
  return code;
}

static bbi_fedbuff_status status_of(bbi_fedround_status s) {
  switch (s) {
  case BBI_FEDROUND_ACCEPTED: return BBI_FEDBUFF_ACCEPTED;
  case BBI_FEDROUND_REPLACED: return BBI_FEDBUFF_REPLACED;
  case BBI_FEDROUND_REJECTED_LENGTH: return BBI_FEDBUFF_REJECTED_LENGTH;
  case BBI_FEDROUND_REJECTED_SAMPLES: return BBI_FEDBUFF_REJECTED_SAMPLES;
  case BBI_FEDROUND_REJECTED_NONFINITE: return BBI_FEDBUFF_REJECTED_NONFINITE;
  case BBI_FEDROUND_REJECTED_KEY: return BBI_FEDBUFF_REJECTED_KEY;
  default: return BBI_FEDBUFF_REJECTED_FULL; /* FUTURE and LATE_* cannot happen: the tag is the open round */
  }
}

int bbi_fedbuff_contribute(bbi_fedbuff *fb, uint64_t version, const uint8_t *key, size_t key_len,
                           const float *params, size_t n, uint64_t num_samples, uint64_t now_ns,
                           bbi_fedbuff_status *status, uint64_t *staleness, bb_error *err) {
  const uint64_t now_version = bbi_fedbuff_version(fb);
  if (n != fb->param_len)
    return refuse(status, BBI_FEDBUFF_REJECTED_LENGTH,
                  bb_error_set(err, BB_ERR_TYPE, "FedBuff: %zu parameters where the model has %zu", n,
                               fb->param_len));
  if (version > now_version)
    return refuse(status, BBI_FEDBUFF_REJECTED_FUTURE,
                  bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                               "FedBuff: an update trained from version %llu, which is not made yet (current: %llu)",
                               (unsigned long long)version, (unsigned long long)now_version));
  const uint64_t s = now_version - version;
  if (staleness) *staleness = s;
  if (s > fb->max_staleness)
    return refuse(status, BBI_FEDBUFF_REJECTED_STALE,
                  bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                               "FedBuff: an update trained from version %llu is %llu versions old, past "
                               "max_staleness=%llu",
                               (unsigned long long)version, (unsigned long long)s,
                               (unsigned long long)fb->max_staleness));
  const float *from = version_at(fb, version), *now = version_at(fb, now_version);
  const double w = bbi_fedbuff_staleness_weight(s);
  for (size_t i = 0; i < n; i++) {
    /* a fresh one is its own parameters exactly (no round trip through the delta) */
    const double x = fb->deltas ? (double)now[i] + w * (double)params[i]
                     : s        ? (double)now[i] + w * ((double)params[i] - (double)from[i])
                                : (double)params[i];
    if (!(fabs(x) <= FLT_MAX)) /* a NaN, an infinity, or a step past the float range */
      return refuse(status, BBI_FEDBUFF_REJECTED_NONFINITE,
                    bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                                 "FedBuff: parameter %zu of an update from version %llu is %g: not a finite step", i,
                                 (unsigned long long)version, (double)params[i]));
    fb->rebased[i] = (float)x;
  }
  bbi_fedround_status st = BBI_FEDROUND_ACCEPTED;
  int rc = bbi_fedround_contribute(fb->fr, now_version, key, key_len, fb->rebased, num_samples, now_ns, &st, err);
  if (status) *status = status_of(st);
  return rc;
}

int bbi_fedbuff_poll(bbi_fedbuff *fb, uint64_t now_ns, bbi_fedround_result *result, bb_error *err) {
  const uint64_t v = bbi_fedbuff_version(fb);
  int rc = bbi_fedround_poll(fb->fr, now_ns, version_at(fb, v), result, err);
  if (rc || result->event != BBI_FEDROUND_CLOSED) return rc;
  memcpy(version_at(fb, v + 1), result->params, fb->param_len * sizeof(float));
  return 0;
}

/* ---- snapshot -------------------------------------------------------------------------- */

static size_t held(const bbi_fedbuff *fb) {
  const uint64_t v = bbi_fedbuff_version(fb);
  return v < fb->max_staleness ? (size_t)v + 1 : slots(fb);
}

size_t bbi_fedbuff_snapshot_size(const bbi_fedbuff *fb) {
  return 4 + 4 + 4 + 4 + 8 * 4 + held(fb) * fb->param_len * sizeof(float) + 8 + bbi_fedround_snapshot_size(fb->fr) + 8;
}

int bbi_fedbuff_snapshot(const bbi_fedbuff *fb, uint8_t *buf, size_t cap, bb_error *err) {
  const size_t need = bbi_fedbuff_snapshot_size(fb), m = bbi_fedround_snapshot_size(fb->fr), h = held(fb);
  if (cap < need)
    return bb_error_set(err, BB_ERR_LIMIT, "FedBuff: a snapshot needs %zu bytes, the buffer has %zu", need, cap);
  const uint64_t v = bbi_fedbuff_version(fb);
  bb_le_writer w = bb_le_writer_fixed(buf, cap);
  bb_le_write(&w, MAGIC, 4);
  bb_le_write_u32(&w, FORMAT_VERSION);
  bb_le_write_u32(&w, fb->buffer);
  bb_le_write_u32(&w, fb->deltas ? 1u : 0u);
  bb_le_write_u64(&w, fb->max_staleness);
  bb_le_write_u64(&w, fb->param_len);
  bb_le_write_u64(&w, v);
  bb_le_write_u64(&w, h);
  for (size_t k = 0; k < h; k++) {
    const float *p = version_at(fb, v - (h - 1 - k));
    for (size_t i = 0; i < fb->param_len; i++) bb_le_write_f32(&w, p[i]);
  }
  bb_le_write_u64(&w, m);
  uint8_t *engine = bb_le_write_span(&w, m);
  int rc = engine ? bbi_fedround_snapshot(fb->fr, engine, m, NULL, err) : 0;
  if (rc) return rc;
  bb_le_write_u64(&w, bbi_fnv1a64(buf, w.len));
  return 0;
}

static int malformed(bb_error *err, size_t at, const char *what) {
  return bb_error_set(err, BB_ERR_MALFORMED, "FedBuff: snapshot byte %zu: %s", at, what);
}

int bbi_fedbuff_restore(const bb_allocator *alloc, const uint8_t *bytes, size_t len, bbi_fedbuff **out,
                        bb_error *err) {
  *out = NULL;
  if (len < 4 + 8 || memcmp(bytes, MAGIC, 4) != 0) return malformed(err, 0, "not a FedBuff state");
  if (bb_le_get_u64(bytes + len - 8) != bbi_fnv1a64(bytes, len - 8)) return malformed(err, len - 8, "checksum");
  bb_le_reader r = bb_le_reader_of(bytes, len - 8);
  uint32_t version = 0, buffer = 0, flags = 0;
  uint64_t max_staleness = 0, param_len = 0, v = 0, h = 0, m = 0;
  bb_le_read(&r, NULL, 4);
  if (!bb_le_read_u32(&r, &version)) return malformed(err, r.at, "truncated");
  if (version != FORMAT_VERSION)
    return bb_error_set(err, BB_ERR_UNSUPPORTED, "FedBuff: snapshot format %u, this build reads %u", version,
                        FORMAT_VERSION);
  if (!bb_le_read_u32(&r, &buffer) || !bb_le_read_u32(&r, &flags) || !bb_le_read_u64(&r, &max_staleness) || !bb_le_read_u64(&r, &param_len) ||
      !bb_le_read_u64(&r, &v) || !bb_le_read_u64(&r, &h))
    return malformed(err, r.at, "truncated header");
  if (!buffer || buffer > BBI_FEDROUND_MAX_ENTRIES || flags > 1 || max_staleness > BBI_FEDBUFF_MAX_STALENESS || !param_len ||
      param_len > bb_le_left(&r) / sizeof(float))
    return malformed(err, 8, "buffer, flags, max_staleness or the parameter count out of range");
  const uint64_t want_held = v < max_staleness ? v + 1 : max_staleness + 1;
  if (h != want_held || h > bb_le_left(&r) / sizeof(float) / param_len)
    return malformed(err, 40, "held versions disagree with the version and max_staleness");
  bbi_fedbuff *fb = NULL;
  int rc = make(alloc, buffer, flags == 1, max_staleness, (size_t)param_len, &fb, err);
  if (rc) return rc;
  for (uint64_t k = 0; k < h; k++) {
    float *p = version_at(fb, v - (h - 1 - k));
    for (size_t i = 0; i < fb->param_len; i++) bb_le_read_f32(&r, &p[i]);
  }
  const uint8_t *engine = NULL;
  if (!bb_le_read_u64(&r, &m) || m != bb_le_left(&r) || !(engine = bb_le_read_span(&r, (size_t)m))) {
    bbi_fedbuff_free(fb);
    return malformed(err, r.at, "the rounds engine's state does not fill the rest");
  }
  if ((rc = bbi_fedround_restore(fb->alloc, engine, (size_t)m, &fb->fr, err))) {
    bbi_fedbuff_free(fb);
    return rc;
  }
  if (bbi_fedround_param_len(fb->fr) != fb->param_len || bbi_fedround_round_id(fb->fr) != v ||
      bbi_fedround_pending(fb->fr) >= buffer) {
    bbi_fedbuff_free(fb);
    return malformed(err, r.at - (size_t)m, "the rounds engine's state disagrees with the versions");
  }
  *out = fb;
  return 0;
}
