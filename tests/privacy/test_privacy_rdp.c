/* The Rényi-DP accountant (bb/privacy.h): closed forms, the fractional-order series
 * meeting the integer-order sum, composition, and the published DP-SGD MNIST figure
 * (q = 256/60000, σ = 1.1, 60 epochs, δ = 1e-5: ε ≈ 3.0 with the classic conversion). The
 * comparison with numerical integration is tests/privacy/rdp_oracle.py (scipy). */
#include <math.h>
#include <string.h>

#include "bb/privacy.h"
#include "harness.h"

static double rdp(double q, double sigma, double alpha) {
  double r = -1;
  bb_error err = {0};
  CHECK_EQ_INT(bb_rdp_sampled_gaussian(q, sigma, alpha, &r, &err), 0);
  return r;
}

static void test_closed_forms(void) {
  CHECK(fabs(rdp(1, 2, 5) - 5 / 8.0) < 1e-15);
  CHECK(fabs(rdp(1, 1, 1.5) - 0.75) < 1e-15);
  CHECK(rdp(0, 1, 10) == 0);
  /* order 2 by hand: A_2 = (1-q)^2 + 2q(1-q) + q^2 e^{1/σ²} */
  const double q = 0.1, s = 1.3, a2 = (1 - q) * (1 - q) + 2 * q * (1 - q) + q * q * exp(1 / (s * s));
  CHECK(fabs(rdp(q, s, 2) - log(a2)) < 1e-14);
}

/* The series for fractional orders and the sum for integer ones agree where they meet. */
static void test_series_meets_sum(void) {
  const double cases[][2] = {{256 / 60000.0, 1.1}, {0.01, 0.7}, {0.2, 2.0}, {0.5, 5.0}};
  for (size_t c = 0; c < 4; c++) {
    const double q = cases[c][0], s = cases[c][1];
    for (int a = 2; a <= 32; a *= 2) {
      const double exact = rdp(q, s, a), near = rdp(q, s, a - 1e-7), above = rdp(q, s, a + 1e-7);
      CHECK_MSG(fabs(near - exact) < 1e-5 * exact && fabs(above - exact) < 1e-5 * exact,
                "q %g σ %g order %d: %.12g below, %.12g at, %.12g above", q, s, a, near, exact, above);
    }
    /* and RDP grows with the order */
    double last = 0;
    const double *orders = bb_rdp_orders();
    for (size_t i = 0; i < BB_RDP_ORDERS && orders[i] <= 64; i++) {
      const double r = rdp(q, s, orders[i]);
      CHECK_MSG(r >= last, "q %g σ %g: rdp(%g) = %g below rdp at the order before, %g", q, s, orders[i], r, last);
      last = r;
    }
  }
}

static void test_mnist(void) {
  double eps, order;
  bb_error err = {0};
  CHECK_EQ_INT(bb_dp_epsilon(256 / 60000.0, 1.1, 14063, 1e-5, &eps, &order, &err), 0);
  printf("  DP-SGD MNIST: epsilon %.4f at order %g\n", eps, order);
  CHECK(fabs(eps - 3.0) < 0.05);
  CHECK(order > 1 && order < 64);
  /* more steps spend more, more noise less */
  double more, quieter;
  CHECK_EQ_INT(bb_dp_epsilon(256 / 60000.0, 1.1, 28126, 1e-5, &more, NULL, &err), 0);
  CHECK_EQ_INT(bb_dp_epsilon(256 / 60000.0, 2.2, 14063, 1e-5, &quieter, NULL, &err), 0);
  CHECK(more > eps && quieter < eps);
}

/* Rounds of different sampling compose by adding RDP, order by order. */
static void test_composition(void) {
  bb_rdp_accountant a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  bb_error err = {0};
  CHECK_EQ_INT(bb_rdp_accountant_add(&a, 0.1, 1.0, 30, &err), 0);
  CHECK_EQ_INT(bb_rdp_accountant_add(&a, 0.1, 1.0, 70, &err), 0);
  CHECK_EQ_INT(bb_rdp_accountant_add(&b, 0.1, 1.0, 100, &err), 0);
  double ea, eb, oa, ob;
  CHECK_EQ_INT(bb_rdp_accountant_epsilon(&a, 1e-5, &ea, &oa, &err), 0);
  CHECK_EQ_INT(bb_rdp_accountant_epsilon(&b, 1e-5, &eb, &ob, &err), 0);
  CHECK(fabs(ea - eb) < 1e-9 * eb && oa == ob);
  CHECK_EQ_INT((int)a.steps, 100);
  CHECK_EQ_INT(bb_rdp_accountant_add(&a, 0.5, 3.0, 10, &err), 0);
  double ec;
  CHECK_EQ_INT(bb_rdp_accountant_epsilon(&a, 1e-5, &ec, NULL, &err), 0);
  CHECK(ec > ea);
}

static void test_refusals(void) {
  double r, e;
  bb_error err = {0};
  CHECK_EQ_INT(bb_rdp_sampled_gaussian(-0.1, 1, 2, &r, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_rdp_sampled_gaussian(0.1, 0, 2, &r, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_rdp_sampled_gaussian(0.1, 1, 1, &r, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_rdp_sampled_gaussian(0.1, NAN, 2, &r, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_dp_epsilon(0.1, 1, 10, 0, &e, NULL, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(bb_dp_epsilon(0.1, 1, 10, 1, &e, NULL, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "delta") != NULL);
}

int main(void) {
  RUN(test_closed_forms);
  RUN(test_series_meets_sum);
  RUN(test_mnist);
  RUN(test_composition);
  RUN(test_refusals);
  return bb_test_finish();
}
