#!/usr/bin/env bash
# The committed model of the text example (examples/models/text_lstm.onnx) is PyTorch's export:
# regenerates it with torch_make_text_model.py and fails unless the file is
# identical. Skipped (exit 77) where PyTorch is not installed.
# usage: test_text_model.sh PYTHON SOURCE_DIR
set -euo pipefail
py=$1
src=$2
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "PyTorch is not installed (python3-torch): skipped"
  exit 77
fi
"$py" "$src/tests/tools/torch_make_text_model.py" --check "$src/examples/models" 2> >(grep -v -i warn >&2)
