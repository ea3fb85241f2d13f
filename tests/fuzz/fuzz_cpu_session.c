/* libFuzzer target: arbitrary model bytes through decoding, CPU session preparation and a
 * run on zero-filled inputs of the declared shapes. Hostile attributes, shapes, types and
 * graphs must give an error, never a crash, a hang or a leak. */
#include <stdlib.h>
#include <string.h>

#include "bb/cpu.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_INPUT_ELEMENTS 4096

/* A zero tensor for a declared input, when its type and shape are static and small. */
static bb_tensor *input_for(const bb_value_info *vi) {
  const bb_type *t = vi->type;
  if (!t || t->kind != BB_TYPE_TENSOR || !t->shape || t->shape->rank > BB_MAX_RANK) return NULL;
  int64_t dims[BB_MAX_RANK], numel = 1;
  for (size_t i = 0; i < t->shape->rank; i++) {
    const bb_dim *d = &t->shape->dims[i];
    dims[i] = d->kind == BB_DIM_VALUE ? d->value : 1;
    if (dims[i] < 0 || dims[i] > MAX_INPUT_ELEMENTS) return NULL;
    numel *= dims[i] ? dims[i] : 1;
    if (numel > MAX_INPUT_ELEMENTS) return NULL;
  }
  return bb_tensor_new_zeros(NULL, t->elem_type, (int)t->shape->rank, dims);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  bb_model *m = NULL;
  bb_error err;
  if (bb_model_decode(data, size, NULL, NULL, &m, &err) != 0) return 0;
  bb_cpu_session *s = NULL;
  if (bb_cpu_session_new(m, NULL, &s, &err) == 0) {
    size_t n = bb_cpu_session_input_count(s);
    if (n <= 16) {
      const char *names[16];
      bb_tensor *inputs[16] = {0}, *outputs[64] = {0};
      size_t given = 0;
      for (size_t i = 0; i < n; i++) {
        const bb_value_info *vi = bb_vilist_find(&m->graph->inputs, bb_cpu_session_input_name(s, i));
        bb_tensor *t = vi ? input_for(vi) : NULL;
        if (!t) continue;
        names[given] = vi->name;
        inputs[given++] = t;
      }
      if (bb_cpu_session_output_count(s) <= 64 && bb_cpu_session_run(s, names, inputs, given, outputs, &err) == 0)
        for (size_t i = 0; i < bb_cpu_session_output_count(s); i++) bb_tensor_release(outputs[i]);
      else if (!err.message[0])
        abort(); /* every failure must say why */
      for (size_t i = 0; i < given; i++) bb_tensor_release(inputs[i]);
    }
    bb_cpu_session_free(s);
  } else if (!err.message[0]) {
    abort();
  }
  bb_model_free(m);
  return 0;
}
