/* A readable summary of a model, as text for people or JSON for tools. */
#include <string.h>

#include "bb/artifact.h"
#include "bb/ir.h"
#include "util/arena.h"
#include "util/strbuf.h"

static const char *or_empty(const char *s) { return s ? s : ""; }

/* ---- types as short text ("float[N,3]", "seq(int64[?])", ...) ------------------------- */

static void type_text(bbi_strbuf *b, const bb_type *t) {
  if (!t) {
    bbi_strbuf_puts(b, "?");
    return;
  }
  const char *elem = t->has_elem_type ? bb_dtype_name(t->elem_type) : NULL;
  switch (t->kind) {
  case BB_TYPE_TENSOR:
  case BB_TYPE_SPARSE_TENSOR:
    if (t->kind == BB_TYPE_SPARSE_TENSOR) bbi_strbuf_puts(b, "sparse ");
    if (elem) bbi_strbuf_puts(b, elem);
    else bbi_strbuf_printf(b, "dtype%d", (int)t->elem_type);
    if (t->shape) {
      bbi_strbuf_puts(b, "[");
      for (size_t i = 0; i < t->shape->rank; i++) {
        const bb_dim *d = &t->shape->dims[i];
        if (i) bbi_strbuf_puts(b, ",");
        if (d->kind == BB_DIM_VALUE) bbi_strbuf_printf(b, "%lld", (long long)d->value);
        else if (d->kind == BB_DIM_PARAM) bbi_strbuf_puts(b, or_empty(d->param));
        else bbi_strbuf_puts(b, "?");
      }
      bbi_strbuf_puts(b, "]");
    }
    break;
  case BB_TYPE_SEQUENCE:
  case BB_TYPE_OPTIONAL:
    bbi_strbuf_puts(b, t->kind == BB_TYPE_SEQUENCE ? "seq(" : "optional(");
    type_text(b, t->inner);
    bbi_strbuf_puts(b, ")");
    break;
  case BB_TYPE_MAP:
    bbi_strbuf_printf(b, "map(%s,", elem ? elem : "?");
    type_text(b, t->inner);
    bbi_strbuf_puts(b, ")");
    break;
  case BB_TYPE_OPAQUE:
    bbi_strbuf_printf(b, "opaque(%s%s%s)", or_empty(t->opaque_domain), t->opaque_domain && *t->opaque_domain ? "/" : "",
                     or_empty(t->opaque_name));
    break;
  case BB_TYPE_NONE: bbi_strbuf_puts(b, t->denotation ? "" : "?"); break;
  }
  if (t->denotation && *t->denotation)
    bbi_strbuf_printf(b, "%s<%s>", t->kind == BB_TYPE_NONE ? "" : " ", t->denotation);
}

/* ---- op histogram, in order of first appearance ------------------------------------------ */

typedef struct op_count {
  const char *domain, *op_type;
  size_t count;
} op_count;

typedef struct op_hist {
  op_count *items;
  size_t len, cap;
} op_hist;

static int count_ops(bb_arena *a, op_hist *h, const bb_nodelist *nodes) {
  for (size_t i = 0; i < nodes->len; i++) {
    const char *dom = nodes->items[i]->domain && *nodes->items[i]->domain ? nodes->items[i]->domain : BB_DOMAIN_ONNX_ALIAS;
    const char *op = or_empty(nodes->items[i]->op_type);
    size_t k = 0;
    while (k < h->len && !(strcmp(h->items[k].domain, dom) == 0 && strcmp(h->items[k].op_type, op) == 0)) k++;
    if (k < h->len) {
      h->items[k].count++;
      continue;
    }
    op_count c = {dom, op, 1};
    if (BBI_ARENA_PUSH(a, h, c)) return BB_ERR_NOMEM;
  }
  return 0;
}

/* ---- text --------------------------------------------------------------------------------- */

static void text_kvs(bbi_strbuf *b, const char *indent, const char *title, const bb_kvlist *kv) {
  if (!kv->len) return;
  bbi_strbuf_printf(b, "%s%s (%zu):\n", indent, title, kv->len);
  for (size_t i = 0; i < kv->len; i++)
    bbi_strbuf_printf(b, "%s  %s = %s\n", indent, or_empty(kv->items[i].key), or_empty(kv->items[i].value));
}

/* One line per domain (in order of first appearance) with its ops and their counts. */
static void text_ops(bbi_strbuf *b, const char *indent, const op_hist *h) {
  for (size_t i = 0; i < h->len; i++) {
    bool printed = false;
    for (size_t k = 0; k < i && !printed; k++) printed = strcmp(h->items[k].domain, h->items[i].domain) == 0;
    if (printed) continue;
    bbi_strbuf_printf(b, "%s  %s:", indent, h->items[i].domain);
    for (size_t k = i; k < h->len; k++)
      if (strcmp(h->items[k].domain, h->items[i].domain) == 0)
        bbi_strbuf_printf(b, " %s(%zu)", h->items[k].op_type, h->items[k].count);
    bbi_strbuf_puts(b, "\n");
  }
}

static void text_values(bbi_strbuf *b, const char *label, const bb_vilist *l) {
  if (!l->len) return;
  bbi_strbuf_printf(b, "  %s:\n", label);
  for (size_t i = 0; i < l->len; i++) {
    bbi_strbuf_printf(b, "    %s: ", or_empty(l->items[i]->name));
    type_text(b, l->items[i]->type);
    bbi_strbuf_puts(b, "\n");
  }
}

static void text_names(bbi_strbuf *b, const bb_strlist *l) {
  bbi_strbuf_puts(b, "(");
  for (size_t i = 0; i < l->len; i++) bbi_strbuf_printf(b, "%s%s", i ? ", " : "", l->items[i]);
  bbi_strbuf_puts(b, ")");
}

/* The bytes the initializers' dims declare, in *bytes; false when the sum does not fit
 * in 64 bits (dims are whatever the file says, so the arithmetic is checked: a model
 * must not be able to pass for a small one by overflowing it). */
static bool initializer_bytes(const bb_graph *g, uint64_t *bytes) {
  uint64_t total = 0;
  for (size_t i = 0; i < g->initializers.len; i++) {
    const bb_tensor_proto *t = g->initializers.items[i];
    uint64_t n = bb_dtype_size(t->data_type);
    for (size_t k = 0; k < t->n_dims; k++)
      if (t->dims[k] < 0 || __builtin_mul_overflow(n, (uint64_t)t->dims[k], &n)) return false;
    if (__builtin_add_overflow(total, n, &total)) return false;
  }
  *bytes = total;
  return true;
}

static int summary_text(bbi_strbuf *b, bb_arena *a, const bb_model *m) {
  bbi_strbuf_puts(b, "model:");
  if (m->has_ir_version) bbi_strbuf_printf(b, " ir_version %lld", (long long)m->ir_version);
  if (m->producer_name) bbi_strbuf_printf(b, ", producer %s %s", m->producer_name, or_empty(m->producer_version));
  if (m->domain && *m->domain) bbi_strbuf_printf(b, ", domain %s", m->domain);
  if (m->has_model_version) bbi_strbuf_printf(b, ", model_version %lld", (long long)m->model_version);
  bbi_strbuf_puts(b, "\n");
  bbi_strbuf_puts(b, "opset_import:");
  if (!m->opsets.len) bbi_strbuf_puts(b, " (none)");
  for (size_t i = 0; i < m->opsets.len; i++)
    bbi_strbuf_printf(b, "%s %s %lld", i ? "," : "",
                     m->opsets.items[i].domain && *m->opsets.items[i].domain ? m->opsets.items[i].domain : BB_DOMAIN_ONNX_ALIAS,
                     (long long)m->opsets.items[i].version);
  bbi_strbuf_puts(b, "\n");
  text_kvs(b, "", "metadata", &m->metadata);
  if (m->extra.len) bbi_strbuf_printf(b, "preserved fields the IR does not model: %zu bytes\n", m->extra.len);
  if (m->graph) {
    const bb_graph *g = m->graph;
    uint64_t bytes;
    bbi_strbuf_printf(b, "graph %s: %zu nodes, %zu inputs, %zu outputs, %zu initializers (",
                     g->name ? g->name : "(unnamed)", g->nodes.len, g->inputs.len, g->outputs.len,
                     g->initializers.len);
    if (initializer_bytes(g, &bytes)) bbi_strbuf_printf(b, "%llu bytes)\n", (unsigned long long)bytes);
    else bbi_strbuf_puts(b, "a size that overflows 64 bits)\n");
    text_values(b, "inputs", &g->inputs);
    text_values(b, "outputs", &g->outputs);
    op_hist h = {0};
    if (count_ops(a, &h, &g->nodes)) return BB_ERR_NOMEM;
    if (h.len) bbi_strbuf_puts(b, "  nodes by domain:\n");
    text_ops(b, "  ", &h);
    text_kvs(b, "  ", "metadata", &g->metadata);
  }
  if (m->functions.len) bbi_strbuf_printf(b, "functions (%zu):\n", m->functions.len);
  for (size_t i = 0; i < m->functions.len; i++) {
    const bb_function *f = m->functions.items[i];
    bbi_strbuf_printf(b, "  %s%s%s: %zu nodes, inputs ", f->domain && *f->domain ? f->domain : "",
                     f->domain && *f->domain ? "::" : "", or_empty(f->name), f->nodes.len);
    text_names(b, &f->inputs);
    bbi_strbuf_puts(b, " -> outputs ");
    text_names(b, &f->outputs);
    bbi_strbuf_puts(b, "\n");
    text_kvs(b, "    ", "metadata", &f->metadata);
    op_hist h = {0};
    if (count_ops(a, &h, &f->nodes)) return BB_ERR_NOMEM;
    text_ops(b, "    ", &h);
  }
  return 0;
}

/* ---- JSON --------------------------------------------------------------------------------- */

static void json_kvs(bbi_strbuf *b, const bb_kvlist *kv) {
  bbi_strbuf_puts(b, "[");
  for (size_t i = 0; i < kv->len; i++) {
    bbi_strbuf_puts(b, i ? ",{\"key\":" : "{\"key\":");
    bbi_strbuf_json_string(b, or_empty(kv->items[i].key));
    bbi_strbuf_puts(b, ",\"value\":");
    bbi_strbuf_json_string(b, or_empty(kv->items[i].value));
    bbi_strbuf_puts(b, "}");
  }
  bbi_strbuf_puts(b, "]");
}

static void json_ops(bbi_strbuf *b, const op_hist *h) {
  bbi_strbuf_puts(b, "[");
  for (size_t i = 0; i < h->len; i++) {
    bbi_strbuf_puts(b, i ? ",{\"domain\":" : "{\"domain\":");
    bbi_strbuf_json_string(b, h->items[i].domain);
    bbi_strbuf_puts(b, ",\"op_type\":");
    bbi_strbuf_json_string(b, h->items[i].op_type);
    bbi_strbuf_printf(b, ",\"count\":%zu}", h->items[i].count);
  }
  bbi_strbuf_puts(b, "]");
}

static int json_values(bbi_strbuf *b, const bb_vilist *l) {
  bbi_strbuf_puts(b, "[");
  for (size_t i = 0; i < l->len; i++) {
    bbi_strbuf_puts(b, i ? ",{\"name\":" : "{\"name\":");
    bbi_strbuf_json_string(b, or_empty(l->items[i]->name));
    bbi_strbuf t;
    bbi_strbuf_init(&t, b->alloc);
    type_text(&t, l->items[i]->type);
    char *s;
    if (bbi_strbuf_finish(&t, &s, NULL)) return BB_ERR_NOMEM;
    bbi_strbuf_puts(b, ",\"type\":");
    bbi_strbuf_json_string(b, s);
    b->alloc->free(s, b->alloc->user_data);
    bbi_strbuf_puts(b, "}");
  }
  bbi_strbuf_puts(b, "]");
  return 0;
}

static void json_names(bbi_strbuf *b, const bb_strlist *l) {
  bbi_strbuf_puts(b, "[");
  for (size_t i = 0; i < l->len; i++) {
    if (i) bbi_strbuf_puts(b, ",");
    bbi_strbuf_json_string(b, l->items[i]);
  }
  bbi_strbuf_puts(b, "]");
}

static int summary_json(bbi_strbuf *b, bb_arena *a, const bb_model *m) {
  bbi_strbuf_puts(b, "{\"ir_version\":");
  if (m->has_ir_version) bbi_strbuf_printf(b, "%lld", (long long)m->ir_version);
  else bbi_strbuf_puts(b, "null");
  bbi_strbuf_puts(b, ",\"producer_name\":");
  bbi_strbuf_json_string(b, m->producer_name);
  bbi_strbuf_puts(b, ",\"producer_version\":");
  bbi_strbuf_json_string(b, m->producer_version);
  bbi_strbuf_puts(b, ",\"domain\":");
  bbi_strbuf_json_string(b, m->domain);
  bbi_strbuf_puts(b, ",\"opset_import\":[");
  for (size_t i = 0; i < m->opsets.len; i++) {
    bbi_strbuf_puts(b, i ? ",{\"domain\":" : "{\"domain\":");
    bbi_strbuf_json_string(b, or_empty(m->opsets.items[i].domain));
    bbi_strbuf_printf(b, ",\"version\":%lld}", (long long)m->opsets.items[i].version);
  }
  bbi_strbuf_puts(b, "],\"metadata\":");
  json_kvs(b, &m->metadata);
  bbi_strbuf_puts(b, ",\"graph\":");
  if (m->graph) {
    const bb_graph *g = m->graph;
    bbi_strbuf_puts(b, "{\"name\":");
    bbi_strbuf_json_string(b, g->name);
    uint64_t bytes;
    bbi_strbuf_printf(b, ",\"nodes\":%zu,\"initializers\":%zu,\"initializer_bytes\":", g->nodes.len,
                     g->initializers.len);
    /* null when the dims' size overflows 64 bits */
    if (initializer_bytes(g, &bytes)) bbi_strbuf_printf(b, "%llu", (unsigned long long)bytes);
    else bbi_strbuf_puts(b, "null");
    bbi_strbuf_puts(b, ",\"inputs\":");
    if (json_values(b, &g->inputs)) return BB_ERR_NOMEM;
    bbi_strbuf_puts(b, ",\"outputs\":");
    if (json_values(b, &g->outputs)) return BB_ERR_NOMEM;
    op_hist h = {0};
    if (count_ops(a, &h, &g->nodes)) return BB_ERR_NOMEM;
    bbi_strbuf_puts(b, ",\"ops\":");
    json_ops(b, &h);
    bbi_strbuf_puts(b, ",\"metadata\":");
    json_kvs(b, &g->metadata);
    bbi_strbuf_puts(b, "}");
  } else {
    bbi_strbuf_puts(b, "null");
  }
  bbi_strbuf_puts(b, ",\"functions\":[");
  for (size_t i = 0; i < m->functions.len; i++) {
    const bb_function *f = m->functions.items[i];
    bbi_strbuf_puts(b, i ? ",{\"name\":" : "{\"name\":");
    bbi_strbuf_json_string(b, or_empty(f->name));
    bbi_strbuf_puts(b, ",\"domain\":");
    bbi_strbuf_json_string(b, or_empty(f->domain));
    bbi_strbuf_printf(b, ",\"nodes\":%zu,\"inputs\":", f->nodes.len);
    json_names(b, &f->inputs);
    bbi_strbuf_puts(b, ",\"outputs\":");
    json_names(b, &f->outputs);
    op_hist h = {0};
    if (count_ops(a, &h, &f->nodes)) return BB_ERR_NOMEM;
    bbi_strbuf_puts(b, ",\"ops\":");
    json_ops(b, &h);
    bbi_strbuf_puts(b, ",\"metadata\":");
    json_kvs(b, &f->metadata);
    bbi_strbuf_puts(b, "}");
  }
  bbi_strbuf_printf(b, "],\"preserved_extra_bytes\":%zu}\n", m->extra.len);
  return 0;
}

int bb_model_summary(const bb_model *model, bool json, char **out, size_t *out_len, bb_error *err) {
  if (!model || !out) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "bb_model_summary: NULL argument");
  const bb_allocator *al = bbi_arena_allocator(model->arena);
  bb_arena *scratch = bbi_arena_new(al);
  if (!scratch) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  bbi_strbuf b;
  bbi_strbuf_init(&b, al);
  int rc = json ? summary_json(&b, scratch, model) : summary_text(&b, scratch, model);
  bbi_arena_free(scratch);
  if (!rc) rc = bbi_strbuf_finish(&b, out, out_len);
  else bbi_strbuf_release(&b);
  return rc ? bb_error_set(err, rc, "out of memory while writing the summary") : 0;
}
