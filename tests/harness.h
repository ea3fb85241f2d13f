/* A minimal test harness: CHECK* record failures and go on, RUN runs one test function,
 * and bb_test_finish prints a summary and gives main's exit code. */
#ifndef BB_TEST_HARNESS_H
#define BB_TEST_HARNESS_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int bb_test_failures;
static int bb_test_checks;

#define CHECK(cond)                                                              \
  do {                                                                           \
    bb_test_checks++;                                                            \
    if (!(cond)) {                                                               \
      bb_test_failures++;                                                        \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
    }                                                                            \
  } while (0)

#define CHECK_MSG(cond, ...)                                                     \
  do {                                                                           \
    bb_test_checks++;                                                            \
    if (!(cond)) {                                                               \
      bb_test_failures++;                                                        \
      fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);   \
      fprintf(stderr, __VA_ARGS__);                                              \
      fputc('\n', stderr);                                                       \
    }                                                                            \
  } while (0)

#define CHECK_EQ_INT(a, b)                                                       \
  do {                                                                           \
    long long bb_a_ = (long long)(a), bb_b_ = (long long)(b);                    \
    CHECK_MSG(bb_a_ == bb_b_, "%lld != %lld", bb_a_, bb_b_);                     \
  } while (0)

#define CHECK_STR(a, b)                                                          \
  do {                                                                           \
    const char *bb_a_ = (a), *bb_b_ = (b);                                       \
    CHECK_MSG(bb_a_ && bb_b_ && strcmp(bb_a_, bb_b_) == 0, "\"%s\" != \"%s\"",   \
              bb_a_ ? bb_a_ : "(null)", bb_b_ ? bb_b_ : "(null)");               \
  } while (0)

#define RUN(fn)                                                                  \
  do {                                                                           \
    int bb_before_ = bb_test_failures;                                           \
    fn();                                                                        \
    printf("%s %s\n", bb_test_failures == bb_before_ ? "ok  " : "FAIL", #fn);    \
    fflush(stdout);                                                              \
  } while (0)

static inline int bb_test_finish(void) {
  printf("%d checks, %d failed\n", bb_test_checks, bb_test_failures);
  return bb_test_failures ? 1 : 0;
}

#endif
