/* bb train: trains any ONNX model on a CSV file — the gradient builder makes its training
 * graph, an optimizer graph updates it, both run on the CPU backend — and writes the
 * trained model, in its inference form, as plain ONNX. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/cpu.h"
#include "bb/grad.h"
#include "cli.h"
#include "bb/dataset.h"

#define MAX_FROZEN 256

typedef struct options {
  const char *model, *data, *label, *input, *output, *loss, *optimizer, *out;
  const char *training_graph, *optimizer_graph;
  bool header, quiet, no_shuffle;
  /* --freeze NAME[,NAME...]: the names point into `frozen_text` (one copy per flag) */
  const char *freeze[MAX_FROZEN];
  size_t n_freeze;
  char *frozen_text[MAX_FROZEN];
  size_t n_frozen_text;
  uint64_t batch, epochs, steps, seed, max_total_bytes;
  double lr, momentum, weight_decay, max_grad_norm, beta1, beta2, eps, scale, test_fraction;
} options;

static int usage(FILE *out) {
  fprintf(out,
          "usage: bb train MODEL.onnx --data FILE.csv --label COL -o OUT.onnx\n"
          "                [--header] [--input NAME] [--output NAME] [--loss xent|mse|bce]\n"
          "                [--optimizer sgd|momentum|nesterov|adam|adamw] [--lr X] [--momentum X]\n"
          "                [--weight-decay X] [--max-grad-norm X] [--beta1 X] [--beta2 X] [--eps X]\n"
          "                [--batch N] [--epochs N | --steps N] [--scale X] [--test-fraction F] [--seed N]\n"
          "                [--freeze NAME[,NAME...]]... [--no-shuffle] [--max-total-bytes N]\n"
          "                [--training-graph FILE] [--optimizer-graph FILE] [--quiet]\n");
  return out == stdout ? 0 : 2;
}

/* Adds the comma-separated names of one --freeze flag. */
static int add_frozen(options *o, const char *list) {
  char *copy = o->n_frozen_text < MAX_FROZEN ? strdup(list) : NULL;
  if (!copy) {
    fprintf(stderr, "bb train: too many --freeze flags\n");
    return 2;
  }
  o->frozen_text[o->n_frozen_text++] = copy;
  for (char *name = strtok(copy, ","); name; name = strtok(NULL, ",")) {
    if (o->n_freeze == MAX_FROZEN) {
      fprintf(stderr, "bb train: --freeze names more than %d initializers\n", MAX_FROZEN);
      return 2;
    }
    o->freeze[o->n_freeze++] = name;
  }
  return 0;
}

static void free_options(options *o) {
  for (size_t i = 0; i < o->n_frozen_text; i++) free(o->frozen_text[i]);
}

static int parse(int argc, char **argv, options *o) {
  memset(o, 0, sizeof *o);
  o->loss = "xent", o->optimizer = "adam";
  o->batch = 32, o->epochs = 10, o->seed = 1;
  o->lr = NAN, o->momentum = 0.9, o->beta1 = 0.9, o->beta2 = 0.999, o->eps = 1e-8, o->weight_decay = NAN;
  o->scale = 1, o->test_fraction = 0.2;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    struct {
      const char *flag;
      const char **text;
    } texts[] = {{"--data", &o->data},     {"--label", &o->label},
                 {"--input", &o->input},   {"--output", &o->output},
                 {"--loss", &o->loss},     {"--optimizer", &o->optimizer},
                 {"-o", &o->out},          {"--training-graph", &o->training_graph},
                 {"--optimizer-graph", &o->optimizer_graph}};
    struct {
      const char *flag;
      double *value;
    } reals[] = {{"--lr", &o->lr},       {"--momentum", &o->momentum}, {"--weight-decay", &o->weight_decay},
                 {"--max-grad-norm", &o->max_grad_norm}, {"--beta1", &o->beta1}, {"--beta2", &o->beta2},
                 {"--eps", &o->eps},     {"--scale", &o->scale},       {"--test-fraction", &o->test_fraction}};
    struct {
      const char *flag;
      uint64_t *value;
    } counts[] = {{"--batch", &o->batch}, {"--epochs", &o->epochs}, {"--steps", &o->steps}, {"--seed", &o->seed},
                  {"--max-total-bytes", &o->max_total_bytes}};
    bool done = false;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return usage(stdout) - 1; /* nonzero: nothing to run */
    if (strcmp(a, "--header") == 0) o->header = done = true;
    else if (strcmp(a, "--quiet") == 0) o->quiet = done = true;
    else if (strcmp(a, "--no-shuffle") == 0) o->no_shuffle = done = true;
    else if (strcmp(a, "--freeze") == 0) {
      if (!v) return usage(stderr);
      if (add_frozen(o, v)) return 2;
      i++, done = true;
    }
    for (size_t k = 0; !done && k < sizeof texts / sizeof texts[0]; k++)
      if (strcmp(a, texts[k].flag) == 0) {
        if (!v) return usage(stderr);
        *texts[k].text = v, i++, done = true;
      }
    for (size_t k = 0; !done && k < sizeof reals / sizeof reals[0]; k++)
      if (strcmp(a, reals[k].flag) == 0) {
        if (!v || !cli_number(v, reals[k].value)) {
          fprintf(stderr, "bb train: %s takes a number, got '%s'\n", a, v ? v : "");
          return 2;
        }
        i++, done = true;
      }
    for (size_t k = 0; !done && k < sizeof counts / sizeof counts[0]; k++)
      if (strcmp(a, counts[k].flag) == 0) {
        if (!v || !cli_count(v, counts[k].value)) {
          fprintf(stderr, "bb train: %s takes a whole number, got '%s'\n", a, v ? v : "");
          return 2;
        }
        i++, done = true;
      }
    if (!done && a[0] != '-' && !o->model) o->model = a, done = true;
    if (!done) {
      fprintf(stderr, "bb train: unknown argument '%s'\n", a);
      return usage(stderr);
    }
  }
  if (!o->model || !o->data || !o->label || !o->out) return usage(stderr);
  if (!o->batch || (!o->epochs && !o->steps) || o->test_fraction < 0 || o->test_fraction >= 1) {
    fprintf(stderr, "bb train: --batch and --epochs/--steps must be positive, --test-fraction in [0, 1)\n");
    return 2;
  }
  if (o->max_total_bytes > SIZE_MAX) {
    fprintf(stderr, "bb train: --max-total-bytes %llu does not fit this machine's size_t\n", (unsigned long long)o->max_total_bytes);
    return 2;
  }
  return 0;
}

/* ---- data ---------------------------------------------------------------------------------- */

/* The label column: a number (negative counts from the right) or, with --header, a name. */
static int label_column(const options *o, const uint8_t *csv, size_t len, int32_t *col) {
  char *end;
  long v = strtol(o->label, &end, 10);
  if (*o->label && !*end) {
    *col = (int32_t)v;
    return 0;
  }
  if (!o->header) {
    fprintf(stderr, "bb train: --label %s is not a column number (a name needs --header)\n", o->label);
    return 1;
  }
  size_t line = 0, name_len = strlen(o->label);
  while (line < len && csv[line] != '\n' && csv[line] != '\r') line++;
  int32_t index = 0;
  for (size_t start = 0, i = 0; i <= line; i++)
    if (i == line || csv[i] == ',') {
      size_t a = start, b = i;
      while (a < b && (csv[a] == ' ' || csv[a] == '\t' || csv[a] == '"')) a++;
      while (b > a && (csv[b - 1] == ' ' || csv[b - 1] == '\t' || csv[b - 1] == '"')) b--;
      if (b - a == name_len && memcmp(csv + a, o->label, name_len) == 0) {
        *col = index;
        return 0;
      }
      index++, start = i + 1;
    }
  fprintf(stderr, "bb train: the header of %s has no column '%s'\n", o->data, o->label);
  return 1;
}

static int load_data(const options *o, bb_dataset *ds) {
  uint8_t *csv;
  size_t len;
  if (cli_read_file(o->data, &csv, &len)) return 1;
  bb_csv_options co = {.struct_size = sizeof co, .label_column = 0, .has_header = o->header};
  int rc = label_column(o, csv, len, &co.label_column);
  bb_error err;
  if (!rc && (rc = bb_dataset_from_csv(csv, len, &co, NULL, ds, &err))) fprintf(stderr, "bb train: %s: %s\n", o->data, err.message);
  free(csv);
  if (!rc && !ds->n) {
    fprintf(stderr, "bb train: %s has no rows\n", o->data);
    rc = 1;
  }
  for (size_t i = 0; !rc && o->scale != 1 && i < ds->n * ds->dim; i++) ds->features[i] *= (float)o->scale;
  return rc;
}

/* ---- the model's input and target shapes -------------------------------------------------- */

typedef struct shape {
  int rank;
  int64_t dims[BB_MAX_RANK];
} shape;

/* A declared tensor type as a shape, unknown dims -1. */
static shape declared_shape(const bb_value_info *vi) {
  shape s = {-1, {0}};
  if (!vi || !vi->type || vi->type->kind != BB_TYPE_TENSOR || !vi->type->shape || vi->type->shape->rank > BB_MAX_RANK) return s;
  s.rank = (int)vi->type->shape->rank;
  for (int d = 0; d < s.rank; d++)
    s.dims[d] = vi->type->shape->dims[d].kind == BB_DIM_VALUE ? vi->type->shape->dims[d].value : -1;
  return s;
}

/* The batch shape of the data input: [batch, ...] whose trailing dims hold one CSV row. */
static int input_shape(const options *o, const bb_value_info *vi, size_t dim, shape *out, bool *fixed_batch) {
  shape s = declared_shape(vi);
  if (s.rank < 1) s.rank = 2, s.dims[0] = -1, s.dims[1] = (int64_t)dim;
  *fixed_batch = s.dims[0] >= 0;
  if (s.dims[0] >= 0 && (uint64_t)s.dims[0] != o->batch) {
    fprintf(stderr, "bb train: input %s has a fixed batch of %lld: pass --batch %lld\n", vi->name, (long long)s.dims[0],
            (long long)s.dims[0]);
    return 1;
  }
  s.dims[0] = (int64_t)o->batch;
  int64_t row = 1, unknown = -1;
  for (int d = 1; d < s.rank; d++) {
    if (s.dims[d] < 0) {
      if (unknown >= 0) unknown = -2;
      else unknown = d;
    } else {
      row *= s.dims[d];
    }
  }
  if (unknown >= 0 && row && (int64_t)dim % row == 0) s.dims[unknown] = (int64_t)dim / row, row = (int64_t)dim;
  if (unknown == -2 || row != (int64_t)dim) {
    fprintf(stderr, "bb train: a row of %s has %zu features, which do not fill input %s's dims after the batch\n", o->data, dim,
            vi->name);
    return 1;
  }
  *out = s;
  return 0;
}

/* The data input's element type: float32, or an integer type whose columns are whole
 * numbers (the token ids of an Embedding). */
static int input_dtype(const bb_value_info *vi, int32_t *out) {
  int32_t dt = vi->type && vi->type->has_elem_type ? vi->type->elem_type : BB_DTYPE_FLOAT;
  if (dt != BB_DTYPE_FLOAT && dt != BB_DTYPE_INT64 && dt != BB_DTYPE_INT32) {
    fprintf(stderr, "bb train: input %s is %s; CSV columns fill float32, int64 or int32 inputs\n", vi->name,
            bb_dtype_name(dt) ? bb_dtype_name(dt) : "of an unknown type");
    return 1;
  }
  *out = dt;
  return 0;
}

static int loss_kind(const char *name, bb_grad_loss *out) {
  if (strcmp(name, "xent") == 0) *out = BB_GRAD_LOSS_SOFTMAX_CROSS_ENTROPY;
  else if (strcmp(name, "mse") == 0) *out = BB_GRAD_LOSS_MSE;
  else if (strcmp(name, "bce") == 0) *out = BB_GRAD_LOSS_BCE_WITH_LOGITS;
  else {
    fprintf(stderr, "bb train: --loss %s is not xent, mse or bce\n", name);
    return 1;
  }
  return 0;
}

static int optimizer_config(const options *o, bb_optimizer_config *c) {
  static const char *const NAMES[] = {"sgd", "momentum", "nesterov", "adam", "adamw"};
  static const bb_optimizer_kind KINDS[] = {BB_OPTIMIZER_SGD, BB_OPTIMIZER_MOMENTUM, BB_OPTIMIZER_MOMENTUM, BB_OPTIMIZER_ADAM,
                                            BB_OPTIMIZER_ADAMW};
  for (size_t i = 0; i < 5; i++)
    if (strcmp(o->optimizer, NAMES[i]) == 0) {
      *c = bb_optimizer_defaults(KINDS[i]);
      c->nesterov = i == 2;
      if (!isnan(o->lr)) c->lr = (float)o->lr;
      if (!isnan(o->weight_decay)) c->weight_decay = (float)o->weight_decay;
      c->momentum = (float)o->momentum, c->beta1 = (float)o->beta1, c->beta2 = (float)o->beta2, c->eps = (float)o->eps;
      c->max_grad_norm = (float)o->max_grad_norm;
      return 0;
    }
  fprintf(stderr, "bb train: --optimizer %s is not sgd, momentum, nesterov, adam or adamw\n", o->optimizer);
  return 1;
}

/* ---- training ------------------------------------------------------------------------------ */

typedef struct run {
  const options *o;
  bb_cpu_limits limits; /* every run's: --max-total-bytes */
  bb_dataset *train, *test;
  shape in_shape, target_shape;
  bool fixed_batch; /* the model's batch dim is a number: evaluate full batches only */
  int32_t input_dtype, target_dtype;
  const char *input, *target;
  bb_grad_loss loss;
} run;

/* Above this a float32 CSV field no longer holds every whole number exactly. */
#define EXACT_INT_MAX 16777216.0f

/* CSV rows as the data input takes them: float32, or whole numbers (token ids for an
 * Embedding) for an integer input. */
static int fill_input(const run *r, const float *rows, size_t n, bb_tensor *x) {
  size_t count = n * r->train->dim;
  if (r->input_dtype == BB_DTYPE_FLOAT) {
    memcpy(bb_tensor_data(x), rows, count * sizeof *rows);
    return 0;
  }
  for (size_t i = 0; i < count; i++) {
    if (rows[i] != floorf(rows[i]) || fabsf(rows[i]) > EXACT_INT_MAX) {
      fprintf(stderr, "bb train: feature %g (column %zu) is not a whole number of at most 2^24, as integer input %s needs\n",
              rows[i], i % r->train->dim + 1, r->input);
      return 1;
    }
    if (r->input_dtype == BB_DTYPE_INT64) ((int64_t *)bb_tensor_data(x))[i] = (int64_t)rows[i];
    else ((int32_t *)bb_tensor_data(x))[i] = (int32_t)rows[i];
  }
  return 0;
}

/* Labels as the target input takes them: int64 class ids, or floats. */
static int fill_target(const run *r, const float *labels, bb_tensor *t) {
  for (int64_t i = 0; i < t->numel; i++) {
    if (r->target_dtype == BB_DTYPE_INT64) {
      if (labels[i] < 0 || labels[i] != floorf(labels[i])) {
        fprintf(stderr, "bb train: label %g is not a class id (a whole number from 0)\n", labels[i]);
        return 1;
      }
      ((int64_t *)bb_tensor_data(t))[i] = (int64_t)labels[i];
    } else if (r->target_dtype == BB_DTYPE_DOUBLE) {
      ((double *)bb_tensor_data(t))[i] = labels[i];
    } else {
      ((float *)bb_tensor_data(t))[i] = labels[i];
    }
  }
  return 0;
}

/* The score on the test rows: accuracy (xent: argmax over dim 1; bce: logit > 0), or the
 * mean squared error (mse). Full batches only when the model's batch is fixed. */
static double evaluate(const run *r, bb_cpu_session *s, bool fixed_batch) {
  const bb_dataset *ds = r->test;
  size_t step = r->o->batch, right = 0, seen = 0;
  double sq = 0;
  for (size_t at = 0; at + (fixed_batch ? step : 1) <= ds->n; at += step) {
    size_t n = ds->n - at < step ? ds->n - at : step;
    shape sh = r->in_shape;
    sh.dims[0] = (int64_t)n;
    bb_tensor *x = bb_tensor_new_empty(NULL, r->input_dtype, sh.rank, sh.dims);
    bb_tensor *outs[64] = {NULL};
    bb_error err;
    int rc = !x || bb_cpu_session_output_count(s) > 64;
    if (rc) bb_error_set(&err, BB_ERR_NOMEM, "out of memory");
    else if ((rc = fill_input(r, ds->features + at * ds->dim, n, x))) bb_error_set(&err, BB_ERR_TYPE, "the test rows do not fit %s", r->input);
    else rc = bb_cpu_session_run(s, &r->input, &x, 1, outs, &err);
    bb_tensor_release(x);
    const bb_tensor *y = outs[0];
    if (!rc && y && y->dtype == BB_DTYPE_FLOAT && y->numel && y->numel % (int64_t)n == 0) {
      int64_t width = y->numel / (int64_t)n;
      const float *yd = bb_tensor_data(y);
      for (size_t i = 0; i < n; i++) {
        const float *row = yd + (int64_t)i * width;
        float label = ds->labels[at + i];
        if (r->loss == BB_GRAD_LOSS_MSE) {
          sq += (row[0] - label) * (double)(row[0] - label);
        } else if (r->loss == BB_GRAD_LOSS_BCE_WITH_LOGITS) {
          right += (row[0] > 0) == (label > 0.5f);
        } else {
          int64_t best = 0;
          for (int64_t k = 1; k < width; k++)
            if (row[k] > row[best]) best = k;
          right += (float)best == label;
        }
      }
      seen += n;
    } else if (rc) {
      fprintf(stderr, "bb train: evaluating: %s\n", err.message);
    }
    for (size_t k = 0; k < bb_cpu_session_output_count(s) && k < 64; k++) bb_tensor_release(outs[k]);
    if (rc) return NAN;
  }
  if (!seen) return NAN;
  return r->loss == BB_GRAD_LOSS_MSE ? sq / (double)seen : (double)right / (double)seen;
}

static int train(run *r, bb_grad_trainer *t, bb_model *inference) {
  const options *o = r->o;
  bb_dataset_batcher batcher;
  bb_error err;
  if (bb_dataset_batcher_init(&batcher, r->train, o->batch, !o->no_shuffle, o->seed, NULL, &err)) {
    fprintf(stderr, "bb train: %s\n", err.message);
    return 1;
  }
  bb_tensor *x = bb_tensor_new_empty(NULL, r->input_dtype, r->in_shape.rank, r->in_shape.dims);
  bb_tensor *y = bb_tensor_new_empty(NULL, r->target_dtype, r->target_shape.rank, r->target_shape.dims);
  float *labels = malloc(o->batch * sizeof *labels), *rows = malloc(o->batch * r->train->dim * sizeof *rows);
  int rc = !x || !y || !labels || !rows;
  uint64_t per_epoch = (r->train->n + o->batch - 1) / o->batch;
  uint64_t total = o->steps ? o->steps : o->epochs * per_epoch, report = o->steps ? (total + 9) / 10 : per_epoch;
  const char *names[2] = {r->input, r->target};
  bb_tensor *inputs[2] = {x, y};
  double sum = 0;
  uint64_t in_report = 0;
  for (uint64_t step = 0; step < total && !rc; step++) {
    bb_dataset_batcher_next(&batcher, NULL, rows, labels);
    if ((rc = fill_input(r, rows, o->batch, x)) || (rc = fill_target(r, labels, y))) break;
    bb_grad_step st;
    if ((rc = bb_grad_trainer_step(t, names, inputs, 2, &st, &err))) {
      fprintf(stderr, "bb train: step %llu: %s\n", (unsigned long long)step, err.message);
      break;
    }
    if (st.applied) sum += st.loss, in_report++;
    if ((step + 1) % report && step + 1 != total) continue;
    /* a session converts initializers when it is made: one per evaluation sees the new values */
    bb_cpu_session *eval = NULL;
    if (r->test->n && ((rc = bb_grad_trainer_store(t, inference, &err)) || (rc = bb_cpu_session_new(inference, NULL, &eval, &err)) ||
                       (rc = bb_cpu_session_set_limits(eval, &r->limits, &err)))) {
      fprintf(stderr, "bb train: the inference model: %s\n", err.message);
      break;
    }
    double score = eval ? evaluate(r, eval, r->fixed_batch) : NAN;
    bb_cpu_session_free(eval);
    if (!o->quiet || step + 1 == total) {
      printf("step %llu/%llu (epoch %.1f): loss %.4f", (unsigned long long)(step + 1), (unsigned long long)total,
             (double)(step + 1) / (double)per_epoch, in_report ? sum / (double)in_report : NAN);
      if (!isnan(score)) printf(", test %s %.4f", r->loss == BB_GRAD_LOSS_MSE ? "mse" : "accuracy", score);
      printf(", refused %llu\n", (unsigned long long)bb_grad_trainer_refused(t));
    }
    sum = 0, in_report = 0;
  }
  bb_tensor_release(x);
  bb_tensor_release(y);
  free(labels);
  free(rows);
  bb_dataset_batcher_free(&batcher);
  return rc;
}

/* The target's batch shape from its declared type: one label per row. */
static int target_shape(const options *o, const bb_value_info *vi, shape *out, int32_t *dtype) {
  shape s = declared_shape(vi);
  if (s.rank < 1) s.rank = 1;
  s.dims[0] = (int64_t)o->batch;
  for (int d = 1; d < s.rank; d++) {
    if (s.dims[d] > 1) {
      fprintf(stderr, "bb train: the target %s takes %lld values per row in dim %d; a CSV row has one label\n", vi->name,
              (long long)s.dims[d], d);
      return 1;
    }
    s.dims[d] = 1;
  }
  *dtype = vi->type && vi->type->has_elem_type ? vi->type->elem_type : BB_DTYPE_FLOAT;
  *out = s;
  return 0;
}

/* The first graph input that is not an initializer, or the one named. */
static const bb_value_info *data_input(const bb_model *m, const char *name) {
  for (size_t i = 0; i < m->graph->inputs.len; i++) {
    const bb_value_info *vi = m->graph->inputs.items[i];
    bool init = false;
    for (size_t k = 0; k < m->graph->initializers.len && !init; k++) init = strcmp(m->graph->initializers.items[k]->name, vi->name) == 0;
    if (!init && (!name || strcmp(vi->name, name) == 0)) return vi;
  }
  return NULL;
}

static int write_model(const char *path, const bb_model *m) {
  uint8_t *bytes;
  size_t len;
  bb_error err;
  if (bb_model_encode(m, &bytes, &len, &err)) {
    fprintf(stderr, "bb train: encoding %s: %s\n", path, err.message);
    return 1;
  }
  int rc = cli_write_file(path, bytes, len);
  bb_buffer_free(NULL, bytes);
  return rc;
}

/* --no-shuffle: the test rows are the file's last ones, the training rows the others, each
 * in the file's order. */
static int split_in_order(const options *o, const bb_dataset *all, bb_dataset *train, bb_dataset *test, bb_error *err) {
  size_t n_test = (size_t)floor((double)all->n * o->test_fraction + 0.5), *order = malloc((all->n + 1) * sizeof *order);
  if (!order) return bb_error_set(err, BB_ERR_NOMEM, "out of memory");
  for (size_t i = 0; i < all->n; i++) order[i] = i;
  int rc = bb_dataset_subset(all, order, all->n - n_test, NULL, train, err);
  if (!rc) rc = bb_dataset_subset(all, order + all->n - n_test, n_test, NULL, test, err);
  free(order);
  return rc;
}

/* Splits off the test rows (stratified by class for classification). */
static int split(const options *o, const bb_dataset *all, bool classes, bb_dataset *train, bb_dataset *test) {
  bb_dataset_partition p;
  bb_error err;
  if (o->no_shuffle) {
    int rc = split_in_order(o, all, train, test, &err);
    if (rc) fprintf(stderr, "bb train: splitting %s: %s\n", o->data, err.message);
    else if (!train->n) fprintf(stderr, "bb train: no training rows are left after the test split\n");
    return rc || !train->n;
  }
  int rc = bb_dataset_split(all, o->test_fraction, classes, o->seed, NULL, &p, &err);
  if (!rc) rc = bb_dataset_partition_take(all, &p, 0, NULL, train, &err);
  if (!rc) rc = bb_dataset_partition_take(all, &p, 1, NULL, test, &err);
  if (rc) fprintf(stderr, "bb train: splitting %s: %s\n", o->data, err.message);
  else bb_dataset_partition_free(&p);
  if (!rc && !train->n) {
    fprintf(stderr, "bb train: no training rows are left after the test split\n");
    rc = 1;
  }
  return rc;
}

int cmd_train(int argc, char **argv) {
  options o;
  int rc = parse(argc, argv, &o);
  if (rc) {
    free_options(&o);
    return rc < 0 ? 0 : rc; /* -1: the help was asked for and printed */
  }
  run r;
  memset(&r, 0, sizeof r);
  r.o = &o;
  r.limits = (bb_cpu_limits){.struct_size = sizeof r.limits, .max_total_bytes = (size_t)o.max_total_bytes};
  bb_optimizer_config cfg;
  if (loss_kind(o.loss, &r.loss) || optimizer_config(&o, &cfg)) {
    free_options(&o);
    return 2;
  }
  bb_model *model = NULL, *inference = NULL;
  bb_dataset all, train_set, test_set;
  memset(&all, 0, sizeof all), memset(&train_set, 0, sizeof train_set), memset(&test_set, 0, sizeof test_set);
  bb_grad_graph *g = NULL;
  bb_grad_optimizer *opt = NULL;
  bb_grad_trainer *t = NULL;
  bb_error err;
  const bb_value_info *in;
  rc = cli_load_model(o.model, &model) || load_data(&o, &all);
  if (!rc && !(in = data_input(model, o.input))) {
    fprintf(stderr, "bb train: %s has no data input%s%s\n", o.model, o.input ? " named " : "", o.input ? o.input : "");
    rc = 1;
  }
  if (!rc) rc = input_shape(&o, in, all.dim, &r.in_shape, &r.fixed_batch) || input_dtype(in, &r.input_dtype);
  if (!rc) rc = split(&o, &all, r.loss == BB_GRAD_LOSS_SOFTMAX_CROSS_ENTROPY, &train_set, &test_set);
  r.train = &train_set, r.test = &test_set;
  if (!rc) {
    bb_grad_options go;
    memset(&go, 0, sizeof go);
    go.struct_size = sizeof go;
    go.loss = r.loss;
    go.output = o.output;
    go.freeze = o.freeze;
    go.n_freeze = o.n_freeze;
    if ((rc = bb_grad_build(model, &go, NULL, &g, &err))) fprintf(stderr, "bb train: %s: %s\n", o.model, err.message);
  }
  for (size_t i = 0; !rc && i < g->n_warnings; i++) fprintf(stderr, "bb train: warning: %s\n", g->warnings[i]);
  if (!rc) {
    r.input = in->name, r.target = g->target;
    rc = target_shape(&o, bb_vilist_find(&g->model->graph->inputs, g->target), &r.target_shape, &r.target_dtype);
  }
  if (!rc && ((rc = bb_grad_optimizer_build(g, &cfg, &opt, &err)) || (rc = bb_grad_trainer_new(g, opt, o.seed, NULL, &t, &err)) ||
              (rc = bb_grad_trainer_set_limits(t, &r.limits, &err)) || (rc = bb_grad_inference_model(model, NULL, &inference, &err))))
    fprintf(stderr, "bb train: %s\n", err.message);
  if (!rc && !o.quiet)
    printf("bb train: %s: %zu parameters, %zu training rows, %zu test rows, %s with %s\n", o.model, g->n_params, train_set.n,
           test_set.n, o.loss, o.optimizer);
  if (!rc) rc = train(&r, t, inference);
  if (!rc && (rc = bb_grad_trainer_store(t, inference, &err))) fprintf(stderr, "bb train: %s\n", err.message);
  if (!rc) rc = write_model(o.out, inference);
  if (!rc && o.training_graph && !(rc = bb_grad_trainer_store(t, g->model, &err))) rc = write_model(o.training_graph, g->model);
  if (!rc && o.optimizer_graph && !(rc = bb_grad_trainer_store(t, opt->model, &err))) rc = write_model(o.optimizer_graph, opt->model);
  bb_grad_trainer_free(t);
  bb_grad_optimizer_free(opt);
  bb_grad_graph_free(g);
  bb_model_free(inference);
  bb_model_free(model);
  bb_dataset_free(&all), bb_dataset_free(&train_set), bb_dataset_free(&test_set);
  free_options(&o);
  return rc ? 1 : 0;
}
