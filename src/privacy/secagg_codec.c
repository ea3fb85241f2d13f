/* The SecAgg+ message codec. Every count is checked against the caps and against the bytes
 * actually there before anything is read; lists must be strictly ascending (so never hold
 * one index twice) and nothing may follow the last field. */
#include "privacy/secagg_codec.h"

#include <math.h>
#include <string.h>

#include "privacy/secagg_reason.h"

#define DEFAULT_MAX_CLIENTS 10000
#define DEFAULT_MAX_VECTOR_LEN (1u << 22)

const char *sa_type_name(uint8_t type) {
  static const char *const NAMES[] = {"?",      "setup",  "advertise", "keys",  "shares",
                                      "ciphertexts", "masked", "unmask_request", "unmask", "abort"};
  return type < sizeof NAMES / sizeof NAMES[0] ? NAMES[type] : "?";
}

bb_secagg_caps sa_caps_resolve(const bb_secagg_caps *caps) {
  bb_secagg_caps c = caps ? *caps : (bb_secagg_caps){0};
  if (!c.max_clients) c.max_clients = DEFAULT_MAX_CLIENTS;
  if (!c.max_vector_len) c.max_vector_len = DEFAULT_MAX_VECTOR_LEN;
  return c;
}

void sa_put_header(bb_le_writer *w, uint8_t type, const uint8_t *round, uint32_t index) {
  bb_le_write(w, SA_MAGIC, 4);
  bb_le_write_u8(w, BB_SECAGG_VERSION);
  bb_le_write_u8(w, type);
  bb_le_write(w, round, SA_ROUND_BYTES);
  bb_le_write_u32(w, index);
}

void sa_put_params(bb_le_writer *w, const bb_secagg_params *p) {
  bb_le_write_u32(w, p->n_clients);
  bb_le_write_u32(w, p->degree);
  bb_le_write_u32(w, p->threshold);
  bb_le_write_u32(w, p->min_clients);
  bb_le_write_u32(w, p->vector_len);
  bb_le_write_u32(w, p->modulus_bits);
  uint64_t bits;
  memcpy(&bits, &p->clip_range, 8);
  bb_le_write_u64(w, bits);
  bb_le_write_u64(w, p->quant_range);
}

void sa_put_element(uint8_t *p, uint64_t v, uint32_t width) {
  for (uint32_t i = 0; i < width; i++) p[i] = (uint8_t)(v >> (8 * i));
}

uint64_t sa_get_element(const uint8_t *p, uint32_t width) {
  uint64_t v = 0;
  for (uint32_t i = width; i-- > 0;) v = v << 8 | p[i];
  return v;
}

/* count entries of entry bytes each fill exactly what is left, and their leading u32
 * indices rise strictly. */
static int check_list(bb_le_reader *r, uint32_t count, size_t entry, uint32_t cap, const char *what,
                      bb_secagg_reason *reason, bb_error *err) {
  if (count > cap) return sa_fail(err, reason, BB_SECAGG_OVER_CAP, "%u %s, over the cap of %u", count, what, cap);
  const size_t need = (size_t)count * entry;
  if (bb_le_left(r) != need)
    return sa_fail(err, reason, bb_le_left(r) < need ? BB_SECAGG_TRUNCATED : BB_SECAGG_BAD_LENGTH,
                   "%u %s need %zu bytes at byte %zu, %zu are there", count, what, need, r->at, bb_le_left(r));
  const uint8_t *p = r->p + r->at;
  for (uint32_t i = 1; i < count; i++)
    if (bb_le_get_u32(p + i * entry) <= bb_le_get_u32(p + (i - 1) * entry))
      return sa_fail(err, reason, BB_SECAGG_BAD_VALUE, "%s %u names client %u after client %u (indices must rise)", what,
                     i, bb_le_get_u32(p + i * entry), bb_le_get_u32(p + (i - 1) * entry));
  return 0;
}

/* A u32 index list: its count, then count ascending u32s. */
static int read_index_list(bb_le_reader *r, uint32_t cap, const char *what, uint32_t *count, const uint8_t **items,
                           bb_secagg_reason *reason, bb_error *err) {
  if (!bb_le_read_u32(r, count)) return sa_fail(err, reason, BB_SECAGG_TRUNCATED, "the count of %s is cut off", what);
  if (*count > cap) return sa_fail(err, reason, BB_SECAGG_OVER_CAP, "%u %s, over the cap of %u", *count, what, cap);
  if (bb_le_left(r) < (size_t)*count * 4)
    return sa_fail(err, reason, BB_SECAGG_TRUNCATED, "%u %s need %u bytes at byte %zu, %zu are there", *count, what,
                   *count * 4, r->at, bb_le_left(r));
  *items = bb_le_read_span(r, (size_t)*count * 4);
  for (uint32_t i = 1; i < *count; i++)
    if (bb_le_get_u32(*items + 4 * i) <= bb_le_get_u32(*items + 4 * (i - 1)))
      return sa_fail(err, reason, BB_SECAGG_BAD_VALUE, "%s: client %u listed after client %u (indices must rise)", what,
                     bb_le_get_u32(*items + 4 * i), bb_le_get_u32(*items + 4 * (i - 1)));
  return 0;
}

static int decode_setup(bb_le_reader *r, const bb_secagg_caps *caps, sa_msg *m, bb_secagg_reason *reason,
                        bb_error *err) {
  if (bb_le_left(r) < SA_PARAMS_BYTES)
    return sa_fail(err, reason, BB_SECAGG_TRUNCATED, "the parameters need %d bytes, %zu are there", SA_PARAMS_BYTES,
                   bb_le_left(r));
  bb_secagg_params *p = &m->u.setup.params;
  uint64_t clip_bits;
  bb_le_read_u32(r, &p->n_clients);
  bb_le_read_u32(r, &p->degree);
  bb_le_read_u32(r, &p->threshold);
  bb_le_read_u32(r, &p->min_clients);
  bb_le_read_u32(r, &p->vector_len);
  bb_le_read_u32(r, &p->modulus_bits);
  bb_le_read_u64(r, &clip_bits);
  memcpy(&p->clip_range, &clip_bits, 8);
  bb_le_read_u64(r, &p->quant_range);
  if (p->n_clients > caps->max_clients)
    return sa_fail(err, reason, BB_SECAGG_OVER_CAP, "%u clients, over the cap of %u", p->n_clients, caps->max_clients);
  if (p->vector_len > caps->max_vector_len)
    return sa_fail(err, reason, BB_SECAGG_OVER_CAP, "vectors of %u elements, over the cap of %u", p->vector_len,
                   caps->max_vector_len);
  const size_t need = (size_t)p->n_clients * BB_SECAGG_KEY_BYTES;
  if (bb_le_left(r) != need)
    return sa_fail(err, reason, bb_le_left(r) < need ? BB_SECAGG_TRUNCATED : BB_SECAGG_BAD_LENGTH,
                   "%u identity keys need %zu bytes, %zu are there", p->n_clients, need, bb_le_left(r));
  m->u.setup.identities = bb_le_read_span(r, need);
  return 0;
}

int sa_decode(const uint8_t *data, size_t len, const bb_secagg_caps *caps_in, uint32_t modulus_bits, sa_msg *m,
              bb_secagg_reason *reason, bb_error *err) {
  memset(m, 0, sizeof *m);
  *reason = BB_SECAGG_OK;
  const bb_secagg_caps caps = sa_caps_resolve(caps_in);
  if (!data && len) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "no message bytes");
  if (len < SA_HEADER_BYTES)
    return sa_fail(err, reason, BB_SECAGG_TRUNCATED, "%zu bytes, shorter than the %d-byte header", len, SA_HEADER_BYTES);
  if (memcmp(data, SA_MAGIC, 4) != 0) return sa_fail(err, reason, BB_SECAGG_BAD_MAGIC, "the first 4 bytes are not \"BBSA\"");
  if (data[4] != BB_SECAGG_VERSION)
    return sa_fail(err, reason, BB_SECAGG_BAD_VERSION, "version %u (this library speaks %d)", data[4], BB_SECAGG_VERSION);
  m->type = data[5];
  m->round = data + 6;
  m->index = bb_le_get_u32(data + 22);
  bb_le_reader r = bb_le_reader_of(data, len);
  r.at = SA_HEADER_BYTES;
  const uint32_t max_list = BB_SECAGG_MAX_DEGREE;
  switch (m->type) {
  case SA_SETUP: return decode_setup(&r, &caps, m, reason, err);
  case SA_ADVERTISE:
    if (bb_le_left(&r) != 2 * BB_SECAGG_KEY_BYTES + BB_SECAGG_SIGNATURE_BYTES)
      return sa_fail(err, reason, bb_le_left(&r) < 128 ? BB_SECAGG_TRUNCATED : BB_SECAGG_BAD_LENGTH,
                     "keys and signature take 128 bytes, %zu are there", bb_le_left(&r));
    m->u.advertise.c_pk = bb_le_read_span(&r, 32);
    m->u.advertise.s_pk = bb_le_read_span(&r, 32);
    m->u.advertise.sig = bb_le_read_span(&r, 64);
    return 0;
  case SA_KEYS:
  case SA_CIPHERTEXTS:
  case SA_UNMASK: {
    if (!bb_le_read_u32(&r, &m->u.list.count))
      return sa_fail(err, reason, BB_SECAGG_TRUNCATED, "the entry count is cut off");
    const size_t entry = m->type == SA_KEYS ? SA_KEY_ENTRY_BYTES
                         : m->type == SA_UNMASK ? SA_UNMASK_ENTRY_BYTES
                                                : SA_CIPHER_ENTRY_BYTES;
    int rc = check_list(&r, m->u.list.count, entry, max_list, "entries", reason, err);
    if (rc) return rc;
    m->u.list.entries = r.p + r.at;
    if (m->type == SA_UNMASK)
      for (uint32_t i = 0; i < m->u.list.count; i++) {
        const uint8_t kind = m->u.list.entries[i * entry + 4];
        if (kind != SA_KIND_SELF_MASK && kind != SA_KIND_MASK_KEY)
          return sa_fail(err, reason, BB_SECAGG_BAD_VALUE, "entry %u is a share of kind %u (1 or 2)", i, kind);
      }
    return 0;
  }
  case SA_SHARES: {
    if (bb_le_left(&r) < 36) return sa_fail(err, reason, BB_SECAGG_TRUNCATED, "the commitment and count are cut off");
    m->u.shares.commit = bb_le_read_span(&r, 32);
    bb_le_read_u32(&r, &m->u.shares.count);
    int rc = check_list(&r, m->u.shares.count, SA_CIPHER_ENTRY_BYTES, max_list, "ciphertexts", reason, err);
    if (rc) return rc;
    m->u.shares.entries = r.p + r.at;
    return 0;
  }
  case SA_MASKED: {
    if (!bb_le_read_u32(&r, &m->u.masked.len))
      return sa_fail(err, reason, BB_SECAGG_TRUNCATED, "the vector length is cut off");
    if (m->u.masked.len > caps.max_vector_len)
      return sa_fail(err, reason, BB_SECAGG_OVER_CAP, "a vector of %u elements, over the cap of %u", m->u.masked.len,
                     caps.max_vector_len);
    const uint32_t width = sa_width(modulus_bits ? modulus_bits : 32);
    const size_t need = (size_t)m->u.masked.len * width;
    if (bb_le_left(&r) != need)
      return sa_fail(err, reason, bb_le_left(&r) < need ? BB_SECAGG_TRUNCATED : BB_SECAGG_BAD_LENGTH,
                     "%u elements of %u bytes need %zu bytes, %zu are there", m->u.masked.len, width, need,
                     bb_le_left(&r));
    m->u.masked.data = r.p + r.at;
    if (modulus_bits && modulus_bits < 64 && modulus_bits % 8) {
      const uint64_t limit = (uint64_t)1 << modulus_bits;
      for (uint32_t i = 0; i < m->u.masked.len; i++)
        if (sa_get_element(m->u.masked.data + (size_t)i * width, width) >= limit)
          return sa_fail(err, reason, BB_SECAGG_BAD_VALUE, "element %u is not below 2^%u", i, modulus_bits);
    }
    return 0;
  }
  case SA_UNMASK_REQUEST: {
    int rc = read_index_list(&r, max_list, "survivors", &m->u.request.n_survivors, &m->u.request.survivors, reason, err);
    if (!rc) rc = read_index_list(&r, max_list, "dropped clients", &m->u.request.n_dropped, &m->u.request.dropped, reason, err);
    if (rc) return rc;
    if (bb_le_left(&r))
      return sa_fail(err, reason, BB_SECAGG_BAD_LENGTH, "%zu bytes after the lists", bb_le_left(&r));
    return 0;
  }
  case SA_ABORT:
    if (bb_le_left(&r) != 1)
      return sa_fail(err, reason, bb_le_left(&r) < 1 ? BB_SECAGG_TRUNCATED : BB_SECAGG_BAD_LENGTH,
                     "an abort carries one byte, %zu are there", bb_le_left(&r));
    bb_le_read_u8(&r, &m->u.abort_reason);
    if (m->u.abort_reason > BB_SECAGG_SERVER_ABORT)
      return sa_fail(err, reason, BB_SECAGG_BAD_VALUE, "abort reason %u is not one this library names",
                     m->u.abort_reason);
    return 0;
  default: return sa_fail(err, reason, BB_SECAGG_BAD_TYPE, "message type %u (1..9)", m->type);
  }
}
