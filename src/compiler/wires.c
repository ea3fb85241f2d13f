/* An artifact's wire table, and whether two artifacts can talk: which wires one sends on
 * and the other receives from (in either direction), with types that agree or not, which
 * wires one declares and the other lacks, and distinct wires that share an id. Reads
 * only the artifacts' passports, so it runs before a single envelope is sent. */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler.h"
#include "util/mem.h"
#include "util/strbuf.h"

void cc_free_wires(const bb_allocator *alloc, cc_wire *w, size_t n) {
  for (size_t i = 0; i < n; i++) {
    bbi_mem_free(alloc, w[i].name);
    bbi_mem_free(alloc, w[i].type);
  }
  bbi_mem_free(alloc, w);
}

static bool wire_key(const char *key, bool *in, const char **name) {
  size_t lo = strlen(BB_KEY_WIRE_OUT_PREFIX), li = strlen(BB_KEY_WIRE_IN_PREFIX);
  if (key && strncmp(key, BB_KEY_WIRE_OUT_PREFIX, lo) == 0) return *in = false, *name = key + lo, true;
  if (key && strncmp(key, BB_KEY_WIRE_IN_PREFIX, li) == 0) return *in = true, *name = key + li, true;
  return false;
}

int cc_read_wires(const bb_model *m, const bb_allocator *alloc, cc_wire **out, size_t *n_out, bb_error *err) {
  *out = NULL;
  *n_out = 0;
  size_t n = 0;
  for (size_t i = 0; i < m->metadata.len; i++) {
    bool in;
    const char *name;
    n += wire_key(m->metadata.items[i].key, &in, &name);
  }
  cc_wire *w = n ? bbi_mem_calloc(alloc, n, sizeof *w) : NULL;
  if (n && !w) return bb_error_set(err, BB_ERR_NOMEM, "wires: out of memory");
  size_t k = 0;
  for (size_t i = 0; i < m->metadata.len; i++) {
    const bb_kv *kv = &m->metadata.items[i];
    bool in;
    const char *name, *type;
    size_t type_len;
    if (!wire_key(kv->key, &in, &name)) continue;
    if (!bb_wire_name_valid(name) || !bb_wire_entry_parse(kv->value, &type, &type_len)) {
      cc_free_wires(alloc, w, k);
      return bb_error_set(err, BB_ERR_MALFORMED, "wire table entry `%s` = `%s` is not `<Kind>|<type>|0x<type hash>`",
                          kv->key, kv->value ? kv->value : "");
    }
    w[k].in = in;
    w[k].name = bbi_mem_strdup(alloc, name);
    w[k].type = bbi_mem_alloc(alloc, type_len + 1);
    if (!w[k].name || !w[k].type) {
      cc_free_wires(alloc, w, k + 1);
      return bb_error_set(err, BB_ERR_NOMEM, "wires: out of memory");
    }
    memcpy(w[k].type, type, type_len);
    w[k].type[type_len] = 0;
    w[k].kind = bb_type_value_kind(w[k].type);
    w[k].type_hash = bb_wire_type_hash(w[k].type);
    k++;
  }
  *out = w;
  *n_out = k;
  return 0;
}

/* ---- comparing two artifacts ------------------------------------------------------------ */

typedef enum verdict { PAIRS, DISAGREES, MISSING, COLLIDES } verdict;
static const char *const VERDICT[] = {"pairs", "disagrees", "missing", "collides"};

/* One line of the report: a wire, from the artifact `from` (0 a, 1 b) to the other. */
typedef struct finding {
  verdict what;
  const char *wire, *other; /* other: COLLIDES, the other side's wire */
  int from;
  const char *sent, *expected; /* PAIRS, DISAGREES: the types; MISSING: what `from` declares */
  bool in;                     /* MISSING: `from` receives it (else sends it) */
} finding;

typedef struct side {
  const char *label;
  cc_wire *w;
  size_t n;
} side;

static const cc_wire *find(const side *s, bool in, const char *name) {
  for (size_t i = 0; i < s->n; i++)
    if (s->w[i].in == in && strcmp(s->w[i].name, name) == 0) return &s->w[i];
  return NULL;
}

static int cmp_finding(const void *a, const void *b) {
  const finding *x = a, *y = b;
  if (x->what != y->what) return (int)x->what - (int)y->what;
  int c = strcmp(x->wire, y->wire);
  return c ? c : x->from - y->from;
}

typedef struct named_id {
  uint64_t id;
  const char *name;
  int side;
} named_id;

static int cmp_named_id(const void *a, const void *b) {
  const named_id *x = a, *y = b;
  if (x->id != y->id) return x->id < y->id ? -1 : 1;
  int c = strcmp(x->name, y->name);
  return c ? c : x->side - y->side;
}

/* Distinct names of the two sides that share an id, each pair once, at most `cap`. */
static size_t collisions(const side *s, named_id *ids, finding *out, size_t cap) {
  size_t n = 0, k = 0;
  for (int sd = 0; sd < 2; sd++)
    for (size_t i = 0; i < s[sd].n; i++) ids[k++] = (named_id){bb_wire_id(s[sd].w[i].name), s[sd].w[i].name, sd};
  qsort(ids, k, sizeof *ids, cmp_named_id);
  for (size_t i = 0; i < k; i++)
    for (size_t j = i + 1; j < k && ids[j].id == ids[i].id && n < cap; j++) {
      if (ids[i].side == ids[j].side || strcmp(ids[i].name, ids[j].name) == 0) continue;
      const named_id *a = ids[i].side == 0 ? &ids[i] : &ids[j], *b = a == &ids[i] ? &ids[j] : &ids[i];
      bool seen = false;
      for (size_t m = 0; m < n && !seen; m++) seen = !strcmp(out[m].wire, a->name) && !strcmp(out[m].other, b->name);
      if (!seen) out[n++] = (finding){COLLIDES, a->name, b->name, 0, NULL, NULL, false};
    }
  return n;
}

static size_t compare(const side *s, named_id *ids, finding *out, size_t cap) {
  size_t n = 0;
  for (int from = 0; from < 2; from++) {
    const side *me = &s[from], *other = &s[1 - from];
    for (size_t i = 0; i < me->n; i++) {
      const cc_wire *w = &me->w[i];
      const cc_wire *peer = find(other, !w->in, w->name);
      if (!w->in && peer) /* each pair once: from its sender */
        out[n++] = (finding){bb_wire_types_agree(w->type, peer->type) ? PAIRS : DISAGREES, w->name, NULL, from,
                             w->type, peer->type, false};
      else if (!peer)
        out[n++] = (finding){MISSING, w->name, NULL, from, w->type, NULL, w->in};
    }
  }
  n += collisions(s, ids, out + n, cap - n);
  qsort(out, n, sizeof *out, cmp_finding);
  return n;
}

static void text_line(bbi_strbuf *s, const side *sd, const finding *f) {
  const char *me = sd[f->from].label, *other = sd[1 - f->from].label;
  const char *carried = f->sent && *f->sent ? f->sent : f->expected; /* an abstract half takes the other's */
  switch (f->what) {
    case PAIRS:
      bbi_strbuf_printf(s, "  pairs      %s  %s -> %s  %s %s\n", f->wire, me, other, bb_type_value_kind(carried),
                       *carried ? carried : "(any)");
      break;
    case DISAGREES:
      bbi_strbuf_printf(s, "  disagrees  %s  %s sends %s, %s expects %s\n", f->wire, me, f->sent, other, f->expected);
      break;
    case MISSING:
      bbi_strbuf_printf(s, "  missing    %s  %s %s it, %s does not %s it\n", f->wire, me, f->in ? "receives" : "sends",
                       other, f->in ? "send" : "receive");
      break;
    case COLLIDES:
      bbi_strbuf_printf(s, "  collides   %s (%s) and %s (%s) share id 0x%016llx\n", f->wire, sd[0].label, f->other,
                       sd[1].label, (unsigned long long)bb_wire_id(f->wire));
      break;
  }
}

static void json_line(bbi_strbuf *s, const side *sd, const finding *f) {
  bbi_strbuf_printf(s, "{\"verdict\":\"%s\",\"wire\":", VERDICT[f->what]);
  bbi_strbuf_json_string(s, f->wire);
  if (f->what == COLLIDES) {
    bbi_strbuf_puts(s, ",\"other\":");
    bbi_strbuf_json_string(s, f->other);
  } else {
    bbi_strbuf_puts(s, ",\"from\":");
    bbi_strbuf_json_string(s, sd[f->from].label);
  }
  if (f->what == PAIRS || f->what == DISAGREES) {
    bbi_strbuf_puts(s, ",\"sent\":");
    bbi_strbuf_json_string(s, f->sent);
    bbi_strbuf_puts(s, ",\"expected\":");
    bbi_strbuf_json_string(s, f->expected);
  }
  if (f->what == MISSING) bbi_strbuf_printf(s, ",\"direction\":\"%s\"", f->in ? "in" : "out");
  bbi_strbuf_puts(s, "}");
}

int bb_artifact_wires_compare(const bb_model *a, const char *a_label, const bb_model *b, const char *b_label,
                              bb_artifact_format format, char **out, size_t *out_len, bool *can_talk, bb_error *err) {
  if (!a || !b || !out || (format != BB_ARTIFACT_TEXT && format != BB_ARTIFACT_JSON))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "wires: two artifacts and a text or JSON format are required");
  *out = NULL;
  if (out_len) *out_len = 0;
  const bb_model *m[2] = {a, b};
  for (int i = 0; i < 2; i++)
    if (!bb_kv_get(&m[i]->metadata, BB_KEY_COMPILED))
      return bb_error_set(err, BB_ERR_MALFORMED, "%s is not a compiled artifact: no %s passport",
                          i ? (b_label ? b_label : "B") : (a_label ? a_label : "A"), BB_KEY_COMPILED);
  const bb_allocator *alloc = bbi_arena_allocator(a->arena);
  side sd[2] = {{a_label ? a_label : "A", NULL, 0}, {b_label ? b_label : "B", NULL, 0}};
  int rc = cc_read_wires(a, alloc, &sd[0].w, &sd[0].n, err);
  if (!rc) rc = cc_read_wires(b, alloc, &sd[1].w, &sd[1].n, err);
  /* at most one finding per wire and side, and as many pairs of names that collide */
  size_t cap = 2 * (sd[0].n + sd[1].n) + 1;
  finding *f = rc ? NULL : bbi_mem_calloc(alloc, cap, sizeof *f);
  named_id *ids = rc ? NULL : bbi_mem_calloc(alloc, sd[0].n + sd[1].n + 1, sizeof *ids);
  if (!rc && (!f || !ids)) rc = bb_error_set(err, BB_ERR_NOMEM, "wires: out of memory");
  if (rc) {
    bbi_mem_free(alloc, f);
    bbi_mem_free(alloc, ids);
    cc_free_wires(alloc, sd[0].w, sd[0].n);
    cc_free_wires(alloc, sd[1].w, sd[1].n);
    return rc;
  }
  size_t n = compare(sd, ids, f, cap), count[4] = {0};
  for (size_t i = 0; i < n; i++) count[f[i].what]++;
  bool talk = count[PAIRS] && !count[DISAGREES] && !count[COLLIDES];
  bbi_strbuf s;
  bbi_strbuf_init(&s, alloc);
  if (format == BB_ARTIFACT_JSON) {
    bbi_strbuf_printf(&s, "{\"can_talk\":%s,\"wires\":[", talk ? "true" : "false");
    for (size_t i = 0; i < n; i++) {
      if (i) bbi_strbuf_puts(&s, ",");
      json_line(&s, sd, &f[i]);
    }
    bbi_strbuf_puts(&s, "]}\n");
  } else {
    bbi_strbuf_printf(&s, "wires of %s and %s: %zu pair, %zu disagree, %zu missing, %zu collide\n", sd[0].label,
                     sd[1].label, count[PAIRS], count[DISAGREES], count[MISSING], count[COLLIDES]);
    for (size_t i = 0; i < n; i++) text_line(&s, sd, &f[i]);
    if (talk) bbi_strbuf_printf(&s, "%s and %s can talk\n", sd[0].label, sd[1].label);
    else
      bbi_strbuf_printf(&s, "%s and %s cannot talk: %s\n", sd[0].label, sd[1].label,
                       count[COLLIDES] ? "distinct wires share an id" : count[DISAGREES] ? "a wire's types disagree"
                                                                                          : "no wire pairs");
  }
  bbi_mem_free(alloc, f);
  bbi_mem_free(alloc, ids);
  cc_free_wires(alloc, sd[0].w, sd[0].n);
  cc_free_wires(alloc, sd[1].w, sd[1].n);
  size_t len;
  if (bbi_strbuf_finish(&s, out, &len)) return bb_error_set(err, BB_ERR_NOMEM, "wires: out of memory");
  if (out_len) *out_len = len;
  if (can_talk) *can_talk = talk;
  return 0;
}
