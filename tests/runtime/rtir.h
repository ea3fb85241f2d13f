/* Artifacts built directly as IR for the runtime tests: a passport, binding entries and
 * functions made of node tables — for the cases the DSL and compiler cannot (or would
 * refuse to) produce: missing passports, malformed bindings, dangling destinations. */
#ifndef BB_TESTS_RTIR_H
#define BB_TESTS_RTIR_H

#include <stdio.h>
#include <string.h>

#include "bb/graph.h"
#include "bb/ir.h"
#include "harness.h"

/* One node: op is "OpType" (a syscall) or "<domain>::OpType". */
typedef struct ir_node_spec {
  const char *op;
  const char *in[4], *out[4];
  const char *slot;         /* ai.bytesandbrains.slot_name, or NULL */
  const char *iattr;        /* an INT attribute, or NULL */
  int64_t ival;
  const char *meta[4];      /* more metadata (a Send's dest_site_names): key, value, key, value */
} ir_node_spec;

typedef struct ir_fn_spec {
  const char *name;
  const char *in[4], *out[4];
  const ir_node_spec *nodes;
  size_t n_nodes;
  bool bootstrap; /* module_phase = bootstrap */
} ir_fn_spec;

/* A model stamped with `passport` (NULL: none). */
__attribute__((unused)) static bb_model *ir_model(const char *passport) {
  bb_model *m = bb_model_new(NULL);
  m->has_ir_version = true;
  m->ir_version = BB_ONNX_IR_VERSION;
  if (passport) bb_kv_upsert(m, &m->metadata, "ai.bytesandbrains.compiled", passport);
  bb_opset_set(m, &m->opsets, "", BB_ONNX_OPSET_VERSION);
  return m;
}

__attribute__((unused)) static void ir_meta(bb_model *m, const char *key, const char *value) {
  bb_kv_upsert(m, &m->metadata, key, value);
}

/* The wire table entry of a wire the artifact sends on (in = false) or receives from,
 * as the compiler writes it: "<Kind>|<type>|0x<type hash>". */
__attribute__((unused)) static void ir_wire(bb_model *m, bool in, const char *wire, const char *type) {
  char key[320], value[320];
  snprintf(key, sizeof key, "%s%s", in ? BB_KEY_WIRE_IN_PREFIX : BB_KEY_WIRE_OUT_PREFIX, wire);
  bb_wire_entry_format(type, value, sizeof value);
  ir_meta(m, key, value);
}

/* Declares the wires of hand-built nodes the way the compiler does: a Recv without a
 * wire_id listens to the wire named after its payload, and every wire a Send names or a
 * Recv listens to gets a wire table entry of the abstract type. */
__attribute__((unused)) static void ir_declare_wires(bb_model *m) {
  const size_t plen = strlen(BB_KEY_DEST_SITE_PREFIX);
  for (size_t f = 0; f < m->functions.len; f++) {
    const bb_function *fn = m->functions.items[f];
    for (size_t i = 0; i < fn->nodes.len; i++) {
      bb_ir_node *nd = fn->nodes.items[i];
      if (!nd->domain || strcmp(nd->domain, BB_DOMAIN_WIRE) != 0) continue;
      if (strcmp(nd->op_type, "Recv") == 0 && nd->outputs.len) {
        if (!bb_kv_get(&nd->metadata, BB_KEY_WIRE_ID))
          bb_kv_upsert(m, &nd->metadata, BB_KEY_WIRE_ID, nd->outputs.items[0]);
        ir_wire(m, true, bb_kv_get(&nd->metadata, BB_KEY_WIRE_ID), "");
      }
      for (size_t k = 0; strcmp(nd->op_type, "Send") == 0 && k < nd->metadata.len; k++)
        if (nd->metadata.items[k].key && strncmp(nd->metadata.items[k].key, BB_KEY_DEST_SITE_PREFIX, plen) == 0)
          ir_wire(m, false, nd->metadata.items[k].value, "");
    }
  }
}

/* "ai.bytesandbrains.binding.<target>.<slot>" = "<binding>". */
__attribute__((unused)) static void ir_bind(bb_model *m, const char *target, const char *slot, const char *binding) {
  char key[256];
  snprintf(key, sizeof key, "ai.bytesandbrains.binding.%s.%s", target, slot);
  ir_meta(m, key, binding);
}

__attribute__((unused)) static void ir_add_fn(bb_model *m, const ir_fn_spec *spec) {
  bb_function *f = bb_function_new(m, spec->name, BB_DOMAIN_MODULE);
  for (int i = 0; i < 4 && spec->in[i]; i++) bb_strlist_append(m, &f->inputs, spec->in[i]);
  for (int i = 0; i < 4 && spec->out[i]; i++) bb_strlist_append(m, &f->outputs, spec->out[i]);
  if (spec->bootstrap) bb_kv_upsert(m, &f->metadata, BB_KEY_MODULE_PHASE, BB_MODULE_PHASE_BOOTSTRAP);
  for (size_t k = 0; k < spec->n_nodes; k++) {
    const ir_node_spec *ns = &spec->nodes[k];
    const char *sep = strstr(ns->op, "::");
    char domain[96] = BB_DOMAIN_SYSCALL;
    const char *op = ns->op;
    if (sep) {
      snprintf(domain, sizeof domain, "%.*s", (int)(sep - op), op);
      op = sep + 2;
    }
    char name[32];
    snprintf(name, sizeof name, "n%zu", k);
    bb_ir_node *nd = bb_ir_node_new(m, op, domain, name);
    for (int i = 0; i < 4 && ns->in[i]; i++) bb_strlist_append(m, &nd->inputs, ns->in[i]);
    for (int i = 0; i < 4 && ns->out[i]; i++) bb_strlist_append(m, &nd->outputs, ns->out[i]);
    if (ns->slot) bb_kv_upsert(m, &nd->metadata, BB_KEY_SLOT_NAME, ns->slot);
    if (ns->iattr) bb_attr_set_int(m, &nd->attrs, ns->iattr, ns->ival);
    for (int i = 0; i < 4 && ns->meta[i]; i += 2) bb_kv_upsert(m, &nd->metadata, ns->meta[i], ns->meta[i + 1]);
    bb_nodelist_append(m, &f->nodes, nd);
  }
  bb_model_add_function(m, f);
}

/* The model's bytes (the model is freed). */
__attribute__((unused)) static uint8_t *ir_encode(bb_model *m, size_t *len) {
  uint8_t *bytes = NULL;
  CHECK(bb_model_encode(m, &bytes, len, NULL) == 0);
  bb_model_free(m);
  return bytes;
}

/* .nodes and .n_nodes of an ir_fn_spec from an array. */
#define IR_NODES(array) .nodes = (array), .n_nodes = sizeof(array) / sizeof *(array)

#endif
