/**
 * The flat C ABI of bb.wasm (docs/WEB.md of the package describes it) as JavaScript sees it. Pointers and size_t
 * values are 32-bit and come back signed: read them with `>>> 0`.
 */
import type { WasmMemory } from './platform.js';

/** The ABI version this package was written for (BB_WASM_ABI_VERSION in bb_wasm.h). */
export const BB_WASM_ABI_VERSION = 10;

/** The exports of bb.wasm. */
export interface BbExports {
  readonly memory: WasmMemory;
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
  bb_wasm_tensor_new_empty(dtype: number, rank: number, dimsPtr: number): number;
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
  // version 3: the engine
  bb_wasm_example_count(): number;
  bb_wasm_example_name(index: number): number;
  bb_wasm_example_description(index: number): number;
  bb_wasm_example_module_count(index: number): number;
  bb_wasm_example_record(namePtr: number, module: number): number;
  bb_wasm_compiler_new(): number;
  bb_wasm_compiler_configure_example(compiler: number, namePtr: number, module: number): number;
  bb_wasm_compiler_bind(compiler: number, role: number, slotPtr: number, typePtr: number, configPtr: number): number;
  bb_wasm_compiler_unbind(compiler: number, slotPtr: number): number;
  bb_wasm_compiler_declare(compiler: number, typePtr: number, storagePtr: number, depsPtr: number): number;
  bb_wasm_compiler_declare_op_set(compiler: number, typePtr: number, opsPtr: number, opsLen: number): number;
  bb_wasm_compiler_set_permissive(compiler: number, permissive: number): number;
  bb_wasm_compiler_compile(compiler: number, modelPtr: number, len: number): number;
  bb_wasm_compiler_error_kind(compiler: number): number;
  bb_wasm_compile_error_name(kind: number): number;
  bb_wasm_compiler_free(compiler: number): number;
  bb_wasm_artifact_describe(ptr: number, len: number, format: number): number;
  bb_wasm_dataset_from_csv(ptr: number, len: number, labelColumn: number, hasHeader: number): number;
  bb_wasm_dataset_from_tensors(features: number, labels: number): number;
  bb_wasm_dataset_subset(dataset: number, rowsPtr: number, n: number): number;
  bb_wasm_dataset_shape(dataset: number): number;
  bb_wasm_dataset_tensor(dataset: number, labels: number): number;
  bb_wasm_dataset_free(dataset: number): number;
  // version 4: Modules the host records
  bb_wasm_module_new(namePtr: number, hostId: number, hasBootstrap: number): number;
  bb_wasm_module_add_submodule(module: number, submodule: number): number;
  bb_wasm_module_build(module: number): number;
  bb_wasm_module_free(module: number): number;
  bb_wasm_rec_input(namePtr: number, typePtr: number): number;
  bb_wasm_rec_output(namePtr: number, value: number): number;
  bb_wasm_rec_net_out(portPtr: number, peers: number, value: number): number;
  bb_wasm_rec_lookup_output(portPtr: number): number;
  bb_wasm_rec_lookup_sender(portPtr: number): number;
  bb_wasm_rec_split(
    shape: number,
    cutsPtr: number,
    cutsLen: number,
    clientSlotPtr: number,
    serverSlotPtr: number,
    averagerSlotPtr: number,
    valuesPtr: number,
    nValues: number,
  ): number;
  bb_wasm_rec_bundle(partsPtr: number, n: number): number;
  bb_wasm_rec_unbundle(composite: number, typesPtr: number, typesLen: number, partsPtr: number, n: number): number;
  bb_wasm_rec_call(module: number, bootstrap: number, inputsPtr: number, inputsLen: number, valuesPtr: number, n: number): number;
  bb_wasm_rec_call_output(call: number, portPtr: number): number;
  bb_wasm_rec_role_call(
    role: number,
    slotPtr: number,
    peerClassPtr: number,
    methodPtr: number,
    inputsPtr: number,
    nInputs: number,
    attrsPtr: number,
    attrsLen: number,
    outputsPtr: number,
    nOutputs: number,
  ): number;
  bb_wasm_rec_syscall(opPtr: number, inputsPtr: number, nInputs: number, attrsPtr: number, attrsLen: number, outputsPtr: number, nOutputs: number): number;
  bb_wasm_rec_protocol_call(
    domainPtr: number,
    opPtr: number,
    inputsPtr: number,
    nInputs: number,
    attrsPtr: number,
    attrsLen: number,
    outputsPtr: number,
    nOutputs: number,
  ): number;
  bb_wasm_rec_constant(labelPtr: number, typePtr: number, literalPtr: number, len: number): number;
  bb_wasm_rec_address_book_insert(peer: number, addresses: number, many: number): number;
  bb_wasm_rec_address_book_lookup(peer: number): number;
  bb_wasm_rec_announce(serverPeer: number): number;
  bb_wasm_rec_fail(code: number, messagePtr: number): number;
  bb_wasm_rec_failed(): number;
  bb_wasm_rec_value_name(value: number): number;
  bb_wasm_rec_value_type(value: number): number;
  bb_wasm_host_type_add(namePtr: number, roles: number, protocolDomainPtr: number): number;
  bb_wasm_call_inputs(): number;
  bb_wasm_call_attributes(): number;
  bb_wasm_call_set_outputs(ptr: number, len: number): number;
  bb_wasm_call_defer(): bigint;
  bb_wasm_call_now(): bigint;
  bb_wasm_call_self(): number;
  bb_wasm_call_source(): number;
  bb_wasm_call_random(): bigint;
  bb_wasm_call_send_message(toPtr: number, opPtr: number, payloadPtr: number, len: number): number;
  bb_wasm_call_set_timer(atNs: bigint, token: bigint): number;
  bb_wasm_call_emit(topicPtr: number, valuePtr: number, len: number): number;
  bb_wasm_call_count(namePtr: number, delta: bigint): number;
  bb_wasm_call_dependency(slotPtr: number, opPtr: number, inputsPtr: number, len: number, nOutputs: number): number;
  bb_wasm_call_set_state(statePtr: number, len: number): number;
  bb_wasm_call_fail(code: number, messagePtr: number): number;
  bb_wasm_node_install(artifactPtr: number, artifactLen: number, selfPtr: number, targetsPtr: number, targetsLen: number, slotsPtr: number, slotsLen: number, datasetsPtr: number, seed: bigint, roomPtr: number, operatorKeysPtr: number, nOperatorKeys: number, signs: number): number;
  bb_wasm_node_signed(node: number, slotPtr: number, signaturePtr: number): number;
  bb_wasm_node_free(node: number): number;
  bb_wasm_node_info(node: number): number;
  bb_wasm_node_add_peer(node: number, peerPtr: number): number;
  bb_wasm_node_forget_peer(node: number, peerPtr: number): number;
  bb_wasm_node_block_peer(node: number, peerPtr: number, blocked: number): number;
  bb_wasm_node_admit_token(node: number, peerPtr: number, tokenPtr: number, len: number, nowUnixS: bigint, nowNs: bigint): number;
  bb_wasm_node_peer_role(node: number, peerPtr: number): number;
  bb_wasm_node_run_bootstrap(node: number, nowNs: bigint): number;
  bb_wasm_node_deliver(node: number, fromPtr: number, bytesPtr: number, len: number, nowNs: bigint): number;
  bb_wasm_node_poll(node: number, nowNs: bigint): number;
  bb_wasm_node_expiry(node: number): bigint;
  bb_wasm_node_has_work(node: number): number;
  bb_wasm_node_invoke(node: number, modulePtr: number, namesPtr: number, namesLen: number, valuesPtr: number, valuesLen: number, nowNs: bigint): number;
  bb_wasm_node_bind_input(node: number, modulePtr: number, inputPtr: number, valuesPtr: number, valuesLen: number): number;
  bb_wasm_node_complete(node: number, command: bigint, valuesPtr: number, valuesLen: number): number;
  bb_wasm_node_fail(node: number, command: bigint, detailPtr: number): number;
  bb_wasm_node_counter(node: number, namePtr: number): bigint;
  bb_wasm_node_snapshot(node: number): number;
  bb_wasm_node_restore(node: number, ptr: number, len: number): number;
  // version 5: trainers (wasm/bb_wasm.h, "training")
  bb_wasm_trainer_new(modelPtr: number, len: number, configPtr: number, seed: bigint): number;
  bb_wasm_trainer_free(trainer: number): number;
  bb_wasm_trainer_param_count(trainer: number): number;
  bb_wasm_trainer_step(trainer: number, x: number, labels: number): number;
  bb_wasm_trainer_last_loss(trainer: number): number;
  bb_wasm_trainer_predict(trainer: number, x: number): number;
  bb_wasm_trainer_evaluate(trainer: number, x: number, labels: number): number;
  bb_wasm_trainer_params(trainer: number): number;
  bb_wasm_trainer_load_params(trainer: number, params: number): number;
  bb_wasm_trainer_export(trainer: number): number;
  bb_wasm_trainer_save(trainer: number): number;
  bb_wasm_trainer_restore(trainer: number, ptr: number, len: number): number;
  bb_wasm_trainer_stats(trainer: number): number;
  /** 1 in bb-mt.wasm (shared memory, threads), 0 in bb.wasm. */
  bb_wasm_threads_supported(): number;
  bb_wasm_set_threads(n: number): number;
  bb_wasm_threads(): number;
  /** A worker's loop (bb-mt.wasm, on the worker's own instance). */
  bb_wasm_worker_main(slot: number): number;
  bb_wasm_stop_workers(): void;
  /** The pool's counters: 0 jobs, 1 tasks, 2 tasks workers ran, 3 workers in their loop, 4 worker stacks held. */
  bb_wasm_pool_stat(which: number): number;
  /**
   * The pool's trace on (1) or off (0), zeroed either way (bb_wasm.h); optional, absent
   * from modules built before it, so that benchmarks can load those beside this one.
   */
  bb_wasm_pool_trace_set?(on: number): void;
  /** A field of the pool's trace (bb_wasm.h), -1 for an unknown one; optional as above. */
  bb_wasm_pool_trace_stat?(which: number): number;
  /** Allocates slot `slot`'s worker stack in module memory; its top, 0 on failure. */
  bb_wasm_worker_stack(slot: number, bytes: number): number;
  /** Frees slot `slot`'s worker stack once its worker has left bb_wasm_worker_main. */
  bb_wasm_worker_stack_free(slot: number): number;
}

/** The exports every module has (the optional ones are checked where they are called). */
type BbFunctionName = Exclude<keyof BbExports, 'memory' | 'bb_wasm_pool_trace_set' | 'bb_wasm_pool_trace_stat'>;

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
  bb_wasm_tensor_new_empty: 3,
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
  bb_wasm_example_count: 0,
  bb_wasm_example_name: 1,
  bb_wasm_example_description: 1,
  bb_wasm_example_module_count: 1,
  bb_wasm_example_record: 2,
  bb_wasm_compiler_new: 0,
  bb_wasm_compiler_configure_example: 3,
  bb_wasm_compiler_bind: 5,
  bb_wasm_compiler_unbind: 2,
  bb_wasm_compiler_declare: 4,
  bb_wasm_compiler_declare_op_set: 4,
  bb_wasm_compiler_set_permissive: 2,
  bb_wasm_compiler_compile: 3,
  bb_wasm_compiler_error_kind: 1,
  bb_wasm_compile_error_name: 1,
  bb_wasm_compiler_free: 1,
  bb_wasm_artifact_describe: 3,
  bb_wasm_dataset_from_csv: 4,
  bb_wasm_dataset_from_tensors: 2,
  bb_wasm_dataset_subset: 3,
  bb_wasm_dataset_shape: 1,
  bb_wasm_dataset_tensor: 2,
  bb_wasm_dataset_free: 1,
  bb_wasm_module_new: 3,
  bb_wasm_module_add_submodule: 2,
  bb_wasm_module_build: 1,
  bb_wasm_module_free: 1,
  bb_wasm_rec_input: 2,
  bb_wasm_rec_output: 2,
  bb_wasm_rec_net_out: 3,
  bb_wasm_rec_lookup_output: 1,
  bb_wasm_rec_lookup_sender: 1,
  bb_wasm_rec_split: 8,
  bb_wasm_rec_bundle: 2,
  bb_wasm_rec_unbundle: 5,
  bb_wasm_rec_call: 6,
  bb_wasm_rec_call_output: 2,
  bb_wasm_rec_role_call: 10,
  bb_wasm_rec_syscall: 7,
  bb_wasm_rec_protocol_call: 8,
  bb_wasm_rec_constant: 4,
  bb_wasm_rec_address_book_insert: 3,
  bb_wasm_rec_address_book_lookup: 1,
  bb_wasm_rec_announce: 1,
  bb_wasm_rec_fail: 2,
  bb_wasm_rec_failed: 0,
  bb_wasm_rec_value_name: 1,
  bb_wasm_rec_value_type: 1,
  bb_wasm_host_type_add: 3,
  bb_wasm_call_inputs: 0,
  bb_wasm_call_attributes: 0,
  bb_wasm_call_set_outputs: 2,
  bb_wasm_call_defer: 0,
  bb_wasm_call_now: 0,
  bb_wasm_call_self: 0,
  bb_wasm_call_source: 0,
  bb_wasm_call_random: 0,
  bb_wasm_call_send_message: 4,
  bb_wasm_call_set_timer: 2,
  bb_wasm_call_emit: 3,
  bb_wasm_call_count: 2,
  bb_wasm_call_dependency: 5,
  bb_wasm_call_set_state: 2,
  bb_wasm_call_fail: 2,
  bb_wasm_node_install: 13,
  bb_wasm_node_signed: 3,
  bb_wasm_node_free: 1,
  bb_wasm_node_info: 1,
  bb_wasm_node_add_peer: 2,
  bb_wasm_node_forget_peer: 2,
  bb_wasm_node_block_peer: 3,
  bb_wasm_node_admit_token: 6,
  bb_wasm_node_peer_role: 2,
  bb_wasm_node_run_bootstrap: 2,
  bb_wasm_node_deliver: 5,
  bb_wasm_node_poll: 2,
  bb_wasm_node_expiry: 1,
  bb_wasm_node_has_work: 1,
  bb_wasm_node_invoke: 7,
  bb_wasm_node_bind_input: 5,
  bb_wasm_node_complete: 4,
  bb_wasm_node_fail: 3,
  bb_wasm_node_counter: 2,
  bb_wasm_node_snapshot: 1,
  bb_wasm_node_restore: 3,
  bb_wasm_trainer_new: 4,
  bb_wasm_trainer_free: 1,
  bb_wasm_trainer_param_count: 1,
  bb_wasm_trainer_step: 3,
  bb_wasm_trainer_last_loss: 1,
  bb_wasm_trainer_predict: 2,
  bb_wasm_trainer_evaluate: 3,
  bb_wasm_trainer_params: 1,
  bb_wasm_trainer_load_params: 2,
  bb_wasm_trainer_export: 1,
  bb_wasm_trainer_save: 1,
  bb_wasm_trainer_restore: 3,
  bb_wasm_trainer_stats: 1,
  bb_wasm_threads_supported: 0,
  bb_wasm_set_threads: 1,
  bb_wasm_threads: 0,
  bb_wasm_worker_main: 1,
  bb_wasm_stop_workers: 0,
  bb_wasm_pool_stat: 1,
  bb_wasm_worker_stack: 2,
  bb_wasm_worker_stack_free: 1,
};
