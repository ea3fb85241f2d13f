/**
 * Training any ONNX model in bb.wasm: a PyTorch (or any) model exported to ONNX is made
 * trainable — gradients and the optimizer are ONNX graphs the module builds and runs
 * (docs/GRAD.md) — and the trained model comes back as plain ONNX that onnxruntime runs.
 *
 * ```ts
 * const trainer = OnnxTrainer.create(bb, onnxBytes, { optimizer: 'adam', lr: 1e-3 });
 * trainer.fit(batches, { epochs: 10 });                 // batches: { x, labels } rows
 * const { score } = trainer.evaluate(testX, testY);     // accuracy for classifiers
 * const trained = trainer.export();                     // ModelProto bytes
 * trainer.free();
 * ```
 *
 * Data are rows: `x` float32 [n, features...] (each row is reshaped to the model's data
 * input, e.g. 64 pixels into [1, 8, 8]; for an int64 or int32 input, such as an
 * Embedding's token ids, whole numbers) and `labels` float32 [n], one per row (class ids
 * for `xent`, targets for `mse` and `bce`). The parameters travel as one flat float32
 * vector in the model's initializer order, so they can be averaged with other peers'.
 * Works in Node, browsers and Workers alike: nothing here touches the DOM.
 */
import type { Bb } from '../engine/bb.js';
import { BbError, BbErrorCode } from '../engine/errors.js';
import type { OnnxModel } from '../engine/model.js';
import { Notices } from '../node/notices.js';
import { Tensor } from '../engine/tensor.js';

/** How a trainer trains (torch.optim's meanings and defaults). */
export interface TrainerOptions {
  /** `xent` softmax cross-entropy on logits (default), `mse`, or `bce` on logits. */
  readonly loss?: 'xent' | 'mse' | 'bce';
  /** Default `adam`. */
  readonly optimizer?: 'sgd' | 'momentum' | 'nesterov' | 'adam' | 'adamw';
  readonly lr?: number;
  readonly momentum?: number;
  readonly beta1?: number;
  readonly beta2?: number;
  readonly eps?: number;
  readonly weightDecay?: number;
  /** Clip the gradients' global L2 norm to this first (0: off). */
  readonly maxGradNorm?: number;
  /** The data input (default: the first graph input that is not an initializer). */
  readonly input?: string;
  /** The output the loss reads (default: the first). */
  readonly output?: string;
  /** Seeds training-mode Dropout masks (step k uses seed + k). */
  readonly seed?: number | bigint;
  /**
   * Initializers never trained (buffers such as an input's mean and std; the ones the
   * model's `ai.bytesandbrains.buffers` metadata names are never trained either). A
   * parameter the loss reaches only through an operator without a gradient must be frozen
   * here, or `create` refuses the model naming the operator.
   */
  readonly freeze?: readonly string[];
  /**
   * The most bytes the values of one run (a step's training and optimizer graphs, a
   * prediction) may hold at once; default 1 GiB. A step past it throws a {@link BbError}
   * (`Limit`) naming the node, and changes nothing.
   */
  readonly maxTotalBytes?: number;
}

/** Rows as JavaScript arrays (copied in for the step) or as tensors already in bb.wasm. */
export interface Batch {
  readonly x: Float32Array | Tensor<'float'>;
  readonly labels: Float32Array | Tensor<'float'>;
}

export interface StepResult {
  readonly loss: number;
  /** False when the loss or a gradient was not finite: the step changed nothing. */
  readonly applied: boolean;
  /** Why a step changed nothing: the first value of the batch that is not finite, when there is one. */
  readonly reason?: string;
}

export interface FitOptions {
  /** Passes over `batches` when it is an array (default 1); an iterator is read once. */
  readonly epochs?: number;
  /** Called after every step. */
  readonly onStep?: (step: number, result: StepResult) => void;
}

export interface FitResult {
  readonly steps: number;
  readonly refused: number;
  /** The mean loss of the last epoch's applied steps. */
  readonly meanLoss: number;
}

export interface EvaluateResult {
  /** Accuracy (xent: the largest output at the label; bce: logit > 0 against label > 0.5); mse: the mean squared error. */
  readonly score: number;
  readonly loss: number;
}

export interface TrainerStats {
  readonly steps: number;
  readonly refused: number;
  /** Bytes of parameters, running statistics and optimizer state. */
  readonly heldBytes: number;
  /** The most bytes a step had in use (tensors and scratch). */
  readonly stepInUseBytes: number;
  /** The most bytes the steps' recycling allocator held (free ones kept for reuse included). */
  readonly stepHeldBytes: number;
  /** Requests that reached the module's allocator: constant once warm. */
  readonly allocations: number;
}

const KEY_OF: Readonly<Record<string, string>> = {
  weightDecay: 'weight_decay',
  maxGradNorm: 'max_grad_norm',
  maxTotalBytes: 'max_total_bytes',
};

/**
 * The OnnxModel engine's config text for options (numbers and names; seed goes
 * separately): what a trainer is made with, and what an OnnxModel slot is bound with.
 */
export function trainerConfigText(options: TrainerOptions, who = 'OnnxTrainer'): string {
  const parts: string[] = [];
  for (const [key, value] of Object.entries(options)) {
    if (key === 'seed' || value === undefined) continue;
    if (key === 'freeze') {
      parts.push(`freeze=${frozenText(value as readonly string[], who)}`);
      continue;
    }
    if (typeof value === 'number' && !Number.isFinite(value)) {
      throw new BbError(BbErrorCode.InvalidArgument, `${who}: ${key} is ${value}`);
    }
    const text = String(value);
    if (/[,=\0]/.test(text)) throw new BbError(BbErrorCode.InvalidArgument, `${who}: ${key} "${text}" holds , = or NUL`);
    parts.push(`${KEY_OF[key] ?? key}=${text}`);
  }
  return parts.join(',');
}

/** The freeze list as the engine's config takes it: names joined by `|`. */
function frozenText(names: readonly string[], who: string): string {
  for (const name of names) {
    if (typeof name !== 'string' || name === '' || /[|,=\0]/.test(name)) {
      throw new BbError(BbErrorCode.InvalidArgument, `${who}: freeze name "${String(name)}" is empty or holds | , = or NUL`);
    }
  }
  return names.join('|');
}

export class OnnxTrainer {
  readonly #bb: Bb;
  #handle: number;
  /** Tensors in the module that batches given as arrays are copied into, kept while the
   * batch shape stays the same, so a step allocates nothing on either side. */
  #stagedX: Tensor<'float'> | undefined;
  #stagedLabels: Tensor<'float'> | undefined;
  /** Floats in the flat parameter vector. */
  readonly parameterCount: number;
  readonly #notices = new Notices(undefined);

  private constructor(bb: Bb, handle: number) {
    this.#bb = bb;
    this.#handle = handle;
    this.parameterCount = bb.check(bb.exports.bb_wasm_trainer_param_count(handle));
  }

  /**
   * Makes a model trainable: its ModelProto bytes (or a decoded {@link OnnxModel}). Throws a
   * {@link BbError} naming what cannot be trained (an operator without a gradient, a
   * parameter the loss reaches only through one, a data input that is not float32, int64
   * or int32, an unknown option or frozen name).
   */
  static create(bb: Bb, model: Uint8Array | OnnxModel, options: TrainerOptions = {}): OnnxTrainer {
    const bytes = model instanceof Uint8Array ? model : model.encode();
    const seed = BigInt(options.seed ?? 0);
    const handle = bb.withBytes(bytes, (ptr, len) =>
      bb.withStrings([trainerConfigText(options)], (config) => bb.check(bb.exports.bb_wasm_trainer_new(ptr, len, config ?? 0, seed))),
    );
    return new OnnxTrainer(bb, handle);
  }

  /**
   * One optimizer step on a batch. A step whose loss or gradient is not finite changes
   * nothing (`applied: false`, with the `reason` and a notice to the default logger).
   */
  step(batch: Batch): StepResult {
    const handle = this.#live('step');
    const result = this.#withRows('step', batch.x, batch.labels, (x, labels) => {
      const applied = this.#bb.check(this.#bb.exports.bb_wasm_trainer_step(handle, x, labels)) === 1;
      return { loss: this.#bb.exports.bb_wasm_trainer_last_loss(handle), applied };
    });
    if (result.applied) return result;
    const reason = `the loss or a gradient was not finite, so the step changed nothing${nonFinite(batch)}`;
    this.#notices.notice('step-skipped', `OnnxTrainer.step: ${reason}`);
    return { ...result, reason };
  }

  /** Steps over the batches (`epochs` times when they are an array). */
  fit(batches: Iterable<Batch>, options: FitOptions = {}): FitResult {
    const epochs = Array.isArray(batches) ? (options.epochs ?? 1) : 1;
    let steps = 0;
    let refused = 0;
    let meanLoss = Number.NaN;
    for (let epoch = 0; epoch < epochs; epoch++) {
      let total = 0;
      let applied = 0;
      for (const batch of batches) {
        const result = this.step(batch);
        steps++;
        if (result.applied) total += result.loss, applied++;
        else refused++;
        options.onStep?.(steps, result);
      }
      meanLoss = applied > 0 ? total / applied : Number.NaN;
    }
    return { steps, refused, meanLoss };
  }

  /** The score and the mean loss on labelled rows. */
  evaluate(x: Float32Array | Tensor<'float'>, labels: Float32Array | Tensor<'float'>): EvaluateResult {
    const handle = this.#live('evaluate');
    return this.#withRows('evaluate', x, labels, (xh, yh) => {
      this.#bb.check(this.#bb.exports.bb_wasm_trainer_evaluate(handle, xh, yh));
      const view = new DataView(this.#bb.resultBytes().buffer);
      return { score: view.getFloat32(0, true), loss: view.getFloat32(4, true) };
    });
  }

  /** The model's first output for rows x (e.g. logits [n, classes]), flat. */
  predict(x: Float32Array | Tensor<'float'>, rows?: number): Float32Array {
    const handle = this.#live('predict');
    const owned = x instanceof Float32Array ? this.#rows('predict', x, rows ?? 1) : undefined;
    try {
      const out = Tensor.adopt(this.#bb, this.#bb.check(this.#bb.exports.bb_wasm_trainer_predict(handle, (owned ?? (x as Tensor)).handle)));
      try {
        return out.toArray() as Float32Array;
      } finally {
        out.free();
      }
    } finally {
      owned?.free();
    }
  }

  /** A copy of the flat parameter vector. */
  parameters(): Float32Array {
    const out = Tensor.adopt(this.#bb, this.#bb.check(this.#bb.exports.bb_wasm_trainer_params(this.#live('parameters'))));
    try {
      return out.toArray() as Float32Array;
    } finally {
      out.free();
    }
  }

  /** Replaces the parameters (e.g. with a federation's average). */
  setParameters(params: Float32Array): void {
    const handle = this.#live('setParameters');
    const t = Tensor.from(this.#bb, 'float', params, [params.length]);
    try {
      this.#bb.check(this.#bb.exports.bb_wasm_trainer_load_params(handle, t.handle));
    } finally {
      t.free();
    }
  }

  /** The trained model as plain ONNX (inference form; initializers keep their names). */
  export(): Uint8Array {
    this.#bb.check(this.#bb.exports.bb_wasm_trainer_export(this.#live('export')));
    return this.#bb.resultBytes();
  }

  /** Every tensor the trainer holds (parameters, statistics, optimizer state). */
  save(): Uint8Array {
    this.#bb.check(this.#bb.exports.bb_wasm_trainer_save(this.#live('save')));
    return this.#bb.resultBytes();
  }

  /** Resumes from what {@link save} gave (a trainer of the same model). */
  restore(state: Uint8Array): void {
    const handle = this.#live('restore');
    this.#bb.withBytes(state, (ptr, len) => this.#bb.check(this.#bb.exports.bb_wasm_trainer_restore(handle, ptr, len)));
  }

  stats(): TrainerStats {
    this.#bb.check(this.#bb.exports.bb_wasm_trainer_stats(this.#live('stats')));
    const view = new DataView(this.#bb.resultBytes().buffer);
    const at = (i: number): number => Number(view.getBigUint64(i * 8, true));
    return { steps: at(0), refused: at(1), heldBytes: at(2), stepInUseBytes: at(3), stepHeldBytes: at(4), allocations: at(5) };
  }

  /** Releases the trainer. Calling it again does nothing. */
  free(): void {
    if (this.#handle === 0) return;
    const handle = this.#handle;
    this.#handle = 0;
    this.#stagedX?.free();
    this.#stagedLabels?.free();
    this.#bb.check(this.#bb.exports.bb_wasm_trainer_free(handle));
  }

  get freed(): boolean {
    return this.#handle === 0;
  }

  /** Runs use(x, labels) on tensor handles; JavaScript arrays are staged into the module. */
  #withRows<T>(operation: string, x: Float32Array | Tensor<'float'>, labels: Float32Array | Tensor<'float'>,
    use: (x: number, labels: number) => T): T {
    const rows = labels instanceof Float32Array ? labels.length : (labels.dims[0] ?? 0);
    if (x instanceof Float32Array && (rows < 1 || x.length === 0 || x.length % rows !== 0)) {
      throw new BbError(BbErrorCode.InvalidArgument, `OnnxTrainer.${operation}: ${x.length} values are not ${rows} rows: one label per row, and every row as wide`);
    }
    const xh = x instanceof Float32Array ? (this.#stagedX = this.#stage(this.#stagedX, x, [rows, x.length / rows])).handle : x.handle;
    const yh = labels instanceof Float32Array ? (this.#stagedLabels = this.#stage(this.#stagedLabels, labels, [rows])).handle : labels.handle;
    try {
      return use(xh, yh);
    } catch (error) {
      throw x instanceof Float32Array ? rowsAndLabels(operation, error, x.length, rows) : error;
    }
  }

  /** data copied into `into` when it has that shape, else into a new tensor (freeing `into`). */
  #stage(into: Tensor<'float'> | undefined, data: Float32Array, dims: readonly number[]): Tensor<'float'> {
    if (into !== undefined && !into.freed && into.dims.length === dims.length && into.dims.every((d, i) => d === dims[i])) {
      const ptr = this.#bb.checkPointer(this.#bb.exports.bb_wasm_tensor_data(into.handle));
      this.#bb.memory().set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), ptr);
      return into;
    }
    into?.free();
    return Tensor.from(this.#bb, 'float', data, dims);
  }

  /** x as a [rows, features] tensor. */
  #rows(operation: string, x: Float32Array, rows: number): Tensor<'float'> {
    if (rows < 1 || x.length === 0 || x.length % rows !== 0) {
      throw new BbError(BbErrorCode.InvalidArgument, `OnnxTrainer.${operation}: ${x.length} values are not ${rows} rows`);
    }
    return Tensor.from(this.#bb, 'float', x, [rows, x.length / rows]);
  }

  #live(operation: string): number {
    if (this.#handle === 0) throw new BbError(BbErrorCode.InvalidArgument, `OnnxTrainer.${operation}: the trainer was freed`);
    return this.#handle;
  }
}

/**
 * Rows are counted by the labels, so rows and labels that disagree reach the engine as rows
 * of another width; told by the engine's width, say what is wrong with the batch instead.
 */
function rowsAndLabels(operation: string, error: unknown, values: number, labels: number): unknown {
  const match = error instanceof BbError ? /do not fit input (\S+), which takes (\d+) per row/.exec(error.message) : null;
  if (match === null) return error;
  const width = Number(match[2]);
  if (width < 1 || values % width !== 0) {
    return new BbError(error instanceof BbError ? error.code : BbErrorCode.Type, `OnnxTrainer.${operation}: x holds ${values} values, which are not whole rows of ${width} (input ${match[1]} takes ${width} per row)`);
  }
  const rows = values / width;
  if (rows === labels) return error;
  return new BbError((error as BbError).code, `OnnxTrainer.${operation}: x holds ${rows} rows of ${width} values (input ${match[1]}), but ${labels} labels came with them: give one label per row`);
}

/** Where the batch holds a value that is not finite, as text (empty when it holds none, or is in bb.wasm). */
function nonFinite(batch: Batch): string {
  for (const [name, values] of [['x', batch.x], ['labels', batch.labels]] as const) {
    if (!(values instanceof Float32Array)) continue;
    const at = values.findIndex((v) => !Number.isFinite(v));
    if (at < 0) continue;
    const rows = batch.labels instanceof Float32Array ? batch.labels.length : 0;
    const width = name === 'x' && rows > 0 ? values.length / rows : 1;
    const where = name === 'x' && Number.isInteger(width) ? `row ${Math.floor(at / width)}, value ${at % width}` : `${at}`;
    return `: ${name}[${where}] is ${values[at]}`;
  }
  return '';
}
