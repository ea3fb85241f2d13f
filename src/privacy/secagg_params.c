/* SecAgg+ parameters. The threshold must exceed half the degree: a server that tells some
 * of a client's neighbours it survived and others that it dropped then cannot collect a
 * threshold of both kinds of its shares from honest neighbours, who each answer once. */
#include "privacy/secagg_params.h"

#include <math.h>

#include "privacy/secagg_reason.h"

#define DEFAULT_MODULUS_BITS 32
#define DEFAULT_CLIP_RANGE 8.0
#define DEFAULT_QUANT_RANGE (UINT64_C(1) << 22)
/* Up to this many clients every client neighbours every other (SecAgg). */
#define COMPLETE_GRAPH_MAX 32

/* The even degree nearest 6 log2 n, below n - 1 and the share limit. */
static uint32_t default_degree(uint32_t n) {
  if (n <= COMPLETE_GRAPH_MAX) return n - 1;
  uint32_t k = 2 * (uint32_t)lround(3.0 * log2((double)n));
  if (k > BB_SECAGG_MAX_DEGREE) k = BB_SECAGG_MAX_DEGREE;
  return k >= n - 1 ? n - 1 : k;
}

bb_secagg_params sa_params_from_config(const bb_secagg_server_config *c) {
  bb_secagg_params p = {
      .n_clients = c->n_clients,
      .degree = c->degree,
      .threshold = c->threshold,
      .min_clients = c->min_clients,
      .vector_len = c->vector_len,
      .modulus_bits = c->modulus_bits ? c->modulus_bits : DEFAULT_MODULUS_BITS,
      .clip_range = c->clip_range != 0 ? c->clip_range : DEFAULT_CLIP_RANGE,
      .quant_range = c->quant_range ? c->quant_range : DEFAULT_QUANT_RANGE,
  };
  if (!p.degree && p.n_clients >= 3) p.degree = default_degree(p.n_clients);
  if (!p.threshold) p.threshold = p.degree / 2 + 1;
  if (!p.min_clients) p.min_clients = p.threshold > 2 ? p.threshold : 2;
  return p;
}

int sa_params_check(const bb_secagg_params *p, const bb_secagg_caps *caps, bb_secagg_reason *reason, bb_error *err) {
  const bb_secagg_reason bad = BB_SECAGG_BAD_PARAMS;
  if (p->n_clients < 3 || p->n_clients > caps->max_clients)
    return sa_fail(err, reason, p->n_clients > caps->max_clients ? BB_SECAGG_OVER_CAP : bad,
                   "%u clients (3..%u: with two, each learns the other's vector from the sum)", p->n_clients,
                   caps->max_clients);
  if (p->vector_len < 1 || p->vector_len > caps->max_vector_len)
    return sa_fail(err, reason, p->vector_len > caps->max_vector_len ? BB_SECAGG_OVER_CAP : bad,
                   "vectors of %u elements (1..%u)", p->vector_len, caps->max_vector_len);
  const bool complete = p->degree == p->n_clients - 1;
  if (p->degree < 2 || p->degree > BB_SECAGG_MAX_DEGREE || p->degree > p->n_clients - 1 ||
      (!complete && p->degree % 2))
    return sa_fail(err, reason, bad, "degree %u for %u clients (even, 2..%d and below %u, or exactly %u)", p->degree,
                   p->n_clients, BB_SECAGG_MAX_DEGREE, p->n_clients - 1, p->n_clients - 1);
  if (p->threshold < 2 || p->threshold > p->degree || 2 * p->threshold <= p->degree)
    return sa_fail(err, reason, bad, "threshold %u for degree %u (more than half the degree, at most all of it, >= 2)",
                   p->threshold, p->degree);
  if (p->min_clients < 2 || p->min_clients > p->n_clients)
    return sa_fail(err, reason, bad, "min_clients %u (2..%u)", p->min_clients, p->n_clients);
  if (p->modulus_bits < 8 || p->modulus_bits > 64)
    return sa_fail(err, reason, bad, "a modulus of 2^%u (2^8..2^64)", p->modulus_bits);
  if (!(p->clip_range > 0) || !isfinite(p->clip_range))
    return sa_fail(err, reason, bad, "clip range %g (finite, > 0)", p->clip_range);
  if (p->quant_range < 1 || p->quant_range > sa_ring_mask(p->modulus_bits) / p->n_clients)
    return sa_fail(err, reason, bad,
                   "quantisation range %llu: %u clients' sum must stay below 2^%u (raise modulus_bits or lower it)",
                   (unsigned long long)p->quant_range, p->n_clients, p->modulus_bits);
  return 0;
}
