/* Backward rules of the recurrent operators RNN, GRU and LSTM.
 *
 * A recurrence has no closed form in ONNX operators (its length is the data's), so its
 * gradient is one node of the ai.bytesandbrains.grad domain, RNNGrad / GRUGrad / LSTMGrad
 * (src/cpu/recurrent_grad.c, docs/GRAD.md): it takes the forward node's inputs and the
 * gradients of its outputs, and gives the gradients of X, W, R, B, initial_h and, for
 * LSTM, initial_c and P. Every attribute and optional input ONNX defines is covered
 * (directions, layouts, sequence_lens, activations with their alphas and betas, clip,
 * input_forget, linear_before_reset, peepholes); sequence_lens has no gradient. Only
 * float32 is implemented; other element types are refused by name. */
#include <string.h>

#include "grad/builder.h"

#define IN(i) (n->inputs.items[i])

static bool is_lstm(const bb_ir_node *n) { return strncmp(n->op_type, "LSTM", 4) == 0; }

/* Copies a node attribute of the kinds the recurrent operators have. */
static void copy_attr(gb *b, bb_ir_node *to, const bb_attr *a) {
  switch (a->type) {
  case BB_ATTR_INT: gb_attr_int(b, to, a->name, a->i); break;
  case BB_ATTR_FLOAT: gb_attr_float(b, to, a->name, a->f); break;
  case BB_ATTR_STRING: gb_attr_string(b, to, a->name, gb_printf(b, "%.*s", (int)a->s.len, (const char *)a->s.data)); break;
  case BB_ATTR_FLOATS:
    if (!b->rc && !bb_attr_set_floats(b->m, &to->attrs, a->name, a->floats, a->n_floats))
      gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph");
    break;
  case BB_ATTR_STRINGS: {
    const char **names = bbi_arena_alloc(b->scratch, (a->n_strings + 1) * sizeof *names);
    for (size_t i = 0; names && i < a->n_strings; i++)
      names[i] = gb_printf(b, "%.*s", (int)a->strings[i].len, (const char *)a->strings[i].data);
    if (!b->rc && (!names || !bb_attr_set_strings(b->m, &to->attrs, a->name, names, a->n_strings)))
      gb_fail(b, BB_ERR_NOMEM, "out of memory building the training graph");
    break;
  }
  default: gb_fail(b, BB_ERR_UNSUPPORTED, "attribute %s of a recurrent node has a type its gradient does not copy", a->name);
  }
}

static int recurrent_back(gb *b, bb_ir_node *n, const char *const *dy) {
  if (gb_dtype(b, IN(0)) != BB_DTYPE_FLOAT)
    return gb_fail(b, BB_ERR_UNSUPPORTED, "%s: the gradient of %s is implemented for float32 only, not %s",
                   gb_node_label(b, n), n->op_type, bb_dtype_name(gb_dtype(b, IN(0))) ? bb_dtype_name(gb_dtype(b, IN(0))) : "an unknown type");
  bool lstm = is_lstm(n);
  size_t n_fwd = lstm ? 8 : 6, n_out = lstm ? 3 : 2, n_grads = lstm ? 7 : 5;
  const char *in[11];
  for (size_t i = 0; i < n_fwd; i++) in[i] = i < n->inputs.len ? IN(i) : "";
  for (size_t k = 0; k < n_out; k++) in[n_fwd + k] = dy[k] ? dy[k] : "";
  const char *op = gb_printf(b, "%sGrad", n->op_type);
  bb_ir_node *g = lstm ? gb_new(b, op, BB_GRAD_DOMAIN, n_grads, 11, in[0], in[1], in[2], in[3], in[4], in[5], in[6],
                                in[7], in[8], in[9], in[10])
                       : gb_new(b, op, BB_GRAD_DOMAIN, n_grads, 8, in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7]);
  if (!g) return b->rc;
  for (size_t i = 0; i < n->attrs.len; i++) copy_attr(b, g, n->attrs.items[i]);
  for (size_t k = 0; k < n_grads; k++)
    if (!gb_needs(b, n, gb_recurrent_grad_of[k])) g->outputs.items[k] = (char *)"";
  gb_add(b, g);
  for (size_t k = 0; k < n_grads; k++)
    if (*g->outputs.items[k]) gb_grad(b, n, gb_recurrent_grad_of[k], g->outputs.items[k]);
  return b->rc;
}

/* diff_inputs: X W R B initial_h (and initial_c, P); sequence_lens (input 4) has none */
const gb_rule gb_rules_recurrent[] = {
    {NULL, "RNN", 0x2f, 0x3, recurrent_back},
    {NULL, "GRU", 0x2f, 0x3, recurrent_back},
    {NULL, "LSTM", 0xef, 0x7, recurrent_back},
};
const size_t gb_rules_recurrent_count = sizeof gb_rules_recurrent / sizeof gb_rules_recurrent[0];
