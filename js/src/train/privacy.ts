/**
 * Differential privacy from TypeScript: the Rényi-DP accountant of the C core (through
 * bb.wasm), the same numbers `bb dp-epsilon` prints; docs/PRIVACY.md describes it.
 *
 * ```ts
 * const bb = await loadBb();
 * // 60 epochs of DP-SGD on MNIST: batches of 256 of 60,000 examples, noise multiplier 1.1
 * const { epsilon, order } = dpEpsilon(bb, { q: 256 / 60000, sigma: 1.1, steps: 14063, delta: 1e-5 });
 * // epsilon ≈ 3.0, at Rényi order 8.8
 * ```
 */
import type { Bb } from '../engine/bb.js';
import { BbError, BbErrorCode } from '../engine/errors.js';

/** T steps of the sampled Gaussian mechanism, and the δ to report ε at. */
export interface DpEpsilonOptions {
  /** The sampling rate: the fraction of clients (or examples) in a step, in [0, 1]. */
  readonly q: number;
  /** The noise multiplier: the noise's standard deviation over the clipping norm, > 0. */
  readonly sigma: number;
  /** The number of steps (rounds): a whole number up to 2^53. */
  readonly steps: number;
  /** δ, in (0, 1). */
  readonly delta: number;
}

/** The privacy spent: ε at the given δ, by the classic conversion from Rényi DP. */
export interface DpEpsilon {
  readonly epsilon: number;
  /** The Rényi order whose bound gives ε. */
  readonly order: number;
}

interface PrivacyExports {
  bb_wasm_dp_epsilon(q: number, sigma: number, steps: number, delta: number): number;
}

/** ε after `steps` steps of the sampled Gaussian (rate q, noise multiplier sigma), at δ. */
export function dpEpsilon(bb: Bb, options: DpEpsilonOptions): DpEpsilon {
  const exports = bb.exports as unknown as Partial<PrivacyExports>;
  const accountant = exports.bb_wasm_dp_epsilon;
  if (typeof accountant !== 'function') {
    throw new BbError(
      BbErrorCode.Unsupported,
      'this bb.wasm has no privacy accountant (bb_wasm_dp_epsilon): rebuild it from the same sources as the package',
    );
  }
  const { q, sigma, steps, delta } = options;
  bb.check(accountant.call(exports, q, sigma, steps, delta));
  const result = bb.resultBytes();
  const view = new DataView(result.buffer, result.byteOffset, result.byteLength);
  return { epsilon: view.getFloat64(0, true), order: view.getFloat64(8, true) };
}
