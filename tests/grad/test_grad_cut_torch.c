/* Parts of models against PyTorch: every cut that tests/tools/torch_make_grad_models.py
 * wrote into tests/data/grad (cuts.txt: the digits examples' CNN and MLP and the mlp,
 * lenet and transformer models, each cut at named values) is made with bb_grad_cut, turned
 * into a training graph that takes d loss / d (its outputs) as inputs
 * (BB_GRAD_LOSS_UPSTREAM) or holds the loss, and run: every parameter's gradient and
 * every input's gradient must be torch.autograd.grad's with the same grad_outputs (within
 * 1e-4 of its scale). The same part also takes one SGD step through the trainer's forward
 * and backward calls, which must give exactly what the single training graph gives.
 *
 * With BB_GRAD_GRAPHS_DIR set, each part's training graph is also written there
 * (tests/tools/test_grad_checker.sh hands them to onnx.checker). */
#include "gradtest.h"

#define DATA BB_TEST_SOURCE_DIR "/tests/data/grad/"
#define MAX_NAMES 32
#define GRAD_TOL 1e-4
#define LR 0.125f

static const char *meta(const bb_model *ref, const char *key) {
  const char *v = bb_kv_get(&ref->metadata, key);
  return v ? v : "";
}

/* Splits a comma-separated list into buf's copy (up to MAX_NAMES items). */
static size_t split(const char *list, char *buf, size_t size, const char **items) {
  snprintf(buf, size, "%s", list);
  size_t n = 0;
  for (char *p = buf; *p && n < MAX_NAMES;) {
    items[n++] = p;
    p = strchr(p, ',');
    if (!p) break;
    *p++ = '\0';
  }
  return n;
}

/* The part's inputs by name: "input:NAME", and each upstream gradient under the graph's
 * name for it ("upstream:OUTPUT"). */
static size_t feed(const bb_model *ref, const bb_grad_graph *g, const char **names, bb_tensor **values) {
  size_t n = 0;
  for (size_t i = 0; i < ref->graph->initializers.len && n < MAX_NAMES; i++) {
    const char *name = ref->graph->initializers.items[i]->name;
    if (strncmp(name, "input:", 6) == 0) {
      names[n] = name + 6;
      values[n++] = gt_tensor(ref, name);
    }
    for (size_t k = 0; k < g->n_upstream && strncmp(name, "upstream:", 9) == 0; k++)
      if (strcmp(name + 9, g->upstream_outputs[k]) == 0) {
        names[n] = g->upstream[k];
        values[n++] = gt_tensor(ref, name);
      }
  }
  return n;
}

static void compare(const char *cut, const char *what, const char *name, const bb_tensor *got, const bb_model *ref,
                    const char *key) {
  bb_tensor *want = gt_tensor(ref, key);
  CHECK_MSG(want, "%s: torch has no %s", cut, key);
  double e = gt_rel_error(got, want, 1e-6);
  CHECK_MSG(e <= GRAD_TOL, "%s: %s %s differs from torch.autograd.grad by %.3g of its scale", cut, what, name, e);
  bb_tensor_release(want);
}

/* One SGD step through the trainer (the forward and backward phases for a part whose
 * gradients come in) must give p - lr * grad from the single graph's run, bit for bit, and
 * the same input gradients. */
static void check_trainer(const char *cut, const bb_grad_graph *g, const char **names, bb_tensor **values, size_t n,
                          bb_tensor **outs) {
  bb_optimizer_config c = bb_optimizer_defaults(BB_OPTIMIZER_SGD);
  c.lr = LR;
  bb_grad_optimizer *opt = NULL;
  bb_grad_trainer *t = NULL;
  bb_error err;
  int rc = bb_grad_optimizer_build(g, &c, &opt, &err);
  if (!rc) rc = bb_grad_trainer_new(g, opt, 0, NULL, &t, &err);
  CHECK_MSG(!rc, "%s: %s", cut, err.message);
  bb_tensor *before[64] = {0};
  for (size_t i = 0; !rc && i < g->n_params && i < 64; i++) before[i] = bb_tensor_retain((bb_tensor *)bb_grad_trainer_value(t, g->params[i]));
  bb_grad_step st;
  if (!rc) {
    rc = bb_grad_trainer_step(t, names, values, n, &st, &err);
    CHECK_MSG(!rc && st.applied, "%s: the trainer's step: %s", cut, rc ? err.message : "refused");
  }
  size_t first = g->loss ? 1 : 0;
  for (size_t i = 0; !rc && i < g->n_params && i < 64; i++) {
    const bb_tensor *p = bb_grad_trainer_value(t, g->params[i]), *grad = outs[first + i];
    const float *a = bb_tensor_data(before[i]), *b = bb_tensor_data(p), *d = bb_tensor_data(grad);
    bool same = p->numel == grad->numel;
    for (int64_t k = 0; same && k < p->numel; k++) same = b[k] == a[k] - LR * d[k];
    CHECK_MSG(same, "%s: the trainer's step on %s is not p - lr * grad of the training graph", cut, g->params[i]);
  }
  for (size_t i = 0; !rc && i < g->n_input_grads; i++) {
    const bb_tensor *mine = bb_grad_trainer_input_grad(t, g->inputs[i]);
    const bb_tensor *graph = outs[first + g->n_params + g->n_state + i];
    CHECK_MSG(mine && bb_tensor_same_shape(mine, graph) && !memcmp(bb_tensor_data(mine), bb_tensor_data(graph), bb_tensor_nbytes(graph)),
              "%s: the trainer's gradient of %s differs from the training graph's", cut, g->inputs[i]);
  }
  for (size_t i = 0; i < 64; i++) bb_tensor_release(before[i]);
  bb_grad_trainer_free(t);
  bb_grad_optimizer_free(opt);
}

static void check_cut(const char *cut) {
  char path[1024], buf[4][2048];
  snprintf(path, sizeof path, DATA "cut_%s.ref.onnx", cut);
  bb_model *ref = gt_load(path);
  CHECK_MSG(ref, "%s: cannot load its reference", cut);
  if (!ref) return;
  snprintf(path, sizeof path, BB_TEST_SOURCE_DIR "/%s", meta(ref, "model"));
  bb_model *whole = gt_load(path), *part = NULL;
  CHECK_MSG(whole, "%s: cannot load %s", cut, path);
  const char *ins[MAX_NAMES], *outs_[MAX_NAMES], *params[MAX_NAMES], *grad_ins[MAX_NAMES];
  size_t n_in = split(meta(ref, "cut_inputs"), buf[0], sizeof buf[0], ins);
  size_t n_out = split(meta(ref, "cut_outputs"), buf[1], sizeof buf[1], outs_);
  size_t n_params = split(meta(ref, "params"), buf[2], sizeof buf[2], params);
  size_t n_grad_ins = split(meta(ref, "input_grads"), buf[3], sizeof buf[3], grad_ins);
  bb_grad_cut_options co = {sizeof co, n_in ? ins : NULL, n_in, n_out ? outs_ : NULL, n_out};
  bb_error err;
  int rc = whole ? bb_grad_cut(whole, &co, NULL, &part, &err) : -1;
  CHECK_MSG(!rc, "%s: cut: %s", cut, err.message);
  bb_grad_graph *g = NULL;
  if (!rc) {
    bool upstream = strcmp(meta(ref, "loss"), "upstream") == 0;
    bb_grad_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.loss = upstream ? BB_GRAD_LOSS_UPSTREAM : BB_GRAD_LOSS_SOFTMAX_CROSS_ENTROPY;
    o.target = upstream ? NULL : meta(ref, "target");
    o.upstream = upstream ? outs_ : NULL;
    o.n_upstream = upstream ? n_out : 0;
    o.input_grads = grad_ins;
    o.n_input_grads = n_grad_ins;
    rc = bb_grad_build(part, &o, NULL, &g, &err);
    CHECK_MSG(!rc, "%s: %s", cut, err.message);
  }
  if (!rc) {
    char name[300];
    snprintf(name, sizeof name, "cut_%s", cut);
    gt_save(getenv("BB_GRAD_GRAPHS_DIR"), name, ".train.onnx", g->model);
    CHECK_MSG(g->n_params == n_params, "%s: %zu parameters trained, torch has %zu", cut, g->n_params, n_params);
    CHECK_MSG(g->n_input_grads == n_grad_ins, "%s: %zu input gradients, torch has %zu", cut, g->n_input_grads, n_grad_ins);
    CHECK_EQ_INT(g->n_warnings, 0);
    const char *names[MAX_NAMES + 1];
    bb_tensor *values[MAX_NAMES + 1];
    size_t n = feed(ref, g, names, values);
    bb_tensor **outs = NULL;
    size_t n_run = 0;
    rc = gt_run(g, names, values, n, &outs, &n_run, &err);
    CHECK_MSG(!rc, "%s: %s", cut, err.message);
    if (!rc) {
      size_t first = g->loss ? 1 : 0;
      if (g->loss) compare(cut, "the loss", "", outs[0], ref, "loss");
      char key[512];
      for (size_t i = 0; i < g->n_params; i++) {
        snprintf(key, sizeof key, "grad:%s", g->params[i]);
        compare(cut, "d loss / d", g->params[i], outs[first + i], ref, key);
      }
      for (size_t i = 0; i < g->n_input_grads; i++) {
        snprintf(key, sizeof key, "grad_input:%s", g->inputs[i]);
        compare(cut, "d loss / d input", g->inputs[i], outs[first + g->n_params + g->n_state + i], ref, key);
      }
      check_trainer(cut, g, names, values, n, outs);
      gt_release(outs, n_run);
    }
    for (size_t i = 0; i < n; i++) bb_tensor_release(values[i]);
  }
  bb_grad_graph_free(g);
  bb_model_free(part);
  bb_model_free(whole);
  bb_model_free(ref);
}

int main(void) {
  FILE *f = fopen(DATA "cuts.txt", "r");
  CHECK_MSG(f, "cannot open %scuts.txt", DATA);
  if (!f) return bb_test_finish();
  char line[256];
  int cuts = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = '\0';
    if (!*line) continue;
    int before = bb_test_failures;
    check_cut(line);
    printf("%s %s\n", bb_test_failures == before ? "ok  " : "FAIL", line);
    cuts++;
  }
  fclose(f);
  CHECK(cuts >= 14);
  return bb_test_finish();
}
