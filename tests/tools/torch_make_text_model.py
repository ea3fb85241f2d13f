#!/usr/bin/python3
"""The next-character model the federated_text example trains with OnnxModel, exported from
PyTorch.

  text_lstm.onnx  chars [batch, 16] (character classes 0..27 as float32, examples/common/
                  text.h) -> Cast to int64 -> Embedding 28x16 -> LSTM 16->64 (one layer,
                  batch first) -> the last step's output -> Linear 64x28 -> logits [batch, 28]

Exported with torch.onnx.export at opset 17 without constant folding (the LSTM's weights
reach the node through Slice, Concat and Unsqueeze of torch's parameters, its gates
reordered), from a fixed seed: the bytes are the same on every run
(tests/tools/test_example_models.sh checks the committed file).

Usage: torch_make_text_model.py [OUT_DIR]   (default: examples/models)
       torch_make_text_model.py --check DIR (fails unless regenerating gives DIR's bytes)
"""
import filecmp
import io
import os
import sys
import tempfile

import onnx
import torch
import torch.nn as nn

torch.set_num_threads(1)
OPSET = 17
CLASSES, CONTEXT = 28, 16
NAME = "text_lstm.onnx"


class TextLstm(nn.Module):
    def __init__(self, embedding=16, hidden=64):
        super().__init__()
        self.emb = nn.Embedding(CLASSES, embedding)
        self.lstm = nn.LSTM(embedding, hidden, batch_first=True)
        self.head = nn.Linear(hidden, CLASSES)

    def forward(self, chars):
        y, _ = self.lstm(self.emb(chars.long()))
        return self.head(y[:, -1])


def export():
    torch.manual_seed(22)
    buf = io.BytesIO()
    torch.onnx.export(TextLstm(), (torch.zeros(2, CONTEXT),), buf, opset_version=OPSET, do_constant_folding=False,
                      input_names=["chars"], output_names=["logits"],
                      dynamic_axes={"chars": {0: "batch"}, "logits": {0: "batch"}})
    model = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(model, full_check=True)
    return buf.getvalue()


def write(out):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, NAME), "wb") as f:
        f.write(export())


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        with tempfile.TemporaryDirectory() as tmp:
            write(tmp)
            if not filecmp.cmp(os.path.join(sys.argv[2], NAME), os.path.join(tmp, NAME), shallow=False):
                print(f"differs from PyTorch's export: {NAME}")
                return 1
            print(f"{NAME} equals PyTorch's export")
            return 0
    write(sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "examples", "models"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
