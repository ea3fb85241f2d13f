/**
 * The flat C ABI of bb.wasm (wasm/bb_wasm.h) as JavaScript sees it. Pointers and size_t
 * values are 32-bit and come back signed: read them with `>>> 0`.
 */

/** The ABI version this package was written for (BB_WASM_ABI_VERSION in bb_wasm.h). */
export const BB_WASM_ABI_VERSION = 2;

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
  bb_wasm_tensor_new(dtype: number, rank: number, dimsPtr: number): number;
  bb_wasm_tensor_dtype(tensor: number): number;
  bb_wasm_tensor_rank(tensor: number): number;
  bb_wasm_tensor_dims(tensor: number): number;
  bb_wasm_tensor_data(tensor: number): number;
  bb_wasm_tensor_nbytes(tensor: number): number;
  bb_wasm_tensor_free(tensor: number): number;
  bb_wasm_session_new(model: number): number;
  bb_wasm_session_input_count(session: number): number;
  bb_wasm_session_input_name(session: number, index: number): number;
  bb_wasm_session_output_count(session: number): number;
  bb_wasm_session_output_name(session: number, index: number): number;
  bb_wasm_session_run(
    session: number,
    nInputs: number,
    namesPtr: number,
    namesLen: number,
    inputTensorsPtr: number,
    outputTensorsPtr: number,
  ): number;
  bb_wasm_session_peak_bytes(session: number): number;
  bb_wasm_session_free(session: number): number;
  bb_wasm_cpu_op_count(): number;
  bb_wasm_cpu_op_name(index: number): number;
  bb_wasm_cpu_op_types(index: number): number;
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
  bb_wasm_tensor_new: 3,
  bb_wasm_tensor_dtype: 1,
  bb_wasm_tensor_rank: 1,
  bb_wasm_tensor_dims: 1,
  bb_wasm_tensor_data: 1,
  bb_wasm_tensor_nbytes: 1,
  bb_wasm_tensor_free: 1,
  bb_wasm_session_new: 1,
  bb_wasm_session_input_count: 1,
  bb_wasm_session_input_name: 2,
  bb_wasm_session_output_count: 1,
  bb_wasm_session_output_name: 2,
  bb_wasm_session_run: 6,
  bb_wasm_session_peak_bytes: 1,
  bb_wasm_session_free: 1,
  bb_wasm_cpu_op_count: 0,
  bb_wasm_cpu_op_name: 1,
  bb_wasm_cpu_op_types: 1,
};
