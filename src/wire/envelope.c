/* The WireEnvelope codec (proto/bb_core.proto), hand-written so that caps are enforced
 * while parsing and payloads are slices of the input rather than copies. Unknown fields
 * are skipped as proto3 does, but must still be well-formed. */
#include <string.h>

#include "bb/wire.h"
#include "bb/common.h"
#include "util/hash.h"
#include "util/mem.h"
#include "util/options.h"
#include "wire/varint.h"

static size_t cap_or(size_t v, size_t dflt) { return v ? v : dflt; }

typedef struct caps {
  size_t total, fills, payload, suffix, addresses, address_bytes, reports;
} caps;

typedef struct parser {
  const uint8_t *d;
  size_t end;
  caps c;
  bb_error *err;
  bb_envelope *env; /* NULL on the counting pass */
  size_t n_dest, n_src, n_fills, n_reports;
} parser;

/* One field: its number, wire type and value (varint, or a slice for length-delimited). */
typedef struct field {
  uint32_t number;
  unsigned wire;
  uint64_t varint;
  bb_bytes bytes;
  size_t at;
} field;

static const char *WIRE_NAMES[] = {"varint", "64-bit", "length-delimited", "start-group", "end-group", "32-bit",
                                   "invalid(6)", "invalid(7)"};

/* Reads the next field of [*pos, end); 0, or a recorded error naming `where`. */
static int next_field(parser *p, const char *where, size_t *pos, size_t end, field *f) {
  f->at = *pos;
  uint64_t key;
  int rc = bbi_varint_read(p->d, end, pos, &key, 0);
  if (rc || (key >> 3) == 0 || (key >> 3) > 536870911u)
    return bb_error_set(p->err, BB_ERR_MALFORMED, "malformed envelope bytes: %s at byte %zu: %s field tag", where,
                        f->at, rc == 1 ? "truncated" : "invalid");
  f->number = (uint32_t)(key >> 3);
  f->wire = (unsigned)(key & 7);
  size_t value_at = *pos;
  switch (f->wire) {
  case 0:
    if ((rc = bbi_varint_read(p->d, end, pos, &f->varint, 0)))
      return bb_error_set(p->err, BB_ERR_MALFORMED, "malformed envelope bytes: %s field %u at byte %zu: %s varint",
                          where, f->number, value_at, rc == 1 ? "truncated" : "over 10-byte");
    return 0;
  case 1:
  case 5: {
    size_t w = f->wire == 1 ? 8 : 4;
    if (end - *pos < w)
      return bb_error_set(p->err, BB_ERR_MALFORMED, "malformed envelope bytes: %s field %u at byte %zu: truncated",
                          where, f->number, value_at);
    *pos += w;
    return 0;
  }
  case 2: {
    uint64_t n;
    if (bbi_varint_read(p->d, end, pos, &n, 0) || n > end - *pos)
      return bb_error_set(p->err, BB_ERR_MALFORMED,
                          "malformed envelope bytes: %s field %u at byte %zu: length runs past the end", where,
                          f->number, value_at);
    f->bytes.data = (uint8_t *)(p->d + *pos);
    f->bytes.len = (size_t)n;
    *pos += (size_t)n;
    return 0;
  }
  default:
    return bb_error_set(p->err, BB_ERR_MALFORMED, "malformed envelope bytes: %s field %u at byte %zu: wire type %s",
                        where, f->number, f->at, WIRE_NAMES[f->wire]);
  }
}

static int want_wire(parser *p, const char *where, const field *f, unsigned wire, const char *name) {
  if (f->wire == wire) return 0;
  return bb_error_set(p->err, BB_ERR_MALFORMED, "malformed envelope bytes: %s.%s at byte %zu: %s, expected %s", where,
                      name, f->at, WIRE_NAMES[f->wire], WIRE_NAMES[wire]);
}

static int parse_fill(parser *p, bb_bytes msg, bb_slot_fill *out) {
  size_t pos = (size_t)(msg.data - p->d), end = pos + msg.len;
  field f;
  bb_slot_fill fill;
  memset(&fill, 0, sizeof fill);
  while (pos < end) {
    int rc = next_field(p, "fill", &pos, end, &f);
    if (rc) return rc;
    switch (f.number) {
    case 1:
      if ((rc = want_wire(p, "fill", &f, 2, "dest_suffix"))) return rc;
      if (f.bytes.len > p->c.suffix)
        return bb_error_set(p->err, BB_ERR_LIMIT, "slot fill dest_suffix exceeds cap: cap=%zu got=%zu", p->c.suffix,
                            f.bytes.len);
      fill.dest_suffix = f.bytes;
      break;
    case 2:
      if ((rc = want_wire(p, "fill", &f, 2, "payload"))) return rc;
      if (f.bytes.len > p->c.payload)
        return bb_error_set(p->err, BB_ERR_LIMIT, "slot fill payload exceeds cap: cap=%zu got=%zu", p->c.payload,
                            f.bytes.len);
      fill.payload = f.bytes;
      break;
    case 3:
      if ((rc = want_wire(p, "fill", &f, 0, "trigger_only"))) return rc;
      fill.trigger_only = f.varint != 0;
      break;
    case 4:
      if ((rc = want_wire(p, "fill", &f, 0, "type_hash"))) return rc;
      fill.type_hash = f.varint;
      break;
    default: break; /* unknown: skipped */
    }
  }
  if (out) *out = fill;
  return 0;
}

static int parse_correlation(parser *p, bb_bytes msg) {
  size_t pos = (size_t)(msg.data - p->d), end = pos + msg.len;
  field f;
  while (pos < end) {
    int rc = next_field(p, "correlation", &pos, end, &f);
    if (rc) return rc;
    if (f.number == 1 || f.number == 2) {
      if ((rc = want_wire(p, "correlation", &f, 0, f.number == 1 ? "kind" : "wire_req_id"))) return rc;
      if (p->env && f.number == 1) p->env->correlation_kind = (int32_t)f.varint;
      if (p->env && f.number == 2) p->env->wire_req_id = f.varint;
    }
  }
  if (p->env) p->env->has_correlation = true;
  return 0;
}

static int parse_report(parser *p, bb_bytes msg, bb_rtt_report *out) {
  size_t pos = (size_t)(msg.data - p->d), end = pos + msg.len;
  field f;
  bb_rtt_report r;
  memset(&r, 0, sizeof r);
  while (pos < end) {
    int rc = next_field(p, "edge_rtt_report", &pos, end, &f);
    if (rc) return rc;
    if (f.number < 1 || f.number > 6) continue;
    if ((rc = want_wire(p, "edge_rtt_report", &f, 0, "field"))) return rc;
    switch (f.number) {
    case 1: r.next_hop_site_id = f.varint; break;
    case 2: r.chain_id = f.varint; break;
    case 3: r.hop_index = (uint32_t)f.varint; break;
    case 4: r.srtt_ns = f.varint; break;
    case 5: r.rttvar_ns = f.varint; break;
    case 6: r.sample_count = f.varint; break;
    }
  }
  if (out) *out = r;
  return 0;
}

static int address_entry(parser *p, const field *f, const char *name, bb_bytes *list, size_t *n) {
  int rc = want_wire(p, "envelope", f, 2, name);
  if (rc) return rc;
  if (*n >= p->c.addresses)
    return bb_error_set(p->err, BB_ERR_LIMIT, "envelope carries too many %s: cap=%zu", name, p->c.addresses);
  if (f->bytes.len > p->c.address_bytes)
    return bb_error_set(p->err, BB_ERR_LIMIT, "%s entry too large: cap=%zu got=%zu", name, p->c.address_bytes,
                        f->bytes.len);
  if (list) list[*n] = f->bytes;
  (*n)++;
  return 0;
}

/* One pass over the envelope: counts (env NULL) or fills the arrays sized by the count. */
static int parse(parser *p) {
  size_t pos = 0;
  field f;
  bb_envelope *e = p->env;
  p->n_dest = p->n_src = p->n_fills = p->n_reports = 0;
  while (pos < p->end) {
    int rc = next_field(p, "envelope", &pos, p->end, &f);
    if (rc) return rc;
    switch (f.number) {
    case 1:
      rc = address_entry(p, &f, "dest_peer_addresses", e ? e->dest_peer_addresses : NULL, &p->n_dest);
      break;
    case 2:
      if ((rc = want_wire(p, "envelope", &f, 2, "fills"))) return rc;
      if (p->n_fills >= p->c.fills)
        return bb_error_set(p->err, BB_ERR_LIMIT, "envelope carries too many slot fills: cap=%zu got>%zu", p->c.fills,
                            p->c.fills);
      rc = parse_fill(p, f.bytes, e ? &e->fills[p->n_fills] : NULL);
      p->n_fills++;
      break;
    case 3:
      if ((rc = want_wire(p, "envelope", &f, 2, "correlation"))) return rc;
      rc = parse_correlation(p, f.bytes);
      break;
    case 4:
      if ((rc = want_wire(p, "envelope", &f, 0, "remaining_deadline_ns"))) return rc;
      if (e) e->remaining_deadline_ns = f.varint;
      break;
    case 5:
      if ((rc = want_wire(p, "envelope", &f, 2, "edge_rtt_reports"))) return rc;
      if (p->n_reports >= p->c.reports)
        return bb_error_set(p->err, BB_ERR_LIMIT, "envelope carries too many edge_rtt_reports: cap=%zu", p->c.reports);
      rc = parse_report(p, f.bytes, e ? &e->rtt_reports[p->n_reports] : NULL);
      p->n_reports++;
      break;
    case 6:
      if ((rc = want_wire(p, "envelope", &f, 2, "src_peer_bytes"))) return rc;
      if (f.bytes.len > p->c.address_bytes)
        return bb_error_set(p->err, BB_ERR_LIMIT, "src_peer_bytes too large: cap=%zu got=%zu", p->c.address_bytes,
                            f.bytes.len);
      if (e) e->src_peer_bytes = f.bytes;
      break;
    case 7:
      if ((rc = want_wire(p, "envelope", &f, 0, "schema_version"))) return rc;
      if (f.varint > BB_ENVELOPE_SCHEMA_VERSION)
        return bb_error_set(p->err, BB_ERR_UNSUPPORTED, "envelope schema_version mismatch: got=%llu supported=[1,2]",
                            (unsigned long long)f.varint);
      if (e) e->schema_version = (uint32_t)f.varint;
      break;
    case 8:
      rc = address_entry(p, &f, "src_peer_addresses", e ? e->src_peer_addresses : NULL, &p->n_src);
      break;
    default: break; /* unknown field: skipped */
    }
    if (rc) return rc;
  }
  return 0;
}

void bb_envelope_free(bb_envelope *env, const bb_allocator *alloc) {
  if (!env) return;
  if (!alloc) alloc = bb_default_allocator();
  bbi_mem_free(alloc, env);
}

int bb_envelope_decode(const uint8_t *data, size_t len, const bb_envelope_caps *caps_in, const bb_allocator *alloc,
                       bb_envelope **out, bb_error *err) {
  *out = NULL;
  if (!alloc) alloc = bb_default_allocator();
  bb_envelope_caps given = {.struct_size = sizeof given};
  if (caps_in && !bbi_options_read(&given, sizeof given, caps_in))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "envelope caps have struct_size %zu; set it to sizeof(bb_envelope_caps), %zu",
                        caps_in->struct_size, sizeof given);
  const bb_envelope_caps *k = &given;
  parser p;
  memset(&p, 0, sizeof p);
  p.d = data;
  p.end = len;
  p.err = err;
  p.c.total = cap_or(k->max_total_bytes, 16u << 20);
  p.c.fills = cap_or(k->max_fills, 64);
  p.c.payload = cap_or(k->max_fill_payload_bytes, 16u << 20);
  p.c.suffix = cap_or(k->max_dest_suffix_bytes, 256);
  p.c.addresses = cap_or(k->max_addresses, 16);
  p.c.address_bytes = cap_or(k->max_address_bytes, 512);
  p.c.reports = cap_or(k->max_rtt_reports, 64);
  if (len > p.c.total)
    return bb_error_set(err, BB_ERR_LIMIT, "envelope buffer too large: cap=%zu got=%zu", p.c.total, len);
  if (!data && len) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "envelope: NULL data");
  int rc = parse(&p); /* counting pass: validates everything, sizes the arrays */
  if (rc) return rc;
  /* one allocation: the struct, then each array */
  size_t size = sizeof(bb_envelope) + (p.n_dest + p.n_src) * sizeof(bb_bytes) + p.n_fills * sizeof(bb_slot_fill) +
                p.n_reports * sizeof(bb_rtt_report);
  bb_envelope *e = bbi_mem_calloc(alloc, 1, size);
  if (!e) return bb_error_set(err, BB_ERR_NOMEM, "out of memory for an envelope");
  char *at = (char *)(e + 1);
  e->fills = (bb_slot_fill *)at, at += p.n_fills * sizeof(bb_slot_fill);
  e->rtt_reports = (bb_rtt_report *)at, at += p.n_reports * sizeof(bb_rtt_report);
  e->dest_peer_addresses = (bb_bytes *)at, at += p.n_dest * sizeof(bb_bytes);
  e->src_peer_addresses = (bb_bytes *)at;
  e->n_fills = p.n_fills, e->n_rtt_reports = p.n_reports;
  e->n_dest_peer_addresses = p.n_dest, e->n_src_peer_addresses = p.n_src;
  p.env = e;
  rc = parse(&p);
  if (rc) { /* cannot happen after a clean counting pass; kept as a guard */
    bbi_mem_free(alloc, e);
    return rc;
  }
  *out = e;
  return 0;
}

/* ---- encoding ------------------------------------------------------------------------ */

typedef struct writer {
  uint8_t *out; /* NULL: only count */
  size_t n;
} writer;

static void put_varint(writer *w, uint64_t v) {
  if (w->out) bbi_varint_write(v, w->out + w->n);
  w->n += bbi_varint_size(v);
}

static void put_key(writer *w, uint32_t number, unsigned wire) { put_varint(w, (uint64_t)number << 3 | wire); }

static void put_bytes(writer *w, uint32_t number, bb_bytes b) {
  put_key(w, number, 2);
  put_varint(w, b.len);
  if (w->out && b.len) memcpy(w->out + w->n, b.data, b.len);
  w->n += b.len;
}

static void put_uint(writer *w, uint32_t number, uint64_t v) {
  if (!v) return; /* proto3 default */
  put_key(w, number, 0);
  put_varint(w, v);
}

static size_t fill_size(const bb_slot_fill *f) {
  writer w = {NULL, 0};
  if (f->dest_suffix.len) put_bytes(&w, 1, f->dest_suffix);
  if (f->payload.len) put_bytes(&w, 2, f->payload);
  put_uint(&w, 3, f->trigger_only);
  put_uint(&w, 4, f->type_hash);
  return w.n;
}

static size_t report_size(const bb_rtt_report *r) {
  writer w = {NULL, 0};
  put_uint(&w, 1, r->next_hop_site_id);
  put_uint(&w, 2, r->chain_id);
  put_uint(&w, 3, r->hop_index);
  put_uint(&w, 4, r->srtt_ns);
  put_uint(&w, 5, r->rttvar_ns);
  put_uint(&w, 6, r->sample_count);
  return w.n;
}

static void write_envelope(writer *w, const bb_envelope *e) {
  for (size_t i = 0; i < e->n_dest_peer_addresses; i++) put_bytes(w, 1, e->dest_peer_addresses[i]);
  for (size_t i = 0; i < e->n_fills; i++) {
    const bb_slot_fill *f = &e->fills[i];
    put_key(w, 2, 2);
    put_varint(w, fill_size(f));
    if (f->dest_suffix.len) put_bytes(w, 1, f->dest_suffix);
    if (f->payload.len && f->write_payload) {
      put_key(w, 2, 2);
      put_varint(w, f->payload.len);
      if (w->out) f->write_payload(f->payload_ctx, w->out + w->n);
      w->n += f->payload.len;
    } else if (f->payload.len) {
      put_bytes(w, 2, f->payload);
    }
    put_uint(w, 3, f->trigger_only);
    put_uint(w, 4, f->type_hash);
  }
  if (e->has_correlation) {
    size_t n = (e->correlation_kind ? 1 + bbi_varint_size((uint64_t)(uint32_t)e->correlation_kind) : 0) +
               (e->wire_req_id ? 1 + bbi_varint_size(e->wire_req_id) : 0);
    put_key(w, 3, 2);
    put_varint(w, n);
    put_uint(w, 1, (uint64_t)(uint32_t)e->correlation_kind);
    put_uint(w, 2, e->wire_req_id);
  }
  put_uint(w, 4, e->remaining_deadline_ns);
  for (size_t i = 0; i < e->n_rtt_reports; i++) {
    const bb_rtt_report *r = &e->rtt_reports[i];
    put_key(w, 5, 2);
    put_varint(w, report_size(r));
    put_uint(w, 1, r->next_hop_site_id);
    put_uint(w, 2, r->chain_id);
    put_uint(w, 3, r->hop_index);
    put_uint(w, 4, r->srtt_ns);
    put_uint(w, 5, r->rttvar_ns);
    put_uint(w, 6, r->sample_count);
  }
  if (e->src_peer_bytes.len) put_bytes(w, 6, e->src_peer_bytes);
  put_uint(w, 7, e->schema_version);
  for (size_t i = 0; i < e->n_src_peer_addresses; i++) put_bytes(w, 8, e->src_peer_addresses[i]);
}

int bb_envelope_encode(const bb_envelope *e, const bb_allocator *alloc, uint8_t **out, size_t *out_len,
                       bb_error *err) {
  if (!alloc) alloc = bb_default_allocator();
  writer w = {NULL, 0};
  write_envelope(&w, e);
  uint8_t *buf = bbi_mem_alloc(alloc, w.n);
  if (!buf) return bb_error_set(err, BB_ERR_NOMEM, "out of memory for a %zu-byte envelope", w.n);
  size_t n = w.n;
  w.out = buf;
  w.n = 0;
  write_envelope(&w, e);
  *out = buf;
  *out_len = n;
  return 0;
}

uint64_t bb_type_hash(const char *type_name) { return bbi_fnv1a64(type_name, strlen(type_name)); }
