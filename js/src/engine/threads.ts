/**
 * The work pool of bb-mt.wasm on the host's threads: Web Workers in browsers,
 * worker_threads in Node. Each worker instantiates the same compiled module on the same
 * shared memory (thread-worker-core.js) with a stack the module holds for its slot
 * (bb_wasm_worker_stack), and runs the pool's worker loop until the engine stops it; the
 * stack goes back to the module's memory once the worker has left its loop. The main thread
 * takes part in every job and waits by spinning, so it never blocks in Atomics.wait.
 */
import type { BbExports } from './abi.js';
import { cString } from './bb.js';
import { BbLoadError } from './errors.js';
import type { WasmMemory, WasmModule } from './platform.js';

/** Bytes of stack each worker's instance runs on (the main thread's is 5 MiB). */
const WORKER_STACK_BYTES = 1 << 20;
/** How long a worker may take to instantiate the module before the load fails. */
const WORKER_START_MS = 30_000;
/** How long a stopped worker may take to leave its loop before it is terminated regardless. */
const WORKER_EXIT_MS = 2_000;

/** The worker script in Node (thread-worker.js is the Web Worker's). */
const NODE_WORKER_SCRIPT = './thread-worker-node.js';

/** What the loader needs of a started pool. */
export interface ThreadPool {
  /** Threads jobs use, the main thread included. */
  readonly count: number;
  /**
   * Stops the workers' loops, terminates the workers and frees their stacks; settles when
   * every worker has ended. Every call returns the first call's promise.
   */
  stop(): Promise<void>;
}

interface WorkerLike {
  postMessage(message: unknown): void;
  terminate(): unknown;
}

interface PoolWorker extends WorkerLike {
  readonly slot: number;
  /**
   * Settles when the worker runs no more of the module: true when its loop returned or its
   * instance never started (its stack is free to reuse), false when the worker failed.
   */
  readonly exited: Promise<boolean>;
}

interface WorkerReply {
  type: 'running' | 'exited' | 'failed';
  slot: number;
  code?: number;
  message?: string;
}

/** Starts workers for slots 1..count-1 of the pool and resolves once each runs its loop. */
export async function startThreadPool(
  module: WasmModule,
  memory: WasmMemory,
  exports: BbExports,
  count: number,
): Promise<ThreadPool> {
  const set = exports.bb_wasm_set_threads(count);
  if (set < 0) throw new BbLoadError(`bb-mt.wasm refused ${count} threads (error ${set})`);
  const workers: PoolWorker[] = [];
  let stopping: Promise<void> | undefined;
  // A slot's stack is freed once its worker has left its loop (or never ran on it): the
  // module refuses while the worker is in bb_wasm_worker_main. A worker that does not leave
  // in time is terminated regardless and keeps its stack (it may have stopped anywhere).
  const freeStack = (slot: number): void => void exports.bb_wasm_worker_stack_free(slot);
  // Workers leave their loop first (so the pool's counters and locks are left in order),
  // then are terminated.
  const stop = (): Promise<void> => {
    if (stopping !== undefined) return stopping;
    exports.bb_wasm_stop_workers();
    stopping = Promise.all(
      workers.map(
        (worker) =>
          new Promise<void>((resolve) => {
            const timer = setTimeout(() => {
              void worker.terminate();
              resolve();
            }, WORKER_EXIT_MS);
            void worker.exited.then((left) => {
              clearTimeout(timer);
              if (left) freeStack(worker.slot);
              void worker.terminate();
              resolve();
            });
          }),
      ),
    ).then(() => undefined);
    return stopping;
  };
  try {
    const started: Promise<void>[] = [];
    for (let slot = 1; slot < count; slot++) {
      const stackTop = exports.bb_wasm_worker_stack(slot, WORKER_STACK_BYTES) >>> 0;
      if (stackTop === 0) throw new BbLoadError(`no stack for worker ${slot}: ${cString(new Uint8Array(exports.memory.buffer), exports.bb_wasm_last_error()) || 'unknown error'}`);
      let spawned: { worker: PoolWorker; running: Promise<void> };
      try {
        spawned = await spawn(slot);
      } catch (error) {
        freeStack(slot);
        throw error;
      }
      workers.push(spawned.worker);
      spawned.worker.postMessage({ module, memory, slot, stackTop, timeOrigin: performance.timeOrigin });
      started.push(spawned.running);
    }
    await Promise.all(started);
  } catch (error) {
    await stop();
    throw error;
  }
  return { count, stop };
}

/** One worker, and a promise that settles when its loop starts (or it fails to). */
async function spawn(slot: number): Promise<{ worker: PoolWorker; running: Promise<void> }> {
  let resolve!: () => void;
  let reject!: (error: Error) => void;
  const running = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  let markExited!: (left: boolean) => void;
  const exited = new Promise<boolean>((res) => (markExited = res));
  const timer = setTimeout(
    () => reject(new BbLoadError(`bb-mt.wasm worker ${slot} did not start within ${WORKER_START_MS / 1000} s`)),
    WORKER_START_MS,
  );
  const onReply = (reply: WorkerReply): void => {
    if (reply.type !== 'running') markExited(true);
    if (reply.type === 'running') {
      clearTimeout(timer);
      resolve();
    } else if (reply.type === 'failed') {
      clearTimeout(timer);
      reject(new BbLoadError(`bb-mt.wasm worker ${slot} could not start: ${reply.message ?? 'unknown error'}`));
    } else if (reply.type === 'exited' && reply.code !== undefined && reply.code < 0) {
      clearTimeout(timer);
      reject(new BbLoadError(`bb-mt.wasm worker ${slot} left its loop with error ${reply.code}`));
    }
  };
  const onError = (error: unknown): void => {
    markExited(false);
    clearTimeout(timer);
    reject(new BbLoadError(`bb-mt.wasm worker ${slot} failed: ${error instanceof Error ? error.message : String(error)}`));
  };
  if (isNode()) {
    // A computed specifier, so bundlers building for browsers leave node:worker_threads alone.
    const specifier = 'node:worker_threads';
    const { Worker } = (await import(/* @vite-ignore */ /* webpackIgnore: true */ specifier)) as NodeWorkerThreads;
    // Not the literal `new Worker(new URL(...))` shape: bundlers building for browsers must
    // not take the Node worker for theirs.
    const script = new URL(/* @vite-ignore */ NODE_WORKER_SCRIPT, import.meta.url);
    const worker = new Worker(script);
    worker.on('message', onReply);
    worker.on('error', onError);
    // a program that never disposes its engine still exits
    worker.unref();
    return { worker: Object.assign(worker, { slot, exited }), running };
  }
  const Worker = (globalThis as { Worker?: BrowserWorkerConstructor }).Worker;
  if (Worker === undefined) throw new BbLoadError('this platform has no Worker: bb-mt.wasm cannot start its threads');
  // This exact shape lets bundlers (Vite, webpack) ship thread-worker.js as a worker.
  const worker = new Worker(new URL('./thread-worker.js', import.meta.url), { type: 'module', name: `bb-mt worker ${slot}` });
  worker.addEventListener('message', (event) => onReply((event as { data: WorkerReply }).data));
  worker.addEventListener('error', (event) => onError((event as { message?: string }).message || 'the worker script failed to load'));
  return { worker: Object.assign(worker, { slot, exited }), running };
}

interface BrowserWorker extends WorkerLike {
  addEventListener(type: 'message' | 'error', listener: (event: unknown) => void): void;
}
type BrowserWorkerConstructor = new (url: URL, options: { type: 'module'; name: string }) => BrowserWorker;

interface NodeWorker extends WorkerLike {
  on(event: 'message', listener: (reply: WorkerReply) => void): void;
  on(event: 'error', listener: (error: unknown) => void): void;
  unref(): void;
}

interface NodeWorkerThreads {
  Worker: new (url: URL) => NodeWorker;
}

export function isNode(): boolean {
  const host = globalThis as { process?: { versions?: { node?: unknown } } };
  return typeof host.process?.versions?.node === 'string';
}
