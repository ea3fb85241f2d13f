/* Small helpers the passes share: node labels and predicates, metadata and value-type
 * access, node copies. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "compiler/compiler.h"

bool cc_domain_is(const bb_ir_node *n, const char *domain) {
  if (bb_domain_is_onnx(domain)) return bb_domain_is_onnx(n->domain);
  return n->domain && strcmp(n->domain, domain) == 0;
}

bool cc_is(const bb_ir_node *n, const char *domain, const char *op_type) {
  return n->op_type && strcmp(n->op_type, op_type) == 0 && cc_domain_is(n, domain);
}

const char *cc_meta(const bb_ir_node *n, const char *key) { return bb_kv_get(&n->metadata, key); }

char *cc_printf(cc_ctx *x, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return NULL;
  char *s = bbi_arena_alloc(x->m->arena, (size_t)n + 1);
  if (!s) return NULL;
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}

const char *cc_node_label(cc_ctx *x, const bb_function *f, const bb_ir_node *n) {
  if (n->name && *n->name) return n->name;
  long i = f ? bb_nodelist_index(&f->nodes, n) : -1;
  const char *d = n->domain && *n->domain ? n->domain : BB_DOMAIN_ONNX_ALIAS;
  const char *s = i >= 0 ? cc_printf(x, "%s::%s#%ld", d, n->op_type ? n->op_type : "", i)
                         : cc_printf(x, "%s::%s", d, n->op_type ? n->op_type : "");
  return s ? s : "?";
}

bool cc_parse_u32(const char *s, uint32_t *out) {
  if (!s || !*s) return false;
  uint64_t v = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + (uint64_t)(*p - '0');
    if (v > UINT32_MAX) return false;
  }
  *out = (uint32_t)v;
  return true;
}

bb_value_info *cc_find_vi(cc_ctx *x, const bb_function *f, const char *name) {
  if (x->vi_fn != f || x->vi_len > f->value_infos.len) {
    if (x->vi_fn) bbi_strmap_free(&x->vi_map);
    bbi_strmap_init(&x->vi_map, bbi_arena_allocator(x->m->arena));
    x->vi_fn = f;
    x->vi_len = 0;
  }
  for (; x->vi_len < f->value_infos.len; x->vi_len++) {
    const char *n = f->value_infos.items[x->vi_len]->name;
    uint32_t prev;
    if (!n || bbi_strmap_get(&x->vi_map, n, &prev)) continue;
    if (bbi_strmap_put(&x->vi_map, n, (uint32_t)x->vi_len)) {
      /* out of memory: fall back to the linear search */
      bbi_strmap_free(&x->vi_map);
      x->vi_fn = NULL;
      return bb_vilist_find(&f->value_infos, name);
    }
  }
  uint32_t i;
  return bbi_strmap_get(&x->vi_map, name, &i) ? f->value_infos.items[i] : NULL;
}

const char *cc_value_type(cc_ctx *x, const bb_function *f, const char *value) {
  const bb_value_info *vi = cc_find_vi(x, f, value);
  return vi && vi->type && vi->type->denotation ? vi->type->denotation : "";
}

int cc_set_value_type(cc_ctx *x, bb_function *f, const char *value, const char *denotation) {
  /* a fresh TypeProto, so the tensor/opaque encoding agrees with the denotation */
  bb_type *t = bb_value_type_new(x->m, denotation);
  if (!t) return cc_nomem(x);
  bb_value_info *vi = cc_find_vi(x, f, value);
  if (vi) {
    vi->type = t;
    return 0;
  }
  return bb_vilist_add(x->m, &f->value_infos, value, t) ? 0 : cc_nomem(x);
}

bb_ir_node *cc_node_clone(cc_ctx *x, const bb_ir_node *n) {
  bb_ir_node *c = bb_ir_node_new(x->m, n->op_type, n->domain, n->name);
  if (!c) return NULL;
  c->overload = n->overload;
  c->doc_string = n->doc_string;
  c->extra = n->extra;
  for (size_t i = 0; i < n->inputs.len; i++)
    if (bb_strlist_append(x->m, &c->inputs, n->inputs.items[i])) return NULL;
  for (size_t i = 0; i < n->outputs.len; i++)
    if (bb_strlist_append(x->m, &c->outputs, n->outputs.items[i])) return NULL;
  for (size_t i = 0; i < n->attrs.len; i++)
    if (BBI_ARENA_PUSH(x->m->arena, &c->attrs, n->attrs.items[i])) return NULL;
  for (size_t i = 0; i < n->metadata.len; i++)
    if (bb_kv_append(x->m, &c->metadata, n->metadata.items[i].key, n->metadata.items[i].value)) return NULL;
  return c;
}

const char *cc_canonical_role(const char *trait) {
  bb_role r = bb_role_from_trait(trait);
  return r ? bb_role_name(r) : trait;
}

bool cc_is_role_domain(const char *domain) {
  return domain && strncmp(domain, BB_DOMAIN_ROLE_PREFIX, sizeof BB_DOMAIN_ROLE_PREFIX - 1) == 0;
}

int cc_index_producers(cc_ctx *x, const bb_nodelist *nodes, bbi_strmap *map) {
  for (size_t i = 0; i < nodes->len; i++) {
    const bb_ir_node *n = nodes->items[i];
    for (size_t o = 0; o < n->outputs.len; o++) {
      const char *v = n->outputs.items[o];
      uint32_t prev;
      if (!*v || bbi_strmap_get(map, v, &prev)) continue;
      if (bbi_strmap_put(map, v, (uint32_t)i)) return cc_nomem(x);
    }
  }
  return 0;
}

const char *cc_wire_of_send(cc_ctx *x, const bb_ir_node *send) {
  const char *named = cc_meta(send, BB_KEY_WIRE_ID);
  if (named) return named;
  return cc_printf(x, "%s.%s", x->root && x->root->name ? x->root->name : "",
                   send->outputs.len ? send->outputs.items[0] : "");
}
