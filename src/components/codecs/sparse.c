/* Top-k sparse vectors: selection, encoding and bounded decoding; the layout is in
 * sparse.h. Float16 and uint8 values travel as the dense codecs encode them (quant.h), and
 * are decoded by the same code. */
#include "components/codecs/sparse.h"

#include <math.h>

#include "bb/bytes.h"
#include "components/codecs/quant.h"
#include "tensor/kernels/kernels.h"

static size_t bitmap_bytes(size_t n) { return n / 8 + (n % 8 != 0); }

bbi_sparse_indices bbi_sparse_index_form(size_t n, size_t k) {
  return k <= SIZE_MAX / 4 && 4 * k <= bitmap_bytes(n) ? BBI_SPARSE_LIST : BBI_SPARSE_BITMAP;
}

/* Bytes of the index block and of the value block (0 when they do not fit a size_t). */
static size_t index_bytes(size_t n, size_t k, bbi_sparse_indices form) {
  return form == BBI_SPARSE_BITMAP ? bitmap_bytes(n) : k <= SIZE_MAX / 4 ? 4 * k : 0;
}
static size_t value_bytes(size_t k, bbi_sparse_values values) {
  switch (values) {
  case BBI_SPARSE_F32: return k <= SIZE_MAX / 4 ? 4 * k : 0;
  case BBI_SPARSE_F16: return bbi_quant_f16_encoded_size(k);
  case BBI_SPARSE_U8: return bbi_quant_u8_encoded_size(k);
  }
  return 0;
}

size_t bbi_sparse_encoded_size(size_t n, size_t k, bbi_sparse_values values) {
  if ((uint64_t)n > BBI_SPARSE_MAX_LEN || k > n) return 0;
  const size_t ib = index_bytes(n, k, bbi_sparse_index_form(n, k)), vb = value_bytes(k, values);
  if ((k && (!ib || !vb)) || ib > SIZE_MAX - BBI_SPARSE_HEADER - vb) return 0;
  return BBI_SPARSE_HEADER + ib + vb;
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
  const size_t bad = bbi_f32_first_nonfinite(x, n);
  if (bad < n)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "top-k: value %zu is %g; only finite values can be sent", bad,
                        (double)x[bad]);
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

/* The value block of the k values in kept[] at out (value_bytes of them), then kept[] as
 * the receiver will decode them. */
static int write_values(float *kept, size_t k, bbi_sparse_values values, uint8_t *out, size_t len, bb_error *err) {
  int rc = 0;
  switch (values) {
  case BBI_SPARSE_F32:
    for (size_t j = 0; j < k; j++) bb_le_put_f32(out + 4 * j, kept[j]);
    return 0;
  case BBI_SPARSE_F16:
    if (!(rc = bbi_quant_f16_encode(kept, k, out, len, NULL, err))) rc = bbi_quant_f16_decode(out, len, kept, k, NULL, err);
    return rc;
  case BBI_SPARSE_U8:
    if (!(rc = bbi_quant_u8_encode(kept, k, out, len, NULL, err))) rc = bbi_quant_u8_decode(out, len, kept, k, NULL, err);
    return rc;
  }
  return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "top-k: unknown value form %d", (int)values);
}

int bbi_sparse_encode(const float *x, size_t n, const uint32_t *idx, size_t k, bbi_sparse_values values,
                      uint8_t *out, size_t cap, size_t *written, float *kept, bb_error *err) {
  if (values != BBI_SPARSE_F32 && values != BBI_SPARSE_F16 && values != BBI_SPARSE_U8)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "top-k: unknown value form %d", (int)values);
  const size_t need = bbi_sparse_encoded_size(n, k, values);
  if (need == 0) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "top-k: %zu entries of %zu values do not fit", k, n);
  if ((n && !x) || (k && (!idx || !kept)) || !out)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "top-k: a NULL input or output");
  if (cap < need)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "top-k: %zu entries need %zu bytes, the buffer has %zu", k, need,
                        cap);
  for (size_t j = 0; j < k; j++) {
    if (idx[j] >= n || (j && idx[j] <= idx[j - 1]))
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "top-k: index %zu (%lu) is not increasing below %zu", j,
                          (unsigned long)idx[j], n);
    if (!isfinite(x[idx[j]]))
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "top-k: value %lu is not finite", (unsigned long)idx[j]);
    kept[j] = x[idx[j]];
  }
  const bbi_sparse_indices form = bbi_sparse_index_form(n, k);
  const size_t ib = index_bytes(n, k, form);
  bb_le_put_u32(out, (uint32_t)n);
  bb_le_put_u32(out + 4, (uint32_t)k);
  out[8] = (uint8_t)form;
  out[9] = (uint8_t)values;
  uint8_t *indices = out + BBI_SPARSE_HEADER;
  if (form == BBI_SPARSE_BITMAP) {
    for (size_t b = 0; b < ib; b++) indices[b] = 0;
    for (size_t j = 0; j < k; j++) indices[idx[j] / 8] |= (uint8_t)(1u << (idx[j] % 8));
  } else {
    for (size_t j = 0; j < k; j++) bb_le_put_u32(indices + 4 * j, idx[j]);
  }
  int rc = write_values(kept, k, values, indices + ib, need - BBI_SPARSE_HEADER - ib, err);
  if (!rc && written) *written = need;
  return rc;
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
  const unsigned form = in[8], values = in[9];
  if (form != BBI_SPARSE_LIST && form != BBI_SPARSE_BITMAP)
    return bb_error_set(err, refused(fault, BBI_SPARSE_BAD_LENGTH),
                        "top-k: the index form at byte 8 is %u, not 1 (list) or 2 (bitmap)", form);
  if (values != BBI_SPARSE_F32 && values != BBI_SPARSE_F16 && values != BBI_SPARSE_U8)
    return bb_error_set(err, refused(fault, BBI_SPARSE_BAD_LENGTH),
                        "top-k: the value form at byte 9 is %u, not 1 (float32), 2 (float16) or 3 (uint8)", values);
  if (k > dense)
    return bb_error_set(err, refused(fault, BBI_SPARSE_BAD_COUNT),
                        "top-k: the count at byte 4 says %zu entries of a vector of %zu", k, dense);
  if (expect && dense != expect)
    return bb_error_set(err, refused(fault, BBI_SPARSE_BAD_EXPECTED),
                        "top-k: the length at byte 0 is %zu; the reference has %zu values", dense, expect);
  if (dense > max_n)
    return bb_error_set(err, refused(fault, BBI_SPARSE_BAD_COUNT),
                        "top-k: the length at byte 0 is %zu; this decoder takes vectors of %zu at most", dense, max_n);
  /* with n and k bounded by u32, these sums fit 64 bits */
  const uint64_t need = (uint64_t)BBI_SPARSE_HEADER + index_bytes(dense, k, (bbi_sparse_indices)form) +
                        value_bytes(k, (bbi_sparse_values)values);
  if ((uint64_t)len != need)
    return bb_error_set(err, refused(fault, BBI_SPARSE_BAD_LENGTH), "top-k: %zu entries take %llu bytes, but there are %zu",
                        k, (unsigned long long)need, len);
  *n = dense;
  return 0;
}

/* Checks the index block: a list strictly increasing below n, or a bitmap with exactly k
 * bits set, none at or past n. */
static int check_indices(const uint8_t *block, bbi_sparse_indices form, size_t n, size_t k, bbi_sparse_fault *fault,
                         bb_error *err) {
  if (form == BBI_SPARSE_LIST) {
    for (size_t j = 0; j < k; j++) {
      const size_t i = bb_le_get_u32(block + 4 * j);
      if (i >= n || (j && i <= bb_le_get_u32(block + 4 * (j - 1))))
        return bb_error_set(err, refused(fault, BBI_SPARSE_BAD_INDEX),
                            "top-k: the index at byte %zu is %zu: not above the one before it and below %zu",
                            BBI_SPARSE_HEADER + 4 * j, i, n);
    }
    return 0;
  }
  size_t set = 0;
  const size_t bytes = bitmap_bytes(n);
  for (size_t b = 0; b < bytes; b++) {
    unsigned byte = block[b];
    if (b == bytes - 1 && n % 8 && (byte >> (n % 8)))
      return bb_error_set(err, refused(fault, BBI_SPARSE_BAD_INDEX), "top-k: the bitmap's byte %zu sets bits past %zu",
                          BBI_SPARSE_HEADER + b, n);
    for (; byte; byte &= byte - 1) set++;
  }
  if (set != k)
    return bb_error_set(err, refused(fault, BBI_SPARSE_BAD_INDEX), "top-k: the bitmap sets %zu bits; the count says %zu",
                        set, k);
  return 0;
}

/* The k values of the value block into out[0..k), each finite. */
static int read_values(const uint8_t *block, size_t len, bbi_sparse_values values, float *out, size_t k,
                       size_t offset, bbi_sparse_fault *fault, bb_error *err) {
  int rc = 0;
  size_t got = k;
  if (values == BBI_SPARSE_F32)
    for (size_t j = 0; j < k; j++) out[j] = bb_le_get_f32(block + 4 * j);
  else if (values == BBI_SPARSE_F16)
    rc = bbi_quant_f16_decode(block, len, out, k, &got, err);
  else
    rc = bbi_quant_u8_decode(block, len, out, k, &got, err);
  if (rc || got != k)
    return bb_error_set(err, refused(fault, BBI_SPARSE_BAD_VALUE), "top-k: the value block at byte %zu does not hold %zu values",
                        offset, k);
  const size_t bad = bbi_f32_first_nonfinite(out, k);
  if (bad < k)
    return bb_error_set(err, refused(fault, BBI_SPARSE_BAD_VALUE), "top-k: value %zu of the block at byte %zu is not finite",
                        bad, offset);
  return 0;
}

/* out[0..k) holds the values in index order: moves each to its index and zeroes the rest.
 * Going down from the last entry, whose index is at least its place, never overwrites a
 * value not yet moved. */
static void scatter(float *out, size_t n, size_t k, const uint8_t *block, bbi_sparse_indices form) {
  size_t above = n; /* the index moved last (n: none yet) */
  size_t bit = n;   /* the bitmap scan's position */
  for (size_t j = k; j-- > 0;) {
    size_t i;
    if (form == BBI_SPARSE_LIST) {
      i = bb_le_get_u32(block + 4 * j);
    } else {
      do bit--;
      while (!(block[bit / 8] >> (bit % 8) & 1u));
      i = bit;
    }
    const float v = out[j];
    for (size_t z = i + 1; z < above; z++) out[z] = 0.0f;
    out[i] = v;
    above = i;
  }
  for (size_t z = 0; z < above; z++) out[z] = 0.0f;
}

int bbi_sparse_decode(const uint8_t *in, size_t len, float *out, size_t n, bbi_sparse_fault *fault, bb_error *err) {
  size_t dense = 0;
  int rc = bbi_sparse_count(in, len, n, n, &dense, fault, err);
  if (rc) return rc;
  if (n && !out) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "top-k: NULL output");
  const size_t k = bb_le_get_u32(in + 4);
  const bbi_sparse_indices form = (bbi_sparse_indices)in[8];
  const bbi_sparse_values values = (bbi_sparse_values)in[9];
  const uint8_t *indices = in + BBI_SPARSE_HEADER;
  const size_t ib = index_bytes(n, k, form);
  if ((rc = check_indices(indices, form, n, k, fault, err))) return rc;
  if ((rc = read_values(indices + ib, len - BBI_SPARSE_HEADER - ib, values, out, k, BBI_SPARSE_HEADER + ib, fault, err)))
    return rc;
  scatter(out, n, k, indices, form);
  return 0;
}
