#!/usr/bin/env bash
# The end-to-end run (js/e2e/run.mjs): a Node server peer and headless Chromium pages as
# federated and gossip peers over real WebRTC data channels. Chromium gathers no ICE
# candidates on loopback alone, so the run happens in a private network namespace with a
# veth pair (root; traffic never leaves the namespace). Needs js/dist and js/wasm/bb.wasm
# (scripts/test.sh builds them). Ends with `e2e: N passed, M failed` (`web-demo: ...` with
# --web-demo).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
for f in "$root/js/dist/index.js" "$root/js/wasm/bb.wasm"; do
  [ -f "$f" ] || { echo "e2e: $f is missing: build first (cd js && npm run build; scripts/build-wasm.sh)"; echo "e2e: 0 passed, 1 failed"; exit 1; }
done
netns_setup='ip link set lo up
ip link add v0 type veth peer name v1
ip addr add 192.0.2.10/24 dev v0
ip link set v0 up
ip link set v1 up
ip route add default dev v0'
if [ "$(id -u)" -ne 0 ]; then
  echo "e2e: needs root for a private network namespace (unshare -n)"; echo "e2e: 0 passed, 1 failed"; exit 1
fi
# --web-demo runs web-demo's browser test (web-demo/test/e2e.mjs, needs web-demo/dist) instead
if [ "${1:-}" = "--web-demo" ]; then
  exec unshare -n bash -c "set -e; $netns_setup; cd '$root/web-demo' && exec node test/e2e.mjs"
fi
exec unshare -n bash -c "set -e; $netns_setup; cd '$root/js' && exec node e2e/run.mjs $*"
