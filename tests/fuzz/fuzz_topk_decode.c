/* libFuzzer target: hostile bytes handed to the top-k decoder, as a server's TopKCodec
 * receives them from a client. The first byte picks the length the decoder expects (the
 * reference's, 0..255, or with 0 any length up to 4096); the rest is the encoding. Nothing
 * may crash or read outside the input, and whatever is accepted is a finite vector of the
 * expected length. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "components/codecs/sparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const size_t expect = data[0];
  const uint8_t *in = data + 1;
  const size_t len = size - 1;
  size_t n = 0;
  bbi_sparse_fault fault;
  if (bbi_sparse_count(in, len, expect ? expect : 4096, expect, &n, &fault, NULL)) return 0;
  float *out = malloc((n ? n : 1) * sizeof *out);
  if (!out) return 0;
  if (bbi_sparse_decode(in, len, out, n, &fault, NULL) == 0)
    for (size_t i = 0; i < n; i++)
      if (!isfinite(out[i])) abort();
  free(out);
  return 0;
}
