/* scikit-learn's handwritten digits (UCI optdigits, 8x8 images) as a bb_dataset, for the
 * examples' DataSources. Natively it reads the gzip file with zlib; the wasm build (no zlib)
 * reads a decompressed copy. */
#ifndef BB_EXAMPLES_DIGITS_H
#define BB_EXAMPLES_DIGITS_H

#include "bb/common.h"
#include "bb/dataset.h"

/* Where Debian's python3-sklearn puts the data. */
#define BB_DIGITS_DEFAULT_PATH "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
#define BB_DIGITS_FEATURES 64
#define BB_DIGITS_CLASSES 10

/* Loads the digits CSV at path (NULL: BB_DIGITS_DEFAULT_PATH; gzipped when the name ends in
 * .gz, which needs a build with zlib — the wasm build reads plain CSV) into out: one row per
 * image, 64 pixel intensities 0..16 as features, the digit 0..9 as label (the last column).
 * A missing file is BB_ERR_IO with a message naming the file and the Debian package that
 * provides it; a file that is not 64 features and a digit per row is BB_ERR_MALFORMED. */
int bb_digits_load(const char *path, const bb_allocator *alloc, bb_dataset *out, bb_error *err);

/* The digits as the federated examples use them: a stratified 75/25 train/test split and
 * the training part dealt into n_shards client shards — label-skewed with
 * classes_per_shard digits each, or IID when classes_per_shard is 0. */
typedef struct bb_digits_split {
  bb_dataset all, train, test;
  bb_dataset *shards;
  size_t n_shards;
} bb_digits_split;

int bb_digits_split_load(const char *path, size_t n_shards, size_t classes_per_shard, uint64_t seed,
                         bb_digits_split *out, bb_error *err);
void bb_digits_split_free(bb_digits_split *s);

#endif
