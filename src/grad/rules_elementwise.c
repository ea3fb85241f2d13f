/* Backward rules of the elementwise operators. Each gradient is expressed in standard
 * ONNX operators over the forward's own values (the inputs X and outputs Y it already
 * computed), and summed back over broadcast axes where an input was broadcast. */
#include "grad/builder.h"

#define IN(i) (n->inputs.items[i])
#define OUT(k) (n->outputs.items[k])

/* A scalar constant of the element type of value v. */
static const char *k_like(gb *b, double c, const char *v) { return gb_scalar(b, c, gb_dtype(b, v)); }

static int add_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_grad(b, n, 0, gb_needs(b, n, 0) ? gb_unbroadcast(b, dy[0], IN(0)) : NULL);
  gb_grad(b, n, 1, gb_needs(b, n, 1) ? gb_unbroadcast(b, dy[0], IN(1)) : NULL);
  return b->rc;
}

static int sub_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_grad(b, n, 0, gb_needs(b, n, 0) ? gb_unbroadcast(b, dy[0], IN(0)) : NULL);
  gb_grad(b, n, 1, gb_needs(b, n, 1) ? gb_unbroadcast(b, gb_op(b, "Neg", 1, dy[0]), IN(1)) : NULL);
  return b->rc;
}

static int mul_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_grad(b, n, 0, gb_needs(b, n, 0) ? gb_unbroadcast(b, gb_op(b, "Mul", 2, dy[0], IN(1)), IN(0)) : NULL);
  gb_grad(b, n, 1, gb_needs(b, n, 1) ? gb_unbroadcast(b, gb_op(b, "Mul", 2, dy[0], IN(0)), IN(1)) : NULL);
  return b->rc;
}

/* Y = A / B: dA = dY / B, dB = -dY * Y / B. */
static int div_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_grad(b, n, 0, gb_needs(b, n, 0) ? gb_unbroadcast(b, gb_op(b, "Div", 2, dy[0], IN(1)), IN(0)) : NULL);
  if (gb_needs(b, n, 1)) {
    const char *g = gb_op(b, "Neg", 1, gb_op(b, "Div", 2, gb_op(b, "Mul", 2, dy[0], OUT(0)), IN(1)));
    gb_grad(b, n, 1, gb_unbroadcast(b, g, IN(1)));
  }
  return b->rc;
}

/* Y = A ^ B: dA = dY * B * A^(B-1), dB = dY * Y * ln A. A known exponent becomes a
 * constant (x^2 → 2x), so the common squares stay exact where A is zero or negative. */
static int pow_back(gb *b, bb_ir_node *n, const char *const *dy) {
  if (gb_needs(b, n, 0)) {
    double e;
    const char *g;
    if (gb_known_scalar(gb_val(b, IN(1)), &e)) {
      if (e == 1) g = dy[0];
      else if (e == 2) g = gb_op(b, "Mul", 2, dy[0], gb_op(b, "Mul", 2, IN(0), k_like(b, 2, IN(0))));
      else g = gb_op(b, "Mul", 2, dy[0], gb_op(b, "Mul", 2, gb_op(b, "Pow", 2, IN(0), k_like(b, e - 1, IN(0))), k_like(b, e, IN(0))));
    } else {
      const char *exponent = IN(1);
      if (gb_dtype(b, IN(1)) != gb_dtype(b, IN(0))) {
        bb_ir_node *cast = gb_new(b, "Cast", NULL, 1, 1, IN(1));
        gb_attr_int(b, cast, "to", gb_dtype(b, IN(0)));
        exponent = gb_add(b, cast);
      }
      const char *power = gb_op(b, "Pow", 2, IN(0), gb_op(b, "Sub", 2, exponent, k_like(b, 1, exponent)));
      g = gb_op(b, "Mul", 2, gb_op(b, "Mul", 2, dy[0], exponent), power);
    }
    gb_grad(b, n, 0, gb_unbroadcast(b, g, IN(0)));
  }
  if (gb_needs(b, n, 1))
    gb_grad(b, n, 1, gb_unbroadcast(b, gb_op(b, "Mul", 2, gb_op(b, "Mul", 2, dy[0], OUT(0)), gb_op(b, "Log", 1, IN(0))), IN(1)));
  return b->rc;
}

static int neg_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_grad(b, n, 0, gb_op(b, "Neg", 1, dy[0]));
  return b->rc;
}

static int identity_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_grad(b, n, 0, dy[0]);
  return b->rc;
}

/* Y = sqrt(X): dX = dY * 0.5 / Y. */
static int sqrt_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_grad(b, n, 0, gb_op(b, "Div", 2, gb_op(b, "Mul", 2, dy[0], k_like(b, 0.5, IN(0))), OUT(0)));
  return b->rc;
}

static int exp_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_grad(b, n, 0, gb_op(b, "Mul", 2, dy[0], OUT(0)));
  return b->rc;
}

static int log_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_grad(b, n, 0, gb_op(b, "Div", 2, dy[0], IN(0)));
  return b->rc;
}

/* d erf(x) / dx = 2 / sqrt(pi) * exp(-x^2). */
static int erf_back(gb *b, bb_ir_node *n, const char *const *dy) {
  const char *e = gb_op(b, "Exp", 1, gb_op(b, "Neg", 1, gb_op(b, "Mul", 2, IN(0), IN(0))));
  gb_grad(b, n, 0, gb_op(b, "Mul", 2, dy[0], gb_op(b, "Mul", 2, e, k_like(b, 1.1283791670955126 /* 2 / sqrt(pi) */, IN(0)))));
  return b->rc;
}

/* Relu: Where(X > 0, dY, 0); the gradient at 0 is 0, as in PyTorch. */
static int relu_back(gb *b, bb_ir_node *n, const char *const *dy) {
  const char *pos = gb_op(b, "Greater", 2, IN(0), k_like(b, 0, IN(0)));
  gb_grad(b, n, 0, gb_op(b, "Where", 3, pos, dy[0], k_like(b, 0, IN(0))));
  return b->rc;
}

static int leaky_relu_back(gb *b, bb_ir_node *n, const char *const *dy) {
  double alpha = bb_attr_get_float(&n->attrs, "alpha", 0.01f);
  const char *pos = gb_op(b, "Greater", 2, IN(0), k_like(b, 0, IN(0)));
  gb_grad(b, n, 0, gb_op(b, "Where", 3, pos, dy[0], gb_op(b, "Mul", 2, dy[0], k_like(b, alpha, IN(0)))));
  return b->rc;
}

/* Y = sigmoid(X): dX = dY * Y * (1 - Y). */
static int sigmoid_back(gb *b, bb_ir_node *n, const char *const *dy) {
  const char *slope = gb_op(b, "Mul", 2, OUT(0), gb_op(b, "Sub", 2, k_like(b, 1, IN(0)), OUT(0)));
  gb_grad(b, n, 0, gb_op(b, "Mul", 2, dy[0], slope));
  return b->rc;
}

/* Y = tanh(X): dX = dY * (1 - Y^2). */
static int tanh_back(gb *b, bb_ir_node *n, const char *const *dy) {
  const char *slope = gb_op(b, "Sub", 2, k_like(b, 1, IN(0)), gb_op(b, "Mul", 2, OUT(0), OUT(0)));
  gb_grad(b, n, 0, gb_op(b, "Mul", 2, dy[0], slope));
  return b->rc;
}

/* softplus'(x) = sigmoid(x). */
static int softplus_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_grad(b, n, 0, gb_op(b, "Mul", 2, dy[0], gb_op(b, "Sigmoid", 1, IN(0))));
  return b->rc;
}

/* |x|' = sign(x) (0 at 0, as in PyTorch). */
static int abs_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_grad(b, n, 0, gb_op(b, "Mul", 2, dy[0], gb_op(b, "Sign", 1, IN(0))));
  return b->rc;
}

/* Y = 1 / X: dX = -dY * Y^2. */
static int reciprocal_back(gb *b, bb_ir_node *n, const char *const *dy) {
  gb_grad(b, n, 0, gb_op(b, "Neg", 1, gb_op(b, "Mul", 2, dy[0], gb_op(b, "Mul", 2, OUT(0), OUT(0)))));
  return b->rc;
}

/* Between floating-point types the gradient casts back; integer outputs carry none. */
static int cast_back(gb *b, bb_ir_node *n, const char *const *dy) {
  bb_ir_node *cast = gb_new(b, "Cast", NULL, 1, 1, dy[0]);
  gb_attr_int(b, cast, "to", gb_dtype(b, IN(0)));
  gb_grad(b, n, 0, gb_add(b, cast));
  return b->rc;
}

static int where_back(gb *b, bb_ir_node *n, const char *const *dy) {
  const char *zero = k_like(b, 0, OUT(0));
  if (gb_needs(b, n, 1)) gb_grad(b, n, 1, gb_unbroadcast(b, gb_op(b, "Where", 3, IN(0), dy[0], zero), IN(1)));
  if (gb_needs(b, n, 2)) gb_grad(b, n, 2, gb_unbroadcast(b, gb_op(b, "Where", 3, IN(0), zero, dy[0]), IN(2)));
  return b->rc;
}

/* Clip passes the gradient where min <= X <= max (bounds included, as in PyTorch). */
static int clip_back(gb *b, bb_ir_node *n, const char *const *dy) {
  const char *mask = NULL;
  if (gb_has_input(n, 1)) mask = gb_op(b, "GreaterOrEqual", 2, IN(0), IN(1));
  if (gb_has_input(n, 2)) {
    const char *below = gb_op(b, "LessOrEqual", 2, IN(0), IN(2));
    mask = mask ? gb_op(b, "And", 2, mask, below) : below;
  }
  gb_grad(b, n, 0, mask ? gb_op(b, "Where", 3, mask, dy[0], k_like(b, 0, IN(0))) : dy[0]);
  return b->rc;
}

static int sum_back(gb *b, bb_ir_node *n, const char *const *dy) {
  for (size_t i = 0; i < n->inputs.len; i++)
    if (gb_needs(b, n, i)) gb_grad(b, n, i, gb_unbroadcast(b, dy[0], IN(i)));
  return b->rc;
}

const gb_rule gb_rules_elementwise[] = {
    {NULL, "Add", 3, 1, add_back},
    {NULL, "Sub", 3, 1, sub_back},
    {NULL, "Mul", 3, 1, mul_back},
    {NULL, "Div", 3, 1, div_back},
    {NULL, "Pow", 3, 1, pow_back},
    {NULL, "Neg", 1, 1, neg_back},
    {NULL, "Identity", 1, 1, identity_back},
    {NULL, "Sqrt", 1, 1, sqrt_back},
    {NULL, "Exp", 1, 1, exp_back},
    {NULL, "Log", 1, 1, log_back},
    {NULL, "Erf", 1, 1, erf_back},
    {NULL, "Relu", 1, 1, relu_back},
    {NULL, "LeakyRelu", 1, 1, leaky_relu_back},
    {NULL, "Sigmoid", 1, 1, sigmoid_back},
    {NULL, "Tanh", 1, 1, tanh_back},
    {NULL, "Softplus", 1, 1, softplus_back},
    {NULL, "Abs", 1, 1, abs_back},
    {NULL, "Reciprocal", 1, 1, reciprocal_back},
    {NULL, "Cast", 1, 1, cast_back},
    {NULL, "Where", 6, 1, where_back},
    {NULL, "Clip", 1, 1, clip_back},
    {NULL, "Sum", GB_ALL_INPUTS, 1, sum_back},
    /* piecewise constant: no gradient flows (zero almost everywhere, as in PyTorch) */
    {NULL, "Floor", 0, 0, NULL},
    {NULL, "Ceil", 0, 0, NULL},
    {NULL, "Round", 0, 0, NULL},
    {NULL, "Sign", 0, 0, NULL},
};
const size_t gb_rules_elementwise_count = sizeof gb_rules_elementwise / sizeof gb_rules_elementwise[0];
