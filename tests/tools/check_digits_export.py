"""Checks the model federated_digits --export wrote: onnx.checker accepts it, and both
`bb run` and onnxruntime (onnxruntime-node, tests/tools/ort_run.mjs) on scikit-learn's
digits give the probabilities a numpy forward pass of the same initializers gives, and
a sensible accuracy.

usage: check_digits_export.py MODEL.onnx BB_BINARY WORKDIR"""
import gzip
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

model_path, bb, work = sys.argv[1], sys.argv[2], sys.argv[3]
model = onnx.load(model_path)
onnx.checker.check_model(model, full_check=True)
print("onnx.checker: ok (input %s, output %s)" % (model.graph.input[0].name, model.graph.output[0].name))

data = np.loadtxt(gzip.open("/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"), delimiter=",")
x, y = data[:, :64].astype(np.float32), data[:, 64].astype(np.int64)
onnx.save_tensor(numpy_helper.from_array(x, "x"), os.path.join(work, "pixels.pb"))
subprocess.run([bb, "run", model_path, "--input", "x=" + os.path.join(work, "pixels.pb"), "--output-dir",
                os.path.join(work, "run")], check=True, stdout=subprocess.DEVNULL)
got = numpy_helper.to_array(onnx.load_tensor(os.path.join(work, "run", "probabilities.pb")))

init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
h = x * init["input_scale"]
layer = 0
while "W%d" % layer in init:
    h = h @ init["W%d" % layer].T + init["b%d" % layer]
    if "W%d" % (layer + 1) in init:
        h = np.maximum(h, 0)
    layer += 1
e = np.exp(h - h.max(axis=1, keepdims=True))
want = e / e.sum(axis=1, keepdims=True)
diff = np.abs(got - want).max()
acc = float((got.argmax(axis=1) == y).mean())
print("bb run vs numpy: max |difference| %.2e; accuracy on all 1797 digits %.3f" % (diff, acc))
assert got.shape == (len(x), 10) and diff < 1e-4 and acc > 0.85

x.tofile(os.path.join(work, "pixels.f32"))
ort_run = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ort_run.mjs")
subprocess.run(["node", ort_run, model_path, model.graph.input[0].name, os.path.join(work, "pixels.f32"),
                str(len(x)), "64", os.path.join(work, "ort.f32")], check=True)
ort = np.fromfile(os.path.join(work, "ort.f32"), dtype="<f4").reshape(len(x), 10)
ort_diff = np.abs(ort - want).max()
ort_acc = float((ort.argmax(axis=1) == y).mean())
print("onnxruntime vs numpy: max |difference| %.2e; accuracy %.3f; same predictions as bb run: %s"
      % (ort_diff, ort_acc, bool((ort.argmax(axis=1) == got.argmax(axis=1)).all())))
assert ort_diff < 1e-4 and (ort.argmax(axis=1) == got.argmax(axis=1)).all()
