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
 * Tensors: a tensor handle holds one reference to a bb_tensor. Tensors a session run
 * returns may share storage with its inputs (Identity, Reshape and other views do), so
 * writing into an input after a run can change such an output.
 *
 * Lifetimes: free every handle when done; the garbage collector of JavaScript sees none
 * of them. A session keeps the model it was made from alive, so models and sessions may
 * be freed in any order (the model's handle dies at once, its memory with the last user).
 *
 * Bump BB_WASM_ABI_VERSION whenever a signature or a meaning here changes, or a function
 * is added: the loader refuses a module whose version it was not written for.
 * Version 2 added tensors, CPU sessions and the operator listing. */
#ifndef BB_WASM_H
#define BB_WASM_H

#include <stddef.h>
#include <stdint.h>

#define BB_WASM_ABI_VERSION 2u

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

/* Frees a model and retires its handle; sessions made from it keep working. Returns 0
 * or a code. */
int32_t bb_wasm_model_free(int32_t model);

/* ---- tensors ------------------------------------------------------------------------- */

/* A new zero-filled tensor of a bb_dtype (any but UNDEFINED and STRING) with `rank`
 * (0..8) dims read from dims (rank int64 values; may be NULL for rank 0). Returns its
 * handle, or a negative code. */
int32_t bb_wasm_tensor_new(int32_t dtype, int32_t rank, const int64_t *dims);

/* The tensor's bb_dtype, or a negative code. */
int32_t bb_wasm_tensor_dtype(int32_t tensor);

/* The tensor's rank, or a negative code. */
int32_t bb_wasm_tensor_rank(int32_t tensor);

/* The tensor's dims: rank int64 values, valid until the tensor is freed. NULL with the
 * error recorded for a bad handle. */
const int64_t *bb_wasm_tensor_dims(int32_t tensor);

/* The tensor's elements, contiguous, row-major and little-endian (numel × element size
 * bytes, aligned to 64; complex values as real, imaginary pairs; float16 and bfloat16 as
 * their bits). Writable, and valid until the tensor is freed. NULL with the error
 * recorded for a bad handle. */
void *bb_wasm_tensor_data(int32_t tensor);

/* The size of the tensor's elements in bytes, or a negative code. */
int32_t bb_wasm_tensor_nbytes(int32_t tensor);

/* Drops the tensor's handle (and its storage, unless an output or input shares it).
 * Returns 0 or a code. */
int32_t bb_wasm_tensor_free(int32_t tensor);

/* ---- CPU sessions ---------------------------------------------------------------------- */

/* Prepares the main graph of a model for running on the CPU backend. Fails with
 * BB_ERR_UNSUPPORTED naming the first node whose op the backend lacks. Returns the
 * session's handle, or a negative code. */
int32_t bb_wasm_session_new(int32_t model);

/* How many inputs a run needs (graph inputs that are not initializers), or a code. */
int32_t bb_wasm_session_input_count(int32_t session);

/* The name of input i, valid until the session is freed; NULL with the error recorded. */
const char *bb_wasm_session_input_name(int32_t session, int32_t i);

/* How many outputs a run produces, or a negative code. */
int32_t bb_wasm_session_output_count(int32_t session);

/* The name of output i, valid until the session is freed; NULL with the error recorded. */
const char *bb_wasm_session_output_name(int32_t session, int32_t i);

/* Runs the graph. input_names holds n_inputs NUL-terminated UTF-8 names back to back in
 * names_len bytes; input_tensors the n_inputs tensor handles in the same order. Every
 * input must be given (an initializer may be overridden too). On success
 * output_tensors[0..output_count) receive new tensor handles in graph output order, and
 * 0 is returned; on failure nothing is issued and a negative code is returned. */
int32_t bb_wasm_session_run(int32_t session, int32_t n_inputs, const char *input_names, size_t names_len,
                            const int32_t *input_tensors, int32_t *output_tensors);

/* Peak bytes of intermediate tensor data alive at once during the last run, or a code. */
int32_t bb_wasm_session_peak_bytes(int32_t session);

/* Frees a session and retires its handle. Returns 0 or a code. */
int32_t bb_wasm_session_free(int32_t session);

/* ---- the CPU backend's operators ------------------------------------------------------ */

/* How many ai.onnx operators the CPU backend implements. */
int32_t bb_wasm_cpu_op_count(void);

/* Operator i's name (alphabetical order), and the element types it accepts as a
 * comma-separated list of bb_dtype names ("float,double,int32"). Static strings; NULL
 * with the error recorded when i is out of range. */
const char *bb_wasm_cpu_op_name(int32_t i);
const char *bb_wasm_cpu_op_types(int32_t i);

#endif /* BB_WASM_H */
