/* A GlobalRegistry server's lease table (see registry_table.h). */
#include "components/protocols/registry_table.h"

#include <string.h>

#include "bb/common.h"
#include "util/mem.h"

void bbi_registry_table_init(bbi_registry_table *t, uint64_t ttl_ns) {
  t->ttl_ns = ttl_ns;
  t->n = 0;
}

uint64_t bbi_registry_table_heartbeat_ns(const bbi_registry_table *t) { return t->ttl_ns / 3; }

/* Peer-id order: shorter ids first, then bytewise. */
static int peer_order(const bb_peer_id *a, const bb_peer_id *b) {
  if (a->len != b->len) return a->len < b->len ? -1 : 1;
  return memcmp(a->bytes, b->bytes, a->len);
}

void bbi_registry_table_evict(bbi_registry_table *t, uint64_t now) {
  size_t kept = 0;
  for (size_t i = 0; i < t->n; i++)
    if (now < t->members[i].expires_ns) t->members[kept++] = t->members[i];
  t->n = kept;
}

int bbi_registry_table_register(bbi_registry_table *t, const bb_peer_id *peer, uint64_t now, bool *is_new,
                               bb_error *err) {
  size_t lo = 0, hi = t->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (peer_order(&t->members[mid].peer, peer) < 0) lo = mid + 1;
    else hi = mid;
  }
  *is_new = !(lo < t->n && bb_peer_id_equal(&t->members[lo].peer, peer));
  if (*is_new) {
    if (t->n == BBI_REGISTRY_MAX_MEMBERS)
      return bb_error_set(err, BB_ERR_LIMIT, "GlobalRegistryServer: registry full (%d peers)", BBI_REGISTRY_MAX_MEMBERS);
    memmove(&t->members[lo + 1], &t->members[lo], (t->n - lo) * sizeof *t->members);
    t->members[lo].peer = *peer;
    t->n++;
  }
  t->members[lo].expires_ns = now + t->ttl_ns;
  return 0;
}

size_t bbi_registry_table_sample(const bbi_registry_table *t, const bbi_draw_source *rng, bbi_registry_keep_fn keep,
                                void *user, size_t n, size_t *idx, bb_peer_id *out) {
  size_t *kept = idx + t->n, m = 0;
  for (size_t i = 0; i < t->n; i++)
    if (!keep || keep(user, &t->members[i].peer)) kept[m++] = i;
  const size_t k = bbi_draw_distinct(rng, m, n, idx);
  for (size_t i = 0; i < k; i++) out[i] = t->members[kept[idx[i]]].peer;
  return k;
}

size_t bbi_registry_table_save_size(const bbi_registry_table *t) { return 1 + 8 + 4 + t->n * (1 + BB_PEER_ID_MAX + 8); }

size_t bbi_registry_table_save(const bbi_registry_table *t, uint8_t *out, size_t cap) {
  bb_le_writer w = bb_le_writer_fixed(out, cap);
  bb_le_write_u8(&w, BBI_REGISTRY_VERSION);
  bb_le_write_u64(&w, t->ttl_ns);
  bb_le_write_u32(&w, (uint32_t)t->n);
  for (size_t i = 0; i < t->n; i++) {
    bbi_registry_write_peer(&w, &t->members[i].peer);
    bb_le_write_u64(&w, t->members[i].expires_ns);
  }
  return w.len;
}

int bbi_registry_table_load(bbi_registry_table *t, const uint8_t *data, size_t len, const bb_allocator *alloc,
                           bb_error *err) {
  bbi_registry_reader r = bbi_registry_reader_of(data, len, "GlobalRegistryServer snapshot", err);
  uint64_t ttl = 0;
  uint8_t c[4] = {0}; /* a u32, read a byte at a time so a cut names the byte it fell on */
  int rc = bbi_registry_read_header(&r);
  if (!rc) rc = bbi_registry_read_u64(&r, "ttl_ns", &ttl);
  for (int i = 0; !rc && i < 4; i++) rc = bbi_registry_read_u8(&r, "the member count", &c[i]);
  if (rc) return rc;
  size_t count = bb_le_get_u32(c);
  if (count > BBI_REGISTRY_MAX_MEMBERS)
    return bb_error_set(err, BB_ERR_MALFORMED, "GlobalRegistryServer snapshot: %zu members (at most %d)", count,
                        BBI_REGISTRY_MAX_MEMBERS);
  bbi_registry_member *loaded = bbi_mem_calloc(alloc, count, sizeof *loaded);
  if (!loaded) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  for (size_t i = 0; !rc && i < count; i++) {
    rc = bbi_registry_read_peer(&r, &loaded[i].peer);
    if (!rc) rc = bbi_registry_read_u64(&r, "an expiry", &loaded[i].expires_ns);
    if (!rc && i && peer_order(&loaded[i - 1].peer, &loaded[i].peer) >= 0)
      rc = bb_error_set(err, BB_ERR_MALFORMED, "GlobalRegistryServer snapshot: member %zu out of order", i);
  }
  if (!rc) rc = bbi_registry_read_end(&r);
  if (!rc) {
    t->ttl_ns = ttl;
    memcpy(t->members, loaded, count * sizeof *loaded);
    t->n = count;
  }
  bbi_mem_free(alloc, loaded);
  return rc;
}
