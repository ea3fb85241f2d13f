/**
 * Running an ONNX model's main graph on bb.wasm's CPU backend. A session is prepared once
 * from an {@link OnnxModel} (every node checked to be supported, nodes ordered, memory
 * planned) and then run any number of times on {@link Tensor}s.
 */
import type { Bb } from './bb.js';
import { dtypeInfo, isDType, type DType, type DTypeArrays, type TensorArray } from './dtype.js';
import { BbError, BbErrorCode } from './errors.js';
import type { OnnxModel } from './model.js';
import { checkedDims, describeValue, handleShape, Tensor } from './tensor.js';

const utf8 = new TextEncoder();
const HANDLE_BYTES = 4;

/** An operator of the CPU backend, as {@link CpuSession.ops} lists them. */
export interface CpuOp {
  /** The ai.onnx op_type, e.g. `MatMul`. */
  readonly name: string;
  /** The element types it accepts, by their DType names (`float`, `int64`, ...). */
  readonly types: readonly string[];
}

/** An input of {@link CpuSession.runArrays}: the element type, the elements and the shape, as `Tensor.from` takes them. */
export interface ArrayInput<D extends DType = DType> {
  readonly dtype: D;
  readonly data: DTypeArrays[D];
  readonly dims: readonly number[];
}

/** An output of {@link CpuSession.runArrays}, copied out of the module: it stays valid whatever the module does next. */
export interface ArrayOutput<D extends DType = DType> {
  readonly dtype: D;
  readonly dims: readonly number[];
  readonly data: DTypeArrays[D];
}

/** A tensor the session keeps in module memory for one input of runArrays, and a typed view of its elements. */
interface StagedInput {
  readonly tensor: Tensor;
  /** The elements' address and count (a view's own offset reads 0 once its buffer is detached). */
  readonly ptr: number;
  readonly length: number;
  /** Over the module's memory buffer of the last run; made again when the memory has grown since. */
  elements: TensorArray;
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
  /** runArrays's input tensors by input name, written in place run after run while their type and dims stay the same. */
  readonly #staged = new Map<string, StagedInput>();

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
    const names = Object.keys(inputs);
    const tensors = names.map((name) => inputs[name] as Tensor);
    for (let i = 0; i < names.length; i++) {
      const tensor = tensors[i] as Tensor;
      if (tensor.bb !== this.#bb) {
        throw new BbError(BbErrorCode.InvalidArgument, `CpuSession.run: input ${names[i]} lives in another bb.wasm instance`);
      }
      if (tensor.freed) throw new BbError(BbErrorCode.InvalidArgument, `CpuSession.run: input ${names[i]}: the tensor was freed`);
    }
    return this.#adoptOutputs(this.#execute(session, names, tensors));
  }

  /**
   * Runs the graph on typed arrays and returns typed arrays: each input is copied once into
   * a tensor the session keeps for that input name (made on the first run and again when
   * the input's type or dims change; freed with the session; an initializer overridden by
   * name gets a tensor for the run alone), and each output is copied
   * once out of the module, then released there. `into` may give, by output name, a typed
   * array of the output's type and element count to copy that output into (the returned
   * `data` is then that array): with every output given, a steady run allocates no array
   * buffer in JavaScript and nothing in the module beyond what the graph's operators do.
   * Nothing returned points into module memory. Throws a {@link BbError} for an input of
   * the wrong typed array or element count (a detached buffer says so), an `into` array
   * that does not fit its output (before any is written) or names no output, and whatever
   * {@link run} refuses.
   */
  runArrays(
    inputs: Readonly<Record<string, ArrayInput>>,
    into?: Readonly<Record<string, TensorArray>>,
  ): Record<string, ArrayOutput> {
    const session = this.#liveHandle('runArrays');
    if (into !== undefined) {
      for (const name in into) {
        if (Object.hasOwn(into, name) && !this.outputNames.includes(name)) {
          throw new BbError(BbErrorCode.NotFound, `CpuSession.runArrays: into names ${name}, which is not an output of the graph`);
        }
      }
    }
    const names = Object.keys(inputs);
    // Only the graph's inputs keep a tensor between runs, so that names the run refuses (or
    // initializers overridden) hold no memory after it.
    const tensors: Tensor[] = [];
    const temporaries: Tensor[] = [];
    let handles: number[];
    try {
      for (const name of names) {
        const kept = this.inputNames.includes(name);
        const tensor = this.#stage(name, inputs[name] as ArrayInput, kept);
        tensors.push(tensor);
        if (!kept) temporaries.push(tensor);
      }
      handles = this.#execute(session, names, tensors);
    } finally {
      for (const tensor of temporaries) tensor.free();
    }
    const outputs: Record<string, ArrayOutput> = {};
    try {
      // every into array is checked before any is written, so that a refusal leaves them as they were
      const found = handles.map((handle, i) => {
        const name = this.outputNames[i] as string;
        return this.#outputElements(handle, name, into !== undefined && Object.hasOwn(into, name) ? into[name] : undefined);
      });
      for (let i = 0; i < found.length; i++) {
        const name = this.outputNames[i] as string;
        // A graph may list one value as two outputs; the first copy stands for both.
        if (Object.hasOwn(outputs, name)) continue;
        const output = copyOut(found[i] as OutputElements);
        // an own property even for the name __proto__, which assignment would not make
        if (name === '__proto__') Object.defineProperty(outputs, name, { value: output, enumerable: true, writable: true, configurable: true });
        else outputs[name] = output;
      }
      return outputs;
    } finally {
      for (const handle of handles) this.#bb.exports.bb_wasm_tensor_free(handle);
    }
  }

  /**
   * The tensor runArrays passes for the input `name`, holding a copy of `input`'s elements:
   * with `kept`, the session's tensor for that name (made again when the type or dims
   * change); otherwise a new one, for the caller to free.
   */
  #stage(name: string, input: ArrayInput, kept: boolean): Tensor {
    const where = `CpuSession.runArrays: input ${name}`;
    if (input === null || typeof input !== 'object') {
      throw new BbError(BbErrorCode.InvalidArgument, `${where} is ${input === null ? 'null' : describeValue(input)}, not { dtype, data, dims }`);
    }
    const { dtype, data, dims } = input;
    if (typeof dtype !== 'string' || !isDType(dtype)) {
      throw new BbError(BbErrorCode.Type, `${where}: ${String(dtype)} is not an element type`);
    }
    const info = dtypeInfo(dtype);
    if (!(data instanceof info.array)) {
      throw new BbError(BbErrorCode.Type, `${where}: ${dtype} tensors take a ${info.array.name}, got ${describeValue(data)}`);
    }
    if (!Array.isArray(dims)) throw new BbError(BbErrorCode.InvalidArgument, `${where}: dims is ${describeValue(dims)}, not an array`);
    const staged = kept ? this.#staged.get(name) : undefined;
    if (staged !== undefined && staged.tensor.dtype === dtype && sameDims(staged.tensor.dims, dims)) {
      if (data.length !== staged.length) throw lengthError(where, dims, staged.length, data);
      const memory = this.#bb.exports.memory.buffer;
      if (staged.elements.buffer !== memory) staged.elements = new info.array(memory, staged.ptr, staged.length);
      (staged.elements as { set(array: TensorArray): void }).set(data);
      return staged.tensor;
    }
    const expected = checkedDims(where, dims).reduce((product, dim) => product * dim, 1) * info.lanes;
    if (data.length !== expected) throw lengthError(where, dims, expected, data);
    if (staged !== undefined) {
      this.#staged.delete(name);
      staged.tensor.free();
    }
    const tensor = Tensor.from(this.#bb, dtype, data, dims);
    if (kept) {
      const elements = tensor.view();
      this.#staged.set(name, { tensor, ptr: elements.byteOffset, length: elements.length, elements });
    }
    return tensor;
  }

  /** The output tensor `handle`'s elements in module memory, and `target` once it is known to fit them. */
  #outputElements(handle: number, name: string, target: TensorArray | undefined): OutputElements {
    const bb = this.#bb;
    const { dtype, dims, size } = handleShape(bb, handle);
    const ptr = bb.checkPointer(bb.exports.bb_wasm_tensor_data(handle));
    const view = bb.memoryData();
    const info = dtypeInfo(dtype);
    const elements = new info.array(view.buffer, ptr, size * info.lanes);
    if (target === undefined) return { dtype, dims, elements, target };
    const where = `CpuSession.runArrays: into.${name}`;
    if (!(target instanceof info.array)) {
      throw new BbError(BbErrorCode.Type, `${where}: the output is ${dtype}, which takes a ${info.array.name}, got ${describeValue(target)}`);
    }
    if (target.length !== elements.length) throw lengthError(where, dims, elements.length, target);
    return { dtype, dims, elements, target };
  }

  /**
   * Runs the graph on the tensors, named by `names`, and returns the output handles in
   * graph order (the caller owns them). One block in the module's memory holds the input
   * handles, room for the output handles, then the packed names; it is kept for the next
   * run while the names stay the same.
   */
  #execute(session: number, names: readonly string[], tensors: readonly Tensor[]): number[] {
    const packed = this.#packedNames(names);
    const outputsAt = names.length * HANDLE_BYTES;
    const namesAt = outputsAt + this.outputNames.length * HANDLE_BYTES;
    const ptr = this.#scratchFor(packed, namesAt);
    const bb = this.#bb;
    const layout = bb.memoryData();
    for (let i = 0; i < tensors.length; i++) layout.setInt32(ptr + i * HANDLE_BYTES, (tensors[i] as Tensor).handle, true);
    bb.check(bb.exports.bb_wasm_session_run(session, names.length, ptr + namesAt, packed.length, ptr, ptr + outputsAt));
    const issued = bb.memoryData(); // the run may have grown the memory
    const handles: number[] = [];
    for (let i = 0; i < this.outputNames.length; i++) handles.push(issued.getInt32(ptr + outputsAt + i * HANDLE_BYTES, true));
    return handles;
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

  /** Releases the session and runArrays's input tensors. Its outputs stay valid; calling it again does nothing. */
  free(): void {
    if (this.#handle === 0) return;
    const handle = this.#handle;
    this.#handle = 0;
    this.#freeScratch();
    for (const staged of this.#staged.values()) staged.tensor.free();
    this.#staged.clear();
    this.#bb.check(this.#bb.exports.bb_wasm_session_free(handle));
  }

  /** The input names as the module reads them, each followed by NUL; reused while they stay the same. */
  #packedNames(names: readonly string[]): Uint8Array {
    const last = this.#lastNames;
    let same = last.length === names.length;
    for (let i = 0; same && i < names.length; i++) same = names[i] === last[i];
    if (same) return this.#lastPacked;
    for (const name of names) {
      if (name.includes('\0')) throw new BbError(BbErrorCode.InvalidArgument, 'CpuSession.run: an input name contains NUL');
    }
    const packed = utf8.encode(names.map((name) => `${name}\0`).join(''));
    this.#lastNames = [...names];
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

/** An output's elements, still in module memory, and the caller's array that fits them (if any). */
interface OutputElements {
  readonly dtype: DType;
  readonly dims: readonly number[];
  readonly elements: TensorArray;
  readonly target: TensorArray | undefined;
}

/** The output as an {@link ArrayOutput}: its elements copied into its target, or into a new array. */
function copyOut({ dtype, dims, elements, target }: OutputElements): ArrayOutput {
  if (target === undefined) return { dtype, dims, data: new (dtypeInfo(dtype).array)(elements) };
  (target as { set(array: TensorArray): void }).set(elements);
  return { dtype, dims, data: target };
}

function sameDims(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The error for an array whose element count does not fit dims; a detached buffer is named as such. */
function lengthError(where: string, dims: readonly number[], expected: number, data: TensorArray): BbError {
  const detached = data.length === 0 && expected > 0 && isDetached(data.buffer);
  return new BbError(
    BbErrorCode.InvalidArgument,
    `${where}: dims [${dims.join(',')}] need ${expected} ${data.constructor.name} elements, got ${data.length}` +
      (detached ? ' (its buffer is detached: transferred to a worker or a memory that grew)' : ''),
  );
}

/** Whether an ArrayBuffer was detached (transferred): only a detached buffer refuses slice(). */
function isDetached(buffer: ArrayBufferLike): boolean {
  if (!(buffer instanceof ArrayBuffer) || buffer.byteLength !== 0) return false;
  try {
    buffer.slice(0, 0);
    return false;
  } catch {
    return true;
  }
}
