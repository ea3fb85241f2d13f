/* A model component's ONNX bytes (model_bytes.h). */
#include "components/models/model_bytes.h"

#include <stdio.h>

#include "util/mem.h"

int bbi_model_bytes(const char *who, const bb_component_init *init, const char *path, bb_bytes *out, bool *owned,
                    bb_error *err) {
  *owned = false;
  if (init->host_data) {
    *out = *(const bb_bytes *)init->host_data;
    return 0;
  }
  if (!*path) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s: config needs model=PATH (or host_data bytes)", who);
#ifdef __EMSCRIPTEN__
  /* bb.wasm has no file system (its only imports are the loader's): the host hands the bytes */
  return bb_error_set(err, BB_ERR_UNSUPPORTED, "%s: model=%s: bb.wasm reads no files; pass the model bytes as host_data", who,
                      path);
#else
  FILE *f = fopen(path, "rb");
  if (!f) return bb_error_set(err, BB_ERR_IO, "%s: cannot open model %s", who, path);
  uint8_t *buf = NULL;
  size_t len = 0, cap = 0;
  int rc = 0;
  for (;;) {
    if (len == cap && bbi_mem_grow(init->alloc, (void **)&buf, &cap, len + 65536, 1)) {
      rc = bb_error_set(err, BB_ERR_NOMEM, "%s: out of memory reading %s", who, path);
      break;
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (!got) break;
  }
  if (!rc && ferror(f)) rc = bb_error_set(err, BB_ERR_IO, "%s: cannot read model %s", who, path);
  fclose(f);
  if (rc) {
    bbi_mem_free(init->alloc, buf);
    return rc;
  }
  *out = (bb_bytes){buf, len};
  *owned = true;
  return 0;
#endif
}
