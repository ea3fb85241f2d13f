#!/usr/bin/python3
"""The models a user trains with `bb train` straight from PyTorch, and PyTorch's own run of
the same training, for tests/tools/test_train_cli.sh (one interpreter: importing torch is
the slow part).

Usage: torch_train_cli_models.py BB DIR
  writes, for each case, DIR/CASE.onnx (torch.onnx.export, opset 17) and DIR/CASE.csv
  (features, then the label); trains chunk, embedding and buffers with `BB train` (SGD,
  BATCH rows a step in file order, --no-shuffle) and the same modules with
  torch.optim.SGD on the same rows, and prints "ok CASE" when every parameter bb wrote
  is within 1e-4 of PyTorch's (buffers, which PyTorch does not train, unchanged), else
  "FAIL CASE: ..." naming what differs

Cases: chunk (torch.chunk: Slice bounds from Shape), embedding (int64 token columns),
rounded (a layer reached only through torch.round), buffers (input statistics registered
as buffers, no metadata naming them)."""
import io
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_make_grad_models import Chunked  # noqa: E402  (the gradient oracle's torch.chunk module)

torch.set_num_threads(1)


class Embedded(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.fc = nn.Embedding(10, 4), nn.Linear(4, 3)

    def forward(self, tokens):
        return self.fc(self.emb(tokens).mean(dim=1))


class Rounded(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 6), nn.Linear(6, 2)

    def forward(self, x):
        return self.b(torch.round(self.a(x)))


class Normalised(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.full((4,), 0.5))
        self.register_buffer("std", torch.full((4,), 2.0))
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc((x - self.mean) / self.std)


def cases():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(12, 4)).round(3)
    y = rng.integers(0, 2, 12)
    tokens = rng.integers(0, 10, (12, 5))
    out = {}
    for name, cls, feats, labels in (("chunk", Chunked, x, y), ("rounded", Rounded, x, y), ("buffers", Normalised, x, y),
                                     ("embedding", Embedded, tokens, rng.integers(0, 3, 12))):
        torch.manual_seed(len(name))
        out[name] = (cls(), feats, labels)
    return out


def make(d):
    for name, (module, feats, labels) in cases().items():
        tokens = feats.dtype.kind == "i"
        example = torch.from_numpy(feats[:2]) if tokens else torch.from_numpy(feats[:2]).float()
        buf = io.BytesIO()
        torch.onnx.export(module, (example,), buf, opset_version=17, do_constant_folding=False, input_names=["x"],
                          output_names=["out"], dynamic_axes={"x": {0: "batch"}})
        with open(f"{d}/{name}.onnx", "wb") as f:
            f.write(buf.getvalue())
        with open(f"{d}/{name}.csv", "w") as f:
            for row, label in zip(feats, labels):
                f.write(",".join(str(v) for v in row) + f",{label}\n")


def compare(d, name, steps, batch, lr):
    """Whether bb's trained model DIR/CASE.trained.onnx holds PyTorch's parameters."""
    module, feats, labels = cases()[name]
    x = torch.from_numpy(feats) if feats.dtype.kind == "i" else torch.from_numpy(feats).float()
    y = torch.from_numpy(labels)
    opt = torch.optim.SGD(module.parameters(), lr=lr)
    for step in range(steps):
        rows = [(step * batch + i) % len(x) for i in range(batch)]
        opt.zero_grad()
        F.cross_entropy(module(x[rows]), y[rows]).backward()
        opt.step()
    got = {i.name: numpy_helper.to_array(i) for i in onnx.load(f"{d}/{name}.trained.onnx").graph.initializer}
    wrong = [f"the trained model lacks {k}" for k, _ in module.named_parameters() if k not in got]
    for k, v in module.state_dict().items():
        e = float(np.abs(got[k] - v.detach().numpy()).max()) if k in got else 0.0
        if e > 1e-4:
            wrong.append(f"{k} differs from PyTorch's by {e:.3g}")
    return wrong


# bb train's flags for each compared case: SGD on BATCH rows a step in file order
STEPS, BATCH, LR = 6, 4, 0.5
COMPARED = {"chunk": [], "embedding": [], "buffers": ["--freeze", "mean", "--freeze", "std"]}


def run(bb, d):
    """Makes every case, trains the compared ones with bb and prints a line per case."""
    make(d)
    for name, flags in COMPARED.items():
        done = subprocess.run([bb, "train", f"{d}/{name}.onnx", "--data", f"{d}/{name}.csv", "--label", "-1", "--no-shuffle",
                               "--test-fraction", "0", "--batch", str(BATCH), "--steps", str(STEPS), "--optimizer", "sgd",
                               "--lr", str(LR), "--quiet", "-o", f"{d}/{name}.trained.onnx"] + flags,
                              capture_output=True, text=True)
        wrong = [done.stderr.strip() or "bb train failed"] if done.returncode else compare(d, name, STEPS, BATCH, LR)
        print(f"ok {name}" if not wrong else f"FAIL {name}: {'; '.join(wrong)}")


if __name__ == "__main__":
    run(sys.argv[1], sys.argv[2])
