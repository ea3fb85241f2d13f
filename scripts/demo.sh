#!/usr/bin/env bash
# The main job: federated learning on handwritten digits. One server and eight clients —
# each a sans-IO node running its partition of one compiled artifact — train over a
# simulated network (latency, jitter, and a second run with 10 % message loss and two
# clients dropping out). The global model is then exported as a standard ONNX model,
# checked by onnx.checker, and run by `bb run` against a numpy forward pass.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=$(nproc 2>/dev/null || echo 2)
say() { printf '\ndemo: %s\n' "$*"; }

say "building (log in build/demo-native.log)"
mkdir -p build
{ cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j "$jobs"; } >build/demo-native.log 2>&1 \
  || { tail -n 30 build/demo-native.log; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

say "the FedDigits module, compiled into partitions (server, clients, server's aggregator)"
./build/bb compile --example federated_digits -o "$out/fed_digits.onnx"
# federated_digits records two Modules (FedDigits, and FedBuffDigits for --async): one file each
./build/bb inspect "$out/fed_digits.FedDigits.onnx"

say "federated averaging: 1 server + 8 clients, non-IID shards, 40 rounds"
./build/examples/federated_digits --rounds 40 --export "$out/digits.onnx"

say "the same with 10% message loss and 2 clients dropping out halfway"
./build/examples/federated_digits --rounds 40 --loss 0.1 --drop 2 | tail -n 4

say "the exported global model: onnx.checker, then bb run against numpy on the held-out digits"
/usr/bin/python3 tests/tools/check_digits_export.py "$out/digits.onnx" ./build/bb "$out"

say "gossip learning: 16 peers, no server"
./build/examples/gossip_digits | tail -n 4

say "done"
