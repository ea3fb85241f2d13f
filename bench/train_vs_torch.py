#!/usr/bin/python3
"""Training steps per second, batch 32, natively: bytesandbrains (build/bench/bench_train:
the training graph and the Adam graph of the digits models, examples/models) against
PyTorch on the CPU with one thread (torch.set_num_threads(1)), the same modules
(tests/tools/torch_make_digits_models.py builds both the ONNX files and these), Adam with
lr 1e-3, the same batch size. Both count steps per second of CPU time (bench_train uses
CLOCK_PROCESS_CPUTIME_ID natively). Each side is measured three times, alternately, and the
best run of each counts; figures and ratios are printed together.

usage: /usr/bin/python3 bench/train_vs_torch.py [BUILD_DIR]   (default: build)"""
import os
import re
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "tools"))
from torch_make_digits_models import DigitsCnn, DigitsMlp  # noqa: E402

torch.set_num_threads(1)
BATCH = 32


def torch_steps_per_second(module, shape, seconds=1.0):
    torch.manual_seed(0)
    opt = torch.optim.Adam(module.parameters(), lr=1e-3)
    batches = [(torch.randint(0, 17, (BATCH, *shape)).float(), torch.randint(0, 10, (BATCH,))) for _ in range(16)]

    def step(i):
        x, y = batches[i % len(batches)]
        opt.zero_grad()
        loss = F.cross_entropy(module(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    for i in range(20):
        step(i)
    # CPU time: on a shared machine the wall clock measures the share of the processor
    # this process got (one thread, so the process's CPU time is the steps')
    n, start = 0, time.process_time()
    while time.process_time() - start < seconds or n < 5:
        step(n)
        n += 1
    return n / (time.process_time() - start)


def bb_steps_per_second(build):
    out = subprocess.run([os.path.join(build, "bench", "bench_train")], check=True, capture_output=True, text=True).stdout
    rates = {}
    for line in out.splitlines():
        m = re.match(r"examples/models/(digits_\w+)\s+\d+\s+\d+\s+[\d.]+\s+(\d+)", line)
        if m:
            rates[m.group(1)] = float(m.group(2))
    return rates


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "build")
    torch_best = {"digits_cnn": 0.0, "digits_mlp": 0.0}
    bb_best = {"digits_cnn": 0.0, "digits_mlp": 0.0}
    for _ in range(3):
        for name, rate in bb_steps_per_second(build).items():
            bb_best[name] = max(bb_best[name], rate)
        torch.manual_seed(20)
        torch_best["digits_cnn"] = max(torch_best["digits_cnn"], torch_steps_per_second(DigitsCnn(), (1, 8, 8)))
        torch.manual_seed(21)
        torch_best["digits_mlp"] = max(torch_best["digits_mlp"], torch_steps_per_second(DigitsMlp(), (64,)))
    print("train-vs-torch: PyTorch %s (1 thread), load average %.1f; batch %d, Adam lr 1e-3"
          % (torch.__version__, os.getloadavg()[0], BATCH))
    print("| model | bb native steps/s | PyTorch steps/s | bb / PyTorch | target |")
    print("|---|---:|---:|---:|---:|")
    met = 0
    for name in ("digits_cnn", "digits_mlp"):
        ratio = bb_best[name] / torch_best[name]
        met += ratio >= 1.0
        print("| %s | %.0f | %.0f | %.2f× | ≥ 1.0× %s |" % (name, bb_best[name], torch_best[name], ratio,
                                                        "met" if ratio >= 1.0 else "NOT met"))
    print("train-vs-torch: %d of 2 targets met" % met)


if __name__ == "__main__":
    main()
