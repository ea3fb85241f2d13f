/* Records a small federated-learning Module with the DSL and writes its ONNX bytes, for
 * the bb tool's end-to-end test: the server sends its parameters to class `clients`;
 * each client loads them, computes and sends its update to class `server`, which takes
 * it into the aggregator. */
#include <stdio.h>
#include <stdlib.h>

#include "bb/graph.h"

static void fl_body(bb_rec *rec, void *user) {
  (void)user;
  const bb_slot model = {BB_ROLE_MODEL, "model", NULL};
  const bb_slot aggregator = {BB_ROLE_AGGREGATOR, "aggregator", NULL};
  bb_value clients = bb_rec_input(rec, "clients", NULL);
  bb_value server = bb_rec_input(rec, "server", NULL);
  bb_rec_net_out(rec, "global_params", clients, bb_rec_model_params(rec, &model));
  bb_value global = bb_rec_lookup_output(rec, "global_params");
  bb_rec_model_load_parameters(rec, &model, global);
  bb_rec_net_out(rec, "client_update", server, bb_rec_model_forward(rec, &model, global));
  bb_value update = bb_rec_lookup_output(rec, "client_update");
  bb_rec_aggregator_contribute(rec, &aggregator, update, update);
}

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  bb_module fl = {sizeof fl, "FederatedRound", fl_body, NULL, NULL, NULL, 0};
  bb_model *m;
  bb_error err;
  uint8_t *bytes;
  size_t len;
  if (bb_module_build(&fl, NULL, &m, &err) || bb_model_encode(m, &bytes, &len, &err)) {
    fprintf(stderr, "write_fl_model: %s\n", err.message);
    return 1;
  }
  FILE *f = fopen(argv[1], "wb");
  int ok = f && fwrite(bytes, 1, len, f) == len;
  if (f) ok = fclose(f) == 0 && ok;
  bb_buffer_free(NULL, bytes);
  bb_model_free(m);
  return ok ? 0 : 1;
}
