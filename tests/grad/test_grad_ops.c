/* The CPU operators of ai.bytesandbrains.grad: Dropout's mask against the documented
 * formula (computed here independently), its rate, scaling and determinism; SumToShape
 * against direct sums; and every refusal. Their gradients are checked against finite
 * differences in test_grad_rules (seeded Dropout, and SumToShape as Expand's adjoint). */
#include "cpu/optest.h"
#include "gradtest.h"

static bb_ir_node *node(bb_model *m, const char *op, const char *name) { return bb_ir_node_new(m, op, BB_GRAD_DOMAIN, name); }

static bb_tensor *scalar_i64(int64_t v) {
  bb_tensor *t = bb_tensor_new_empty(NULL, BB_DTYPE_INT64, 0, NULL);
  *(int64_t *)bb_tensor_data(t) = v;
  return t;
}

static bb_tensor *scalar_f32(float v) {
  bb_tensor *t = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 0, NULL);
  *(float *)bb_tensor_data(t) = v;
  return t;
}

/* splitmix64's finaliser, written out again from its published constants. */
static uint64_t finalise(uint64_t z) {
  z ^= z >> 30;
  z *= 0xbf58476d1ce4e5b9ull;
  z ^= z >> 27;
  z *= 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static bool kept(uint64_t seed, uint64_t stream, uint64_t i, double ratio) {
  const uint64_t g = 0x9e3779b97f4a7c15ull;
  uint64_t key = finalise(seed + g * (stream + 1));
  return (double)(finalise(key + g * (i + 1)) >> 40) / 16777216.0 >= ratio;
}

/* Runs Dropout(x, ratio, seed) with attribute stream; returns the rc. */
static int dropout(bb_model *m, const bb_tensor *x, bb_tensor *ratio, bb_tensor *seed, int64_t stream, bb_tensor **y,
                   bb_tensor **mask, bb_error *err) {
  bb_ir_node *n = node(m, "Dropout", "drop");
  bb_strlist_append(m, &n->inputs, "x");
  bb_strlist_append(m, &n->inputs, ratio ? "ratio" : "");
  bb_strlist_append(m, &n->inputs, "seed");
  bb_strlist_append(m, &n->outputs, "y");
  bb_strlist_append(m, &n->outputs, "mask");
  bb_attr_set_int(m, &n->attrs, "stream", stream);
  bb_tensor *ins[3] = {(bb_tensor *)x, ratio, seed}, *outs[2];
  int rc = bb_cpu_run_node(n, 17, ins, 3, outs, 2, NULL, err);
  *y = outs[0], *mask = outs[1];
  return rc;
}

static void test_dropout_mask_formula(void) {
  bb_model *m = bb_model_new(NULL);
  bb_tensor *x = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 2, (int64_t[]){40, 50});
  for (int64_t i = 0; i < x->numel; i++) ((float *)bb_tensor_data(x))[i] = (float)rng_real(-2, 2);
  double ratios[] = {0.0, 0.3, 0.5, 0.9};
  for (size_t r = 0; r < 4; r++)
    for (uint64_t seed = 0; seed < 3; seed++) {
      bb_tensor *ratio = scalar_f32((float)ratios[r]), *s = scalar_i64((int64_t)seed * 1000003), *y, *mask;
      bb_error err;
      int rc = dropout(m, x, ratio, s, 7, &y, &mask, &err);
      CHECK_MSG(!rc, "%s", err.message);
      if (rc) break;
      double rf = (float)ratios[r]; /* the ratio as the tensor holds it */
      float scale = (float)(1.0 / (1.0 - rf));
      int64_t n_kept = 0, wrong = 0;
      for (int64_t i = 0; i < x->numel; i++) {
        bool k = kept((uint64_t)seed * 1000003, 7, (uint64_t)i, rf);
        float xv = ((float *)bb_tensor_data(x))[i], yv = ((float *)bb_tensor_data(y))[i];
        wrong += ((uint8_t *)bb_tensor_data(mask))[i] != k || yv != (k ? xv * scale : 0.0f);
        n_kept += k;
      }
      CHECK_EQ_INT(wrong, 0);
      double rate = 1.0 - (double)n_kept / (double)x->numel;
      CHECK_MSG(fabs(rate - ratios[r]) < 0.04, "ratio %g dropped %g", ratios[r], rate);
      bb_tensor_release(ratio), bb_tensor_release(s), bb_tensor_release(y), bb_tensor_release(mask);
    }
  bb_tensor_release(x);
  bb_model_free(m);
}

static void test_dropout_streams_and_seeds_differ(void) {
  bb_model *m = bb_model_new(NULL);
  bb_tensor *x = bb_tensor_new_zeros(NULL, BB_DTYPE_DOUBLE, 1, (int64_t[]){256});
  bb_tensor *s0 = scalar_i64(5), *s1 = scalar_i64(6), *y[4], *mk[4];
  bb_error err;
  CHECK(!dropout(m, x, NULL, s0, 0, &y[0], &mk[0], &err)); /* default ratio 0.5 */
  CHECK(!dropout(m, x, NULL, s0, 0, &y[1], &mk[1], &err));
  CHECK(!dropout(m, x, NULL, s0, 1, &y[2], &mk[2], &err));
  CHECK(!dropout(m, x, NULL, s1, 0, &y[3], &mk[3], &err));
  const uint8_t *a = bb_tensor_data(mk[0]), *b = bb_tensor_data(mk[1]), *c = bb_tensor_data(mk[2]), *d = bb_tensor_data(mk[3]);
  CHECK(memcmp(a, b, 256) == 0); /* same seed and stream: same mask */
  CHECK(memcmp(a, c, 256) != 0);
  CHECK(memcmp(a, d, 256) != 0);
  int64_t n_kept = 0;
  bool formula = true;
  for (int i = 0; i < 256; i++) {
    n_kept += a[i];
    formula = formula && a[i] == kept(5, 0, (uint64_t)i, 0.5);
  }
  CHECK(formula);
  CHECK(n_kept > 96 && n_kept < 160);
  for (int i = 0; i < 4; i++) bb_tensor_release(y[i]), bb_tensor_release(mk[i]);
  bb_tensor_release(x), bb_tensor_release(s0), bb_tensor_release(s1);
  bb_model_free(m);
}

static void test_dropout_refusals(void) {
  bb_model *m = bb_model_new(NULL);
  bb_tensor *x = bb_tensor_new_zeros(NULL, BB_DTYPE_FLOAT, 1, (int64_t[]){4}), *y, *mk;
  bb_tensor *one = scalar_f32(1.0f), *neg = scalar_f32(-0.1f), *seed = scalar_i64(1), *fseed = scalar_f32(1.0f);
  bb_tensor *ints = bb_tensor_new_zeros(NULL, BB_DTYPE_INT32, 1, (int64_t[]){4});
  bb_error err;
  CHECK_EQ_INT(dropout(m, x, one, seed, 0, &y, &mk, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "outside [0, 1)"));
  CHECK_EQ_INT(dropout(m, x, neg, seed, 0, &y, &mk, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(dropout(m, x, NULL, NULL, 0, &y, &mk, &err), BB_ERR_TYPE);
  CHECK(strstr(err.message, "seed"));
  CHECK_EQ_INT(dropout(m, x, NULL, fseed, 0, &y, &mk, &err), BB_ERR_TYPE);
  CHECK_EQ_INT(dropout(m, ints, NULL, seed, 0, &y, &mk, &err), BB_ERR_TYPE);
  CHECK(!y && !mk);
  bb_tensor_release(x), bb_tensor_release(one), bb_tensor_release(neg), bb_tensor_release(seed), bb_tensor_release(fseed),
      bb_tensor_release(ints);
  bb_model_free(m);
}

static int sum_to_shape(bb_model *m, const bb_tensor *x, const int64_t *shape, int64_t rank, bb_tensor **y, bb_error *err) {
  bb_ir_node *n = node(m, "SumToShape", "sum");
  bb_strlist_append(m, &n->inputs, "x");
  bb_strlist_append(m, &n->inputs, "shape");
  bb_strlist_append(m, &n->outputs, "y");
  bb_tensor *s = bb_tensor_new_empty(NULL, BB_DTYPE_INT64, 1, &rank);
  if (rank) memcpy(bb_tensor_data(s), shape, (size_t)rank * sizeof *shape);
  bb_tensor *ins[2] = {(bb_tensor *)x, s};
  int rc = bb_cpu_run_node(n, 17, ins, 2, y, 1, NULL, err);
  bb_tensor_release(s);
  return rc;
}

static void test_sum_to_shape_values(void) {
  bb_model *m = bb_model_new(NULL);
  bb_tensor *x = bb_tensor_new_empty(NULL, BB_DTYPE_DOUBLE, 3, (int64_t[]){2, 3, 4});
  double *xd = bb_tensor_data(x);
  for (int i = 0; i < 24; i++) xd[i] = rng_real(-1, 1);
  bb_tensor *y;
  bb_error err;
  CHECK(!sum_to_shape(m, x, (int64_t[]){3, 1}, 2, &y, &err)); /* over dims 0 and 2 */
  CHECK(y->rank == 2 && y->dims[0] == 3 && y->dims[1] == 1);
  for (int j = 0; j < 3; j++) {
    double want = 0;
    for (int a = 0; a < 2; a++)
      for (int k = 0; k < 4; k++) want += xd[(a * 3 + j) * 4 + k];
    CHECK(fabs(((double *)bb_tensor_data(y))[j] - want) < 1e-12);
  }
  bb_tensor_release(y);
  CHECK(!sum_to_shape(m, x, (int64_t[]){2, 3, 4}, 3, &y, &err)); /* nothing broadcast: a copy */
  CHECK(memcmp(bb_tensor_data(y), xd, 24 * sizeof *xd) == 0);
  bb_tensor_release(y);
  CHECK(!sum_to_shape(m, x, NULL, 0, &y, &err)); /* to a scalar */
  double total = 0;
  for (int i = 0; i < 24; i++) total += xd[i];
  CHECK(y->rank == 0 && fabs(*(double *)bb_tensor_data(y) - total) < 1e-12);
  bb_tensor_release(y);
  CHECK_EQ_INT(sum_to_shape(m, x, (int64_t[]){2, 4}, 2, &y, &err), BB_ERR_TYPE);
  CHECK(strstr(err.message, "does not broadcast"));
  CHECK_EQ_INT(sum_to_shape(m, x, (int64_t[]){1, 2, 3, 4}, 4, &y, &err), BB_ERR_TYPE);
  bb_tensor_release(x);
  bb_model_free(m);
}

static void test_registry_knows_the_domain(void) {
  CHECK(bb_cpu_supports(BB_GRAD_DOMAIN, "Dropout", 13));
  CHECK(bb_cpu_supports(BB_GRAD_DOMAIN, "SumToShape", 17));
  CHECK(!bb_cpu_supports(BB_GRAD_DOMAIN, "Relu", 17));
  CHECK(!bb_cpu_supports("com.example", "Dropout", 17));
}

int main(void) {
  RUN(test_dropout_mask_formula);
  RUN(test_dropout_streams_and_seeds_differ);
  RUN(test_dropout_refusals);
  RUN(test_sum_to_shape_values);
  RUN(test_registry_knows_the_domain);
  return bb_test_finish();
}
