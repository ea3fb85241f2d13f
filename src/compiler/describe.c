/* bb_artifact_describe: what `bb inspect` prints about a compiled artifact — its
 * partitions and their nodes, the wire edges between its partitions (a Send's
 * dest_site_name entry paired with each Recv listening to that wire), the wires it sends
 * on and receives from, and the binding table — as text, Graphviz DOT or JSON. Reads
 * only the artifact. */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler.h"
#include "util/strbuf.h"

typedef struct wire_edge {
  const bb_function *from, *to;
  const bb_ir_node *send, *recv;
  const char *value, *site, *wire;
} wire_edge;

static bool is_partition(const bb_function *f) { return bb_kv_get(&f->metadata, BB_KEY_PEER_CLASS) != NULL; }

static const char *class_of(const bb_function *f) {
  const char *c = bb_kv_get(&f->metadata, BB_KEY_PEER_CLASS);
  return c ? c : "";
}

static bool node_is(const bb_ir_node *n, const char *domain, const char *op) {
  return n->op_type && strcmp(n->op_type, op) == 0 && n->domain && strcmp(n->domain, domain) == 0;
}

/* Collects every wire edge (up to cap; returns how many there are), in partition, node
 * and metadata order. */
static size_t collect_edges(const bb_model *m, wire_edge *out, size_t cap) {
  size_t n = 0;
  const size_t plen = strlen(BB_KEY_DEST_SITE_PREFIX);
  for (size_t f = 0; f < m->functions.len; f++) {
    const bb_function *fn = m->functions.items[f];
    if (!is_partition(fn)) continue;
    for (size_t i = 0; i < fn->nodes.len; i++) {
      const bb_ir_node *send = fn->nodes.items[i];
      if (!node_is(send, BB_DOMAIN_WIRE, "Send")) continue;
      for (size_t k = 0; k < send->metadata.len; k++) {
        const bb_kv *kv = &send->metadata.items[k];
        if (!kv->key || !kv->value || strncmp(kv->key, BB_KEY_DEST_SITE_PREFIX, plen) != 0) continue;
        for (size_t g = 0; g < m->functions.len; g++) {
          const bb_function *to = m->functions.items[g];
          for (size_t r = 0; is_partition(to) && r < to->nodes.len; r++) {
            const bb_ir_node *recv = to->nodes.items[r];
            const char *wire = bb_kv_get(&recv->metadata, BB_KEY_WIRE_ID);
            if (!node_is(recv, BB_DOMAIN_WIRE, "Recv") || !recv->outputs.len || !wire || strcmp(wire, kv->value) != 0)
              continue;
            if (n < cap) out[n] = (wire_edge){fn, to, send, recv, kv->key + plen, recv->outputs.items[0], kv->value};
            n++;
          }
        }
      }
    }
  }
  return n;
}

typedef struct binding {
  const char *target, *slot, *role, *type, *slot_id;
} binding;

/* Splits key "…binding.<target>.<slot>" and value "<Role>|<type>|<id>" into buf. */
static bool parse_binding(const bb_kv *kv, char *buf, size_t cap, binding *b) {
  const size_t plen = strlen(BB_KEY_BINDING_PREFIX);
  if (!kv->key || !kv->value || strncmp(kv->key, BB_KEY_BINDING_PREFIX, plen) != 0) return false;
  size_t kl = strlen(kv->key + plen), vl = strlen(kv->value);
  if (kl + vl + 2 > cap) return false;
  memcpy(buf, kv->key + plen, kl + 1);
  char *dot = strchr(buf, '.');
  if (!dot) return false;
  *dot = 0;
  char *v = buf + kl + 1;
  memcpy(v, kv->value, vl + 1);
  char *bar1 = strchr(v, '|');
  char *bar2 = bar1 ? strchr(bar1 + 1, '|') : NULL;
  if (!bar2) return false;
  *bar1 = *bar2 = 0;
  *b = (binding){buf, dot + 1, v, bar1 + 1, bar2 + 1};
  return true;
}

static const char *str(const char *s) { return s ? s : ""; }

static void node_text(bbi_strbuf *s, const bb_ir_node *n) {
  bbi_strbuf_printf(s, "    %s::%s(", n->domain && *n->domain ? n->domain : BB_DOMAIN_ONNX_ALIAS, str(n->op_type));
  for (size_t i = 0; i < n->inputs.len; i++) bbi_strbuf_printf(s, "%s%s", i ? ", " : "", n->inputs.items[i]);
  bbi_strbuf_puts(s, ") -> (");
  for (size_t i = 0; i < n->outputs.len; i++) bbi_strbuf_printf(s, "%s%s", i ? ", " : "", n->outputs.items[i]);
  bbi_strbuf_puts(s, ")\n");
}

static void json_strs(bbi_strbuf *s, const bb_strlist *l) {
  bbi_strbuf_puts(s, "[");
  for (size_t i = 0; i < l->len; i++) {
    if (i) bbi_strbuf_puts(s, ",");
    bbi_strbuf_json_string(s, l->items[i]);
  }
  bbi_strbuf_puts(s, "]");
}

/* DOT identifiers are quoted; quotes and backslashes escaped. */
static void dot_id(bbi_strbuf *s, const char *a, const char *b, size_t i) {
  bbi_strbuf_puts(s, "\"");
  for (const char *p = a; *p; p++) {
    if (*p == '"' || *p == '\\') bbi_strbuf_puts(s, "\\");
    bbi_strbuf_append(s, p, 1);
  }
  bbi_strbuf_printf(s, "%s%zu\"", b, i);
}

static void render(const bb_model *m, bb_artifact_format format, bbi_strbuf *s, const wire_edge *edges, size_t n_edges,
                   const cc_wire *wires, size_t n_wires) {
  char buf[1024];
  binding b;
  if (format == BB_ARTIFACT_JSON) {
    bbi_strbuf_puts(s, "{\"partitions\":[");
    bool first = true;
    for (size_t f = 0; f < m->functions.len; f++) {
      const bb_function *fn = m->functions.items[f];
      if (!is_partition(fn)) continue;
      bbi_strbuf_puts(s, first ? "{\"name\":" : ",{\"name\":");
      first = false;
      bbi_strbuf_json_string(s, fn->name);
      bbi_strbuf_puts(s, ",\"peer_class\":");
      bbi_strbuf_json_string(s, class_of(fn));
      bbi_strbuf_puts(s, ",\"inputs\":");
      json_strs(s, &fn->inputs);
      bbi_strbuf_puts(s, ",\"outputs\":");
      json_strs(s, &fn->outputs);
      bbi_strbuf_puts(s, ",\"nodes\":[");
      for (size_t i = 0; i < fn->nodes.len; i++) {
        const bb_ir_node *n = fn->nodes.items[i];
        bbi_strbuf_puts(s, i ? ",{\"op_type\":" : "{\"op_type\":");
        bbi_strbuf_json_string(s, n->op_type);
        bbi_strbuf_puts(s, ",\"domain\":");
        bbi_strbuf_json_string(s, n->domain ? n->domain : "");
        bbi_strbuf_puts(s, ",\"name\":");
        bbi_strbuf_json_string(s, n->name ? n->name : "");
        bbi_strbuf_puts(s, ",\"inputs\":");
        json_strs(s, &n->inputs);
        bbi_strbuf_puts(s, ",\"outputs\":");
        json_strs(s, &n->outputs);
        bbi_strbuf_puts(s, "}");
      }
      bbi_strbuf_puts(s, "]}");
    }
    bbi_strbuf_puts(s, "],\"functions\":[");
    first = true;
    for (size_t f = 0; f < m->functions.len; f++) {
      if (is_partition(m->functions.items[f])) continue;
      if (!first) bbi_strbuf_puts(s, ",");
      first = false;
      bbi_strbuf_json_string(s, m->functions.items[f]->name);
    }
    bbi_strbuf_puts(s, "],\"wire_edges\":[");
    for (size_t i = 0; i < n_edges; i++) {
      bbi_strbuf_puts(s, i ? ",{\"from\":" : "{\"from\":");
      bbi_strbuf_json_string(s, edges[i].from->name);
      bbi_strbuf_puts(s, ",\"to\":");
      bbi_strbuf_json_string(s, edges[i].to->name);
      bbi_strbuf_puts(s, ",\"value\":");
      bbi_strbuf_json_string(s, edges[i].value);
      bbi_strbuf_puts(s, ",\"site\":");
      bbi_strbuf_json_string(s, edges[i].site);
      bbi_strbuf_puts(s, ",\"wire\":");
      bbi_strbuf_json_string(s, edges[i].wire);
      bbi_strbuf_puts(s, "}");
    }
    bbi_strbuf_puts(s, "],\"wires\":[");
    for (size_t i = 0; i < n_wires; i++) {
      bbi_strbuf_puts(s, i ? ",{\"name\":" : "{\"name\":");
      bbi_strbuf_json_string(s, wires[i].name);
      bbi_strbuf_printf(s, ",\"direction\":\"%s\",\"kind\":", wires[i].in ? "in" : "out");
      bbi_strbuf_json_string(s, wires[i].kind);
      bbi_strbuf_puts(s, ",\"type\":");
      bbi_strbuf_json_string(s, wires[i].type);
      bbi_strbuf_printf(s, ",\"type_hash\":\"0x%016llx\",\"id\":\"0x%016llx\"}",
                       (unsigned long long)wires[i].type_hash, (unsigned long long)bb_wire_id(wires[i].name));
    }
    bbi_strbuf_puts(s, "],\"bindings\":[");
    first = true;
    for (size_t k = 0; k < m->metadata.len; k++) {
      if (!parse_binding(&m->metadata.items[k], buf, sizeof buf, &b)) continue;
      bbi_strbuf_puts(s, first ? "{\"target\":" : ",{\"target\":");
      first = false;
      bbi_strbuf_json_string(s, b.target);
      bbi_strbuf_puts(s, ",\"slot\":");
      bbi_strbuf_json_string(s, b.slot);
      bbi_strbuf_puts(s, ",\"role\":");
      bbi_strbuf_json_string(s, b.role);
      bbi_strbuf_puts(s, ",\"type\":");
      bbi_strbuf_json_string(s, b.type);
      /* the id as a JSON number when it is one, else as the string the table holds */
      char *end;
      long id = strtol(b.slot_id, &end, 10);
      if (*b.slot_id && !*end) bbi_strbuf_printf(s, ",\"slot_id\":%ld}", id);
      else {
        bbi_strbuf_puts(s, ",\"slot_id\":");
        bbi_strbuf_json_string(s, b.slot_id);
        bbi_strbuf_puts(s, "}");
      }
    }
    bbi_strbuf_puts(s, "]}\n");
    return;
  }
  if (format == BB_ARTIFACT_DOT) {
    bbi_strbuf_puts(s, "digraph artifact {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];\n");
    size_t cluster = 0;
    for (size_t f = 0; f < m->functions.len; f++) {
      const bb_function *fn = m->functions.items[f];
      if (!is_partition(fn)) continue;
      bbi_strbuf_printf(s, "  subgraph cluster_%zu {\n    label=", cluster++);
      dot_id(s, str(fn->name), " @ ", 0);
      bbi_strbuf_puts(s, ";\n");
      for (size_t i = 0; i < fn->nodes.len; i++) {
        bbi_strbuf_puts(s, "    ");
        dot_id(s, str(fn->name), "/", i);
        bbi_strbuf_puts(s, " [label=");
        bbi_strbuf_json_string(s, str(fn->nodes.items[i]->op_type));
        bbi_strbuf_puts(s, "];\n");
      }
      /* dataflow inside the partition, through a value → producer index */
      bbi_strmap producers;
      bbi_strmap_init(&producers, s->alloc);
      for (size_t i = 0; i < fn->nodes.len; i++) {
        const bb_ir_node *n = fn->nodes.items[i];
        for (size_t o = 0; o < n->outputs.len; o++) {
          uint32_t prev;
          if (*n->outputs.items[o] && !bbi_strmap_get(&producers, n->outputs.items[o], &prev) &&
              bbi_strmap_put(&producers, n->outputs.items[o], (uint32_t)i))
            s->failed = true;
        }
      }
      for (size_t i = 0; i < fn->nodes.len; i++) {
        const bb_ir_node *n = fn->nodes.items[i];
        for (size_t k = 0; k < n->inputs.len; k++) {
          uint32_t p;
          if (!*n->inputs.items[k] || !bbi_strmap_get(&producers, n->inputs.items[k], &p)) continue;
          bbi_strbuf_puts(s, "    ");
          dot_id(s, str(fn->name), "/", p);
          bbi_strbuf_puts(s, " -> ");
          dot_id(s, str(fn->name), "/", i);
          bbi_strbuf_puts(s, ";\n");
        }
      }
      bbi_strmap_free(&producers);
      bbi_strbuf_puts(s, "  }\n");
    }
    for (size_t i = 0; i < n_edges; i++) {
      bbi_strbuf_puts(s, "  ");
      dot_id(s, str(edges[i].from->name), "/", (size_t)bb_nodelist_index(&edges[i].from->nodes, edges[i].send));
      bbi_strbuf_puts(s, " -> ");
      dot_id(s, str(edges[i].to->name), "/", (size_t)bb_nodelist_index(&edges[i].to->nodes, edges[i].recv));
      bbi_strbuf_puts(s, " [style=dashed, label=");
      bbi_strbuf_json_string(s, edges[i].value);
      bbi_strbuf_puts(s, "];\n");
    }
    bbi_strbuf_puts(s, "}\n");
    return;
  }
  size_t np = 0;
  for (size_t f = 0; f < m->functions.len; f++) np += is_partition(m->functions.items[f]);
  bbi_strbuf_printf(s, "artifact: %zu partition(s), %zu wire edge(s)\n", np, n_edges);
  for (size_t f = 0; f < m->functions.len; f++) {
    const bb_function *fn = m->functions.items[f];
    if (!is_partition(fn)) {
      bbi_strbuf_printf(s, "function %s (%zu nodes, shared)\n", str(fn->name), fn->nodes.len);
      continue;
    }
    bbi_strbuf_printf(s, "partition %s  class %s  (%zu nodes)\n", str(fn->name), class_of(fn), fn->nodes.len);
    for (size_t i = 0; i < fn->nodes.len; i++) node_text(s, fn->nodes.items[i]);
  }
  bbi_strbuf_puts(s, "wire edges:\n");
  for (size_t i = 0; i < n_edges; i++)
    bbi_strbuf_printf(s, "  %s -> %s  value %s  wire %s  site %s\n", str(edges[i].from->name),
                     str(edges[i].to->name), edges[i].value, edges[i].wire, edges[i].site);
  bbi_strbuf_puts(s, "wires:\n");
  for (size_t i = 0; i < n_wires; i++)
    bbi_strbuf_printf(s, "  %-3s %s  %s %s  (id 0x%016llx)\n", wires[i].in ? "in" : "out", wires[i].name, wires[i].kind,
                     *wires[i].type ? wires[i].type : "(any)", (unsigned long long)bb_wire_id(wires[i].name));
  bbi_strbuf_puts(s, "bindings:\n");
  for (size_t k = 0; k < m->metadata.len; k++)
    if (parse_binding(&m->metadata.items[k], buf, sizeof buf, &b))
      bbi_strbuf_printf(s, "  %s  %s = %s %s (slot id %s)\n", b.target, b.slot, b.role, b.type, b.slot_id);
}

int bb_artifact_describe(const bb_model *artifact, bb_artifact_format format, char **out, size_t *out_len,
                         bb_error *err) {
  if (!artifact || !out || (unsigned)format > BB_ARTIFACT_JSON)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "describe: missing argument or bad format");
  *out = NULL;
  if (out_len) *out_len = 0;
  const char *passport = bb_kv_get(&artifact->metadata, BB_KEY_COMPILED);
  if (!passport)
    return bb_error_set(err, BB_ERR_MALFORMED, "not a compiled artifact: no %s passport (compile it first)",
                        BB_KEY_COMPILED);
  const bb_allocator *alloc = bbi_arena_allocator(artifact->arena);
  size_t n_edges = collect_edges(artifact, NULL, 0);
  wire_edge *edges = n_edges ? alloc->malloc(n_edges * sizeof *edges, alloc->user_data) : NULL;
  if (n_edges && !edges) return bb_error_set(err, BB_ERR_NOMEM, "describe: out of memory");
  collect_edges(artifact, edges, n_edges);
  cc_wire *wires = NULL;
  size_t n_wires = 0;
  int rc = cc_read_wires(artifact, alloc, &wires, &n_wires, err);
  if (rc) {
    if (edges) alloc->free(edges, alloc->user_data);
    return rc;
  }
  bbi_strbuf s;
  bbi_strbuf_init(&s, alloc);
  render(artifact, format, &s, edges, n_edges, wires, n_wires);
  if (edges) alloc->free(edges, alloc->user_data);
  cc_free_wires(alloc, wires, n_wires);
  size_t len;
  if (bbi_strbuf_finish(&s, out, &len)) return bb_error_set(err, BB_ERR_NOMEM, "describe: out of memory");
  if (out_len) *out_len = len;
  return 0;
}
