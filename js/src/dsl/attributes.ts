/**
 * Attributes of ops and tensor literals, written in the byte layouts bb.wasm's recorder
 * reads (docs/WEB.md of the package, "Byte layouts of the ABI").
 *
 * An attribute value is a plain JavaScript value whose type says which ONNX attribute type
 * it becomes — an integer `number` or a `bigint` INT, any other `number` FLOAT, a string
 * STRING, an array of them INTS, FLOATS or STRINGS, a {@link Literal} TENSOR — or one of
 * the explicit forms {@link int}, {@link float}, {@link ints}, {@link floats} when the
 * JavaScript value would read otherwise (`float(1)` is the FLOAT 1.0).
 */
import { dtypeCode, dtypeInfo, type DType, type DTypeArrays } from '../engine/dtype.js';
import { BbError, BbErrorCode } from '../engine/errors.js';

/** A tensor literal: element type, dims, and the elements (none: zeros). */
export interface Literal<D extends DType = DType> {
  readonly dtype: D;
  readonly dims: readonly number[];
  readonly data?: DTypeArrays[D];
}

/** ONNX attribute types (AttributeProto.AttributeType) the recorder takes. */
export const ATTRIBUTE_TYPES = {
  FLOAT: 1,
  INT: 2,
  STRING: 3,
  TENSOR: 4,
  FLOATS: 6,
  INTS: 7,
  STRINGS: 8,
} as const;

/** An attribute given with its ONNX type spelled out. */
export interface TypedAttribute {
  readonly attributeType: number;
  readonly value: number | bigint | string | Literal | readonly (number | bigint | string)[] | undefined;
}

export type AttributeValue =
  | number
  | bigint
  | string
  | Literal
  | readonly number[]
  | readonly bigint[]
  | readonly string[]
  | TypedAttribute;

/** Attributes by name, in the order given. */
export type Attributes = Readonly<Record<string, AttributeValue>>;

export const int = (value: number | bigint): TypedAttribute => ({ attributeType: ATTRIBUTE_TYPES.INT, value });
export const float = (value: number): TypedAttribute => ({ attributeType: ATTRIBUTE_TYPES.FLOAT, value });
export const ints = (value: readonly (number | bigint)[]): TypedAttribute => ({ attributeType: ATTRIBUTE_TYPES.INTS, value });
export const floats = (value: readonly number[]): TypedAttribute => ({ attributeType: ATTRIBUTE_TYPES.FLOATS, value });
/** Any AttributeProto type by its number, with no value: the recorder refuses the types it does not take. */
export const attributeOfType = (attributeType: number): TypedAttribute => ({ attributeType, value: undefined });

const utf8 = new TextEncoder();

/** Little-endian bytes, growing as written. */
export class ByteWriter {
  #bytes = new Uint8Array(256);
  #view = new DataView(this.#bytes.buffer);
  #length = 0;

  #reserve(n: number): number {
    if (this.#length + n > this.#bytes.length) {
      const grown = new Uint8Array(Math.max(this.#bytes.length * 2, this.#length + n));
      grown.set(this.#bytes.subarray(0, this.#length));
      this.#bytes = grown;
      this.#view = new DataView(grown.buffer);
    }
    const at = this.#length;
    this.#length += n;
    return at;
  }

  u8(v: number): void {
    this.#view.setUint8(this.#reserve(1), v);
  }
  u32(v: number): void {
    this.#view.setUint32(this.#reserve(4), v >>> 0, true);
  }
  i64(v: number | bigint): void {
    this.#view.setBigInt64(this.#reserve(8), BigInt.asIntN(64, BigInt(v)), true);
  }
  f32(v: number): void {
    this.#view.setFloat32(this.#reserve(4), v, true);
  }
  bytes(b: Uint8Array): void {
    this.#bytes.set(b, this.#reserve(b.length));
  }
  /** A u32 length, then the UTF-8 text. */
  text(s: string): void {
    const b = utf8.encode(s);
    this.u32(b.length);
    this.bytes(b);
  }
  finish(): Uint8Array {
    return this.#bytes.slice(0, this.#length);
  }
}

/** Writes a literal: u32 dtype, u32 rank, dims, u8 has_data, u32 length, the elements. */
export function writeLiteral(w: ByteWriter, literal: Literal): void {
  w.u32(dtypeCode(literal.dtype));
  w.u32(literal.dims.length);
  for (const d of literal.dims) w.i64(d);
  const data = literal.data;
  if (data === undefined) {
    w.u8(0);
    w.u32(0);
    return;
  }
  if (!(data instanceof dtypeInfo(literal.dtype).array)) {
    throw new BbError(BbErrorCode.Type, `a ${literal.dtype} literal holds ${dtypeInfo(literal.dtype).array.name}, not ${data.constructor.name}`);
  }
  w.u8(1);
  w.u32(data.byteLength);
  w.bytes(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
}

export function encodeLiteral(literal: Literal): Uint8Array {
  const w = new ByteWriter();
  writeLiteral(w, literal);
  return w.finish();
}

function isLiteral(value: unknown): value is Literal {
  return typeof value === 'object' && value !== null && 'dtype' in value && 'dims' in value;
}

function isTyped(value: unknown): value is TypedAttribute {
  return typeof value === 'object' && value !== null && 'attributeType' in value;
}

/** The attribute type a plain value becomes. */
function typeOf(name: string, value: AttributeValue): TypedAttribute {
  if (isTyped(value)) return value;
  if (typeof value === 'bigint') return int(value);
  if (typeof value === 'number') return Number.isInteger(value) ? int(value) : float(value);
  if (typeof value === 'string') return { attributeType: ATTRIBUTE_TYPES.STRING, value };
  if (isLiteral(value)) return { attributeType: ATTRIBUTE_TYPES.TENSOR, value };
  if (Array.isArray(value)) {
    const list = value as readonly (number | bigint | string)[];
    if (list.every((v) => typeof v === 'string')) return { attributeType: ATTRIBUTE_TYPES.STRINGS, value: list };
    if (list.every((v) => typeof v === 'bigint' || (typeof v === 'number' && Number.isInteger(v)))) return ints(list as (number | bigint)[]);
    if (list.every((v) => typeof v === 'number')) return floats(list as number[]);
  }
  throw new BbError(BbErrorCode.Type, `attribute ${name}: ${String(value)} is not an attribute value (numbers, strings, their arrays, or a literal)`);
}

/** The attribute list bytes (empty for none). */
export function encodeAttributes(attributes: Attributes | undefined): Uint8Array {
  const entries = Object.entries(attributes ?? {});
  if (entries.length === 0) return new Uint8Array(0);
  const w = new ByteWriter();
  w.u32(entries.length);
  for (const [name, raw] of entries) {
    const { attributeType, value } = typeOf(name, raw);
    w.text(name);
    w.u32(attributeType);
    const list = Array.isArray(value) ? (value as readonly (number | bigint | string)[]) : [];
    switch (attributeType) {
      case ATTRIBUTE_TYPES.INT:
        w.i64(value as number | bigint);
        break;
      case ATTRIBUTE_TYPES.FLOAT:
        w.f32(value as number);
        break;
      case ATTRIBUTE_TYPES.STRING:
        w.text(value as string);
        break;
      case ATTRIBUTE_TYPES.TENSOR:
        writeLiteral(w, value as Literal);
        break;
      case ATTRIBUTE_TYPES.INTS:
        w.u32(list.length);
        for (const v of list) w.i64(v as number | bigint);
        break;
      case ATTRIBUTE_TYPES.FLOATS:
        w.u32(list.length);
        for (const v of list) w.f32(Number(v));
        break;
      case ATTRIBUTE_TYPES.STRINGS:
        w.u32(list.length);
        for (const v of list) w.text(String(v));
        break;
      default:
        break; // no value: the recorder names the type it does not take
    }
  }
  return w.finish();
}

/** An attribute as read back from an op (what a component's call sees). */
export type AttributeReading = number | bigint | string | readonly bigint[] | readonly number[] | readonly string[] | undefined;

/**
 * Reads an attribute list (the layout encodeAttributes writes): INT as bigint, FLOAT as
 * number, STRING as string, lists as arrays, and undefined for types the layout carries
 * no value for (TENSOR among them).
 */
export function decodeAttributes(bytes: Uint8Array): Record<string, AttributeReading> {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const text = new TextDecoder();
  let at = 0;
  const need = (n: number): number => {
    if (at + n > bytes.length) throw new BbError(BbErrorCode.Malformed, `attributes: cut short at byte ${at}`);
    const start = at;
    at += n;
    return start;
  };
  const u32 = (): number => view.getUint32(need(4), true);
  const str = (): string => {
    const n = u32();
    return text.decode(bytes.subarray(need(n), at));
  };
  const out: Record<string, AttributeReading> = {};
  for (let count = bytes.length === 0 ? 0 : u32(); count > 0; count--) {
    const name = str();
    const type = u32();
    switch (type) {
      case ATTRIBUTE_TYPES.INT:
        out[name] = view.getBigInt64(need(8), true);
        break;
      case ATTRIBUTE_TYPES.FLOAT:
        out[name] = view.getFloat32(need(4), true);
        break;
      case ATTRIBUTE_TYPES.STRING:
        out[name] = str();
        break;
      case ATTRIBUTE_TYPES.INTS:
        out[name] = Array.from({ length: u32() }, () => view.getBigInt64(need(8), true));
        break;
      case ATTRIBUTE_TYPES.FLOATS:
        out[name] = Array.from({ length: u32() }, () => view.getFloat32(need(4), true));
        break;
      case ATTRIBUTE_TYPES.STRINGS:
        out[name] = Array.from({ length: u32() }, () => str());
        break;
      default:
        out[name] = undefined;
    }
  }
  return out;
}
