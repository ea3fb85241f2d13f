/* infer_peer_classes: stamps home_class on every node of the
 * root. The only class-changing edge is a Send's data output, homed on the class of
 * the Send's peers: a graph input feeding a Send's peer slot names its own class, a
 * PeerSelector's outputs carry its class, the sender of a value (a Send's third output)
 * the class that sent it, anything else is "@default". Peer-typed
 * values (bb.peer_id / bb.peer_id_vec, whatever their TypeProto kind, or stamped
 * peer_class) are ambient: reading them does not pin a node. */
#include <string.h>

#include "compiler/compiler.h"

typedef struct homes {
  bbi_strmap map; /* value → index in names */
  const char **names;
  size_t n, cap;
} homes;

static int put(cc_ctx *x, homes *h, const char *v, const char *klass) {
  if (!*v) return 0;
  if (h->n == h->cap) {
    size_t cap = h->cap ? h->cap * 2 : 64;
    const char **g = bbi_arena_grow(x->m->arena, (void *)h->names, h->cap * sizeof *g, cap * sizeof *g);
    if (!g) return cc_nomem(x);
    h->names = g;
    h->cap = cap;
  }
  h->names[h->n] = klass;
  return bbi_strmap_put(&h->map, v, (uint32_t)h->n++) ? cc_nomem(x) : 0;
}

static const char *get(const homes *h, const char *v) {
  uint32_t i;
  return *v && bbi_strmap_get(&h->map, v, &i) ? h->names[i] : NULL;
}

static bool allow_listed(const bb_ir_node *n) {
  static const char *const OPS[] = {"Identity", "Slice", "Gather", "Concat", "Squeeze", "Unsqueeze"};
  if (!cc_domain_is(n, "")) return false;
  for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++)
    if (strcmp(n->op_type, OPS[i]) == 0) return true;
  return false;
}

/* Walks a Send's peer input back through pass-through ONNX ops and stamps the value
 * infos of the roots (values nobody produces: graph inputs) with peer_class = name. */
static int trace_peer_sources(cc_ctx *x, bb_function *f, const bbi_strmap *producers) {
  size_t cap = 64, len = 0;
  const char **stack = bbi_arena_alloc(x->m->arena, cap * sizeof *stack);
  if (!stack) return cc_nomem(x);
  for (size_t i = 0; i < f->nodes.len; i++) {
    const bb_ir_node *send = f->nodes.items[i];
    if (!cc_is(send, BB_DOMAIN_WIRE, "Send") || send->inputs.len < 2) continue;
    len = 0;
    stack[len++] = send->inputs.items[send->inputs.len - 1];
    size_t guard = 0;
    while (len && guard++ < 4 * f->nodes.len + 16) {
      const char *v = stack[--len];
      uint32_t p;
      if (!*v) continue;
      if (!bbi_strmap_get(producers, v, &p)) {
        bb_value_info *vi = cc_find_vi(x, f, v);
        if (vi && !bb_kv_get(&vi->metadata, BB_KEY_PEER_CLASS) && bb_kv_append(x->m, &vi->metadata, BB_KEY_PEER_CLASS, v))
          return cc_nomem(x);
        continue;
      }
      const bb_ir_node *prod = f->nodes.items[p];
      if (!allow_listed(prod)) continue;
      for (size_t k = 0; k < prod->inputs.len; k++) {
        if (len == cap) {
          const char **g = bbi_arena_grow(x->m->arena, (void *)stack, cap * sizeof *g, 2 * cap * sizeof *g);
          if (!g) return cc_nomem(x);
          stack = g;
          cap *= 2;
        }
        stack[len++] = prod->inputs.items[k];
      }
    }
  }
  return 0;
}

static bool is_ambient(cc_ctx *x, const bb_function *f, const char *v) {
  const bb_value_info *vi = cc_find_vi(x, f, v);
  if (!vi) return false;
  if (bb_kv_get(&vi->metadata, BB_KEY_PEER_CLASS)) return true;
  const char *t = vi->type && vi->type->denotation ? vi->type->denotation : "";
  return strcmp(t, BB_TYPE_PEER_ID) == 0 || strcmp(t, BB_TYPE_PEER_ID_VEC) == 0;
}

int cc_infer_peer_classes(cc_ctx *x) {
  bb_function *f = x->root;
  bbi_strmap producers;
  bbi_strmap_init(&producers, bbi_arena_allocator(x->m->arena));
  homes home = {0}, peer = {0};
  bbi_strmap_init(&home.map, bbi_arena_allocator(x->m->arena));
  bbi_strmap_init(&peer.map, bbi_arena_allocator(x->m->arena));
  int rc = cc_index_producers(x, &f->nodes, &producers);
  if (!rc) rc = trace_peer_sources(x, f, &producers);
  for (size_t i = 0; i < f->inputs.len && !rc; i++) rc = put(x, &home, f->inputs.items[i], BB_SELF_CLASS);
  for (size_t i = 0; i < f->value_infos.len && !rc; i++) {
    const bb_value_info *vi = f->value_infos.items[i];
    const char *pc = vi->name ? bb_kv_get(&vi->metadata, BB_KEY_PEER_CLASS) : NULL;
    if (pc) rc = put(x, &peer, vi->name, pc);
  }
  for (size_t i = 0; i < f->nodes.len && !rc; i++) {
    bb_ir_node *n = f->nodes.items[i];
    const char *klass = cc_meta(n, BB_KEY_HOME_CLASS);
    const char *own = cc_meta(n, BB_KEY_PEER_CLASS);
    if (own)
      for (size_t o = 0; o < n->outputs.len && !rc; o++) rc = put(x, &peer, n->outputs.items[o], own);
    if (klass) {
      for (size_t o = 0; o < n->outputs.len && !rc; o++) rc = put(x, &home, n->outputs.items[o], klass);
      continue;
    }
    if (cc_is(n, BB_DOMAIN_WIRE, "Send")) {
      const char *payload = n->inputs.len ? get(&home, n->inputs.items[0]) : NULL;
      if (!payload) payload = BB_SELF_CLASS;
      const char *dest = n->inputs.len ? get(&peer, n->inputs.items[n->inputs.len - 1]) : NULL;
      if (!dest) dest = BB_DEFAULT_CLASS;
      if (n->outputs.len) rc = put(x, &home, n->outputs.items[0], n->outputs.len >= 2 ? dest : payload);
      if (!rc && n->outputs.len >= 2) rc = put(x, &home, n->outputs.items[1], payload);
      /* the sender of what arrives (bb_rec_lookup_sender) lives where the value lands and
       * names the sending class: a Send to it answers that class */
      if (!rc && n->outputs.len >= 3) rc = put(x, &home, n->outputs.items[2], dest);
      if (!rc && n->outputs.len >= 3) rc = put(x, &peer, n->outputs.items[2], payload);
      klass = payload;
    } else if (cc_is(n, BB_DOMAIN_WIRE, "Recv")) {
      klass = BB_SELF_CLASS;
      for (size_t o = 0; o < n->outputs.len && !rc; o++) rc = put(x, &home, n->outputs.items[o], klass);
    } else {
      for (size_t k = 0; k < n->inputs.len && !rc; k++) {
        const char *v = n->inputs.items[k];
        const char *h = *v && !is_ambient(x, f, v) ? get(&home, v) : NULL;
        if (!h) continue;
        if (!klass) klass = h;
        else if (strcmp(klass, h) != 0)
          rc = cc_fail(x, BB_COMPILE_CROSS_CLASS_DATAFLOW,
                       "node `%s` reads values homed on peer class `%s` and on `%s` (`%s`); move the work to one "
                       "side of the wire",
                       cc_node_label(x, f, n), klass, h, v);
      }
      if (!klass) klass = BB_SELF_CLASS;
      for (size_t o = 0; o < n->outputs.len && !rc; o++) rc = put(x, &home, n->outputs.items[o], klass);
    }
    if (!rc && bb_kv_upsert(x->m, &n->metadata, BB_KEY_HOME_CLASS, klass)) rc = cc_nomem(x);
  }
  bbi_strmap_free(&producers);
  bbi_strmap_free(&home.map);
  bbi_strmap_free(&peer.map);
  return rc;
}
