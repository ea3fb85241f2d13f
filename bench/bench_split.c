/* Split learning against federated averaging on the same model and data: federated_cnn's
 * PyTorch CNN (examples/models/digits_cnn.onnx) on scikit-learn's digits (75 % dealt in
 * IID shards, 25 % held out), over the examples' simulated network (5 ms latency, 2 ms
 * jitter).
 *
 *   bench_split [--data CSV] [--model FILE] [--seed S] [--target 0.97] [--fedavg-clients 8]
 *
 * Prints:
 *   * bytes per client per epoch of its shard (what it sends and receives for training,
 *     evaluation traffic left out; 8 clients): split vanilla, U-shaped and SplitFed (the
 *     vanilla split, and every 10 steps the client's part to the averager and the average
 *     back), FedAvg (federated_cnn's round: each round a client receives the global model
 *     and sends its trained one after 10 steps of 32);
 *   * to the target held-out accuracy: simulated time (what the network's round trips
 *     cost: 5 ms each way), the CPU time of this process (every peer computes in it, one
 *     after the other: the compute all peers together spent) and steps or rounds — split with one
 *     client (both shapes), with 8 (each client's own first layers, the server's part
 *     shared: the lowest client's accuracy after 60 s if it never gets there), SplitFed with
 *     8, FedAvg with 8;
 *   * a client's compute and memory against the whole model's: parameters, CPU time of one
 *     training step of its part (forward and backward, optimizer included; 32 rows),
 *     and what its trainer holds and uses at its peak, for the vanilla client (the
 *     convolutions), the U-shaped client (the convolutions and the last layer) and the
 *     whole model (what a FedAvg client runs). */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bb/grad.h"
#include "bb/onnx_model.h"
#include "federation.h"
#include "options.h"
#include "programs/examples.h"
#include "split_run.h"

#define BATCH 32
#define SPLIT_SECONDS 60.0
#define FEDAVG_ROUNDS 200

/* CPU time of the process: every peer of a run computes in it, one after the other; on a
 * shared machine wall time would measure the neighbours too */
static double process_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct options {
  const char *data, *model;
  uint64_t seed;
  double target;
  int fedavg_clients;
  int quiet;
} options;

/* ---- bytes per client per epoch ---------------------------------------------------------------- */

typedef struct traffic {
  int peers;
  uint64_t sent[BB_SPLIT_RUN_MAX_CLIENTS + 1], received[BB_SPLIT_RUN_MAX_CLIENTS + 1];
} traffic;

static void count_bytes(void *user, const bb_sim_delivery *d) {
  traffic *t = user;
  uint64_t from = 0, to = 0;
  bb_peer_id_as_u64(d->from, &from);
  bb_peer_id_as_u64(d->to, &to);
  if (from >= 1 && from <= (uint64_t)t->peers) t->sent[from - 1] += d->len;
  if (to >= 1 && to <= (uint64_t)t->peers) t->received[to - 1] += d->len;
}

/* Which of split_cnn's Modules, without the held-out set. */
typedef enum variant { VANILLA, U_SHAPED, SPLIT_FED } variant;
static const char *const NAMES[] = {"SplitCnn", "SplitCnnU", "SplitFedCnn"};
static const char *const LABELS[] = {"vanilla", "U-shaped", "SplitFed"};

static void training_only(bb_rec *g, void *user) {
  variant v = *(const variant *)user;
  static const bb_slot CLIENT = {BB_ROLE_MODEL, "client_model", NULL}, SERVER = {BB_ROLE_MODEL, "server_model", NULL};
  static const bb_slot AVERAGER = {BB_ROLE_AGGREGATOR, "averager", NULL};
  static const char *const CUTS[] = {BB_SPLIT_CNN_CUT, BB_SPLIT_CNN_HEAD_CUT};
  bb_value server = bb_rec_input(g, "server", BB_TYPE_PEER_ID_VEC);
  bb_value clients = v == SPLIT_FED ? bb_rec_input(g, "clients", BB_TYPE_PEER_ID_VEC) : (bb_value){0};
  bb_value tick = bb_rec_interval(g, 1000000);
  bb_split s = {sizeof s, v == U_SHAPED ? BB_SPLIT_U : BB_SPLIT_VANILLA, CUTS, v == U_SHAPED ? 2 : 1, &CLIENT, &SERVER,
                server, tick, {0}, {0}, {0}, v == SPLIT_FED ? &AVERAGER : NULL, clients};
  bb_rec_split(g, &s);
}

/* split_cnn's Module without its held-out set, compiled with its bindings. */
static int compile_training_only(variant v, uint8_t **out, size_t *len, bb_error *err) {
  bb_module m = {sizeof m, NAMES[v], training_only, NULL, &v, NULL, 0};
  bb_model *rec = NULL;
  uint8_t *bytes = NULL;
  size_t n = 0;
  int rc = bb_module_build(&m, NULL, &rec, err);
  if (!rc) rc = bb_model_encode(rec, &bytes, &n, err);
  bb_model_free(rec);
  bb_compiler *c = rc ? NULL : bb_compiler_new(NULL);
  if (!rc) rc = BB_EXAMPLE_SPLIT_CNN.configure(c, (size_t)v, err);
  if (!rc) rc = bb_compiler_compile(c, bytes, n, out, len, err);
  bb_compiler_free(c);
  bb_buffer_free(NULL, bytes);
  return rc;
}

/* A client's bytes per epoch of its shard: 8 clients of a training-only run; client 1's
 * traffic over its steps (its shard is an eighth of the training set). */
static int split_bytes(const options *o, const bb_bytes *model, variant v, bb_error *err) {
  bb_digits_split d;
  int rc = bb_digits_split_load(o->data, 8, 0, o->seed, &d, err);
  if (rc) return rc;
  uint8_t *artifact = NULL;
  size_t len = 0;
  rc = compile_training_only(v, &artifact, &len, err);
  bb_split_setup setup = {artifact, len, NAMES[v], v == SPLIT_FED, true, 8, 0, o->seed, true, &d, model};
  bb_split_run r;
  traffic t = {9, {0}, {0}};
  if (!rc) rc = bb_split_run_start(&r, &setup, err);
  if (!rc) bb_sim_set_tracer(r.sim, count_bytes, &t);
  while (!rc && bb_node_counter(r.nodes[1], "split.steps") < 200) rc = bb_sim_step(r.sim, err);
  if (!rc) {
    double steps = (double)bb_node_counter(r.nodes[1], "split.steps"), epochs = steps * BATCH / (double)d.shards[0].n;
    printf("  split %-8s  %9.0f bytes/epoch (sent %.0f, received %.0f; %.0f bytes a step)\n", LABELS[v],
           (double)(t.sent[1] + t.received[1]) / epochs, (double)t.sent[1] / epochs, (double)t.received[1] / epochs,
           (double)(t.sent[1] + t.received[1]) / steps);
  }
  bb_split_run_free(&r);
  bb_digits_split_free(&d);
  bb_buffer_free(NULL, artifact);
  return rc;
}

/* ---- FedAvg: federated_cnn's round on the same data -------------------------------------------- */

static int fedavg(const options *o, const bb_bytes *model, bb_error *err) {
  bb_digits_split d;
  int rc = bb_digits_split_load(o->data, (size_t)o->fedavg_clients, 0, o->seed, &d, err);
  if (rc) return rc;
  uint8_t *artifact = NULL;
  size_t len = 0;
  rc = bb_example_compile(&BB_EXAMPLE_FEDERATED_CNN, 0, &artifact, &len, err);
  bb_fed_setup setup = {artifact, len, "FedCnn", "FedCnn_server", "FedCnn_clients", o->fedavg_clients, 0, o->seed, true, &d,
                        model, NULL, NULL, false};
  bb_federation f;
  traffic t = {o->fedavg_clients + 1, {0}, {0}};
  double w0 = process_s(), reached_wall = -1, reached_sim = -1;
  int reached_round = -1;
  if (!rc) rc = bb_federation_start(&f, &setup, err);
  if (!rc) bb_sim_set_tracer(f.sim, count_bytes, &t);
  while (!rc && f.progress.round < FEDAVG_ROUNDS && reached_round < 0) {
    rc = bb_sim_step(f.sim, err);
    if (f.progress.accuracy >= (float)o->target && reached_round < 0)
      reached_round = f.progress.round, reached_wall = process_s() - w0, reached_sim = (double)bb_sim_now(f.sim) / 1e9;
  }
  if (!rc) {
    /* a round: 10 steps of 32 rows per client (OnnxModel's fit_steps in federated_cnn) */
    double epochs = (double)f.progress.round * 10 * BATCH / (double)d.shards[0].n;
    uint64_t bytes = 0;
    for (int i = 1; i <= o->fedavg_clients; i++) bytes += t.sent[i] + t.received[i];
    printf("  FedAvg (%d clients)  %9.0f bytes/epoch per client (%d rounds, %.1f epochs of a shard)\n", o->fedavg_clients,
           (double)bytes / o->fedavg_clients / epochs, f.progress.round, epochs);
    if (reached_round >= 0)
      printf("  FedAvg (%d clients)  %.2f reached at round %d: %.1f s simulated, %.2f s CPU\n", o->fedavg_clients,
             o->target, reached_round, reached_sim, reached_wall);
    else
      printf("  FedAvg (%d clients)  below %.2f after %d rounds (%.3f)\n", o->fedavg_clients, o->target, FEDAVG_ROUNDS,
             (double)f.progress.accuracy);
  }
  bb_federation_free(&f);
  bb_digits_split_free(&d);
  bb_buffer_free(NULL, artifact);
  return rc;
}

/* ---- split to the target ---------------------------------------------------------------------- */

static int split_to_target(const options *o, const bb_bytes *model, variant v, int clients, bb_error *err) {
  bb_digits_split d;
  int rc = bb_digits_split_load(o->data, (size_t)clients, 0, o->seed, &d, err);
  if (rc) return rc;
  uint8_t *artifact = NULL;
  size_t len = 0;
  rc = bb_example_compile(&BB_EXAMPLE_SPLIT_CNN, (size_t)v, &artifact, &len, err);
  bb_split_setup setup = {artifact, len, NAMES[v], v == SPLIT_FED, false, clients, 0, o->seed, true, &d, model};
  bb_split_run r;
  double c0 = process_s();
  if (!rc) rc = bb_split_run_start(&r, &setup, err);
  while (!rc && bb_split_run_min_accuracy(&r) < (float)o->target && bb_sim_now(r.sim) < (uint64_t)(SPLIT_SECONDS * 1e9))
    rc = bb_sim_step(r.sim, err);
  if (!rc) {
    float acc = bb_split_run_min_accuracy(&r);
    if (acc >= (float)o->target)
      printf("  split %-8s %d client%s  %.2f reached: %.1f s simulated, %.2f s CPU, %llu steps\n", LABELS[v], clients,
             clients == 1 ? " " : "s", o->target, (double)bb_sim_now(r.sim) / 1e9, process_s() - c0,
             (unsigned long long)bb_split_run_client_steps(&r));
    else
      printf("  split %-8s %d clients  below %.2f after %.0f s simulated (lowest client %.3f; %.1f s CPU, %llu steps)\n",
             LABELS[v], clients, o->target, SPLIT_SECONDS, (double)acc, process_s() - c0,
             (unsigned long long)bb_split_run_client_steps(&r));
  }
  bb_split_run_free(&r);
  bb_digits_split_free(&d);
  bb_buffer_free(NULL, artifact);
  return rc;
}

/* ---- a client's compute and memory ---------------------------------------------------------------- */

/* The part of the model from the input to `cut` (or all of it), and, for a U-shaped
 * client, the head from `head` to the output: parameters, a step's CPU time and memory. */
static int part_cost(const bb_bytes *model, const char *label, const char *cut, const char *head, bb_error *err) {
  bb_model *whole = NULL;
  int rc = bb_model_decode(model->data, model->len, NULL, NULL, &whole, err);
  const char *parts_in[2] = {NULL, head}, *parts_out[2] = {cut, NULL};
  size_t n_parts = head ? 2 : 1, params = 0, held = 0, peak = 0;
  double step_s = 0;
  for (size_t k = 0; k < n_parts && !rc; k++) {
    bb_grad_cut_options co = {sizeof co, parts_in[k] ? &parts_in[k] : NULL, parts_in[k] ? 1 : 0, parts_out[k] ? &parts_out[k] : NULL,
                              parts_out[k] ? 1 : 0};
    bb_model *part = NULL;
    uint8_t *bytes = NULL;
    size_t len = 0;
    bb_onnx_model_config c;
    bb_onnx_model *m = NULL;
    rc = bb_grad_cut(whole, &co, NULL, &part, err);
    if (!rc) rc = bb_model_encode(part, &bytes, &len, err);
    if (!rc) rc = bb_onnx_model_config_parse(BB_SPLIT_CNN_MODEL_CONFIG, NULL, 1, &c, err);
    c.upstream = parts_out[k] != NULL;
    if (parts_in[k]) snprintf(c.input_grad, sizeof c.input_grad, "%s", parts_in[k]);
    if (!rc) rc = bb_onnx_model_new(bytes, len, &c, NULL, &m, err);
    /* 32 rows of what the part takes: pixels, or the activations at the head's cut */
    int64_t xd[2] = {BATCH, 64}, ld[1] = {BATCH}; /* both inputs take 64 values a row */
    bb_tensor *x = bb_tensor_new_zeros(NULL, BB_DTYPE_FLOAT, 2, xd), *labels = bb_tensor_new_zeros(NULL, BB_DTYPE_FLOAT, 1, ld);
    for (int it = 0; !rc && it < 60; it++) {
      double t0 = cpu_s();
      bb_grad_step st;
      if (c.upstream) {
        bb_tensor *y = NULL;
        rc = bb_onnx_model_forward(m, x, &y, err);
        bb_tensor *dy = rc ? NULL : bb_tensor_new_zeros(NULL, BB_DTYPE_FLOAT, y->rank, y->dims);
        if (!rc) rc = bb_onnx_model_backward(m, dy, &st, err);
        bb_tensor_release(y);
        bb_tensor_release(dy);
      } else {
        rc = bb_onnx_model_step(m, x, labels, &st, err);
      }
      if (it >= 10) step_s += (cpu_s() - t0) / 50; /* after 10 warm-up steps */
    }
    if (!rc) {
      bb_grad_trainer_memory_stats ms;
      bb_grad_trainer_memory(bb_onnx_model_trainer(m), &ms);
      params += bb_onnx_model_param_count(m);
      held += ms.held_bytes;
      peak += ms.step_in_use_high_water;
    }
    bb_tensor_release(x);
    bb_tensor_release(labels);
    bb_onnx_model_free(m);
    bb_buffer_free(NULL, bytes);
    bb_model_free(part);
  }
  if (!rc)
    printf("  %-28s %6zu parameters  %7.3f ms/step  holds %7zu bytes, %8zu in use at a step's peak\n", label, params, step_s * 1e3,
           held, peak);
  bb_model_free(whole);
  return rc;
}

int main(int argc, char **argv) {
  options o = {NULL, BB_EXAMPLE_MODELS "/digits_cnn.onnx", 1, 0.97, 8, 0};
  const bb_option table[] = {{"--data", BB_OPTION_STRING, &o.data},        {"--model", BB_OPTION_STRING, &o.model},
                             {"--seed", BB_OPTION_U64, &o.seed},           {"--target", BB_OPTION_DOUBLE, &o.target},
                             {"--fedavg-clients", BB_OPTION_INT, &o.fedavg_clients}};
  if (bb_options_parse(argc, argv, table, sizeof table / sizeof *table, &o.quiet) || o.fedavg_clients < 1 ||
      o.fedavg_clients > BB_SPLIT_RUN_MAX_CLIENTS)
    return fprintf(stderr, "usage: bench_split [--data CSV] [--model FILE] [--seed S] [--target ACC] [--fedavg-clients N]\n"), 2;
  bb_error err;
  bb_bytes model = {NULL, 0};
  if (bb_read_whole_file(o.model, &model, &err)) return fprintf(stderr, "bench_split: cannot read %s\n", o.model), 1;
  int rc = 0;
  printf("bytes per client per epoch of its shard (training only; 8 clients, IID shards of 168 images)\n");
  for (variant v = VANILLA; !rc && v <= SPLIT_FED; v++) rc = split_bytes(&o, &model, v, &err);
  if (!rc) rc = fedavg(&o, &model, &err);
  printf("to %.2f held-out accuracy, every client (every peer in this process)\n", o.target);
  if (!rc) rc = split_to_target(&o, &model, VANILLA, 1, &err);
  if (!rc) rc = split_to_target(&o, &model, U_SHAPED, 1, &err);
  if (!rc) rc = split_to_target(&o, &model, VANILLA, 8, &err);
  if (!rc) rc = split_to_target(&o, &model, SPLIT_FED, 8, &err);
  printf("a client's part against the whole model (one training step of %d rows, CPU time)\n", BATCH);
  if (!rc) rc = part_cost(&model, "split vanilla client", BB_SPLIT_CNN_CUT, NULL, &err);
  if (!rc) rc = part_cost(&model, "split U-shaped client", BB_SPLIT_CNN_CUT, BB_SPLIT_CNN_HEAD_CUT, &err);
  if (!rc) rc = part_cost(&model, "whole model (FedAvg client)", NULL, NULL, &err);
  if (rc) fprintf(stderr, "bench_split: %s\n", err.message);
  free(model.data);
  return rc ? 1 : 0;
}
