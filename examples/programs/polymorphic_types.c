/* polymorphic_types: the compiler's type refinement, compile only.
 *
 *   polymorphic_types [--quiet]
 *
 * AddReluDemo (z = Add(x, y), w = Relu(z)) is seeded with x = tensor.f32 only; compiled,
 * x, y, z and w all resolve to tensor.f32. UntypedDemo (y = model.forward(x), x untyped)
 * bound to a Model with no declared storage fails under the default strict types
 * (UnresolvedType), compiles under permissive types with y left abstract, and resolves to
 * tensor.f32 once the Model's storage is declared. MixedPrecisionDemo (x = f32, y = f64) fails with
 * TypeConstraintFailed naming both precisions. StampDemo carries the passport
 * ai.bytesandbrains.compiled = BB_COMPILED_VERSION and the binding "Backend|CpuBackend|<slot id>" for
 * slot default_backend. Exits 0 only when all of that held. (The type lattice itself has
 * no public API; tests/compiler checks it.) */
#include <stdio.h>
#include <string.h>

#include "programs/examples.h"

#define F32 BB_TYPE_TENSOR_F32

static int check(int cond, const char *what) {
  printf("  [%s] %s\n", cond ? "ok" : "FAILED", what);
  return cond ? 0 : 1;
}

static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};

/* y = model.forward(x) with x untyped: only the Model's declared storage can type it. */
static void untyped_demo(bb_rec *g, void *user) {
  (void)user;
  bb_rec_output(g, "y", bb_rec_model_forward(g, &MODEL, bb_rec_input(g, "x", BB_TYPE_ABSTRACT)));
}
static const bb_module UNTYPED_DEMO = {sizeof(bb_module), "UntypedDemo", untyped_demo, NULL, NULL, NULL, 0};

typedef struct outcome {
  int rc;
  bb_compile_error kind;
  bb_error err;
  bb_model *artifact; /* on success */
} outcome;

/* Records `module` and compiles it with polymorphic_types' configure, plus slot "model"
 * bound to PolyModel, with its storage (tensor.f32 ports) declared or not. */
static outcome compile(const bb_module *module, bool permissive, bool declared) {
  outcome o = {0, BB_COMPILE_OK, {0}, NULL};
  bb_model *recorded = NULL;
  o.rc = bb_module_build(module, NULL, &recorded, &o.err);
  bb_compiler *c = o.rc ? NULL : bb_compiler_new(NULL);
  if (!o.rc && !c) o.rc = BB_ERR_NOMEM;
  if (!o.rc) {
    bb_compiler_set_permissive_types(c, permissive);
    o.rc = BB_EXAMPLE_POLYMORPHIC_TYPES.configure(c, 0, &o.err);
    if (!o.rc && module == &UNTYPED_DEMO) {
      if (declared) o.rc = bb_example_declare(c, "PolyModel", NULL, 0, &o.err);
      if (!o.rc) o.rc = bb_compiler_bind_model(c, "model", "PolyModel", NULL, &o.err);
    }
  }
  if (!o.rc) {
    o.rc = bb_compiler_compile_model(c, recorded, &o.artifact, &o.err);
    o.kind = bb_compiler_error_kind(c);
  }
  bb_compiler_free(c);
  bb_model_free(recorded);
  return o;
}

static const bb_function *partition(const bb_model *m, const char *base) {
  size_t n = strlen(base);
  for (size_t i = 0; m && i < m->functions.len; i++)
    if (strncmp(m->functions.items[i]->name, base, n) == 0 && m->functions.items[i]->name[n] == '#')
      return m->functions.items[i];
  return NULL;
}

static const bb_ir_node *op(const bb_function *f, const char *op_type) {
  for (size_t i = 0; f && i < f->nodes.len; i++)
    if (strcmp(f->nodes.items[i]->op_type, op_type) == 0) return f->nodes.items[i];
  return NULL;
}

/* A value's denotation in f: "" when it has none, "(no type)" when it is not typed. */
static const char *type_of(const bb_function *f, const char *value) {
  const bb_value_info *vi = f && value ? bb_vilist_find(&f->value_infos, value) : NULL;
  if (!vi || !vi->type) return "(no type)";
  return vi->type->denotation ? vi->type->denotation : "";
}

int main(int argc, char **argv) {
  (void)argc, (void)argv;
  int failures = 0;

  /* 1. one seed resolves the graph */
  outcome o = compile(BB_EXAMPLE_POLYMORPHIC_TYPES.modules[0], false, true);
  const bb_function *p = partition(o.artifact, "AddReluDemo");
  const bb_ir_node *add = op(p, "Add"), *relu = op(p, "Relu");
  const char *z = add ? add->outputs.items[0] : NULL, *w = relu ? relu->outputs.items[0] : NULL;
  printf("AddReluDemo (seed x = tensor.f32): x: %s, y: %s, Add -> %s, Relu -> %s\n", type_of(p, "x"), type_of(p, "y"),
         type_of(p, z), type_of(p, w));
  failures += check(o.rc == 0 && strcmp(type_of(p, "x"), F32) == 0 && strcmp(type_of(p, "y"), F32) == 0 &&
                        strcmp(type_of(p, z), F32) == 0 && strcmp(type_of(p, w), F32) == 0,
                    "x, y, the Add output and the Relu output resolve to tensor.f32");
  bb_model_free(o.artifact);

  /* 2. nothing to type x and y: strict refuses, permissive leaves them abstract; the
   * Model's declared storage (tensor.f32 ports) resolves them */
  o = compile(&UNTYPED_DEMO, false, false);
  printf("UntypedDemo, strict: %s (%s)\n", bb_compile_error_name(o.kind), o.rc ? o.err.message : "compiled");
  failures += check(o.rc != 0 && o.kind == BB_COMPILE_UNRESOLVED_TYPE, "strict types: UnresolvedType");
  bb_model_free(o.artifact);
  o = compile(&UNTYPED_DEMO, true, false);
  p = partition(o.artifact, "UntypedDemo");
  printf("UntypedDemo, permissive: %s; y: \"%s\"\n", o.rc ? o.err.message : "compiled", type_of(p, "y"));
  failures += check(o.rc == 0 && p && strcmp(type_of(p, "y"), F32) != 0, "permissive types: compiles, y left abstract");
  bb_model_free(o.artifact);
  o = compile(&UNTYPED_DEMO, false, true);
  p = partition(o.artifact, "UntypedDemo");
  printf("UntypedDemo, PolyModel storage declared: x: %s, y: %s\n", type_of(p, "x"), type_of(p, "y"));
  failures += check(o.rc == 0 && strcmp(type_of(p, "x"), F32) == 0 && strcmp(type_of(p, "y"), F32) == 0,
                    "declared storage resolves x and y to tensor.f32");
  bb_model_free(o.artifact);

  /* 3. conflicting seeds */
  o = compile(&BB_EXAMPLE_MIXED_PRECISION_DEMO, false, true);
  printf("MixedPrecisionDemo (x = f32, y = f64): %s: %s\n", bb_compile_error_name(o.kind),
         o.rc ? o.err.message : "compiled");
  failures += check(o.rc != 0 && o.kind == BB_COMPILE_TYPE_CONSTRAINT_FAILED && strstr(o.err.message, "f32") &&
                        strstr(o.err.message, "f64"),
                    "TypeConstraintFailed naming f32 and f64");
  bb_model_free(o.artifact);

  /* 4. the stamp */
  o = compile(BB_EXAMPLE_POLYMORPHIC_TYPES.modules[1], false, true);
  p = partition(o.artifact, "StampDemo");
  char key[256];
  snprintf(key, sizeof key, BB_KEY_BINDING_PREFIX "%s.default_backend", p ? p->name : "?");
  const char *passport = o.artifact ? bb_kv_get(&o.artifact->metadata, BB_KEY_COMPILED) : NULL;
  const char *binding = o.artifact ? bb_kv_get(&o.artifact->metadata, key) : NULL;
  printf("StampDemo: compiled = %s; %s = %s\n", passport ? passport : "(none)", key, binding ? binding : "(none)");
  const char *id = binding && strncmp(binding, "Backend|CpuBackend|", 19) == 0 ? binding + 19 : NULL;
  failures += check(o.rc == 0 && passport && strcmp(passport, BB_COMPILED_VERSION) == 0,
                    "passport ai.bytesandbrains.compiled = " BB_COMPILED_VERSION);
  failures += check(id && *id && strspn(id, "-0123456789") == strlen(id),
                    "binding for slot default_backend is Backend|CpuBackend|<slot id>");
  bb_model_free(o.artifact);
  if (!failures) printf("Type refinement, conflicts and stamps as expected.\n");
  return failures ? 1 : 0;
}
