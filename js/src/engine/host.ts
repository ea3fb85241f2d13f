/**
 * The imports bb.wasm needs from its host: the few WASI functions Emscripten's standalone
 * libc links against, and Emscripten's `env` hooks. The library itself is sans-IO, so
 * these only serve libc: diagnostics written to stdout/stderr, clocks and entropy. Files
 * do not exist here; every file call answers "bad file descriptor".
 */
import { BbExitError } from './errors.js';
import type { WasmImports, WasmMemory } from './platform.js';

/** WASI errno values (wasi_snapshot_preview1). */
const ERRNO_SUCCESS = 0;
const ERRNO_BADF = 8;
const ERRNO_INVAL = 28;
const ERRNO_SPIPE = 70;

const CLOCK_REALTIME = 0;
const CLOCK_MONOTONIC = 1;
const CLOCK_PROCESS_CPUTIME = 2;
const CLOCK_THREAD_CPUTIME = 3;

const STDOUT = 1;
const STDERR = 2;

/** crypto.getRandomValues fills at most this many bytes per call. */
const RANDOM_CHUNK = 65536;

/**
 * The callbacks of components whose methods run in JavaScript (bb_wasm.h, "components whose
 * methods run in the host"): what the module's env.bb_host_* imports call.
 */
export interface HostComponentCallbacks {
  create(typeId: number, slotPtr: number, configPtr: number, configLen: number, seed: bigint): number;
  destroy(instance: number): void;
  invoke(instance: number, opTypePtr: number, nInputs: number, nOutputs: number): number;
  onMessage(instance: number, opPtr: number, fromPtr: number, payloadPtr: number, len: number): number;
  onTimer(instance: number, token: bigint): number;
  save(instance: number): number;
  load(instance: number, statePtr: number, len: number): number;
}

/** What the module's env.bb_host_module_record import calls: record a Module's body or bootstrap. */
export type ModuleRecorder = (hostId: number, bootstrap: boolean) => void;

/**
 * What the module's env.bb_host_sign import calls: node `node` (its handle) asks for the
 * Ed25519 signature of `message` for its component at `slot`. True when the host will
 * answer (bb_wasm_node_signed, once the signature is ready); false when it holds no
 * identity for that node.
 */
export type HostSigner = (node: number, slot: string, message: Uint8Array) => boolean;

/** The host side of one module instance: its import object, then the memory to serve once instantiated. */
export interface Host {
  readonly imports: WasmImports;
  /** Gives the host the instance's memory; imports called before this throw. */
  attach(memory: WasmMemory): void;
  /** Routes the component imports (until then a create fails with BB_ERR_INVALID_ARGUMENT). */
  setComponentCallbacks(callbacks: HostComponentCallbacks): void;
  /** Routes the recording import to the build in progress (undefined: none). */
  setModuleRecorder(recorder: ModuleRecorder | undefined): void;
  /** Routes the signing import (until then every request is refused). */
  setSigner(signer: HostSigner): void;
}

export function createHost(): Host {
  let memory: WebAssembly.Memory | undefined;
  let components: HostComponentCallbacks | undefined;
  let recorder: ModuleRecorder | undefined;
  let signer: HostSigner | undefined;

  const buffer = (): ArrayBuffer => {
    if (memory === undefined) throw new Error('bb.wasm called its host before instantiation finished');
    // Asked for afresh on every use: growing the memory replaces its buffer.
    return memory.buffer;
  };
  const view = (): DataView => new DataView(buffer());
  const bytes = (ptr: number, len: number): Uint8Array<ArrayBuffer> => new Uint8Array(buffer(), ptr >>> 0, len >>> 0);

  const stdout = new LineWriter((line) => console.log(line));
  const stderr = new LineWriter((line) => console.error(line));

  const fillRandom = (ptr: number, len: number): void => {
    // into a copy: getRandomValues takes no view on shared memory (bb-mt.wasm)
    const target = bytes(ptr, len);
    const fresh = new Uint8Array(Math.min(target.length, RANDOM_CHUNK));
    for (let at = 0; at < target.length; at += RANDOM_CHUNK) {
      const chunk = fresh.subarray(0, Math.min(RANDOM_CHUNK, target.length - at));
      crypto.getRandomValues(chunk);
      target.set(chunk, at);
    }
  };

  const wasi = {
    fd_write(fd: number, iovs: number, iovsLen: number, nwrittenPtr: number): number {
      const writer = fd === STDOUT ? stdout : fd === STDERR ? stderr : undefined;
      if (writer === undefined) return ERRNO_BADF;
      const mem = view();
      let written = 0;
      for (let i = 0; i < iovsLen; i++) {
        const base = mem.getUint32(iovs + i * 8, true);
        const len = mem.getUint32(iovs + i * 8 + 4, true);
        writer.write(bytes(base, len).slice()); // a copy: TextDecoder takes no shared view
        written += len;
      }
      mem.setUint32(nwrittenPtr, written, true);
      return ERRNO_SUCCESS;
    },
    fd_close(_fd: number): number {
      return ERRNO_BADF;
    },
    fd_seek(fd: number, _offset: bigint, _whence: number, _newOffsetPtr: number): number {
      return fd === STDOUT || fd === STDERR ? ERRNO_SPIPE : ERRNO_BADF;
    },
    proc_exit(code: number): never {
      stdout.flush();
      stderr.flush();
      throw new BbExitError(code);
    },
    clock_time_get(clockId: number, _precision: bigint, timePtr: number): number {
      let nanoseconds: bigint;
      switch (clockId) {
        case CLOCK_REALTIME:
          nanoseconds = BigInt(Date.now()) * 1_000_000n;
          break;
        case CLOCK_MONOTONIC:
        case CLOCK_PROCESS_CPUTIME:
        case CLOCK_THREAD_CPUTIME:
          nanoseconds = BigInt(Math.round(performance.now() * 1e6));
          break;
        default:
          return ERRNO_INVAL;
      }
      view().setBigUint64(timePtr, nanoseconds, true);
      return ERRNO_SUCCESS;
    },
    environ_sizes_get(countPtr: number, sizePtr: number): number {
      const mem = view();
      mem.setUint32(countPtr, 0, true);
      mem.setUint32(sizePtr, 0, true);
      return ERRNO_SUCCESS;
    },
    environ_get(_environ: number, _environBuf: number): number {
      return ERRNO_SUCCESS;
    },
    random_get(ptr: number, len: number): number {
      fillRandom(ptr, len);
      return ERRNO_SUCCESS;
    },
  };

  const env = {
    // Nothing to do: every view on the memory is made afresh from memory.buffer.
    emscripten_notify_memory_growth(_memoryIndex: number): void {},
    getentropy(ptr: number, len: number): number {
      fillRandom(ptr, len);
      return 0;
    },
    bb_host_create(typeId: number, slotPtr: number, configPtr: number, configLen: number, seed: bigint): number {
      return components === undefined ? -1 : components.create(typeId, slotPtr, configPtr, configLen, seed);
    },
    bb_host_destroy(instance: number): void {
      components?.destroy(instance);
    },
    bb_host_invoke(instance: number, opTypePtr: number, nInputs: number, nOutputs: number): number {
      return components === undefined ? -1 : components.invoke(instance, opTypePtr, nInputs, nOutputs);
    },
    bb_host_on_message(instance: number, opPtr: number, fromPtr: number, payloadPtr: number, len: number): number {
      return components === undefined ? -1 : components.onMessage(instance, opPtr, fromPtr, payloadPtr, len);
    },
    bb_host_on_timer(instance: number, token: bigint): number {
      return components === undefined ? -1 : components.onTimer(instance, token);
    },
    bb_host_save(instance: number): number {
      return components === undefined ? -1 : components.save(instance);
    },
    bb_host_load(instance: number, statePtr: number, len: number): number {
      return components === undefined ? -1 : components.load(instance, statePtr, len);
    },
    // A recording with no recorder records nothing: the build then fails with the
    // recorder's "recorded nothing".
    bb_host_module_record(hostId: number, bootstrap: number): void {
      recorder?.(hostId, bootstrap !== 0);
    },
    bb_host_sign(node: number, slotPtr: number, messagePtr: number, len: number): number {
      if (signer === undefined) return -1;
      const memory = bytes(0, buffer().byteLength);
      let end = slotPtr >>> 0;
      while (memory[end] !== 0) end++;
      const slot = new TextDecoder().decode(memory.slice(slotPtr >>> 0, end));
      // copied: the signature is made after this call returns
      return signer(node, slot, bytes(messagePtr, len).slice()) ? 0 : -1;
    },
  };

  return {
    imports: { wasi_snapshot_preview1: wasi, env },
    attach(instanceMemory: WebAssembly.Memory): void {
      memory = instanceMemory;
    },
    setComponentCallbacks(callbacks: HostComponentCallbacks): void {
      components = callbacks;
    },
    setModuleRecorder(next: ModuleRecorder | undefined): void {
      recorder = next;
    },
    setSigner(next: HostSigner): void {
      signer = next;
    },
  };
}

/** Turns the bytes libc writes to a stream into whole lines for the console. */
class LineWriter {
  readonly #decoder = new TextDecoder();
  readonly #emit: (line: string) => void;
  #pending = '';

  constructor(emit: (line: string) => void) {
    this.#emit = emit;
  }

  write(chunk: Uint8Array): void {
    const lines = (this.#pending + this.#decoder.decode(chunk, { stream: true })).split('\n');
    this.#pending = lines.pop() ?? '';
    for (const line of lines) this.#emit(line);
  }

  flush(): void {
    const rest = this.#pending + this.#decoder.decode();
    this.#pending = '';
    if (rest !== '') this.#emit(rest);
  }
}
