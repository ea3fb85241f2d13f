/* partition_by_wire_ops and the naming of partitions: nodes are grouped by home_class
 * (classes sorted, node order kept) into one function per class, and every synthesized
 * Recv is paired with its Send by the Send's index (synthesized_from_send) into a wire
 * edge. A partition keeps the root's inputs,
 * attributes and metadata, the root outputs its own nodes produce, and the value infos
 * of the values it uses; its metadata also records its peer class. */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler.h"
#include "bb/bytes.h"
#include "util/hash.h"

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static const char *home_of(const bb_ir_node *n) {
  const char *h = cc_meta(n, BB_KEY_HOME_CLASS);
  return h ? h : BB_SELF_CLASS;
}

static int use(cc_ctx *x, bbi_strmap *used, const char *v) {
  return *v && bbi_strmap_put(used, v, 1) ? cc_nomem(x) : 0;
}

static int build_partition(cc_ctx *x, const char *klass) {
  const bb_function *root = x->root;
  bb_function *p = bb_function_new(x->m, root->name, root->domain);
  if (!p) return cc_nomem(x);
  bbi_strmap used;
  bbi_strmap_init(&used, bbi_arena_allocator(x->m->arena));
  int rc = 0;
  for (size_t i = 0; i < root->nodes.len && !rc; i++) {
    bb_ir_node *n = root->nodes.items[i];
    if (strcmp(home_of(n), klass) != 0) continue;
    if (bb_nodelist_append(x->m, &p->nodes, n)) rc = cc_nomem(x);
    for (size_t k = 0; k < n->inputs.len && !rc; k++) rc = use(x, &used, n->inputs.items[k]);
    for (size_t k = 0; k < n->outputs.len && !rc; k++) rc = use(x, &used, n->outputs.items[k]);
  }
  uint32_t dummy;
  for (size_t i = 0; i < root->inputs.len && !rc; i++) {
    if (bb_strlist_append(x->m, &p->inputs, root->inputs.items[i])) rc = cc_nomem(x);
    else rc = use(x, &used, root->inputs.items[i]);
  }
  for (size_t i = 0; i < root->outputs.len && !rc; i++)
    if (bb_nodelist_producer(&p->nodes, root->outputs.items[i]) &&
        bb_strlist_append(x->m, &p->outputs, root->outputs.items[i]))
      rc = cc_nomem(x);
  for (size_t i = 0; i < root->attr_names.len && !rc; i++)
    if (bb_strlist_append(x->m, &p->attr_names, root->attr_names.items[i])) rc = cc_nomem(x);
  p->attr_protos = root->attr_protos;
  p->doc_string = root->doc_string;
  for (size_t i = 0; i < root->value_infos.len && !rc; i++) {
    const bb_value_info *vi = root->value_infos.items[i];
    if (!vi->name || !bbi_strmap_get(&used, vi->name, &dummy)) continue;
    bb_value_info *mine = bb_vilist_add(x->m, &p->value_infos, vi->name, vi->type);
    if (!mine) rc = cc_nomem(x);
    else mine->metadata = vi->metadata, mine->doc_string = vi->doc_string;
  }
  for (size_t i = 0; i < root->metadata.len && !rc; i++)
    if (bb_kv_append(x->m, &p->metadata, root->metadata.items[i].key, root->metadata.items[i].value)) rc = cc_nomem(x);
  if (!rc && bb_kv_upsert(x->m, &p->metadata, BB_KEY_PEER_CLASS, klass)) rc = cc_nomem(x);
  bbi_strmap_free(&used);
  cc_partition part = {klass, p};
  if (!rc && BBI_ARENA_PUSH(x->m->arena, &x->parts, part)) rc = cc_nomem(x);
  return rc;
}

static const bb_ir_node *send_by_index(const bb_function *f, uint32_t idx) {
  for (size_t i = 0; i < f->nodes.len; i++) {
    const bb_ir_node *n = f->nodes.items[i];
    if (!cc_is(n, BB_DOMAIN_WIRE, "Send") || !n->outputs.len) continue;
    const char *tag = strstr(n->outputs.items[0], "__send_sentinel_");
    uint32_t k;
    if (tag && cc_parse_u32(tag + 16, &k) && k == idx) return n;
  }
  return NULL;
}

static int pair_wire_edges(cc_ctx *x) {
  const bb_function *f = x->root;
  for (size_t i = 0; i < f->nodes.len; i++) {
    bb_ir_node *recv = f->nodes.items[i];
    if (!cc_is(recv, BB_DOMAIN_WIRE, "Recv") || !recv->outputs.len) continue;
    uint32_t idx;
    const char *from = cc_meta(recv, BB_KEY_SYNTHESIZED_FROM_SEND);
    if (!from || !cc_parse_u32(from, &idx)) continue; /* hand-built: not ours to pair */
    bb_ir_node *send = (bb_ir_node *)send_by_index(f, idx);
    if (!send || !send->inputs.len)
      return cc_fail(x, BB_COMPILE_INTERNAL, "Recv `%s` was synthesized from Send %u, which is gone",
                     recv->outputs.items[0], idx);
    cc_edge e = {send, recv, home_of(send), home_of(recv), send->inputs.items[0], recv->outputs.items[0], 0};
    /* dense batch group per (from, to) pair, in edge order */
    uint32_t group = 0;
    bool found = false;
    for (size_t k = 0; k < x->edges.len && !found; k++) {
      const cc_edge *o = &x->edges.items[k];
      if (strcmp(o->from_class, e.from_class) == 0 && strcmp(o->to_class, e.to_class) == 0)
        group = o->batch_group, found = true;
      else if (o->batch_group + 1 > group)
        group = o->batch_group + 1;
    }
    e.batch_group = group;
    if (BBI_ARENA_PUSH(x->m->arena, &x->edges, e)) return cc_nomem(x);
  }
  return 0;
}

/* Only graph inputs and wire edges cross peer classes: a node reading a value another
 * class produces (a peer list picked on the sending side, say, used on the receiving
 * one) would find nothing at run time, so such a read is reported. */
static int check_closed(cc_ctx *x, const cc_partition *p) {
  const bb_function *f = p->fn;
  bbi_strmap produced;
  bbi_strmap_init(&produced, bbi_arena_allocator(x->m->arena));
  int rc = cc_index_producers(x, &f->nodes, &produced);
  uint32_t dummy;
  for (size_t i = 0; i < f->nodes.len && !rc; i++) {
    const bb_ir_node *n = f->nodes.items[i];
    for (size_t k = 0; k < n->inputs.len && !rc; k++) {
      const char *v = n->inputs.items[k];
      if (!*v || bbi_strmap_get(&produced, v, &dummy) || bb_strlist_find(&f->inputs, v) >= 0) continue;
      const bb_ir_node *prod = bb_nodelist_producer(&x->root->nodes, v);
      rc = cc_fail(x, BB_COMPILE_CROSS_CLASS_DATAFLOW,
                   "node `%s` on peer class `%s` reads `%s`, produced on class `%s`; only graph inputs and wire "
                   "edges cross peer classes",
                   cc_node_label(x, x->root, n), p->klass, v, prod ? home_of(prod) : "?");
    }
  }
  bbi_strmap_free(&produced);
  return rc;
}

int cc_partition_root(cc_ctx *x) {
  const bb_function *f = x->root;
  const char **classes = bbi_arena_alloc(x->m->arena, (f->nodes.len + 1) * sizeof *classes);
  if (!classes) return cc_nomem(x);
  size_t nc = 0;
  for (size_t i = 0; i < f->nodes.len; i++) {
    const char *h = home_of(f->nodes.items[i]);
    bool seen = false;
    for (size_t j = 0; j < nc && !seen; j++) seen = strcmp(classes[j], h) == 0;
    if (!seen) classes[nc++] = h;
  }
  if (!nc) classes[nc++] = BB_SELF_CLASS; /* an empty body still installs somewhere */
  qsort(classes, nc, sizeof *classes, cmp_str);
  for (size_t j = 0; j < nc; j++) {
    int rc = build_partition(x, classes[j]);
    if (!rc) rc = check_closed(x, &x->parts.items[x->parts.len - 1]);
    if (rc) return rc;
  }
  return pair_wire_edges(x);
}

/* ---- naming ---------------------------------------------------------------------- */

typedef struct fnv {
  uint64_t h;
} fnv;

static void fnv_bytes(fnv *s, const void *data, size_t len) {
  const uint8_t *p = data;
  s->h = bbi_fnv1a64_update(s->h, p, len);
}

static void fnv_u64(fnv *s, uint64_t v) {
  uint8_t b[8];
  bb_le_put_u64(b, v);
  fnv_bytes(s, b, 8);
}

/* Length-prefixed, so ("ab","c") and ("a","bc") differ. */
static void fnv_str(fnv *s, const char *str) {
  size_t n = str ? strlen(str) : 0;
  fnv_u64(s, n);
  fnv_bytes(s, str ? str : "", n);
}

/* FNV-1a 64 over each node's op_type, domain, overload, input and output counts and
 * names, and attribute names (values and metadata ignored): two functions with equal
 * hashes have the same structure, whatever their constants. */
static uint64_t hash_nodes(const bb_function *f) {
  fnv s = {BBI_FNV1A64_INIT};
  for (size_t i = 0; i < f->nodes.len; i++) {
    const bb_ir_node *n = f->nodes.items[i];
    fnv_str(&s, n->op_type);
    fnv_str(&s, n->domain);
    fnv_str(&s, n->overload);
    fnv_u64(&s, n->inputs.len);
    fnv_u64(&s, n->outputs.len);
    for (size_t k = 0; k < n->inputs.len; k++) fnv_str(&s, n->inputs.items[k]);
    for (size_t k = 0; k < n->outputs.len; k++) fnv_str(&s, n->outputs.items[k]);
    for (size_t k = 0; k < n->attrs.len; k++) fnv_str(&s, n->attrs.items[k]->name);
  }
  return s.h;
}

int cc_name_partition(cc_ctx *x, cc_partition *p) {
  const char *root = x->root->name ? x->root->name : "";
  size_t rn = strlen(root);
  const char *base;
  if (strcmp(p->klass, BB_SELF_CLASS) == 0) base = root;
  else if (strcmp(p->klass, BB_DEFAULT_CLASS) == 0) base = cc_printf(x, "%s_default", root); /* defect #12 */
  else if (strcmp(p->klass, root) == 0 || (strncmp(p->klass, root, rn) == 0 && p->klass[rn] == '_')) base = p->klass;
  else base = cc_printf(x, "%s_%s", root, p->klass);
  char *name = base ? cc_printf(x, "%s#%016llx", base, (unsigned long long)hash_nodes(p->fn)) : NULL;
  if (!name) return cc_nomem(x);
  p->fn->name = name;
  return 0;
}
