/* component_with_dependency: Module `CountingApp` —
 *   query = input "query"; index.search(query, k = 5).
 * The Index concrete CountingIndex declares a dependency on a Backend bound at slot
 * "compute" (the reference's #[depends(backend = "compute")]); no node names "compute",
 * so it is a dependency-only slot (binding slot id -1). Default bindings: index
 * "primary_index" = CountingIndex, backend "compute" = CpuBackend. Leaving "compute"
 * unbound fails the compile with UnboundDependency. One partition, CountingApp#<hash>. */
#include "programs/examples.h"

static const bb_slot INDEX = {BB_ROLE_INDEX, "primary_index", NULL};

static void counting_body(bb_rec *g, void *user) {
  (void)user;
  bb_value query = bb_rec_input(g, "query", BB_TYPE_TENSOR_F32);
  bb_rec_output(g, "neighbors", bb_rec_index_search(g, &INDEX, query, 5));
}

static const bb_module COUNTING_APP = {sizeof(bb_module), "CountingApp", counting_body, NULL, NULL, NULL, 0};
static const bb_module *const MODULES[] = {&COUNTING_APP};

static const bb_component_dep COUNTING_INDEX_DEPS[] = {{BB_ROLE_BACKEND, "compute"}};

static int configure(bb_compiler *c, size_t module, bb_error *err) {
  (void)module;
  if (bb_example_declare(c, "CountingIndex", COUNTING_INDEX_DEPS, 1, err) ||
      bb_example_declare_cpu_backend(c, err) ||
      bb_compiler_bind_index(c, "primary_index", "CountingIndex", NULL, err) ||
      bb_compiler_bind_backend(c, "compute", "CpuBackend", NULL, err))
    return err ? err->code : BB_ERR_INVALID_ARGUMENT;
  return 0;
}

const bb_example BB_EXAMPLE_COMPONENT_WITH_DEPENDENCY = {
    "component_with_dependency",
    "Index.search(query, 5) on CountingIndex, which depends on a Backend at slot \"compute\"", MODULES, 1,
    configure};
