/* A GlobalRegistry server's lease table, apart from the node: who announced and until
 * when, kept sorted by peer id so draws and views never depend on arrival or hash order.
 * A registration lives ttl_ns after its last Announce; expired ones are dropped by
 * bbi_registry_table_evict, which the adapter (global_registry_component.c) calls before
 * every read and every registration. */
#ifndef BBI_COMPONENTS_PROTOCOLS_REGISTRY_TABLE_H
#define BBI_COMPONENTS_PROTOCOLS_REGISTRY_TABLE_H

#include "components/protocols/registry_codec.h"
#include "components/selectors/draw.h"

#define BBI_REGISTRY_MAX_MEMBERS 1024

typedef struct bbi_registry_member {
  bb_peer_id peer;
  uint64_t expires_ns;
} bbi_registry_member;

typedef struct bbi_registry_table {
  uint64_t ttl_ns;
  bbi_registry_member members[BBI_REGISTRY_MAX_MEMBERS]; /* sorted by peer id */
  size_t n;
} bbi_registry_table;

/* An empty table whose registrations live ttl_ns. */
void bbi_registry_table_init(bbi_registry_table *t, uint64_t ttl_ns);

/* The heartbeat interval a Handshake asks of clients: a third of the ttl, so two lost
 * heartbeats still leave the registration alive. */
uint64_t bbi_registry_table_heartbeat_ns(const bbi_registry_table *t);

/* Drops every registration that expired by `now`. */
void bbi_registry_table_evict(bbi_registry_table *t, uint64_t now);

/* Registers peer, or refreshes its registration, to expire at now + ttl; *is_new says
 * which. BB_ERR_LIMIT when a new peer finds the table full. */
int bbi_registry_table_register(bbi_registry_table *t, const bb_peer_id *peer, uint64_t now, bool *is_new,
                               bb_error *err);

/* Whether a member counts for a read (a caller's filter). */
typedef bool (*bbi_registry_keep_fn)(void *user, const bb_peer_id *peer);

/* min(n, m) distinct members drawn by a partial Fisher–Yates shuffle over the m members
 * keep accepts (keep NULL: all), in peer-id order, into out; idx is scratch for 2·t->n
 * positions. With every member kept, the same generator gives the same draw whatever
 * the filter. */
size_t bbi_registry_table_sample(const bbi_registry_table *t, const bbi_draw_source *rng, bbi_registry_keep_fn keep,
                                void *user, size_t n, size_t *idx, bb_peer_id *out);

/* The saved state's size, and the state into out[0..cap): u8 version, u64 ttl_ns, u32
 * count, then per member (in peer-id order) the peer id and u64 expires_ns. Returns its
 * length. */
size_t bbi_registry_table_save_size(const bbi_registry_table *t);
size_t bbi_registry_table_save(const bbi_registry_table *t, uint8_t *out, size_t cap);

/* Restores a saved state, its ttl replacing t's. BB_ERR_MALFORMED for more than
 * BBI_REGISTRY_MAX_MEMBERS members, members out of order, short or trailing bytes;
 * t is unchanged on any failure. Scratch comes from alloc. */
int bbi_registry_table_load(bbi_registry_table *t, const uint8_t *data, size_t len, const bb_allocator *alloc,
                           bb_error *err);

#endif
