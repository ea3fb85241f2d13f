#!/usr/bin/env bash
# Runs the benchmarks and prints their tables (nothing here is a test):
#   1. native kernels, SIMD against their scalar twins (bench/bench_kernels.c);
#   2. the same kernels in wasm under Node;
#   3. the compiler on a 10,000-node module against the ONNX codec alone;
#   3b. the runtime (bench/bench_runtime.c), natively and in wasm
#       under Node;
#   4. bb.wasm against onnxruntime-web (wasm, 1 thread) and onnxruntime-node (1 thread),
#      op by op in one Node process (bench/js/ops-vs-ort.mjs);
#   5. training steps: natively and in wasm (bench/bench_train.c), natively against PyTorch
#      with one thread (bench/train_vs_torch.py), and bb.wasm through the npm package against
#      TensorFlow.js's wasm backend (bench/js/train-vs-tfjs.mjs).
# Pass --quick for a rough run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/setup.sh
jobs=$(nproc 2>/dev/null || echo 2)
quick=${1:-}

echo "== native kernels (build/bench/bench_kernels)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs" --target bench_kernels >/dev/null
./build/bench/bench_kernels

echo
echo "== compiler (build/bench/bench_compiler)"
cmake --build build -j "$jobs" --target bench_compiler >/dev/null
./build/bench/bench_compiler

echo
echo "== runtime (build/bench/bench_runtime): each cost beside a named baseline"
cmake --build build -j "$jobs" --target bench_runtime >/dev/null
./build/bench/bench_runtime

echo
echo "== wasm kernels under Node (build-wasm/bench/bench_kernels.js)"
bash scripts/build-wasm.sh >/dev/null
cmake --build build-wasm -j "$jobs" --target bench_kernels bench_runtime >/dev/null
node build-wasm/bench/bench_kernels.js

echo
echo "== the runtime in wasm under Node (build-wasm/bench/bench_runtime.js)"
node build-wasm/bench/bench_runtime.js

echo
echo "== bb.wasm against onnxruntime-web and onnxruntime-node"
(cd js && npm run --silent build)
if [ ! -d bench/js/node_modules ] || ! cmp -s bench/js/package-lock.json bench/js/node_modules/.bb-lock-stamp; then
  (cd bench/js && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error && cp package-lock.json node_modules/.bb-lock-stamp)
fi
node bench/js/ops-vs-ort.mjs $quick

echo
echo "== training steps, natively and in wasm (bench/bench_train.c)"
cmake --build build -j "$jobs" --target bench_train >/dev/null
cmake --build build-wasm -j "$jobs" --target bench_train >/dev/null
./build/bench/bench_train
node build-wasm/bench/bench_train.js

echo
echo "== natively against PyTorch, one thread (bench/train_vs_torch.py)"
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then /usr/bin/python3 bench/train_vs_torch.py build; else echo "PyTorch is not installed (python3-torch): skipped"; fi

echo
echo "== bb.wasm against TensorFlow.js (wasm backend, 1 thread) (bench/js/train-vs-tfjs.mjs)"
node bench/js/train-vs-tfjs.mjs $quick
