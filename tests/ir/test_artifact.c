/* The vocabulary of bb/artifact.h: the role table and its lookups, the tensor
 * denotations, the table of names (well formed, one entry per name, each one documented
 * in docs/IR.md), and the copies the JavaScript package keeps (js/src/node/compiler.ts). */
#include <stdlib.h>

#include "bb/artifact.h"
#include "failalloc.h"
#include "harness.h"

static void test_roles(void) {
  static const struct {
    bb_role role;
    const char *name, *trait, *domain, *port;
  } WANT[] = {
      {BB_ROLE_BACKEND, "Backend", "BackendRuntime", "", "tensor"},
      {BB_ROLE_MODEL, "Model", "ModelRuntime", "ai.bytesandbrains.role.model", "tensor"},
      {BB_ROLE_INDEX, "Index", "IndexRuntime", "ai.bytesandbrains.role.index", "vector"},
      {BB_ROLE_AGGREGATOR, "Aggregator", "AggregatorRuntime", "ai.bytesandbrains.role.aggregator", "element"},
      {BB_ROLE_CODEC, "Codec", "CodecRuntime", "ai.bytesandbrains.role.codec", NULL},
      {BB_ROLE_DATA_SOURCE, "DataSource", "DataSourceRuntime", "ai.bytesandbrains.role.data_source", "sample"},
      {BB_ROLE_PEER_SELECTOR, "PeerSelector", "PeerSelectorRuntime", "ai.bytesandbrains.role.peer_selector", NULL},
      {BB_ROLE_PROTOCOL, "Protocol", "ProtocolRuntime", NULL, NULL},
  };
  CHECK_EQ_INT(sizeof WANT / sizeof WANT[0], BB_ROLE_LAST - BB_ROLE_FIRST + 1);
  for (size_t i = 0; i < sizeof WANT / sizeof WANT[0]; i++) {
    bb_role r = WANT[i].role;
    CHECK_STR(bb_role_name(r), WANT[i].name);
    CHECK_STR(bb_role_trait(r), WANT[i].trait);
    if (WANT[i].domain) {
      CHECK_STR(bb_role_domain(r), WANT[i].domain);
      CHECK_EQ_INT(bb_role_from_domain(WANT[i].domain), r);
    } else {
      CHECK(bb_role_domain(r) == NULL);
    }
    if (WANT[i].port) CHECK_STR(bb_role_storage_port(r), WANT[i].port);
    else CHECK(bb_role_storage_port(r) == NULL);
    CHECK_EQ_INT(bb_role_from_name(WANT[i].name), r);
    CHECK_EQ_INT(bb_role_from_trait(WANT[i].trait), r);
  }
  /* the default ONNX domain has two spellings; NULL is the empty one */
  CHECK_EQ_INT(bb_role_from_domain(BB_DOMAIN_ONNX_ALIAS), BB_ROLE_BACKEND);
  CHECK_EQ_INT(bb_role_from_domain(NULL), BB_ROLE_BACKEND);
  CHECK(bb_domain_is_onnx(NULL) && bb_domain_is_onnx("") && bb_domain_is_onnx("ai.onnx"));
  CHECK(!bb_domain_is_onnx("ai.onnx.ml") && !bb_domain_is_onnx(BB_DOMAIN_SYSCALL));
  /* what names no role */
  CHECK(bb_role_name((bb_role)0) == NULL && bb_role_trait((bb_role)99) == NULL);
  CHECK(bb_role_domain((bb_role)-1) == NULL && bb_role_storage_port((bb_role)9) == NULL);
  CHECK_EQ_INT(bb_role_from_name("model"), 0);
  CHECK_EQ_INT(bb_role_from_name(NULL), 0);
  CHECK_EQ_INT(bb_role_from_trait("Model"), 0);
  CHECK_EQ_INT(bb_role_from_trait(NULL), 0);
  CHECK_EQ_INT(bb_role_from_domain(BB_DOMAIN_GLOBAL_REGISTRY), 0);
  CHECK_EQ_INT(bb_role_from_domain(BB_DOMAIN_ROLE_PREFIX), 0);
}

static void test_tensor_types(void) {
  static const bb_dtype ALL[] = {BB_DTYPE_FLOAT,  BB_DTYPE_UINT8,  BB_DTYPE_INT8,   BB_DTYPE_UINT16, BB_DTYPE_INT16,
                                 BB_DTYPE_INT32,  BB_DTYPE_INT64,  BB_DTYPE_BOOL,   BB_DTYPE_FLOAT16, BB_DTYPE_DOUBLE,
                                 BB_DTYPE_UINT32, BB_DTYPE_UINT64, BB_DTYPE_BFLOAT16};
  for (size_t i = 0; i < sizeof ALL / sizeof ALL[0]; i++) {
    const char *t = bb_tensor_type(ALL[i]);
    CHECK_MSG(t && strncmp(t, BB_TYPE_TENSOR_PREFIX, strlen(BB_TYPE_TENSOR_PREFIX)) == 0, "dtype %d: %s",
              (int)ALL[i], t ? t : "(null)");
    CHECK_EQ_INT(bb_tensor_type_dtype(t), ALL[i]);
    for (size_t k = 0; k < i; k++) CHECK(strcmp(t, bb_tensor_type(ALL[k])) != 0);
  }
  CHECK_STR(bb_tensor_type(BB_DTYPE_FLOAT), "ai.bytesandbrains.tensor.f32");
  CHECK_STR(bb_tensor_type(BB_DTYPE_DOUBLE), BB_TYPE_TENSOR_F64);
  CHECK_STR(bb_tensor_type(BB_DTYPE_BOOL), BB_TYPE_TENSOR_BOOL);
  CHECK(bb_tensor_type(BB_DTYPE_STRING) == NULL && bb_tensor_type(BB_DTYPE_COMPLEX64) == NULL);
  CHECK_EQ_INT(bb_tensor_type_dtype(BB_TYPE_TENSOR_PREFIX "f8"), BB_DTYPE_UNDEFINED);
  CHECK_EQ_INT(bb_tensor_type_dtype(BB_TYPE_BYTES), BB_DTYPE_UNDEFINED);
  CHECK_EQ_INT(bb_tensor_type_dtype(NULL), BB_DTYPE_UNDEFINED);
}

static void test_table(void) {
  size_t n = bb_vocab_count();
  CHECK(n > 60);
  CHECK(bb_vocab_at(n) == NULL);
  bb_vocab_kind last = BB_VOCAB_DOMAIN;
  for (size_t i = 0; i < n; i++) {
    const bb_vocab_entry *e = bb_vocab_at(i);
    CHECK_MSG(e && e->name && *e->name && e->meaning && *e->meaning, "entry %zu", i);
    if (!e || !e->name) continue;
    CHECK_MSG(strcmp(bb_vocab_kind_name(e->kind), "unknown") != 0, "%s has no kind", e->name);
    CHECK_MSG(e->kind >= last, "%s is out of kind order", e->name);
    last = e->kind;
    CHECK_MSG(bb_vocab_find(e->kind, e->name) == e, "%s is listed twice", e->name);
    /* keys: a family ends in '.', and only a family does */
    bool key = e->kind == BB_VOCAB_MODEL_KEY || e->kind == BB_VOCAB_NODE_KEY || e->kind == BB_VOCAB_FUNCTION_KEY;
    if (key) {
      CHECK_MSG(e->prefix == (e->name[strlen(e->name) - 1] == '.'), "%s: prefix flag", e->name);
      CHECK_MSG(strncmp(e->name, BB_DOMAIN_FRAMEWORK ".", strlen(BB_DOMAIN_FRAMEWORK) + 1) == 0,
                "key %s is outside the framework's namespace", e->name);
    }
  }
  CHECK(bb_vocab_find(BB_VOCAB_NODE_KEY, BB_KEY_COMPILED) == NULL);
  CHECK(bb_vocab_find(BB_VOCAB_MODEL_KEY, BB_KEY_COMPILED) != NULL);
  CHECK(bb_vocab_find(BB_VOCAB_DOMAIN, NULL) == NULL);
  CHECK(bb_vocab_find(BB_VOCAB_TYPE, "bb.nothing") == NULL);
  CHECK_STR(bb_vocab_kind_name((bb_vocab_kind)0), "unknown");
  /* spellings artifacts already carry: changing one breaks every installed artifact */
  CHECK_STR(BB_KEY_COMPILED "=" BB_COMPILED_VERSION, "ai.bytesandbrains.compiled=v2");
  CHECK_STR(BB_KEY_WIRE_ID, "ai.bytesandbrains.wire.wire_id");
  CHECK_STR(BB_KEY_WIRE_OUT_PREFIX, "ai.bytesandbrains.wire_out.");
  CHECK_STR(BB_KEY_WIRE_IN_PREFIX, "ai.bytesandbrains.wire_in.");
  CHECK_STR(BB_KEY_BINDING_PREFIX, "ai.bytesandbrains.binding.");
  CHECK_STR(BB_KEY_CONFIG_PREFIX, "ai.bytesandbrains.config.");
  CHECK_STR(BB_KEY_DEST_SITE_PREFIX, "ai.bytesandbrains.dest_site_name.");
  CHECK_STR(BB_BOOTSTRAP_SUFFIX, "__bootstrap");
  CHECK_STR(BB_DOMAIN_ROLE_DATA_SOURCE, "ai.bytesandbrains.role.data_source");
}

/* The whole of a file under the source tree, NUL-terminated; NULL when unreadable. */
static char *read_source(const char *rel) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", BB_TEST_SOURCE_DIR, rel);
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len + 4096 + 1 > cap) {
      cap = cap ? cap * 2 : 65536;
      char *grown = realloc(buf, cap);
      if (!grown) break;
      buf = grown;
    }
    size_t got = fread(buf + len, 1, cap - len - 1, f);
    len += got;
    if (got == 0) break;
  }
  fclose(f);
  if (buf) buf[len] = '\0';
  return buf;
}

static void test_documented(void) {
  char *doc = read_source("docs/IR.md");
  CHECK_MSG(doc != NULL, "cannot read docs/IR.md");
  if (!doc) return;
  for (size_t i = 0; i < bb_vocab_count(); i++) {
    char quoted[256];
    snprintf(quoted, sizeof quoted, "`%s`", bb_vocab_at(i)->name);
    CHECK_MSG(strstr(doc, quoted) != NULL, "docs/IR.md does not list %s", quoted);
  }
  for (bb_role r = BB_ROLE_FIRST; r <= BB_ROLE_LAST; r++) {
    char quoted[64];
    snprintf(quoted, sizeof quoted, "`%s`", bb_role_trait(r));
    CHECK_MSG(strstr(doc, quoted) != NULL, "docs/IR.md does not list %s", quoted);
  }
  free(doc);
}

static size_t occurrences(const char *text, const char *what) {
  size_t n = 0;
  for (const char *p = strstr(text, what); p; p = strstr(p + 1, what)) n++;
  return n;
}

/* bb_vocab_describe: every role and entry, as text and as JSON; out of memory is an error
 * that leaves nothing behind. */
static void test_describe(void) {
  char *text = NULL, *json = NULL;
  size_t text_len = 0, json_len = 0;
  bb_error err;
  CHECK_MSG(bb_vocab_describe(false, NULL, &text, &text_len, &err) == 0, "%s", err.message);
  CHECK_MSG(bb_vocab_describe(true, NULL, &json, &json_len, &err) == 0, "%s", err.message);
  if (!text || !json) return;
  CHECK(strlen(text) == text_len && strlen(json) == json_len);
  CHECK(strncmp(text, "roles (name", 11) == 0 && strstr(text, "  Backend       BackendRuntime") != NULL);
  CHECK(strncmp(json, "{\"roles\":[{\"role\":", 18) == 0 && strcmp(json + json_len - 3, "]}\n") == 0);
  CHECK_EQ_INT(occurrences(json, "{\"role\":"), BB_ROLE_LAST - BB_ROLE_FIRST + 1);
  CHECK_EQ_INT(occurrences(json, "{\"name\":"), bb_vocab_count());
  for (size_t i = 0; i < bb_vocab_count(); i++) {
    char line[256], field[256];
    snprintf(line, sizeof line, "\n  %s", bb_vocab_at(i)->name);
    snprintf(field, sizeof field, "{\"name\":\"%s\"", bb_vocab_at(i)->name);
    CHECK_MSG(strstr(text, line) != NULL, "the text lacks %s", bb_vocab_at(i)->name);
    CHECK_MSG(strstr(json, field) != NULL, "the JSON lacks %s", bb_vocab_at(i)->name);
  }
  bb_buffer_free(NULL, text);
  bb_buffer_free(NULL, json);

  failing f = {0, 0};
  bb_allocator none = failing_allocator(&f);
  char *out = NULL;
  CHECK(bb_vocab_describe(true, &none, &out, NULL, &err) == BB_ERR_NOMEM && out == NULL && f.live == 0);
  CHECK(bb_vocab_describe(true, NULL, NULL, NULL, &err) == BB_ERR_INVALID_ARGUMENT);
}

/* js/src/node/compiler.ts keeps ROLES (name: bb_role) and TENSOR_F32 as literals. */
static void test_javascript_copies(void) {
  char *ts = read_source("js/src/node/compiler.ts");
  CHECK_MSG(ts != NULL, "cannot read js/src/node/compiler.ts");
  if (!ts) return;
  const char *roles = strstr(ts, "export const ROLES = {");
  CHECK(roles != NULL);
  size_t seen = 0;
  for (const char *line = roles ? strchr(roles, '\n') : NULL; line && line[1] != '}'; line = strchr(line + 1, '\n')) {
    char name[64];
    int value;
    if (sscanf(line + 1, " %63[A-Za-z]: %d,", name, &value) != 2) continue;
    CHECK_MSG(bb_role_from_name(name) == (bb_role)value, "compiler.ts ROLES has %s: %d", name, value);
    seen++;
  }
  CHECK_EQ_INT(seen, BB_ROLE_LAST - BB_ROLE_FIRST + 1);
  const char *f32 = strstr(ts, "export const TENSOR_F32 = '");
  CHECK(f32 != NULL);
  if (f32) {
    f32 += strlen("export const TENSOR_F32 = '");
    const char *end = strchr(f32, '\'');
    CHECK_MSG(end && (size_t)(end - f32) == strlen(BB_TYPE_TENSOR_F32) &&
                  strncmp(f32, BB_TYPE_TENSOR_F32, strlen(BB_TYPE_TENSOR_F32)) == 0,
              "compiler.ts TENSOR_F32 is not %s", BB_TYPE_TENSOR_F32);
  }
  free(ts);
}

/* Wire types: the kind each type stands for, when two declarations agree, and the wire
 * table entry that carries a type with its kind and hash. */
static void test_wire_types(void) {
  CHECK_STR(bb_type_value_kind(BB_TYPE_TENSOR_F32), "Tensor");
  CHECK_STR(bb_type_value_kind(BB_TYPE_SCALAR_I32), "Tensor");
  CHECK_STR(bb_type_value_kind(BB_TYPE_COMPOSITE), "Composite");
  CHECK_STR(bb_type_value_kind(BB_TYPE_PEER_ID_VEC), "Peers");
  CHECK_STR(bb_type_value_kind(BB_TYPE_BYTES), "Any"); /* an untyped input takes any value */
  CHECK_STR(bb_type_value_kind(BB_TYPE_ABSTRACT), "Any");
  CHECK_STR(bb_type_value_kind("example.own_type"), "Any");
  CHECK_STR(bb_type_value_kind(NULL), "Any");
  CHECK_EQ_INT(bb_type_element(BB_TYPE_SCALAR_F16), BB_DTYPE_FLOAT16);
  CHECK_EQ_INT(bb_type_element(BB_TYPE_TENSOR_I64), BB_DTYPE_INT64);
  CHECK_EQ_INT(bb_type_element(BB_TYPE_COMPOSITE), BB_DTYPE_UNDEFINED);
  CHECK(bb_wire_types_agree(BB_TYPE_TENSOR_F32, BB_TYPE_TENSOR_F32));
  CHECK(bb_wire_types_agree(BB_TYPE_ABSTRACT, BB_TYPE_TENSOR_F16) && bb_wire_types_agree(BB_TYPE_COMPOSITE, ""));
  CHECK(!bb_wire_types_agree(BB_TYPE_TENSOR_F32, BB_TYPE_TENSOR_F16));
  CHECK(bb_wire_type_hash("") == 0 && bb_wire_type_hash(NULL) == 0);
  CHECK(bb_wire_type_hash(BB_TYPE_TENSOR_F32) == 0xd004f177a0b61c58ull);
  char entry[300];
  CHECK_EQ_INT(bb_wire_entry_format(BB_TYPE_TENSOR_F32, entry, sizeof entry), 54);
  CHECK_STR(entry, "Tensor|ai.bytesandbrains.tensor.f32|0xd004f177a0b61c58");
  const char *type;
  size_t len;
  CHECK(bb_wire_entry_parse(entry, &type, &len) && len == strlen(BB_TYPE_TENSOR_F32) &&
        strncmp(type, BB_TYPE_TENSOR_F32, len) == 0);
  CHECK(bb_wire_entry_format("", entry, sizeof entry) == 23 && strcmp(entry, "Any||0x0000000000000000") == 0);
  CHECK(bb_wire_entry_parse(entry, &type, &len) && len == 0);
  CHECK_EQ_INT(bb_wire_entry_format(BB_TYPE_TENSOR_F32, entry, 8), 54); /* what it needs */
  /* a kind, a hash or a shape that is not the type's */
  static const char *const bad[] = {"Composite|ai.bytesandbrains.tensor.f32|0xd004f177a0b61c58",
                                    "Tensor|ai.bytesandbrains.tensor.f32|0xd004f177a0b61c59",
                                    "Tensor|ai.bytesandbrains.tensor.f32|d004f177a0b61c58",
                                    "Tensor|ai.bytesandbrains.tensor.f32", "Any||0x0000000000000000|",
                                    "", NULL};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK_MSG(!bb_wire_entry_parse(bad[i], &type, &len), "%zu", i);
}

int main(void) {
  RUN(test_roles);
  RUN(test_tensor_types);
  RUN(test_wire_types);
  RUN(test_table);
  RUN(test_documented);
  RUN(test_describe);
  RUN(test_javascript_copies);
  return bb_test_finish();
}
