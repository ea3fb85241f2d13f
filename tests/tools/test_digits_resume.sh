#!/usr/bin/env bash
# Snapshot/restore at scale: federated_digits with the server moved into a fresh node
# through a snapshot at round 12 prints, round for round, what the uninterrupted run
# prints (with message loss and clients dropping, so parked state matters).
# usage: test_digits_resume.sh FEDERATED_DIGITS
set -uo pipefail
args=(--rounds 30 --loss 0.1 --drop 2)
whole_out=$("$1" "${args[@]}")
moved_out=$("$1" "${args[@]}" --snapshot-at 12)
if ! grep -q '^-- server snapshotted' <<<"$moved_out"; then
  echo "the server was never moved through a snapshot"
  exit 1
fi
whole=$(grep -E '^round|final' <<<"$whole_out")
moved=$(grep -E '^round|final' <<<"$moved_out")
if [ "$whole" != "$moved" ]; then
  diff <(echo "$whole") <(echo "$moved")
  echo "the restored run differs from the uninterrupted one"
  exit 1
fi
echo "identical round by round: $(tail -n 1 <<<"$whole")"
