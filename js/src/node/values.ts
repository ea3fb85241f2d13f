/**
 * Runtime values as JavaScript sees them, and their wire form (docs/WIRE.md, "Payloads"):
 * what graph inputs, app events, host component calls and completions carry. Peer ids are
 * their base58btc text, as libp2p prints them.
 */
import { dtypeCode, dtypeFromCode, dtypeInfo, type DType, type DTypeArrays, type TensorArray } from '../engine/dtype.js';
import { BbError, BbErrorCode } from '../engine/errors.js';

/** A tensor held by JavaScript: row-major elements (complex as real, imaginary pairs). */
export interface HostTensor<D extends DType = DType> {
  readonly dtype: D;
  readonly dims: readonly number[];
  readonly data: DTypeArrays[D];
}

/** One segment of an address (`/p2p/<id>/site/<n>/component/<n>/op/<name>`). */
export type AddressSegment =
  | { readonly p2p: string }
  | { readonly site: bigint }
  | { readonly component: number }
  | { readonly op: string };

/** The kinds that hold one unsigned 64-bit number. */
export type U64Kind = 'u64' | 'timestamp' | 'commandId' | 'wireReqId' | 'correlation';

export type Value =
  | { readonly kind: 'trigger' }
  | { readonly kind: 'bytes'; readonly bytes: Uint8Array }
  | { readonly kind: 'tensor'; readonly tensor: HostTensor }
  | { readonly kind: U64Kind; readonly value: bigint }
  | { readonly kind: 'peer'; readonly peer: string }
  | { readonly kind: 'peers'; readonly peers: readonly string[] }
  | { readonly kind: 'address'; readonly address: readonly AddressSegment[] }
  | { readonly kind: 'addresses'; readonly addresses: readonly (readonly AddressSegment[])[] }
  | { readonly kind: 'composite'; readonly children: readonly Value[] };

export type ValueKind = Value['kind'];

/** FNV-1a-64 of each kind's carrier name: SlotFill.type_hash (docs/WIRE.md). */
const CARRIERS: Readonly<Record<ValueKind, string>> = {
  trigger: 'bb_runtime::syscall::values::TriggerValue',
  bytes: 'bb_runtime::syscall::values::BytesValue',
  tensor: 'ai.bytesandbrains.value.Tensor',
  u64: 'bb_runtime::syscall::values::U64Value',
  timestamp: 'bb_runtime::syscall::values::TimestampValue',
  commandId: 'bb_runtime::syscall::values::CommandIdValue',
  wireReqId: 'bb_runtime::syscall::values::WireReqIdValue',
  correlation: 'bb_runtime::syscall::values::CorrelationTokenValue',
  peer: 'bb_runtime::syscall::values::PeerIdValue',
  peers: 'bb_runtime::syscall::values::PeerIdVecValue',
  address: 'bb_runtime::syscall::values::AddressValue',
  addresses: 'bb_runtime::syscall::values::AddressVecValue',
  composite: 'bb_runtime::syscall::values::CompositeValue',
};

/** FNV-1a-64 of a string's UTF-8 bytes. */
export function typeHash(name: string): bigint {
  let hash = 0xcbf29ce484222325n;
  for (const byte of new TextEncoder().encode(name)) {
    hash ^= BigInt(byte);
    hash = (hash * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return hash;
}

const HASH_OF = new Map<ValueKind, bigint>();
const KIND_OF = new Map<bigint, ValueKind>();
for (const [kind, carrier] of Object.entries(CARRIERS) as [ValueKind, string][]) {
  const hash = typeHash(carrier);
  HASH_OF.set(kind, hash);
  KIND_OF.set(hash, kind);
}

/** The type hash a value of this kind travels with. */
export function kindHash(kind: ValueKind): bigint {
  return HASH_OF.get(kind)!;
}

/** The kind of a type hash, or undefined for one this library does not know. */
export function kindOfHash(hash: bigint): ValueKind | undefined {
  return KIND_OF.get(hash);
}

// ---- constructors ----------------------------------------------------------------------

export const trigger: Value = { kind: 'trigger' };

export function u64Value(value: bigint | number, kind: U64Kind = 'u64'): Value {
  const big = BigInt(value);
  if (big < 0n || big > 0xffffffffffffffffn) throw new RangeError(`${String(value)} is not an unsigned 64-bit number`);
  return { kind, value: big };
}

export function bytesValue(bytes: Uint8Array): Value {
  return { kind: 'bytes', bytes };
}

/** A tensor value; dims default to [data.length / lanes]. */
export function tensorValue<D extends DType>(dtype: D, data: DTypeArrays[D], dims?: readonly number[]): Value {
  const info = dtypeInfo(dtype);
  if (!(data instanceof info.array)) throw new TypeError(`a ${dtype} tensor takes a ${info.array.name}`);
  const shape = dims ?? [data.length / info.lanes];
  const numel = shape.reduce((a, b) => a * b, 1);
  if (shape.some((d) => !Number.isSafeInteger(d) || d < 0) || numel * info.lanes !== data.length) {
    throw new RangeError(`dims [${shape.join(', ')}] do not fit ${data.length / info.lanes} ${dtype} elements`);
  }
  return { kind: 'tensor', tensor: { dtype, dims: [...shape], data } };
}

export function peerValue(peer: string): Value {
  peerIdBytes(peer); // checks it
  return { kind: 'peer', peer };
}

export function peersValue(peers: readonly string[]): Value {
  for (const peer of peers) peerIdBytes(peer);
  return { kind: 'peers', peers: [...peers] };
}

export function compositeValue(children: readonly Value[]): Value {
  return { kind: 'composite', children: [...children] };
}

/** The first element of a tensor value as a number (an accuracy, a loss), or undefined. */
export function scalarOf(value: Value | undefined): number | undefined {
  if (value?.kind === 'tensor' && value.tensor.data.length > 0) return Number(value.tensor.data[0]);
  if (value !== undefined && 'value' in value) return Number(value.value);
  return undefined;
}

// ---- peer ids ---------------------------------------------------------------------------

const BASE58 = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
const BASE58_INDEX = new Map([...BASE58].map((c, i) => [c, i]));
const PEER_ID_MAX = 76;

export function base58Encode(bytes: Uint8Array): string {
  let zeros = 0;
  while (zeros < bytes.length && bytes[zeros] === 0) zeros++;
  const digits: number[] = [];
  for (const byte of bytes.subarray(zeros)) {
    let carry = byte;
    for (let i = 0; i < digits.length; i++) {
      carry += digits[i]! << 8;
      digits[i] = carry % 58;
      carry = Math.floor(carry / 58);
    }
    while (carry > 0) {
      digits.push(carry % 58);
      carry = Math.floor(carry / 58);
    }
  }
  return '1'.repeat(zeros) + digits.reverse().map((d) => BASE58[d]).join('');
}

export function base58Decode(text: string): Uint8Array {
  let zeros = 0;
  while (zeros < text.length && text[zeros] === '1') zeros++;
  const bytes: number[] = [];
  for (const char of text.slice(zeros)) {
    const digit = BASE58_INDEX.get(char);
    if (digit === undefined) throw new BbError(BbErrorCode.Malformed, `"${char}" is not a base58 digit`);
    let carry = digit;
    for (let i = 0; i < bytes.length; i++) {
      carry += bytes[i]! * 58;
      bytes[i] = carry & 0xff;
      carry >>= 8;
    }
    while (carry > 0) {
      bytes.push(carry & 0xff);
      carry >>= 8;
    }
  }
  return Uint8Array.from([...new Array<number>(zeros).fill(0), ...bytes.reverse()]);
}

function readVarint(bytes: Uint8Array, at: number): [number, number] {
  let value = 0;
  for (let shift = 0, i = at; i < bytes.length && shift < 35; shift += 7, i++) {
    const byte = bytes[i]!;
    value += (byte & 0x7f) * 2 ** shift;
    if ((byte & 0x80) === 0) return [value, i + 1];
  }
  throw new BbError(BbErrorCode.Malformed, 'a peer id varint is cut short');
}

/** A peer id's multihash bytes; throws BbError (Malformed) unless it is exactly one multihash. */
export function peerIdBytes(peer: string): Uint8Array {
  const bytes = base58Decode(peer);
  checkMultihash(bytes);
  return bytes;
}

function checkMultihash(bytes: Uint8Array): void {
  if (bytes.length === 0 || bytes.length > PEER_ID_MAX) {
    throw new BbError(BbErrorCode.Malformed, `a peer id is 1 to ${PEER_ID_MAX} bytes, not ${bytes.length}`);
  }
  const [, afterCode] = readVarint(bytes, 0);
  const [length, digestAt] = readVarint(bytes, afterCode);
  if (length > 64 || digestAt + length !== bytes.length) {
    throw new BbError(BbErrorCode.Malformed, 'not exactly one multihash (code, length, digest ≤ 64 bytes)');
  }
}

/** The identity-multihash peer id of a u64 (what tests and the simulator use). */
export function peerIdFromU64(id: bigint | number): string {
  const bytes = new Uint8Array(10);
  bytes[0] = 0; // identity
  bytes[1] = 8;
  new DataView(bytes.buffer).setBigUint64(2, BigInt(id), false);
  return base58Encode(bytes);
}

/** A fresh random peer id (an identity multihash of 16 random bytes). */
export function randomPeerId(): string {
  const bytes = new Uint8Array(18);
  bytes[1] = 16;
  crypto.getRandomValues(bytes.subarray(2));
  return base58Encode(bytes);
}

// ---- the wire form ----------------------------------------------------------------------

const MAX_NESTING = 16;

class Writer {
  #bytes = new Uint8Array(256);
  #view = new DataView(this.#bytes.buffer);
  length = 0;

  #reserve(more: number): void {
    if (this.length + more <= this.#bytes.length) return;
    let size = this.#bytes.length * 2;
    while (size < this.length + more) size *= 2;
    const grown = new Uint8Array(size);
    grown.set(this.#bytes.subarray(0, this.length));
    this.#bytes = grown;
    this.#view = new DataView(grown.buffer);
  }
  u32(v: number): void {
    this.#reserve(4);
    this.#view.setUint32(this.length, v, true);
    this.length += 4;
  }
  u64(v: bigint | number): void {
    this.#reserve(8);
    this.#view.setBigUint64(this.length, BigInt(v), true);
    this.length += 8;
  }
  bytes(b: Uint8Array): void {
    this.#reserve(b.length);
    this.#bytes.set(b, this.length);
    this.length += b.length;
  }
  /** Reserves a u64 to fill in later; returns its offset. */
  placeholder(): number {
    this.u64(0);
    return this.length - 8;
  }
  patch(at: number, v: number): void {
    this.#view.setBigUint64(at, BigInt(v), true);
  }
  finish(): Uint8Array {
    return this.#bytes.slice(0, this.length);
  }
}

function writePayload(w: Writer, value: Value, depth: number): void {
  switch (value.kind) {
    case 'trigger':
      return;
    case 'bytes':
      w.u64(value.bytes.length);
      w.bytes(value.bytes);
      return;
    case 'tensor': {
      const { dtype, dims, data } = value.tensor;
      w.u32(dtypeCode(dtype));
      w.u32(dims.length);
      for (const d of dims) w.u64(d);
      w.bytes(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
      return;
    }
    case 'u64':
    case 'timestamp':
    case 'commandId':
    case 'wireReqId':
    case 'correlation':
      w.u64(value.value);
      return;
    case 'peer':
      writePeer(w, value.peer);
      return;
    case 'peers':
      w.u64(value.peers.length);
      for (const peer of value.peers) writePeer(w, peer);
      return;
    case 'address':
      writeAddress(w, value.address);
      return;
    case 'addresses':
      w.u64(value.addresses.length);
      for (const address of value.addresses) writeAddress(w, address);
      return;
    case 'composite':
      if (depth >= MAX_NESTING) throw new BbError(BbErrorCode.Limit, `composites nest at most ${MAX_NESTING} deep`);
      w.u64(value.children.length);
      for (const child of value.children) {
        w.u64(kindHash(child.kind));
        const at = w.placeholder();
        const start = w.length;
        writePayload(w, child, depth + 1);
        w.patch(at, w.length - start);
      }
      return;
  }
}

function writePeer(w: Writer, peer: string): void {
  const bytes = peerIdBytes(peer);
  w.u64(bytes.length);
  w.bytes(bytes);
}

function writeAddress(w: Writer, address: readonly AddressSegment[]): void {
  w.u64(address.length);
  for (const segment of address) {
    if ('p2p' in segment) {
      w.u32(0);
      writePeer(w, segment.p2p);
    } else if ('site' in segment) {
      w.u32(1);
      w.u64(segment.site);
    } else if ('component' in segment) {
      w.u32(2);
      w.u32(segment.component);
    } else {
      const name = new TextEncoder().encode(segment.op);
      w.u32(3);
      w.u64(name.length);
      w.bytes(name);
    }
  }
}

/** A value's payload (its wire form without the type hash). */
export function encodeValue(value: Value): Uint8Array {
  const w = new Writer();
  writePayload(w, value, 0);
  return w.finish();
}

/** A value list (bb_wasm.h): u64 count, then per value its hash, length and payload; undefined is absent. */
export function encodeValueList(values: readonly (Value | undefined)[]): Uint8Array {
  const w = new Writer();
  w.u64(values.length);
  for (const value of values) {
    if (value === undefined) {
      w.u64(0);
      w.u64(0);
      continue;
    }
    w.u64(kindHash(value.kind));
    const at = w.placeholder();
    const start = w.length;
    writePayload(w, value, 0);
    w.patch(at, w.length - start);
  }
  return w.finish();
}

class Reader {
  readonly #view: DataView;
  readonly #bytes: Uint8Array;
  at = 0;
  constructor(bytes: Uint8Array) {
    this.#bytes = bytes;
    this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  get left(): number {
    return this.#bytes.length - this.at;
  }
  #need(n: number, what: string): void {
    if (n > this.left) throw new BbError(BbErrorCode.Malformed, `${what}: ${n} bytes needed, ${this.left} left`);
  }
  u32(what: string): number {
    this.#need(4, what);
    const v = this.#view.getUint32(this.at, true);
    this.at += 4;
    return v;
  }
  u64(what: string): bigint {
    this.#need(8, what);
    const v = this.#view.getBigUint64(this.at, true);
    this.at += 8;
    return v;
  }
  /** A u64 length that must fit in what is left. */
  length(what: string, unit = 1): number {
    const n = this.u64(what);
    if (n > BigInt(Math.floor(this.left / unit))) throw new BbError(BbErrorCode.Malformed, `${what}: ${n} does not fit`);
    return Number(n);
  }
  take(n: number, what: string): Uint8Array {
    this.#need(n, what);
    const out = this.#bytes.subarray(this.at, this.at + n);
    this.at += n;
    return out;
  }
}

function readPeer(r: Reader): string {
  const bytes = r.take(r.length('peer id length'), 'peer id');
  checkMultihash(bytes);
  return base58Encode(bytes);
}

function readAddress(r: Reader): AddressSegment[] {
  const n = r.length('address segments', 4);
  if (n > 8) throw new BbError(BbErrorCode.Malformed, `an address has at most 8 segments, not ${n}`);
  const segments: AddressSegment[] = [];
  for (let i = 0; i < n; i++) {
    const variant = r.u32('address segment');
    if (variant === 0) segments.push({ p2p: readPeer(r) });
    else if (variant === 1) segments.push({ site: r.u64('site') });
    else if (variant === 2) segments.push({ component: r.u32('component') });
    else if (variant === 3) segments.push({ op: new TextDecoder().decode(r.take(r.length('op name'), 'op name')) });
    else throw new BbError(BbErrorCode.Malformed, `unknown address segment variant ${variant}`);
  }
  return segments;
}

function readPayload(kind: ValueKind, r: Reader, depth: number): Value {
  switch (kind) {
    case 'trigger':
      return trigger;
    case 'bytes':
      return { kind, bytes: r.take(r.length('bytes length'), 'bytes').slice() };
    case 'tensor': {
      const code = r.u32('tensor element type');
      const dtype = dtypeFromCode(code);
      if (dtype === undefined) throw new BbError(BbErrorCode.Malformed, `tensor element type ${code} is unknown`);
      const rank = r.u32('tensor rank');
      if (rank > 8) throw new BbError(BbErrorCode.Malformed, `tensor rank ${rank} is above 8`);
      const dims: number[] = [];
      for (let i = 0; i < rank; i++) {
        const d = r.u64('tensor dim');
        if (d > BigInt(Number.MAX_SAFE_INTEGER)) throw new BbError(BbErrorCode.Malformed, `tensor dim ${d} is too large`);
        dims.push(Number(d));
      }
      const info = dtypeInfo(dtype);
      const numel = dims.reduce((a, b) => a * b, 1);
      const size = numel * info.lanes * info.array.BYTES_PER_ELEMENT;
      if (size !== r.left) throw new BbError(BbErrorCode.Malformed, `tensor data is ${r.left} bytes, its shape needs ${size}`);
      const copy = r.take(size, 'tensor data').slice();
      const data = new info.array(copy.buffer, 0, numel * info.lanes) as TensorArray;
      return { kind, tensor: { dtype, dims, data } };
    }
    case 'u64':
    case 'timestamp':
    case 'commandId':
    case 'wireReqId':
    case 'correlation':
      return { kind, value: r.u64(kind) };
    case 'peer':
      return { kind, peer: readPeer(r) };
    case 'peers': {
      const n = r.length('peer count', 9);
      return { kind, peers: Array.from({ length: n }, () => readPeer(r)) };
    }
    case 'address':
      return { kind, address: readAddress(r) };
    case 'addresses': {
      const n = r.length('address count', 8);
      return { kind, addresses: Array.from({ length: n }, () => readAddress(r)) };
    }
    case 'composite': {
      if (depth >= MAX_NESTING) throw new BbError(BbErrorCode.Malformed, `composites nest at most ${MAX_NESTING} deep`);
      const n = r.length('composite count', 16);
      const children: Value[] = [];
      for (let i = 0; i < n; i++) {
        const hash = r.u64('child type');
        const childKind = kindOfHash(hash);
        if (childKind === undefined) throw new BbError(BbErrorCode.Malformed, `child ${i} has unknown type hash ${hash}`);
        const len = r.length('child length');
        children.push(decodeExact(childKind, r.take(len, 'child'), depth + 1));
      }
      return { kind, children };
    }
  }
}

function decodeExact(kind: ValueKind, bytes: Uint8Array, depth: number): Value {
  const r = new Reader(bytes);
  const value = readPayload(kind, r, depth);
  if (r.left !== 0) throw new BbError(BbErrorCode.Malformed, `${r.left} bytes after a ${kind} value`);
  return value;
}

/** Decodes a payload of a known type hash (BbError Malformed for bad bytes, NotFound for an unknown hash). */
export function decodeValue(hash: bigint, payload: Uint8Array): Value {
  const kind = kindOfHash(hash);
  if (kind === undefined) throw new BbError(BbErrorCode.NotFound, `type hash 0x${hash.toString(16)} is not a value kind`);
  return decodeExact(kind, payload, 0);
}

/** Decodes a value list (absent entries are undefined). */
export function decodeValueList(bytes: Uint8Array): (Value | undefined)[] {
  const r = new Reader(bytes);
  const n = r.length('value count', 16);
  const values: (Value | undefined)[] = [];
  for (let i = 0; i < n; i++) {
    const hash = r.u64('type hash');
    const len = r.length('value length');
    const payload = r.take(len, 'value');
    values.push(hash === 0n ? undefined : decodeValue(hash, payload));
  }
  if (r.left !== 0) throw new BbError(BbErrorCode.Malformed, `${r.left} bytes after the last value`);
  return values;
}
