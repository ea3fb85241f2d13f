/* Asynchronous against synchronous federated averaging on a population of phones.
 *
 *   bench_async [--clients N] [--seeds K] [--target A] [--buffer K] [--max-staleness S]
 *               [--patience-s P] [--scenario FILE] [--limit-s T]
 *
 * The federation is federated_digits' (label-skewed shards of scikit-learn's digits, three
 * digits each; CpuMlp 64 -> 32 -> 10) with N clients (default 100), each a phone of the
 * scenario (default examples/scenarios/phones.txt: a 20x spread between the 5th and 95th
 * percentile of step times, log-normal uplinks around 2 Mbit/s, 30 % of training runs
 * ending in a drop-out, sessions and gaps). In the same run, on the same population and
 * seeds, three servers:
 *
 *   sync      FedDigits with the templates' default rounds: FedAvg, a round every 200 ms
 *             that closes at N updates or at a 1 s deadline with a quorum of ceil(N/2),
 *             and is abandoned without one
 *   sync-quorumK  the same rounds with a quorum of K (the buffer size) instead: a round
 *             closes at its deadline with as few updates as a FedBuff step takes
 *   fedbuff   FedBuffDigits: FedBuff (buffer K, default 10; max_staleness S, default 16),
 *             each client sent the current model when its update arrives, or after P
 *             seconds of silence (--patience-s, default 2: a phone that dropped out or
 *             was away when its model came)
 *   fedbuff+topk  the same with TopKCodec on the updates (30 %, uint8 values, error
 *             feedback), contributed as steps (updates=deltas)
 *
 * For each: the simulated time at which the global model first reaches the target held-out
 * accuracy (default 0.90) and the bytes sent until then, in all and client to server,
 * averaged over seeds 1..K (default 3); then each against sync. A run that does not reach
 * the target within T simulated seconds (default 600) counts as not reached. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/roles.h"
#include "bb/runtime.h"
#include "bb/sim.h"
#include "federation.h"
#include "options.h"
#include "programs/examples.h"
#include "programs/fedavg_round.h"

typedef enum variant { SYNC, SYNC_SMALL, FEDBUFF, FEDBUFF_TOPK, N_VARIANTS } variant;
static const char *const NAMES[N_VARIANTS] = {"sync", "sync-quorumK", "fedbuff", "fedbuff+topk"};
static const char *const MODULES[N_VARIANTS] = {"FedDigits", "FedDigits", "FedBuffDigits", "FedBuffDigitsTopK"};

typedef struct options {
  int clients, seeds, buffer, max_staleness, limit_s, quiet;
  double target, patience_s;
  const char *scenario;
} options;

typedef struct outcome {
  bool reached;
  double seconds, accuracy; /* accuracy: the last one seen */
  uint64_t bytes, upload_bytes, versions;
  uint64_t stale, abandoned;
} outcome;

static void fedbuff_digits_topk(bb_rec *g, void *user) {
  (void)user;
  bbi_fedbuff_record(g, true);
}

static int compile(const options *o, variant v, uint8_t **artifact, size_t *len, bb_error *err) {
  static const bb_module TOPK = {sizeof(bb_module), "FedBuffDigitsTopK", fedbuff_digits_topk, NULL, NULL, NULL, 0};
  const bb_example *ex = &BB_EXAMPLE_FEDERATED_DIGITS;
  bb_model *recorded = NULL;
  uint8_t *bytes = NULL;
  size_t n = 0;
  const bool sync = v == SYNC || v == SYNC_SMALL;
  int rc = bb_module_build(sync ? ex->modules[0] : v == FEDBUFF ? ex->modules[1] : &TOPK, NULL, &recorded, err);
  if (!rc) rc = bb_model_encode(recorded, &bytes, &n, err);
  bb_model_free(recorded);
  bb_compiler *c = rc ? NULL : bb_compiler_new(NULL);
  if (!rc && !c) rc = err->code = BB_ERR_NOMEM;
  char config[128];
  if (sync) /* the templates' defaults: federatedAveraging({ clients }) (quorum: half the clients) */
    snprintf(config, sizeof config, "quorum=%d,target=%d,deadline_ms=1000,no_quorum=abandon,init=model",
             v == SYNC ? (o->clients + 1) / 2 : o->buffer, o->clients);
  else
    snprintf(config, sizeof config, "buffer=%d,max_staleness=%d,init=model%s", o->buffer, o->max_staleness,
             v == FEDBUFF_TOPK ? ",updates=deltas" : "");
  if (!rc && sync) rc = ex->configure(c, 0, err);
  if (!rc && sync) rc = bb_compiler_unbind(c, "aggregator", err);
  if (!rc && sync) rc = bb_compiler_bind_aggregator(c, "aggregator", "FedAvg", config, err);
  if (!rc && !sync)
    rc = bbi_fedbuff_configure(c, "CpuMlp", BB_FEDERATED_DIGITS_MLP_CONFIG, config, v == FEDBUFF_TOPK ? "k=0.3" : NULL,
                               err);
  if (!rc) rc = bb_compiler_compile(c, bytes, n, artifact, len, err);
  bb_compiler_free(c);
  bb_buffer_free(NULL, bytes);
  return rc;
}

static void count_upload(void *user, const bb_sim_delivery *d) {
  uint64_t from = 0;
  if (bb_peer_id_as_u64(d->from, &from) && from != 1) *(uint64_t *)user += d->len;
}

static int run(const options *o, variant v, const bb_sim_scenario *scenario, uint64_t seed, outcome *out,
               bb_error *err) {
  memset(out, 0, sizeof *out);
  bb_digits_split d;
  uint8_t *artifact = NULL;
  size_t len = 0;
  int rc = bb_digits_split_load(NULL, (size_t)o->clients, 3, seed, &d, err);
  if (rc) return rc;
  if ((rc = compile(o, v, &artifact, &len, err))) {
    bb_digits_split_free(&d);
    return rc;
  }
  char server[64], client[64];
  snprintf(server, sizeof server, "%s_server", MODULES[v]);
  snprintf(client, sizeof client, "%s_clients", MODULES[v]);
  bb_sim_scenario sc = *scenario;
  sc.seed = seed; /* the same population and network for every variant of one seed */
  bb_fed_setup setup = {artifact, len, MODULES[v], server, client, o->clients, 0, seed, true, &d, NULL, NULL, &sc, false};
  bb_federation f;
  uint64_t upload = 0;
  rc = bb_federation_start(&f, &setup, err);
  if (!rc) bb_sim_set_tracer(f.sim, count_upload, &upload);
  const uint64_t limit = (uint64_t)o->limit_s * 1000000000ull;
  const bool sync = v == SYNC || v == SYNC_SMALL;
  while (!rc && bb_sim_now(f.sim) < limit) {
    rc = sync ? bb_sim_step(f.sim, err) : bb_federation_step_async(&f, (uint64_t)(o->patience_s * 1e9), err);
    if (rc == 1) { /* nothing left to happen */
      rc = 0;
      break;
    }
    if (f.progress.accuracy >= o->target) {
      out->reached = true;
      break;
    }
  }
  if (!rc) {
    bb_sim_stats st;
    bb_sim_get_stats(f.sim, &st);
    out->seconds = (double)bb_sim_now(f.sim) / 1e9;
    out->accuracy = f.progress.accuracy;
    out->bytes = st.bytes;
    out->upload_bytes = upload;
    out->versions = (uint64_t)f.progress.round;
    const char *prefix = sync ? "fedavg" : "fedbuff";
    char name[64];
    snprintf(name, sizeof name, "%s.refused_stale", prefix);
    out->stale = bb_node_counter(f.nodes[0], name);
    out->abandoned = bb_node_counter(f.nodes[0], "fedavg.rounds_abandoned");
  }
  bb_federation_free(&f);
  bb_digits_split_free(&d);
  bb_buffer_free(NULL, artifact);
  return rc;
}

static int usage(void) {
  fprintf(stderr, "usage: bench_async [--clients N] [--seeds K] [--target A] [--buffer K] [--max-staleness S] "
                  "[--patience-s P] [--scenario FILE] [--limit-s T]\n");
  return 2;
}

int main(int argc, char **argv) {
  options o = {100, 3, 10, 16, 600, 0, 0.90, 2, BB_SOURCE_DIR "/examples/scenarios/phones.txt"};
  const bb_option table[] = {{"--clients", BB_OPTION_INT, &o.clients},     {"--seeds", BB_OPTION_INT, &o.seeds},
                             {"--target", BB_OPTION_DOUBLE, &o.target},    {"--buffer", BB_OPTION_INT, &o.buffer},
                             {"--max-staleness", BB_OPTION_INT, &o.max_staleness},
                             {"--scenario", BB_OPTION_STRING, &o.scenario}, {"--limit-s", BB_OPTION_INT, &o.limit_s},
                             {"--patience-s", BB_OPTION_DOUBLE, &o.patience_s}};
  if (bb_options_parse(argc, argv, table, sizeof table / sizeof *table, &o.quiet) || o.clients < 2 ||
      o.clients > 1000 || o.seeds < 1 || o.buffer < 1 || o.max_staleness < 0 || o.limit_s < 1 ||
      !(o.patience_s > 0))
    return usage();
  bb_error err;
  bb_sim_scenario scenario;
  if (bb_fed_scenario_load(o.scenario, &scenario, &err)) return fprintf(stderr, "bench_async: %s\n", err.message), 1;
  printf("bench_async: %d phones (%s), target %.2f held-out accuracy, FedBuff buffer %d, max_staleness %d, "
         "%d seeds, limit %d s simulated\n",
         o.clients, o.scenario, o.target, o.buffer, o.max_staleness, o.seeds, o.limit_s);
  double secs[N_VARIANTS] = {0}, bytes[N_VARIANTS] = {0}, up[N_VARIANTS] = {0};
  int reached[N_VARIANTS] = {0};
  for (int s = 1; s <= o.seeds; s++)
    for (int v = 0; v < N_VARIANTS; v++) {
      outcome r;
      if (run(&o, (variant)v, &scenario, (uint64_t)s, &r, &err))
        return fprintf(stderr, "bench_async: %s seed %d: %s\n", NAMES[v], s, err.message), 1;
      printf("  seed %d %-13s %s %6.1f s (accuracy %.3f)  %8.2f MB sent  %7.2f MB uploaded  %4llu versions "
             "(%llu rounds abandoned)  %llu refused stale\n",
             s, NAMES[v], r.reached ? "reached at" : "not within", r.seconds, (double)r.accuracy,
             (double)r.bytes / 1e6, (double)r.upload_bytes / 1e6, (unsigned long long)r.versions,
             (unsigned long long)r.abandoned, (unsigned long long)r.stale);
      fflush(stdout);
      if (!r.reached) continue;
      reached[v]++;
      secs[v] += r.seconds;
      bytes[v] += (double)r.bytes;
      up[v] += (double)r.upload_bytes;
    }
  /* the peer of the ratios: the templates' sync if it reached the target, else sync-quorumK */
  const variant peer = reached[SYNC] ? SYNC : SYNC_SMALL;
  printf("\n%-13s %8s %10s %11s %15s   against %s: %s %s\n", "server", "reached", "time (s)", "sent (MB)",
         "uploaded (MB)", NAMES[peer], "time", "uploaded");
  for (int v = 0; v < N_VARIANTS; v++) {
    if (!reached[v]) {
      printf("%-13s %5d/%-2d %10s\n", NAMES[v], 0, o.seeds, "-");
      continue;
    }
    const double t = secs[v] / reached[v], b = bytes[v] / reached[v] / 1e6, u = up[v] / reached[v] / 1e6;
    const double t0 = reached[peer] ? secs[peer] / reached[peer] : NAN;
    const double u0 = reached[peer] ? up[peer] / reached[peer] / 1e6 : NAN;
    printf("%-13s %5d/%-2d %10.1f %11.2f %15.2f   %.2fx faster, %.2fx fewer bytes up\n", NAMES[v], reached[v], o.seeds,
           t, b, u, t0 / t, u0 / u);
  }
  return 0;
}
