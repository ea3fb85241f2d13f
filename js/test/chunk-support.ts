/** What the transport tests share: chunks made by hand, as a hostile sender makes them. */
import { CHUNK_HEADER_BYTES } from '../src/transport/chunking.js';

/** A chunk whose header says what the caller likes, then `payload` zero bytes. */
export function rawChunk(messageId: number, index: number, count: number, offset: number, total: number, payload: number): Uint8Array {
  const chunk = new Uint8Array(CHUNK_HEADER_BYTES + payload);
  const view = new DataView(chunk.buffer);
  view.setUint8(0, 0xbb);
  view.setUint8(1, 1);
  view.setUint32(4, messageId, true);
  view.setUint32(8, index, true);
  view.setUint32(12, count, true);
  view.setUint32(16, offset, true);
  view.setUint32(20, total, true);
  return chunk;
}
