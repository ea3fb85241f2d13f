#!/usr/bin/env bash
# federated_cnn's global model, exported by the server's Model.Export op, is plain ONNX:
# onnx.checker accepts it, it uses ai.onnx operators only, and onnxruntime-node scores it
# on the example's held-out images at the accuracy the federation reported.
# usage: test_cnn_export.sh FEDERATED_CNN PYTHON SOURCE_DIR [EXAMPLE ARGS...]
set -euo pipefail
cnn=$1 py=$2 src=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$cnn" --quiet --export "$work/cnn.onnx" --test-set "$work/test.csv" "$@" | tee "$work/log"
accuracy=$(grep -o 'final held-out accuracy [0-9.]*' "$work/log" | awk '{print $4}')
"$py" "$src/tests/tools/check_cnn_export.py" "$work/cnn.onnx" "$work/test.csv" "$accuracy" "$work"
