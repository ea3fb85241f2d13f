/* bytesandbrains — the flat C ABI of bb.wasm: a handle table, the last-error record and
 * the result buffer around the public library API. See bb_wasm.h for the contract. */
#include "bb_wasm.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "bb/common.h"
#include "bb/ir.h"

/* ---- the last error ------------------------------------------------------------ */

static int32_t last_error_code;
static char last_error_message[BB_ERROR_MESSAGE_MAX];

static void error_clear(void) {
  last_error_code = BB_OK;
  last_error_message[0] = '\0';
}

/* Records a failure and returns its code, so callers can write `return fail(...)`. */
__attribute__((format(printf, 2, 3))) static int32_t fail(int32_t code, const char *format,
                                                          ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(last_error_message, sizeof last_error_message, format, args);
  va_end(args);
  last_error_code = code;
  return code;
}

/* Records a failure the library explained in `err`; "what" says which call it was. */
static int32_t fail_from(int code, const bb_error *err, const char *what) {
  const char *detail = err->message[0] != '\0' ? err->message : bb_strerror(code);
  return fail(code, "%s: %s", what, detail);
}

/* ---- handles ------------------------------------------------------------------- */

/* A handle is (generation << BB_WASM_SLOT_BITS) | slot index. Generations start at 1,
 * so every handle is positive, and they fit in the 31 bits left of a positive int32. */
#define BB_WASM_SLOT_BITS 10
#define BB_WASM_SLOT_MASK ((1u << BB_WASM_SLOT_BITS) - 1u)
#define BB_WASM_GENERATION_MAX ((1u << (31 - BB_WASM_SLOT_BITS)) - 1u)
_Static_assert(BB_WASM_MAX_HANDLES == 1 << BB_WASM_SLOT_BITS,
               "the slot index must cover the whole table");

typedef enum slot_kind { SLOT_FREE = 0, SLOT_MODEL } slot_kind;

static const char *slot_kind_name(slot_kind kind) {
  switch (kind) {
  case SLOT_FREE: return "nothing";
  case SLOT_MODEL: return "model";
  }
  return "unknown";
}

typedef struct slot {
  slot_kind kind;
  uint32_t generation; /* of the current (or last) occupant; 0 when never used */
  void *object;
} slot;

static slot slots[BB_WASM_MAX_HANDLES];

/* Stores object in the first free slot and returns its new handle, or BB_ERR_LIMIT. */
static int32_t handle_issue(slot_kind kind, void *object) {
  for (uint32_t index = 0; index < BB_WASM_MAX_HANDLES; index++) {
    slot *s = &slots[index];
    if (s->kind != SLOT_FREE) continue;
    /* After GENERATION_MAX reuses of one slot the count wraps; a handle kept that long
     * could alias again, a bound accepted for a 31-bit handle. */
    s->generation = s->generation % BB_WASM_GENERATION_MAX + 1;
    s->kind = kind;
    s->object = object;
    return (int32_t)((s->generation << BB_WASM_SLOT_BITS) | index);
  }
  return fail(BB_ERR_LIMIT, "all %d handles are in use: free objects that are done with",
              BB_WASM_MAX_HANDLES);
}

/* The live slot a handle of the given kind names, or NULL with the reason recorded. */
static slot *handle_slot(int32_t handle, slot_kind kind) {
  if (handle <= 0) {
    fail(BB_ERR_INVALID_ARGUMENT, "%s handle %d is invalid (handles are positive)",
         slot_kind_name(kind), (int)handle);
    return NULL;
  }
  slot *s = &slots[(uint32_t)handle & BB_WASM_SLOT_MASK];
  uint32_t generation = (uint32_t)handle >> BB_WASM_SLOT_BITS;
  if (s->kind == SLOT_FREE || s->generation != generation) {
    fail(BB_ERR_INVALID_ARGUMENT,
         "%s handle %d is stale or unknown: its object was freed, or it was never issued",
         slot_kind_name(kind), (int)handle);
    return NULL;
  }
  if (s->kind != kind) {
    fail(BB_ERR_INVALID_ARGUMENT, "handle %d names a %s, not a %s", (int)handle,
         slot_kind_name(s->kind), slot_kind_name(kind));
    return NULL;
  }
  return s;
}

static void slot_release(slot *s) {
  s->kind = SLOT_FREE;
  s->object = NULL;
}

/* ---- the result buffer --------------------------------------------------------- */

static uint8_t *result_data;
static size_t result_len;

static void result_clear(void) {
  if (result_data != NULL) bb_buffer_free(NULL, result_data);
  result_data = NULL;
  result_len = 0;
}

/* Takes ownership of a buffer made with the default allocator. */
static void result_take(uint8_t *data, size_t len) {
  result_clear();
  result_data = data;
  result_len = len;
}

/* ---- the ABI ------------------------------------------------------------------- */

uint32_t bb_wasm_abi_version(void) { return BB_WASM_ABI_VERSION; }

const char *bb_wasm_version(void) { return BB_VERSION_STRING; }

void *bb_wasm_alloc(size_t size) {
  error_clear();
  void *ptr = malloc(size > 0 ? size : 1);
  if (ptr == NULL) fail(BB_ERR_NOMEM, "out of memory allocating %zu bytes", size);
  return ptr;
}

void bb_wasm_free(void *ptr) { free(ptr); }

int32_t bb_wasm_last_error_code(void) { return last_error_code; }

const char *bb_wasm_last_error(void) { return last_error_message; }

const uint8_t *bb_wasm_result_ptr(void) { return result_data; }

size_t bb_wasm_result_len(void) { return result_len; }

int32_t bb_wasm_model_decode(const uint8_t *data, size_t len) {
  error_clear();
  if (data == NULL && len > 0)
    return fail(BB_ERR_INVALID_ARGUMENT, "model decode: NULL data with length %zu", len);
  bb_model *model = NULL;
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_model_decode(data, len, NULL, NULL, &model, &err);
  if (rc < 0) return fail_from(rc, &err, "model decode");
  int32_t handle = handle_issue(SLOT_MODEL, model);
  if (handle < 0) bb_model_free(model);
  return handle;
}

int32_t bb_wasm_model_encode(int32_t model) {
  error_clear();
  result_clear();
  const slot *s = handle_slot(model, SLOT_MODEL);
  if (s == NULL) return last_error_code;
  uint8_t *bytes = NULL;
  size_t len = 0;
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_model_encode(s->object, &bytes, &len, &err);
  if (rc < 0) return fail_from(rc, &err, "model encode");
  result_take(bytes, len);
  return BB_OK;
}

int32_t bb_wasm_model_summary(int32_t model, int32_t json) {
  error_clear();
  result_clear();
  const slot *s = handle_slot(model, SLOT_MODEL);
  if (s == NULL) return last_error_code;
  char *text = NULL;
  size_t len = 0;
  bb_error err;
  bb_error_clear(&err);
  int rc = bb_model_summary(s->object, json != 0, &text, &len, &err);
  if (rc < 0) return fail_from(rc, &err, "model summary");
  result_take((uint8_t *)text, len);
  return BB_OK;
}

int32_t bb_wasm_model_free(int32_t model) {
  error_clear();
  slot *s = handle_slot(model, SLOT_MODEL);
  if (s == NULL) return last_error_code;
  bb_model_free(s->object);
  slot_release(s);
  return BB_OK;
}
