#!/usr/bin/env bash
# The committed models of the examples (examples/models) are PyTorch's export: regenerates
# them with SCRIPT (tests/tools/torch_make_digits_models.py, torch_make_text_model.py) and
# fails unless each file is identical. Skipped (exit 77) where PyTorch is not installed.
# usage: test_example_models.sh PYTHON SOURCE_DIR SCRIPT
set -euo pipefail
py=$1
src=$2
script=$3
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "PyTorch is not installed (python3-torch): skipped"
  exit 77
fi
"$py" "$src/tests/tools/$script" --check "$src/examples/models" 2> >(grep -v -i warn >&2)
