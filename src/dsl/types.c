/* Value types as the IR records them: denotations, and the TypeProto written for each
 * (the reference's recorder mapping, compiler.md §1.9). */
#include <string.h>

#include "dsl/recorder.h"

#define TENSOR_PREFIX "ai.bytesandbrains.tensor."

static const struct {
  bb_dtype dtype;
  const char *denotation;
} TENSOR_TYPES[] = {
    {BB_DTYPE_FLOAT, TENSOR_PREFIX "f32"},  {BB_DTYPE_DOUBLE, TENSOR_PREFIX "f64"},
    {BB_DTYPE_FLOAT16, TENSOR_PREFIX "f16"}, {BB_DTYPE_BFLOAT16, TENSOR_PREFIX "bf16"},
    {BB_DTYPE_UINT8, TENSOR_PREFIX "u8"},   {BB_DTYPE_UINT16, TENSOR_PREFIX "u16"},
    {BB_DTYPE_UINT32, TENSOR_PREFIX "u32"}, {BB_DTYPE_UINT64, TENSOR_PREFIX "u64"},
    {BB_DTYPE_INT8, TENSOR_PREFIX "i8"},    {BB_DTYPE_INT16, TENSOR_PREFIX "i16"},
    {BB_DTYPE_INT32, TENSOR_PREFIX "i32"},  {BB_DTYPE_INT64, TENSOR_PREFIX "i64"},
    {BB_DTYPE_BOOL, TENSOR_PREFIX "bool"},
};
#define N_TENSOR_TYPES (sizeof TENSOR_TYPES / sizeof TENSOR_TYPES[0])

const char *bb_tensor_type(bb_dtype dtype) {
  for (size_t i = 0; i < N_TENSOR_TYPES; i++)
    if (TENSOR_TYPES[i].dtype == dtype) return TENSOR_TYPES[i].denotation;
  return NULL;
}

/* The element type of a tensor denotation; UNDEFINED for a tensor leaf this table does
 * not know (an extension of the type tree). */
static int32_t tensor_elem_type(const char *denotation) {
  for (size_t i = 0; i < N_TENSOR_TYPES; i++)
    if (strcmp(TENSOR_TYPES[i].denotation, denotation) == 0) return TENSOR_TYPES[i].dtype;
  return BB_DTYPE_UNDEFINED;
}

bb_type *bb_value_type_new(bb_model *m, const char *denotation) {
  if (!denotation) denotation = BB_TYPE_ABSTRACT;
  bool tensor = strncmp(denotation, TENSOR_PREFIX, sizeof TENSOR_PREFIX - 1) == 0;
  /* The shape stays unknown: the reference writes an empty TensorShapeProto, which ONNX
   * reads as "rank 0". */
  bb_type *t = tensor ? bb_type_new_tensor(m, tensor_elem_type(denotation), -1, NULL)
                      : bb_type_new(m, BB_TYPE_OPAQUE);
  if (!t) return NULL;
  if (!tensor && !(t->opaque_domain = bb_model_strdup(m, BB_DOMAIN_FRAMEWORK))) return NULL;
  if (*denotation) {
    if (!(t->denotation = bb_model_strdup(m, denotation))) return NULL;
    if (!tensor && !(t->opaque_name = bb_model_strdup(m, denotation))) return NULL;
  }
  return t;
}

/* Abstract and untyped (bytes) values are bounds the compiler narrows, not types that
 * can disagree with another. */
static bool is_concrete(const char *type) { return *type && strcmp(type, BB_TYPE_BYTES) != 0; }

bool rec_types_conflict(const char *a, const char *b) {
  return is_concrete(a) && is_concrete(b) && strcmp(a, b) != 0;
}

bool rec_is_peer_type(const char *type, bool many) {
  return !is_concrete(type) || strcmp(type, BB_TYPE_PEER_ID) == 0 ||
         (many && strcmp(type, BB_TYPE_PEER_ID_VEC) == 0);
}
