/* A model trained split is the model trained whole: the mlp and lenet cases of
 * tests/data/grad, cut as a vanilla split (two parts: the loss in the second) and as a
 * U-shaped one (three parts: the loss in the third), each part with its own trainer and
 * optimizer, take the 10 steps PyTorch took (same batch, every optimizer the reference
 * has that a split can take). Every parameter and running statistic must equal, bit for
 * bit, what one trainer of the whole model gives (the same kernels run in the same order)
 * and be within 1e-4 of torch.optim's; every step's loss within 1e-4 of PyTorch's. */
#include "gradtest.h"

#define DATA BB_TEST_SOURCE_DIR "/tests/data/grad/"
#define STEPS 10
#define TOL 1e-4

typedef struct part {
  bb_model *model;
  bb_grad_graph *g;
  bb_grad_optimizer *opt;
  bb_grad_trainer *t;
} part;

/* The part of `whole` from `in` to `out` (NULL: the model's own), trained against the
 * labels when it ends the model, else from the gradient of `out`; it yields the gradient
 * of `in`. */
static bool part_open(part *p, const bb_model *whole, const char *in, const char *out, const bb_optimizer_config *c) {
  memset(p, 0, sizeof *p);
  bb_grad_cut_options co = {sizeof co, in ? &in : NULL, in ? 1 : 0, out ? &out : NULL, out ? 1 : 0};
  bb_grad_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.loss = out ? BB_GRAD_LOSS_UPSTREAM : BB_GRAD_LOSS_SOFTMAX_CROSS_ENTROPY;
  o.target = "labels";
  o.input_grads = in ? &in : NULL;
  o.n_input_grads = in ? 1 : 0;
  bb_error err;
  int rc = bb_grad_cut(whole, &co, NULL, &p->model, &err);
  if (!rc) rc = bb_grad_build(p->model, &o, NULL, &p->g, &err);
  if (!rc) rc = bb_grad_optimizer_build(p->g, c, &p->opt, &err);
  if (!rc) rc = bb_grad_trainer_new(p->g, p->opt, 0, NULL, &p->t, &err);
  CHECK_MSG(!rc, "part %s → %s: %s", in ? in : "input", out ? out : "output", err.message);
  return !rc;
}

static void part_close(part *p) {
  bb_grad_trainer_free(p->t);
  bb_grad_optimizer_free(p->opt);
  bb_grad_graph_free(p->g);
  bb_model_free(p->model);
}

/* Checks every tensor a part holds (its parameters and running statistics) against the
 * whole model's trainer, bit for bit, and against torch.optim's ("OPT:name"). */
static void compare_part(const char *what, const part *p, const bb_grad_trainer *whole, const bb_model *ref, const char *opt) {
  for (size_t i = 0; i < bb_grad_trainer_value_count(p->t); i++) {
    const char *name = bb_grad_trainer_value_name(p->t, i);
    if (strncmp(name, "optimizer.", 10) == 0 || strchr(name, '.') == NULL) continue;
    const bb_tensor *mine = bb_grad_trainer_value(p->t, name), *theirs = bb_grad_trainer_value(whole, name);
    char key[256];
    snprintf(key, sizeof key, "%s:%s", opt, name);
    bb_tensor *want = gt_tensor(ref, key);
    if (!want) continue; /* optimizer state (momentum buffers): not in the reference */
    CHECK_MSG(theirs && bb_tensor_same_shape(mine, theirs) && !memcmp(bb_tensor_data(mine), bb_tensor_data(theirs), bb_tensor_nbytes(mine)),
              "%s/%s: %s differs from the whole model's", what, opt, name);
    double e = gt_rel_error(mine, want, 1.0);
    CHECK_MSG(e <= TOL, "%s/%s: %s differs from torch.optim's by %.3g", what, opt, name, e);
    bb_tensor_release(want);
  }
}

/* One case, one optimizer: the whole model and the split (cuts: one or two values). */
static void check_split(const char *name, const bb_model *whole, const bb_model *ref, const char *opt, const char *const *cuts,
                        size_t n_cuts) {
  char key[64];
  snprintf(key, sizeof key, "opt:%s", opt);
  bb_optimizer_config c = gt_optimizer_config(bb_kv_get(&ref->metadata, key));
  bb_tensor *x = gt_tensor(ref, "input:x"), *labels = gt_tensor(ref, "input:labels");
  snprintf(key, sizeof key, "%s:losses", opt);
  bb_tensor *losses = gt_tensor(ref, key);
  part all, parts[3];
  size_t n = n_cuts + 1;
  bool ok = part_open(&all, whole, NULL, NULL, &c);
  for (size_t i = 0; i < n; i++) ok = part_open(&parts[i], whole, i ? cuts[i - 1] : NULL, i < n_cuts ? cuts[i] : NULL, &c) && ok;
  char what[96];
  snprintf(what, sizeof what, "%s %s", name, n_cuts == 1 ? "vanilla" : "U-shaped");
  bb_error err;
  for (int step = 0; ok && step < STEPS; step++) {
    const char *whole_names[] = {"x", "labels"};
    bb_tensor *whole_in[] = {x, labels};
    bb_grad_step st, split_st;
    CHECK(!bb_grad_trainer_step(all.t, whole_names, whole_in, 2, &st, &err) && st.applied);
    /* forward through the parts that end at a cut, the step of the last, backward again */
    bb_tensor *acts[3] = {x, NULL, NULL};
    const char *in_names[3] = {"x", n_cuts ? cuts[0] : NULL, n_cuts > 1 ? cuts[1] : NULL};
    for (size_t i = 0; i < n_cuts; i++)
      CHECK(!bb_grad_trainer_forward(parts[i].t, &in_names[i], &acts[i], 1, &acts[i + 1], &err));
    const char *last_names[] = {in_names[n_cuts], "labels"};
    bb_tensor *last_in[] = {acts[n_cuts], labels};
    CHECK_MSG(!bb_grad_trainer_step(parts[n_cuts].t, last_names, last_in, 2, &split_st, &err) && split_st.applied, "%s", err.message);
    const bb_tensor *up = bb_grad_trainer_input_grad(parts[n_cuts].t, cuts[n_cuts - 1]);
    for (size_t i = n_cuts; i-- > 0;) {
      bb_tensor *g = (bb_tensor *)up;
      CHECK_MSG(!bb_grad_trainer_backward(parts[i].t, &g, 1, &split_st, &err) && split_st.applied, "%s: %s", what, err.message);
      up = i ? bb_grad_trainer_input_grad(parts[i].t, cuts[i - 1]) : NULL;
    }
    for (size_t i = 1; i <= n_cuts; i++) bb_tensor_release(acts[i]);
    double want = losses ? gt_value(losses, step) : NAN;
    CHECK_MSG(fabs(st.loss - want) <= TOL * fmax(1, fabs(want)), "%s/%s step %d: loss %.9g, torch %.9g", what, opt, step,
              st.loss, want);
  }
  for (size_t i = 0; ok && i < n; i++) compare_part(what, &parts[i], all.t, ref, opt);
  for (size_t i = 0; i < n; i++) part_close(&parts[i]);
  part_close(&all);
  bb_tensor_release(x);
  bb_tensor_release(labels);
  bb_tensor_release(losses);
}

/* The vanilla split is cut at `second`, the U-shaped one at `first` and `second`. */
static void check_case(const char *name, const char *first, const char *second) {
  char path[512];
  snprintf(path, sizeof path, DATA "%s.onnx", name);
  bb_model *whole = gt_load(path);
  snprintf(path, sizeof path, DATA "%s.ref.onnx", name);
  bb_model *ref = gt_load(path);
  CHECK_MSG(whole && ref, "%s: cannot load", name);
  /* global-norm clipping (sgd_clip, adamw here) needs every gradient at once: no split */
  static const char *const OPTS[] = {"sgd", "momentum", "nesterov", "adam"};
  const char *cuts[] = {first, second};
  for (size_t i = 0; whole && ref && i < sizeof OPTS / sizeof *OPTS; i++) {
    check_split(name, whole, ref, OPTS[i], &cuts[1], 1);
    check_split(name, whole, ref, OPTS[i], cuts, 2);
  }
  bb_model_free(whole);
  bb_model_free(ref);
}

static void test_mlp(void) { check_case("mlp", "/1/Relu_output_0", "/3/Tanh_output_0"); }
static void test_lenet(void) { check_case("lenet", "/MaxPool_output_0", "/MaxPool_1_output_0"); }

int main(void) {
  RUN(test_mlp);
  RUN(test_lenet);
  return bb_test_finish();
}
