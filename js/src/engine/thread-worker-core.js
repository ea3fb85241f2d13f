// One thread of bb-mt.wasm's work pool: what a worker does with the message that starts
// it, shared by the Web Worker (thread-worker.js) and the Node worker (thread-worker-node.js)
// that engine/threads.ts starts. It instantiates the module it is sent on the shared memory
// it is sent, gives the instance the stack the module holds for its slot, and runs the
// pool's worker loop (bb_wasm_worker_main), which returns when the engine stops its workers.
// Plain JavaScript without imports, so bundlers take it as it is.
//
// Messages in:  { module, memory, slot, stackTop, timeOrigin } (timeOrigin: the main thread's
//               performance.timeOrigin, so that a worker's monotonic clock reads the main
//               thread's: the pool's trace compares the two)
// Messages out: { type: 'running', slot } just before the loop,
//               { type: 'exited', slot, code } after it (code < 0: the module's error code),
//               { type: 'failed', slot, message } when the instance could not start.

// The host's callbacks belong to the main thread: a task never calls one. Anything else a
// worker's instance imports is answered here.
function importsFor(module, memory, slot, timeOrigin) {
  const imports = { env: { memory } };
  for (const { module: space, name, kind } of WebAssembly.Module.imports(module)) {
    if (kind !== 'function') continue;
    imports[space] ??= {};
    if (name === 'emscripten_notify_memory_growth') imports[space][name] = () => {};
    else if (name === 'clock_time_get') {
      // WASI's clock: the monotonic one on the main thread's origin, the others refused
      // (the pool reads only that one)
      const offset = performance.timeOrigin - (timeOrigin ?? performance.timeOrigin);
      imports[space][name] = (clockId, _precision, timePtr) => {
        if (clockId !== 1) return 28; // EINVAL
        new DataView(memory.buffer).setBigUint64(timePtr >>> 0, BigInt(Math.round((offset + performance.now()) * 1e6)), true);
        return 0;
      };
    }
    else if (name === 'getentropy') {
      imports[space][name] = (ptr, len) => {
        // crypto.getRandomValues takes no shared view: fill a copy
        const bytes = new Uint8Array(len >>> 0);
        globalThis.crypto.getRandomValues(bytes);
        new Uint8Array(memory.buffer, ptr >>> 0, len >>> 0).set(bytes);
        return 0;
      };
    } else {
      imports[space][name] = () => {
        throw new Error(`bb-mt.wasm worker ${slot}: the module called ${space}.${name}, which only the main thread serves`);
      };
    }
  }
  return imports;
}

export async function runWorker({ module, memory, slot, stackTop, timeOrigin }, post) {
  let instance;
  try {
    instance = await WebAssembly.instantiate(module, importsFor(module, memory, slot, timeOrigin));
    instance.exports.__stack_pointer.value = stackTop;
  } catch (error) {
    post({ type: 'failed', slot, message: error instanceof Error ? error.message : String(error) });
    return;
  }
  post({ type: 'running', slot });
  const code = instance.exports.bb_wasm_worker_main(slot);
  post({ type: 'exited', slot, code });
}
