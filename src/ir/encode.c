/* IR → ONNX ModelProto bytes. The IR is mirrored into protobuf-c structs that point at
 * the IR's own strings and arrays (nothing is copied but pointer arrays, which live in a
 * scratch arena), preserved extra bytes are attached as unknown fields, and protobuf-c
 * packs the whole tree. */
#include <string.h>

#include "onnx.pb-c.h"
#include "ir/pb.h"
#include "bb/common.h"

typedef struct enc {
  bb_arena *a;
  bb_error *err;
  int rc;
} enc;

static void *fail(enc *e, int rc) {
  if (!e->rc) e->rc = rc;
  return NULL;
}

static void *alloc(enc *e, size_t size) {
  void *p = bbi_arena_alloc(e->a, size);
  return p ? p : fail(e, BB_ERR_NOMEM);
}

static void attach(enc *e, ProtobufCMessage *msg, bb_bytes extra) {
  int rc = bbi_pb_restore_extra(msg, extra, e->a, e->err);
  if (rc) fail(e, rc);
}

static ProtobufCBinaryData bin(bb_bytes b) {
  ProtobufCBinaryData out = {b.len, b.data};
  return out;
}

static ProtobufCBinaryData *bins(enc *e, const bb_bytes *in, size_t n) {
  if (!n) return NULL;
  ProtobufCBinaryData *out = alloc(e, n * sizeof *out);
  for (size_t i = 0; out && i < n; i++) out[i] = bin(in[i]);
  return out;
}

static Onnx__StringStringEntryProto **kvs(enc *e, const bb_kvlist *l, size_t *n) {
  *n = l->len;
  if (!l->len) return NULL;
  Onnx__StringStringEntryProto **out = alloc(e, l->len * sizeof *out);
  Onnx__StringStringEntryProto *items = alloc(e, l->len * sizeof *items);
  if (!out || !items) return (void)(*n = 0), NULL;
  for (size_t i = 0; i < l->len; i++) {
    onnx__string_string_entry_proto__init(&items[i]);
    items[i].key = l->items[i].key;
    items[i].value = l->items[i].value;
    attach(e, &items[i].base, l->items[i].extra);
    out[i] = &items[i];
  }
  return out;
}

static Onnx__OperatorSetIdProto **opsets(enc *e, const bb_opsetlist *l, size_t *n) {
  *n = l->len;
  if (!l->len) return NULL;
  Onnx__OperatorSetIdProto **out = alloc(e, l->len * sizeof *out);
  Onnx__OperatorSetIdProto *items = alloc(e, l->len * sizeof *items);
  if (!out || !items) return (void)(*n = 0), NULL;
  for (size_t i = 0; i < l->len; i++) {
    onnx__operator_set_id_proto__init(&items[i]);
    items[i].domain = l->items[i].domain;
    items[i].has_version = l->items[i].has_version;
    items[i].version = l->items[i].version;
    attach(e, &items[i].base, l->items[i].extra);
    out[i] = &items[i];
  }
  return out;
}

static Onnx__TensorShapeProto *shape(enc *e, const bb_shape *s) {
  if (!s) return NULL;
  Onnx__TensorShapeProto *out = alloc(e, sizeof *out);
  if (!out) return NULL;
  onnx__tensor_shape_proto__init(out);
  attach(e, &out->base, s->extra);
  if (!s->rank) return out;
  out->dim = alloc(e, s->rank * sizeof *out->dim);
  Onnx__TensorShapeProto__Dimension *dims = alloc(e, s->rank * sizeof *dims);
  if (!out->dim || !dims) return NULL;
  out->n_dim = s->rank;
  for (size_t i = 0; i < s->rank; i++) {
    Onnx__TensorShapeProto__Dimension *d = &dims[i];
    onnx__tensor_shape_proto__dimension__init(d);
    if (s->dims[i].kind == BB_DIM_VALUE) {
      d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
      d->dim_value = s->dims[i].value;
    } else if (s->dims[i].kind == BB_DIM_PARAM && s->dims[i].param) {
      d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
      d->dim_param = s->dims[i].param;
    }
    d->denotation = s->dims[i].denotation;
    attach(e, &d->base, s->dims[i].extra);
    out->dim[i] = d;
  }
  return out;
}

static Onnx__TypeProto *type(enc *e, const bb_type *t) {
  if (!t) return NULL;
  Onnx__TypeProto *out = alloc(e, sizeof *out);
  if (!out) return NULL;
  onnx__type_proto__init(out);
  out->denotation = t->denotation;
  ProtobufCMessage *inner = NULL;
  switch (t->kind) {
  case BB_TYPE_TENSOR: {
    Onnx__TypeProto__Tensor *x = alloc(e, sizeof *x);
    if (!x) return NULL;
    onnx__type_proto__tensor__init(x);
    x->has_elem_type = t->has_elem_type;
    x->elem_type = t->elem_type;
    x->shape = shape(e, t->shape);
    out->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    out->tensor_type = x;
    inner = &x->base;
    break;
  }
  case BB_TYPE_SPARSE_TENSOR: {
    Onnx__TypeProto__SparseTensor *x = alloc(e, sizeof *x);
    if (!x) return NULL;
    onnx__type_proto__sparse_tensor__init(x);
    x->has_elem_type = t->has_elem_type;
    x->elem_type = t->elem_type;
    x->shape = shape(e, t->shape);
    out->value_case = ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE;
    out->sparse_tensor_type = x;
    inner = &x->base;
    break;
  }
  case BB_TYPE_SEQUENCE: {
    Onnx__TypeProto__Sequence *x = alloc(e, sizeof *x);
    if (!x) return NULL;
    onnx__type_proto__sequence__init(x);
    x->elem_type = type(e, t->inner);
    out->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
    out->sequence_type = x;
    inner = &x->base;
    break;
  }
  case BB_TYPE_OPTIONAL: {
    Onnx__TypeProto__Optional *x = alloc(e, sizeof *x);
    if (!x) return NULL;
    onnx__type_proto__optional__init(x);
    x->elem_type = type(e, t->inner);
    out->value_case = ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE;
    out->optional_type = x;
    inner = &x->base;
    break;
  }
  case BB_TYPE_MAP: {
    Onnx__TypeProto__Map *x = alloc(e, sizeof *x);
    if (!x) return NULL;
    onnx__type_proto__map__init(x);
    x->has_key_type = t->has_elem_type;
    x->key_type = t->elem_type;
    x->value_type = type(e, t->inner);
    out->value_case = ONNX__TYPE_PROTO__VALUE_MAP_TYPE;
    out->map_type = x;
    inner = &x->base;
    break;
  }
  case BB_TYPE_OPAQUE: {
    Onnx__TypeProto__Opaque *x = alloc(e, sizeof *x);
    if (!x) return NULL;
    onnx__type_proto__opaque__init(x);
    x->domain = t->opaque_domain;
    x->name = t->opaque_name;
    out->value_case = ONNX__TYPE_PROTO__VALUE_OPAQUE_TYPE;
    out->opaque_type = x;
    inner = &x->base;
    break;
  }
  case BB_TYPE_NONE: break;
  }
  if (inner) attach(e, inner, t->inner_extra);
  attach(e, &out->base, t->extra);
  return out;
}

static Onnx__TensorProto *tensor(enc *e, const bb_tensor_proto *t) {
  if (!t) return NULL;
  Onnx__TensorProto *out = alloc(e, sizeof *out);
  if (!out) return NULL;
  onnx__tensor_proto__init(out);
  out->name = t->name;
  out->doc_string = t->doc_string;
  out->has_data_type = t->has_data_type;
  out->data_type = t->data_type;
  out->n_dims = t->n_dims;
  out->dims = t->dims;
  out->has_raw_data = t->has_raw_data;
  out->raw_data = bin(t->raw_data);
  out->n_float_data = t->n_float_data;
  out->float_data = t->float_data;
  out->n_int32_data = t->n_int32_data;
  out->int32_data = t->int32_data;
  out->n_int64_data = t->n_int64_data;
  out->int64_data = t->int64_data;
  out->n_double_data = t->n_double_data;
  out->double_data = t->double_data;
  out->n_uint64_data = t->n_uint64_data;
  out->uint64_data = t->uint64_data;
  out->n_string_data = t->n_string_data;
  out->string_data = bins(e, t->string_data, t->n_string_data);
  out->has_data_location = t->has_data_location;
  out->data_location = (Onnx__TensorProto__DataLocation)t->data_location;
  out->external_data = kvs(e, &t->external_data, &out->n_external_data);
  out->metadata_props = kvs(e, &t->metadata, &out->n_metadata_props);
  attach(e, &out->base, t->extra);
  return out;
}

static Onnx__TensorProto **tensors(enc *e, bb_tensor_proto *const *in, size_t n) {
  if (!n) return NULL;
  Onnx__TensorProto **out = alloc(e, n * sizeof *out);
  for (size_t i = 0; out && i < n; i++) out[i] = tensor(e, in[i]);
  return out;
}

static Onnx__GraphProto *graph(enc *e, const bb_graph *g);

static Onnx__GraphProto **graphs(enc *e, bb_graph *const *in, size_t n) {
  if (!n) return NULL;
  Onnx__GraphProto **out = alloc(e, n * sizeof *out);
  for (size_t i = 0; out && i < n; i++) out[i] = graph(e, in[i]);
  return out;
}

static Onnx__TypeProto **types(enc *e, bb_type *const *in, size_t n) {
  if (!n) return NULL;
  Onnx__TypeProto **out = alloc(e, n * sizeof *out);
  for (size_t i = 0; out && i < n; i++) out[i] = type(e, in[i]);
  return out;
}

static Onnx__AttributeProto *attr(enc *e, const bb_attr *a) {
  Onnx__AttributeProto *out = alloc(e, sizeof *out);
  if (!out) return NULL;
  onnx__attribute_proto__init(out);
  out->name = a->name;
  out->ref_attr_name = a->ref_attr_name;
  out->doc_string = a->doc_string;
  out->has_type = a->has_type;
  out->type = (Onnx__AttributeProto__AttributeType)a->type;
  out->has_f = a->has_f;
  out->f = a->f;
  out->has_i = a->has_i;
  out->i = a->i;
  out->has_s = a->has_s;
  out->s = bin(a->s);
  out->t = tensor(e, a->t);
  out->g = a->g ? graph(e, a->g) : NULL;
  out->tp = type(e, a->tp);
  out->n_floats = a->n_floats;
  out->floats = a->floats;
  out->n_ints = a->n_ints;
  out->ints = a->ints;
  out->n_strings = a->n_strings;
  out->strings = bins(e, a->strings, a->n_strings);
  out->n_tensors = a->n_tensors;
  out->tensors = tensors(e, a->tensors, a->n_tensors);
  out->n_graphs = a->n_graphs;
  out->graphs = graphs(e, a->graphs, a->n_graphs);
  out->n_type_protos = a->n_type_protos;
  out->type_protos = types(e, a->type_protos, a->n_type_protos);
  attach(e, &out->base, a->extra);
  return out;
}

static Onnx__AttributeProto **attrs(enc *e, const bb_attrlist *l, size_t *n) {
  *n = l->len;
  if (!l->len) return NULL;
  Onnx__AttributeProto **out = alloc(e, l->len * sizeof *out);
  for (size_t i = 0; out && i < l->len; i++) out[i] = attr(e, l->items[i]);
  return out;
}

static Onnx__ValueInfoProto **vis(enc *e, const bb_vilist *l, size_t *n) {
  *n = l->len;
  if (!l->len) return NULL;
  Onnx__ValueInfoProto **out = alloc(e, l->len * sizeof *out);
  Onnx__ValueInfoProto *items = alloc(e, l->len * sizeof *items);
  if (!out || !items) return NULL;
  for (size_t i = 0; i < l->len; i++) {
    const bb_value_info *v = l->items[i];
    onnx__value_info_proto__init(&items[i]);
    items[i].name = v->name;
    items[i].type = type(e, v->type);
    items[i].doc_string = v->doc_string;
    items[i].metadata_props = kvs(e, &v->metadata, &items[i].n_metadata_props);
    attach(e, &items[i].base, v->extra);
    out[i] = &items[i];
  }
  return out;
}

static Onnx__NodeProto **nodes(enc *e, const bb_nodelist *l, size_t *n) {
  *n = l->len;
  if (!l->len) return NULL;
  Onnx__NodeProto **out = alloc(e, l->len * sizeof *out);
  Onnx__NodeProto *items = alloc(e, l->len * sizeof *items);
  if (!out || !items) return NULL;
  for (size_t i = 0; i < l->len; i++) {
    const bb_ir_node *nd = l->items[i];
    Onnx__NodeProto *o = &items[i];
    onnx__node_proto__init(o);
    o->n_input = nd->inputs.len;
    o->input = nd->inputs.items;
    o->n_output = nd->outputs.len;
    o->output = nd->outputs.items;
    o->name = nd->name;
    o->op_type = nd->op_type;
    o->domain = nd->domain;
    o->overload = nd->overload;
    o->doc_string = nd->doc_string;
    o->attribute = attrs(e, &nd->attrs, &o->n_attribute);
    o->metadata_props = kvs(e, &nd->metadata, &o->n_metadata_props);
    attach(e, &o->base, nd->extra);
    out[i] = o;
  }
  return out;
}

static Onnx__GraphProto *graph(enc *e, const bb_graph *g) {
  Onnx__GraphProto *out = alloc(e, sizeof *out);
  if (!out) return NULL;
  onnx__graph_proto__init(out);
  out->name = g->name;
  out->doc_string = g->doc_string;
  out->node = nodes(e, &g->nodes, &out->n_node);
  out->n_initializer = g->initializers.len;
  out->initializer = tensors(e, g->initializers.items, g->initializers.len);
  out->input = vis(e, &g->inputs, &out->n_input);
  out->output = vis(e, &g->outputs, &out->n_output);
  out->value_info = vis(e, &g->value_infos, &out->n_value_info);
  out->metadata_props = kvs(e, &g->metadata, &out->n_metadata_props);
  attach(e, &out->base, g->extra);
  return out;
}

static Onnx__FunctionProto *function(enc *e, const bb_function *f) {
  Onnx__FunctionProto *out = alloc(e, sizeof *out);
  if (!out) return NULL;
  onnx__function_proto__init(out);
  out->name = f->name;
  out->domain = f->domain;
  out->overload = f->overload;
  out->doc_string = f->doc_string;
  out->n_input = f->inputs.len;
  out->input = f->inputs.items;
  out->n_output = f->outputs.len;
  out->output = f->outputs.items;
  out->n_attribute = f->attr_names.len;
  out->attribute = f->attr_names.items;
  out->attribute_proto = attrs(e, &f->attr_protos, &out->n_attribute_proto);
  out->node = nodes(e, &f->nodes, &out->n_node);
  out->opset_import = opsets(e, &f->opsets, &out->n_opset_import);
  out->value_info = vis(e, &f->value_infos, &out->n_value_info);
  out->metadata_props = kvs(e, &f->metadata, &out->n_metadata_props);
  attach(e, &out->base, f->extra);
  return out;
}

/* A NULL entry in a repeated string field would crash protobuf-c; the IR allows none. */
static int check_strlist(const bb_strlist *l, const char *what, bb_error *err) {
  for (size_t i = 0; i < l->len; i++)
    if (!l->items[i]) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s[%zu] is NULL", what, i);
  return 0;
}

static int check_nodes(const bb_nodelist *l, const char *where, bb_error *err);

static int check_attrs(const bb_attrlist *l, const char *where, bb_error *err) {
  for (size_t i = 0; i < l->len; i++) {
    const bb_attr *a = l->items[i];
    if (!a) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s: attribute %zu is NULL", where, i);
    if (a->g && check_nodes(&a->g->nodes, where, err)) return err ? err->code : BB_ERR_INVALID_ARGUMENT;
    for (size_t k = 0; k < a->n_graphs; k++)
      if (!a->graphs[k] || check_nodes(&a->graphs[k]->nodes, where, err))
        return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s: attribute %s has a NULL or bad graph", where,
                            a->name ? a->name : "?");
  }
  return 0;
}

static int check_nodes(const bb_nodelist *l, const char *where, bb_error *err) {
  for (size_t i = 0; i < l->len; i++) {
    const bb_ir_node *n = l->items[i];
    if (!n) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "%s: node %zu is NULL", where, i);
    int rc = check_strlist(&n->inputs, "node input", err);
    if (!rc) rc = check_strlist(&n->outputs, "node output", err);
    if (!rc) rc = check_attrs(&n->attrs, where, err);
    if (rc) return bb_error_prefix(err, "%s: node %zu (%s): ", where, i, n->op_type ? n->op_type : "?");
  }
  return 0;
}

static int check_model(const bb_model *m, bb_error *err) {
  if (m->graph) {
    int rc = check_nodes(&m->graph->nodes, "graph", err);
    if (rc) return rc;
  }
  for (size_t i = 0; i < m->functions.len; i++) {
    const bb_function *f = m->functions.items[i];
    if (!f) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "function %zu is NULL", i);
    const char *name = f->name ? f->name : "?";
    int rc = check_strlist(&f->inputs, "function input", err);
    if (!rc) rc = check_strlist(&f->outputs, "function output", err);
    if (!rc) rc = check_strlist(&f->attr_names, "function attribute", err);
    if (!rc) rc = check_attrs(&f->attr_protos, name, err);
    if (!rc) rc = check_nodes(&f->nodes, name, err);
    if (rc) return bb_error_prefix(err, "function %s: ", name);
  }
  return 0;
}

int bb_model_encode(const bb_model *m, uint8_t **out, size_t *out_len, bb_error *err) {
  if (!m || !out || !out_len) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "bb_model_encode: NULL argument");
  *out = NULL;
  *out_len = 0;
  int rc = check_model(m, err);
  if (rc) return rc;
  const bb_allocator *al = bbi_arena_allocator(m->arena);
  enc e = {bbi_arena_new(al), err, 0};
  if (!e.a) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  Onnx__ModelProto pm;
  onnx__model_proto__init(&pm);
  pm.has_ir_version = m->has_ir_version;
  pm.ir_version = m->ir_version;
  pm.producer_name = m->producer_name;
  pm.producer_version = m->producer_version;
  pm.domain = m->domain;
  pm.has_model_version = m->has_model_version;
  pm.model_version = m->model_version;
  pm.doc_string = m->doc_string;
  pm.graph = m->graph ? graph(&e, m->graph) : NULL;
  pm.opset_import = opsets(&e, &m->opsets, &pm.n_opset_import);
  pm.metadata_props = kvs(&e, &m->metadata, &pm.n_metadata_props);
  pm.n_functions = m->functions.len;
  if (m->functions.len) {
    pm.functions = alloc(&e, m->functions.len * sizeof *pm.functions);
    for (size_t i = 0; pm.functions && i < m->functions.len; i++)
      pm.functions[i] = function(&e, m->functions.items[i]);
  }
  attach(&e, &pm.base, m->extra);
  if (e.rc) {
    bbi_arena_free(e.a);
    if (e.rc == BB_ERR_NOMEM) return bb_error_set(err, BB_ERR_NOMEM, "out of memory while encoding");
    return e.rc;
  }
  size_t n = protobuf_c_message_get_packed_size(&pm.base);
  uint8_t *buf = al->malloc(n ? n : 1, al->user_data);
  if (!buf) {
    bbi_arena_free(e.a);
    return bb_error_set(err, BB_ERR_NOMEM, "out of memory for a %zu-byte encoding", n);
  }
  protobuf_c_message_pack(&pm.base, buf);
  bbi_arena_free(e.a);
  *out = buf;
  *out_len = n;
  return 0;
}

int bb_tensor_proto_encode(const bb_tensor_proto *t, uint8_t **out, size_t *out_len, bb_error *err) {
  if (!t || !out || !out_len) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "bb_tensor_proto_encode: NULL argument");
  *out = NULL;
  *out_len = 0;
  const bb_allocator *al = bb_default_allocator();
  enc e = {bbi_arena_new(al), err, 0};
  if (!e.a) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  Onnx__TensorProto *pt = tensor(&e, t);
  if (e.rc || !pt) {
    bbi_arena_free(e.a);
    return e.rc == BB_ERR_NOMEM || !e.rc ? bb_error_set(err, BB_ERR_NOMEM, "out of memory while encoding") : e.rc;
  }
  size_t n = protobuf_c_message_get_packed_size(&pt->base);
  uint8_t *buf = al->malloc(n ? n : 1, al->user_data);
  if (buf) protobuf_c_message_pack(&pt->base, buf);
  bbi_arena_free(e.a);
  if (!buf) return bb_error_set(err, BB_ERR_NOMEM, "out of memory for a %zu-byte encoding", n);
  *out = buf;
  *out_len = n;
  return 0;
}
