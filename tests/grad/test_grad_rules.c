/* Backward rules against central finite differences in float64, on small graphs for the
 * forms PyTorch's exporter never writes: auto_pad, ceil_mode, ConvTranspose's output_shape,
 * 1-D windows, inference-mode BatchNormalization, Split into equal parts with an unused
 * output, Concat and broadcasts over dims known only at run time (SumToShape), the seeded
 * Dropout of ai.bytesandbrains.grad, negative Gather indices, and more. */
#include "fixture.h"

#define FD_STEP 1e-6
#define FD_TOL 1e-6

/* Builds the training graph, then compares every parameter's gradient with
 * (loss(p + h) - loss(p - h)) / 2h, the loss computed by the training graph itself. */
static bb_grad_graph *fx_check(fx *f, const char *label) {
  bb_grad_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.params = f->params;
  o.n_params = f->n_params;
  bb_grad_graph *g = NULL;
  bb_error err;
  int rc = bb_grad_build(f->m, &o, NULL, &g, &err);
  CHECK_MSG(!rc, "%s: %s", label, err.message);
  if (rc) return NULL;
  CHECK_MSG(g->n_params == f->n_params, "%s: %zu of %zu parameters trained", label, g->n_params, f->n_params);
  bb_cpu_session *s;
  rc = bb_cpu_session_new(g->model, NULL, &s, &err);
  CHECK_MSG(!rc, "%s: %s", label, err.message);
  if (rc) return g;
  const char *names[2 * FX_MAX + 1];
  bb_tensor *values[2 * FX_MAX + 1];
  size_t n = 0;
  for (size_t i = 0; i < f->n_inputs; i++) names[n] = f->names[i], values[n++] = f->values[i];
  bb_tensor *seed = NULL;
  if (g->seed) seed = bb_tensor_new_zeros(NULL, BB_DTYPE_INT64, 0, NULL), names[n] = g->seed, values[n++] = seed;
  size_t first_param = n;
  for (size_t i = 0; i < g->n_params; i++) names[n] = g->params[i], values[n++] = gt_tensor(g->model, g->params[i]);
  size_t n_out = bb_cpu_session_output_count(s);
  bb_tensor **outs = calloc(n_out, sizeof *outs);
  rc = bb_cpu_session_run(s, names, values, n, outs, &err);
  CHECK_MSG(!rc, "%s: %s", label, err.message);
  for (size_t i = 0; !rc && i < g->n_params; i++) {
    bb_tensor *p = values[first_param + i], *grad = outs[1 + i];
    double *pd = bb_tensor_data(p), worst = 0;
    int64_t worst_at = -1;
    for (int64_t k = 0; k < p->numel; k++) {
      double v = pd[k], loss[2];
      for (int side = 0; side < 2; side++) {
        pd[k] = v + (side ? -FD_STEP : FD_STEP);
        bb_tensor **o2 = calloc(n_out, sizeof *o2);
        bb_cpu_session_run(s, names, values, n, o2, &err);
        loss[side] = gt_value(o2[0], 0);
        for (size_t j = 0; j < n_out; j++) bb_tensor_release(o2[j]);
        free(o2);
      }
      pd[k] = v;
      double fd = (loss[0] - loss[1]) / (2 * FD_STEP), an = gt_value(grad, k);
      double e = fabs(fd - an) / fmax(1, fabs(fd));
      if (e > worst) worst = e, worst_at = k;
    }
    CHECK_MSG(worst <= FD_TOL, "%s: d loss / d %s[%lld] is off by %.3g", label, g->params[i], (long long)worst_at, worst);
  }
  for (size_t j = 0; j < n_out; j++) bb_tensor_release(outs[j]);
  free(outs);
  for (size_t i = first_param; i < n; i++) bb_tensor_release(values[i]);
  bb_tensor_release(seed);
  bb_cpu_session_free(s);
  return g;
}

static void run(fx *f, const char *label) {
  bb_grad_graph_free(fx_check(f, label));
  fx_free(f);
}

static bb_tensor *data(int rank, const int64_t *dims) { return fx_random(BB_DTYPE_DOUBLE, rank, dims, -1, 1); }

/* Broadcasts whose axes only the run can tell: the gradient goes through SumToShape. */
static void test_sum_to_shape(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "p", 2, (int64_t[]){1, 3});
  fx_input(&f, "x", data(2, (int64_t[]){4, 3}), (const char *[]){"a", NULL});
  fx_input(&f, "z", data(2, (int64_t[]){4, 3}), (const char *[]){"b", NULL});
  fx_node(&f, "Shape", NULL, "x", "sx");
  fx_node(&f, "Expand", NULL, "p,sx", "pe");
  fx_node(&f, "Mul", NULL, "pe,z", "y");
  fx_loss(&f, "y");
  bb_grad_graph *g = fx_check(&f, "sum_to_shape");
  CHECK(g && fx_count(g->model, "SumToShape") == 1);
  bb_grad_graph_free(g);
  fx_free(&f);
}

/* Concat along a dim known only at run time: the split sizes are read from shapes. */
static void test_concat_dynamic(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "p", 2, (int64_t[]){1, 3});
  fx_param(&f, "q", 2, (int64_t[]){2, 3});
  fx_input(&f, "x", data(2, (int64_t[]){3, 3}), (const char *[]){"n", NULL});
  fx_node(&f, "Mul", NULL, "x,p", "a");
  bb_ir_node *c = fx_node(&f, "Concat", NULL, "q,a,q", "y");
  bb_attr_set_int(f.m, &c->attrs, "axis", 0);
  fx_loss(&f, "y");
  run(&f, "concat_dynamic");
}

static void test_seeded_dropout(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "p", 2, (int64_t[]){5, 6});
  fx_scalar(&f, "ratio", BB_DTYPE_DOUBLE, 0.3);
  fx_scalar(&f, "train", BB_DTYPE_BOOL, 1);
  fx_node(&f, "Dropout", NULL, "p,ratio,train", "y,mask");
  fx_loss(&f, "y");
  bb_grad_graph *g = fx_check(&f, "seeded_dropout");
  CHECK(g && g->seed && fx_count(g->model, "Dropout") == 1);
  for (size_t i = 0; g && i < g->model->graph->nodes.len; i++) {
    const bb_ir_node *n = g->model->graph->nodes.items[i];
    if (strcmp(n->op_type, "Dropout") == 0) CHECK_STR(n->domain, BB_GRAD_DOMAIN);
  }
  bb_grad_graph_free(g);
  fx_free(&f);
}

static void test_dropout_inference_is_identity(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "p", 2, (int64_t[]){2, 3});
  fx_scalar(&f, "ratio", BB_DTYPE_DOUBLE, 0.5);
  fx_node(&f, "Dropout", NULL, "p,ratio", "y");
  fx_loss(&f, "y");
  bb_grad_graph *g = fx_check(&f, "dropout_inference");
  CHECK(g && !g->seed);
  bb_grad_graph_free(g);
  fx_free(&f);
}

static void test_gemm_forms(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "a", 2, (int64_t[]){4, 3});
  fx_param(&f, "b", 2, (int64_t[]){4, 2});
  fx_param(&f, "c", 1, (int64_t[]){2});
  bb_ir_node *n = fx_node(&f, "Gemm", NULL, "a,b,c", "y");
  bb_attr_set_int(f.m, &n->attrs, "transA", 1);
  bb_attr_set_float(f.m, &n->attrs, "alpha", 0.5f);
  bb_attr_set_float(f.m, &n->attrs, "beta", -2.0f);
  fx_loss(&f, "y");
  run(&f, "gemm_trans_a_bias_1d");
}

static void test_conv1d_same_upper(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "w", 3, (int64_t[]){3, 2, 3});
  fx_param(&f, "bias", 1, (int64_t[]){3});
  fx_input(&f, "x", data(3, (int64_t[]){2, 2, 7}), NULL);
  bb_ir_node *n = fx_node(&f, "Conv", NULL, "x,w,bias", "y");
  bb_attr_set_string(f.m, &n->attrs, "auto_pad", "SAME_UPPER");
  bb_attr_set_ints(f.m, &n->attrs, "strides", (int64_t[]){2}, 1);
  fx_loss(&f, "y");
  run(&f, "conv1d_same_upper");
}

static void test_conv_input_grad(void) { /* the data gradient, with stride, dilation and uneven pads */
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "x", 4, (int64_t[]){1, 2, 6, 5});
  fx_param(&f, "w", 4, (int64_t[]){2, 1, 2, 3});
  bb_ir_node *n = fx_node(&f, "Conv", NULL, "x,w", "y");
  bb_attr_set_ints(f.m, &n->attrs, "strides", (int64_t[]){2, 3}, 2);
  bb_attr_set_ints(f.m, &n->attrs, "dilations", (int64_t[]){2, 1}, 2);
  bb_attr_set_ints(f.m, &n->attrs, "pads", (int64_t[]){1, 0, 0, 2}, 4);
  bb_attr_set_int(f.m, &n->attrs, "group", 2);
  fx_loss(&f, "y");
  run(&f, "conv_uneven_pads_grouped");
}

static void test_pools_ceil_mode(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "x", 4, (int64_t[]){1, 2, 5, 5});
  bb_ir_node *mp = fx_node(&f, "MaxPool", NULL, "x", "m");
  bb_attr_set_ints(f.m, &mp->attrs, "kernel_shape", (int64_t[]){2, 2}, 2);
  bb_attr_set_ints(f.m, &mp->attrs, "strides", (int64_t[]){2, 2}, 2);
  bb_attr_set_int(f.m, &mp->attrs, "ceil_mode", 1);
  bb_ir_node *ap = fx_node(&f, "AveragePool", NULL, "x", "a");
  bb_attr_set_ints(f.m, &ap->attrs, "kernel_shape", (int64_t[]){3, 2}, 2);
  bb_attr_set_ints(f.m, &ap->attrs, "strides", (int64_t[]){2, 2}, 2);
  bb_attr_set_ints(f.m, &ap->attrs, "pads", (int64_t[]){1, 0, 1, 1}, 4);
  bb_attr_set_int(f.m, &ap->attrs, "ceil_mode", 1);
  bb_attr_set_int(f.m, &ap->attrs, "count_include_pad", 1);
  fx_node(&f, "Mul", NULL, "m,a", "y");
  fx_loss(&f, "y");
  run(&f, "pools_ceil_mode");
}

static void test_convtranspose_output_shape(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "x", 4, (int64_t[]){1, 2, 3, 3});
  fx_param(&f, "w", 4, (int64_t[]){2, 3, 3, 2});
  bb_ir_node *n = fx_node(&f, "ConvTranspose", NULL, "x,w", "y");
  bb_attr_set_ints(f.m, &n->attrs, "strides", (int64_t[]){2, 2}, 2);
  bb_attr_set_ints(f.m, &n->attrs, "output_shape", (int64_t[]){6, 5}, 2);
  fx_loss(&f, "y");
  run(&f, "convtranspose_output_shape");
}

static void test_elementwise_misc(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "a", 2, (int64_t[]){3, 4});
  fx_param(&f, "b", 1, (int64_t[]){4});
  fx_param(&f, "c", 2, (int64_t[]){3, 1});
  fx_node(&f, "Abs", NULL, "a", "abs");
  fx_node(&f, "Softplus", NULL, "b", "sp");
  fx_node(&f, "Reciprocal", NULL, "sp", "rec");
  fx_node(&f, "Sum", NULL, "abs,rec,c", "s");
  fx_node(&f, "Neg", NULL, "s", "n");
  fx_node(&f, "Identity", NULL, "n", "y");
  fx_loss(&f, "y");
  run(&f, "abs_softplus_reciprocal_sum");
}

static void test_split_equal_unused_output(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "a", 2, (int64_t[]){2, 6});
  bb_ir_node *n = fx_node(&f, "Split", NULL, "a", "s0,s1,s2");
  bb_attr_set_int(f.m, &n->attrs, "axis", 1);
  fx_node(&f, "Sub", NULL, "s2,s0", "y");
  fx_loss(&f, "y");
  run(&f, "split_equal_unused_output");
}

static void test_reductions(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "a", 3, (int64_t[]){2, 3, 4});
  fx_ints(&f, "axes", (int64_t[]){-1, 0}, 2);
  bb_ir_node *s = fx_node(&f, "ReduceSum", NULL, "a,axes", "s");
  bb_attr_set_int(f.m, &s->attrs, "keepdims", 0);
  bb_ir_node *m = fx_node(&f, "ReduceMean", NULL, "a", "m");
  bb_attr_set_ints(f.m, &m->attrs, "axes", (int64_t[]){1}, 1);
  bb_attr_set_int(f.m, &m->attrs, "keepdims", 0);
  fx_node(&f, "ReduceSum", NULL, "m", "mt");
  fx_node(&f, "Mul", NULL, "s,mt", "y");
  fx_loss(&f, "y");
  run(&f, "reduce_keepdims_0");
}

static void test_softmax_axes(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "a", 3, (int64_t[]){2, 3, 2});
  bb_ir_node *s = fx_node(&f, "Softmax", NULL, "a", "s");
  bb_attr_set_int(f.m, &s->attrs, "axis", 1);
  bb_ir_node *l = fx_node(&f, "LogSoftmax", NULL, "a", "l");
  bb_attr_set_int(f.m, &l->attrs, "axis", 0);
  fx_node(&f, "Add", NULL, "s,l", "y");
  fx_loss(&f, "y");
  run(&f, "softmax_axes");
}

static void test_nll_weighted_ignore(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "x", 3, (int64_t[]){3, 4, 2});
  bb_tensor *labels = bb_tensor_new_empty(NULL, BB_DTYPE_INT64, 2, (int64_t[]){3, 2});
  int64_t lv[] = {0, 3, 2, 2, 1, 3};
  memcpy(bb_tensor_data(labels), lv, sizeof lv);
  fx_input(&f, "labels", labels, NULL);
  bb_tensor *w = fx_random(BB_DTYPE_DOUBLE, 1, (int64_t[]){4}, 0.5, 2);
  bb_tensor_proto *wp;
  bb_error err;
  bb_tensor_to_proto(f.m, w, "w", &wp, &err);
  bb_tensorlist_append(f.m, &f.m->graph->initializers, wp);
  bb_tensor_release(w);
  bb_ir_node *n = fx_node(&f, "NegativeLogLikelihoodLoss", NULL, "x,labels,w", "l");
  bb_attr_set_int(f.m, &n->attrs, "ignore_index", 2);
  bb_ir_node *s = fx_node(&f, "SoftmaxCrossEntropyLoss", NULL, "x,labels,w", "c");
  bb_attr_set_string(f.m, &s->attrs, "reduction", "none");
  bb_attr_set_int(f.m, &s->attrs, "ignore_index", 3);
  fx_node(&f, "Mul", NULL, "l,c", "y");
  fx_loss(&f, "y");
  run(&f, "nll_sce_weighted_ignore");
}

static void test_clip_where_cast(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "a", 2, (int64_t[]){3, 4});
  fx_param(&f, "b", 0, NULL);
  fx_scalar(&f, "hi", BB_DTYPE_DOUBLE, 0.25);
  fx_node(&f, "Clip", NULL, "a,,hi", "clipped");
  fx_scalar(&f, "zero", BB_DTYPE_DOUBLE, 0);
  fx_node(&f, "Greater", NULL, "a,zero", "pos");
  fx_node(&f, "Where", NULL, "pos,clipped,b", "w");
  bb_ir_node *c = fx_node(&f, "Cast", NULL, "w", "y"); /* float64 to float64: float32 would swamp the differences */
  bb_attr_set_int(f.m, &c->attrs, "to", BB_DTYPE_DOUBLE);
  fx_loss(&f, "y");
  run(&f, "clip_where_cast");
}

static void test_batchnorm_inference_layernorm(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "x", 3, (int64_t[]){2, 3, 4});
  fx_param(&f, "scale", 1, (int64_t[]){3});
  fx_param(&f, "bias", 1, (int64_t[]){3});
  fx_param(&f, "lns", 2, (int64_t[]){3, 4});
  bb_tensor *mean = fx_random(BB_DTYPE_DOUBLE, 1, (int64_t[]){3}, -1, 1), *var = fx_random(BB_DTYPE_DOUBLE, 1, (int64_t[]){3}, 0.5, 2);
  bb_tensor_proto *p;
  bb_error err;
  bb_tensor_to_proto(f.m, mean, "mean", &p, &err);
  bb_tensorlist_append(f.m, &f.m->graph->initializers, p);
  bb_tensor_to_proto(f.m, var, "var", &p, &err);
  bb_tensorlist_append(f.m, &f.m->graph->initializers, p);
  bb_tensor_release(mean);
  bb_tensor_release(var);
  fx_node(&f, "BatchNormalization", NULL, "x,scale,bias,mean,var", "bn");
  bb_ir_node *ln = fx_node(&f, "LayerNormalization", NULL, "bn,lns", "y");
  bb_attr_set_int(f.m, &ln->attrs, "axis", 1);
  fx_loss(&f, "y");
  run(&f, "batchnorm_inference_layernorm_axis1");
}

static void test_gather_negative_indices(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "w", 3, (int64_t[]){2, 4, 3});
  bb_tensor *idx = bb_tensor_new_empty(NULL, BB_DTYPE_INT64, 2, (int64_t[]){2, 2});
  int64_t iv[] = {-1, 0, 3, -1};
  memcpy(bb_tensor_data(idx), iv, sizeof iv);
  fx_input(&f, "i", idx, NULL);
  bb_ir_node *n = fx_node(&f, "Gather", NULL, "w,i", "y");
  bb_attr_set_int(f.m, &n->attrs, "axis", 1);
  fx_loss(&f, "y");
  run(&f, "gather_axis1_negative_indices");
}

static void test_shape_ops(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "a", 3, (int64_t[]){2, 1, 3});
  fx_param(&f, "v", 1, (int64_t[]){3});
  bb_ir_node *fl = fx_node(&f, "Flatten", NULL, "a", "flat");
  bb_attr_set_int(f.m, &fl->attrs, "axis", 0);
  fx_node(&f, "Squeeze", NULL, "a", "sq");
  fx_node(&f, "Transpose", NULL, "sq", "t");
  fx_node(&f, "MatMul", NULL, "v,v", "dot");
  fx_node(&f, "ReduceSum", NULL, "flat", "fs");
  fx_node(&f, "Mul", NULL, "t,dot", "td");
  fx_node(&f, "Add", NULL, "td,fs", "y");
  fx_loss(&f, "y");
  run(&f, "flatten_squeeze_transpose_dot");
}

static void test_pad_slice_negative(void) {
  fx f;
  fx_init(&f, 17);
  fx_param(&f, "a", 2, (int64_t[]){4, 5});
  fx_ints(&f, "starts", (int64_t[]){-3, 1}, 2);
  fx_ints(&f, "ends", (int64_t[]){INT64_MAX, -1}, 2);
  fx_node(&f, "Slice", NULL, "a,starts,ends", "s");
  fx_ints(&f, "pads", (int64_t[]){0, 2, 1, 0}, 4);
  fx_scalar(&f, "value", BB_DTYPE_DOUBLE, 0.5);
  fx_node(&f, "Pad", NULL, "s,pads,value", "y");
  fx_loss(&f, "y");
  run(&f, "slice_negative_pad_value");
}

int main(void) {
  RUN(test_sum_to_shape);
  RUN(test_concat_dynamic);
  RUN(test_seeded_dropout);
  RUN(test_dropout_inference_is_identity);
  RUN(test_gemm_forms);
  RUN(test_conv1d_same_upper);
  RUN(test_conv_input_grad);
  RUN(test_pools_ceil_mode);
  RUN(test_convtranspose_output_shape);
  RUN(test_elementwise_misc);
  RUN(test_split_equal_unused_output);
  RUN(test_reductions);
  RUN(test_softmax_axes);
  RUN(test_nll_weighted_ignore);
  RUN(test_clip_where_cast);
  RUN(test_batchnorm_inference_layernorm);
  RUN(test_gather_negative_indices);
  RUN(test_shape_ops);
  RUN(test_pad_slice_negative);
  return bb_test_finish();
}
