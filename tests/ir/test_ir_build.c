/* Building and editing models through the IR API; models built this way pass the real
 * onnx.checker (python3-onnx, run through /usr/bin/python3 natively). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <unistd.h>

#include "bb/ir.h"
#include "harness.h"

static bb_ir_node *add_node(bb_model *m, bb_nodelist *l, const char *op, const char *domain, const char *in0,
                         const char *in1, const char *out) {
  bb_ir_node *n = bb_ir_node_new(m, op, domain, NULL);
  CHECK(n != NULL);
  if (in0) CHECK_EQ_INT(bb_strlist_append(m, &n->inputs, in0), 0);
  if (in1) CHECK_EQ_INT(bb_strlist_append(m, &n->inputs, in1), 0);
  CHECK_EQ_INT(bb_strlist_append(m, &n->outputs, out), 0);
  CHECK_EQ_INT(bb_nodelist_append(m, l, n), 0);
  return n;
}

/* A small MLP graph plus a bytesandbrains-style function, the shapes a compiler emits. */
static bb_model *build_mlp(void) {
  bb_model *m = bb_model_new(NULL);
  m->has_ir_version = true;
  m->ir_version = BB_ONNX_IR_VERSION;
  CHECK_EQ_INT(bb_model_set_string(m, &m->producer_name, "bytesandbrains-test"), 0);
  CHECK_EQ_INT(bb_opset_set(m, &m->opsets, "", BB_ONNX_OPSET_VERSION), 0);
  CHECK_EQ_INT(bb_opset_set(m, &m->opsets, "ai.bytesandbrains.role.model", 1), 0);
  CHECK_EQ_INT(bb_kv_append(m, &m->metadata, "ai.bytesandbrains.compiled", "v1"), 0);

  bb_graph *g = m->graph = bb_graph_new(m, "mlp");
  int64_t xdims[] = {-1, 4};
  bb_type *xt = bb_type_new_tensor(m, BB_DTYPE_FLOAT, 2, xdims);
  xt->shape->dims[0].kind = BB_DIM_PARAM;
  xt->shape->dims[0].param = bb_model_strdup(m, "N");
  CHECK(bb_vilist_add(m, &g->inputs, "x", xt) != NULL);
  bb_type *pt = bb_type_new_tensor(m, BB_DTYPE_FLOAT, 2, NULL);
  CHECK_EQ_INT(pt->shape->rank, 2);
  CHECK(bb_vilist_add(m, &g->outputs, "p", pt) != NULL);

  int64_t wdims[] = {4, 3};
  bb_tensor_proto *w = bb_tensor_proto_new(m, "W", BB_DTYPE_FLOAT, 2, wdims);
  float wv[12];
  for (int i = 0; i < 12; i++) wv[i] = 0.25f * (float)(i - 6);
  CHECK_EQ_INT(bb_tensor_proto_set_raw(m, w, wv, sizeof wv), 0);
  CHECK_EQ_INT(bb_tensorlist_append(m, &g->initializers, w), 0);
  int64_t bdims[] = {3};
  bb_tensor_proto *b = bb_tensor_proto_new(m, "b", BB_DTYPE_FLOAT, 1, bdims);
  CHECK_EQ_INT(bb_tensor_proto_set_raw(m, b, (float[]){0.1f, -0.2f, 0.3f}, 12), 0);
  CHECK_EQ_INT(bb_tensorlist_append(m, &g->initializers, b), 0);
  CHECK_EQ_INT(bb_tensor_proto_numel(w), 12);

  add_node(m, &g->nodes, "MatMul", NULL, "x", "W", "h");
  add_node(m, &g->nodes, "Add", NULL, "h", "b", "z");
  add_node(m, &g->nodes, "Relu", NULL, "z", NULL, "r");
  bb_ir_node *sm = add_node(m, &g->nodes, "Softmax", NULL, "r", NULL, "p");
  CHECK(bb_attr_set_int(m, &sm->attrs, "axis", 1) != NULL);
  CHECK(bb_vilist_add(m, &g->value_infos, "h", bb_type_new_tensor(m, BB_DTYPE_FLOAT, -1, NULL)) != NULL);

  bb_function *f = bb_function_new(m, "ClientLogic", "ai.bytesandbrains.module");
  CHECK_EQ_INT(bb_strlist_append(m, &f->inputs, "batch"), 0);
  CHECK_EQ_INT(bb_strlist_append(m, &f->outputs, "prediction"), 0);
  CHECK_EQ_INT(bb_opset_set(m, &f->opsets, "", BB_ONNX_OPSET_VERSION), 0);
  CHECK_EQ_INT(bb_opset_set(m, &f->opsets, "ai.bytesandbrains.role.model", 1), 0);
  bb_ir_node *fw = add_node(m, &f->nodes, "Forward", "ai.bytesandbrains.role.model", "batch", NULL, "prediction");
  CHECK_EQ_INT(bb_kv_append(m, &fw->metadata, "ai.bytesandbrains.required_trait", "ModelRuntime"), 0);
  CHECK_EQ_INT(bb_kv_append(m, &fw->metadata, "ai.bytesandbrains.slot_id", "0"), 0);
  CHECK_EQ_INT(bb_kv_append(m, &f->metadata, "ai.bytesandbrains.module_phase", "body"), 0);
  CHECK_EQ_INT(bb_model_add_function(m, f), 0);
  return m;
}

#ifndef __EMSCRIPTEN__ /* the ONNX checker (python3-onnx) runs in the native build only */
static int write_bytes(const char *path, const uint8_t *data, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t n = fwrite(data, 1, len, f);
  return fclose(f) == 0 && n == len ? 0 : -1;
}

/* Runs onnx.checker.check_model(full_check=True) on the model; returns the exit status. */
static int onnx_check(const bb_model *m, const char *tag) {
  uint8_t *bytes;
  size_t len;
  bb_error err;
  if (bb_model_encode(m, &bytes, &len, &err)) return -1;
  char path[256], cmd[1024];
  snprintf(path, sizeof path, "%s/bb-check-%s-%ld.onnx", BB_TEST_BINARY_DIR, tag, (long)getpid());
  int rc = write_bytes(path, bytes, len);
  bb_buffer_free(NULL, bytes);
  if (rc) return -1;
  snprintf(cmd, sizeof cmd,
           "%s -c 'import sys, onnx; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)' '%s' "
           "2>%s.err",
           BB_TEST_PYTHON, path, path);
  rc = system(cmd);
  if (rc != 0) {
    char errpath[300];
    snprintf(errpath, sizeof errpath, "%s.err", path);
    FILE *f = fopen(errpath, "r");
    char line[400], last[400] = "";
    while (f && fgets(line, sizeof line, f)) memcpy(last, line, sizeof last);
    if (*last) printf("    checker said: %s", last);
    if (f) fclose(f);
  }
  remove(path);
  char errpath[300];
  snprintf(errpath, sizeof errpath, "%s.err", path);
  remove(errpath);
  return rc;
}
#endif

static void test_built_model_passes_onnx_checker(void) {
#ifdef __EMSCRIPTEN__
  printf("    (the ONNX checker runs in the native build only)\n");
#else
  bb_model *m = build_mlp();
  CHECK_MSG(onnx_check(m, "good") == 0, "onnx.checker rejected a model built through the IR");
  /* The checker is really consulted: a dangling input must fail it. */
  bb_ir_node *relu = m->graph->nodes.items[2];
  relu->inputs.items[0] = bb_model_strdup(m, "no_such_value");
  CHECK_MSG(onnx_check(m, "bad") != 0, "onnx.checker accepted a node reading an undefined value");
  bb_model_free(m);
#endif
}

static void test_built_model_roundtrips(void) {
  bb_model *m = build_mlp();
  uint8_t *bytes;
  size_t len;
  bb_error err;
  CHECK_EQ_INT(bb_model_encode(m, &bytes, &len, &err), 0);
  bb_model *back = NULL;
  CHECK_EQ_INT(bb_model_decode(bytes, len, NULL, NULL, &back, &err), 0);
  CHECK(bb_model_equal(m, back));
  CHECK_STR(bb_kv_get(&back->functions.items[0]->nodes.items[0]->metadata, "ai.bytesandbrains.slot_id"), "0");
  CHECK_STR(back->graph->inputs.items[0]->type->shape->dims[0].param, "N");
  /* encoding is deterministic */
  uint8_t *again;
  size_t again_len;
  CHECK_EQ_INT(bb_model_encode(back, &again, &again_len, &err), 0);
  CHECK(again_len == len && memcmp(again, bytes, len) == 0);
  /* and equality notices a change */
  back->graph->nodes.items[3]->attrs.items[0]->i = 0;
  CHECK(!bb_model_equal(m, back));
  bb_buffer_free(NULL, again);
  bb_buffer_free(NULL, bytes);
  bb_model_free(back);
  bb_model_free(m);
}

static void test_metadata_helpers(void) {
  bb_model *m = bb_model_new(NULL);
  bb_kvlist kv = {0};
  CHECK(bb_kv_get(&kv, "a") == NULL);
  CHECK_EQ_INT(bb_kv_append(m, &kv, "a", "1"), 0);
  CHECK_EQ_INT(bb_kv_append(m, &kv, "b", "2"), 0);
  CHECK_EQ_INT(bb_kv_append(m, &kv, "a", "3"), 0);
  CHECK_STR(bb_kv_get(&kv, "a"), "1"); /* first match wins */
  CHECK_EQ_INT(bb_kv_upsert(m, &kv, "a", "9"), 0);
  CHECK_EQ_INT(kv.len, 2); /* the later duplicate is gone */
  CHECK_STR(kv.items[0].key, "a");
  CHECK_STR(kv.items[0].value, "9");
  CHECK_STR(kv.items[1].key, "b");
  CHECK_EQ_INT(bb_kv_upsert(m, &kv, "c", "4"), 0);
  CHECK_STR(kv.items[2].key, "c");
  CHECK_EQ_INT(bb_kv_remove(&kv, "b"), 1);
  CHECK_EQ_INT(bb_kv_remove(&kv, "b"), 0);
  CHECK_EQ_INT(kv.len, 2);
  for (int i = 0; i < 1000; i++) {
    char key[16];
    snprintf(key, sizeof key, "k%d", i);
    CHECK_EQ_INT(bb_kv_upsert(m, &kv, key, key), 0);
  }
  CHECK_STR(bb_kv_get(&kv, "k999"), "k999");
  CHECK_EQ_INT(kv.len, 1002);
  bb_model_free(m);
}

static void test_attribute_helpers(void) {
  bb_model *m = bb_model_new(NULL);
  bb_attrlist l = {0};
  CHECK(bb_attr_set_int(m, &l, "axis", 1));
  CHECK(bb_attr_set_float(m, &l, "alpha", 0.5f));
  CHECK(bb_attr_set_string(m, &l, "mode", "constant"));
  CHECK(bb_attr_set_ints(m, &l, "perm", (int64_t[]){1, 0}, 2));
  CHECK(bb_attr_set_floats(m, &l, "scales", (float[]){1.f, 2.f}, 2));
  CHECK(bb_attr_set_strings(m, &l, "names", (const char *[]){"a", "bc"}, 2));
  CHECK(bb_attr_set_int(m, &l, "axis", -1)); /* upsert keeps position */
  CHECK_EQ_INT(l.len, 6);
  CHECK_STR(l.items[0]->name, "axis");
  CHECK_EQ_INT(bb_attr_get_int(&l, "axis", 7), -1);
  CHECK_EQ_INT(bb_attr_get_int(&l, "alpha", 7), 7); /* wrong type → default */
  CHECK(bb_attr_get_float(&l, "alpha", 0.f) == 0.5f);
  CHECK_STR(bb_attr_get_string(&l, "mode", NULL), "constant");
  CHECK(bb_attr_get_string(&l, "missing", NULL) == NULL);
  CHECK(bb_attr_set_bytes(m, &l, "raw", "a\0b", 3));
  CHECK(bb_attr_get_string(&l, "raw", NULL) == NULL); /* holds a NUL */
  CHECK_EQ_INT(bb_attr_find(&l, "names")->n_strings, 2);
  CHECK_EQ_INT(bb_attr_find(&l, "names")->strings[1].len, 2);
  CHECK_EQ_INT(bb_attr_remove(&l, "perm"), 1);
  CHECK(bb_attr_find(&l, "perm") == NULL);
  CHECK_STR(bb_attr_type_name(BB_ATTR_TYPE_PROTOS), "TYPE_PROTOS");
  CHECK(bb_attr_type_name(99) == NULL);
  bb_model_free(m);
}

/* m encoded and decoded again (NULL, with a failed check, when either step fails). */
static bb_model *encoded_and_decoded(const bb_model *m) {
  uint8_t *bytes = NULL;
  size_t len = 0;
  bb_error err;
  bb_model *back = NULL;
  CHECK_EQ_INT(bb_model_encode(m, &bytes, &len, &err), 0);
  CHECK_EQ_INT(bb_model_decode(bytes, len, NULL, NULL, &back, &err), 0);
  bb_buffer_free(NULL, bytes);
  return back;
}

/* A TYPE_PROTO attribute (as Optional's `type` takes) set through the IR survives an
 * encode and decode with its element type and shape. */
static void test_type_attribute_roundtrips(void) {
  bb_model *m = bb_model_new(NULL);
  m->graph = bb_graph_new(m, "g");
  bb_ir_node *n = add_node(m, &m->graph->nodes, "Optional", NULL, NULL, NULL, "o");
  int64_t dims[2] = {3, 4};
  bb_type *tp = bb_type_new_tensor(m, BB_DTYPE_DOUBLE, 2, dims);
  bb_attr *a = bb_attr_set_type(m, &n->attrs, "type", tp);
  CHECK(a && a->type == BB_ATTR_TYPE_PROTO && a->tp == tp);
  /* setting it again replaces the attribute in its place */
  a = bb_attr_set_type(m, &n->attrs, "type", bb_type_new_tensor(m, BB_DTYPE_FLOAT, 2, dims));
  CHECK_EQ_INT(n->attrs.len, 1);
  CHECK(a && n->attrs.items[0] == a && a->tp->elem_type == BB_DTYPE_FLOAT);
  bb_model *back = encoded_and_decoded(m);
  const bb_attr *b = back ? bb_attr_find(&back->graph->nodes.items[0]->attrs, "type") : NULL;
  CHECK(b && b->type == BB_ATTR_TYPE_PROTO && b->tp);
  if (b && b->tp) {
    CHECK_EQ_INT(b->tp->elem_type, BB_DTYPE_FLOAT);
    CHECK(b->tp->shape && b->tp->shape->rank == 2 && b->tp->shape->dims[1].value == 4);
  }
  CHECK(back && bb_model_equal(m, back));
  bb_model_free(back);
  bb_model_free(m);
}

static void test_list_edits(void) {
  bb_model *m = bb_model_new(NULL);
  bb_graph *g = bb_graph_new(m, "g");
  bb_ir_node *a = add_node(m, &g->nodes, "Relu", NULL, "x", NULL, "a");
  bb_ir_node *c = add_node(m, &g->nodes, "Relu", NULL, "b", NULL, "c");
  bb_ir_node *b = bb_ir_node_new(m, "Neg", NULL, "middle");
  CHECK_EQ_INT(bb_strlist_append(m, &b->outputs, "b"), 0);
  CHECK_EQ_INT(bb_nodelist_insert(m, &g->nodes, 1, b), 0);
  CHECK_EQ_INT(bb_nodelist_index(&g->nodes, a), 0);
  CHECK_EQ_INT(bb_nodelist_index(&g->nodes, b), 1);
  CHECK_EQ_INT(bb_nodelist_index(&g->nodes, c), 2);
  CHECK(bb_nodelist_producer(&g->nodes, "b") == b);
  CHECK(bb_nodelist_producer(&g->nodes, "zzz") == NULL);
  CHECK_EQ_INT(bb_nodelist_insert(m, &g->nodes, 9, b), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_strlist_insert(m, &b->inputs, 0, "a"), 0);
  CHECK_EQ_INT(bb_strlist_insert(m, &b->inputs, 0, ""), 0); /* omitted optional input */
  CHECK_EQ_INT(bb_strlist_find(&b->inputs, "a"), 1);
  CHECK_EQ_INT(bb_strlist_remove(&b->inputs, 0), 0);
  CHECK_EQ_INT(bb_strlist_find(&b->inputs, "a"), 0);
  CHECK_EQ_INT(bb_nodelist_remove(&g->nodes, 0), 0);
  CHECK_EQ_INT(g->nodes.len, 2);
  CHECK(g->nodes.items[0] == b);
  CHECK_EQ_INT(bb_nodelist_remove(&g->nodes, 5), BB_ERR_INVALID_ARGUMENT);
  for (int i = 0; i < 500; i++) CHECK_EQ_INT(bb_nodelist_insert(m, &g->nodes, 0, bb_ir_node_new(m, "Identity", NULL, NULL)), 0);
  CHECK(g->nodes.items[501] == c);

  CHECK(bb_vilist_add(m, &g->inputs, "x", NULL) && bb_vilist_add(m, &g->inputs, "y", NULL) &&
        bb_vilist_add(m, &g->inputs, "z", NULL));
  CHECK_EQ_INT(bb_vilist_remove(&g->inputs, 1), 0);
  CHECK_EQ_INT(g->inputs.len, 2);
  CHECK_STR(g->inputs.items[1]->name, "z");
  CHECK(bb_vilist_find(&g->inputs, "y") == NULL);
  CHECK_EQ_INT(bb_vilist_remove(&g->inputs, 2), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(g->inputs.len, 2);

  CHECK_EQ_INT(bb_opset_get(&m->opsets, "ai.onnx"), -1);
  CHECK_EQ_INT(bb_opset_set(m, &m->opsets, "ai.onnx", 13), 0);
  CHECK_EQ_INT(bb_opset_get(&m->opsets, ""), 13); /* "" and ai.onnx are one domain */
  CHECK_EQ_INT(bb_opset_set(m, &m->opsets, "", 17), 0);
  CHECK_EQ_INT(m->opsets.len, 1);
  CHECK_EQ_INT(bb_opset_get(&m->opsets, "ai.onnx"), 17);

  CHECK_STR(bb_dtype_name(BB_DTYPE_BFLOAT16), "bfloat16");
  CHECK_EQ_INT(bb_dtype_size(BB_DTYPE_DOUBLE), 8);
  CHECK_EQ_INT(bb_dtype_size(BB_DTYPE_STRING), 0);
  CHECK(bb_dtype_name(-1) == NULL && bb_dtype_name(1000) == NULL);
  bb_model_free(m);
}

static void test_rename_value(void) {
  bb_model *m = bb_model_new(NULL);
  bb_graph *g = m->graph = bb_graph_new(m, "g");
  CHECK(bb_vilist_add(m, &g->inputs, "x", NULL));
  CHECK(bb_vilist_add(m, &g->outputs, "y", NULL));
  add_node(m, &g->nodes, "Relu", NULL, "x", NULL, "t");
  /* If: then-branch reads the outer t; else-branch defines its own t (shadowing). */
  bb_ir_node *iff = add_node(m, &g->nodes, "If", NULL, "x", NULL, "y");
  bb_graph *then_g = bb_graph_new(m, "then");
  add_node(m, &then_g->nodes, "Neg", NULL, "t", NULL, "o1");
  CHECK(bb_vilist_add(m, &then_g->outputs, "o1", NULL));
  bb_graph *else_g = bb_graph_new(m, "else");
  add_node(m, &else_g->nodes, "Neg", NULL, "x", NULL, "t");
  add_node(m, &else_g->nodes, "Abs", NULL, "t", NULL, "o2");
  CHECK(bb_vilist_add(m, &else_g->outputs, "o2", NULL));
  CHECK(bb_attr_set_graph(m, &iff->attrs, "then_branch", then_g));
  CHECK(bb_attr_set_graph(m, &iff->attrs, "else_branch", else_g));

  CHECK_EQ_INT(bb_graph_rename_value(m, g, "t", "t2"), 2); /* Relu output + then-branch use */
  CHECK_STR(g->nodes.items[0]->outputs.items[0], "t2");
  CHECK_STR(then_g->nodes.items[0]->inputs.items[0], "t2");
  CHECK_STR(else_g->nodes.items[0]->outputs.items[0], "t"); /* shadowed: untouched */
  CHECK_STR(else_g->nodes.items[1]->inputs.items[0], "t");
  CHECK_EQ_INT(bb_graph_rename_value(m, g, "x", "input"), 4); /* graph input, Relu, If cond, else Neg */
  CHECK_STR(g->inputs.items[0]->name, "input");
  CHECK_EQ_INT(bb_graph_rename_value(m, g, "absent", "z"), 0);
  CHECK(bb_graph_rename_value(m, g, "", "z") < 0);

  bb_function *f = bb_function_new(m, "F", NULL);
  CHECK_EQ_INT(bb_strlist_append(m, &f->inputs, "a"), 0);
  CHECK_EQ_INT(bb_strlist_append(m, &f->outputs, "b"), 0);
  add_node(m, &f->nodes, "Relu", NULL, "a", NULL, "b");
  CHECK(bb_vilist_add(m, &f->value_infos, "b", NULL));
  CHECK_EQ_INT(bb_function_rename_value(m, f, "b", "out"), 3);
  CHECK_STR(f->outputs.items[0], "out");
  CHECK_STR(f->value_infos.items[0]->name, "out");
  CHECK_EQ_INT(bb_model_add_function(m, f), 0);
  CHECK(bb_model_find_function(m, "", "F") == f);
  CHECK(bb_model_find_function(m, NULL, "F") == f);
  CHECK(bb_model_find_function(m, "other", "F") == NULL);
  bb_model_free(m);
}

static void test_summary(void) {
  bb_model *m = build_mlp();
  char *text;
  size_t len;
  bb_error err;
  CHECK_EQ_INT(bb_model_summary(m, false, &text, &len, &err), 0);
  CHECK(strstr(text, "graph mlp: 4 nodes") != NULL);
  CHECK(strstr(text, "x: float[N,4]") != NULL);
  CHECK(strstr(text, "ai.onnx: MatMul(1) Add(1) Relu(1) Softmax(1)") != NULL);
  CHECK(strstr(text, "ai.bytesandbrains.module::ClientLogic: 1 nodes") != NULL);
  CHECK(strstr(text, "ai.bytesandbrains.compiled = v1") != NULL);
  CHECK(strlen(text) == len);
  bb_buffer_free(NULL, text);
  CHECK_EQ_INT(bb_model_summary(m, true, &text, &len, &err), 0);
  CHECK(strstr(text, "\"functions\":[{\"name\":\"ClientLogic\"") != NULL);
  CHECK(strstr(text, "{\"domain\":\"ai.onnx\",\"op_type\":\"Softmax\",\"count\":1}") != NULL);
  bb_buffer_free(NULL, text);
  bb_model_free(m);
}

int main(void) {
  RUN(test_built_model_roundtrips);
  RUN(test_built_model_passes_onnx_checker);
  RUN(test_metadata_helpers);
  RUN(test_attribute_helpers);
  RUN(test_type_attribute_roundtrips);
  RUN(test_list_edits);
  RUN(test_rename_value);
  RUN(test_summary);
  return bb_test_finish();
}
