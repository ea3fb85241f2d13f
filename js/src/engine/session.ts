/**
 * Running an ONNX model's main graph on bb.wasm's CPU backend. A session is prepared once
 * from an {@link OnnxModel} (every node checked to be supported, nodes ordered, memory
 * planned) and then run any number of times on {@link Tensor}s.
 */
import type { Bb } from './bb.js';
import { BbError, BbErrorCode } from './errors.js';
import type { OnnxModel } from './model.js';
import { Tensor } from './tensor.js';

const utf8 = new TextEncoder();
const HANDLE_BYTES = 4;

/** An operator of the CPU backend, as {@link CpuSession.ops} lists them. */
export interface CpuOp {
  /** The ai.onnx op_type, e.g. `MatMul`. */
  readonly name: string;
  /** The element types it accepts, by their DType names (`float`, `int64`, ...). */
  readonly types: readonly string[];
}

export class CpuSession {
  readonly #bb: Bb;
  #handle: number;
  /** The names {@link CpuSession.run} needs a tensor for: graph inputs that are not initializers. */
  readonly inputNames: readonly string[];
  /** The names of the tensors {@link CpuSession.run} returns, in graph order. */
  readonly outputNames: readonly string[];
  /** The input names of the last run and their packed UTF-8 (NUL after each): most callers pass the same names every run. */
  #lastNames: readonly string[] = [];
  #lastPacked: Uint8Array = new Uint8Array(0);
  /** {@link CpuSession.run}'s block in the module's memory (0: none yet), and the packed names it holds. */
  #scratch = 0;
  #scratchNames: Uint8Array | undefined;

  /**
   * Prepares the model's main graph. Throws a {@link BbError} (`Unsupported`) naming the
   * first node whose operator the backend lacks. The model may be freed before the
   * session: the session keeps what it needs of it.
   */
  constructor(bb: Bb, model: OnnxModel) {
    if (model.freed) throw new BbError(BbErrorCode.InvalidArgument, 'CpuSession: the model was freed');
    this.#bb = bb;
    this.#handle = bb.check(bb.exports.bb_wasm_session_new(model.handle));
    try {
      this.inputNames = this.#names(bb.exports.bb_wasm_session_input_count, bb.exports.bb_wasm_session_input_name);
      this.outputNames = this.#names(bb.exports.bb_wasm_session_output_count, bb.exports.bb_wasm_session_output_name);
    } catch (error) {
      this.free();
      throw error;
    }
  }

  /** Every operator the CPU backend implements, in alphabetical order. */
  static ops(bb: Bb): CpuOp[] {
    const count = bb.exports.bb_wasm_cpu_op_count();
    return Array.from({ length: count }, (_, i) => ({
      name: bb.readCString(bb.checkPointer(bb.exports.bb_wasm_cpu_op_name(i))),
      types: bb
        .readCString(bb.checkPointer(bb.exports.bb_wasm_cpu_op_types(i)))
        .split(',')
        .filter((type) => type !== ''),
    }));
  }

  /** The module's handle for this session; 0 once freed. */
  get handle(): number {
    return this.#handle;
  }

  /** True once {@link CpuSession.free} has been called. */
  get freed(): boolean {
    return this.#handle === 0;
  }

  /** Peak bytes of intermediate tensor data alive at once during the last run. */
  get peakBytes(): number {
    return this.#bb.check(this.#bb.exports.bb_wasm_session_peak_bytes(this.#liveHandle('peakBytes')));
  }

  /**
   * Runs the graph on the given inputs, by name (every one of {@link inputNames}; an
   * initializer may be overridden too). Returns one new tensor per output, by name: the
   * caller owns them and frees them. An output may share memory with an input (Identity,
   * Reshape and other views do). Throws a {@link BbError} with the library's message for
   * an unknown or missing input, a wrong element type, or a node that fails (shapes that
   * do not broadcast, ...).
   */
  run(inputs: Readonly<Record<string, Tensor>>): Record<string, Tensor> {
    const session = this.#liveHandle('run');
    const entries = Object.entries(inputs);
    for (const [name, tensor] of entries) {
      if (tensor.bb !== this.#bb) {
        throw new BbError(BbErrorCode.InvalidArgument, `CpuSession.run: input ${name} lives in another bb.wasm instance`);
      }
      if (tensor.freed) throw new BbError(BbErrorCode.InvalidArgument, `CpuSession.run: input ${name}: the tensor was freed`);
    }
    // One block in the module's memory: the input handles, room for the output handles,
    // then the packed names. It is kept for the next run while the names stay the same.
    const names = this.#packedNames(entries);
    const outputsAt = entries.length * HANDLE_BYTES;
    const namesAt = outputsAt + this.outputNames.length * HANDLE_BYTES;
    const ptr = this.#scratchFor(names, namesAt);
    const bb = this.#bb;
    const layout = bb.memoryData();
    for (let i = 0; i < entries.length; i++) layout.setInt32(ptr + i * HANDLE_BYTES, (entries[i] as [string, Tensor])[1].handle, true);
    bb.check(bb.exports.bb_wasm_session_run(session, entries.length, ptr + namesAt, names.length, ptr, ptr + outputsAt));
    const issued = bb.memoryData(); // the run may have grown the memory
    const handles: number[] = [];
    for (let i = 0; i < this.outputNames.length; i++) handles.push(issued.getInt32(ptr + outputsAt + i * HANDLE_BYTES, true));
    return this.#adoptOutputs(handles);
  }

  /** The run block's address, with `names` at namesAt; allocated again when the names change. */
  #scratchFor(names: Uint8Array, namesAt: number): number {
    if (this.#scratch !== 0 && this.#scratchNames === names) return this.#scratch;
    this.#freeScratch();
    const bb = this.#bb;
    const ptr = bb.exports.bb_wasm_alloc(namesAt + names.length) >>> 0;
    if (ptr === 0) throw bb.lastError(BbErrorCode.NoMem);
    bb.memory().set(names, ptr + namesAt);
    this.#scratch = ptr;
    this.#scratchNames = names;
    return ptr;
  }

  #freeScratch(): void {
    if (this.#scratch !== 0) this.#bb.exports.bb_wasm_free(this.#scratch);
    this.#scratch = 0;
    this.#scratchNames = undefined;
  }

  /** Releases the session. Its outputs stay valid; calling it again does nothing. */
  free(): void {
    if (this.#handle === 0) return;
    const handle = this.#handle;
    this.#handle = 0;
    this.#freeScratch();
    this.#bb.check(this.#bb.exports.bb_wasm_session_free(handle));
  }

  /** The input names as the module reads them, each followed by NUL; reused while they stay the same. */
  #packedNames(entries: readonly (readonly [string, Tensor])[]): Uint8Array {
    const last = this.#lastNames;
    let same = last.length === entries.length;
    for (let i = 0; same && i < entries.length; i++) same = (entries[i] as readonly [string, Tensor])[0] === last[i];
    if (same) return this.#lastPacked;
    for (const [name] of entries) {
      if (name.includes('\0')) throw new BbError(BbErrorCode.InvalidArgument, 'CpuSession.run: an input name contains NUL');
    }
    const packed = utf8.encode(entries.map(([name]) => `${name}\0`).join(''));
    this.#lastNames = entries.map(([name]) => name);
    this.#lastPacked = packed;
    return packed;
  }

  /** The output handles as tensors by name; if one cannot be read, every one is freed. */
  #adoptOutputs(handles: readonly number[]): Record<string, Tensor> {
    const outputs: Record<string, Tensor> = {};
    let next = 0;
    try {
      for (; next < handles.length; next++) {
        const tensor = Tensor.adopt(this.#bb, handles[next] as number);
        const name = this.outputNames[next] as string;
        // A graph may list one value as two outputs; the first tensor stands for both.
        if (Object.hasOwn(outputs, name)) tensor.free();
        // an own property even for the name __proto__, which assignment would not make
        else if (name === '__proto__') Object.defineProperty(outputs, name, { value: tensor, enumerable: true, writable: true, configurable: true });
        else outputs[name] = tensor;
      }
      return outputs;
    } catch (error) {
      for (const tensor of Object.values(outputs)) tensor.free();
      for (const handle of handles.slice(next + 1)) this.#bb.exports.bb_wasm_tensor_free(handle);
      throw error;
    }
  }

  #names(count: (session: number) => number, name: (session: number, index: number) => number): string[] {
    const n = this.#bb.check(count(this.#handle));
    return Array.from({ length: n }, (_, i) => this.#bb.readCString(this.#bb.checkPointer(name(this.#handle, i))));
  }

  #liveHandle(operation: string): number {
    if (this.#handle === 0) {
      throw new BbError(BbErrorCode.InvalidArgument, `CpuSession.${operation}: the session was freed`);
    }
    return this.#handle;
  }
}
