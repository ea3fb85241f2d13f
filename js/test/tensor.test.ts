/** Tensors in bb.wasm: every element type in and out, shapes, views, and the errors. */
import { beforeAll, beforeEach, describe, expect, test } from 'vitest';

import {
  BbErrorCode,
  DTYPE_NAMES,
  isDType,
  loadBb,
  MAX_RANK,
  OnnxModel,
  Tensor,
  type Bb,
  type DType,
  type DTypeArrays,
} from '../src/index.js';
import { dtypeCode, dtypeFromCode } from '../src/internals.js';
import { addModel, bbErrorOf, wasmBytes } from './support.js';

let module: WebAssembly.Module;
let bb: Bb;

beforeAll(async () => {
  module = await WebAssembly.compile(wasmBytes());
});

beforeEach(async () => {
  bb = await loadBb(module);
});

/**
 * `count` tensor elements of each type, with the awkward values of each: extremes,
 * negative zero, NaN and infinities, float16/bfloat16 bit patterns.
 */
function sample<D extends DType>(dtype: D, count: number): DTypeArrays[D] {
  const pick = <T>(values: readonly T[], i: number): T => values[i % values.length] as T;
  const data: Record<DType, () => DTypeArrays[DType]> = {
    float: () => Float32Array.from({ length: count }, (_, i) => pick([1.5, -0, NaN, Infinity, -3.4e38, 1e-45], i)),
    uint8: () => Uint8Array.from({ length: count }, (_, i) => pick([0, 255, 7], i)),
    int8: () => Int8Array.from({ length: count }, (_, i) => pick([-128, 127, -1], i)),
    uint16: () => Uint16Array.from({ length: count }, (_, i) => pick([0, 65535, 300], i)),
    int16: () => Int16Array.from({ length: count }, (_, i) => pick([-32768, 32767, -2], i)),
    int32: () => Int32Array.from({ length: count }, (_, i) => pick([-(2 ** 31), 2 ** 31 - 1, 5], i)),
    int64: () => BigInt64Array.from({ length: count }, (_, i) => pick([-(2n ** 63n), 2n ** 63n - 1n, -7n], i)),
    bool: () => Uint8Array.from({ length: count }, (_, i) => i % 2),
    float16: () => Uint16Array.from({ length: count }, (_, i) => pick([0x3c00, 0x8000, 0x7e00, 0x7c00, 0x0001], i)),
    double: () => Float64Array.from({ length: count }, (_, i) => pick([Math.PI, -0, NaN, -Infinity, 5e-324], i)),
    uint32: () => Uint32Array.from({ length: count }, (_, i) => pick([0, 2 ** 32 - 1, 9], i)),
    uint64: () => BigUint64Array.from({ length: count }, (_, i) => pick([0n, 2n ** 64n - 1n, 11n], i)),
    complex64: () => Float32Array.from({ length: 2 * count }, (_, i) => pick([1, -2.5, NaN, 0.125], i)),
    complex128: () => Float64Array.from({ length: 2 * count }, (_, i) => pick([1e300, -2.5, -0, 0.1], i)),
    bfloat16: () => Uint16Array.from({ length: count }, (_, i) => pick([0x3f80, 0xff80, 0x7fc0], i)),
  };
  return data[dtype]() as DTypeArrays[D];
}

const ELEMENT_BYTES: Record<DType, number> = {
  float: 4, uint8: 1, int8: 1, uint16: 2, int16: 2, int32: 4, int64: 8, bool: 1, float16: 2,
  double: 8, uint32: 4, uint64: 8, complex64: 8, complex128: 16, bfloat16: 2,
};

/** The raw ABI's last error. */
function lastError(): { code: number; message: string } {
  return { code: bb.exports.bb_wasm_last_error_code(), message: bb.readCString(bb.exports.bb_wasm_last_error()) };
}

type TensorNew = 'bb_wasm_tensor_new' | 'bb_wasm_tensor_new_empty';

/** Calls tensor_new (or tensor_new_empty) with dims written into module memory. */
function rawTensorNewWith(dtype: number, dims: readonly bigint[], entry: TensorNew): number {
  const bytes = new Uint8Array(BigInt64Array.from(dims).buffer);
  return bb.withBytes(bytes, (ptr) => bb.exports[entry](dtype, dims.length, ptr));
}

describe('element types', () => {
  test('all fifteen ONNX types with a fixed size, by their C names and codes', () => {
    expect(DTYPE_NAMES).toEqual([
      'float', 'uint8', 'int8', 'uint16', 'int16', 'int32', 'int64', 'bool',
      'float16', 'double', 'uint32', 'uint64', 'complex64', 'complex128', 'bfloat16',
    ]);
    for (const name of DTYPE_NAMES) expect(dtypeFromCode(dtypeCode(name))).toBe(name);
    expect(dtypeFromCode(0)).toBeUndefined(); // UNDEFINED
    expect(dtypeFromCode(8)).toBeUndefined(); // STRING
    expect(dtypeFromCode(17)).toBeUndefined();
    expect(isDType('float')).toBe(true);
    expect(isDType('string')).toBe(false);
    expect(isDType('toString')).toBe(false);
  });
});

describe('round trips', () => {
  test.each(DTYPE_NAMES)('%s: from, toArray, view and the ABI queries agree', (dtype) => {
    const data = sample(dtype, 6);
    const tensor = Tensor.from(bb, dtype, data, [2, 3]);
    expect(tensor.dtype).toBe(dtype);
    expect(tensor.dims).toEqual([2, 3]);
    expect(tensor.size).toBe(6);
    expect(tensor.nbytes).toBe(6 * ELEMENT_BYTES[dtype]);

    const copy = tensor.toArray();
    expect(copy.constructor).toBe(data.constructor);
    expect(copy).toEqual(data);
    // Bit for bit, so NaN payloads and negative zeros survive too.
    expect(new Uint8Array(copy.buffer)).toEqual(new Uint8Array(data.buffer));

    expect(bb.exports.bb_wasm_tensor_dtype(tensor.handle)).toBe(dtypeCode(dtype));
    expect(bb.exports.bb_wasm_tensor_rank(tensor.handle)).toBe(2);
    expect(bb.exports.bb_wasm_tensor_nbytes(tensor.handle)).toBe(tensor.nbytes);
    const dimsPtr = bb.exports.bb_wasm_tensor_dims(tensor.handle) >>> 0;
    expect(Array.from(new BigInt64Array(bb.exports.memory.buffer, dimsPtr, 2))).toEqual([2n, 3n]);
    expect((bb.exports.bb_wasm_tensor_data(tensor.handle) >>> 0) % 64).toBe(0);

    // The copy and the source are independent of the tensor; the view is the tensor.
    const view = tensor.view();
    view[0] = data[1] as never;
    expect(tensor.toArray()[0]).toEqual(data[1]);
    copy[1] = data[2] as never;
    data[2] = data[0] as never;
    expect(tensor.toArray().slice(1, 3)).toEqual(sample(dtype, 6).slice(1, 3));
    tensor.free();
  });

  test('a scalar, an empty tensor and a tensor of the highest rank', () => {
    const scalar = Tensor.from(bb, 'double', Float64Array.of(2.5), []);
    expect(scalar.dims).toEqual([]);
    expect(scalar.size).toBe(1);
    expect(scalar.toArray()).toEqual(Float64Array.of(2.5));

    const empty = Tensor.from(bb, 'int32', new Int32Array(0), [0, 4]);
    expect(empty.size).toBe(0);
    expect(empty.nbytes).toBe(0);
    expect(empty.toArray()).toEqual(new Int32Array(0));
    expect(bb.exports.bb_wasm_tensor_nbytes(empty.handle)).toBe(0);

    const dims = [1, 2, 1, 2, 1, 2, 1, 3];
    expect(dims.length).toBe(MAX_RANK);
    const deep = Tensor.from(bb, 'uint8', Uint8Array.from({ length: 24 }, (_, i) => i), dims);
    expect(deep.dims).toEqual(dims);
    expect(deep.toArray()).toEqual(Uint8Array.from({ length: 24 }, (_, i) => i));
    for (const tensor of [scalar, empty, deep]) tensor.free();
  });

  test('zeros makes zero elements, and data from a view with an offset is copied right', () => {
    const zeros = Tensor.zeros(bb, 'complex64', [3]);
    expect(zeros.toArray()).toEqual(new Float32Array(6));
    const backing = Float32Array.from({ length: 10 }, (_, i) => i);
    const offset = Tensor.from(bb, 'float', backing.subarray(4, 8), [4]);
    expect(offset.toArray()).toEqual(Float32Array.of(4, 5, 6, 7));
    zeros.free();
    offset.free();
  });

  test('from writes every element over memory a freed tensor left behind; zeros still zeroes it', () => {
    // 1 MiB, so the allocator hands the same block back rather than fresh (zero) pages
    const count = 1 << 18;
    const first = Tensor.from(bb, 'float', Float32Array.from({ length: count }, (_, i) => i + 1), [count]);
    const place = bb.exports.bb_wasm_tensor_data(first.handle) >>> 0;
    first.free();
    const data = Float32Array.from({ length: count }, (_, i) => -i);
    const second = Tensor.from(bb, 'float', data, [count]);
    expect(bb.exports.bb_wasm_tensor_data(second.handle) >>> 0).toBe(place);
    const same = (a: Float32Array, b: Float32Array): boolean => Buffer.from(a.buffer).equals(Buffer.from(b.buffer));
    expect(same(second.toArray(), data)).toBe(true);
    second.free();
    const zeros = Tensor.zeros(bb, 'float', [count]);
    expect(bb.exports.bb_wasm_tensor_data(zeros.handle) >>> 0).toBe(place);
    expect(same(zeros.toArray(), new Float32Array(count))).toBe(true);
    zeros.free();
  });

  test('a view dies when the memory grows; a copy does not', () => {
    const tensor = Tensor.from(bb, 'float', Float32Array.of(1, 2, 3), [3]);
    const view = tensor.view();
    const copy = tensor.toArray();
    const big = bb.exports.bb_wasm_alloc(64 << 20) >>> 0;
    expect(big).not.toBe(0);
    expect(view.length).toBe(0); // detached by the growth
    expect(copy).toEqual(Float32Array.of(1, 2, 3));
    expect(tensor.view()).toEqual(Float32Array.of(1, 2, 3)); // a fresh view works
    bb.exports.bb_wasm_free(big);
    tensor.free();
  });
});

describe('bad tensors are refused with a reason', () => {
  test('the wrong typed array for the type, or the wrong length for the dims', () => {
    let error = bbErrorOf(() => Tensor.from(bb, 'float', new Int32Array(2) as never, [2]));
    expect(error.code).toBe(BbErrorCode.Type);
    expect(error.message).toBe('Tensor.from: float tensors take a Float32Array, got Int32Array');
    error = bbErrorOf(() => Tensor.from(bb, 'int64', [1, 2] as never, [2]));
    expect(error.message).toBe('Tensor.from: int64 tensors take a BigInt64Array, got Array');
    error = bbErrorOf(() => Tensor.from(bb, 'float', new Float32Array(5), [2, 3]));
    expect(error.code).toBe(BbErrorCode.InvalidArgument);
    expect(error.message).toBe('Tensor.from: dims [2,3] need 6 Float32Array elements, got 5');
    error = bbErrorOf(() => Tensor.from(bb, 'complex64', new Float32Array(3), [3]));
    expect(error.message).toBe('Tensor.from: dims [3] need 6 Float32Array elements, got 3');
  });

  test('dims that are negative, fractional or too many', () => {
    let error = bbErrorOf(() => Tensor.zeros(bb, 'float', [2, -1]));
    expect(error.code).toBe(BbErrorCode.InvalidArgument);
    expect(error.message).toBe('Tensor.zeros: dim 1 is -1, not a non-negative integer');
    error = bbErrorOf(() => Tensor.zeros(bb, 'float', [1.5]));
    expect(error.message).toBe('Tensor.zeros: dim 0 is 1.5, not a non-negative integer');
    error = bbErrorOf(() => Tensor.zeros(bb, 'float', new Array<number>(MAX_RANK + 1).fill(1)));
    expect(error.code).toBe(BbErrorCode.Limit);
    expect(error.message).toBe('Tensor.zeros: rank 9 exceeds the maximum of 8');
  });

  test.each(['bb_wasm_tensor_new', 'bb_wasm_tensor_new_empty'] as const)('the C side checks type, rank, dims and size itself (%s)', (entry) => {
    const rawTensorNew = (dtype: number, dims: readonly bigint[]): number => rawTensorNewWith(dtype, dims, entry);
    expect(rawTensorNew(8, [2n])).toBe(BbErrorCode.Unsupported);
    expect(lastError().message).toBe('tensor new: string tensors are not supported');
    expect(rawTensorNew(0, [2n])).toBe(BbErrorCode.Unsupported);
    expect(lastError().message).toBe('tensor new: undefined tensors are not supported');
    expect(rawTensorNew(99, [2n])).toBe(BbErrorCode.InvalidArgument);
    expect(lastError().message).toBe('tensor new: 99 is not a data type');
    expect(rawTensorNew(1, [2n, -3n])).toBe(BbErrorCode.InvalidArgument);
    expect(lastError().message).toBe('tensor new: dim 1 is -3, dims must not be negative');
    expect(rawTensorNew(1, new Array<bigint>(9).fill(1n))).toBe(BbErrorCode.Limit);
    expect(lastError().message).toBe('tensor new: rank 9 is outside 0..8');
    expect(bb.exports[entry](1, -1, 0)).toBe(BbErrorCode.Limit);
    expect(bb.exports[entry](1, 2, 0)).toBe(BbErrorCode.InvalidArgument);
    expect(lastError().message).toBe('tensor new: NULL dims with rank 2');
    expect(rawTensorNew(11, [1n << 20n, 1n << 20n])).toBe(BbErrorCode.Limit);
    expect(lastError().message).toBe('tensor new: a double tensor of that shape exceeds 2147483647 bytes');
    // A zero dim makes the tensor empty, however large the others.
    const empty = rawTensorNew(1, [0n, 1n << 40n, 1n << 40n]);
    expect(empty).toBeGreaterThan(0);
    expect(bb.exports.bb_wasm_tensor_nbytes(empty)).toBe(0);
    expect(bb.exports.bb_wasm_tensor_free(empty)).toBe(0);
  });
});

describe('handles', () => {
  test('a freed tensor is refused by Tensor and, as stale, by every ABI call', () => {
    const tensor = Tensor.from(bb, 'int16', Int16Array.of(1, 2), [2]);
    const handle = tensor.handle;
    tensor.free();
    expect(tensor.freed).toBe(true);
    tensor.free(); // a second free does nothing
    for (const call of [() => tensor.toArray(), () => tensor.view()]) {
      const error = bbErrorOf(call);
      expect(error.code).toBe(BbErrorCode.InvalidArgument);
      expect(error.message).toMatch(/^Tensor\.(toArray|view): the tensor was freed$/);
    }
    const stale = `tensor handle ${handle} is stale or unknown: its object was freed, or it was never issued`;
    for (const call of [
      () => bb.exports.bb_wasm_tensor_dtype(handle),
      () => bb.exports.bb_wasm_tensor_rank(handle),
      () => bb.exports.bb_wasm_tensor_nbytes(handle),
      () => bb.exports.bb_wasm_tensor_free(handle),
    ]) {
      expect(call()).toBe(BbErrorCode.InvalidArgument);
      expect(lastError().message).toBe(stale);
    }
    for (const call of [() => bb.exports.bb_wasm_tensor_data(handle), () => bb.exports.bb_wasm_tensor_dims(handle)]) {
      expect(call()).toBe(0);
      expect(lastError()).toEqual({ code: BbErrorCode.InvalidArgument, message: stale });
    }
  });

  test('a handle of another kind is named for what it is', () => {
    const model = OnnxModel.decode(bb, addModel());
    expect(bb.exports.bb_wasm_tensor_dtype(model.handle)).toBe(BbErrorCode.InvalidArgument);
    expect(lastError().message).toBe(`handle ${model.handle} names a model, not a tensor`);
    const tensor = Tensor.zeros(bb, 'float', [1]);
    expect(bb.exports.bb_wasm_model_encode(tensor.handle)).toBe(BbErrorCode.InvalidArgument);
    expect(lastError().message).toBe(`handle ${tensor.handle} names a tensor, not a model`);
    model.free();
    tensor.free();
  });
});
