#!/usr/bin/env bash
# The CPU session's load-time rewrites (BatchNormalization folded into Conv, activations
# and residual Adds fused, constant subgraphs folded, Identity elided) against
# onnxruntime-node: small graphs that put each rewrite where it can go wrong, and
# torchvision's resnet18, mobilenet_v2 and efficientnet_b0 with random weights and
# BatchNorm statistics (rewrite_cases.py), answered by onnxruntime (ort_node_tests.mjs; one
# case by PyTorch), run by the conformance runner; then `bb run` must report at least the
# rewrites each graph offers, so a rewrite that silently stops firing fails too.
# usage: test_rewrites_ort.sh PYTHON SOURCE_DIR CONFORMANCE_BINARY BB_TOOL
set -euo pipefail
py=$1
src=$2
runner=$3
bb=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$py" "$src/tests/tools/rewrite_cases.py" "$dir" --torchvision 2> >(grep -v -i warn >&2)
node "$src/tests/tools/ort_node_tests.mjs" "$dir" 2> >(grep -v -i warn >&2)
BB_CONFORMANCE_DIR=$dir BB_CONFORMANCE_ALL=1 "$runner"
"$py" "$src/tests/tools/rewrite_cases.py" "$dir" --check "$bb"
