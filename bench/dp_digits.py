#!/usr/bin/env python3
"""Accuracy against privacy: federated_digits under DP-FedAvg at ε ≈ 1, 4, 8 and ∞.

For each target ε the noise multiplier σ is the one at which `bb dp-epsilon` gives that ε
after the run's rounds (q = 1: every client in every round, δ = 1e-5), found by bisection;
each (ε, clip) cell is the mean held-out accuracy over the seeds, with the plain FedAvg
(no clipping, no noise) as the reference row. Prints a Markdown table. With
--clip-quantile Q every clip is the initial clip of adaptive clipping (Andrew et al.), which
follows the Q-quantile of the update norms (federated_digits --dp-clip-quantile Q). With
--sample-rate q each round takes a Poisson sample of the clients (federated_digits
--dp-sample-rate q) and σ is found for ε at that q.

usage: bench/dp_digits.py FEDERATED_DIGITS BB [--clients 64] [--rounds 40] [--seeds 3]
       [--clips 0.25,1,4] [--delta 1e-5] [--clip-quantile Q] [--sample-rate q]
"""
import argparse
import re
import statistics
import subprocess


def epsilon(bb, sigma, rounds, delta, q=1.0):
    out = subprocess.run([bb, "dp-epsilon", "--q", repr(q), "--sigma", repr(sigma), "--steps", str(rounds),
                          "--delta", repr(delta)], check=True, capture_output=True, text=True).stdout
    return float(re.match(r"epsilon (\S+)", out).group(1))


def sigma_for(bb, target, rounds, delta, q=1.0):
    """The σ whose ε after `rounds` rounds at rate q is `target` (ε falls as σ grows), to 1e-4 relative."""
    low, high = 0.05, 4096.0
    while high / low > 1 + 1e-4:
        mid = (low * high) ** 0.5
        if epsilon(bb, mid, rounds, delta, q) > target:
            low = mid
        else:
            high = mid
    return high


def accuracy(digits, args, seed, extra):
    out = subprocess.run([digits, "--quiet", "--clients", str(args.clients), "--rounds", str(args.rounds),
                          "--seed", str(seed), "--min-accuracy", "0", *extra],
                         check=True, capture_output=True, text=True).stdout
    return float(re.search(r"final held-out accuracy ([0-9.]+)", out).group(1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("digits")
    p.add_argument("bb")
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--clips", default="0.25,1,4")
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--clip-quantile", type=float, default=0)
    p.add_argument("--sample-rate", type=float, default=1.0)
    args = p.parse_args()
    dp_flags = ["--dp-clip-quantile", repr(args.clip_quantile)] if args.clip_quantile > 0 else []
    if args.sample_rate < 1:
        dp_flags += ["--dp-sample-rate", repr(args.sample_rate)]
    clips = [float(c) for c in args.clips.split(",")]
    seeds = range(1, args.seeds + 1)

    def mean(extra):
        return statistics.mean(accuracy(args.digits, args, s, extra) for s in seeds)

    print(f"federated_digits, {args.clients} clients (non-IID, 3 digits each), {args.rounds} rounds, "
          f"δ = {args.delta:g}, q = {args.sample_rate:g}, mean held-out accuracy over {args.seeds} seeds"
          + (f", adaptive clip (quantile {args.clip_quantile:g}) from the clip named" if args.clip_quantile > 0 else "") + "\n")
    print("| ε | σ | " + " | ".join(f"clip {c:g}" for c in clips) + " |")
    print("|---|---|" + "---|" * len(clips))
    print(f"| plain FedAvg | — | {mean([]):.3f} (no clip) |" + " |" * (len(clips) - 1))
    print("| ∞ (clip only) | 0 | " + " | ".join(f"{mean(['--dp-clip', repr(c), '--dp-noise', '0', *dp_flags]):.3f}" for c in clips) + " |")
    for target in (8.0, 4.0, 1.0):
        sigma = sigma_for(args.bb, target, args.rounds, args.delta, args.sample_rate)
        spent = epsilon(args.bb, sigma, args.rounds, args.delta, args.sample_rate)
        cells = [f"{mean(['--dp-clip', repr(c), '--dp-noise', repr(sigma), '--dp-delta', repr(args.delta), *dp_flags]):.3f}"
                 for c in clips]
        print(f"| {spent:.3g} | {sigma:.3g} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
