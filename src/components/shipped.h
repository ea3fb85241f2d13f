/* The shipped component types (src/components/shipped.c holds the table). */
#ifndef BB_OPS_SHIPPED_H
#define BB_OPS_SHIPPED_H

#include "bb/runtime.h"

extern const bb_component_type BB_CPU_BACKEND;
extern const bb_component_type BB_CPU_MLP;
extern const bb_component_type BB_ONNX_MODEL;
extern const bb_component_type BB_ARRAY_SOURCE;
extern const bb_component_type BB_FLOAT16_CODEC;
extern const bb_component_type BB_UINT8_CODEC;
extern const bb_component_type BB_FEDAVG;
extern const bb_component_type BB_ROBUST_AVG;
extern const bb_component_type BB_FLAT_INDEX;
extern const bb_component_type BB_GOSSIP_AVG;
extern const bb_component_type BB_CONSTANT_VIEW;
extern const bb_component_type BB_GOSSIP_VIEW;
extern const bb_component_type BB_GLOBAL_REGISTRY_CLIENT;
extern const bb_component_type BB_GLOBAL_REGISTRY_SERVER;

size_t bb_shipped_count(void);
const bb_component_type *bb_shipped_at(size_t i);

#endif
