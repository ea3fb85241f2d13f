/* Component configs: "key=value,key=value" text read one key at a time. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bb/roles.h"
#include "bb/common.h"

/* Finds key in config; value and len then span its value text. */
static bool find(const char *config, const char *key, const char **value, size_t *len) {
  size_t kl = strlen(key);
  for (const char *p = config ? config : ""; *p;) {
    const char *end = strchr(p, ',');
    if (!end) end = p + strlen(p);
    const char *eq = memchr(p, '=', (size_t)(end - p));
    if (eq && (size_t)(eq - p) == kl && strncmp(p, key, kl) == 0) {
      *value = eq + 1;
      *len = (size_t)(end - eq - 1);
      return true;
    }
    p = *end ? end + 1 : end;
  }
  return false;
}

int bb_config_check(const char *config, const char *const *allowed, bb_error *err) {
  for (const char *p = config ? config : ""; *p;) {
    const char *end = strchr(p, ',');
    if (!end) end = p + strlen(p);
    const char *eq = memchr(p, '=', (size_t)(end - p));
    if (!eq || eq == p)
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "config `%s`: `%.*s` is not key=value", config, (int)(end - p),
                          p);
    bool ok = false;
    for (size_t i = 0; allowed[i] && !ok; i++)
      ok = strlen(allowed[i]) == (size_t)(eq - p) && strncmp(allowed[i], p, (size_t)(eq - p)) == 0;
    if (!ok) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "config `%s`: unknown key `%.*s`", config,
                                 (int)(eq - p), p);
    /* a key given twice is a mistake, not a choice of the first */
    for (const char *q = end; *q;) {
      const char *qe = strchr(q + 1, ',');
      if (!qe) qe = q + strlen(q);
      const char *k = q + 1, *qeq = memchr(k, '=', (size_t)(qe - k));
      if (qeq && qeq - k == eq - p && strncmp(k, p, (size_t)(eq - p)) == 0)
        return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "config `%s`: key `%.*s` is given twice", config,
                            (int)(eq - p), p);
      q = qe;
    }
    p = *end ? end + 1 : end;
  }
  return 0;
}

int bb_config_str(const char *config, const char *key, const char *dflt, char *buf, size_t size, bb_error *err) {
  const char *v;
  size_t len;
  if (!find(config, key, &v, &len)) {
    v = dflt ? dflt : "";
    len = strlen(v);
  }
  if (len >= size) return bb_error_set(err, BB_ERR_LIMIT, "config key `%s`: value longer than %zu bytes", key, size - 1);
  memcpy(buf, v, len);
  buf[len] = 0;
  return 0;
}

int bb_config_u64(const char *config, const char *key, uint64_t dflt, uint64_t *out, bb_error *err) {
  char buf[64], *end;
  const char *v;
  size_t len;
  if (!find(config, key, &v, &len)) {
    *out = dflt;
    return 0;
  }
  /* digits only: strtoull would skip blanks and take a sign (" -5" wraps to 2^64 - 5) */
  if (!len || len >= sizeof buf || *v < '0' || *v > '9') goto bad;
  memcpy(buf, v, len);
  buf[len] = 0;
  errno = 0;
  *out = strtoull(buf, &end, 10);
  if (errno || *end) goto bad;
  return 0;
bad:
  return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "config key `%s`: `%.*s` is not a non-negative integer", key,
                      (int)len, v);
}

int bb_config_f32(const char *config, const char *key, float dflt, float *out, bb_error *err) {
  char buf[64], *end;
  const char *v;
  size_t len;
  if (!find(config, key, &v, &len)) {
    *out = dflt;
    return 0;
  }
  if (!len || len >= sizeof buf) goto bad;
  memcpy(buf, v, len);
  buf[len] = 0;
  errno = 0;
  *out = strtof(buf, &end);
  if (errno || *end || *out != *out) goto bad;
  return 0;
bad:
  return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "config key `%s`: `%.*s` is not a number", key, (int)len, v);
}
