/* The recorder's primitives: the sticky first error, name and value checks, value
 * minting, nodes, attributes and literals. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dsl/recorder.h"

/* ---- errors -------------------------------------------------------------------- */

/* "module 'X'" or "module 'X' bootstrap" for the function f. */
static void fn_label(const rec_fn *f, char *buf, size_t size) {
  snprintf(buf, size, "module '%s'%s", f->module->name, f->bootstrap ? " bootstrap" : "");
}

int rec_error(bb_rec *r, int code, const char *fmt, ...) {
  if (r->failed) return r->error.code;
  r->failed = true;
  r->error.code = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->error.message, sizeof r->error.message, fmt, ap);
  va_end(ap);
  if (r->frames.len) {
    char label[REC_NAME_MAX + 32];
    fn_label(rec_cur(r), label, sizeof label);
    bb_error_prefix(&r->error, "%s: ", label);
  }
  return code;
}

int rec_nomem(bb_rec *r) { return rec_error(r, BB_ERR_NOMEM, "out of memory while recording"); }

int bb_rec_fail(bb_rec *rec, int code, const char *fmt, ...) {
  if (!rec) return code;
  if (rec->failed) return rec->error.code;
  if (code >= 0) code = BB_ERR_INVALID_ARGUMENT;
  char detail[BB_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt ? fmt : "failed", ap);
  va_end(ap);
  return rec_error(rec, code, "%s", detail);
}

bool bb_rec_failed(const bb_rec *rec) { return !rec || rec->failed; }

/* ---- frames and functions ------------------------------------------------------- */

rec_frame *rec_top(bb_rec *r) { return &r->frames.items[r->frames.len - 1]; }

rec_fn *rec_cur(bb_rec *r) { return r->fns.items[rec_top(r)->fn]; }

rec_fn *rec_fn_new(bb_rec *r, const char *name, const bb_module *module, bool bootstrap, uint32_t *index) {
  rec_fn *f = bbi_arena_alloc(r->scratch, sizeof *f);
  if (!f || !(f->fn = bb_function_new(r->model, name, BB_DOMAIN_MODULE))) {
    rec_nomem(r);
    return NULL;
  }
  f->module = module;
  f->bootstrap = bootstrap;
  bbi_strmap_init(&f->names, r->alloc);
  if (BBI_ARENA_PUSH(r->scratch, &r->fns, f)) {
    bbi_strmap_free(&f->names);
    rec_nomem(r);
    return NULL;
  }
  *index = (uint32_t)(r->fns.len - 1);
  return f;
}

long rec_fn_find(const bb_rec *r, const char *name) {
  for (size_t i = 0; i < r->fns.len; i++)
    if (strcmp(r->fns.items[i]->fn->name, name) == 0) return (long)i;
  return -1;
}

int rec_frame_push(bb_rec *r, uint32_t fn, const bb_binding *bindings, size_t n_bindings) {
  const char *name = r->fns.items[fn]->fn->name;
  rec_frame frame = {fn, bindings, n_bindings, NULL};
  if (r->frames.len) {
    const char *outer = rec_top(r)->scope;
    size_t a = strlen(outer), b = strlen(name);
    char *scope = bbi_arena_alloc(r->scratch, a + b + 2);
    if (!scope) return rec_nomem(r);
    memcpy(scope, outer, a);
    scope[a] = '_';
    memcpy(scope + a + 1, name, b + 1);
    frame.scope = scope;
  } else {
    frame.scope = name;
  }
  if (BBI_ARENA_PUSH(r->scratch, &r->frames, frame)) return rec_nomem(r);
  r->fns.items[fn]->active = true;
  return 0;
}

void rec_frame_pop(bb_rec *r) {
  r->fns.items[rec_top(r)->fn]->active = false;
  r->frames.len--;
}

/* ---- names and types -------------------------------------------------------------- */

static bool is_alpha_(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool rec_is_identifier(const char *s) {
  if (!s || !is_alpha_(s[0])) return false;
  size_t n = 1;
  for (; s[n]; n++)
    if (!is_alpha_(s[n]) && !is_digit(s[n])) return false;
  return n <= REC_NAME_MAX;
}

/* v<digits>: the names the recorder mints for intermediate values. */
static bool is_minted_form(const char *s) {
  if (s[0] != 'v' || !s[1]) return false;
  for (size_t i = 1; s[i]; i++)
    if (!is_digit(s[i])) return false;
  return true;
}

bool rec_check_name(bb_rec *r, const char *what, const char *name) {
  if (r->failed) return false;
  if (!name) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "%s name is missing", what);
    return false;
  }
  if (!rec_is_identifier(name) || strstr(name, "__") || is_minted_form(name)) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT,
              "%s name '%.*s' is not allowed: use a C identifier of at most %d characters, without "
              "\"__\" and not of the form v<digits> (those are reserved for names the framework derives)",
              what, REC_NAME_MAX, name, REC_NAME_MAX);
    return false;
  }
  return true;
}

bool rec_check_type(bb_rec *r, const char *type) {
  if (r->failed) return false;
  if (!type) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "type is missing");
    return false;
  }
  size_t n = 0;
  for (; type[n]; n++) {
    char c = type[n];
    if (!is_alpha_(c) && !is_digit(c) && c != '.' && c != '@' && c != '-') break;
  }
  if (type[n] || n > REC_NAME_MAX) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT,
              "type '%.*s' is not a denotation: use letters, digits and \"._@-\", at most %d characters",
              REC_NAME_MAX, type, REC_NAME_MAX);
    return false;
  }
  return true;
}

/* ---- values ------------------------------------------------------------------------ */

bb_value rec_handle(const bb_rec *r, uint32_t id) {
  bb_value v = {r->values.items[id].name, r->values.items[id].type, r, id};
  return v;
}

bool rec_check_value(bb_rec *r, bb_value v, const char *what) {
  if (r->failed) return false;
  if (v.rec != r || v.id >= r->values.len || r->values.items[v.id].name != v.name) {
    if (!v.rec && !v.name)
      rec_error(r, BB_ERR_INVALID_ARGUMENT, "%s is an empty value (never set, or returned by a failed call)", what);
    else if (!v.rec && v.name && !*v.name)
      rec_error(r, BB_ERR_INVALID_ARGUMENT, "%s is BB_VALUE_OMITTED, which only Backend op inputs accept", what);
    else
      rec_error(r, BB_ERR_INVALID_ARGUMENT,
                "%s is not a value of this recording (it comes from another build, or was altered)", what);
    return false;
  }
  const rec_value *rv = &r->values.items[v.id];
  if (rv->fn != rec_top(r)->fn) {
    char owner[REC_NAME_MAX + 32];
    fn_label(r->fns.items[rv->fn], owner, sizeof owner);
    rec_error(r, BB_ERR_INVALID_ARGUMENT,
              "%s is value '%s' of %s, which this function cannot see; pass it in through an input binding",
              what, rv->name, owner);
    return false;
  }
  return true;
}

const char *rec_value_type(const bb_rec *r, bb_value v) { return r->values.items[v.id].type; }

bool rec_name_free(bb_rec *r, const char *name, const char *what) {
  uint32_t id;
  if (r->failed) return false;
  if (bbi_strmap_get(&rec_cur(r)->names, name, &id)) {
    rec_error(r, BB_ERR_EXISTS, "%s '%s' clashes with a value of that name already defined in this function",
              what, name);
    return false;
  }
  return true;
}

const char *rec_copy(bb_rec *r, const char *s) {
  const char *c = bb_model_strdup(r->model, s);
  if (!c) rec_nomem(r);
  return c;
}

const char *rec_mint_name(bb_rec *r) {
  char buf[32];
  snprintf(buf, sizeof buf, "v%" PRIu64, r->next_site++);
  return rec_copy(r, buf);
}

bb_value rec_define(bb_rec *r, const char *name, const char *type) {
  bb_value none = {0};
  if (r->failed) return none;
  rec_fn *f = rec_cur(r);
  rec_value rv = {name, type, rec_top(r)->fn};
  uint32_t id = (uint32_t)r->values.len;
  bb_type *t = bb_value_type_new(r->model, type);
  if (!t || BBI_ARENA_PUSH(r->scratch, &r->values, rv) || bbi_strmap_put(&f->names, name, id) ||
      !bb_vilist_add(r->model, &f->fn->value_infos, name, t)) {
    rec_nomem(r);
    return none;
  }
  return rec_handle(r, id);
}

/* ---- nodes ---------------------------------------------------------------------------- */

bb_ir_node *rec_node_new(bb_rec *r, const char *op_type, const char *domain) {
  bb_ir_node *n = bb_ir_node_new(r->model, op_type, domain, NULL);
  if (!n) rec_nomem(r);
  return n;
}

int rec_node_input(bb_rec *r, bb_ir_node *n, const char *name) {
  return bb_strlist_append(r->model, &n->inputs, name) ? rec_nomem(r) : 0;
}

int rec_node_output(bb_rec *r, bb_ir_node *n, const char *name) {
  return bb_strlist_append(r->model, &n->outputs, name) ? rec_nomem(r) : 0;
}

int rec_node_meta(bb_rec *r, bb_ir_node *n, const char *key, const char *value) {
  return bb_kv_append(r->model, &n->metadata, key, value) ? rec_nomem(r) : 0;
}

int rec_node_push(bb_rec *r, bb_ir_node *n) {
  bb_function *fn = rec_cur(r)->fn;
  const char *domain = n->domain ? n->domain : "";
  int64_t version = *domain ? BB_FRAMEWORK_OPSET_VERSION : BB_ONNX_OPSET_VERSION;
  if (rec_node_meta(r, n, BB_KEY_MODULE_INSTANCE, rec_top(r)->scope)) return r->error.code;
  if (bb_nodelist_append(r->model, &fn->nodes, n)) return rec_nomem(r);
  if (bb_opset_get(&fn->opsets, domain) < 0 && bb_opset_set(r->model, &fn->opsets, domain, version))
    return rec_nomem(r);
  return 0;
}

bb_ir_node *rec_node_begin(bb_rec *r, const char *op_type, const char *domain, const bb_value *inputs,
                        size_t n_inputs) {
  bb_ir_node *n = rec_node_new(r, op_type, domain);
  for (size_t i = 0; n && i < n_inputs; i++)
    if (rec_node_input(r, n, inputs[i].name)) return NULL;
  return n;
}

bb_value rec_node_end(bb_rec *r, bb_ir_node *n, const char *type) {
  bb_value none = {0};
  const char *out = rec_mint_name(r);
  if (!out || rec_node_output(r, n, out) || rec_node_push(r, n)) return none;
  return rec_define(r, out, type);
}

/* ---- attributes and literals ------------------------------------------------------------ */

#define REC_MAX_RANK 32

bb_tensor_proto *rec_literal(bb_rec *r, const bb_literal *lit, const char *what) {
  if (!lit) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "%s: the literal is missing", what);
    return NULL;
  }
  size_t elem = bb_dtype_size(lit->dtype);
  if (!elem) {
    rec_error(r, BB_ERR_UNSUPPORTED, "%s: element type %d cannot be a literal (numeric and bool types only)",
              what, (int)lit->dtype);
    return NULL;
  }
  if (lit->n_dims > REC_MAX_RANK || (lit->n_dims && !lit->dims)) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "%s: %zu dims given %s", what, lit->n_dims,
              lit->dims ? "(at most 32 are allowed)" : "without the dims array");
    return NULL;
  }
  size_t numel = 1;
  for (size_t i = 0; i < lit->n_dims; i++) {
    int64_t d = lit->dims[i];
    if (d < 0 || (d > 0 && numel > SIZE_MAX / elem / (uint64_t)d)) {
      rec_error(r, BB_ERR_INVALID_ARGUMENT, "%s: dim %zu is %" PRId64 " (negative, or the size overflows)", what,
                i, d);
      return NULL;
    }
    numel *= (size_t)d;
  }
  size_t bytes = numel * elem;
  if (lit->data && lit->len != bytes) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "%s: %zu data bytes given, the dims need %zu", what, lit->len, bytes);
    return NULL;
  }
  const void *data = lit->data;
  if (!data && bytes && !(data = bbi_arena_alloc(r->scratch, bytes))) { /* zeros */
    rec_nomem(r);
    return NULL;
  }
  bb_tensor_proto *t = bb_tensor_proto_new(r->model, NULL, lit->dtype, lit->n_dims, lit->dims);
  if (!t || bb_tensor_proto_set_raw(r->model, t, data, bytes)) {
    rec_nomem(r);
    return NULL;
  }
  return t;
}

int rec_set_attr(bb_rec *r, bb_ir_node *n, const bb_op_attr *a, const char *op) {
  if (!a->name || !*a->name)
    return rec_error(r, BB_ERR_INVALID_ARGUMENT, "an attribute of %s has no name", op);
  if (bb_attr_find(&n->attrs, a->name))
    return rec_error(r, BB_ERR_EXISTS, "attribute '%s' of %s is given twice", a->name, op);
  bool list = a->type == BB_ATTR_INTS || a->type == BB_ATTR_FLOATS || a->type == BB_ATTR_STRINGS;
  const void *items = a->type == BB_ATTR_INTS ? (const void *)a->ints
                      : a->type == BB_ATTR_FLOATS ? (const void *)a->floats
                                                  : (const void *)a->strings;
  if ((list && a->n && !items) || (a->type == BB_ATTR_STRING && !a->s))
    return rec_error(r, BB_ERR_INVALID_ARGUMENT, "attribute '%s' of %s has no value", a->name, op);
  if (a->type == BB_ATTR_STRINGS)
    for (size_t i = 0; i < a->n; i++)
      if (!a->strings[i])
        return rec_error(r, BB_ERR_INVALID_ARGUMENT, "attribute '%s' of %s: string %zu is NULL", a->name, op, i);
  bb_attr *set = NULL;
  switch (a->type) {
  case BB_ATTR_INT: set = bb_attr_set_int(r->model, &n->attrs, a->name, a->i); break;
  case BB_ATTR_FLOAT: set = bb_attr_set_float(r->model, &n->attrs, a->name, a->f); break;
  case BB_ATTR_STRING: set = bb_attr_set_string(r->model, &n->attrs, a->name, a->s); break;
  case BB_ATTR_INTS: set = bb_attr_set_ints(r->model, &n->attrs, a->name, a->ints, a->n); break;
  case BB_ATTR_FLOATS: set = bb_attr_set_floats(r->model, &n->attrs, a->name, a->floats, a->n); break;
  case BB_ATTR_STRINGS: set = bb_attr_set_strings(r->model, &n->attrs, a->name, a->strings, a->n); break;
  case BB_ATTR_TENSOR: {
    char what[REC_NAME_MAX * 2 + 32];
    snprintf(what, sizeof what, "attribute '%s' of %s", a->name, op);
    bb_tensor_proto *t = rec_literal(r, a->t, what);
    if (!t) return r->error.code;
    set = bb_attr_set_tensor(r->model, &n->attrs, a->name, t);
    break;
  }
  default:
    return rec_error(r, BB_ERR_UNSUPPORTED,
                     "attribute '%s' of %s has type %s; the recorder takes INT, FLOAT, STRING, INTS, FLOATS, "
                     "STRINGS and TENSOR",
                     a->name, op, bb_attr_type_name(a->type) ? bb_attr_type_name(a->type) : "(unknown)");
  }
  return set ? 0 : rec_nomem(r);
}
