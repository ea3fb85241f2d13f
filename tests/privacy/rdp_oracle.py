#!/usr/bin/python3
"""The Rényi-DP accountant of `bb dp-epsilon` against numerical integration with scipy.

For the sampled Gaussian, mu0 = N(0, s^2), mu = (1 - q) N(0, s^2) + q N(1, s^2), the RDP of
one step at order a is log(A) / (a - 1) with A = integral of mu0 (mu / mu0)^a (Mironov,
Talwar and Zhang 2019). Here A is integrated with scipy.integrate.quad around the
integrand's peak, in logarithms, at integer and fractional orders, and compared with the
per-step RDP `bb dp-epsilon --json` prints; so is the other direction, D(mu0 || mu), which
must not exceed it. Then epsilon from the integrated RDP by the classic conversion against
the tool's, and the published DP-SGD MNIST figure: q = 256/60000, sigma = 1.1, 60 epochs,
delta = 1e-5 give epsilon about 3.0 with the classic conversion.

usage: rdp_oracle.py BB_TOOL"""
import json
import math
import subprocess
import sys

from scipy import integrate, optimize, special

bb = sys.argv[1]
failures = []
checks = 0


def check(ok, what):
    global checks
    checks += 1
    if not ok:
        failures.append(what)
        print("FAIL", what)


def log_ratio(z, q, s):
    """log(mu(z) / mu0(z)) = log((1 - q) + q exp((2z - 1) / (2 s^2)))."""
    t = (2 * z - 1) / (2 * s * s)
    return math.log1p(-q) + math.log1p(q / (1 - q) * math.exp(t)) if t < 700 else math.log(q) + t


def log_mu0(z, s):
    return -z * z / (2 * s * s) - math.log(s * math.sqrt(2 * math.pi))


def log_integral(f, lo, hi, s):
    """log of the integral of exp(f) over the line, whose mass lies in [lo, hi]: the
    integrand (which may have two modes, near 0 and near the order) is scaled by its
    largest value, found on a fine grid and refined, and integrated with its modes as
    break points."""
    grid = [lo + (hi - lo) * i / 4000 for i in range(4001)]
    values = [f(z) for z in grid]
    modes = [grid[i] for i in range(1, 4000) if values[i] >= values[i - 1] and values[i] >= values[i + 1]]
    step = (hi - lo) / 4000
    peaks = [optimize.minimize_scalar(lambda z: -f(z), bounds=(m - step, m + step), method="bounded").x for m in modes]
    top = max(f(z) for z in peaks + grid)
    g = lambda z: math.exp(f(z) - top)
    value, _ = integrate.quad(g, lo, hi, points=sorted(peaks), limit=1000, epsabs=0, epsrel=1e-11)
    return top + math.log(value)


def rdp_integrated(q, s, a):
    # D(mu || mu0): the integrand mu0 (mu/mu0)^a
    f = lambda z: log_mu0(z, s) + a * log_ratio(z, q, s)
    lo, hi = -40 * s, a + 40 * s
    forward = log_integral(f, lo, hi, s) / (a - 1)
    # D(mu0 || mu): mu (mu0/mu)^a = mu0 (mu/mu0)^(1 - a)
    g = lambda z: log_mu0(z, s) + (1 - a) * log_ratio(z, q, s)
    backward = log_integral(g, lo, hi, s) / (a - 1)
    return forward, backward


def tool_json(q, s, steps, delta):
    out = subprocess.run([bb, "dp-epsilon", "--q", repr(q), "--sigma", repr(s), "--steps", str(steps), "--delta",
                          repr(delta), "--json"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


CASES = [(256 / 60000, 1.1), (0.01, 1.0), (0.1, 2.0), (0.05, 0.8), (0.5, 4.0)]
ORDERS = [1.5, 2.0, 2.5, 3.0, 4.7, 8.0, 10.3, 16.0, 32.0]
for q, s in CASES:
    got = tool_json(q, s, 1, 1e-5)
    by_order = {round(e["order"], 6): e["rdp"] for e in got["rdp_per_step"]}
    for a in ORDERS:
        forward, backward = rdp_integrated(q, s, a)
        ours = by_order[round(a, 6)]
        rel = abs(ours - forward) / max(forward, 1e-300)
        kind = "integer" if a == int(a) else "fractional"
        check(rel < 1e-6, f"q {q:.6g} sigma {s} order {a} ({kind}): bb {ours:.12g}, integrated {forward:.12g}")
        check(backward <= forward * (1 + 1e-9), f"q {q:.6g} sigma {s} order {a}: D(mu0||mu) {backward:.6g} above D(mu||mu0) {forward:.6g}")
    print(f"q {q:.6g} sigma {s}: RDP at {len(ORDERS)} orders within 1e-6 of the integral")

# epsilon by the classic conversion from the integrated RDP, over every order up to 256
q, s, steps, delta = 256 / 60000, 1.1, 14063, 1e-5
got = tool_json(q, s, steps, delta)
best = math.inf
for e in got["rdp_per_step"]:
    a = e["order"]
    if a > 256:
        continue
    forward, _ = rdp_integrated(q, s, a)
    best = min(best, steps * forward + math.log(1 / delta) / (a - 1))
check(abs(best - got["epsilon"]) < 1e-6 * best, f"epsilon: bb {got['epsilon']:.9g}, from the integrated RDP {best:.9g}")
check(abs(got["epsilon"] - 3.0) < 0.05, f"DP-SGD MNIST (q 256/60000, sigma 1.1, 60 epochs, delta 1e-5): epsilon {got['epsilon']:.4g}, published about 3.0")
print(f"DP-SGD MNIST: bb says epsilon {got['epsilon']:.4f} at order {got['order']:g}; integrated {best:.4f}; published about 3.0")

# the text form, and refusals
text = subprocess.run([bb, "dp-epsilon", "--q", "0.0042666667", "--sigma", "1.1", "--steps", "14063", "--delta", "1e-5"],
                      capture_output=True, text=True)
check(text.returncode == 0 and text.stdout.startswith("epsilon 3.0") and "order" in text.stdout, f"text output: {text.stdout!r}")
for bad, rc in ([["--q", "1.5", "--sigma", "1", "--steps", "1", "--delta", "1e-5"], 1],
                [["--q", "0.1", "--sigma", "0", "--steps", "1", "--delta", "1e-5"], 1],
                [["--q", "0.1", "--sigma", "1", "--steps", "1", "--delta", "1"], 1],
                [["--q", "0.1", "--sigma", "1", "--delta", "1e-5"], 2],
                [["--q", "x", "--sigma", "1", "--steps", "1", "--delta", "1e-5"], 2]):
    r = subprocess.run([bb, "dp-epsilon", *bad], capture_output=True, text=True)
    check(r.returncode == rc and r.stderr.startswith("bb dp-epsilon:"), f"{bad}: exit {r.returncode}, {r.stderr!r}")

print(f"rdp oracle: {checks - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
