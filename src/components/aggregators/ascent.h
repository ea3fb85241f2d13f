/* The ascent screen: whether a contributor's updates behave like descent steps on some
 * data, judged from how they change as the global model moves. No data set is needed.
 *
 * A client that trains from the global model g on its own data sends u(g), and its step
 * u(g) - g answers a move of the model by s with a change of about -η·H·s (H the
 * curvature of its loss, positive along the directions its data pins down): when the
 * model moves toward what the client's data wants, its next step shrinks along that
 * move. A client sending its step reversed, g - (u - g), answers with +η·H·s: its step
 * grows along every move. Between two rounds t' < t of one contributor the screen scores
 *
 *     score = -cos(Δ_t - Δ_t', g_t - g_t')      (Δ_t = u_t - g_t, the step it sent)
 *
 * in [-1, 1]: positive for descent steps, negative for reversed ones. A round is judged
 * when at least three of its updates could be scored and their median lies a robust
 * standard deviation (1.4826 × the median absolute deviation) above zero: its descent
 * steps answer clearly (early rounds, whose steps grow with the clients' momentum, and
 * rounds of steps that are mostly noise say nothing and are skipped). There each scored
 * contributor's trust (0 at first) becomes the mean of its trust and the round's
 * evidence: its score when the score is negative and lies more than two robust standard
 * deviations below the round's median, else max(0, score) — so an honest client's noise
 * never counts against it, while a reversed step, far below a round of descent steps,
 * does. An update keeps its whole weight while its contributor's trust is above -0.1,
 * and loses it linearly below: min(1, max(0, 1 + (trust + 0.1) / tau)), none at
 * -0.1 - tau.
 *
 * A contributor's last step is remembered while it can still be compared — for
 * BBI_ASCENT_RING rounds, with the references of those rounds — and its trust for
 * BBI_ASCENT_FORGET rounds after its last fresh update. Memory: one step per contributor
 * of the last BBI_ASCENT_RING rounds and BBI_ASCENT_RING references.
 *
 * What it does not see: a liar whose updates are descent steps on other data (wrong
 * labels, another task) answers like an honest client with that data, as heterogeneity
 * does; only a bound on how far such updates move the model limits them. Nor a reversed
 * step in rounds where every step is mostly noise (one SGD step on a small batch): its
 * score then scatters with the honest ones. */
#ifndef BBI_OPS_AGGREGATORS_ASCENT_H
#define BBI_OPS_AGGREGATORS_ASCENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bb/bytes.h"
#include "bb/common.h"

/* The longest contributor key the screen remembers (a round's keys: BBI_FEDROUND_KEY_MAX). */
#define BBI_ASCENT_KEY_MAX 64
#define BBI_ASCENT_RING 4
#define BBI_ASCENT_FORGET 64

typedef struct bbi_ascent bbi_ascent;

/* One update of a closing round, as the screen reads it. */
typedef struct bbi_ascent_update {
  const uint8_t *key; /* the contributor (1 to BBI_ASCENT_KEY_MAX bytes) */
  size_t key_len;
  const float *params; /* the update as sent (param_len floats) */
  bool fresh;          /* trained from this round's reference (a late copy is not) */
} bbi_ascent_update;

int bbi_ascent_new(const bb_allocator *alloc, size_t param_len, bbi_ascent **out, bb_error *err);
void bbi_ascent_free(bbi_ascent *a);

/* For round `round` closing from `ref` (NULL: zeros): the trust each update's contributor
 * holds after this round into trust[i], and the share of its weight it keeps into
 * weight[i] (0..1). Changes nothing; scratch holds 2n doubles. */
void bbi_ascent_weigh(const bbi_ascent *a, uint64_t round, const float *ref, const bbi_ascent_update *u, size_t n,
                     double tau, double *trust, double *weight, double *scratch);

/* Makes room for bbi_ascent_commit to remember these updates; BB_ERR_NOMEM changes
 * nothing the screen decides by. */
int bbi_ascent_reserve(bbi_ascent *a, const bbi_ascent_update *u, size_t n, bb_error *err);

/* Remembers round `round` as closed from `ref` (NULL: zeros): each fresh update's step and
 * trust (from bbi_ascent_weigh), the reference, and forgets what has grown too old.
 * Cannot fail once bbi_ascent_reserve succeeded for the same updates. */
void bbi_ascent_commit(bbi_ascent *a, uint64_t round, const float *ref, const bbi_ascent_update *u, size_t n,
                      const double *trust);

/* Snapshot: the references held, then the contributors (sorted by key) with their trust
 * and last step. */
size_t bbi_ascent_snapshot_size(const bbi_ascent *a);
void bbi_ascent_write(const bbi_ascent *a, bb_le_writer *w);

/* Reads what bbi_ascent_write wrote into an empty screen, for a state whose open round is
 * `open_round`; BB_ERR_MALFORMED naming the byte offset for anything truncated, out of
 * order, non-finite or from a round not yet closed. */
int bbi_ascent_read(bbi_ascent *a, bb_le_reader *in, uint64_t open_round, bb_error *err);

#endif
