/* SecAgg+ when memory runs out (bb/privacy.h): a round of 5 clients in which the n-th
 * allocation fails, for every n until the round needs no more: each failure is reported
 * as BB_ERR_NOMEM (or ends the round), nothing crashes, and once everything is freed no
 * block is left. */
#include <string.h>

#include "failalloc.h"
#include "harness.h"
#include "privacy/secagg_round.h"

#define N 5
#define LEN 16

/* One round with every allocation (server's and clients') from f; true when it summed. */
static bool round_with(failing *f, bool *saw_nomem) {
  bb_allocator a = failing_allocator(f);
  uint8_t pk[N][32], sk[N][64], ids[N * 32];
  for (uint32_t i = 0; i < N; i++) {
    sr_identity(i, 1, pk[i], sk[i]);
    memcpy(ids + 32 * i, pk[i], 32);
  }
  sr_rng srng, crng[N];
  sr_rng_seed(&srng, 1);
  bb_secagg_server_config sc = {.struct_size = sizeof sc, .n_clients = N, .vector_len = LEN};
  sc.random = sr_source(&srng);
  bb_secagg_server *s = NULL;
  bb_secagg_client *c[N] = {0};
  bb_error err = {0};
  bool summed = false;
  const float x[LEN] = {1};
  int rc = bb_secagg_server_new(&sc, ids, &a, &s, &err);
  for (uint32_t i = 0; i < N && !rc; i++) {
    sr_rng_seed(&crng[i], 10 + i);
    bb_secagg_client_config cc = {.struct_size = sizeof cc, .identity_secret_key = sk[i]};
    cc.random = sr_source(&crng[i]);
    rc = bb_secagg_client_new(&cc, &a, &c[i], &err);
    if (!rc) rc = bb_secagg_client_set_input(c[i], x, LEN, &err);
  }
  if (rc) *saw_nomem |= rc == BB_ERR_NOMEM;
  if (!rc) rc = bb_secagg_server_start(s, 0, &err);
  uint64_t now = 0;
  for (int step = 0; !rc && step < 20; step++) {
    uint32_t to;
    const uint8_t *m;
    size_t len;
    bool moved = false;
    while (bb_secagg_server_next_message(s, &to, &m, &len)) {
      moved = true;
      *saw_nomem |= bb_secagg_client_receive(c[to], m, len, now, &err) == BB_ERR_NOMEM;
    }
    for (uint32_t i = 0; i < N; i++)
      while (bb_secagg_client_next_message(c[i], &m, &len)) {
        moved = true;
        *saw_nomem |= bb_secagg_server_receive(s, i, m, len, now, &err) == BB_ERR_NOMEM;
      }
    /* nothing left to carry: the clients that failed are silent, so the stage ends at its deadline */
    if (!moved && bb_secagg_server_expiry(s) != UINT64_MAX) {
      now = bb_secagg_server_expiry(s);
      bb_secagg_server_handle_expiry(s, now, &err);
    }
  }
  if (!rc) {
    float sum[LEN];
    summed = bb_secagg_server_result(s, sum, LEN, NULL, &err) == 0;
  }
  bb_secagg_server_free(s);
  for (uint32_t i = 0; i < N; i++) bb_secagg_client_free(c[i]);
  return summed;
}

static void test_every_allocation_fails_once(void) {
  /* with memory enough the round sums */
  failing plenty = {.budget = -1, .live = 0};
  bool none = false;
  CHECK(round_with(&plenty, &none));
  CHECK(!none && plenty.live == 0);
  long budget = 0;
  int nomem = 0;
  for (; budget < 5000; budget++) {
    failing f = {.budget = budget, .live = 0};
    bool saw = false;
    const bool summed = round_with(&f, &saw);
    CHECK_MSG(f.live == 0, "allocation %ld failing leaves %ld blocks", budget, f.live);
    nomem += saw;
    if (summed && f.budget > 0) break; /* the round needed fewer allocations than the budget */
  }
  printf("  a full round takes %ld allocations; %d failures reported BB_ERR_NOMEM on the way\n", budget, nomem);
  CHECK(budget < 5000);
  CHECK(nomem > 0);
}

int main(void) {
  RUN(test_every_allocation_fails_once);
  return bb_test_finish();
}
