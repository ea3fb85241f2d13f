/* The exact k-NN index: distance kernels against their scalar twins, search against
 * brute force, removal, id allocation, snapshots and allocation failure. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "failalloc.h"
#include "harness.h"
#include "components/index/distance.h"
#include "components/index/flat_index.h"
#include "cpu/optest.h"
#include "util/hash.h"

static float *random_vec(size_t n, double lo, double hi) {
  float *x = malloc((n ? n : 1) * sizeof *x);
  for (size_t i = 0; i < n; i++) x[i] = (float)rng_real(lo, hi);
  return x;
}

static void test_distance_twins(void) {
  for (int trial = 0; trial < 2000; trial++) {
    const size_t n = trial < 70 ? (size_t)trial : (size_t)rng_int(0, 1100);
    /* offsets past the start make the loads unaligned */
    const size_t off = (size_t)rng_int(0, 3);
    float *a = random_vec(n + off, -3, 3), *b = random_vec(n + off, -3, 3);
    double ref_l2 = 0, ref_dot = 0, mag = 0;
    for (size_t i = 0; i < n; i++) {
      const double t = (double)a[off + i] - b[off + i];
      ref_l2 += t * t;
      ref_dot += (double)a[off + i] * b[off + i];
      mag += fabs((double)a[off + i] * b[off + i]);
    }
    const float l2 = bbi_f32_l2sq(a + off, b + off, n), l2s = bbi_f32_l2sq_scalar(a + off, b + off, n);
    const float dot = bbi_f32_dot(a + off, b + off, n), dots = bbi_f32_dot_scalar(a + off, b + off, n);
    /* float summation of n terms: error below n·eps times the sum of magnitudes */
    const double tol_l2 = 1e-7 * (double)(n + 1) * ref_l2 + 1e-30;
    const double tol_dot = 1e-7 * (double)(n + 1) * mag + 1e-30;
    CHECK_MSG(fabs(l2 - ref_l2) <= tol_l2 && fabs(l2s - ref_l2) <= tol_l2, "l2 n=%zu: %g %g %g",
              n, (double)l2, (double)l2s, ref_l2);
    CHECK_MSG(fabs(dot - ref_dot) <= tol_dot && fabs(dots - ref_dot) <= tol_dot,
              "dot n=%zu: %g %g %g", n, (double)dot, (double)dots, ref_dot);
    free(a);
    free(b);
  }
  /* small integers sum exactly in any order: SIMD and scalar agree bit for bit */
  for (size_t n = 0; n < 100; n++) {
    float a[100], b[100];
    for (size_t i = 0; i < n; i++) a[i] = (float)rng_int(-4, 4), b[i] = (float)rng_int(-4, 4);
    CHECK(bbi_f32_l2sq(a, b, n) == bbi_f32_l2sq_scalar(a, b, n));
    CHECK(bbi_f32_dot(a, b, n) == bbi_f32_dot_scalar(a, b, n));
  }
}

static bbi_flat_index *make(size_t dim, bbi_flat_index_metric metric) {
  bbi_flat_index *idx = NULL;
  bb_error err;
  CHECK_MSG(bbi_flat_index_new(NULL, dim, metric, &idx, &err) == 0, "%s", err.message);
  return idx;
}

/* Brute force in double: the k best (distance, id) pairs among n stored vectors. */
typedef struct scored {
  double d;
  uint64_t id;
} scored;

static int cmp_scored(const void *a, const void *b) {
  const scored *x = a, *y = b;
  if (x->d != y->d) return x->d < y->d ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

static void test_search_vs_brute_force(void) {
  for (int metric = 0; metric < 2; metric++) {
    for (int trial = 0; trial < 20; trial++) {
      const size_t dim = (size_t)rng_int(1, 40), n = (size_t)rng_int(1, 300);
      bbi_flat_index *idx = make(dim, (bbi_flat_index_metric)metric);
      float *data = random_vec(n * dim, -1, 1);
      for (size_t i = 0; i < n; i++) {
        uint64_t id;
        CHECK_EQ_INT(bbi_flat_index_add(idx, data + i * dim, &id, NULL), 0);
        CHECK_EQ_INT(id, i);
      }
      scored *all = malloc(n * sizeof *all);
      double *exact = malloc(n * sizeof *exact); /* by id */
      uint64_t ids[64], ids_s[64];
      float dists[64], dists_s[64];
      for (int q = 0; q < 10; q++) {
        float *query = random_vec(dim, -1, 1);
        const size_t k = (size_t)rng_int(1, 64);
        for (size_t i = 0; i < n; i++) {
          double s = 0;
          for (size_t j = 0; j < dim; j++) {
            const double a = data[i * dim + j], b = query[j];
            s += metric == BBI_FLAT_INDEX_L2SQ ? (a - b) * (a - b) : -a * b;
          }
          all[i] = (scored){s, i};
          exact[i] = s;
        }
        qsort(all, n, sizeof *all, cmp_scored);
        size_t found = 0, found_s = 0;
        CHECK_EQ_INT(bbi_flat_index_search(idx, query, k, ids, dists, &found, NULL), 0);
        CHECK_EQ_INT(bbi_flat_index_search_scalar(idx, query, k, ids_s, dists_s, &found_s, NULL), 0);
        CHECK_EQ_INT(found, k < n ? k : n);
        CHECK_EQ_INT(found_s, found);
        for (size_t r = 0; r < found; r++) {
          /* near-ties may swap under float rounding; the distance itself must match */
          CHECK_MSG(fabs(dists[r] - all[r].d) <= 1e-5 * (1 + fabs(all[r].d)),
                    "metric %d rank %zu: %g vs %g", metric, r, (double)dists[r], all[r].d);
          /* and the id returned at this rank really is that far away */
          CHECK_MSG(ids[r] < n && fabs(exact[ids[r]] - all[r].d) <= 1e-5 * (1 + fabs(all[r].d)),
                    "metric %d rank %zu: id %llu vs %llu", metric, r,
                    (unsigned long long)ids[r], (unsigned long long)all[r].id);
          if (r > 0) CHECK(ids[r] != ids[r - 1]);
          CHECK(fabs(dists_s[r] - dists[r]) <= 1e-5 * (1 + fabs(all[r].d)));
          if (r > 0) CHECK(dists[r - 1] < dists[r] || (dists[r - 1] == dists[r] && ids[r - 1] < ids[r]));
        }
        free(query);
      }
      free(all);
      free(exact);
      free(data);
      bbi_flat_index_free(idx);
    }
  }
}

static void test_ties_and_small_k(void) {
  bbi_flat_index *idx = make(2, BBI_FLAT_INDEX_L2SQ);
  const float v[5][2] = {{1, 0}, {0, 1}, {-1, 0}, {0, -1}, {5, 5}};
  for (int i = 0; i < 5; i++) bbi_flat_index_add(idx, v[i], NULL, NULL);
  const float origin[2] = {0, 0};
  uint64_t ids[8];
  float d[8];
  size_t found;
  CHECK_EQ_INT(bbi_flat_index_search(idx, origin, 8, ids, d, &found, NULL), 0);
  CHECK_EQ_INT(found, 5); /* k > count */
  CHECK(ids[0] == 0 && ids[1] == 1 && ids[2] == 2 && ids[3] == 3 && ids[4] == 4);
  CHECK(d[0] == 1 && d[3] == 1 && d[4] == 50);
  CHECK_EQ_INT(bbi_flat_index_search(idx, origin, 2, ids, d, &found, NULL), 0);
  CHECK(found == 2 && ids[0] == 0 && ids[1] == 1);
  CHECK_EQ_INT(bbi_flat_index_search(idx, origin, 0, NULL, NULL, &found, NULL), 0);
  CHECK_EQ_INT(found, 0);
  const float nan_q[2] = {NAN, 0};
  CHECK_EQ_INT(bbi_flat_index_search(idx, nan_q, 2, ids, d, &found, NULL), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bbi_flat_index_add(idx, nan_q, NULL, NULL), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bbi_flat_index_count(idx), 5);
  bbi_flat_index_free(idx);

  /* inner product: the largest dot comes first, reported as its negation */
  idx = make(2, BBI_FLAT_INDEX_IP);
  for (int i = 0; i < 5; i++) bbi_flat_index_add(idx, v[i], NULL, NULL);
  const float q[2] = {1, 2};
  CHECK_EQ_INT(bbi_flat_index_search(idx, q, 3, ids, d, &found, NULL), 0);
  CHECK(ids[0] == 4 && d[0] == -15 && ids[1] == 1 && d[1] == -2 && ids[2] == 0 && d[2] == -1);
  bbi_flat_index_free(idx);
}

static void test_remove_and_ids(void) {
  enum { N = 200, DIM = 5 };
  bbi_flat_index *idx = make(DIM, BBI_FLAT_INDEX_L2SQ);
  static float data[N][DIM];
  static int alive[2 * N];
  for (int i = 0; i < N; i++) {
    for (int j = 0; j < DIM; j++) data[i][j] = (float)(i * 10 + j);
    uint64_t id;
    bbi_flat_index_add(idx, data[i], &id, NULL);
    alive[id] = 1;
  }
  /* remove every third, then some twice */
  for (int i = 0; i < N; i += 3) {
    CHECK_EQ_INT(bbi_flat_index_remove(idx, (uint64_t)i, NULL), 0);
    alive[i] = 0;
  }
  bb_error err;
  CHECK_EQ_INT(bbi_flat_index_remove(idx, 0, &err), BB_ERR_NOT_FOUND);
  CHECK_EQ_INT(bbi_flat_index_remove(idx, 12345, &err), BB_ERR_NOT_FOUND);
  size_t expect = 0;
  for (int i = 0; i < N; i++) expect += (size_t)alive[i];
  CHECK_EQ_INT(bbi_flat_index_count(idx), expect);
  /* new ids continue after the largest ever handed out */
  uint64_t id;
  bbi_flat_index_add(idx, data[0], &id, NULL);
  CHECK_EQ_INT(id, N);
  alive[N] = 1;
  /* each surviving vector is still found at distance 0 under its own id */
  for (int i = 0; i < N; i++) {
    uint64_t got[2];
    float d[2];
    size_t found;
    bbi_flat_index_search(idx, data[i], 2, got, d, &found, NULL);
    if (alive[i]) {
      CHECK_MSG(got[0] == (uint64_t)i && d[0] == 0, "vector %d: got id %llu at %g", i,
                (unsigned long long)got[0], (double)d[0]);
    } else if (i == 0) {
      CHECK(got[0] == N && d[0] == 0); /* re-added under a new id */
    } else {
      CHECK(d[0] > 0);
    }
  }
  /* removing everything leaves an empty, reusable index */
  for (uint64_t i = 0; i <= N; i++)
    if (alive[i]) CHECK_EQ_INT(bbi_flat_index_remove(idx, i, NULL), 0);
  CHECK_EQ_INT(bbi_flat_index_count(idx), 0);
  size_t found;
  uint64_t got[1];
  float d[1];
  CHECK_EQ_INT(bbi_flat_index_search(idx, data[0], 1, got, d, &found, NULL), 0);
  CHECK_EQ_INT(found, 0);
  bbi_flat_index_add(idx, data[1], &id, NULL);
  CHECK_EQ_INT(id, N + 1);
  bbi_flat_index_free(idx);
}

static uint8_t *snapshot(const bbi_flat_index *idx, size_t *len) {
  *len = bbi_flat_index_snapshot_size(idx);
  uint8_t *buf = malloc(*len);
  size_t written = 0;
  CHECK_EQ_INT(bbi_flat_index_snapshot(idx, buf, *len, &written, NULL), 0);
  CHECK_EQ_INT(written, *len);
  return buf;
}

static void test_snapshot(void) {
  enum { DIM = 7 };
  bbi_flat_index *a = make(DIM, BBI_FLAT_INDEX_IP);
  for (int i = 0; i < 50; i++) {
    float *v = random_vec(DIM, -1, 1);
    bbi_flat_index_add(a, v, NULL, NULL);
    free(v);
  }
  for (uint64_t i = 0; i < 50; i += 7) bbi_flat_index_remove(a, i, NULL);
  size_t len;
  uint8_t *bytes = snapshot(a, &len);
  bbi_flat_index *b = NULL;
  bb_error err;
  CHECK_MSG(bbi_flat_index_restore(NULL, bytes, len, &b, &err) == 0, "%s", err.message);
  if (!b) return;
  CHECK_EQ_INT(bbi_flat_index_count(b), bbi_flat_index_count(a));
  CHECK_EQ_INT(bbi_flat_index_get_metric(b), BBI_FLAT_INDEX_IP);
  for (int q = 0; q < 20; q++) {
    float *query = random_vec(DIM, -1, 1);
    uint64_t ia[10], ib[10];
    float da[10], db[10];
    size_t fa, fb;
    bbi_flat_index_search(a, query, 10, ia, da, &fa, NULL);
    bbi_flat_index_search(b, query, 10, ib, db, &fb, NULL);
    CHECK(fa == fb && memcmp(ia, ib, sizeof ia) == 0 && memcmp(da, db, sizeof da) == 0);
    free(query);
  }
  /* the same calls on both keep them identical: ids continue, removal works */
  const float v[DIM] = {1, 2, 3, 4, 5, 6, 7};
  uint64_t id_a, id_b;
  bbi_flat_index_add(a, v, &id_a, NULL);
  bbi_flat_index_add(b, v, &id_b, NULL);
  CHECK_EQ_INT(id_a, 50);
  CHECK_EQ_INT(id_b, 50);
  CHECK_EQ_INT(bbi_flat_index_remove(b, 1, NULL), 0);
  CHECK_EQ_INT(bbi_flat_index_remove(b, 7, NULL), BB_ERR_NOT_FOUND);
  bbi_flat_index_remove(a, 1, NULL);
  size_t la, lb;
  uint8_t *sa = snapshot(a, &la), *sb = snapshot(b, &lb);
  CHECK(la == lb && memcmp(sa, sb, la) == 0);
  free(sa);
  free(sb);

  /* truncation, trailing bytes and flipped bits are refused */
  for (size_t cut = 0; cut < len; cut++) {
    bbi_flat_index *c = NULL;
    CHECK_EQ_INT(bbi_flat_index_restore(NULL, bytes, cut, &c, &err), BB_ERR_MALFORMED);
    CHECK(c == NULL);
  }
  for (size_t i = 0; i < len; i++) {
    bytes[i] ^= 0x04;
    bbi_flat_index *c = NULL;
    const int rc = bbi_flat_index_restore(NULL, bytes, len, &c, &err);
    CHECK_MSG((rc == BB_ERR_MALFORMED || rc == BB_ERR_UNSUPPORTED) && c == NULL, "flip at %zu: %d",
              i, rc);
    bytes[i] ^= 0x04;
  }
  uint8_t *longer = calloc(len + 4, 1);
  memcpy(longer, bytes, len);
  bbi_flat_index *c = NULL;
  CHECK_EQ_INT(bbi_flat_index_restore(NULL, longer, len + 4, &c, &err), BB_ERR_MALFORMED);
  free(longer);
  free(bytes);
  bbi_flat_index_free(a);
  bbi_flat_index_free(b);
}

/* The snapshot's bytes are a format other builds read: a fixed index must keep giving
 * the same bytes (length and FNV-1a 64 pinned from a known-good build). */
static void test_snapshot_bytes_pinned(void) {
  bbi_flat_index *a = make(3, BBI_FLAT_INDEX_L2SQ);
  const float v[4][3] = {{1, -2, 0.5f}, {0, 0, 0}, {-1e-3f, 3e8f, 7}, {0.25f, 0.125f, -0.0625f}};
  for (int i = 0; i < 4; i++) CHECK_EQ_INT(bbi_flat_index_add(a, v[i], NULL, NULL), 0);
  CHECK_EQ_INT(bbi_flat_index_remove(a, 1, NULL), 0); /* the last record moves into slot 1 */
  size_t len;
  uint8_t *bytes = snapshot(a, &len);
  CHECK_EQ_INT(len, 97);
  CHECK_MSG(bbi_fnv1a64(bytes, len) == 0x9b3feb7b139cb4f6ull, "hash %016llx", (unsigned long long)bbi_fnv1a64(bytes, len));
  free(bytes);
  bbi_flat_index_free(a);
}

static void test_allocation_failure(void) {
  failing f = {-1, 0};
  bb_allocator alloc = failing_allocator(&f);
  bbi_flat_index *idx = NULL;
  CHECK_EQ_INT(bbi_flat_index_new(&alloc, 3, BBI_FLAT_INDEX_L2SQ, &idx, NULL), 0);
  const float v[3] = {1, 2, 3};
  uint64_t next = 0;
  for (int i = 0; i < 100; i++) {
    f.budget = i % 3; /* fail the first, second or third allocation of this add */
    uint64_t id = UINT64_MAX;
    const size_t before = bbi_flat_index_count(idx);
    const int rc = bbi_flat_index_add(idx, v, &id, NULL);
    if (rc) {
      CHECK_EQ_INT(rc, BB_ERR_NOMEM);
      CHECK_EQ_INT(bbi_flat_index_count(idx), before);
    } else {
      CHECK_EQ_INT(id, next);
      next++;
    }
  }
  f.budget = -1;
  /* whatever failed, every id handed out is searchable */
  uint64_t ids[200];
  float d[200];
  size_t found;
  CHECK_EQ_INT(bbi_flat_index_search(idx, v, 200, ids, d, &found, NULL), 0);
  CHECK_EQ_INT(found, next);
  for (size_t i = 0; i < found; i++) CHECK_EQ_INT(ids[i], i);
  bbi_flat_index_free(idx);
  CHECK_EQ_INT(f.live, 0);
}

int main(void) {
  RUN(test_distance_twins);
  RUN(test_search_vs_brute_force);
  RUN(test_ties_and_small_k);
  RUN(test_remove_and_ids);
  RUN(test_snapshot);
  RUN(test_snapshot_bytes_pinned);
  RUN(test_allocation_failure);
  return bb_test_finish();
}
