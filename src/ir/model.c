/* Building and changing the IR: constructors, list edits, metadata and attribute upserts. */
#include <string.h>

#include "bb/artifact.h"
#include "bb/ir.h"
#include "util/arena.h"

/* ---- data types ---------------------------------------------------------------- */

static const struct {
  const char *name;
  size_t size;
} DTYPES[] = {
    [BB_DTYPE_UNDEFINED] = {"undefined", 0}, [BB_DTYPE_FLOAT] = {"float", 4},
    [BB_DTYPE_UINT8] = {"uint8", 1},         [BB_DTYPE_INT8] = {"int8", 1},
    [BB_DTYPE_UINT16] = {"uint16", 2},       [BB_DTYPE_INT16] = {"int16", 2},
    [BB_DTYPE_INT32] = {"int32", 4},         [BB_DTYPE_INT64] = {"int64", 8},
    [BB_DTYPE_STRING] = {"string", 0},       [BB_DTYPE_BOOL] = {"bool", 1},
    [BB_DTYPE_FLOAT16] = {"float16", 2},     [BB_DTYPE_DOUBLE] = {"double", 8},
    [BB_DTYPE_UINT32] = {"uint32", 4},       [BB_DTYPE_UINT64] = {"uint64", 8},
    [BB_DTYPE_COMPLEX64] = {"complex64", 8}, [BB_DTYPE_COMPLEX128] = {"complex128", 16},
    [BB_DTYPE_BFLOAT16] = {"bfloat16", 2},
};

const char *bb_dtype_name(int dtype) {
  return dtype >= 0 && dtype < (int)(sizeof DTYPES / sizeof DTYPES[0]) ? DTYPES[dtype].name : NULL;
}

size_t bb_dtype_size(int dtype) {
  return dtype >= 0 && dtype < (int)(sizeof DTYPES / sizeof DTYPES[0]) ? DTYPES[dtype].size : 0;
}

const char *bb_attr_type_name(int type) {
  static const char *names[] = {"UNDEFINED", "FLOAT",  "INT",     "STRING",        "TENSOR",
                                "GRAPH",     "FLOATS", "INTS",    "STRINGS",       "TENSORS",
                                "GRAPHS",    "SPARSE_TENSOR",     "SPARSE_TENSORS", "TYPE_PROTO",
                                "TYPE_PROTOS"};
  return type >= 0 && type < (int)(sizeof names / sizeof names[0]) ? names[type] : NULL;
}

int64_t bb_tensor_proto_numel(const bb_tensor_proto *t) {
  int64_t n = 1;
  for (size_t i = 0; i < t->n_dims; i++) {
    if (t->dims[i] < 0) return -1;
    if (t->dims[i] && n > INT64_MAX / t->dims[i]) return -1;
    n *= t->dims[i];
  }
  return n;
}

/* ---- lifetime ------------------------------------------------------------------- */

bb_model *bb_model_new(const bb_allocator *alloc) {
  bb_arena *a = bbi_arena_new(alloc);
  if (!a) return NULL;
  bb_model *m = bbi_arena_alloc(a, sizeof *m);
  if (!m) {
    bbi_arena_free(a);
    return NULL;
  }
  m->arena = a;
  return m;
}

void bb_model_free(bb_model *model) {
  if (model) bbi_arena_free(model->arena);
}

char *bb_model_strdup(bb_model *m, const char *s) { return bbi_arena_strdup(m->arena, s); }

int bb_model_set_string(bb_model *m, char **field, const char *s) {
  char *copy = bbi_arena_strdup(m->arena, s);
  if (s && !copy) return BB_ERR_NOMEM;
  *field = copy;
  return 0;
}

/* ---- metadata --------------------------------------------------------------------- */

static bool str_eq(const char *a, const char *b) { return strcmp(a ? a : "", b ? b : "") == 0; }

const char *bb_kv_get(const bb_kvlist *list, const char *key) {
  for (size_t i = 0; i < list->len; i++)
    if (str_eq(list->items[i].key, key)) return list->items[i].value ? list->items[i].value : "";
  return NULL;
}

int bb_kv_append(bb_model *m, bb_kvlist *list, const char *key, const char *value) {
  bb_kv kv = {bbi_arena_strdup(m->arena, key ? key : ""), bbi_arena_strdup(m->arena, value ? value : ""),
              {NULL, 0}};
  if (!kv.key || !kv.value) return BB_ERR_NOMEM;
  return BBI_ARENA_PUSH(m->arena, list, kv);
}

int bb_kv_upsert(bb_model *m, bb_kvlist *list, const char *key, const char *value) {
  for (size_t i = 0; i < list->len; i++) {
    if (!str_eq(list->items[i].key, key)) continue;
    char *v = bbi_arena_strdup(m->arena, value ? value : "");
    if (!v) return BB_ERR_NOMEM;
    list->items[i].value = v;
    /* later duplicates would contradict the value just set */
    size_t w = i + 1;
    for (size_t r = i + 1; r < list->len; r++)
      if (!str_eq(list->items[r].key, key)) list->items[w++] = list->items[r];
    list->len = w;
    return 0;
  }
  return bb_kv_append(m, list, key, value);
}

size_t bb_kv_remove(bb_kvlist *list, const char *key) {
  size_t w = 0;
  for (size_t r = 0; r < list->len; r++)
    if (!str_eq(list->items[r].key, key)) list->items[w++] = list->items[r];
  size_t removed = list->len - w;
  list->len = w;
  return removed;
}

/* ---- string lists ------------------------------------------------------------------ */

int bb_strlist_insert(bb_model *m, bb_strlist *list, size_t index, const char *s) {
  if (index > list->len) return BB_ERR_INVALID_ARGUMENT;
  char *copy = bbi_arena_strdup(m->arena, s ? s : "");
  if (!copy) return BB_ERR_NOMEM;
  if (bbi_arena_reserve(m->arena, (void **)&list->items, &list->cap, list->len, sizeof *list->items))
    return BB_ERR_NOMEM;
  memmove(list->items + index + 1, list->items + index, (list->len - index) * sizeof *list->items);
  list->items[index] = copy;
  list->len++;
  return 0;
}

int bb_strlist_append(bb_model *m, bb_strlist *list, const char *s) {
  return bb_strlist_insert(m, list, list->len, s);
}

int bb_strlist_remove(bb_strlist *list, size_t index) {
  if (index >= list->len) return BB_ERR_INVALID_ARGUMENT;
  memmove(list->items + index, list->items + index + 1, (list->len - index - 1) * sizeof *list->items);
  list->len--;
  return 0;
}

long bb_strlist_find(const bb_strlist *list, const char *s) {
  for (size_t i = 0; i < list->len; i++)
    if (str_eq(list->items[i], s)) return (long)i;
  return -1;
}

/* ---- opsets ------------------------------------------------------------------------- */

static bool same_domain(const char *a, const char *b) {
  return bb_domain_is_onnx(a) ? bb_domain_is_onnx(b) : !bb_domain_is_onnx(b) && strcmp(a, b) == 0;
}

int64_t bb_opset_get(const bb_opsetlist *list, const char *domain) {
  for (size_t i = 0; i < list->len; i++)
    if (same_domain(list->items[i].domain, domain)) return list->items[i].has_version ? list->items[i].version : 0;
  return -1;
}

int bb_opset_set(bb_model *m, bb_opsetlist *list, const char *domain, int64_t version) {
  for (size_t i = 0; i < list->len; i++) {
    if (same_domain(list->items[i].domain, domain)) {
      list->items[i].has_version = true;
      list->items[i].version = version;
      return 0;
    }
  }
  bb_opset o = {bbi_arena_strdup(m->arena, domain ? domain : ""), true, version, {NULL, 0}};
  if (!o.domain) return BB_ERR_NOMEM;
  return BBI_ARENA_PUSH(m->arena, list, o);
}

/* ---- types ------------------------------------------------------------------------- */

bb_type *bb_type_new(bb_model *m, bb_type_kind kind) {
  bb_type *t = bbi_arena_alloc(m->arena, sizeof *t);
  if (t) t->kind = kind;
  return t;
}

int bb_type_add_dim(bb_model *m, bb_type *type, int64_t value, const char *param) {
  if (!type->shape && !(type->shape = bbi_arena_alloc(m->arena, sizeof *type->shape))) return BB_ERR_NOMEM;
  bb_dim d;
  memset(&d, 0, sizeof d);
  if (param) {
    d.kind = BB_DIM_PARAM;
    if (!(d.param = bbi_arena_strdup(m->arena, param))) return BB_ERR_NOMEM;
  } else if (value >= 0) {
    d.kind = BB_DIM_VALUE;
    d.value = value;
  }
  bb_shape *s = type->shape;
  if (bbi_arena_reserve(m->arena, (void **)&s->dims, &s->cap, s->rank, sizeof *s->dims)) return BB_ERR_NOMEM;
  s->dims[s->rank++] = d;
  return 0;
}

bb_type *bb_type_new_tensor(bb_model *m, int32_t elem_type, int rank, const int64_t *dims) {
  bb_type *t = bb_type_new(m, BB_TYPE_TENSOR);
  if (!t) return NULL;
  t->has_elem_type = true;
  t->elem_type = elem_type;
  if (rank < 0) return t;
  if (!(t->shape = bbi_arena_alloc(m->arena, sizeof *t->shape))) return NULL;
  for (int i = 0; i < rank; i++)
    if (bb_type_add_dim(m, t, dims ? dims[i] : -1, NULL)) return NULL;
  return t;
}

/* ---- value infos ---------------------------------------------------------------------- */

bb_value_info *bb_vilist_add(bb_model *m, bb_vilist *list, const char *name, bb_type *type) {
  bb_value_info *v = bbi_arena_alloc(m->arena, sizeof *v);
  if (!v || !(v->name = bbi_arena_strdup(m->arena, name ? name : ""))) return NULL;
  v->type = type;
  return BBI_ARENA_PUSH(m->arena, list, v) ? NULL : v;
}

bb_value_info *bb_vilist_find(const bb_vilist *list, const char *name) {
  for (size_t i = 0; i < list->len; i++)
    if (str_eq(list->items[i]->name, name)) return list->items[i];
  return NULL;
}

int bb_vilist_remove(bb_vilist *list, size_t index) {
  if (index >= list->len) return BB_ERR_INVALID_ARGUMENT;
  memmove(list->items + index, list->items + index + 1, (list->len - index - 1) * sizeof *list->items);
  list->len--;
  return 0;
}

/* ---- tensors ------------------------------------------------------------------------- */

bb_tensor_proto *bb_tensor_proto_new(bb_model *m, const char *name, int32_t data_type, size_t n_dims,
                                     const int64_t *dims) {
  bb_tensor_proto *t = bbi_arena_alloc(m->arena, sizeof *t);
  if (!t) return NULL;
  if (name && !(t->name = bbi_arena_strdup(m->arena, name))) return NULL;
  t->has_data_type = true;
  t->data_type = data_type;
  if (n_dims && !(t->dims = bbi_arena_memdup(m->arena, dims, n_dims * sizeof *dims))) return NULL;
  t->n_dims = n_dims;
  return t;
}

int bb_tensor_proto_set_raw(bb_model *m, bb_tensor_proto *t, const void *data, size_t len) {
  uint8_t *copy = len ? bbi_arena_bytesdup(m->arena, data, len) : NULL;
  if (len && !copy) return BB_ERR_NOMEM;
  t->has_raw_data = true;
  t->raw_data.data = copy;
  t->raw_data.len = len;
  return 0;
}

int bb_tensorlist_append(bb_model *m, bb_tensorlist *list, bb_tensor_proto *t) {
  return BBI_ARENA_PUSH(m->arena, list, t);
}

/* ---- attributes ------------------------------------------------------------------------ */

bb_attr *bb_attr_find(const bb_attrlist *list, const char *name) {
  for (size_t i = 0; i < list->len; i++)
    if (str_eq(list->items[i]->name, name)) return list->items[i];
  return NULL;
}

/* A fresh attribute of that name and type, replacing an existing one in place. */
static bb_attr *attr_slot(bb_model *m, bb_attrlist *list, const char *name, bb_attr_type type) {
  bb_attr *a = bbi_arena_alloc(m->arena, sizeof *a);
  if (!a || !(a->name = bbi_arena_strdup(m->arena, name ? name : ""))) return NULL;
  a->has_type = true;
  a->type = type;
  for (size_t i = 0; i < list->len; i++) {
    if (str_eq(list->items[i]->name, name)) {
      list->items[i] = a;
      return a;
    }
  }
  return BBI_ARENA_PUSH(m->arena, list, a) ? NULL : a;
}

bb_attr *bb_attr_set_float(bb_model *m, bb_attrlist *list, const char *name, float v) {
  bb_attr *a = attr_slot(m, list, name, BB_ATTR_FLOAT);
  if (a) a->has_f = true, a->f = v;
  return a;
}

bb_attr *bb_attr_set_int(bb_model *m, bb_attrlist *list, const char *name, int64_t v) {
  bb_attr *a = attr_slot(m, list, name, BB_ATTR_INT);
  if (a) a->has_i = true, a->i = v;
  return a;
}

bb_attr *bb_attr_set_bytes(bb_model *m, bb_attrlist *list, const char *name, const void *v, size_t len) {
  uint8_t *copy = len ? bbi_arena_bytesdup(m->arena, v, len) : NULL;
  if (len && !copy) return NULL;
  bb_attr *a = attr_slot(m, list, name, BB_ATTR_STRING);
  if (a) a->has_s = true, a->s.data = copy, a->s.len = len;
  return a;
}

bb_attr *bb_attr_set_string(bb_model *m, bb_attrlist *list, const char *name, const char *v) {
  return bb_attr_set_bytes(m, list, name, v, v ? strlen(v) : 0);
}

bb_attr *bb_attr_set_floats(bb_model *m, bb_attrlist *list, const char *name, const float *v, size_t n) {
  float *copy = n ? bbi_arena_memdup(m->arena, v, n * sizeof *v) : NULL;
  if (n && !copy) return NULL;
  bb_attr *a = attr_slot(m, list, name, BB_ATTR_FLOATS);
  if (a) a->floats = copy, a->n_floats = n;
  return a;
}

bb_attr *bb_attr_set_ints(bb_model *m, bb_attrlist *list, const char *name, const int64_t *v, size_t n) {
  int64_t *copy = n ? bbi_arena_memdup(m->arena, v, n * sizeof *v) : NULL;
  if (n && !copy) return NULL;
  bb_attr *a = attr_slot(m, list, name, BB_ATTR_INTS);
  if (a) a->ints = copy, a->n_ints = n;
  return a;
}

bb_attr *bb_attr_set_strings(bb_model *m, bb_attrlist *list, const char *name, const char *const *v,
                             size_t n) {
  bb_bytes *copy = n ? bbi_arena_alloc(m->arena, n * sizeof *copy) : NULL;
  if (n && !copy) return NULL;
  for (size_t i = 0; i < n; i++) {
    copy[i].len = strlen(v[i]);
    if (copy[i].len && !(copy[i].data = bbi_arena_bytesdup(m->arena, v[i], copy[i].len))) return NULL;
  }
  bb_attr *a = attr_slot(m, list, name, BB_ATTR_STRINGS);
  if (a) a->strings = copy, a->n_strings = n;
  return a;
}

bb_attr *bb_attr_set_tensor(bb_model *m, bb_attrlist *list, const char *name, bb_tensor_proto *t) {
  bb_attr *a = attr_slot(m, list, name, BB_ATTR_TENSOR);
  if (a) a->t = t;
  return a;
}

bb_attr *bb_attr_set_graph(bb_model *m, bb_attrlist *list, const char *name, bb_graph *g) {
  bb_attr *a = attr_slot(m, list, name, BB_ATTR_GRAPH);
  if (a) a->g = g;
  return a;
}

bb_attr *bb_attr_set_type(bb_model *m, bb_attrlist *list, const char *name, bb_type *tp) {
  bb_attr *a = attr_slot(m, list, name, BB_ATTR_TYPE_PROTO);
  if (a) a->tp = tp;
  return a;
}

size_t bb_attr_remove(bb_attrlist *list, const char *name) {
  size_t w = 0;
  for (size_t r = 0; r < list->len; r++)
    if (!str_eq(list->items[r]->name, name)) list->items[w++] = list->items[r];
  size_t removed = list->len - w;
  list->len = w;
  return removed;
}

int64_t bb_attr_get_int(const bb_attrlist *list, const char *name, int64_t dflt) {
  const bb_attr *a = bb_attr_find(list, name);
  return a && a->type == BB_ATTR_INT ? a->i : dflt;
}

float bb_attr_get_float(const bb_attrlist *list, const char *name, float dflt) {
  const bb_attr *a = bb_attr_find(list, name);
  return a && a->type == BB_ATTR_FLOAT ? a->f : dflt;
}

const char *bb_attr_get_string(const bb_attrlist *list, const char *name, const char *dflt) {
  const bb_attr *a = bb_attr_find(list, name);
  if (!a || a->type != BB_ATTR_STRING) return dflt;
  if (!a->s.len) return "";
  /* bytes the IR stores carry a terminating NUL (bbi_arena_bytesdup) */
  if (memchr(a->s.data, 0, a->s.len)) return dflt;
  return (const char *)a->s.data;
}

/* ---- nodes ------------------------------------------------------------------------------ */

bb_ir_node *bb_ir_node_new(bb_model *m, const char *op_type, const char *domain, const char *name) {
  bb_ir_node *n = bbi_arena_alloc(m->arena, sizeof *n);
  if (!n) return NULL;
  if (!(n->op_type = bbi_arena_strdup(m->arena, op_type ? op_type : ""))) return NULL;
  if (domain && !(n->domain = bbi_arena_strdup(m->arena, domain))) return NULL;
  if (name && !(n->name = bbi_arena_strdup(m->arena, name))) return NULL;
  return n;
}

int bb_nodelist_insert(bb_model *m, bb_nodelist *list, size_t index, bb_ir_node *node) {
  if (index > list->len || !node) return BB_ERR_INVALID_ARGUMENT;
  if (bbi_arena_reserve(m->arena, (void **)&list->items, &list->cap, list->len, sizeof *list->items))
    return BB_ERR_NOMEM;
  memmove(list->items + index + 1, list->items + index, (list->len - index) * sizeof *list->items);
  list->items[index] = node;
  list->len++;
  return 0;
}

int bb_nodelist_append(bb_model *m, bb_nodelist *list, bb_ir_node *node) {
  return bb_nodelist_insert(m, list, list->len, node);
}

int bb_nodelist_remove(bb_nodelist *list, size_t index) {
  if (index >= list->len) return BB_ERR_INVALID_ARGUMENT;
  memmove(list->items + index, list->items + index + 1, (list->len - index - 1) * sizeof *list->items);
  list->len--;
  return 0;
}

long bb_nodelist_index(const bb_nodelist *list, const bb_ir_node *node) {
  for (size_t i = 0; i < list->len; i++)
    if (list->items[i] == node) return (long)i;
  return -1;
}

bb_ir_node *bb_nodelist_producer(const bb_nodelist *list, const char *value) {
  if (!value || !*value) return NULL;
  for (size_t i = 0; i < list->len; i++)
    if (bb_strlist_find(&list->items[i]->outputs, value) >= 0) return list->items[i];
  return NULL;
}

/* ---- graphs and functions ------------------------------------------------------------------ */

bb_graph *bb_graph_new(bb_model *m, const char *name) {
  bb_graph *g = bbi_arena_alloc(m->arena, sizeof *g);
  if (g && name && !(g->name = bbi_arena_strdup(m->arena, name))) return NULL;
  return g;
}

bb_function *bb_function_new(bb_model *m, const char *name, const char *domain) {
  bb_function *f = bbi_arena_alloc(m->arena, sizeof *f);
  if (!f) return NULL;
  if (!(f->name = bbi_arena_strdup(m->arena, name ? name : ""))) return NULL;
  if (domain && !(f->domain = bbi_arena_strdup(m->arena, domain))) return NULL;
  return f;
}

int bb_model_add_function(bb_model *m, bb_function *f) {
  if (!f) return BB_ERR_INVALID_ARGUMENT;
  return BBI_ARENA_PUSH(m->arena, &m->functions, f);
}

bb_function *bb_model_find_function(const bb_model *m, const char *domain, const char *name) {
  for (size_t i = 0; i < m->functions.len; i++) {
    bb_function *f = m->functions.items[i];
    if (str_eq(f->domain, domain) && str_eq(f->name, name)) return f;
  }
  return NULL;
}
