#!/usr/bin/python3
"""Models whose graphs the CPU session rewrites at load, as ONNX node tests.

Writes OUT_DIR/test_rewrite_<name>/ with model.onnx, test_data_set_0/input_N.pb (plus
input_N.bin and meta.json, which tests/tools/ort_node_tests.mjs reads to have onnxruntime
write the expected outputs) and expect.json: the least count of each rewrite the session
must report for the model (`bb run` prints them), so a rewrite that stops firing fails
the test as surely as one that changes the results.

The small graphs put each rewrite in the places it can go wrong: a BatchNormalization with
random statistics after a Conv with and without bias, grouped and depthwise (3×3 and 5×5,
strides 1 and 2, dilation; outputs wide and narrow), 1×1 convolutions and convolutions on
the NCHW plane, Relu / Clip (ReLU6) / Sigmoid / x·sigmoid(x)
after them, residual Adds on either operand, Adds whose operand broadcasts (run as
written inside the fused step), a Conv output read twice (not fusable), a
constant subgraph (Shape, Concat, Reshape of initializers), Identity nodes, Softmax, and a
run that feeds its own value for an initializer the fold assumed. With --torchvision the
torchvision resnet18, mobilenet_v2 and efficientnet_b0 (random weights and BatchNorm
statistics, batch 1, 3×SIZE×SIZE) are added.

Usage: rewrite_cases.py OUT_DIR [--torchvision] [--size S] [--seed S]
       rewrite_cases.py OUT_DIR --check BB   (runs `BB run` on each case: each count of
                                             expect.json reached, or exit 1)
"""
import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13


def write_case(out_dir, name, model, feeds, expect):
    onnx.checker.check_model(model)
    case_dir = os.path.join(out_dir, f"test_rewrite_{name}")
    data_dir = os.path.join(case_dir, "test_data_set_0")
    os.makedirs(data_dir, exist_ok=True)
    onnx.save(model, os.path.join(case_dir, "model.onnx"))
    meta = {"inputs": [], "outputs": [o.name for o in model.graph.output]}
    for k, (input_name, value) in enumerate(feeds):
        value = np.ascontiguousarray(value, dtype=np.float32)
        with open(os.path.join(data_dir, f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(value, input_name).SerializeToString())
        value.tofile(os.path.join(data_dir, f"input_{k}.bin"))
        meta["inputs"].append({"name": input_name, "type": "float32", "dims": list(value.shape),
                               "file": f"input_{k}.bin"})
    with open(os.path.join(case_dir, "meta.json"), "w") as f:
        json.dump(meta, f)
    with open(os.path.join(case_dir, "expect.json"), "w") as f:
        json.dump(expect, f)


class Graph:
    """A graph under construction: nodes, initializers, fresh names."""

    def __init__(self, rng):
        self.rng, self.nodes, self.inits, self.n = rng, [], [], 0

    def name(self, base):
        self.n += 1
        return f"{base}{self.n}"

    def init(self, base, value):
        name = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), name))
        return name

    def node(self, op, inputs, **attrs):
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def conv(self, x, c_in, c_out, k=3, stride=1, group=1, dilation=1, bias=True):
        w = self.init("w", self.rng.standard_normal((c_out, c_in // group, k, k)) / np.sqrt(c_in // group * k * k))
        ins = [x, w] + ([self.init("b", self.rng.standard_normal(c_out) * 0.1)] if bias else [])
        pad = dilation * (k - 1) // 2
        return self.node("Conv", ins, kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4, group=group,
                         dilations=[dilation, dilation])

    def bn(self, x, c):
        r = self.rng
        params = [r.uniform(0.5, 1.5, c), r.standard_normal(c) * 0.2, r.standard_normal(c) * 0.3, r.uniform(0.3, 2.0, c)]
        return self.node("BatchNormalization", [x] + [self.init(p, v) for p, v in zip("sbmv", params)], epsilon=1e-3)

    def clip6(self, x):
        return self.node("Clip", [x, self.init("lo", np.float32(0)), self.init("hi", np.float32(6))])

    def silu(self, x):
        return self.node("Mul", [x, self.node("Sigmoid", [x])])

    def model(self, inputs, outputs, shapes=None):
        vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs]
        g = helper.make_graph(self.nodes, "rewrites", vi, [], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="rewrite_cases")
        inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(m).graph.value_info}
        m.graph.output.extend(helper.make_tensor_value_info(n, TensorProto.FLOAT, shapes[n]) if shapes and n in shapes
                              else inferred[n] for n in outputs)
        return m


def small_cases(out_dir, rng):
    x_shape = [2, 8, 9, 11]  # odd sizes: the vector loops' tails
    x = rng.standard_normal(x_shape).astype(np.float32)

    # Conv (bias) → BN → Relu; Conv (no bias) → BN → Clip(0, 6); 1×1 Conv → BN → x·sigmoid(x)
    g = Graph(rng)
    a = g.node("Relu", [g.bn(g.conv("x", 8, 12), 12)])
    b = g.clip6(g.bn(g.conv(a, 12, 12, bias=False), 12))
    c = g.silu(g.bn(g.conv(b, 12, 16, k=1), 16))
    write_case(out_dir, "conv_bn_act", g.model([("x", x_shape)], [c]), [("x", x)],
               {"folded_batchnorms": 3, "fused_activations": 3})

    # depthwise: 3×3 stride 1, 3×3 stride 2, 5×5 stride 2, 3×3 dilation 2, each with BN and an activation
    g = Graph(rng)
    d = g.clip6(g.bn(g.conv("x", 8, 8, group=8), 8))
    d = g.node("Relu", [g.bn(g.conv(d, 8, 8, stride=2, group=8, bias=False), 8)])
    d = g.silu(g.bn(g.conv(d, 8, 8, k=5, stride=2, group=8), 8))
    d2 = g.node("Sigmoid", [g.bn(g.conv("x", 8, 8, group=8, dilation=2), 8)])
    out = g.node("Softmax", [g.node("Flatten", [d], axis=1)], axis=1)
    write_case(out_dir, "depthwise", g.model([("x", x_shape)], [out, d2]), [("x", x)],
               {"folded_batchnorms": 4, "fused_activations": 4})

    # one image of a larger map: 3×3 and 1×1 convolutions computed on the NCHW plane with
    # x·sigmoid(x) and a residual Add fused, the depthwise kernel's stride-2 row path
    # (outputs 8 columns wide and more) and its narrow four-channel path
    p_shape = [1, 8, 24, 21]
    xp = rng.standard_normal(p_shape).astype(np.float32)
    g = Graph(rng)
    e = g.silu(g.bn(g.conv("x", 8, 16), 16))
    d = g.clip6(g.bn(g.conv(e, 16, 16, stride=2, group=16), 16))
    r = g.node("Add", [g.bn(g.conv(d, 16, 16, k=1), 16), d])
    n = g.silu(g.bn(g.conv(r, 16, 16, k=5, stride=2, group=16), 16))
    write_case(out_dir, "planes", g.model([("x", p_shape)], [r, n]), [("x", xp)],
               {"folded_batchnorms": 4, "fused_activations": 3, "fused_adds": 1})

    # grouped (not depthwise) Conv; residual Adds fused on the first and on the second operand;
    # a Conv output read twice stays as written
    g = Graph(rng)
    h = g.node("Relu", [g.bn(g.conv("x", 8, 8, group=2), 8)])
    r1 = g.node("Relu", [g.node("Add", [g.bn(g.conv(h, 8, 8), 8), "x"])])
    r2 = g.node("Add", [r1, g.bn(g.conv(r1, 8, 8, k=1), 8)])
    twice = g.conv(r2, 8, 8)
    out = g.node("Add", [g.node("Relu", [twice]), g.node("Sigmoid", [twice])])
    write_case(out_dir, "residual", g.model([("x", x_shape)], [out, r2]), [("x", x)],
               {"folded_batchnorms": 3, "fused_adds": 2, "fused_activations": 2})

    # Adds whose other operand broadcasts (a per-channel bias, a row bias after MatMul): the
    # fused step falls back to running the Add and the activation as written
    g = Graph(rng)
    h = g.node("Relu", [g.node("Add", [g.conv("x", 8, 6, bias=False), g.init("c", rng.standard_normal((1, 6, 1, 1)))])])
    flat = g.node("Flatten", [h], axis=1)
    mm = g.node("MatMul", [flat, g.init("w", rng.standard_normal((6 * 9 * 11, 7)) * 0.05)])
    out = g.node("Sigmoid", [g.node("Add", [g.init("r", rng.standard_normal(7)), mm])])
    write_case(out_dir, "broadcast_add", g.model([("x", x_shape)], [out]), [("x", x)], {"fused_adds": 2})

    # a batch of single-position images the convolution takes in chunks of 512, the last
    # one shorter (the GEMM's scratch must fit both)
    g = Graph(rng)
    out = g.conv("x", 1, 320, k=2)
    tail = rng.standard_normal((960, 1, 2, 2)).astype(np.float32)
    write_case(out_dir, "conv_batch_tail", g.model([("x", [960, 1, 2, 2])], [out]), [("x", tail)], {})

    # constant subgraph: a shape computed from initializers, weights scaled by a constant,
    # then Gemm → Relu and Softmax; Identity nodes in the path
    g = Graph(rng)
    flat = g.node("Identity", [g.node("Flatten", ["x"], axis=1)])
    w = g.node("Mul", [g.init("w", rng.standard_normal((8 * 9 * 11, 10)) * 0.05), g.init("k", np.float32(0.5))])
    shape = g.node("Concat", [g.node("Shape", [g.init("s", np.zeros((2, 5)))]),
                              g.node("Shape", [g.init("t", np.zeros(2))])], axis=0)  # [2, 5, 2]
    logits = g.node("Relu", [g.node("MatMul", [flat, w])])
    out = g.node("Softmax", [g.node("Reshape", [logits, shape])], axis=-1)
    write_case(out_dir, "constant_subgraph", g.model([("x", x_shape)], [out], {out: [2, 5, 2]}), [("x", x)],
               {"folded_constants": 4, "fused_activations": 1, "elided_identities": 1})

    # batch bands: the small CNN of the thread benches (Conv 3×3, Relu, MaxPool 2, twice, then
    # Flatten and Gemm) at batch 64 runs as one band of 8 chunks of 8 images; with a Reshape
    # that writes the batch into its shape and a Softmax over the batch it is planned but
    # declines on its first run (the steps run whole); at batch 40 a band of 5 chunks of 8
    # images with a BatchNormalization (folded), a Sigmoid and an AveragePool in it
    def small_cnn(g, batch, literal_reshape=False, softmax_axis=None, bn=False):
        h = g.conv("x", 1, 16)
        if bn:
            h = g.bn(h, 16)
        h = g.node("MaxPool", [g.node("Relu", [h])], kernel_shape=[2, 2], strides=[2, 2])
        h = g.conv(h, 16, 32)
        h = g.node("Relu", [h]) if not bn else g.node("Sigmoid", [h])
        h = g.node("MaxPool" if not bn else "AveragePool", [h], kernel_shape=[2, 2], strides=[2, 2])
        if literal_reshape:
            g.inits.append(numpy_helper.from_array(np.array([batch, -1], np.int64), "shape"))
            h = g.node("Reshape", [h, "shape"])
        else:
            h = g.node("Flatten", [h], axis=1)
        y = g.node("Gemm", [h, g.init("w", rng.standard_normal((10, 32 * 4 * 4)) * 0.05),
                            g.init("b", rng.standard_normal(10) * 0.1)], transB=1)
        if softmax_axis is not None:
            y = g.node("Softmax", [y], axis=softmax_axis)
        return y

    for name, batch, kwargs, expect in [("batch_band", 64, {}, {"batch_bands": 1}),
                                        ("batch_band_declined", 64, {"literal_reshape": True, "softmax_axis": 0},
                                         {"batch_bands": 1}),
                                        ("batch_band_bn", 40, {"bn": True}, {"batch_bands": 1, "folded_batchnorms": 1})]:
        g = Graph(rng)
        y = small_cnn(g, batch, **kwargs)
        xb = rng.standard_normal((batch, 1, 16, 16)).astype(np.float32)
        write_case(out_dir, name, g.model([("x", [batch, 1, 16, 16])], [y]), [("x", xb)], expect)

    # a run that feeds its own weights, mean and variance for initializers the fold assumed:
    # the session must run the graph as written (the general plan), not the folded weights.
    # onnxruntime-node answers such a run with the initializers' values, so PyTorch does.
    g = Graph(rng)
    y = g.node("Relu", [g.bn(g.conv("x", 8, 4), 4)])
    m = g.model([("x", x_shape)], [y])
    params, fed = {}, {}
    for t in m.graph.initializer:
        params[t.name] = numpy_helper.to_array(t)
        if t.name[0] in "wmv":
            fed[t.name] = (params[t.name] * np.float32(1.7) + np.float32(0.25)).astype(np.float32)
            m.graph.input.append(helper.make_tensor_value_info(t.name, TensorProto.FLOAT, list(fed[t.name].shape)))
    params.update(fed)
    write_case(out_dir, "initializer_fed", m, [("x", x)] + sorted(fed.items()), {"folded_batchnorms": 1})
    write_torch_answer(out_dir, "initializer_fed", y, conv_bn_relu_torch(m, x, params))


def conv_bn_relu_torch(model, x, params):
    """Conv (3×3, pad 1) → BatchNormalization → Relu, model's only nodes, in PyTorch."""
    import torch
    import torch.nn.functional as F
    conv, bn = model.graph.node[0], model.graph.node[1]
    t = {name: torch.from_numpy(np.array(value)) for name, value in params.items()}
    y = F.conv2d(torch.from_numpy(x), t[conv.input[1]], t[conv.input[2]], padding=1)
    eps = helper.get_attribute_value(bn.attribute[0])
    y = F.batch_norm(y, t[bn.input[3]], t[bn.input[4]], t[bn.input[1]], t[bn.input[2]], False, 0.0, eps)
    return torch.relu(y).numpy()


def write_torch_answer(out_dir, name, output_name, value):
    """The expected output from PyTorch: no meta.json, so onnxruntime is not asked."""
    case_dir = os.path.join(out_dir, f"test_rewrite_{name}")
    os.remove(os.path.join(case_dir, "meta.json"))
    with open(os.path.join(case_dir, "test_data_set_0", "output_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(np.asarray(value, dtype=np.float32), output_name).SerializeToString())


def randomize_batchnorm(model, rng):
    import torch
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                c = mod.num_features
                mod.running_mean.copy_(torch.from_numpy(rng.standard_normal(c).astype(np.float32) * 0.1))
                mod.running_var.copy_(torch.from_numpy(rng.uniform(0.5, 1.5, c).astype(np.float32)))
                mod.weight.copy_(torch.from_numpy(rng.uniform(0.5, 1.5, c).astype(np.float32)))
                mod.bias.copy_(torch.from_numpy(rng.standard_normal(c).astype(np.float32) * 0.1))


def export_torchvision(name, path, size, rng, opset=OPSET):
    """torchvision's `name` with random weights and BatchNorm statistics, in inference mode,
    exported with its BatchNormalization nodes kept (PRESERVE skips the exporter's own fold)."""
    import torch
    import torchvision
    torch.manual_seed(int(rng.integers(1 << 30)))
    model = getattr(torchvision.models, name)(num_classes=100)
    randomize_batchnorm(model, rng)
    model.eval()
    x = torch.from_numpy(rng.standard_normal((1, 3, size, size)).astype(np.float32))
    torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["logits"], opset_version=opset,
                      training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)
    return x.numpy()


def structural_expectations(model):
    """What the graph offers: every BatchNormalization follows a Conv read only by it; every
    Relu, Clip and x·sigmoid(x) follows a Conv (or a residual Add after one)."""
    ops = [n.op_type for n in model.graph.node]
    sigmoid_mul = sum(1 for n in model.graph.node if n.op_type == "Mul" and
                      any(p.op_type == "Sigmoid" and p.output[0] in n.input and p.input[0] in n.input
                          for p in model.graph.node))
    return {"folded_batchnorms": ops.count("BatchNormalization"),
            "fused_activations": ops.count("Relu") + ops.count("Clip") + sigmoid_mul}


TORCHVISION = ["resnet18", "mobilenet_v2", "efficientnet_b0"]


def check_counts(out_dir, bb):
    """Runs every case with `bb run` and compares the rewrite counts it prints with expect.json."""
    failures = 0
    for case in sorted(os.listdir(out_dir)):
        case_dir = os.path.join(out_dir, case)
        if not os.path.exists(os.path.join(case_dir, "expect.json")):
            continue
        with open(os.path.join(case_dir, "expect.json")) as f:
            expect = json.load(f)
        data_dir = os.path.join(case_dir, "test_data_set_0")
        args = [bb, "run", os.path.join(case_dir, "model.onnx")]
        for name in sorted(n for n in os.listdir(data_dir) if n.startswith("input_") and n.endswith(".pb")):
            args += ["--input", os.path.join(data_dir, name)]
        out = subprocess.run(args, capture_output=True, text=True)
        line = next((l for l in out.stdout.splitlines() if l.startswith("rewrites:")), None)
        if out.returncode or not line:
            print(f"FAIL {case}: bb run exited {out.returncode}: {out.stderr.strip()}")
            failures += 1
            continue
        got = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}
        short = {k: (got.get(k, 0), v) for k, v in expect.items() if got.get(k, 0) < v}
        print(f"{'FAIL' if short else 'ok  '} {case}: {line}" + (f" (wanted at least {short})" if short else ""))
        failures += bool(short)
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--torchvision", action="store_true")
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--check", metavar="BB")
    args = ap.parse_args()
    if args.check:
        sys.exit(1 if check_counts(args.out_dir, args.check) else 0)
    rng = np.random.default_rng(args.seed)
    os.makedirs(args.out_dir, exist_ok=True)
    small_cases(args.out_dir, rng)
    if args.torchvision:
        for name in TORCHVISION:
            tmp = os.path.join(args.out_dir, f"{name}.tmp.onnx")
            x = export_torchvision(name, tmp, args.size, rng)
            model = onnx.load(tmp)
            os.remove(tmp)
            write_case(args.out_dir, name, model, [("x", x)], structural_expectations(model))


if __name__ == "__main__":
    main()
