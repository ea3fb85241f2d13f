/* Scenario files (bb/sim.h): the network and the spread of a device population, as text,
 * and each device's draw from it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/sim.h"
#include "util/splitmix.h"

/* ln(p95 / p5) of a normal is 2 × 1.6449 σ: a spread of 20 is σ = 0.911. */
#define SPREAD_TO_SIGMA (1.0 / (2.0 * 1.6448536269514722))
#define NS_PER_MS 1e6

typedef enum key_kind { KEY_U64, KEY_MS, KEY_SECONDS, KEY_HOUR, KEY_PROBABILITY, KEY_SIGMA, KEY_SPREAD, KEY_KBIT, KEY_AMPLITUDE } key_kind;

typedef struct scenario_key {
  const char *name;
  key_kind kind;
  size_t offset; /* of the field in bb_sim_scenario */
} scenario_key;

#define FIELD(f) offsetof(bb_sim_scenario, f)
static const scenario_key KEYS[] = {
    {"seed", KEY_U64, FIELD(seed)},
    {"latency_ms", KEY_MS, FIELD(latency_ns)},
    {"jitter_ms", KEY_MS, FIELD(jitter_ns)},
    {"loss", KEY_PROBABILITY, FIELD(loss)},
    {"bandwidth_kbit_s", KEY_KBIT, FIELD(bandwidth_bytes_per_s)},
    {"step_ms", KEY_MS, FIELD(step_ns)},
    {"step_sigma", KEY_SIGMA, FIELD(step_sigma)},
    {"step_spread", KEY_SPREAD, FIELD(step_sigma)},
    {"upload_kbit_s", KEY_KBIT, FIELD(upload_bytes_per_s)},
    {"upload_sigma", KEY_SIGMA, FIELD(upload_sigma)},
    {"upload_spread", KEY_SPREAD, FIELD(upload_sigma)},
    {"dropout", KEY_PROBABILITY, FIELD(dropout)},
    {"session_s", KEY_SECONDS, FIELD(session_mean_ns)},
    {"gap_s", KEY_SECONDS, FIELD(gap_mean_ns)},
    {"diurnal", KEY_AMPLITUDE, FIELD(diurnal)},
    {"day_s", KEY_SECONDS, FIELD(day_ns)},
    {"peak_hour", KEY_HOUR, FIELD(diurnal_peak_ns)},
};
#define N_KEYS (sizeof KEYS / sizeof KEYS[0])

/* A number: the whole of text, finite, at least 0. */
static bool number(const char *text, double *out) {
  char *end = NULL;
  double v = strtod(text, &end);
  if (end == text || *end != '\0' || !isfinite(v) || v < 0) return false;
  *out = v;
  return true;
}

/* Stores a value into its field, or says what range it must be in. */
static const char *store(bb_sim_scenario *sc, const scenario_key *k, double v) {
  char *field = (char *)sc + k->offset;
  switch (k->kind) {
  case KEY_U64:
    if (v != floor(v) || v > 9e15) return "a whole number";
    *(uint64_t *)(void *)field = (uint64_t)v;
    return NULL;
  case KEY_MS:
  case KEY_SECONDS: {
    const double ns = v * (k->kind == KEY_MS ? NS_PER_MS : 1e9);
    if (ns > 1e18) return "a duration under 30 years";
    *(uint64_t *)(void *)field = (uint64_t)ns;
    return NULL;
  }
  case KEY_HOUR: /* of a 24-hour day until the day's length is known */
    if (v >= 24) return "an hour in [0, 24)";
    *(uint64_t *)(void *)field = (uint64_t)(v * 3600e9);
    return NULL;
  case KEY_KBIT:
    if (v * 125 > 1e15) return "a rate under 8 Pbit/s";
    *(uint64_t *)(void *)field = (uint64_t)(v * 125.0); /* kbit/s to bytes/s */
    return NULL;
  case KEY_PROBABILITY:
    if (v > 1) return "a probability in [0, 1]";
    *(double *)(void *)field = v;
    return NULL;
  case KEY_AMPLITUDE:
    if (v >= 1) return "an amplitude in [0, 1)";
    *(double *)(void *)field = v;
    return NULL;
  case KEY_SIGMA:
    if (v > 10) return "a log-σ in [0, 10]";
    *(double *)(void *)field = v;
    return NULL;
  case KEY_SPREAD:
    if (v < 1 || v > 1e12) return "a spread (p95 / p5) of at least 1";
    *(double *)(void *)field = log(v) * SPREAD_TO_SIGMA;
    return NULL;
  }
  return "a known kind of value";
}

/* s without the blanks (spaces, tabs, a CR) around it, in place. */
static char *trim(char *s) {
  while (*s == ' ' || *s == '\t' || *s == '\r') s++;
  for (char *e = s + strlen(s); e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'); *--e = '\0') {}
  return s;
}

/* One `key = value` line (comments and blanks already cut); `seen` marks the fields set. */
static int parse_line(char *line, int lineno, bb_sim_scenario *sc, bool *seen, bb_error *err) {
  char *eq = strchr(line, '=');
  if (!eq) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "scenario line %d: expected `key = value`, got '%.80s'", lineno, line);
  *eq = '\0';
  char *key = line, *value = eq + 1;
  key = trim(key);
  value = trim(value);
  const scenario_key *k = NULL;
  for (size_t i = 0; i < N_KEYS && !k; i++)
    if (strcmp(KEYS[i].name, key) == 0) k = &KEYS[i];
  if (!k) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "scenario line %d: unknown key '%.64s' (docs/SIMULATOR.md lists them)", lineno, key);
  /* a field is set once, whichever of its keys (step_sigma or step_spread) sets it */
  const size_t slot = (size_t)(k - KEYS);
  for (size_t i = 0; i < N_KEYS; i++)
    if (seen[i] && KEYS[i].offset == k->offset)
      return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "scenario line %d: '%s' sets what '%s' set already", lineno, key, KEYS[i].name);
  double v = 0;
  const char *want = number(value, &v) ? store(sc, k, v) : "a number at least 0";
  if (want) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "scenario line %d: %s = '%.64s' is not %s", lineno, key, value, want);
  seen[slot] = true;
  return 0;
}

int bb_sim_scenario_parse(const char *text, size_t len, bb_sim_scenario *out, bb_error *err) {
  bb_sim_scenario sc = {0};
  sc.struct_size = sizeof sc;
  bool seen[N_KEYS] = {false};
  int lineno = 0;
  for (size_t at = 0; at < len;) {
    size_t end = at;
    while (end < len && text[end] != '\n') end++;
    lineno++;
    char line[256];
    size_t n = end - at;
    if (n >= sizeof line) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "scenario line %d: longer than %zu bytes", lineno, sizeof line - 1);
    memcpy(line, text + at, n);
    line[n] = '\0';
    if (memchr(line, '\0', n)) return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "scenario line %d: holds a NUL", lineno);
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    at = end + 1;
    if (strspn(line, " \t\r") == strlen(line)) continue;
    int rc = parse_line(line, lineno, &sc, seen, err);
    if (rc) return rc;
  }
  if ((sc.session_mean_ns || sc.dropout > 0) && !sc.gap_mean_ns)
    return bb_error_set(err, BB_ERR_INVALID_ARGUMENT, "scenario: sessions or drop-outs need gap_s (how long a device stays away)");
  /* the peak hour as a time of the scenario's day */
  if (sc.day_ns) sc.diurnal_peak_ns = (uint64_t)((double)sc.diurnal_peak_ns * ((double)sc.day_ns / 86400e9));
  *out = sc;
  return 0;
}

void bb_sim_scenario_network(const bb_sim_scenario *sc, bb_sim_config *cfg) {
  cfg->seed = sc->seed;
  cfg->latency_ns = sc->latency_ns;
  cfg->jitter_ns = sc->jitter_ns;
  cfg->loss = sc->loss;
  cfg->bandwidth_bytes_per_s = sc->bandwidth_bytes_per_s;
}

/* A standard normal (Box–Muller, the cosine half). */
static double normal(uint64_t *state) {
  const double u1 = bbi_splitmix_unit(state), u2 = bbi_splitmix_unit(state);
  return sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
}

/* median × e^(σ z), as whole units, at least 1 when the median is set. */
static uint64_t log_normal(uint64_t median, double sigma, double z) {
  if (!median) return 0;
  const double v = (double)median * exp(sigma * z);
  return v < 1 ? 1 : v > 1e18 ? (uint64_t)1e18 : (uint64_t)v;
}

void bb_sim_scenario_device(const bb_sim_scenario *sc, uint64_t index, bb_sim_device *out) {
  uint64_t state = sc->seed ^ (index + 1) * 0xA0761D6478BD642Full;
  const double z_step = normal(&state), z_upload = normal(&state);
  *out = (bb_sim_device){0};
  out->struct_size = sizeof *out;
  out->step_ns = log_normal(sc->step_ns, sc->step_sigma, z_step);
  out->upload_bytes_per_s = log_normal(sc->upload_bytes_per_s, sc->upload_sigma, z_upload);
  out->dropout = sc->dropout;
  out->session_mean_ns = sc->session_mean_ns;
  out->gap_mean_ns = sc->gap_mean_ns;
  out->diurnal = sc->diurnal;
  out->diurnal_peak_ns = sc->diurnal_peak_ns;
  out->day_ns = sc->day_ns;
  out->seed = bbi_splitmix64(&state);
}

int bb_sim_scenario_apply(bb_sim *sim, const bb_sim_scenario *sc, const bb_peer_id *peers, size_t n, bb_error *err) {
  for (size_t i = 0; i < n; i++) {
    bb_sim_device d;
    bb_sim_scenario_device(sc, i, &d);
    int rc = bb_sim_set_device(sim, &peers[i], &d, err);
    if (rc) return rc;
  }
  return 0;
}
