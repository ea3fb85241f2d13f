/* Bad bytes are rejected with an error that says what was wrong and where — truncations,
 * bit flips, random strings, crafted hostile encodings — and running out of memory at any
 * allocation is reported, never a crash or a leak (run under ASan/UBSan in make test). */
#include "ir/testutil.h"

#include <stddef.h>


#include "bb/ir.h"
#include "failalloc.h"
#include "harness.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void) { /* xorshift64*: deterministic across builds */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545f4914f6cdd1dull;
}

static uint8_t *load(const char *rel, size_t *len) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", BB_TEST_ONNX_DATA, rel);
  uint8_t *d = tu_read_file(path, len);
  CHECK_MSG(d != NULL, "cannot read %s", path);
  return d;
}

/* Decodes, and when that succeeds also re-encodes: neither may crash or leak. Returns the
 * decode result; on failure checks that a reason was given. */
static int try_decode(const uint8_t *d, size_t n, bb_error *err) {
  bb_model *m = NULL;
  err->message[0] = '\0';
  int rc = bb_model_decode(d, n, NULL, NULL, &m, err);
  if (rc) {
    CHECK(m == NULL);
    CHECK_MSG(err->message[0] != '\0', "decode failed (%d) without a message", rc);
    CHECK(rc == BB_ERR_MALFORMED || rc == BB_ERR_LIMIT);
    return rc;
  }
  uint8_t *out;
  size_t out_len;
  CHECK_EQ_INT(bb_model_encode(m, &out, &out_len, err), 0);
  bb_buffer_free(NULL, out);
  bb_model_free(m);
  return 0;
}

/* Offsets at which top-level fields of a message start, found by a walk of its own. */
static size_t field_starts(const uint8_t *d, size_t n, size_t *starts, size_t max) {
  size_t count = 0, pos = 0;
  while (pos < n && count < max) {
    starts[count++] = pos;
    uint64_t key = 0;
    int shift = 0;
    while (d[pos] & 0x80) key |= (uint64_t)(d[pos++] & 0x7f) << shift, shift += 7;
    key |= (uint64_t)d[pos++] << shift;
    uint64_t len = 0;
    switch (key & 7) {
    case 0: while (d[pos++] & 0x80) {} break;
    case 1: pos += 8; break;
    case 5: pos += 4; break;
    case 2:
      shift = 0;
      while (d[pos] & 0x80) len |= (uint64_t)(d[pos++] & 0x7f) << shift, shift += 7;
      len |= (uint64_t)d[pos++] << shift;
      pos += len;
      break;
    }
  }
  starts[count++] = n;
  return count;
}

static void test_truncations(void) {
  static const char *models[] = {"node/test_if/model.onnx", "node/test_conv_with_strides_padding/model.onnx",
                                 "node/test_loop11/model.onnx", "simple/test_sequence_model1/model.onnx"};
  size_t rejected = 0, prefixes = 0;
  for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
    size_t len;
    uint8_t *d = load(models[k], &len);
    if (!d) continue;
    size_t starts[256];
    size_t ns = field_starts(d, len, starts, 255);
    for (size_t cut = 0; cut < len; cut++) {
      bool boundary = false;
      for (size_t i = 0; i < ns; i++) boundary |= starts[i] == cut;
      bb_error err;
      int rc = try_decode(d, cut, &err);
      if (boundary) {
        /* a cut between top-level fields is a shorter but well-formed model */
        CHECK_MSG(rc == 0, "%s cut at field boundary %zu rejected: %s", models[k], cut, err.message);
        prefixes++;
      } else {
        CHECK_MSG(rc != 0, "%s cut inside a field at %zu was accepted", models[k], cut);
        if (rc) {
          rejected++;
          CHECK_MSG(strstr(err.message, "at byte") && (strstr(err.message, "truncated") ||
                                                       strstr(err.message, "past the end")),
                    "%s cut at %zu: unhelpful message: %s", models[k], cut, err.message);
        }
      }
    }
    free(d);
  }
  printf("    %zu truncations rejected with a reason, %zu field-boundary prefixes decoded\n", rejected, prefixes);
}

static void test_bit_flips_and_random_bytes(void) {
  size_t len;
  uint8_t *d = load("node/test_loop11/model.onnx", &len);
  if (!d) return;
  uint8_t *copy = malloc(len);
  size_t rejected = 0, accepted = 0;
  for (size_t bit = 0; bit < len * 8; bit++) {
    memcpy(copy, d, len);
    copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    bb_error err;
    if (try_decode(copy, len, &err)) rejected++;
    else accepted++;
  }
  printf("    every single-bit flip of a %zu-byte model: %zu rejected, %zu still well-formed\n", len, rejected,
         accepted);
  CHECK(rejected > 0);
  uint8_t buf[512];
  size_t random_rejected = 0;
  for (int i = 0; i < 20000; i++) {
    size_t n = (size_t)(rng() % sizeof buf);
    for (size_t k = 0; k < n; k++) buf[k] = (uint8_t)rng();
    bb_error err;
    if (try_decode(buf, n, &err)) random_rejected++;
  }
  printf("    20000 random byte strings: %zu rejected\n", random_rejected);
  CHECK(random_rejected > 15000);
  free(copy);
  free(d);
}

static void expect_error(const uint8_t *d, size_t n, int code, const char *fragment) {
  bb_model *m = NULL;
  bb_error err;
  int rc = bb_model_decode(d, n, NULL, NULL, &m, &err);
  CHECK_EQ_INT(rc, code);
  CHECK_MSG(rc && strstr(err.message, fragment), "message \"%s\" lacks \"%s\"", err.message, fragment);
  bb_model_free(m);
}

/* Wraps payload (freed) as length-delimited field `field` of a new buffer. */
static uint8_t *wrap(uint8_t *payload, size_t *n, unsigned field) {
  uint8_t *out = malloc(*n + 12);
  size_t k = 0, len = *n;
  out[k++] = (uint8_t)(field << 3 | 2);
  do {
    out[k++] = (uint8_t)((len & 0x7f) | (len > 0x7f ? 0x80 : 0));
    len >>= 7;
  } while (len);
  if (*n) memcpy(out + k, payload, *n);
  free(payload);
  *n += k;
  return out;
}

static void test_crafted_inputs(void) {
  /* graph (7) holding node (1) whose op_type (4) is not UTF-8 */
  uint8_t bad_utf8[] = {0x3a, 0x05, 0x0a, 0x03, 0x22, 0x01, 0xff};
  expect_error(bad_utf8, sizeof bad_utf8, BB_ERR_MALFORMED, "ModelProto.graph.node[0].op_type at byte 6: string is not UTF-8");
  uint8_t nul_in_name[] = {0x12, 0x03, 'a', 0x00, 'b'}; /* producer_name "a\0b" */
  expect_error(nul_in_name, sizeof nul_in_name, BB_ERR_MALFORMED, "ModelProto.producer_name at byte 3: string is not UTF-8 text, or holds a NUL byte");
  uint8_t wrong_wire[] = {0x08 | 2, 0x01, 0x00}; /* ir_version as length-delimited */
  expect_error(wrong_wire, sizeof wrong_wire, BB_ERR_MALFORMED, "field ir_version (1) arrived as length-delimited");
  uint8_t overlong[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  expect_error(overlong, sizeof overlong, BB_ERR_MALFORMED, "over 10-byte varint");
  uint8_t past_end[] = {0x3a, 0x7f, 0x00};
  expect_error(past_end, sizeof past_end, BB_ERR_MALFORMED, "length 127 runs past the end");
  uint8_t group[] = {0xa3, 0x06}; /* unknown field 100 as a group */
  expect_error(group, sizeof group, BB_ERR_MALFORMED, "group wire type");
  uint8_t known_group[] = {0x0b}; /* ir_version as a group */
  expect_error(known_group, sizeof known_group, BB_ERR_MALFORMED, "arrived as start-group, the schema says varint");
  uint8_t field_zero[] = {0x00, 0x01};
  expect_error(field_zero, sizeof field_zero, BB_ERR_MALFORMED, "invalid field number");
  uint8_t packed_floats[] = {0x3a, 0x07, 0x2a, 0x05, 0x22, 0x03, 0x00, 0x00, 0x00};
  /* graph.initializer[0].float_data: 3 bytes is not a whole number of floats */
  expect_error(packed_floats, sizeof packed_floats, BB_ERR_MALFORMED, "packed float_data is not a multiple of 4 bytes");
  bb_error err;

  /* nesting: model.graph{node{attribute{g: graph{node{...}}}}}, deeper than the limit */
  enum { LEVELS = 40 };
  size_t n = 0;
  uint8_t *deep = NULL;
  for (int i = 0; i < LEVELS; i++) {
    deep = wrap(deep, &n, 6); /* attribute.g */
    deep = wrap(deep, &n, 5); /* node.attribute */
    deep = wrap(deep, &n, 1); /* graph.node */
  }
  deep = wrap(deep, &n, 7); /* model.graph */
  expect_error(deep, n, BB_ERR_LIMIT, "nest deeper than 64 levels");
  bb_decode_limits generous = {.struct_size = sizeof generous, .max_depth = 200};
  bb_model *m = NULL;
  CHECK_EQ_INT(bb_model_decode(deep, n, NULL, &generous, &m, &err), 0);
  bb_model_free(m);
  bb_decode_limits small = {.struct_size = sizeof small, .max_bytes = 8};
  CHECK_EQ_INT(bb_model_decode(deep, n, NULL, &small, &m, &err), BB_ERR_LIMIT);
  CHECK(strstr(err.message, "limit") != NULL);
  /* versioned by struct_size: unset is refused (not read as limits), an older caller's
   * struct that ends before max_depth gets the default depth, a newer caller's is refused */
  bb_decode_limits unset = {.max_bytes = 8};
  CHECK_EQ_INT(bb_model_decode(deep, n, NULL, &unset, &m, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_MSG(strstr(err.message, "limits have struct_size 0; set it to sizeof(bb_decode_limits)") != NULL, "%s",
            err.message);
  CHECK(m == NULL);
  bb_decode_limits older = {.struct_size = offsetof(bb_decode_limits, max_depth), .max_depth = 200};
  CHECK_EQ_INT(bb_model_decode(deep, n, NULL, &older, &m, &err), BB_ERR_LIMIT);
  CHECK(strstr(err.message, "nest deeper than 64 levels") != NULL);
  bb_decode_limits newer = {.struct_size = sizeof newer + 8};
  CHECK_EQ_INT(bb_model_decode(deep, n, NULL, &newer, &m, &err), BB_ERR_INVALID_ARGUMENT);
  free(deep);

  /* the empty string is the empty (valid) model */
  CHECK_EQ_INT(bb_model_decode((const uint8_t *)"", 0, NULL, NULL, &m, &err), 0);
  CHECK(m && !m->graph && m->functions.len == 0);
  bb_model_free(m);
  CHECK_EQ_INT(bb_model_decode(NULL, 5, NULL, NULL, &m, &err), BB_ERR_INVALID_ARGUMENT);
}

/* ---- allocation failure injection ---------------------------------------------------- */

static void test_allocation_failures(void) {
  size_t len;
  uint8_t *d = load("node/test_loop11/model.onnx", &len);
  if (!d) return;
  failing state;
  bb_allocator alloc = failing_allocator(&state);
  long budget = 0;
  for (;; budget++) {
    state.budget = budget;
    state.live = 0;
    bb_model *m = NULL;
    bb_error err;
    int rc = bb_model_decode(d, len, &alloc, NULL, &m, &err);
    if (rc == 0) {
      uint8_t *out;
      size_t out_len;
      state.budget = -1;
      CHECK_EQ_INT(bb_model_encode(m, &out, &out_len, &err), 0);
      alloc.free(out, alloc.user_data);
      bb_model_free(m);
      CHECK_EQ_INT(state.live, 0);
      break;
    }
    CHECK_MSG(rc == BB_ERR_NOMEM, "budget %ld: %d %s", budget, rc, err.message);
    CHECK_MSG(state.live == 0, "budget %ld: %ld allocations leaked", budget, state.live);
    if (budget > 100000) break;
  }
  printf("    decode survived allocation failure at each of its %ld allocations\n", budget);
  /* and encode, with a decoded model */
  state.budget = -1;
  bb_model *m = NULL;
  bb_error err;
  CHECK_EQ_INT(bb_model_decode(d, len, &alloc, NULL, &m, &err), 0);
  long live_model = state.live;
  for (budget = 0;; budget++) {
    state.budget = budget;
    uint8_t *out = NULL;
    size_t out_len;
    int rc = bb_model_encode(m, &out, &out_len, &err);
    state.budget = -1;
    if (rc == 0) {
      alloc.free(out, alloc.user_data);
      break;
    }
    CHECK_EQ_INT(rc, BB_ERR_NOMEM);
    CHECK_EQ_INT(state.live, live_model);
  }
  bb_model_free(m);
  CHECK_EQ_INT(state.live, 0);
  free(d);
}

int main(void) {
  RUN(test_truncations);
  RUN(test_bit_flips_and_random_bytes);
  RUN(test_crafted_inputs);
  RUN(test_allocation_failures);
  return bb_test_finish();
}
