/**
 * Concrete components written in TypeScript, for the roles a web app owns: a DataSource
 * reading IndexedDB or a camera, a Model wrapping something the page already has. Their
 * methods run through bb.wasm's small callback ABI (bb_wasm.h): the engine calls `invoke`
 * with the op's inputs; it answers with the outputs, or with a Promise of them — the op
 * then completes when the promise settles, and the node's next poll carries on.
 *
 * ```ts
 * registerComponentType(bb, {
 *   name: 'CameraFrames',
 *   roles: ['DataSource'],
 *   create: ({ config }) => ({
 *     invoke: async ({ op }) => [tensorValue('float', await grabFrame(), [1, 64]), tensorValue('float', new Float32Array([0]))],
 *   }),
 * });
 * ```
 * A component reached synchronously by another (a Model's Fit pulling NextBatch) must
 * answer synchronously. Register types before installing the nodes that bind them; the
 * compiler needs them declared too (Compiler.declare).
 */
import type { Bb } from './bb.js';
import { ROLES, type Role } from './compiler.js';
import { BbError, BbErrorCode } from './errors.js';
import { decodeValueList, encodeValueList, type Value } from './values.js';

export interface ComponentInit {
  /** The slot it is bound to. */
  readonly slot: string;
  /** The binding's config text ("" when none). */
  readonly config: string;
  /** A seed derived from the node's seed and the slot name. */
  readonly seed: bigint;
}

export interface OpCall {
  /** The op, e.g. "NextBatch". */
  readonly op: string;
  /** Inputs by position (undefined where the graph left an optional input empty). */
  readonly inputs: readonly (Value | undefined)[];
  /** How many outputs the op has. */
  readonly outputCount: number;
  /** The node's time, in nanoseconds. */
  readonly nowNs: bigint;
}

/** Outputs by position; undefined leaves one unset (its consumers do not run). */
export type OpOutputs = readonly (Value | undefined)[];

export interface ComponentInstance {
  invoke(call: OpCall): OpOutputs | Promise<OpOutputs>;
  destroy?(): void;
}

export interface ComponentType {
  /** The concrete type name artifacts bind (not a shipped type's). */
  readonly name: string;
  readonly roles: readonly Role[];
  create(init: ComponentInit): ComponentInstance;
}

/** Where an asynchronous op's answer goes: the node the instance belongs to. */
export interface CompletionSink {
  complete(command: bigint, outputs: OpOutputs): void;
  fail(command: bigint, detail: string): void;
}

interface Live {
  readonly instance: ComponentInstance;
  readonly type: ComponentType;
  sink: CompletionSink | undefined;
}

const utf8 = new TextDecoder();

class HostComponents {
  readonly #bb: Bb;
  readonly #types = new Map<number, ComponentType>();
  readonly #live = new Map<number, Live>();
  #nextId = 1;
  /** Instances created by the install in progress. */
  #installing: number[] | undefined;

  constructor(bb: Bb) {
    this.#bb = bb;
    bb.setComponentCallbacks({
      create: (typeId, slotPtr, configPtr, configLen, seed) => this.#create(typeId, slotPtr, configPtr, configLen, seed),
      destroy: (id) => this.#destroy(id),
      invoke: (id, opPtr, nInputs, nOutputs) => this.#invoke(id, opPtr, nInputs, nOutputs),
    });
  }

  add(type: ComponentType): void {
    if (type.roles.length === 0) throw new BbError(BbErrorCode.InvalidArgument, `component type ${type.name}: no roles`);
    let roles = 0;
    for (const role of type.roles) {
      if (!(role in ROLES)) throw new BbError(BbErrorCode.InvalidArgument, `component type ${type.name}: unknown role ${role}`);
      roles |= 1 << ROLES[role];
    }
    const bb = this.#bb;
    const id = bb.withStrings([type.name], (namePtr) => bb.check(bb.exports.bb_wasm_host_type_add(namePtr, roles)));
    this.#types.set(id, type);
  }

  /** Runs an install, handing the instances it creates to `sink` once it exists. */
  install<T extends CompletionSink>(run: () => T): T {
    const outer = this.#installing;
    const created: number[] = [];
    this.#installing = created;
    try {
      const sink = run();
      for (const id of created) {
        const live = this.#live.get(id);
        if (live !== undefined) live.sink = sink;
      }
      return sink;
    } finally {
      this.#installing = outer;
    }
  }

  #fail(code: number, message: string): number {
    const bb = this.#bb;
    bb.withStrings([message], (ptr) => bb.exports.bb_wasm_call_fail(code, ptr));
    return code;
  }

  #create(typeId: number, slotPtr: number, configPtr: number, configLen: number, seed: bigint): number {
    const type = this.#types.get(typeId);
    if (type === undefined) return this.#fail(BbErrorCode.InvalidArgument, `no component type ${typeId} in this page`);
    const bb = this.#bb;
    const init: ComponentInit = {
      slot: bb.readCString(slotPtr),
      config: utf8.decode(bb.memory().subarray(configPtr >>> 0, (configPtr >>> 0) + (configLen >>> 0))),
      seed: BigInt.asUintN(64, seed),
    };
    let instance: ComponentInstance;
    try {
      instance = type.create(init);
    } catch (error) {
      return this.#fail(errorCode(error), `create threw: ${messageOf(error)}`);
    }
    const id = this.#nextId++;
    this.#live.set(id, { instance, type, sink: undefined });
    this.#installing?.push(id);
    return id;
  }

  #destroy(id: number): void {
    const live = this.#live.get(id);
    this.#live.delete(id);
    try {
      live?.instance.destroy?.();
    } catch (error) {
      console.error(`bytesandbrains: ${live?.type.name ?? 'a component'}'s destroy threw`, error);
    }
  }

  #invoke(id: number, opPtr: number, nInputs: number, nOutputs: number): number {
    const live = this.#live.get(id);
    if (live === undefined) return this.#fail(BbErrorCode.InvalidArgument, `component instance ${id} is gone`);
    const bb = this.#bb;
    const op = bb.readCString(opPtr);
    let answer: OpOutputs | Promise<OpOutputs>;
    try {
      bb.check(bb.exports.bb_wasm_call_inputs());
      const inputs = decodeValueList(bb.resultBytes());
      if (inputs.length !== nInputs) throw new BbError(BbErrorCode.Malformed, `${inputs.length} inputs, ${nInputs} expected`);
      answer = live.instance.invoke({ op, inputs, outputCount: nOutputs, nowNs: BigInt.asUintN(64, bb.exports.bb_wasm_call_now()) });
      if (!isPromise(answer)) {
        this.#setOutputs(live.type.name, op, answer, nOutputs);
        return 0;
      }
    } catch (error) {
      return this.#fail(errorCode(error), `${live.type.name}.${op}: ${messageOf(error)}`);
    }
    const command = BigInt.asUintN(64, bb.exports.bb_wasm_call_defer());
    if (command === 0n) return this.#fail(BbErrorCode.InvalidArgument, `${live.type.name}.${op}: cannot answer later here`);
    answer.then(
      (outputs) => {
        const sink = live.sink;
        if (sink === undefined) return;
        try {
          checkOutputs(live.type.name, op, outputs, nOutputs);
          sink.complete(command, outputs);
        } catch (error) {
          sink.fail(command, `${live.type.name}.${op}: ${messageOf(error)}`);
        }
      },
      (error: unknown) => live.sink?.fail(command, `${live.type.name}.${op}: ${messageOf(error)}`),
    );
    return 1;
  }

  #setOutputs(type: string, op: string, outputs: OpOutputs, nOutputs: number): void {
    checkOutputs(type, op, outputs, nOutputs);
    const bb = this.#bb;
    bb.withBytes(encodeValueList(outputs), (ptr, len) => bb.check(bb.exports.bb_wasm_call_set_outputs(ptr, len)));
  }
}

function checkOutputs(type: string, op: string, outputs: OpOutputs, nOutputs: number): void {
  if (!Array.isArray(outputs)) throw new BbError(BbErrorCode.Type, `${type}.${op} must answer an array of outputs`);
  if (outputs.length > nOutputs) {
    throw new BbError(BbErrorCode.InvalidArgument, `${type}.${op} answered ${outputs.length} outputs; it has ${nOutputs}`);
  }
}

function isPromise(value: unknown): value is Promise<OpOutputs> {
  return typeof (value as { then?: unknown } | null)?.then === 'function';
}

function errorCode(error: unknown): number {
  return error instanceof BbError && error.code < 0 ? error.code : BbErrorCode.InvalidArgument;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

const registries = new WeakMap<Bb, HostComponents>();

/** The component registry of a module instance (made on first use). */
export function hostComponents(bb: Bb): HostComponents {
  let registry = registries.get(bb);
  if (registry === undefined) {
    registry = new HostComponents(bb);
    registries.set(bb, registry);
  }
  return registry;
}

/** Registers a component type for every node installed afterwards in this module instance. */
export function registerComponentType(bb: Bb, type: ComponentType): void {
  hostComponents(bb).add(type);
}
