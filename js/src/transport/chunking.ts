/**
 * Framing of one envelope into data-channel sized chunks, and the reassembler that puts
 * them back together under fixed memory limits. Pure: no I/O, time is passed in.
 *
 * Chunk layout (little-endian, {@link CHUNK_HEADER_BYTES} bytes, then the payload):
 *   0 u8  magic 0xBB      1 u8  version 1      2 u16 flags (must be 0)
 *   4 u32 message id      8 u32 chunk index   12 u32 chunk count
 *  16 u32 byte offset    20 u32 total bytes
 * Every chunk but the last carries exactly `stride` payload bytes and sits at
 * offset = index × stride, so chunks can neither overlap nor leave holes.
 */
import { TransportError } from './errors.js';

export const CHUNK_MAGIC = 0xbb;
export const CHUNK_VERSION = 1;
export const CHUNK_HEADER_BYTES = 24;
/** 64 KiB: the largest data-channel message every browser accepts. */
export const DEFAULT_CHUNK_SIZE = 64 * 1024;

/** The decoded header of one chunk. */
export interface ChunkHeader {
  messageId: number;
  index: number;
  count: number;
  offset: number;
  total: number;
}

/** Number of chunks of at most `chunkSize` bytes (header included) for an envelope of `total` bytes. */
export function chunkCount(total: number, chunkSize: number): number {
  const stride = payloadStride(chunkSize);
  return total === 0 ? 1 : Math.ceil(total / stride);
}

function payloadStride(chunkSize: number): number {
  if (!Number.isInteger(chunkSize) || chunkSize <= CHUNK_HEADER_BYTES) {
    throw new RangeError(`chunk size ${chunkSize} must be an integer above the ${CHUNK_HEADER_BYTES}-byte header`);
  }
  return chunkSize - CHUNK_HEADER_BYTES;
}

/** Builds chunk `index` of `envelope` (a fresh buffer of header + payload). */
export function encodeChunk(envelope: Uint8Array, messageId: number, index: number, chunkSize: number): Uint8Array<ArrayBuffer> {
  const stride = payloadStride(chunkSize);
  const count = chunkCount(envelope.byteLength, chunkSize);
  if (envelope.byteLength > 0xffffffff) throw new RangeError(`envelope of ${envelope.byteLength} bytes exceeds 4 GiB`);
  if (index < 0 || index >= count) throw new RangeError(`chunk index ${index} outside 0..${count - 1}`);
  const offset = index * stride;
  const end = Math.min(envelope.byteLength, offset + stride);
  const chunk = new Uint8Array(CHUNK_HEADER_BYTES + (end - offset));
  const view = new DataView(chunk.buffer);
  view.setUint8(0, CHUNK_MAGIC);
  view.setUint8(1, CHUNK_VERSION);
  view.setUint16(2, 0, true);
  view.setUint32(4, messageId >>> 0, true);
  view.setUint32(8, index, true);
  view.setUint32(12, count, true);
  view.setUint32(16, offset, true);
  view.setUint32(20, envelope.byteLength, true);
  chunk.set(envelope.subarray(offset, end), CHUNK_HEADER_BYTES);
  return chunk;
}

/** All chunks of one envelope, in order. */
export function* encodeChunks(envelope: Uint8Array, messageId: number, chunkSize = DEFAULT_CHUNK_SIZE): Generator<Uint8Array> {
  const count = chunkCount(envelope.byteLength, chunkSize);
  for (let i = 0; i < count; i++) yield encodeChunk(envelope, messageId, i, chunkSize);
}

/** Reads and checks a chunk's header; throws `malformed-chunk` when it cannot be one of ours. */
export function decodeChunkHeader(chunk: Uint8Array, peer?: string): ChunkHeader {
  if (chunk.byteLength < CHUNK_HEADER_BYTES) {
    throw new TransportError('malformed-chunk', `chunk of ${chunk.byteLength} bytes is shorter than its ${CHUNK_HEADER_BYTES}-byte header`, peer);
  }
  const view = new DataView(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (view.getUint8(0) !== CHUNK_MAGIC || view.getUint8(1) !== CHUNK_VERSION) {
    throw new TransportError('malformed-chunk', `chunk starts with 0x${view.getUint8(0).toString(16)} 0x${view.getUint8(1).toString(16)}, not magic 0xbb version 1`, peer);
  }
  if (view.getUint16(2, true) !== 0) {
    throw new TransportError('malformed-chunk', `chunk has unknown flags 0x${view.getUint16(2, true).toString(16)}`, peer);
  }
  const header = {
    messageId: view.getUint32(4, true),
    index: view.getUint32(8, true),
    count: view.getUint32(12, true),
    offset: view.getUint32(16, true),
    total: view.getUint32(20, true),
  };
  const length = chunk.byteLength - CHUNK_HEADER_BYTES;
  const bad = (why: string): TransportError =>
    new TransportError('malformed-chunk', `message ${header.messageId} chunk ${header.index}/${header.count}: ${why}`, peer);
  if (header.count === 0 || header.index >= header.count) throw bad('index outside its count');
  if (header.offset + length > header.total) throw bad(`bytes ${header.offset}..${header.offset + length} run past the total ${header.total}`);
  if (header.total === 0 && header.count !== 1) throw bad('an empty message must be one chunk');
  return header;
}

/** Limits that bound the reassembler's memory. */
export interface ReassemblyLimits {
  /** Largest envelope accepted (default 64 MiB). */
  maxMessageBytes?: number;
  /** Messages from one peer that may be incomplete at once (default 4). */
  maxPartialsPerPeer?: number;
  /** Sum of the sizes of one peer's incomplete messages (default 128 MiB). */
  maxPartialBytesPerPeer?: number;
  /** A partial message untouched for this long is dropped by {@link Reassembler.expire} (default 30 s). */
  partialTimeoutMs?: number;
}

interface Partial {
  header: ChunkHeader;
  stride: number;
  bytes: Uint8Array;
  seen: Uint8Array; // one byte per chunk: 1 once received
  received: number;
  touchedAt: number;
}

/**
 * Puts chunks back into envelopes, per peer. A chunk that breaks a rule throws a
 * {@link TransportError}; a duplicate leaves the partial message intact, any other refusal
 * discards it, so a confused sender cannot pin memory.
 */
export class Reassembler {
  readonly maxMessageBytes: number;
  readonly maxPartialsPerPeer: number;
  readonly maxPartialBytesPerPeer: number;
  readonly partialTimeoutMs: number;
  readonly #peers = new Map<string, Map<number, Partial>>();

  constructor(limits: ReassemblyLimits = {}) {
    this.maxMessageBytes = limits.maxMessageBytes ?? 64 * 1024 * 1024;
    this.maxPartialsPerPeer = limits.maxPartialsPerPeer ?? 4;
    this.maxPartialBytesPerPeer = limits.maxPartialBytesPerPeer ?? 128 * 1024 * 1024;
    this.partialTimeoutMs = limits.partialTimeoutMs ?? 30_000;
  }

  /** Takes one chunk from `peer`; returns the whole envelope when this chunk completes it, else null. */
  push(peer: string, chunk: Uint8Array, now: number): Uint8Array | null {
    const header = decodeChunkHeader(chunk, peer);
    const payload = chunk.subarray(CHUNK_HEADER_BYTES);
    const where = `message ${header.messageId} chunk ${header.index}/${header.count}`;
    if (header.total > this.maxMessageBytes) {
      throw new TransportError('message-too-large', `${where} announces ${header.total} bytes, above the ${this.maxMessageBytes}-byte limit`, peer);
    }
    const stride = strideOf(header, payload.byteLength);
    if (stride === null || expectedCount(header.total, stride) !== header.count) {
      this.#discard(peer, header.messageId);
      throw new TransportError('inconsistent-chunk', `${where}: ${payload.byteLength} bytes at offset ${header.offset} of ${header.total} do not tile ${header.count} chunks`, peer);
    }
    if (header.count === 1) {
      if (this.#peers.get(peer)?.has(header.messageId)) {
        this.#discard(peer, header.messageId);
        throw new TransportError('inconsistent-chunk', `${where} reuses the id of an incomplete message`, peer);
      }
      return payload.slice();
    }
    let partials = this.#peers.get(peer);
    if (partials === undefined) {
      partials = new Map();
      this.#peers.set(peer, partials);
    }
    let partial = partials.get(header.messageId);
    if (partial === undefined) {
      if (partials.size >= this.maxPartialsPerPeer) {
        throw new TransportError('too-many-partials', `${where}: ${partials.size} messages from this peer are already incomplete (limit ${this.maxPartialsPerPeer})`, peer);
      }
      let pending = 0;
      for (const p of partials.values()) pending += p.header.total;
      if (pending + header.total > this.maxPartialBytesPerPeer) {
        throw new TransportError('too-many-partials', `${where}: ${pending + header.total} incomplete bytes would exceed the ${this.maxPartialBytesPerPeer}-byte limit per peer`, peer);
      }
      partial = { header, stride, bytes: new Uint8Array(header.total), seen: new Uint8Array(header.count), received: 0, touchedAt: now };
      partials.set(header.messageId, partial);
    } else if (partial.header.count !== header.count || partial.header.total !== header.total || partial.stride !== stride) {
      this.#discard(peer, header.messageId);
      throw new TransportError('inconsistent-chunk', `${where} disagrees with earlier chunks (count ${partial.header.count}, total ${partial.header.total}, stride ${partial.stride})`, peer);
    }
    if (partial.seen[header.index] === 1) {
      throw new TransportError('duplicate-chunk', `${where} arrived twice`, peer);
    }
    partial.bytes.set(payload, header.offset);
    partial.seen[header.index] = 1;
    partial.received++;
    partial.touchedAt = now;
    if (partial.received < header.count) return null;
    this.#discard(peer, header.messageId);
    return partial.bytes;
  }

  /** Drops partial messages untouched for `partialTimeoutMs`; returns how many (peer, message id) it dropped. */
  expire(now: number): Array<{ peer: string; messageId: number }> {
    const dropped: Array<{ peer: string; messageId: number }> = [];
    for (const [peer, partials] of this.#peers) {
      for (const [messageId, partial] of partials) {
        if (now - partial.touchedAt >= this.partialTimeoutMs) {
          partials.delete(messageId);
          dropped.push({ peer, messageId });
        }
      }
      if (partials.size === 0) this.#peers.delete(peer);
    }
    return dropped;
  }

  /** Forgets everything from `peer` (its connection is gone). */
  dropPeer(peer: string): void {
    this.#peers.delete(peer);
  }

  /** Bytes held for incomplete messages, all peers together. */
  get pendingBytes(): number {
    let sum = 0;
    for (const partials of this.#peers.values()) for (const p of partials.values()) sum += p.header.total;
    return sum;
  }

  /** Incomplete messages from `peer`. */
  partialCount(peer: string): number {
    return this.#peers.get(peer)?.size ?? 0;
  }

  #discard(peer: string, messageId: number): void {
    const partials = this.#peers.get(peer);
    if (partials === undefined) return;
    partials.delete(messageId);
    if (partials.size === 0) this.#peers.delete(peer);
  }
}

/** The payload stride this chunk implies, or null when its offset cannot be index × stride. */
function strideOf(h: ChunkHeader, length: number): number | null {
  if (h.count === 1) return h.offset === 0 && length === h.total ? h.total : null;
  if (h.index < h.count - 1) return length > 0 && h.offset === h.index * length ? length : null;
  // The last chunk: it ends the message and starts at (count-1) × stride.
  if (h.offset + length !== h.total || h.offset % h.index !== 0) return null;
  const stride = h.offset / h.index;
  return length > 0 && length <= stride ? stride : null;
}

function expectedCount(total: number, stride: number): number {
  return total === 0 ? 1 : Math.ceil(total / stride);
}
