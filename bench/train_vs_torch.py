#!/usr/bin/python3
"""Training steps per second, batch 32, natively: bytesandbrains (build/bench/bench_train:
the training graph and the Adam graph of the examples' models, examples/models: the digits
CNN and MLP, and the next-character LSTM of 16 characters) against PyTorch on the CPU with
one thread (torch.set_num_threads(1)), the same modules (tests/tools/
torch_make_digits_models.py and torch_make_text_model.py build both the ONNX files and
these), Adam with lr 1e-3 (or --optimizer's rule with torch.optim's defaults: sgd and
momentum lr 1e-2, momentum 0.9), the same batch size. Both count steps per second of CPU time (bench_train uses
CLOCK_PROCESS_CPUTIME_ID natively). Each side is measured three times, alternately, and the
best run of each counts; figures and ratios are printed together.

With --threads N both sides are timed by the wall clock on 1 and on N threads instead
(bench_train --threads, bb_cpu_set_threads(N); torch.set_num_threads(N)), alternately, and
each one's speed-up from 1 to N threads is printed with the ratios at both counts.

usage: /usr/bin/python3 bench/train_vs_torch.py [BUILD_DIR] [--threads N] [--rounds R]
                                               [--optimizer sgd|momentum|nesterov|adam]   (default: build, adam)"""
import argparse
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
from torch_make_text_model import TextLstm  # noqa: E402

torch.set_num_threads(1)
BATCH = 32

# bench_train's --optimizer names: torch.optim with bb_optimizer_defaults' settings
OPTIMIZERS = {
    "sgd": ("SGD lr 1e-2", lambda params: torch.optim.SGD(params, lr=1e-2)),
    "momentum": ("SGD lr 1e-2 momentum 0.9", lambda params: torch.optim.SGD(params, lr=1e-2, momentum=0.9)),
    "nesterov": ("SGD lr 1e-2 Nesterov momentum 0.9",
                 lambda params: torch.optim.SGD(params, lr=1e-2, momentum=0.9, nesterov=True)),
    "adam": ("Adam lr 1e-3", lambda params: torch.optim.Adam(params, lr=1e-3)),
}


# name: (module factory, seed, input shape after the batch, input values in [0, high), classes)
MODELS = {
    "digits_cnn": (DigitsCnn, 20, (1, 8, 8), 17, 10),
    "digits_mlp": (DigitsMlp, 21, (64,), 17, 10),
    "text_lstm": (TextLstm, 22, (16,), 28, 28),
}


def torch_steps_per_second(module, optimizer, shape, high, classes, seconds=1.0, threads=None):
    torch.set_num_threads(threads or 1)
    torch.manual_seed(0)
    opt = OPTIMIZERS[optimizer][1](module.parameters())
    batches = [(torch.randint(0, high, (BATCH, *shape)).float(), torch.randint(0, classes, (BATCH,))) for _ in range(16)]

    def step(i):
        x, y = batches[i % len(batches)]
        opt.zero_grad()
        loss = F.cross_entropy(module(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    for i in range(20):
        step(i)
    # CPU time on one thread: on a shared machine the wall clock measures the share of the
    # processor this process got (one thread, so the process's CPU time is the steps');
    # the wall clock when threads are asked for (CPU time would add the threads up)
    clock = time.perf_counter if threads else time.process_time
    n, start = 0, clock()
    while clock() - start < seconds or n < 5:
        step(n)
        n += 1
    rate = n / (clock() - start)
    torch.set_num_threads(1)
    return rate


def bb_steps_per_second(build, optimizer, threads=None):
    cmd = [os.path.join(build, "bench", "bench_train"), "--optimizer", optimizer]
    cmd += ["--threads", str(threads)] if threads else []
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rates = {}
    for line in out.splitlines():
        m = re.match(r"examples/models/(\w+)\s+\d+\s+\d+\s+[\d.]+\s+(\d+)", line)
        if m:
            rates[m.group(1)] = float(m.group(2))
    return rates


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(here, "..", "build"))
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--optimizer", choices=list(OPTIMIZERS), default="adam")
    args = ap.parse_args()
    if args.threads:
        return thread_rows(args)
    build = args.build
    torch_best = {name: 0.0 for name in MODELS}
    bb_best = {name: 0.0 for name in MODELS}
    for _ in range(3):
        for name, rate in bb_steps_per_second(build, args.optimizer).items():
            bb_best[name] = max(bb_best[name], rate)
        for name, (make, seed, shape, high, classes) in MODELS.items():
            torch.manual_seed(seed)
            torch_best[name] = max(torch_best[name],
                                   torch_steps_per_second(make(), args.optimizer, shape, high, classes))
    print("train-vs-torch: PyTorch %s (1 thread), load average %.1f; batch %d, %s"
          % (torch.__version__, os.getloadavg()[0], BATCH, OPTIMIZERS[args.optimizer][0]))
    print("| model | bb native steps/s | PyTorch steps/s | bb / PyTorch | target |")
    print("|---|---:|---:|---:|---:|")
    met = 0
    for name in MODELS:
        ratio = bb_best[name] / torch_best[name]
        met += ratio >= 1.0
        print("| %s | %.0f | %.0f | %.2f× | ≥ 1.0× %s |" % (name, bb_best[name], torch_best[name], ratio,
                                                        "met" if ratio >= 1.0 else "NOT met"))
    print("train-vs-torch: %d of %d targets met" % (met, len(MODELS)))


def thread_rows(args):
    counts = sorted({1, args.threads})
    bb_best = {(name, n): 0.0 for name in MODELS for n in counts}
    torch_best = dict(bb_best)
    for _ in range(args.rounds):
        for n in counts:
            for name, rate in bb_steps_per_second(args.build, args.optimizer, n).items():
                bb_best[name, n] = max(bb_best[name, n], rate)
            for name, (make, seed, shape, high, classes) in MODELS.items():
                torch.manual_seed(seed)
                torch_best[name, n] = max(torch_best[name, n],
                                          torch_steps_per_second(make(), args.optimizer, shape, high, classes,
                                                                 threads=n))
    n = args.threads
    print("train-vs-torch: PyTorch %s, wall clock on 1 and %d threads, load average %.1f, %d cores; batch %d, %s; "
          "best of %d rounds" % (torch.__version__, n, os.getloadavg()[0], os.cpu_count(), BATCH,
                                 OPTIMIZERS[args.optimizer][0], args.rounds))
    print("| model | bb 1 | bb %d | bb ×%d | PyTorch 1 | PyTorch %d | PyTorch ×%d | bb/PyTorch @1 | bb/PyTorch @%d |"
          % (n, n, n, n, n))
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in MODELS:
        b1, bn, t1, tn = bb_best[name, 1], bb_best[name, n], torch_best[name, 1], torch_best[name, n]
        print("| %s | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f | %.2f× | %.2f× |"
              % (name, b1, bn, bn / b1, t1, tn, tn / t1, b1 / t1, bn / tn))


if __name__ == "__main__":
    main()
