/* Backward rules of the recurrent operators RNN, GRU and LSTM, and the shapes of their
 * outputs.
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

/* The forward input each gradient output belongs to: X W R B initial_h initial_c P. */
static const size_t GRAD_OF[] = {0, 1, 2, 3, 5, 6, 7};

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
    if (!gb_needs(b, n, GRAD_OF[k])) g->outputs.items[k] = (char *)"";
  gb_add(b, g);
  for (size_t k = 0; k < n_grads; k++)
    if (*g->outputs.items[k]) gb_grad(b, n, GRAD_OF[k], g->outputs.items[k]);
  return b->rc;
}

/* ---- shapes -------------------------------------------------------------------------------- */

static gb_value *output(gb *b, const bb_ir_node *n, size_t k) {
  return k < n->outputs.len && *n->outputs.items[k] ? gb_val(b, n->outputs.items[k]) : NULL;
}

static gb_value *input(gb *b, const bb_ir_node *n, size_t i) {
  return i < n->inputs.len && *n->inputs.items[i] ? gb_val(b, n->inputs.items[i]) : NULL;
}

static void set_shape(gb_value *o, int32_t dtype, int rank, const gb_dim *dims) {
  if (o) gb_val_set_shape(o, dtype, rank, dims);
}

/* Y [seq, dirs, batch, hidden] and the states [dirs, batch, hidden] (layout 1: batch first). */
static void forward_shapes(gb *b, const bb_ir_node *n) {
  gb_value *x = input(b, n, 0), *r = input(b, n, 2);
  if (!x || x->rank != 3) return;
  bool batch_first = bb_attr_get_int(&n->attrs, "layout", 0) == 1;
  gb_dim dirs = strcmp(bb_attr_get_string(&n->attrs, "direction", "forward"), "bidirectional") == 0 ? 2 : 1;
  gb_dim hidden = bb_attr_get_int(&n->attrs, "hidden_size", r && r->rank == 3 ? r->dims[2] : gb_symbol(b, NULL));
  gb_dim seq = x->dims[batch_first ? 1 : 0], batch = x->dims[batch_first ? 0 : 1];
  gb_dim y[4] = {seq, dirs, batch, hidden}, y_first[4] = {batch, seq, dirs, hidden};
  gb_dim state[3] = {dirs, batch, hidden}, state_first[3] = {batch, dirs, hidden};
  set_shape(output(b, n, 0), x->dtype, 4, batch_first ? y_first : y);
  for (size_t k = 1; k < 3; k++) set_shape(output(b, n, k), x->dtype, 3, batch_first ? state_first : state);
}

/* Each gradient is shaped like its forward input; dB also when B was not given. */
static void grad_shapes(gb *b, const bb_ir_node *n) {
  size_t n_grads = is_lstm(n) ? 7 : 5;
  for (size_t k = 0; k < n_grads; k++) {
    gb_value *o = output(b, n, k), *like = input(b, n, GRAD_OF[k]);
    if (like) set_shape(o, like->dtype, like->rank, like->dims);
  }
  gb_value *db = output(b, n, 3), *w = input(b, n, 1);
  if (db && db->rank < 0 && w && w->rank == 3)
    set_shape(db, w->dtype, 2, (gb_dim[]){w->dims[0], GB_KNOWN(w->dims[1]) ? 2 * w->dims[1] : gb_symbol(b, NULL)});
}

bool gb_infer_recurrent(gb *b, const bb_ir_node *n) {
  bool grad = n->domain && strcmp(n->domain, BB_GRAD_DOMAIN) == 0;
  if (!grad && !bb_domain_is_onnx(n->domain)) return false;
  const char *op = n->op_type;
  bool recurrent = strcmp(op, "RNN") == 0 || strcmp(op, "GRU") == 0 || strcmp(op, "LSTM") == 0;
  bool recurrent_grad = strcmp(op, "RNNGrad") == 0 || strcmp(op, "GRUGrad") == 0 || strcmp(op, "LSTMGrad") == 0;
  if (grad ? !recurrent_grad : !recurrent) return false;
  if (grad) grad_shapes(b, n);
  else forward_shapes(b, n);
  return true;
}

/* diff_inputs: X W R B initial_h (and initial_c, P); sequence_lens (input 4) has none */
const gb_rule gb_rules_recurrent[] = {
    {NULL, "RNN", 0x2f, 0x3, recurrent_back},
    {NULL, "GRU", 0x2f, 0x3, recurrent_back},
    {NULL, "LSTM", 0xef, 0x7, recurrent_back},
};
const size_t gb_rules_recurrent_count = sizeof gb_rules_recurrent / sizeof gb_rules_recurrent[0];
