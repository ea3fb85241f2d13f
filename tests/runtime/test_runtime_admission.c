/* Join tokens in the engine: the install's join policy, bb_node_admit_token's table of
 * verified tokens (roles, expiry on the node's clock, replacement, the cap and which
 * record makes room), what a take-over carries, and its counters. The address book's rule and the aggregators'
 * are tested with the book (test_runtime_book.c) and the rounds (test_roles_rounds.c). */
#include "programs/examples.h"
#include "rttest.h"
#include "wire/join_tokens.h"

#define UNIX_NOW 1700000000ull
#define S 1000000000ull

static uint8_t *fednet;
static size_t fednet_len;
static bbt_keys op;
static bb_registry *registry;

static int install_with(const bb_join_policy *policy, size_t struct_size, const bb_node_config *cfg, bb_node **out,
                        bb_install_error_kind *kind, bb_error *err) {
  static const char *const SINK[] = {"FedNetwork_sink_peers"};
  bb_install_args a = install_args(fednet, fednet_len, 1, SINK, 1, registry);
  a.struct_size = struct_size;
  a.config = cfg;
  a.admission = policy;
  return bb_install(&a, out, kind, err);
}

/* Hands the node peer id's token (role, `left` seconds to live) at node time at_ns. */
static int admit(bb_node *n, uint64_t id, bb_join_role role, uint64_t left, uint64_t at_ns, bb_error *err) {
  bb_peer_id p = bb_peer_id_from_u64(id);
  uint8_t token[BB_JOIN_TOKEN_MAX_BYTES];
  const uint64_t now = UNIX_NOW + at_ns / S;
  size_t len = bbt_make_token(&op, (int)role, now + left, &p, "room-1", token);
  return bb_node_admit_token(n, &p, token, len, now, at_ns, NULL, err);
}

static bb_join_role role_of(const bb_node *n, uint64_t id) {
  bb_peer_id p = bb_peer_id_from_u64(id);
  return bb_node_peer_role(n, &p);
}

static void advance(bb_node *n, uint64_t to_ns) {
  const bb_step *steps;
  size_t k;
  CHECK(bb_node_poll(n, to_ns, &steps, &k, NULL) == 0);
}

static void test_without_a_policy(void) {
  bb_node *n = NULL;
  bb_error err;
  CHECK_EQ_INT(install_with(NULL, sizeof(bb_install_args), NULL, &n, NULL, &err), 0);
  if (!n) return;
  CHECK_EQ_INT(admit(n, 2, BB_JOIN_CLIENT, 60, 0, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "without a join policy") != NULL);
  CHECK_EQ_INT(role_of(n, 2), BB_JOIN_NONE);
  bb_node_free(n);
  /* a caller built before join policies installs with the shorter struct */
  CHECK_EQ_INT(install_with(NULL, BB_INSTALL_ARGS_SIZE_V1, NULL, &n, NULL, &err), 0);
  bb_node_free(n);
  bb_install_error_kind kind;
  CHECK_EQ_INT(install_with(NULL, BB_INSTALL_ARGS_SIZE_V1 - 1, NULL, &n, &kind, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(n == NULL && kind == BB_INSTALL_INVALID_ARGUMENT);
  /* nor is a policy past the struct_size the caller gave read */
  const bb_join_policy policy = {"room-1", op.pk, 1};
  CHECK_EQ_INT(install_with(&policy, BB_INSTALL_ARGS_SIZE_V2, NULL, &n, NULL, &err), 0);
  if (n) CHECK_EQ_INT(admit(n, 2, BB_JOIN_CLIENT, 60, 0, &err), BB_ERR_INVALID_ARGUMENT);
  bb_node_free(n);
}

static void test_bad_policy_refuses_the_install(void) {
  bb_join_policy policies[] = {{"room 1", op.pk, 1}, {"room-1", NULL, 1}, {"room-1", op.pk, 0}, {NULL, op.pk, 1}};
  for (size_t i = 0; i < 4; i++) {
    bb_node *n = NULL;
    bb_error err = {0};
    bb_install_error_kind kind;
    CHECK_EQ_INT(install_with(&policies[i], sizeof(bb_install_args), NULL, &n, &kind, &err), BB_ERR_INVALID_ARGUMENT);
    CHECK(n == NULL && kind == BB_INSTALL_INVALID_ARGUMENT && strstr(err.message, "join policy"));
  }
}

static void test_roles_and_refusals(void) {
  uint8_t keys[32];
  memcpy(keys, op.pk, 32);
  bb_join_policy policy = {"room-1", keys, 1};
  bb_node *n = NULL;
  bb_error err;
  CHECK_MSG(install_with(&policy, sizeof(bb_install_args), NULL, &n, NULL, &err) == 0, "%s", err.message);
  if (!n) return;
  memset(keys, 0, sizeof keys); /* the node copied the policy */
  CHECK_EQ_INT(admit(n, 2, BB_JOIN_CLIENT, 60, 0, &err), 0);
  CHECK_EQ_INT(admit(n, 3, BB_JOIN_SERVER, 60, 0, &err), 0);
  CHECK_EQ_INT(admit(n, 4, BB_JOIN_WATCHER, 60, 0, &err), 0);
  CHECK_EQ_INT(role_of(n, 2), BB_JOIN_CLIENT);
  CHECK_EQ_INT(role_of(n, 3), BB_JOIN_SERVER);
  CHECK_EQ_INT(role_of(n, 4), BB_JOIN_WATCHER);
  CHECK_EQ_INT(role_of(n, 5), BB_JOIN_NONE);
  CHECK_EQ_INT(bb_node_counter(n, "admission.admitted"), 3);
  /* a token presented by someone else, and garbage */
  bb_peer_id p2 = bb_peer_id_from_u64(2), p5 = bb_peer_id_from_u64(5);
  uint8_t token[BB_JOIN_TOKEN_MAX_BYTES];
  size_t len = bbt_make_token(&op, BB_JOIN_CLIENT, UNIX_NOW + 60, &p2, "room-1", token);
  bb_join_role role = BB_JOIN_SERVER;
  CHECK_EQ_INT(bb_node_admit_token(n, &p5, token, len, UNIX_NOW, 0, &role, &err), BB_ERR_DENIED);
  CHECK(role == BB_JOIN_NONE && strstr(err.message, "other_peer"));
  CHECK_EQ_INT(bb_node_admit_token(n, &p2, token, len - 1, UNIX_NOW, 0, &role, &err), BB_ERR_MALFORMED);
  CHECK_EQ_INT(bb_node_admit_token(n, &p2, NULL, 0, UNIX_NOW, 0, &role, &err), BB_ERR_MALFORMED);
  CHECK_EQ_INT(bb_node_admit_token(n, NULL, token, len, UNIX_NOW, 0, &role, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_node_counter(n, "admission.refused_other_peer"), 1);
  CHECK_EQ_INT(bb_node_counter(n, "admission.refused_bad_length"), 2);
  CHECK_EQ_INT(role_of(n, 5), BB_JOIN_NONE);
  /* a refused token leaves the holder's earlier record as it was */
  len = bbt_make_token(&op, BB_JOIN_WATCHER, UNIX_NOW - 1, &p2, "room-1", token);
  CHECK_EQ_INT(bb_node_admit_token(n, &p2, token, len, UNIX_NOW, 0, &role, &err), BB_ERR_DENIED);
  CHECK_EQ_INT(role_of(n, 2), BB_JOIN_CLIENT);
  /* a newer token replaces it */
  CHECK_EQ_INT(admit(n, 2, BB_JOIN_WATCHER, 60, 0, &err), 0);
  CHECK_EQ_INT(role_of(n, 2), BB_JOIN_WATCHER);
  bb_node_free(n);
}

/* The expiry is kept on the node's clock: the seconds the token had left when admitted. */
static void test_expiry_on_the_node_clock(void) {
  bb_join_policy policy = {"room-1", op.pk, 1};
  bb_node *n = NULL;
  CHECK(install_with(&policy, sizeof(bb_install_args), NULL, &n, NULL, NULL) == 0);
  if (!n) return;
  advance(n, 5 * S);
  CHECK_EQ_INT(admit(n, 2, BB_JOIN_CLIENT, 10, 5 * S, NULL), 0);
  advance(n, 15 * S - 1);
  CHECK_EQ_INT(role_of(n, 2), BB_JOIN_CLIENT);
  advance(n, 15 * S);
  CHECK_EQ_INT(role_of(n, 2), BB_JOIN_NONE);
  /* an expiry far beyond the node clock's range saturates instead of wrapping */
  bb_peer_id p3 = bb_peer_id_from_u64(3);
  uint8_t token[BB_JOIN_TOKEN_MAX_BYTES];
  size_t len = bbt_make_token(&op, BB_JOIN_CLIENT, UINT64_MAX, &p3, "room-1", token);
  CHECK_EQ_INT(bb_node_admit_token(n, &p3, token, len, UNIX_NOW, 15 * S, NULL, NULL), 0);
  advance(n, UINT64_MAX - 1);
  CHECK_EQ_INT(role_of(n, 3), BB_JOIN_CLIENT);
  bb_node_free(n);
}

/* At max_admitted records a new holder takes the place of the record that expired first,
 * else of the one admitted longest ago; a holder's renewal never evicts anyone. */
static void test_the_table_is_bounded(void) {
  bb_join_policy policy = {"room-1", op.pk, 1};
  bb_node_config cfg = {.struct_size = sizeof cfg, .max_admitted = 3};
  bb_node *n = NULL;
  CHECK(install_with(&policy, sizeof(bb_install_args), &cfg, &n, NULL, NULL) == 0);
  if (!n) return;
  CHECK_EQ_INT(admit(n, 10, BB_JOIN_CLIENT, 100, 0, NULL), 0);
  CHECK_EQ_INT(admit(n, 11, BB_JOIN_CLIENT, 10, 0, NULL), 0);
  CHECK_EQ_INT(admit(n, 12, BB_JOIN_CLIENT, 5, 0, NULL), 0);
  CHECK_EQ_INT(admit(n, 10, BB_JOIN_CLIENT, 100, 0, NULL), 0); /* renewal */
  CHECK_EQ_INT(bb_node_counter(n, "admission.evicted"), 0);
  advance(n, 20 * S); /* 11 and 12 expired, 12 first */
  CHECK_EQ_INT(admit(n, 13, BB_JOIN_CLIENT, 100, 20 * S, NULL), 0);
  CHECK_EQ_INT(bb_node_counter(n, "admission.evicted"), 1);
  CHECK_EQ_INT(admit(n, 14, BB_JOIN_CLIENT, 100, 20 * S, NULL), 0); /* 11, the other expired one */
  CHECK_EQ_INT(role_of(n, 10), BB_JOIN_CLIENT);
  /* none expired: the record admitted longest ago (10's renewal) makes room */
  CHECK_EQ_INT(admit(n, 15, BB_JOIN_CLIENT, 100, 20 * S, NULL), 0);
  CHECK_EQ_INT(role_of(n, 10), BB_JOIN_NONE);
  CHECK_EQ_INT(role_of(n, 13), BB_JOIN_CLIENT);
  CHECK_EQ_INT(role_of(n, 14), BB_JOIN_CLIENT);
  CHECK_EQ_INT(role_of(n, 15), BB_JOIN_CLIENT);
  CHECK_EQ_INT(bb_node_counter(n, "admission.evicted"), 3);
  /* many holders: the table stays at its cap */
  for (uint64_t id = 100; id < 1100; id++) CHECK(admit(n, id, BB_JOIN_CLIENT, 100, 20 * S, NULL) == 0);
  size_t held = 0;
  for (uint64_t id = 100; id < 1100; id++) held += role_of(n, id) == BB_JOIN_CLIENT;
  CHECK_EQ_INT(held, 3);
  CHECK_EQ_INT(role_of(n, 1099), BB_JOIN_CLIENT);
  bb_node_free(n);
}

/* A node taking over keeps the tokens the old one verified under the same policy, within
 * its own cap; under another policy the host hands them again. */
static void test_take_over(void) {
  bb_join_policy policy = {"room-1", op.pk, 1};
  bb_node *old = NULL;
  CHECK(install_with(&policy, sizeof(bb_install_args), NULL, &old, NULL, NULL) == 0);
  if (!old) return;
  advance(old, 5 * S);
  CHECK_EQ_INT(admit(old, 2, BB_JOIN_CLIENT, 10, 5 * S, NULL), 0);
  CHECK_EQ_INT(admit(old, 3, BB_JOIN_WATCHER, 100, 5 * S, NULL), 0);
  CHECK_EQ_INT(admit(old, 4, BB_JOIN_SERVER, 100, 5 * S, NULL), 0);
  bb_node_config small = {.struct_size = sizeof small, .max_admitted = 2};
  bb_join_policy other = {"room-2", op.pk, 1};
  const struct {
    const bb_join_policy *policy;
    const bb_node_config *cfg;
    bool carried;
  } cases[] = {{&policy, NULL, true}, {&policy, &small, true}, {&other, NULL, false}, {NULL, NULL, false}};
  for (size_t i = 0; i < 4; i++) {
    bb_node *fresh = NULL;
    bb_error err;
    CHECK(install_with(cases[i].policy, sizeof(bb_install_args), cases[i].cfg, &fresh, NULL, NULL) == 0);
    if (!fresh) continue;
    CHECK_MSG(bb_node_take_over(fresh, old, &err) == 0, "%s", err.message);
    if (cases[i].carried && !cases[i].cfg) {
      CHECK_EQ_INT(role_of(fresh, 2), BB_JOIN_CLIENT);
      CHECK_EQ_INT(role_of(fresh, 3), BB_JOIN_WATCHER);
      CHECK_EQ_INT(role_of(fresh, 4), BB_JOIN_SERVER);
      advance(fresh, 15 * S); /* the expiry stays where it was on the carried clock */
      CHECK_EQ_INT(role_of(fresh, 2), BB_JOIN_NONE);
    } else if (cases[i].carried) { /* the one admitted longest ago made room */
      CHECK_EQ_INT(role_of(fresh, 2), BB_JOIN_NONE);
      CHECK_EQ_INT(role_of(fresh, 4), BB_JOIN_SERVER);
    } else {
      for (uint64_t id = 2; id < 5; id++) CHECK_EQ_INT(role_of(fresh, id), BB_JOIN_NONE);
    }
    bb_node_free(fresh);
  }
  CHECK_EQ_INT(role_of(old, 2), BB_JOIN_CLIENT); /* the old node is left as it was */
  bb_node_free(old);
}

int main(void) {
  op = bbt_keys_counting(0x00);
  registry = stub_registry();
  bb_error err;
  CHECK_MSG(bb_example_compile(&BB_EXAMPLE_MULTI_TARGET_NETWORK, 0, &fednet, &fednet_len, &err) == 0, "%s",
            err.message);
  if (!fednet) return bb_test_finish();
  RUN(test_without_a_policy);
  RUN(test_bad_policy_refuses_the_install);
  RUN(test_roles_and_refusals);
  RUN(test_expiry_on_the_node_clock);
  RUN(test_the_table_is_bounded);
  RUN(test_take_over);
  bb_buffer_free(NULL, fednet);
  bb_registry_free(registry);
  return bb_test_finish();
}
