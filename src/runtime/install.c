/* bb_install: passports, targets, bindings, one component per slot (shared by every
 * artifact the node runs), value sites numbered per node, every op of my partitions
 * resolved, the wire every Send sends on and every Recv listens to — so nothing fails
 * later at run time for want of a binding, and no fill can land anywhere but a Recv. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/deliver.h"
#include "runtime/syscalls/table.h"
#include "bb/common.h"
#include "util/hash.h"
#include "util/mem.h"
#include "util/options.h"
#include "util/ring.h"
#include "util/strmap.h"

static const char *const INSTALL_ERROR_NAMES[] = {
    "Ok", "EmptyTargets", "BadArtifact", "NotCompiled", "IncompatibleCompiledVersion", "UnknownTarget",
    "InvalidBindingTable", "SlotBindingConflict", "UnregisteredConcrete", "ConstructionFailed", "UnresolvedOp",
    "UnresolvedDestination", "InvalidArgument", "OutOfMemory", "WireConflict"};

const char *bb_install_error_name(bb_install_error_kind kind) {
  return kind >= 0 && (size_t)kind < sizeof INSTALL_ERROR_NAMES / sizeof *INSTALL_ERROR_NAMES
             ? INSTALL_ERROR_NAMES[kind]
             : "Unknown";
}

typedef struct installer {
  bb_node *n;
  const bb_install_args *args;
  bb_install_error_kind kind;
  bb_error *err;
} installer;

static int fail(installer *x, bb_install_error_kind kind, int code, const char *fmt, ...) BB_PRINTF(4, 5);
static int fail(installer *x, bb_install_error_kind kind, int code, const char *fmt, ...) {
  x->kind = kind;
  if (x->err) {
    va_list ap;
    va_start(ap, fmt);
    char msg[BB_ERROR_MESSAGE_MAX];
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    bb_error_set(x->err, code, "install: %s", msg);
  }
  return code;
}

static int nomem(installer *x) { return fail(x, BB_INSTALL_OUT_OF_MEMORY, BB_ERR_NOMEM, "out of memory"); }

/* The number that addresses a slot's component on every peer: FNV-1a-32 of its name. */
static uint32_t component_number(const char *slot) { return bbi_fnv1a32(slot, strlen(slot)); }

/* ---- config ------------------------------------------------------------------------- */

static void config_defaults(bb_node_config *c, const bb_node_config *given) {
  memset(c, 0, sizeof *c);
  if (given) memcpy(c, given, given->struct_size && given->struct_size < sizeof *c ? given->struct_size : sizeof *c);
  c->struct_size = sizeof *c;
#define DEFAULT(field, value) \
  if (!c->field) c->field = (value)
  DEFAULT(cycle_op_budget, 1000);
  DEFAULT(max_pending_async, 10000);
  DEFAULT(max_peers, 16384);
  DEFAULT(max_outbound, c->max_peers); /* a Send to every peer the book can hold fits */
  DEFAULT(max_ingress_events, 4096);
  DEFAULT(ingress_byte_budget, (size_t)256 << 20);
  DEFAULT(max_app_event_bytes, (size_t)1 << 20);
  DEFAULT(max_invoke_inputs, 100);
  DEFAULT(max_timers, 65536);
  DEFAULT(max_executions, 65536);
  DEFAULT(dedup_window, 8192);
  DEFAULT(max_admitted, c->max_peers);
#undef DEFAULT
}

/* ---- artifacts and targets ---------------------------------------------------------------- */

/* One artifact with the targets this node runs of it. */
typedef struct artifact_in {
  const uint8_t *bytes;
  size_t len;
  const char *const *targets;
  size_t n_targets;
} artifact_in;

/* The first graph of an artifact's functions: artifacts are laid out in install order. */
static uint32_t graph_base(const bb_node *n, uint32_t artifact) {
  uint32_t base = 0;
  for (uint32_t k = 0; k < artifact; k++) base += (uint32_t)n->models[k]->functions.len;
  return base;
}

/* A function of one artifact by name, as a graph index; -1 if none. */
static long find_function(const bb_node *n, uint32_t artifact, const char *name) {
  const bb_model *m = n->models[artifact];
  for (size_t i = 0; i < m->functions.len; i++)
    if (m->functions.items[i]->name && strcmp(m->functions.items[i]->name, name) == 0)
      return (long)(graph_base(n, artifact) + i);
  return -1;
}

static int resolve_target(installer *x, uint32_t artifact, const char *target, uint32_t *graph) {
  const bb_model *m = x->n->models[artifact];
  long exact = find_function(x->n, artifact, target);
  if (exact >= 0) {
    *graph = (uint32_t)exact;
    return 0;
  }
  size_t tl = strlen(target);
  for (size_t i = 0; i < m->functions.len; i++) {
    const char *name = m->functions.items[i]->name;
    if (name && strncmp(name, target, tl) == 0 && name[tl] == '#') {
      *graph = graph_base(x->n, artifact) + (uint32_t)i;
      return 0;
    }
  }
  char avail[300] = "";
  size_t at = 0;
  for (size_t i = 0; i < m->functions.len && at < sizeof avail - 40; i++)
    at += (size_t)snprintf(avail + at, sizeof avail - at, "%s%s", i ? ", " : "", m->functions.items[i]->name);
  char which[32] = "the artifact";
  if (x->args->struct_size > BB_INSTALL_ARGS_SIZE_V1 && x->args->n_more)
    snprintf(which, sizeof which, "artifact %u", artifact);
  return fail(x, BB_INSTALL_UNKNOWN_TARGET, BB_ERR_NOT_FOUND, "target `%s` is not a function of %s; available: [%s]",
              target, which, avail);
}

/* The bootstrap of a target's module: "<M>__bootstrap" where the partition is "<M>#…" or
 * "<M>_<class>#…" (the longest such M wins); a graph index, or -1. */
static int find_bootstrap(const bb_node *n, uint32_t artifact, const char *partition) {
  const bb_model *m = n->models[artifact];
  int best = -1;
  size_t best_len = 0;
  for (size_t i = 0; i < m->functions.len; i++) {
    const bb_function *f = m->functions.items[i];
    const char *phase = bb_kv_get(&f->metadata, BB_KEY_MODULE_PHASE);
    if (!phase || strcmp(phase, BB_MODULE_PHASE_BOOTSTRAP) != 0 || !f->name) continue;
    size_t len = strlen(f->name), sl = strlen(BB_BOOTSTRAP_SUFFIX);
    if (len <= sl || strcmp(f->name + len - sl, BB_BOOTSTRAP_SUFFIX) != 0) continue;
    size_t ml = len - sl;
    if (strncmp(partition, f->name, ml) == 0 && (partition[ml] == '#' || partition[ml] == '_') && ml > best_len) {
      best = (int)(graph_base(n, artifact) + i);
      best_len = ml;
    }
  }
  return best;
}

/* ---- bindings ------------------------------------------------------------------------- */

typedef struct binding {
  const char *target, *slot, *type;
  char target_buf[256], slot_buf[256], type_buf[256];
  bb_role role;
  long slot_id;
} binding;

static int parse_role(const char *s, size_t len, bb_role *out) {
  for (int r = BB_ROLE_FIRST; r <= BB_ROLE_LAST; r++)
    if (strlen(bb_role_name((bb_role)r)) == len && strncmp(bb_role_name((bb_role)r), s, len) == 0) {
      *out = (bb_role)r;
      return 0;
    }
  return -1;
}

static int parse_binding(installer *x, const bb_kv *kv, binding *b) {
  const char *rest = kv->key + strlen(BB_KEY_BINDING_PREFIX);
  const char *dot = strchr(rest, '.');
  if (!dot || dot == rest || !dot[1] || (size_t)(dot - rest) >= sizeof b->target_buf || strlen(dot + 1) >= 256)
    return fail(x, BB_INSTALL_INVALID_BINDING_TABLE, BB_ERR_MALFORMED,
                "binding key `%s` is not in `" BB_KEY_BINDING_PREFIX "<target>.<slot>` form", kv->key);
  memcpy(b->target_buf, rest, (size_t)(dot - rest));
  b->target_buf[dot - rest] = 0;
  strcpy(b->slot_buf, dot + 1);
  b->target = b->target_buf;
  b->slot = b->slot_buf;
  const char *v = kv->value ? kv->value : "";
  const char *bar1 = strchr(v, '|'), *bar2 = bar1 ? strchr(bar1 + 1, '|') : NULL;
  char *end = NULL;
  long id = bar2 ? strtol(bar2 + 1, &end, 10) : 0;
  if (!bar1 || !bar2 || bar2 == bar1 + 1 || (size_t)(bar2 - bar1 - 1) >= sizeof b->type_buf ||
      parse_role(v, (size_t)(bar1 - v), &b->role) || !end || *end || end == bar2 + 1)
    return fail(x, BB_INSTALL_INVALID_BINDING_TABLE, BB_ERR_MALFORMED,
                "binding `%s` = `%s` is not in `<role>|<TYPE_NAME>|<slot_id or -1>` form", kv->key, v);
  memcpy(b->type_buf, bar1 + 1, (size_t)(bar2 - bar1 - 1));
  b->type_buf[bar2 - bar1 - 1] = 0;
  b->type = b->type_buf;
  b->slot_id = id;
  return 0;
}

/* The slots my targets bind, one entry per slot name, in first-seen order, with the
 * artifact that binds it first (whose config it takes). (Nodes that carry only a slot id
 * are resolved through the binding table in component_for.) */
typedef struct slot_entry {
  binding b;
  uint32_t artifact;
} slot_entry;

static bool is_binding_key(const char *key) {
  return key && strncmp(key, BB_KEY_BINDING_PREFIX, strlen(BB_KEY_BINDING_PREFIX)) == 0;
}

static int collect_slots(installer *x, slot_entry **out, size_t *n_out) {
  bb_node *n = x->n;
  size_t cap = 0;
  for (size_t k = 0; k < n->n_models; k++)
    for (size_t i = 0; i < n->models[k]->metadata.len; i++) cap += is_binding_key(n->models[k]->metadata.items[i].key);
  slot_entry *slots = cap ? bbi_mem_calloc(n->alloc, cap, sizeof *slots) : NULL;
  if (cap && !slots) return nomem(x);
  size_t len = 0;
  int rc = 0;
  for (size_t t = 0; t < n->n_targets && !rc; t++) {
    const bb_kvlist *meta = &n->models[n->targets[t].artifact]->metadata;
    for (size_t i = 0; i < meta->len && !rc; i++) {
      const bb_kv *kv = &meta->items[i];
      if (!is_binding_key(kv->key)) continue;
      binding b;
      if ((rc = parse_binding(x, kv, &b))) break;
      if (strcmp(b.target, n->targets[t].name) != 0) continue;
      size_t s = 0;
      while (s < len && strcmp(slots[s].b.slot, b.slot) != 0) s++;
      if (s == len) {
        slots[len] = (slot_entry){.b = b, .artifact = n->targets[t].artifact};
        slots[len].b.target = slots[len].b.target_buf;
        slots[len].b.slot = slots[len].b.slot_buf;
        slots[len].b.type = slots[len].b.type_buf;
        len++;
      } else if (strcmp(slots[s].b.type, b.type) != 0 || slots[s].b.role != b.role) {
        rc = fail(x, BB_INSTALL_SLOT_BINDING_CONFLICT, BB_ERR_EXISTS,
                  "slot `%s` is bound differently by two targets: %s → %s (%s), %s → %s (%s)", b.slot,
                  slots[s].b.target, slots[s].b.type, bb_role_name(slots[s].b.role), b.target, b.type,
                  bb_role_name(b.role));
        break;
      }
    }
  }
  if (rc) {
    bbi_mem_free(n->alloc, slots);
    return rc;
  }
  *out = slots;
  *n_out = len;
  return 0;
}

/* A type registered with a struct that ends before type_data has none. */
static void *type_data_of(const bb_component_type *type) {
  return type->struct_size >= offsetof(bb_component_type, type_data) + sizeof type->type_data ? type->type_data : NULL;
}

static int construct_components(installer *x) {
  bb_node *n = x->n;
  slot_entry *slots = NULL;
  size_t n_slots = 0;
  int rc = collect_slots(x, &slots, &n_slots);
  if (rc) return rc;
  const bb_registry *reg = x->args->registry; /* NULL: an empty registry */
  n->components.items = n_slots ? bbi_mem_calloc(n->alloc, n_slots, sizeof *n->components.items) : NULL;
  if (n_slots && !n->components.items) rc = nomem(x);
  for (size_t i = 0; i < n_slots && !rc; i++) {
    const binding *b = &slots[i].b;
    const bb_component_type *type = bb_registry_find(reg, b->type);
    if (!type) {
      rc = fail(x, BB_INSTALL_UNREGISTERED_CONCRETE, BB_ERR_NOT_FOUND,
                "the artifact binds slot `%s` to `%s`, %s; add the type with bb_registry_add "
                "(bb_registry_add_shipped adds the shipped concretes)",
                b->slot, b->type, reg ? "which the registry does not hold" : "but no registry was given");
      break;
    }
    uint32_t number = component_number(b->slot);
    for (size_t j = 0; j < n->components.len && !rc; j++)
      if (n->components.items[j].number == number)
        rc = fail(x, BB_INSTALL_CONSTRUCTION_FAILED, BB_ERR_EXISTS,
                  "slots `%s` and `%s` hash to the same component number; rename one", n->components.items[j].slot,
                  b->slot);
    if (rc) break;
    /* counted before anything is allocated for it, so bb_node_free releases what was */
    rt_component *c = &n->components.items[n->components.len++];
    c->type = type;
    c->role = b->role;
    c->number = number;
    c->slot = bbi_mem_strdup(n->alloc, b->slot);
    /* config: the host's override, else the artifact's */
    const char *config = NULL;
    const void *host_data = NULL;
    for (size_t j = 0; j < x->args->n_slots; j++)
      if (x->args->slots[j].slot && strcmp(x->args->slots[j].slot, b->slot) == 0) {
        config = x->args->slots[j].config;
        host_data = x->args->slots[j].host_data;
      }
    char key[300];
    snprintf(key, sizeof key, BB_KEY_CONFIG_PREFIX "%s", b->slot);
    if (!config) config = bb_kv_get(&n->models[slots[i].artifact]->metadata, key);
    c->config = bbi_mem_strdup(n->alloc, config ? config : "");
    if (!c->slot || !c->config) {
      rc = nomem(x);
      break;
    }
    bb_component_init init = {c->slot, c->config, strlen(c->config),
                              n->cfg.seed ^ ((uint64_t)c->number * 0x9E3779B97F4A7C15ull), n->alloc, host_data,
                              type_data_of(type)};
    bb_error cerr;
    bb_error_clear(&cerr);
    int crc = type->create(&init, &c->self, &cerr);
    if (crc) {
      c->self = NULL;
      rc = fail(x, crc == BB_ERR_NOMEM ? BB_INSTALL_OUT_OF_MEMORY : BB_INSTALL_CONSTRUCTION_FAILED, crc,
                "`%s` for slot `%s` could not be created: %s", b->type, b->slot,
                cerr.message[0] ? cerr.message : bb_strerror(crc));
    }
  }
  bbi_mem_free(n->alloc, slots);
  return rc;
}


/* ---- graphs and sites ------------------------------------------------------------------ */

static int add_site(installer *x, rt_graph *g, const char *name, size_t *cap) {
  if (!name || !*name) return 0;
  uint32_t existing;
  if (bbi_strmap_get(&g->names, name, &existing)) return 0;
  if (bbi_mem_grow(x->n->alloc, (void **)&g->site_names, cap, g->n_sites + 1, sizeof *g->site_names)) return nomem(x);
  g->site_names[g->n_sites] = name;
  if (bbi_strmap_put(&g->names, name, g->n_sites)) return nomem(x);
  g->n_sites++;
  return 0;
}

static uint32_t site_of(const rt_graph *g, const char *name) {
  uint32_t s;
  return name && *name && bbi_strmap_get(&g->names, name, &s) ? s : RT_NONE;
}

/* Sites of every function, artifact after artifact, each in model order: node outputs,
 * then input formals, then outputs not yet seen. They are this node's own numbers: a
 * peer's fill names a wire, never a site. */
static int assign_sites(installer *x) {
  bb_node *n = x->n;
  size_t total = 0;
  for (size_t k = 0; k < n->n_models; k++) total += n->models[k]->functions.len;
  /* n_graphs only once the array exists: bb_node_free walks n_graphs entries */
  n->graphs = total ? bbi_mem_calloc(n->alloc, total, sizeof *n->graphs) : NULL;
  if (total && !n->graphs) return nomem(x);
  n->n_graphs = (uint32_t)total;
  uint64_t next = 0;
  uint32_t gi = 0;
  for (uint32_t k = 0; k < n->n_models; k++)
    for (size_t fi = 0; fi < n->models[k]->functions.len; fi++, gi++) {
      rt_graph *g = &n->graphs[gi];
      const bb_function *f = n->models[k]->functions.items[fi];
      g->fn = f;
      g->artifact = k;
      g->target = -1;
      bbi_strmap_init(&g->names, n->alloc);
      size_t cap = 0;
      int rc = 0;
      for (size_t i = 0; i < f->nodes.len && !rc; i++)
        for (size_t o = 0; o < f->nodes.items[i]->outputs.len && !rc; o++)
          rc = add_site(x, g, f->nodes.items[i]->outputs.items[o], &cap);
      for (size_t i = 0; i < f->inputs.len && !rc; i++) rc = add_site(x, g, f->inputs.items[i], &cap);
      for (size_t i = 0; i < f->outputs.len && !rc; i++) rc = add_site(x, g, f->outputs.items[i], &cap);
      if (rc) return rc;
      g->site_base = next;
      next += g->n_sites;
      const char *phase = bb_kv_get(&f->metadata, BB_KEY_MODULE_PHASE);
      g->bootstrap = phase && strcmp(phase, BB_MODULE_PHASE_BOOTSTRAP) == 0;
    }
  n->n_sites = next;
  return 0;
}

static void mark_active(bb_node *n, uint32_t gi) {
  rt_graph *g = &n->graphs[gi];
  if (g->active) return;
  g->active = true;
  for (size_t i = 0; i < g->fn->nodes.len; i++) {
    const bb_ir_node *nd = g->fn->nodes.items[i];
    if (!nd->domain || strcmp(nd->domain, BB_DOMAIN_MODULE) != 0) continue;
    long callee = find_function(n, g->artifact, nd->op_type);
    if (callee >= 0) mark_active(n, (uint32_t)callee);
  }
}

/* The role an op's domain calls: a role's own domain, else a protocol's. */
static bb_role role_of_domain(const char *domain) {
  bb_role role = bb_role_from_domain(domain);
  return role ? role : BB_ROLE_PROTOCOL;
}

/* Which component runs a role or protocol node: its slot name, else its slot id, else
 * the component whose type serves the node's protocol domain. */
static long component_for(installer *x, uint32_t artifact, const bb_ir_node *nd) {
  bb_node *n = x->n;
  const char *slot = bb_kv_get(&nd->metadata, BB_KEY_SLOT_NAME);
  if (slot) return rt_component_index(&n->components, slot);
  const char *id = bb_kv_get(&nd->metadata, BB_KEY_SLOT_ID);
  if (id) {
    /* resolve the id through the binding table of my targets of the node's artifact */
    const bb_kvlist *meta = &n->models[artifact]->metadata;
    for (size_t t = 0; t < n->n_targets; t++)
      for (size_t i = 0; n->targets[t].artifact == artifact && i < meta->len; i++) {
        const bb_kv *kv = &meta->items[i];
        if (!is_binding_key(kv->key)) continue;
        binding b;
        if (parse_binding(x, kv, &b)) return -1;
        if (b.slot_id >= 0 && strtol(id, NULL, 10) == b.slot_id && strcmp(b.target, n->targets[t].name) == 0)
          return rt_component_index(&n->components, b.slot);
      }
    return -1;
  }
  /* a type that speaks the domain may also be bound under another role (GlobalRegistry-
   * Server as PeerSelector "view"): the component bound as Protocol takes the op first */
  long other_role = -1;
  for (size_t i = 0; i < n->components.len; i++) {
    const char *pd = n->components.items[i].type->protocol_domain;
    if (!pd || !nd->domain || strcmp(pd, nd->domain) != 0) continue;
    if (n->components.items[i].role == BB_ROLE_PROTOCOL) return (long)i;
    if (other_role < 0) other_role = (long)i;
  }
  return other_role;
}

static int op_label(installer *x, rt_op *op) {
  const bb_ir_node *nd = op->ir;
  char buf[400];
  snprintf(buf, sizeof buf, "%s::%s%s%s", nd->domain && *nd->domain ? nd->domain : BB_DOMAIN_ONNX_ALIAS, nd->op_type,
           nd->name && *nd->name ? "@" : "", nd->name ? nd->name : "");
  op->label = bbi_mem_strdup(x->n->alloc, buf);
  return op->label ? 0 : nomem(x);
}

/* ---- wires ---------------------------------------------------------------------------- */

/* The type an artifact's wire table declares for a wire it sends on (in = false) or
 * receives from: `<Kind>|<type>|0x<type hash>`, the kind and hash those of the type.
 * *type is a new string. */
static int wire_type(installer *x, uint32_t artifact, bool in, const char *wire, const char *who, char **type) {
  char key[BB_WIRE_NAME_MAX + 64];
  snprintf(key, sizeof key, "%s%s", in ? BB_KEY_WIRE_IN_PREFIX : BB_KEY_WIRE_OUT_PREFIX, wire);
  const char *v = bb_kv_get(&x->n->models[artifact]->metadata, key);
  if (!v)
    return fail(x, BB_INSTALL_BAD_ARTIFACT, BB_ERR_MALFORMED, "%s: the artifact's wire table has no `%s`", who, key);
  const char *at;
  size_t len;
  if (!bb_wire_entry_parse(v, &at, &len))
    return fail(x, BB_INSTALL_BAD_ARTIFACT, BB_ERR_MALFORMED,
                "%s: wire table entry `%s` = `%s` is not `<Kind>|<type>|0x<type hash>` of one type", who, key, v);
  char *t = bbi_mem_alloc(x->n->alloc, len + 1);
  if (!t) return nomem(x);
  memcpy(t, at, len);
  t[len] = 0;
  *type = t;
  return 0;
}

/* The wire a Send's input travels on: its dest_site_name entry. */
static const char *wire_of_input(const bb_ir_node *send, uint32_t input) {
  size_t prefix = strlen(BB_KEY_DEST_SITE_PREFIX);
  const char *value = send->inputs.items[input];
  for (size_t k = 0; k < send->metadata.len; k++) {
    const bb_kv *kv = &send->metadata.items[k];
    if (kv->key && kv->value && strncmp(kv->key, BB_KEY_DEST_SITE_PREFIX, prefix) == 0 &&
        strcmp(kv->key + prefix, value) == 0)
      return kv->value;
  }
  return NULL;
}

static int resolve_send(installer *x, rt_graph *g, rt_op *op) {
  bb_node *n = x->n;
  const bb_ir_node *nd = op->ir;
  size_t prefix = strlen(BB_KEY_DEST_SITE_PREFIX);
  for (size_t k = 0; k < nd->metadata.len; k++) {
    const bb_kv *kv = &nd->metadata.items[k];
    if (!kv->key || strncmp(kv->key, BB_KEY_DEST_SITE_PREFIX, prefix) != 0 || !kv->value) continue;
    long input = bb_strlist_find(&nd->inputs, kv->key + prefix);
    if (input < 0 || !bb_wire_name_valid(kv->value))
      return fail(x, BB_INSTALL_UNRESOLVED_DESTINATION, BB_ERR_NOT_FOUND, "%s in `%s` sends `%s` on `%s`, but %s",
                  op->label, g->fn->name, kv->key + prefix, kv->value,
                  input < 0 ? "it has no such input" : "that is not a wire name");
    char *type = NULL;
    int rc = wire_type(x, g->artifact, false, kv->value, op->label, &type);
    bbi_mem_free(n->alloc, type); /* the table must declare it; receivers check the type */
    if (rc) return rc;
    if (bbi_mem_grow(n->alloc, (void **)&op->fills, &(size_t){op->n_fills}, op->n_fills + 1, sizeof *op->fills))
      return nomem(x);
    op->fills[op->n_fills++] = (rt_send_fill){(uint32_t)input, bb_wire_id(kv->value)};
  }
  if (!op->n_fills)
    return fail(x, BB_INSTALL_UNRESOLVED_DESTINATION, BB_ERR_NOT_FOUND,
                "%s in `%s` names no wire (no " BB_KEY_DEST_SITE_PREFIX "<value> entry)", op->label, g->fn->name);
  return 0;
}

/* A Recv of a graph I run listens to the wire its wire_id names, with the type the
 * artifact's wire table gives it. */
static int add_recv_wire(installer *x, uint32_t gi, const rt_op *op) {
  bb_node *n = x->n;
  const rt_graph *g = &n->graphs[gi];
  const char *wire = bb_kv_get(&op->ir->metadata, BB_KEY_WIRE_ID);
  if (!wire || !bb_wire_name_valid(wire))
    return fail(x, BB_INSTALL_BAD_ARTIFACT, BB_ERR_MALFORMED, "%s in `%s` listens to %s%s%s", op->label, g->fn->name,
                wire ? "`" : "no wire (no " BB_KEY_WIRE_ID ")", wire ? wire : "",
                wire ? "`, which is not a wire name" : "");
  if (!op->n_out || op->out[0] == RT_NONE)
    return fail(x, BB_INSTALL_BAD_ARTIFACT, BB_ERR_MALFORMED, "%s in `%s` has no payload output", op->label,
                g->fn->name);
  char *type = NULL;
  int rc = wire_type(x, g->artifact, true, wire, op->label, &type);
  if (rc) return rc;
  rt_wire w = {bb_wire_id(wire), bbi_mem_strdup(n->alloc, wire), type, gi, op->out[0]};
  if (!w.name || bbi_mem_grow(n->alloc, (void **)&n->wires, &n->cap_wires, n->n_wires + 1, sizeof *n->wires)) {
    bbi_mem_free(n->alloc, w.name);
    bbi_mem_free(n->alloc, type);
    return nomem(x);
  }
  n->wires[n->n_wires++] = w;
  return 0;
}

static int cmp_wire(const void *a, const void *b) {
  const rt_wire *x = a, *y = b;
  if (x->id != y->id) return x->id < y->id ? -1 : 1;
  if (x->graph != y->graph) return x->graph < y->graph ? -1 : 1;
  return x->site < y->site ? -1 : x->site > y->site;
}

/* A wire a Send of mine sends on must not share its id with another wire my Recvs listen
 * to, and must carry what they expect. */
static int check_sent_wire(installer *x, const rt_graph *g, const rt_op *op, uint32_t f) {
  bb_node *n = x->n;
  const char *wire = wire_of_input(op->ir, op->fills[f].input);
  size_t at = rt_first_wire(n, op->fills[f].site);
  if (!wire || at == n->n_wires) return 0;
  const rt_wire *w = &n->wires[at];
  if (strcmp(w->name, wire) != 0)
    return fail(x, BB_INSTALL_WIRE_CONFLICT, BB_ERR_EXISTS, "wires `%s` and `%s` have the same id 0x%016llx", wire,
                w->name, (unsigned long long)w->id);
  char *type = NULL;
  int rc = wire_type(x, g->artifact, false, wire, op->label, &type);
  if (!rc && !bb_wire_types_agree(type, w->type))
    rc = fail(x, BB_INSTALL_WIRE_CONFLICT, BB_ERR_TYPE,
              "wire `%s` is sent as `%s` by `%s` and received as `%s` in `%s`", wire, type, g->fn->name, w->type,
              n->graphs[w->graph].fn->name);
  bbi_mem_free(n->alloc, type);
  return rc;
}

/* Every wire the node names — those its Recvs listen to and those its Sends send on —
 * keeps its id to itself, and every Recv of one wire expects what the others and this
 * node's Sends agree on. Sorts the Recv table by id, for delivery. */
static int check_wires(installer *x) {
  bb_node *n = x->n;
  if (n->n_wires) qsort(n->wires, n->n_wires, sizeof *n->wires, cmp_wire);
  for (size_t i = 1; i < n->n_wires; i++) {
    const rt_wire *a = &n->wires[i - 1], *b = &n->wires[i];
    if (a->id != b->id) continue;
    if (strcmp(a->name, b->name) != 0)
      return fail(x, BB_INSTALL_WIRE_CONFLICT, BB_ERR_EXISTS, "wires `%s` and `%s` have the same id 0x%016llx",
                  a->name, b->name, (unsigned long long)a->id);
    if (!bb_wire_types_agree(a->type, b->type))
      return fail(x, BB_INSTALL_WIRE_CONFLICT, BB_ERR_TYPE, "wire `%s` is received as `%s` in `%s` and as `%s` in `%s`",
                  a->name, a->type, n->graphs[a->graph].fn->name, b->type, n->graphs[b->graph].fn->name);
  }
  for (uint32_t gi = 0; gi < n->n_graphs; gi++) {
    const rt_graph *g = &n->graphs[gi];
    for (uint32_t oi = 0; g->active && oi < g->n_ops; oi++)
      for (uint32_t f = 0; g->ops[oi].kind == RT_OP_SEND && f < g->ops[oi].n_fills; f++) {
        int rc = check_sent_wire(x, g, &g->ops[oi], f);
        if (rc) return rc;
      }
  }
  return 0;
}

static int resolve_op(installer *x, uint32_t gi, uint32_t oi) {
  bb_node *n = x->n;
  rt_graph *g = &n->graphs[gi];
  rt_op *op = &g->ops[oi];
  const bb_ir_node *nd = op->ir;
  const char *domain = nd->domain ? nd->domain : "";
  if (strcmp(domain, BB_DOMAIN_WIRE) == 0 && strcmp(nd->op_type, "Send") == 0) {
    op->kind = RT_OP_SEND;
    return resolve_send(x, g, op);
  }
  if (strcmp(domain, BB_DOMAIN_WIRE) == 0 && strcmp(nd->op_type, "Recv") == 0) {
    op->kind = RT_OP_RECV;
    if (op->n_out && op->out[0] != RT_NONE) g->recv_sender[op->out[0]] = op->n_out > 1 ? op->out[1] : RT_NONE;
    return add_recv_wire(x, gi, op);
  }
  if ((op->fn = rt_syscall_find(domain, nd->op_type)) != NULL) {
    op->kind = RT_OP_SYSCALL;
    return 0;
  }
  if (strcmp(domain, BB_DOMAIN_MODULE) == 0) {
    long callee = find_function(n, g->artifact, nd->op_type);
    if (callee < 0)
      return fail(x, BB_INSTALL_UNRESOLVED_OP, BB_ERR_NOT_FOUND, "%s in `%s` calls a function the artifact lacks",
                  op->label, g->fn->name);
    op->kind = RT_OP_CALL;
    op->callee = (uint32_t)callee;
    return 0;
  }
  long comp = component_for(x, g->artifact, nd);
  if (comp < 0 && x->kind) return BB_ERR_MALFORMED; /* a malformed binding table */
  if (comp < 0) {
    const char *slot = bb_kv_get(&nd->metadata, BB_KEY_SLOT_NAME);
    return fail(x, BB_INSTALL_UNRESOLVED_OP, BB_ERR_NOT_FOUND,
                "%s in `%s` has nothing to run it: %s%s%s", op->label, g->fn->name,
                slot ? "slot `" : "no syscall, function or component serves it",
                slot ? slot : "", slot ? "` is not bound for my targets" : "");
  }
  op->kind = RT_OP_COMPONENT;
  op->component = (uint32_t)comp;
  op->role = role_of_domain(domain);
  if (!n->components.items[comp].type->invoke)
    return fail(x, BB_INSTALL_UNRESOLVED_OP, BB_ERR_UNSUPPORTED, "%s in `%s`: `%s` (slot `%s`) takes no op calls",
                op->label, g->fn->name, n->components.items[comp].type->type_name, n->components.items[comp].slot);
  return 0;
}

static int build_graph(installer *x, uint32_t gi) {
  bb_node *n = x->n;
  rt_graph *g = &n->graphs[gi];
  const bb_function *f = g->fn;
  g->ops = f->nodes.len ? bbi_mem_calloc(n->alloc, f->nodes.len, sizeof *g->ops) : NULL;
  if (g->ops || !f->nodes.len) g->n_ops = (uint32_t)f->nodes.len; /* bb_node_free walks n_ops entries */
  g->out_index = bbi_mem_calloc(n->alloc, g->n_sites + 1, sizeof *g->out_index);
  g->recv_sender = bbi_mem_calloc(n->alloc, g->n_sites + 1, sizeof *g->recv_sender);
  g->cons_start = bbi_mem_calloc(n->alloc, g->n_sites + 1, sizeof *g->cons_start);
  g->formal_in = bbi_mem_calloc(n->alloc, f->inputs.len + 1, sizeof *g->formal_in);
  g->formal_out = bbi_mem_calloc(n->alloc, f->outputs.len + 1, sizeof *g->formal_out);
  if ((f->nodes.len && !g->ops) || !g->out_index || !g->recv_sender || !g->cons_start || !g->formal_in ||
      !g->formal_out)
    return nomem(x);
  for (uint32_t s = 0; s < g->n_sites; s++) g->out_index[s] = g->recv_sender[s] = RT_NONE;
  g->n_in = (uint32_t)f->inputs.len;
  for (uint32_t i = 0; i < g->n_in; i++) g->formal_in[i] = site_of(g, f->inputs.items[i]);
  g->n_out = (uint32_t)f->outputs.len;
  for (uint32_t i = 0; i < g->n_out; i++) {
    g->formal_out[i] = site_of(g, f->outputs.items[i]);
    if (g->formal_out[i] != RT_NONE && g->out_index[g->formal_out[i]] == RT_NONE) g->out_index[g->formal_out[i]] = i;
  }
  size_t n_edges = 0;
  for (uint32_t oi = 0; oi < g->n_ops; oi++) {
    rt_op *op = &g->ops[oi];
    op->ir = f->nodes.items[oi];
    op->n_in = (uint32_t)op->ir->inputs.len;
    op->n_out = (uint32_t)op->ir->outputs.len;
    op->in = bbi_mem_calloc(n->alloc, op->n_in + 1, sizeof *op->in);
    op->out = bbi_mem_calloc(n->alloc, op->n_out + 1, sizeof *op->out);
    if (!op->in || !op->out || op_label(x, op)) return nomem(x);
    for (uint32_t i = 0; i < op->n_in; i++) {
      op->in[i] = site_of(g, op->ir->inputs.items[i]);
      if (op->in[i] == RT_NONE && op->ir->inputs.items[i][0])
        return fail(x, BB_INSTALL_BAD_ARTIFACT, BB_ERR_MALFORMED, "%s in `%s` reads `%s`, which nothing produces",
                    op->label, f->name, op->ir->inputs.items[i]);
      if (op->in[i] != RT_NONE) n_edges++;
    }
    for (uint32_t o = 0; o < op->n_out; o++) op->out[o] = site_of(g, op->ir->outputs.items[o]);
    op->deadline_ns = bb_attr_get_int(&op->ir->attrs, BB_ATTR_DEADLINE_NS, 0);
    if (op->deadline_ns < 0) op->deadline_ns = 0;
  }
  /* consumers, CSR (an op reading a site twice is listed once) */
  g->cons = bbi_mem_calloc(n->alloc, n_edges + 1, sizeof *g->cons);
  if (!g->cons) return nomem(x);
  for (uint32_t oi = 0; oi < g->n_ops; oi++)
    for (uint32_t i = 0; i < g->ops[oi].n_in; i++) {
      uint32_t s = g->ops[oi].in[i];
      bool dup = false;
      for (uint32_t j = 0; j < i; j++) dup |= g->ops[oi].in[j] == s;
      if (s != RT_NONE && !dup) g->cons_start[s + 1]++;
    }
  for (uint32_t s = 0; s < g->n_sites; s++) g->cons_start[s + 1] += g->cons_start[s];
  uint32_t *fill = bbi_mem_calloc(n->alloc, g->n_sites + 1, sizeof *fill);
  if (!fill) return nomem(x);
  for (uint32_t oi = 0; oi < g->n_ops; oi++)
    for (uint32_t i = 0; i < g->ops[oi].n_in; i++) {
      uint32_t s = g->ops[oi].in[i];
      bool dup = false;
      for (uint32_t j = 0; j < i; j++) dup |= g->ops[oi].in[j] == s;
      if (s != RT_NONE && !dup) g->cons[g->cons_start[s] + fill[s]++] = oi;
    }
  bbi_mem_free(n->alloc, fill);
  if (!g->active) return 0;
  for (uint32_t oi = 0; oi < g->n_ops; oi++) {
    int rc = resolve_op(x, gi, oi);
    if (rc) return rc;
  }
  return 0;
}

static int copy_addresses(installer *x) {
  bb_node *n = x->n;
  const bb_install_args *a = x->args;
  if (!a->n_addresses) return 0;
  n->self_addrs = bbi_mem_calloc(n->alloc, a->n_addresses, sizeof *n->self_addrs);
  if (!n->self_addrs) return nomem(x);
  for (size_t i = 0; i < a->n_addresses; i++) {
    if (!a->addresses[i].n) continue;
    n->self_addrs[n->n_self_addrs++] = a->addresses[i];
    n->parts.self_addrs = n->self_addrs;
    n->parts.n_self_addrs = n->n_self_addrs;
    if (rt_book_add(&n->book, &n->self, &a->addresses[i])) return nomem(x);
  }
  return 0;
}

/* Decodes one artifact and checks its passport. */
static int load_artifact(installer *x, uint32_t k, const artifact_in *in) {
  bb_node *n = x->n;
  bb_error derr;
  if (!in->bytes)
    return fail(x, BB_INSTALL_INVALID_ARGUMENT, BB_ERR_INVALID_ARGUMENT, "artifact %u: no bytes", k);
  int rc = bb_model_decode(in->bytes, in->len, n->alloc, NULL, &n->models[k], &derr);
  if (rc)
    return fail(x, rc == BB_ERR_NOMEM ? BB_INSTALL_OUT_OF_MEMORY : BB_INSTALL_BAD_ARTIFACT, rc,
                "artifact %u is not a ModelProto: %s", k, derr.message);
  n->n_models = k + 1;
  const char *passport = bb_kv_get(&n->models[k]->metadata, BB_KEY_COMPILED);
  if (!passport)
    return fail(x, BB_INSTALL_NOT_COMPILED, BB_ERR_INVALID_ARGUMENT,
                "artifact %u carries no `" BB_KEY_COMPILED "` stamp; compile it first (bb compile)", k);
  if (strcmp(passport, BB_COMPILED_VERSION) != 0)
    return fail(x, BB_INSTALL_INCOMPATIBLE_VERSION, BB_ERR_UNSUPPORTED,
                "artifact %u was compiled as `%s`, this runtime requires `" BB_COMPILED_VERSION "`; recompile it", k,
                passport);
  return 0;
}

/* The targets of one artifact (a target named twice counts once); a partition two
 * artifacts share a name with cannot be told apart, so it is refused. */
static int add_targets(installer *x, uint32_t k, const artifact_in *in) {
  bb_node *n = x->n;
  for (size_t t = 0; t < in->n_targets; t++) {
    uint32_t g = 0;
    if (!in->targets[t])
      return fail(x, BB_INSTALL_INVALID_ARGUMENT, BB_ERR_INVALID_ARGUMENT, "artifact %u: target %zu is NULL", k, t);
    int rc = resolve_target(x, k, in->targets[t], &g);
    if (rc) return rc;
    const char *name = n->models[k]->functions.items[g - graph_base(n, k)]->name;
    bool again = false;
    for (size_t u = 0; u < n->n_targets && !again; u++) {
      if (n->targets[u].artifact == k && n->targets[u].graph == g) again = true;
      else if (strcmp(n->targets[u].name, name) == 0)
        return fail(x, BB_INSTALL_INVALID_ARGUMENT, BB_ERR_EXISTS, "target `%s` is in artifacts %u and %u", name,
                    n->targets[u].artifact, k);
    }
    if (again) continue;
    rt_target *tg = &n->targets[n->n_targets];
    tg->artifact = k;
    tg->graph = g;
    if (!(tg->name = bbi_mem_strdup(n->alloc, name))) return nomem(x);
    tg->bootstrap = find_bootstrap(n, k, name);
    n->n_targets++;
  }
  return 0;
}

static int install(installer *x) {
  const bb_install_args *a = x->args;
  bb_node *n = x->n;
  int rc;
  size_t n_more = a->struct_size > BB_INSTALL_ARGS_SIZE_V1 ? a->n_more : 0;
  size_t n_in = 1 + n_more, n_targets = a->n_targets;
  for (size_t k = 0; k < n_more; k++) n_targets += a->more ? a->more[k].n_targets : 0;
  if (!a->n_targets || !a->targets)
    return fail(x, BB_INSTALL_EMPTY_TARGETS, BB_ERR_INVALID_ARGUMENT, "no targets: name the partitions this peer runs");
  if (!a->artifact || !a->self.len || (n_more && !a->more) || n_in > UINT32_MAX)
    return fail(x, BB_INSTALL_INVALID_ARGUMENT, BB_ERR_INVALID_ARGUMENT, "the artifact bytes and a peer id are required");
  n->models = bbi_mem_calloc(n->alloc, n_in, sizeof *n->models);
  n->targets = bbi_mem_calloc(n->alloc, n_targets, sizeof *n->targets);
  if (!n->models || !n->targets) return nomem(x);
  for (uint32_t k = 0; k < n_in; k++) {
    artifact_in in = k ? (artifact_in){a->more[k - 1].artifact, a->more[k - 1].artifact_len, a->more[k - 1].targets,
                                       a->more[k - 1].n_targets}
                       : (artifact_in){a->artifact, a->artifact_len, a->targets, a->n_targets};
    if (k && (!in.n_targets || !in.targets))
      return fail(x, BB_INSTALL_EMPTY_TARGETS, BB_ERR_INVALID_ARGUMENT, "artifact %u: no targets", k);
    if ((rc = load_artifact(x, k, &in)) || (rc = add_targets(x, k, &in))) return rc;
  }
  if ((rc = copy_addresses(x)) || (rc = construct_components(x)) || (rc = assign_sites(x))) return rc;
  for (size_t t = 0; t < n->n_targets; t++) {
    mark_active(n, n->targets[t].graph);
    n->graphs[n->targets[t].graph].target = (int)t;
    if (n->targets[t].bootstrap >= 0) mark_active(n, (uint32_t)n->targets[t].bootstrap);
  }
  for (uint32_t gi = 0; gi < n->n_graphs; gi++)
    if ((rc = build_graph(x, gi))) return rc;
  return check_wires(x);
}

/* A node with no artifact yet: its settings, empty parts, and the parts its components
 * and sends reach. */
static void init_node(bb_node *n, const bb_allocator *alloc, const bb_install_args *args) {
  memset(n, 0, sizeof *n);
  n->alloc = alloc;
  n->self = args->self;
  config_defaults(&n->cfg, args->config);
  const bb_node_config *c = &n->cfg;
  n->rng = c->seed ^ 0x6a09e667f3bcc909ull;
  n->next_exec = n->next_command = n->next_wire_req = 1;
  n->bootstrap_running = -1;
  n->frontier = bbi_ring_of(sizeof(rt_task));
  n->components.alloc = alloc;
  rt_counters_init(&n->counters, alloc);
  rt_pending_init(&n->pending, alloc);
  rt_timers_init(&n->timers, alloc, c->max_timers, &n->counters);
  rt_ingress_init(&n->ingress, alloc, c->ingress_byte_budget);
  rt_outbound_init(&n->outbound, alloc, c->max_outbound, &n->counters);
  rt_book_init(&n->book, alloc, c->max_peers, &n->self, &n->counters);
  rt_replay_init(&n->replay, alloc, c->dedup_window);
  rt_steps_init(&n->acc, alloc);
  rt_steps_init(&n->batch, alloc);
  n->parts = (rt_parts){.alloc = alloc,
                        .self = &n->self,
                        .rng = &n->rng,
                        .next_command = &n->next_command,
                        .next_wire_req = &n->next_wire_req,
                        .components = &n->components,
                        .book = &n->book,
                        .admission = &n->admission,
                        .outbound = &n->outbound,
                        .timers = &n->timers,
                        .steps = &n->acc,
                        .counters = &n->counters};
  if (args->struct_size > BB_INSTALL_ARGS_SIZE_V3) {
    n->parts.sign = args->sign;
    n->parts.sign_user = args->sign_user;
  }
}

/* The envelope caps the config points to, copied (the caller's struct need not outlive
 * install); false, with the error set, for a struct_size this library cannot read. */
static bool read_envelope_caps(const bb_install_args *args, bb_envelope_caps *out, bb_error *err) {
  bb_node_config c;
  config_defaults(&c, args->config);
  const bb_envelope_caps *given = c.envelope_caps;
  *out = (bb_envelope_caps){.struct_size = sizeof *out};
  if (!given || bbi_options_read(out, sizeof *out, given)) return true;
  bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "install: config.envelope_caps has struct_size %zu; set it to sizeof(bb_envelope_caps), %zu",
               given->struct_size, sizeof *out);
  return false;
}

int bb_install(const bb_install_args *args, bb_node **out, bb_install_error_kind *kind, bb_error *err) {
  if (kind) *kind = BB_INSTALL_OK;
  if (out) *out = NULL;
  if (!args || !out || args->struct_size < BB_INSTALL_ARGS_SIZE_V1) {
    if (kind) *kind = BB_INSTALL_INVALID_ARGUMENT;
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "install: args (with struct_size set) and out are required");
  }
  bb_envelope_caps caps;
  if (!read_envelope_caps(args, &caps, err)) {
    if (kind) *kind = BB_INSTALL_INVALID_ARGUMENT;
    return BB_ERR_INVALID_ARGUMENT;
  }
  const bb_allocator *alloc = args->alloc ? args->alloc : bb_default_allocator();
  bb_node *n = alloc->malloc(sizeof *n, alloc->user_data);
  if (!n) {
    if (kind) *kind = BB_INSTALL_OUT_OF_MEMORY;
    return bb_error_set(err, BB_ERR_NOMEM, "install: out of memory");
  }
  init_node(n, alloc, args);
  n->envelope_caps = caps;
  n->cfg.envelope_caps = NULL;
  const bb_join_policy *policy = args->struct_size > BB_INSTALL_ARGS_SIZE_V2 ? args->admission : NULL;
  int rc = rt_admission_init(&n->admission, alloc, policy, n->cfg.max_admitted, &n->counters, err);
  n->admission.hook = args->admit;
  n->admission.hook_user = args->admit_user;
  if (rc) {
    if (kind) *kind = rc == BB_ERR_NOMEM ? BB_INSTALL_OUT_OF_MEMORY : BB_INSTALL_INVALID_ARGUMENT;
    bb_node_free(n);
    return rc;
  }
  installer x = {n, args, BB_INSTALL_OK, err};
  rc = install(&x);
  if (rc) {
    if (kind) *kind = x.kind ? x.kind : BB_INSTALL_BAD_ARTIFACT;
    bb_node_free(n);
    return rc;
  }
  *out = n;
  return 0;
}
