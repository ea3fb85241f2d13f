#!/usr/bin/env bash
# The committed gradient references are PyTorch's: regenerates every case of
# tests/data/grad with torch_make_grad_models.py and fails unless each file is identical.
# Skipped (exit 77) where PyTorch is not installed.
# usage: test_grad_oracle.sh PYTHON SOURCE_DIR
set -euo pipefail
py=$1
src=$2
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "PyTorch is not installed (python3-torch): skipped"
  exit 77
fi
"$py" "$src/tests/tools/torch_make_grad_models.py" --check "$src/tests/data/grad" 2> >(grep -v -i warn >&2)
