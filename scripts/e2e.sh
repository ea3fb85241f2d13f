#!/usr/bin/env bash
# The end-to-end runs, each once, and one closing line `e2e: N passed, M failed` over all:
#   browsers  js/e2e/run.mjs — a Node server peer with Chromium and Firefox pages as
#             federated clients (hidden and closed pages), federated_cnn, split learning
#             (splitLearning, browser clients), gossip peers
#   tiers     js/e2e/tiers.mjs — Redis and two signalling processes; hierarchical FedAvg
#             with a root, 2 edges and 8 clients (Chromium, Firefox, Node)
#   engines   js/e2e/engines.mjs — the compute path in WebKit, Firefox and Chromium
#   phones    js/e2e/phones.mjs — Chromium phones: one not charging does not train, one
#             reloaded mid-training resumes without a download, a damaged record is refused
#   nat       scripts/e2e-nat.sh — two NATed networks through TURN, over HTTPS/WSS
#   secure    js/e2e/secure.mjs — secure aggregation (SecAgg+) with 4 Chromium clients; one
#             page closed mid-round, after its masked vector: the round still closes
# Chromium gathers no ICE candidates on loopback alone, so the browser runs happen in a
# private network namespace with a veth pair (root; traffic never leaves the namespace),
# started once the link is up and settled (Chromium drops loads made while the network
# changes: net::ERR_NETWORK_CHANGED). The veth pair has no IPv6: its link-local address
# would finish duplicate address detection a second or two after the link comes up, a
# network change in the middle of a scenario's first page loads.
# Needs js/dist and js/wasm/bb.wasm (scripts/test.sh builds them).
#   scripts/e2e.sh --web-demo: web-demo's browser test alone (web-demo/test/e2e.mjs, needs
#   web-demo/dist), closing with `web-demo: N passed, M failed`
#   scripts/e2e.sh [--scenarios browsers,tiers,engines,phones,nat,secure] [run.mjs options...]
# (run.mjs options alone, e.g. --only federated, run the browsers scenario alone)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
scenarios=browsers,tiers,engines,phones,nat,secure
if [ "${1:-}" = "--scenarios" ]; then scenarios=$2; shift 2
elif [ $# -gt 0 ]; then scenarios=browsers; fi
for f in "$root/js/dist/index.js" "$root/js/wasm/bb.wasm"; do
  [ -f "$f" ] || { echo "e2e: $f is missing: build first (cd js && npm run build; scripts/build-wasm.sh)"; echo "e2e: 0 passed, 1 failed"; exit 1; }
done
if [ "$(id -u)" -ne 0 ]; then
  echo "e2e: needs root for private network namespaces (unshare -n, ip netns)"; echo "e2e: 0 passed, 1 failed"; exit 1
fi
netns_setup='ip link set lo up
echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6
ip link add v0 type veth peer name v1
ip addr add 192.0.2.10/24 dev v0
ip link set v0 up
ip link set v1 up
ip route add default dev v0
for _ in $(seq 50); do ip -o link show v0 | grep -q "state UP" && break; sleep 0.1; done
sleep 1'
if [ "${1:-}" = "--web-demo" ]; then
  exec unshare -n bash -c "set -e; $netns_setup; cd '$root/web-demo' && exec node test/e2e.mjs"
fi
in_private_network() { unshare -n bash -c "set -e; $netns_setup; cd '$root/js' && exec $*"; }

passed=0
failed=0
times=()
# Runs one scenario, shows its output, and adds its own closing line to the totals (and
# its wall-clock seconds to the line of times printed before the closing one).
scenario() {
  local name=$1 out began=$SECONDS
  shift
  printf '\n######## %s\n' "$name"
  out=$(mktemp)
  "$@" 2>&1 | tee "$out"
  times+=("$name $((SECONDS - began)) s")
  local line
  line=$(grep -E '^e2e: [0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
  rm -f "$out"
  if [ -z "$line" ]; then
    echo "e2e: scenario $name printed no closing line"
    failed=$((failed + 1))
    return
  fi
  passed=$((passed + $(sed -E 's/^e2e: ([0-9]+) passed.*/\1/' <<<"$line")))
  failed=$((failed + $(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")))
}

IFS=, read -ra wanted <<<"$scenarios"
for s in "${wanted[@]}"; do
  case $s in
    browsers) scenario browsers in_private_network node e2e/run.mjs "$@" ;;
    tiers) scenario tiers in_private_network node e2e/tiers.mjs ;;
    engines) scenario engines bash -c "cd '$root/js' && exec node e2e/engines.mjs" ;;
    phones) scenario phones in_private_network node e2e/phones.mjs ;;
    nat) scenario nat bash "$root/scripts/e2e-nat.sh" ;;
    secure) scenario secure in_private_network node e2e/secure.mjs ;;
    *) echo "e2e: no scenario $s"; failed=$((failed + 1)) ;;
  esac
done
printf -v joined '%s, ' "${times[@]}"
echo "e2e: times: ${joined%, }"
echo "e2e: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
