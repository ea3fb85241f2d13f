#!/usr/bin/env bash
# Two tiers of FedAvg learn what flat FedAvg learns: hierarchical_digits (a root, 2 edges,
# 8 clients) must end within one point of federated_digits' held-out accuracy with the
# same 8 clients, shards and rounds.
# usage: test_hierarchical_vs_flat.sh HIERARCHICAL_DIGITS FEDERATED_DIGITS
set -euo pipefail
accuracy() { "$@" --quiet | sed -n 's/.*final held-out accuracy \([0-9.]*\).*/\1/p'; }
tiers=$(accuracy "$1" --edges 2)
flat=$(accuracy "$2" --clients 8)
echo "hierarchical $tiers, flat $flat"
awk -v a="$tiers" -v b="$flat" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 0.01) }'
