// Seeded inputs the tests and the benches (bench/js) share, as plain JavaScript without
// imports so that pages in a browser load it too (browser-threads.test.ts, bench/js/browser.mjs).

/**
 * Uniform floats in [lo, hi) from a fixed seed (mulberry32): the same inputs for every
 * runtime, process and page that compares results.
 */
export function randomFloats(count, seed, lo = -1, hi = 1) {
  const out = new Float32Array(count);
  let state = seed >>> 0;
  for (let i = 0; i < count; i++) {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    out[i] = lo + (((t ^ (t >>> 14)) >>> 0) / 2 ** 32) * (hi - lo);
  }
  return out;
}
