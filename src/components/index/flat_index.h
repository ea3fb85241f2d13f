/* An exact k-nearest-neighbour index: every search measures the query against every
 * stored vector. Vectors are f32 of a fixed dimension, stored contiguously; ids are
 * handed out in increasing order and never reused, even after removal. Removal moves the
 * last vector into the hole (an id → slot hash map keeps track), so storage stays dense;
 * the order of slots is a pure function of the sequence of calls. */
#ifndef BBI_OPS_INDEX_FLAT_INDEX_H
#define BBI_OPS_INDEX_FLAT_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "bb/common.h"

typedef enum bbi_flat_index_metric {
  BBI_FLAT_INDEX_L2SQ = 0, /* distance = Σ (a_i - b_i)² */
  BBI_FLAT_INDEX_IP = 1    /* distance = -Σ a_i·b_i, so ascending still means best */
} bbi_flat_index_metric;

typedef struct bbi_flat_index bbi_flat_index;

/* An empty index of dimension dim (> 0). alloc NULL means the default allocator. */
int bbi_flat_index_new(const bb_allocator *alloc, size_t dim, bbi_flat_index_metric metric,
                      bbi_flat_index **out, bb_error *err);
void bbi_flat_index_free(bbi_flat_index *idx);

/* Copies dim floats in and gives back their id. Non-finite values are refused. */
int bbi_flat_index_add(bbi_flat_index *idx, const float *vec, uint64_t *id, bb_error *err);

/* Forgets the vector with this id; BB_ERR_NOT_FOUND when there is none. */
int bbi_flat_index_remove(bbi_flat_index *idx, uint64_t id, bb_error *err);

/* The min(k, count) stored vectors nearest to query, best first: ids[i] and dists[i]
 * for i < *found; equal distances are ordered by id. ids and dists hold k entries each
 * (they are the search's only working memory, so it never allocates). */
int bbi_flat_index_search(const bbi_flat_index *idx, const float *query, size_t k,
                         uint64_t *ids, float *dists, size_t *found, bb_error *err);

/* The same search with the scalar distance twins, for tests and benchmarks. */
int bbi_flat_index_search_scalar(const bbi_flat_index *idx, const float *query, size_t k,
                                uint64_t *ids, float *dists, size_t *found, bb_error *err);

size_t bbi_flat_index_count(const bbi_flat_index *idx);
size_t bbi_flat_index_dim(const bbi_flat_index *idx);
bbi_flat_index_metric bbi_flat_index_get_metric(const bbi_flat_index *idx);

/* Bytes bbi_flat_index_snapshot writes. */
size_t bbi_flat_index_snapshot_size(const bbi_flat_index *idx);

/* Writes the index to buf (BB_ERR_LIMIT when cap is too small). Format, little-endian:
 * "BBFX", u32 version 1, u32 dim, u8 metric, u64 next id, u64 count, then count records
 * of (u64 id, dim f32) in slot order, then a FNV-1a 64 of everything before it. */
int bbi_flat_index_snapshot(const bbi_flat_index *idx, uint8_t *buf, size_t cap, size_t *written,
                           bb_error *err);

/* Rebuilds an index from snapshot bytes; BB_ERR_MALFORMED with the byte offset for
 * truncated, trailing, corrupt or inconsistent bytes, BB_ERR_UNSUPPORTED for another
 * version. The restored index searches, adds and removes exactly as the original. */
int bbi_flat_index_restore(const bb_allocator *alloc, const uint8_t *bytes, size_t len,
                          bbi_flat_index **out, bb_error *err);

#endif
