#!/usr/bin/env bash
# Builds bb.wasm and bb-relaxed.wasm (and the C tests as Node programs) with Emscripten, and
# bb-mt.wasm and bb-mt-relaxed.wasm (the same ABI on shared memory, for threads, with
# baseline and relaxed SIMD kernels; build-wasm-mt/), and puts the
# modules where the npm package expects them (js/wasm/), with the examples' ONNX models
# (js/models/). Arguments are passed to CMake (scripts/test.sh adds -DBB_WERROR=ON).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=$(nproc 2>/dev/null || echo 2)
emcmake cmake -S . -B build-wasm -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build-wasm -j "$jobs"
emcmake cmake -S . -B build-wasm-mt -DCMAKE_BUILD_TYPE=Release -DBB_WASM_THREADS=ON "$@" >/dev/null
cmake --build build-wasm-mt --target bb_wasm_mt -j "$jobs"
if [ -f build-wasm/wasm/bb-relaxed.wasm ]; then
  cmake --build build-wasm-mt --target bb_wasm_mt_relaxed -j "$jobs"
fi
mkdir -p js/wasm js/models
cp build-wasm/wasm/bb.wasm js/wasm/bb.wasm
cp build-wasm-mt/wasm/bb-mt.wasm js/wasm/bb-mt.wasm
# the same module with relaxed-SIMD kernels, which the loader picks where the engine runs
# them (absent only when configured with -DBB_WASM_RELAXED=OFF)
if [ -f build-wasm/wasm/bb-relaxed.wasm ]; then
  cp build-wasm/wasm/bb-relaxed.wasm js/wasm/bb-relaxed.wasm
  cp build-wasm-mt/wasm/bb-mt-relaxed.wasm js/wasm/bb-mt-relaxed.wasm
else
  rm -f js/wasm/bb-relaxed.wasm js/wasm/bb-mt-relaxed.wasm
fi
# the examples' models ship with the package (bytesandbrains/models/...)
cp examples/models/*.onnx js/models/
echo "wasm: js/wasm/bb.wasm ($(stat -c %s js/wasm/bb.wasm) bytes)"
if [ -f js/wasm/bb-relaxed.wasm ]; then
  echo "wasm: js/wasm/bb-relaxed.wasm ($(stat -c %s js/wasm/bb-relaxed.wasm) bytes)"
fi
echo "wasm: js/wasm/bb-mt.wasm ($(stat -c %s js/wasm/bb-mt.wasm) bytes)"
if [ -f js/wasm/bb-mt-relaxed.wasm ]; then
  echo "wasm: js/wasm/bb-mt-relaxed.wasm ($(stat -c %s js/wasm/bb-mt-relaxed.wasm) bytes)"
fi
