#!/usr/bin/python3
"""The models the digits examples train with OnnxModel, exported from PyTorch.

  digits_cnn.onnx  a small CNN for the 8x8 digits as 1x8x8 images (federated_cnn):
                   x/16 -> Conv 3x3 (16) -> ReLU -> MaxPool 2 -> Conv 3x3 (32) -> ReLU
                   -> MaxPool 2 -> Flatten -> Linear 128x64 -> ReLU -> Linear 64x10
  digits_mlp.onnx  the MLP CpuMlp is in federated_digits: x/16 -> Linear 64x32 -> ReLU ->
                   Linear 32x10, weights initialised as CpuMlp's (He-uniform, +-sqrt(6/fan_in);
                   biases 0), so both start from the same kind of model

Both take float32 "pixels" [batch, ...] (pixel intensities 0..16; the scaling is a Constant
in the graph, so it is not trained) and give "logits" [batch, 10]. Exported with
torch.onnx.export at opset 17 without constant folding, from fixed seeds: the bytes are
the same on every run (tests/tools/test_example_models.sh checks the committed ones).

Usage: torch_make_digits_models.py [OUT_DIR]   (default: examples/models)
       torch_make_digits_models.py --check DIR (fails unless regenerating gives DIR's bytes)
"""
import filecmp
import io
import math
import os
import sys
import tempfile

import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(1)
OPSET = 17


class DigitsCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 2 * 2, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, pixels):
        x = pixels * (1.0 / 16.0)
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


class DigitsMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.fc2 = nn.Linear(32, 10)
        for layer in (self.fc1, self.fc2):
            bound = math.sqrt(6.0 / layer.in_features)
            nn.init.uniform_(layer.weight, -bound, bound)
            nn.init.zeros_(layer.bias)

    def forward(self, pixels):
        return self.fc2(F.relu(self.fc1(pixels * (1.0 / 16.0))))


def export(module, example):
    buf = io.BytesIO()
    torch.onnx.export(module, (example,), buf, opset_version=OPSET, do_constant_folding=False,
                      input_names=["pixels"], output_names=["logits"],
                      dynamic_axes={"pixels": {0: "batch"}, "logits": {0: "batch"}})
    model = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(model, full_check=True)
    return buf.getvalue()


def write_all(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(20)
    cnn = export(DigitsCnn(), torch.zeros(2, 1, 8, 8))
    torch.manual_seed(21)
    mlp = export(DigitsMlp(), torch.zeros(2, 64))
    for name, data in (("digits_cnn.onnx", cnn), ("digits_mlp.onnx", mlp)):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        with tempfile.TemporaryDirectory() as tmp:
            write_all(tmp)
            names = ("digits_cnn.onnx", "digits_mlp.onnx")
            _, mismatch, errors = filecmp.cmpfiles(sys.argv[2], tmp, names, shallow=False)
            if mismatch or errors:
                print("differ from PyTorch's export: %s" % ", ".join(mismatch + errors))
                return 1
            print("%d models equal PyTorch's export" % len(names))
            return 0
    write_all(sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "examples", "models"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
