/**
 * Reads ONNX TensorProto files (the input_N.pb / output_N.pb of the ONNX backend tests)
 * in JavaScript, independently of the C library, so tests can compare what bb.wasm
 * computes with what ONNX expects.
 */
import { readFileSync } from 'node:fs';

import { type DType, type TensorArray } from '../src/index.js';
import { dtypeFromCode } from '../src/internals.js';

export interface DecodedTensor {
  readonly name: string;
  readonly dtype: DType;
  readonly dims: number[];
  readonly data: TensorArray;
}

const WIRE_VARINT = 0;
const WIRE_FIXED64 = 1;
const WIRE_LENGTH_DELIMITED = 2;
const WIRE_FIXED32 = 5;

/** One field as read: a varint, the bytes of a length-delimited field, or fixed-width bytes. */
interface Field {
  readonly number: number;
  readonly wireType: number;
  readonly varint: bigint;
  readonly bytes: Uint8Array;
}

/** A cursor over protobuf bytes. */
class Reader {
  #at = 0;
  readonly #bytes: Uint8Array;

  constructor(bytes: Uint8Array) {
    this.#bytes = bytes;
  }

  get done(): boolean {
    return this.#at >= this.#bytes.length;
  }

  varint(): bigint {
    let value = 0n;
    for (let shift = 0n; ; shift += 7n) {
      const byte = this.#bytes[this.#at++];
      if (byte === undefined) throw new Error('truncated varint');
      value |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) return value;
    }
  }

  take(length: number): Uint8Array {
    if (this.#at + length > this.#bytes.length) throw new Error('truncated field');
    this.#at += length;
    return this.#bytes.subarray(this.#at - length, this.#at);
  }
}

function* fields(bytes: Uint8Array): Generator<Field> {
  const reader = new Reader(bytes);
  while (!reader.done) {
    const tag = Number(reader.varint());
    const wireType = tag & 7;
    const number = tag >>> 3;
    const none = new Uint8Array(0);
    if (wireType === WIRE_VARINT) yield { number, wireType, varint: reader.varint(), bytes: none };
    else if (wireType === WIRE_FIXED64) yield { number, wireType, varint: 0n, bytes: reader.take(8) };
    else if (wireType === WIRE_FIXED32) yield { number, wireType, varint: 0n, bytes: reader.take(4) };
    else if (wireType === WIRE_LENGTH_DELIMITED) {
      yield { number, wireType, varint: 0n, bytes: reader.take(Number(reader.varint())) };
    } else throw new Error(`unsupported wire type ${wireType}`);
  }
}

/** The values of a repeated integer field, packed or not. */
function varints(field: Field): bigint[] {
  if (field.wireType === WIRE_VARINT) return [field.varint];
  const reader = new Reader(field.bytes);
  const values: bigint[] = [];
  while (!reader.done) values.push(reader.varint());
  return values;
}

const TENSOR_DIMS = 1;
const TENSOR_DATA_TYPE = 2;
const TENSOR_FLOAT_DATA = 4;
const TENSOR_INT32_DATA = 5;
const TENSOR_INT64_DATA = 7;
const TENSOR_NAME = 8;
const TENSOR_RAW_DATA = 9;
const TENSOR_DOUBLE_DATA = 10;
const TENSOR_UINT64_DATA = 11;

/** Decodes TensorProto bytes: raw_data, or the typed field each element type uses. */
export function decodeTensorProto(bytes: Uint8Array): DecodedTensor {
  let name = '';
  let code = 0;
  const dims: number[] = [];
  let raw: Uint8Array | undefined;
  const floats: number[] = [];
  const doubles: number[] = [];
  const integers: bigint[] = [];
  for (const field of fields(bytes)) {
    switch (field.number) {
      case TENSOR_DIMS:
        dims.push(...varints(field).map(Number));
        break;
      case TENSOR_DATA_TYPE:
        code = Number(field.varint);
        break;
      case TENSOR_NAME:
        name = new TextDecoder().decode(field.bytes);
        break;
      case TENSOR_RAW_DATA:
        raw = field.bytes;
        break;
      case TENSOR_FLOAT_DATA:
        floats.push(...readFixed(field.bytes, 4, (view, at) => view.getFloat32(at, true)));
        break;
      case TENSOR_DOUBLE_DATA:
        doubles.push(...readFixed(field.bytes, 8, (view, at) => view.getFloat64(at, true)));
        break;
      case TENSOR_INT32_DATA:
      case TENSOR_INT64_DATA:
      case TENSOR_UINT64_DATA:
        integers.push(...varints(field));
        break;
    }
  }
  const dtype = dtypeFromCode(code);
  if (dtype === undefined) throw new Error(`tensor ${name}: data type ${code} is not supported`);
  return { name, dtype, dims, data: typedData(dtype, raw, floats, doubles, integers) };
}

export function readTensorProto(path: string): DecodedTensor {
  return decodeTensorProto(new Uint8Array(readFileSync(path)));
}

function readFixed(bytes: Uint8Array, width: number, read: (view: DataView, at: number) => number): number[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return Array.from({ length: bytes.length / width }, (_, i) => read(view, i * width));
}

function typedData(dtype: DType, raw: Uint8Array | undefined, floats: number[], doubles: number[], integers: bigint[]): TensorArray {
  const fromRaw = <T>(make: (buffer: ArrayBuffer) => T): T | undefined => (raw === undefined ? undefined : make(raw.slice().buffer));
  switch (dtype) {
    case 'float':
    case 'complex64':
      return fromRaw((b) => new Float32Array(b)) ?? Float32Array.from(floats);
    case 'double':
    case 'complex128':
      return fromRaw((b) => new Float64Array(b)) ?? Float64Array.from(doubles);
    case 'int64':
      return fromRaw((b) => new BigInt64Array(b)) ?? BigInt64Array.from(integers, (v) => BigInt.asIntN(64, v));
    case 'uint64':
      return fromRaw((b) => new BigUint64Array(b)) ?? BigUint64Array.from(integers);
    case 'uint32':
      return fromRaw((b) => new Uint32Array(b)) ?? Uint32Array.from(integers, Number);
    case 'int32':
      return fromRaw((b) => new Int32Array(b)) ?? Int32Array.from(integers, int32);
    case 'int16':
      return fromRaw((b) => new Int16Array(b)) ?? Int16Array.from(integers, int32);
    case 'int8':
      return fromRaw((b) => new Int8Array(b)) ?? Int8Array.from(integers, int32);
    case 'uint16':
    case 'float16':
    case 'bfloat16':
      return fromRaw((b) => new Uint16Array(b)) ?? Uint16Array.from(integers, int32);
    case 'uint8':
    case 'bool':
      return fromRaw((b) => new Uint8Array(b)) ?? Uint8Array.from(integers, int32);
  }
}

/** An int32_data value: negative ones are stored sign-extended to 64 bits. */
function int32(value: bigint): number {
  return Number(BigInt.asIntN(32, value));
}

const MODEL_GRAPH = 7;
const GRAPH_INITIALIZER = 5;

/** The initializers of a ModelProto's main graph, by name. */
export function modelInitializers(model: Uint8Array): Map<string, DecodedTensor> {
  const out = new Map<string, DecodedTensor>();
  for (const field of fields(model)) {
    if (field.number !== MODEL_GRAPH) continue;
    for (const inner of fields(field.bytes)) {
      if (inner.number !== GRAPH_INITIALIZER) continue;
      const tensor = decodeTensorProto(inner.bytes);
      out.set(tensor.name, tensor);
    }
  }
  return out;
}
