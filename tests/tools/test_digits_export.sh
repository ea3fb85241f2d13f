#!/usr/bin/env bash
# federated_digits --export writes a standard ONNX model that onnx.checker accepts and
# `bb run` and onnxruntime execute with the probabilities numpy computes from its initializers.
# usage: test_digits_export.sh FEDERATED_DIGITS BB PYTHON SOURCE_DIR
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$1" --quiet --rounds 20 --export "$work/digits.onnx" || true  # the export is checked, not the accuracy
test -s "$work/digits.onnx"
"$3" "$4/tests/tools/check_digits_export.py" "$work/digits.onnx" "$2" "$work"
