/**
 * Labelled data for the shipped ArraySource: float32 features [rows, dim] and labels
 * [rows], held in bb.wasm and handed to a node's slot at install. A node keeps what it was
 * installed with, so a Dataset may be freed right after.
 */
import type { Bb } from '../engine/bb.js';
import { BbError, BbErrorCode } from '../engine/errors.js';
import type { HostTensor } from '../node/values.js';

export interface CsvOptions {
  /** Which column holds the label: 0-based, negative from the right (default -1), or null for none. */
  readonly labelColumn?: number | null;
  /** The first line names the columns. */
  readonly header?: boolean;
}

const NO_LABEL = -2147483648;

export class Dataset {
  readonly #bb: Bb;
  #handle: number;
  readonly rows: number;
  readonly dim: number;
  readonly labelled: boolean;

  private constructor(bb: Bb, handle: number) {
    this.#bb = bb;
    this.#handle = handle;
    bb.check(bb.exports.bb_wasm_dataset_shape(handle));
    const view = new DataView(bb.resultBytes().buffer);
    this.rows = Number(view.getBigUint64(0, true));
    this.dim = Number(view.getBigUint64(8, true));
    this.labelled = view.getBigUint64(16, true) === 1n;
  }

  /** Parses numeric CSV (the C parser: bad rows are BbError Malformed naming line and column). */
  static fromCsv(bb: Bb, csv: string | Uint8Array, options: CsvOptions = {}): Dataset {
    const bytes = typeof csv === 'string' ? new TextEncoder().encode(csv) : csv;
    const label = options.labelColumn === null ? NO_LABEL : (options.labelColumn ?? -1);
    const handle = bb.withBytes(bytes, (ptr, len) =>
      bb.check(bb.exports.bb_wasm_dataset_from_csv(ptr, len, label, options.header === true ? 1 : 0)),
    );
    return new Dataset(bb, handle);
  }

  /** From row-major features (rows × dim) and optional labels (rows). */
  static fromArrays(bb: Bb, features: Float32Array, dim: number, labels?: Float32Array): Dataset {
    if (!Number.isInteger(dim) || dim < 1 || features.length === 0 || features.length % dim !== 0) {
      throw new BbError(BbErrorCode.InvalidArgument, `${features.length} features are not rows of ${dim}`);
    }
    const rows = features.length / dim;
    if (labels !== undefined && labels.length !== rows) {
      throw new BbError(BbErrorCode.InvalidArgument, `${labels.length} labels for ${rows} rows`);
    }
    const x = tensorHandle(bb, features, [rows, dim]);
    const y = labels === undefined ? 0 : tensorHandle(bb, labels, [rows]);
    try {
      return new Dataset(bb, bb.check(bb.exports.bb_wasm_dataset_from_tensors(x, y)));
    } finally {
      bb.exports.bb_wasm_tensor_free(x);
      if (y !== 0) bb.exports.bb_wasm_tensor_free(y);
    }
  }

  /** A new data set of the given rows, in that order. */
  subset(rows: readonly number[]): Dataset {
    const bb = this.#bb;
    const indices = new Uint32Array(rows);
    const handle = bb.withBytes(new Uint8Array(indices.buffer), (ptr) =>
      bb.check(bb.exports.bb_wasm_dataset_subset(this.handle, ptr, indices.length)),
    );
    return new Dataset(bb, handle);
  }

  /** A copy of the features as a [rows, dim] tensor. */
  features(): HostTensor<'float'> {
    return { dtype: 'float', dims: [this.rows, this.dim], data: this.#copy(0) };
  }

  /** A copy of the labels as a [rows] tensor. */
  labels(): HostTensor<'float'> {
    return { dtype: 'float', dims: [this.rows], data: this.#copy(1) };
  }

  #copy(labels: 0 | 1): Float32Array {
    const bb = this.#bb;
    const tensor = bb.check(bb.exports.bb_wasm_dataset_tensor(this.handle, labels));
    try {
      const ptr = bb.checkPointer(bb.exports.bb_wasm_tensor_data(tensor));
      const n = bb.check(bb.exports.bb_wasm_tensor_nbytes(tensor)) / 4;
      return new Float32Array(bb.exports.memory.buffer, ptr, n).slice();
    } finally {
      bb.exports.bb_wasm_tensor_free(tensor);
    }
  }

  /** The handle (for NodeOptions.datasets); throws once freed. */
  get handle(): number {
    if (this.#handle === 0) throw new BbError(BbErrorCode.InvalidArgument, 'the data set was freed');
    return this.#handle;
  }

  free(): void {
    if (this.#handle === 0) return;
    const handle = this.#handle;
    this.#handle = 0;
    this.#bb.check(this.#bb.exports.bb_wasm_dataset_free(handle));
  }
}

function tensorHandle(bb: Bb, data: Float32Array, dims: readonly number[]): number {
  const dimBytes = new Uint8Array(dims.length * 8);
  const view = new DataView(dimBytes.buffer);
  dims.forEach((d, i) => view.setBigInt64(i * 8, BigInt(d), true));
  const handle = bb.withBytes(dimBytes, (ptr) => bb.check(bb.exports.bb_wasm_tensor_new(1, dims.length, ptr)));
  const ptr = bb.checkPointer(bb.exports.bb_wasm_tensor_data(handle));
  new Float32Array(bb.exports.memory.buffer, ptr, data.length).set(data);
  return handle;
}

/**
 * The federated examples' split of labelled rows: a stratified test share and the rest
 * dealt into `shards` client shards, each holding `classesPerShard` classes (label skew) or,
 * with 0, an even IID deal; or, with `shardClasses`, the classes each shard is given.
 * Deterministic in `seed`.
 */
export function splitForFederation(
  labels: Float32Array,
  options: { shards: number; testShare?: number; classesPerShard?: number; shardClasses?: readonly (readonly number[])[]; seed?: number },
): { test: number[]; shards: number[][] } {
  const { shards, shardClasses } = options;
  const testShare = options.testShare ?? 0.25;
  const classesPerShard = options.classesPerShard ?? 0;
  if (shardClasses !== undefined && shardClasses.length !== shards) {
    throw new BbError(BbErrorCode.InvalidArgument, `splitForFederation: shardClasses lists ${shardClasses.length} shards, not ${shards}`);
  }
  let state = (options.seed ?? 1) >>> 0 || 1;
  const random = (): number => {
    state ^= state << 13;
    state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    return state / 4294967296;
  };
  const shuffle = <T>(items: T[]): T[] => {
    for (let i = items.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [items[i], items[j]] = [items[j]!, items[i]!];
    }
    return items;
  };
  const byClass = new Map<number, number[]>();
  labels.forEach((label, row) => {
    const list = byClass.get(label) ?? [];
    list.push(row);
    byClass.set(label, list);
  });
  const classes = [...byClass.keys()].sort((a, b) => a - b);
  const test: number[] = [];
  const train = new Map<number, number[]>();
  for (const label of classes) {
    const rows = shuffle(byClass.get(label)!);
    const cut = Math.round(rows.length * testShare);
    test.push(...rows.slice(0, cut));
    train.set(label, rows.slice(cut));
  }
  const out: number[][] = Array.from({ length: shards }, () => []);
  if (classesPerShard <= 0 && shardClasses === undefined) {
    const all = shuffle(classes.flatMap((label) => train.get(label)!));
    all.forEach((row, i) => out[i % shards]!.push(row));
  } else {
    // shard i takes classes i·k .. i·k+k-1 (mod classes); each class is shared evenly by
    // the shards that take it
    const takers = new Map<number, number[]>(classes.map((label) => [label, []]));
    for (let s = 0; s < shards; s++) {
      const given = shardClasses === undefined
        ? Array.from({ length: classesPerShard }, (_, k) => classes[(s * classesPerShard + k) % classes.length]!)
        : [...new Set(shardClasses[s])];
      for (const label of given) {
        const who = takers.get(label);
        if (who === undefined) throw new BbError(BbErrorCode.InvalidArgument, `splitForFederation: shard ${s} is given class ${label}, which no row has`);
        who.push(s);
      }
    }
    for (const label of classes) {
      const who = takers.get(label)!;
      if (who.length === 0) continue;
      train.get(label)!.forEach((row, i) => out[who[i % who.length]!]!.push(row));
    }
  }
  return { test, shards: out.map((rows) => shuffle(rows)) };
}
