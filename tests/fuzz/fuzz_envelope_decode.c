/* libFuzzer target: arbitrary bytes through the envelope decoder, and whatever decodes
 * through the encoder and back (the re-encoding must decode to the same envelope), and
 * every address inside it through the address parser. */
#include <stdlib.h>
#include <string.h>

#include "bb/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void parse_addresses(const bb_bytes *list, size_t n) {
  for (size_t i = 0; i < n; i++) {
    bb_address a;
    bb_error err;
    if (bb_address_from_bytes(list[i].data, list[i].len, &a, &err) == 0) {
      char text[4096];
      uint8_t bytes[4096];
      if (!bb_address_to_text(&a, text, sizeof text) && a.n) abort();
      if (bb_address_to_bytes(&a, bytes, sizeof bytes) != list[i].len ||
          (list[i].len && memcmp(bytes, list[i].data, list[i].len)))
        abort(); /* the byte form is canonical: what parses re-encodes identically */
    } else if (!err.message[0]) {
      abort();
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  bb_envelope *e = NULL;
  bb_error err;
  if (bb_envelope_decode(data, size, NULL, NULL, &e, &err) != 0) {
    if (!err.message[0]) abort();
    return 0;
  }
  parse_addresses(e->dest_peer_addresses, e->n_dest_peer_addresses);
  parse_addresses(e->src_peer_addresses, e->n_src_peer_addresses);
  for (size_t i = 0; i < e->n_fills; i++) parse_addresses(&e->fills[i].dest_suffix, 1);
  uint8_t *out;
  size_t len;
  if (bb_envelope_encode(e, NULL, &out, &len, &err) != 0) abort();
  bb_envelope *back = NULL;
  if (bb_envelope_decode(out, len, NULL, NULL, &back, &err) != 0) abort();
  if (back->n_fills != e->n_fills || back->wire_req_id != e->wire_req_id ||
      back->remaining_deadline_ns != e->remaining_deadline_ns)
    abort();
  for (size_t i = 0; i < e->n_fills; i++)
    if (back->fills[i].payload.len != e->fills[i].payload.len || back->fills[i].type_hash != e->fills[i].type_hash)
      abort();
  bb_envelope_free(back, NULL);
  bb_buffer_free(NULL, out);
  bb_envelope_free(e, NULL);
  return 0;
}
