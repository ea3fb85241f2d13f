/* ONNX's own node tests (libonnx-testdata) on the CPU backend: every test whose ops are
 * all supported runs each of its data sets, and every output must match ONNX's expected
 * output within ONNX's tolerances (rtol 1e-3, atol 1e-7; integers and bools exactly).
 *
 * The set of tests that pass is pinned in tests/cpu/onnx_conformance_passing.txt, so
 * coverage cannot drain away quietly: a listed test that no longer passes (an op that
 * stopped being supported turns a pass into a skip) fails this program, and so does a
 * test that passes without being listed, until the list is rewritten with
 * BB_CONFORMANCE_UPDATE=1 (the message says how).
 * The tests of the operator families listed in MUST_PASS must run as well: skipping one fails.
 * Set BB_CONFORMANCE_FILTER=substring to run only matching tests, with details (the pin
 * is then checked for those tests only).
 *
 * The same runner checks other directories laid out as ONNX's node tests (one folder per
 * test: model.onnx and test_data_set_N/{input,output}_K.pb): BB_CONFORMANCE_DIR names the
 * root (the pinned list is then not consulted), BB_CONFORMANCE_ATOL loosens the absolute
 * tolerance, and BB_CONFORMANCE_ALL=1 pins every test in it (tests/tools/test_recurrent_ort.sh
 * runs onnxruntime's answers so). */
#include "ir/testutil.h"

#include <math.h>

#include "bb/cpu.h"
#include "bb/ir.h"
#include "harness.h"
#include "optest.h"

#define RTOL 1e-3
#define ATOL 1e-7
#define MAX_IO 16
#define PASSING_LIST BB_TEST_SOURCE_DIR "/tests/cpu/onnx_conformance_passing.txt"

typedef enum { RESULT_PASS, RESULT_FAIL, RESULT_SKIP } result;

/* Tests whose expected data contradicts the operator's specified behaviour, each with the
 * reason. Kept short, printed when skipped, and documented in docs/DEVIATIONS.md. */
static const struct {
  const char *test, *why;
} DATA_DISAGREES[] = {
    {"test_cast_FLOAT_to_BFLOAT16", "ONNX 1.12 test data truncates float to bfloat16; Cast rounds to nearest even "
                                    "(as onnxruntime and the data of later ONNX releases do)"},
    {"test_castlike_FLOAT_to_BFLOAT16", "same bfloat16 truncation in the test data"},
    {"test_castlike_FLOAT_to_BFLOAT16_expanded", "same bfloat16 truncation in the test data"},
};

/* Operator families whose every node test must run and pass. */
static const char *const MUST_PASS[] = {"test_lstm_", "test_gru_", "test_rnn_", "test_simple_rnn_"};

static bool pinned(const char *test) {
  if (getenv("BB_CONFORMANCE_ALL") && strcmp(getenv("BB_CONFORMANCE_ALL"), "1") == 0) return true;
  for (size_t i = 0; i < sizeof MUST_PASS / sizeof MUST_PASS[0]; i++)
    if (strncmp(test, MUST_PASS[i], strlen(MUST_PASS[i])) == 0) return true;
  return false;
}

static const char *data_disagrees(const char *test) {
  for (size_t i = 0; i < sizeof DATA_DISAGREES / sizeof DATA_DISAGREES[0]; i++)
    if (strcmp(DATA_DISAGREES[i].test, test) == 0) return DATA_DISAGREES[i].why;
  return NULL;
}

static bool verbose;
static char reason[4096];
static double abs_tol = ATOL;

/* Compares one output against the expected tensor; fills `reason` on mismatch. */
static bool outputs_match(const char *name, const bb_tensor *got, const bb_tensor *want) {
  char gd[128], wd[128];
  if (got->dtype != want->dtype || !bb_tensor_same_shape(got, want)) {
    snprintf(reason, sizeof reason, "output %s: got %s, expected %s", name, bb_tensor_describe(got, gd, sizeof gd),
             bb_tensor_describe(want, wd, sizeof wd));
    return false;
  }
  for (int64_t i = 0; i < want->numel; i++) {
    if (optest_is_real(want->dtype)) {
      double g = tensor_real(got, i), w = tensor_real(want, i);
      if (isnan(w) ? isnan(g) : isinf(w) ? g == w : fabs(g - w) <= abs_tol + RTOL * fabs(w)) continue;
      snprintf(reason, sizeof reason, "output %s[%lld]: got %.9g, expected %.9g", name, (long long)i, g, w);
      return false;
    }
    if (tensor_int(got, i) != tensor_int(want, i)) {
      snprintf(reason, sizeof reason, "output %s[%lld]: got %lld, expected %lld", name, (long long)i,
               (long long)tensor_int(got, i), (long long)tensor_int(want, i));
      return false;
    }
  }
  return true;
}

/* Loads dir/input_N.pb (prefix "input") or output_N.pb files in order. */
static int load_tensors(bb_model *m, const char *dir, const char *prefix, bb_tensor **out, const char **names,
                        size_t *n) {
  *n = 0;
  for (size_t i = 0; i < MAX_IO; i++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s_%zu.pb", dir, prefix, i);
    size_t len;
    uint8_t *bytes = tu_read_file(path, &len);
    if (!bytes) break;
    bb_tensor_proto *p;
    bb_error err;
    int rc = bb_tensor_proto_decode(m, bytes, len, &p, &err);
    free(bytes);
    if (rc) {
      snprintf(reason, sizeof reason, "%.1000s: %s", path, err.message);
      return rc;
    }
    rc = bb_tensor_from_proto(p, NULL, &out[i], &err);
    if (rc) {
      snprintf(reason, sizeof reason, "%.1000s: %s", path, err.message);
      return rc;
    }
    names[i] = p->name;
    (*n)++;
  }
  return 0;
}

/* ONNX 1.12's test data stores bfloat16 tensors as uint16 (numpy has no bfloat16): where
 * the graph declares bfloat16 for a uint16 tensor, the bits are bfloat16. */
static void retag_bfloat16(bb_tensor *t, const bb_value_info *declared) {
  if (t && declared && declared->type && declared->type->elem_type == BB_DTYPE_BFLOAT16 &&
      t->dtype == BB_DTYPE_UINT16)
    t->dtype = BB_DTYPE_BFLOAT16;
}

static bool tensor_typed(const bb_value_info *vi) {
  return vi->type && vi->type->kind == BB_TYPE_TENSOR && vi->type->elem_type != BB_DTYPE_STRING;
}

static result run_test(const char *dir) {
  char path[4200];
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  size_t len;
  uint8_t *bytes = tu_read_file(path, &len);
  if (!bytes) return RESULT_SKIP;
  bb_model *m = NULL;
  bb_error err;
  int rc = bb_model_decode(bytes, len, NULL, NULL, &m, &err);
  free(bytes);
  if (rc) {
    snprintf(reason, sizeof reason, "model does not decode: %.500s", err.message);
    return RESULT_FAIL;
  }
  result res = RESULT_SKIP;
  bb_cpu_session *s = NULL;
  const bb_graph *g = m->graph;
  int64_t opset = bb_opset_get(&m->opsets, "");
  bool applicable = g && opset > 0;
  for (size_t i = 0; applicable && i < g->nodes.len; i++)
    applicable = bb_cpu_supports(g->nodes.items[i]->domain, g->nodes.items[i]->op_type, opset);
  for (size_t i = 0; applicable && i < g->inputs.len; i++) applicable = tensor_typed(g->inputs.items[i]);
  for (size_t i = 0; applicable && i < g->outputs.len; i++) applicable = tensor_typed(g->outputs.items[i]);
  if (!applicable) goto out;
  rc = bb_cpu_session_new(m, NULL, &s, &err);
  if (rc) {
    snprintf(reason, sizeof reason, "prepare: %.500s", err.message);
    res = RESULT_FAIL;
    goto out;
  }
  size_t n_sets;
  char **sets = tu_list_dir(dir, &n_sets);
  res = RESULT_PASS;
  for (size_t k = 0; sets && k < n_sets && res == RESULT_PASS; k++) {
    if (strncmp(sets[k], "test_data_set_", 14) != 0) continue;
    char set_dir[2200];
    snprintf(set_dir, sizeof set_dir, "%s/%s", dir, sets[k]);
    bb_tensor *ins[MAX_IO] = {0}, *want[MAX_IO] = {0}, *got[MAX_IO] = {0};
    const char *in_names[MAX_IO], *want_names[MAX_IO];
    size_t n_in = 0, n_want = 0;
    if (load_tensors(m, set_dir, "input", ins, in_names, &n_in) ||
        load_tensors(m, set_dir, "output", want, want_names, &n_want)) {
      res = RESULT_SKIP; /* e.g. string tensors */
    } else if (n_want != bb_cpu_session_output_count(s)) {
      snprintf(reason, sizeof reason, "%zu expected outputs, the graph has %zu", n_want,
               bb_cpu_session_output_count(s));
      res = RESULT_FAIL;
    } else {
      /* data-set tensors name their graph input; fall back to graph order */
      for (size_t i = 0; i < n_in; i++) {
        if (!in_names[i] || !*in_names[i]) in_names[i] = bb_cpu_session_input_name(s, i);
        retag_bfloat16(ins[i], bb_vilist_find(&g->inputs, in_names[i]));
      }
      for (size_t i = 0; i < n_want; i++) retag_bfloat16(want[i], g->outputs.items[i]);
      rc = bb_cpu_session_run(s, in_names, ins, n_in, got, &err);
      if (rc) {
        snprintf(reason, sizeof reason, "%.200s: run: %s", sets[k], err.message);
        /* a feature the backend reports it does not implement (e.g. random training-mode
         * dropout) makes the test inapplicable; a wrong answer or any other error fails */
        res = rc == BB_ERR_UNSUPPORTED ? RESULT_SKIP : RESULT_FAIL;
      }
      for (size_t i = 0; !rc && i < n_want && res == RESULT_PASS; i++)
        if (!outputs_match(bb_cpu_session_output_name(s, i), got[i], want[i])) res = RESULT_FAIL;
    }
    for (size_t i = 0; i < MAX_IO; i++) {
      bb_tensor_release(ins[i]);
      bb_tensor_release(want[i]);
      bb_tensor_release(got[i]);
    }
  }
  if (sets) tu_free_list(sets, n_sets);
out:
  bb_cpu_session_free(s);
  bb_model_free(m);
  return res;
}

/* ---- the pinned passing set -------------------------------------------------------------- */

typedef struct name_list {
  char **names;
  size_t len;
} name_list;

static bool listed(const name_list *l, const char *name) {
  for (size_t i = 0; i < l->len; i++)
    if (strcmp(l->names[i], name) == 0) return true;
  return false;
}

/* The list file's names, one a line (blank lines and # comments skipped); false when it
 * cannot be read. */
static bool read_passing_list(name_list *l) {
  size_t len;
  char *text = (char *)tu_read_file(PASSING_LIST, &len);
  l->names = NULL;
  l->len = 0;
  if (!text) return false;
  size_t lines = 1;
  for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
  l->names = calloc(lines, sizeof *l->names);
  for (size_t at = 0; l->names && at < len;) {
    size_t end = at;
    while (end < len && text[end] != '\n') end++;
    size_t stop = end;
    while (stop > at && (text[stop - 1] == ' ' || text[stop - 1] == '\r')) stop--;
    if (stop > at && text[at] != '#') {
      l->names[l->len] = malloc(stop - at + 1);
      memcpy(l->names[l->len], text + at, stop - at);
      l->names[l->len++][stop - at] = '\0';
    }
    at = end + 1;
  }
  free(text);
  return l->names != NULL;
}

static char *copy_text(const char *s) {
  char *c = malloc(strlen(s) + 1);
  if (c) strcpy(c, s);
  return c;
}

static void free_list(name_list *l) {
  for (size_t i = 0; i < l->len; i++) free(l->names[i]);
  free(l->names);
}

static bool write_passing_list(char **names, const result *results, size_t n) {
  FILE *f = fopen(PASSING_LIST, "w");
  if (!f) return false;
  fprintf(f, "# The ONNX node tests (libonnx-testdata) the CPU backend passes, pinned: a listed test\n"
             "# that stops passing fails test_onnx_conformance, and so does an unlisted one that passes.\n"
             "# Rewritten by running test_onnx_conformance with BB_CONFORMANCE_UPDATE=1.\n");
  for (size_t i = 0; i < n; i++)
    if (results[i] == RESULT_PASS) fprintf(f, "%s\n", names[i]);
  return fclose(f) == 0;
}

/* Holds the run's results to the pinned list: every listed test (among those the filter
 * selected) passed, and every test that passed is listed. */
static void check_pinned(char **names, const result *results, const char *const *reasons, size_t n,
                         const char *filter) {
  if (getenv("BB_CONFORMANCE_UPDATE")) {
    CHECK_MSG(!filter, "BB_CONFORMANCE_UPDATE rewrites the whole list: run it without BB_CONFORMANCE_FILTER");
    if (!filter) CHECK_MSG(write_passing_list(names, results, n), "cannot write %s", PASSING_LIST);
    printf("conformance: wrote the passing set to %s\n", PASSING_LIST);
    return;
  }
  name_list pinned;
  CHECK_MSG(read_passing_list(&pinned), "cannot read the pinned passing set %s", PASSING_LIST);
  size_t lost = 0, gained = 0;
  for (size_t i = 0; i < pinned.len; i++) {
    if (filter && !strstr(pinned.names[i], filter)) continue;
    size_t k = 0;
    while (k < n && strcmp(names[k], pinned.names[i]) != 0) k++;
    if (k < n && results[k] == RESULT_PASS) continue;
    lost++;
    printf("  LOST %s: listed as passing, now %s%s%s\n", pinned.names[i],
           k == n ? "missing from the test data" : results[k] == RESULT_SKIP ? "skipped" : "failing",
           k < n && reasons[k] && *reasons[k] ? ": " : "", k < n && reasons[k] ? reasons[k] : "");
    CHECK_MSG(false, "%s no longer passes", pinned.names[i]);
  }
  for (size_t k = 0; k < n; k++) {
    if (results[k] != RESULT_PASS || listed(&pinned, names[k])) continue;
    gained++;
    printf("  NEW %s passes but is not in the pinned list\n", names[k]);
    CHECK_MSG(false, "%s passes and is not listed", names[k]);
  }
  if (gained)
    printf("conformance: %zu newly passing test(s). If they pass on purpose, pin them: run\n"
           "  BB_CONFORMANCE_UPDATE=1 build/tests/test_onnx_conformance\n"
           "(in your build tree) to rewrite %s, and commit the list.\n",
           gained, PASSING_LIST);
  if (lost)
    printf("conformance: %zu pinned test(s) no longer pass: a supported case was lost. Fix the backend; remove a "
           "line from the list only when dropping that support is intended.\n",
           lost);
  free_list(&pinned);
}

static void test_onnx_node_tests(void) {
  const char *filter = getenv("BB_CONFORMANCE_FILTER");
  verbose = filter != NULL;
  if (getenv("BB_CONFORMANCE_ATOL")) abs_tol = atof(getenv("BB_CONFORMANCE_ATOL"));
  char root[1024];
  if (getenv("BB_CONFORMANCE_DIR")) snprintf(root, sizeof root, "%s", getenv("BB_CONFORMANCE_DIR"));
  else snprintf(root, sizeof root, "%s/node", BB_TEST_ONNX_DATA);
  size_t n;
  char **names = tu_list_dir(root, &n);
  CHECK_MSG(names != NULL, "cannot list %s", root);
  if (!names) return;
  result *results = calloc(n ? n : 1, sizeof *results);
  char **reasons = calloc(n ? n : 1, sizeof *reasons);
  CHECK_MSG(results && reasons, "out of memory");
  if (!results || !reasons) {
    free(results);
    free(reasons);
    tu_free_list(names, n);
    return;
  }
  size_t passed = 0, failed = 0, skipped = 0;
  for (size_t i = 0; i < n; i++) {
    results[i] = RESULT_SKIP;
    if (filter && !strstr(names[i], filter)) continue;
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/%s", root, names[i]);
    reason[0] = '\0';
    const char *disagrees = data_disagrees(names[i]);
    result r = run_test(dir);
    if (disagrees && r == RESULT_FAIL) {
      snprintf(reason, sizeof reason, "%s", disagrees);
      r = RESULT_SKIP;
    }
    if (r == RESULT_SKIP && pinned(names[i])) {
      snprintf(reason + strlen(reason), sizeof reason - strlen(reason), " (pinned: it must run)");
      r = RESULT_FAIL;
    }
    results[i] = r;
    reasons[i] = reason[0] ? copy_text(reason) : NULL;
    if (r == RESULT_PASS) passed++;
    else if (r == RESULT_SKIP) skipped++;
    else failed++;
    if (r == RESULT_FAIL) printf("  FAIL %s: %s\n", names[i], reason);
    else if (r == RESULT_SKIP && reason[0]) printf("  skip %s: %s\n", names[i], reason);
    else if (verbose) printf("  %s %s %s\n", r == RESULT_PASS ? "pass" : "skip", names[i], reason);
    CHECK_MSG(r != RESULT_FAIL, "%s", names[i]);
  }
  printf("conformance: %zu passed, %zu failed; %zu skipped (ops, types or features the backend does not support)\n",
         passed, failed, skipped);
  if (!getenv("BB_CONFORMANCE_DIR")) check_pinned(names, results, (const char *const *)reasons, n, filter);
  for (size_t i = 0; i < n; i++) free(reasons[i]);
  free(reasons);
  free(results);
  tu_free_list(names, n);
}

int main(void) {
  RUN(test_onnx_node_tests);
  return bb_test_finish();
}
