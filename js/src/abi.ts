/**
 * The flat C ABI of bb.wasm (wasm/bb_wasm.h) as JavaScript sees it. Pointers and size_t
 * values are 32-bit and come back signed: read them with `>>> 0`.
 */

/** The ABI version this package was written for (BB_WASM_ABI_VERSION in bb_wasm.h). */
export const BB_WASM_ABI_VERSION = 1;

/** The exports of bb.wasm. */
export interface BbExports {
  readonly memory: WebAssembly.Memory;
  /** Runs libc's constructors; called once by the loader. */
  _initialize(): void;
  bb_wasm_abi_version(): number;
  bb_wasm_version(): number;
  bb_wasm_alloc(size: number): number;
  bb_wasm_free(ptr: number): void;
  bb_wasm_last_error_code(): number;
  bb_wasm_last_error(): number;
  bb_wasm_result_ptr(): number;
  bb_wasm_result_len(): number;
  bb_wasm_model_decode(ptr: number, len: number): number;
  bb_wasm_model_encode(model: number): number;
  bb_wasm_model_summary(model: number, json: number): number;
  bb_wasm_model_free(model: number): number;
}

type BbFunctionName = Exclude<keyof BbExports, 'memory'>;

/**
 * Every exported function with its parameter count, which a WebAssembly function reports
 * as its `length`: the loader checks both, so a module built from a different ABI fails
 * at load time rather than at its first call.
 */
export const BB_WASM_FUNCTION_ARITY: Readonly<Record<BbFunctionName, number>> = {
  _initialize: 0,
  bb_wasm_abi_version: 0,
  bb_wasm_version: 0,
  bb_wasm_alloc: 1,
  bb_wasm_free: 1,
  bb_wasm_last_error_code: 0,
  bb_wasm_last_error: 0,
  bb_wasm_result_ptr: 0,
  bb_wasm_result_len: 0,
  bb_wasm_model_decode: 2,
  bb_wasm_model_encode: 1,
  bb_wasm_model_summary: 2,
  bb_wasm_model_free: 1,
};
