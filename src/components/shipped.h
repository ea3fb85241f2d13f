/* The shipped component types (src/components/shipped.c holds the table). */
#ifndef BBI_OPS_SHIPPED_H
#define BBI_OPS_SHIPPED_H

#include "bb/runtime.h"

extern const bb_component_type BBI_CPU_BACKEND;
extern const bb_component_type BBI_CPU_MLP;
extern const bb_component_type BBI_ONNX_MODEL;
extern const bb_component_type BBI_SPLIT_MODEL;
extern const bb_component_type BBI_ARRAY_SOURCE;
extern const bb_component_type BBI_FLOAT16_CODEC;
extern const bb_component_type BBI_UINT8_CODEC;
extern const bb_component_type BBI_TOPK_CODEC;
extern const bb_component_type BBI_FEDAVG;
extern const bb_component_type BBI_ROBUST_AVG;
extern const bb_component_type BBI_FLAT_INDEX;
extern const bb_component_type BBI_GOSSIP_AVG;
extern const bb_component_type BBI_CONSTANT_VIEW;
extern const bb_component_type BBI_GOSSIP_VIEW;
extern const bb_component_type BBI_GLOBAL_REGISTRY_CLIENT;
extern const bb_component_type BBI_GLOBAL_REGISTRY_SERVER;

size_t bbi_shipped_count(void);
const bb_component_type *bbi_shipped_at(size_t i);

#endif
