/* Exact k-NN over a dense array of vectors (see flat_index.h). The id → slot map is open
 * addressing with linear probing and backward-shift deletion, so it never fills up with
 * tombstones; it stays at most half full. Top-k uses the caller's output arrays as a
 * bounded max-heap keyed by (distance, id), then sorts them in place. */
#include "components/index/flat_index.h"

#include <math.h>
#include <string.h>

#include "components/index/distance.h"
#include "bb/bytes.h"
#include "bb/common.h"
#include "util/hash.h"
#include "util/mem.h"

#define EMPTY SIZE_MAX

typedef struct map_cell {
  uint64_t id;
  size_t slot; /* EMPTY when the cell is free */
} map_cell;

struct bbi_flat_index {
  bb_allocator alloc;
  size_t dim;
  bbi_flat_index_metric metric;
  uint64_t next_id;
  size_t count;
  float *vecs; /* count × dim */
  uint64_t *ids;
  size_t cap_vecs, cap_ids; /* in vectors */
  map_cell *map;
  size_t map_cap; /* 0 or a power of two */
};

typedef float (*distance_fn)(const float *a, const float *b, size_t n);

static int check_dim(size_t dim, bb_error *err) {
  if (dim == 0) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "flat index: dimension must be > 0");
#if SIZE_MAX > UINT32_MAX /* the snapshot stores dim as u32; on wasm32 size_t is that */
  if (dim > UINT32_MAX)
    return bb_error_set(err, BB_ERR_LIMIT, "flat index: dimension %zu is too large", dim);
#endif
  return 0;
}

int bbi_flat_index_new(const bb_allocator *alloc, size_t dim, bbi_flat_index_metric metric,
                      bbi_flat_index **out, bb_error *err) {
  if (!out) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "flat index: NULL argument");
  *out = NULL;
  const int rc = check_dim(dim, err);
  if (rc) return rc;
  if (metric != BBI_FLAT_INDEX_L2SQ && metric != BBI_FLAT_INDEX_IP)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "flat index: unknown metric %d", (int)metric);
  if (!alloc) alloc = bb_default_allocator();
  bbi_flat_index *idx = bbi_mem_calloc(alloc, 1, sizeof *idx);
  if (!idx) return bb_error_set(err, BB_ERR_NOMEM, "flat index: out of memory");
  idx->alloc = *alloc;
  idx->dim = dim;
  idx->metric = metric;
  *out = idx;
  return 0;
}

void bbi_flat_index_free(bbi_flat_index *idx) {
  if (!idx) return;
  const bb_allocator a = idx->alloc;
  bbi_mem_free(&a, idx->vecs);
  bbi_mem_free(&a, idx->ids);
  bbi_mem_free(&a, idx->map);
  bbi_mem_free(&a, idx);
}

/* ---- id → slot map ------------------------------------------------------------------ */

static size_t home(uint64_t id, size_t cap) {
  /* splitmix64's finaliser: consecutive ids land far apart */
  id ^= id >> 30;
  id *= 0xbf58476d1ce4e5b9ull;
  id ^= id >> 27;
  id *= 0x94d049bb133111ebull;
  id ^= id >> 31;
  return (size_t)id & (cap - 1);
}

static size_t map_find(const bbi_flat_index *idx, uint64_t id) {
  if (!idx->map_cap) return EMPTY;
  for (size_t i = home(id, idx->map_cap);; i = (i + 1) & (idx->map_cap - 1)) {
    if (idx->map[i].slot == EMPTY) return EMPTY;
    if (idx->map[i].id == id) return i;
  }
}

/* Puts id → slot into a table known to have room and not to hold id. */
static void map_put(map_cell *map, size_t cap, uint64_t id, size_t slot) {
  size_t i = home(id, cap);
  while (map[i].slot != EMPTY) i = (i + 1) & (cap - 1);
  map[i].id = id;
  map[i].slot = slot;
}

/* Room for `want` ids at load <= 1/2; 0 or BB_ERR_NOMEM with the map unchanged. */
static int map_reserve(bbi_flat_index *idx, size_t want) {
  if (want <= idx->map_cap / 2) return 0;
  size_t cap = idx->map_cap ? idx->map_cap : 16;
  while (want > cap / 2) {
    if (cap > SIZE_MAX / (2 * sizeof(map_cell))) return BB_ERR_NOMEM;
    cap *= 2;
  }
  map_cell *map = bbi_mem_alloc(&idx->alloc, cap * sizeof *map);
  if (!map) return BB_ERR_NOMEM;
  for (size_t i = 0; i < cap; i++) map[i].slot = EMPTY;
  for (size_t i = 0; i < idx->map_cap; i++)
    if (idx->map[i].slot != EMPTY) map_put(map, cap, idx->map[i].id, idx->map[i].slot);
  bbi_mem_free(&idx->alloc, idx->map);
  idx->map = map;
  idx->map_cap = cap;
  return 0;
}

/* Frees cell i and pulls later cells of its probe run back, so lookups never stop early. */
static void map_erase(bbi_flat_index *idx, size_t i) {
  const size_t mask = idx->map_cap - 1;
  for (size_t j = (i + 1) & mask; idx->map[j].slot != EMPTY; j = (j + 1) & mask) {
    const size_t h = home(idx->map[j].id, idx->map_cap);
    /* cell j may move to i when i lies cyclically in [h, j) */
    if (((j - h) & mask) >= ((j - i) & mask)) {
      idx->map[i] = idx->map[j];
      i = j;
    }
  }
  idx->map[i].slot = EMPTY;
}

/* ---- add and remove ---------------------------------------------------------------- */

static int check_finite(const float *x, size_t n, const char *what, bb_error *err) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(x[i]))
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                          "flat index: %s has a non-finite value (%g) at coordinate %zu", what,
                          (double)x[i], i);
  return 0;
}

/* Room for `want` vectors; on failure nothing visible changes. */
static int storage_reserve(bbi_flat_index *idx, size_t want) {
  if (idx->dim > SIZE_MAX / sizeof(float)) return BB_ERR_NOMEM;
  int rc = bbi_mem_grow(&idx->alloc, (void **)&idx->vecs, &idx->cap_vecs, want, idx->dim * sizeof(float));
  return rc ? rc : bbi_mem_grow(&idx->alloc, (void **)&idx->ids, &idx->cap_ids, want, sizeof *idx->ids);
}

int bbi_flat_index_add(bbi_flat_index *idx, const float *vec, uint64_t *id, bb_error *err) {
  if (!idx || !vec) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "flat index: NULL argument");
  int rc = check_finite(vec, idx->dim, "the added vector", err);
  if (rc) return rc;
  if (idx->next_id == UINT64_MAX)
    return bb_error_set(err, BB_ERR_LIMIT, "flat index: ids are exhausted");
  if (storage_reserve(idx, idx->count + 1) || map_reserve(idx, idx->count + 1))
    return bb_error_set(err, BB_ERR_NOMEM, "flat index: out of memory adding vector %zu",
                        idx->count);
  const size_t slot = idx->count++;
  memcpy(idx->vecs + slot * idx->dim, vec, idx->dim * sizeof *vec);
  idx->ids[slot] = idx->next_id;
  map_put(idx->map, idx->map_cap, idx->next_id, slot);
  if (id) *id = idx->next_id;
  idx->next_id++;
  return 0;
}

int bbi_flat_index_remove(bbi_flat_index *idx, uint64_t id, bb_error *err) {
  if (!idx) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "flat index: NULL argument");
  const size_t cell = map_find(idx, id);
  if (cell == EMPTY)
    return bb_error_set(err, BB_ERR_NOT_FOUND, "flat index: no vector with id %llu",
                        (unsigned long long)id);
  const size_t slot = idx->map[cell].slot, last = idx->count - 1;
  map_erase(idx, cell);
  if (slot != last) {
    memcpy(idx->vecs + slot * idx->dim, idx->vecs + last * idx->dim, idx->dim * sizeof(float));
    idx->ids[slot] = idx->ids[last];
    idx->map[map_find(idx, idx->ids[slot])].slot = slot;
  }
  idx->count--;
  return 0;
}

/* ---- search ------------------------------------------------------------------------- */

/* (da, ia) ranks after (db, ib): farther, or as far with a larger id. */
static int worse(float da, uint64_t ia, float db, uint64_t ib) {
  return da > db || (da == db && ia > ib);
}

static void heap_swap(uint64_t *ids, float *d, size_t a, size_t b) {
  const uint64_t ti = ids[a];
  ids[a] = ids[b];
  ids[b] = ti;
  const float td = d[a];
  d[a] = d[b];
  d[b] = td;
}

/* Max-heap on `worse`: the root is the entry that leaves first. */
static void heap_down(uint64_t *ids, float *d, size_t i, size_t n) {
  for (;;) {
    size_t w = i;
    const size_t l = 2 * i + 1, r = l + 1;
    if (l < n && worse(d[l], ids[l], d[w], ids[w])) w = l;
    if (r < n && worse(d[r], ids[r], d[w], ids[w])) w = r;
    if (w == i) return;
    heap_swap(ids, d, i, w);
    i = w;
  }
}

static void heap_up(uint64_t *ids, float *d, size_t i) {
  while (i > 0) {
    const size_t p = (i - 1) / 2;
    if (!worse(d[i], ids[i], d[p], ids[p])) return;
    heap_swap(ids, d, i, p);
    i = p;
  }
}

static int search(const bbi_flat_index *idx, distance_fn dist, const float *query, size_t k,
                  uint64_t *ids, float *dists, size_t *found, bb_error *err) {
  if (!idx || !query || !found || (k && (!ids || !dists)))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "flat index: NULL argument");
  *found = 0;
  const int rc = check_finite(query, idx->dim, "the query", err);
  if (rc) return rc;
  const size_t want = k < idx->count ? k : idx->count;
  if (want == 0) return 0;
  const float sign = idx->metric == BBI_FLAT_INDEX_IP ? -1.0f : 1.0f;
  size_t n = 0;
  for (size_t s = 0; s < idx->count; s++) {
    float d = sign * dist(idx->vecs + s * idx->dim, query, idx->dim);
    if (d != d) d = INFINITY; /* +inf + -inf in an overflowing dot: rank it last */
    const uint64_t id = idx->ids[s];
    if (n < want) {
      ids[n] = id;
      dists[n] = d;
      heap_up(ids, dists, n++);
    } else if (worse(dists[0], ids[0], d, id)) {
      ids[0] = id;
      dists[0] = d;
      heap_down(ids, dists, 0, n);
    }
  }
  /* Heap sort: the worst goes to the back each time, leaving best first. */
  for (size_t end = n - 1; end > 0; end--) {
    heap_swap(ids, dists, 0, end);
    heap_down(ids, dists, 0, end);
  }
  *found = n;
  return 0;
}

int bbi_flat_index_search(const bbi_flat_index *idx, const float *query, size_t k,
                         uint64_t *ids, float *dists, size_t *found, bb_error *err) {
  const distance_fn fn = idx && idx->metric == BBI_FLAT_INDEX_IP ? bbi_f32_dot : bbi_f32_l2sq;
  return search(idx, fn, query, k, ids, dists, found, err);
}

int bbi_flat_index_search_scalar(const bbi_flat_index *idx, const float *query, size_t k,
                                uint64_t *ids, float *dists, size_t *found, bb_error *err) {
  const distance_fn fn =
      idx && idx->metric == BBI_FLAT_INDEX_IP ? bbi_f32_dot_scalar : bbi_f32_l2sq_scalar;
  return search(idx, fn, query, k, ids, dists, found, err);
}

size_t bbi_flat_index_count(const bbi_flat_index *idx) { return idx->count; }
size_t bbi_flat_index_dim(const bbi_flat_index *idx) { return idx->dim; }
bbi_flat_index_metric bbi_flat_index_get_metric(const bbi_flat_index *idx) { return idx->metric; }

/* ---- snapshot ---------------------------------------------------------------------- */

#define SNAPSHOT_MAGIC "BBFX"
#define SNAPSHOT_VERSION 1u
#define SNAPSHOT_HEADER (4 + 4 + 4 + 1 + 8 + 8)

size_t bbi_flat_index_snapshot_size(const bbi_flat_index *idx) {
  return SNAPSHOT_HEADER + idx->count * (8 + 4 * idx->dim) + 8;
}

int bbi_flat_index_snapshot(const bbi_flat_index *idx, uint8_t *buf, size_t cap, size_t *written,
                           bb_error *err) {
  if (!idx || !buf) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "flat index: NULL argument");
  const size_t need = bbi_flat_index_snapshot_size(idx);
  if (cap < need)
    return bb_error_set(err, BB_ERR_LIMIT, "flat index: snapshot needs %zu bytes, buffer has %zu",
                        need, cap);
  uint8_t *p = buf;
  memcpy(p, SNAPSHOT_MAGIC, 4);
  bb_le_put_u32(p + 4, SNAPSHOT_VERSION);
  bb_le_put_u32(p + 8, (uint32_t)idx->dim);
  p[12] = (uint8_t)idx->metric;
  bb_le_put_u64(p + 13, idx->next_id);
  bb_le_put_u64(p + 21, idx->count);
  p += SNAPSHOT_HEADER;
  for (size_t s = 0; s < idx->count; s++) {
    bb_le_put_u64(p, idx->ids[s]);
    p += 8;
    const float *v = idx->vecs + s * idx->dim;
    for (size_t j = 0; j < idx->dim; j++, p += 4) bb_le_put_f32(p, v[j]);
  }
  bb_le_put_u64(p, bbi_fnv1a64(buf, (size_t)(p - buf)));
  if (written) *written = need;
  return 0;
}

static int malformed(bb_error *err, size_t at, const char *what) {
  return bb_error_set(err, BB_ERR_MALFORMED, "flat index snapshot: %s at byte %zu", what, at);
}

/* Reads the records into an empty index whose storage already holds `count` vectors. */
static int read_records(bbi_flat_index *idx, const uint8_t *bytes, size_t count, bb_error *err) {
  const uint8_t *p = bytes + SNAPSHOT_HEADER;
  for (size_t s = 0; s < count; s++) {
    const size_t at = (size_t)(p - bytes);
    const uint64_t id = bb_le_get_u64(p);
    p += 8;
    if (id >= idx->next_id) return malformed(err, at, "id not below the next id");
    if (map_find(idx, id) != EMPTY) return malformed(err, at, "duplicate id");
    float *v = idx->vecs + s * idx->dim;
    for (size_t j = 0; j < idx->dim; j++, p += 4) {
      v[j] = bb_le_get_f32(p);
      if (!isfinite(v[j])) return malformed(err, (size_t)(p - bytes), "non-finite value");
    }
    idx->ids[s] = id;
    map_put(idx->map, idx->map_cap, id, s);
    idx->count++;
  }
  return 0;
}

int bbi_flat_index_restore(const bb_allocator *alloc, const uint8_t *bytes, size_t len,
                          bbi_flat_index **out, bb_error *err) {
  if (!out || (!bytes && len)) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "flat index: NULL argument");
  *out = NULL;
  if (len < SNAPSHOT_HEADER + 8)
    return bb_error_set(err, BB_ERR_MALFORMED,
                        "flat index snapshot: truncated (%zu bytes, the header alone is %d)", len,
                        SNAPSHOT_HEADER + 8);
  if (memcmp(bytes, SNAPSHOT_MAGIC, 4) != 0)
    return malformed(err, 0, "wrong magic (not a flat index snapshot)");
  const uint32_t version = bb_le_get_u32(bytes + 4);
  if (version != SNAPSHOT_VERSION)
    return bb_error_set(err, BB_ERR_UNSUPPORTED, "flat index snapshot: version %u (this build reads %u)",
                        version, SNAPSHOT_VERSION);
  const size_t dim = bb_le_get_u32(bytes + 8);
  const uint8_t metric = bytes[12];
  const uint64_t next_id = bb_le_get_u64(bytes + 13), count = bb_le_get_u64(bytes + 21);
  if (dim == 0 || dim > (SIZE_MAX - 8) / 4) return malformed(err, 8, "dimension out of range");
  if (metric > BBI_FLAT_INDEX_IP) return malformed(err, 12, "unknown metric");
  const size_t body = len - SNAPSHOT_HEADER - 8, record = 8 + 4 * dim;
  if (count > next_id || count > body / record || count * record != body)
    return bb_error_set(err, BB_ERR_MALFORMED,
                        "flat index snapshot: %llu records of %zu bytes do not fill the %zu "
                        "bytes after the header (truncated or trailing bytes)",
                        (unsigned long long)count, record, body);
  if (bb_le_get_u64(bytes + len - 8) != bbi_fnv1a64(bytes, len - 8))
    return malformed(err, len - 8, "checksum mismatch");

  bbi_flat_index *idx;
  int rc = bbi_flat_index_new(alloc, dim, (bbi_flat_index_metric)metric, &idx, err);
  if (rc) return rc;
  idx->next_id = next_id;
  if (storage_reserve(idx, (size_t)count) || map_reserve(idx, (size_t)count)) {
    bbi_flat_index_free(idx);
    return bb_error_set(err, BB_ERR_NOMEM, "flat index snapshot: out of memory for %llu vectors",
                        (unsigned long long)count);
  }
  rc = read_records(idx, bytes, (size_t)count, err);
  if (rc) {
    bbi_flat_index_free(idx);
    return rc;
  }
  *out = idx;
  return 0;
}
