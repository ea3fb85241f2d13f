/* Address book ops: Insert / InsertMany add a peer's addresses, Lookup reads them. */
#include <string.h>

#include "bb/tensor.h"
#include "runtime/syscalls/syscall.h"
#include "bb/common.h"

/* A peer id input: a Peer(s) value, or what a bootstrap `constant` of type bb.peer_id
 * carries — a one-element int64 tensor holding a test identity (bb_peer_id_from_u64). */
static int peer_input(rt_call *c, size_t i, bb_peer_id *out, bb_error *err) {
  const bb_val *v = i < c->n_in ? c->in[i] : NULL;
  const bb_peer_id *peers = bb_val_as_peers(v);
  if (peers && bb_val_count(v)) {
    *out = peers[0];
    return 0;
  }
  const bb_tensor *t = bb_val_as_tensor(v);
  if (t && t->dtype == BB_DTYPE_INT64 && t->numel == 1 && *(const int64_t *)bb_tensor_data(t) >= 0) {
    *out = bb_peer_id_from_u64((uint64_t)*(const int64_t *)bb_tensor_data(t));
    return 0;
  }
  c->reason = "expected_peer_id";
  return bb_error_set(err, BB_ERR_TYPE, "%s: input %zu must be a peer id", c->op->ir->op_type, i);
}

/* An address input: Address(es) values, or a bootstrap `constant` of type address_vec —
 * a uint8 tensor holding one address as text ("/p2p/100/site/11"). */
static int address_input(rt_call *c, size_t i, bb_address *one, const bb_address **out, size_t *n, bb_error *err) {
  const bb_val *a = i < c->n_in ? c->in[i] : NULL;
  if (bb_val_as_addresses(a) && bb_val_count(a)) {
    *out = bb_val_as_addresses(a);
    *n = bb_val_count(a);
    return 0;
  }
  const bb_tensor *t = bb_val_as_tensor(a);
  if (t && t->dtype == BB_DTYPE_UINT8 && t->numel > 0 && t->numel < 1024) {
    char text[1024];
    memcpy(text, bb_tensor_data(t), (size_t)t->numel);
    text[t->numel] = 0;
    int rc = bb_address_from_text(text, one, err);
    if (rc) {
      c->reason = "expected_multiaddress";
      return bb_error_prefix(err, "%s: input %zu: ", c->op->ir->op_type, i);
    }
    *out = one;
    *n = 1;
    return 0;
  }
  c->reason = "expected_multiaddress";
  return bb_error_set(err, BB_ERR_TYPE, "%s: input %zu must be one or more addresses", c->op->ir->op_type, i);
}

static int sys_book_insert(rt_call *c, bb_error *err) {
  bb_peer_id p;
  bb_address one;
  const bb_address *addrs = NULL;
  size_t n = 0;
  int rc = peer_input(c, 0, &p, err);
  if (!rc) rc = address_input(c, 1, &one, &addrs, &n, err);
  if (rc) return rc;
  bb_node *node = c->node;
  for (size_t i = 0; i < n; i++) {
    rc = rt_admission_add_peer(&node->admission, &node->book, node->now, &p, &addrs[i], BB_ADMIT_GRAPH, err);
    if (rc) {
      c->reason = "address_book_insert_failed";
      return rc;
    }
  }
  return 0;
}

static int sys_book_lookup(rt_call *c, bb_error *err) {
  bb_peer_id p;
  int rc = peer_input(c, 0, &p, err);
  if (rc) return rc;
  rt_peer_entry *e = rt_book_find(&c->node->book, &p);
  if (e) rt_book_touch(&c->node->book, e);
  if (!e || !e->n_addrs) {
    c->reason = "address_book_lookup_miss";
    return bb_error_set(err, BB_ERR_NOT_FOUND, "AddressBook::Lookup: the peer is not in the address book");
  }
  return put_output(c, bb_val_addresses(c->node->alloc, e->addrs, e->n_addrs), err);
}

const rt_syscall rt_syscalls_address_book[] = {
    {BB_DOMAIN_ADDRESS_BOOK, "Insert", sys_book_insert},
    {BB_DOMAIN_ADDRESS_BOOK, "InsertMany", sys_book_insert},
    {BB_DOMAIN_ADDRESS_BOOK, "Lookup", sys_book_lookup},
};
const size_t rt_syscalls_address_book_count = sizeof rt_syscalls_address_book / sizeof *rt_syscalls_address_book;
