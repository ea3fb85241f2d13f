/* Who may take part, a part of its own: the host's admission hook, the room's join
 * policy this node checks tokens against, and the peers whose tokens it verified, with
 * the role each token grants and until when (see admission.c). It sees no node: the
 * caller passes the node's clock. */
#ifndef BBI_RUNTIME_ADMISSION_H
#define BBI_RUNTIME_ADMISSION_H

#include <stdbool.h>

#include "runtime/book.h"
#include "runtime/steps.h"
#include "bb/join_token.h"
#include "bb/runtime.h"

typedef struct rt_admitted {
  bb_peer_id peer;
  bb_join_role role;
  uint64_t expires_ns; /* on the node's clock: the token admits while now < expires_ns */
  uint64_t seq;        /* when it was admitted: the oldest makes room first */
} rt_admitted;

/* Invariants: items sorted by peer id (length, then bytes), each peer once; at most
 * `max` records; seq larger than every record's. */
typedef struct rt_admission {
  const bb_allocator *alloc;
  bb_admit_fn hook; /* the host's admission hook for the book (NULL: the default rule) */
  void *hook_user;
  bool on; /* the install named a policy: tokens decide who takes part */
  char room[BB_JOIN_ROOM_MAX + 1];
  uint8_t *keys; /* n_keys × BB_JOIN_KEY_BYTES */
  size_t n_keys;
  rt_admitted *items;
  size_t len, cap;
  uint64_t seq;
  size_t max;            /* max_admitted */
  rt_counters *counters; /* admission.*, book.refused (NULL: not counted) */
} rt_admission;

/* Copies the install's policy (NULL: tokens are not checked). */
int rt_admission_init(rt_admission *a, const bb_allocator *alloc, const bb_join_policy *policy, size_t max,
                      rt_counters *counters, bb_error *err);
void rt_admission_free(rt_admission *a);
/* A node taking over keeps the tokens `from` verified when both check them under the
 * same policy (room and keys); under another policy the host hands the tokens again.
 * Past a's max, the usual records make room. */
int rt_admission_carry(rt_admission *a, const rt_admission *from, uint64_t now);
/* The role p's token grants at `now`; BB_JOIN_NONE when it has none, or it expired. */
bb_join_role rt_admission_role(const rt_admission *a, uint64_t now, const bb_peer_id *p);
/* Verifies p's token (bb_node_admit_token) and records the role it grants until its
 * expiry, measured from `now`. */
int rt_admission_verify(rt_admission *a, uint64_t now, const bb_peer_id *p, const uint8_t *token, size_t len,
                        uint64_t now_unix_s, bb_join_role *role, bb_error *err);
/* Whether p may be in the book: it is already, or the admission rule lets it in. */
bool rt_admission_admits(const rt_admission *a, const rt_book *b, uint64_t now, const bb_peer_id *p,
                         bb_admission_source source);
/* Adds an address of p to the book if p is admitted (counted in book.refused when not). */
int rt_admission_add_peer(const rt_admission *a, rt_book *b, uint64_t now, const bb_peer_id *p,
                          const bb_address *addr, bb_admission_source source, bb_error *err);

#endif /* BBI_RUNTIME_ADMISSION_H */
