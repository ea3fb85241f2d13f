/* The sans-IO engine, each cost beside a named baseline measured in the same run:
 *   dispatch  a target made of a long chain of syscall PassThrough ops, invoked again and
 *             again: ns per op fired, against a C loop doing as many bb_val retain/release
 *             pairs (the least an op can do: take its input, hand it on);
 *   wire      a 4 MiB float32 tensor: value + envelope encode, envelope + value decode,
 *             wire.Send on one node and bb_node_deliver + poll into a wire.Recv on another
 *             (also with the envelope warm in cache), against memcpy of the same 4 MiB
 *             (goal: at least 0.5x memcpy);
 *   timers    bb_node_poll with 1,000 Interval timers pending, when none is due and when
 *             one is, and bb_node_expiry.
 * Every figure is the median of REPS repetitions on a monotonic clock.
 * Native: ./build/bench/bench_runtime; wasm: node build-wasm/bench/bench_runtime.js. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bb/compiler.h"
#include "bb/runtime.h"
#ifdef __GLIBC__
#include <malloc.h>
#endif

#define REPS 15
#define CHAIN 1000            /* PassThrough ops recorded in the dispatch target */
#define CHAIN_RUNS 500        /* invocations per dispatch repetition */
#define TENSOR_FLOATS (1u << 20) /* 4 MiB of float32 */
#define WIRE_RUNS 16          /* 4 MiB transfers per wire repetition */
#define TIMERS 1000
#define TIMER_POLLS 20000     /* polls per timer repetition */
#define PERIOD_NS 1000000000ull

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v) {
  qsort(v, REPS, sizeof *v, by_value);
  return v[REPS / 2];
}

static void fail(const char *what, const bb_error *err) {
  fprintf(stderr, "bench_runtime: %s%s%s\n", what, err ? ": " : "", err ? err->message : "");
  exit(1);
}

/* ---- artifacts ------------------------------------------------------------------------- */

/* x, passed through CHAIN times, to output y. */
static void chain_body(bb_rec *g, void *user) {
  (void)user;
  bb_value x = bb_rec_input(g, "x", NULL);
  for (int i = 0; i < CHAIN; i++) x = bb_rec_pass_through(g, x);
  bb_rec_output(g, "y", x);
}

/* x sent to `peers` as network port "link"; the receiving side passes it to output "got". */
static void link_body(bb_rec *g, void *user) {
  (void)user;
  bb_value peers = bb_rec_input(g, "peers", BB_TYPE_PEER_ID_VEC);
  bb_rec_net_out(g, "link", peers, bb_rec_input(g, "x", NULL));
  bb_rec_output(g, "got", bb_rec_pass_through(g, bb_rec_lookup_output(g, "link")));
}

/* An Interval: each execution of this target re-arms one timer per period. */
static void tick_body(bb_rec *g, void *user) {
  (void)user;
  bb_rec_interval(g, (int64_t)PERIOD_NS);
}

/* Records the module and compiles it: the artifact carries the compiler's passport. */
static uint8_t *compile(bb_module_fn body, const char *name, size_t *len) {
  const bb_module m = {sizeof(bb_module), name, body, NULL, NULL, NULL, 0};
  bb_model *rec = NULL;
  uint8_t *recorded = NULL, *artifact = NULL;
  size_t recorded_len = 0;
  bb_error err;
  if (bb_module_build(&m, NULL, &rec, &err) || bb_model_encode(rec, &recorded, &recorded_len, &err))
    fail(name, &err);
  bb_compiler *c = bb_compiler_new(NULL);
  if (!c || bb_compiler_compile(c, recorded, recorded_len, &artifact, len, &err)) fail(name, &err);
  bb_compiler_free(c);
  bb_buffer_free(NULL, recorded);
  bb_model_free(rec);
  return artifact;
}

static bb_node *install(const uint8_t *artifact, size_t len, uint64_t id, const char *target, bool trace) {
  bb_node_config cfg = {0};
  cfg.struct_size = sizeof cfg;
  cfg.cycle_op_budget = 4 * CHAIN; /* one invocation of the chain is one poll */
  cfg.max_app_event_bytes = 2 * TENSOR_FLOATS * sizeof(float); /* the tensor is invoked in */
  cfg.trace_ops = trace;
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = bb_peer_id_from_u64(id);
  bb_address me = bb_address_p2p(&a.self);
  a.addresses = &me;
  a.n_addresses = 1;
  a.artifact = artifact;
  a.artifact_len = len;
  a.targets = &target;
  a.n_targets = 1;
  a.config = &cfg;
  bb_node *node = NULL;
  bb_error err;
  if (bb_install(&a, &node, NULL, &err)) fail(target, &err);
  if (bb_node_run_bootstrap(node, 0, &err)) fail("bootstrap", &err);
  const bb_step *steps;
  size_t n;
  if (bb_node_poll(node, 0, &steps, &n, &err)) fail("bootstrap poll", &err);
  return node;
}

static size_t count(const bb_step *steps, size_t n, bb_step_kind kind) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += steps[i].kind == kind;
  return k;
}

/* Polls and insists on exactly one step of `kind` (and no failure). */
static const bb_step *poll_for(bb_node *node, uint64_t now, bb_step_kind kind, const char *what) {
  const bb_step *steps;
  size_t n;
  bb_error err;
  if (bb_node_poll(node, now, &steps, &n, &err)) fail(what, &err);
  for (size_t i = 0; i < n; i++)
    if (steps[i].kind != kind && steps[i].kind != BB_STEP_OP_COMPLETED)
      fprintf(stderr, "bench_runtime: %s: unexpected step %s (%s)\n", what, bb_step_kind_name(steps[i].kind),
              steps[i].detail ? steps[i].detail : "");
  if (count(steps, n, kind) != 1) fail(what, NULL);
  for (size_t i = 0; i < n; i++)
    if (steps[i].kind == kind) return &steps[i];
  return NULL;
}

/* ---- 1. dispatch ------------------------------------------------------------------------ */

static void bench_dispatch(void) {
  size_t len;
  uint8_t *artifact = compile(chain_body, "Chain", &len);
  bb_val *x = bb_val_bytes(NULL, "x", 1);
  bb_named_value in = {"x", x};
  bb_error err;
  uint64_t now = 1;

  /* ops per invocation, counted once by a tracing node (tracing itself costs steps) */
  bb_node *traced = install(artifact, len, 1, "Chain", true);
  if (bb_node_invoke(traced, "Chain", &in, 1, now, &err)) fail("invoke", &err);
  const bb_step *steps;
  size_t n, ops;
  if (bb_node_poll(traced, now, &steps, &n, &err)) fail("poll", &err);
  ops = count(steps, n, BB_STEP_OP_COMPLETED);
  bb_node_free(traced);

  bb_node *node = install(artifact, len, 1, "Chain", false);
  double engine[REPS], baseline[REPS];
  for (int r = 0; r < REPS; r++) {
    double t0 = now_ns();
    for (int i = 0; i < CHAIN_RUNS; i++, now++) {
      if (bb_node_invoke(node, "Chain", &in, 1, now, &err)) fail("invoke", &err);
      poll_for(node, now, BB_STEP_APP_EVENT, "chain");
    }
    engine[r] = (now_ns() - t0) / ((double)CHAIN_RUNS * (double)ops);
    t0 = now_ns();
    for (size_t i = 0; i < (size_t)CHAIN_RUNS * ops; i++) bb_val_release(bb_val_retain(x));
    baseline[r] = (now_ns() - t0) / ((double)CHAIN_RUNS * (double)ops);
  }
  double e = median(engine), b = median(baseline);
  printf("dispatch: a %zu-op chain (%d PassThrough + the output's), invoke + poll, %d runs x %d\n", ops, CHAIN,
         CHAIN_RUNS, REPS);
  printf("  %-44s %8.2f ns/op\n", "engine", e);
  printf("  %-44s %8.2f ns/op\n", "baseline: bb_val retain/release pair", b);
  printf("  engine / baseline: %.1fx\n", e / b);
  bb_node_free(node);
  bb_val_release(x);
  bb_buffer_free(NULL, artifact);
}

/* ---- 2. a 4 MiB tensor on the wire -------------------------------------------------------- */

static size_t write_value(const void *value, uint8_t *out) { return bb_val_encode_into(value, out); }

/* memcpy through a pointer the optimiser cannot see through: a copy nobody reads is
 * otherwise removed (clang does so for wasm). */
static void *(*volatile copy_bytes)(void *, const void *, size_t) = memcpy;

static double gbps(double bytes, double ns) { return bytes / ns; }

static void report(const char *what, double ns, double memcpy_ns, double bytes) {
  printf("  %-44s %8.3f ms  %6.2f GB/s  %5.2fx memcpy\n", what, ns / 1e6, gbps(bytes, ns), memcpy_ns / ns);
}

static void bench_wire(void) {
  const double bytes = (double)TENSOR_FLOATS * sizeof(float);
  int64_t numel = TENSOR_FLOATS;
  bb_tensor *t = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 1, &numel);
  if (!t) fail("tensor", NULL);
  float *data = bb_tensor_data(t);
  for (uint32_t i = 0; i < TENSOR_FLOATS; i++) data[i] = (float)i * 0.5f;
  bb_val *v = bb_val_tensor(NULL, t);
  bb_tensor_release(t);
  size_t payload_len = bb_val_encoded_size(v);
  uint8_t *payload = malloc(payload_len), *copy = malloc((size_t)bytes);
  if (!v || !payload || !copy) fail("out of memory", NULL);
  memset(copy, 1, (size_t)bytes);
  memset(payload, 1, payload_len);

  bb_peer_id to = bb_peer_id_from_u64(2);
  uint8_t dest_buf[128], suffix_buf[16];
  bb_address dest_addr = bb_address_p2p(&to), site = {.n = 1};
  site.seg[0].kind = BB_ADDR_SITE;
  site.seg[0].value = 7;
  bb_bytes dest = {dest_buf, bb_address_to_bytes(&dest_addr, dest_buf, sizeof dest_buf)};
  bb_slot_fill fill = {0};
  fill.dest_suffix = (bb_bytes){suffix_buf, bb_address_to_bytes(&site, suffix_buf, sizeof suffix_buf)};
  fill.type_hash = bb_val_kind_hash(BB_VAL_TENSOR);
  bb_envelope env = {0};
  env.dest_peer_addresses = &dest;
  env.n_dest_peer_addresses = 1;
  env.fills = &fill;
  env.n_fills = 1;
  env.has_correlation = true;
  env.correlation_kind = BB_CORR_REQUEST;
  env.wire_req_id = 1;
  env.schema_version = BB_ENVELOPE_SCHEMA_VERSION;

  /* the receiving half: a node running the Recv side of "link" */
  size_t art_len;
  uint8_t *artifact = compile(link_body, "Link", &art_len);
  bb_node *sender = install(artifact, art_len, 1, "Link", false);
  bb_node *receiver = install(artifact, art_len, 2, "Link_peers", false);
  bb_address to_addr = bb_address_p2p(&to);
  bb_error err;
  if (bb_node_add_peer(sender, &to, &to_addr, &err)) fail("add peer", &err);
  bb_val *peers = bb_val_peers(NULL, &to, 1);
  bb_named_value send_in[] = {{"peers", peers}, {"x", v}};
  bb_peer_id from = bb_peer_id_from_u64(1);
  uint8_t *sent = NULL;
  size_t sent_len = 0;
  uint64_t now = 1;

  double copy_ns[REPS], into_ns[REPS], two_step_ns[REPS], decode_ns[REPS], send_ns[REPS], deliver_ns[REPS],
      redeliver_ns[REPS];
  for (int r = 0; r < REPS; r++) {
    double t0 = now_ns();
    for (int i = 0; i < WIRE_RUNS; i++) copy_bytes(copy, data, (size_t)bytes);
    copy_ns[r] = (now_ns() - t0) / WIRE_RUNS;

    /* encode as wire.Send does: the value written straight into the envelope */
    uint8_t *out = NULL;
    size_t out_len = 0;
    fill.payload = (bb_bytes){NULL, payload_len};
    fill.write_payload = write_value;
    fill.payload_ctx = v;
    t0 = now_ns();
    for (int i = 0; i < WIRE_RUNS; i++) {
      if (bb_envelope_encode(&env, NULL, &out, &out_len, &err)) fail("encode", &err);
      bb_buffer_free(NULL, out);
    }
    into_ns[r] = (now_ns() - t0) / WIRE_RUNS;

    /* encode in two steps: the value into a buffer, the buffer into the envelope */
    fill.payload = (bb_bytes){payload, payload_len};
    fill.write_payload = NULL;
    t0 = now_ns();
    for (int i = 0; i < WIRE_RUNS; i++) {
      bb_val_encode_into(v, payload);
      if (bb_envelope_encode(&env, NULL, &out, &out_len, &err)) fail("encode", &err);
      if (i + 1 < WIRE_RUNS) bb_buffer_free(NULL, out);
    }
    two_step_ns[r] = (now_ns() - t0) / WIRE_RUNS;

    t0 = now_ns();
    for (int i = 0; i < WIRE_RUNS; i++) {
      bb_envelope *e = NULL;
      bb_val *back = NULL;
      if (bb_envelope_decode(out, out_len, NULL, NULL, &e, &err) ||
          bb_val_decode(e->fills[0].type_hash, e->fills[0].payload.data, e->fills[0].payload.len, NULL, &back, &err))
        fail("decode", &err);
      bb_val_release(back);
      bb_envelope_free(e, NULL);
    }
    decode_ns[r] = (now_ns() - t0) / WIRE_RUNS;
    bb_buffer_free(NULL, out);

    /* the nodes: wire.Send on one, bb_node_deliver + poll into wire.Recv on the other (each
     * envelope is new: the receiver's replay gate drops a repeated request id) */
    send_ns[r] = deliver_ns[r] = 0;
    for (int i = 0; i < WIRE_RUNS; i++, now++) {
      t0 = now_ns();
      if (bb_node_invoke(sender, "Link", send_in, 2, now, &err)) fail("invoke", &err);
      const bb_step *s = poll_for(sender, now, BB_STEP_SEND, "send");
      send_ns[r] += now_ns() - t0;
      sent = realloc(sent, s->len);
      if (!sent) fail("out of memory", NULL);
      memcpy(sent, s->bytes, s->len);
      sent_len = s->len;
      t0 = now_ns();
      if (bb_node_deliver(receiver, &from, sent, sent_len, now, &err)) fail("deliver", &err);
      const bb_step *got = poll_for(receiver, now, BB_STEP_APP_EVENT, "receive");
      deliver_ns[r] += now_ns() - t0;
      if (bb_val_kind_of(got->value) != BB_VAL_TENSOR || bb_val_as_tensor(got->value)->numel != (int64_t)TENSOR_FLOATS)
        fail("the received value is not the tensor sent", NULL);
    }
    send_ns[r] /= WIRE_RUNS;
    deliver_ns[r] /= WIRE_RUNS;
    /* the last envelope again, each time from another peer (so no replay): its bytes are as
     * warm in cache as the memcpy baseline's, which tells the engine's cost from the cost
     * of touching the sender's fresh buffers */
    redeliver_ns[r] = 0;
    for (int i = 0; i < WIRE_RUNS; i++, now++) {
      bb_peer_id other = bb_peer_id_from_u64(1000 + (uint64_t)(r * WIRE_RUNS + i));
      t0 = now_ns();
      if (bb_node_deliver(receiver, &other, sent, sent_len, now, &err)) fail("deliver", &err);
      poll_for(receiver, now, BB_STEP_APP_EVENT, "receive again");
      redeliver_ns[r] += now_ns() - t0;
    }
    redeliver_ns[r] /= WIRE_RUNS;
  }
  double mc = median(copy_ns);
  printf("wire: a float32[%u] tensor (%zu-byte payload, %zu-byte envelope), %d x %d\n", TENSOR_FLOATS, payload_len,
         sent_len, WIRE_RUNS, REPS);
  printf("  %-44s %8.3f ms  %6.2f GB/s\n", "baseline: memcpy of 4 MiB", mc / 1e6, gbps(bytes, mc));
  report("encode (value written into the envelope)", median(into_ns), mc, bytes);
  report("encode (bb_val_encode_into, then envelope)", median(two_step_ns), mc, bytes);
  report("decode (envelope, then bb_val_decode)", median(decode_ns), mc, bytes);
  report("wire.Send: invoke + poll to a SEND step", median(send_ns), mc, bytes);
  report("bb_node_deliver + poll to the Recv's output", median(deliver_ns), mc, bytes);
  report("the same, one envelope delivered again", median(redeliver_ns), mc, bytes);
  bb_node_free(sender);
  bb_node_free(receiver);
  bb_val_release(peers);
  bb_val_release(v);
  bb_buffer_free(NULL, artifact);
  free(sent);
  free(payload);
  free(copy);
}

/* ---- 3. 1,000 pending timers ---------------------------------------------------------------- */

static void bench_timers(void) {
  size_t len;
  uint8_t *artifact = compile(tick_body, "Tick", &len);
  bb_node *node = install(artifact, len, 1, "Tick", false);
  bb_error err;
  const bb_step *steps;
  size_t n;
  /* execution i arms its timer for i + PERIOD_NS: due times 1 ns apart */
  for (uint64_t i = 1; i <= TIMERS; i++) {
    if (bb_node_invoke(node, "Tick", NULL, 0, i, &err) || bb_node_poll(node, i, &steps, &n, &err))
      fail("tick", &err);
  }
  bb_node_stats st;
  bb_node_stats_get(node, &st);
  if (st.timers != TIMERS) fail("the timers were not all armed", NULL);

  double idle[REPS], due[REPS], expiry[REPS];
  uint64_t now = TIMERS;
  for (int r = 0; r < REPS; r++) {
    /* none due: now stays before the earliest timer */
    double t0 = now_ns();
    for (int i = 0; i < TIMER_POLLS; i++)
      if (bb_node_poll(node, now, &steps, &n, &err)) fail("poll", &err);
    idle[r] = (now_ns() - t0) / TIMER_POLLS;
    /* one due per poll: advance to the next due time; the fired Interval re-arms */
    uint64_t next = bb_node_expiry(node);
    t0 = now_ns();
    for (int i = 0; i < TIMER_POLLS; i++) {
      if (bb_node_poll(node, next, &steps, &n, &err)) fail("poll", &err);
      next = bb_node_expiry(node);
    }
    due[r] = (now_ns() - t0) / TIMER_POLLS;
    now = next - 1;
    t0 = now_ns();
    for (int i = 0; i < TIMER_POLLS; i++) (void)bb_node_expiry(node);
    expiry[r] = (now_ns() - t0) / TIMER_POLLS;
  }
  bb_node_stats_get(node, &st);
  if (st.timers != TIMERS) fail("a timer was lost", NULL);
  double d = median(due);
  printf("timers: %d Interval executions pending, %d polls x %d\n", TIMERS, TIMER_POLLS, REPS);
  printf("  %-44s %8.1f ns\n", "bb_node_poll, none due", median(idle));
  printf("  %-44s %8.1f ns\n", "bb_node_poll + bb_node_expiry, one due", d);
  printf("  %-44s %8.1f ns\n", "bb_node_expiry", median(expiry));
  bb_node_free(node);
  bb_buffer_free(NULL, artifact);
}

int main(void) {
#ifdef __GLIBC__
  /* Keep freed 4 MiB blocks in the process, as a long-running node would: by default glibc
   * hands them back to the kernel and every envelope then pays ~1,000 first-touch page
   * faults, which measures the kernel rather than the codec (docs/PERFORMANCE.md). */
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
  double t0 = now_ns();
  bench_dispatch();
  bench_wire();
  bench_timers();
  printf("(%.1f s)\n", (now_ns() - t0) / 1e9);
  return 0;
}
