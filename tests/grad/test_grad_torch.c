/* The gradient builder and the optimizers against PyTorch: every case that
 * tests/tools/torch_make_grad_models.py wrote into tests/data/grad (one per operator the
 * builder covers, Gemm's forms, and whole models) is loaded, turned into a training graph
 * and run, and must give PyTorch's loss (to float rounding), PyTorch's gradient of every
 * parameter (within 1e-4 of the gradient's scale), and after 10 optimizer steps
 * torch.optim's parameters (within 1e-4) and running statistics.
 *
 * With BB_GRAD_GRAPHS_DIR set, each training and optimizer graph is also written there
 * (tests/tools/test_grad_checker.sh hands them to onnx.checker). */
#include "gradtest.h"

#define DATA BB_TEST_SOURCE_DIR "/tests/data/grad/"
#define MAX_INPUTS 16
#define LOSS_TOL 1e-5
#define GRAD_TOL 1e-4
#define PARAM_TOL 1e-4

static const char *meta(const bb_model *ref, const char *key) { return bb_kv_get(&ref->metadata, key); }

/* Splits a comma-separated list in place (up to max items). */
static size_t split(char *s, const char **items, size_t max) {
  size_t n = 0;
  for (char *p = s; p && *p && n < max;) {
    items[n++] = p;
    p = strchr(p, ',');
    if (p) *p++ = '\0';
  }
  return n;
}

/* The data inputs the reference fed to PyTorch ("input:NAME"). */
static size_t inputs(const bb_model *ref, const char **names, bb_tensor **values) {
  size_t n = 0;
  for (size_t i = 0; i < ref->graph->initializers.len && n < MAX_INPUTS; i++) {
    const char *name = ref->graph->initializers.items[i]->name;
    if (strncmp(name, "input:", 6) != 0) continue;
    names[n] = name + 6;
    values[n++] = gt_tensor(ref, name);
  }
  return n;
}

static void check_optimizer(const char *case_name, const bb_grad_graph *g, const bb_model *ref, const char *opt_name,
                            const char **names, bb_tensor **values, size_t n, const char *graphs_dir) {
  char key[256];
  snprintf(key, sizeof key, "opt:%s", opt_name);
  bb_optimizer_config c = gt_optimizer_config(meta(ref, key));
  bb_grad_optimizer *opt = NULL;
  bb_grad_trainer *t = NULL;
  bb_error err;
  int rc = bb_grad_optimizer_build(g, &c, &opt, &err);
  CHECK_MSG(!rc, "%s/%s: %s", case_name, opt_name, err.message);
  if (!rc) rc = bb_grad_trainer_new(g, opt, 0, NULL, &t, &err);
  CHECK_MSG(!rc, "%s/%s: %s", case_name, opt_name, err.message);
  if (rc) {
    bb_grad_optimizer_free(opt);
    return;
  }
  char suffix[96];
  snprintf(suffix, sizeof suffix, ".%s.onnx", opt_name);
  gt_save(graphs_dir, case_name, suffix, opt->model);
  snprintf(key, sizeof key, "%s:losses", opt_name);
  bb_tensor *losses = gt_tensor(ref, key);
  for (int step = 0; step < 10 && losses; step++) {
    bb_grad_step s;
    rc = bb_grad_trainer_step(t, names, values, n, &s, &err);
    CHECK_MSG(!rc && s.applied, "%s/%s step %d: %s", case_name, opt_name, step, rc ? err.message : "refused");
    double want = gt_value(losses, step);
    CHECK_MSG(fabs(s.loss - want) <= 1e-4 * fmax(1, fabs(want)), "%s/%s step %d: loss %.9g, torch %.9g", case_name, opt_name,
              step, s.loss, want);
  }
  bb_tensor_release(losses);
  for (size_t i = 0; i < ref->graph->initializers.len; i++) { /* "OPT:name" (parameters and running statistics) */
    const char *rname = ref->graph->initializers.items[i]->name;
    size_t len = strlen(opt_name);
    if (strncmp(rname, opt_name, len) != 0 || rname[len] != ':' || strcmp(rname + len + 1, "losses") == 0) continue;
    bb_tensor *want = gt_tensor(ref, rname);
    const bb_tensor *got = bb_grad_trainer_value(t, rname + len + 1);
    double e = gt_rel_error(got, want, 1.0);
    CHECK_MSG(e <= PARAM_TOL, "%s/%s: %s differs from torch.optim by %.3g", case_name, opt_name, rname + len + 1, e);
    bb_tensor_release(want);
  }
  CHECK_EQ_INT(bb_grad_trainer_refused(t), 0);
  bb_grad_trainer_free(t);
  bb_grad_optimizer_free(opt);
}

static void check_case(const char *name, const char *graphs_dir) {
  bb_model *model, *ref;
  if (!gt_load_case(DATA, name, &model, &ref)) return;
  const char *loss = meta(ref, "loss");
  char params_buf[16384];
  snprintf(params_buf, sizeof params_buf, "%s", meta(ref, "params"));
  const char *params[256];
  size_t n_params = split(params_buf, params, 256);
  bb_grad_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.loss = strcmp(loss, "sce") == 0   ? BB_GRAD_LOSS_SOFTMAX_CROSS_ENTROPY
           : strcmp(loss, "mse") == 0 ? BB_GRAD_LOSS_MSE
           : strcmp(loss, "bce") == 0 ? BB_GRAD_LOSS_BCE_WITH_LOGITS
                                      : BB_GRAD_LOSS_OUTPUT;
  o.target = meta(ref, "target");
  if (o.loss == BB_GRAD_LOSS_OUTPUT) { /* operator cases name their parameters; models take the default */
    o.params = params;
    o.n_params = n_params;
  }
  bb_grad_graph *g = NULL;
  bb_error err;
  int rc = bb_grad_build(model, &o, NULL, &g, &err);
  CHECK_MSG(!rc, "%s: %s", name, err.message);
  if (rc) {
    bb_model_free(model);
    bb_model_free(ref);
    return;
  }
  gt_save(graphs_dir, name, ".train.onnx", g->model);
  CHECK_MSG(g->n_params == n_params, "%s: %zu parameters trained, torch has %zu", name, g->n_params, n_params);
  CHECK_EQ_INT(g->n_warnings, 0);
  const char *names[MAX_INPUTS + 1];
  bb_tensor *values[MAX_INPUTS + 1];
  size_t n = inputs(ref, names, values);
  bb_tensor **outs = NULL;
  size_t n_out = 0;
  rc = gt_run(g, names, values, n, &outs, &n_out, &err);
  CHECK_MSG(!rc, "%s: %s", name, err.message);
  if (!rc) {
    bb_tensor *want = gt_tensor(ref, "loss");
    double got_loss = gt_value(outs[0], 0), want_loss = gt_value(want, 0);
    CHECK_MSG(fabs(got_loss - want_loss) <= LOSS_TOL * fmax(1, fabs(want_loss)), "%s: loss %.9g, torch %.9g", name, got_loss,
              want_loss);
    bb_tensor_release(want);
    /* a case whose exact gradients include zeros compares above a floor it names */
    double grad_floor = meta(ref, "grad_floor") ? strtod(meta(ref, "grad_floor"), NULL) : 1e-6;
    for (size_t i = 0; i < g->n_params; i++) {
      char key[512];
      snprintf(key, sizeof key, "grad:%s", g->params[i]);
      want = gt_tensor(ref, key);
      CHECK_MSG(want, "%s: torch has no gradient of %s", name, g->params[i]);
      double e = gt_rel_error(outs[1 + i], want, grad_floor);
      CHECK_MSG(e <= GRAD_TOL, "%s: d loss / d %s differs from torch's by %.3g of its scale", name, g->params[i], e);
      bb_tensor_release(want);
    }
    gt_release(outs, n_out);
  }
  char opts_buf[256];
  snprintf(opts_buf, sizeof opts_buf, "%s", meta(ref, "optimizers") ? meta(ref, "optimizers") : "");
  const char *opts[16];
  size_t n_opts = split(opts_buf, opts, 16);
  for (size_t i = 0; i < n_opts; i++) check_optimizer(name, g, ref, opts[i], names, values, n, graphs_dir);
  for (size_t i = 0; i < n; i++) bb_tensor_release(values[i]);
  bb_grad_graph_free(g);
  bb_model_free(model);
  bb_model_free(ref);
}

int main(void) {
  FILE *f = fopen(DATA "cases.txt", "r");
  CHECK_MSG(f, "cannot open %scases.txt", DATA);
  if (!f) return bb_test_finish();
  const char *graphs_dir = getenv("BB_GRAD_GRAPHS_DIR");
  char line[256];
  int cases = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = '\0';
    if (!*line) continue;
    int before = bb_test_failures;
    check_case(line, graphs_dir);
    printf("%s %s\n", bb_test_failures == before ? "ok  " : "FAIL", line);
    cases++;
  }
  fclose(f);
  CHECK(cases >= 40);
  return bb_test_finish();
}
