/**
 * An ONNX model held by bb.wasm: decoded once from ModelProto bytes, then encoded or
 * summarised without crossing the boundary again. The model lives in the module's
 * memory until {@link OnnxModel.free} is called; JavaScript's garbage collector does not
 * see it.
 */
import type { Bb } from './bb.js';
import { BbError, BbErrorCode } from './errors.js';

/** Op counts of a graph or function, by domain and op type. */
export interface OpCount {
  readonly domain: string;
  readonly op_type: string;
  readonly count: number;
}

export interface KeyValue {
  readonly key: string;
  readonly value: string;
}

/** What {@link OnnxModel.summary} reports. */
export interface ModelSummary {
  readonly ir_version: number | null;
  readonly producer_name: string | null;
  readonly producer_version: string | null;
  readonly domain: string | null;
  readonly opset_import: readonly { readonly domain: string; readonly version: number }[];
  readonly metadata: readonly KeyValue[];
  readonly graph: {
    readonly name: string | null;
    readonly nodes: number;
    readonly initializers: number;
    readonly initializer_bytes: number;
    /** Each with its type as text, e.g. "float[3,4,5]". */
    readonly inputs: readonly { readonly name: string; readonly type: string }[];
    readonly outputs: readonly { readonly name: string; readonly type: string }[];
    readonly ops: readonly OpCount[];
    readonly metadata: readonly KeyValue[];
  } | null;
  readonly functions: readonly {
    readonly name: string;
    readonly domain: string | null;
    readonly nodes: number;
    readonly inputs: readonly string[];
    readonly outputs: readonly string[];
    readonly ops: readonly OpCount[];
    readonly metadata: readonly KeyValue[];
  }[];
  /** Bytes of fields the IR does not model, kept for re-encoding. */
  readonly preserved_extra_bytes: number;
}

export class OnnxModel {
  readonly #bb: Bb;
  #handle: number;

  private constructor(bb: Bb, handle: number) {
    this.#bb = bb;
    this.#handle = handle;
  }

  /**
   * Decodes ONNX ModelProto bytes. Throws a {@link BbError} (usually `Malformed`) naming
   * what was wrong and where when the bytes are not a model.
   */
  static decode(bb: Bb, bytes: Uint8Array | ArrayBuffer): OnnxModel {
    const input = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
    const handle = bb.withBytes(input, (ptr, len) => bb.check(bb.exports.bb_wasm_model_decode(ptr, len)));
    return new OnnxModel(bb, handle);
  }

  /** The module's handle for this model; 0 once freed. */
  get handle(): number {
    return this.#handle;
  }

  /** True once {@link OnnxModel.free} has been called. */
  get freed(): boolean {
    return this.#handle === 0;
  }

  /** The model as ONNX ModelProto bytes. */
  encode(): Uint8Array {
    this.#bb.check(this.#bb.exports.bb_wasm_model_encode(this.#liveHandle('encode')));
    return this.#bb.resultBytes();
  }

  /**
   * What the model holds: IR and opset versions, producer, metadata, and the graph and
   * functions with their inputs, outputs and node counts by op type (what
   * `bb inspect --json` prints for a model).
   */
  summary(): ModelSummary {
    this.#bb.check(this.#bb.exports.bb_wasm_model_summary(this.#liveHandle('summary'), 1));
    return JSON.parse(this.#bb.resultText()) as ModelSummary;
  }

  /** The same summary as readable text (what `bb inspect` prints). */
  summaryText(): string {
    this.#bb.check(this.#bb.exports.bb_wasm_model_summary(this.#liveHandle('summaryText'), 0));
    return this.#bb.resultText();
  }

  /** Releases the model's memory in the module. Calling it again does nothing. */
  free(): void {
    if (this.#handle === 0) return;
    const handle = this.#handle;
    this.#handle = 0;
    this.#bb.check(this.#bb.exports.bb_wasm_model_free(handle));
  }

  #liveHandle(operation: string): number {
    if (this.#handle === 0) {
      throw new BbError(BbErrorCode.InvalidArgument, `OnnxModel.${operation}: the model was freed`);
    }
    return this.#handle;
  }
}
