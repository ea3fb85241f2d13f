/* Split learning across two peers: split_cnn's Modules (vanilla and U-shaped), compiled
 * with their default bindings and run by two nodes over the simulated network, against
 * one trainer of the whole CNN; and every way a confused author or a lying peer gets it
 * wrong:
 *   exactness   N steps split give the whole model's parameters, bit for bit
 *   author      a cut at no value, a cut that does not separate the graph, both parts on
 *               one peer class, a split op recorded by hand, a binding that sets the cut,
 *               bb_rec_split misused
 *   peers       a client whose model differs at the cut (activations of another shape), a
 *               server that answers with gradients of the wrong shape, not finite, or for
 *               a step that is gone, a server that never answers
 * Each refusal names what was wrong, is counted, and leaves the parameters as they were. */
#include <math.h>

#include "../runtime/rttest.h"
#include "bb/bytes.h"
#include "bb/dataset.h"
#include "bb/grad.h"
#include "bb/sim.h"
#include "programs/examples.h"

#define MODEL BB_TEST_SOURCE_DIR "/examples/models/digits_cnn.onnx"
#define ROWS 64
#define BATCH 16
#define STEPS 6
#define MS 1000000ull

/* ---- the network ----------------------------------------------------------------------------- */

typedef struct split_net {
  bb_registry *reg;
  bb_sim *sim;
  bb_node *node[2]; /* [0] the server, [1] the client */
  bb_peer_id peer[2];
  bb_bytes client_model, server_model;
  const char *client_config; /* the client's SplitModel config instead of the artifact's, or NULL */
  bool by_hand;              /* no simulated network: the test hands the envelopes over */
  bb_dataset data;
  size_t failures[2];
  char last_failure[2][512];
  uint8_t *artifact; /* split_cnn's Module, when module_open compiled it */
  size_t artifact_len;
} split_net;

static bb_bytes read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  bb_bytes b = {NULL, 0};
  if (!f) return b;
  fseek(f, 0, SEEK_END);
  b.len = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  b.data = malloc(b.len);
  if (fread(b.data, 1, b.len, f) != b.len) b.len = 0;
  fclose(f);
  return b;
}

/* 64 rows of 8x8 "images" with pixel values 0..16, ten classes. */
static void synthetic_digits(bb_dataset *ds) {
  bb_error err;
  CHECK(!bb_dataset_init(ds, ROWS, 64, 1, NULL, &err));
  for (size_t i = 0; i < ROWS; i++) {
    ds->labels[i] = (float)(i % 10);
    for (size_t k = 0; k < 64; k++) ds->features[i * 64 + k] = (float)((i * 7 + k * 3 + (i % 10) * k) % 17);
  }
}

static void observe(void *user, const bb_peer_id *peer, const bb_step *s) {
  split_net *n = user;
  uint64_t id = 0;
  bb_peer_id_as_u64(peer, &id);
  size_t i = id == 1 ? 0 : 1;
  if (s->kind == BB_STEP_OP_FAILED || s->kind == BB_STEP_WIRE_RECEIVE_FAILED) {
    n->failures[i]++;
    snprintf(n->last_failure[i], sizeof n->last_failure[i], "%s", s->detail ? s->detail : "");
  }
}

/* Installs node i running `target` (and, for SplitFed's client, `also`), given what its
 * side holds only: the server the model, the client the model and its data. */
static int install2(split_net *n, size_t i, const uint8_t *artifact, size_t len, const char *target, const char *also,
                    bb_error *err) {
  bb_address self = bb_address_p2p(&n->peer[i]);
  bb_slot_config server_slots[] = {{"server_model", NULL, &n->server_model}, {"averager", "quorum=1,target=1", NULL}};
  bb_slot_config client_slots[] = {{"client_model", n->client_config, &n->client_model},
                                   {"data", "batch=16,shuffle=0", &n->data},
                                   {"averager", "quorum=1,target=1", NULL}};
  const char *targets[] = {target, also};
  bb_node_config nc = {0};
  nc.struct_size = sizeof nc;
  nc.seed = 7 + i;
  bb_install_args a = {0};
  a.struct_size = sizeof a;
  a.self = n->peer[i];
  a.addresses = &self;
  a.n_addresses = 1;
  a.artifact = artifact;
  a.artifact_len = len;
  a.targets = targets;
  a.n_targets = also ? 2 : 1;
  a.registry = n->reg;
  a.slots = i ? client_slots : server_slots;
  a.n_slots = i ? 3 : 2;
  a.config = &nc;
  int rc = bb_install(&a, &n->node[i], NULL, err);
  bb_address other = bb_address_p2p(&n->peer[1 - i]);
  if (!rc) rc = bb_node_add_peer(n->node[i], &n->peer[1 - i], &other, err);
  return rc;
}

static int install(split_net *n, size_t i, const uint8_t *artifact, size_t len, const char *target, bb_error *err) {
  return install2(n, i, artifact, len, target, NULL, err);
}

static const char *const MODULES[] = {"SplitCnn", "SplitCnnU", "SplitFedCnn"};

/* A server and a client of split_cnn's module `which` with its artifact; the client
 * started (SplitFed's also runs the partition the average comes to, and the server sends
 * it there). */
static int net_start(split_net *n, const uint8_t *artifact, size_t len, size_t which, bb_error *err) {
  const char *module = MODULES[which];
  char server[64], clients[64];
  snprintf(server, sizeof server, "%s_server", module);
  snprintf(clients, sizeof clients, "%s_clients", module);
  bb_sim_config sc = {0};
  sc.struct_size = sizeof sc;
  sc.seed = 3;
  sc.latency_ns = 5 * MS;
  sc.jitter_ns = 2 * MS;
  int rc = n->by_hand ? 0 : bb_sim_new(&sc, &n->sim, err);
  if (rc) return rc;
  if (n->sim) bb_sim_set_observer(n->sim, observe, n);
  bb_val *to = bb_val_peers(NULL, &n->peer[0], 1), *client = bb_val_peers(NULL, &n->peer[1], 1);
  if ((rc = install(n, 0, artifact, len, server, err)) ||
      (rc = install2(n, 1, artifact, len, module, which == 2 ? clients : NULL, err)) ||
      (which == 2 && (rc = bb_node_bind_input(n->node[0], server, "clients", client, err))) ||
      (n->sim && ((rc = bb_sim_attach(n->sim, n->node[0], &n->peer[0], err)) ||
                  (rc = bb_sim_attach(n->sim, n->node[1], &n->peer[1], err))))) {
    bb_val_release(to), bb_val_release(client);
    return rc;
  }
  int64_t xd[2] = {ROWS, 64}, yd[1] = {ROWS};
  bb_tensor *tx = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 2, xd), *ty = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 1, yd);
  memcpy(bb_tensor_data(tx), n->data.features, sizeof(float) * ROWS * 64);
  memcpy(bb_tensor_data(ty), n->data.labels, sizeof(float) * ROWS);
  bb_val *vx = bb_val_tensor(NULL, tx), *vy = bb_val_tensor(NULL, ty);
  rc = bb_node_bind_input(n->node[1], module, "server", to, err);
  if (!rc) rc = bb_node_bind_input(n->node[1], module, "test_x", vx, err);
  if (!rc) rc = bb_node_bind_input(n->node[1], module, "test_y", vy, err);
  if (!rc) rc = bb_node_invoke(n->node[1], module, NULL, 0, 0, err);
  bb_val_release(to), bb_val_release(client), bb_val_release(vx), bb_val_release(vy);
  bb_tensor_release(tx), bb_tensor_release(ty);
  return rc;
}

static bool net_open(split_net *n, const bb_registry *reg) {
  memset(n, 0, sizeof *n);
  n->reg = (bb_registry *)reg;
  n->client_model = read_file(MODEL);
  n->server_model = read_file(MODEL);
  synthetic_digits(&n->data);
  n->peer[0] = bb_peer_id_from_u64(1);
  n->peer[1] = bb_peer_id_from_u64(2);
  CHECK_MSG(n->client_model.len && n->server_model.len, "cannot read %s", MODEL);
  return n->client_model.len && n->server_model.len;
}

static void net_close(split_net *n) {
  bb_sim_free(n->sim);
  for (size_t i = 0; i < 2; i++) bb_node_free(n->node[i]);
  free(n->client_model.data);
  free(n->server_model.data);
  bb_dataset_free(&n->data);
}

/* Runs the network until the client has taken `steps` steps or `ns` of simulated time passed. */
static void net_run(split_net *n, uint64_t steps, uint64_t ns) {
  bb_error err;
  uint64_t until = bb_sim_now(n->sim) + ns;
  while (bb_node_counter(n->node[1], "split.steps") < steps && bb_sim_now(n->sim) < until)
    if (bb_sim_step(n->sim, &err)) {
      CHECK_MSG(0, "sim: %s", err.message);
      return;
    }
}

static uint8_t *compile_module(size_t module, size_t *len) {
  uint8_t *out = NULL;
  bb_error err;
  CHECK_MSG(!bb_example_compile(&BB_EXAMPLE_SPLIT_CNN, module, &out, len, &err), "compile: %s", err.message);
  return out;
}

static bb_registry *shipped(void) {
  bb_registry *r = bb_registry_new(NULL);
  bb_error err;
  CHECK(r && !bb_registry_add_shipped(r, &err));
  return r;
}

/* Opens the network of split_cnn's Module `which`: the shipped components and the Module's
 * artifact (in n->artifact), both freed by module_close whether or not it opened. */
static bool module_open(split_net *n, size_t which) {
  size_t len = 0;
  uint8_t *artifact = compile_module(which, &len);
  bool opened = net_open(n, shipped());
  n->artifact = artifact;
  n->artifact_len = len;
  return opened && artifact;
}

static void module_close(split_net *n) {
  net_close(n);
  bb_buffer_free(NULL, n->artifact);
  bb_registry_free(n->reg);
}

/* ---- what a node's SplitModel holds, by name (its saved state) --------------------------------- */

typedef struct held {
  bb_model *parts[2];
  size_t n;
} held;

static held saved(bb_node *node, const char *slot) {
  held h = {{NULL, NULL}, 0};
  const bb_component_type *type = NULL;
  void *self = bb_node_component(node, slot, &type);
  uint8_t *bytes = NULL;
  size_t len = 0, at = 0;
  bb_error err;
  CHECK(self && type && type->save && !type->save(self, NULL, &bytes, &len, &err));
  while (bytes && at + 4 <= len && h.n < 2) {
    uint32_t size = bb_le_get_u32(bytes + at);
    CHECK(!bb_model_decode(bytes + at + 4, size, NULL, NULL, &h.parts[h.n++], &err));
    at += 4 + size;
  }
  bb_buffer_free(NULL, bytes);
  return h;
}

static void held_free(held *h) {
  for (size_t i = 0; i < h->n; i++) bb_model_free(h->parts[i]);
}

static const bb_tensor_proto *held_find(const held *h, const char *name) {
  for (size_t i = 0; i < h->n; i++)
    for (size_t k = 0; k < h->parts[i]->graph->initializers.len; k++)
      if (strcmp(h->parts[i]->graph->initializers.items[k]->name, name) == 0) return h->parts[i]->graph->initializers.items[k];
  return NULL;
}

static bool same_proto(const bb_tensor_proto *a, const bb_tensor_proto *b) {
  bb_tensor *x = NULL, *y = NULL;
  bb_error err;
  bool same = a && b && !bb_tensor_from_proto(a, NULL, &x, &err) && !bb_tensor_from_proto(b, NULL, &y, &err) &&
              bb_tensor_same_shape(x, y) && !memcmp(bb_tensor_data(x), bb_tensor_data(y), bb_tensor_nbytes(x));
  bb_tensor_release(x);
  bb_tensor_release(y);
  return same;
}

/* Whether every tensor a state holds (parameters, optimizer state) is the same in b. */
static bool all_equal(const held *a, const held *b) {
  size_t n = 0, same = 0;
  for (size_t i = 0; i < a->n; i++)
    for (size_t k = 0; k < a->parts[i]->graph->initializers.len; k++) {
      const bb_tensor_proto *p = a->parts[i]->graph->initializers.items[k];
      same += same_proto(p, held_find(b, p->name));
      n++;
    }
  return n && same == n;
}

/* ---- exactness -------------------------------------------------------------------------------- */

/* The whole CNN trained STEPS steps by one trainer, as split_cnn's SplitModels are
 * configured (softmax cross-entropy, Nesterov momentum, lr 0.05), on the batches the
 * clients' ArraySource deals (rows in order, 16 at a time). */
static bb_grad_trainer *train_whole(const split_net *n, int steps, bb_model **model, bb_grad_graph **g, bb_grad_optimizer **opt) {
  bb_error err;
  CHECK(!bb_model_decode(n->client_model.data, n->client_model.len, NULL, NULL, model, &err));
  bb_grad_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.loss = BB_GRAD_LOSS_SOFTMAX_CROSS_ENTROPY;
  bb_optimizer_config c = bb_optimizer_defaults(BB_OPTIMIZER_MOMENTUM);
  c.nesterov = true;
  c.lr = 0.05f;
  bb_grad_trainer *t = NULL;
  int rc = bb_grad_build(*model, &o, NULL, g, &err);
  if (!rc) rc = bb_grad_optimizer_build(*g, &c, opt, &err);
  if (!rc) rc = bb_grad_trainer_new(*g, *opt, 0, NULL, &t, &err);
  CHECK_MSG(!rc, "%s", err.message);
  for (int s = 0; t && s < steps; s++) {
    int64_t xd[4] = {BATCH, 1, 8, 8}, yd[1] = {BATCH};
    bb_tensor *x = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 4, xd), *y = bb_tensor_new_empty(NULL, BB_DTYPE_INT64, 1, yd);
    size_t first = (size_t)(s * BATCH) % ROWS;
    memcpy(bb_tensor_data(x), n->data.features + first * 64, sizeof(float) * BATCH * 64);
    for (int i = 0; i < BATCH; i++) ((int64_t *)bb_tensor_data(y))[i] = (int64_t)n->data.labels[first + (size_t)i];
    const char *names[] = {"pixels", "target"};
    bb_tensor *in[] = {x, y};
    bb_grad_step st;
    CHECK_MSG(!bb_grad_trainer_step(t, names, in, 2, &st, &err) && st.applied, "%s", err.message);
    bb_tensor_release(x);
    bb_tensor_release(y);
  }
  return t;
}

/* `steps` steps of split_cnn's module `which` with one client, against the whole model. */
static void check_exact(size_t which, int steps) {
  const char *what = MODULES[which];
  split_net n;
  bb_error err;
  if (module_open(&n, which)) {
    CHECK_MSG(!net_start(&n, n.artifact, n.artifact_len, which, &err), "%s", err.message);
    net_run(&n, (uint64_t)steps, 5000 * MS);
    CHECK_EQ_INT(bb_node_counter(n.node[1], "split.steps"), steps);
    CHECK_EQ_INT(n.failures[0] + n.failures[1], 0);
    bb_model *model = NULL;
    bb_grad_graph *g = NULL;
    bb_grad_optimizer *opt = NULL;
    bb_grad_trainer *whole = train_whole(&n, steps, &model, &g, &opt);
    held client = saved(n.node[1], "client_model"), server = saved(n.node[0], "server_model");
    size_t checked = 0;
    for (size_t i = 0; whole && i < g->n_params; i++) {
      const char *name = g->params[i];
      const bb_tensor_proto *p = held_find(&client, name) ? held_find(&client, name) : held_find(&server, name);
      bb_tensor_proto *mine = NULL;
      CHECK_MSG(p, "%s: no side holds %s", what, name);
      CHECK(!bb_tensor_to_proto(model, bb_grad_trainer_value(whole, name), name, &mine, &err));
      CHECK_MSG(same_proto(p, mine), "%s: %s after %d split steps differs from the whole model's", what, name, steps);
      checked++;
    }
    CHECK_EQ_INT(checked, 8); /* conv1, conv2, fc1, fc2: weights and biases */
    if (which == 2) CHECK_EQ_INT(bb_node_counter(n.node[1], "split.shares"), steps / 10); /* the averages were taken */
    held_free(&client);
    held_free(&server);
    bb_grad_trainer_free(whole);
    bb_grad_optimizer_free(opt);
    bb_grad_graph_free(g);
    bb_model_free(model);
  }
  module_close(&n);
}

static void test_vanilla_is_the_whole_model(void) { check_exact(0, STEPS); }
static void test_u_shaped_is_the_whole_model(void) { check_exact(1, STEPS); }

/* SplitFed with one client is the vanilla split: its part shared every 10 steps comes back
 * as the average of one, the same values (and the client takes no step in between). */
static void test_split_fed_of_one_is_the_whole_model(void) {
  check_exact(2, 25);
}

/* Each node builds the part its partitions hold and nothing else: given its own side's
 * host data only (the server no data set, neither the other side's model), the server
 * holds no clients' part and no DataSource, the client no server part, and they train. */
static void test_each_side_builds_its_own_part(void) {
  for (size_t which = 0; which < 2; which++) {
    split_net n;
    bb_error err;
    if (module_open(&n, which)) {
      CHECK_MSG(!net_start(&n, n.artifact, n.artifact_len, which, &err), "%s: %s", MODULES[which], err.message);
      CHECK_MSG(!bb_node_component(n.node[0], "client_model", NULL) && !bb_node_component(n.node[0], "data", NULL),
                "%s: the server built the clients' part or their DataSource", MODULES[which]);
      CHECK_MSG(!bb_node_component(n.node[1], "server_model", NULL), "%s: the client built the server's part", MODULES[which]);
      net_run(&n, 2, 5000 * MS);
      CHECK_EQ_INT(bb_node_counter(n.node[1], "split.steps"), 2);
      held client = saved(n.node[1], "client_model"), server = saved(n.node[0], "server_model");
      CHECK_EQ_INT(client.n, which == 1 ? 2 : 1); /* a U client holds the first layers and the head */
      CHECK_MSG(held_find(&client, "conv1.weight") && !held_find(&client, "fc1.weight") && held_find(&server, "fc1.weight") &&
                    !held_find(&server, "conv1.weight"),
                "%s: a parameter is held on the wrong side", MODULES[which]);
      held_free(&client);
      held_free(&server);
    }
    module_close(&n);
  }
}

/* Polls node `from` at `now` and hands what it sent to the other node, delivered at `now`
 * too; returns how many envelopes went. */
static size_t hand_over(split_net *n, size_t from, uint64_t now) {
  const bb_step *steps = NULL;
  size_t count = 0, sent = 0;
  bb_error err;
  CHECK_MSG(!bb_node_poll(n->node[from], now, &steps, &count, &err), "%s", err.message);
  for (size_t i = 0; i < count; i++) {
    if (steps[i].kind != BB_STEP_SEND) continue;
    CHECK_MSG(!bb_node_deliver(n->node[1 - from], &n->peer[from], steps[i].bytes, steps[i].len, now, &err), "%s", err.message);
    sent++;
  }
  return sent;
}

/* A busy server (or a busy page) gets to what arrived 300 ms after it came, past the
 * compiler's per-hop budget of 100 ms: the split's messages live as long as a step waits
 * for its answer, so both the activations and the gradients are taken and the steps go
 * on, none dropped as expired and waited for until the step's timeout. */
static void test_late_answers_are_taken(void) {
  for (size_t which = 0; which < 2; which++) {
    split_net n;
    bb_error err;
    if (module_open(&n, which)) {
      n.by_hand = true;
      CHECK_MSG(!net_start(&n, n.artifact, n.artifact_len, which, &err), "%s: %s", MODULES[which], err.message);
      uint64_t now = 0;
      for (int round = 0; round < 40 && bb_node_counter(n.node[1], "split.steps") < 3; round++) {
        hand_over(&n, 1, now += MS);     /* the client steps and sends */
        hand_over(&n, 0, now += 300 * MS); /* the server gets to it late */
      }
      CHECK_MSG(bb_node_counter(n.node[1], "split.steps") == 3, "%s: %llu steps", MODULES[which],
                (unsigned long long)bb_node_counter(n.node[1], "split.steps"));
      for (size_t i = 0; i < 2; i++) CHECK_EQ_INT(bb_node_counter(n.node[i], "wire.expired"), 0);
      CHECK_EQ_INT(bb_node_counter(n.node[1], "split.timeouts"), 0);
    }
    module_close(&n);
  }
}

/* ---- the confused author ------------------------------------------------------------------------ */

static const bb_slot CLIENT = {BB_ROLE_MODEL, "client_model", NULL};
static const bb_slot SERVER = {BB_ROLE_MODEL, "server_model", NULL};

/* A split Module of its own: the shape and cuts a test gives, split_cnn's bindings. */
typedef struct custom {
  bb_split_shape shape;
  const char *const *cuts;
  size_t n_cuts;
  bool server_on_self; /* the server's peers picked on the clients' own class */
  bool by_hand;        /* a SplitForward recorded without bb_rec_split */
} custom;

static void custom_body(bb_rec *g, void *user) {
  const custom *c = user;
  bb_value tick = bb_rec_interval(g, MS);
  if (c->by_hand) {
    bb_value out[3];
    bb_rec_role_call(g, &CLIENT, "SplitForward", &tick, 1, NULL, 0, out, 3);
    return;
  }
  static const bb_slot VIEW = {BB_ROLE_PEER_SELECTOR, "view", NULL};
  bb_value server = c->server_on_self ? bb_rec_peer_selector_sample(g, &VIEW, 1) : bb_rec_input(g, "server", BB_TYPE_PEER_ID_VEC);
  bb_split s = {sizeof s, c->shape, c->cuts, c->n_cuts, &CLIENT, &SERVER, server, tick, {0}, {0}, {0}, NULL, {0}};
  bb_rec_split(g, &s);
}

/* Records and compiles the custom Module with split_cnn's bindings (and config_client as
 * the client's config when given). */
static int compile_custom(const custom *c, const char *config_client, uint8_t **out, size_t *len, bb_error *err) {
  bb_module m = {sizeof m, "Custom", custom_body, NULL, (void *)c, NULL, 0};
  bb_model *rec = NULL;
  uint8_t *bytes = NULL;
  size_t n = 0;
  int rc = bb_module_build(&m, NULL, &rec, err);
  if (!rc) rc = bb_model_encode(rec, &bytes, &n, err);
  bb_model_free(rec);
  bb_compiler *comp = rc ? NULL : bb_compiler_new(NULL);
  if (!rc) rc = BB_EXAMPLE_SPLIT_CNN.configure(comp, 0, err);
  if (!rc && config_client && !(rc = bb_compiler_unbind(comp, "client_model", err)))
    rc = bb_compiler_bind_model(comp, "client_model", "SplitModel", config_client, err);
  if (!rc && c->server_on_self) rc = bb_example_declare(comp, "ConstantView", NULL, 0, err) ||
                                     bb_compiler_bind_peer_selector(comp, "view", "ConstantView", NULL, err);
  if (!rc) rc = bb_compiler_compile(comp, bytes, n, out, len, err);
  bb_compiler_free(comp);
  bb_buffer_free(NULL, bytes);
  return rc;
}

/* Installs the custom Module's server partition and returns what install said. */
static int install_custom_server(const custom *c, bb_error *err) {
  uint8_t *artifact = NULL;
  size_t len = 0;
  int rc = compile_custom(c, NULL, &artifact, &len, err);
  CHECK_MSG(!rc, "%s", err->message);
  bb_registry *reg = shipped();
  split_net n;
  if (!rc && net_open(&n, reg)) {
    rc = install(&n, 0, artifact, len, "Custom_server", err);
    net_close(&n);
  }
  bb_registry_free(reg);
  bb_buffer_free(NULL, artifact);
  return rc;
}

static void test_cut_at_no_value(void) {
  static const char *const cuts[] = {"conv_out"};
  custom c = {BB_SPLIT_VANILLA, cuts, 1, false, false};
  bb_error err;
  CHECK_EQ_INT(install_custom_server(&c, &err), BB_ERR_NOT_FOUND);
  CHECK_MSG(strstr(err.message, "SplitModel") && strstr(err.message, "the split at conv_out") &&
                strstr(err.message, "no value of the graph"),
            "%s", err.message);
}

static void test_cut_that_does_not_separate(void) {
  /* the U-shaped cuts out of order: the middle part would run from the second pooling back
   * to the first */
  static const char *const cuts[] = {"/MaxPool_1_output_0", "/MaxPool_output_0"};
  custom c = {BB_SPLIT_U, cuts, 2, false, false};
  bb_error err;
  CHECK_EQ_INT(install_custom_server(&c, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK_MSG(strstr(err.message, "does not separate the graph") && strstr(err.message, "pixels"), "%s", err.message);
}

static void expect_compile_error(const custom *c, const char *config_client, const char *want) {
  uint8_t *artifact = NULL;
  size_t len = 0;
  bb_error err;
  bb_error_clear(&err);
  CHECK(compile_custom(c, config_client, &artifact, &len, &err) != 0);
  CHECK_MSG(strstr(err.message, "SplitPlacement") && strstr(err.message, want), "\"%s\" lacks \"%s\"", err.message, want);
  bb_buffer_free(NULL, artifact);
}

static void test_placement_refusals(void) {
  static const char *const cuts[] = {BB_SPLIT_CNN_CUT};
  custom same_class = {BB_SPLIT_VANILLA, cuts, 1, true, false};
  expect_compile_error(&same_class, NULL, "both run on peer class `@self`");
  custom by_hand = {BB_SPLIT_VANILLA, cuts, 1, false, true};
  expect_compile_error(&by_hand, NULL, "split op without a split");
  custom plain = {BB_SPLIT_VANILLA, cuts, 1, false, false};
  expect_compile_error(&plain, "loss=xent,cuts=/Relu_output_0", "slot `client_model`'s config sets `cuts`");
}

/* A Module whose body records the given split with a tick and a server input. */
static void bad_body(bb_rec *g, void *user) {
  bb_split s = *(const bb_split *)user;
  s.tick = bb_rec_interval(g, MS);
  s.server_peers = bb_rec_input(g, "server", BB_TYPE_PEER_ID_VEC);
  bb_rec_split(g, &s);
}

static void expect_record_error(const bb_split *s, const char *want) {
  bb_module bad = {sizeof bad, "Bad", bad_body, NULL, (void *)s, NULL, 0};
  bb_model *rec = NULL;
  bb_error err;
  bb_error_clear(&err);
  CHECK(bb_module_build(&bad, NULL, &rec, &err) != 0);
  CHECK_MSG(strstr(err.message, want), "\"%s\" lacks \"%s\"", err.message, want);
  bb_model_free(rec);
}

static void test_recorder_refusals(void) {
  static const char *const two[] = {"/MaxPool_output_0", "/MaxPool_1_output_0"}, *comma[] = {"a,b"}, *same[] = {"x", "x"};
  bb_split s = {sizeof s, BB_SPLIT_VANILLA, two, 2, &CLIENT, &SERVER, {0}, {0}, {0}, {0}, {0}, NULL, {0}};
  expect_record_error(&s, "a vanilla split is cut at 1 value; got 2");
  s.cuts = comma, s.n_cuts = 1;
  expect_record_error(&s, "cut 'a,b' is not the name of a value");
  s.shape = BB_SPLIT_U, s.cuts = same, s.n_cuts = 2;
  expect_record_error(&s, "cut twice at x");
  s.shape = BB_SPLIT_VANILLA, s.cuts = two, s.n_cuts = 1, s.server = &CLIENT;
  expect_record_error(&s, "hold their parts in one slot 'client_model'");
  s.server = &SERVER, s.struct_size = 8;
  expect_record_error(&s, "split: struct_size 8");
}

/* ---- lying and silent peers --------------------------------------------------------------------- */

/* The client's config as the compiler writes it for split_cnn, with a timeout of 200 ms
 * (a host's override replaces the whole config). */
#define QUICK_CLIENT(shape) BB_SPLIT_CNN_MODEL_CONFIG ",cuts=" BB_SPLIT_CNN_CUT ",side=client,shape=" shape ",timeout_ms=200"


/* The client's model with another second convolution (8 filters instead of 32, fc1 cut to
 * match): a whole, consistent model, whose activations at the cut are [n, 8, 2, 2]. */
static bb_bytes narrower_model(const bb_bytes *whole) {
  bb_model *m = NULL;
  bb_error err;
  bb_bytes out = {NULL, 0};
  CHECK(!bb_model_decode(whole->data, whole->len, NULL, NULL, &m, &err));
  for (size_t i = 0; m && i < m->graph->initializers.len; i++) {
    bb_tensor_proto *p = m->graph->initializers.items[i];
    bool w2 = strcmp(p->name, "conv2.weight") == 0, b2 = strcmp(p->name, "conv2.bias") == 0, f1 = strcmp(p->name, "fc1.weight") == 0;
    if (!w2 && !b2 && !f1) continue;
    bb_tensor *t = NULL;
    CHECK(!bb_tensor_from_proto(p, NULL, &t, &err));
    int64_t dims[4];
    memcpy(dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
    dims[f1 ? 1 : 0] = f1 ? 32 : 8; /* the first 8 filters; fc1 reads 8·2·2 values */
    bb_tensor *cut = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, t->rank, dims);
    const float *src = bb_tensor_data(t);
    float *dst = bb_tensor_data(cut);
    for (int64_t k = 0; k < cut->numel; k++) dst[k] = f1 ? src[(k / 32) * 128 + k % 32] : src[k];
    bb_tensor_proto *q = NULL;
    CHECK(!bb_tensor_to_proto(m, cut, p->name, &q, &err));
    m->graph->initializers.items[i] = q;
    bb_tensor_release(t);
    bb_tensor_release(cut);
  }
  uint8_t *bytes = NULL;
  CHECK(m && !bb_model_encode(m, &bytes, &out.len, &err));
  out.data = malloc(out.len);
  if (bytes) memcpy(out.data, bytes, out.len);
  bb_buffer_free(NULL, bytes);
  bb_model_free(m);
  return out;
}

static void test_activations_of_another_shape(void) {
  bb_registry *reg = shipped();
  split_net n;
  size_t len = 0;
  uint8_t *artifact = compile_module(0, &len);
  bb_error err;
  if (net_open(&n, reg) && artifact) {
    bb_bytes narrow = narrower_model(&n.client_model);
    free(n.client_model.data);
    n.client_model = narrow;
    CHECK_MSG(!net_start(&n, artifact, len, 0, &err), "%s", err.message);
    held before = saved(n.node[0], "server_model");
    net_run(&n, 1, 300 * MS);
    held after = saved(n.node[0], "server_model");
    CHECK(bb_node_counter(n.node[0], "split.refused_activations") >= 1);
    CHECK_EQ_INT(bb_node_counter(n.node[0], "split.steps"), 0);
    CHECK_EQ_INT(bb_node_counter(n.node[1], "split.steps"), 0);
    /* the last refusal is a step's (16 rows) or an evaluation's (64) */
    CHECK_MSG(strstr(n.last_failure[0], ",8,2,2] do not fit the cut /MaxPool_1_output_0, float32[?,32,2,2]"), "%s",
              n.last_failure[0]);
    CHECK(all_equal(&before, &after)); /* fc1, fc2 and their momentum as they were */
    held_free(&before);
    held_free(&after);
  }
  net_close(&n);
  bb_buffer_free(NULL, artifact);
  bb_registry_free(reg);
}

/* A server that runs the program but lies: its gradients have another shape, hold a NaN,
 * or never come. */
typedef enum lie { LIE_SHAPE, LIE_NAN, LIE_SILENT } lie;

static int liar_create(const bb_component_init *init, void **self, bb_error *err) {
  (void)err;
  *self = init->type_data;
  return 0;
}

static void liar_destroy(void *self) { (void)self; }

static int liar_loss(void *self, bb_ctx *ctx, const bb_tensor *activations, const bb_tensor *target, bb_tensor **gradient,
                     bb_tensor **loss, bb_error *err) {
  (void)target, (void)err;
  lie how = *(const lie *)self;
  if (how == LIE_SILENT) return 0;
  int64_t dims[4];
  memcpy(dims, activations->dims, sizeof dims);
  if (how == LIE_SHAPE) dims[3] = 3;
  *gradient = bb_tensor_new_zeros(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, 4, dims);
  if (how == LIE_NAN) ((float *)bb_tensor_data(*gradient))[5] = NAN;
  *loss = bb_tensor_new_zeros(bb_ctx_allocator(ctx), BB_DTYPE_FLOAT, 0, NULL);
  return 0;
}

static const bb_model_ops LIAR_OPS = {.split_loss = liar_loss};

static int liar_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_model_dispatch(&LIAR_OPS, self, ctx, call, err);
}

static const bb_component_port TENSOR[] = {{"tensor", BB_TYPE_TENSOR_F32}};

/* split_cnn's module `which` compiled with its bindings but `slot`, bound to the test's
 * own `type` (a peer that runs the program and lies); NULL on failure. */
static uint8_t *compile_rebound(size_t which, bb_role role, const char *slot, const char *type, size_t *len) {
  bb_model *rec = NULL;
  uint8_t *bytes = NULL, *artifact = NULL;
  size_t n_bytes = 0;
  bb_error err;
  bb_compiler *c = bb_compiler_new(NULL);
  int rc = bb_module_build(BB_EXAMPLE_SPLIT_CNN.modules[which], NULL, &rec, &err);
  if (!rc) rc = bb_model_encode(rec, &bytes, &n_bytes, &err);
  if (!rc) rc = BB_EXAMPLE_SPLIT_CNN.configure(c, which, &err);
  if (!rc) rc = bb_example_declare(c, type, NULL, 0, &err);
  if (!rc) rc = bb_compiler_unbind(c, slot, &err);
  if (!rc) rc = bb_compiler_bind(c, role, slot, type, NULL, &err);
  if (!rc) rc = bb_compiler_compile(c, bytes, n_bytes, &artifact, len, &err);
  CHECK_MSG(!rc, "%s", err.message);
  bb_compiler_free(c);
  bb_model_free(rec);
  bb_buffer_free(NULL, bytes);
  return rc ? NULL : artifact;
}

static void check_lying_server(lie how, uint64_t run_ns, const char *counter, uint64_t at_least, const char *want) {
  static lie lies[3] = {LIE_SHAPE, LIE_NAN, LIE_SILENT};
  bb_component_type liar = {
      .struct_size = sizeof liar,
      .type_name = "LyingServer",
      .roles = 1u << BB_ROLE_MODEL,
      .storage = TENSOR,
      .n_storage = 1,
      .create = liar_create,
      .destroy = liar_destroy,
      .invoke = liar_invoke,
      .type_data = &lies[how],
  };
  bb_registry *reg = shipped();
  bb_error err;
  CHECK(!bb_registry_add(reg, &liar, &err));
  size_t len = 0;
  uint8_t *artifact = compile_rebound(0, BB_ROLE_MODEL, "server_model", "LyingServer", &len);
  int rc = artifact ? 0 : -1;
  split_net n;
  if (!rc && net_open(&n, reg)) {
    n.client_config = QUICK_CLIENT("vanilla");
    CHECK_MSG(!net_start(&n, artifact, len, 0, &err), "%s", err.message);
    held before = saved(n.node[1], "client_model");
    net_run(&n, 1, run_ns);
    held after = saved(n.node[1], "client_model");
    CHECK_MSG(bb_node_counter(n.node[1], counter) >= at_least, "%s: %llu", counter, (unsigned long long)bb_node_counter(n.node[1], counter));
    CHECK_EQ_INT(bb_node_counter(n.node[1], "split.steps"), 0);
    CHECK(all_equal(&before, &after)); /* conv1, conv2 and their momentum as they were */
    if (want) CHECK_MSG(strstr(n.last_failure[1], want), "\"%s\" lacks \"%s\"", n.last_failure[1], want);
    held_free(&before);
    held_free(&after);
    net_close(&n);
  }
  bb_buffer_free(NULL, artifact);
  bb_registry_free(reg);
}

static void test_server_sends_gradients_of_another_shape(void) {
  /* refused, counted, and the client goes on with its next step: more than one refusal */
  check_lying_server(LIE_SHAPE, 200 * MS, "split.refused_gradients", 2,
                     "the gradient of /MaxPool_1_output_0 is float32[16,32,2,3], but /MaxPool_1_output_0 is float32[16,32,2,2]");
}

static void test_server_sends_gradients_that_are_not_finite(void) {
  check_lying_server(LIE_NAN, 200 * MS, "split.refused_gradients", 2, "is not finite: the step was refused");
}

static void test_server_that_never_answers(void) {
  /* each step is given up after the timeout, and the next one starts */
  check_lying_server(LIE_SILENT, 1000 * MS, "split.timeouts", 2, NULL);
}

/* A SplitFed server whose averager takes the parts and never answers: each client gives
 * up waiting after the timeout and trains on. */
static int mute_create(const bb_component_init *init, void **self, bb_error *err) {
  (void)init, (void)err;
  *self = NULL;
  return 0;
}

static int mute_contribute(void *self, bb_ctx *ctx, const bb_peer_id *from, const bb_tensor *update, const bb_val *meta,
                           bb_error *err) {
  (void)self, (void)ctx, (void)from, (void)update, (void)meta, (void)err;
  return 0;
}

static int mute_aggregate(void *self, bb_ctx *ctx, bb_tensor **params, bb_val **meta, bb_error *err) {
  (void)self, (void)ctx, (void)err;
  *params = NULL, *meta = NULL;
  return 0;
}

static const bb_aggregator_ops MUTE_OPS = {mute_contribute, mute_aggregate};

static int mute_invoke(void *self, bb_ctx *ctx, const bb_op_call *call, bb_error *err) {
  return bb_aggregator_dispatch(&MUTE_OPS, self, ctx, call, err);
}

static void test_average_that_never_comes(void) {
  bb_component_type mute = {
      .struct_size = sizeof mute,
      .type_name = "MuteAverager",
      .roles = 1u << BB_ROLE_AGGREGATOR,
      .storage = TENSOR,
      .n_storage = 1,
      .create = mute_create,
      .destroy = liar_destroy,
      .invoke = mute_invoke,
  };
  bb_registry *reg = shipped();
  bb_error err;
  CHECK(!bb_registry_add(reg, &mute, &err));
  size_t len = 0;
  uint8_t *artifact = compile_rebound(2, BB_ROLE_AGGREGATOR, "averager", "MuteAverager", &len);
  int rc = artifact ? 0 : -1;
  split_net n;
  if (!rc && net_open(&n, reg)) {
    n.client_config = QUICK_CLIENT("vanilla");
    CHECK_MSG(!net_start(&n, artifact, len, 2, &err), "%s", err.message);
    net_run(&n, 25, 5000 * MS);
    CHECK(bb_node_counter(n.node[1], "split.average_timeouts") >= 1);
    CHECK_EQ_INT(bb_node_counter(n.node[1], "split.steps"), 25); /* it trained on */
    net_close(&n);
  }
  bb_buffer_free(NULL, artifact);
  bb_registry_free(reg);
}

int main(void) {
  RUN(test_vanilla_is_the_whole_model);
  RUN(test_u_shaped_is_the_whole_model);
  RUN(test_split_fed_of_one_is_the_whole_model);
  RUN(test_each_side_builds_its_own_part);
  RUN(test_late_answers_are_taken);
  RUN(test_cut_at_no_value);
  RUN(test_cut_that_does_not_separate);
  RUN(test_placement_refusals);
  RUN(test_recorder_refusals);
  RUN(test_activations_of_another_shape);
  RUN(test_server_sends_gradients_of_another_shape);
  RUN(test_server_sends_gradients_that_are_not_finite);
  RUN(test_server_that_never_answers);
  RUN(test_average_that_never_comes);
  return bb_test_finish();
}
