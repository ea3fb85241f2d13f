/* Deep structural equality of two IR models: every modelled field, presence flags and the
 * preserved extra bytes. Used by round-trip tests and by tools that check a rewrite. */
#include <string.h>

#include "bb/ir.h"

static bool s_eq(const char *a, const char *b) {
  if (!a || !b) return a == b;
  return strcmp(a, b) == 0;
}

static bool mem_eq(const void *a, const void *b, size_t n) { return n == 0 || memcmp(a, b, n) == 0; }

static bool b_eq(bb_bytes a, bb_bytes b) { return a.len == b.len && mem_eq(a.data, b.data, a.len); }

static bool kv_eq(const bb_kvlist *a, const bb_kvlist *b) {
  if (a->len != b->len) return false;
  for (size_t i = 0; i < a->len; i++)
    if (!s_eq(a->items[i].key, b->items[i].key) || !s_eq(a->items[i].value, b->items[i].value) ||
        !b_eq(a->items[i].extra, b->items[i].extra))
      return false;
  return true;
}

static bool sl_eq(const bb_strlist *a, const bb_strlist *b) {
  if (a->len != b->len) return false;
  for (size_t i = 0; i < a->len; i++)
    if (!s_eq(a->items[i], b->items[i])) return false;
  return true;
}

static bool opsets_eq(const bb_opsetlist *a, const bb_opsetlist *b) {
  if (a->len != b->len) return false;
  for (size_t i = 0; i < a->len; i++) {
    const bb_opset *x = &a->items[i], *y = &b->items[i];
    if (!s_eq(x->domain, y->domain) || x->has_version != y->has_version || x->version != y->version ||
        !b_eq(x->extra, y->extra))
      return false;
  }
  return true;
}

static bool shape_eq(const bb_shape *a, const bb_shape *b) {
  if (!a || !b) return a == b;
  if (a->rank != b->rank || !b_eq(a->extra, b->extra)) return false;
  for (size_t i = 0; i < a->rank; i++) {
    const bb_dim *x = &a->dims[i], *y = &b->dims[i];
    if (x->kind != y->kind || !s_eq(x->denotation, y->denotation) || !b_eq(x->extra, y->extra)) return false;
    if (x->kind == BB_DIM_VALUE && x->value != y->value) return false;
    if (x->kind == BB_DIM_PARAM && !s_eq(x->param, y->param)) return false;
  }
  return true;
}

static bool type_eq(const bb_type *a, const bb_type *b) {
  if (!a || !b) return a == b;
  return a->kind == b->kind && s_eq(a->denotation, b->denotation) && a->has_elem_type == b->has_elem_type &&
         a->elem_type == b->elem_type && shape_eq(a->shape, b->shape) && type_eq(a->inner, b->inner) &&
         s_eq(a->opaque_domain, b->opaque_domain) && s_eq(a->opaque_name, b->opaque_name) &&
         b_eq(a->extra, b->extra) && b_eq(a->inner_extra, b->inner_extra);
}

static bool bytes_list_eq(const bb_bytes *a, size_t na, const bb_bytes *b, size_t nb) {
  if (na != nb) return false;
  for (size_t i = 0; i < na; i++)
    if (!b_eq(a[i], b[i])) return false;
  return true;
}

static bool tensor_eq(const bb_tensor_proto *a, const bb_tensor_proto *b) {
  if (!a || !b) return a == b;
  return s_eq(a->name, b->name) && s_eq(a->doc_string, b->doc_string) && a->has_data_type == b->has_data_type &&
         a->data_type == b->data_type && a->n_dims == b->n_dims &&
         mem_eq(a->dims, b->dims, a->n_dims * sizeof *a->dims) && a->has_raw_data == b->has_raw_data &&
         b_eq(a->raw_data, b->raw_data) && a->n_float_data == b->n_float_data &&
         mem_eq(a->float_data, b->float_data, a->n_float_data * sizeof(float)) &&
         a->n_int32_data == b->n_int32_data &&
         mem_eq(a->int32_data, b->int32_data, a->n_int32_data * sizeof(int32_t)) &&
         a->n_int64_data == b->n_int64_data &&
         mem_eq(a->int64_data, b->int64_data, a->n_int64_data * sizeof(int64_t)) &&
         a->n_double_data == b->n_double_data &&
         mem_eq(a->double_data, b->double_data, a->n_double_data * sizeof(double)) &&
         a->n_uint64_data == b->n_uint64_data &&
         mem_eq(a->uint64_data, b->uint64_data, a->n_uint64_data * sizeof(uint64_t)) &&
         bytes_list_eq(a->string_data, a->n_string_data, b->string_data, b->n_string_data) &&
         a->has_data_location == b->has_data_location && a->data_location == b->data_location &&
         kv_eq(&a->external_data, &b->external_data) && kv_eq(&a->metadata, &b->metadata) &&
         b_eq(a->extra, b->extra);
}

static bool graph_eq(const bb_graph *a, const bb_graph *b);

static bool attr_eq(const bb_attr *a, const bb_attr *b) {
  if (!s_eq(a->name, b->name) || !s_eq(a->ref_attr_name, b->ref_attr_name) ||
      !s_eq(a->doc_string, b->doc_string) || a->has_type != b->has_type || a->type != b->type ||
      a->has_f != b->has_f || !mem_eq(&a->f, &b->f, sizeof a->f) || a->has_i != b->has_i || a->i != b->i ||
      a->has_s != b->has_s || !b_eq(a->s, b->s) || !tensor_eq(a->t, b->t) || !graph_eq(a->g, b->g) ||
      !type_eq(a->tp, b->tp) || a->n_floats != b->n_floats ||
      !mem_eq(a->floats, b->floats, a->n_floats * sizeof(float)) || a->n_ints != b->n_ints ||
      !mem_eq(a->ints, b->ints, a->n_ints * sizeof(int64_t)) ||
      !bytes_list_eq(a->strings, a->n_strings, b->strings, b->n_strings) || a->n_tensors != b->n_tensors ||
      a->n_graphs != b->n_graphs || a->n_type_protos != b->n_type_protos || !b_eq(a->extra, b->extra))
    return false;
  for (size_t i = 0; i < a->n_tensors; i++)
    if (!tensor_eq(a->tensors[i], b->tensors[i])) return false;
  for (size_t i = 0; i < a->n_graphs; i++)
    if (!graph_eq(a->graphs[i], b->graphs[i])) return false;
  for (size_t i = 0; i < a->n_type_protos; i++)
    if (!type_eq(a->type_protos[i], b->type_protos[i])) return false;
  return true;
}

static bool attrs_eq(const bb_attrlist *a, const bb_attrlist *b) {
  if (a->len != b->len) return false;
  for (size_t i = 0; i < a->len; i++)
    if (!attr_eq(a->items[i], b->items[i])) return false;
  return true;
}

static bool vis_eq(const bb_vilist *a, const bb_vilist *b) {
  if (a->len != b->len) return false;
  for (size_t i = 0; i < a->len; i++) {
    const bb_value_info *x = a->items[i], *y = b->items[i];
    if (!s_eq(x->name, y->name) || !type_eq(x->type, y->type) || !s_eq(x->doc_string, y->doc_string) ||
        !kv_eq(&x->metadata, &y->metadata) || !b_eq(x->extra, y->extra))
      return false;
  }
  return true;
}

static bool nodes_eq(const bb_nodelist *a, const bb_nodelist *b) {
  if (a->len != b->len) return false;
  for (size_t i = 0; i < a->len; i++) {
    const bb_ir_node *x = a->items[i], *y = b->items[i];
    if (!s_eq(x->name, y->name) || !s_eq(x->op_type, y->op_type) || !s_eq(x->domain, y->domain) ||
        !s_eq(x->overload, y->overload) || !s_eq(x->doc_string, y->doc_string) ||
        !sl_eq(&x->inputs, &y->inputs) || !sl_eq(&x->outputs, &y->outputs) || !attrs_eq(&x->attrs, &y->attrs) ||
        !kv_eq(&x->metadata, &y->metadata) || !b_eq(x->extra, y->extra))
      return false;
  }
  return true;
}

static bool graph_eq(const bb_graph *a, const bb_graph *b) {
  if (!a || !b) return a == b;
  if (!s_eq(a->name, b->name) || !s_eq(a->doc_string, b->doc_string) || !nodes_eq(&a->nodes, &b->nodes) ||
      a->initializers.len != b->initializers.len || !vis_eq(&a->inputs, &b->inputs) ||
      !vis_eq(&a->outputs, &b->outputs) || !vis_eq(&a->value_infos, &b->value_infos) ||
      !kv_eq(&a->metadata, &b->metadata) || !b_eq(a->extra, b->extra))
    return false;
  for (size_t i = 0; i < a->initializers.len; i++)
    if (!tensor_eq(a->initializers.items[i], b->initializers.items[i])) return false;
  return true;
}

static bool function_eq(const bb_function *a, const bb_function *b) {
  return s_eq(a->name, b->name) && s_eq(a->domain, b->domain) && s_eq(a->overload, b->overload) &&
         s_eq(a->doc_string, b->doc_string) && sl_eq(&a->inputs, &b->inputs) && sl_eq(&a->outputs, &b->outputs) &&
         sl_eq(&a->attr_names, &b->attr_names) && attrs_eq(&a->attr_protos, &b->attr_protos) &&
         nodes_eq(&a->nodes, &b->nodes) && opsets_eq(&a->opsets, &b->opsets) &&
         vis_eq(&a->value_infos, &b->value_infos) && kv_eq(&a->metadata, &b->metadata) &&
         b_eq(a->extra, b->extra);
}

bool bb_model_equal(const bb_model *a, const bb_model *b) {
  if (!a || !b) return a == b;
  if (a->has_ir_version != b->has_ir_version || a->ir_version != b->ir_version ||
      !s_eq(a->producer_name, b->producer_name) || !s_eq(a->producer_version, b->producer_version) ||
      !s_eq(a->domain, b->domain) || a->has_model_version != b->has_model_version ||
      a->model_version != b->model_version || !s_eq(a->doc_string, b->doc_string) ||
      !graph_eq(a->graph, b->graph) || !opsets_eq(&a->opsets, &b->opsets) || !kv_eq(&a->metadata, &b->metadata) ||
      a->functions.len != b->functions.len || !b_eq(a->extra, b->extra))
    return false;
  for (size_t i = 0; i < a->functions.len; i++)
    if (!function_eq(a->functions.items[i], b->functions.items[i])) return false;
  return true;
}
