/* The multilayer perceptron: forward and gradients against a double-precision reference
 * written here (gradients by central differences), the optimizer step against its
 * formula, training to high accuracy on seeded synthetic problems, the parameter vector
 * round trip, config and argument errors, and allocation failure at every point. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "bb/common.h"
#include "failalloc.h"
#include "harness.h"
#include "components/models/mlp.h"

/* ---- helpers --------------------------------------------------------------------------- */

static uint64_t rng_state;

static void rng_seed(uint64_t seed) { rng_state = seed; }

static uint64_t rng_next(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

static float rng_uniform(float lo, float hi) {
  return lo + (hi - lo) * (float)((double)(rng_next() >> 40) / (double)(1u << 24));
}

static float *floats(size_t n) {
  float *p = malloc((n ? n : 1) * sizeof *p);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  return p;
}

static double *doubles(size_t n) {
  double *p = malloc((n ? n : 1) * sizeof *p);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  return p;
}

static void fill(float *x, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; i++) x[i] = rng_uniform(lo, hi);
}

static bbi_mlp *make(const bbi_mlp_config *cfg) {
  bbi_mlp *m = NULL;
  bb_error err;
  const int rc = bbi_mlp_create(cfg, NULL, &m, &err);
  CHECK_MSG(rc == 0, "create: %d %s", rc, err.message);
  return m;
}

static const char *activation_name(bbi_mlp_activation a) {
  switch (a) {
  case BBI_MLP_RELU: return "relu";
  case BBI_MLP_TANH: return "tanh";
  case BBI_MLP_SIGMOID: return "sigmoid";
  case BBI_MLP_IDENTITY: return "identity";
  }
  return "?";
}

/* ---- the double-precision reference ---------------------------------------------------- */

/* The model's outputs for one row, in double: layers as docs/LEARNING.md lays them out
 * (per layer W [out, in] row-major, then b). out gets probabilities for cross-entropy. */
static void ref_forward_row(const bbi_mlp_config *cfg, const double *p, const float *x,
                            double *out) {
  double a[64], z[64];
  size_t in = cfg->inputs, off = 0;
  for (size_t i = 0; i < in; i++) {
    const double s = cfg->input_scale ? cfg->input_scale[i] : 1.0;
    const double t = cfg->input_shift ? cfg->input_shift[i] : 0.0;
    a[i] = (double)x[i] * s + t;
  }
  for (size_t l = 0; l <= cfg->n_hidden; l++) {
    const int hidden = l < cfg->n_hidden;
    const size_t o = hidden ? cfg->hidden[l] : cfg->outputs;
    const double *w = p + off, *b = p + off + o * in;
    for (size_t r = 0; r < o; r++) {
      double s = b[r];
      for (size_t c = 0; c < in; c++) s += w[r * in + c] * a[c];
      if (hidden) {
        switch (cfg->activation) {
        case BBI_MLP_RELU: s = s > 0 ? s : 0; break;
        case BBI_MLP_TANH: s = tanh(s); break;
        case BBI_MLP_SIGMOID: s = 1.0 / (1.0 + exp(-s)); break;
        case BBI_MLP_IDENTITY: break;
        }
      }
      z[r] = s;
    }
    off += o * (in + 1);
    in = o;
    for (size_t r = 0; r < o; r++) a[r] = z[r];
  }
  if (cfg->loss == BBI_MLP_SOFTMAX_CROSS_ENTROPY) {
    double mx = a[0], sum = 0;
    for (size_t r = 1; r < in; r++) mx = a[r] > mx ? a[r] : mx;
    for (size_t r = 0; r < in; r++) sum += exp(a[r] - mx);
    for (size_t r = 0; r < in; r++) out[r] = exp(a[r] - mx) / sum;
  } else {
    for (size_t r = 0; r < in; r++) out[r] = a[r];
  }
}

static double ref_loss(const bbi_mlp_config *cfg, const double *p, const float *x,
                       const float *t, size_t n) {
  double out[64], sum = 0;
  const size_t k = cfg->outputs;
  for (size_t i = 0; i < n; i++) {
    ref_forward_row(cfg, p, x + i * cfg->inputs, out);
    if (cfg->loss == BBI_MLP_SOFTMAX_CROSS_ENTROPY) {
      sum -= log(out[(size_t)t[i]]);
    } else {
      for (size_t j = 0; j < k; j++) sum += (out[j] - t[i * k + j]) * (out[j] - t[i * k + j]);
    }
  }
  return cfg->loss == BBI_MLP_SOFTMAX_CROSS_ENTROPY ? sum / (double)n : sum / (double)(n * k);
}

/* Random targets fitting the loss: class indices, or values in [-1, 1]. */
static float *make_targets(const bbi_mlp_config *cfg, size_t n) {
  const int ce = cfg->loss == BBI_MLP_SOFTMAX_CROSS_ENTROPY;
  float *t = floats(ce ? n : n * cfg->outputs);
  if (ce)
    for (size_t i = 0; i < n; i++) t[i] = (float)(rng_next() % cfg->outputs);
  else
    fill(t, n * cfg->outputs, -1, 1);
  return t;
}

/* Forward, loss and every parameter's gradient against the reference. */
static void check_gradients(const bbi_mlp_config *cfg, const char *what) {
  enum { N = 6 };
  bbi_mlp *m = make(cfg);
  if (!m) return;
  const size_t np = bbi_mlp_param_count(m), k = cfg->outputs;
  float *p = floats(np), *x = floats(N * cfg->inputs), *y = floats(N * k);
  float *t = make_targets(cfg, N);
  double *pd = doubles(np), ref_out[64];
  fill(p, np, -0.6f, 0.6f); /* biases too, so every path carries signal */
  fill(x, N * cfg->inputs, -1.5f, 1.5f);
  bb_error err;
  CHECK(bbi_mlp_load_params(m, p, np, &err) == 0);
  for (size_t i = 0; i < np; i++) pd[i] = p[i];

  /* forward */
  CHECK(bbi_mlp_forward(m, x, N, y, &err) == 0);
  double worst_y = 0;
  for (size_t i = 0; i < N; i++) {
    ref_forward_row(cfg, pd, x + i * cfg->inputs, ref_out);
    for (size_t j = 0; j < k; j++) worst_y = fmax(worst_y, fabs(y[i * k + j] - ref_out[j]));
  }
  CHECK_MSG(worst_y < 1e-5, "%s: forward is %g away from the reference", what, worst_y);

  /* loss, both ways */
  const double ref = ref_loss(cfg, pd, x, t, N);
  float loss = NAN, loss_of = NAN;
  CHECK(bbi_mlp_backward(m, x, t, N, &loss, &err) == 0);
  CHECK(bbi_mlp_loss_of(m, y, t, N, &loss_of, &err) == 0);
  CHECK_MSG(fabs(loss - ref) <= 1e-5 * fabs(ref) + 1e-7, "%s: loss %g, reference %g", what,
            (double)loss, ref);
  CHECK_MSG(fabs(loss_of - ref) <= 1e-5 * fabs(ref) + 1e-7, "%s: loss_of %g, reference %g",
            what, (double)loss_of, ref);

  /* gradient against central differences of the reference loss */
  const float *g = bbi_mlp_gradient(m);
  CHECK(g != NULL);
  if (g) {
    double worst = 0, largest = 0;
    size_t worst_at = 0;
    const double h = 1e-6;
    for (size_t i = 0; i < np; i++) {
      const double keep = pd[i];
      pd[i] = keep + h;
      const double up = ref_loss(cfg, pd, x, t, N);
      pd[i] = keep - h;
      const double down = ref_loss(cfg, pd, x, t, N);
      pd[i] = keep;
      const double fd = (up - down) / (2 * h);
      largest = fmax(largest, fabs(fd));
      const double e = fabs((double)g[i] - fd) / (fabs(fd) + 1e-3);
      if (e > worst) {
        worst = e;
        worst_at = i;
      }
    }
    CHECK_MSG(largest > 1e-4, "%s: a vanishing gradient checks nothing (%g)", what, largest);
    CHECK_MSG(worst < 1e-3, "%s: gradient %zu is off by %g (relative)", what, worst_at, worst);
  }
  bbi_mlp_free(m);
  free(p);
  free(x);
  free(y);
  free(t);
  free(pd);
}

static void test_gradients(void) {
  rng_seed(1);
  static const size_t two[] = {7, 5};
  static const bbi_mlp_activation acts[] = {BBI_MLP_RELU, BBI_MLP_TANH, BBI_MLP_SIGMOID,
                                           BBI_MLP_IDENTITY};
  for (int loss = 0; loss < 2; loss++) {
    bbi_mlp_config c = {0};
    c.inputs = 5;
    c.outputs = 3;
    c.loss = loss ? BBI_MLP_MEAN_SQUARED_ERROR : BBI_MLP_SOFTMAX_CROSS_ENTROPY;
    c.learning_rate = 0.1f;
    char what[96];
    snprintf(what, sizeof what, "no hidden layer, %s", loss ? "mse" : "ce");
    check_gradients(&c, what);
    c.hidden = two;
    c.n_hidden = 2;
    for (size_t a = 0; a < 4; a++) {
      c.activation = acts[a];
      c.seed = a;
      snprintf(what, sizeof what, "2 hidden %s, %s", activation_name(acts[a]),
               loss ? "mse" : "ce");
      check_gradients(&c, what);
    }
  }
  /* one output under mean squared error, and input normalisation */
  static const size_t one[] = {4};
  static const float scale[5] = {0.5f, 2, -1, 0.25f, 1}, shift[5] = {0.1f, -0.3f, 0, 1, -1};
  bbi_mlp_config c = {0};
  c.inputs = 5;
  c.hidden = one;
  c.n_hidden = 1;
  c.outputs = 1;
  c.activation = BBI_MLP_TANH;
  c.loss = BBI_MLP_MEAN_SQUARED_ERROR;
  c.input_scale = scale;
  c.input_shift = shift;
  check_gradients(&c, "1 output, normalised input");
  c.outputs = 4;
  c.loss = BBI_MLP_SOFTMAX_CROSS_ENTROPY;
  c.input_shift = NULL;
  check_gradients(&c, "ce, scale only");
  c.input_scale = NULL;
  c.input_shift = shift;
  c.activation = BBI_MLP_RELU;
  check_gradients(&c, "ce, shift only");
}

/* ---- the optimizer ----------------------------------------------------------------------- */

/* Two steps of momentum SGD with weight decay against the formula, weights and biases
 * told apart by the documented layout. */
static void test_sgd_step(void) {
  rng_seed(2);
  static const size_t hidden[] = {3};
  bbi_mlp_config c = {0};
  c.inputs = 4;
  c.hidden = hidden;
  c.n_hidden = 1;
  c.outputs = 2;
  c.activation = BBI_MLP_SIGMOID;
  c.loss = BBI_MLP_MEAN_SQUARED_ERROR;
  c.learning_rate = 0.05f;
  c.momentum = 0.9f;
  c.weight_decay = 0.01f;
  bbi_mlp *m = make(&c);
  if (!m) return;
  const size_t np = bbi_mlp_param_count(m);
  CHECK_EQ_INT(np, 3 * 4 + 3 + 2 * 3 + 2);
  int is_weight[23];
  for (size_t i = 0; i < np; i++) is_weight[i] = i < 12 || (i >= 15 && i < 21);
  float x[3 * 4], t[3 * 2], p[23], v[23], g[23], now[23];
  fill(x, 12, -1, 1);
  fill(t, 6, -1, 1);
  bb_error err;
  CHECK(bbi_mlp_sgd_step(m, &err) == BB_ERR_INVALID_ARGUMENT); /* no gradient yet */
  CHECK(bbi_mlp_params(m, p, np, &err) == 0);
  for (size_t i = 0; i < np; i++) v[i] = 0;
  for (int step = 0; step < 2; step++) {
    CHECK(bbi_mlp_backward(m, x, t, 3, NULL, &err) == 0);
    const float *grad = bbi_mlp_gradient(m);
    CHECK(grad != NULL);
    if (!grad) break;
    memcpy(g, grad, sizeof g);
    CHECK(bbi_mlp_sgd_step(m, &err) == 0);
    CHECK(bbi_mlp_params(m, now, np, &err) == 0);
    double worst = 0;
    for (size_t i = 0; i < np; i++) {
      v[i] = c.momentum * v[i] + g[i] + (is_weight[i] ? c.weight_decay * p[i] : 0.0f);
      p[i] -= c.learning_rate * v[i];
      worst = fmax(worst, fabs(now[i] - p[i]));
    }
    CHECK_MSG(worst < 1e-6, "step %d: %g away from the formula", step, worst);
  }
  bbi_mlp_free(m);
}

/* ---- training ---------------------------------------------------------------------------- */

/* n points in [-1, 1]^dim labelled by the largest of `classes` random linear scores:
 * linearly separable by construction. */
static void linear_problem(size_t n, size_t dim, size_t classes, const float *w, float *x,
                           float *labels) {
  for (size_t i = 0; i < n; i++) {
    float *row = x + i * dim;
    fill(row, dim, -1, 1);
    size_t best = 0;
    float best_score = -INFINITY;
    for (size_t c = 0; c < classes; c++) {
      float s = 0;
      for (size_t j = 0; j < dim; j++) s += w[c * dim + j] * row[j];
      if (s > best_score) {
        best_score = s;
        best = c;
      }
    }
    labels[i] = (float)best;
  }
}

/* Trains in shuffled-order minibatches for `epochs`; returns the mean loss of the last
 * epoch. */
static float train(bbi_mlp *m, const float *x, const float *t, size_t n, size_t t_width,
                   size_t batch, int epochs) {
  const size_t in = bbi_mlp_inputs(m);
  float *bx = floats(batch * in), *bt = floats(batch * t_width);
  double last = 0;
  bb_error err;
  for (int e = 0; e < epochs; e++) {
    double sum = 0;
    size_t batches = 0;
    for (size_t start = 0; start + batch <= n; start += batch, batches++) {
      for (size_t r = 0; r < batch; r++) {
        const size_t i = rng_next() % n;
        memcpy(bx + r * in, x + i * in, in * sizeof(float));
        memcpy(bt + r * t_width, t + i * t_width, t_width * sizeof(float));
      }
      float loss = NAN;
      const int rc = bbi_mlp_train_batch(m, bx, bt, batch, &loss, &err);
      if (rc) {
        CHECK_MSG(0, "train_batch: %d %s", rc, err.message);
        free(bx);
        free(bt);
        return NAN;
      }
      sum += loss;
    }
    last = sum / (double)batches;
  }
  free(bx);
  free(bt);
  return (float)last;
}

static void test_softmax_regression_learns(void) {
  rng_seed(3);
  enum { DIM = 6, CLASSES = 4, TRAIN = 800, TEST = 400 };
  float w[CLASSES * DIM];
  fill(w, CLASSES * DIM, -1, 1);
  float *x = floats(TRAIN * DIM), *lab = floats(TRAIN);
  float *xt = floats(TEST * DIM), *labt = floats(TEST);
  linear_problem(TRAIN, DIM, CLASSES, w, x, lab);
  linear_problem(TEST, DIM, CLASSES, w, xt, labt);
  bbi_mlp_config c = {0};
  c.inputs = DIM;
  c.outputs = CLASSES;
  c.loss = BBI_MLP_SOFTMAX_CROSS_ENTROPY;
  c.learning_rate = 0.5f;
  c.momentum = 0.9f;
  c.seed = 11;
  bbi_mlp *m = make(&c);
  if (m) {
    bb_error err;
    float before = 0, after = 0, acc = 0, acc0 = 0;
    float *y = floats(TRAIN * CLASSES);
    CHECK(bbi_mlp_forward(m, x, TRAIN, y, &err) == 0);
    CHECK(bbi_mlp_loss_of(m, y, lab, TRAIN, &before, &err) == 0);
    CHECK(bbi_mlp_accuracy(m, xt, labt, TEST, &acc0, &err) == 0);
    train(m, x, lab, TRAIN, 1, 32, 60);
    CHECK(bbi_mlp_forward(m, x, TRAIN, y, &err) == 0);
    CHECK(bbi_mlp_loss_of(m, y, lab, TRAIN, &after, &err) == 0);
    CHECK(bbi_mlp_accuracy(m, xt, labt, TEST, &acc, &err) == 0);
    printf("  softmax regression: loss %.4f -> %.4f, test accuracy %.3f -> %.3f\n",
           (double)before, (double)after, (double)acc0, (double)acc);
    CHECK(after < 0.5f * before);
    CHECK_MSG(acc >= 0.95f, "test accuracy %g", (double)acc);
    free(y);
    bbi_mlp_free(m);
  }
  free(x);
  free(lab);
  free(xt);
  free(labt);
}

/* Inside or outside a ring: not linearly separable, so only the hidden layers can learn
 * it. Inputs come in 0..16 (like digits pixels) and the normalisation maps them to
 * [-1, 1]. */
static void test_mlp_learns_nonlinear(void) {
  static const bbi_mlp_activation acts[] = {BBI_MLP_RELU, BBI_MLP_TANH, BBI_MLP_SIGMOID};
  enum { TRAIN = 1000, TEST = 500 };
  float *x = floats(TRAIN * 2), *lab = floats(TRAIN), *xt = floats(TEST * 2), *labt = floats(TEST);
  rng_seed(4);
  for (size_t i = 0; i < TRAIN + TEST; i++) {
    float *row = i < TRAIN ? x + 2 * i : xt + 2 * (i - TRAIN);
    float a, b;
    do { /* keep a margin around the boundary r = 0.6 */
      a = rng_uniform(-1, 1);
      b = rng_uniform(-1, 1);
    } while (fabsf(sqrtf(a * a + b * b) - 0.6f) < 0.05f);
    row[0] = (a + 1) * 8;
    row[1] = (b + 1) * 8;
    *(i < TRAIN ? lab + i : labt + (i - TRAIN)) = sqrtf(a * a + b * b) < 0.6f ? 1.0f : 0.0f;
  }
  static const float scale[2] = {0.125f, 0.125f}, shift[2] = {-1, -1};
  static const size_t hidden[] = {16, 16};
  for (size_t k = 0; k < 3; k++) {
    bbi_mlp_config c = {0};
    c.inputs = 2;
    c.hidden = hidden;
    c.n_hidden = 2;
    c.outputs = 2;
    c.activation = acts[k];
    c.loss = BBI_MLP_SOFTMAX_CROSS_ENTROPY;
    c.learning_rate = acts[k] == BBI_MLP_SIGMOID ? 0.5f : 0.1f;
    c.momentum = 0.9f;
    c.weight_decay = 1e-4f;
    c.seed = 5;
    c.input_scale = scale;
    c.input_shift = shift;
    bbi_mlp *m = make(&c);
    if (!m) continue;
    bb_error err;
    const float loss = train(m, x, lab, TRAIN, 1, 20, 150);
    float acc = 0;
    CHECK(bbi_mlp_accuracy(m, xt, labt, TEST, &acc, &err) == 0);
    printf("  ring, %s: last epoch loss %.4f, test accuracy %.3f\n", activation_name(acts[k]),
           (double)loss, (double)acc);
    CHECK_MSG(acc >= 0.93f, "%s: test accuracy %g", activation_name(acts[k]), (double)acc);
    bbi_mlp_free(m);
  }
  free(x);
  free(lab);
  free(xt);
  free(labt);
}

/* A linear model under mean squared error finds an affine map exactly. */
static void test_linear_regression_learns(void) {
  rng_seed(6);
  enum { DIM = 3, OUT = 2, N = 400 };
  float a[OUT * DIM], b[OUT], *x = floats(N * DIM), *t = floats(N * OUT);
  fill(a, OUT * DIM, -2, 2);
  fill(b, OUT, -1, 1);
  fill(x, N * DIM, -1, 1);
  for (size_t i = 0; i < N; i++)
    for (size_t o = 0; o < OUT; o++) {
      float s = b[o];
      for (size_t j = 0; j < DIM; j++) s += a[o * DIM + j] * x[i * DIM + j];
      t[i * OUT + o] = s;
    }
  bbi_mlp_config c = {0};
  c.inputs = DIM;
  c.outputs = OUT;
  c.loss = BBI_MLP_MEAN_SQUARED_ERROR;
  c.learning_rate = 0.2f;
  c.momentum = 0.5f;
  c.seed = 9;
  bbi_mlp *m = make(&c);
  if (m) {
    const float loss = train(m, x, t, N, OUT, 16, 100);
    CHECK_MSG(loss < 1e-6f, "last epoch loss %g", (double)loss);
    float p[OUT * DIM + OUT];
    bb_error err;
    CHECK(bbi_mlp_params(m, p, OUT * DIM + OUT, &err) == 0);
    double worst = 0; /* the layout: W [out, in] row-major, then b */
    for (size_t i = 0; i < OUT * DIM; i++) worst = fmax(worst, fabs(p[i] - a[i]));
    for (size_t o = 0; o < OUT; o++) worst = fmax(worst, fabs(p[OUT * DIM + o] - b[o]));
    CHECK_MSG(worst < 1e-3, "learnt parameters are %g away from the true map", worst);
    bbi_mlp_free(m);
  }
  free(x);
  free(t);
}

/* ---- parameters -------------------------------------------------------------------------- */

static void test_params_round_trip(void) {
  rng_seed(7);
  static const size_t hidden[] = {5, 4};
  bbi_mlp_config c = {0};
  c.inputs = 3;
  c.hidden = hidden;
  c.n_hidden = 2;
  c.outputs = 2;
  c.activation = BBI_MLP_TANH;
  c.loss = BBI_MLP_SOFTMAX_CROSS_ENTROPY;
  c.learning_rate = 0.1f;
  c.seed = 42;
  bbi_mlp *a = make(&c), *b = make(&c);
  c.seed = 43;
  bbi_mlp *other = make(&c);
  if (!a || !b || !other) return;
  const size_t np = bbi_mlp_param_count(a);
  CHECK_EQ_INT(np, 5 * 3 + 5 + 4 * 5 + 4 + 2 * 4 + 2);
  CHECK_EQ_INT(bbi_mlp_inputs(a), 3);
  CHECK_EQ_INT(bbi_mlp_outputs(a), 2);
  float *pa = floats(np), *pb = floats(np), *po = floats(np), *d = floats(np);
  bb_error err;
  CHECK(bbi_mlp_params(a, pa, np, &err) == 0);
  CHECK(bbi_mlp_params(b, pb, np, &err) == 0);
  CHECK(bbi_mlp_params(other, po, np, &err) == 0);
  CHECK(memcmp(pa, pb, np * sizeof(float)) == 0); /* same seed, same model */
  CHECK(memcmp(pa, po, np * sizeof(float)) != 0);
  /* biases start at 0, weights do not */
  CHECK(pa[15] == 0 && pa[19] == 0 && pa[np - 1] == 0);
  CHECK(pa[0] != 0);

  fill(pa, np, -1, 1);
  CHECK(bbi_mlp_load_params(a, pa, np, &err) == 0);
  CHECK(bbi_mlp_params(a, pb, np, &err) == 0);
  CHECK(memcmp(pa, pb, np * sizeof(float)) == 0);

  fill(d, np, -0.1f, 0.1f);
  CHECK(bbi_mlp_apply_delta(a, d, np, &err) == 0);
  CHECK(bbi_mlp_params(a, pb, np, &err) == 0);
  int same = 1;
  for (size_t i = 0; i < np; i++) same &= pb[i] == pa[i] + d[i];
  CHECK(same);

  /* the same parameters give the same outputs in another model */
  CHECK(bbi_mlp_load_params(other, pb, np, &err) == 0);
  float x[2 * 3] = {0.1f, -0.2f, 0.3f, 1, 0, -1}, ya[4], yb[4];
  CHECK(bbi_mlp_forward(a, x, 2, ya, &err) == 0);
  CHECK(bbi_mlp_forward(other, x, 2, yb, &err) == 0);
  CHECK(memcmp(ya, yb, sizeof ya) == 0);
  CHECK(fabsf(ya[0] + ya[1] - 1) < 1e-6f && fabsf(yb[2] + yb[3] - 1) < 1e-6f);

  /* wrong lengths */
  CHECK(bbi_mlp_params(a, pb, np - 1, &err) == BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "parameters") != NULL);
  CHECK(bbi_mlp_load_params(a, pa, np + 1, &err) == BB_ERR_INVALID_ARGUMENT);
  CHECK(bbi_mlp_apply_delta(a, d, 0, &err) == BB_ERR_INVALID_ARGUMENT);
  CHECK(bbi_mlp_load_params(a, NULL, np, &err) == BB_ERR_INVALID_ARGUMENT);
  CHECK(bbi_mlp_params(a, po, np, &err) == 0); /* the refused calls changed nothing */
  CHECK(memcmp(po, pb, np * sizeof(float)) == 0);
  bbi_mlp_free(a);
  bbi_mlp_free(b);
  bbi_mlp_free(other);
  free(pa);
  free(pb);
  free(po);
  free(d);
}

/* ---- errors ------------------------------------------------------------------------------ */

static void expect_config_error(const bbi_mlp_config *c, int code, const char *needle) {
  bbi_mlp *m = (bbi_mlp *)1;
  bb_error err = {0};
  const int rc = bbi_mlp_create(c, NULL, &m, &err);
  CHECK_MSG(rc == code, "expected %d, got %d (%s)", code, rc, err.message);
  CHECK(m == NULL);
  CHECK_MSG(strstr(err.message, needle) != NULL, "\"%s\" lacks \"%s\"", err.message, needle);
  if (rc == 0) bbi_mlp_free(m);
}

static void test_bad_configs(void) {
  static const size_t zero_width[] = {4, 0};
  static const float bad_scale[3] = {1, INFINITY, 1};
  bbi_mlp_config good = {0};
  good.inputs = 3;
  good.outputs = 2;
  good.learning_rate = 0.1f;
  bbi_mlp_config c = good;
  c.inputs = 0;
  expect_config_error(&c, BB_ERR_INVALID_ARGUMENT, "inputs");
  c = good;
  c.outputs = 1;
  expect_config_error(&c, BB_ERR_INVALID_ARGUMENT, "at least 2 outputs");
  c.loss = BBI_MLP_MEAN_SQUARED_ERROR;
  c.outputs = 0;
  expect_config_error(&c, BB_ERR_INVALID_ARGUMENT, "outputs");
  c = good;
  c.hidden = zero_width;
  c.n_hidden = 2;
  expect_config_error(&c, BB_ERR_INVALID_ARGUMENT, "hidden layer 1");
  c.hidden = NULL;
  expect_config_error(&c, BB_ERR_INVALID_ARGUMENT, "NULL");
  c.n_hidden = BBI_MLP_MAX_HIDDEN + 1;
  expect_config_error(&c, BB_ERR_LIMIT, "hidden layers");
  c = good;
  c.learning_rate = -1;
  expect_config_error(&c, BB_ERR_INVALID_ARGUMENT, "learning rate");
  c.learning_rate = NAN;
  expect_config_error(&c, BB_ERR_INVALID_ARGUMENT, "learning rate");
  c = good;
  c.momentum = 1;
  expect_config_error(&c, BB_ERR_INVALID_ARGUMENT, "momentum");
  c = good;
  c.weight_decay = -0.5f;
  expect_config_error(&c, BB_ERR_INVALID_ARGUMENT, "weight decay");
  c = good;
  c.activation = (bbi_mlp_activation)99;
  expect_config_error(&c, BB_ERR_INVALID_ARGUMENT, "activation");
  c = good;
  c.loss = (bbi_mlp_loss)7;
  expect_config_error(&c, BB_ERR_INVALID_ARGUMENT, "loss");
  c = good;
  c.input_scale = bad_scale;
  expect_config_error(&c, BB_ERR_INVALID_ARGUMENT, "input_scale[1]");
  c = good;
  static const size_t huge[] = {SIZE_MAX / 2};
  c.hidden = huge;
  c.n_hidden = 1;
  expect_config_error(&c, BB_ERR_LIMIT, "too many parameters");
  expect_config_error(NULL, BB_ERR_INVALID_ARGUMENT, "NULL");
}

static void test_bad_calls(void) {
  bbi_mlp_config c = {0};
  c.inputs = 2;
  c.outputs = 3;
  c.learning_rate = 0.1f;
  bbi_mlp *m = make(&c);
  if (!m) return;
  bb_error err;
  float x[4] = {1, 2, 3, 4}, y[6];
  float bad_labels[][2] = {{0, 3}, {1.5f, 0}, {-1, 0}, {NAN, 0}};
  for (size_t i = 0; i < 4; i++) {
    CHECK(bbi_mlp_train_batch(m, x, bad_labels[i], 2, NULL, &err) == BB_ERR_INVALID_ARGUMENT);
    CHECK(strstr(err.message, i == 0 ? "row 1" : "row 0") != NULL);
    CHECK(bbi_mlp_accuracy(m, x, bad_labels[i], 2, NULL, &err) == BB_ERR_INVALID_ARGUMENT);
  }
  CHECK(bbi_mlp_gradient(m) == NULL);
  CHECK(bbi_mlp_sgd_step(m, &err) == BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "backward") != NULL);
  const float labels[2] = {0, 2};
  CHECK(bbi_mlp_backward(m, x, labels, 0, NULL, &err) == BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "empty batch") != NULL);
  CHECK(bbi_mlp_forward(m, x, 0, NULL, &err) == 0);
  CHECK(bbi_mlp_forward(m, NULL, 2, y, &err) == BB_ERR_INVALID_ARGUMENT);
  CHECK(bbi_mlp_backward(m, x, labels, 2, NULL, &err) == 0);
  CHECK(bbi_mlp_gradient(m) != NULL);
  float p[9];
  CHECK(bbi_mlp_params(m, p, 9, &err) == 0);
  CHECK(bbi_mlp_load_params(m, p, 9, &err) == 0);
  CHECK(bbi_mlp_gradient(m) == NULL); /* a stale gradient is not applied */
  CHECK(bbi_mlp_sgd_step(m, &err) == BB_ERR_INVALID_ARGUMENT);
  bbi_mlp_free(m);

  /* accuracy needs classes */
  c.outputs = 1;
  c.loss = BBI_MLP_MEAN_SQUARED_ERROR;
  m = make(&c);
  if (!m) return;
  CHECK(bbi_mlp_accuracy(m, x, labels, 2, NULL, &err) == BB_ERR_INVALID_ARGUMENT);
  bbi_mlp_free(m);
  bbi_mlp_free(NULL);
}

/* ---- allocation --------------------------------------------------------------------------- */

/* Every allocation failure in create, training and evaluation gives BB_ERR_NOMEM and
 * leaks nothing; the model stays usable after a failed workspace growth. */
static void test_allocation_failure(void) {
  rng_seed(8);
  static const size_t hidden[] = {6, 5};
  static const float scale[4] = {1, 2, 3, 4};
  bbi_mlp_config c = {0};
  c.inputs = 4;
  c.hidden = hidden;
  c.n_hidden = 2;
  c.outputs = 3;
  c.activation = BBI_MLP_RELU;
  c.learning_rate = 0.1f;
  c.input_scale = scale;
  float x[300 * 4], lab[300];
  fill(x, 300 * 4, -1, 1);
  for (size_t i = 0; i < 300; i++) lab[i] = (float)(i % 3);
  int succeeded = 0;
  for (long budget = 0; budget < 50 && !succeeded; budget++) {
    failing f = {budget, 0};
    bb_allocator alloc = failing_allocator(&f);
    bbi_mlp *m = (bbi_mlp *)1;
    bb_error err;
    int rc = bbi_mlp_create(&c, &alloc, &m, &err);
    if (rc == 0) {
      float acc;
      rc = bbi_mlp_train_batch(m, x, lab, 8, NULL, &err);
      if (rc == 0) rc = bbi_mlp_accuracy(m, x, lab, 300, &acc, &err);
      if (rc == 0) {
        succeeded = 1;
      } else {
        CHECK_MSG(rc == BB_ERR_NOMEM, "budget %ld: got %d (%s)", budget, rc, err.message);
        f.budget = -1; /* the model still works once memory is back */
        CHECK(bbi_mlp_train_batch(m, x, lab, 8, NULL, &err) == 0);
      }
      bbi_mlp_free(m);
    } else {
      CHECK_MSG(rc == BB_ERR_NOMEM, "budget %ld: got %d (%s)", budget, rc, err.message);
      CHECK(m == NULL);
    }
    CHECK_MSG(f.live == 0, "budget %ld: %ld blocks leaked", budget, f.live);
  }
  CHECK(succeeded);

  /* no allocation once the workspace fits the batch */
  failing f = {-1, 0};
  bb_allocator alloc = failing_allocator(&f);
  bbi_mlp *m = NULL;
  bb_error err;
  CHECK(bbi_mlp_create(&c, &alloc, &m, &err) == 0);
  if (!m) return;
  CHECK(bbi_mlp_train_batch(m, x, lab, 32, NULL, &err) == 0);
  f.budget = 0;
  float y[32 * 3], acc;
  CHECK(bbi_mlp_train_batch(m, x, lab, 32, NULL, &err) == 0);
  CHECK(bbi_mlp_train_batch(m, x, lab, 7, NULL, &err) == 0);
  CHECK(bbi_mlp_forward(m, x, 32, y, &err) == 0);
  CHECK(bbi_mlp_accuracy(m, x, lab, 20, &acc, &err) == 0);
  CHECK(bbi_mlp_train_batch(m, x, lab, 33, NULL, &err) == BB_ERR_NOMEM);
  CHECK(strstr(err.message, "33 rows") != NULL);
  CHECK(bbi_mlp_train_batch(m, x, lab, 32, NULL, &err) == 0);
  bbi_mlp_free(m);
  CHECK_EQ_INT(f.live, 0);
}

int main(void) {
  RUN(test_gradients);
  RUN(test_sgd_step);
  RUN(test_softmax_regression_learns);
  RUN(test_mlp_learns_nonlinear);
  RUN(test_linear_regression_learns);
  RUN(test_params_round_trip);
  RUN(test_bad_configs);
  RUN(test_bad_calls);
  RUN(test_allocation_failure);
  return bb_test_finish();
}
