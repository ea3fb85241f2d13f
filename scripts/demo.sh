#!/usr/bin/env bash
# The current end-to-end run (until the federated demo exists): a real ONNX model goes
# through the IR natively and in bb.wasm under Node, the two results are compared byte for
# byte, and the real onnx.checker validates what we wrote.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=$(nproc 2>/dev/null || echo 2)
say() { printf '\ndemo: %s\n' "$*"; }

say "building natively and to WebAssembly (logs in build/demo-*.log)"
mkdir -p build
{ cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j "$jobs"; } >build/demo-native.log 2>&1 \
  || { tail -n 30 build/demo-native.log; exit 1; }
bash scripts/build-wasm.sh >build/demo-wasm.log 2>&1 || { tail -n 30 build/demo-wasm.log; exit 1; }
(cd js && npm run --silent build) >build/demo-js.log 2>&1 || { tail -n 30 build/demo-js.log; exit 1; }

model=${1:-/usr/include/onnx/backend/test/data/pytorch-converted/test_ConvTranspose2d/model.onnx}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

say "bb inspect $model"
./build/bb inspect "$model"

say "round trip through the IR, natively (bb reencode) and in bb.wasm under Node"
./build/bb reencode "$model" "$out/native.onnx"
node scripts/demo-wasm-roundtrip.mjs "$model" "$out/wasm.onnx"
if cmp -s "$out/native.onnx" "$out/wasm.onnx"; then
  echo "native and wasm encodings are byte-identical ($(stat -c %s "$out/native.onnx") bytes)"
else
  echo "native and wasm encodings differ"; exit 1
fi
if cmp -s "$model" "$out/native.onnx"; then echo "and identical to the input file"; fi

say "onnx.checker on the re-encoded model"
/usr/bin/python3 -c 'import sys, onnx; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True); print("onnx.checker: ok")' "$out/native.onnx"

say "a hostile model: the input with its last 7 bytes cut off"
head -c -7 "$model" >"$out/truncated.onnx"
if ./build/bb inspect "$out/truncated.onnx" >/dev/null; then echo "accepted?!"; exit 1; fi

say "a small CNN made with onnx.helper, run on the CPU backend (bb run) and checked against numpy"
/usr/bin/python3 tests/tools/make_cnn.py "$out"
./build/bb run "$out/cnn.onnx" --input "x=$out/x.pb" --output-dir "$out/run" --repeat 20
/usr/bin/python3 -c '
import sys, numpy as np, onnx
from onnx import numpy_helper
got = numpy_helper.to_array(onnx.load_tensor(sys.argv[1])); want = numpy_helper.to_array(onnx.load_tensor(sys.argv[2]))
print("matches numpy: max |difference| = %.2e" % np.abs(got - want).max()); assert np.allclose(got, want, rtol=1e-4, atol=1e-6)
' "$out/run/probs.pb" "$out/expected.pb"

say "the multi_target_network example recorded with the DSL and compiled into partitions"
./build/bb compile --example multi_target_network -o "$out/fednetwork.onnx"
./build/bb inspect "$out/fednetwork.onnx"

say "done: IR, CPU backend and compiler work end to end (the federated run comes with the runtime)"
