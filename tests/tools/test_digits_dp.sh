#!/usr/bin/env bash
# DP-FedAvg in federated_digits: each round prints the privacy spent so far, and the ε it
# prints is what `bb dp-epsilon` gives for that many rounds of the Gaussian mechanism
# (q = 1, the run's σ and δ; or the sampled Gaussian at --dp-sample-rate's q), with adaptive
# clipping too; clipping alone keeps the 90 % accuracy; flags that make no sense are refused.
# usage: test_digits_dp.sh FEDERATED_DIGITS BB_TOOL
set -uo pipefail
digits=$1 bb=$2
fail() { echo "$*"; exit 1; }

out=$("$digits" --rounds 6 --dp-clip 1 --dp-noise 1.3 --dp-delta 1e-6 --min-accuracy 0) || fail "the DP run failed: $out"
per_round=$(grep -c '^privacy spent: epsilon' <<<"$out")
[ "$per_round" -eq 6 ] || fail "$per_round privacy lines for 6 rounds: $out"
line=$(grep 'differential privacy' <<<"$out") || fail "no summary line: $out"
rounds=$(sed -E 's/.* ([0-9]+) rounds accounted.*/\1/' <<<"$line")
epsilon=$(sed -E 's/.*epsilon ([0-9.e+-]+) at delta.*/\1/' <<<"$line")
[ "$rounds" -eq 6 ] || fail "accounted $rounds rounds, want 6: $line"
want=$("$bb" dp-epsilon --q 1 --sigma 1.3 --steps "$rounds" --delta 1e-6 | sed -E 's/^epsilon ([0-9.e+-]+) .*/\1/')
awk -v a="$epsilon" -v b="$want" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 1e-5 * b) }' ||
  fail "federated_digits printed epsilon $epsilon, bb dp-epsilon gives $want"
# more noise spends less: the last round's ε at σ 1.3 is below σ 1's
loose=$("$digits" --rounds 6 --dp-clip 1 --dp-noise 1 --dp-delta 1e-6 --min-accuracy 0 --quiet | grep 'differential privacy')
loose_eps=$(sed -E 's/.*epsilon ([0-9.e+-]+) at delta.*/\1/' <<<"$loose")
awk -v a="$epsilon" -v b="$loose_eps" 'BEGIN { exit !(a < b) }' || fail "epsilon $epsilon at sigma 1.3 is not below $loose_eps at 1"

# adaptive clipping accounts every round for the noise multiplier asked for (its updates carry
# the larger one that pays for the count): the fixed clip's epsilon
adaptive=$("$digits" --rounds 6 --dp-clip 1 --dp-noise 1.3 --dp-delta 1e-6 --dp-clip-quantile 0.5 --min-accuracy 0 --quiet |
  grep 'differential privacy')
adaptive_eps=$(sed -E 's/.*epsilon ([0-9.e+-]+) at delta.*/\1/' <<<"$adaptive")
[ "$adaptive_eps" = "$epsilon" ] || fail "adaptive clipping reported epsilon $adaptive_eps, the fixed clip $epsilon"

# Poisson sampling at q = 0.25: every round accounted as a step of the sampled Gaussian at
# that q, as bb dp-epsilon computes it, and below the q = 1 figure
sampled=$("$digits" --rounds 6 --dp-clip 1 --dp-noise 1.3 --dp-delta 1e-6 --dp-sample-rate 0.25 --min-accuracy 0 --quiet |
  grep 'differential privacy')
sampled_rounds=$(sed -E 's/.* ([0-9]+) rounds accounted.*/\1/' <<<"$sampled")
sampled_eps=$(sed -E 's/.*epsilon ([0-9.e+-]+) at delta.*/\1/' <<<"$sampled")
[ "$sampled_rounds" -eq 6 ] || fail "sampled: accounted $sampled_rounds rounds, want 6: $sampled"
sampled_want=$("$bb" dp-epsilon --q 0.25 --sigma 1.3 --steps 6 --delta 1e-6 | sed -E 's/^epsilon ([0-9.e+-]+) .*/\1/')
awk -v a="$sampled_eps" -v b="$sampled_want" -v q1="$epsilon" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 1e-5 * b && a < q1) }' ||
  fail "sampled at q 0.25: federated_digits printed epsilon $sampled_eps, bb dp-epsilon gives $sampled_want (q = 1: $epsilon)"

# clipped to 1 without noise, the federation still reaches the example's 90 %
"$digits" --rounds 30 --dp-clip 1 --dp-noise 0 --quiet >/dev/null || fail "clipping alone lost the 90 %"

# noise without a clip, a delta of 1, a negative clip: usage errors
for bad in "--dp-noise 1" "--dp-clip 1 --dp-noise 1 --dp-delta 1" "--dp-clip -1" "--dp-clip-quantile 0.5" \
  "--dp-clip 1 --dp-noise 1 --dp-clip-quantile 1" "--dp-sample-rate 0.5" "--dp-clip 1 --dp-noise 1 --dp-sample-rate 0"; do
  # shellcheck disable=SC2086
  "$digits" --rounds 1 --quiet $bad >/dev/null 2>&1
  [ $? -eq 2 ] || fail "federated_digits $bad was not refused"
done
echo "epsilon $epsilon after $rounds rounds, as bb dp-epsilon computes it"
