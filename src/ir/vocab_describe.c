/* The vocabulary table (bb/artifact.h) as text for people and as JSON for tools written
 * in other languages: what `bb vocab` prints. */
#include "bb/artifact.h"
#include "util/strbuf.h"

static void text(bb_strbuf *b) {
  bb_strbuf_puts(b, "roles (name, required_trait, op domain, storage port):\n");
  for (bb_role r = BB_ROLE_FIRST; r <= BB_ROLE_LAST; r++) {
    const char *domain = bb_role_domain(r), *port = bb_role_storage_port(r);
    bb_strbuf_printf(b, "  %-13s %-20s %-38s %s\n", bb_role_name(r), bb_role_trait(r),
                     !domain ? "(its own)" : *domain ? domain : "\"\" (ONNX)", port ? port : "-");
  }
  bb_vocab_kind kind = (bb_vocab_kind)0;
  for (size_t i = 0; i < bb_vocab_count(); i++) {
    const bb_vocab_entry *e = bb_vocab_at(i);
    if (e->kind != kind) bb_strbuf_printf(b, "%ss:\n", bb_vocab_kind_name(kind = e->kind));
    bb_strbuf_printf(b, "  %s%s\n      %s\n", e->name, e->prefix ? "…" : "", e->meaning);
  }
}

static void json(bb_strbuf *b) {
  bb_strbuf_puts(b, "{\"roles\":[");
  for (bb_role r = BB_ROLE_FIRST; r <= BB_ROLE_LAST; r++) {
    bb_strbuf_printf(b, "%s{\"role\":%d,\"name\":", r == BB_ROLE_FIRST ? "" : ",", (int)r);
    bb_strbuf_json_string(b, bb_role_name(r));
    bb_strbuf_puts(b, ",\"trait\":");
    bb_strbuf_json_string(b, bb_role_trait(r));
    bb_strbuf_puts(b, ",\"domain\":");
    bb_strbuf_json_string(b, bb_role_domain(r));
    bb_strbuf_puts(b, ",\"storage_port\":");
    bb_strbuf_json_string(b, bb_role_storage_port(r));
    bb_strbuf_puts(b, "}");
  }
  bb_strbuf_puts(b, "],\"entries\":[");
  for (size_t i = 0; i < bb_vocab_count(); i++) {
    const bb_vocab_entry *e = bb_vocab_at(i);
    bb_strbuf_puts(b, i ? ",{\"name\":" : "{\"name\":");
    bb_strbuf_json_string(b, e->name);
    bb_strbuf_puts(b, ",\"kind\":");
    bb_strbuf_json_string(b, bb_vocab_kind_name(e->kind));
    bb_strbuf_printf(b, ",\"prefix\":%s,\"meaning\":", e->prefix ? "true" : "false");
    bb_strbuf_json_string(b, e->meaning);
    bb_strbuf_puts(b, "}");
  }
  bb_strbuf_puts(b, "]}\n");
}

int bb_vocab_describe(bool as_json, const bb_allocator *alloc, char **out, size_t *out_len, bb_error *err) {
  if (!out) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "bb_vocab_describe: out is NULL");
  bb_strbuf b;
  bb_strbuf_init(&b, alloc);
  if (as_json) json(&b);
  else text(&b);
  if (bb_strbuf_finish(&b, out, out_len)) return bb_error_set(err, BB_ERR_NOMEM, "the vocabulary: out of memory");
  return 0;
}
