#!/usr/bin/env bash
# federated_digits with OnnxModel on the MLP CpuMlp is (examples/models/digits_mlp.onnx,
# exported from PyTorch; the same loss, optimizer and local steps, another initialisation)
# reaches the accuracy the example reaches with CpuMlp: over five seeds (each its own data
# split, initialisation and network), the mean final accuracies are within a point, and
# every OnnxModel run learns (>= 0.90).
# usage: test_digits_onnx_mlp.sh FEDERATED_DIGITS SOURCE_DIR [EXAMPLE ARGS...]
set -euo pipefail
fd=$1 src=$2
shift 2
final() { "$fd" --quiet "$@" | grep -o 'final held-out accuracy [0-9.]*' | awk '{print $4}'; }
cpu=() onnx=()
for seed in 1 2 3 4 5; do
  cpu+=("$(final --seed "$seed" "$@")")
  onnx+=("$(final --seed "$seed" --onnx-model "$src/examples/models/digits_mlp.onnx" "$@")")
  echo "seed $seed: CpuMlp ${cpu[-1]}, OnnxModel ${onnx[-1]}"
done
awk -v a="${cpu[*]}" -v b="${onnx[*]}" 'BEGIN {
  n = split(a, x, " "); split(b, y, " ");
  for (i = 1; i <= n; i++) { sa += x[i]; sb += y[i]; if (y[i] < 0.9) low = 1 }
  d = (sa - sb) / n; if (d < 0) d = -d;
  printf "mean: CpuMlp %.4f, OnnxModel %.4f (difference %.4f)\n", sa / n, sb / n, d;
  exit !(d <= 0.01 && !low) }'
