/* The library's Shamir sharing on the command line, for tests/privacy/shamir_interop.mjs:
 *   shamir_tool split SECRET_HEX N THRESHOLD [X_HEX]   one share (hex) per line
 *   shamir_tool combine SHARE_HEX...                   the secret (hex) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/privacy.h"

static size_t from_hex(const char *s, uint8_t *out, size_t cap) {
  const size_t n = strlen(s) / 2;
  if (strlen(s) % 2 || n > cap) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned v;
    if (sscanf(s + 2 * i, "%2x", &v) != 1) return 0;
    out[i] = (uint8_t)v;
  }
  return n;
}

static void print_hex(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) printf("%02x", p[i]);
  printf("\n");
}

int main(int argc, char **argv) {
  static uint8_t secret[4096], shares[255 * 4097], xs[255];
  bb_error err = {0};
  if (argc >= 5 && strcmp(argv[1], "split") == 0) {
    const size_t len = from_hex(argv[2], secret, sizeof secret);
    const uint32_t n = (uint32_t)atoi(argv[3]), t = (uint32_t)atoi(argv[4]);
    const bool given = argc > 5 && from_hex(argv[5], xs, sizeof xs) == n;
    if (!len || n > 255 || bb_shamir_split(secret, len, n, t, given ? xs : NULL, NULL, shares, &err)) {
      fprintf(stderr, "shamir_tool: split failed: %s\n", err.message);
      return 1;
    }
    for (uint32_t s = 0; s < n; s++) print_hex(shares + (size_t)s * (len + 1), len + 1);
    return 0;
  }
  if (argc >= 3 && strcmp(argv[1], "combine") == 0) {
    const uint32_t n = (uint32_t)(argc - 2);
    size_t share_len = 0;
    for (uint32_t s = 0; s < n && n <= 255; s++) {
      const size_t l = from_hex(argv[2 + s], shares + (size_t)s * 4097, 4097);
      if (!l || (share_len && l != share_len)) return fprintf(stderr, "shamir_tool: bad share %u\n", s), 1;
      share_len = l;
      if (s) memmove(shares + (size_t)s * share_len, shares + (size_t)s * 4097, share_len);
    }
    if (bb_shamir_combine(shares, n, share_len, secret, &err)) {
      fprintf(stderr, "shamir_tool: combine failed: %s\n", err.message);
      return 1;
    }
    print_hex(secret, share_len - 1);
    return 0;
  }
  fprintf(stderr, "usage: shamir_tool split SECRET_HEX N THRESHOLD [X_HEX] | combine SHARE_HEX...\n");
  return 2;
}
