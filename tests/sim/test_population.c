/* A phone population in the simulator (bb_sim_set_device, scenario files): the scenario
 * parser reads every key and refuses by line what it cannot take; the devices a scenario
 * draws have the spread it specifies (the median and log-σ of their step times and
 * uplinks, a 20× spread between the 5th and 95th percentile); and in a running simulator
 * devices keep the online share their sessions and gaps imply (more of them around the
 * diurnal peak), drop out of the share of trained polls the scenario says, compute for
 * steps × step time before what they trained leaves, and send at their own uplink's rate.
 * Runs are deterministic: the same seed gives the same course. */
#include <math.h>
#include <stdlib.h>

#include "../runtime/rttest.h"
#include "bb/dataset.h"
#include "bb/roles.h"
#include "bb/sim.h"

#define MS 1000000ull
#define MINUTE (60000ull * MS)
#define HOUR (60 * MINUTE)

/* ---- the scenario file ---------------------------------------------------------------- */

static const char PHONES[] = "# a phone population\n"
                             "seed = 7\n"
                             "latency_ms = 40   # one way\n"
                             "jitter_ms = 20\n"
                             "loss = 0.01\n"
                             "step_ms = 20\n"
                             "step_spread = 20\n"
                             "\n"
                             "upload_kbit_s = 2000\r\n"
                             "upload_sigma = 0.5\n"
                             "dropout = 0.3\n"
                             "session_s = 600\n"
                             "gap_s = 300\n"
                             "diurnal = 0.5\n"
                             "peak_hour = 20\n";

static void test_parse(void) {
  bb_sim_scenario sc;
  bb_error err;
  CHECK_MSG(bb_sim_scenario_parse(PHONES, sizeof PHONES - 1, &sc, &err) == 0, "%s", err.message);
  CHECK_EQ_INT(sc.seed, 7);
  CHECK_EQ_INT(sc.latency_ns, 40 * MS);
  CHECK_EQ_INT(sc.jitter_ns, 20 * MS);
  CHECK(sc.loss == 0.01);
  CHECK_EQ_INT(sc.step_ns, 20 * MS);
  CHECK(fabs(sc.step_sigma - log(20.0) / (2 * 1.6448536269514722)) < 1e-12);
  CHECK_EQ_INT(sc.upload_bytes_per_s, 250000);
  CHECK(sc.upload_sigma == 0.5 && sc.dropout == 0.3 && sc.diurnal == 0.5);
  CHECK_EQ_INT(sc.session_mean_ns, 10 * MINUTE);
  CHECK_EQ_INT(sc.gap_mean_ns, 5 * MINUTE);
  CHECK_EQ_INT(sc.diurnal_peak_ns, 20 * HOUR);

  bb_sim_config cfg = {0};
  bb_sim_scenario_network(&sc, &cfg);
  CHECK(cfg.seed == 7 && cfg.latency_ns == 40 * MS && cfg.loss == 0.01);
  const char short_day[] = "diurnal = 0.2\nday_s = 600\npeak_hour = 6\n";
  CHECK(bb_sim_scenario_parse(short_day, sizeof short_day - 1, &sc, &err) == 0);
  CHECK(sc.day_ns == 600000 * MS && sc.diurnal_peak_ns == 150000 * MS); /* a quarter of the day */
}

static void refused(const char *text, const char *needle) {
  bb_sim_scenario sc;
  bb_error err;
  CHECK_MSG(bb_sim_scenario_parse(text, strlen(text), &sc, &err) == BB_ERR_INVALID_ARGUMENT, "'%s' was accepted", text);
  CHECK_MSG(strstr(err.message, needle) != NULL, "'%s': %s", text, err.message);
}

static void test_parse_refusals(void) {
  refused("seed = 1\nstep_ms = 20\nstepms = 3\n", "line 3: unknown key 'stepms'");
  refused("dropout = 1.5\n", "line 1: dropout = '1.5' is not a probability");
  refused("dropout = 0.2\n", "gap_s");
  refused("step_ms = -3\n", "not a number at least 0");
  refused("step_ms = 2x\n", "not a number");
  refused("step_ms = nan\n", "not a number");
  refused("step_spread = 0.5\n", "a spread");
  refused("step_sigma = 1\nstep_spread = 20\n", "line 2: 'step_spread' sets what 'step_sigma' set already");
  refused("loss = 0.1\nloss = 0.2\n", "line 2");
  refused("diurnal = 1\n", "amplitude");
  refused("peak_hour = 24\n", "an hour");
  refused("latency_ms 40\n", "key = value");
  refused("seed = 1.5\n", "whole number");
}

/* ---- the devices a scenario draws ----------------------------------------------------- */

static int compare(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void test_device_spread(void) {
  bb_sim_scenario sc;
  bb_error err;
  CHECK(bb_sim_scenario_parse(PHONES, sizeof PHONES - 1, &sc, &err) == 0);
  enum { N = 20000 };
  double *step = malloc(N * sizeof *step), *up = malloc(N * sizeof *up);
  double mean = 0, mean_up = 0;
  for (int i = 0; i < N; i++) {
    bb_sim_device d;
    bb_sim_scenario_device(&sc, (uint64_t)i, &d);
    CHECK(d.dropout == 0.3 && d.session_mean_ns == 10 * MINUTE && d.gap_mean_ns == 5 * MINUTE);
    step[i] = log((double)d.step_ns);
    up[i] = log((double)d.upload_bytes_per_s);
    mean += step[i] / N;
    mean_up += up[i] / N;
  }
  double var = 0, var_up = 0;
  for (int i = 0; i < N; i++) {
    var += (step[i] - mean) * (step[i] - mean) / (N - 1);
    var_up += (up[i] - mean_up) * (up[i] - mean_up) / (N - 1);
  }
  /* standard errors: σ/√N ≈ 0.006 for the mean, σ/√(2N) relative for σ (0.5 %) */
  CHECK_MSG(fabs(mean - log(20e6)) < 0.03, "median step %g ms", exp(mean) / 1e6);
  CHECK_MSG(fabs(sqrt(var) / sc.step_sigma - 1) < 0.03, "step log-σ %g, want %g", sqrt(var), sc.step_sigma);
  CHECK_MSG(fabs(mean_up - log(250000.0)) < 0.03, "median uplink %g B/s", exp(mean_up));
  CHECK_MSG(fabs(sqrt(var_up) / 0.5 - 1) < 0.03, "uplink log-σ %g", sqrt(var_up));
  qsort(step, N, sizeof *step, compare);
  const double spread = exp(step[N * 95 / 100] - step[N * 5 / 100]);
  CHECK_MSG(fabs(spread / 20 - 1) < 0.08, "p95 / p5 of the step times is %g, want 20", spread);
  /* the same scenario and index give the same device */
  bb_sim_device a, b;
  bb_sim_scenario_device(&sc, 42, &a);
  bb_sim_scenario_device(&sc, 42, &b);
  CHECK(memcmp(&a, &b, sizeof a) == 0);
  bb_sim_scenario_device(&sc, 43, &b);
  CHECK(a.step_ns != b.step_ns && a.seed != b.seed);
  free(step);
  free(up);
}

/* ---- devices in a running simulator ---------------------------------------------------- */

/* An idle module: nodes that never have work, so only the devices' sessions move time. */
static void idle_body(bb_rec *g, void *user) {
  (void)user;
  bb_rec_output(g, "y", bb_rec_pass_through(g, bb_rec_input(g, "x", "ai.bytesandbrains.tensor.f32")));
}
static const bb_module IDLE = {sizeof(bb_module), "Idle", idle_body, NULL, NULL, NULL, 0};
static int configure_idle(bb_compiler *c, const void *user, bb_error *err) {
  (void)c, (void)user, (void)err;
  return 0;
}

/* The share of n devices online at hours of the day, sampled every 10 minutes over days. */
static void online_share(double diurnal, double *at_peak, double *at_trough, double *overall) {
  size_t len = 0;
  uint8_t *art = compile_test_module(&IDLE, configure_idle, NULL, &len);
  enum { N = 200, DAYS = 3 };
  bb_sim_config cfg = {0};
  cfg.struct_size = sizeof cfg;
  cfg.seed = 1;
  bb_sim *sim = NULL;
  bb_error err;
  CHECK(bb_sim_new(&cfg, &sim, &err) == 0);
  bb_node *nodes[N];
  bb_peer_id peers[N];
  const char *targets[] = {"Idle"};
  for (int i = 0; i < N; i++) {
    peers[i] = bb_peer_id_from_u64((uint64_t)i + 1);
    nodes[i] = install_peer(art, len, (uint64_t)i + 1, targets, 1, NULL, NULL);
    CHECK(nodes[i] && bb_sim_attach(sim, nodes[i], &peers[i], &err) == 0);
  }
  bb_sim_scenario sc = {0};
  sc.struct_size = sizeof sc;
  sc.seed = 99;
  sc.session_mean_ns = 10 * MINUTE;
  sc.gap_mean_ns = 10 * MINUTE;
  sc.diurnal = diurnal;
  sc.diurnal_peak_ns = 20 * HOUR;
  CHECK(bb_sim_scenario_apply(sim, &sc, peers, N, &err) == 0);
  double peak = 0, trough = 0, all = 0;
  int n_peak = 0, n_trough = 0, n_all = 0;
  for (uint64_t t = 2 * HOUR; t < DAYS * 24 * HOUR; t += 10 * MINUTE) {
    CHECK(bb_sim_run_until(sim, t, &err) == 0);
    int online = 0;
    for (int i = 0; i < N; i++) online += bb_sim_alive(sim, &peers[i]);
    const uint64_t hour = t / HOUR % 24;
    all += online, n_all++;
    if (hour >= 19 && hour < 21) peak += online, n_peak++;
    if (hour >= 7 && hour < 9) trough += online, n_trough++;
  }
  *at_peak = peak / n_peak / N;
  *at_trough = trough / n_trough / N;
  *overall = all / n_all / N;
  uint64_t sessions = 0;
  for (int i = 0; i < N; i++) {
    bb_sim_device_stats st;
    CHECK(bb_sim_get_device_stats(sim, &peers[i], &st) == 0);
    sessions += st.sessions;
  }
  /* a session and a gap take 20 minutes on average: about 3 sessions an hour */
  CHECK_MSG(sessions > (uint64_t)N * DAYS * 24 * 2 && sessions < (uint64_t)N * DAYS * 24 * 4, "%llu sessions",
            (unsigned long long)sessions);
  bb_sim_free(sim);
  for (int i = 0; i < N; i++) bb_node_free(nodes[i]);
  free(art);
}

static void test_sessions_and_the_day(void) {
  double peak, trough, overall;
  /* without a diurnal swing: on / (on + off) = 1/2, at every hour */
  online_share(0, &peak, &trough, &overall);
  CHECK_MSG(fabs(overall - 0.5) < 0.03, "online share %g, want 0.5", overall);
  CHECK_MSG(fabs(peak - trough) < 0.06, "peak %g, trough %g without a swing", peak, trough);
  /* a = 0.6: gaps are 1.6× shorter at the peak, 0.4× at the trough (12 hours off): the
   * share follows on / (on + off / d) = 0.615 and 0.286, days being long beside sessions */
  online_share(0.6, &peak, &trough, &overall);
  CHECK_MSG(fabs(peak - 0.615) < 0.05, "online at the peak %g, want 0.615", peak);
  CHECK_MSG(fabs(trough - 0.286) < 0.05, "online at the trough %g, want 0.286", trough);
}

/* A device that trains every 1 ms (CpuMlp, 4 steps a Fit) and sends what it trained to a sink. */
static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};
static void trainer_body(bb_rec *g, void *user) {
  (void)user;
  bb_value tick = bb_rec_interval(g, (int64_t)MS);
  bb_value trained, samples;
  CHECK(bb_rec_model_fit(g, &MODEL, bb_rec_model_params_after(g, &MODEL, tick), &trained, &samples) == 0);
  bb_rec_net_out(g, "trained", bb_rec_input(g, "sink", BB_TYPE_PEER_ID_VEC), trained);
}
static const bb_module TRAINER = {sizeof(bb_module), "Trainer", trainer_body, NULL, NULL, NULL, 0};
static int configure_trainer(bb_compiler *c, const void *user, bb_error *err) {
  (void)user;
  static const bb_component_port f32[] = {{"tensor", "ai.bytesandbrains.tensor.f32"}};
  static const bb_component_port sample[] = {{"sample", "ai.bytesandbrains.tensor.f32"}};
  bb_component_decl mlp = {sizeof mlp, "CpuMlp", f32, 1, NULL, 0};
  bb_component_decl src = {sizeof src, "ArraySource", sample, 1, NULL, 0};
  int rc = bb_compiler_declare_component(c, &mlp, err) || bb_compiler_declare_component(c, &src, err) ||
           bb_compiler_bind_model(c, "model", "CpuMlp", "inputs=4,hidden=8,outputs=2,fit_steps=4,data=data", err) ||
           bb_compiler_bind_data_source(c, "data", "ArraySource", "batch=4", err);
  return rc ? err->code : 0;
}

typedef struct arrivals {
  uint64_t n, late;        /* deliveries; those that left before the compute ended */
  uint64_t min_gap_ns;     /* least arrival − send over the deliveries */
  uint64_t last_sent;
  uint64_t spacing_short;  /* deliveries sent less than the compute time after the one before */
  uint64_t compute_ns;
  size_t len;
} arrivals;

static void on_delivery(void *user, const bb_sim_delivery *d) {
  arrivals *a = user;
  a->n++;
  a->len = d->len;
  const uint64_t gap = d->arrived_ns - d->sent_ns;
  if (!a->min_gap_ns || gap < a->min_gap_ns) a->min_gap_ns = gap;
  if (a->last_sent && d->sent_ns - a->last_sent < a->compute_ns) a->spacing_short++;
  a->last_sent = d->sent_ns;
}

/* A trainer device and a sink on a simulator; runs for `ms` and returns what arrived. */
static arrivals run_trainer(const bb_sim_device *device, uint64_t ms, bb_sim_device_stats *stats, uint64_t *digest) {
  size_t len = 0;
  uint8_t *art = compile_test_module(&TRAINER, configure_trainer, NULL, &len);
  bb_dataset ds;
  CHECK(bb_dataset_init(&ds, 32, 4, 1, NULL, NULL) == 0);
  for (size_t i = 0; i < 32 * 4; i++) ds.features[i] = (float)(i % 7) / 7.0f;
  for (size_t i = 0; i < 32; i++) ds.labels[i] = (float)(i % 2);
  const char *targets[] = {"Trainer"};
  bb_install_args a = install_args(art, len, 1, targets, 1, shipped_registry());
  bb_slot_config data = {"data", NULL, &ds};
  a.slots = &data;
  a.n_slots = 1;
  bb_address self = p2p_address(&a.self);
  a.addresses = &self;
  a.n_addresses = 1;
  bb_node *trainer = NULL, *sink = NULL;
  bb_error err;
  CHECK_MSG(bb_install(&a, &trainer, NULL, &err) == 0, "%s", err.message);
  const char *sink_targets[] = {"Trainer"};
  a = install_args(art, len, 2, sink_targets, 1, shipped_registry());
  a.slots = &data;
  a.n_slots = 1;
  CHECK_MSG(bb_install(&a, &sink, NULL, &err) == 0, "%s", err.message);
  bb_peer_id tp = bb_peer_id_from_u64(1), sp = bb_peer_id_from_u64(2);
  bb_address sa = p2p_address(&sp);
  CHECK(bb_node_add_peer(trainer, &sp, &sa, &err) == 0);
  bb_sim_config cfg = {0};
  cfg.struct_size = sizeof cfg;
  cfg.seed = 5;
  cfg.latency_ns = MS;
  bb_sim *sim = NULL;
  CHECK(bb_sim_new(&cfg, &sim, &err) == 0);
  arrivals out = {0};
  out.compute_ns = 4 * device->step_ns;
  bb_sim_set_tracer(sim, on_delivery, &out);
  CHECK(bb_sim_attach(sim, trainer, &tp, &err) == 0 && bb_sim_attach(sim, sink, &sp, &err) == 0);
  CHECK_MSG(bb_sim_set_device(sim, &tp, device, &err) == 0, "%s", err.message);
  bb_val *to = bb_val_peers(NULL, &sp, 1);
  bb_named_value in = {"sink", to};
  CHECK(bb_node_invoke(trainer, "Trainer", &in, 1, 0, &err) == 0);
  bb_val_release(to);
  CHECK(bb_sim_run_until(sim, ms * MS, &err) == 0);
  CHECK(bb_sim_get_device_stats(sim, &tp, stats) == 0);
  if (digest) *digest = bb_sim_digest(sim);
  bb_sim_free(sim);
  bb_node_free(trainer);
  bb_node_free(sink);
  bb_dataset_free(&ds);
  free(art);
  return out;
}

static void test_compute_time(void) {
  bb_sim_device d = {0};
  d.struct_size = sizeof d;
  d.step_ns = 5 * MS; /* 4 steps a Fit: 20 ms of compute every round */
  bb_sim_device_stats st;
  arrivals a = run_trainer(&d, 1000, &st, NULL);
  /* 1 ms ticks, but a round takes 20 ms of compute: about 50 rounds in 1 s, never closer */
  CHECK_MSG(st.trained_polls >= 45 && st.trained_polls <= 51, "%llu trained polls", (unsigned long long)st.trained_polls);
  CHECK_EQ_INT(st.steps, 4 * st.trained_polls);
  CHECK_EQ_INT(st.busy_ns, st.steps * d.step_ns);
  CHECK(a.n >= st.trained_polls - 2 && a.spacing_short == 0);
  CHECK_EQ_INT(st.dropouts, 0);
}

static void test_uplink(void) {
  bb_sim_device d = {0};
  d.struct_size = sizeof d;
  d.upload_bytes_per_s = 100000; /* 100 kB/s */
  bb_sim_device_stats st;
  arrivals a = run_trainer(&d, 300, &st, NULL);
  CHECK(a.n > 0 && a.len > 100);
  /* each message takes len / bandwidth on the device's link, plus the 1 ms latency */
  const uint64_t tx = (uint64_t)((double)a.len * 1e9 / 100000.0);
  CHECK_MSG(a.min_gap_ns >= tx + MS, "a %zu-byte message arrived %llu ns after it left (its link needs %llu)", a.len,
            (unsigned long long)a.min_gap_ns, (unsigned long long)(tx + MS));
}

static void test_dropouts(void) {
  bb_sim_device d = {0};
  d.struct_size = sizeof d;
  d.step_ns = MS / 4;
  d.dropout = 0.3;
  d.gap_mean_ns = 2 * MS;
  d.seed = 11;
  bb_sim_device_stats st;
  uint64_t digest = 0, again = 0;
  arrivals a = run_trainer(&d, 1500, &st, &digest);
  const double share = (double)st.dropouts / (double)st.trained_polls;
  CHECK_MSG(st.trained_polls > 400, "%llu trained polls", (unsigned long long)st.trained_polls);
  CHECK_MSG(fabs(share - 0.3) < 0.05, "%llu drop-outs of %llu trained polls: %g, want 0.3", (unsigned long long)st.dropouts,
            (unsigned long long)st.trained_polls, share);
  /* what a drop-out computed never left, and what was still in flight when the device went
   * away was lost with it (as a crash loses it) */
  CHECK_EQ_INT(st.sends_lost, st.dropouts);
  CHECK_MSG(a.n <= st.trained_polls - st.dropouts && 2 * a.n >= st.trained_polls - st.dropouts,
            "%llu arrived, %llu trained, %llu dropped", (unsigned long long)a.n, (unsigned long long)st.trained_polls,
            (unsigned long long)st.dropouts);
  /* the same seed, the same course; another device seed, another */
  bb_sim_device_stats st2;
  run_trainer(&d, 1500, &st2, &again);
  CHECK(digest == again && st2.dropouts == st.dropouts);
  d.seed = 12;
  run_trainer(&d, 1500, &st2, &again);
  CHECK(digest != again);
}

static void test_device_refusals(void) {
  bb_sim_config cfg = {0};
  cfg.struct_size = sizeof cfg;
  bb_sim *sim = NULL;
  bb_error err;
  CHECK(bb_sim_new(&cfg, &sim, &err) == 0);
  bb_peer_id p = bb_peer_id_from_u64(1);
  bb_sim_device d = {0};
  d.struct_size = sizeof d;
  CHECK(bb_sim_set_device(sim, &p, &d, &err) == BB_ERR_NOT_FOUND);
  size_t len = 0;
  uint8_t *art = compile_test_module(&IDLE, configure_idle, NULL, &len);
  const char *targets[] = {"Idle"};
  bb_node *n = install_peer(art, len, 1, targets, 1, NULL, NULL);
  CHECK(bb_sim_attach(sim, n, &p, &err) == 0);
  d.dropout = 2;
  CHECK(bb_sim_set_device(sim, &p, &d, &err) == BB_ERR_INVALID_ARGUMENT);
  d.dropout = 0.1;
  CHECK(bb_sim_set_device(sim, &p, &d, &err) == BB_ERR_INVALID_ARGUMENT && strstr(err.message, "gap_mean_ns"));
  d.gap_mean_ns = MS;
  d.diurnal = 1;
  CHECK(bb_sim_set_device(sim, &p, &d, &err) == BB_ERR_INVALID_ARGUMENT);
  d.diurnal = 0;
  d.struct_size = sizeof d + 8;
  CHECK(bb_sim_set_device(sim, &p, &d, &err) == BB_ERR_INVALID_ARGUMENT);
  bb_sim_device_stats st;
  CHECK(bb_sim_get_device_stats(sim, &p, &st) == BB_ERR_NOT_FOUND);
  bb_sim_free(sim);
  bb_node_free(n);
  free(art);
}

int main(void) {
  RUN(test_parse);
  RUN(test_parse_refusals);
  RUN(test_device_spread);
  RUN(test_sessions_and_the_day);
  RUN(test_compute_time);
  RUN(test_uplink);
  RUN(test_dropouts);
  RUN(test_device_refusals);
  return bb_test_finish();
}
