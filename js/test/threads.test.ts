// bb-mt.wasm on worker_threads: the same bits as bb.wasm, and as itself on one thread,
// for a MatMul 512², a Conv, the digits CNN's inference and OnnxTrainer steps; the pool's
// counters show that workers ran tasks. Then what loadBb does when threads cannot be had
// (no SharedArrayBuffer, or no shared memory of the size asked for), what it refuses, that
// a model needing more than the memory's maximum fails cleanly, and that dispose ends the
// workers and returns their stacks to the module's memory.
// The browser half (a cross-origin-isolated page, and one that is not) is browser.test.ts.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';

import { BbError, BbErrorCode, BbLoadError, CpuSession, Dataset, LocalNetwork, OnnxModel, OnnxTrainer, Tensor, encodeOnnxModel, loadBb, peerIdFromU64, roundReporter, type Bb } from '../src/index.js';
import { compileFederatedDigits, installDigitsClient, installDigitsServer, startDigitsServer } from '../src/examples/index.js';
import { reserveSharedMemory, type SharedMemoryDescriptor } from '../src/engine/loader.js';
import { startThreadPool } from '../src/engine/threads.js';
import { randomFloats } from './random.mjs';
import { packageRoot, repoRoot, wasmBytes } from './support.js';

const MT_WASM = join(packageRoot, 'wasm', 'bb-mt.wasm');
const CNN = join(repoRoot, 'examples', 'models', 'digits_cnn.onnx');

/** The float32 bit patterns, so equality is bit identity (NaNs and -0 included). */
const bits = (values: Float32Array): Uint32Array => new Uint32Array(values.buffer.slice(values.byteOffset, values.byteOffset + values.byteLength));

/** Index of the first differing element, -1 when the bits are the same (Vitest's deep equality is slow on big arrays). */
function firstDifference(a: Uint32Array, b: Uint32Array): number {
  if (a.length !== b.length) return Math.min(a.length, b.length);
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return i;
  return -1;
}

const f32 = (name: string, dims: number[]) => ({ name, dtype: 'float' as const, dims });

const matmul = encodeOnnxModel({
  opset: 17,
  nodes: [{ opType: 'MatMul', inputs: ['a', 'b'], outputs: ['y'] }],
  inputs: [f32('a', [512, 512]), f32('b', [512, 512])],
  outputs: [f32('y', [512, 512])],
});
const conv = encodeOnnxModel({
  opset: 17,
  nodes: [{ opType: 'Conv', inputs: ['x', 'w', 'b'], outputs: ['y'], attributes: { pads: { ints: [1, 1, 1, 1] } } }],
  inputs: [f32('x', [4, 16, 32, 32]), f32('w', [32, 16, 3, 3]), f32('b', [32])],
  outputs: [f32('y', [4, 32, 32, 32])],
});
const feeds = {
  matmul: { a: { data: randomFloats(512 * 512, 1), dims: [512, 512] }, b: { data: randomFloats(512 * 512, 2), dims: [512, 512] } },
  conv: {
    x: { data: randomFloats(4 * 16 * 32 * 32, 3), dims: [4, 16, 32, 32] },
    w: { data: randomFloats(32 * 16 * 9, 4), dims: [32, 16, 3, 3] },
    b: { data: randomFloats(32, 5), dims: [32] },
  },
};

/** Runs a one-output model on `inputs` and returns its output's bit patterns. */
function runModel(bb: Bb, bytes: Uint8Array, inputs: Record<string, { data: Float32Array; dims: number[] }>): Uint32Array {
  const model = OnnxModel.decode(bb, bytes);
  const session = new CpuSession(bb, model);
  const tensors = Object.fromEntries(Object.entries(inputs).map(([name, { data, dims }]) => [name, Tensor.from(bb, 'float', data, dims)]));
  try {
    const outputs = session.run(tensors);
    const [output] = Object.values(outputs);
    const out = bits(output!.toArray() as Float32Array);
    for (const tensor of Object.values(outputs)) tensor.free();
    return out;
  } finally {
    for (const tensor of Object.values(tensors)) tensor.free();
    session.free();
    model.free();
  }
}

/** The digits CNN: inference on 32 random images, then two momentum steps; every float's bits. */
function cnnRun(bb: Bb): { inference: Uint32Array; losses: number[]; parameters: Uint32Array } {
  const model = new Uint8Array(readFileSync(CNN));
  const trainer = OnnxTrainer.create(bb, model, { optimizer: 'momentum', lr: 0.05, momentum: 0.9 });
  try {
    const x = randomFloats(32 * 64, 6).map((v) => (v + 1) * 8);
    const inference = bits(trainer.predict(x, 32));
    const labels = Float32Array.from({ length: 32 }, (_, i) => (i * 7) % 10);
    const losses = [0, 1].map(() => trainer.step({ x, labels }).loss);
    return { inference, losses, parameters: bits(trainer.parameters()) };
  } finally {
    trainer.free();
  }
}

/** The federated digits example on a LocalNetwork (a server, two clients), 6 rounds: each round's accuracy and the server's snapshot. */
function federation(bb: Bb): { accuracies: number[]; snapshot: Uint8Array } {
  const rows = 300;
  const x = randomFloats(rows * 64, 21).map((v, i) => v * 3 + (((i % 64) * 7 + (Math.floor(i / 64) % 10) * 13) % 10 < 5 ? 12 : 4));
  const y = Float32Array.from({ length: rows }, (_, r) => r % 10);
  const all = Dataset.fromArrays(bb, x, 64, y);
  const test = all.subset(Array.from({ length: 100 }, (_, i) => 200 + i));
  const shards = [0, 1].map((k) => all.subset(Array.from({ length: 100 }, (_, i) => (Math.floor(i / 10) * 2 + k) * 10 + (i % 10))));
  const artifact = compileFederatedDigits(bb, { quorum: 2, target: 2 });
  const serverId = peerIdFromU64(1);
  const ids = [peerIdFromU64(2), peerIdFromU64(3)];
  const server = installDigitsServer(bb, artifact, serverId, test);
  const network = new LocalNetwork([server, ...ids.map((id, k) => installDigitsClient(bb, artifact, id, serverId, shards[k]!))]);
  for (const id of ids) server.addPeer(id);
  const accuracies: number[] = [];
  server.onStep(roundReporter((report) => accuracies.push(report.accuracy)));
  startDigitsServer(server, ids, test, 0n);
  for (let t = 1; t < 2000 && accuracies.length < 6; t++) network.poll(BigInt(t) * 5_000_000n);
  const snapshot = server.snapshot();
  network.free();
  for (const object of [all, test, ...shards]) object.free();
  return { accuracies, snapshot };
}

function everything(bb: Bb) {
  return { matmul: runModel(bb, matmul, feeds.matmul), conv: runModel(bb, conv, feeds.conv), cnn: cnnRun(bb) };
}

describe('bb-mt.wasm on worker_threads', () => {
  let single: Bb;
  let threaded: Bb;
  beforeAll(async () => {
    if (!existsSync(MT_WASM)) throw new Error(`${MT_WASM} is missing: build it with \`bash scripts/build-wasm.sh\` from ${repoRoot}`);
    single = await loadBb(wasmBytes());
    threaded = await loadBb({ threads: 2 });
  });
  afterAll(() => threaded?.dispose());

  test('loads with two threads and a worker in its loop', () => {
    expect(single.threaded).toBe(false);
    expect(single.threads).toBe(1);
    expect(threaded.threaded).toBe(true);
    expect(threaded.threads).toBe(2);
    expect(threaded.threadsUnavailable).toBeUndefined();
  });

  test('gives the bits of bb.wasm, on two threads and on one', async () => {
    const reference = everything(single);
    const before = threaded.poolStats();
    const two = everything(threaded);
    // a worker the machine did not schedule during a job leaves its tasks to the caller: more
    // of the work, bounded, gives it the chance (a pool whose worker never takes one still fails)
    for (let i = 0; i < 20 && threaded.poolStats().tasksOnWorkers === before.tasksOnWorkers; i++) everything(threaded);
    const after = threaded.poolStats();
    // the work went to the pool, and the worker ran part of it
    expect(after.jobs).toBeGreaterThan(before.jobs);
    expect(after.tasksOnWorkers).toBeGreaterThan(before.tasksOnWorkers);
    expect(after.workersLive).toBe(1);
    expect(threaded.check(threaded.exports.bb_wasm_set_threads(1))).toBe(0);
    const one = everything(threaded);
    expect(threaded.poolStats().jobs).toBe(after.jobs); // one thread: no job went to the pool
    threaded.check(threaded.exports.bb_wasm_set_threads(2));
    for (const [threads, run] of [[2, two], [1, one]] as const) {
      expect(firstDifference(run.matmul, reference.matmul), `MatMul on ${threads} threads`).toBe(-1);
      expect(firstDifference(run.conv, reference.conv), `Conv on ${threads} threads`).toBe(-1);
      expect(firstDifference(run.cnn.inference, reference.cnn.inference), `CNN inference on ${threads} threads`).toBe(-1);
      expect(run.cnn.losses).toEqual(reference.cnn.losses);
      expect(firstDifference(run.cnn.parameters, reference.cnn.parameters), `CNN parameters on ${threads} threads`).toBe(-1);
    }
    expect(reference.cnn.losses[1]).toBeLessThan(reference.cnn.losses[0]!); // it trains
  });

  test("the pool's trace accounts for every job and task, the worker's timed on its own clock", () => {
    threaded.tracePool(true);
    const before = threaded.poolStats();
    everything(threaded);
    for (let i = 0; i < 20 && threaded.poolStats().tasksOnWorkers === before.tasksOnWorkers; i++) everything(threaded);
    const after = threaded.poolStats();
    const trace = threaded.poolTrace();
    expect(trace.jobs).toBe(after.jobs - before.jobs);
    expect(trace.jobs).toBeGreaterThan(0);
    expect(trace.callerTasks + trace.workerTasks).toBe(after.tasks - before.tasks);
    expect(trace.workerTasks).toBe(after.tasksOnWorkers - before.tasksOnWorkers);
    // the worker ran part of the work (given up to 20 more passes of it, as the test above),
    // timed on the clock its host answers
    expect(trace.workerTasks).toBeGreaterThan(0);
    expect(trace.workerMs).toBeGreaterThan(0);
    expect(trace.waitMs).toBeLessThanOrEqual(trace.jobMs);
    expect(trace.late).toBeLessThanOrEqual(trace.wakes);
    threaded.tracePool(false);
    expect(threaded.poolTrace().jobs).toBe(0);
  });

  test('a worker asleep (idle past its spin) is woken by the next job, and the bits stay', async () => {
    const reference = runModel(single, matmul, feeds.matmul);
    for (let i = 0; i < 3; i++) {
      await new Promise((done) => setTimeout(done, 50)); // far past the worker's spin: it sleeps
      threaded.tracePool(true);
      const run = runModel(threaded, matmul, feeds.matmul);
      expect(firstDifference(run, reference)).toBe(-1);
      // the caller woke the sleeping worker: it comes to see the job (perhaps after the job
      // ended, on a busy machine; had the caller not woken it, it would sleep on until the
      // pool stops; the wait gives up after 20 s, never hangs)
      for (let waited = 0; threaded.poolTrace().wakes === 0 && waited < 400; waited++) await new Promise((done) => setTimeout(done, 50));
      expect(threaded.poolTrace().wakes).toBeGreaterThan(0);
      threaded.tracePool(false);
    }
  });

  test('the federated example runs its rounds on bb-mt.wasm as on bb.wasm (its node copies big buffers too)', () => {
    const reference = federation(single);
    const threadedRun = federation(threaded);
    expect(reference.accuracies.length).toBe(6);
    expect(threadedRun.accuracies).toEqual(reference.accuracies);
    expect(Buffer.compare(threadedRun.snapshot, reference.snapshot)).toBe(0);
  });

  test('bb.wasm has no threads, and says so', () => {
    expect(() => single.check(single.exports.bb_wasm_set_threads(2))).toThrow(/no threads/);
    expect(() => single.check(single.exports.bb_wasm_worker_main(1))).toThrow(/bb-mt\.wasm/);
  });
});

describe('choosing threads', () => {
  test('falls back to bb.wasm on one thread, saying why, without SharedArrayBuffer', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    vi.stubGlobal('SharedArrayBuffer', undefined);
    try {
      const bb = await loadBb({ threads: 2 });
      expect(bb.threaded).toBe(false);
      expect(bb.threads).toBe(1);
      expect(bb.threadsUnavailable).toMatch(/SharedArrayBuffer/);
      expect(warn).toHaveBeenCalledWith(expect.stringMatching(/2 threads asked for, running on one: .*SharedArrayBuffer/));
    } finally {
      vi.unstubAllGlobals();
      warn.mockRestore();
    }
  });

  test('refuses thread counts that are not 1 to 64 or auto', async () => {
    for (const threads of [0, 65, 1.5, Number.NaN]) {
      await expect(loadBb({ threads })).rejects.toThrow(BbLoadError);
    }
    await expect(loadBb({ threads: 'all' as 'auto' })).rejects.toThrow(/'auto' or a whole number/);
  });

  test("'auto' takes a thread per core, and dispose ends the workers", async () => {
    const cores = (await import('node:os')).availableParallelism();
    const bb = await loadBb({ threads: 'auto' });
    expect(bb.threads).toBe(Math.min(cores, 64));
    expect(bb.threaded).toBe(cores > 1);
    bb.dispose();
    expect(bb.threads).toBe(1);
    for (let i = 0; i < 100 && bb.poolStats().workersLive > 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(bb.poolStats().workersLive).toBe(0);
    // still an engine, on one thread
    expect(runModel(bb, conv, feeds.conv).length).toBe(4 * 32 * 32 * 32);
  });

  test("dispose returns the workers' stacks to the module: pools stopped and started again do not grow its memory", async () => {
    const bb = await loadBb({ threads: 3 });
    // a worker says it runs just before it enters its loop
    for (let i = 0; i < 100 && bb.poolStats().workersLive < 2; i++) await new Promise((r) => setTimeout(r, 20));
    expect(bb.poolStats()).toMatchObject({ workersLive: 2, workerStacks: 2 });
    // the module refuses to free a stack its worker runs on, and to give a slot a second one
    expect(() => bb.check(bb.exports.bb_wasm_worker_stack_free(1))).toThrow(/slot 1 still runs on its stack/);
    expect(bb.exports.bb_wasm_worker_stack(1, 1 << 20)).toBe(0);
    await bb.dispose();
    expect(bb.poolStats()).toMatchObject({ workersLive: 0, workerStacks: 0 });
    // the same engine's pool, started and stopped again: each start takes 2 MiB of stacks,
    // 32 MiB over the cycles, more than the module's first 16 MiB could hide
    const module = await WebAssembly.compile(readFileSync(MT_WASM));
    const memory = bb.exports.memory as WebAssembly.Memory;
    const size = memory.buffer.byteLength;
    for (let cycle = 0; cycle < 16; cycle++) {
      const pool = await startThreadPool(module, memory, bb.exports, 3);
      expect(bb.poolStats().workerStacks).toBe(2);
      await pool.stop();
      expect(bb.poolStats().workerStacks).toBe(0);
    }
    expect(memory.buffer.byteLength).toBe(size);
    expect(runModel(bb, conv, feeds.conv).length).toBe(4 * 32 * 32 * 32);
  });
});

/** A MatMul of a column (rows×1) by a row (1×columns): tiny inputs, an output of rows·columns floats. */
const outerProduct = (rows: number, columns: number) =>
  encodeOnnxModel({
    opset: 17,
    nodes: [{ opType: 'MatMul', inputs: ['a', 'b'], outputs: ['y'] }],
    inputs: [f32('a', [rows, 1]), f32('b', [1, columns])],
    outputs: [f32('y', [rows, columns])],
  });
const outerFeeds = (rows: number, columns: number) => ({
  a: { data: randomFloats(rows, 31), dims: [rows, 1] },
  b: { data: randomFloats(columns, 32), dims: [1, columns] },
});

describe("the threaded module's memory", () => {
  const MIB = 2 ** 20;
  /** A Memory constructor that refuses shared memories above `limitPages` as an engine does. */
  const refusingAbove = (limitPages: number, asked: number[]) => (descriptor: SharedMemoryDescriptor) => {
    asked.push(descriptor.maximum);
    if (descriptor.maximum > limitPages) throw new RangeError('WebAssembly.Memory(): could not allocate memory');
    return new WebAssembly.Memory(descriptor);
  };

  test('where the engine refuses the maximum, the loader halves it until one is reserved', () => {
    const asked: number[] = [];
    const reserved = reserveSharedMemory(16384, refusingAbove(5000, asked));
    expect(asked).toEqual([16384, 8192, 4096]);
    expect(reserved.failure).toBeUndefined();
    expect(reserved.maximumPages).toBe(4096);
    expect((reserved.memory as WebAssembly.Memory | undefined)?.buffer).toBeInstanceOf(SharedArrayBuffer);
  });

  test('it stops at 128 MiB (or the maximum asked for, if smaller) and says what it tried', () => {
    const asked: number[] = [];
    const failed = reserveSharedMemory(16384, refusingAbove(1000, asked));
    expect(asked).toEqual([16384, 8192, 4096, 2048]);
    expect(failed.failure).toBe('the engine could not reserve shared memory for threads (maximum 1024 MiB down to 128 MiB: WebAssembly.Memory(): could not allocate memory)');
    const small: number[] = [];
    expect(reserveSharedMemory(1024, refusingAbove(100, small)).failure).toMatch(/maximum 64 MiB: /);
    expect(small).toEqual([1024]);
  });

  test('loadBb falls back to bb.wasm on one thread, saying why, when no shared memory can be reserved', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const Memory = WebAssembly.Memory;
    // the engine's constructor, refusing every shared memory (a device short of address space)
    const refusing = new Proxy(Memory, {
      construct(target, [descriptor]: [WebAssembly.MemoryDescriptor]) {
        if (descriptor.shared === true) throw new RangeError('WebAssembly.Memory(): could not allocate memory');
        return new target(descriptor);
      },
    });
    vi.stubGlobal('WebAssembly', Object.create(WebAssembly, { Memory: { value: refusing } }));
    try {
      const bb = await loadBb({ threads: 2 });
      expect(bb.threaded).toBe(false);
      expect(bb.memoryMaximum).toBeUndefined();
      expect(bb.threadsUnavailable).toMatch(/could not reserve shared memory for threads \(maximum 1024 MiB down to 128 MiB: .*could not allocate/);
      expect(warn).toHaveBeenCalledWith(expect.stringMatching(/2 threads asked for, running on one: the engine could not reserve shared memory/));
      expect(runModel(bb, conv, feeds.conv).length).toBe(4 * 32 * 32 * 32);
    } finally {
      vi.unstubAllGlobals();
      warn.mockRestore();
    }
  });

  test('refuses a maxMemory that is not a multiple of 64 KiB from 32 MiB to 2 GiB', async () => {
    for (const maxMemory of [16 * MIB, 4 * 1024 * MIB, 64 * MIB + 1, Number.NaN]) {
      await expect(loadBb({ threads: 2, maxMemory })).rejects.toThrow(/maxMemory must be a multiple of 64 KiB from 32 MiB to 2048 MiB/);
    }
  });

  test('a threaded engine grows its memory up to a small maximum; a model needing more fails with NoMem and the engine goes on', async () => {
    const bb = await loadBb({ threads: 2, maxMemory: 48 * MIB });
    try {
      expect(bb.threaded).toBe(true);
      expect(bb.memoryMaximum).toBe(48 * MIB);
      const memory = bb.exports.memory as WebAssembly.Memory;
      // 12 MiB of output: past the first 16 MiB, within 48
      const fits = outerFeeds(1536, 2048);
      const y = runModel(bb, outerProduct(1536, 2048), fits);
      expect(memory.buffer.byteLength).toBeGreaterThan(16 * MIB);
      const [a, b] = [fits.a.data, fits.b.data];
      expect(y[2048 * 1000 + 7]).toBe(bits(Float32Array.of(Math.fround(a[1000]! * b[7]!)))[0]);
      // 64 MiB of output: more than the maximum
      let failure: unknown;
      try {
        runModel(bb, outerProduct(4096, 4096), outerFeeds(4096, 4096));
      } catch (error) {
        failure = error;
      }
      expect(failure).toBeInstanceOf(BbError);
      expect((failure as BbError).code).toBe(BbErrorCode.NoMem);
      expect(memory.buffer.byteLength).toBeLessThanOrEqual(48 * MIB);
      // the same engine, threads and all, runs on
      expect(bb.threads).toBe(2);
      expect(firstDifference(runModel(bb, outerProduct(1536, 2048), fits), y)).toBe(-1);
    } finally {
      await bb.dispose();
    }
  });
});
