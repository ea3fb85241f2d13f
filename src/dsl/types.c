/* Value types as the IR records them: the TypeProto written for each denotation, and
 * the recorder's rules for comparing types. */
#include <string.h>

#include "dsl/recorder.h"

bb_type *bb_value_type_new(bb_model *m, const char *denotation) {
  if (!denotation) denotation = BB_TYPE_ABSTRACT;
  bool tensor = strncmp(denotation, BB_TYPE_TENSOR_PREFIX, sizeof BB_TYPE_TENSOR_PREFIX - 1) == 0;
  /* The shape stays unknown (no TensorShapeProto): an empty one would read as rank 0. */
  bb_type *t = tensor ? bb_type_new_tensor(m, bb_tensor_type_dtype(denotation), -1, NULL)
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
