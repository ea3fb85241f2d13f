/**
 * The host imports on their own, against a bare memory, the way libc calls them: today's
 * bb.wasm imports few of them, but any libc change may start using the rest.
 */
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';

import { BbExitError } from '../src/engine/errors.js';
import { createHost, type Host } from '../src/engine/host.js';

const ERRNO_BADF = 8;
const ERRNO_INVAL = 28;
const ERRNO_SPIPE = 70;

let memory: WebAssembly.Memory;
let host: Host;

beforeEach(() => {
  memory = new WebAssembly.Memory({ initial: 8, maximum: 16 }) // 512 KiB, growable;
  host = createHost();
  host.attach(memory);
});

afterEach(() => {
  vi.restoreAllMocks();
});

/** Calls an import the way the module would. */
function call(namespace: string, name: string, ...args: (number | bigint)[]): unknown {
  const imported = host.imports[namespace]?.[name];
  if (typeof imported !== 'function') throw new Error(`${namespace}.${name} is not provided`);
  return (imported as (...values: (number | bigint)[]) => unknown)(...args);
}

const wasi = (name: string, ...args: (number | bigint)[]): unknown => call('wasi_snapshot_preview1', name, ...args);
const view = (): DataView => new DataView(memory.buffer);

/** Lays out iovecs at 0 pointing at the given strings (stored from 1024 on); returns their count. */
function writeIovecs(...parts: string[]): number {
  let at = 1024;
  parts.forEach((part, i) => {
    const bytes = new TextEncoder().encode(part);
    new Uint8Array(memory.buffer).set(bytes, at);
    view().setUint32(i * 8, at, true);
    view().setUint32(i * 8 + 4, bytes.length, true);
    at += bytes.length;
  });
  return parts.length;
}

describe('stdout and stderr', () => {
  test('fd_write gathers iovecs into whole lines on the console and reports the bytes written', () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    const error = vi.spyOn(console, 'error').mockImplementation(() => {});
    expect(wasi('fd_write', 1, 0, writeIovecs('hello ', 'wor'), 512)).toBe(0);
    expect(view().getUint32(512, true)).toBe(9);
    expect(log).not.toHaveBeenCalled(); // no newline yet
    expect(wasi('fd_write', 1, 0, writeIovecs('ld\nsecond\nthi'), 512)).toBe(0);
    expect(log.mock.calls).toEqual([['hello world'], ['second']]);
    expect(wasi('fd_write', 2, 0, writeIovecs('é\n'), 512)).toBe(0);
    expect(error.mock.calls).toEqual([['é']]);
  });

  test('a multi-byte character split across writes comes out whole', () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    const bytes = new TextEncoder().encode('€\n'); // three bytes, then the newline
    new Uint8Array(memory.buffer).set(bytes, 1024);
    for (const [start, end] of [[0, 2], [2, 4]] as const) {
      view().setUint32(0, 1024 + start, true);
      view().setUint32(4, end - start, true);
      expect(wasi('fd_write', 1, 0, 1, 512)).toBe(0);
    }
    expect(log.mock.calls).toEqual([['€']]);
  });

  test('proc_exit flushes what is pending and throws BbExitError with the code', () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    wasi('fd_write', 1, 0, writeIovecs('last words'), 512);
    expect(() => wasi('proc_exit', 3)).toThrow(BbExitError);
    expect(log.mock.calls).toEqual([['last words']]);
    expect(() => wasi('proc_exit', 7)).toThrow(expect.objectContaining({ name: 'BbExitError', exitCode: 7 }));
  });
});

describe('there are no files', () => {
  test('other descriptors are bad, and the console cannot seek', () => {
    expect(wasi('fd_write', 3, 0, writeIovecs('x'), 512)).toBe(ERRNO_BADF);
    expect(wasi('fd_close', 3)).toBe(ERRNO_BADF);
    expect(wasi('fd_seek', 1, 0n, 0, 512)).toBe(ERRNO_SPIPE);
    expect(wasi('fd_seek', 9, 0n, 0, 512)).toBe(ERRNO_BADF);
  });

  test('the environment is empty', () => {
    view().setUint32(0, 99, true);
    view().setUint32(4, 99, true);
    expect(wasi('environ_sizes_get', 0, 4)).toBe(0);
    expect([view().getUint32(0, true), view().getUint32(4, true)]).toEqual([0, 0]);
    expect(wasi('environ_get', 0, 0)).toBe(0);
  });
});

describe('clocks and entropy', () => {
  test('clock_time_get gives wall-clock and monotonic nanoseconds, and refuses unknown clocks', () => {
    const before = BigInt(Date.now()) * 1_000_000n;
    expect(wasi('clock_time_get', 0, 1n, 64)).toBe(0);
    const realtime = view().getBigUint64(64, true);
    expect(realtime >= before && realtime <= BigInt(Date.now()) * 1_000_000n).toBe(true);

    expect(wasi('clock_time_get', 1, 1n, 64)).toBe(0);
    const first = view().getBigUint64(64, true);
    expect(wasi('clock_time_get', 1, 1n, 64)).toBe(0);
    expect(view().getBigUint64(64, true) >= first).toBe(true);

    expect(wasi('clock_time_get', 42, 1n, 64)).toBe(ERRNO_INVAL);
  });

  test('random_get fills large buffers completely, beyond one getRandomValues call', () => {
    const len = 200_000; // more than three 64 KiB chunks
    expect(wasi('random_get', 4096, len)).toBe(0);
    const filled = new Uint8Array(memory.buffer, 4096, len);
    // A zero run of 4 KiB in random bytes means a chunk was skipped.
    for (let at = 0; at < len; at += 4096) {
      expect(filled.subarray(at, at + 4096).some((byte) => byte !== 0)).toBe(true);
    }
  });

  test('getentropy fills its buffer and returns 0', () => {
    expect(call('env', 'getentropy', 128, 64)).toBe(0);
    expect(new Uint8Array(memory.buffer, 128, 64).some((byte) => byte !== 0)).toBe(true);
  });
});

test('after the memory grows, imports write into the new buffer', () => {
  memory.grow(1);
  const end = memory.buffer.byteLength - 8;
  expect(wasi('clock_time_get', 0, 1n, end)).toBe(0);
  expect(view().getBigUint64(end, true) > 0n).toBe(true);
  expect(call('env', 'emscripten_notify_memory_growth', 0)).toBeUndefined();
});

test('imports called before the memory is attached fail loudly', () => {
  const early = createHost();
  const clock = early.imports['wasi_snapshot_preview1']?.['clock_time_get'] as (...args: (number | bigint)[]) => number;
  expect(() => clock(0, 1n, 0)).toThrow(/before instantiation finished/);
});
