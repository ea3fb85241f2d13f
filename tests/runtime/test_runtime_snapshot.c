/* Snapshots: a node stopped mid-run, restored into a fresh node — in this process and in
 * a fresh one — continues exactly as an uninterrupted run; busy nodes, other artifacts,
 * truncated and corrupted snapshots are refused, never crash. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef __EMSCRIPTEN__
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
extern char **environ;
#endif

#include "failalloc.h"
#include "rttest.h"
#include "util/hash.h"

/* ---- a model that counts: Params gives [calls so far], and the count survives snapshots ---- */

typedef struct counter {
  float count;
} counter;

/* In deferring mode Params answers later: the host completes `deferred` with
 * `deferred_value` (host state, which a real host keeps beside its snapshot). */
static bool deferring;
static uint64_t deferred;
static float deferred_value;

static int counter_create(const bb_component_init *init, void **self, bb_error *err) {
  (void)init;
  (void)err;
  *self = calloc(1, sizeof(counter));
  return *self ? 0 : BB_ERR_NOMEM;
}
static void counter_destroy(void *self) { free(self); }
static int counter_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  counter *c = self;
  if (strcmp(call->op_type, "Params") != 0) return bb_error_set(err, BB_ERR_UNSUPPORTED, "Counter: %s", call->op_type);
  c->count += 1 + (float)(bb_ctx_random(ctx) % 3); /* the node's generator is part of the state too */
  if (deferring) {
    deferred = bb_ctx_defer(ctx);
    deferred_value = c->count;
    return BB_LATER;
  }
  call->outputs[0] = f32_val(&c->count, 1);
  return 0;
}
static int counter_save(const void *self, const bb_allocator *alloc, uint8_t **out, size_t *len, bb_error *err) {
  (void)err;
  *out = alloc->malloc(sizeof(float), alloc->user_data);
  if (!*out) return BB_ERR_NOMEM;
  memcpy(*out, &((const counter *)self)->count, sizeof(float));
  *len = sizeof(float);
  return 0;
}
static bool load_refuses; /* load takes the state, then refuses: restore must undo it */
static int counter_load(void *self, const uint8_t *data, size_t len, bb_error *err) {
  if (len != sizeof(float)) return bb_error_set(err, BB_ERR_MALFORMED, "Counter: state of %zu bytes", len);
  memcpy(&((counter *)self)->count, data, sizeof(float));
  return load_refuses ? bb_error_set(err, BB_ERR_UNSUPPORTED, "Counter: refused on purpose") : 0;
}
static const bb_component_type COUNTER = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "Counter",
    .roles = 1u << BB_ROLE_MODEL,
    .create = counter_create,
    .destroy = counter_destroy,
    .invoke = counter_invoke,
    .save = counter_save,
    .load = counter_load,
};

static const bb_slot MODEL = {BB_ROLE_MODEL, "model", NULL};

/* Tick: every 10 ms, the model's count as output "p". Loop calls Tick and passes its
 * "p" on, so the parked state holds a caller and its running function body. */
static void tick_body(bb_rec *g, void *user) {
  (void)user;
  bb_value tick = bb_rec_interval(g, 10000000);
  bb_rec_output(g, "p", bb_rec_model_params_after(g, &MODEL, tick));
}
static const bb_module TICK = {sizeof(bb_module), "Tick", tick_body, NULL, NULL, NULL, 0};
static const bb_module *const LOOP_SUBS[] = {&TICK};
static void loop_body(bb_rec *g, void *user) {
  (void)user;
  bb_call tick = bb_rec_call(g, &TICK, NULL, 0);
  bb_rec_output(g, "p", bb_rec_pass_through(g, bb_rec_call_output(g, tick, "p")));
}
static const bb_module LOOP = {sizeof(bb_module), "Loop", loop_body, NULL, NULL, LOOP_SUBS, 1};
/* The same graphs under another name: only the target's name tells the two apart. */
static const bb_module RENAMED = {sizeof(bb_module), "Renamed", loop_body, NULL, NULL, LOOP_SUBS, 1};

static uint8_t *artifact, *renamed;
static size_t artifact_len, renamed_len;
static bb_registry *registry;

static void compile(const bb_module *module, uint8_t **out, size_t *out_len) {
  bb_model *m = NULL;
  bb_error err;
  uint8_t *bytes = NULL;
  size_t blen = 0;
  CHECK_MSG(bb_module_build(module, NULL, &m, &err) == 0, "%s", err.message);
  CHECK(m && bb_model_encode(m, &bytes, &blen, NULL) == 0);
  bb_compiler *c = bb_compiler_new(NULL);
  bb_compiler_set_permissive_types(c, true);
  CHECK(bb_compiler_bind_model(c, "model", "Counter", NULL, &err) == 0);
  CHECK_MSG(bb_compiler_compile(c, bytes, blen, out, out_len, &err) == 0, "%s", err.message);
  bb_compiler_free(c);
  free(bytes);
  bb_model_free(m);
}

static void setup(void) {
  compile(&LOOP, &artifact, &artifact_len);
  compile(&RENAMED, &renamed, &renamed_len);
  registry = bb_registry_new(NULL);
  CHECK(bb_registry_add(registry, &COUNTER, NULL) == 0);
}

static bb_node *fresh(void) {
  bb_node_config cfg = {.struct_size = sizeof cfg, .seed = 77};
  const char *targets[] = {"Loop"};
  return install_peer(artifact, artifact_len, 1, targets, 1, registry, &cfg);
}

/* The same node over an allocator that fails on demand (`alloc` must outlive the node). */
static bb_node *fresh_failing(bb_allocator *alloc) {
  bb_node_config cfg = {.struct_size = sizeof cfg, .seed = 77};
  const char *targets[] = {"Loop"};
  bb_peer_id self = bb_peer_id_from_u64(1);
  bb_address addr = p2p_address(&self);
  bb_install_args a = {.struct_size = sizeof a, .self = self, .addresses = &addr, .n_addresses = 1,
                       .artifact = artifact, .artifact_len = artifact_len, .targets = targets, .n_targets = 1,
                       .registry = registry, .config = &cfg, .alloc = alloc};
  bb_node *n = NULL;
  CHECK(bb_install(&a, &n, NULL, NULL) == 0);
  return n;
}

/* Runs the node from tick `from` to tick `to` (10 ms apart), appending each "p". */
static void run(bb_node *n, int from, int to, float *seq, size_t *len) {
  for (int t = from; t < to; t++) {
    const bb_step *s;
    size_t k;
    bb_node_poll(n, (uint64_t)t * 10000000, &s, &k, NULL);
    for (size_t i = 0; i < k; i++)
      if (s[i].kind == BB_STEP_APP_EVENT && strcmp(s[i].topic, "p") == 0)
        seq[(*len)++] = *(const float *)bb_tensor_data(bb_val_as_tensor(s[i].value));
  }
}

static void start(bb_node *n) {
  bb_error err;
  CHECK_MSG(bb_node_invoke(n, "Loop", NULL, 0, 0, &err) == 0, "%s", err.message);
}

static void test_resume_in_process(void) {
  float whole[128], split[128];
  size_t nw = 0, ns = 0;
  bb_node *a = fresh();
  if (!a) return;
  start(a);
  run(a, 0, 100, whole, &nw);
  bb_node_free(a);
  CHECK_EQ_INT(nw, 100);

  bb_node *b = fresh();
  start(b);
  run(b, 0, 50, split, &ns);
  uint8_t *snap = NULL;
  size_t snap_len = 0;
  bb_error err;
  CHECK_MSG(bb_node_snapshot(b, &snap, &snap_len, &err) == 0, "%s", err.message);
  bb_node_free(b);
  bb_node *c = fresh();
  CHECK_MSG(bb_node_restore(c, snap, snap_len, &err) == 0, "%s", err.message);
  /* the restored node holds exactly what was captured: its own snapshot is the same bytes */
  uint8_t *again = NULL;
  size_t again_len = 0;
  CHECK_MSG(bb_node_snapshot(c, &again, &again_len, &err) == 0, "%s", err.message);
  CHECK(again_len == snap_len && memcmp(again, snap, snap_len) == 0);
  free(again);
  run(c, 50, 100, split, &ns);
  CHECK_EQ_INT(ns, 100);
  CHECK(nw == ns && memcmp(whole, split, nw * sizeof(float)) == 0);
  bb_node_free(c);
  free(snap);
}

static void test_refusals(void) {
  bb_node *a = fresh();
  if (!a) return;
  start(a);
  uint8_t *snap = NULL;
  size_t len = 0;
  bb_error err;
  /* busy: the invoke is still queued */
  CHECK(bb_node_snapshot(a, &snap, &len, &err) == BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "busy") != NULL);
  float seq[64];
  size_t n = 0;
  run(a, 0, 20, seq, &n);
  CHECK(bb_node_snapshot(a, &snap, &len, &err) == 0);
  /* a node that already ran cannot take a snapshot in */
  CHECK(bb_node_restore(a, snap, len, &err) == BB_ERR_INVALID_ARGUMENT);
  /* another peer id is another node */
  bb_node_config cfg = {.struct_size = sizeof cfg, .seed = 77};
  const char *targets[] = {"Loop"};
  bb_node *other = install_peer(artifact, artifact_len, 2, targets, 1, registry, &cfg);
  CHECK(other && bb_node_restore(other, snap, len, &err) == BB_ERR_MALFORMED);
  CHECK(strstr(err.message, "taken by another peer") != NULL);
  bb_node_free(other);
  /* a node with as many graphs and sites but another target */
  const char *renamed_targets[] = {"Renamed"};
  other = install_peer(renamed, renamed_len, 1, renamed_targets, 1, registry, &cfg);
  CHECK(other && bb_node_restore(other, snap, len, &err) == BB_ERR_MALFORMED);
  CHECK_MSG(strstr(err.message, "snapshot was taken with other targets") != NULL, "%s", err.message);
  bb_node_free(other);
  /* a component that refuses its state: the restore fails and the node is as fresh as before */
  load_refuses = true;
  bb_node *g = fresh();
  CHECK(bb_node_restore(g, snap, len, &err) == BB_ERR_UNSUPPORTED);
  CHECK_MSG(strstr(err.message, "refused its state") != NULL, "%s", err.message);
  load_refuses = false;
  start(g);
  float again[4];
  size_t n_again = 0;
  run(g, 0, 3, again, &n_again);
  CHECK(n_again == 3 && memcmp(again, seq, 3 * sizeof(float)) == 0);
  bb_node_free(g);
  /* every truncation and every flipped bit is refused, and leaves the node usable */
  for (size_t cut = 0; cut < len; cut++) {
    bb_node *f = fresh();
    CHECK(bb_node_restore(f, snap, cut, &err) == BB_ERR_MALFORMED);
    bb_node_free(f);
  }
  uint8_t *bent = malloc(len);
  for (size_t i = 0; i < len; i++) {
    memcpy(bent, snap, len);
    bent[i] ^= (uint8_t)(1u << (i % 8));
    bb_node *f = fresh();
    CHECK(bb_node_restore(f, bent, len, &err) == BB_ERR_MALFORMED);
    start(f); /* still a working fresh node */
    float s2[4];
    size_t n2 = 0;
    run(f, 0, 2, s2, &n2);
    CHECK_EQ_INT(n2, 2);
    bb_node_free(f);
  }
  /* bytes with a valid checksum but wrong content: refused or restored, never a crash */
  for (size_t i = 8; i + 8 < len; i++) {
    memcpy(bent, snap, len);
    bent[i] ^= (uint8_t)(1u << (i % 8));
    uint64_t h = bbi_fnv1a64(bent, len - 8);
    for (int k = 0; k < 8; k++) bent[len - 8 + k] = (uint8_t)(h >> (8 * k));
    bb_node *f = fresh();
    int rc = bb_node_restore(f, bent, len, &err);
    CHECK(rc == 0 || rc == BB_ERR_MALFORMED || rc == BB_ERR_INVALID_ARGUMENT);
    float more[8];
    size_t n_more = 0;
    if (rc == 0) run(f, 20, 24, more, &n_more);
    bb_node_free(f);
  }
  free(bent);
  free(snap);
  bb_node_free(a);
}

/* One tick in deferring mode: the Interval fires and Params parks; then the host completes
 * it. With `stop_parked` the tick ends with the operation still pending. */
static void collect_p(bb_node *n, uint64_t now, float *seq, size_t *len) {
  const bb_step *s;
  size_t k;
  bb_node_poll(n, now, &s, &k, NULL);
  for (size_t i = 0; i < k; i++)
    if (s[i].kind == BB_STEP_APP_EVENT && strcmp(s[i].topic, "p") == 0)
      seq[(*len)++] = *(const float *)bb_tensor_data(bb_val_as_tensor(s[i].value));
}
static void complete_deferred(bb_node *n, uint64_t now, float *seq, size_t *len) {
  bb_error err;
  bb_val *v = f32_val(&deferred_value, 1);
  CHECK_MSG(deferred && bb_node_complete(n, deferred, &v, 1, &err) == 0, "%s", err.message);
  bb_val_release(v);
  deferred = 0;
  collect_p(n, now, seq, len);
}
static void run_deferring(bb_node *n, int from, int to, float *seq, size_t *len) {
  for (int t = from; t < to; t++) {
    collect_p(n, (uint64_t)t * 10000000, seq, len);
    complete_deferred(n, (uint64_t)t * 10000000, seq, len);
  }
}

/* A snapshot taken while an operation waits for its completion: the restored node takes
 * the completion under the same command and goes on as if never stopped. */
static void test_resume_with_a_pending_operation(void) {
  deferring = true;
  float whole[64], split[64];
  size_t nw = 0, ns = 0;
  bb_node *a = fresh();
  start(a);
  run_deferring(a, 0, 30, whole, &nw);
  bb_node_free(a);
  CHECK_EQ_INT(nw, 30);

  bb_node *b = fresh();
  start(b);
  run_deferring(b, 0, 15, split, &ns);
  collect_p(b, 15 * 10000000ull, split, &ns); /* tick 15 fires; Params waits */
  bb_node_stats st;
  bb_node_stats_get(b, &st);
  CHECK_EQ_INT(st.pending_async, 1);
  CHECK(!bb_node_has_work(b));
  uint8_t *snap = NULL;
  size_t len = 0;
  bb_error err;
  CHECK_MSG(bb_node_snapshot(b, &snap, &len, &err) == 0, "%s", err.message);
  bb_node_free(b);
  bb_node *c = fresh();
  CHECK_MSG(bb_node_restore(c, snap, len, &err) == 0, "%s", err.message);
  bb_node_stats_get(c, &st);
  CHECK_EQ_INT(st.pending_async, 1);
  complete_deferred(c, 15 * 10000000ull, split, &ns);
  run_deferring(c, 16, 30, split, &ns);
  CHECK_EQ_INT(ns, 30);
  CHECK(nw == ns && memcmp(whole, split, nw * sizeof(float)) == 0);
  bb_node_free(c);
  free(snap);
  deferring = false;
}

/* Every allocation of snapshot and restore may fail: each failure is reported, leaks
 * nothing, and leaves the node as it was (a refused restore leaves a fresh node that runs
 * the whole loop from the start). */
static void test_allocation_failures(void) {
  failing fa = {-1, 0};
  bb_allocator alloc_a = failing_allocator(&fa);
  bb_node *a = fresh_failing(&alloc_a);
  if (!a) return;
  start(a);
  float seq[64];
  size_t n = 0;
  run(a, 0, 20, seq, &n);
  uint8_t *snap = NULL;
  size_t len = 0;
  bb_error err;
  CHECK(bb_node_snapshot(a, &snap, &len, &err) == 0);
  long failures = 0;
  for (long budget = 0;; budget++) {
    uint8_t *s2 = NULL;
    size_t l2 = 0;
    fa.budget = budget;
    int rc = bb_node_snapshot(a, &s2, &l2, &err);
    fa.budget = -1;
    if (rc == 0) {
      CHECK(l2 == len && memcmp(s2, snap, len) == 0);
      f_free(s2, &fa);
      break;
    }
    CHECK_EQ_INT(rc, BB_ERR_NOMEM);
    failures++;
  }
  CHECK(failures > 0);
  uint8_t *kept = malloc(len);
  memcpy(kept, snap, len);
  f_free(snap, &fa);
  snap = kept;
  bb_node_free(a);
  CHECK_EQ_INT(fa.live, 0);

  failures = 0;
  for (long budget = 0;; budget++) {
    failing fb = {-1, 0};
    bb_allocator alloc_b = failing_allocator(&fb);
    bb_node *f = fresh_failing(&alloc_b);
    if (!f) break;
    fb.budget = budget;
    int rc = bb_node_restore(f, snap, len, &err);
    fb.budget = -1;
    float more[128];
    size_t n_more = 0;
    if (rc == 0) {
      run(f, 20, 30, more, &n_more);
      CHECK_EQ_INT(n_more, 10);
    } else {
      CHECK_MSG(rc == BB_ERR_NOMEM, "budget %ld: %d %s", budget, rc, err.message);
      failures++;
      start(f); /* still the fresh node it was */
      run(f, 0, 3, more, &n_more);
      CHECK_EQ_INT(n_more, 3);
      CHECK(n_more == 3 && memcmp(more, seq, sizeof(float) * 3) == 0);
    }
    bb_node_free(f);
    CHECK_EQ_INT(fb.live, 0);
    if (rc == 0) break;
  }
  CHECK(failures > 0);
  free(snap);
}

/* A separate process restores the snapshot and finishes the run. */
static int child(const char *snap_path, const char *out_path) {
  setup();
  FILE *f = fopen(snap_path, "rb");
  if (!f) return 2;
  uint8_t buf[1 << 16];
  size_t len = fread(buf, 1, sizeof buf, f);
  fclose(f);
  bb_node *n = fresh();
  bb_error err;
  if (!n || bb_node_restore(n, buf, len, &err)) {
    fprintf(stderr, "child: %s\n", err.message);
    return 1;
  }
  float seq[128];
  size_t ns = 0;
  run(n, 50, 100, seq, &ns);
  FILE *o = fopen(out_path, "wb");
  if (!o) return 2;
  fwrite(seq, sizeof(float), ns, o);
  fclose(o);
  bb_node_free(n);
  bb_registry_free(registry);
  bb_buffer_free(NULL, artifact);
  bb_buffer_free(NULL, renamed);
  return 0;
}

static void test_resume_in_a_fresh_process(const char *self) {
#ifdef __EMSCRIPTEN__
  (void)self;
  printf("(a fresh process needs posix_spawn: native only)\n");
#else
  float whole[128];
  size_t nw = 0;
  bb_node *a = fresh();
  if (!a) return;
  start(a);
  run(a, 0, 100, whole, &nw);
  bb_node_free(a);
  bb_node *b = fresh();
  start(b);
  float first[64];
  size_t nf = 0;
  run(b, 0, 50, first, &nf);
  uint8_t *snap;
  size_t len;
  CHECK(bb_node_snapshot(b, &snap, &len, NULL) == 0);
  bb_node_free(b);
  char snap_path[] = "/tmp/bb-snap-XXXXXX", out_path[] = "/tmp/bb-seq-XXXXXX";
  int fd1 = mkstemp(snap_path), fd2 = mkstemp(out_path);
  CHECK(fd1 >= 0 && fd2 >= 0);
  FILE *f = fdopen(fd1, "wb");
  fwrite(snap, 1, len, f);
  fclose(f);
  close(fd2);
  char *argv[] = {(char *)self, "--resume", snap_path, out_path, NULL};
  pid_t pid;
  int status = -1;
  CHECK(posix_spawn(&pid, self, NULL, NULL, argv, environ) == 0 && waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  float rest[64];
  FILE *o = fopen(out_path, "rb");
  size_t nr = o ? fread(rest, sizeof(float), 64, o) : 0;
  if (o) fclose(o);
  CHECK_EQ_INT(nf + nr, nw);
  CHECK(memcmp(whole, first, nf * sizeof(float)) == 0 && memcmp(whole + nf, rest, nr * sizeof(float)) == 0);
  remove(snap_path);
  remove(out_path);
  free(snap);
#endif
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--resume") == 0) return child(argv[2], argv[3]);
  setup();
  if (!artifact) return bb_test_finish();
  RUN(test_resume_in_process);
  RUN(test_resume_with_a_pending_operation);
  RUN(test_refusals);
  RUN(test_allocation_failures);
  test_resume_in_a_fresh_process(argv[0]);
  printf("%s test_resume_in_a_fresh_process\n", bb_test_failures ? "?   " : "ok  ");
  bb_registry_free(registry);
  bb_buffer_free(NULL, artifact);
  bb_buffer_free(NULL, renamed);
  return bb_test_finish();
}
