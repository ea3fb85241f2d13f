import { describe, expect, it } from 'vitest';
import {
  CHUNK_HEADER_BYTES,
  chunkCount,
  decodeChunkHeader,
  encodeChunk,
  encodeChunks,
} from '../src/transport/chunking.js';
import { CHUNK_OVERHEAD_BYTES, PARTIAL_OVERHEAD_BYTES, Reassembler, type EvictedPartial } from '../src/transport/reassembler.js';
import { TransportError } from '../src/transport/errors.js';

const CHUNK = 1024;
const STRIDE = CHUNK - CHUNK_HEADER_BYTES;

function envelope(size: number): Uint8Array {
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size; i++) bytes[i] = (i * 131 + (i >>> 8)) & 0xff;
  return bytes;
}

function same(a: Uint8Array | null, b: Uint8Array): boolean {
  return a !== null && a.byteLength === b.byteLength && Buffer.compare(a, b) === 0;
}

function code(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    if (error instanceof TransportError) return error.code;
    throw error;
  }
  return 'no error';
}

describe('chunk framing round trip', () => {
  const sizes = [0, 1, STRIDE - 1, STRIDE, STRIDE + 1, 2 * STRIDE, 2 * STRIDE + 1, 7 * STRIDE, 7 * STRIDE - 1];
  for (const size of sizes) {
    it(`${size} bytes`, () => {
      const bytes = envelope(size);
      const chunks = [...encodeChunks(bytes, 7, CHUNK)];
      expect(chunks.length).toBe(chunkCount(size, CHUNK));
      for (const c of chunks) expect(c.byteLength).toBeLessThanOrEqual(CHUNK);
      const r = new Reassembler();
      let out: Uint8Array | null = null;
      chunks.forEach((c, i) => {
        out = r.push('a', c, 0);
        if (i < chunks.length - 1) expect(out).toBeNull();
      });
      expect(same(out, bytes)).toBe(true);
      expect(r.pendingBytes).toBe(0);
    });
  }

  it('16 MiB with the default 64 KiB chunk', () => {
    const bytes = envelope(16 * 1024 * 1024);
    const r = new Reassembler();
    let out: Uint8Array | null = null;
    let n = 0;
    for (const c of encodeChunks(bytes, 1)) {
      expect(c.byteLength).toBeLessThanOrEqual(64 * 1024);
      out = r.push('a', c, 0);
      n++;
    }
    expect(n).toBe(Math.ceil(bytes.length / (64 * 1024 - CHUNK_HEADER_BYTES)));
    expect(same(out, bytes)).toBe(true);
  });

  it('rejects chunk sizes that leave no room for payload', () => {
    expect(() => chunkCount(10, CHUNK_HEADER_BYTES)).toThrow(RangeError);
  });
});

describe('reassembly', () => {
  it('tolerates reordering and interleaving of messages', () => {
    const a = envelope(5 * STRIDE + 3);
    const b = envelope(3 * STRIDE).reverse();
    const ca = [...encodeChunks(a, 1, CHUNK)].reverse();
    const cb = [...encodeChunks(b, 2, CHUNK)];
    const r = new Reassembler();
    const done: Uint8Array[] = [];
    for (let i = 0; i < Math.max(ca.length, cb.length); i++) {
      for (const c of [ca[i], cb[i]]) {
        if (c === undefined) continue;
        const out = r.push('p', c, 0);
        if (out) done.push(out);
      }
    }
    expect(done).toEqual([b, a]);
  });

  it('keeps peers apart', () => {
    const r = new Reassembler();
    const [c0, c1] = [...encodeChunks(envelope(STRIDE + 1), 1, CHUNK)];
    expect(r.push('x', c0!, 0)).toBeNull();
    expect(r.push('y', c1!, 0)).toBeNull();
    expect(r.partialCount('x')).toBe(1);
    expect(r.partialCount('y')).toBe(1);
  });

  it('rejects a duplicate chunk and still completes the message', () => {
    const bytes = envelope(3 * STRIDE);
    const [c0, c1, c2] = [...encodeChunks(bytes, 9, CHUNK)];
    const r = new Reassembler();
    r.push('p', c0!, 0);
    expect(code(() => r.push('p', c0!, 0))).toBe('duplicate-chunk');
    r.push('p', c1!, 0);
    expect(same(r.push('p', c2!, 0), bytes)).toBe(true);
  });

  it('rejects an overlapping chunk (offset not on the stride)', () => {
    const [c0, c1] = [...encodeChunks(envelope(3 * STRIDE), 4, CHUNK)];
    const bad = c1!.slice();
    new DataView(bad.buffer).setUint32(16, STRIDE - 10, true);
    const r = new Reassembler();
    r.push('p', c0!, 0);
    expect(code(() => r.push('p', bad, 0))).toBe('inconsistent-chunk');
    expect(r.partialCount('p')).toBe(0);
  });

  it('rejects chunks that disagree on the total', () => {
    const [c0] = [...encodeChunks(envelope(3 * STRIDE), 4, CHUNK)];
    const [, d1] = [...encodeChunks(envelope(3 * STRIDE - 1), 4, CHUNK)];
    const r = new Reassembler();
    r.push('p', c0!, 0);
    expect(code(() => r.push('p', d1!, 0))).toBe('inconsistent-chunk');
  });

  it('rejects a count that does not match total and stride', () => {
    const c = encodeChunk(envelope(2 * STRIDE), 1, 0, CHUNK);
    new DataView(c.buffer).setUint32(12, 5, true);
    expect(code(() => new Reassembler().push('p', c, 0))).toBe('inconsistent-chunk');
  });

  it('rejects malformed headers', () => {
    const r = new Reassembler();
    expect(code(() => r.push('p', new Uint8Array(3), 0))).toBe('malformed-chunk');
    const c = encodeChunk(envelope(10), 1, 0, CHUNK);
    const badMagic = c.slice();
    badMagic[0] = 0;
    expect(code(() => r.push('p', badMagic, 0))).toBe('malformed-chunk');
    const badFlags = c.slice();
    badFlags[2] = 1;
    expect(code(() => r.push('p', badFlags, 0))).toBe('malformed-chunk');
    const past = c.slice();
    new DataView(past.buffer).setUint32(20, 5, true);
    expect(code(() => decodeChunkHeader(past))).toBe('malformed-chunk');
  });

  it('rejects an oversize message on its first chunk, before allocating', () => {
    const r = new Reassembler({ maxMessageBytes: 2 * STRIDE });
    const c = encodeChunk(envelope(2 * STRIDE + 1), 1, 0, CHUNK);
    expect(code(() => r.push('p', c, 0))).toBe('message-too-large');
    expect(r.pendingBytes).toBe(0);
    expect(r.push('p', encodeChunk(envelope(2 * STRIDE), 2, 0, CHUNK), 0)).toBeNull();
  });

  it('bounds the number and bytes of partial messages per peer', () => {
    const r = new Reassembler({ maxPartialsPerPeer: 2 });
    r.push('p', encodeChunk(envelope(2 * STRIDE), 1, 0, CHUNK), 0);
    r.push('p', encodeChunk(envelope(2 * STRIDE), 2, 0, CHUNK), 0);
    expect(code(() => r.push('p', encodeChunk(envelope(2 * STRIDE), 3, 0, CHUNK), 0))).toBe('too-many-partials');
    expect(r.push('q', encodeChunk(envelope(2 * STRIDE), 3, 0, CHUNK), 0)).toBeNull();
    // bytes count as they arrive: two messages announcing 9 strides each fit in 4 strides (and their records)...
    const s = new Reassembler({ maxPartialBytesPerPeer: 4 * STRIDE + 2 * PARTIAL_OVERHEAD_BYTES });
    const [a0, a1, a2] = [...encodeChunks(envelope(9 * STRIDE), 1, CHUNK)];
    const [b0] = [...encodeChunks(envelope(9 * STRIDE), 2, CHUNK)];
    expect(s.push('p', a0!, 0)).toBeNull();
    expect(s.push('p', b0!, 0)).toBeNull();
    // ...until what they hold passes it: the message that would pass is dropped
    expect(s.push('p', a1!, 0)).toBeNull();
    expect(code(() => s.push('p', a2!, 0))).toBe('too-many-partials');
    expect(s.partialCount('p')).toBe(1);
    // single-chunk messages need no partial slot
    expect(s.push('p', encodeChunk(envelope(5), 3, 0, CHUNK), 0)).toEqual(envelope(5));
  });

  it('reserves what arrives, not what a header announces', () => {
    const r = new Reassembler();
    // 25 bytes announcing 16 MiB in 1-byte chunks: 16,777,216 of them
    const total = 16 * 1024 * 1024;
    const chunk = new Uint8Array(CHUNK_HEADER_BYTES + 1);
    const view = new DataView(chunk.buffer);
    view.setUint8(0, 0xbb);
    view.setUint8(1, 1);
    view.setUint32(4, 9, true);
    view.setUint32(8, 0, true);
    view.setUint32(12, total, true);
    view.setUint32(16, 0, true);
    view.setUint32(20, total, true);
    expect(r.push('p', chunk, 0)).toBeNull();
    expect(r.pendingBytes).toBe(1 + PARTIAL_OVERHEAD_BYTES);
    // out of order, a chunk costs its bytes and a fixed overhead
    const ahead = chunk.slice();
    new DataView(ahead.buffer).setUint32(8, 1000, true);
    new DataView(ahead.buffer).setUint32(16, 1000, true);
    const before = r.pendingBytes;
    expect(r.push('p', ahead, 0)).toBeNull();
    expect(r.pendingBytes - before).toBe(1 + CHUNK_OVERHEAD_BYTES);
  });

  it('reassembles out of order, and in order without a copy once the buffer has grown to the message', () => {
    const bytes = envelope(5 * STRIDE + 7);
    const chunks = [...encodeChunks(bytes, 4, CHUNK)];
    const r = new Reassembler();
    for (const i of [3, 1, 4, 0]) expect(r.push('p', chunks[i]!, 0)).toBeNull();
    expect(code(() => r.push('p', chunks[3]!, 0))).toBe('duplicate-chunk');
    expect(code(() => r.push('p', chunks[0]!, 0))).toBe('duplicate-chunk');
    expect(same(r.push('p', chunks[5]!, 0) ?? null, bytes)).toBe(false); // 2 is still missing
    expect(same(r.push('p', chunks[2]!, 0), bytes)).toBe(true);
    expect(r.pendingBytes).toBe(0);
  });

  it('drops the stalest partial message of any peer past the bound for all of them, and counts it', () => {
    const evicted: EvictedPartial[] = [];
    // three first chunks (a stride and the overhead each) and x's second fit; one more does not
    const r = new Reassembler({ maxPartialBytes: 4 * STRIDE + 3 * PARTIAL_OVERHEAD_BYTES }, (e) => evicted.push(e));
    const big = (id: number): Uint8Array[] => [...encodeChunks(envelope(200 * STRIDE), id, CHUNK)];
    const [x, y, z, w] = [big(1), big(2), big(3), big(4)];
    r.push('x', x[0]!, 1);
    r.push('y', y[0]!, 2);
    r.push('z', z[0]!, 3);
    r.push('x', x[1]!, 4); // x is touched again: y is now the stalest
    r.push('w', w[0]!, 5);
    expect(evicted.map((e) => `${e.peer}:${e.messageId}`)).toEqual(['y:2']);
    expect(r.evictions).toBe(1);
    expect(r.partialCount('y')).toBe(0);
    expect(r.pendingBytes).toBeLessThanOrEqual(r.maxPartialBytes);
    // a message too big for the bound even alone is refused, without dropping the others
    const tight = new Reassembler({ maxPartialBytes: 1000 });
    expect(code(() => tight.push('p', x[0]!, 0))).toBe('too-many-partials');
  });

  it('expires stale partial messages', () => {
    const r = new Reassembler({ partialTimeoutMs: 1000 });
    const [c0, c1] = [...encodeChunks(envelope(2 * STRIDE), 1, CHUNK)];
    r.push('p', c0!, 0);
    expect(r.expire(999)).toEqual([]);
    expect(r.expire(1000)).toEqual([{ peer: 'p', messageId: 1 }]);
    expect(r.pendingBytes).toBe(0);
    // the late chunk starts a new partial rather than completing a ghost
    expect(r.push('p', c1!, 1001)).toBeNull();
    r.dropPeer('p');
    expect(r.partialCount('p')).toBe(0);
  });
});
