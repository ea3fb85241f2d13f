"""Checks the model federated_cnn exported: onnx.checker (full check) accepts it, every node
is an ai.onnx operator (no training-only domain), its inputs, outputs and initializer names
are those of the model the federation trained, and onnxruntime-node (tests/tools/ort_run.mjs)
scores it on the held-out images at the accuracy the federation reported.

usage: check_cnn_export.py MODEL.onnx TEST.csv REPORTED_ACCURACY WORKDIR"""
import os
import subprocess
import sys

import numpy as np
import onnx

model_path, test_path, reported, work = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
model = onnx.load(model_path)
onnx.checker.check_model(model, full_check=True)
domains = {n.domain for n in model.graph.node}
assert domains <= {"", "ai.onnx"}, domains
source = onnx.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "models", "digits_cnn.onnx"))
assert [i.name for i in model.graph.input] == [i.name for i in source.graph.input]
assert [o.name for o in model.graph.output] == [o.name for o in source.graph.output]
assert sorted(t.name for t in model.graph.initializer) == sorted(t.name for t in source.graph.initializer)
print("onnx.checker: ok; %d nodes, all ai.onnx; inputs, outputs and initializer names as exported by PyTorch" % len(model.graph.node))

data = np.loadtxt(test_path, delimiter=",", dtype=np.float32)
x, y = data[:, :64], data[:, 64].astype(np.int64)
x.tofile(os.path.join(work, "x.f32"))
ort_run = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ort_run.mjs")
subprocess.run(["node", ort_run, model_path, model.graph.input[0].name, os.path.join(work, "x.f32"), str(len(x)), "1,8,8",
                os.path.join(work, "logits.f32")], check=True)
logits = np.fromfile(os.path.join(work, "logits.f32"), dtype="<f4").reshape(len(x), 10)
accuracy = float((logits.argmax(axis=1) == y).mean())
print("onnxruntime: accuracy %.4f on %d held-out images; the federation reported %.3f" % (accuracy, len(x), reported))
assert abs(accuracy - reported) <= 0.0005 + 1.0 / len(x), (accuracy, reported)
