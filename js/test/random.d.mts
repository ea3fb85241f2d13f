/** Uniform floats in [lo, hi) (default [-1, 1)) from a fixed seed (mulberry32); random.mjs. */
export function randomFloats(count: number, seed: number, lo?: number, hi?: number): Float32Array<ArrayBuffer>;
