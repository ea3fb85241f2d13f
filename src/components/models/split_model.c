/* The SplitModel engine (split_model.h): the model cut into every part of the split, the
 * parts this side holds trained by OnnxModel engines, and a step's state between calls. */
#include "components/models/split_model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bb/grad.h"
#include "bb/graph.h"
#include "bb/roles.h"
#include "components/models/onnx_rows.h"
#include "util/arena.h"
#include "util/mem.h"

#define MAX_PARTS 3
#define STEP_WRAP 16777216u /* step tags are whole float32 values */

/* A middle part's forward for one client, kept until its gradient comes back. */
typedef struct pending {
  bool used;
  bb_peer_id from;
  float step;
  bb_tensor *input;
  uint64_t order; /* when it came, for eviction */
} pending;

struct bbi_split_model {
  const bb_allocator *alloc;
  bool server, u_shaped;
  uint64_t timeout_ns, round_steps;
  char cuts[2][BBI_SPLIT_CUTS_MAX];
  bb_onnx_model *part[2]; /* [0] the first this side holds, [1] a U client's head */
  size_t n_parts;
  bbi_onnx_rows cut_in[2]; /* the declared input of a part that starts at a cut (rank 0: none) */
  /* a client's step in flight */
  bool waiting;
  uint32_t step;
  uint64_t since_ns;
  bb_tensor *labels; /* a U client keeps its batch's labels for the head */
  /* SplitFed: steps since the client last loaded an average; waiting for one since */
  uint64_t round_done;
  bool averaging;
  uint64_t averaging_since_ns;
  /* a middle part's forwards, one per client */
  pending *pending;
  size_t max_pending;
  uint64_t arrivals;
  long forwarded; /* the entry whose forward the middle engine holds now, or -1 */
  bbi_split_counts counts;
};

/* ---- config ----------------------------------------------------------------------------- */

int bbi_split_config_parse(const char *text, const char *const *keys, uint64_t default_seed, bbi_split_config *out,
                           bb_error *err) {
  memset(out, 0, sizeof *out);
  const char *c = text ? text : "";
  char side[16], shape[16];
  uint64_t timeout_ms, max_pending, round_steps;
  int rc = bb_onnx_model_config_parse(c, keys, default_seed, &out->train, err);
  if (!rc) rc = bb_config_str(c, "cuts", "", out->cuts, sizeof out->cuts, err);
  if (!rc) rc = bb_config_str(c, "side", "", side, sizeof side, err);
  if (!rc) rc = bb_config_str(c, "shape", "", shape, sizeof shape, err);
  if (!rc) rc = bb_config_str(c, "data", "data", out->data, sizeof out->data, err);
  if (!rc) rc = bb_config_u64(c, "timeout_ms", BB_SPLIT_TIMEOUT_MS, &timeout_ms, err);
  if (!rc) rc = bb_config_u64(c, "max_pending", 64, &max_pending, err);
  if (!rc) rc = bb_config_u64(c, "round_steps", 10, &round_steps, err);
  if (rc) return rc;
  if (!*out->cuts || (strcmp(side, BB_SPLIT_SIDE_CLIENT) && strcmp(side, BB_SPLIT_SIDE_SERVER)) ||
      (strcmp(shape, BB_SPLIT_SHAPE_VANILLA) && strcmp(shape, BB_SPLIT_SHAPE_U)))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                        "the config needs cuts, side (client|server) and shape (vanilla|u): the compiler writes them from "
                        "the Module's split (bb_rec_split)");
  if (!timeout_ms || timeout_ms > 86400000ull || !max_pending || max_pending > 65536 || !round_steps)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "timeout_ms must be 1..86400000, max_pending 1..65536, round_steps >= 1");
  if (out->train.optimizer.max_grad_norm > 0)
    return bb_error_set(err, BB_ERR_UNSUPPORTED,
                        "max_grad_norm clips by the norm of every gradient of the model at once, which no side of a split "
                        "sees; a split model takes no max_grad_norm");
  out->server = strcmp(side, BB_SPLIT_SIDE_SERVER) == 0;
  out->u_shaped = strcmp(shape, BB_SPLIT_SHAPE_U) == 0;
  out->timeout_ns = timeout_ms * 1000000ull;
  out->max_pending = (size_t)max_pending;
  out->round_steps = round_steps;
  return 0;
}

/* ---- the parts ------------------------------------------------------------------------------- */

static int split_cuts(bbi_split_model *m, const char *cuts, bb_error *err) {
  const char *bar = strchr(cuts, '|');
  size_t first = bar ? (size_t)(bar - cuts) : strlen(cuts);
  if ((bar != NULL) != m->u_shaped || (bar && strchr(bar + 1, '|')) || !first || (bar && !bar[1]))
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "cuts `%s`: a %s split is cut at %s", cuts,
                        m->u_shaped ? "U-shaped" : "vanilla", m->u_shaped ? "two values (a|b)" : "one value");
  snprintf(m->cuts[0], sizeof m->cuts[0], "%.*s", (int)first, cuts);
  if (bar) snprintf(m->cuts[1], sizeof m->cuts[1], "%s", bar + 1);
  return 0;
}

static bool float_initializer(const bb_tensor_proto *p) {
  return p->data_type == BB_DTYPE_FLOAT || p->data_type == BB_DTYPE_DOUBLE || p->data_type == BB_DTYPE_FLOAT16 ||
         p->data_type == BB_DTYPE_BFLOAT16;
}

/* A parameter two parts read would be trained twice and drift apart: refused. */
static int check_untied(bb_model *const *parts, size_t n, const char *cuts, bb_error *err) {
  for (size_t a = 0; a < n; a++)
    for (size_t b = a + 1; b < n; b++)
      for (size_t i = 0; i < parts[a]->graph->initializers.len; i++) {
        const bb_tensor_proto *p = parts[a]->graph->initializers.items[i];
        if (!float_initializer(p)) continue;
        for (size_t k = 0; k < parts[b]->graph->initializers.len; k++)
          if (strcmp(parts[b]->graph->initializers.items[k]->name, p->name) == 0)
            return bb_error_set(err, BB_ERR_INVALID_ARGUMENT,
                                "parameter %s is read on both sides of the cut at %s; a split trains each parameter on one "
                                "side",
                                p->name, cuts);
      }
  return 0;
}

/* Every part of the split: [input → cuts[0]], then [cuts[0] → cuts[1]] (U), then [last cut → outputs]. */
static int cut_all(const bbi_split_model *m, const bb_model *whole, bb_model **parts, size_t *n, bb_error *err) {
  size_t n_cuts = m->u_shaped ? 2 : 1;
  *n = n_cuts + 1;
  for (size_t i = 0; i < *n; i++) {
    const char *in = i ? m->cuts[i - 1] : NULL, *out = i < n_cuts ? m->cuts[i] : NULL;
    bb_grad_cut_options o = {sizeof o, in ? &in : NULL, in ? 1 : 0, out ? &out : NULL, out ? 1 : 0};
    int rc = bb_grad_cut(whole, &o, m->alloc, &parts[i], err);
    if (rc) return rc;
  }
  return 0;
}

/* The OnnxModel engine of one part: gradients coming in for a part that ends at a cut,
 * the loss for the last one; the gradient of the cut it starts at handed back. */
static int build_part(bbi_split_model *m, const bb_model *part, const bbi_split_config *cfg, const char *starts_at,
                      bool upstream, bb_onnx_model **out, bbi_onnx_rows *cut_in, bb_error *err) {
  bb_onnx_model_config c = cfg->train;
  c.upstream = upstream;
  if (starts_at) {
    snprintf(c.input, sizeof c.input, "%s", starts_at);
    snprintf(c.input_grad, sizeof c.input_grad, "%s", starts_at);
  }
  if (upstream) c.output[0] = '\0';
  uint8_t *bytes = NULL;
  size_t len = 0;
  int rc = bb_model_encode(part, &bytes, &len, err);
  if (!rc) rc = bb_onnx_model_new(bytes, len, &c, m->alloc, out, err);
  bb_buffer_free(bbi_arena_allocator(part->arena), bytes);
  if (!rc && starts_at) rc = bbi_onnx_rows_input_of(part, starts_at, cut_in, err);
  if (!rc && starts_at) cut_in->name = starts_at; /* the engine's copy outlives the part */
  return rc;
}

void bbi_split_model_free(bbi_split_model *m) {
  if (!m) return;
  for (size_t i = 0; i < m->n_parts; i++) bb_onnx_model_free(m->part[i]);
  for (size_t i = 0; m->pending && i < m->max_pending; i++) bb_tensor_release(m->pending[i].input);
  bbi_mem_free(m->alloc, m->pending);
  bb_tensor_release(m->labels);
  bbi_mem_free(m->alloc, m);
}

/* The parts this side holds, from the cuts of the whole model. */
static int build_sides(bbi_split_model *m, const bbi_split_config *cfg, bb_model *const *parts, bb_error *err) {
  int rc;
  if (!m->server) {
    rc = build_part(m, parts[0], cfg, NULL, true, &m->part[0], &m->cut_in[0], err);
    m->n_parts = 1;
    if (!rc && m->u_shaped) {
      rc = build_part(m, parts[2], cfg, m->cuts[1], false, &m->part[1], &m->cut_in[1], err);
      m->n_parts = 2;
    }
    return rc;
  }
  m->n_parts = 1;
  return build_part(m, parts[1], cfg, m->cuts[0], m->u_shaped, &m->part[0], &m->cut_in[0], err);
}

int bbi_split_model_new(const uint8_t *onnx, size_t len, const bbi_split_config *cfg, const bb_allocator *alloc,
                        bbi_split_model **out, bb_error *err) {
  *out = NULL;
  if (!alloc) alloc = bb_default_allocator();
  bbi_split_model *m = bbi_mem_calloc(alloc, 1, sizeof *m);
  if (!m) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  m->alloc = alloc;
  m->server = cfg->server;
  m->u_shaped = cfg->u_shaped;
  m->timeout_ns = cfg->timeout_ns;
  m->round_steps = cfg->round_steps;
  m->max_pending = cfg->max_pending;
  m->forwarded = -1;
  bb_model *whole = NULL, *parts[MAX_PARTS] = {0};
  size_t n_parts = 0;
  int rc = split_cuts(m, cfg->cuts, err);
  if (!rc) rc = bb_model_decode(onnx, len, alloc, NULL, &whole, err);
  if (!rc && (rc = cut_all(m, whole, parts, &n_parts, err))) bb_error_prefix(err, "the split at %s: ", cfg->cuts);
  if (!rc) rc = check_untied(parts, n_parts, cfg->cuts, err);
  if (!rc && (rc = build_sides(m, cfg, parts, err))) bb_error_prefix(err, "the %s part: ", m->server ? "server's" : "client's");
  if (!rc && m->server && m->u_shaped && !(m->pending = bbi_mem_calloc(alloc, m->max_pending, sizeof *m->pending)))
    rc = bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  for (size_t i = 0; i < MAX_PARTS; i++) bb_model_free(parts[i]);
  bb_model_free(whole);
  if (rc) {
    bbi_split_model_free(m);
    return rc;
  }
  *out = m;
  return 0;
}

const bbi_split_counts *bbi_split_model_counts(const bbi_split_model *m) { return &m->counts; }
bb_onnx_model *bbi_split_part(const bbi_split_model *m, size_t i) { return i < m->n_parts ? m->part[i] : NULL; }
size_t bbi_split_part_count(const bbi_split_model *m) { return m->n_parts; }

/* ---- checks on what arrives --------------------------------------------------------------- */

static const char *describe(const bb_tensor *t, char *buf, size_t size) { return bb_tensor_describe(t, buf, size); }

/* Activations must have the cut's declared element type and shape (any batch): a tensor of
 * another layout but the same size per row would otherwise be read as something else. */
static int check_cut(bbi_split_model *m, const bbi_onnx_rows *cut, const bb_tensor *x, bb_error *err) {
  bool ok = x->dtype == cut->dtype && x->rank == cut->rank && x->rank >= 1 && x->dims[0] >= 1;
  for (int d = 0; ok && d < cut->rank; d++) ok = cut->dims[d] < 0 || cut->dims[d] == x->dims[d];
  if (ok) return 0;
  m->counts.refused_activations++;
  char got[96], want[160] = "";
  size_t used = 0;
  for (int d = 0; d < cut->rank && used < sizeof want; d++) {
    int w = cut->dims[d] < 0 ? snprintf(want + used, sizeof want - used, "%s?", d ? "," : "")
                             : snprintf(want + used, sizeof want - used, "%s%lld", d ? "," : "", (long long)cut->dims[d]);
    used += w > 0 ? (size_t)w : 0;
  }
  /* the element type as bb_tensor_describe names it */
  const char *kind = cut->dtype == BB_DTYPE_FLOAT ? "float32" : cut->dtype == BB_DTYPE_DOUBLE ? "float64" : bb_dtype_name(cut->dtype);
  return bb_error_set(err, BB_ERR_TYPE, "activations %s do not fit the cut %s, %s[%s]", describe(x, got, sizeof got),
                      cut->name, kind ? kind : "?", want);
}

/* A step tag: one whole float32. */
static bool tag_of(const bb_tensor *t, float *out) {
  if (t->dtype != BB_DTYPE_FLOAT || t->numel != 1) return false;
  *out = *(const float *)bb_tensor_data(t);
  return *out == floorf(*out) && *out >= 0 && *out < (float)STEP_WRAP;
}

static bb_tensor *new_tag(const bbi_split_model *m, uint32_t step) {
  int64_t one = 1;
  bb_tensor *t = bb_tensor_new_empty(m->alloc, BB_DTYPE_FLOAT, 1, &one);
  if (t) *(float *)bb_tensor_data(t) = (float)step;
  return t;
}

/* The client's step in flight is `tag`. */
static bool is_current(const bbi_split_model *m, const bb_tensor *tag) {
  float t;
  return m->waiting && tag_of(tag, &t) && t == (float)m->step;
}

static int refused_gradient(bbi_split_model *m, int rc, bool applied, const char *what, bb_error *err) {
  if (!rc && applied) return 0;
  m->counts.refused_gradients++;
  if (rc) return bb_error_prefix(err, "the gradient for %s: ", what);
  return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "the gradient for %s is not finite: the step was refused", what);
}

/* ---- a client's step ------------------------------------------------------------------------ */

bool bbi_split_ready(bbi_split_model *m, uint64_t now_ns) {
  if (m->averaging) {
    if (now_ns - m->averaging_since_ns < m->timeout_ns) return false;
    m->counts.average_timeouts++; /* train on without it: the next share tries again */
    m->averaging = false;
    m->round_done = 0;
  }
  if (!m->waiting) return true;
  if (now_ns - m->since_ns < m->timeout_ns) return false;
  m->counts.timeouts++;
  m->waiting = false;
  return true;
}

bool bbi_split_share_due(bbi_split_model *m, uint64_t now_ns) {
  if (m->server || m->waiting || m->averaging || m->round_done < m->round_steps) return false;
  m->averaging = true;
  m->averaging_since_ns = now_ns;
  m->counts.shares++;
  return true;
}

void bbi_split_loaded(bbi_split_model *m) {
  m->averaging = false;
  m->round_done = 0;
}

int bbi_split_forward(bbi_split_model *m, uint64_t now_ns, const bb_tensor *x, const bb_tensor *labels,
                      bb_tensor **activations, bb_tensor **step, bb_error *err) {
  *activations = *step = NULL;
  if (m->server) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "SplitForward starts a step on the clients' side");
  if (!bbi_split_ready(m, now_ns)) return 0;
  if (labels->dtype != BB_DTYPE_FLOAT || x->rank < 1 || labels->numel != x->dims[0])
    return bb_error_set(err, BB_ERR_TYPE, "a batch of %lld rows takes as many float32 labels, got %lld",
                        (long long)(x->rank ? x->dims[0] : 0), (long long)labels->numel);
  int rc = bb_onnx_model_forward(m->part[0], x, activations, err);
  if (rc) return rc;
  m->step = m->step % (STEP_WRAP - 1) + 1;
  if (!(*step = new_tag(m, m->step))) {
    bb_tensor_release(*activations);
    *activations = NULL;
    return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  }
  bb_tensor_release(m->labels);
  m->labels = bb_tensor_retain((bb_tensor *)labels);
  m->waiting = true;
  m->since_ns = now_ns;
  return 0;
}

int bbi_split_loss(bbi_split_model *m, const bb_tensor *activations, const bb_tensor *target, bb_tensor **gradient,
                   bb_tensor **loss, bb_error *err) {
  *gradient = *loss = NULL;
  bool client = !m->server;
  if (client != m->u_shaped) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "SplitLoss runs where the loss is: %s",
                                                 m->u_shaped ? "a U-shaped split's clients" : "a vanilla split's server");
  bb_onnx_model *part = m->part[client ? 1 : 0];
  const bbi_onnx_rows *cut = &m->cut_in[client ? 1 : 0];
  if (client && !is_current(m, target)) {
    m->counts.stale++;
    return 0;
  }
  int rc = check_cut(m, cut, activations, err);
  if (rc) return rc;
  const bb_tensor *labels = client ? m->labels : target;
  if (labels->dtype != BB_DTYPE_FLOAT || labels->numel != activations->dims[0]) {
    m->counts.refused_activations++;
    return bb_error_set(err, BB_ERR_TYPE, "activations of %lld rows came with %lld labels", (long long)activations->dims[0],
                        (long long)labels->numel);
  }
  bb_grad_step st;
  rc = bb_onnx_model_step(part, activations, labels, &st, err);
  if (!rc && !st.applied) {
    m->counts.refused_activations++;
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "the loss or a gradient of the %s part is not finite: the step was refused",
                        client ? "head" : "server's");
  }
  if (rc) return rc;
  int64_t one = 1;
  *loss = bb_tensor_new_empty(m->alloc, BB_DTYPE_FLOAT, 1, &one);
  *gradient = bb_tensor_retain((bb_tensor *)bb_onnx_model_input_grad(part));
  if (!*loss || !*gradient) {
    bb_tensor_release(*loss), bb_tensor_release(*gradient);
    *loss = *gradient = NULL;
    return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  }
  *(float *)bb_tensor_data(*loss) = st.loss;
  if (!client) m->counts.steps++;
  return 0;
}

/* ---- a middle part (the server of a U-shaped split) --------------------------------------- */

static long find_pending(const bbi_split_model *m, const bb_peer_id *from) {
  for (size_t i = 0; i < m->max_pending; i++)
    if (m->pending[i].used && bb_peer_id_equal(&m->pending[i].from, from)) return (long)i;
  return -1;
}

static void drop_pending(bbi_split_model *m, long i) {
  bb_tensor_release(m->pending[i].input);
  m->pending[i] = (pending){0};
  if (m->forwarded == i) m->forwarded = -1;
}

/* The entry of `from`: its own, a free one, or the oldest one's (evicted). */
static long claim_pending(bbi_split_model *m, const bb_peer_id *from) {
  long at = find_pending(m, from), oldest = 0;
  for (size_t i = 0; at < 0 && i < m->max_pending; i++) {
    if (!m->pending[i].used) at = (long)i;
    else if (m->pending[i].order < m->pending[oldest].order) oldest = (long)i;
  }
  if (at < 0) {
    m->counts.evicted++;
    at = oldest;
  }
  if (m->pending[at].used) drop_pending(m, at);
  return at;
}

int bbi_split_relay(bbi_split_model *m, const bb_peer_id *from, const bb_tensor *activations, const bb_tensor *step,
                    bb_tensor **out, bb_error *err) {
  *out = NULL;
  float tag;
  if (!m->server || !m->u_shaped) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "SplitRelay runs on a U-shaped split's server");
  if (!tag_of(step, &tag)) {
    m->counts.refused_activations++;
    return bb_error_set(err, BB_ERR_TYPE, "the step of a relay must be one whole float32");
  }
  int rc = check_cut(m, &m->cut_in[0], activations, err);
  if (!rc) rc = bb_onnx_model_forward(m->part[0], activations, out, err);
  if (rc) return rc;
  long at = claim_pending(m, from);
  m->pending[at] = (pending){true, *from, tag, bb_tensor_retain((bb_tensor *)activations), ++m->arrivals};
  m->forwarded = at;
  return 0;
}

static int middle_backward(bbi_split_model *m, const bb_peer_id *from, const bb_tensor *gradient, const bb_tensor *step,
                           bb_tensor **input_gradient, bool *applied, bb_error *err) {
  float tag;
  long at = find_pending(m, from);
  if (at < 0 || !tag_of(step, &tag) || tag != m->pending[at].step) {
    m->counts.stale++;
    return 0;
  }
  int rc = 0;
  if (m->forwarded != at) { /* another client's forward came in between: this one's again */
    bb_tensor *again = NULL;
    rc = bb_onnx_model_forward(m->part[0], m->pending[at].input, &again, err);
    bb_tensor_release(again);
  }
  bb_grad_step st = {0};
  if (!rc) rc = bb_onnx_model_backward(m->part[0], gradient, &st, err);
  drop_pending(m, at);
  m->forwarded = -1;
  if ((rc = refused_gradient(m, rc, st.applied, "the middle part", err))) return rc;
  *applied = true;
  m->counts.steps++;
  *input_gradient = bb_tensor_retain((bb_tensor *)bb_onnx_model_input_grad(m->part[0]));
  return *input_gradient ? 0 : bb_error_set(err, BB_ERR_NOMEM, "out of memory");
}

int bbi_split_backward(bbi_split_model *m, const bb_peer_id *from, const bb_tensor *gradient, const bb_tensor *step,
                       bb_tensor **input_gradient, bool *applied, bb_error *err) {
  *input_gradient = NULL;
  *applied = false;
  if (m->server) {
    if (!m->u_shaped) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "a vanilla split's server takes no SplitBackward");
    return middle_backward(m, from, gradient, step, input_gradient, applied, err);
  }
  if (!is_current(m, step)) {
    m->counts.stale++;
    return 0;
  }
  bb_grad_step st = {0};
  int rc = bb_onnx_model_backward(m->part[0], gradient, &st, err);
  m->waiting = false;
  if ((rc = refused_gradient(m, rc, st.applied, "the client's part", err))) return rc;
  *applied = true;
  m->counts.steps++;
  m->round_done++;
  return 0;
}

/* ---- inference ---------------------------------------------------------------------------------- */

int bbi_split_predict(bbi_split_model *m, const bb_tensor *x, bb_tensor **y, bb_error *err) {
  *y = NULL;
  if (m->server && !m->u_shaped) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "a vanilla split's server part ends in the loss: Evaluate it");
  int rc = m->server ? check_cut(m, &m->cut_in[0], x, err) : 0;
  return rc ? rc : bb_onnx_model_predict(m->part[0], x, y, err);
}

int bbi_split_evaluate(bbi_split_model *m, const bb_tensor *activations, const bb_tensor *labels, float *score,
                       bb_error *err) {
  bool client = !m->server;
  if (client != m->u_shaped) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "Evaluate runs where the loss is: %s",
                                                 m->u_shaped ? "a U-shaped split's clients" : "a vanilla split's server");
  int rc = check_cut(m, &m->cut_in[client ? 1 : 0], activations, err);
  return rc ? rc : bb_onnx_model_evaluate(m->part[client ? 1 : 0], activations, labels, score, err);
}
