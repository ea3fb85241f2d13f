#!/usr/bin/env python3
"""Writes a small CNN as a standard ONNX model (made with onnx.helper, like a user's
exported model), an input tensor, and the expected output computed independently with
numpy. Used by test_cli.sh to check that `bb run` executes a model a user brings.

usage: make_cnn.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def conv2d(x, w, b, pad):
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    y = np.zeros((n, m, oh, ow), dtype=np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i:i + kh, j:j + kw].astype(np.float64)
            y[:, :, i, j] = np.tensordot(patch, w.astype(np.float64), axes=([1, 2, 3], [1, 2, 3]))
    return y + b.reshape(1, m, 1, 1)


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 1, 12, 12)).astype(np.float32)
    w1 = (rng.standard_normal((6, 1, 3, 3)) * 0.5).astype(np.float32)
    b1 = rng.standard_normal(6).astype(np.float32)
    w2 = (rng.standard_normal((6 * 6 * 6, 10)) * 0.1).astype(np.float32)
    b2 = rng.standard_normal(10).astype(np.float32)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu"),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
        helper.make_node("Flatten", ["p1"], ["f1"], axis=1, name="flatten"),
        helper.make_node("Gemm", ["f1", "w2", "b2"], ["logits"], name="dense"),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=1, name="softmax"),
    ]
    graph = helper.make_graph(
        nodes, "small_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 12, 12])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 10])],
        [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))])
    model = helper.make_model(graph, producer_name="test_cli", opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, "cnn.onnx"))
    with open(os.path.join(out, "x.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, "x").SerializeToString())
    with open(os.path.join(out, "x_int.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x.astype(np.int64), "x").SerializeToString())

    c1 = np.maximum(conv2d(x, w1, b1, 1), 0)
    p1 = c1.reshape(2, 6, 6, 2, 6, 2).max(axis=(3, 5))
    logits = p1.reshape(2, -1) @ w2.astype(np.float64) + b2
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    with open(os.path.join(out, "expected.pb"), "wb") as f:
        f.write(numpy_helper.from_array(probs, "probs").SerializeToString())


if __name__ == "__main__":
    main()
