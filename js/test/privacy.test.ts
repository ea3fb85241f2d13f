/**
 * The Rényi-DP accountant through bb.wasm (dpEpsilon): the published DP-SGD MNIST figure,
 * the closed form of an unsampled Gaussian, and refusals with the C library's messages.
 * The accountant itself is checked against numerical integration in
 * tests/privacy/rdp_oracle.py.
 */
import { beforeAll, describe, expect, test } from 'vitest';

import { BbErrorCode, dpEpsilon, loadBb, type Bb } from '../src/index.js';
import { bbErrorOf, wasmBytes } from './support.js';

let bb: Bb;

beforeAll(async () => {
  bb = await loadBb(wasmBytes());
});

describe('dpEpsilon', () => {
  test('60 epochs of DP-SGD on MNIST spend about ε = 3 at δ = 1e-5 (the published figure)', () => {
    const { epsilon, order } = dpEpsilon(bb, { q: 256 / 60000, sigma: 1.1, steps: 14063, delta: 1e-5 });
    expect(Math.abs(epsilon - 3.0)).toBeLessThan(0.05);
    expect(order).toBeGreaterThan(1);
    expect(order).toBeLessThan(64);
  });

  test('without sampling it is the Gaussian mechanism: ε = min over α of Tα/(2σ²) + log(1/δ)/(α − 1)', () => {
    const steps = 10;
    const sigma = 4;
    const delta = 1e-6;
    const { epsilon, order } = dpEpsilon(bb, { q: 1, sigma, steps, delta });
    const at = (a: number) => (steps * a) / (2 * sigma * sigma) + Math.log(1 / delta) / (a - 1);
    // the accountant's orders are a grid: its ε is the bound at its order, and no lower than the continuous minimum
    expect(epsilon).toBeCloseTo(at(order), 9);
    const best = 1 + Math.sqrt((2 * sigma * sigma * Math.log(1 / delta)) / steps);
    expect(epsilon).toBeGreaterThanOrEqual(at(best) - 1e-12);
    expect(epsilon).toBeLessThan(at(best) * 1.01);
  });

  test('more rounds spend more, more noise less', () => {
    const base = dpEpsilon(bb, { q: 0.1, sigma: 1, steps: 100, delta: 1e-5 }).epsilon;
    expect(dpEpsilon(bb, { q: 0.1, sigma: 1, steps: 200, delta: 1e-5 }).epsilon).toBeGreaterThan(base);
    expect(dpEpsilon(bb, { q: 0.1, sigma: 2, steps: 100, delta: 1e-5 }).epsilon).toBeLessThan(base);
  });

  test('refuses what is not a mechanism, naming the value', () => {
    const rate = bbErrorOf(() => dpEpsilon(bb, { q: 1.5, sigma: 1, steps: 1, delta: 1e-5 }));
    expect(rate.code).toBe(BbErrorCode.InvalidArgument);
    expect(rate.message).toMatch(/sampling rate 1\.5/);
    expect(bbErrorOf(() => dpEpsilon(bb, { q: 0.1, sigma: 0, steps: 1, delta: 1e-5 })).message).toMatch(/noise multiplier/);
    expect(bbErrorOf(() => dpEpsilon(bb, { q: 0.1, sigma: 1, steps: 2.5, delta: 1e-5 })).message).toMatch(/whole number/);
    expect(bbErrorOf(() => dpEpsilon(bb, { q: 0.1, sigma: 1, steps: 1, delta: 1 })).message).toMatch(/delta/);
  });
});
