/* libFuzzer target: a type hash (chosen by the first byte among the value kinds, or the
 * next 8 bytes taken as any hash) and a payload through bb_val_decode. Nothing may crash
 * or leak; what decodes must re-encode to exactly the payload (the wire form is canonical). */
#include <stdlib.h>
#include <string.h>

#include "bb/value.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!size) return 0;
  uint64_t hash;
  const uint8_t *payload = data + 1;
  size_t len = size - 1;
  if (data[0] < 0xf0) {
    hash = bb_val_kind_hash(data[0] % BB_VAL_KIND_COUNT);
  } else {
    if (len < 8) return 0;
    memcpy(&hash, payload, 8);
    payload += 8;
    len -= 8;
  }
  bb_val *v = NULL;
  bb_error err;
  err.message[0] = 0;
  int rc = bb_val_decode(hash, payload, len, NULL, &v, &err);
  if (rc) {
    if (v || !err.message[0]) abort(); /* a refusal says why and hands nothing out */
    return 0;
  }
  if (bb_val_kind_hash((int)bb_val_kind_of(v)) != hash || bb_val_encoded_size(v) != len) abort();
  uint8_t *again = malloc(len ? len : 1);
  if (bb_val_encode_into(v, again) != len || (len && memcmp(again, payload, len))) abort();
  char text[256];
  bb_val_describe(v, text, sizeof text);
  free(again);
  bb_val_release(v);
  return 0;
}
