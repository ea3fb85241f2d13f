/* bind_split: a split (bb_rec_split) is one model whose parts the compiler places. Every op
 * on a split's Model slots carries the cuts, the shape and its side; this pass checks that
 * the two sides are two slots on two peer classes, one split per Module, and appends
 * `cuts=...,side=...,shape=...` to each side's binding config, so the component bound
 * there (SplitModel) builds the part it holds from the same model. An author's config that
 * sets those keys itself is refused: the Module decides where the model is cut.
 * Each part is bound only on the partitions that hold it, and so is the DataSource only the
 * clients' part draws from: a phone builds its own layers, not the server's, and a server
 * needs no data set (cc_split_binds, read when the passport is stamped).
 * The split's messages live as long as a client's step waits for its answer (the client
 * part's timeout_ms): their Sends' deadline is that, not the per-hop budget, so an answer
 * that took a slow link or a busy server is still taken rather than dropped and waited for
 * in vain. */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler.h"

typedef struct split_side {
  const char *slot, *klass, *cuts, *shape;
} split_side;

static bool is_split_op(const bb_ir_node *n) { return strncmp(n->op_type, "Split", 5) == 0; }

/* Records n's side; refuses a second split or a side split over two classes. */
static int take(cc_ctx *x, split_side *sides, const bb_ir_node *n) {
  const char *side = cc_meta(n, BB_KEY_SPLIT_SIDE), *slot = cc_meta(n, BB_KEY_SLOT_NAME);
  const char *cuts = cc_meta(n, BB_KEY_SPLIT_CUTS), *shape = cc_meta(n, BB_KEY_SPLIT_SHAPE);
  const char *klass = cc_meta(n, BB_KEY_HOME_CLASS);
  int i = side && strcmp(side, BB_SPLIT_SIDE_CLIENT) == 0 ? 0 : side && strcmp(side, BB_SPLIT_SIDE_SERVER) == 0 ? 1 : -1;
  if (i < 0 || !slot || !cuts || !shape)
    return cc_fail(x, BB_COMPILE_SPLIT_PLACEMENT, "node `%s` (%s) carries a split side `%s` without its slot, cuts or shape",
                   cc_node_label(x, x->root, n), n->op_type, side ? side : "");
  if (!klass) klass = BB_SELF_CLASS;
  split_side *s = &sides[i];
  if (!s->slot) {
    *s = (split_side){slot, klass, cuts, shape};
    return 0;
  }
  if (strcmp(s->slot, slot) != 0 || strcmp(s->cuts, cuts) != 0 || strcmp(s->shape, shape) != 0)
    return cc_fail(x, BB_COMPILE_SPLIT_PLACEMENT,
                   "the Module records two splits (the %s part in slot `%s` cut at %s, and in slot `%s` cut at %s); one "
                   "split per Module",
                   side, s->slot, s->cuts, slot, cuts);
  if (strcmp(s->klass, klass) != 0)
    return cc_fail(x, BB_COMPILE_SPLIT_PLACEMENT,
                   "the split's %s part (slot `%s`) runs on peer classes `%s` and `%s`; a part lives on one class", side,
                   slot, s->klass, klass);
  return 0;
}

/* Whether a config text ("k=v,k=v") sets `key`. */
static bool sets_key(const char *config, const char *key) {
  size_t len = strlen(key);
  for (const char *p = config; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
    while (*p == ' ') p++;
    if (strncmp(p, key, len) == 0 && (p[len] == '=' || p[len] == ' ')) return true;
  }
  return false;
}

/* Appends the side's part to the config of the binding of its slot (the compile's copy). */
static int bind_side(cc_ctx *x, const split_side *s, const char *side) {
  static const char *const KEYS[] = {"cuts", "side", "shape"};
  for (size_t i = 0; i < x->c->bindings.len; i++) {
    cc_binding *b = &x->c->bindings.items[i];
    if (strcmp(b->slot, s->slot) != 0) continue;
    const char *old = b->config ? b->config : "";
    for (size_t k = 0; k < 3; k++)
      if (sets_key(old, KEYS[k]))
        return cc_fail(x, BB_COMPILE_SPLIT_PLACEMENT,
                       "slot `%s`'s config sets `%s`; the Module's split decides it (cut at %s, %s, the %s part)", s->slot,
                       KEYS[k], s->cuts, s->shape, side);
    char *config = cc_printf(x, "%s%scuts=%s,side=%s,shape=%s", old, *old ? "," : "", s->cuts, side, s->shape);
    if (!config) return cc_nomem(x);
    b->config = config;
  }
  return 0; /* an unbound slot is reported with the others */
}

/* The value of `key` in a config text ("k=v,k=v"), or NULL; *len its length. */
static const char *config_value(const char *config, const char *key, size_t *len) {
  size_t klen = strlen(key);
  for (const char *p = config; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
    while (*p == ' ') p++;
    const char *end = strchr(p, ',');
    if (strncmp(p, key, klen) != 0 || p[klen] != '=') continue;
    *len = end ? (size_t)(end - p - klen - 1) : strlen(p + klen + 1);
    return p + klen + 1;
  }
  return NULL;
}

/* The client part's timeout_ms as the split's messages' deadline in ns (BB_SPLIT_TIMEOUT_MS
 * unless its config sets a whole number; a bad one SplitModel itself refuses at install). */
static int64_t step_life_ns(const cc_ctx *x) {
  const cc_binding *client = cc_find_binding(x->c, x->split.client);
  size_t len = 0;
  const char *v = client && client->config ? config_value(client->config, "timeout_ms", &len) : NULL;
  uint64_t ms = BB_SPLIT_TIMEOUT_MS;
  if (v && len && len < 12 && strspn(v, "0123456789") >= len) ms = strtoull(v, NULL, 10);
  return (int64_t)(ms ? ms : BB_SPLIT_TIMEOUT_MS) * 1000000;
}

/* The split's Sends (stamped by the recorder) get a client step's life as their deadline. */
static int set_deadlines(cc_ctx *x) {
  int64_t ns = step_life_ns(x);
  for (size_t i = 0; i < x->parts.len; i++) {
    bb_function *f = x->parts.items[i].fn;
    for (size_t k = 0; k < f->nodes.len; k++) {
      bb_ir_node *n = f->nodes.items[k];
      if (cc_is(n, BB_DOMAIN_WIRE, "Send") && cc_meta(n, BB_KEY_SPLIT_CUTS) &&
          !bb_attr_set_int(x->m, &n->attrs, BB_ATTR_DEADLINE_NS, ns))
        return cc_nomem(x);
    }
  }
  return 0;
}

/* Whether a config text ("k=v,k=v") has a value that is `slot`. */
static bool names_slot(const char *config, const char *slot) {
  size_t len = strlen(slot);
  for (const char *p = config; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
    const char *eq = strchr(p, '='), *end = strchr(p, ',');
    if (!eq || (end && eq > end)) continue;
    const char *v = eq + 1;
    while (*v == ' ') v++;
    size_t vlen = (end ? (size_t)(end - v) : strlen(v));
    while (vlen && v[vlen - 1] == ' ') vlen--;
    if (vlen == len && strncmp(v, slot, len) == 0) return true;
  }
  return false;
}

/* Whether any binding but the split's parts reaches `slot`: a dependency it declares, or a
 * value of its config. */
static bool reached_outside_split(const cc_ctx *x, const char *slot) {
  const bb_compiler *c = x->c;
  for (size_t i = 0; i < c->bindings.len; i++) {
    const cc_binding *b = &c->bindings.items[i];
    if (strcmp(b->slot, x->split.client) == 0 || strcmp(b->slot, x->split.server) == 0 || strcmp(b->slot, slot) == 0)
      continue;
    if (b->config && names_slot(b->config, slot)) return true;
    const cc_component *k = cc_find_component(c, b->type);
    for (size_t d = 0; k && d < k->n_deps; d++)
      if (strcmp(k->deps[d].slot, slot) == 0) return true;
  }
  return false;
}

/* The DataSource the clients' part draws from, as its type declares it, when nothing else
 * reaches that slot; else NULL. */
static const char *clients_data(const cc_ctx *x) {
  const cc_binding *client = cc_find_binding(x->c, x->split.client);
  const cc_component *k = client ? cc_find_component(x->c, client->type) : NULL;
  for (size_t d = 0; k && d < k->n_deps; d++)
    if (k->deps[d].role == BB_ROLE_DATA_SOURCE)
      return reached_outside_split(x, k->deps[d].slot) ? NULL : k->deps[d].slot;
  return NULL;
}

/* Whether an op of partition p calls `slot`. */
static bool calls(const cc_partition *p, const char *slot) {
  for (size_t i = 0; i < p->fn->nodes.len; i++) {
    const char *s = cc_meta(p->fn->nodes.items[i], BB_KEY_SLOT_NAME);
    if (s && strcmp(s, slot) == 0) return true;
  }
  return false;
}

bool cc_split_binds(const cc_ctx *x, const cc_partition *p, const cc_binding *b) {
  if (!x->split.client) return true;
  if (strcmp(b->slot, x->split.client) == 0 || strcmp(b->slot, x->split.server) == 0) return calls(p, b->slot);
  if (x->split.data && strcmp(b->slot, x->split.data) == 0) return calls(p, b->slot) || calls(p, x->split.client);
  return true;
}

int cc_bind_split(cc_ctx *x) {
  split_side sides[2] = {{0}};
  const bb_function *f = x->root;
  for (size_t i = 0; i < f->nodes.len; i++) {
    const bb_ir_node *n = f->nodes.items[i];
    if (!cc_domain_is(n, BB_DOMAIN_ROLE_MODEL)) continue;
    if (!cc_meta(n, BB_KEY_SPLIT_SIDE)) {
      if (is_split_op(n))
        return cc_fail(x, BB_COMPILE_SPLIT_PLACEMENT,
                       "node `%s` (%s, slot `%s`) is a split op without a split: record it with bb_rec_split, which says "
                       "where the model is cut",
                       cc_node_label(x, f, n), n->op_type, cc_meta(n, BB_KEY_SLOT_NAME) ? cc_meta(n, BB_KEY_SLOT_NAME) : "?");
      continue;
    }
    int rc = take(x, sides, n);
    if (rc) return rc;
  }
  if (!sides[0].slot && !sides[1].slot) return 0;
  if (!sides[0].slot || !sides[1].slot)
    return cc_fail(x, BB_COMPILE_SPLIT_PLACEMENT, "the split has a %s part only", sides[0].slot ? "client" : "server");
  if (strcmp(sides[0].klass, sides[1].klass) == 0)
    return cc_fail(x, BB_COMPILE_SPLIT_PLACEMENT,
                   "the split's client part (slot `%s`) and server part (slot `%s`) both run on peer class `%s`: the "
                   "server's peers must be another class (a peer-typed input names it)",
                   sides[0].slot, sides[1].slot, sides[0].klass);
  int rc = bind_side(x, &sides[0], BB_SPLIT_SIDE_CLIENT);
  if (!rc) rc = bind_side(x, &sides[1], BB_SPLIT_SIDE_SERVER);
  if (rc) return rc;
  x->split.client = sides[0].slot;
  x->split.server = sides[1].slot;
  x->split.data = clients_data(x);
  return set_deadlines(x);
}
