/**
 * Framing of one envelope into data-channel sized chunks (reassembler.ts puts them back
 * together). Pure: no I/O.
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

/** The payload stride this chunk implies, or null when its offset cannot be index × stride. */
export function strideOf(h: ChunkHeader, length: number): number | null {
  if (h.count === 1) return h.offset === 0 && length === h.total ? h.total : null;
  if (h.index < h.count - 1) return length > 0 && h.offset === h.index * length ? length : null;
  // The last chunk: it ends the message and starts at (count-1) × stride.
  if (h.offset + length !== h.total || h.offset % h.index !== 0) return null;
  const stride = h.offset / h.index;
  return length > 0 && length <= stride ? stride : null;
}

/** Chunks a message of `total` bytes takes at `stride` payload bytes each. */
export function expectedCount(total: number, stride: number): number {
  return total === 0 ? 1 : Math.ceil(total / stride);
}
