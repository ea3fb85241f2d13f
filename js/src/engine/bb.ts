/**
 * One instantiated bb.wasm: its exports, and the memory plumbing every binding needs
 * (copying bytes in, reading results and C strings out, turning error codes into
 * {@link BbError}s). Get one from `loadBb`.
 */
import type { BbExports } from './abi.js';
import type { Host, HostComponentCallbacks, HostSigner, ModuleRecorder } from './host.js';
import type { ThreadPool } from './threads.js';
import { BbError, BbErrorCode, bbErrorCodeName } from './errors.js';

const utf8 = new TextDecoder();
const utf8Encoder = new TextEncoder();

export class Bb {
  /** The raw ABI, for bindings; the classes of this package wrap it. */
  readonly exports: BbExports;
  #memoryView: Uint8Array;
  #memoryData: DataView;

  /** @internal Made by `loadBb` once the module is instantiated and initialised. */
  readonly #host: Host | undefined;
  #pool: ThreadPool | undefined;

  /**
   * Which build this is: `'relaxed'` for bb-relaxed.wasm and bb-mt-relaxed.wasm (relaxed
   * SIMD, whose multiply-adds may round differently on another machine), `'baseline'` for
   * bb.wasm and bb-mt.wasm (the same bits everywhere). See `SimdBuild`.
   */
  readonly simd: 'relaxed' | 'baseline';

  /**
   * Why this engine runs on one thread although more were asked for (`loadBb({ threads })`):
   * e.g. the page is not cross-origin isolated. Undefined when it runs on what was asked for.
   */
  readonly threadsUnavailable: string | undefined;

  /**
   * The bytes the threaded module's shared memory was reserved to grow to (`loadBb`'s
   * `maxMemory`, or less where the device could not reserve that much); undefined for the
   * single-threaded modules, whose memory is not reserved up front.
   */
  readonly memoryMaximum: number | undefined;

  constructor(
    exports: BbExports,
    host?: Host,
    build: { simd?: 'relaxed' | 'baseline'; pool?: ThreadPool; threadsUnavailable?: string | undefined; memoryMaximum?: number } = {},
  ) {
    this.exports = exports;
    this.#host = host;
    this.simd = build.simd ?? 'baseline';
    this.#pool = build.pool;
    this.threadsUnavailable = build.threadsUnavailable;
    this.memoryMaximum = build.memoryMaximum;
    this.#memoryView = new Uint8Array(exports.memory.buffer);
    this.#memoryData = new DataView(exports.memory.buffer);
  }

  /** Threads the CPU backend's jobs run on now, this one included (1 for bb.wasm). */
  get threads(): number {
    return this.exports.bb_wasm_threads() >>> 0;
  }

  /** True when this engine is bb-mt.wasm (shared memory), whatever its thread count now. */
  get threaded(): boolean {
    return this.exports.bb_wasm_threads_supported() === 1;
  }

  /**
   * The work pool's counters since the module started (for tests and benchmarks), and the
   * worker stacks the module holds now (1 MiB each of its memory, until their workers end).
   */
  poolStats(): { jobs: number; tasks: number; tasksOnWorkers: number; workersLive: number; workerStacks: number } {
    const stat = (which: number): number => this.exports.bb_wasm_pool_stat(which);
    return { jobs: stat(0), tasks: stat(1), tasksOnWorkers: stat(2), workersLive: stat(3), workerStacks: stat(4) };
  }

  /**
   * Turns the work pool's trace on or off (a debugging aid: it reads the clock a few times
   * a job), zeroing it either way; read it with poolTrace().
   */
  tracePool(on: boolean): void {
    const set = this.exports.bb_wasm_pool_trace_set;
    if (set === undefined) throw new Error('this module has no pool trace (built before it)');
    set(on ? 1 : 0);
  }

  /**
   * The work pool's trace since tracePool(true), times in ms: per job, from its publication
   * to its end on the calling thread (`jobMs`), the caller's time in its own tasks and its
   * wait for the workers after its last one, the workers' time in tasks, and how long a
   * worker took to see a job (`wakeMs`, over `wakes`; `late` of them found no task left);
   * `sleeps`: times a worker stopped spinning and slept between jobs; `notifyMs`: the
   * caller's time waking the workers. Throws for a module
   * built without the trace.
   */
  poolTrace(): {
    jobs: number; jobMs: number; callerMs: number; callerTasks: number; waitMs: number;
    workerMs: number; workerTasks: number; wakes: number; wakeMs: number; late: number; sleeps: number; notifyMs: number;
  } {
    const stat = this.exports.bb_wasm_pool_trace_stat;
    if (stat === undefined) throw new Error('this module has no pool trace (built before it)');
    const f = (which: number): number => stat(which);
    return {
      jobs: f(0), jobMs: f(1) / 1e6, callerMs: f(2) / 1e6, callerTasks: f(3), waitMs: f(4) / 1e6,
      workerMs: f(5) / 1e6, workerTasks: f(6), wakes: f(7), wakeMs: f(8) / 1e6, late: f(9), sleeps: f(10), notifyMs: f(11) / 1e6,
    };
  }

  /**
   * Ends the engine's worker threads (bb-mt.wasm): their loops return, the workers are
   * terminated and their stacks go back to the module's memory. The engine itself stays
   * usable, on one thread, at once. The promise settles when every worker has ended (a
   * worker that does not leave its loop within 2 s is terminated and keeps its stack).
   * Safe to call more than once, and on a bb.wasm engine (nothing to end).
   */
  dispose(): Promise<void> {
    return this.#pool?.stop() ?? Promise.resolve();
  }

  /** Routes the module's component imports to JavaScript (used by registerComponentType). */
  setComponentCallbacks(callbacks: HostComponentCallbacks): void {
    if (this.#host === undefined) throw new Error('this Bb was made without its host: load it with loadBb');
    this.#host.setComponentCallbacks(callbacks);
  }

  /** Routes the module's recording import to a build in progress (used by the DSL). */
  setModuleRecorder(recorder: ModuleRecorder | undefined): void {
    if (this.#host === undefined) throw new Error('this Bb was made without its host: load it with loadBb');
    this.#host.setModuleRecorder(recorder);
  }

  /** Routes the module's signing import to JavaScript (used by nodes installed with a signer). */
  setSigner(signer: HostSigner): void {
    if (this.#host === undefined) throw new Error('this Bb was made without its host: load it with loadBb');
    this.#host.setSigner(signer);
  }

  /** Runs `use` with NUL-terminated UTF-8 copies of the strings in module memory (undefined: NULL). */
  withStrings<T>(strings: readonly (string | undefined)[], use: (...ptrs: number[]) => T): T {
    const ptrs: number[] = [];
    try {
      for (const text of strings) {
        if (text === undefined) {
          ptrs.push(0);
          continue;
        }
        const bytes = utf8Encoder.encode(text);
        const ptr = this.exports.bb_wasm_alloc(bytes.length + 1) >>> 0;
        if (ptr === 0) throw this.lastError(BbErrorCode.NoMem);
        ptrs.push(ptr);
        const memory = this.memory();
        memory.set(bytes, ptr);
        memory[ptr + bytes.length] = 0;
      }
      return use(...ptrs);
    } finally {
      for (const ptr of ptrs) if (ptr !== 0) this.exports.bb_wasm_free(ptr);
    }
  }

  /** The C library's version (BB_VERSION_STRING). */
  get version(): string {
    return this.readCString(this.exports.bb_wasm_version());
  }

  /** The version of the flat ABI the module implements. */
  get abiVersion(): number {
    return this.exports.bb_wasm_abi_version() >>> 0;
  }

  /**
   * A view on the whole module memory. Any call into the module may grow the memory and
   * detach the previous buffer, so take a fresh view after every call; never keep one.
   */
  memory(): Uint8Array {
    if (this.#memoryView.buffer !== this.exports.memory.buffer) {
      this.#memoryView = new Uint8Array(this.exports.memory.buffer);
    }
    return this.#memoryView;
  }

  /**
   * @internal The same as {@link memory}, as a DataView (little-endian reads of the module's
   * integers); the same rule holds: take a fresh one after every call into the module.
   */
  memoryData(): DataView {
    if (this.#memoryData.buffer !== this.exports.memory.buffer) {
      this.#memoryData = new DataView(this.exports.memory.buffer);
    }
    return this.#memoryData;
  }

  /** Returns a non-negative result, and throws the recorded {@link BbError} for a negative one. */
  check(result: number): number {
    if (result < 0) throw this.lastError(result);
    return result;
  }

  /**
   * Returns a pointer a call returned (as an unsigned address), and throws the recorded
   * {@link BbError} when it is NULL.
   */
  checkPointer(ptr: number): number {
    const address = ptr >>> 0;
    if (address === 0) throw this.lastError(BbErrorCode.InvalidArgument);
    return address;
  }

  /** The error the last fallible call recorded; `fallbackCode` stands in if it recorded none. */
  lastError(fallbackCode: number): BbError {
    const recorded = this.exports.bb_wasm_last_error_code();
    const code = recorded < 0 ? recorded : fallbackCode;
    const message = this.readCString(this.exports.bb_wasm_last_error());
    return new BbError(code, message || `bb.wasm failed with ${bbErrorCodeName(code)}`);
  }

  /**
   * Copies bytes into module memory for the duration of `use(ptr, len)`, and frees them
   * afterwards, whether `use` returns or throws.
   */
  withBytes<T>(bytes: Uint8Array, use: (ptr: number, len: number) => T): T {
    const ptr = this.exports.bb_wasm_alloc(bytes.length) >>> 0;
    if (ptr === 0) throw this.lastError(BbErrorCode.NoMem);
    try {
      this.memory().set(bytes, ptr);
      return use(ptr, bytes.length);
    } finally {
      this.exports.bb_wasm_free(ptr);
    }
  }

  /** A copy of the result buffer the last result-producing call filled. */
  resultBytes(): Uint8Array {
    const ptr = this.exports.bb_wasm_result_ptr() >>> 0;
    const len = this.exports.bb_wasm_result_len() >>> 0;
    return this.memory().slice(ptr, ptr + len);
  }

  /** The result buffer as UTF-8 text. */
  resultText(): string {
    const ptr = this.exports.bb_wasm_result_ptr() >>> 0;
    const len = this.exports.bb_wasm_result_len() >>> 0;
    return utf8.decode(this.memory().slice(ptr, ptr + len)); // copies: TextDecoder takes no shared view (bb-mt.wasm)
  }

  /** The NUL-terminated UTF-8 string at ptr ("" for NULL). */
  readCString(ptr: number): string {
    return cString(this.memory(), ptr);
  }
}

/** The NUL-terminated UTF-8 string at `ptr` in `memory` ('' for NULL), decoded from a copy (shared memory has no views for TextDecoder). */
export function cString(memory: Uint8Array, ptr: number): string {
  const address = ptr >>> 0;
  if (address === 0) return '';
  const end = memory.indexOf(0, address);
  return utf8.decode(memory.slice(address, end < 0 ? memory.length : end));
}
