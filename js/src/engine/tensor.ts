/**
 * A dense tensor held by bb.wasm: an element type, a shape and contiguous row-major
 * elements in the module's memory. It lives there until {@link Tensor.free} is called;
 * JavaScript's garbage collector does not see it.
 */
import type { Bb } from './bb.js';
import { dtypeCode, dtypeFromCode, dtypeInfo, type DType, type DTypeArrays } from './dtype.js';
import { BbError, BbErrorCode } from './errors.js';

/**
 * @internal The element type, dims and element count of a tensor handle the module issued,
 * read from the module once.
 */
export function handleShape(bb: Bb, handle: number): { dtype: DType; dims: number[]; size: number } {
  const code = bb.check(bb.exports.bb_wasm_tensor_dtype(handle));
  const dtype = dtypeFromCode(code);
  if (dtype === undefined) throw new BbError(BbErrorCode.Unsupported, `bb.wasm returned a tensor of unknown data type ${code}`);
  const rank = bb.check(bb.exports.bb_wasm_tensor_rank(handle));
  const dimsPtr = bb.checkPointer(bb.exports.bb_wasm_tensor_dims(handle));
  const view = bb.memoryData();
  // int64 dims, never negative: two 32-bit halves, without BigInt (one rounding past 2^53, as Number(bigint))
  const dims: number[] = [];
  let size = 1;
  for (let i = 0; i < rank; i++) {
    const dim = view.getUint32(dimsPtr + i * 8, true) + view.getUint32(dimsPtr + i * 8 + 4, true) * 2 ** 32;
    dims.push(dim);
    size *= dim;
  }
  return { dtype, dims, size };
}

/** The most dims a tensor can have (BB_MAX_RANK). */
export const MAX_RANK = 8;

export class Tensor<D extends DType = DType> {
  readonly #bb: Bb;
  #handle: number;
  readonly #dtype: D;
  readonly #dims: readonly number[];
  readonly #size: number;

  /** `dims` is kept (frozen), not copied: callers pass an array of their own. */
  private constructor(bb: Bb, handle: number, dtype: D, dims: number[], size: number) {
    this.#bb = bb;
    this.#handle = handle;
    this.#dtype = dtype;
    this.#dims = Object.freeze(dims);
    this.#size = size;
  }

  /**
   * A new tensor holding a copy of `data`: `dims.reduce(×)` elements (twice as many array
   * elements for complex types) of the typed array {@link DTypeArrays} names for `dtype`.
   */
  static from<D extends DType>(bb: Bb, dtype: D, data: DTypeArrays[D], dims: readonly number[]): Tensor<D> {
    const info = dtypeInfo(dtype);
    if (!(data instanceof info.array)) {
      throw new BbError(
        BbErrorCode.Type,
        `Tensor.from: ${dtype} tensors take a ${info.array.name}, got ${describeValue(data)}`,
      );
    }
    const expected = checkedDims('Tensor.from', dims).reduce((product, dim) => product * dim, 1) * info.lanes;
    if (data.length !== expected) {
      throw new BbError(
        BbErrorCode.InvalidArgument,
        `Tensor.from: dims [${dims.join(',')}] need ${expected} ${info.array.name} elements, got ${data.length}`,
      );
    }
    // data may view the module's memory, which making the tensor can grow, detaching that
    // view: its bytes are then read where they were, in the memory as it is now
    const inModule = data.buffer === bb.exports.memory.buffer;
    const { byteOffset, byteLength } = data;
    // every byte is written at once below, so the module need not zero them first
    const tensor = Tensor.#make(bb, dtype, dims, 'Tensor.from', false);
    try {
      const ptr = bb.checkPointer(bb.exports.bb_wasm_tensor_data(tensor.handle));
      const memory = bb.memory();
      if (inModule) memory.copyWithin(ptr, byteOffset, byteOffset + byteLength);
      else memory.set(new Uint8Array(data.buffer, byteOffset, byteLength), ptr);
    } catch (error) {
      tensor.free();
      throw error;
    }
    return tensor;
  }

  /** A new tensor of that type and shape, every element zero. */
  static zeros<D extends DType>(bb: Bb, dtype: D, dims: readonly number[]): Tensor<D> {
    return Tensor.#make(bb, dtype, dims, 'Tensor.zeros', true);
  }

  /** A new tensor in the module, its elements zero or (zero false) left for the caller to write. */
  static #make<D extends DType>(bb: Bb, dtype: D, dims: readonly number[], caller: string, zero: boolean): Tensor<D> {
    const shape = BigInt64Array.from(checkedDims(caller, dims), (dim) => BigInt(dim));
    const bytes = new Uint8Array(shape.buffer);
    const make = zero ? bb.exports.bb_wasm_tensor_new : bb.exports.bb_wasm_tensor_new_empty;
    const handle = bb.withBytes(bytes, (ptr) => bb.check(make(dtypeCode(dtype), dims.length, ptr)));
    return new Tensor(bb, handle, dtype, [...dims], dims.reduce((product, dim) => product * dim, 1));
  }

  /**
   * @internal Takes ownership of a tensor handle the module issued (a session's output),
   * reading its type and shape once.
   */
  static adopt(bb: Bb, handle: number): Tensor {
    try {
      const { dtype, dims, size } = handleShape(bb, handle);
      return new Tensor(bb, handle, dtype, dims, size);
    } catch (error) {
      bb.exports.bb_wasm_tensor_free(handle);
      throw error;
    }
  }

  /** The element type. */
  get dtype(): D {
    return this.#dtype;
  }

  /** The shape: one length per dimension (none for a scalar). */
  get dims(): readonly number[] {
    return this.#dims;
  }

  /** The number of elements: the product of the dims. */
  get size(): number {
    return this.#size;
  }

  /** The size of the elements in bytes. */
  get nbytes(): number {
    const info = dtypeInfo(this.#dtype);
    return this.#size * info.lanes * info.array.BYTES_PER_ELEMENT;
  }

  /** The module's handle for this tensor; 0 once freed. */
  get handle(): number {
    return this.#handle;
  }

  /** True once {@link Tensor.free} has been called. */
  get freed(): boolean {
    return this.#handle === 0;
  }

  /** @internal The instance this tensor lives in. */
  get bb(): Bb {
    return this.#bb;
  }

  /** A copy of the elements, which stays valid whatever happens to the tensor. */
  toArray(): DTypeArrays[D] {
    return new (dtypeInfo(this.#dtype).array)(this.#elements('toArray'));
  }

  /**
   * The elements in place, without a copy: writes go into the tensor. Valid only until
   * the next call into the module (which may grow its memory and detach the view) and
   * while the tensor lives.
   */
  view(): DTypeArrays[D] {
    return this.#elements('view');
  }

  /** Releases the tensor's handle (and its memory, unless another tensor shares it). Calling it again does nothing. */
  free(): void {
    if (this.#handle === 0) return;
    const handle = this.#handle;
    this.#handle = 0;
    this.#bb.check(this.#bb.exports.bb_wasm_tensor_free(handle));
  }

  #elements(operation: string): DTypeArrays[D] {
    if (this.#handle === 0) {
      throw new BbError(BbErrorCode.InvalidArgument, `Tensor.${operation}: the tensor was freed`);
    }
    const info = dtypeInfo(this.#dtype);
    const ptr = this.#bb.checkPointer(this.#bb.exports.bb_wasm_tensor_data(this.#handle));
    return new info.array(this.#bb.exports.memory.buffer, ptr, this.#size * info.lanes);
  }
}

/** @internal The dims as given, when each is a non-negative safe integer and there are at most MAX_RANK. */
export function checkedDims(where: string, dims: readonly number[]): readonly number[] {
  if (dims.length > MAX_RANK) {
    throw new BbError(BbErrorCode.Limit, `${where}: rank ${dims.length} exceeds the maximum of ${MAX_RANK}`);
  }
  const bad = dims.findIndex((dim) => !Number.isSafeInteger(dim) || dim < 0);
  if (bad >= 0) {
    throw new BbError(BbErrorCode.InvalidArgument, `${where}: dim ${bad} is ${String(dims[bad])}, not a non-negative integer`);
  }
  return dims;
}

/** @internal What a value is, for an error message: its type or its class. */
export function describeValue(value: unknown): string {
  if (value === null || typeof value !== 'object') return typeof value;
  return value.constructor?.name ?? 'an object';
}
