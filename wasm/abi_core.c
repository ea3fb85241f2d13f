/* bytesandbrains — the core of bb.wasm's ABI: versions, memory for the host, the
 * last-error record, the result buffer and the handle table every object lives behind.
 * See bb_wasm.h for the contract. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "abi_internal.h"
#include "bb_wasm.h"

/* ---- the last error ------------------------------------------------------------ */

static int32_t last_error_code;
static char last_error_message[BB_ERROR_MESSAGE_MAX];

int32_t bbw_last(void) { return last_error_code; }

void bbw_error_clear(void) {
  last_error_code = BB_OK;
  last_error_message[0] = '\0';
}

int32_t bbw_fail(int32_t code, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(last_error_message, sizeof last_error_message, format, args);
  va_end(args);
  last_error_code = code;
  return code;
}

int32_t bbw_fail_from(int code, const bb_error *err, const char *what) {
  const char *detail = err->message[0] != '\0' ? err->message : bb_strerror(code);
  return bbw_fail(code, "%s: %s", what, detail);
}

int32_t bb_wasm_last_error_code(void) { return last_error_code; }

const char *bb_wasm_last_error(void) { return last_error_message; }

/* ---- handles ------------------------------------------------------------------- */

/* A handle is (generation << BB_WASM_SLOT_BITS) | slot index. Generations start at 1,
 * so every handle is positive, and they fit in the 31 bits left of a positive int32. */
#define BB_WASM_SLOT_BITS 10
#define BB_WASM_SLOT_MASK ((1u << BB_WASM_SLOT_BITS) - 1u)
#define BB_WASM_GENERATION_MAX ((1u << (31 - BB_WASM_SLOT_BITS)) - 1u)
_Static_assert(BB_WASM_MAX_HANDLES == 1 << BB_WASM_SLOT_BITS, "the slot index must cover the whole table");

static const char *slot_kind_name(bbw_slot_kind kind) {
  switch (kind) {
  case SLOT_FREE: return "nothing";
  case SLOT_MODEL: return "model";
  case SLOT_TENSOR: return "tensor";
  case SLOT_SESSION: return "session";
  case SLOT_COMPILER: return "compiler";
  case SLOT_DATASET: return "dataset";
  case SLOT_NODE: return "node";
  case SLOT_MODULE: return "module";
  case SLOT_TRAINER: return "trainer";
  }
  return "unknown";
}

static bbw_slot slots[BB_WASM_MAX_HANDLES];

int32_t bbw_handle_issue(bbw_slot_kind kind, void *object) {
  for (uint32_t index = 0; index < BB_WASM_MAX_HANDLES; index++) {
    bbw_slot *s = &slots[index];
    if (s->kind != SLOT_FREE) continue;
    /* After GENERATION_MAX reuses of one slot the count wraps; a handle kept that long
     * could alias again, a bound accepted for a 31-bit handle. */
    s->generation = s->generation % BB_WASM_GENERATION_MAX + 1;
    s->kind = kind;
    s->object = object;
    return (int32_t)((s->generation << BB_WASM_SLOT_BITS) | index);
  }
  return bbw_fail(BB_ERR_LIMIT, "all %d handles are in use: free objects that are done with", BB_WASM_MAX_HANDLES);
}

bbw_slot *bbw_handle_slot(int32_t handle, bbw_slot_kind kind) {
  if (handle <= 0) {
    bbw_fail(BB_ERR_INVALID_ARGUMENT, "%s handle %d is invalid (handles are positive)", slot_kind_name(kind),
             (int)handle);
    return NULL;
  }
  bbw_slot *s = &slots[(uint32_t)handle & BB_WASM_SLOT_MASK];
  uint32_t generation = (uint32_t)handle >> BB_WASM_SLOT_BITS;
  if (s->kind == SLOT_FREE || s->generation != generation) {
    bbw_fail(BB_ERR_INVALID_ARGUMENT, "%s handle %d is stale or unknown: its object was freed, or it was never issued",
             slot_kind_name(kind), (int)handle);
    return NULL;
  }
  if (s->kind != kind) {
    bbw_fail(BB_ERR_INVALID_ARGUMENT, "handle %d names a %s, not a %s", (int)handle, slot_kind_name(s->kind),
             slot_kind_name(kind));
    return NULL;
  }
  return s;
}

bbw_slot_kind bbw_handle_kind(int32_t handle) {
  if (handle <= 0) return SLOT_FREE;
  const bbw_slot *s = &slots[(uint32_t)handle & BB_WASM_SLOT_MASK];
  return s->generation == (uint32_t)handle >> BB_WASM_SLOT_BITS ? s->kind : SLOT_FREE;
}

void bbw_slot_release(bbw_slot *s) {
  s->kind = SLOT_FREE;
  s->object = NULL;
}

/* ---- the result buffer --------------------------------------------------------- */

static uint8_t *result_data;
static size_t result_len;

void bbw_result_clear(void) {
  if (result_data != NULL) bb_buffer_free(NULL, result_data);
  result_data = NULL;
  result_len = 0;
}

void bbw_result_take(uint8_t *data, size_t len) {
  bbw_result_clear();
  result_data = data;
  result_len = len;
}

const uint8_t *bb_wasm_result_ptr(void) { return result_data; }

size_t bb_wasm_result_len(void) { return result_len; }

/* ---- versions and memory ------------------------------------------------------- */

uint32_t bb_wasm_abi_version(void) { return BB_WASM_ABI_VERSION; }

const char *bb_wasm_version(void) { return BB_VERSION_STRING; }

void *bb_wasm_alloc(size_t size) {
  bbw_error_clear();
  void *ptr = malloc(size > 0 ? size : 1);
  if (ptr == NULL) bbw_fail(BB_ERR_NOMEM, "out of memory allocating %zu bytes", size);
  return ptr;
}

void bb_wasm_free(void *ptr) { free(ptr); }
