/* Sub-module calls: record the callee's body (or bootstrap) into its own function the
 * first time, and a CALL node in the caller every time. */
#include <stdio.h>
#include <string.h>

#include "dsl/recorder.h"

bool rec_check_module(bb_rec *r, const bb_module *m) {
  if (r->failed) return false;
  if (!m) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "module is NULL");
    return false;
  }
  if (!rec_check_name(r, "module", m->name)) return false;
  if (m->struct_size < sizeof(bb_module)) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "module '%s' has struct_size %zu; set it to sizeof(bb_module)", m->name,
              m->struct_size);
    return false;
  }
  if (!m->body) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "module '%s' has no body callback", m->name);
    return false;
  }
  if (m->n_submodules && !m->submodules) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "module '%s' counts %zu submodules but gives no array", m->name,
              m->n_submodules);
    return false;
  }
  return true;
}

/* The callee must be one of the caller's declared submodules. */
static bool check_callee(bb_rec *r, const bb_module *callee) {
  if (!callee) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "call of a NULL module");
    return false;
  }
  const bb_module *caller = rec_cur(r)->module;
  for (size_t i = 0; i < caller->n_submodules; i++)
    if (caller->submodules[i] == callee) return rec_check_module(r, callee);
  rec_error(r, BB_ERR_NOT_FOUND, "calls module '%s', which is not one of its submodules",
            callee->name ? callee->name : "(unnamed)");
  return false;
}

static bool check_bindings(bb_rec *r, const bb_module *callee, const bb_binding *b, size_t n) {
  if (n && !b) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "call of module '%s' counts %zu bindings but gives no array",
              callee->name, n);
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    char what[2 * REC_NAME_MAX + 48];
    if (!rec_check_name(r, "input", b[i].input)) return false;
    snprintf(what, sizeof what, "the value bound to input '%s' of module '%s'", b[i].input, callee->name);
    if (!rec_check_value(r, b[i].value, what)) return false;
    for (size_t j = 0; j < i; j++)
      if (strcmp(b[j].input, b[i].input) == 0) {
        rec_error(r, BB_ERR_EXISTS, "input '%s' of module '%s' is bound twice", b[i].input, callee->name);
        return false;
      }
  }
  return true;
}

/* Runs the callee's callback into a new function f (index fi). */
static bool record_callee(bb_rec *r, const bb_module *callee, bool bootstrap, uint32_t fi, const bb_binding *b,
                          size_t n) {
  if (rec_frame_push(r, fi, b, n)) return false;
  (bootstrap ? callee->bootstrap : callee->body)(r, callee->user);
  rec_frame_pop(r);
  if (r->failed) return false;
  rec_fn *f = r->fns.items[fi];
  if (!f->fn->nodes.len) {
    if (bootstrap) {
      f->dropped = true; /* an empty bootstrap is no bootstrap: no function, no CALL */
      return true;
    }
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "module '%s' recorded nothing: its body made no nodes", callee->name);
    return false;
  }
  return true;
}

/* Every formal bound once, every binding a formal, and no concrete type clash. */
static bool match_bindings(bb_rec *r, const rec_fn *f, const bb_binding *b, size_t n) {
  const bb_strlist *formals = &f->fn->inputs;
  for (size_t i = 0; i < n; i++)
    if (bb_strlist_find(formals, b[i].input) < 0) {
      rec_error(r, BB_ERR_NOT_FOUND, "module '%s' has no input '%s'", f->fn->name, b[i].input);
      return false;
    }
  for (size_t k = 0; k < formals->len; k++) {
    const bb_binding *match = NULL;
    for (size_t i = 0; i < n && !match; i++)
      if (strcmp(b[i].input, formals->items[k]) == 0) match = &b[i];
    if (!match) {
      rec_error(r, BB_ERR_NOT_FOUND, "input '%s' of module '%s' is not bound", formals->items[k], f->fn->name);
      return false;
    }
    uint32_t id;
    bbi_strmap_get(&f->names, formals->items[k], &id);
    const char *formal = r->values.items[id].type, *actual = rec_value_type(r, match->value);
    if (rec_types_conflict(formal, actual)) {
      rec_error(r, BB_ERR_TYPE, "input '%s' of module '%s' is %s, but this call binds '%s' of type %s",
                formals->items[k], f->fn->name, formal, match->value.name, actual);
      return false;
    }
  }
  return true;
}

/* The CALL node: inputs in the callee's formal order, one fresh output per callee port,
 * typed like the port. */
static bool push_call(bb_rec *r, const rec_fn *f, const bb_binding *b, size_t n, rec_call *call) {
  bb_ir_node *node = rec_node_new(r, f->fn->name, BB_DOMAIN_MODULE);
  if (!node) return false;
  for (size_t k = 0; k < f->fn->inputs.len; k++)
    for (size_t i = 0; i < n; i++)
      if (strcmp(b[i].input, f->fn->inputs.items[k]) == 0 && rec_node_input(r, node, b[i].value.name)) return false;
  const bb_strlist *ports = &f->fn->outputs;
  const char **outs = bbi_arena_alloc(r->scratch, (ports->len + 1) * sizeof *outs);
  if (!outs) {
    rec_nomem(r);
    return false;
  }
  for (size_t k = 0; k < ports->len; k++)
    if (!(outs[k] = rec_mint_name(r)) || rec_node_output(r, node, outs[k])) return false;
  if (rec_node_push(r, node)) return false;
  call->first_output = (uint32_t)r->values.len;
  for (size_t k = 0; k < ports->len; k++) {
    uint32_t id;
    bbi_strmap_get(&f->names, ports->items[k], &id);
    if (!rec_define(r, outs[k], r->values.items[id].type).name) return false;
  }
  return true;
}

static bb_call record_call(bb_rec *r, const bb_module *callee, bool bootstrap, const bb_binding *b, size_t n) {
  bb_call none = {0};
  if (!r || r->failed) return none;
  if (bootstrap && !r->in_bootstrap) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "composes the bootstrap of module '%s' outside a bootstrap callback",
              callee && callee->name ? callee->name : "(unnamed)");
    return none;
  }
  if (!check_callee(r, callee) || !check_bindings(r, callee, b, n)) return none;
  rec_call call = {UINT32_MAX, rec_top(r)->fn, 0, callee};
  if (!bootstrap || callee->bootstrap) {
    char name[REC_NAME_MAX + 16];
    snprintf(name, sizeof name, "%s%s", callee->name, bootstrap ? BB_BOOTSTRAP_SUFFIX : "");
    long found = rec_fn_find(r, name);
    uint32_t fi;
    if (found >= 0) {
      fi = (uint32_t)found;
      const rec_fn *f = r->fns.items[fi];
      if (f->module != callee) {
        rec_error(r, BB_ERR_EXISTS, "calls a module named '%s', but a different module of that name was called before",
                  callee->name);
        return none;
      }
      if (f->active) {
        rec_error(r, BB_ERR_INVALID_ARGUMENT, "calls '%s', which is already being recorded: modules cannot recurse",
                  name);
        return none;
      }
    } else if (!rec_fn_new(r, name, callee, bootstrap, &fi) || !record_callee(r, callee, bootstrap, fi, b, n)) {
      return none;
    }
    const rec_fn *f = r->fns.items[fi];
    if (!f->dropped) {
      call.callee = fi;
      if (!match_bindings(r, f, b, n) || !push_call(r, f, b, n, &call)) return none;
    }
  }
  if (BBI_ARENA_PUSH(r->scratch, &r->calls, call)) {
    rec_nomem(r);
    return none;
  }
  bb_call out = {r, (uint32_t)(r->calls.len - 1)};
  return out;
}

bb_call bb_rec_call(bb_rec *rec, const bb_module *callee, const bb_binding *bindings, size_t n_bindings) {
  return record_call(rec, callee, false, bindings, n_bindings);
}

bb_call bb_rec_call_bootstrap(bb_rec *rec, const bb_module *callee, const bb_binding *bindings,
                              size_t n_bindings) {
  return record_call(rec, callee, true, bindings, n_bindings);
}

bb_value bb_rec_call_output(bb_rec *rec, bb_call call, const char *port) {
  bb_value none = {0};
  if (!rec || !rec_check_name(rec, "output port", port)) return none;
  if (call.rec != rec || call.id >= rec->calls.len) {
    rec_error(rec, BB_ERR_INVALID_ARGUMENT, "reads output port '%s' of a call that is not from this recording",
              port);
    return none;
  }
  const rec_call *c = &rec->calls.items[call.id];
  if (c->caller != rec_top(rec)->fn) {
    rec_error(rec, BB_ERR_INVALID_ARGUMENT,
              "reads output port '%s' of a call made in another function; pass the value in through an input",
              port);
    return none;
  }
  long k = c->callee == UINT32_MAX ? -1 : bb_strlist_find(&rec->fns.items[c->callee]->fn->outputs, port);
  if (k < 0) {
    rec_error(rec, BB_ERR_NOT_FOUND, "module '%s'%s has no output port '%s'", c->module->name,
              c->callee == UINT32_MAX ? " recorded no bootstrap, so its call" : "", port);
    return none;
  }
  return rec_handle(rec, c->first_output + (uint32_t)k);
}
