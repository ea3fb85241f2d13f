/* Who takes part, by join token. The host hands the engine each peer's token
 * (bb_node_admit_token) with the wall-clock time; the engine verifies it against the
 * room's policy and remembers the role it grants until it expires. Expiries are kept on
 * the node's own clock (the now_ns of the same call plus the seconds the token has
 * left), so later checks need no wall clock.
 *
 * The table holds at most max_admitted peers: a new token replaces the holder's earlier
 * one, and a new holder takes the place of an expired record, or else the record admitted
 * longest ago. Only tokens that verify enter it, so strangers cannot fill it. Records are
 * sorted by peer id for lookups in O(log n); inserting moves the tail (admissions are rare
 * host calls).
 *
 * Who enters the address book: the host always; an artifact's AddressBook::Insert and a
 * component's bb_ctx_add_address unless the admission hook says no; an envelope's claim of
 * its sender's own address only for a sender the book already holds, or one the hook
 * admits. Without a hook, a node that checks tokens admits peers whose token grants
 * `client` or `server`; otherwise claims of strangers are refused, inserts admitted. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "runtime/admission.h"
#include "util/mem.h"

#define NS_PER_S 1000000000ull

int rt_admission_init(rt_admission *a, const bb_allocator *alloc, const bb_join_policy *policy, size_t max,
                      rt_counters *counters, bb_error *err) {
  memset(a, 0, sizeof *a);
  a->alloc = alloc;
  a->max = max;
  a->counters = counters;
  if (!policy) return 0;
  int rc = bb_join_policy_check(policy, err);
  if (rc) return rc;
  if (policy->n_operator_keys > SIZE_MAX / BB_JOIN_KEY_BYTES)
    return bb_error_set(err, BB_ERR_LIMIT, "join policy: %zu operator keys", policy->n_operator_keys);
  a->keys = bbi_mem_alloc(alloc, policy->n_operator_keys * BB_JOIN_KEY_BYTES);
  if (!a->keys) return bb_error_set(err, BB_ERR_NOMEM, "out of memory copying the join policy");
  memcpy(a->keys, policy->operator_keys, policy->n_operator_keys * BB_JOIN_KEY_BYTES);
  a->n_keys = policy->n_operator_keys;
  strcpy(a->room, policy->room); /* bb_join_policy_check bounded it */
  a->on = true;
  return 0;
}

void rt_admission_free(rt_admission *a) {
  bbi_mem_free(a->alloc, a->keys);
  bbi_mem_free(a->alloc, a->items);
  a->keys = NULL;
  a->items = NULL;
  a->n_keys = a->len = a->cap = 0;
  a->on = false;
}

static int peer_order(const bb_peer_id *a, const bb_peer_id *b) {
  if (a->len != b->len) return a->len < b->len ? -1 : 1;
  return memcmp(a->bytes, b->bytes, a->len);
}

/* The index of p's record, or where it would go (*found says which). */
static size_t position(const rt_admission *a, const bb_peer_id *p, bool *found) {
  size_t lo = 0, hi = a->len;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = peer_order(&a->items[mid].peer, p);
    if (c == 0) {
      *found = true;
      return mid;
    }
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  *found = false;
  return lo;
}

bb_join_role rt_admission_role(const rt_admission *a, uint64_t now, const bb_peer_id *p) {
  bool found;
  size_t i = position(a, p, &found);
  return found && now < a->items[i].expires_ns ? a->items[i].role : BB_JOIN_NONE;
}

/* The record that makes room for a new holder: the expired one that expired first, else
 * the one admitted longest ago. */
static size_t victim(const rt_admission *a, uint64_t now) {
  size_t v = 0;
  for (size_t i = 1; i < a->len; i++) {
    const rt_admitted *x = &a->items[i], *best = &a->items[v];
    const bool x_expired = now >= x->expires_ns, best_expired = now >= best->expires_ns;
    if (x_expired != best_expired ? x_expired
                                  : x_expired ? x->expires_ns < best->expires_ns : x->seq < best->seq)
      v = i;
  }
  return v;
}

/* Removes the record at v, counting it as evicted. */
static void evict(rt_admission *a, size_t v) {
  memmove(&a->items[v], &a->items[v + 1], (a->len - v - 1) * sizeof *a->items);
  a->len--;
  rt_count(a->counters, "admission.evicted", 1);
}

static bool same_policy(const rt_admission *x, const rt_admission *y) {
  return x->on && y->on && strcmp(x->room, y->room) == 0 && x->n_keys == y->n_keys &&
         memcmp(x->keys, y->keys, x->n_keys * BB_JOIN_KEY_BYTES) == 0;
}

int rt_admission_carry(rt_admission *a, const rt_admission *from, uint64_t now) {
  if (!same_policy(a, from) || !from->len) return 0;
  if (bbi_mem_grow(a->alloc, (void **)&a->items, &a->cap, from->len, sizeof *a->items)) return BB_ERR_NOMEM;
  memcpy(a->items, from->items, from->len * sizeof *a->items);
  a->len = from->len;
  a->seq = from->seq;
  while (a->len > a->max) evict(a, victim(a, now));
  return 0;
}

static int record(rt_admission *a, uint64_t now, const bb_peer_id *p, bb_join_role role, uint64_t expires_ns) {
  bool found;
  size_t at = position(a, p, &found);
  if (!found) {
    if (a->len >= a->max) {
      evict(a, victim(a, now));
      at = position(a, p, &found);
    } else if (bbi_mem_grow(a->alloc, (void **)&a->items, &a->cap, a->len + 1, sizeof *a->items)) {
      return BB_ERR_NOMEM;
    }
    memmove(&a->items[at + 1], &a->items[at], (a->len - at) * sizeof *a->items);
    a->len++;
  }
  a->items[at] = (rt_admitted){.peer = *p, .role = role, .expires_ns = expires_ns, .seq = ++a->seq};
  return 0;
}

int rt_admission_verify(rt_admission *a, uint64_t now, const bb_peer_id *p, const uint8_t *token, size_t len,
                        uint64_t now_unix_s, bb_join_role *role, bb_error *err) {
  if (role) *role = BB_JOIN_NONE;
  if (!a->on)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "admit token: this node checks no join tokens (it was installed without a join policy)");
  const bb_join_policy policy = {a->room, a->keys, a->n_keys};
  bb_join_grant grant;
  int rc = bb_join_token_verify(&policy, p, token, len, now_unix_s, &grant, err);
  if (rc) {
    char name[64];
    snprintf(name, sizeof name, "admission.refused_%s", bb_join_refusal_name(grant.refusal));
    if (grant.refusal != BB_JOIN_ADMITTED) rt_count(a->counters, name, 1);
    return rc;
  }
  /* the seconds the token has left, on the node's clock (saturating) */
  const uint64_t left_s = grant.expiry_unix_s - now_unix_s;
  const uint64_t left_ns = left_s > (UINT64_MAX - now) / NS_PER_S ? UINT64_MAX - now : left_s * NS_PER_S;
  if (record(a, now, p, grant.role, now + left_ns))
    return bb_error_set(err, BB_ERR_NOMEM, "admit token: out of memory recording the peer");
  rt_count(a->counters, "admission.admitted", 1);
  if (role) *role = grant.role;
  return 0;
}

/* ---- who enters the address book ------------------------------------------------------------ */

bool rt_admission_admits(const rt_admission *a, const rt_book *b, uint64_t now, const bb_peer_id *p,
                         bb_admission_source source) {
  if (rt_book_find(b, p)) return true;
  if (a->hook) return a->hook(a->hook_user, p, source);
  if (a->on) {
    const bb_join_role role = rt_admission_role(a, now, p);
    return role == BB_JOIN_CLIENT || role == BB_JOIN_SERVER;
  }
  return source != BB_ADMIT_CLAIM;
}

int rt_admission_add_peer(const rt_admission *a, rt_book *b, uint64_t now, const bb_peer_id *p,
                          const bb_address *addr, bb_admission_source source, bb_error *err) {
  if (!rt_admission_admits(a, b, now, p, source)) {
    rt_count(a->counters, "book.refused", 1);
    char text[128];
    bb_peer_id_to_text(p, text, sizeof text);
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "peer %s was not admitted to the address book", text);
  }
  return rt_book_add_or_explain(b, p, addr, err);
}
