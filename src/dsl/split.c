/* Split learning as a recording: the ops of one training step of a model cut across the
 * clients' and the server's peer classes, with the network ports between them, and an
 * optional evaluation path. Every op on the two Model slots is stamped with the cuts,
 * the shape and its side; the compiler hands them to the components it binds there. */
#include <stdio.h>
#include <string.h>

#include "dsl/recorder.h"

typedef struct split_rec {
  bb_rec *r;
  const bb_split *s;
  const char *cuts; /* '|'-joined */
} split_rec;

/* A cut names a value of the model: printable, no blanks, and none of the characters a
 * binding's config text uses to separate ('=', ',' and '|'). */
static bool cut_name_ok(const char *c) {
  if (!c || !*c || strlen(c) > REC_NAME_MAX) return false;
  for (const char *p = c; *p; p++)
    if (*p <= ' ' || *p > '~' || *p == '=' || *p == ',' || *p == '|') return false;
  return true;
}

static bool check_slot_role(bb_rec *r, const bb_slot *slot, bb_role role, const char *what) {
  if (slot && slot->role == role) return true;
  rec_error(r, BB_ERR_INVALID_ARGUMENT, "split: the %s slot must be a %s slot", what, bb_role_name(role));
  return false;
}

static bool check_split(bb_rec *r, const bb_split *s) {
  size_t want = s->shape == BB_SPLIT_VANILLA ? 1 : s->shape == BB_SPLIT_U ? 2 : 0;
  if (!want) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "split: unknown shape %d", (int)s->shape);
    return false;
  }
  if (s->n_cuts != want || !s->cuts) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "split: a %s split is cut at %zu value%s; got %zu",
              want == 1 ? "vanilla" : "U-shaped", want, want == 1 ? "" : "s", s->cuts ? s->n_cuts : 0);
    return false;
  }
  for (size_t i = 0; i < s->n_cuts; i++)
    if (!cut_name_ok(s->cuts[i])) {
      rec_error(r, BB_ERR_INVALID_ARGUMENT,
                "split: cut '%.*s' is not the name of a value (1 to %d printable characters without blanks, '=', ',' "
                "or '|')",
                REC_NAME_MAX, s->cuts[i] ? s->cuts[i] : "(null)", REC_NAME_MAX);
      return false;
    }
  if (s->n_cuts == 2 && strcmp(s->cuts[0], s->cuts[1]) == 0) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "split: the model is cut twice at %s", s->cuts[0]);
    return false;
  }
  if (!check_slot_role(r, s->client, BB_ROLE_MODEL, "client") || !check_slot_role(r, s->server, BB_ROLE_MODEL, "server"))
    return false;
  if (s->client->name && s->server->name && strcmp(s->client->name, s->server->name) == 0) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "split: the client and the server hold their parts in one slot '%s'; give each its own",
              s->client->name);
    return false;
  }
  bool tx = s->test_x.name != NULL, ty = s->test_y.name != NULL, te = s->eval_tick.name != NULL;
  if (tx != ty || tx != te) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "split: a held-out set needs test_x, test_y and eval_tick, all three");
    return false;
  }
  if (s->averager && !check_slot_role(r, s->averager, BB_ROLE_AGGREGATOR, "averager")) return false;
  if ((s->averager != NULL) != (s->clients.name != NULL)) {
    rec_error(r, BB_ERR_INVALID_ARGUMENT, "split: averaging the clients' parts needs the averager slot and the clients' peers, both");
    return false;
  }
  return true;
}

/* slot.method(inputs) on one side, stamped with the split. */
static int side_call(split_rec *c, bool server, const char *method, const bb_value *in, size_t n_in, bb_value *out,
                     size_t n_out) {
  bb_rec *r = c->r;
  if (bb_rec_role_call(r, server ? c->s->server : c->s->client, method, in, n_in, NULL, 0, out, n_out)) return r->error.code;
  const bb_nodelist *nodes = &rec_cur(r)->fn->nodes;
  bb_ir_node *n = nodes->items[nodes->len - 1];
  if (rec_node_meta(r, n, BB_KEY_SPLIT_CUTS, c->cuts) ||
      rec_node_meta(r, n, BB_KEY_SPLIT_SHAPE, c->s->shape == BB_SPLIT_U ? BB_SPLIT_SHAPE_U : BB_SPLIT_SHAPE_VANILLA) ||
      rec_node_meta(r, n, BB_KEY_SPLIT_SIDE, server ? BB_SPLIT_SIDE_SERVER : BB_SPLIT_SIDE_CLIENT))
    return r->error.code;
  return 0;
}

/* value on a network port, the Send stamped with the split's cuts: the compiler gives the
 * split's messages the life of a client's step (cc_bind_split). */
static void send_one(split_rec *c, const char *port, bb_value to, bb_value value) {
  bb_rec *r = c->r;
  if (!bb_rec_net_out(r, port, to, value).name) return;
  const bb_nodelist *nodes = &rec_cur(r)->fn->nodes;
  rec_node_meta(r, nodes->items[nodes->len - 1], BB_KEY_SPLIT_CUTS, c->cuts);
}

/* Sends the bundle of parts on a network port. */
static void send(split_rec *c, const char *port, bb_value to, const bb_value *parts, size_t n) {
  send_one(c, port, to, bb_rec_bundle(c->r, parts, n));
}

/* What arrives on a port, unbundled into n float tensors. */
static void receive(bb_rec *r, const char *port, bb_value *parts, size_t n) {
  static const char *const F32[] = {BB_TYPE_TENSOR_F32, BB_TYPE_TENSOR_F32, BB_TYPE_TENSOR_F32};
  bb_rec_unbundle(r, bb_rec_lookup_output(r, port), F32, parts, n);
}

/* SplitFed: the clients' parts averaged, every client's once it has taken its round. */
static void averaging(split_rec *c) {
  bb_rec *r = c->r;
  const bb_split *s = c->s;
  bb_value share, average;
  side_call(c, false, "SplitShare", &s->tick, 1, &share, 1);
  send_one(c, "split_share", s->server_peers, share);
  bb_value got = bb_rec_lookup_output(r, "split_share");
  bb_value done = bb_rec_aggregator_contribute(r, s->averager, got, got); /* no metadata: weight 1 */
  bb_rec_aggregator_aggregate(r, s->averager, done, &average, NULL);
  send_one(c, "split_average", s->clients, average);
  bb_rec_model_load_parameters(r, s->client, bb_rec_lookup_output(r, "split_average"));
}

static void vanilla(split_rec *c) {
  bb_rec *r = c->r;
  const bb_split *s = c->s;
  bb_value fwd[3], got[3], loss[2], back[2], done;
  side_call(c, false, "SplitForward", &s->tick, 1, fwd, 3);
  send(c, "split_activations", s->server_peers, fwd, 3);
  receive(r, "split_activations", got, 3);
  side_call(c, true, "SplitLoss", got, 2, loss, 2);
  bb_rec_output(r, "split_loss", loss[1]);
  bb_value to = bb_rec_lookup_sender(r, "split_activations");
  send(c, "split_gradients", to, (bb_value[]){loss[0], got[2]}, 2);
  receive(r, "split_gradients", back, 2);
  side_call(c, false, "SplitBackward", back, 2, &done, 1);
  if (!s->test_x.name) return;
  bb_value gated, features, eval[2], score;
  bb_value cond[2] = {s->test_x, s->eval_tick};
  bb_rec_syscall(r, "Gate", cond, 2, NULL, 0, &gated, 1);
  side_call(c, false, "Forward", &gated, 1, &features, 1);
  send(c, "split_eval", s->server_peers, (bb_value[]){features, s->test_y}, 2);
  receive(r, "split_eval", eval, 2);
  side_call(c, true, "Evaluate", eval, 2, &score, 1);
  send_one(c, "split_score", bb_rec_lookup_sender(r, "split_eval"), score);
  bb_rec_output(r, "accuracy", bb_rec_lookup_output(r, "split_score"));
}

static void u_shaped(split_rec *c) {
  bb_rec *r = c->r;
  const bb_split *s = c->s;
  bb_value fwd[3], got[2], relayed, feat[2], head[2], hg[2], g1, back[2], done;
  side_call(c, false, "SplitForward", &s->tick, 1, fwd, 3);
  send(c, "split_activations", s->server_peers, (bb_value[]){fwd[0], fwd[2]}, 2);
  receive(r, "split_activations", got, 2);
  side_call(c, true, "SplitRelay", got, 2, &relayed, 1);
  send(c, "split_features", bb_rec_lookup_sender(r, "split_activations"), (bb_value[]){relayed, got[1]}, 2);
  receive(r, "split_features", feat, 2);
  side_call(c, false, "SplitLoss", feat, 2, head, 2);
  bb_rec_output(r, "split_loss", head[1]);
  send(c, "split_head_gradients", s->server_peers, (bb_value[]){head[0], feat[1]}, 2);
  receive(r, "split_head_gradients", hg, 2);
  side_call(c, true, "SplitBackward", hg, 2, &g1, 1);
  send(c, "split_gradients", bb_rec_lookup_sender(r, "split_head_gradients"), (bb_value[]){g1, hg[1]}, 2);
  receive(r, "split_gradients", back, 2);
  side_call(c, false, "SplitBackward", back, 2, &done, 1);
  if (!s->test_x.name) return;
  bb_value gated, a1, a2, score;
  bb_value cond[2] = {s->test_x, s->eval_tick};
  bb_rec_syscall(r, "Gate", cond, 2, NULL, 0, &gated, 1);
  side_call(c, false, "Forward", &gated, 1, &a1, 1);
  send_one(c, "split_eval", s->server_peers, a1);
  side_call(c, true, "Forward", (bb_value[]){bb_rec_lookup_output(r, "split_eval")}, 1, &a2, 1);
  send_one(c, "split_eval_features", bb_rec_lookup_sender(r, "split_eval"), a2);
  side_call(c, false, "Evaluate", (bb_value[]){bb_rec_lookup_output(r, "split_eval_features"), s->test_y}, 2, &score, 1);
  bb_rec_output(r, "accuracy", score);
}

int bb_rec_split(bb_rec *rec, const bb_split *split) {
  if (!rec) return BB_ERR_INVALID_ARGUMENT;
  if (rec->failed) return rec->error.code;
  if (!split || split->struct_size < offsetof(bb_split, test_x) || split->struct_size > sizeof *split) {
    rec_error(rec, BB_ERR_INVALID_ARGUMENT, "split: struct_size %zu (this library knows %zu)", split ? split->struct_size : 0,
              sizeof *split);
    return rec->error.code;
  }
  bb_split whole; /* fields past an older caller's struct_size are none */
  memset(&whole, 0, sizeof whole);
  memcpy(&whole, split, split->struct_size);
  split = &whole;
  if (!check_split(rec, split)) return rec->error.code;
  split_rec c = {rec, split, split->cuts[0]};
  if (split->n_cuts == 2) {
    char *joined = bbi_arena_alloc(rec->model->arena, strlen(split->cuts[0]) + strlen(split->cuts[1]) + 2);
    if (!joined) return rec_nomem(rec);
    sprintf(joined, "%s|%s", split->cuts[0], split->cuts[1]);
    c.cuts = joined;
  }
  /* a tick offers the part for averaging before it asks for a step: a part that is due
   * is shared before another step changes it */
  if (split->averager) averaging(&c);
  if (split->shape == BB_SPLIT_U) u_shaped(&c);
  else vanilla(&c);
  return rec->failed ? rec->error.code : 0;
}
