/* Join tokens in the engine: the room's policy this node checks tokens against, and the
 * peers whose tokens it verified, with the role each token grants and until when (see
 * admission.c). */
#ifndef BBI_RUNTIME_ADMISSION_H
#define BBI_RUNTIME_ADMISSION_H

#include <stdbool.h>

#include "bb/join_token.h"
#include "bb/runtime.h"

typedef struct rt_admitted {
  bb_peer_id peer;
  bb_join_role role;
  uint64_t expires_ns; /* on the node's clock: the token admits while now < expires_ns */
  uint64_t seq;        /* when it was admitted: the oldest makes room first */
} rt_admitted;

typedef struct rt_admission {
  bool on; /* the install named a policy: tokens decide who takes part */
  char room[BB_JOIN_ROOM_MAX + 1];
  uint8_t *keys; /* n_keys × BB_JOIN_KEY_BYTES */
  size_t n_keys;
  rt_admitted *items; /* sorted by peer id (length, then bytes), for binary search */
  size_t len, cap;
  uint64_t seq;
} rt_admission;

/* Copies the install's policy into the node (NULL: tokens are not checked). */
int rt_admission_init(bb_node *n, const bb_join_policy *policy, bb_error *err);
void rt_admission_free(bb_node *n);
/* A node taking over from `old` (bb_node_take_over) keeps the tokens old verified when
 * both check them under the same policy (room and keys); under another policy the host
 * hands the tokens again. Past fresh's max_admitted, the usual records make room. */
int rt_admission_carry(bb_node *fresh, const bb_node *old);
/* The role p's token grants at the node's current time; BB_JOIN_NONE when it has no
 * token, or it expired. */
bb_join_role rt_admission_role(const bb_node *n, const bb_peer_id *p);

#endif /* BBI_RUNTIME_ADMISSION_H */
