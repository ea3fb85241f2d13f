/* Shared by the tests of the runtime's parts (test_pending.c, test_timers.c, ...), which
 * exercise one part alone, without a node: stand-in executions for the parts that hold
 * them, and the checks every part's saved bytes must pass. */
#ifndef BB_TESTS_PARTTEST_H
#define BB_TESTS_PARTTEST_H

#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "runtime/exec.h"
#include "runtime/snapshot_io.h"

/* Executions with ids 1..n whose graphs have n_ops ops each: what a part's load may name. */
typedef struct fake_execs {
  rt_exec items[8];
  size_t n;
  uint32_t n_ops;
} fake_execs;

static inline void fake_execs_init(fake_execs *f, size_t n, uint32_t n_ops) {
  memset(f, 0, sizeof *f);
  f->n = n;
  f->n_ops = n_ops;
  for (size_t i = 0; i < n; i++) f->items[i].id = i + 1;
}

static inline rt_exec *fake_find(void *user, uint64_t id, uint32_t op) {
  fake_execs *f = user;
  if (!id || id > f->n || op >= f->n_ops) return NULL;
  f->items[id - 1].refs++;
  return &f->items[id - 1];
}

static inline rt_exec_lookup fake_lookup(fake_execs *f) { return (rt_exec_lookup){fake_find, f}; }

/* rc of a part's load over r, or a refusal when the load left bytes unread. */
static inline int read_whole(rt_reader *r, int rc) {
  if (!rc && bb_le_left(&r->in)) rc = rt_read_bad(r, "trailing bytes");
  return rc;
}

/* Loads bytes into a fresh part and frees it: the rc of its load. */
typedef int (*part_load_fn)(const uint8_t *bytes, size_t len, bb_error *err);

/* Every strict prefix of a valid section is refused as malformed, naming a byte. */
static inline void check_truncations_refused(const uint8_t *bytes, size_t len, part_load_fn load) {
  for (size_t cut = 0; cut < len; cut++) {
    bb_error err;
    bb_error_clear(&err);
    int rc = load(bytes, cut, &err);
    CHECK_MSG(rc == BB_ERR_MALFORMED && strstr(err.message, "(at byte"), "cut at %zu: %d %s", cut, rc, err.message);
  }
}

/* A section with bytes patched at `at`: refused as malformed with a message naming `why`. */
static inline void check_refused(const uint8_t *bytes, size_t len, size_t at, const void *patch, size_t n,
                                 part_load_fn load, const char *why) {
  uint8_t *bent = malloc(len);
  memcpy(bent, bytes, len);
  memcpy(bent + at, patch, n);
  bb_error err;
  bb_error_clear(&err);
  int rc = load(bent, len, &err);
  CHECK_MSG(rc == BB_ERR_MALFORMED && strstr(err.message, why), "patch at %zu: %d %s (want: %s)", at, rc, err.message,
            why);
  free(bent);
}

static inline void put_u64_at(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

#endif /* BB_TESTS_PARTTEST_H */
