/* federated_digits: one server and eight clients learn to read handwritten digits with
 * federated averaging, over a simulated network, each client holding a label-skewed
 * (non-IID) shard of scikit-learn's digits.
 *
 *   federated_digits [--rounds N] [--clients K] [--loss P] [--drop D] [--snapshot-at R] [--seed S] [--data CSV]
 *                    [--onnx-model FILE] [--export FILE] [--scenario FILE] [--async] [--buffer K]
 *                    [--dp-clip C --dp-noise Z [--dp-delta D] [--dp-clip-quantile Q] [--dp-sample-rate q]]
 *                    [--secure [--secure-threshold T] [--secure-shares S]] [--min-accuracy A] [--quiet]
 *
 * Prints the held-out accuracy of the global model after every round and exits 0 when
 * the last round reaches --min-accuracy (90 %). --dp-clip C --dp-noise Z makes the server's
 * FedAvg DP-FedAvg (each client's update clipped to L2 distance C from the global model,
 * the sum noised with Z × C; docs/PRIVACY.md) and prints after every round the privacy
 * spent so far: ε at δ = D [1e-5] by the Rényi accountant, over the rounds that closed
 * with noise, each a step of the Gaussian mechanism on every client (q = 1: the server
 * sends every round to every client); --dp-clip-quantile Q makes C the initial clip of
 * adaptive clipping, which follows the Q-quantile of the update norms; --dp-sample-rate q
 * takes each client's update with probability q (Poisson sampling: the rounds then close at
 * their 1 s deadline with every sampled update, and ε is accounted at q). --drop D crashes D clients halfway; --loss P loses each
 * message with probability P. --snapshot-at R moves the server at round R into a fresh node
 * through a snapshot (the run continues exactly as without). --onnx-model FILE binds the
 * model slot to OnnxModel on that ONNX model (examples/models/digits_mlp.onnx is the MLP
 * CpuMlp is) with CpuMlp's optimizer: the same federation, any network. --export FILE
 * writes the final global model as a standard ONNX model (bb run and onnxruntime execute
 * it). --scenario FILE runs the clients as a population of phones (docs/SIMULATOR.md,
 * "Scenario files"): the file's network, and each client one of its devices. --async runs
 * the module FedBuffDigits instead: no round barrier, FedBuff steps the model every K
 * contributions (--buffer K, default 6) and each client that finishes is sent the current
 * model at once; a "round" is then a version of the model (not with --dp-clip, which is
 * FedAvg's). --secure masks the clients' updates with secure aggregation (SecAgg+, module
 * SecureFedDigits, FedAvg with secure=1): the server only ever sees the sum of each round's
 * steps; T shares rebuild a secret, each client shares with S neighbours (0: SecAgg+'s
 * defaults, docs/PRIVACY.md). With --dp-clip the clients clip (and noise) their steps
 * before masking, and the server adds nothing. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/privacy.h"
#include "bb/roles.h"
#include "federation.h"
#include "options.h"
#include "programs/examples.h"

/* OnnxModel in CpuMlp's place: the same loss, optimizer and local steps. */
#define ONNX_MODEL_CONFIG "loss=xent,optimizer=momentum,lr=0.05,momentum=0.9,fit_steps=12,data=data"

typedef struct options {
  int rounds, clients, drop, quiet, snapshot_at, async, buffer, secure, secure_threshold, secure_shares;
  double loss, dp_clip, dp_noise, dp_delta, dp_quantile, dp_sample_rate, min_accuracy;
  uint64_t seed;
  const char *data; /* the digits CSV (NULL: Debian's gzipped copy) */
  const char *onnx_model;
  const char *export_path;
  const char *scenario;
} options;

static int usage(void) {
  fprintf(stderr, "usage: federated_digits [--rounds N] [--clients K] [--loss P] [--drop D] [--snapshot-at R] [--seed S] [--data CSV] "
                  "[--onnx-model FILE] [--export FILE] [--scenario FILE] [--async] [--buffer K] "
                  "[--dp-clip C --dp-noise Z [--dp-delta D] [--dp-clip-quantile Q] [--dp-sample-rate q]] "
                  "[--secure [--secure-threshold T] [--secure-shares S]] "
                  "[--min-accuracy A] [--quiet]\n");
  return 2;
}

static int parse(int argc, char **argv, options *o) {
  *o = (options){40, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 1e-5, 0.0, 1.0, 0.90, 1, NULL, NULL, NULL, NULL};
  const bb_option table[] = {
      {"--rounds", BB_OPTION_INT, &o->rounds},           {"--clients", BB_OPTION_INT, &o->clients},
      {"--drop", BB_OPTION_INT, &o->drop},               {"--snapshot-at", BB_OPTION_INT, &o->snapshot_at},
      {"--loss", BB_OPTION_DOUBLE, &o->loss},            {"--seed", BB_OPTION_U64, &o->seed},
      {"--data", BB_OPTION_STRING, &o->data},            {"--onnx-model", BB_OPTION_STRING, &o->onnx_model},
      {"--export", BB_OPTION_STRING, &o->export_path}, {"--scenario", BB_OPTION_STRING, &o->scenario},
      {"--async", BB_OPTION_FLAG, &o->async},            {"--buffer", BB_OPTION_INT, &o->buffer},
      {"--dp-clip", BB_OPTION_DOUBLE, &o->dp_clip},      {"--dp-noise", BB_OPTION_DOUBLE, &o->dp_noise},
      {"--dp-delta", BB_OPTION_DOUBLE, &o->dp_delta},    {"--min-accuracy", BB_OPTION_DOUBLE, &o->min_accuracy},
      {"--dp-clip-quantile", BB_OPTION_DOUBLE, &o->dp_quantile}, {"--dp-sample-rate", BB_OPTION_DOUBLE, &o->dp_sample_rate},
      {"--secure", BB_OPTION_FLAG, &o->secure},          {"--secure-threshold", BB_OPTION_INT, &o->secure_threshold},
      {"--secure-shares", BB_OPTION_INT, &o->secure_shares}};
  if (bb_options_parse(argc, argv, table, sizeof table / sizeof *table, &o->quiet) || o->rounds < 1 ||
      o->clients < 2 || o->clients > 128 || o->drop < 0 || o->drop >= o->clients || o->loss < 0 || o->loss >= 1 ||
      o->buffer < 0 || (o->buffer && !o->async) || (o->async && (o->dp_clip > 0 || o->secure)) ||
      o->secure_threshold < 0 || o->secure_shares < 0 || ((o->secure_threshold || o->secure_shares) && !o->secure))
    return usage();
  if (!(o->dp_clip >= 0 && o->dp_clip < 1e30) || !(o->dp_noise >= 0 && o->dp_noise < 1e30) ||
      !(o->dp_delta > 0 && o->dp_delta < 1) || (o->dp_noise > 0 && o->dp_clip == 0) ||
      !(o->dp_quantile >= 0 && o->dp_quantile < 1) || (o->dp_quantile > 0 && o->dp_clip == 0) ||
      !(o->dp_sample_rate > 0 && o->dp_sample_rate <= 1) || (o->dp_sample_rate < 1 && o->dp_clip == 0) ||
      !(o->min_accuracy >= 0 && o->min_accuracy <= 1)) {
    fprintf(stderr, "federated_digits: --dp-clip and --dp-noise are >= 0 (noise needs a clip), 0 < --dp-delta < 1, "
                    "0 < --dp-clip-quantile < 1 and 0 < --dp-sample-rate <= 1 (with --dp-clip), 0 <= --min-accuracy <= 1\n");
    return usage();
  }
  return 0;
}

static int fail(bb_error *err, int code, const char *what, const char *arg) {
  err->code = code;
  snprintf(err->message, sizeof err->message, "%s%s", what, arg);
  return code;
}

/* The artifact: the example's default bindings, with --onnx-model the model slot on
 * OnnxModel, with --dp-clip the aggregator's FedAvg DP-FedAvg, with --secure the module
 * SecureFedDigits and FedAvg with secure=1. */
static int compile(const options *o, uint8_t **artifact, size_t *len, bb_error *err) {
  const bb_example *ex = &BB_EXAMPLE_FEDERATED_DIGITS;
  const size_t module = o->async ? 1 : 0;
  const bool rebind = o->dp_clip > 0 || o->secure;
  if (!o->onnx_model && !o->buffer && !rebind) return bb_example_compile(ex, module, artifact, len, err);
  /* DP-FedAvg's and secure rounds wait for every client (three quarters once the deadline
   * passed): the accountant's q = 1 then holds however many clients there are. Sampled, a
   * round closes at its deadline with every sampled update (the rules Poisson sampling
   * needs). */
  char aggregator[320];
  if (o->dp_sample_rate < 1)
    snprintf(aggregator, sizeof aggregator,
             "quorum=1,target=0,deadline_ms=1000,no_quorum=abandon,init=model,dp_clip=%.9g,dp_noise=%.9g,"
             "dp_sample_rate=%.17g,dp_clients=%d",
             o->dp_clip, o->dp_noise, o->dp_sample_rate, o->clients);
  else
    snprintf(aggregator, sizeof aggregator,
             "quorum=%d,target=%d,deadline_ms=1000,no_quorum=abandon,init=model,dp_clip=%.9g,dp_noise=%.9g",
             (3 * o->clients + 3) / 4, o->clients, o->dp_clip, o->dp_noise);
  size_t used = strlen(aggregator);
  if (o->dp_quantile > 0) snprintf(aggregator + used, sizeof aggregator - used, ",dp_clip_quantile=%.9g", o->dp_quantile);
  used = strlen(aggregator);
  if (o->secure)
    snprintf(aggregator + used, sizeof aggregator - used,
             ",secure=1,secure_threshold=%d,secure_shares=%d,secure_timeout_ms=1000", o->secure_threshold,
             o->secure_shares);
  bb_model *recorded = NULL;
  uint8_t *bytes = NULL;
  size_t n = 0;
  int rc = bb_module_build(o->secure ? &BB_FEDERATED_DIGITS_SECURE : ex->modules[module], NULL, &recorded, err);
  if (!rc) rc = bb_model_encode(recorded, &bytes, &n, err);
  bb_model_free(recorded);
  bb_compiler *c = rc ? NULL : bb_compiler_new(NULL);
  if (!rc && !c) rc = fail(err, BB_ERR_NOMEM, "out of memory", "");
  if (!rc) rc = ex->configure(c, module, err);
  if (!rc && o->onnx_model) rc = bb_compiler_unbind(c, "model", err);
  if (!rc && o->onnx_model) rc = bb_example_declare(c, "OnnxModel", NULL, 0, err);
  if (!rc && o->onnx_model) rc = bb_compiler_bind_model(c, "model", "OnnxModel", ONNX_MODEL_CONFIG, err);
  if (!rc && rebind) rc = bb_compiler_unbind(c, "aggregator", err);
  if (!rc && rebind) rc = bb_compiler_bind_aggregator(c, "aggregator", "FedAvg", aggregator, err);
  char fedbuff[64];
  snprintf(fedbuff, sizeof fedbuff, "buffer=%d,max_staleness=16,init=model", o->buffer);
  if (!rc && o->buffer) rc = bb_compiler_unbind(c, "aggregator", err);
  if (!rc && o->buffer) rc = bb_compiler_bind_aggregator(c, "aggregator", "FedBuff", fedbuff, err);
  if (!rc) rc = bb_compiler_compile(c, bytes, n, artifact, len, err);
  bb_compiler_free(c);
  bb_buffer_free(NULL, bytes);
  return rc;
}

/* The global model as ONNX: the network of the module's CpuMlp binding with these
 * parameters (what CpuMlp's Export op gives), or OnnxModel's own export. */
static bool write_export(const bb_federation *f, const options *o, bb_error *err) {
  uint8_t *bytes = NULL;
  size_t len = 0;
  if (o->onnx_model) {
    if (!f->progress.onnx) return !fail(err, BB_ERR_NOT_FOUND, "the server exported no model", "");
  } else if (!f->progress.global) {
    return !fail(err, BB_ERR_NOT_FOUND, "no global model was announced", "");
  } else if (bb_cpu_mlp_export(BB_FEDERATED_DIGITS_MLP_CONFIG, f->progress.global, &bytes, &len, err)) {
    return false;
  }
  FILE *out = fopen(o->export_path, "wb");
  bool ok = out && (bytes ? fwrite(bytes, 1, len, out) == len : fwrite(bb_val_as_bytes(f->progress.onnx), 1, bb_val_count(f->progress.onnx), out) == bb_val_count(f->progress.onnx));
  if (out && fclose(out)) ok = false;
  bb_buffer_free(NULL, bytes);
  if (!ok) fail(err, BB_ERR_IO, "cannot write ", o->export_path);
  return ok;
}

/* The privacy the server's rounds spent so far (its counter fedavg.dp_rounds: rounds that
 * closed with noise), ε at the run's δ and sampling rate; +inf without noise. */
static double spent(const bb_federation *f, const options *o, uint64_t *rounds) {
  *rounds = bb_node_counter(f->nodes[0], "fedavg.dp_rounds");
  double epsilon = 0, order = 0;
  if (o->dp_noise == 0) return *rounds ? INFINITY : 0;
  if (*rounds && bb_dp_epsilon(o->dp_sample_rate, o->dp_noise, *rounds, o->dp_delta, &epsilon, &order, NULL)) return NAN;
  return epsilon;
}

/* The server, snapshotted between two events and restored into a freshly installed node
 * that takes its place in the network: the run must go on exactly as before. */
static int move_server(bb_federation *f, bool quiet, bb_error *err) {
  uint8_t *snap = NULL;
  size_t len = 0;
  bb_node *fresh = NULL;
  int rc = bb_node_snapshot(f->nodes[0], &snap, &len, err);
  if (!rc) rc = bb_federation_install(f, 0, &fresh, err);
  if (!rc) rc = bb_node_restore(fresh, snap, len, err);
  if (!rc) {
    bb_sim_restart(f->sim, &f->peers[0], fresh);
    bb_node_free(f->nodes[0]);
    f->nodes[0] = fresh;
    if (!quiet) printf("-- server snapshotted (%zu bytes) and restored into a fresh node\n", len);
  } else {
    bb_node_free(fresh);
  }
  bb_buffer_free(NULL, snap);
  return rc;
}

int main(int argc, char **argv) {
  options o;
  if (parse(argc, argv, &o)) return 2;
  bb_error err;
  bb_digits_split d;
  if (bb_digits_split_load(o.data, (size_t)o.clients, 3, o.seed, &d, &err))
    return fprintf(stderr, "federated_digits: %s\n", err.message), 1;
  uint8_t *artifact;
  size_t artifact_len;
  bb_bytes model = {NULL, 0};
  if ((o.onnx_model && bb_read_whole_file(o.onnx_model, &model, &err)) || compile(&o, &artifact, &artifact_len, &err))
    return fprintf(stderr, "federated_digits: %s\n", err.message), 1;
  if (!o.quiet)
    printf("federated_digits: %d clients, %zu training and %zu held-out images, non-IID shards (3 digits each), "
           "loss %.0f%%, %d clients dropping%s%s%s\n",
           o.clients, d.train.n, d.test.n, o.loss * 100, o.drop, o.onnx_model ? ", OnnxModel on " : "",
           o.onnx_model ? o.onnx_model : "", o.async ? ", asynchronous (FedBuff)" : "");

  bb_sim_scenario scenario;
  if (o.scenario && bb_fed_scenario_load(o.scenario, &scenario, &err))
    return fprintf(stderr, "federated_digits: %s\n", err.message), 1;
  const char *const module = o.secure ? "SecureFedDigits" : o.async ? "FedBuffDigits" : "FedDigits";
  char server_target[64], client_target[64];
  snprintf(server_target, sizeof server_target, "%s_server", module);
  snprintf(client_target, sizeof client_target, "%s_clients", module);
  bb_fed_setup setup = {artifact, artifact_len, module, o.secure ? NULL : server_target, client_target, o.clients, o.loss, o.seed,
                        o.quiet, &d, o.onnx_model ? &model : NULL, NULL, o.scenario ? &scenario : NULL,
                        o.secure != 0};
  bb_federation f;
  if (bb_federation_start(&f, &setup, &err)) return fprintf(stderr, "federated_digits: %s\n", err.message), 1;
  /* asynchronous: a client silent this long since it was sent the model is sent it again */
  const uint64_t patience = o.scenario ? 10000000000ull : 1000000000ull;
  int dropped = 0, moved = 0;
  uint64_t noised = 0, seen = 0;
  while (f.progress.round < o.rounds) {
    if (o.async ? bb_federation_step_async(&f, patience, &err) : bb_sim_step(f.sim, &err))
      return fprintf(stderr, "federated_digits: %s\n", err.message), 1;
    /* the accountant runs when a round spent privacy, not at every event */
    noised = o.dp_clip > 0 ? bb_node_counter(f.nodes[0], "fedavg.dp_rounds") : 0;
    if (noised != seen && !o.quiet) {
      const double epsilon = spent(&f, &o, &noised);
      printf("privacy spent: epsilon %.4g at delta %g after %llu rounds\n", epsilon, o.dp_delta, (unsigned long long)noised);
    }
    seen = noised;
    if (o.snapshot_at && !moved && f.progress.round >= o.snapshot_at && !bb_node_has_work(f.nodes[0])) {
      if (move_server(&f, o.quiet, &err)) return fprintf(stderr, "federated_digits: snapshot: %s\n", err.message), 1;
      moved = 1;
    }
    if (o.drop && !dropped && f.progress.round >= o.rounds / 2) {
      for (int k = 0; k < o.drop; k++) bb_sim_crash(f.sim, &f.peers[f.n_peers - 1 - k]);
      dropped = 1;
      if (!o.quiet) printf("-- %d clients dropped out\n", o.drop);
    }
    if (bb_sim_now(f.sim) > bb_fed_time_limit(setup.scenario, o.rounds)) {
      fprintf(stderr, "federated_digits: rounds stopped closing (at round %d)\n", f.progress.round);
      break;
    }
  }
  bb_sim_stats st;
  bb_sim_get_stats(f.sim, &st);
  int ok = f.progress.accuracy >= (float)o.min_accuracy;
  printf("federated_digits: %d rounds, final held-out accuracy %.3f (%s %.2f); %llu messages sent, %llu lost\n",
         f.progress.round, (double)f.progress.accuracy, ok ? ">=" : "below", o.min_accuracy, (unsigned long long)st.sent, (unsigned long long)st.lost);
  if (!o.quiet)
    printf("federated_digits: network: %llu bytes sent, %.0f per round\n", (unsigned long long)st.bytes,
           (double)st.bytes / (f.progress.round ? f.progress.round : 1));
  if (o.dp_clip > 0) {
    const double epsilon = spent(&f, &o, &noised);
    printf("federated_digits: differential privacy: clip %g, noise multiplier %g, %llu rounds accounted, epsilon %.6g at delta %g\n",
           o.dp_clip, o.dp_noise, (unsigned long long)noised, epsilon, o.dp_delta);
    if (isnan(epsilon)) ok = 0;
  }
  if (o.secure) {
    const bb_node *server = f.nodes[0];
    const uint64_t rounds = bb_node_counter(server, "fedavg.secagg_rounds");
    printf("federated_digits: secure aggregation: %llu rounds summed (%llu aborted), %llu updates in their sums, "
           "server sent %llu and received %llu bytes of SecAgg+ messages\n",
           (unsigned long long)rounds, (unsigned long long)bb_node_counter(server, "fedavg.secagg_aborted"),
           (unsigned long long)bb_node_counter(server, "fedavg.secagg_summed"),
           (unsigned long long)bb_node_counter(server, "fedavg.secagg_bytes_sent"),
           (unsigned long long)bb_node_counter(server, "fedavg.secagg_bytes_received"));
    if (!rounds) ok = 0;
  }
  if (o.export_path && !write_export(&f, &o, &err)) {
    fprintf(stderr, "federated_digits: export: %s\n", err.message);
    ok = 0;
  } else if (o.export_path && !o.quiet) {
    printf("federated_digits: wrote %s\n", o.export_path);
  }
  bb_federation_free(&f);
  bb_digits_split_free(&d);
  bb_buffer_free(NULL, artifact);
  free(model.data);
  return ok ? 0 : 1;
}
