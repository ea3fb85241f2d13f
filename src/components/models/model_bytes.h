/* The ONNX bytes a model component is created with: the slot's host data (a bb_bytes, the
 * only way in bb.wasm, which reads no files) or the file its config names. */
#ifndef BBI_COMPONENTS_MODELS_MODEL_BYTES_H
#define BBI_COMPONENTS_MODELS_MODEL_BYTES_H

#include <stdbool.h>

#include "bb/bytes.h"
#include "bb/runtime.h"

/* *out points at the host data, or at a buffer read from `path` (*owned: free it with
 * bbi_mem_free(alloc, out->data)). `who` names the component in messages. */
int bbi_model_bytes(const char *who, const bb_component_init *init, const char *path, bb_bytes *out, bool *owned,
                    bb_error *err);

#endif
