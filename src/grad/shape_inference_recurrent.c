/* Build-time shapes of the recurrent operators RNN, GRU and LSTM and of their gradient
 * operators (RNNGrad, GRUGrad, LSTMGrad of the ai.bytesandbrains.grad domain), for the
 * shape inference of every emitted or copied node. */
#include <string.h>

#include "grad/builder.h"

const size_t gb_recurrent_grad_of[7] = {0, 1, 2, 3, 5, 6, 7};

static void set_shape(gb_value *o, int32_t dtype, int rank, const gb_dim *dims) {
  if (o) gb_val_set_shape(o, dtype, rank, dims);
}

/* Y [seq, dirs, batch, hidden] and the states [dirs, batch, hidden] (layout 1: batch first). */
static void forward_shapes(gb *b, const bb_ir_node *n) {
  gb_value *x = gb_input_val(b, n, 0), *r = gb_input_val(b, n, 2);
  if (!x || x->rank != 3) return;
  bool batch_first = bb_attr_get_int(&n->attrs, "layout", 0) == 1;
  gb_dim dirs = strcmp(bb_attr_get_string(&n->attrs, "direction", "forward"), "bidirectional") == 0 ? 2 : 1;
  gb_dim hidden = bb_attr_get_int(&n->attrs, "hidden_size", r && r->rank == 3 ? r->dims[2] : gb_symbol(b, NULL));
  gb_dim seq = x->dims[batch_first ? 1 : 0], batch = x->dims[batch_first ? 0 : 1];
  gb_dim y[4] = {seq, dirs, batch, hidden}, y_first[4] = {batch, seq, dirs, hidden};
  gb_dim state[3] = {dirs, batch, hidden}, state_first[3] = {batch, dirs, hidden};
  set_shape(gb_output_val(b, n, 0), x->dtype, 4, batch_first ? y_first : y);
  for (size_t k = 1; k < 3; k++) set_shape(gb_output_val(b, n, k), x->dtype, 3, batch_first ? state_first : state);
}

/* Each gradient is shaped like its forward input; dB also when B was not given. */
static void grad_shapes(gb *b, const bb_ir_node *n) {
  size_t n_grads = strcmp(n->op_type, "LSTMGrad") == 0 ? 7 : 5;
  for (size_t k = 0; k < n_grads; k++) {
    gb_value *o = gb_output_val(b, n, k), *like = gb_input_val(b, n, gb_recurrent_grad_of[k]);
    if (like) set_shape(o, like->dtype, like->rank, like->dims);
  }
  gb_value *db = gb_output_val(b, n, 3), *w = gb_input_val(b, n, 1);
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
