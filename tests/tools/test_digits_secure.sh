#!/usr/bin/env bash
# Secure aggregation in federated_digits: with --secure every round is a SecAgg+ sum and
# the held-out accuracy is within half a point of plain FedAvg at the same seed; two
# clients crashing halfway leave the rounds closing; secure flags without --secure, or
# with --async, are refused.
# usage: test_digits_secure.sh FEDERATED_DIGITS
set -uo pipefail
digits=$1
fail() { echo "$*"; exit 1; }
accuracy() { sed -nE 's/.*final held-out accuracy ([0-9.]+).*/\1/p' <<<"$1"; }

plain=$("$digits" --rounds 20 --seed 2 --min-accuracy 0 --quiet) || fail "the plain run failed: $plain"
secure=$("$digits" --rounds 20 --seed 2 --min-accuracy 0 --quiet --secure) || fail "the secure run failed: $secure"
line=$(grep 'secure aggregation:' <<<"$secure") || fail "no secure aggregation line: $secure"
[[ $line == *"20 rounds summed (0 aborted), 160 updates"* ]] || fail "not every round was a sum of 8: $line"
a=$(accuracy "$plain") b=$(accuracy "$secure")
awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0.5 && d <= 0.005) }' ||
  fail "secure accuracy $b is not within 0.005 of plain $a"

dropped=$("$digits" --rounds 20 --drop 2 --min-accuracy 0 --quiet --secure) || fail "the run with drops failed: $dropped"
[[ $(grep 'secure aggregation:' <<<"$dropped") == *"20 rounds summed"* ]] || fail "rounds stopped with 2 dropped: $dropped"

for bad in "--secure-threshold 3" "--secure --async" "--secure --secure-shares -2"; do
  # shellcheck disable=SC2086
  "$digits" --rounds 1 --quiet $bad >/dev/null 2>&1
  [ $? -eq 2 ] || fail "federated_digits $bad was not refused"
done
echo "secure accuracy $b, plain $a"
