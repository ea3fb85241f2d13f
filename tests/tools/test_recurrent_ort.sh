#!/usr/bin/env bash
# RNN, GRU and LSTM against onnxruntime: random nodes over the attribute grid
# (recurrent_cases.py), answered by onnxruntime-node (ort_node_tests.mjs), run by the
# conformance runner, every case pinned. onnxruntime's recurrent kernels use their own
# activation approximations, hence the absolute tolerance of 1e-5 (relative stays 1e-3).
# usage: test_recurrent_ort.sh PYTHON SOURCE_DIR CONFORMANCE_BINARY
set -euo pipefail
py=$1
src=$2
runner=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$py" "$src/tests/tools/recurrent_cases.py" "$dir" --count 40 --seed 11
node "$src/tests/tools/ort_node_tests.mjs" "$dir" 2> >(grep -v -i warn >&2)
BB_CONFORMANCE_DIR=$dir BB_CONFORMANCE_ALL=1 BB_CONFORMANCE_ATOL=1e-5 "$runner"
