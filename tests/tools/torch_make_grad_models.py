#!/usr/bin/python3
"""PyTorch as the oracle of the gradient builder (tests/grad/test_grad_torch.c).

Builds small PyTorch modules (one per operator the gradient builder covers, and whole
models: an MLP, a LeNet-style CNN, a transformer block, a regression and a binary
classifier; torch.chunk, nn.TransformerEncoderLayer / nn.TransformerEncoder, torchvision's
ShuffleNetV2, buffers next to parameters), exports each with torch.onnx.export (opset 17, no constant folding, training
mode), and writes next to it the reference PyTorch computes for fixed inputs:

  CASE.onnx      the exported model (its initializers are the initial parameters)
  CASE.ref.onnx  a ModelProto whose graph holds no nodes, only initializers:
                   input:NAME     each graph input fed to the model
                   loss           the loss
                   grad:PARAM     d loss / d PARAM for every trained parameter
                   OPT:PARAM      PARAM after 10 steps of optimizer OPT (whole models)
                   OPT:losses     the loss before each of those steps
                 and metadata: loss (output | sce | mse | bce), output (the graph output
                 the loss is or reads), target (the label input), params (the trained
                 parameters, comma-separated), optimizers (comma-separated) and opt:OPT
                 (its hyper-parameters as key=value pairs).

A few operator forms torch never exports (Gemm's transA, alpha and beta) are written with
onnx.helper; PyTorch then computes the same function from the same initial values.

Dropout: ONNX runtimes draw masks with their own generators, so the reference applies the
mask of bytesandbrains' seeded Dropout (ai.bytesandbrains.grad, documented in
docs/GRAD.md), reproduced here bit for bit: the comparison checks the gradient, the
inverted scaling and the optimizer against PyTorch's autograd with the same mask.

BatchNormalization: ONNX updates the running variance with the batch's population
variance, PyTorch with the unbiased one; the reference replays ONNX's rule on PyTorch's
own batch statistics (running means are PyTorch's).

Cuts (tests/grad/test_grad_cut_torch.c): parts of the digits examples' CNN and MLP
(examples/models) and of the mlp, lenet and transformer models above, cut at named values
as a split model's peers hold them. For each part (listed in cuts.txt):

  cut_CASE.ref.onnx  initializers input:NAME (the part's inputs, computed by PyTorch from
                     the whole model's input), upstream:NAME (the gradient that comes in for
                     each of its outputs, when the loss is not in the part), loss (when it
                     is), grad:PARAM and grad_input:NAME (torch.autograd.grad of the part's
                     outputs with those grad_outputs, or of the loss); metadata model (the
                     whole model's file, from the repository's root), cut_inputs and
                     cut_outputs (value names, comma-separated; empty: the model's own),
                     loss (upstream | sce), target, params, input_grads.

Usage: torch_make_grad_models.py [OUT_DIR]   (default: tests/data/grad next to this file)
       torch_make_grad_models.py --check DIR (regenerates into a temporary directory and
                                              fails unless every file equals DIR's)
"""
import filecmp
import io
import os
import sys
import tempfile

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import helper, numpy_helper, TensorProto

torch.set_num_threads(1)
OPSET = 17
STEPS = 10

# ---- bytesandbrains' seeded Dropout mask -------------------------------------------------

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def mix(z):
    z = np.asarray(z, dtype=np.uint64)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def keep_mask(seed, stream, shape, ratio):
    key = mix(np.array([(seed + GOLDEN * (stream + 1)) & M64], dtype=np.uint64))[0]
    i = np.arange(1, int(np.prod(shape)) + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        bits = mix(key + np.uint64(GOLDEN) * i) >> np.uint64(40)
    return (bits.astype(np.float64) >= ratio * 16777216.0).reshape(shape)


class SeededDropout(nn.Module):
    """nn.Dropout when exporting; the seeded mask of the current step otherwise."""

    exporting = False
    seed = 0

    def __init__(self, p, stream):
        super().__init__()
        self.p, self.stream = p, stream

    def forward(self, x):
        if SeededDropout.exporting:
            return F.dropout(x, self.p, True)
        mask = torch.from_numpy(keep_mask(SeededDropout.seed, self.stream, tuple(x.shape), self.p)).to(x.dtype)
        return x * mask * torch.tensor(1.0 / (1.0 - self.p), dtype=x.dtype)


# ---- cases -------------------------------------------------------------------------------

def randn(*shape, scale=1.0):
    if len(shape) == 1 and isinstance(shape[0], tuple):
        shape = shape[0]
    return torch.randn(tuple(shape)) * scale


class Case:
    """A module, its inputs, and how its loss is formed."""

    def __init__(self, name, module, inputs, loss="output", target=None, optimizers=(), onnx_model=None, fn=None,
                 dynamic_batch=False, buffers=False, precise=False):
        self.name, self.module, self.inputs, self.loss = name, module, inputs, loss
        self.buffers = buffers  # name the module's buffers in the model's metadata (ai.bytesandbrains.buffers)
        self.precise = precise  # the reference in float64, gradients compared above a floor (meta grad_floor)
        self.dynamic_batch = dynamic_batch  # export dim 0 of every input as the symbol "batch"
        self.target = target  # (name, tensor) for built-in losses
        self.optimizers = optimizers
        self.onnx_model = onnx_model  # a helper-built model, with fn(params, inputs) -> loss
        self.fn = fn


class Weighted(nn.Module):
    """sum(f(params, inputs) * R): a scalar whose gradient reaches every output element."""

    def __init__(self, f, params, out_shape, seed):
        super().__init__()
        self.f = f
        self.p = nn.ParameterDict({k: nn.Parameter(v) for k, v in params.items()})
        g = torch.Generator().manual_seed(seed)
        self.r = torch.randn(tuple(out_shape), generator=g)

    def forward(self, *xs):
        return (self.f(self.p, *xs) * self.r).sum()


def op_case(name, f, params, inputs=(), seed=0):
    """An operator test: parameters in, sum(f(...) * R) out."""
    with torch.no_grad():
        shape = f({k: v for k, v in params.items()}, *[x for _, x in inputs]).shape
    return Case(name, Weighted(f, params, shape, seed), list(inputs))


OPTIMIZERS = {
    "sgd": dict(kind="sgd", lr=0.1),
    "sgd_clip": dict(kind="sgd", lr=0.1, weight_decay=0.01, max_grad_norm=0.5),
    "momentum": dict(kind="momentum", lr=0.05, momentum=0.9, weight_decay=0.001),
    "nesterov": dict(kind="momentum", lr=0.05, momentum=0.9, nesterov=1),
    "adam": dict(kind="adam", lr=0.01, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01),
    "adamw": dict(kind="adamw", lr=0.01, beta1=0.85, beta2=0.99, eps=1e-6, weight_decay=0.05, max_grad_norm=1.0),
}


def torch_optimizer(cfg, params):
    wd = cfg.get("weight_decay", 0.0)
    if cfg["kind"] == "sgd":
        return torch.optim.SGD(params, lr=cfg["lr"], weight_decay=wd)
    if cfg["kind"] == "momentum":
        return torch.optim.SGD(params, lr=cfg["lr"], momentum=cfg["momentum"], nesterov=bool(cfg.get("nesterov", 0)),
                               weight_decay=wd)
    betas = (cfg["beta1"], cfg["beta2"])
    cls = torch.optim.Adam if cfg["kind"] == "adam" else torch.optim.AdamW
    return cls(params, lr=cfg["lr"], betas=betas, eps=cfg["eps"], weight_decay=wd)


def lenet():
    class LeNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 4, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(4)
            self.conv2 = nn.Conv2d(4, 6, 3, padding=1)
            self.drop = SeededDropout(0.5, 0)
            self.fc = nn.Linear(6 * 2 * 2, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            return self.fc(self.drop(torch.flatten(x, 1)))

    return LeNet()


def transformer():
    class Block(nn.Module):
        def __init__(self, vocab=11, d=8, t=5, heads=2, classes=3):
            super().__init__()
            self.h, self.dh = heads, d // heads
            self.emb = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(torch.randn(t, d) * 0.1)
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d)
            self.up = nn.Linear(d, 2 * d)
            self.down = nn.Linear(2 * d, d)
            self.head = nn.Linear(d, classes)

        def forward(self, tokens):
            b, t = tokens.shape
            x = self.emb(tokens) + self.pos
            q, k, v = self.qkv(self.ln1(x)).split(x.shape[-1], dim=-1)
            q = q.reshape(b, t, self.h, self.dh).transpose(1, 2)
            k = k.reshape(b, t, self.h, self.dh).transpose(1, 2)
            v = v.reshape(b, t, self.h, self.dh).transpose(1, 2)
            att = torch.softmax(q @ k.transpose(-2, -1) / (self.dh ** 0.5), dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, -1)
            x = x + self.proj(y)
            x = x + self.down(F.gelu(self.up(self.ln2(x))))
            return self.head(x.mean(dim=1))

    return Block()


def model_cases():
    cases = []
    torch.manual_seed(1)
    mlp = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 8), nn.Tanh(), nn.Linear(8, 4))
    cases.append(Case("mlp", mlp, [("x", randn(5, 6))], loss="sce", target=("labels", torch.tensor([0, 3, 1, 2, 3])),
                      optimizers=list(OPTIMIZERS)))
    torch.manual_seed(2)
    cases.append(Case("lenet", lenet(), [("x", randn(4, 1, 8, 8))], loss="sce", target=("labels", torch.tensor([1, 7, 3, 9])),
                      optimizers=list(OPTIMIZERS)))
    torch.manual_seed(3)
    cases.append(Case("transformer", transformer(), [("tokens", torch.randint(0, 11, (2, 5)))], loss="sce",
                      target=("labels", torch.tensor([2, 0])), optimizers=list(OPTIMIZERS)))
    # the same models with the batch dim left symbolic
    torch.manual_seed(2)
    cases.append(Case("lenet_dynamic", lenet(), [("x", randn(3, 1, 8, 8))], loss="sce", target=("labels", torch.tensor([4, 0, 2])),
                      optimizers=["adam"], dynamic_batch=True))
    torch.manual_seed(3)
    cases.append(Case("transformer_dynamic", transformer(), [("tokens", torch.randint(0, 11, (3, 5)))], loss="sce",
                      target=("labels", torch.tensor([1, 2, 0])), optimizers=["momentum"], dynamic_batch=True))
    torch.manual_seed(4)
    reg = nn.Sequential(nn.Linear(3, 8), nn.Sigmoid(), nn.Linear(8, 2))
    cases.append(Case("regression", reg, [("x", randn(6, 3))], loss="mse", target=("y", randn(6, 2)),
                      optimizers=["sgd", "adam"]))
    torch.manual_seed(5)
    bin_ = nn.Sequential(nn.Linear(4, 6), nn.LeakyReLU(0.1), nn.Linear(6, 1))
    cases.append(Case("binary", bin_, [("x", randn(7, 4))], loss="bce", target=("y", torch.randint(0, 2, (7, 1)).float()),
                      optimizers=["sgd", "adamw"]))
    return cases


def op_cases():
    torch.manual_seed(10)
    c = []
    add = c.append
    # linear algebra
    add(op_case("matmul_2d", lambda p: p["a"] @ p["b"], {"a": randn(3, 4), "b": randn(4, 5)}))
    add(op_case("matmul_batched", lambda p: p["a"] @ p["b"], {"a": randn(2, 3, 4), "b": randn(4, 5)}))
    add(op_case("matmul_broadcast", lambda p: p["a"] @ p["b"], {"a": randn(2, 1, 3, 4), "b": randn(3, 4, 2)}))
    add(op_case("matmul_vec", lambda p: (p["v"] @ p["b"]) + (p["b"] @ p["w"]).sum(), {"v": randn(4), "b": randn(4, 3), "w": randn(3)}))
    add(op_case("linear", lambda p, x: F.linear(x, p["w"], p["b"]), {"w": randn(3, 4), "b": randn(3)}, [("x", randn(5, 4))]))
    # elementwise with broadcasting
    add(op_case("add_sub_bcast", lambda p: (p["a"] + p["b"]) - p["c"], {"a": randn(2, 3, 4), "b": randn(4), "c": randn(3, 1)}))
    add(op_case("mul_div_bcast", lambda p: p["a"] * p["b"] / (p["c"] ** 2 + 1), {"a": randn(3, 4), "b": randn(1, 4), "c": randn(3, 1)}))
    add(op_case("neg_scalar", lambda p: -p["a"] * p["s"], {"a": randn(3, 2), "s": randn(())}))
    add(op_case("activations", lambda p: torch.relu(p["a"]) + F.leaky_relu(p["a"], 0.2) + torch.sigmoid(p["a"]) + torch.tanh(p["a"]),
                {"a": randn(4, 5)}))
    add(op_case("erf_exp_log", lambda p: torch.erf(p["a"]) + torch.exp(p["a"] * 0.5) + torch.log(p["a"] * p["a"] + 1),
                {"a": randn(3, 4)}))
    add(op_case("sqrt_pow", lambda p: torch.sqrt(p["a"] * p["a"] + 0.5) + p["a"] ** 3 + torch.pow(p["a"] * p["a"] + 1, p["e"]),
                {"a": randn(3, 4), "e": randn(4)}))
    add(op_case("clip_where", lambda p: torch.clamp(p["a"], -0.5, 0.7) + torch.where(p["a"] > 0, p["a"] * 2, p["b"]),
                {"a": randn(3, 4), "b": randn(4)}))
    add(op_case("cast", lambda p: (p["a"].double() * 2).float(), {"a": randn(3, 2)}))
    add(op_case("gelu", lambda p: F.gelu(p["a"]), {"a": randn(4, 3)}))
    # softmax and losses
    add(op_case("softmax", lambda p: torch.softmax(p["a"], dim=-1) + torch.softmax(p["a"], dim=1), {"a": randn(2, 3, 4)}))
    add(op_case("log_softmax", lambda p: torch.log_softmax(p["a"], dim=1), {"a": randn(3, 5)}))
    add(op_case("cross_entropy", lambda p, y: F.cross_entropy(p["a"], y), {"a": randn(4, 5)}, [("y", torch.tensor([0, 4, 2, 2]))]))
    add(op_case("cross_entropy_weighted",
                lambda p, y: F.cross_entropy(p["a"], y, weight=torch.tensor([0.5, 2.0, 1.25]), ignore_index=1),
                {"a": randn(5, 3)}, [("y", torch.tensor([0, 1, 2, 2, 0]))]))
    add(op_case("cross_entropy_spatial", lambda p, y: F.cross_entropy(p["a"], y, reduction="sum"), {"a": randn(2, 3, 2, 2)},
                [("y", torch.randint(0, 3, (2, 2, 2)))]))
    add(op_case("nll", lambda p, y: F.nll_loss(F.log_softmax(p["a"], 1), y, reduction="none"), {"a": randn(4, 3)},
                [("y", torch.tensor([2, 0, 1, 1]))]))
    # convolutions and pooling
    add(op_case("conv", lambda p, x: F.conv2d(x, p["w"], p["b"], stride=2, padding=1), {"w": randn(4, 2, 3, 3), "b": randn(4)},
                [("x", randn(2, 2, 7, 6))]))
    add(op_case("conv_dilated_grouped", lambda p: F.conv2d(p["x"], p["w"], stride=(1, 2), padding=(2, 1), dilation=2, groups=2),
                {"x": randn(2, 4, 7, 7), "w": randn(6, 2, 3, 2)}))
    add(op_case("conv_transpose", lambda p: F.conv_transpose2d(p["x"], p["w"], p["b"], stride=2, padding=1, output_padding=1),
                {"x": randn(2, 3, 3, 4), "w": randn(3, 2, 3, 3), "b": randn(2)}))
    add(op_case("conv_transpose_grouped", lambda p: F.conv_transpose2d(p["x"], p["w"], stride=(2, 1), padding=(0, 1), groups=2, dilation=(1, 2)),
                {"x": randn(1, 4, 3, 3), "w": randn(4, 3, 2, 3)}))
    add(op_case("maxpool", lambda p: F.max_pool2d(p["x"], 3, stride=2, padding=1), {"x": randn(2, 3, 7, 6)}))
    add(op_case("avgpool", lambda p: F.avg_pool2d(p["x"], 3, stride=2, padding=1) + F.avg_pool2d(p["x"], 3, stride=2, padding=1, count_include_pad=False),
                {"x": randn(2, 2, 6, 7)}))
    add(op_case("global_avgpool", lambda p: F.adaptive_avg_pool2d(p["x"], 1), {"x": randn(2, 3, 4, 5)}))
    add(op_case("batchnorm", lambda p: F.batch_norm(p["x"], torch.zeros(3), torch.ones(3), p["g"], p["b"], training=True),
                {"x": randn(4, 3, 2, 3), "g": randn(3), "b": randn(3)}))
    add(op_case("layernorm", lambda p: F.layer_norm(p["x"], (3, 4), p["g"], p["b"]), {"x": randn(2, 3, 4), "g": randn(3, 4), "b": randn(3, 4)}))
    # data movement
    add(op_case("reshape_flatten", lambda p: torch.flatten(p["x"].reshape(3, 8), 0) * 2, {"x": randn(2, 3, 4)}))
    add(op_case("transpose", lambda p: p["x"].permute(2, 0, 1), {"x": randn(2, 3, 4)}))
    add(op_case("concat_split", lambda p: torch.cat(torch.cat([p["a"], p["b"]], dim=1).split([3, 2], dim=1)[::-1], dim=1),
                {"a": randn(2, 2), "b": randn(2, 3)}))
    add(op_case("slice", lambda p: p["x"][1:, :-1, 2:4], {"x": randn(3, 4, 5)}))
    add(op_case("pad", lambda p: F.pad(p["x"], (1, 2, 0, 1)), {"x": randn(2, 3, 4)}))
    add(op_case("gather_embedding", lambda p, i: F.embedding(i, p["w"]), {"w": randn(6, 3)}, [("i", torch.tensor([[0, 5, 0], [2, 2, 1]]))]))
    add(op_case("gather_axis1", lambda p: p["x"][:, 2], {"x": randn(3, 4, 2)}))
    add(op_case("squeeze_unsqueeze", lambda p: p["x"].squeeze(1).unsqueeze(0) * p["x"].sum(), {"x": randn(3, 1, 4)}))
    add(op_case("reduce", lambda p: p["x"].mean(dim=1, keepdim=True) + p["x"].sum(dim=(0, 2)).reshape(1, 3, 1) + p["x"].mean(),
                {"x": randn(2, 3, 4)}))
    add(op_case("expand", lambda p: p["x"].expand(3, 4, 2) * 1.5, {"x": randn(4, 1)}))
    # Dropout with bytesandbrains' mask (stream 0, seed 0)
    drop = SeededDropout(0.5, 0)
    add(op_case("dropout", lambda p: drop(p["x"] * 3), {"x": randn(4, 6)}))
    return c


def conv_extent_cases():
    """Weight gradients whose convolution's last window reaches past the kernel (per axis
    in + pads - dilation*(k-1) - 1 = stride*(out-1) + r with r >= dilation): the builder
    takes r off the end pad where the pad allows it, else keeps a Slice (the 1x1, stride-2
    convolution without padding on an even input)."""
    torch.manual_seed(90)
    c = []
    add = c.append

    def conv(name, x, w, **kw):
        add(op_case(name, lambda p, x: F.conv2d(x, p["w"], **kw), {"w": randn(*w)}, [("x", randn(*x))]))

    conv("conv_wgrad_s2_even_odd", (2, 3, 8, 7), (4, 3, 3, 3), stride=2, padding=1)
    conv("conv_wgrad_7x7_s2", (2, 3, 12, 11), (4, 3, 7, 7), stride=2, padding=3)
    conv("conv_wgrad_dilated_s3", (2, 3, 9, 8), (4, 3, 3, 3), stride=3, padding=(2, 1), dilation=2)
    conv("conv_wgrad_1x1_s2", (2, 3, 8, 8), (4, 3, 1, 1), stride=2)
    # a small CNN of stride-2 convolutions (tests/cpu/test_session_transpose.c trains it too)
    torch.manual_seed(91)
    cnn = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, stride=2, padding=1),
                        nn.ReLU(), nn.Conv2d(16, 24, 1, stride=2), nn.ReLU(), nn.Conv2d(24, 24, 3, stride=2, padding=1),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(24, 10))
    add(Case("cnn_stride2", cnn, [("x", randn(6, 3, 17, 16))], loss="sce", target=("labels", torch.tensor([1, 7, 3, 9, 0, 2])),
             optimizers=["adam"]))
    return c


# ---- recurrent layers -------------------------------------------------------------------

class Recurrent(nn.Module):
    """sum(Y * R) + sum(h_n * R_h) (+ sum(c_n * R_c)): every output of the layer reaches the
    loss; with `state` the initial states are parameters too."""

    def __init__(self, layer, x, state, seed):
        super().__init__()
        self.layer = layer
        self.lstm = isinstance(layer, nn.LSTM)
        shape = (layer.num_layers * (2 if layer.bidirectional else 1), x.shape[0 if layer.batch_first else 1],
                 layer.hidden_size)
        self.h0 = nn.Parameter(randn(shape)) if state else None
        self.c0 = nn.Parameter(randn(shape)) if state and self.lstm else None
        with torch.no_grad():
            outs = self.run(x)
        g = torch.Generator().manual_seed(seed)
        self.r = [torch.randn(tuple(o.shape), generator=g) for o in outs]

    def run(self, x):
        if self.h0 is None:
            y, state = self.layer(x)
        else:
            y, state = self.layer(x, (self.h0, self.c0) if self.lstm else self.h0)
        return (y,) + (state if self.lstm else (state,))

    def forward(self, x):
        return sum((o * r).sum() for o, r in zip(self.run(x), self.r))


def char_lstm():
    class CharLSTM(nn.Module):
        def __init__(self, vocab=12, emb=6, hidden=8):
            super().__init__()
            self.emb = nn.Embedding(vocab, emb)
            self.lstm = nn.LSTM(emb, hidden, batch_first=True)
            self.head = nn.Linear(hidden, vocab)

        def forward(self, tokens):
            y, _ = self.lstm(self.emb(tokens))
            return self.head(y[:, -1])

    return CharLSTM()


def recurrent_cases():
    """nn.LSTM, nn.GRU and nn.RNN as torch.onnx.export writes them (weights through Slice,
    Concat and Unsqueeze, LSTM's gates reordered): one layer, and two bidirectional
    batch-first layers with the initial states as parameters; and a next-character model."""
    c = []
    for k, (name, cls, kw) in enumerate([("lstm", nn.LSTM, {}), ("gru", nn.GRU, {}), ("rnn", nn.RNN, {}),
                                         ("rnn_relu", nn.RNN, {"nonlinearity": "relu"})]):
        torch.manual_seed(30 + k)
        c.append(Case(name, Recurrent(cls(3, 4, **kw), randn(5, 2, 3), False, 40 + k), [("x", randn(5, 2, 3))]))
        torch.manual_seed(50 + k)
        deep = cls(3, 4, num_layers=2, bidirectional=True, batch_first=True, **kw)
        c.append(Case(name + "_deep", Recurrent(deep, randn(2, 5, 3), True, 60 + k), [("x", randn(2, 5, 3))]))
    torch.manual_seed(70)
    c.append(Case("char_lstm", char_lstm(), [("tokens", torch.randint(0, 12, (3, 5)))], loss="sce",
                  target=("labels", torch.tensor([4, 0, 11])), optimizers=["sgd", "adam"]))
    return c


# ---- helper-built cases: recurrent forms torch never exports -------------------------------

def onnx_activation(name, x, alpha, beta):
    """An activation ONNX lists for recurrent operators, in torch."""
    if name == "Relu":
        return torch.relu(x)
    if name == "Tanh":
        return torch.tanh(x)
    if name == "Sigmoid":
        return torch.sigmoid(x)
    if name == "Affine":
        return alpha * x + beta
    if name == "LeakyRelu":
        return torch.where(x >= 0, x, alpha * x)
    if name == "ThresholdedRelu":
        return torch.where(x > alpha, x, torch.zeros_like(x))
    if name == "ScaledTanh":
        return alpha * torch.tanh(beta * x)
    if name == "HardSigmoid":
        return torch.clamp(alpha * x + beta, 0, 1)
    if name == "Elu":
        return torch.where(x >= 0, x, alpha * (torch.exp(x) - 1))
    if name == "Softsign":
        return x / (1 + torch.abs(x))
    assert name == "Softplus"
    return F.softplus(x)


# the alphas and betas each function takes, defaulting to those of the ONNX operator of its name
TAKES_ALPHA = {"Affine": 1.0, "LeakyRelu": 0.01, "ThresholdedRelu": 1.0, "ScaledTanh": 1.0, "HardSigmoid": 0.2, "Elu": 1.0}
TAKES_BETA = {"Affine": 0.0, "ScaledTanh": 1.0, "HardSigmoid": 0.5}


def onnx_recurrent(kind, attrs, x, w, r, b, lens, h0, c0, peep):
    """ONNX's RNN / GRU / LSTM written out in torch, row by row and step by step: outputs
    (Y, Y_h, Y_c) in the node's layout."""
    layout = attrs.get("layout", 0)
    direction = attrs.get("direction", "forward")
    dirs = 2 if direction == "bidirectional" else 1
    if layout:
        x = x.transpose(0, 1)
        h0 = h0.transpose(0, 1) if h0 is not None else None
        c0 = c0.transpose(0, 1) if c0 is not None else None
    seq, batch, hid = x.shape[0], x.shape[1], r.shape[2]
    n_acts = {"RNN": 1, "GRU": 2, "LSTM": 3}[kind]
    default = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}[kind]
    names = attrs.get("activations", default * dirs)
    alphas, betas = list(attrs.get("activation_alpha", [])), list(attrs.get("activation_beta", []))
    acts = []
    for name in names:
        a = (alphas.pop(0) if alphas else TAKES_ALPHA[name]) if name in TAKES_ALPHA else None
        bb = (betas.pop(0) if betas else TAKES_BETA[name]) if name in TAKES_BETA else None
        acts.append((name, a, bb))
    clip = attrs.get("clip")

    def f(k, d, v):
        if clip is not None:
            v = torch.clamp(v, -clip, clip)
        name, a, bb = acts[d * n_acts + k]
        return onnx_activation(name, v, a, bb)

    zeros = torch.zeros(hid)
    y = [[[zeros] * batch for _ in range(dirs)] for _ in range(seq)]
    y_h, y_c = [[None] * batch for _ in range(dirs)], [[None] * batch for _ in range(dirs)]
    for d in range(dirs):
        rev = direction == "reverse" or d == 1
        wd, rd = w[d], r[d]
        wb, rb = (b[d][: b.shape[1] // 2], b[d][b.shape[1] // 2:]) if b is not None else (None, None)
        for bi in range(batch):
            h = h0[d, bi] if h0 is not None else zeros
            c = c0[d, bi] if c0 is not None else zeros
            n = int(lens[bi]) if lens is not None else seq
            for step in range(n):
                t = n - 1 - step if rev else step
                xw = wd @ x[t, bi] + (wb if wb is not None else 0)
                hr = rd @ h + (rb if rb is not None else 0)
                if kind == "RNN":
                    h = f(0, d, xw + hr)
                elif kind == "GRU":
                    z = f(0, d, xw[:hid] + hr[:hid])
                    rr = f(0, d, xw[hid:2 * hid] + hr[hid:2 * hid])
                    if attrs.get("linear_before_reset", 0):
                        hh = f(1, d, xw[2 * hid:] + rr * hr[2 * hid:])
                    else:
                        rbh = rb[2 * hid:] if rb is not None else 0
                        hh = f(1, d, xw[2 * hid:] + rd[2 * hid:] @ (rr * h) + rbh)
                    h = (1 - z) * hh + z * h
                else:
                    g = xw + hr
                    p_i, p_o, p_f = (peep[d][:hid], peep[d][hid:2 * hid], peep[d][2 * hid:]) if peep is not None else (0, 0, 0)
                    i = f(0, d, g[:hid] + p_i * c)
                    ff = 1 - i if attrs.get("input_forget", 0) else f(0, d, g[2 * hid:3 * hid] + p_f * c)
                    cc = f(1, d, g[3 * hid:])
                    c = ff * c + i * cc
                    o = f(0, d, g[hid:2 * hid] + p_o * c)
                    name, a, bb = acts[d * n_acts + 2]
                    h = o * onnx_activation(name, c, a, bb)  # clip applies to the gates, not to the cell
                y[t][d][bi] = h
            y_h[d][bi], y_c[d][bi] = h, c
    Y = torch.stack([torch.stack([torch.stack(row) for row in per_d]) for per_d in y])  # [seq, dirs, batch, hid]
    Yh = torch.stack([torch.stack(row) for row in y_h])
    Yc = torch.stack([torch.stack(row) for row in y_c])
    if layout:
        return Y.permute(2, 0, 1, 3), Yh.transpose(0, 1), Yc.transpose(0, 1)
    return Y, Yh, Yc


def recurrent_form_case(name, seed, kind, attrs, seq=4, batch=3, inp=3, hid=3, lens=None, state=True, bias=True,
                        peepholes=False):
    """One node with every input a parameter (X too) and every output in the loss."""
    torch.manual_seed(seed)
    g = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    layout = attrs.get("layout", 0)
    params = {"X": randn(*((batch, seq, inp) if layout else (seq, batch, inp))), "W": randn(dirs, g * hid, inp, scale=0.7),
              "R": randn(dirs, g * hid, hid, scale=0.7)}
    if bias:
        params["B"] = randn(dirs, 2 * g * hid, scale=0.5)
    state_shape = (batch, dirs, hid) if layout else (dirs, batch, hid)
    if state:
        params["initial_h"] = randn(*state_shape)
        if kind == "LSTM":
            params["initial_c"] = randn(*state_shape)
    if peepholes:
        params["P"] = randn(dirs, 3 * hid, scale=0.5)
    lens_t = torch.tensor(lens, dtype=torch.int32) if lens is not None else None
    slots = ["X", "W", "R", "B", "sequence_lens", "initial_h"] + (["initial_c", "P"] if kind == "LSTM" else [])
    inputs = []
    for slot in slots:
        if slot == "sequence_lens":
            inputs.append("lens" if lens is not None else "")
        else:
            inputs.append("p." + slot if slot in params else "")
    while inputs[-1] == "":
        inputs.pop()
    outs = ["Y", "Y_h", "Y_c"][: 3 if kind == "LSTM" else 2]
    with torch.no_grad():
        shapes = [o.shape for o in onnx_recurrent(kind, attrs, *[params.get(k) for k in ("X", "W", "R", "B")], lens_t,
                                                   params.get("initial_h"), params.get("initial_c"), params.get("P"))]
    weights = [randn(*sh) for sh in shapes[: len(outs)]]
    inits = [numpy_helper.from_array(v.numpy(), "p." + k) for k, v in params.items()]
    if lens is not None:
        inits.append(numpy_helper.from_array(lens_t.numpy(), "lens"))
    nodes = [helper.make_node(kind, inputs, outs, **attrs)]
    for k, o in enumerate(outs):
        nodes += [helper.make_node("Constant", [], [f"r{k}"], value=numpy_helper.from_array(weights[k].numpy())),
                  helper.make_node("Mul", [o, f"r{k}"], [f"m{k}"]), helper.make_node("ReduceSum", [f"m{k}"], [f"s{k}"], keepdims=0)]
    total = "s0"
    for k in range(1, len(outs)):
        nodes.append(helper.make_node("Add", [total, f"s{k}"], [f"t{k}"]))
        total = f"t{k}"
    nodes.append(helper.make_node("Identity", [total], ["loss"]))
    graph = helper.make_graph(nodes, name, [], [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="torch_make_grad_models")
    onnx.checker.check_model(model)

    def fn(p, _inputs):
        res = onnx_recurrent(kind, attrs, p["X"], p["W"], p["R"], p.get("B"), lens_t, p.get("initial_h"), p.get("initial_c"),
                             p.get("P"))
        return sum((o * wt).sum() for o, wt in zip(res, weights))

    mod = nn.Module()
    mod.p = nn.ParameterDict({k: nn.Parameter(v) for k, v in params.items()})
    return Case(name, mod, [], onnx_model=model, fn=fn)


def recurrent_form_cases():
    """Every attribute and optional input of the recurrent operators, each activation ONNX
    lists with explicit and default alphas/betas, against torch.autograd of the same
    function written out in torch."""
    lstm_acts = ["HardSigmoid", "Elu", "Softsign", "Sigmoid", "Tanh", "Tanh"]
    return [
        recurrent_form_case("lstm_forms", 80, "LSTM", {"hidden_size": 3, "direction": "bidirectional", "layout": 1,
                            "activations": lstm_acts, "activation_alpha": [0.3, 0.8], "activation_beta": [0.45]},
                            lens=[4, 2, 3], peepholes=True),
        recurrent_form_case("lstm_clip_forget", 81, "LSTM", {"hidden_size": 3, "direction": "reverse", "clip": 0.9,
                            "input_forget": 1}, lens=[3, 4, 1], peepholes=True),
        recurrent_form_case("gru_reset_inside", 82, "GRU", {"hidden_size": 3, "direction": "bidirectional",
                            "activations": ["Sigmoid", "Softplus", "ScaledTanh", "Affine"],
                            "activation_alpha": [0.9, 0.7], "activation_beta": [0.8, 0.1]}, lens=[2, 4, 3]),
        recurrent_form_case("gru_clip_layout", 83, "GRU", {"hidden_size": 3, "layout": 1, "clip": 1.1,
                            "linear_before_reset": 1, "activations": ["HardSigmoid", "LeakyRelu"]}, state=False),
        recurrent_form_case("rnn_forms", 84, "RNN", {"hidden_size": 3, "direction": "bidirectional", "clip": 1.2,
                            "activations": ["ThresholdedRelu", "Softsign"], "activation_alpha": [0.2]}, lens=[4, 1, 3],
                            bias=False),
        recurrent_form_case("rnn_reverse_layout", 85, "RNN", {"hidden_size": 3, "direction": "reverse", "layout": 1,
                            "activations": ["Elu"]}, state=False),
    ]


# ---- helper-built cases: Gemm's forms ------------------------------------------------------

def gemm_case(name, seed, trans_a, trans_b, alpha, beta, c_shape):
    torch.manual_seed(seed)
    m, k, n = 3, 4, 2
    a = randn(*((k, m) if trans_a else (m, k)))
    b = randn(*((n, k) if trans_b else (k, n)))
    c = randn(*c_shape) if c_shape is not None else None
    r = randn(m, n)
    params = {"A": a, "B": b}
    if c is not None:
        params["C"] = c
    # initializers are named as PyTorch names the module's parameters ("p.A")
    inits = [numpy_helper.from_array(v.numpy(), "p." + k2) for k2, v in params.items()]
    nodes = [helper.make_node("Gemm", ["p.A", "p.B"] + (["p.C"] if c is not None else []), ["y"], transA=trans_a, transB=trans_b,
                              alpha=alpha, beta=beta),
             helper.make_node("Constant", [], ["r"], value=numpy_helper.from_array(r.numpy())),
             helper.make_node("Mul", ["y", "r"], ["yr"]),
             helper.make_node("ReduceSum", ["yr"], ["loss"], keepdims=0)]
    graph = helper.make_graph(nodes, name, [], [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="torch_make_grad_models")

    def fn(p, inputs):
        pa = p["A"].t() if trans_a else p["A"]
        pb = p["B"].t() if trans_b else p["B"]
        y = alpha * (pa @ pb) + (beta * p["C"] if c is not None else 0)
        return (y * r).sum()

    mod = nn.Module()
    mod.p = nn.ParameterDict({k2: nn.Parameter(v) for k2, v in params.items()})
    return Case(name, mod, [], onnx_model=model, fn=fn)


def gemm_cases():
    return [gemm_case("gemm_plain", 20, 0, 0, 1.0, 1.0, (3, 2)), gemm_case("gemm_trans_a", 21, 1, 0, 0.5, 2.0, (2,)),
            gemm_case("gemm_trans_b", 22, 0, 1, 1.5, 0.25, (3, 1)), gemm_case("gemm_trans_ab", 23, 1, 1, 2.0, 1.0, ()),
            gemm_case("gemm_no_c", 24, 1, 1, 0.75, 1.0, None)]


# ---- what torch's own modules export: shape arithmetic, gathers, attention ----------------

def depth_space_case():
    """DepthToSpace in DCR mode and SpaceToDepth, which torch never exports (pixel_shuffle is
    CRD mode): written with onnx.helper, PyTorch computes the same permutations."""
    torch.manual_seed(30)
    params = {"X": randn(2, 8, 2, 3), "Z": randn(2, 3, 4, 6)}
    r1, r2 = randn(2, 2, 4, 6), randn(2, 12, 2, 3)
    inits = [numpy_helper.from_array(v.numpy(), "p." + k) for k, v in params.items()]
    nodes = [helper.make_node("DepthToSpace", ["p.X"], ["d"], blocksize=2, mode="DCR"),
             helper.make_node("SpaceToDepth", ["p.Z"], ["s"], blocksize=2),
             helper.make_node("Constant", [], ["r1"], value=numpy_helper.from_array(r1.numpy())),
             helper.make_node("Constant", [], ["r2"], value=numpy_helper.from_array(r2.numpy())),
             helper.make_node("Mul", ["d", "r1"], ["dr"]), helper.make_node("ReduceSum", ["dr"], ["ds"], keepdims=0),
             helper.make_node("Mul", ["s", "r2"], ["sr"]), helper.make_node("ReduceSum", ["sr"], ["ss"], keepdims=0),
             helper.make_node("Add", ["ds", "ss"], ["loss"])]
    graph = helper.make_graph(nodes, "depth_space", [], [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="torch_make_grad_models")

    def fn(p, inputs):
        x, z = p["X"], p["Z"]
        d = x.reshape(2, 2, 2, 2, 2, 3).permute(0, 3, 4, 1, 5, 2).reshape(2, 2, 4, 6)
        s = z.reshape(2, 3, 2, 2, 3, 2).permute(0, 3, 5, 1, 2, 4).reshape(2, 12, 2, 3)
        return (d * r1).sum() + (s * r2).sum()

    mod = nn.Module()
    mod.p = nn.ParameterDict({k: nn.Parameter(v) for k, v in params.items()})
    return Case("depth_space_dcr", mod, [], onnx_model=model, fn=fn)


class Chunked(nn.Module):
    """torch.chunk on a layer's output: the Slice bounds are computed from Shape."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 6), nn.Linear(3, 2)

    def forward(self, x):
        u, v = self.a(x).chunk(2, -1)
        return self.b(u * v)


class Encoder(nn.Module):
    """torch.nn's transformer encoder (layer or stack) with a classification head."""

    def __init__(self, layers):
        super().__init__()
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        self.enc = layer if layers == 0 else nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.enc(x).mean(dim=1))


class Normalised(nn.Module):
    """Input statistics registered as buffers, a BatchNorm's running statistics: state that
    torch.optim never touches, exported as initializers like the parameters."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.tensor([0.25]))
        self.register_buffer("std", torch.tensor([1.5]))
        self.conv = nn.Conv2d(1, 2, 3, padding=1, bias=False)  # a bias before BatchNorm has no gradient
        self.bn = nn.BatchNorm2d(2)
        self.fc = nn.Linear(32, 3)

    def forward(self, x):
        return self.fc(torch.flatten(F.relu(self.bn(self.conv((x - self.mean) / self.std))), 1))


def shufflenet():
    """torchvision's ShuffleNetV2 (every block, 170 parameters) at small widths, its
    BatchNorms' scales and shifts drawn at random: at torch's ones and zeros some of their
    gradients are sums that cancel to a few units of float32 rounding."""
    import torchvision
    net = torchvision.models.shufflenetv2.ShuffleNetV2([4, 8, 4], [4, 8, 16, 32, 32], num_classes=4)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0, 0.2)
    return net


def exported_module_cases():
    torch.manual_seed(31)
    c = []
    add = c.append
    idx = torch.tensor([[0, 5, 2, 5], [1, 1, 3, 0], [4, 0, 0, 2]])
    add(op_case("gather_elements", lambda p: torch.cat([torch.gather(p["x"], 1, idx).flatten(),
                                                        torch.gather(p["y"], 0, idx[:2, :3] % 3).flatten()]),
                {"x": randn(3, 6), "y": randn(3, 3)}))
    add(op_case("topk", lambda p: torch.cat([torch.topk(p["x"], 3, dim=-1).values.flatten(),
                                             torch.topk(p["x"], 2, dim=1, largest=False).values.flatten()]),
                {"x": randn(2, 4, 5)}))
    add(op_case("pixel_shuffle", lambda p: F.pixel_unshuffle(F.pixel_shuffle(p["x"], 2) * p["w"], 2), {"x": randn(2, 8, 2, 3),
                                                                                                      "w": randn(2, 4, 6)}))
    add(depth_space_case())
    torch.manual_seed(32)
    add(Case("chunk", Chunked(), [("x", randn(5, 4))], loss="sce", target=("labels", torch.tensor([0, 1, 1, 0, 1])),
             optimizers=["adam"]))
    torch.manual_seed(33)
    # SGD: the key projection's bias has no effect on softmax, so its gradient is rounding
    # noise, which Adam's normalisation would blow up to full steps
    add(Case("transformer_encoder_layer", Encoder(0), [("x", randn(2, 5, 8))], loss="sce", target=("labels", torch.tensor([2, 0])),
             optimizers=["momentum"]))
    torch.manual_seed(34)
    add(Case("transformer_encoder", Encoder(2), [("x", randn(2, 5, 8))], loss="sce", target=("labels", torch.tensor([1, 2])),
             optimizers=["sgd"]))
    torch.manual_seed(35)
    add(Case("buffers", Normalised(), [("x", randn(4, 1, 4, 4))], loss="sce", target=("labels", torch.tensor([0, 2, 1, 2])),
             optimizers=["momentum"], buffers=True))
    torch.manual_seed(36)
    # A BatchNorm's shift followed by a 1x1 convolution and another BatchNorm has no effect
    # (its exact gradient is zero): the reference is computed in float64, and gradients are
    # compared against a floor of 1e-3 of the largest one rather than their own scale. No
    # optimizer steps: at this depth float32 rounding grows step by step into a different run.
    add(Case("shufflenet", shufflenet(), [("x", randn(4, 3, 64, 64))], loss="sce", target=("labels", torch.tensor([3, 1, 0, 2])),
             precise=True))
    return c


# ---- cuts: parts of a model between named values ------------------------------------------

class Cut:
    """One part of a model: its inputs and outputs (ONNX value names; None: the model's own),
    the PyTorch function between them, and the whole model's input it starts from."""

    def __init__(self, name, model_file, module, cut_in, cut_out, prefix, part, x, labels=None, seed=0):
        self.name, self.model_file, self.module = name, model_file, module
        self.cut_in, self.cut_out = cut_in, cut_out
        self.prefix, self.part = prefix, part  # prefix(x) -> tuple of the part's inputs; part(*inputs) -> tuple of outputs
        self.x, self.labels, self.seed = x, labels, seed


def digits_modules():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_make_digits_models import DigitsCnn, DigitsMlp
    torch.manual_seed(20)  # the seeds torch_make_digits_models exports them with
    cnn = DigitsCnn()
    torch.manual_seed(21)
    mlp = DigitsMlp()
    return cnn, mlp


def cut_cases():
    cnn, dmlp = digits_modules()
    torch.manual_seed(1)
    mlp = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 8), nn.Tanh(), nn.Linear(8, 4))
    torch.manual_seed(2)
    net = lenet()
    torch.manual_seed(3)
    tf = transformer()
    g = torch.Generator().manual_seed(40)
    pixels = torch.randint(0, 17, (4, 1, 8, 8), generator=g).float()
    digits = torch.tensor([3, 9, 0, 5])

    def c1(x):
        return F.relu(cnn.conv1(x * (1.0 / 16.0)))

    def convs(x):
        return F.max_pool2d(F.relu(cnn.conv2(F.max_pool2d(x, 2))), 2)

    def head(h):
        return cnn.fc2(F.relu(cnn.fc1(torch.flatten(h, 1))))

    cnn_file = "examples/models/digits_cnn.onnx"
    relu0, pool1 = "/Relu_output_0", "/MaxPool_1_output_0"
    cases = [
        Cut("digits_cnn_bottom", cnn_file, cnn, None, [pool1], lambda x: (x,), lambda x: (convs(c1(x)),), pixels),
        Cut("digits_cnn_top", cnn_file, cnn, [pool1], None, lambda x: (convs(c1(x)),), lambda h: (head(h),), pixels, digits),
        Cut("digits_cnn_middle", cnn_file, cnn, [relu0], [pool1], lambda x: (c1(x),), lambda h: (convs(h),), pixels),
    ]
    mlp_file = "examples/models/digits_mlp.onnx"
    flat = pixels.reshape(4, 64)
    first = lambda x: F.relu(dmlp.fc1(x * (1.0 / 16.0)))
    cases += [
        Cut("digits_mlp_bottom", mlp_file, dmlp, None, ["/Relu_output_0"], lambda x: (x,), lambda x: (first(x),), flat),
        Cut("digits_mlp_top", mlp_file, dmlp, ["/Relu_output_0"], None, lambda x: (first(x),), lambda h: (dmlp.fc2(h),), flat,
            digits),
    ]
    x6 = torch.randn(5, 6, generator=g)
    cases += [
        Cut("mlp_bottom", "tests/data/grad/mlp.onnx", mlp, None, ["/1/Relu_output_0"], lambda x: (x,), lambda x: (mlp[:2](x),), x6),
        Cut("mlp_middle", "tests/data/grad/mlp.onnx", mlp, ["/1/Relu_output_0"], ["/3/Tanh_output_0"], lambda x: (mlp[:2](x),),
            lambda h: (mlp[2:4](h),), x6),
        Cut("mlp_top", "tests/data/grad/mlp.onnx", mlp, ["/3/Tanh_output_0"], None, lambda x: (mlp[:4](x),), lambda h: (mlp[4](h),),
            x6, torch.tensor([1, 0, 3, 3, 2])),
    ]

    def block1(x):
        return F.max_pool2d(F.relu(net.bn1(net.conv1(x))), 2)

    def block2(h):
        return F.max_pool2d(F.relu(net.conv2(h)), 2)

    x8 = torch.randn(4, 1, 8, 8, generator=g)
    lenet_file = "tests/data/grad/lenet.onnx"
    cases += [
        Cut("lenet_bottom", lenet_file, net, None, ["/MaxPool_1_output_0"], lambda x: (x,), lambda x: (block2(block1(x)),), x8),
        Cut("lenet_middle", lenet_file, net, ["/MaxPool_output_0"], ["/MaxPool_1_output_0"], lambda x: (block1(x),),
            lambda h: (block2(h),), x8),
        Cut("lenet_top", lenet_file, net, ["/MaxPool_1_output_0"], None, lambda x: (block2(block1(x)),),
            lambda h: (net.fc(net.drop(torch.flatten(h, 1))),), x8, torch.tensor([2, 7, 7, 0])),
    ]

    def embed(tokens):
        return tf.emb(tokens) + tf.pos

    def attend(x):
        b, t, d = x.shape
        q, k, v = tf.qkv(tf.ln1(x)).split(d, dim=-1)
        q, k, v = (z.reshape(b, t, tf.h, tf.dh).transpose(1, 2) for z in (q, k, v))
        att = torch.softmax(q @ k.transpose(-2, -1) / (tf.dh ** 0.5), dim=-1)
        x = x + tf.proj((att @ v).transpose(1, 2).reshape(b, t, -1))
        return x, tf.ln2(x)

    def finish(x, h):
        return (tf.head((x + tf.down(F.gelu(tf.up(h)))).mean(dim=1)),)

    tokens = torch.randint(0, 11, (2, 5), generator=g)  # the export's batch (its reshapes are static)
    tf_file = "tests/data/grad/transformer.onnx"
    mid = ["/Add_1_output_0", "/ln2/LayerNormalization_output_0"]
    cases += [
        Cut("transformer_bottom", tf_file, tf, None, ["/Add_output_0"], lambda t: (t,), lambda t: (embed(t),), tokens),
        Cut("transformer_middle", tf_file, tf, ["/Add_output_0"], mid, lambda t: (embed(t),), attend, tokens),
        Cut("transformer_top", tf_file, tf, mid, None, lambda t: attend(embed(t)), finish, tokens, torch.tensor([0, 2])),
    ]
    return cases


def cut_reference(cut, model_names):
    """PyTorch's gradients of one part: its inputs computed from the whole model's input,
    then torch.autograd.grad of its outputs with given grad_outputs, or of its loss."""
    cut.module.train()
    SeededDropout.seed = 0
    with torch.no_grad():
        ins = [v.detach().clone() for v in cut.prefix(cut.x)]
    in_names = cut.cut_in if cut.cut_in is not None else model_names["inputs"]
    floating = [i for i, v in enumerate(ins) if v.is_floating_point()]
    for i in floating:
        ins[i].requires_grad_(True)
    outs = cut.part(*ins)
    params = [(n, p) for n, p in cut.module.named_parameters()]
    wrt = [p for _, p in params] + [ins[i] for i in floating]
    refs = {f"input:{n}": v.detach() for n, v in zip(in_names, ins)}
    meta = {"model": cut.model_file, "cut_inputs": ",".join(cut.cut_in or []), "cut_outputs": ",".join(cut.cut_out or [])}
    if cut.labels is not None:
        loss = F.cross_entropy(outs[0], cut.labels)
        grads = torch.autograd.grad(loss, wrt, allow_unused=True)
        refs["loss"] = loss.detach()
        refs["input:target"] = cut.labels
        meta.update(loss="sce", target="target")
    else:
        gen = torch.Generator().manual_seed(cut.seed + 50)
        ups = [torch.randn(tuple(o.shape), generator=gen) for o in outs]
        grads = torch.autograd.grad(outs, wrt, grad_outputs=ups, allow_unused=True)
        for n, u in zip(cut.cut_out, ups):
            refs[f"upstream:{n}"] = u
        meta["loss"] = "upstream"
    trained = []
    for (n, _), gr in zip(params, grads[:len(params)]):
        if gr is not None:
            refs[f"grad:{n}"] = gr
            trained.append(n)
    for i, gr in zip(floating, grads[len(params):]):
        refs[f"grad_input:{in_names[i]}"] = gr if gr is not None else torch.zeros_like(ins[i])
    meta["params"] = ",".join(trained)
    meta["input_grads"] = ",".join(in_names[i] for i in floating if cut.cut_in is not None)
    return refs, meta


def write_cut(cut, out_dir, root):
    model = onnx.load(os.path.join(root, cut.model_file))
    inits = {i.name for i in model.graph.initializer}
    names = {"inputs": [i.name for i in model.graph.input if i.name not in inits]}
    refs, meta = cut_reference(cut, names)
    if not meta["input_grads"]:
        refs = {k: v for k, v in refs.items() if not k.startswith("grad_input:")}
    tensors = [numpy_helper.from_array(v.detach().numpy(), k) for k, v in refs.items()]
    graph = helper.make_graph([], cut.name + "_reference", [], [], tensors)
    ref = helper.make_model(graph, producer_name="torch_make_grad_models", opset_imports=[helper.make_opsetid("", OPSET)])
    for k, v in meta.items():
        ref.metadata_props.append(onnx.StringStringEntryProto(key=k, value=v))
    with open(os.path.join(out_dir, "cut_" + cut.name + ".ref.onnx"), "wb") as f:
        f.write(ref.SerializeToString())


# ---- running a case ------------------------------------------------------------------------

def param_names(case):
    """The parameters in the names the ONNX graph gives their initializers."""
    return [n for n, _ in case.module.named_parameters()]


def run_loss(case, seed=0):
    SeededDropout.seed = seed
    xs = [x for _, x in case.inputs]
    if case.onnx_model is not None:
        return case.fn(case.module.p, xs)
    out = case.module(*xs)
    if case.loss == "output":
        return out
    t = case.target[1]
    if case.loss == "sce":
        return F.cross_entropy(out, t)
    if case.loss == "mse":
        return F.mse_loss(out, t)
    return F.binary_cross_entropy_with_logits(out, t)


def export(case):
    if case.onnx_model is not None:
        return case.onnx_model.SerializeToString()
    SeededDropout.exporting = True
    buf = io.BytesIO()
    try:
        torch.onnx.export(case.module, tuple(x for _, x in case.inputs), buf, opset_version=OPSET,
                          do_constant_folding=False, training=torch.onnx.TrainingMode.TRAINING,
                          input_names=[n for n, _ in case.inputs], output_names=["out"],
                          dynamic_axes={n: {0: "batch"} for n, _ in case.inputs} if case.dynamic_batch else None)
    finally:
        SeededDropout.exporting = False
    model = onnx.load_from_string(buf.getvalue())
    if case.buffers:
        model.metadata_props.append(onnx.StringStringEntryProto(key="ai.bytesandbrains.buffers",
                                                                value=",".join(n for n, _ in case.module.named_buffers())))
    onnx.checker.check_model(model)
    return model.SerializeToString()


def batchnorms(module):
    return [(n, m) for n, m in module.named_modules() if isinstance(m, nn.BatchNorm2d)]


def train(case, opt_name, state):
    """Parameters (and ONNX-rule running statistics) after STEPS steps from `state`."""
    case.module.load_state_dict(state)
    cfg = OPTIMIZERS[opt_name]
    params = list(case.module.parameters())
    opt = torch_optimizer(cfg, params)
    onnx_var = {n: m.running_var.clone() for n, m in batchnorms(case.module)}
    hooks = []
    for n, m in batchnorms(case.module):
        def hook(mod, inp, out, n=n):
            x = inp[0].detach()
            var = x.var(dim=(0, 2, 3), unbiased=False)
            onnx_var[n] = onnx_var[n] * 0.9 + var * 0.1
        hooks.append(m.register_forward_hook(hook))
    losses = []
    for step in range(STEPS):
        opt.zero_grad()
        loss = run_loss(case, seed=step)
        losses.append(loss.item())
        loss.backward()
        if cfg.get("max_grad_norm", 0) > 0:
            torch.nn.utils.clip_grad_norm_(params, cfg["max_grad_norm"])
        opt.step()
    for h in hooks:
        h.remove()
    out = {f"{opt_name}:{n}": p.detach().clone() for n, p in case.module.named_parameters()}
    for n, m in batchnorms(case.module):
        out[f"{opt_name}:{n}.running_mean"] = m.running_mean.clone()
        out[f"{opt_name}:{n}.running_var"] = onnx_var[n]
    out[f"{opt_name}:losses"] = torch.tensor(losses, dtype=torch.float32)
    return out


def reference(case):
    case.module.train()
    state = {k: v.clone() for k, v in case.module.state_dict().items()}
    refs = {f"input:{n}": x for n, x in case.inputs}
    if case.target is not None:
        refs[f"input:{case.target[0]}"] = case.target[1]
    case.module.zero_grad()
    loss = run_loss(case)
    loss.backward()
    refs["loss"] = loss.detach()
    for n, p in case.module.named_parameters():
        refs[f"grad:{n}"] = p.grad.detach().clone()
    for opt_name in case.optimizers:
        refs.update(train(case, opt_name, state))
    case.module.load_state_dict(state)
    meta = {"loss": case.loss, "params": ",".join(param_names(case)),
            "optimizers": ",".join(case.optimizers)}
    if case.target is not None:
        meta["target"] = case.target[0]
    for opt_name in case.optimizers:
        meta[f"opt:{opt_name}"] = " ".join(f"{k}={v}" for k, v in OPTIMIZERS[opt_name].items())
    return refs, meta


def write_case(case, out_dir):
    case.module.train()
    data = export(case)  # before the reference: the exported initializers are the initial values
    if case.precise:
        case.module.double()
        case.inputs = [(n, x.double() if x.is_floating_point() else x) for n, x in case.inputs]
    refs, meta = reference(case)
    if case.precise:
        top = max(v.abs().max().item() for k, v in refs.items() if k.startswith("grad:"))
        meta["grad_floor"] = f"{1e-3 * top:.6g}"
    inits = [numpy_helper.from_array((v.float() if v.dtype == torch.float64 else v).detach().numpy(), k) for k, v in refs.items()]
    graph = helper.make_graph([], case.name + "_reference", [], [], inits)
    ref = helper.make_model(graph, producer_name="torch_make_grad_models", opset_imports=[helper.make_opsetid("", OPSET)])
    for k, v in meta.items():
        ref.metadata_props.append(onnx.StringStringEntryProto(key=k, value=v))
    with open(os.path.join(out_dir, case.name + ".onnx"), "wb") as f:
        f.write(data)
    with open(os.path.join(out_dir, case.name + ".ref.onnx"), "wb") as f:
        f.write(ref.SerializeToString())


def all_cases():
    return (op_cases() + gemm_cases() + model_cases() + exported_module_cases() + recurrent_cases() + recurrent_form_cases() +
            conv_extent_cases())


def generate(out_dir, root):
    """Writes every case and cut; returns the files written."""
    os.makedirs(out_dir, exist_ok=True)
    names = []
    for case in all_cases():
        write_case(case, out_dir)
        names.append(case.name)
    with open(os.path.join(out_dir, "cases.txt"), "w") as f:
        f.write("\n".join(names) + "\n")
    cuts = []
    for cut in cut_cases():
        write_cut(cut, out_dir, root)
        cuts.append(cut.name)
    with open(os.path.join(out_dir, "cuts.txt"), "w") as f:
        f.write("\n".join(cuts) + "\n")
    return (["cases.txt", "cuts.txt"] + [n + ext for n in names for ext in (".onnx", ".ref.onnx")] +
            ["cut_" + n + ".ref.onnx" for n in cuts])


def check(committed, root):
    with tempfile.TemporaryDirectory() as tmp:
        files = generate(tmp, root)
        bad = [f for f in files if not os.path.exists(os.path.join(committed, f)) or
               not filecmp.cmp(os.path.join(tmp, f), os.path.join(committed, f), shallow=False)]
        extra = sorted(set(os.listdir(committed)) - set(files))
    for f in bad:
        print(f"differs from PyTorch's: {f}")
    for f in extra:
        print(f"not made by this script: {f}")
    print(f"{len(files) - len(bad)} passed, {len(bad) + len(extra)} failed")
    return 1 if bad or extra else 0


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.join(here, "..", "..")
    default = os.path.join(here, "..", "data", "grad")
    if len(sys.argv) > 2 and sys.argv[1] == "--check":
        sys.exit(check(sys.argv[2], root))
    generate(sys.argv[1] if len(sys.argv) > 1 else default, root)
