#!/usr/bin/env bash
# bb train end to end: the LeNet-style CNN PyTorch exported (tests/data/grad) learns
# scikit-learn's handwritten digits from CSV; federated_text's LSTM learns next characters
# of a licence text; a linear regression made with onnx.helper
# learns from a CSV with a header and a named label column; the trained models are
# written in inference form and pass onnx.checker; models exported from PyTorch (torch.chunk,
# an Embedding on int64 columns, buffers) train as PyTorch trains them, one cut off by
# torch.round is refused by name; bad arguments fail with clear messages; --max-total-bytes
# caps every run.
# usage: test_train_cli.sh BB PYTHON SOURCE_DIR
set -uo pipefail
bb=$1 py=$2 src=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/checks.sh"

gzip -dc /usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz >"$tmp/digits.csv"
lenet=$src/tests/data/grad/lenet_dynamic.onnx

"$bb" train "$lenet" --data "$tmp/digits.csv" --label -1 --scale 0.0625 --epochs 10 --lr 0.01 --quiet \
  -o "$tmp/lenet.onnx" --training-graph "$tmp/train.onnx" --optimizer-graph "$tmp/opt.onnx" >"$tmp/lenet.log" 2>&1
cat "$tmp/lenet.log"
check "LeNet learns the digits (test accuracy >= 0.9)" \
  "$py" -c 'import re,sys; a=float(re.findall(r"test accuracy ([0-9.]+)", open(sys.argv[1]).read())[-1]); sys.exit(a < 0.9)' "$tmp/lenet.log"
check "the trained LeNet is plain ONNX in inference form" "$py" -c '
import sys, onnx
m = onnx.load(sys.argv[1])
onnx.checker.check_model(m, full_check=True)
for n in m.graph.node:
    assert n.domain in ("", "ai.onnx"), n
    if n.op_type == "BatchNormalization":
        assert len(n.output) == 1 and not any(a.name == "training_mode" for a in n.attribute), n
    if n.op_type == "Dropout":
        assert len(n.input) < 3, n
for f in sys.argv[2:]:
    onnx.checker.check_model(onnx.load(f), full_check=True)
' "$tmp/lenet.onnx" "$tmp/train.onnx" "$tmp/opt.onnx"
check "the optimizer graph carries its step count" "$py" -c '
import sys, onnx
from onnx import numpy_helper
m = onnx.load(sys.argv[1])
step = [numpy_helper.to_array(i) for i in m.graph.initializer if i.name == "optimizer.step"][0]
assert int(step) == 450, step
' "$tmp/opt.onnx"

# y = 2 x0 - x1 + 0.5 (+ noise), a header, the label named
"$py" - "$tmp" <<'PY'
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
d = sys.argv[1]
rng = np.random.default_rng(7)
x = rng.uniform(-1, 1, (200, 2)).astype(np.float32)
y = 2 * x[:, 0] - x[:, 1] + 0.5 + rng.normal(0, 0.01, 200)
with open(f"{d}/reg.csv", "w") as f:
    f.write("a,b,target_y\n")
    for r, t in zip(x, y):
        f.write(f"{r[0]:.6f},{r[1]:.6f},{t:.6f}\n")
g = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])], "linear",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 1])],
    [numpy_helper.from_array(np.zeros((2, 1), np.float32), "w"), numpy_helper.from_array(np.zeros(1, np.float32), "b")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), f"{d}/linear.onnx")
PY
"$bb" train "$tmp/linear.onnx" --data "$tmp/reg.csv" --header --label target_y --loss mse --optimizer sgd --lr 0.1 \
  --batch 16 --steps 300 -o "$tmp/linear_trained.onnx" >"$tmp/reg.log" 2>&1
cat "$tmp/reg.log"
check "a linear regression learns its weights" "$py" -c '
import sys, numpy as np, onnx
from onnx import numpy_helper
m = {i.name: numpy_helper.to_array(i) for i in onnx.load(sys.argv[1]).graph.initializer}
assert np.allclose(m["w"].ravel(), [2, -1], atol=0.05) and abs(m["b"][0] - 0.5) < 0.05, m
' "$tmp/linear_trained.onnx"
check "its test error is small" "$py" -c 'import re,sys; e=float(re.findall(r"test mse ([0-9.e-]+)", open(sys.argv[1]).read())[-1]); sys.exit(e > 0.01)' "$tmp/reg.log"

# the next-character LSTM of federated_text on windows of a licence text: it learns, and
# its export passes onnx.checker with the LSTM node in place
"$py" - "$tmp/text.csv" <<'PY'
import sys
text = open("/usr/share/common-licenses/GPL-3").read()
cls, prev = [], None
for ch in text:  # examples/common/text.c's classes: a-z, one for white-space runs, one for the rest
    c = ord(ch.lower()) - 97 if "a" <= ch.lower() <= "z" else (26 if ch.isspace() else 27)
    if not (c == 26 and prev == 26):
        cls.append(c)
    prev = c
with open(sys.argv[1], "w") as f:
    for i in range(0, 6000, 2):
        f.write(",".join(map(str, cls[i:i + 17])) + "\n")
PY
"$bb" train "$src/examples/models/text_lstm.onnx" --data "$tmp/text.csv" --label -1 --optimizer adam --lr 0.01 \
  --epochs 3 -o "$tmp/lstm.onnx" >"$tmp/lstm.log" 2>&1
cat "$tmp/lstm.log"
check "the LSTM learns next characters (test accuracy >= 0.3)" \
  "$py" -c 'import re,sys; a=float(re.findall(r"test accuracy ([0-9.]+)", open(sys.argv[1]).read())[-1]); sys.exit(a < 0.3)' "$tmp/lstm.log"
check "the trained LSTM passes onnx.checker" "$py" -c '
import sys, onnx
m = onnx.load(sys.argv[1])
onnx.checker.check_model(m, full_check=True)
assert [n.op_type for n in m.graph.node].count("LSTM") == 1
' "$tmp/lstm.onnx"
# Models straight from PyTorch: bb train matches torch.optim.SGD on the same batches in file
# order (--no-shuffle), or refuses naming the operator that cuts a parameter off
"$py" "$src/tests/tools/torch_train_cli_models.py" "$bb" "$tmp" >"$tmp/torch_compare.log" 2> >(grep -v -i warn >&2)
cat "$tmp/torch_compare.log"
check "torch.chunk (Slice bounds from Shape): every parameter trains as in PyTorch" grep -qx "ok chunk" "$tmp/torch_compare.log"
check "an Embedding's int64 token columns train as in PyTorch" grep -qx "ok embedding" "$tmp/torch_compare.log"
check "buffers frozen with --freeze stay as they were, the rest trains as in PyTorch" grep -qx "ok buffers" "$tmp/torch_compare.log"
fails_with "a layer reached only through torch.round is refused, naming the operator and the parameter" \
  "parameter a.weight reaches the loss loss only through values without a gradient: at node /Round (Round)" \
  "$bb" train "$tmp/rounded.onnx" --data "$tmp/rounded.csv" --label -1 --steps 2 --quiet -o "$tmp/x.onnx"
check "frozen, the layer before torch.round stays and the one after trains" bash -c '
  "$1" train "$2/rounded.onnx" --data "$2/rounded.csv" --label -1 --steps 2 --quiet --freeze a.weight,a.bias -o "$2/r.onnx" &&
  "$3" -c "
import sys, onnx, numpy as np
from onnx import numpy_helper
a = {i.name: numpy_helper.to_array(i) for i in onnx.load(sys.argv[1]).graph.initializer}
b = {i.name: numpy_helper.to_array(i) for i in onnx.load(sys.argv[2]).graph.initializer}
assert all(np.array_equal(a[k], b[k]) for k in (\"a.weight\", \"a.bias\"))
assert not np.array_equal(a[\"b.weight\"], b[\"b.weight\"])
" "$2/rounded.onnx" "$2/r.onnx"' _ "$bb" "$tmp" "$py"
fails_with "a frozen name that is not an initializer" "frozen parameter nope is not an initializer" \
  "$bb" train "$tmp/chunk.onnx" --data "$tmp/chunk.csv" --label -1 --freeze nope -o "$tmp/x.onnx"
printf '1.5,2,3,4,5,0\n' >"$tmp/fraction.csv"
fails_with "a token column that is not a whole number" "feature 1.5 (column 1) is not a whole number" \
  "$bb" train "$tmp/embedding.onnx" --data "$tmp/fraction.csv" --label -1 --test-fraction 0 --batch 1 -o "$tmp/x.onnx"

fails_with "a label column that is not there" "has no column 'nope'" \
  "$bb" train "$tmp/linear.onnx" --data "$tmp/reg.csv" --header --label nope -o "$tmp/x.onnx"
fails_with "an unknown optimizer" "is not sgd, momentum, nesterov, adam or adamw" \
  "$bb" train "$tmp/linear.onnx" --data "$tmp/reg.csv" --header --label -1 --optimizer rmsprop -o "$tmp/x.onnx"
fails_with "labels that are not class ids" "is not a class id" \
  "$bb" train "$tmp/linear.onnx" --data "$tmp/reg.csv" --header --label -1 --loss xent -o "$tmp/x.onnx"
fails_with "rows that do not fill the input" "do not fill input x" \
  "$bb" train "$tmp/linear.onnx" --data "$tmp/digits.csv" --label -1 -o "$tmp/x.onnx"
fails_with "a fixed batch" "has a fixed batch of 4: pass --batch 4" \
  "$bb" train "$src/tests/data/grad/lenet.onnx" --data "$tmp/digits.csv" --label -1 -o "$tmp/x.onnx"
fails_with "a missing -o" "usage: bb train" "$bb" train "$lenet" --data "$tmp/digits.csv" --label -1
# --max-total-bytes holds every run of the trainer to the cap, lower or higher than the
# CPU backend's 1 GiB default
fails_with "a step past --max-total-bytes" "step 0: node .* over the cap of 4096 (bb_cpu_limits.max_total_bytes)" \
  "$bb" train "$lenet" --data "$tmp/digits.csv" --label -1 --steps 1 --max-total-bytes 4096 -o "$tmp/x.onnx"
check "a cap raised past 1 GiB trains" "$bb" train "$tmp/linear.onnx" --data "$tmp/reg.csv" --header --label -1 --loss mse \
  --steps 3 --max-total-bytes 2147483648 --quiet -o "$tmp/x.onnx"
fails_with "a --max-total-bytes that is not a count" "--max-total-bytes takes a whole number" \
  "$bb" train "$lenet" --data "$tmp/digits.csv" --label -1 --max-total-bytes lots -o "$tmp/x.onnx"

[ "$failures" -eq 0 ] && echo "bb train tests passed" || { echo "$failures bb train tests failed"; exit 1; }
