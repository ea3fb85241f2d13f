/* The concretes this library ships, in one table: what bb_registry_add_shipped adds to a
 * host's registry (the runtime itself knows no concrete type). */
#include "bb/roles.h"
#include "components/shipped.h"

static const bb_component_type *const SHIPPED[] = {&BB_CPU_BACKEND, &BB_CPU_MLP, &BB_ONNX_MODEL, &BB_ARRAY_SOURCE, &BB_FLOAT16_CODEC,
                                                   &BB_UINT8_CODEC, &BB_FEDAVG, &BB_ROBUST_AVG, &BB_FLAT_INDEX,
                                                   &BB_GOSSIP_AVG, &BB_CONSTANT_VIEW, &BB_GOSSIP_VIEW,
                                                   &BB_GLOBAL_REGISTRY_CLIENT, &BB_GLOBAL_REGISTRY_SERVER};

int bb_registry_add_shipped(bb_registry *r, bb_error *err) {
  for (size_t i = 0; i < sizeof SHIPPED / sizeof *SHIPPED; i++) {
    int rc = bb_registry_add(r, SHIPPED[i], err);
    if (rc) return rc;
  }
  return 0;
}

size_t bb_shipped_count(void) { return sizeof SHIPPED / sizeof *SHIPPED; }
const bb_component_type *bb_shipped_at(size_t i) { return i < bb_shipped_count() ? SHIPPED[i] : NULL; }
