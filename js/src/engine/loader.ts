/**
 * Loads bb.wasm by hand: finds the bytes, compiles them, checks that the module asks for
 * nothing the host cannot give and exports the ABI this package speaks, instantiates it
 * and runs its initialisers. Works in Node (20+) and in browsers and workers.
 */
import { BB_WASM_ABI_VERSION, BB_WASM_FUNCTION_ARITY, type BbExports } from './abi.js';
import { Bb } from './bb.js';
import { BbLoadError } from './errors.js';
import { createHost } from './host.js';
import type { WasmMemory, WasmModule } from './platform.js';
import { isNode, startThreadPool, type ThreadPool } from './threads.js';

/**
 * Where bb.wasm comes from:
 * - a URL, or a string holding one: fetched (`file:` URLs are read from disk in Node);
 *   in Node a string that is not a URL is a file path, in browsers it is resolved
 *   against the page like any fetch;
 * - a `Response`, or a promise of one (e.g. `fetch(...)`): compiled while it streams
 *   when it is served as `application/wasm`;
 * - the module's bytes;
 * - an already compiled `WebAssembly.Module`.
 */
export type WasmSource =
  | string
  | URL
  | Response
  | PromiseLike<Response>
  | ArrayBuffer
  | ArrayBufferView
  | WasmModule;

/** How {@link loadBb} loads the module. */
export interface LoadOptions {
  /**
   * Which shipped build to load when no source is given (default `'auto'`): on one thread
   * bb-relaxed.wasm or bb.wasm, on more bb-mt-relaxed.wasm or bb-mt.wasm. Ignored with a
   * source or a `threadedSource`.
   */
  simd?: SimdBuild;
  /**
   * Threads for the CPU backend's work pool, the calling thread included: a number (1 to
   * 64), or `'auto'` for one per core. Above 1 the package loads bb-mt.wasm (shared memory)
   * and starts that many minus one workers (Web Workers; worker_threads in Node). That
   * needs SharedArrayBuffer, which a page has only when it is cross-origin isolated
   * (served with `Cross-Origin-Opener-Policy: same-origin` and
   * `Cross-Origin-Embedder-Policy: require-corp`); without it the package falls back to
   * bb.wasm on one thread, says why on the console and in {@link Bb.threadsUnavailable}.
   * Results are bit-identical for any number of threads. Default 1.
   */
  threads?: number | 'auto';
  /**
   * Where the threaded module comes from (as {@link WasmSource}); default the package's
   * bb-mt-relaxed.wasm or bb-mt.wasm (as `simd` chooses), beside bb.wasm.
   */
  threadedSource?: WasmSource;
  /**
   * The most memory, in bytes, the threaded module may grow to (default 1 GiB; 32 MiB to
   * 2 GiB, a multiple of 64 KiB). Shared memory reserves its maximum when it is made; where
   * the device cannot reserve that much (32-bit browsers, phones) the loader halves it, down
   * to 128 MiB (or the maximum asked for, if smaller), and if even that fails it runs on
   * one thread (as `simd` chooses) and says why in {@link Bb.threadsUnavailable}.
   * {@link Bb.memoryMaximum} tells what was reserved. A model that needs more fails with a
   * `BbError` (`NoMem`) and the engine stays usable. The single-threaded modules' memory
   * grows to 2 GiB as the engine allows, with nothing reserved up front.
   */
  maxMemory?: number;
}

/** Most threads a pool runs on (BB_CPU_MAX_THREADS). */
const MAX_THREADS = 64;
/** The threaded module's memory in 64 KiB pages: 16 MiB at first (its linked --initial-memory). */
const MT_INITIAL_PAGES = 256;
/** At most the 2 GiB the module declares (--max-memory); 32 MiB at least (its first 16 MiB and a worker's stack). */
const MT_MAXIMUM_PAGES = 32768;
const MT_SMALLEST_PAGES = 512;
/** What the loader reserves unless told otherwise, and how low it retries when that fails. */
const MT_DEFAULT_PAGES = 16384;
const MT_RETRY_FLOOR_PAGES = 2048;
const PAGE_BYTES = 65536;

const NOT_ISOLATED = 'the page is not cross-origin isolated';
const SERVE_ISOLATED = 'serve it with the headers Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp';

/**
 * Which module a load uses: a threaded one (shared memory) on `threads` threads, or one of
 * the single-threaded ones and why not threads.
 */
export type ModuleChoice = { module: 'threaded'; threads: number } | { module: 'single'; threadsUnavailable?: string };

/**
 * Chooses the kind of module for the threads asked for and what this platform offers:
 * threaded when more than one thread is asked for and shared memory can be had,
 * single-threaded otherwise (with the reason when threads were asked for).
 */
export async function chooseModule(threads: number | 'auto' | undefined): Promise<ModuleChoice> {
  if (threads === undefined) return { module: 'single' };
  if (threads !== 'auto' && (!Number.isInteger(threads) || threads < 1 || threads > MAX_THREADS)) {
    throw new BbLoadError(`threads must be 'auto' or a whole number from 1 to ${MAX_THREADS}, not ${String(threads)}`);
  }
  const count = threads === 'auto' ? Math.min(await coreCount(), MAX_THREADS) : threads;
  if (count === 1) return { module: 'single' };
  const page = globalThis as { crossOriginIsolated?: boolean; Worker?: unknown };
  if (typeof SharedArrayBuffer === 'undefined') {
    return {
      module: 'single',
      threadsUnavailable:
        page.crossOriginIsolated === false ? `${NOT_ISOLATED}, so it has no SharedArrayBuffer: ${SERVE_ISOLATED}` : 'this platform has no SharedArrayBuffer',
    };
  }
  if (!isNode() && page.crossOriginIsolated !== true) {
    return { module: 'single', threadsUnavailable: `${NOT_ISOLATED}: ${SERVE_ISOLATED}` };
  }
  if (!isNode() && typeof page.Worker !== 'function') {
    return { module: 'single', threadsUnavailable: 'this platform has no Web Workers' };
  }
  return { module: 'threaded', threads: count };
}

/**
 * Which shipped build of bb.wasm to load when {@link loadBb} is given no source:
 * - `'auto'` (the default): `bb-relaxed.wasm` where the engine runs relaxed SIMD, `bb.wasm`
 *   otherwise;
 * - `'baseline'`: always `bb.wasm`, whose results are the same bits on every machine;
 * - `'relaxed'`: `bb-relaxed.wasm`, or a {@link BbLoadError} where the engine lacks relaxed SIMD.
 *
 * With more than one thread the same choice is between `bb-mt-relaxed.wasm` and
 * `bb-mt.wasm`.
 *
 * The builds have the same ABI and differ only in their kernels' multiply-adds:
 * `bb-relaxed.wasm` and `bb-mt-relaxed.wasm` use `f32x4.relaxed_madd`, which the engine may
 * fuse (one rounding) or not depending on the CPU, so their results can differ from
 * bb.wasm's, and from machine to machine, in the last bits of a float, while on one machine
 * and engine they repeat exactly. bb-mt.wasm gives bb.wasm's bits, and each threaded module
 * gives the same bits on any number of threads as its single-threaded twin.
 */
export type SimdBuild = 'auto' | 'relaxed' | 'baseline';

/**
 * Loads and initialises bb.wasm. Without a source it loads a module shipped with this
 * package (`bytesandbrains/bb.wasm`, or `bytesandbrains/bb-relaxed.wasm` where the engine
 * runs relaxed SIMD; {@link SimdBuild}), beside `dist/`. With `{ threads }` (see
 * {@link LoadOptions}) it loads bb-mt.wasm and its workers when the platform allows;
 * `loadBb({ threads: 'auto' })` and `loadBb(source, { threads: 2 })` both work.
 */
export async function loadBb(source?: WasmSource | LoadOptions, options: LoadOptions = {}): Promise<Bb> {
  if (isLoadOptions(source)) {
    options = source;
    source = undefined;
  }
  const maximumPages = maxMemoryPages(options.maxMemory);
  let choice = await chooseModule(options.threads);
  if (choice.module === 'threaded') {
    const reserved = reserveSharedMemory(maximumPages);
    if (reserved.memory !== undefined) {
      const source = options.threadedSource ?? shippedModule(options.simd ?? 'auto', 'threaded').url;
      return loadThreaded(source, reserved, choice.threads);
    }
    choice = { module: 'single', threadsUnavailable: reserved.failure };
  }
  if (choice.threadsUnavailable !== undefined) {
    console.warn(`bytesandbrains: ${String(options.threads)} threads asked for, running on one: ${choice.threadsUnavailable}`);
  }
  const module = await compile(source ?? shippedModule(options.simd ?? 'auto').url);
  const { exports, host } = await instantiate(module, 'bb.wasm');
  return new Bb(exports, host, { simd: usesRelaxedSimd(module) ? 'relaxed' : 'baseline', threadsUnavailable: choice.threadsUnavailable });
}

/** The threaded module on the shared memory the loader made, with `threads - 1` workers. */
async function loadThreaded(source: WasmSource, { memory, maximumPages }: SharedMemory, threads: number): Promise<Bb> {
  const module = await compile(source);
  const { exports, host } = await instantiate(module, 'bb-mt.wasm', memory);
  if (exports.bb_wasm_threads_supported() !== 1) throw new BbLoadError(`${String(source)} is bb.wasm, not bb-mt.wasm: it has no threads`);
  const pool: ThreadPool = await startThreadPool(module, memory, exports, threads);
  return new Bb(exports, host, { simd: usesRelaxedSimd(module) ? 'relaxed' : 'baseline', pool, memoryMaximum: maximumPages * PAGE_BYTES });
}

/** `maxMemory` (bytes) as 64 KiB pages, checked; the default when undefined. */
function maxMemoryPages(maxMemory: number | undefined): number {
  if (maxMemory === undefined) return MT_DEFAULT_PAGES;
  const pages = maxMemory / PAGE_BYTES;
  if (!Number.isInteger(pages) || pages < MT_SMALLEST_PAGES || pages > MT_MAXIMUM_PAGES) {
    throw new BbLoadError(
      `maxMemory must be a multiple of 64 KiB from ${mib(MT_SMALLEST_PAGES)} to ${mib(MT_MAXIMUM_PAGES)}, not ${String(maxMemory)}`,
    );
  }
  return pages;
}

const mib = (pages: number): string => `${(pages * PAGE_BYTES) / 2 ** 20} MiB`;

/** The threaded module's memory and the maximum it was reserved with (64 KiB pages). */
type SharedMemory = { memory: WasmMemory; maximumPages: number };
/** What `new WebAssembly.Memory` is given for the threaded module (in 64 KiB pages). */
export type SharedMemoryDescriptor = { initial: number; maximum: number; shared: true };
/** What {@link reserveSharedMemory} made, or why it could not. */
export type SharedMemoryReservation = (SharedMemory & { failure?: undefined }) | { memory?: undefined; maximumPages?: undefined; failure: string };

/**
 * @internal Makes the threaded module's shared memory with a maximum of `maximumPages`, and
 * where the engine refuses to reserve that much, with half as much, down to 128 MiB (or
 * `maximumPages` if smaller). `makeMemory` is the constructor (replaced in tests).
 */
export function reserveSharedMemory(
  maximumPages: number,
  makeMemory: (descriptor: SharedMemoryDescriptor) => WasmMemory = (descriptor) => new WebAssembly.Memory(descriptor),
): SharedMemoryReservation {
  const floor = Math.min(maximumPages, MT_RETRY_FLOOR_PAGES);
  const maxima = [maximumPages];
  while (maxima[maxima.length - 1]! > floor) maxima.push(Math.max(floor, maxima[maxima.length - 1]! >> 1));
  let last = '';
  for (const pages of maxima) {
    try {
      return { memory: makeMemory({ initial: MT_INITIAL_PAGES, maximum: pages, shared: true }), maximumPages: pages };
    } catch (cause) {
      last = messageOf(cause);
    }
  }
  const tried = maximumPages === floor ? mib(floor) : `${mib(maximumPages)} down to ${mib(floor)}`;
  return { failure: `the engine could not reserve shared memory for threads (maximum ${tried}: ${last})` };
}

/**
 * Instantiates `module` (`name` in messages) with a new host's imports — and `memory` as
 * `env.memory` when the loader makes the module's memory — checks its exports, attaches the
 * host to the memory, initialises the module and checks its ABI version.
 */
async function instantiate(
  module: WebAssembly.Module,
  name: string,
  memory?: WebAssembly.Memory,
): Promise<{ exports: BbExports; host: ReturnType<typeof createHost> }> {
  const host = createHost();
  const imports = memory === undefined ? host.imports : { ...host.imports, env: { ...host.imports['env'], memory } };
  checkImports(module, imports);
  let instance: WebAssembly.Instance;
  try {
    instance = await WebAssembly.instantiate(module, imports);
  } catch (cause) {
    throw new BbLoadError(`${name} failed to instantiate: ${messageOf(cause)}`, { cause });
  }
  // an imported memory is not exported: the ABI's view of the module names it all the same
  const exports = checkExports(memory === undefined ? instance.exports : { ...instance.exports, memory });
  host.attach(exports.memory);
  exports._initialize();
  checkAbiVersion(exports);
  return { exports, host };
}

function checkAbiVersion(exports: BbExports): void {
  const abiVersion = exports.bb_wasm_abi_version() >>> 0;
  if (abiVersion !== BB_WASM_ABI_VERSION) {
    throw new BbLoadError(
      `bb.wasm implements ABI version ${abiVersion}, but this package speaks version ${BB_WASM_ABI_VERSION}: ` +
        'rebuild the module from the same sources as the package',
    );
  }
}

/**
 * The one place that picks a shipped build: the relaxed one (`bb-relaxed.wasm`, or
 * `bb-mt-relaxed.wasm` threaded) for `'relaxed'`, and for `'auto'` where
 * {@link relaxedSimdSupported} says the engine runs it; the baseline one (`bb.wasm`,
 * `bb-mt.wasm`) otherwise. Each URL is written out in full so that bundlers see and emit
 * every file.
 */
export function shippedModule(simd: SimdBuild, kind: 'single' | 'threaded' = 'single'): { build: 'relaxed' | 'baseline'; url: URL } {
  if (simd !== 'auto' && simd !== 'relaxed' && simd !== 'baseline') {
    throw new BbLoadError(`simd must be 'auto', 'relaxed' or 'baseline', not ${JSON.stringify(simd)}`);
  }
  if (simd === 'relaxed' && !relaxedSimdSupported()) {
    throw new BbLoadError(
      `simd: 'relaxed' asks for ${kind === 'single' ? 'bb-relaxed.wasm' : 'bb-mt-relaxed.wasm'}, but this engine does not run relaxed SIMD ` +
        "(Node 20 needs --experimental-wasm-relaxed-simd); use 'auto' or 'baseline'",
    );
  }
  if (simd === 'baseline' || !relaxedSimdSupported()) {
    if (kind === 'threaded') return { build: 'baseline', url: new URL('../../wasm/bb-mt.wasm', import.meta.url) };
    return { build: 'baseline', url: new URL('../../wasm/bb.wasm', import.meta.url) };
  }
  if (kind === 'threaded') return { build: 'relaxed', url: new URL('../../wasm/bb-mt-relaxed.wasm', import.meta.url) };
  return { build: 'relaxed', url: new URL('../../wasm/bb-relaxed.wasm', import.meta.url) };
}

// (module (func (result v128) i32.const 0 i32x4.splat ×3 f32x4.relaxed_madd))
const RELAXED_SIMD_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // header
  0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, // type: () -> v128
  0x03, 0x02, 0x01, 0x00, // one function of that type
  0x0a, 0x13, 0x01, 0x11, 0x00, // code: one body of 17 bytes, no locals
  0x41, 0x00, 0xfd, 0x11, 0x41, 0x00, 0xfd, 0x11, 0x41, 0x00, 0xfd, 0x11, // three i32x4.splat 0
  0xfd, 0x85, 0x02, 0x0b, // f32x4.relaxed_madd (0xfd 0x105), end
]);
let relaxedSimd: boolean | undefined;

/** True when this engine validates relaxed SIMD (checked once, on a 40-byte module). */
export function relaxedSimdSupported(): boolean {
  relaxedSimd ??= WebAssembly.validate(RELAXED_SIMD_PROBE);
  return relaxedSimd;
}

/** True when the module was linked with relaxed SIMD (its target_features section says so). */
function usesRelaxedSimd(module: WebAssembly.Module): boolean {
  const marker = [...'relaxed-simd'].map((c) => c.charCodeAt(0));
  return WebAssembly.Module.customSections(module, 'target_features').some((section) => {
    const bytes = new Uint8Array(section);
    outer: for (let i = 0; i + marker.length <= bytes.length; i++) {
      for (let j = 0; j < marker.length; j++) if (bytes[i + j] !== marker[j]) continue outer;
      return true;
    }
    return false;
  });
}

/** True for a {@link LoadOptions} object rather than a {@link WasmSource}. */
function isLoadOptions(value: WasmSource | LoadOptions | undefined): value is LoadOptions {
  if (value === undefined || value === null || typeof value !== 'object') return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return (proto === Object.prototype || proto === null) && typeof (value as { then?: unknown }).then !== 'function';
}

/** Cores this platform reports (navigator.hardwareConcurrency; os.availableParallelism in Node). */
async function coreCount(): Promise<number> {
  const reported = (globalThis as { navigator?: { hardwareConcurrency?: number } }).navigator?.hardwareConcurrency;
  if (typeof reported === 'number' && reported >= 1) return reported;
  if (isNode()) {
    const specifier = 'node:os';
    const os = (await import(/* @vite-ignore */ /* webpackIgnore: true */ specifier)) as { availableParallelism(): number };
    return os.availableParallelism();
  }
  return 1;
}

async function compile(source: WasmSource): Promise<WebAssembly.Module> {
  if (source instanceof WebAssembly.Module) return source;
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) return compileBytes(source, 'the given bytes');
  if (typeof source === 'string' || source instanceof URL) return compileLocation(source);
  if (isResponse(source)) return compileResponse(source);
  return compileResponse(await source);
}

async function compileLocation(location: string | URL): Promise<WebAssembly.Module> {
  const url = typeof location === 'string' ? parseAbsoluteUrl(location) : location;
  if (isNode() && (url === undefined || url.protocol === 'file:')) {
    const path = url ?? location;
    let bytes: Uint8Array;
    try {
      bytes = await readNodeFile(path);
    } catch (cause) {
      throw new BbLoadError(`cannot read bb.wasm from ${String(path)}: ${messageOf(cause)}`, { cause });
    }
    return compileBytes(bytes, String(path));
  }
  let response: Response;
  try {
    response = await fetch(url ?? location);
  } catch (cause) {
    throw new BbLoadError(`cannot fetch bb.wasm from ${String(location)}: ${messageOf(cause)}`, { cause });
  }
  return compileResponse(response);
}

async function compileResponse(response: Response): Promise<WebAssembly.Module> {
  const where = response.url || 'the given Response';
  if (!response.ok) {
    throw new BbLoadError(`cannot fetch bb.wasm from ${where}: HTTP ${response.status} ${response.statusText}`.trimEnd());
  }
  // Streaming compilation insists on the right MIME type; anything else is compiled once
  // it has arrived, so a misconfigured server costs time, not a failure.
  const mimeType = response.headers.get('content-type')?.split(';')[0]?.trim().toLowerCase();
  if (mimeType === 'application/wasm' && typeof WebAssembly.compileStreaming === 'function') {
    try {
      return await WebAssembly.compileStreaming(response);
    } catch (cause) {
      throw new BbLoadError(`${where} is not a valid WebAssembly module: ${messageOf(cause)}`, { cause });
    }
  }
  let bytes: ArrayBuffer;
  try {
    bytes = await response.arrayBuffer();
  } catch (cause) {
    throw new BbLoadError(`cannot read bb.wasm from ${where}: ${messageOf(cause)}`, { cause });
  }
  if (mimeType === 'text/html' && !isWasm(bytes)) {
    // a dev server's fallback page where the module should be, e.g. Vite 7's dependency optimizer
    throw new BbLoadError(
      `${where} served an HTML page, not bb.wasm: a bundler moved the package away from its module. ` +
        "With Vite 7's dev server add `optimizeDeps: { exclude: ['bytesandbrains'] }` to vite.config.js, " +
        "or pass the module's URL: `import wasmUrl from 'bytesandbrains/bb.wasm?url'; loadBb(wasmUrl)`",
    );
  }
  return compileBytes(bytes, where);
}

/** True when the bytes start with WebAssembly's magic number. */
function isWasm(bytes: ArrayBuffer): boolean {
  const head = new Uint8Array(bytes, 0, Math.min(4, bytes.byteLength));
  return head.length === 4 && head[0] === 0 && head[1] === 0x61 && head[2] === 0x73 && head[3] === 0x6d;
}

async function compileBytes(bytes: ArrayBuffer | ArrayBufferView, where: string): Promise<WebAssembly.Module> {
  try {
    return await WebAssembly.compile(toArrayBufferView(bytes));
  } catch (cause) {
    throw new BbLoadError(`${where}: not a valid WebAssembly module: ${messageOf(cause)}`, { cause });
  }
}

/** Fails with the names of every import the host does not provide, instead of a bare LinkError. */
function checkImports(module: WebAssembly.Module, imports: WebAssembly.Imports): void {
  const missing = WebAssembly.Module.imports(module)
    .filter(({ module: namespace, name, kind }) => {
      const provided = imports[namespace]?.[name];
      if (kind === 'memory') return !(provided instanceof WebAssembly.Memory);
      return kind !== 'function' || typeof provided !== 'function';
    })
    .map(({ module: namespace, name, kind }) => `${namespace}.${name} (${kind})`);
  if (missing.length > 0) {
    throw new BbLoadError(`bb.wasm needs imports this loader does not provide: ${missing.join(', ')}`);
  }
}

function checkExports(exports: WebAssembly.Exports): BbExports {
  const problems: string[] = [];
  if (!(exports['memory'] instanceof WebAssembly.Memory)) problems.push('memory is not exported');
  for (const [name, arity] of Object.entries(BB_WASM_FUNCTION_ARITY)) {
    const value = exports[name];
    if (typeof value !== 'function') problems.push(`${name} is not exported`);
    else if (value.length !== arity) problems.push(`${name} takes ${value.length} arguments, not ${arity}`);
  }
  if (problems.length > 0) {
    throw new BbLoadError(`this module is not bb.wasm, or not the version this package expects: ${problems.join('; ')}`);
  }
  return exports as unknown as BbExports;
}

/**
 * @internal The bytes at a location: a URL or path as {@link WasmSource} strings are (read
 * from disk in Node for paths and `file:` URLs, fetched otherwise). `what` names them in errors.
 */
export async function loadBytes(location: string | URL, what: string): Promise<Uint8Array> {
  const url = typeof location === 'string' ? parseAbsoluteUrl(location) : location;
  try {
    if (isNode() && (url === undefined || url.protocol === 'file:')) {
      const bytes = await readNodeFile(url ?? location); // a Buffer: hand out a plain Uint8Array
      return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    }
    const response = await fetch(url ?? location);
    if (!response.ok) throw new Error(`HTTP ${response.status} ${response.statusText}`.trimEnd());
    return new Uint8Array(await response.arrayBuffer());
  } catch (cause) {
    throw new BbLoadError(`cannot read ${what} from ${String(location)}: ${messageOf(cause)}`, { cause });
  }
}

function isResponse(value: Response | PromiseLike<Response>): value is Response {
  return typeof Response !== 'undefined' && value instanceof Response;
}

/** The string as a URL when it is an absolute one; undefined for a path. */
function parseAbsoluteUrl(text: string): URL | undefined {
  // One letter before the colon is a Windows drive ("C:\..."), not a URL scheme.
  if (!/^[a-z][a-z\d+.-]+:/i.test(text)) return undefined;
  try {
    return new URL(text);
  } catch {
    return undefined;
  }
}


interface NodeFileSystem {
  readFile(path: string | URL): Promise<Uint8Array>;
}

async function readNodeFile(path: string | URL): Promise<Uint8Array> {
  // A computed specifier, so bundlers building for browsers leave node:fs alone.
  const specifier = 'node:fs/promises';
  const fs = (await import(/* @vite-ignore */ /* webpackIgnore: true */ specifier)) as NodeFileSystem;
  return fs.readFile(path);
}

function toArrayBufferView(bytes: ArrayBuffer | ArrayBufferView): Uint8Array<ArrayBuffer> {
  if (bytes instanceof ArrayBuffer) return new Uint8Array(bytes);
  const view = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  // WebAssembly.compile takes no view on a SharedArrayBuffer: copy those out.
  return view.buffer instanceof ArrayBuffer ? (view as Uint8Array<ArrayBuffer>) : view.slice();
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
