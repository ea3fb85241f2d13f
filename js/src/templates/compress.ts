/**
 * How models travel on the wire in a template: the `compress` option every template takes.
 *
 * - `{ kind: 'f16' }`: IEEE half precision, 2 bytes a value (Float16Codec);
 * - `{ kind: 'u8' }`: 8-bit affine quantisation, 1 byte a value (Uint8Codec);
 * - `{ kind: 'topk', k }`: only the share `k` of the values of largest magnitude travel
 *   (TopKCodec): which ones as a list of indices or a bitmap, whichever is shorter, and
 *   their values as float32, or as `values: 'f16'` or `'u8'` codes; what is left out (and
 *   what quantising the values lost) is kept by the sender and added to its next update
 *   (error feedback, on unless `feedback: false`), so nothing is lost, only late.
 *
 * In federatedAveraging a client sends its update against the global model it trained from
 * and the server adds it back to that model, so every kind compresses the update, never the
 * model itself. Gossip peers and federatedEvaluation's clients share no such model, so there
 * only `f16` and `u8` apply (they compress the models themselves) and `topk` is refused.
 */
import { BbError, BbErrorCode } from '../engine/errors.js';

export type Compression =
  | { readonly kind: 'none' }
  | { readonly kind: 'f16' }
  | { readonly kind: 'u8' }
  | {
      readonly kind: 'topk';
      /** The share of the values sent each time, in (0, 1] (0.3 with u8 values: about a ninth of the bytes). */
      readonly k: number;
      /** How the kept values travel (default 'u8': one byte each, with a scale and zero point). */
      readonly values?: 'f32' | 'f16' | 'u8';
      /** Keep what was left out and add it to the next update (default true). */
      readonly feedback?: boolean;
    };

/** The Codec a compression binds: its type and config; undefined for none. */
export interface CodecBinding {
  readonly type: 'Float16Codec' | 'Uint8Codec' | 'TopKCodec';
  readonly config?: string;
}

/**
 * The binding for `compress` in `template`; `shared` says whether the two ends share a
 * reference model (top-k needs one). Throws a BbError naming the template and the reason
 * for a kind it cannot use or a k out of range.
 */
export function codecFor(template: string, compress: Compression | undefined, shared: boolean): CodecBinding | undefined {
  if (compress === undefined || compress.kind === 'none') return undefined;
  switch (compress.kind) {
    case 'f16':
      return { type: 'Float16Codec' };
    case 'u8':
      return { type: 'Uint8Codec' };
    case 'topk': {
      if (!shared) {
        throw new BbError(
          BbErrorCode.InvalidArgument,
          `${template}: compress 'topk' sends updates against a model both ends hold, and its peers share none; use 'f16' or 'u8'`,
        );
      }
      const { k } = compress;
      if (typeof k !== 'number' || !(k > 0 && k <= 1)) {
        throw new BbError(BbErrorCode.InvalidArgument, `${template}: compress.k is the share of values sent, in (0, 1]; got ${String(k)}`);
      }
      const parts = [`k=${k}`];
      if (compress.values !== undefined) parts.push(`values=${compress.values}`);
      if (compress.feedback === false) parts.push('feedback=0');
      return { type: 'TopKCodec', config: parts.join(',') };
    }
    default:
      throw new BbError(BbErrorCode.InvalidArgument, `${template}: unknown compress kind '${(compress as { kind: string }).kind}'`);
  }
}
