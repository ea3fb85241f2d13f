/* bytesandbrains — data sets: the storage of the DataSource role. An in-memory labelled
 * data set (float32 features [n, dim] and float32 labels [n]), parsed from CSV bytes the
 * host hands over (no file access, so the same code runs in wasm), and the seeded ways to
 * cut it up: shuffles, a batch stream, a train/test split and per-client shards.
 *
 * The shipped ArraySource reads a bb_dataset given as its slot's host_data
 * (bb_slot_config.host_data in runtime.h).
 *
 * Example: eight labelled rows cut into four clients' shards.
 *
 *   const char csv[] = "0.1,0.2,0\n0.3,0.4,1\n0.5,0.6,0\n0.7,0.8,1\n"
 *                      "0.9,1.0,0\n1.1,1.2,1\n1.3,1.4,0\n1.5,1.6,1\n";
 *   bb_dataset all = {0}, mine = {0};
 *   bb_dataset_partition shards = {0};
 *   bb_error err;
 *   int rc = bb_dataset_from_csv((const uint8_t *)csv, strlen(csv), NULL, NULL, &all, &err);  // label last
 *   if (!rc) rc = bb_dataset_shards_iid(&all, 4, 42, NULL, &shards, &err);  // seed 42: same shards everywhere
 *   if (!rc) rc = bb_dataset_partition_take(&all, &shards, 1, NULL, &mine, &err);  // client 1's rows
 *   if (rc) fprintf(stderr, "%s\n", err.message);
 *   bool two_rows = !rc && all.dim == 2 && mine.n == 2;
 *   bb_dataset_free(&mine);
 *   bb_dataset_partition_free(&shards);
 *   bb_dataset_free(&all);
 *   if (!two_rows) return 1;
 *
 * Everything random here is a function of an explicit 64-bit seed (splitmix64), so two
 * peers given the same seed and bytes make the same batches and shards. */
#ifndef BB_DATASET_H
#define BB_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "bb/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Row i's features are features[i*dim .. i*dim+dim). labels is NULL when the data had no
 * label column; otherwise labels[i] is a class id (a whole number) or a regression target.
 * Both arrays belong to the dataset and come from `alloc`. */
typedef struct bb_dataset {
  float *features;
  float *labels;
  size_t n;
  size_t dim;
  bb_allocator alloc;
} bb_dataset;

/* bb_csv_options.label_column for data without labels. */
#define BB_DATASET_NO_LABEL INT32_MIN

typedef struct bb_csv_options {
  size_t struct_size; /* sizeof(bb_csv_options) */
  /* Which column holds the label: 0-based from the left, or negative from the right (-1 is
   * the last column), or BB_DATASET_NO_LABEL. */
  int32_t label_column;
  /* Nonzero: the first line names the columns and is skipped unread. */
  int has_header;
} bb_csv_options;

/* Allocates a zeroed dataset of n rows of dim features (with labels when with_labels).
 * alloc NULL is the default allocator. */
BB_API int bb_dataset_init(bb_dataset *ds, size_t n, size_t dim, int with_labels,
                           const bb_allocator *alloc, bb_error *err);

/* Releases what a dataset holds and zeroes it; a zeroed dataset frees as a no-op. */
BB_API void bb_dataset_free(bb_dataset *ds);

/* Parses numeric CSV from data[0..len) (not NUL-terminated). Fields are decimal numbers
 * ("-1", "2.5", "3e-2") separated by commas, optionally padded with spaces or tabs; lines
 * end in LF, CRLF or CR; blank lines and a leading UTF-8 BOM are ignored. Every row must
 * have as many fields as the first. NaN, infinities, hex floats, empty fields and values
 * outside float range are rejected with BB_ERR_MALFORMED and a message naming the line and
 * column (both 1-based). opt NULL means label in the last column, no header; an opt whose
 * struct_size this library does not know is BB_ERR_INVALID_ARGUMENT. */
BB_API int bb_dataset_from_csv(const uint8_t *data, size_t len, const bb_csv_options *opt,
                               const bb_allocator *alloc, bb_dataset *out, bb_error *err);

/* A new dataset holding rows indices[0..n) of src, in that order (an index may repeat).
 * An index >= src->n is BB_ERR_INVALID_ARGUMENT. */
BB_API int bb_dataset_subset(const bb_dataset *src, const size_t *indices, size_t n,
                             const bb_allocator *alloc, bb_dataset *out, bb_error *err);

/* Fills order[0..n) with a permutation of 0..n-1 that depends only on (n, seed). */
BB_API void bb_dataset_permutation(size_t *order, size_t n, uint64_t seed);

/* Reorders the rows of ds (features and labels together) without allocating: afterwards
 * row i is the former row order[i], order being bb_dataset_permutation(n, seed). */
BB_API void bb_dataset_shuffle(bb_dataset *ds, uint64_t seed);

/* Per-feature statistics over all rows, computed in double: mean, population standard
 * deviation, minimum, maximum, each an array of ds->dim floats the caller provides (any may
 * be NULL). A model folds normalisation in as (x - mean) / std. Empty data gives zeros. */
BB_API void bb_dataset_feature_stats(const bb_dataset *ds, float *mean, float *std, float *min,
                                     float *max);

/* Sample indices cut into k parts: part i is indices[offsets[i] .. offsets[i + 1]).
 * Every index of the dataset it was made from is in exactly one part. */
typedef struct bb_dataset_partition {
  size_t *indices;
  size_t *offsets; /* k + 1 entries */
  size_t k;
  bb_allocator alloc;
} bb_dataset_partition;

/* Releases the partition's arrays and zeroes it; a zeroed partition frees as a no-op. */
BB_API void bb_dataset_partition_free(bb_dataset_partition *p);

/* Number of samples in part i. */
static inline size_t bb_dataset_partition_size(const bb_dataset_partition *p, size_t i) {
  return p->offsets[i + 1] - p->offsets[i];
}

/* A new dataset holding part i of p, rows of src (the dataset p was made from). */
BB_API int bb_dataset_partition_take(const bb_dataset *src, const bb_dataset_partition *p, size_t i,
                                     const bb_allocator *alloc, bb_dataset *out, bb_error *err);

/* Train/test split into a 2-part partition: part 0 train, part 1 test. The test part holds
 * round(n * test_fraction) samples (0 <= test_fraction <= 1). Stratified (needs labels):
 * each class gives its share by largest remainder, so the total is the same, and
 * every class keeps its proportion to within one sample. Order inside each part is seeded
 * random. */
BB_API int bb_dataset_split(const bb_dataset *ds, double test_fraction, int stratified, uint64_t seed,
                            const bb_allocator *alloc, bb_dataset_partition *out, bb_error *err);

/* K client shards, IID: a seeded permutation dealt in contiguous runs; the first n % k
 * clients get one sample more than the rest. */
BB_API int bb_dataset_shards_iid(const bb_dataset *ds, size_t k, uint64_t seed,
                                 const bb_allocator *alloc, bb_dataset_partition *out, bb_error *err);

/* K client shards skewed by label (the sort-and-deal scheme of McMahan et al. 2017): samples
 * sorted by label (seeded order within a label) are cut into k * classes_per_client runs
 * of near-equal size, and each client is dealt classes_per_client runs picked by a seeded
 * shuffle. A run crosses at most a few class boundaries when classes are larger than a run,
 * so each client holds mostly classes_per_client classes (fewer when it draws two runs of
 * one class). Needs labels and k * classes_per_client <= n. */
BB_API int bb_dataset_shards_by_label(const bb_dataset *ds, size_t k, size_t classes_per_client,
                                      uint64_t seed, const bb_allocator *alloc,
                                      bb_dataset_partition *out, bb_error *err);

/* An endless stream of fixed-size batches over a dataset: epoch after epoch, each epoch
 * visiting every row once in an order of its own (a permutation seeded by (seed, epoch), or
 * row order when not shuffling). A batch that runs past the end of an epoch is filled from
 * the start of the next, so every batch has batch_size rows (shapes stay static) and a batch
 * larger than the dataset simply spans epochs. */
typedef struct bb_dataset_batcher {
  const bb_dataset *ds;
  size_t batch_size;
  uint64_t seed;
  int shuffle;
  uint64_t epoch; /* the epoch the next row comes from */
  size_t pos;     /* the next row's place in this epoch's order */
  size_t *order;  /* this epoch's order, ds->n entries */
  bb_allocator alloc;
} bb_dataset_batcher;

/* Starts a stream at epoch 0. ds must outlive the batcher and keep its rows; n > 0 and
 * batch_size > 0. */
BB_API int bb_dataset_batcher_init(bb_dataset_batcher *b, const bb_dataset *ds, size_t batch_size,
                                   int shuffle, uint64_t seed, const bb_allocator *alloc, bb_error *err);

/* Releases the batcher's order (not the data set it reads) and zeroes it. */
BB_API void bb_dataset_batcher_free(bb_dataset_batcher *b);

/* Writes the next batch: batch_size row indices, batch_size * dim features and batch_size
 * labels (each output may be NULL; labels is ignored for unlabelled data). Returns how many
 * epochs were completed while taking it (0 inside an epoch). */
BB_API size_t bb_dataset_batcher_next(bb_dataset_batcher *b, size_t *indices, float *features,
                                      float *labels);

/* Moves the stream to row `pos` of epoch `epoch` (what b->epoch and b->pos said when it was
 * saved), so a stream restored from those two numbers goes on with the rows the saved one
 * would have given. BB_ERR_INVALID_ARGUMENT when pos is not below the data set's rows. */
BB_API int bb_dataset_batcher_seek(bb_dataset_batcher *b, uint64_t epoch, size_t pos, bb_error *err);

#ifdef __cplusplus
}
#endif
#endif /* BB_DATASET_H */
