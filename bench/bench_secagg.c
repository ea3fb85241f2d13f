/* The per-round cost of SecAgg+ (bb/privacy.h) against plain summation, for 10, 100 and
 * 1,000 clients in one process: the server and client state machines are driven
 * directly, every message handed over in memory.
 *
 *   bench_secagg [--clients 10,100,1000] [--len 2410] [--drop 0.1] [--rounds 2]
 *
 * Each client contributes a vector of --len floats (2,410: the digits MLP of the examples).
 * For each client count two rounds are measured: no client drops, and --drop of them drop
 * after sharing their keys (so unmasking rebuilds their mask keys and removes their masks).
 * Reported per round, averaged over --rounds rounds:
 *   * bytes a client sends and receives (the mean over the clients that stay to the end),
 *     and the server's totals;
 *   * CPU ms of one client (that mean again: what a phone spends), and of the server;
 *   * the plain baseline: each client sends its floats (4 bytes each), the server adds them.
 * Time is CPU time of this thread (the machine is shared); the network is not simulated. */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium/crypto_sign_ed25519.h>

#include "bb/bytes.h"
#include "bb/privacy.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct cost {
  double client_sent, client_received; /* bytes, mean over the clients that stay */
  double client_ms;                    /* CPU, mean over the clients that stay */
  double server_sent, server_received; /* bytes */
  double server_ms;
  uint32_t summed;
  int ok;
} cost;

/* One SecAgg+ round of n clients, `dropping` of whom drop after sharing. */
static cost secagg_round(uint32_t n, uint32_t len, uint32_t dropping, uint64_t seed) {
  cost c = {0};
  uint8_t *ids = malloc((size_t)n * 32), (*sks)[64] = malloc((size_t)n * 64);
  for (uint32_t i = 0; i < n; i++) {
    uint8_t s[32] = {0};
    bb_le_put_u32(s, i);
    bb_le_put_u64(s + 4, seed);
    crypto_sign_ed25519_seed_keypair(ids + 32 * i, sks[i], s);
  }
  float *x = malloc((size_t)len * sizeof *x);
  for (uint32_t e = 0; e < len; e++) x[e] = (float)((e % 200) - 100) * 1e-3f;
  bb_secagg_server_config sc = {.struct_size = sizeof sc, .n_clients = n, .vector_len = len};
  bb_secagg_server *server;
  bb_secagg_client **clients = calloc(n, sizeof *clients);
  double *client_s = calloc(n, sizeof *client_s);
  bool *drops = calloc(n, sizeof *drops);
  for (uint32_t k = 0; k < dropping; k++) drops[(k * 7919u + 3) % n] = true;
  bb_error err = {0};
  double t0 = now_s();
  if (bb_secagg_server_new(&sc, ids, NULL, &server, &err) || bb_secagg_server_start(server, 0, &err)) {
    fprintf(stderr, "bench_secagg: %s\n", err.message);
    exit(1);
  }
  double server_s = now_s() - t0;
  for (uint32_t i = 0; i < n; i++) {
    t0 = now_s();
    bb_secagg_client_config cc = {.struct_size = sizeof cc, .identity_secret_key = sks[i]};
    if (bb_secagg_client_new(&cc, NULL, &clients[i], &err) || bb_secagg_client_set_input(clients[i], x, len, &err)) {
      fprintf(stderr, "bench_secagg: %s\n", err.message);
      exit(1);
    }
    client_s[i] += now_s() - t0;
  }
  uint64_t now = 0;
  for (int guard = 0; guard < 64; guard++) {
    bool moved = false;
    uint32_t to;
    const uint8_t *data;
    size_t size;
    for (;;) {
      t0 = now_s();
      const int more = bb_secagg_server_next_message(server, &to, &data, &size);
      server_s += now_s() - t0;
      if (!more) break;
      moved = true;
      if (!drops[to]) c.client_received += (double)size;
      t0 = now_s();
      bb_secagg_client_receive(clients[to], data, size, now, &err);
      client_s[to] += now_s() - t0;
    }
    for (uint32_t i = 0; i < n; i++)
      while (bb_secagg_client_next_message(clients[i], &data, &size)) {
        moved = true;
        /* a dropping client goes silent once it has shared: its masked vector never leaves */
        if (drops[i] && data[5] == 6) continue;
        if (!drops[i]) c.client_sent += (double)size;
        t0 = now_s();
        bb_secagg_server_receive(server, i, data, size, now, &err);
        server_s += now_s() - t0;
      }
    if (moved) continue;
    const bb_secagg_stage st = bb_secagg_server_stage(server);
    if (st == BB_SECAGG_DONE || st == BB_SECAGG_ABORTED) break;
    now = bb_secagg_server_expiry(server);
    t0 = now_s();
    bb_secagg_server_handle_expiry(server, now, &err);
    server_s += now_s() - t0;
  }
  float *sum = malloc((size_t)len * sizeof *sum);
  t0 = now_s();
  c.ok = bb_secagg_server_result(server, sum, len, &c.summed, &err) == 0;
  server_s += now_s() - t0;
  bb_secagg_server_stats st;
  bb_secagg_server_get_stats(server, &st);
  c.server_sent = (double)st.bytes_sent;
  c.server_received = (double)st.bytes_received;
  c.server_ms = server_s * 1e3;
  double total = 0;
  for (uint32_t i = 0; i < n; i++)
    if (!drops[i]) total += client_s[i];
  const uint32_t stay = n - dropping;
  c.client_ms = total / stay * 1e3;
  c.client_sent /= stay;
  c.client_received /= stay;
  bb_secagg_server_free(server);
  for (uint32_t i = 0; i < n; i++) bb_secagg_client_free(clients[i]);
  free(clients), free(client_s), free(drops), free(sum), free(x), free(ids), free(sks);
  return c;
}

/* The plain baseline: n vectors of floats added up by the server. */
static double plain_sum_ms(uint32_t n, uint32_t len) {
  float *x = malloc((size_t)len * sizeof *x), *sum = calloc(len, sizeof *sum);
  for (uint32_t e = 0; e < len; e++) x[e] = (float)e * 1e-4f;
  const double t0 = now_s();
  for (uint32_t i = 0; i < n; i++) {
    x[i % len] += 1e-6f; /* a different vector each time, so the loop is not folded */
    for (uint32_t e = 0; e < len; e++) sum[e] += x[e];
  }
  const double ms = (now_s() - t0) * 1e3;
  volatile float keep = sum[len - 1];
  (void)keep;
  free(x), free(sum);
  return ms;
}

static uint32_t parse_list(const char *s, uint32_t *out, uint32_t max) {
  uint32_t n = 0;
  for (const char *p = s; *p && n < max;) {
    out[n++] = (uint32_t)strtoul(p, (char **)&p, 10);
    if (*p == ',') p++;
  }
  return n;
}

int main(int argc, char **argv) {
  uint32_t counts[8] = {10, 100, 1000}, n_counts = 3, len = 2410, rounds = 2;
  double drop = 0.1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--clients") == 0) n_counts = parse_list(argv[i + 1], counts, 8);
    else if (strcmp(argv[i], "--len") == 0) len = (uint32_t)atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--drop") == 0) drop = atof(argv[i + 1]);
    else if (strcmp(argv[i], "--rounds") == 0) rounds = (uint32_t)atoi(argv[i + 1]);
    else {
      fprintf(stderr, "usage: bench_secagg [--clients 10,100,1000] [--len 2410] [--drop 0.1] [--rounds 2]\n");
      return 2;
    }
  }
  printf("SecAgg+ per round, vectors of %u floats (plain: %u bytes a client), %u rounds each\n\n", len, 4 * len,
         rounds);
  printf("| clients | degree | dropped | client sends | client receives | client CPU ms | server receives | server sends | "
         "server CPU ms | plain: server CPU ms | upload × plain |\n");
  printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (uint32_t k = 0; k < n_counts; k++) {
    const uint32_t n = counts[k];
    bb_secagg_server_config sc = {.struct_size = sizeof sc, .n_clients = n, .vector_len = len};
    bb_secagg_server *probe;
    uint8_t *ids = calloc(n, 32);
    if (bb_secagg_server_new(&sc, ids, NULL, &probe, NULL)) return fprintf(stderr, "bench_secagg: bad config\n"), 1;
    bb_secagg_params p;
    bb_secagg_server_params(probe, &p);
    bb_secagg_server_free(probe);
    free(ids);
    for (int with_drops = 0; with_drops < 2; with_drops++) {
      const uint32_t dropping = with_drops ? (uint32_t)(drop * n + 0.5) : 0;
      cost mean = {0};
      double plain = 0;
      for (uint32_t r = 0; r < rounds; r++) {
        const cost c = secagg_round(n, len, dropping, 1 + r);
        if (!c.ok || c.summed != n - dropping) {
          fprintf(stderr, "bench_secagg: the round of %u clients did not sum %u\n", n, n - dropping);
          return 1;
        }
        mean.client_sent += c.client_sent / rounds, mean.client_received += c.client_received / rounds;
        mean.client_ms += c.client_ms / rounds, mean.server_ms += c.server_ms / rounds;
        mean.server_sent += c.server_sent / rounds, mean.server_received += c.server_received / rounds;
        plain += plain_sum_ms(n - dropping, len) / rounds;
      }
      printf("| %u | %u | %u | %.1f KB | %.1f KB | %.2f | %.2f MB | %.2f MB | %.1f | %.3f | %.2f |\n", n, p.degree,
             dropping, mean.client_sent / 1e3, mean.client_received / 1e3, mean.client_ms, mean.server_received / 1e6,
             mean.server_sent / 1e6, mean.server_ms, plain, mean.client_sent / (4.0 * len));
      fflush(stdout);
    }
  }
  return 0;
}
