/* Component configs: integers are digits only, a key may be given once, and the
 * millisecond keys that become nanoseconds refuse values whose product overflows;
 * GossipAvg's model= and ConstantView's keys say what the types do; and GossipView names
 * an unknown message before it reads the payload. */
#include <stdint.h>
#include <string.h>

#include "bb/roles.h"
#include "bb/runtime.h"
#include "harness.h"

static void test_integers_are_digits_only(void) {
  static const char *const bad[] = {"n=-5", "n= -5", "n=+5", "n= 5", "n=\t5", "n=5 ", "n=", "n=0x10", "n=99999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    uint64_t v = 7;
    bb_error err;
    bb_error_clear(&err);
    CHECK_MSG(bb_config_u64(bad[i], "n", 1, &v, &err) == BB_ERR_INVALID_ARGUMENT, "%s", bad[i]);
    CHECK(strstr(err.message, "`n`") != NULL);
  }
  uint64_t v = 0;
  CHECK_EQ_INT(bb_config_u64("n=18446744073709551615", "n", 1, &v, NULL), 0);
  CHECK(v == UINT64_MAX);
  CHECK_EQ_INT(bb_config_u64("m=3", "n", 11, &v, NULL), 0);
  CHECK_EQ_INT(v, 11);
}

static void test_keys_once(void) {
  static const char *const KEYS[] = {"quorum", "target", NULL};
  bb_error err;
  bb_error_clear(&err);
  CHECK_EQ_INT(bb_config_check("quorum=2,quorum=0", KEYS, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "`quorum` is given twice") != NULL);
  CHECK_EQ_INT(bb_config_check("quorum=2,target=3,quorum=2", KEYS, NULL), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_config_check("quorum=2,target=3", KEYS, NULL), 0);
  CHECK_EQ_INT(bb_config_check("quorum=2,targetx=3", KEYS, NULL), BB_ERR_INVALID_ARGUMENT);
}

/* Creates a shipped type with a config; returns create's code (and destroys what it made). */
static int create(const char *type, const char *config, bb_error *err) {
  bb_registry *r = bb_registry_new(NULL);
  CHECK(r && bb_registry_add_shipped(r, NULL) == 0);
  const bb_component_type *t = bb_registry_find(r, type);
  CHECK(t != NULL);
  bb_component_init init = {"slot", config, strlen(config), 1, bb_default_allocator(), NULL, NULL};
  void *self = NULL;
  int rc = t->create(&init, &self, err);
  if (rc == 0) t->destroy(self);
  bb_registry_free(r);
  return rc;
}

static void test_millisecond_keys_do_not_overflow(void) {
  bb_error err;
  bb_error_clear(&err);
  CHECK_EQ_INT(create("FedAvg", "quorum=1,deadline_ms=18446744073710", &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_MSG(strstr(err.message, "deadline_ms") != NULL, "%s", err.message);
  CHECK_EQ_INT(create("FedAvg", "quorum=1,deadline_ms=18446744073709", NULL), 0);
  bb_error_clear(&err);
  CHECK_EQ_INT(create("GlobalRegistryClient", "retry_ms=18446744073710", &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_MSG(strstr(err.message, "retry_ms") != NULL, "%s", err.message);
  CHECK_EQ_INT(create("GlobalRegistryClient", "retry_ms=1000", NULL), 0);
  CHECK_EQ_INT(create("FedAvg", "quorum=1,deadline_ms= -5", NULL), BB_ERR_INVALID_ARGUMENT);
}

/* GossipAvg's Model is its declared dependency at slot `model`: model= naming another
 * slot used to be taken, while the compiler checked only `model`. */
static void test_gossip_avg_model_is_its_dependency(void) {
  bb_error err;
  bb_error_clear(&err);
  CHECK_EQ_INT(create("GossipAvg", "model=m2", &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_MSG(strstr(err.message, "model=`m2`") != NULL, "%s", err.message);
  CHECK_EQ_INT(create("GossipAvg", "model=model,weight=0.5", NULL), 0);
  CHECK_EQ_INT(create("GossipAvg", "", NULL), 0);
}

/* ConstantView draws with the node's generator; its `seed` key was taken and ignored. */
static void test_constant_view_has_no_seed(void) {
  bb_error err;
  bb_error_clear(&err);
  CHECK_EQ_INT(create("ConstantView", "peers=1;2,seed=3", &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_MSG(strstr(err.message, "unknown key `seed`") != NULL, "%s", err.message);
  CHECK_EQ_INT(create("ConstantView", "peers=1;2", NULL), 0);
}

/* An unknown control message is UNSUPPORTED whatever its payload (it used to be decoded
 * first and reported as MALFORMED). */
static void test_gossip_view_unknown_message(void) {
  bb_registry *r = bb_registry_new(NULL);
  CHECK(r && bb_registry_add_shipped(r, NULL) == 0);
  const bb_component_type *t = bb_registry_find(r, "GossipView");
  CHECK(t != NULL && t->on_message != NULL);
  bb_component_init init = {"view", "view=4", 6, 1, bb_default_allocator(), NULL, NULL};
  void *self = NULL;
  CHECK_EQ_INT(t->create(&init, &self, NULL), 0);
  bb_peer_id from = bb_peer_id_from_u64(9);
  static const uint8_t junk[] = {0xff, 0xff, 0xff};
  bb_error err;
  bb_error_clear(&err);
  CHECK_EQ_INT(t->on_message(self, NULL, "Bogus", &from, junk, sizeof junk, &err), BB_ERR_UNSUPPORTED);
  CHECK(strstr(err.message, "`Bogus`") != NULL);
  t->destroy(self);
  bb_registry_free(r);
}

/* CpuBackend's one key: the cap on one op's value, at least a byte. */
static void test_cpu_backend_output_cap(void) {
  bb_error err;
  CHECK_EQ_INT(create("CpuBackend", "", NULL), 0);
  CHECK_EQ_INT(create("CpuBackend", "max_output_bytes=1048576", NULL), 0);
  bb_error_clear(&err);
  CHECK_EQ_INT(create("CpuBackend", "max_output_bytes=0", &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_MSG(strstr(err.message, "max_output_bytes=0 is not in 1..") != NULL, "%s", err.message);
  CHECK_EQ_INT(create("CpuBackend", "threads=2", NULL), BB_ERR_INVALID_ARGUMENT);
}

int main(void) {
  RUN(test_integers_are_digits_only);
  RUN(test_cpu_backend_output_cap);
  RUN(test_keys_once);
  RUN(test_millisecond_keys_do_not_overflow);
  RUN(test_gossip_avg_model_is_its_dependency);
  RUN(test_constant_view_has_no_seed);
  RUN(test_gossip_view_unknown_message);
  return bb_test_finish();
}
