/* libFuzzer target: arbitrary bytes through the ONNX model decoder, and whatever decodes
 * through the encoder, a second decode and the equality check (a decoded model must
 * round-trip exactly). */
#include <stdlib.h>

#include "bb/ir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  bb_model *m = NULL;
  bb_error err;
  if (bb_model_decode(data, size, NULL, NULL, &m, &err) != 0) {
    if (!err.message[0]) abort(); /* every rejection must say why */
    return 0;
  }
  uint8_t *out;
  size_t out_len;
  if (bb_model_encode(m, &out, &out_len, &err) != 0) abort();
  bb_model *again = NULL;
  if (bb_model_decode(out, out_len, NULL, NULL, &again, &err) != 0) abort();
  if (!bb_model_equal(m, again)) abort();
  char *summary;
  size_t summary_len;
  if (bb_model_summary(m, true, &summary, &summary_len, &err) != 0) abort();
  bb_buffer_free(NULL, summary);
  bb_buffer_free(NULL, out);
  bb_model_free(again);
  bb_model_free(m);
  return 0;
}
