/* bb wire decode: one envelope as JSON — the tool for when a peer misbehaves. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/wire.h"
#include "cli.h"

static void json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') printf("\\%c", c);
    else if (c < 0x20) printf("\\u%04x", c);
    else putchar(c);
  }
  putchar('"');
}

/* An address as text, or a note with its hex bytes when it does not parse. */
static void json_address(bb_bytes b) {
  bb_address a;
  bb_error err;
  char text[4096];
  if (bb_address_from_bytes(b.data, b.len, &a, &err) == 0 && (bb_address_to_text(&a, text, sizeof text) || !a.n)) {
    json_string(a.n ? text : "");
    return;
  }
  printf("{\"invalid\":");
  json_string(err.message);
  printf(",\"hex\":\"");
  for (size_t i = 0; i < b.len; i++) printf("%02x", b.data[i]);
  printf("\"}");
}

static void json_addresses(const bb_bytes *list, size_t n) {
  putchar('[');
  for (size_t i = 0; i < n; i++) {
    if (i) putchar(',');
    json_address(list[i]);
  }
  putchar(']');
}

int cmd_wire(int argc, char **argv) {
  if (argc != 2 || strcmp(argv[0], "decode") != 0) {
    fprintf(stderr, "usage: bb wire decode ENVELOPE.bin   (one WireEnvelope, as JSON)\n");
    return 2;
  }
  uint8_t *data;
  size_t len;
  if (cli_read_file(argv[1], &data, &len)) return 1;
  bb_envelope *e;
  bb_error err;
  if (bb_envelope_decode(data, len, NULL, NULL, &e, &err)) {
    fprintf(stderr, "bb wire decode: %s: %s\n", argv[1], err.message);
    free(data);
    return 1;
  }
  static const char *KINDS[] = {"NONE", "REQUEST", "RESPONSE"};
  printf("{\"bytes\":%zu,\"schema_version\":%" PRIu32 ",\"dest_peer_addresses\":", len, e->schema_version);
  json_addresses(e->dest_peer_addresses, e->n_dest_peer_addresses);
  printf(",\"src_peer_addresses\":");
  json_addresses(e->src_peer_addresses, e->n_src_peer_addresses);
  printf(",\"correlation\":");
  if (e->has_correlation) {
    printf("{\"kind\":");
    if (e->correlation_kind >= 0 && e->correlation_kind <= 2) json_string(KINDS[e->correlation_kind]);
    else printf("%" PRId32, e->correlation_kind);
    printf(",\"wire_req_id\":%" PRIu64 "}", e->wire_req_id);
  } else {
    printf("null");
  }
  printf(",\"remaining_deadline_ns\":%" PRIu64 ",\"fills\":[", e->remaining_deadline_ns);
  for (size_t i = 0; i < e->n_fills; i++) {
    const bb_slot_fill *f = &e->fills[i];
    const char *name = bb_wire_type_name(f->type_hash);
    printf("%s{\"dest\":", i ? "," : "");
    json_address(f->dest_suffix);
    printf(",\"type_hash\":\"0x%016" PRIx64 "\",\"type_name\":", f->type_hash);
    if (name) json_string(name);
    else printf("null");
    printf(",\"payload_bytes\":%zu,\"trigger_only\":%s}", f->payload.len, f->trigger_only ? "true" : "false");
  }
  printf("],\"edge_rtt_reports\":%zu}\n", e->n_rtt_reports);
  bb_envelope_free(e, NULL);
  free(data);
  return 0;
}
