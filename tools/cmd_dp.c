/* bb dp-epsilon: the privacy that T steps of the sampled Gaussian mechanism spend, by the
 * Rényi-DP accountant of bb/privacy.h with the classic conversion to (ε, δ). */
#include <stdio.h>
#include <string.h>

#include "bb/privacy.h"
#include "cli.h"

static int usage(FILE *out) {
  fprintf(out,
          "usage: bb dp-epsilon --q Q --sigma S --steps T --delta D [--json]\n"
          "  Q: the sampling rate (the fraction of clients, or of examples, in a step), 0..1\n"
          "  S: the noise multiplier (noise stddev / clipping norm), > 0\n"
          "  T: the number of steps (rounds)\n"
          "  D: delta, 0 < D < 1\n"
          "prints epsilon and the Renyi order that gives it; --json adds the per-step RDP at every order\n");
  return out == stdout ? 0 : 2;
}

static void print_json(double q, double sigma, uint64_t steps, double delta, double eps, double order) {
  printf("{\"epsilon\":%.17g,\"delta\":%.17g,\"order\":%.17g,\"q\":%.17g,\"sigma\":%.17g,\"steps\":%llu,"
         "\"conversion\":\"classic\",\"rdp_per_step\":[",
         eps, delta, order, q, sigma, (unsigned long long)steps);
  const double *orders = bb_rdp_orders();
  for (size_t i = 0; i < BB_RDP_ORDERS; i++) {
    double rdp = 0;
    bb_rdp_sampled_gaussian(q, sigma, orders[i], &rdp, NULL);
    printf("%s{\"order\":%.17g,\"rdp\":%.17g}", i ? "," : "", orders[i], rdp);
  }
  printf("]}\n");
}

int cmd_dp_epsilon(int argc, char **argv) {
  double q = -1, sigma = -1, delta = -1;
  uint64_t steps = 0;
  bool have_steps = false, json = false;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    bool ok = true;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return usage(stdout);
    if (strcmp(a, "--json") == 0) {
      json = true;
      continue;
    }
    if (strcmp(a, "--q") == 0) ok = v && cli_number(v, &q);
    else if (strcmp(a, "--sigma") == 0) ok = v && cli_number(v, &sigma);
    else if (strcmp(a, "--delta") == 0) ok = v && cli_number(v, &delta);
    else if (strcmp(a, "--steps") == 0) ok = have_steps = v && cli_count(v, &steps);
    else {
      fprintf(stderr, "bb dp-epsilon: unknown argument '%s'\n", a);
      return usage(stderr);
    }
    if (!ok) {
      fprintf(stderr, "bb dp-epsilon: %s needs a number, got '%s'\n", a, v ? v : "nothing");
      return 2;
    }
    i++;
  }
  if (q < 0 || sigma < 0 || delta < 0 || !have_steps) {
    fprintf(stderr, "bb dp-epsilon: --q, --sigma, --steps and --delta are all required\n");
    return usage(stderr);
  }
  double eps, order;
  bb_error err = {0};
  if (bb_dp_epsilon(q, sigma, steps, delta, &eps, &order, &err)) {
    fprintf(stderr, "bb dp-epsilon: %s\n", err.message);
    return 1;
  }
  if (json) print_json(q, sigma, steps, delta, eps, order);
  else
    printf("epsilon %.6g at delta %g (Renyi order %g; %llu steps of the sampled Gaussian, q %g, sigma %g; classic "
           "conversion)\n",
           eps, delta, order, (unsigned long long)steps, q, sigma);
  return 0;
}
