/* A worked example: FedNetwork with LoaderLeaf, TrainerLeaf and SinkLeaf — the Module of the shipped multi_target_network example, which the DSL tests
 * record and the compiler tests compile. */
#ifndef BB_TESTS_DSL_FEDNETWORK_H
#define BB_TESTS_DSL_FEDNETWORK_H

#include "programs/examples.h"

#define FED_NETWORK (*BB_EXAMPLE_MULTI_TARGET_NETWORK.modules[0])

#endif
