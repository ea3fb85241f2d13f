/* Addresses: the byte form (varint protocol code ‖ payload per segment) and the text form. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bb/wire.h"
#include "bb/common.h"
#include "wire/varint.h"

static bool utf8_ok(const uint8_t *s, size_t n) {
  for (size_t i = 0; i < n;) {
    uint8_t c = s[i];
    size_t extra = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : 9;
    if (extra == 9 || (extra && n - i <= extra) || c == 0) return false;
    for (size_t k = 1; k <= extra; k++)
      if ((s[i + k] & 0xc0) != 0x80) return false;
    i += extra + 1;
  }
  return true;
}

static int push(bb_address *a, bb_error *err) {
  if (a->n == BB_ADDR_MAX_SEGMENTS)
    return bb_error_set(err, BB_ERR_LIMIT, "address: more than %d segments", BB_ADDR_MAX_SEGMENTS);
  memset(&a->seg[a->n], 0, sizeof a->seg[a->n]);
  return 0;
}

int bb_address_from_bytes(const uint8_t *d, size_t len, bb_address *out, bb_error *err) {
  out->n = 0;
  size_t pos = 0;
  while (pos < len) {
    size_t at = pos;
    uint64_t code, n;
    int rc = bbi_varint_read(d, len, &pos, &code, 1);
    if (rc) return bb_error_set(err, BB_ERR_MALFORMED, "address: %s protocol code at byte %zu",
                                rc == 1 ? "truncated" : "malformed", at);
    if ((rc = push(out, err))) return rc;
    bb_addr_segment *s = &out->seg[out->n];
    switch (code) {
    case BB_ADDR_P2P:
      if (bbi_varint_read(d, len, &pos, &n, 1) || n > len - pos)
        return bb_error_set(err, BB_ERR_MALFORMED, "address: truncated p2p segment at byte %zu", at);
      if ((rc = bb_peer_id_from_bytes(d + pos, (size_t)n, &s->peer, err))) return bb_error_prefix(err, "address: ");
      pos += (size_t)n;
      break;
    case BB_ADDR_SITE:
    case BB_ADDR_COMPONENT: {
      size_t w = code == BB_ADDR_SITE ? 8 : 4;
      if (len - pos < w) return bb_error_set(err, BB_ERR_MALFORMED, "address: truncated %s segment at byte %zu",
                                             code == BB_ADDR_SITE ? "site" : "component", at);
      for (size_t i = 0; i < w; i++) s->value = s->value << 8 | d[pos + i];
      pos += w;
      break;
    }
    case BB_ADDR_OP:
      if (bbi_varint_read(d, len, &pos, &n, 1) || n > len - pos)
        return bb_error_set(err, BB_ERR_MALFORMED, "address: truncated op segment at byte %zu", at);
      if (n > BB_ADDR_OP_MAX || !utf8_ok(d + pos, (size_t)n))
        return bb_error_set(err, BB_ERR_MALFORMED, "address: op name of %llu bytes is not short UTF-8 text",
                            (unsigned long long)n);
      memcpy(s->op, d + pos, (size_t)n);
      pos += (size_t)n;
      break;
    default:
      return bb_error_set(err, BB_ERR_MALFORMED, "address: unknown protocol code %llu at byte %zu",
                          (unsigned long long)code, at);
    }
    s->kind = (bb_addr_kind)code;
    out->n++;
  }
  return 0;
}

size_t bb_address_to_bytes(const bb_address *a, uint8_t *out, size_t size) {
  size_t n = 0;
  for (size_t i = 0; i < a->n; i++) {
    const bb_addr_segment *s = &a->seg[i];
    uint8_t tmp[16 + BB_ADDR_OP_MAX + BB_PEER_ID_MAX];
    size_t k = bbi_varint_write((uint64_t)s->kind, tmp);
    switch (s->kind) {
    case BB_ADDR_P2P:
      k += bbi_varint_write(s->peer.len, tmp + k);
      memcpy(tmp + k, s->peer.bytes, s->peer.len);
      k += s->peer.len;
      break;
    case BB_ADDR_SITE:
      for (int b = 7; b >= 0; b--) tmp[k++] = (uint8_t)(s->value >> (8 * b));
      break;
    case BB_ADDR_COMPONENT:
      for (int b = 3; b >= 0; b--) tmp[k++] = (uint8_t)(s->value >> (8 * b));
      break;
    case BB_ADDR_OP: {
      size_t len = strlen(s->op);
      k += bbi_varint_write(len, tmp + k);
      memcpy(tmp + k, s->op, len);
      k += len;
      break;
    }
    default: return 0;
    }
    if (n + k > size) return 0;
    memcpy(out + n, tmp, k);
    n += k;
  }
  return n;
}

const bb_addr_segment *bb_address_find(const bb_address *a, bb_addr_kind kind) {
  for (size_t i = 0; i < a->n; i++)
    if (a->seg[i].kind == kind) return &a->seg[i];
  return NULL;
}

size_t bb_address_to_text(const bb_address *a, char *out, size_t size) {
  size_t n = 0;
  if (size) out[0] = '\0';
  for (size_t i = 0; i < a->n; i++) {
    const bb_addr_segment *s = &a->seg[i];
    char part[BB_ADDR_OP_MAX + 128];
    switch (s->kind) {
    case BB_ADDR_P2P: {
      char b58[128];
      if (!bb_peer_id_to_text(&s->peer, b58, sizeof b58)) return 0;
      snprintf(part, sizeof part, "/p2p/%s", b58);
      break;
    }
    case BB_ADDR_SITE: snprintf(part, sizeof part, "/site/%" PRIu64, s->value); break;
    case BB_ADDR_COMPONENT: snprintf(part, sizeof part, "/component/%" PRIu64, s->value); break;
    case BB_ADDR_OP: snprintf(part, sizeof part, "/op/%s", s->op); break;
    default: return 0;
    }
    size_t k = strlen(part);
    if (n + k + 1 > size) return 0;
    memcpy(out + n, part, k + 1);
    n += k;
  }
  return n;
}

static int parse_u64(const char *s, uint64_t max, uint64_t *out) {
  if (!*s || !isdigit((unsigned char)*s)) return -1;
  uint64_t v = 0;
  for (; *s; s++) {
    if (!isdigit((unsigned char)*s)) return -1;
    unsigned d = (unsigned)(*s - '0');
    if (v > (max - d) / 10) return -1;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

int bb_address_from_text(const char *text, bb_address *out, bb_error *err) {
  out->n = 0;
  while (isspace((unsigned char)*text)) text++;
  size_t len = strlen(text);
  while (len && isspace((unsigned char)text[len - 1])) len--;
  if (!len) return 0;
  if (text[0] != '/') return bb_error_set(err, BB_ERR_MALFORMED, "address: text must start with '/'");
  char buf[2048];
  if (len >= sizeof buf) return bb_error_set(err, BB_ERR_LIMIT, "address: text is too long");
  memcpy(buf, text, len);
  buf[len] = '\0';
  char *p = buf + 1;
  while (*p) {
    char *proto = p, *slash = strchr(p, '/');
    if (!slash) return bb_error_set(err, BB_ERR_MALFORMED, "address: protocol %s has no value", proto);
    *slash = '\0';
    char *value = slash + 1, *next = strchr(value, '/');
    if (next) *next = '\0';
    if (!*value) return bb_error_set(err, BB_ERR_MALFORMED, "address: protocol %s has no value", proto);
    int rc = push(out, err);
    if (rc) return rc;
    bb_addr_segment *s = &out->seg[out->n];
    if (strcmp(proto, "p2p") == 0) {
      s->kind = BB_ADDR_P2P;
      if ((rc = bb_peer_id_from_text(value, &s->peer, err))) return bb_error_prefix(err, "address: ");
    } else if (strcmp(proto, "site") == 0 || strcmp(proto, "component") == 0) {
      bool site = proto[0] == 's';
      s->kind = site ? BB_ADDR_SITE : BB_ADDR_COMPONENT;
      if (parse_u64(value, site ? UINT64_MAX : UINT32_MAX, &s->value))
        return bb_error_set(err, BB_ERR_MALFORMED, "address: %s value %s is not a %s", proto, value,
                            site ? "u64" : "u32");
    } else if (strcmp(proto, "op") == 0) {
      s->kind = BB_ADDR_OP;
      if (strlen(value) > BB_ADDR_OP_MAX) return bb_error_set(err, BB_ERR_LIMIT, "address: op name is too long");
      strcpy(s->op, value);
    } else {
      return bb_error_set(err, BB_ERR_MALFORMED, "address: unknown protocol %s (value %s)", proto, value);
    }
    out->n++;
    if (!next) break;
    p = next + 1;
  }
  return 0;
}

bb_address bb_address_p2p(const bb_peer_id *peer) {
  bb_address a;
  memset(&a, 0, sizeof a);
  a.n = 1;
  a.seg[0].kind = BB_ADDR_P2P;
  a.seg[0].peer = *peer;
  return a;
}
