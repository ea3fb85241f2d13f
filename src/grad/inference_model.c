/* The inference form of a model exported for training: BatchNormalization normalises
 * with its running statistics and Dropout passes its input through, so the model runs
 * deterministically on any ONNX runtime (and on the CPU backend, which has no random
 * Dropout). Everything else, initializers included, is kept as it is. */
#include <string.h>

#include "grad/builder.h"

static bool is_onnx(const bb_ir_node *n) { return bb_domain_is_onnx(n->domain); }

/* Whether any node or graph output reads value `name`. */
static bool read_anywhere(const bb_graph *g, const char *name) {
  for (size_t i = 0; i < g->outputs.len; i++)
    if (strcmp(g->outputs.items[i]->name, name) == 0) return true;
  for (size_t i = 0; i < g->nodes.len; i++)
    if (bb_strlist_find(&g->nodes.items[i]->inputs, name) >= 0) return true;
  return false;
}

static int to_inference(bb_model *m, bb_error *err) {
  bb_graph *g = m->graph;
  int64_t opset = bb_opset_get(&m->opsets, "");
  for (size_t i = 0; i < g->nodes.len; i++) {
    const bb_ir_node *n = g->nodes.items[i];
    if (n->domain && strcmp(n->domain, BB_GRAD_DOMAIN) == 0)
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "node %s is an %s operator: pass the model, not its training graph",
                          n->name ? n->name : n->op_type, BB_GRAD_DOMAIN);
  }
  for (size_t i = 0; i < g->nodes.len; i++) {
    bb_ir_node *n = g->nodes.items[i];
    if (!is_onnx(n)) continue;
    if (strcmp(n->op_type, "BatchNormalization") == 0 && opset >= 14 && bb_attr_get_int(&n->attrs, "training_mode", 0)) {
      for (size_t k = 1; k < n->outputs.len; k++)
        if (*n->outputs.items[k] && read_anywhere(g, n->outputs.items[k]))
          return bb_error_set(err, BB_ERR_UNSUPPORTED, "node %s: %s, a training-mode statistic, is read by the graph",
                              n->name ? n->name : n->op_type, n->outputs.items[k]);
      n->outputs.len = 1;
      bb_attr_remove(&n->attrs, "training_mode");
    } else if (strcmp(n->op_type, "Dropout") == 0 && n->inputs.len > 2) {
      n->inputs.len = 2; /* no training_mode: inference */
      while (n->inputs.len && !*n->inputs.items[n->inputs.len - 1]) n->inputs.len--;
    }
  }
  return 0;
}

int bb_grad_inference_model(const bb_model *model, const bb_allocator *alloc, bb_model **out, bb_error *err) {
  *out = NULL;
  if (!model || !model->graph) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "the model has no main graph");
  bb_model *copy = NULL;
  int rc = gb_copy_model(model, alloc, &copy, err);
  if (!rc) rc = to_inference(copy, err);
  if (rc) {
    bb_model_free(copy);
    return rc;
  }
  *out = copy;
  return 0;
}
