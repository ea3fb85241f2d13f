/* bytesandbrains — what the files of bb.wasm's ABI share: the handle table, the last-error
 * record and the result buffer (abi_core.c), the byte layouts of the engine functions
 * (abi_layouts.c), and the objects one area hands another: models to sessions, tensors to
 * sessions and data sets, examples to the compiler, data sets and the component registry
 * to nodes. Not part of the ABI; bb_wasm.h is.
 *
 * The ABI is built on the library's public headers (include/bb, bb/bytes.h for its
 * little-endian layouts) and the reference programs' interface (programs/examples.h). */
#ifndef BB_WASM_ABI_INTERNAL_H
#define BB_WASM_ABI_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bb/common.h"
#include "bb/dataset.h"
#include "bb/graph.h"
#include "bb/ir.h"
#include "bb/runtime.h"
#include "bb/tensor.h"
#include "bb/value.h"
#include "bb/wire.h"
#include "programs/examples.h"
#include "bb/bytes.h"

/* Longest type or slot name the ABI copies, with its NUL. */
#define BBW_NAME_MAX 128
/* Room for a peer id as base58 text, with its NUL (bb_peer_id_to_text needs 104). */
#define BBW_PEER_TEXT_MAX 128

/* ---- the last error (abi_core.c) ----------------------------------------------------- */

/* Clears the last-error record; every fallible ABI function starts with it. */
void bbw_error_clear(void);
/* Records a failure and returns its code, so callers can write `return bbw_fail(...)`. */
__attribute__((format(printf, 2, 3))) int32_t bbw_fail(int32_t code, const char *format, ...);
/* Records a failure the library explained in `err`; `what` says which call it was. */
int32_t bbw_fail_from(int code, const bb_error *err, const char *what);
/* The code recorded last (0 after a success). */
int32_t bbw_last(void);

/* ---- handles (abi_core.c) ------------------------------------------------------------ */

typedef enum bbw_slot_kind {
  SLOT_FREE = 0,
  SLOT_MODEL,
  SLOT_TENSOR,
  SLOT_SESSION,
  SLOT_COMPILER,
  SLOT_DATASET,
  SLOT_NODE,
  SLOT_MODULE,
  SLOT_TRAINER
} bbw_slot_kind;

typedef struct bbw_slot {
  bbw_slot_kind kind;
  uint32_t generation; /* of the current (or last) occupant; 0 when never used */
  void *object;
} bbw_slot;

/* Stores object under a new handle, or returns BB_ERR_LIMIT (recorded). */
int32_t bbw_handle_issue(bbw_slot_kind kind, void *object);
/* The live slot a handle of that kind names, or NULL with the reason recorded (a valid
 * handle leaves the record as it was). */
bbw_slot *bbw_handle_slot(int32_t handle, bbw_slot_kind kind);
/* The kind of object a live handle names, or SLOT_FREE (nothing recorded). */
bbw_slot_kind bbw_handle_kind(int32_t handle);
/* Frees the slot for reuse; its handle is dead from now on. */
void bbw_slot_release(bbw_slot *s);

/* ---- the result buffer (abi_core.c) ---------------------------------------------------- */

void bbw_result_clear(void);
/* Makes data[0..len) the result, taking ownership (it was made with the default
 * allocator). */
void bbw_result_take(uint8_t *data, size_t len);

/* ---- byte layouts (abi_layouts.c; bb_wasm.h, "byte layouts") ------------------------------ */

/* Most values one list may carry: more than any op has inputs or outputs. */
#define BBW_VALUE_LIST_MAX 4096

typedef struct bbw_value_list {
  bb_val **items; /* NULL entries: absent */
  size_t n;
} bbw_value_list;

/* Decodes a value list; every failure is recorded, naming `what` and the item. */
int32_t bbw_value_list_decode(const uint8_t *data, size_t len, const char *what, bbw_value_list *out);
void bbw_value_list_free(bbw_value_list *l);

/* A writer for a result, growing through the default allocator. */
bb_le_writer bbw_writer(void);
/* A u32 length, then the bytes (NULL with len 0 is empty). */
void bbw_write_field(bb_le_writer *w, const void *data, size_t len);
/* A text as a field (NULL is empty). */
void bbw_write_text(bb_le_writer *w, const char *text);
/* One value of a value list: u64 type hash, u64 length, the payload (NULL: absent). */
void bbw_write_value(bb_le_writer *w, const bb_val *v);
/* A value's payload as a field. */
void bbw_write_value_field(bb_le_writer *w, const bb_val *v);
/* Makes what w wrote the result (w's buffer now belongs to it), or records that memory
 * ran out (`what` names the call) and frees the buffer. */
int32_t bbw_result_from(bb_le_writer *w, const char *what);

/* Memory a decode hands out piece by piece, freed all at once. */
typedef struct bbw_scratch {
  void **blocks;
  size_t n, cap;
} bbw_scratch;

/* size bytes (at least one), or NULL with BB_ERR_NOMEM recorded under `what`. */
void *bbw_scratch_alloc(bbw_scratch *s, size_t size, const char *what);
void bbw_scratch_free(bbw_scratch *s);

/* Most attributes one op may carry, and most elements of one list attribute. */
#define BBW_ATTRS_MAX 256
#define BBW_ATTR_ITEMS_MAX (1u << 20)

/* Decodes an attribute list (bb_wasm.h, "attributes") into bb_op_attrs whose strings,
 * lists and literals live in `s`; every failure is recorded, naming `what` and the
 * attribute. An empty input (len 0) is no attributes. */
int32_t bbw_attrs_decode(const uint8_t *data, size_t len, const char *what, bbw_scratch *s, bb_op_attr **out,
                         size_t *n_out);
/* Decodes one tensor literal (bb_wasm.h, "literals") from r into out, its dims and data
 * in `s` (the data is copied, so the literal outlives the bytes). */
int32_t bbw_literal_decode(bb_le_reader *r, const char *what, bbw_scratch *s, bb_literal *out);

/* Parses a base58 peer id; a failure is recorded under `what`. */
int32_t bbw_peer_parse(const char *text, const char *what, bb_peer_id *out);
/* NUL-terminated strings back to back in packed[0..len): how many, or a recorded failure
 * when the last one is not terminated or there are more than max. */
int32_t bbw_count_strings(const char *packed, size_t len, size_t max, const char *what);

/* ---- objects shared between areas -------------------------------------------------------- */

/* A decoded model, shared by its handle and the sessions made from it: a session reads
 * the model's graph for its whole life, so the model goes when its last user does
 * (abi_model.c). */
typedef struct bbw_shared_model {
  bb_model *model;
  uint32_t users;
} bbw_shared_model;

/* The model a model handle names, or NULL with the reason recorded. */
bbw_shared_model *bbw_model_of(int32_t handle);
void bbw_model_release(bbw_shared_model *shared);

/* The tensor a tensor handle names (NULL, recorded, for a bad one); a new handle for a
 * tensor reference (dropped when no handle is left); and the retirement of a handle just
 * issued, keeping the error record (abi_tensor.c). */
bb_tensor *bbw_tensor_of(int32_t handle);
int32_t bbw_tensor_issue(bb_tensor *tensor);
void bbw_tensor_retire(int32_t handle);

/* A data set shared by its handle and the nodes that read it (an ArraySource's host_data
 * must outlive the node), freed with its last user (abi_dataset.c). */
typedef struct bbw_shared_dataset {
  bb_dataset data;
  uint32_t users;
} bbw_shared_dataset;

bbw_shared_dataset *bbw_dataset_of(int32_t handle);
void bbw_dataset_release(bbw_shared_dataset *d);

/* The example of that name with Module `module`, or NULL with the reason recorded
 * (abi_examples.c). */
const bb_example *bbw_example_named(const char *name, int32_t module);

/* The registry every node installs from: the shipped types, the examples' fixtures and
 * the host's types; made on first use. NULL with the reason recorded when that fails
 * (abi_host.c). */
bb_registry *bbw_registry(void);

#endif
