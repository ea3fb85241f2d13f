/* Reading numbers from the bb tool's arguments. */
#include <math.h>
#include <stdlib.h>

#include "cli.h"

bool cli_number(const char *s, double *out) {
  char *end;
  *out = strtod(s, &end);
  return *s && !*end && isfinite(*out);
}

bool cli_count(const char *s, uint64_t *out) {
  char *end;
  if (*s < '0' || *s > '9') return false;
  *out = strtoull(s, &end, 10);
  return !*end;
}
