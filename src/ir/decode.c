/* ONNX ModelProto bytes → IR. Untrusted bytes are scanned first (bbi_pb_scan names the
 * first problem and where it is), then unpacked by protobuf-c and copied into the model's
 * arena; every field the IR does not model is kept in `extra`. */
#include <string.h>

#include "onnx.pb-c.h"
#include "ir/pb.h"
#include "bb/common.h"
#include "util/options.h"

typedef struct dec {
  bb_model *m;
  bb_arena *a;
  int rc; /* first failure (out of memory) */
} dec;

/* Known fields the IR does not model, per message; they stay in `extra`. */
static const uint32_t KEEP_MODEL[] = {20};       /* training_info */
static const uint32_t KEEP_GRAPH[] = {14, 15};   /* quantization_annotation, sparse_initializer */
static const uint32_t KEEP_ATTR[] = {22, 23};    /* sparse_tensor, sparse_tensors */
static const uint32_t KEEP_TENSOR[] = {3};       /* segment */
#define KEEP(arr) arr, sizeof(arr) / sizeof(arr[0])

static void *oom(dec *d) {
  d->rc = BB_ERR_NOMEM;
  return NULL;
}

static char *str(dec *d, const char *s) {
  if (!s) return NULL;
  char *p = bbi_arena_strdup(d->a, s);
  if (!p) oom(d);
  return p;
}

static void *dup(dec *d, const void *src, size_t n, size_t elem) {
  if (!n) return NULL;
  void *p = bbi_arena_memdup(d->a, src, n * elem);
  if (!p) oom(d);
  return p;
}

static bb_bytes bytes(dec *d, ProtobufCBinaryData b) {
  bb_bytes out = {NULL, b.len};
  if (b.len) {
    out.data = bbi_arena_bytesdup(d->a, b.data, b.len);
    if (!out.data) oom(d);
  }
  return out;
}

static void extra(dec *d, const ProtobufCMessage *msg, const uint32_t *keep, size_t n_keep,
                  bb_bytes *out) {
  int rc = bbi_pb_capture_extra(msg, keep, n_keep, d->a, out);
  if (rc) d->rc = rc;
}

/* Allocates an array of n pointers / structs for a list {items, len, cap}. */
static void *list_alloc(dec *d, size_t n, size_t elem) {
  if (!n) return NULL;
  void *p = bbi_arena_alloc(d->a, n * elem);
  if (!p) oom(d);
  return p;
}

#define LIST_INIT(d, list, n)                                                      \
  do {                                                                             \
    (list)->items = list_alloc((d), (n), sizeof(*(list)->items));                  \
    (list)->len = (list)->items ? (n) : 0;                                         \
    (list)->cap = (list)->len;                                                     \
  } while (0)

static void kvlist(dec *d, bb_kvlist *out, Onnx__StringStringEntryProto **in, size_t n) {
  LIST_INIT(d, out, n);
  for (size_t i = 0; i < out->len; i++) {
    out->items[i].key = str(d, in[i]->key);
    out->items[i].value = str(d, in[i]->value);
    extra(d, &in[i]->base, NULL, 0, &out->items[i].extra);
  }
}

static void strlist(dec *d, bb_strlist *out, char **in, size_t n) {
  LIST_INIT(d, out, n);
  for (size_t i = 0; i < out->len; i++) out->items[i] = str(d, in[i]);
}

static void opsets(dec *d, bb_opsetlist *out, Onnx__OperatorSetIdProto **in, size_t n) {
  LIST_INIT(d, out, n);
  for (size_t i = 0; i < out->len; i++) {
    out->items[i].domain = str(d, in[i]->domain);
    out->items[i].has_version = in[i]->has_version;
    out->items[i].version = in[i]->version;
    extra(d, &in[i]->base, NULL, 0, &out->items[i].extra);
  }
}

static bb_shape *shape(dec *d, const Onnx__TensorShapeProto *in) {
  if (!in) return NULL;
  bb_shape *s = bbi_arena_alloc(d->a, sizeof *s);
  if (!s) return oom(d);
  s->dims = list_alloc(d, in->n_dim, sizeof *s->dims);
  s->rank = s->cap = s->dims ? in->n_dim : 0;
  for (size_t i = 0; i < s->rank; i++) {
    const Onnx__TensorShapeProto__Dimension *dim = in->dim[i];
    bb_dim *o = &s->dims[i];
    if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
      o->kind = BB_DIM_VALUE;
      o->value = dim->dim_value;
    } else if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM) {
      o->kind = BB_DIM_PARAM;
      o->param = str(d, dim->dim_param);
    }
    o->denotation = str(d, dim->denotation);
    extra(d, &dim->base, NULL, 0, &o->extra);
  }
  extra(d, &in->base, NULL, 0, &s->extra);
  return s;
}

static bb_type *type(dec *d, const Onnx__TypeProto *in) {
  if (!in) return NULL;
  bb_type *t = bbi_arena_alloc(d->a, sizeof *t);
  if (!t) return oom(d);
  t->denotation = str(d, in->denotation);
  const ProtobufCMessage *inner = NULL;
  switch (in->value_case) {
  case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
    t->kind = BB_TYPE_TENSOR;
    t->has_elem_type = in->tensor_type->has_elem_type;
    t->elem_type = in->tensor_type->elem_type;
    t->shape = shape(d, in->tensor_type->shape);
    inner = &in->tensor_type->base;
    break;
  case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE:
    t->kind = BB_TYPE_SPARSE_TENSOR;
    t->has_elem_type = in->sparse_tensor_type->has_elem_type;
    t->elem_type = in->sparse_tensor_type->elem_type;
    t->shape = shape(d, in->sparse_tensor_type->shape);
    inner = &in->sparse_tensor_type->base;
    break;
  case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
    t->kind = BB_TYPE_SEQUENCE;
    t->inner = type(d, in->sequence_type->elem_type);
    inner = &in->sequence_type->base;
    break;
  case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
    t->kind = BB_TYPE_OPTIONAL;
    t->inner = type(d, in->optional_type->elem_type);
    inner = &in->optional_type->base;
    break;
  case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
    t->kind = BB_TYPE_MAP;
    t->has_elem_type = in->map_type->has_key_type;
    t->elem_type = in->map_type->key_type;
    t->inner = type(d, in->map_type->value_type);
    inner = &in->map_type->base;
    break;
  case ONNX__TYPE_PROTO__VALUE_OPAQUE_TYPE:
    t->kind = BB_TYPE_OPAQUE;
    t->opaque_domain = str(d, in->opaque_type->domain);
    t->opaque_name = str(d, in->opaque_type->name);
    inner = &in->opaque_type->base;
    break;
  default:
    t->kind = BB_TYPE_NONE;
    break;
  }
  if (inner) extra(d, inner, NULL, 0, &t->inner_extra);
  extra(d, &in->base, NULL, 0, &t->extra);
  return t;
}

static bb_tensor_proto *tensor(dec *d, const Onnx__TensorProto *in) {
  if (!in) return NULL;
  bb_tensor_proto *t = bbi_arena_alloc(d->a, sizeof *t);
  if (!t) return oom(d);
  t->name = str(d, in->name);
  t->doc_string = str(d, in->doc_string);
  t->has_data_type = in->has_data_type;
  t->data_type = in->data_type;
  t->dims = dup(d, in->dims, t->n_dims = in->n_dims, sizeof *in->dims);
  t->has_raw_data = in->has_raw_data;
  t->raw_data = bytes(d, in->raw_data);
  t->float_data = dup(d, in->float_data, t->n_float_data = in->n_float_data, sizeof(float));
  t->int32_data = dup(d, in->int32_data, t->n_int32_data = in->n_int32_data, sizeof(int32_t));
  t->int64_data = dup(d, in->int64_data, t->n_int64_data = in->n_int64_data, sizeof(int64_t));
  t->double_data = dup(d, in->double_data, t->n_double_data = in->n_double_data, sizeof(double));
  t->uint64_data = dup(d, in->uint64_data, t->n_uint64_data = in->n_uint64_data, sizeof(uint64_t));
  t->n_string_data = in->n_string_data;
  t->string_data = list_alloc(d, in->n_string_data, sizeof(bb_bytes));
  for (size_t i = 0; t->string_data && i < in->n_string_data; i++)
    t->string_data[i] = bytes(d, in->string_data[i]);
  t->has_data_location = in->has_data_location;
  t->data_location = (int32_t)in->data_location;
  kvlist(d, &t->external_data, in->external_data, in->n_external_data);
  kvlist(d, &t->metadata, in->metadata_props, in->n_metadata_props);
  extra(d, &in->base, KEEP(KEEP_TENSOR), &t->extra);
  return t;
}

static bb_graph *graph(dec *d, const Onnx__GraphProto *in);

static void vilist(dec *d, bb_vilist *out, Onnx__ValueInfoProto **in, size_t n) {
  LIST_INIT(d, out, n);
  for (size_t i = 0; i < out->len; i++) {
    bb_value_info *v = out->items[i] = bbi_arena_alloc(d->a, sizeof *v);
    if (!v) { oom(d); out->len = i; return; }
    v->name = str(d, in[i]->name);
    v->type = type(d, in[i]->type);
    v->doc_string = str(d, in[i]->doc_string);
    kvlist(d, &v->metadata, in[i]->metadata_props, in[i]->n_metadata_props);
    extra(d, &in[i]->base, NULL, 0, &v->extra);
  }
}

static bb_attr *attr(dec *d, const Onnx__AttributeProto *in) {
  bb_attr *a = bbi_arena_alloc(d->a, sizeof *a);
  if (!a) return oom(d);
  a->name = str(d, in->name);
  a->ref_attr_name = str(d, in->ref_attr_name);
  a->doc_string = str(d, in->doc_string);
  a->has_type = in->has_type;
  a->type = (int32_t)in->type;
  a->has_f = in->has_f;
  a->f = in->f;
  a->has_i = in->has_i;
  a->i = in->i;
  a->has_s = in->has_s;
  a->s = bytes(d, in->s);
  a->t = tensor(d, in->t);
  a->g = in->g ? graph(d, in->g) : NULL;
  a->tp = type(d, in->tp);
  a->floats = dup(d, in->floats, a->n_floats = in->n_floats, sizeof(float));
  a->ints = dup(d, in->ints, a->n_ints = in->n_ints, sizeof(int64_t));
  a->n_strings = in->n_strings;
  a->strings = list_alloc(d, in->n_strings, sizeof(bb_bytes));
  for (size_t i = 0; a->strings && i < in->n_strings; i++) a->strings[i] = bytes(d, in->strings[i]);
  a->n_tensors = in->n_tensors;
  a->tensors = list_alloc(d, in->n_tensors, sizeof(bb_tensor_proto *));
  for (size_t i = 0; a->tensors && i < in->n_tensors; i++) a->tensors[i] = tensor(d, in->tensors[i]);
  a->n_graphs = in->n_graphs;
  a->graphs = list_alloc(d, in->n_graphs, sizeof(bb_graph *));
  for (size_t i = 0; a->graphs && i < in->n_graphs; i++) a->graphs[i] = graph(d, in->graphs[i]);
  a->n_type_protos = in->n_type_protos;
  a->type_protos = list_alloc(d, in->n_type_protos, sizeof(bb_type *));
  for (size_t i = 0; a->type_protos && i < in->n_type_protos; i++)
    a->type_protos[i] = type(d, in->type_protos[i]);
  extra(d, &in->base, KEEP(KEEP_ATTR), &a->extra);
  return a;
}

static void attrlist(dec *d, bb_attrlist *out, Onnx__AttributeProto **in, size_t n) {
  LIST_INIT(d, out, n);
  for (size_t i = 0; i < out->len; i++) out->items[i] = attr(d, in[i]);
}

static bb_ir_node *node(dec *d, const Onnx__NodeProto *in) {
  bb_ir_node *n = bbi_arena_alloc(d->a, sizeof *n);
  if (!n) return oom(d);
  n->name = str(d, in->name);
  n->op_type = str(d, in->op_type);
  n->domain = str(d, in->domain);
  n->overload = str(d, in->overload);
  n->doc_string = str(d, in->doc_string);
  strlist(d, &n->inputs, in->input, in->n_input);
  strlist(d, &n->outputs, in->output, in->n_output);
  attrlist(d, &n->attrs, in->attribute, in->n_attribute);
  kvlist(d, &n->metadata, in->metadata_props, in->n_metadata_props);
  extra(d, &in->base, NULL, 0, &n->extra);
  return n;
}

static void nodelist(dec *d, bb_nodelist *out, Onnx__NodeProto **in, size_t n) {
  LIST_INIT(d, out, n);
  for (size_t i = 0; i < out->len; i++) out->items[i] = node(d, in[i]);
}

static bb_graph *graph(dec *d, const Onnx__GraphProto *in) {
  bb_graph *g = bbi_arena_alloc(d->a, sizeof *g);
  if (!g) return oom(d);
  g->name = str(d, in->name);
  g->doc_string = str(d, in->doc_string);
  nodelist(d, &g->nodes, in->node, in->n_node);
  LIST_INIT(d, &g->initializers, in->n_initializer);
  for (size_t i = 0; i < g->initializers.len; i++) g->initializers.items[i] = tensor(d, in->initializer[i]);
  vilist(d, &g->inputs, in->input, in->n_input);
  vilist(d, &g->outputs, in->output, in->n_output);
  vilist(d, &g->value_infos, in->value_info, in->n_value_info);
  kvlist(d, &g->metadata, in->metadata_props, in->n_metadata_props);
  extra(d, &in->base, KEEP(KEEP_GRAPH), &g->extra);
  return g;
}

static bb_function *function(dec *d, const Onnx__FunctionProto *in) {
  bb_function *f = bbi_arena_alloc(d->a, sizeof *f);
  if (!f) return oom(d);
  f->name = str(d, in->name);
  f->domain = str(d, in->domain);
  f->overload = str(d, in->overload);
  f->doc_string = str(d, in->doc_string);
  strlist(d, &f->inputs, in->input, in->n_input);
  strlist(d, &f->outputs, in->output, in->n_output);
  strlist(d, &f->attr_names, in->attribute, in->n_attribute);
  attrlist(d, &f->attr_protos, in->attribute_proto, in->n_attribute_proto);
  nodelist(d, &f->nodes, in->node, in->n_node);
  opsets(d, &f->opsets, in->opset_import, in->n_opset_import);
  vilist(d, &f->value_infos, in->value_info, in->n_value_info);
  kvlist(d, &f->metadata, in->metadata_props, in->n_metadata_props);
  extra(d, &in->base, NULL, 0, &f->extra);
  return f;
}

static void model(dec *d, const Onnx__ModelProto *in) {
  bb_model *m = d->m;
  m->has_ir_version = in->has_ir_version;
  m->ir_version = in->ir_version;
  m->producer_name = str(d, in->producer_name);
  m->producer_version = str(d, in->producer_version);
  m->domain = str(d, in->domain);
  m->has_model_version = in->has_model_version;
  m->model_version = in->model_version;
  m->doc_string = str(d, in->doc_string);
  m->graph = in->graph ? graph(d, in->graph) : NULL;
  opsets(d, &m->opsets, in->opset_import, in->n_opset_import);
  kvlist(d, &m->metadata, in->metadata_props, in->n_metadata_props);
  LIST_INIT(d, &m->functions, in->n_functions);
  for (size_t i = 0; i < m->functions.len; i++) m->functions.items[i] = function(d, in->functions[i]);
  extra(d, &in->base, KEEP(KEEP_MODEL), &m->extra);
}

int bb_model_decode(const uint8_t *data, size_t len, const bb_allocator *alloc,
                    const bb_decode_limits *limits, bb_model **out, bb_error *err) {
  if (!out) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "bb_model_decode: out is NULL");
  *out = NULL;
  if (!data && len) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "bb_model_decode: data is NULL");
  bb_decode_limits lim = {0};
  if (limits && !bbi_options_read(&lim, sizeof lim, limits))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "bb_model_decode: limits have struct_size %zu; set it to sizeof(bb_decode_limits), %zu",
                        limits->struct_size, sizeof lim);
  size_t max_bytes = lim.max_bytes ? lim.max_bytes : (size_t)0x7fffffff;
  uint32_t max_depth = lim.max_depth ? lim.max_depth : 64;
  if (len > max_bytes)
    return bb_error_set(err, BB_ERR_LIMIT, "model is %zu bytes, over the %zu-byte limit", len, max_bytes);
  int rc = bbi_pb_scan(&onnx__model_proto__descriptor, data, len, max_depth, err);
  if (rc) return rc;

  if (!alloc) alloc = bb_default_allocator();
  ProtobufCAllocator pa = bbi_pb_allocator(alloc);
  Onnx__ModelProto *pm = onnx__model_proto__unpack(&pa, len, data);
  if (!pm)
    return bb_error_set(err, BB_ERR_NOMEM, "ModelProto: protobuf-c could not unpack %zu well-formed bytes "
                                           "(out of memory)", len);
  bb_model *m = bb_model_new(alloc);
  if (!m) {
    onnx__model_proto__free_unpacked(pm, &pa);
    return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  }
  dec d = {m, m->arena, 0};
  model(&d, pm);
  onnx__model_proto__free_unpacked(pm, &pa);
  if (d.rc) {
    bb_model_free(m);
    return bb_error_set(err, d.rc, "out of memory while building the IR of a %zu-byte model", len);
  }
  *out = m;
  return 0;
}

int bb_tensor_proto_decode(bb_model *m, const uint8_t *data, size_t len, bb_tensor_proto **out, bb_error *err) {
  if (!m || !out || (!data && len))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "bb_tensor_proto_decode: NULL argument");
  *out = NULL;
  int rc = bbi_pb_scan(&onnx__tensor_proto__descriptor, data, len, 64, err);
  if (rc) return rc;
  ProtobufCAllocator pa = bbi_pb_allocator(bbi_arena_allocator(m->arena));
  Onnx__TensorProto *pt = onnx__tensor_proto__unpack(&pa, len, data);
  if (!pt) return bb_error_set(err, BB_ERR_NOMEM, "TensorProto: out of memory unpacking %zu bytes", len);
  dec d = {m, m->arena, 0};
  bb_tensor_proto *t = tensor(&d, pt);
  onnx__tensor_proto__free_unpacked(pt, &pa);
  if (d.rc || !t) return bb_error_set(err, BB_ERR_NOMEM, "out of memory building a TensorProto");
  *out = t;
  return 0;
}
