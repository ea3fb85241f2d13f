/* bytesandbrains — the flat C ABI that bb.wasm exports to JavaScript (js/src/).
 *
 * Only numbers cross the boundary. Objects are named by handles: positive int32 values
 * that index a bounded table of pointers inside the module. A handle also carries its
 * slot's generation, so a handle kept after its object was freed is rejected with
 * BB_ERR_INVALID_ARGUMENT instead of reaching whatever object reuses the slot.
 *
 * Errors: every function that can fail returns a negative BB_ERR_* code and records it
 * with a message; each such call first clears the record, so after a success
 * bb_wasm_last_error_code() is 0 and bb_wasm_last_error() is "".
 *
 * Results: a call that produces bytes or text leaves them in one result buffer
 * (bb_wasm_result_ptr / bb_wasm_result_len), valid until the next call that produces a
 * result; such a call empties the buffer first, so after a failure it is empty.
 *
 * Bump BB_WASM_ABI_VERSION whenever a signature or a meaning here changes: the loader
 * refuses a module whose version it was not written for. */
#ifndef BB_WASM_H
#define BB_WASM_H

#include <stddef.h>
#include <stdint.h>

#define BB_WASM_ABI_VERSION 1u

/* Most objects alive at once, of all kinds together. */
#define BB_WASM_MAX_HANDLES 1024

/* The ABI version this module implements (BB_WASM_ABI_VERSION). */
uint32_t bb_wasm_abi_version(void);

/* The library's version, BB_VERSION_STRING, as a NUL-terminated string. */
const char *bb_wasm_version(void);

/* Memory for passing bytes in: at least `size` bytes (a zero size still gives a unique
 * pointer), or NULL with BB_ERR_NOMEM recorded. Release it with bb_wasm_free. */
void *bb_wasm_alloc(size_t size);
void bb_wasm_free(void *ptr);

/* The code and message of the last fallible call: 0 and "" when it succeeded. */
int32_t bb_wasm_last_error_code(void);
const char *bb_wasm_last_error(void);

/* The result buffer (NULL and 0 when empty). Text results are NUL-terminated; the
 * length does not count the NUL. */
const uint8_t *bb_wasm_result_ptr(void);
size_t bb_wasm_result_len(void);

/* Decodes ONNX ModelProto bytes (copied; the caller may free them afterwards) into a
 * model. Returns the model's handle, or a negative code. */
int32_t bb_wasm_model_decode(const uint8_t *data, size_t len);

/* Encodes a model as ModelProto bytes into the result buffer. Returns 0 or a code. */
int32_t bb_wasm_model_encode(int32_t model);

/* Writes a readable summary of a model (JSON when json is nonzero) into the result
 * buffer. Returns 0 or a code. */
int32_t bb_wasm_model_summary(int32_t model, int32_t json);

/* Frees a model and retires its handle. Returns 0 or a code. */
int32_t bb_wasm_model_free(int32_t model);

#endif /* BB_WASM_H */
