#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time over a corpus seeded from real models.
# usage: run-fuzz.sh FUZZER CORPUS_DIR SECONDS [SEEDS_LIST]
# SEEDS_LIST names files, one per line: relative to $BB_FUZZ_SEEDS, or, when a line
# starts with ./, relative to the list's own folder.
set -euo pipefail
fuzzer=$1 corpus=$2 seconds=$3 seeds=${4:-}
mkdir -p "$corpus"
if [ -n "$seeds" ] && [ -f "$seeds" ]; then
  while IFS= read -r rel; do
    [ -n "$rel" ] || continue
    case "$rel" in
      ./*) src="$(dirname "$seeds")/${rel#./}" ;;
      *) src="${BB_FUZZ_SEEDS:-}/$rel" ;;
    esac
    [ -f "$src" ] && cp -f "$src" "$corpus/seed-$(echo "$rel" | tr / _)"
  done < "$seeds"
fi
# -rss_limit_mb bounds memory; leaks and crashes fail the run.
"$fuzzer" "$corpus" -artifact_prefix="$corpus/../$(basename "$corpus")-" -seed=1 -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 2>&1 | tail -n 25
