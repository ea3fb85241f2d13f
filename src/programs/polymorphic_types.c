/* polymorphic_types, at compile level: the compiler's type refinement.
 *   AddReluDemo  x = input tensor.f32, y = input of abstract type; z = Add(x, y);
 *                w = Relu(z); output "w". Compiled, x, y, z and w are all tensor.f32.
 *   StampDemo    x = input tensor.f32; y = Relu(x); z = Add(y, y); output "z". Compiled,
 *                its binding entry is "Backend|CpuBackend|<slot id>" for slot
 *                "default_backend".
 *   MixedPrecisionDemo (BB_EXAMPLE_MIXED_PRECISION_DEMO, not in the table): AddReluDemo
 *                seeded x = tensor.f32, y = tensor.f64; the compile must fail with
 *                TypeConstraintFailed.
 * Default binding: backend "default_backend" = CpuBackend. The lattice queries and
 * runtime_type of the reference's example belong to the type system's own tests. */
#include "programs/examples.h"

static const bb_slot BACKEND = {BB_ROLE_BACKEND, "default_backend", NULL};

static void add_relu(bb_rec *g, const char *y_type) {
  bb_value xy[] = {bb_rec_input(g, "x", BB_TYPE_TENSOR_F32), bb_rec_input(g, "y", y_type)};
  bb_value z = bb_rec_backend(g, &BACKEND, "Add", xy, 2, NULL, 0);
  bb_rec_output(g, "w", bb_rec_backend(g, &BACKEND, "Relu", &z, 1, NULL, 0));
}

static void add_relu_demo(bb_rec *g, void *user) {
  (void)user;
  add_relu(g, BB_TYPE_ABSTRACT);
}

static void mixed_demo(bb_rec *g, void *user) {
  (void)user;
  add_relu(g, BB_TYPE_TENSOR_F64);
}

static void stamp_demo(bb_rec *g, void *user) {
  (void)user;
  bb_value x = bb_rec_input(g, "x", BB_TYPE_TENSOR_F32);
  bb_value y = bb_rec_backend(g, &BACKEND, "Relu", &x, 1, NULL, 0);
  bb_value yy[] = {y, y};
  bb_rec_output(g, "z", bb_rec_backend(g, &BACKEND, "Add", yy, 2, NULL, 0));
}

static const bb_module ADD_RELU_DEMO = {sizeof(bb_module), "AddReluDemo", add_relu_demo, NULL, NULL, NULL, 0};
static const bb_module STAMP_DEMO = {sizeof(bb_module), "StampDemo", stamp_demo, NULL, NULL, NULL, 0};
const bb_module BB_EXAMPLE_MIXED_PRECISION_DEMO = {sizeof(bb_module), "MixedPrecisionDemo", mixed_demo, NULL, NULL,
                                                   NULL, 0};
static const bb_module *const MODULES[] = {&ADD_RELU_DEMO, &STAMP_DEMO};

static int configure(bb_compiler *c, size_t module, bb_error *err) {
  (void)module;
  if (bb_example_declare_cpu_backend(c, err) ||
      bb_compiler_bind_backend(c, "default_backend", "CpuBackend", NULL, err))
    return err ? err->code : BB_ERR_INVALID_ARGUMENT;
  return 0;
}

const bb_example BB_EXAMPLE_POLYMORPHIC_TYPES = {
    "polymorphic_types", "type refinement: Add/Relu resolve to tensor.f32 from one seed; StampDemo's binding",
    MODULES, 2, configure};
