#!/usr/bin/env bash
# onnx.checker (full_check: strict shape inference too) accepts every training graph and
# optimizer graph the gradient builder emits for the PyTorch cases and cuts: the test
# programs write them into a temporary directory, then each is checked.
# usage: test_grad_checker.sh PYTHON TEST_GRAD_TORCH [TEST_GRAD_CUT_TORCH...]
set -euo pipefail
py=$1
shift
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for test_bin in "$@"; do
  if ! BB_GRAD_GRAPHS_DIR=$dir "$test_bin" >"$dir/log" 2>&1; then
    cat "$dir/log"
    exit 1
  fi
done
"$py" - "$dir" <<'PY'
import glob, sys
import onnx
files = sorted(glob.glob(sys.argv[1] + "/*.onnx"))
bad = 0
for path in files:
    try:
        onnx.checker.check_model(onnx.load(path), full_check=True)
    except Exception as e:  # the checker's own exception types vary between releases
        bad += 1
        print(f"{path.split('/')[-1]}: {e}")
print(f"onnx.checker: {len(files) - bad} passed, {bad} failed")
sys.exit(1 if bad or len(files) < 50 else 0)
PY
