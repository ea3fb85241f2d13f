/* A GlobalRegistry client's state machine, apart from the node: which server it announces
 * to, when an Announce goes out or is throttled, what a Handshake changes, which timer is
 * its newest, and its saved state. The GlobalRegistryClient adapter
 * (global_registry_component.c) does the sending, the timers and the address book.
 *
 * Until the first Handshake an unanswered Announce is repeated every retry_ns; the
 * Handshake's heartbeat interval then replaces it, and each heartbeat re-announces. Timers
 * cannot be cancelled, so each one carries a token and only the newest counts. */
#ifndef BBI_COMPONENTS_PROTOCOLS_REGISTRY_CLIENT_H
#define BBI_COMPONENTS_PROTOCOLS_REGISTRY_CLIENT_H

#include "components/protocols/registry_codec.h"

typedef struct bbi_registry_client {
  uint64_t retry_ns;
  bool has_server;
  bb_peer_id server;
  uint64_t ttl_ns, interval_ns; /* from the last Handshake; 0 before the first */
  uint64_t last_announce_ns;    /* not saved: a restored client announces at once */
  bool announced;
  uint64_t timer_gen;    /* the newest timer's token */
  bool awaiting_address; /* an Announce waits one timer for the server's address */
} bbi_registry_client;

/* The longest saved state: version, has_server, server peer, ttl, interval, timer token. */
#define BBI_REGISTRY_CLIENT_STATE_MAX (3 + BB_PEER_ID_MAX + 24)

void bbi_registry_client_init(bbi_registry_client *c, uint64_t retry_ns);

/* An Announce op for `server` at `now`: false when it is throttled (the same server was
 * announced to less than a heartbeat interval ago); else `server` becomes the one this
 * client announces to and an Announce is due. */
bool bbi_registry_client_target(bbi_registry_client *c, const bb_peer_id *server, uint64_t now);

/* Before an Announce goes out: true when it should wait one timer because the server has
 * no address yet (only once in a row — the next attempt sends anyway). */
bool bbi_registry_client_wait_for_address(bbi_registry_client *c, bool server_has_address);

/* Records an Announce sent at `now`; returns when to repeat it (the heartbeat interval,
 * or retry_ns before the first Handshake). */
uint64_t bbi_registry_client_announced(bbi_registry_client *c, uint64_t now);

/* The token of a new timer, which supersedes every earlier one. */
uint64_t bbi_registry_client_new_timer(bbi_registry_client *c);

/* Whether the timer with `token` is the newest and there is a server to announce to. */
bool bbi_registry_client_timer_due(const bbi_registry_client *c, uint64_t token);

/* Decodes a Handshake from `from` into h, refusing one from a peer this client did not
 * announce to (BB_ERR_INVALID_ARGUMENT), a malformed one, or a heartbeat outside
 * (0, ttl] (BB_ERR_MALFORMED). Changes nothing. */
int bbi_registry_client_check_handshake(const bbi_registry_client *c, const bb_peer_id *from, const uint8_t *payload,
                                       size_t len, bbi_registry_handshake *h, bb_error *err);

/* Takes a checked Handshake's ttl and interval. True for the first one, after which the
 * heartbeat timer belongs at *heartbeat_at (the last Announce plus the interval). */
bool bbi_registry_client_apply_handshake(bbi_registry_client *c, const bbi_registry_handshake *h,
                                        uint64_t *heartbeat_at);

/* The saved state into out[0..cap) (BBI_REGISTRY_CLIENT_STATE_MAX always suffices): u8
 * version, u8 has_server, the server peer if any, u64 ttl_ns, u64 interval_ns, u64 token.
 * Returns its length. */
size_t bbi_registry_client_save(const bbi_registry_client *c, uint8_t *out, size_t cap);

/* Restores a saved state (one that ends before the token restores token 0); BB_ERR_MALFORMED
 * for another version, has_server > 1, short or trailing bytes, with c unchanged. The next
 * Announce after a restore is not throttled. */
int bbi_registry_client_load(bbi_registry_client *c, const uint8_t *data, size_t len, bb_error *err);

#endif
