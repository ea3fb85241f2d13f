/**
 * Reads the protobuf wire format, field by field, for the messages this package looks
 * into without bb.wasm (envelopes, an artifact's functions and metadata). Every length is
 * checked against what is left, so bytes from a peer can never make it read past the end
 * or loop; a bad field is a BbError (Malformed) naming the message and the byte offset.
 */
import { BbError, BbErrorCode } from './errors.js';

/** One field as it was written: a number (varint and fixed kinds) or a length-delimited slice. */
export type ProtoField =
  | { readonly field: number; readonly wire: 'varint' | 'fixed64' | 'fixed32'; readonly value: bigint; readonly at: number }
  | { readonly field: number; readonly wire: 'bytes'; readonly bytes: Uint8Array; readonly at: number };

const VARINT_MAX_BYTES = 10;

/**
 * The fields of one message, in the order they were written. `what` names the message in
 * errors; `base` is the message's offset in the outermost buffer (for the offsets errors cite).
 */
export function* protoFields(bytes: Uint8Array, what: string, base = 0): Generator<ProtoField> {
  let at = 0;
  let start = 0;
  /** Names the field being read by where it starts. */
  const fail = (why: string): never => {
    throw new BbError(BbErrorCode.Malformed, `${what}: ${why} (field at byte ${base + start})`);
  };
  const varint = (): bigint => {
    let value = 0n;
    for (let i = 0; i < VARINT_MAX_BYTES; i++) {
      if (at >= bytes.length) fail('a varint is cut short');
      const byte = bytes[at++]!;
      value |= BigInt(byte & 0x7f) << BigInt(7 * i);
      if ((byte & 0x80) === 0) return value;
    }
    return fail(`a varint is longer than ${VARINT_MAX_BYTES} bytes`);
  };
  const fixed = (size: number): bigint => {
    if (bytes.length - at < size) fail(`a ${size * 8}-bit field is cut short`);
    let value = 0n;
    for (let i = size - 1; i >= 0; i--) value = (value << 8n) | BigInt(bytes[at + i]!);
    at += size;
    return value;
  };
  while (at < bytes.length) {
    start = at;
    const key = varint();
    const field = Number(key >> 3n);
    if (field === 0 || key >> 3n > 0x1fffffffn) fail(`field number ${key >> 3n} is not valid`);
    switch (Number(key & 7n)) {
      case 0:
        yield { field, wire: 'varint', value: varint(), at: base + start };
        break;
      case 1:
        yield { field, wire: 'fixed64', value: fixed(8), at: base + start };
        break;
      case 5:
        yield { field, wire: 'fixed32', value: fixed(4), at: base + start };
        break;
      case 2: {
        const length = varint();
        if (length > BigInt(bytes.length - at)) fail(`field ${field} claims ${length} bytes, ${bytes.length - at} are left`);
        const slice = bytes.subarray(at, at + Number(length));
        at += Number(length);
        yield { field, wire: 'bytes', bytes: slice, at: base + start };
        break;
      }
      default:
        fail(`field ${field} has wire type ${key & 7n}, which is not one of varint, 64-bit, length-delimited or 32-bit`);
    }
  }
}

/** The slice of a length-delimited field; a field of another wire type is Malformed. */
export function protoBytes(f: ProtoField, what: string): Uint8Array {
  if (f.wire !== 'bytes') throw new BbError(BbErrorCode.Malformed, `${what}: field ${f.field} at byte ${f.at} is not length-delimited`);
  return f.bytes;
}

/** The number of a varint or fixed field; a length-delimited one is Malformed. */
export function protoNumber(f: ProtoField, what: string): bigint {
  if (f.wire === 'bytes') throw new BbError(BbErrorCode.Malformed, `${what}: field ${f.field} at byte ${f.at} is not a number`);
  return f.value;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** A string field: UTF-8, or Malformed. */
export function protoString(f: ProtoField, what: string): string {
  try {
    return utf8.decode(protoBytes(f, what));
  } catch (error) {
    if (error instanceof BbError) throw error;
    throw new BbError(BbErrorCode.Malformed, `${what}: field ${f.field} at byte ${f.at} is not UTF-8`);
  }
}
