/* The small concrete components the reference examples bind (docs/EXAMPLES.md): quickstart's
 * NoopDataLoader and NoopModel, the shared StubLoader / StubModel / StubAggregator,
 * component_with_dependency's CountingIndex and single_node_federated_learning's MyModel
 * and MyData. Each is a real component (create, destroy, a role dispatcher); the ones an
 * example checks keep what they saw in their instance, which the program reads back
 * through bb_node_component. */
#ifndef BB_EXAMPLE_FIXTURES_H
#define BB_EXAMPLE_FIXTURES_H

#include "bb/roles.h"

BB_API extern const bb_component_type BB_FIXTURE_NOOP_DATA_LOADER; /* next_batch → ([1.0], [1.0]) */
BB_API extern const bb_component_type BB_FIXTURE_NOOP_MODEL;       /* identity forward, params [] */
BB_API extern const bb_component_type BB_FIXTURE_STUB_LOADER;      /* next_batch → ([1, 2, 3], []) */
BB_API extern const bb_component_type BB_FIXTURE_STUB_MODEL;       /* identity forward, params [], loss 0 */
BB_API extern const bb_component_type BB_FIXTURE_STUB_AGGREGATOR;  /* records contributions; aggregate → [] */
BB_API extern const bb_component_type BB_FIXTURE_COUNTING_INDEX;   /* search → backend Add on "compute"; [] */
BB_API extern const bb_component_type BB_FIXTURE_MY_MODEL;         /* forward [w·x0]; params [w]; config w=<f> */
BB_API extern const bb_component_type BB_FIXTURE_MY_DATA;          /* next_batch → ([1.0], [2.0]) */

/* StubAggregator's instance: the last contribution and who sent it. */
typedef struct bb_fixture_stub_aggregator {
  const bb_allocator *alloc;
  uint64_t contributions;
  bb_peer_id last_from;
  float last_update[16]; /* the first floats of the last update */
  size_t last_len;       /* its element count (may exceed the 16 kept) */
} bb_fixture_stub_aggregator;

/* CountingIndex's instance (config bias=<u64>, default 1). */
typedef struct bb_fixture_counting_index {
  const bb_allocator *alloc;
  uint32_t bias;
  uint64_t searches;      /* Search calls */
  uint64_t backend_adds;  /* backend Add calls made through bb_ctx_call */
  float last_sum[16];     /* the first floats of the last Add's result */
  size_t last_len;
} bb_fixture_counting_index;

/* MyModel's instance. */
typedef struct bb_fixture_my_model {
  const bb_allocator *alloc;
  float w;
  uint64_t forwards, params_reads;
} bb_fixture_my_model;

/* Adds all eight types to r. */
BB_API int bb_fixtures_register(bb_registry *r, bb_error *err);

#endif
