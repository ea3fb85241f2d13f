/* Top-k sparse vectors: selection, encoding and bounded decoding; the layout is in
 * sparse.h. Half-precision values use the tensor layer's conversions, as the float16 codec
 * does. */
#include "components/codecs/sparse.h"

#include <math.h>

#include "bb/bytes.h"
#include "bb/tensor.h"

static size_t value_width(bbi_sparse_values values) { return values == BBI_SPARSE_F16 ? 2 : 4; }

size_t bbi_sparse_encoded_size(size_t k, bbi_sparse_values values) {
  const size_t entry = 4 + value_width(values);
  if ((uint64_t)k > BBI_SPARSE_MAX_LEN || k > (SIZE_MAX - BBI_SPARSE_HEADER) / entry) return 0;
  return BBI_SPARSE_HEADER + k * entry;
}

size_t bbi_sparse_keep(size_t n, double fraction) {
  if (n == 0) return 0;
  double k = nearbyint(fraction * (double)n);
  if (!(k >= 1.0)) return 1;
  return k >= (double)n ? n : (size_t)k;
}

/* ---- selection ------------------------------------------------------------------------- */

/* Whether entry a ranks below entry b: a smaller magnitude, or the same and a higher index. */
static bool ranks_below(const float *x, uint32_t a, uint32_t b) {
  const float ma = fabsf(x[a]), mb = fabsf(x[b]);
  return ma < mb || (ma == mb && a > b);
}

/* Restores the heap below position i of heap[0..k), the lowest-ranked entry on top. */
static void sift_down(const float *x, uint32_t *heap, size_t k, size_t i) {
  for (;;) {
    size_t low = i, l = 2 * i + 1, r = l + 1;
    if (l < k && ranks_below(x, heap[l], heap[low])) low = l;
    if (r < k && ranks_below(x, heap[r], heap[low])) low = r;
    if (low == i) return;
    uint32_t t = heap[i];
    heap[i] = heap[low];
    heap[low] = t;
    i = low;
  }
}

/* Moves v[i] down the max-heap v[0..end) until both children are smaller. */
static void sift_down_max(uint32_t *v, size_t end, size_t i) {
  for (;;) {
    size_t big = i, l = 2 * i + 1, r = l + 1;
    if (l < end && v[l] > v[big]) big = l;
    if (r < end && v[r] > v[big]) big = r;
    if (big == i) return;
    uint32_t t = v[i];
    v[i] = v[big];
    v[big] = t;
    i = big;
  }
}

/* Sorts v[0..k) ascending, in place (heapsort: no recursion, no allocation). */
static void sort_indices(uint32_t *v, size_t k) {
  for (size_t i = k / 2; i-- > 0;) sift_down_max(v, k, i);
  for (size_t end = k; end > 1; end--) {
    uint32_t t = v[0];
    v[0] = v[end - 1];
    v[end - 1] = t;
    sift_down_max(v, end - 1, 0);
  }
}

int bbi_sparse_select(const float *x, size_t n, size_t k, uint32_t *idx, bb_error *err) {
  if ((uint64_t)n > BBI_SPARSE_MAX_LEN)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "top-k: %zu values exceed the u32 length", n);
  if (k > n) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "top-k: k = %zu of %zu values", k, n);
  if ((n && !x) || (k && !idx)) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "top-k: NULL input or output");
  for (size_t i = 0; i < n; i++)
    if (!isfinite(x[i]))
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "top-k: value %zu is %g; only finite values can be sent", i,
                          (double)x[i]);
  if (k == 0) return 0;
  /* a heap of the k best so far, the lowest-ranked on top */
  for (size_t i = 0; i < k; i++) idx[i] = (uint32_t)i;
  for (size_t i = k / 2; i-- > 0;) sift_down(x, idx, k, i);
  for (size_t i = k; i < n; i++) {
    if (!ranks_below(x, idx[0], (uint32_t)i)) continue;
    idx[0] = (uint32_t)i;
    sift_down(x, idx, k, 0);
  }
  sort_indices(idx, k);
  return 0;
}

/* ---- encoding -------------------------------------------------------------------------- */

float bbi_sparse_stored(float v, bbi_sparse_values values) {
  return values == BBI_SPARSE_F16 ? bb_f16_to_f32(bb_f32_to_f16(v)) : v;
}

int bbi_sparse_encode(const float *x, size_t n, const uint32_t *idx, size_t k, bbi_sparse_values values,
                      uint8_t *out, size_t cap, size_t *written, bb_error *err) {
  if (values != BBI_SPARSE_F32 && values != BBI_SPARSE_F16)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "top-k: unknown value type %d", (int)values);
  const size_t need = bbi_sparse_encoded_size(k, values);
  if ((uint64_t)n > BBI_SPARSE_MAX_LEN || need == 0)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "top-k: %zu values exceed the u32 length", n);
  if (k > n || (n && !x) || (k && !idx) || !out)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "top-k: %zu entries of %zu values, or a NULL buffer", k, n);
  if (cap < need)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "top-k: %zu entries need %zu bytes, the buffer has %zu", k, need,
                        cap);
  for (size_t j = 0; j < k; j++)
    if (idx[j] >= n || (j && idx[j] <= idx[j - 1]))
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "top-k: index %zu (%lu) is not increasing below %zu", j,
                          (unsigned long)idx[j], n);
  bb_le_put_u32(out, (uint32_t)n);
  bb_le_put_u32(out + 4, (uint32_t)k);
  out[8] = (uint8_t)values;
  uint8_t *indices = out + BBI_SPARSE_HEADER, *vals = indices + 4 * k;
  for (size_t j = 0; j < k; j++) {
    const float v = x[idx[j]];
    bb_le_put_u32(indices + 4 * j, idx[j]);
    if (values == BBI_SPARSE_F16)
      bb_le_put_u16(vals + 2 * j, bb_f32_to_f16(v));
    else
      bb_le_put_f32(vals + 4 * j, v);
  }
  if (written) *written = need;
  return 0;
}

/* ---- decoding -------------------------------------------------------------------------- */

/* Records why bytes were refused and gives the refusal's code. */
static int refused(bbi_sparse_fault *fault, bbi_sparse_fault why) {
  if (fault) *fault = why;
  return BB_ERR_MALFORMED;
}

int bbi_sparse_count(const uint8_t *in, size_t len, size_t max_n, size_t expect, size_t *n, bbi_sparse_fault *fault,
                     bb_error *err) {
  if (fault) *fault = BBI_SPARSE_OK;
  if (len < BBI_SPARSE_HEADER || !in)
    return bb_error_set(err, refused(fault, BBI_SPARSE_BAD_LENGTH), "top-k: %zu bytes end inside the %d-byte header",
                        len, BBI_SPARSE_HEADER);
  const size_t dense = bb_le_get_u32(in), k = bb_le_get_u32(in + 4);
  const unsigned type = in[8];
  if (type != BBI_SPARSE_F32 && type != BBI_SPARSE_F16)
    return bb_error_set(err, refused(fault, BBI_SPARSE_BAD_LENGTH),
                        "top-k: the value type at byte 8 is %u, not 1 (float32) or 2 (float16)", type);
  if (k > dense)
    return bb_error_set(err, refused(fault, BBI_SPARSE_BAD_COUNT),
                        "top-k: the count at byte 4 says %zu entries of a vector of %zu", k, dense);
  if (expect && dense != expect)
    return bb_error_set(err, refused(fault, BBI_SPARSE_BAD_EXPECTED),
                        "top-k: the length at byte 0 is %zu; the reference has %zu values", dense, expect);
  if (dense > max_n)
    return bb_error_set(err, refused(fault, BBI_SPARSE_BAD_COUNT),
                        "top-k: the length at byte 0 is %zu; this decoder takes vectors of %zu at most", dense, max_n);
  const uint64_t need = BBI_SPARSE_HEADER + (uint64_t)k * (4 + value_width((bbi_sparse_values)type));
  if ((uint64_t)len != need)
    return bb_error_set(err, refused(fault, BBI_SPARSE_BAD_LENGTH), "top-k: %zu entries take %llu bytes, but there are %zu",
                        k, (unsigned long long)need, len);
  *n = dense;
  return 0;
}

int bbi_sparse_decode(const uint8_t *in, size_t len, float *out, size_t n, bbi_sparse_fault *fault, bb_error *err) {
  size_t dense = 0;
  int rc = bbi_sparse_count(in, len, n, n, &dense, fault, err);
  if (rc) return rc;
  if (n && !out) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "top-k: NULL output");
  const size_t k = bb_le_get_u32(in + 4);
  const bbi_sparse_values type = (bbi_sparse_values)in[8];
  const size_t width = value_width(type);
  const uint8_t *indices = in + BBI_SPARSE_HEADER, *vals = indices + 4 * k;
  for (size_t i = 0; i < n; i++) out[i] = 0.0f;
  for (size_t j = 0; j < k; j++) {
    const size_t i = bb_le_get_u32(indices + 4 * j);
    if (i >= n || (j && i <= bb_le_get_u32(indices + 4 * (j - 1))))
      return bb_error_set(err, refused(fault, BBI_SPARSE_BAD_INDEX),
                          "top-k: the index at byte %zu is %zu: not above the one before it and below %zu",
                          BBI_SPARSE_HEADER + 4 * j, i, n);
    const float v = type == BBI_SPARSE_F16 ? bb_f16_to_f32(bb_le_get_u16(vals + 2 * j)) : bb_le_get_f32(vals + 4 * j);
    if (!isfinite(v))
      return bb_error_set(err, refused(fault, BBI_SPARSE_BAD_VALUE), "top-k: the value at byte %zu is not finite",
                          (size_t)(vals - in) + j * width);
    out[i] = v;
  }
  return 0;
}
