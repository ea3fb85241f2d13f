/* Versioned option structs: a struct a caller fills opens with `size_t struct_size`
 * (sizeof the struct as the caller's header declared it). Fields are only ever added at
 * the end, so a library reads exactly the bytes the caller's struct_size covers. */
#ifndef BBI_UTIL_OPTIONS_H
#define BBI_UTIL_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* Copies the caller's struct `given` into `out` (`known` bytes: the size this library
 * was built with): the bytes its struct_size covers, zeros past them (the defaults of the
 * fields an older caller does not know), and struct_size set to known. False, with out
 * untouched, when struct_size does not cover the field itself (unset) or is larger than
 * known (a newer caller whose fields this library cannot honour). */
static inline bool bbi_options_read(void *out, size_t known, const void *given) {
  size_t size;
  memcpy(&size, given, sizeof size);
  if (size < sizeof size || size > known) return false;
  memset(out, 0, known);
  memcpy(out, given, size);
  memcpy(out, &known, sizeof known);
  return true;
}

#endif
