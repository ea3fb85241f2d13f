/**
 * bytesandbrains: the C core as a standalone WebAssembly module, driven from TypeScript.
 *
 * ```ts
 * import { loadBb, OnnxModel } from 'bytesandbrains';
 * const bb = await loadBb();
 * const model = OnnxModel.decode(bb, bytes);
 * console.log(model.summary());
 * model.free();
 * ```
 */
export { loadBb, type WasmSource } from './loader.js';
export { Bb } from './bb.js';
export { OnnxModel } from './model.js';
export { BbError, BbErrorCode, BbExitError, BbLoadError, bbErrorCodeName } from './errors.js';
export { BB_WASM_ABI_VERSION, type BbExports } from './abi.js';
