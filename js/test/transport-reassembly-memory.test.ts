/**
 * What the reassembler counts against its limits must be at least what it holds, whatever
 * shape of chunks a hostile sender picks: here the shapes that hold the most per counted
 * byte — one-byte chunks out of order, and many peers each with the most incomplete
 * messages allowed, one byte in each — measured as V8 heap and array buffers after a full
 * collection.
 */
import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';

import { describe, expect, it } from 'vitest';

import { Reassembler } from '../src/transport/reassembler.js';
import { rawChunk } from './chunk-support.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Bytes the process holds in the JavaScript heap and in array buffers, after collecting twice. */
function held(): number {
  gc();
  gc();
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.arrayBuffers;
}

const MiB = 1024 * 1024;

describe('the reassembler holds no more than it counts', () => {
  it('for one-byte chunks held out of order, up to the limit per peer', () => {
    const limit = 16 * MiB;
    const r = new Reassembler({ maxPartialBytesPerPeer: limit, maxPartialBytes: 4 * limit });
    const before = held();
    let chunks = 0;
    // chunk 0 never comes: every other one is held ahead of the prefix
    for (let index = 1; r.pendingBytes < limit - 4096; index++, chunks++) r.push('attacker', rawChunk(1, index, 16 * MiB, index, 16 * MiB, 1), 0);
    const grown = held() - before;
    expect(chunks).toBeGreaterThan(100_000);
    expect(grown).toBeLessThanOrEqual(r.pendingBytes);
  });

  it('for thousands of peers each with the most incomplete messages allowed, one byte in each', () => {
    const r = new Reassembler({ maxPartialBytes: 1 << 30 });
    const peers = Array.from({ length: 5000 }, (_, i) => `12D3KooW${String(i).padStart(44, '0')}`); // the transport holds them anyway
    const before = held();
    for (const peer of peers) {
      for (let id = 1; id <= r.maxPartialsPerPeer; id++) r.push(peer, rawChunk(id, id === 1 ? 0 : 7, 16 * MiB, id === 1 ? 0 : 7, 16 * MiB, 1), 0);
    }
    const grown = held() - before;
    expect(peers.every((peer) => r.partialCount(peer) === r.maxPartialsPerPeer)).toBe(true);
    expect(grown).toBeLessThanOrEqual(r.pendingBytes);
  });
});
