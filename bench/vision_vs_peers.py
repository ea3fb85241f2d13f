#!/usr/bin/python3
"""Inference of torchvision's resnet18, mobilenet_v2 and efficientnet_b0 (random weights and
BatchNorm statistics, batch 1, 3×SIZE×SIZE, 100 classes), natively on one thread:
bytesandbrains (build/bench/bench_models, with its load-time graph rewrites and with
--no-rewrites) against onnxruntime-node (bench/ort_time.mjs: one thread, all graph
optimizations) and PyTorch (torch.set_num_threads(1), torch.no_grad, the same
architectures in eval mode). The ONNX files keep their BatchNormalization nodes (bb and
onnxruntime fold them at load). All three count
the process's CPU time per inference; each side runs RUNS timed inferences after warm-up,
three rounds alternately, and the best median of each counts. Figures and ratios (peer
time / bb time: above 1 means bb is faster) are printed together.

With --train it times a training step instead (softmax cross-entropy against a class
label, then Adam, batch 1; BatchNormalization in inference mode on both sides, as the ONNX
file has it) against PyTorch's step (eval mode, zero_grad, forward, loss, backward, Adam);
onnxruntime has no training here. With --train --threads N it times the training step by the
wall clock on 1 and on N threads (bb_cpu_set_threads(N), torch.set_num_threads(N)).

With --threads N it times inference by the wall clock on 1 and on N threads instead, each
side with its own pool (bb_cpu_set_threads(N), onnxruntime's intra_op_num_threads = N,
torch.set_num_threads(N)), and prints each one's speed-up from 1 to N threads and the
ratios at N.

With --export DIR it only writes the ONNX files (DIR/NAME.onnx; at opset 16 with --train),
for bench/js/vision-vs-peers.mjs.

usage: /usr/bin/python3 bench/vision_vs_peers.py [BUILD_DIR] [--size S] [--runs R] [--models a,b] [--train]
                                                 [--threads N] [--export DIR]"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "tools"))
from rewrite_cases import OPSET, export_torchvision  # noqa: E402

torch.set_num_threads(1)
MEDIAN = re.compile(r"median ([0-9.]+) ms")


def median_of(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"{' '.join(cmd)} failed: {out.stderr.strip()}")
    return float(MEDIAN.search(out.stdout).group(1)), out.stdout.strip()


def exported(args, tmp, opset):
    """(name, ONNX path) of each model asked for, exported into tmp."""
    rng = np.random.default_rng(7)
    for name in args.models.split(","):
        path = os.path.join(tmp, f"{name}.onnx")
        export_torchvision(name, path, args.size, rng, opset=opset)
        yield name, path


def torch_median(name, size, runs, seed, train, threads=None):
    import torchvision
    torch.manual_seed(seed)
    model = getattr(torchvision.models, name)(num_classes=100).eval()
    x = torch.randn(1, 3, size, size)
    labels = torch.tensor([7])
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        if not train:
            with torch.no_grad():
                return model(x)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), labels).backward()
        opt.step()

    clock = time.perf_counter if threads else time.process_time
    torch.set_num_threads(threads or 1)
    times = []
    for _ in range(3):
        step()
    for _ in range(runs):
        t0 = clock()
        step()
        times.append((clock() - t0) * 1e3)
    torch.set_num_threads(1)
    return sorted(times)[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--models", default="resnet18,mobilenet_v2,efficientnet_b0")
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--export")
    args = ap.parse_args()
    if args.export:
        os.makedirs(args.export, exist_ok=True)
        for name, path in exported(args, args.export, 16 if args.train else OPSET):
            print(path)
        return
    if args.train:
        return train_rows(args)
    if args.threads:
        return thread_rows(args)
    bench = os.path.join(args.build, "bench", "bench_models")
    shape = f"1,3,{args.size},{args.size}"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in exported(args, tmp, OPSET):
            best = {"bb": 1e30, "bb_plain": 1e30, "ort": 1e30, "torch": 1e30}
            for _ in range(3):
                t, line = median_of([bench, path, "x", shape, "--runs", str(args.runs)])
                best["bb"] = min(best["bb"], t)
                best["bb_plain"] = min(best["bb_plain"], median_of([bench, path, "x", shape, "--runs", str(args.runs),
                                                                    "--no-rewrites"])[0])
                best["ort"] = min(best["ort"], median_of(["node", os.path.join(here, "ort_time.mjs"), path, "x", shape,
                                                          str(args.runs)])[0])
                best["torch"] = min(best["torch"], torch_median(name, args.size, args.runs, 1, False))
            print(line.split("; ", 1)[1])
            rows.append((name, best))
    print(f"\ninference, batch 1, 3x{args.size}x{args.size}, one thread, CPU ms per inference (best of 3 medians)")
    print(f"{'model':<16}{'bb':>9}{'bb as written':>15}{'onnxruntime':>13}{'PyTorch':>9}{'ORT/bb':>9}{'torch/bb':>10}")
    for name, b in rows:
        print(f"{name:<16}{b['bb']:>9.2f}{b['bb_plain']:>15.2f}{b['ort']:>13.2f}{b['torch']:>9.2f}"
              f"{b['ort'] / b['bb']:>8.2f}x{b['torch'] / b['bb']:>9.2f}x")


def thread_rows(args):
    bench = os.path.join(args.build, "bench", "bench_models")
    shape = f"1,3,{args.size},{args.size}"
    counts = sorted({1, args.threads})
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in exported(args, tmp, OPSET):
            best = {(side, n): 1e30 for side in ("bb", "ort", "torch") for n in counts}
            for _ in range(3):
                for n in counts:
                    t = median_of([bench, path, "x", shape, "--runs", str(args.runs), "--threads", str(n)])[0]
                    best["bb", n] = min(best["bb", n], t)
                    t = median_of(["node", os.path.join(here, "ort_time.mjs"), path, "x", shape, str(args.runs),
                                   str(n)])[0]
                    best["ort", n] = min(best["ort", n], t)
                    best["torch", n] = min(best["torch", n], torch_median(name, args.size, args.runs, 1, False, n))
            rows.append((name, best))
    n = args.threads
    print(f"\ninference, batch 1, 3x{args.size}x{args.size}, wall-clock ms per inference on 1 and {n} threads "
          "(best of 3 medians)")
    print(f"{'model':<16}{'bb 1':>8}{f'bb {n}':>8}{'x':>7}{'ORT 1':>8}{f'ORT {n}':>8}{'x':>7}{'torch 1':>9}"
          f"{f'torch {n}':>9}{'x':>7}{f'ORT/bb@{n}':>11}")
    for name, b in rows:
        print(f"{name:<16}{b['bb', 1]:>8.2f}{b['bb', n]:>8.2f}{b['bb', 1] / b['bb', n]:>6.2f}x"
              f"{b['ort', 1]:>8.2f}{b['ort', n]:>8.2f}{b['ort', 1] / b['ort', n]:>6.2f}x"
              f"{b['torch', 1]:>9.2f}{b['torch', n]:>9.2f}{b['torch', 1] / b['torch', n]:>6.2f}x"
              f"{b['ort', n] / b['bb', n]:>10.2f}x")


def train_rows(args):
    bench = os.path.join(args.build, "bench", "bench_models")
    shape = f"1,3,{args.size},{args.size}"
    counts = sorted({1, args.threads}) if args.threads else [None]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in exported(args, tmp, 16):  # MaxPool's gradient needs opset 16
            best = {(side, n): 1e30 for side in ("bb", "torch") for n in counts}
            for _ in range(3):
                for n in counts:
                    cmd = [bench, path, "x", shape, "--runs", str(args.runs), "--train", "100"]
                    best["bb", n] = min(best["bb", n], median_of(cmd + (["--threads", str(n)] if n else []))[0])
                    best["torch", n] = min(best["torch", n], torch_median(name, args.size, args.runs, 1, True, n))
            rows.append((name, best))
    if not args.threads:
        print(f"\ntraining step (softmax cross-entropy, Adam), batch 1, 3x{args.size}x{args.size}, one thread, "
              "CPU ms per step (best of 3 medians)")
        print(f"{'model':<16}{'bb':>9}{'PyTorch':>9}{'torch/bb':>10}")
        for name, b in rows:
            print(f"{name:<16}{b['bb', None]:>9.2f}{b['torch', None]:>9.2f}{b['torch', None] / b['bb', None]:>9.2f}x")
        return
    n = args.threads
    print(f"\ntraining step (softmax cross-entropy, Adam), batch 1, 3x{args.size}x{args.size}, wall-clock ms per step "
          f"on 1 and {n} threads (best of 3 medians), load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")
    print(f"{'model':<16}{'bb 1':>9}{f'bb {n}':>9}{'x':>7}{'torch 1':>9}{f'torch {n}':>9}{'x':>7}"
          f"{'torch/bb@1':>11}{f'torch/bb@{n}':>11}")
    for name, b in rows:
        print(f"{name:<16}{b['bb', 1]:>9.2f}{b['bb', n]:>9.2f}{b['bb', 1] / b['bb', n]:>6.2f}x"
              f"{b['torch', 1]:>9.2f}{b['torch', n]:>9.2f}{b['torch', 1] / b['torch', n]:>6.2f}x"
              f"{b['torch', 1] / b['bb', 1]:>10.2f}x{b['torch', n] / b['bb', n]:>10.2f}x")

if __name__ == "__main__":
    main()
