/* The multilayer perceptron: dense layers over a flat parameter vector, trained by
 * backpropagation and momentum SGD. Products go through the GEMM kernel with transpose
 * flags (W is [out, in] row-major, so forward is A·Wᵀ and the weight gradient Δᵀ·A), and
 * activations, softmax and bias sums through the vector kernels. */
#include "components/models/mlp.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "tensor/kernels/kernels.h"
#include "bb/common.h"
#include "util/mem.h"

#define ACCURACY_CHUNK 256

typedef struct mlp_layer {
  size_t in, out;
  size_t w, b;   /* offsets of W [out, in] and b [out] in the parameter vector */
  size_t act;    /* offset of this layer's output, per workspace row, in the activations */
} mlp_layer;

struct bbi_mlp {
  bb_allocator alloc;
  bbi_mlp_activation activation;
  bbi_mlp_loss loss;
  float learning_rate, momentum, weight_decay;
  size_t inputs, outputs;
  size_t n_layers;
  mlp_layer *layers;
  size_t n_params;
  float *params, *grad, *velocity; /* one block of 3*n_params (+2*inputs) floats */
  const float *input_scale, *input_shift; /* NULL or inside that block */
  int has_grad;
  size_t act_width; /* floats of activations per batch row: every layer's output, plus
                       the normalised input when there is a normalisation */
  size_t max_width; /* widest of the inputs and every layer's output */
  /* the workspace, for `capacity` rows: activations, two gradient buffers, GEMM scratch */
  size_t capacity;
  void *workspace;
  float *acts, *delta[2];
  void *scratch;
  size_t scratch_size;
};

/* ---- small helpers --------------------------------------------------------------------- */

/* a*b, or 0 with *overflow set when it does not fit a size_t. */
static size_t mul_size(size_t a, size_t b, int *overflow) {
  if (a && b > SIZE_MAX / a) {
    *overflow = 1;
    return 0;
  }
  return a * b;
}

static size_t add_size(size_t a, size_t b, int *overflow) {
  if (b > SIZE_MAX - a) {
    *overflow = 1;
    return 0;
  }
  return a + b;
}

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

/* Uniform in [-limit, limit), from the top 24 bits of the next PRNG word. */
static float uniform_pm(uint64_t *state, float limit) {
  const float u = (float)(splitmix64(state) >> 40) * (1.0f / 16777216.0f);
  return (2.0f * u - 1.0f) * limit;
}

static int finite_nonneg(float v) { return isfinite(v) && v >= 0.0f; }

/* ---- creation -------------------------------------------------------------------------- */

static int check_config(const bbi_mlp_config *cfg, bb_error *err) {
  if (cfg->inputs == 0) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "mlp: inputs is 0");
  if (cfg->loss != BBI_MLP_SOFTMAX_CROSS_ENTROPY && cfg->loss != BBI_MLP_MEAN_SQUARED_ERROR)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "mlp: unknown loss %d", (int)cfg->loss);
  if (cfg->loss == BBI_MLP_SOFTMAX_CROSS_ENTROPY && cfg->outputs < 2)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "mlp: softmax cross-entropy needs at least 2 outputs, got %zu",
                        cfg->outputs);
  if (cfg->outputs == 0) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "mlp: outputs is 0");
  if (cfg->activation != BBI_MLP_RELU && cfg->activation != BBI_MLP_TANH &&
      cfg->activation != BBI_MLP_SIGMOID && cfg->activation != BBI_MLP_IDENTITY)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "mlp: unknown activation %d",
                        (int)cfg->activation);
  if (cfg->n_hidden > BBI_MLP_MAX_HIDDEN)
    return bb_error_set(err, BB_ERR_LIMIT, "mlp: %zu hidden layers, at most %d are allowed",
                        cfg->n_hidden, BBI_MLP_MAX_HIDDEN);
  if (cfg->n_hidden && !cfg->hidden)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "mlp: n_hidden is %zu but the hidden sizes are NULL", cfg->n_hidden);
  for (size_t i = 0; i < cfg->n_hidden; i++)
    if (cfg->hidden[i] == 0)
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "mlp: hidden layer %zu has width 0", i);
  if (!finite_nonneg(cfg->learning_rate))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "mlp: learning rate %g is not a finite value >= 0",
                        (double)cfg->learning_rate);
  if (!(cfg->momentum >= 0.0f && cfg->momentum < 1.0f))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "mlp: momentum %g is not in [0, 1)",
                        (double)cfg->momentum);
  if (!finite_nonneg(cfg->weight_decay))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "mlp: weight decay %g is not a finite value >= 0",
                        (double)cfg->weight_decay);
  for (size_t i = 0; i < cfg->inputs; i++) {
    if (cfg->input_scale && !isfinite(cfg->input_scale[i]))
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "mlp: input_scale[%zu] is %g", i,
                          (double)cfg->input_scale[i]);
    if (cfg->input_shift && !isfinite(cfg->input_shift[i]))
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "mlp: input_shift[%zu] is %g", i,
                          (double)cfg->input_shift[i]);
  }
  return 0;
}

/* Fills the layer table and the sizes derived from it; BB_ERR_LIMIT when the parameter
 * vector or a workspace row would not fit in memory's address space. */
static int plan_layers(bbi_mlp *m, const bbi_mlp_config *cfg, bb_error *err) {
  int overflow = 0;
  size_t params = 0, act = 0, in = cfg->inputs;
  const int normalised = cfg->input_scale || cfg->input_shift;
  if (normalised) act = cfg->inputs;
  m->max_width = cfg->inputs;
  for (size_t l = 0; l < m->n_layers; l++) {
    mlp_layer *ly = &m->layers[l];
    ly->in = in;
    ly->out = l < cfg->n_hidden ? cfg->hidden[l] : cfg->outputs;
    ly->w = params;
    ly->b = add_size(params, mul_size(ly->out, ly->in, &overflow), &overflow);
    params = add_size(ly->b, ly->out, &overflow);
    ly->act = act;
    act = add_size(act, ly->out, &overflow);
    m->max_width = max_size(m->max_width, ly->out);
    in = ly->out;
  }
  /* params, gradient and velocity, plus the normalisation, in one block of floats */
  const size_t block =
      add_size(mul_size(params, 3, &overflow), mul_size(cfg->inputs, 2, &overflow), &overflow);
  mul_size(block, sizeof(float), &overflow); /* only whether its bytes fit a size_t */
  if (overflow)
    return bb_error_set(err, BB_ERR_LIMIT, "mlp: the layer sizes give too many parameters");
  m->n_params = params;
  m->act_width = act;
  return 0;
}

static void init_params(bbi_mlp *m, uint64_t seed) {
  uint64_t state = seed;
  for (size_t l = 0; l < m->n_layers; l++) {
    const mlp_layer *ly = &m->layers[l];
    const int he = m->activation == BBI_MLP_RELU && l + 1 < m->n_layers;
    const double fan = he ? (double)ly->in : (double)ly->in + (double)ly->out;
    const float limit = (float)sqrt(6.0 / fan);
    for (size_t i = 0; i < ly->out * ly->in; i++) m->params[ly->w + i] = uniform_pm(&state, limit);
    memset(m->params + ly->b, 0, ly->out * sizeof(float));
  }
}

int bbi_mlp_create(const bbi_mlp_config *cfg, const bb_allocator *alloc, bbi_mlp **out,
                  bb_error *err) {
  if (out) *out = NULL;
  if (!cfg || !out)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "mlp: NULL config or output pointer");
  int rc = check_config(cfg, err);
  if (rc) return rc;
  if (!alloc) alloc = bb_default_allocator();
  bbi_mlp *m = bbi_mem_calloc(alloc, 1, sizeof *m);
  if (!m) return bb_error_set(err, BB_ERR_NOMEM, "mlp: no memory for the model");
  m->alloc = *alloc;
  m->activation = cfg->activation;
  m->loss = cfg->loss;
  m->learning_rate = cfg->learning_rate;
  m->momentum = cfg->momentum;
  m->weight_decay = cfg->weight_decay;
  m->inputs = cfg->inputs;
  m->outputs = cfg->outputs;
  m->n_layers = cfg->n_hidden + 1;
  m->layers = bbi_mem_calloc(alloc, m->n_layers, sizeof *m->layers);
  if (!m->layers) {
    bbi_mlp_free(m);
    return bb_error_set(err, BB_ERR_NOMEM, "mlp: no memory for the layer table");
  }
  rc = plan_layers(m, cfg, err);
  if (rc) {
    bbi_mlp_free(m);
    return rc;
  }
  const size_t floats = 3 * m->n_params + 2 * m->inputs;
  m->params = bbi_mem_alloc(alloc, floats * sizeof(float));
  if (!m->params) {
    rc = bb_error_set(err, BB_ERR_NOMEM, "mlp: no memory for %zu parameters", m->n_params);
    bbi_mlp_free(m);
    return rc;
  }
  m->grad = m->params + m->n_params;
  m->velocity = m->grad + m->n_params;
  memset(m->velocity, 0, m->n_params * sizeof(float));
  float *norm = m->velocity + m->n_params;
  if (cfg->input_scale || cfg->input_shift) {
    for (size_t i = 0; i < m->inputs; i++) {
      norm[i] = cfg->input_scale ? cfg->input_scale[i] : 1.0f;
      norm[m->inputs + i] = cfg->input_shift ? cfg->input_shift[i] : 0.0f;
    }
    m->input_scale = norm;
    m->input_shift = norm + m->inputs;
  }
  init_params(m, cfg->seed);
  *out = m;
  return 0;
}

void bbi_mlp_free(bbi_mlp *m) {
  if (!m) return;
  const bb_allocator a = m->alloc;
  bbi_mem_free(&a, m->workspace);
  bbi_mem_free(&a, m->params);
  bbi_mem_free(&a, m->layers);
  bbi_mem_free(&a, m);
}

size_t bbi_mlp_param_count(const bbi_mlp *m) { return m->n_params; }

void bbi_mlp_describe(const bbi_mlp *m, bbi_mlp_shape *out) {
  memset(out, 0, sizeof *out);
  out->n_layers = m->n_layers;
  out->widths[0] = m->inputs;
  for (size_t l = 0; l < m->n_layers; l++) out->widths[l + 1] = m->layers[l].out;
  out->activation = m->activation;
  out->loss = m->loss;
  out->input_scale = m->input_scale;
  out->input_shift = m->input_shift;
  out->params = m->params;
}
size_t bbi_mlp_inputs(const bbi_mlp *m) { return m->inputs; }
size_t bbi_mlp_outputs(const bbi_mlp *m) { return m->outputs; }

/* ---- parameters ------------------------------------------------------------------------ */

static int check_length(const bbi_mlp *m, const float *v, size_t len, const char *what,
                        bb_error *err) {
  if (!v) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "mlp: %s is NULL", what);
  if (len != m->n_params)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "mlp: %s has %zu floats, the model has %zu parameters", what, len,
                        m->n_params);
  return 0;
}

int bbi_mlp_params(const bbi_mlp *m, float *out, size_t len, bb_error *err) {
  int rc = check_length(m, out, len, "the parameter buffer", err);
  if (rc) return rc;
  memcpy(out, m->params, len * sizeof(float));
  return 0;
}

int bbi_mlp_velocity(const bbi_mlp *m, float *out, size_t len, bb_error *err) {
  int rc = check_length(m, out, len, "the velocity buffer", err);
  if (rc) return rc;
  memcpy(out, m->velocity, len * sizeof(float));
  return 0;
}

int bbi_mlp_load_velocity(bbi_mlp *m, const float *velocity, size_t len, bb_error *err) {
  int rc = check_length(m, velocity, len, "the velocity", err);
  if (rc) return rc;
  for (size_t i = 0; i < len; i++)
    if (!isfinite(velocity[i])) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "mlp: velocity %zu is not finite", i);
  memcpy(m->velocity, velocity, len * sizeof(float));
  return 0;
}

int bbi_mlp_load_params(bbi_mlp *m, const float *params, size_t len, bb_error *err) {
  int rc = check_length(m, params, len, "the parameter vector", err);
  if (rc) return rc;
  memcpy(m->params, params, len * sizeof(float));
  m->has_grad = 0;
  return 0;
}

int bbi_mlp_apply_delta(bbi_mlp *m, const float *delta, size_t len, bb_error *err) {
  int rc = check_length(m, delta, len, "the delta", err);
  if (rc) return rc;
  bbi_f32_vbinary(BBI_BINARY_ADD, len, m->params, delta, m->params);
  m->has_grad = 0;
  return 0;
}

const float *bbi_mlp_gradient(const bbi_mlp *m) { return m->has_grad ? m->grad : NULL; }

/* ---- workspace ------------------------------------------------------------------------- */

static size_t scratch_for(const bbi_mlp *m, size_t rows) {
  size_t s = 0;
  for (size_t l = 0; l < m->n_layers; l++) {
    const mlp_layer *ly = &m->layers[l];
    s = max_size(s, bbi_f32_gemm_scratch_size(rows, ly->out, ly->in)); /* forward */
    s = max_size(s, bbi_f32_gemm_scratch_size(ly->out, ly->in, rows)); /* weight gradient */
    s = max_size(s, bbi_f32_gemm_scratch_size(rows, ly->in, ly->out)); /* input gradient */
  }
  return s;
}

/* Makes room for `rows` rows; the old workspace stays in place if the new one cannot be
 * had. */
static int reserve_rows(bbi_mlp *m, size_t rows, bb_error *err) {
  if (rows <= m->capacity) return 0;
  int overflow = 0;
  const size_t per_row = add_size(m->act_width, mul_size(2, m->max_width, &overflow), &overflow);
  const size_t floats = mul_size(rows, per_row, &overflow);
  const size_t float_bytes = mul_size(floats, sizeof(float), &overflow);
  const size_t scratch = scratch_for(m, rows);
  const size_t bytes = add_size(float_bytes, scratch, &overflow);
  if (overflow)
    return bb_error_set(err, BB_ERR_LIMIT, "mlp: a batch of %zu rows is too large", rows);
  void *w = bbi_mem_alloc(&m->alloc, bytes);
  if (!w)
    return bb_error_set(err, BB_ERR_NOMEM,
                        "mlp: no memory for a workspace of %zu rows (%zu bytes)", rows, bytes);
  bbi_mem_free(&m->alloc, m->workspace);
  m->workspace = w;
  m->capacity = rows;
  m->acts = w;
  m->delta[0] = m->acts + rows * m->act_width;
  m->delta[1] = m->delta[0] + rows * m->max_width;
  m->scratch = (char *)w + float_bytes;
  m->scratch_size = scratch;
  return 0;
}

/* Layer l's output rows (row stride layers[l].out) in the workspace. */
static float *layer_output(const bbi_mlp *m, size_t l) {
  return m->acts + m->capacity * m->layers[l].act;
}

/* ---- forward --------------------------------------------------------------------------- */

static int gemm(bbi_mlp *m, const bbi_f32_gemm_args *g, bb_error *err) {
  const int rc = bbi_f32_gemm(g, m->scratch, m->scratch_size);
  if (rc)
    return bb_error_set(err, rc, "mlp: the GEMM kernel refused a %zux%zux%zu product", g->m,
                        g->n, g->k);
  return 0;
}

/* What layer 1 sees for x: x itself, or x normalised into the workspace. */
static const float *first_input(const bbi_mlp *m, const float *x, size_t n) {
  if (!m->input_scale) return x;
  float *a = m->acts; /* the normalised input sits at activation offset 0 */
  bbi_f32_vbinary_row(BBI_BINARY_MUL, n, m->inputs, x, m->input_scale, 0, a);
  bbi_f32_vbinary_row(BBI_BINARY_ADD, n, m->inputs, a, m->input_shift, 0, a);
  return a;
}

/* Runs every layer on n rows (n <= capacity); the last layer's output (logits for
 * cross-entropy) ends in layer_output(m, n_layers - 1). */
static int run_layers(bbi_mlp *m, const float *x, size_t n, bb_error *err) {
  const float *a = first_input(m, x, n);
  for (size_t l = 0; l < m->n_layers; l++) {
    const mlp_layer *ly = &m->layers[l];
    const int hidden = l + 1 < m->n_layers;
    float *z = layer_output(m, l);
    bbi_f32_gemm_args g = {0};
    g.m = n;
    g.n = ly->out;
    g.k = ly->in;
    g.trans_b = 1;
    g.alpha = 1.0f;
    g.a = a;
    g.lda = ly->in;
    g.b = m->params + ly->w;
    g.ldb = ly->in;
    g.bias = m->params + ly->b;
    g.c = z;
    g.ldc = ly->out;
    if (hidden && m->activation == BBI_MLP_RELU) {
      g.clamp = 1;
      g.min = 0.0f;
      g.max = INFINITY;
    }
    int rc = gemm(m, &g, err);
    if (rc) return rc;
    if (hidden && m->activation == BBI_MLP_TANH) bbi_f32_vunary(BBI_UNARY_TANH, n * ly->out, z, z);
    if (hidden && m->activation == BBI_MLP_SIGMOID)
      bbi_f32_vunary(BBI_UNARY_SIGMOID, n * ly->out, z, z);
    a = z;
  }
  return 0;
}

int bbi_mlp_forward(bbi_mlp *m, const float *x, size_t n, float *y, bb_error *err) {
  if (n == 0) return 0;
  if (!x || !y) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "mlp: forward on a NULL buffer");
  int rc = reserve_rows(m, n, err);
  if (!rc) rc = run_layers(m, x, n, err);
  if (rc) return rc;
  const float *z = layer_output(m, m->n_layers - 1);
  if (m->loss == BBI_MLP_SOFTMAX_CROSS_ENTROPY)
    bbi_f32_softmax_rows(n, m->outputs, z, y);
  else
    memcpy(y, z, n * m->outputs * sizeof(float));
  return 0;
}

/* ---- losses ---------------------------------------------------------------------------- */

/* Checks that every label is a class index; the first bad one is named. */
static int check_labels(const bbi_mlp *m, const float *labels, size_t n, bb_error *err) {
  for (size_t i = 0; i < n; i++) {
    const float t = labels[i];
    if (!(t >= 0.0f && t < (float)m->outputs && t == floorf(t)))
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                          "mlp: label of row %zu is %g, not a class index in [0, %zu)", i,
                          (double)t, m->outputs);
  }
  return 0;
}

static int check_batch(const bbi_mlp *m, const float *x, const float *targets, size_t n,
                       bb_error *err) {
  if (n == 0) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "mlp: empty batch");
  if (!x || !targets)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "mlp: NULL inputs or targets");
  return m->loss == BBI_MLP_SOFTMAX_CROSS_ENTROPY ? check_labels(m, targets, n, err) : 0;
}

int bbi_mlp_loss_of(const bbi_mlp *m, const float *y, const float *targets, size_t n,
                   float *loss, bb_error *err) {
  int rc = check_batch(m, y, targets, n, err);
  if (rc) return rc;
  const size_t k = m->outputs;
  double sum = 0.0;
  if (m->loss == BBI_MLP_SOFTMAX_CROSS_ENTROPY) {
    for (size_t i = 0; i < n; i++) {
      const float p = y[i * k + (size_t)targets[i]];
      sum -= log(p > FLT_MIN ? (double)p : (double)FLT_MIN);
    }
    sum /= (double)n;
  } else {
    for (size_t i = 0; i < n * k; i++) {
      const double d = (double)y[i] - (double)targets[i];
      sum += d * d;
    }
    sum /= (double)n * (double)k;
  }
  if (loss) *loss = (float)sum;
  return 0;
}

/* The gradient of the mean loss with respect to the last layer's output z, into d
 * [n, outputs]; returns the mean loss. */
static double output_gradient(const bbi_mlp *m, const float *z, const float *targets,
                              size_t n, float *d) {
  const size_t k = m->outputs;
  double sum = 0.0;
  if (m->loss == BBI_MLP_SOFTMAX_CROSS_ENTROPY) {
    /* d = (softmax(z) - onehot) / n, with the loss read off the log-softmax */
    bbi_f32_log_softmax_rows(n, k, z, d);
    for (size_t i = 0; i < n; i++) sum -= (double)d[i * k + (size_t)targets[i]];
    bbi_f32_vunary(BBI_UNARY_EXP, n * k, d, d);
    for (size_t i = 0; i < n; i++) d[i * k + (size_t)targets[i]] -= 1.0f;
    bbi_f32_vbinary_c(BBI_BINARY_MUL, n * k, d, 1.0f / (float)n, d);
    return sum / (double)n;
  }
  /* d = 2 (z - t) / (n k) */
  bbi_f32_vbinary(BBI_BINARY_SUB, n * k, z, targets, d);
  for (size_t i = 0; i < n * k; i++) sum += (double)d[i] * (double)d[i];
  const double count = (double)n * (double)k;
  bbi_f32_vbinary_c(BBI_BINARY_MUL, n * k, d, (float)(2.0 / count), d);
  return sum / count;
}

/* ---- backward -------------------------------------------------------------------------- */

/* d *= f'(a) elementwise, where a = f(z) is the hidden layer's output. */
static void activation_backward(bbi_mlp_activation act, size_t count, const float *a,
                                float *d) {
  switch (act) {
  case BBI_MLP_RELU:
    for (size_t i = 0; i < count; i++) d[i] = a[i] > 0.0f ? d[i] : 0.0f;
    break;
  case BBI_MLP_TANH:
    for (size_t i = 0; i < count; i++) d[i] *= 1.0f - a[i] * a[i];
    break;
  case BBI_MLP_SIGMOID:
    for (size_t i = 0; i < count; i++) d[i] *= a[i] * (1.0f - a[i]);
    break;
  case BBI_MLP_IDENTITY:
    break;
  }
}

int bbi_mlp_backward(bbi_mlp *m, const float *x, const float *targets, size_t n, float *loss,
                    bb_error *err) {
  int rc = check_batch(m, x, targets, n, err);
  if (!rc) rc = reserve_rows(m, n, err);
  if (!rc) rc = run_layers(m, x, n, err);
  if (rc) return rc;
  m->has_grad = 0;
  const float *x1 = m->input_scale ? m->acts : x;
  float *d = m->delta[0], *d_prev = m->delta[1];
  const double mean = output_gradient(m, layer_output(m, m->n_layers - 1), targets, n, d);
  for (size_t l = m->n_layers; l-- > 0;) {
    const mlp_layer *ly = &m->layers[l];
    const float *a = l ? layer_output(m, l - 1) : x1;
    /* dW = dᵀ a: [out, n] x [n, in] */
    bbi_f32_gemm_args g = {0};
    g.m = ly->out;
    g.n = ly->in;
    g.k = n;
    g.trans_a = 1;
    g.alpha = 1.0f;
    g.a = d;
    g.lda = ly->out;
    g.b = a;
    g.ldb = ly->in;
    g.c = m->grad + ly->w;
    g.ldc = ly->in;
    if ((rc = gemm(m, &g, err))) return rc;
    bbi_f32_reduce_strided(BBI_REDUCE_SUM, 1, n, ly->out, d, m->grad + ly->b);
    if (l == 0) break;
    /* d_prev = d W: [n, out] x [out, in], then through the activation */
    bbi_f32_gemm_args h = {0};
    h.m = n;
    h.n = ly->in;
    h.k = ly->out;
    h.alpha = 1.0f;
    h.a = d;
    h.lda = ly->out;
    h.b = m->params + ly->w;
    h.ldb = ly->in;
    h.c = d_prev;
    h.ldc = ly->in;
    if ((rc = gemm(m, &h, err))) return rc;
    activation_backward(m->activation, n * ly->in, a, d_prev);
    float *t = d;
    d = d_prev;
    d_prev = t;
  }
  m->has_grad = 1;
  if (loss) *loss = (float)mean;
  return 0;
}

/* ---- optimizer ------------------------------------------------------------------------- */

static void sgd_range(float *w, const float *g, float *v, size_t count, float lr, float mu,
                      float decay) {
  for (size_t i = 0; i < count; i++) {
    v[i] = mu * v[i] + g[i] + decay * w[i];
    w[i] -= lr * v[i];
  }
}

int bbi_mlp_sgd_step(bbi_mlp *m, bb_error *err) {
  if (!m->has_grad)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "mlp: sgd_step without a gradient (run backward first)");
  for (size_t l = 0; l < m->n_layers; l++) {
    const mlp_layer *ly = &m->layers[l];
    sgd_range(m->params + ly->w, m->grad + ly->w, m->velocity + ly->w, ly->out * ly->in,
              m->learning_rate, m->momentum, m->weight_decay);
    sgd_range(m->params + ly->b, m->grad + ly->b, m->velocity + ly->b, ly->out,
              m->learning_rate, m->momentum, 0.0f);
  }
  return 0;
}

int bbi_mlp_train_batch(bbi_mlp *m, const float *x, const float *targets, size_t n,
                       float *loss, bb_error *err) {
  int rc = bbi_mlp_backward(m, x, targets, n, loss, err);
  return rc ? rc : bbi_mlp_sgd_step(m, err);
}

/* ---- evaluation ------------------------------------------------------------------------ */

/* Index of the first largest value in row[0..k) (NaNs never win). */
static size_t argmax(const float *row, size_t k) {
  size_t best = 0;
  for (size_t j = 1; j < k; j++)
    if (row[j] > row[best] || isnan(row[best])) best = j;
  return best;
}

int bbi_mlp_accuracy(bbi_mlp *m, const float *x, const float *labels, size_t n,
                    float *accuracy, bb_error *err) {
  if (m->outputs < 2)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "mlp: accuracy needs at least 2 outputs, the model has %zu",
                        m->outputs);
  int rc = check_batch(m, x, labels, n, err);
  if (!rc && m->loss != BBI_MLP_SOFTMAX_CROSS_ENTROPY) rc = check_labels(m, labels, n, err);
  if (rc) return rc;
  const size_t chunk = n < ACCURACY_CHUNK ? n : ACCURACY_CHUNK;
  if ((rc = reserve_rows(m, chunk, err))) return rc;
  size_t correct = 0;
  for (size_t start = 0; start < n; start += chunk) {
    const size_t rows = n - start < chunk ? n - start : chunk;
    if ((rc = run_layers(m, x + start * m->inputs, rows, err))) return rc;
    /* the largest logit is the largest probability: no softmax needed */
    const float *z = layer_output(m, m->n_layers - 1);
    for (size_t i = 0; i < rows; i++)
      correct += argmax(z + i * m->outputs, m->outputs) == (size_t)labels[start + i];
  }
  if (accuracy) *accuracy = (float)((double)correct / (double)n);
  return 0;
}
