/* custom_index (the reference implementation's custom_index_hnsw): Module
 * `CustomIndexApp` — query = input "query"; output "neighbors" = index.search(query,
 * k = 3). The Index concrete is FlatIndex (exact k-NN, the deterministic stand-in for the
 * reference's HnswIndex; its asynchronous completion is a runtime matter). Default
 * binding: index "hnsw" = FlatIndex. One partition, CustomIndexApp#<hash>. */
#include "programs/examples.h"

static const bb_slot INDEX = {BB_ROLE_INDEX, "hnsw", NULL};

static void custom_index_body(bb_rec *g, void *user) {
  (void)user;
  bb_value query = bb_rec_input(g, "query", BB_TYPE_TENSOR_F32);
  bb_rec_output(g, "neighbors", bb_rec_index_search(g, &INDEX, query, 3));
}

static const bb_module CUSTOM_INDEX_APP = {sizeof(bb_module), "CustomIndexApp", custom_index_body, NULL, NULL, NULL,
                                           0};
static const bb_module *const MODULES[] = {&CUSTOM_INDEX_APP};

static int configure(bb_compiler *c, size_t module, bb_error *err) {
  (void)module;
  if (bb_example_declare(c, "FlatIndex", NULL, 0, err) || bb_compiler_bind_index(c, "hnsw", "FlatIndex", NULL, err))
    return err ? err->code : BB_ERR_INVALID_ARGUMENT;
  return 0;
}

const bb_example BB_EXAMPLE_CUSTOM_INDEX = {
    "custom_index", "a user Index (FlatIndex, exact k-NN) answering search(query, 3)", MODULES, 1, configure};
