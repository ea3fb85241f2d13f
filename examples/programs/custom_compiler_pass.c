/* custom_compiler_pass: a user pass in the compile pipeline.
 *
 *   custom_compiler_pass [--quiet]
 *
 * The App Module sends a payload to its peers, who run it through a Backend's Identity.
 * Its configure adds the user pass "stamp_tracing_ids" (bb_compiler_add_pass: a function
 * pointer and user data, run per partition after the canonical passes), which stamps
 * example.tracing_id = "trace-<n>" on every wire Send. Compile only: the program reads
 * the artifact and exits 0 only when it has partitions, every Send carries a distinct
 * trace id (N >= 1), and the same compile without the pass (bb_compiler_disable_pass)
 * carries none. */
#include <stdio.h>
#include <string.h>

#include "programs/examples.h"

static int check(int cond, const char *what) {
  printf("  [%s] %s\n", cond ? "ok" : "FAILED", what);
  return cond ? 0 : 1;
}

static int die(const char *what, const bb_error *err) {
  fprintf(stderr, "custom_compiler_pass: %s: %s\n", what, err->message);
  return 1;
}

typedef struct stamps {
  size_t partitions, sends, stamped;
  bool distinct; /* no trace id given twice */
} stamps;

/* Reads the Sends of every partition of an artifact and their trace ids. */
static int read_stamps(const uint8_t *artifact, size_t len, bool print, stamps *out, bb_error *err) {
  bb_model *m = NULL;
  int rc = bb_model_decode(artifact, len, NULL, NULL, &m, err);
  if (rc) return rc;
  *out = (stamps){0, 0, 0, true};
  const char *seen[64];
  for (size_t f = 0; f < m->functions.len; f++) {
    const bb_function *fn = m->functions.items[f];
    if (!bb_kv_get(&fn->metadata, BB_KEY_PEER_CLASS)) continue;
    out->partitions++;
    for (size_t i = 0; i < fn->nodes.len; i++) {
      const bb_ir_node *n = fn->nodes.items[i];
      if (!n->domain || strcmp(n->domain, BB_DOMAIN_WIRE) != 0 || strcmp(n->op_type, "Send") != 0) continue;
      const char *id = bb_kv_get(&n->metadata, BB_EXAMPLE_TRACING_KEY);
      out->sends++;
      if (print) printf("target %s: Send -> %s\n", fn->name, id ? id : "(no tracing id)");
      if (!id || strncmp(id, "trace-", 6) != 0) continue;
      for (size_t s = 0; s < out->stamped && s < 64; s++) out->distinct &= strcmp(seen[s], id) != 0;
      if (out->stamped < 64) seen[out->stamped] = id;
      out->stamped++;
    }
  }
  bb_model_free(m);
  return 0;
}

/* A second user pass added after the example's: it sees where user passes run (once per
 * partition, with its peer class) and that the stamp is already there (same point, in
 * the order added). */
typedef struct pass_log {
  size_t calls, with_class, sends_already_stamped;
} pass_log;

static int observe_pass(bb_model *model, bb_function *function, const char *peer_class, void *user, bb_error *err) {
  (void)model, (void)err;
  pass_log *log = user;
  log->calls++;
  log->with_class += peer_class != NULL;
  for (size_t i = 0; i < function->nodes.len; i++) {
    const bb_ir_node *n = function->nodes.items[i];
    log->sends_already_stamped += n->domain && strcmp(n->domain, BB_DOMAIN_WIRE) == 0 &&
                                  strcmp(n->op_type, "Send") == 0 && bb_kv_get(&n->metadata, BB_EXAMPLE_TRACING_KEY);
  }
  return 0;
}

/* App compiled with the example's configure, optionally without its user pass. */
static int compile(bool with_pass, uint8_t **out, size_t *out_len, size_t *recorded_functions, pass_log *log,
                   bb_error *err) {
  const bb_example *ex = &BB_EXAMPLE_CUSTOM_COMPILER_PASS;
  bb_model *recorded = NULL;
  uint8_t *bytes = NULL;
  size_t len = 0;
  int rc = bb_module_build(ex->modules[0], NULL, &recorded, err);
  if (!rc) {
    *recorded_functions = recorded->functions.len;
    rc = bb_model_encode(recorded, &bytes, &len, err);
  }
  bb_model_free(recorded);
  if (rc) return rc;
  bb_compiler *c = bb_compiler_new(NULL);
  if (!c) return BB_ERR_NOMEM;
  rc = ex->configure(c, 0, err);
  if (!rc && !with_pass) rc = bb_compiler_disable_pass(c, "stamp_tracing_ids", err);
  if (!rc) rc = bb_compiler_add_pass(c, NULL, "observe", observe_pass, log, err);
  if (!rc) rc = bb_compiler_compile(c, bytes, len, out, out_len, err);
  bb_compiler_free(c);
  bb_buffer_free(NULL, bytes);
  return rc;
}

int main(int argc, char **argv) {
  int quiet = argc > 1 && strcmp(argv[1], "--quiet") == 0;
  bb_error err = {0};
  int failures = 0;
  uint8_t *artifact = NULL;
  size_t len = 0, recorded = 0;
  pass_log log = {0, 0, 0}, log_without = {0, 0, 0};
  if (compile(true, &artifact, &len, &recorded, &log, &err)) return die("compile", &err);
  stamps with, without;
  if (read_stamps(artifact, len, !quiet, &with, &err)) return die("decode", &err);
  bb_buffer_free(NULL, artifact);
  printf("App: %zu recorded function(s) -> %zu partition(s); %zu of %zu wire.Send carry %s\n", recorded,
         with.partitions, with.stamped, with.sends, BB_EXAMPLE_TRACING_KEY);

  printf("user passes ran %zu time(s), %zu with a peer class; %zu Send(s) already stamped when the second ran\n",
         log.calls, log.with_class, log.sends_already_stamped);
  if (compile(false, &artifact, &len, &recorded, &log_without, &err)) return die("compile without the pass", &err);
  if (read_stamps(artifact, len, false, &without, &err)) return die("decode", &err);
  bb_buffer_free(NULL, artifact);
  printf("without stamp_tracing_ids: %zu of %zu wire.Send carry it\n", without.stamped, without.sends);

  failures += check(with.partitions == 2, "App compiles into two partitions");
  failures += check(log.calls == with.partitions && log.with_class == log.calls,
                    "user passes run once per partition, after partitioning (peer class given)");
  failures += check(log.sends_already_stamped == with.sends, "passes at one point run in the order added");
  failures += check(with.sends >= 1 && with.stamped == with.sends && with.distinct,
                    "every wire.Send carries its own trace-<n> (N >= 1)");
  failures += check(without.sends == with.sends && without.stamped == 0, "without the user pass, none does");
  if (!failures) printf("%zu wire.Send NodeProto(s) carry tracing_id metadata.\n", with.stamped);
  return failures ? 1 : 0;
}
