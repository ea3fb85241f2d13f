/* bb_module_build: record the body, then the bootstrap, into one model, and give the
 * model what standard ONNX tools need (IR version, opset imports, a main graph). */
#include <stdio.h>
#include <string.h>

#include "dsl/recorder.h"

/* Records one phase of the top-level module into a new root function; returns its index. */
static int record_root(bb_rec *r, const bb_module *m, bool bootstrap, uint32_t *index) {
  char name[REC_NAME_MAX + 16];
  snprintf(name, sizeof name, "%s%s", m->name, bootstrap ? BB_BOOTSTRAP_SUFFIX : "");
  r->in_bootstrap = bootstrap;
  r->next_site = 0; /* value names restart per recording (body, then bootstrap) */
  if (!rec_fn_new(r, name, m, bootstrap, index) || rec_frame_push(r, *index, NULL, 0)) return r->error.code;
  (bootstrap ? m->bootstrap : m->body)(r, m->user);
  rec_frame_pop(r);
  return r->failed ? r->error.code : 0;
}

static int record(bb_rec *r, const bb_module *m, uint32_t *boot_root) {
  uint32_t body_root;
  *boot_root = UINT32_MAX;
  if (!rec_check_module(r, m)) return r->error.code;
  int rc = record_root(r, m, false, &body_root);
  if (rc) return rc;
  if (!r->fns.items[body_root]->fn->nodes.len)
    return rec_error(r, BB_ERR_INVALID_ARGUMENT, "module '%s' recorded nothing: its body made no nodes", m->name);
  if (!m->bootstrap) return 0;
  if ((rc = record_root(r, m, true, boot_root))) return rc;
  rec_fn *boot = r->fns.items[*boot_root];
  boot->dropped = boot->fn->nodes.len == 0; /* a bootstrap is kept only if it made a node */
  return 0;
}

/* Functions in recording order (body root, its sub-functions, bootstrap root, the
 * bootstrap's own sub-functions), phase stamps, opset imports, IR version, main graph. */
static int assemble(bb_rec *r, const bb_module *m, uint32_t boot_root) {
  bb_model *model = r->model;
  model->has_ir_version = true;
  model->ir_version = BB_ONNX_IR_VERSION;
  if (bb_model_set_string(model, &model->producer_name, "bytesandbrains") ||
      bb_model_set_string(model, &model->producer_version, BB_VERSION_STRING) ||
      bb_opset_set(model, &model->opsets, "", BB_ONNX_OPSET_VERSION) || !(model->graph = bb_graph_new(model, m->name)))
    return rec_nomem(r);
  for (uint32_t i = 0; i < r->fns.len; i++) {
    rec_fn *f = r->fns.items[i];
    if (f->dropped) continue;
    const char *phase = i == 0 ? BB_MODULE_PHASE_BODY : i == boot_root ? BB_MODULE_PHASE_BOOTSTRAP : NULL;
    if ((phase && bb_kv_append(model, &f->fn->metadata, BB_KEY_MODULE_PHASE, phase)) ||
        bb_model_add_function(model, f->fn))
      return rec_nomem(r);
    for (size_t k = 0; k < f->fn->opsets.len; k++) {
      const bb_opset *o = &f->fn->opsets.items[k];
      if (bb_opset_get(&model->opsets, o->domain) < 0 && bb_opset_set(model, &model->opsets, o->domain, o->version))
        return rec_nomem(r);
    }
  }
  return 0;
}

int bb_module_build(const bb_module *module, const bb_allocator *alloc, bb_model **out, bb_error *err) {
  if (out) *out = NULL;
  if (!module || !out) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "bb_module_build needs a module and out");
  bb_rec r;
  memset(&r, 0, sizeof r);
  r.alloc = alloc ? alloc : bb_default_allocator();
  r.model = bb_model_new(r.alloc);
  r.scratch = bbi_arena_new(r.alloc);
  int rc;
  if (!r.model || !r.scratch) {
    rc = bb_error_set(&r.error, BB_ERR_NOMEM, "out of memory while recording");
  } else {
    uint32_t boot_root;
    rc = record(&r, module, &boot_root);
    if (!rc) rc = assemble(&r, module, boot_root);
  }
  for (size_t i = 0; i < r.fns.len; i++) bbi_strmap_free(&r.fns.items[i]->names);
  bbi_arena_free(r.scratch);
  if (rc) {
    bb_model_free(r.model);
    if (err) *err = r.error;
    return rc;
  }
  *out = r.model;
  if (err) bb_error_clear(err);
  return 0;
}
