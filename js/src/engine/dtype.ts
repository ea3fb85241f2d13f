/**
 * Element types of tensors: the ONNX data types (TensorProto.DataType, bb_dtype in C) by
 * the names the C library gives them (`bb_dtype_name`), and the typed array that holds
 * each one's elements in JavaScript.
 */

/**
 * The typed array of each element type. float16 and bfloat16 travel as their 16 bits
 * (Node 20 has no Float16Array); bool as bytes 0 and 1; complex64 and complex128 as
 * interleaved real and imaginary parts, two array elements per tensor element.
 */
export interface DTypeArrays {
  float: Float32Array;
  uint8: Uint8Array;
  int8: Int8Array;
  uint16: Uint16Array;
  int16: Int16Array;
  int32: Int32Array;
  int64: BigInt64Array;
  bool: Uint8Array;
  float16: Uint16Array;
  double: Float64Array;
  uint32: Uint32Array;
  uint64: BigUint64Array;
  complex64: Float32Array;
  complex128: Float64Array;
  bfloat16: Uint16Array;
}

/** The name of an element type a tensor can have (ONNX STRING tensors are not supported). */
export type DType = keyof DTypeArrays;

/** Any typed array that holds tensor elements. */
export type TensorArray = DTypeArrays[DType];

interface TypedArrayConstructor<T> {
  readonly name: string;
  readonly BYTES_PER_ELEMENT: number;
  new (buffer: ArrayBufferLike, byteOffset: number, length: number): T;
  /** A copy of `source` in a new buffer of its own (which V8 fills without zeroing it first, unlike slice()'s). */
  new (source: T): T;
}

interface DTypeInfo<D extends DType> {
  /** The bb_dtype / TensorProto.DataType value. */
  readonly code: number;
  readonly array: TypedArrayConstructor<DTypeArrays[D]>;
  /** Array elements per tensor element: 2 for complex types, else 1. */
  readonly lanes: number;
}

const DTYPES: { readonly [D in DType]: DTypeInfo<D> } = {
  float: { code: 1, array: Float32Array, lanes: 1 },
  uint8: { code: 2, array: Uint8Array, lanes: 1 },
  int8: { code: 3, array: Int8Array, lanes: 1 },
  uint16: { code: 4, array: Uint16Array, lanes: 1 },
  int16: { code: 5, array: Int16Array, lanes: 1 },
  int32: { code: 6, array: Int32Array, lanes: 1 },
  int64: { code: 7, array: BigInt64Array, lanes: 1 },
  bool: { code: 9, array: Uint8Array, lanes: 1 },
  float16: { code: 10, array: Uint16Array, lanes: 1 },
  double: { code: 11, array: Float64Array, lanes: 1 },
  uint32: { code: 12, array: Uint32Array, lanes: 1 },
  uint64: { code: 13, array: BigUint64Array, lanes: 1 },
  complex64: { code: 14, array: Float32Array, lanes: 2 },
  complex128: { code: 15, array: Float64Array, lanes: 2 },
  bfloat16: { code: 16, array: Uint16Array, lanes: 1 },
};

/** Every supported element type, in the order of their codes. */
export const DTYPE_NAMES: readonly DType[] = (Object.keys(DTYPES) as DType[]).sort(
  (a, b) => DTYPES[a].code - DTYPES[b].code,
);

/** Whether a string names a supported element type. */
export function isDType(name: string): name is DType {
  return Object.hasOwn(DTYPES, name);
}

/** The bb_dtype / TensorProto.DataType code of an element type. */
export function dtypeCode(dtype: DType): number {
  return DTYPES[dtype].code;
}

/** The element type with that code, or undefined for UNDEFINED, STRING and unknown codes. */
export function dtypeFromCode(code: number): DType | undefined {
  return DTYPE_NAMES.find((name) => DTYPES[name].code === code);
}

/** @internal What the tensor bindings need to know about an element type. */
export function dtypeInfo<D extends DType>(dtype: D): DTypeInfo<D> {
  return DTYPES[dtype];
}
