/* The vocabulary table (bb/artifact.h) as text for people and as JSON for tools written
 * in other languages: what `bb vocab` prints. */
#include "bb/artifact.h"
#include "util/strbuf.h"

static void text(bbi_strbuf *b) {
  bbi_strbuf_puts(b, "roles (name, required_trait, op domain, storage port):\n");
  for (bb_role r = BB_ROLE_FIRST; r <= BB_ROLE_LAST; r++) {
    const char *domain = bb_role_domain(r), *port = bb_role_storage_port(r);
    bbi_strbuf_printf(b, "  %-13s %-20s %-38s %s\n", bb_role_name(r), bb_role_trait(r),
                     !domain ? "(its own)" : *domain ? domain : "\"\" (ONNX)", port ? port : "-");
  }
  bb_vocab_kind kind = (bb_vocab_kind)0;
  for (size_t i = 0; i < bb_vocab_count(); i++) {
    const bb_vocab_entry *e = bb_vocab_at(i);
    if (e->kind != kind) bbi_strbuf_printf(b, "%ss:\n", bb_vocab_kind_name(kind = e->kind));
    bbi_strbuf_printf(b, "  %s%s\n      %s\n", e->name, e->prefix ? "…" : "", e->meaning);
  }
}

static void json(bbi_strbuf *b) {
  bbi_strbuf_puts(b, "{\"roles\":[");
  for (bb_role r = BB_ROLE_FIRST; r <= BB_ROLE_LAST; r++) {
    bbi_strbuf_printf(b, "%s{\"role\":%d,\"name\":", r == BB_ROLE_FIRST ? "" : ",", (int)r);
    bbi_strbuf_json_string(b, bb_role_name(r));
    bbi_strbuf_puts(b, ",\"trait\":");
    bbi_strbuf_json_string(b, bb_role_trait(r));
    bbi_strbuf_puts(b, ",\"domain\":");
    bbi_strbuf_json_string(b, bb_role_domain(r));
    bbi_strbuf_puts(b, ",\"storage_port\":");
    bbi_strbuf_json_string(b, bb_role_storage_port(r));
    bbi_strbuf_puts(b, "}");
  }
  bbi_strbuf_puts(b, "],\"entries\":[");
  for (size_t i = 0; i < bb_vocab_count(); i++) {
    const bb_vocab_entry *e = bb_vocab_at(i);
    bbi_strbuf_puts(b, i ? ",{\"name\":" : "{\"name\":");
    bbi_strbuf_json_string(b, e->name);
    bbi_strbuf_puts(b, ",\"kind\":");
    bbi_strbuf_json_string(b, bb_vocab_kind_name(e->kind));
    bbi_strbuf_printf(b, ",\"prefix\":%s,\"meaning\":", e->prefix ? "true" : "false");
    bbi_strbuf_json_string(b, e->meaning);
    bbi_strbuf_puts(b, "}");
  }
  bbi_strbuf_puts(b, "]}\n");
}

int bb_vocab_describe(bool as_json, const bb_allocator *alloc, char **out, size_t *out_len, bb_error *err) {
  if (!out) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "bb_vocab_describe: out is NULL");
  bbi_strbuf b;
  bbi_strbuf_init(&b, alloc);
  if (as_json) json(&b);
  else text(&b);
  if (bbi_strbuf_finish(&b, out, out_len)) return bb_error_set(err, BB_ERR_NOMEM, "the vocabulary: out of memory");
  return 0;
}
