/* bytesandbrains — what the files of bb.wasm's ABI share: the handle table, the last-error
 * record and the result buffer (defined in bb_wasm.c). Not part of the ABI. */
#ifndef BB_WASM_INTERNAL_H
#define BB_WASM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "bb/common.h"
#include "bb/tensor.h"

typedef enum bbw_slot_kind {
  SLOT_FREE = 0,
  SLOT_MODEL,
  SLOT_TENSOR,
  SLOT_SESSION,
  SLOT_COMPILER,
  SLOT_DATASET,
  SLOT_NODE
} bbw_slot_kind;

typedef struct bbw_slot {
  bbw_slot_kind kind;
  uint32_t generation; /* of the current (or last) occupant; 0 when never used */
  void *object;
} bbw_slot;

/* Clears the last-error record; every fallible ABI function starts with it. */
void bbw_error_clear(void);
/* Records a failure and returns its code, so callers can write `return bbw_fail(...)`. */
__attribute__((format(printf, 2, 3))) int32_t bbw_fail(int32_t code, const char *format, ...);
/* Records a failure the library explained in `err`; `what` says which call it was. */
int32_t bbw_fail_from(int code, const bb_error *err, const char *what);
/* The code recorded last (0 after a success). */
int32_t bbw_last(void);

/* Stores object under a new handle, or returns BB_ERR_LIMIT (recorded). */
int32_t bbw_handle_issue(bbw_slot_kind kind, void *object);
/* The live slot a handle of that kind names, or NULL with the reason recorded. */
bbw_slot *bbw_handle_slot(int32_t handle, bbw_slot_kind kind);
void bbw_slot_release(bbw_slot *s);

/* The result buffer: bbw_result_take owns a buffer made with the default allocator. */
void bbw_result_clear(void);
void bbw_result_take(uint8_t *data, size_t len);

/* The tensor a tensor handle names (NULL, recorded, for a bad one); a new handle for a
 * tensor reference (dropped when no handle is left). */
bb_tensor *bbw_tensor_of(int32_t handle);
int32_t bbw_tensor_issue(bb_tensor *tensor);

#endif
