/* The concretes this library ships, in one table: what bb_registry_add_shipped adds to a
 * host's registry (the runtime itself knows no concrete type). */
#include "bb/roles.h"
#include "components/shipped.h"

static const bb_component_type *const SHIPPED[] = {&BBI_CPU_BACKEND, &BBI_CPU_MLP, &BBI_ONNX_MODEL, &BBI_SPLIT_MODEL, &BBI_ARRAY_SOURCE, &BBI_FLOAT16_CODEC,
                                                   &BBI_UINT8_CODEC, &BBI_TOPK_CODEC, &BBI_FEDAVG, &BBI_ROBUST_AVG, &BBI_FLAT_INDEX,
                                                   &BBI_GOSSIP_AVG, &BBI_CONSTANT_VIEW, &BBI_GOSSIP_VIEW,
                                                   &BBI_GLOBAL_REGISTRY_CLIENT, &BBI_GLOBAL_REGISTRY_SERVER};

int bb_registry_add_shipped(bb_registry *r, bb_error *err) {
  for (size_t i = 0; i < sizeof SHIPPED / sizeof *SHIPPED; i++) {
    int rc = bb_registry_add(r, SHIPPED[i], err);
    if (rc) return rc;
  }
  return 0;
}

size_t bbi_shipped_count(void) { return sizeof SHIPPED / sizeof *SHIPPED; }
const bb_component_type *bbi_shipped_at(size_t i) { return i < bbi_shipped_count() ? SHIPPED[i] : NULL; }
