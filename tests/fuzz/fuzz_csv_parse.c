/* libFuzzer target: arbitrary bytes through the CSV parser (the first byte picks the label
 * column and the header flag), and whatever parses through the splitters, which must each
 * cover every row exactly once. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bb/dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_partition(const bb_dataset_partition *p, size_t n) {
  if (p->offsets[0] != 0 || p->offsets[p->k] != n) abort();
  unsigned char *seen = calloc(n, 1);
  if (!seen) return;
  for (size_t i = 0; i < n; i++) {
    if (p->indices[i] >= n || seen[p->indices[i]]) abort();
    seen[p->indices[i]] = 1;
  }
  free(seen);
}

static void cut_up(const bb_dataset *ds, uint8_t knob) {
  bb_dataset_partition p;
  bb_error err;
  size_t k = (size_t)(knob % 7) + 1;
  if (bb_dataset_shards_iid(ds, k, knob, NULL, &p, &err) == 0) {
    check_partition(&p, ds->n);
    bb_dataset_partition_free(&p);
  } else if (k <= ds->n) {
    abort();
  }
  if (ds->labels && bb_dataset_shards_by_label(ds, k, 2, knob, NULL, &p, &err) == 0) {
    check_partition(&p, ds->n);
    bb_dataset_partition_free(&p);
  }
  if (bb_dataset_split(ds, (knob % 11) / 10.0, ds->labels != NULL, knob, NULL, &p, &err) != 0) abort();
  check_partition(&p, ds->n);
  bb_dataset_partition_free(&p);
  bb_dataset_batcher b;
  if (bb_dataset_batcher_init(&b, ds, k, 1, knob, NULL, &err) != 0) abort();
  float *x = malloc(k * ds->dim * sizeof(float)), y[8];
  if (x) bb_dataset_batcher_next(&b, NULL, x, y);
  free(x);
  bb_dataset_batcher_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  /* low bits: label column -4..3, or none; high bit: header line */
  uint8_t knob = data[0];
  bb_csv_options opt = {.struct_size = sizeof opt,
                        .label_column = (knob & 15) == 15 ? BB_DATASET_NO_LABEL : (int32_t)(knob & 7) - 4,
                        .has_header = knob >> 7};
  bb_dataset ds;
  bb_error err;
  bb_error_clear(&err);
  if (bb_dataset_from_csv(data + 1, size - 1, &opt, NULL, &ds, &err) != 0) {
    if (!err.message[0] || ds.features || ds.labels || ds.n) abort();
    return 0;
  }
  if (!ds.n || !ds.dim || (opt.label_column == BB_DATASET_NO_LABEL) != (ds.labels == NULL)) abort();
  for (size_t i = 0; i < ds.n * ds.dim; i++)
    if (!isfinite(ds.features[i])) abort();
  for (size_t i = 0; ds.labels && i < ds.n; i++)
    if (!isfinite(ds.labels[i])) abort();
  cut_up(&ds, knob);
  bb_dataset_free(&ds);
  return 0;
}
