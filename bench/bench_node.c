/* The runtime's costs, each against the floor it cannot beat, in one run:
 *   1. engine dispatch per op: a chain of 1,000 PassThrough ops run again and again,
 *      against a plain C loop doing one refcount retain/release pair per op;
 *   2. a 4 MiB float32 tensor through the wire: value + envelope encode, and envelope +
 *      value decode, against memcpy of the same 4 MiB (goal: at least 0.5× memcpy);
 *      and the whole receive path (bb_node_deliver + poll into a wire.Recv);
 *   3. poll with 1,000 pending timers: when none is due, when one is, and bb_node_expiry.
 * Native: ./build/bench/bench_node; wasm: node build-wasm/bench/bench_node.js. */
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

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return v[n / 2];
}

static void die(const char *what, const bb_error *err) {
  fprintf(stderr, "bench_node: %s: %s\n", what, err ? err->message : "");
  exit(1);
}

/* Records a module and compiles it (permissive types: the bench only moves values). */
static uint8_t *compile(const bb_module *m, size_t *len) {
  bb_model *rec = NULL;
  bb_error err;
  uint8_t *bytes = NULL, *out = NULL;
  size_t blen = 0;
  if (bb_module_build(m, NULL, &rec, &err) || bb_model_encode(rec, &bytes, &blen, &err)) die("record", &err);
  bb_compiler *c = bb_compiler_new(NULL);
  bb_compiler_set_permissive_types(c, true);
  if (bb_compiler_compile(c, bytes, blen, &out, len, &err)) die("compile", &err);
  bb_compiler_free(c);
  bb_buffer_free(NULL, bytes);
  bb_model_free(rec);
  return out;
}

static bb_node *install(const uint8_t *art, size_t len, uint64_t id, const char *target) {
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = bb_peer_id_from_u64(id);
  bb_address self = bb_address_p2p(&a.self);
  a.addresses = &self;
  a.n_addresses = 1;
  a.artifact = art;
  a.artifact_len = len;
  a.targets = &target;
  a.n_targets = 1;
  bb_node_config cfg = {.struct_size = sizeof cfg, .cycle_op_budget = 1u << 30, .max_app_event_bytes = 8u << 20};
  a.config = &cfg;
  bb_node *n;
  bb_error err;
  if (bb_install(&a, &n, NULL, &err)) die("install", &err);
  return n;
}

/* ---- 1. dispatch ------------------------------------------------------------------------- */

#define CHAIN 1000

static void chain_body(bb_rec *g, void *user) {
  (void)user;
  bb_value v = bb_rec_input(g, "x", bb_tensor_type(BB_DTYPE_FLOAT));
  for (int i = 0; i < CHAIN; i++) v = bb_rec_pass_through(g, v);
  bb_rec_output(g, "y", v);
}

static void bench_dispatch(void) {
  static const bb_module CHAIN_MODULE = {sizeof(bb_module), "Chain", chain_body, NULL, NULL, NULL, 0};
  size_t len;
  uint8_t *art = compile(&CHAIN_MODULE, &len);
  bb_node *n = install(art, len, 1, "Chain");
  int64_t one = 1;
  bb_tensor *t = bb_tensor_new_zeros(NULL, BB_DTYPE_FLOAT, 1, &one);
  bb_val *x = bb_val_tensor(NULL, t);
  bb_named_value in = {"x", x};
  enum { RUNS = 9, REPS = 200 };
  double engine[RUNS], floor_[RUNS];
  volatile uintptr_t sink = 0;
  for (int r = 0; r < RUNS; r++) {
    double t0 = now_s();
    for (int k = 0; k < REPS; k++) {
      const bb_step *s;
      size_t ns;
      bb_node_invoke(n, "Chain", &in, 1, 0, NULL);
      bb_node_poll(n, 0, &s, &ns, NULL);
      sink += ns;
    }
    engine[r] = (now_s() - t0) / ((double)REPS * (CHAIN + 1)) * 1e9;
    t0 = now_s();
    for (int k = 0; k < REPS * (CHAIN + 1); k++) {
      bb_val *v = bb_val_retain(x); /* what a pass-through must do at least: hand a reference on */
      sink += (uintptr_t)v;
      bb_val_release(v);
    }
    floor_[r] = (now_s() - t0) / ((double)REPS * (CHAIN + 1)) * 1e9;
  }
  double e = median(engine, RUNS), f = median(floor_, RUNS);
  printf("dispatch         %8.1f ns per op (chain of %d PassThrough)   retain/release loop %5.1f ns   ratio %.0fx\n",
         e, CHAIN, f, e / (f > 0 ? f : 1e-3));
  bb_val_release(x);
  bb_tensor_release(t);
  bb_node_free(n);
  bb_buffer_free(NULL, art);
  (void)sink;
}

/* ---- 2. a 4 MiB tensor on the wire ----------------------------------------------------------- */

/* The runtime's way to put a value into an envelope: written in place, one copy. */
static size_t write_value(const void *value, uint8_t *out) { return bb_val_encode_into(value, out); }

static void wire_body(bb_rec *g, void *user) {
  (void)user;
  bb_value x = bb_rec_input(g, "x", bb_tensor_type(BB_DTYPE_FLOAT));
  bb_value peers = bb_rec_input(g, "peers", BB_TYPE_PEER_ID_VEC);
  bb_rec_net_out(g, "out", peers, x);
  bb_rec_output(g, "y", bb_rec_pass_through(g, bb_rec_lookup_output(g, "out")));
}

static void bench_wire(void) {
  enum { FLOATS = 1 << 20, RUNS = 15 };
  int64_t dim = FLOATS;
  bb_tensor *t = bb_tensor_new_zeros(NULL, BB_DTYPE_FLOAT, 1, &dim);
  float *d = bb_tensor_data(t);
  for (int i = 0; i < FLOATS; i++) d[i] = (float)i * 0.5f;
  bb_val *v = bb_val_tensor(NULL, t);
  size_t bytes = (size_t)FLOATS * sizeof(float), payload = bb_val_encoded_size(v);
  uint8_t *src = malloc(bytes), *dst = malloc(bytes);
  memcpy(src, d, bytes);
  double mc[RUNS], mcf[RUNS], enc[RUNS], dec[RUNS], path[RUNS];
  volatile uint8_t keep = 0; /* keeps the fresh-memory baseline from being optimised away */
  bb_address site = {.n = 1};
  site.seg[0].kind = BB_ADDR_SITE;
  site.seg[0].value = 7;
  uint8_t suffix[16];
  bb_slot_fill fill = {.dest_suffix = {suffix, bb_address_to_bytes(&site, suffix, sizeof suffix)},
                       .payload = {NULL, payload},
                       .type_hash = bb_val_kind_hash(BB_VAL_TENSOR),
                       .write_payload = write_value,
                       .payload_ctx = v};
  bb_envelope env = {0};
  env.fills = &fill;
  env.n_fills = 1;
  env.schema_version = 1;
  bb_error err;
  for (int r = 0; r < RUNS; r++) {
    double t0 = now_s();
    memcpy(dst, src, bytes);
    mc[r] = now_s() - t0;
    t0 = now_s();
    uint8_t *fresh = malloc(bytes); /* what a receiver must do: new memory for the value */
    memcpy(fresh, src, bytes);
    keep = fresh[r];
    free(fresh);
    mcf[r] = now_s() - t0;
    keep = dst[r];
    t0 = now_s();
    uint8_t *wire;
    size_t wire_len;
    if (bb_envelope_encode(&env, NULL, &wire, &wire_len, &err)) die("encode", &err);
    enc[r] = now_s() - t0;
    t0 = now_s();
    bb_envelope *e = NULL;
    bb_val *back = NULL;
    if (bb_envelope_decode(wire, wire_len, NULL, NULL, &e, &err) ||
        bb_val_decode(e->fills[0].type_hash, e->fills[0].payload.data, e->fills[0].payload.len, NULL, &back, &err))
      die("decode", &err);
    dec[r] = now_s() - t0;
    if (memcmp(bb_tensor_data(back->as.tensor), src, bytes) != 0) die("decode: the tensor changed", NULL);
    bb_val_release(back);
    bb_envelope_free(e, NULL);
    bb_buffer_free(NULL, wire);
  }
  double m = median(mc, RUNS), mf = median(mcf, RUNS), e = median(enc, RUNS), de = median(dec, RUNS);
  printf("memcpy 4 MiB     %8.2f GB/s into a buffer in use, %.2f GB/s into new memory (malloc + memcpy)\n",
         (double)bytes / m / 1e9, (double)bytes / mf / 1e9);
  printf("encode 4 MiB     %8.2f GB/s   %.2fx memcpy   (the value written into a new envelope)\n", (double)bytes / e / 1e9,
         m / e);
  printf("decode 4 MiB     %8.2f GB/s   %.2fx memcpy   (envelope parsed in place, one copy into a new tensor)\n",
         (double)bytes / de / 1e9, m / de);

  /* the whole receive path: a node takes the envelope and writes it into its Recv */
  static const bb_module WIRE = {sizeof(bb_module), "Wire", wire_body, NULL, NULL, NULL, 0};
  size_t alen;
  uint8_t *art = compile(&WIRE, &alen);
  bb_node *a = install(art, alen, 1, "Wire"), *b = install(art, alen, 2, "Wire_peers");
  bb_peer_id pb = bb_peer_id_from_u64(2), pa = bb_peer_id_from_u64(1);
  bb_address ab = bb_address_p2p(&pb);
  bb_node_add_peer(a, &pb, &ab, NULL);
  bb_val *peers = bb_val_peers(NULL, &pb, 1);
  bb_named_value in[] = {{"x", v}, {"peers", peers}};
  for (int r = 0; r < RUNS; r++) {
    const bb_step *s;
    size_t ns;
    if (bb_node_invoke(a, "Wire", in, 2, (uint64_t)r, &err)) die("invoke", &err);
    bb_node_poll(a, (uint64_t)r, &s, &ns, NULL);
    const bb_step *send = NULL;
    for (size_t i = 0; i < ns; i++)
      if (s[i].kind == BB_STEP_SEND) send = &s[i];
    if (!send) die("the sender sent nothing", NULL);
    double t0 = now_s();
    if (bb_node_deliver(b, &pa, send->bytes, send->len, (uint64_t)r, &err)) die("deliver", &err);
    const bb_step *sb;
    size_t nb;
    bb_node_poll(b, (uint64_t)r, &sb, &nb, NULL);
    path[r] = now_s() - t0;
  }
  double p = median(path, RUNS);
  printf("deliver + poll   %8.2f GB/s   %.2fx memcpy   (4 MiB into a wire.Recv and through one op)\n",
         (double)bytes / p / 1e9, m / p);
  (void)keep;
  bb_val_release(peers);
  bb_node_free(a);
  bb_node_free(b);
  bb_buffer_free(NULL, art);
  bb_val_release(v);
  bb_tensor_release(t);
  free(src);
  free(dst);
}

/* ---- 3. poll with 1,000 timers --------------------------------------------------------------- */

static void timer_body(bb_rec *g, void *user) {
  (void)user;
  bb_rec_output(g, "tick", bb_rec_pass_through(g, bb_rec_interval(g, 1000000000)));
}

static void bench_timers(void) {
  static const bb_module TIMERS = {sizeof(bb_module), "Timers", timer_body, NULL, NULL, NULL, 0};
  size_t len;
  uint8_t *art = compile(&TIMERS, &len);
  bb_node *n = install(art, len, 1, "Timers");
  const bb_step *s;
  size_t ns;
  for (uint64_t i = 0; i < 1000; i++) { /* 1,000 loops, one timer each, 1 µs apart */
    bb_node_invoke(n, "Timers", NULL, 0, i * 1000, NULL);
    bb_node_poll(n, i * 1000, &s, &ns, NULL);
  }
  bb_node_stats st;
  bb_node_stats_get(n, &st);
  enum { RUNS = 9, REPS = 1000 };
  double idle[RUNS], due[RUNS], expiry[RUNS];
  uint64_t t = 999 * 1000, sum = 0;
  for (int r = 0; r < RUNS; r++) {
    double t0 = now_s();
    for (int k = 0; k < REPS; k++) bb_node_poll(n, t, &s, &ns, NULL);
    idle[r] = (now_s() - t0) / REPS * 1e9;
    t0 = now_s();
    for (int k = 0; k < REPS; k++) sum += bb_node_expiry(n);
    expiry[r] = (now_s() - t0) / REPS * 1e9;
    t0 = now_s();
    for (int k = 0; k < REPS; k++) { /* each poll fires exactly the next timer, which re-arms */
      t = bb_node_expiry(n);
      bb_node_poll(n, t, &s, &ns, NULL);
    }
    due[r] = (now_s() - t0) / REPS * 1e9;
  }
  printf("poll, %zu timers  %8.0f ns none due   %8.0f ns one due (fires an Interval loop)   expiry %.0f ns\n",
         st.timers, median(idle, RUNS), median(due, RUNS), median(expiry, RUNS));
  if (!sum) printf("(no expiry?)\n");
  bb_node_free(n);
  bb_buffer_free(NULL, art);
}

int main(void) {
#ifdef __GLIBC__
  /* glibc returns freed 4 MiB blocks to the kernel, and first-touch page faults then cost
   * more than the copies measured here (about 12 µs per page on the CI VMs); keep freed
   * memory so both the baseline and the runtime reuse it, as a long-running node would. */
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
  bench_dispatch();
  bench_wire();
  bench_timers();
  return 0;
}
