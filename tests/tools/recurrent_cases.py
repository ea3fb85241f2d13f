#!/usr/bin/python3
"""Random RNN, GRU and LSTM nodes over the whole attribute grid, as ONNX node tests.

Writes OUT_DIR/test_<kind>_<k>/ with model.onnx and test_data_set_0/input_N.pb (plus
input_N.bin and meta.json, which tests/tools/ort_node_tests.mjs reads to have onnxruntime
write the expected outputs). onnxruntime runs only layout 0: a layout-1 case also gets
ort_model.onnx, the same node with layout 0 between Transposes of its inputs and outputs,
which is what onnxruntime answers for it. Each case draws: the direction, layout 0 or 1 (opset 14),
sizes, whether B, sequence_lens (shorter than the sequence for some rows), initial_h,
initial_c and P are given, the activation functions with alphas and betas, clip,
input_forget / linear_before_reset, and which of Y, Y_h, Y_c the node outputs.

Usage: recurrent_cases.py OUT_DIR [--count N] [--seed S]
"""
import argparse
import json
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
N_ACTS = {"RNN": 1, "GRU": 2, "LSTM": 3}
# (name, takes alpha, takes beta, alpha range, beta range): bounded ranges keep the state finite
ACTS = [("Relu", 0, 0), ("Tanh", 0, 0), ("Sigmoid", 0, 0), ("Affine", 1, 1), ("LeakyRelu", 1, 0),
        ("ThresholdedRelu", 1, 0), ("ScaledTanh", 1, 1), ("HardSigmoid", 1, 1), ("Elu", 1, 0), ("Softsign", 0, 0),
        ("Softplus", 0, 0)]


def layout0_twin(node, graph, attrs):
    """The same function with layout 0 inside Transposes (onnxruntime runs only layout 0)."""
    ins = list(node.input)
    nodes = []
    for k, name in enumerate(ins):
        if name in ("X", "initial_h", "initial_c"):
            nodes.append(helper.make_node("Transpose", [name], [name + "_t"], perm=[1, 0, 2]))
            ins[k] = name + "_t"
    outs = [o + "_t" if o else "" for o in node.output]
    nodes.append(helper.make_node(node.op_type, ins, outs, **dict(attrs, layout=0)))
    for o in node.output:
        if o:
            nodes.append(helper.make_node("Transpose", [o + "_t"], [o], perm=[2, 0, 1, 3] if o == "Y" else [1, 0, 2]))
    twin = helper.make_graph(nodes, graph.name + "_layout0", graph.input, graph.output)
    model = helper.make_model(twin, opset_imports=[helper.make_opsetid("", 14)], producer_name="recurrent_cases")
    onnx.checker.check_model(model)
    return model


def case(rng, kind, index, out_dir):
    d = rng.choice(["forward", "reverse", "bidirectional"])
    dirs = 2 if d == "bidirectional" else 1
    layout = int(rng.integers(0, 2))
    seq, batch, inp, hid = int(rng.integers(1, 6)), int(rng.integers(1, 5)), int(rng.integers(1, 6)), int(rng.integers(1, 6))
    g = GATES[kind]
    attrs = {"hidden_size": hid, "direction": d, "layout": layout}
    if rng.random() < 0.5:  # non-default activations
        # GRU's and LSTM's gates (their first function) from the bounded ones: an unbounded
        # gate grows the state exponentially, and float rounding then decides the digits
        names = [ACTS[int(rng.integers(0, len(ACTS)))] for _ in range(N_ACTS[kind] * dirs)]
        bounded = [a for a in ACTS if a[0] in ("Tanh", "Sigmoid", "HardSigmoid", "Softsign", "ScaledTanh")]
        for k in range(0, len(names), N_ACTS[kind]):
            if kind != "RNN":
                names[k] = bounded[int(rng.integers(0, len(bounded)))]
        alphas = [float(rng.uniform(0.1, 0.9)) for _, ta, _ in names if ta]
        betas = [float(rng.uniform(-0.5, 0.5)) for _, _, tb in names if tb]
        # the functions past the end of a list take their defaults, except Affine,
        # ScaledTanh and ThresholdedRelu, whose defaults in onnxruntime are not ONNX's
        explicit = ("Affine", "ScaledTanh", "ThresholdedRelu")
        takers_a, takers_b = [n for n, ta, _ in names if ta], [n for n, _, tb in names if tb]
        cut_a, cut_b = int(rng.integers(0, len(alphas) + 1)), int(rng.integers(0, len(betas) + 1))
        if not any(n in explicit for n in takers_a[cut_a:]):
            alphas = alphas[:cut_a]
        if not any(n in explicit for n in takers_b[cut_b:]):
            betas = betas[:cut_b]
        attrs["activations"] = [n for n, _, _ in names]
        if alphas:
            attrs["activation_alpha"] = alphas
        if betas:
            attrs["activation_beta"] = betas
    if rng.random() < 0.3:
        attrs["clip"] = float(rng.uniform(0.2, 1.5))
    if kind == "LSTM" and rng.random() < 0.3:
        attrs["input_forget"] = 1
    if kind == "GRU":
        attrs["linear_before_reset"] = int(rng.integers(0, 2))
    x_shape = [batch, seq, inp] if layout else [seq, batch, inp]
    state_shape = [batch, dirs, hid] if layout else [dirs, batch, hid]
    feeds = [("X", rng.standard_normal(x_shape).astype(np.float32)),
             ("W", (rng.standard_normal([dirs, g * hid, inp]) * 0.6).astype(np.float32)),
             ("R", (rng.standard_normal([dirs, g * hid, hid]) * 0.6).astype(np.float32))]
    optional = [("B", lambda: (rng.standard_normal([dirs, 2 * g * hid]) * 0.5).astype(np.float32)),
                ("sequence_lens", lambda: rng.integers(1, seq + 1, size=[batch]).astype(np.int32)),
                ("initial_h", lambda: rng.standard_normal(state_shape).astype(np.float32))]
    if kind == "LSTM":
        optional += [("initial_c", lambda: rng.standard_normal(state_shape).astype(np.float32)),
                     ("P", lambda: (rng.standard_normal([dirs, 3 * hid]) * 0.5).astype(np.float32))]
    inputs = ["X", "W", "R"]
    for name, make in optional:
        if rng.random() < 0.6:
            feeds.append((name, make()))
            inputs.append(name)
        else:
            inputs.append("")
    while inputs[-1] == "":
        inputs.pop()
    out_names = ["Y", "Y_h", "Y_c"][: 3 if kind == "LSTM" else 2]
    outputs = [n if rng.random() < 0.75 else "" for n in out_names]
    if not any(outputs):
        outputs[0] = "Y"
    while outputs[-1] == "":
        outputs.pop()
    node = helper.make_node(kind, inputs, outputs, **attrs)
    y_shape = [batch, seq, dirs, hid] if layout else [seq, dirs, batch, hid]
    graph = helper.make_graph(
        [node], f"{kind}_{index}",
        [helper.make_tensor_value_info(n, TensorProto.INT32 if n == "sequence_lens" else TensorProto.FLOAT, v.shape)
         for n, v in feeds],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, y_shape if n == "Y" else state_shape) for n in outputs if n])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], producer_name="recurrent_cases")
    onnx.checker.check_model(model)
    case_dir = os.path.join(out_dir, f"test_{kind.lower()}_{index}")
    data_dir = os.path.join(case_dir, "test_data_set_0")
    os.makedirs(data_dir)
    onnx.save(model, os.path.join(case_dir, "model.onnx"))
    if layout:
        onnx.save(layout0_twin(node, graph, attrs), os.path.join(case_dir, "ort_model.onnx"))
    meta = {"inputs": [], "outputs": [n for n in outputs if n]}
    for k, (name, value) in enumerate(feeds):
        with open(os.path.join(data_dir, f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(value, name).SerializeToString())
        value.tofile(os.path.join(data_dir, f"input_{k}.bin"))
        meta["inputs"].append({"name": name, "type": "int32" if value.dtype == np.int32 else "float32",
                               "dims": list(value.shape), "file": f"input_{k}.bin"})
    with open(os.path.join(case_dir, "meta.json"), "w") as f:
        json.dump(meta, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--count", type=int, default=40, help="cases per operator")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    for kind in GATES:
        for k in range(args.count):
            case(rng, kind, k, args.out_dir)


if __name__ == "__main__":
    main()
