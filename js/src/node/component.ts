/**
 * Concrete components written in TypeScript, at parity with C components: their ops run
 * when the graph reaches them (answering at once or with a Promise: the op then completes
 * when it settles), and from their callbacks they reach what a C component reaches
 * through bb_ctx ({@link ComponentContext}): the node's time and peer id, its seeded
 * generator, control-plane messages to the same slot on other peers (their `onMessage`),
 * timers (`onTimer`), application events, counters and the ops of other components of the
 * node. `save`/`load` carry their state through `BbNode.snapshot`/`restore`. A type with a
 * `protocolDomain` runs the slotless ops a Module records in that domain
 * (`g.protocolCall`), like a C Protocol.
 *
 * ```ts
 * registerComponentType(bb, {
 *   name: 'CameraFrames',
 *   roles: ['DataSource'],
 *   create: ({ config }) => dataSourceComponent({ nextBatch: async () => ({ batch: await grab(), labels }) }),
 * });
 * ```
 * The role adapters (`modelComponent`, `aggregatorComponent`, ... in roles.ts) turn an
 * object implementing a role's contract into a component. A component reached
 * synchronously by another (a Model's Fit pulling NextBatch) must answer synchronously.
 * Register types before installing the nodes that bind them; declare them to the compiler
 * too (Compiler.declare).
 */
import type { Bb } from '../engine/bb.js';
import { ROLES, type Role } from './compiler.js';
import { decodeAttributes, type AttributeReading } from '../dsl/attributes.js';
import { BbError, BbErrorCode } from '../engine/errors.js';
import { decodeValueList, encodeValueList, type Value } from './values.js';

export interface ComponentInit {
  /** The slot it is bound to. */
  readonly slot: string;
  /** The binding's config text ("" when none). */
  readonly config: string;
  /** A seed derived from the node's seed and the slot name. */
  readonly seed: bigint;
}

/**
 * What a component reaches while one of its callbacks runs (invoke, onMessage, onTimer);
 * it is refused once the callback returned (an asynchronous invoke has it until its first
 * `await`).
 */
export interface ComponentContext {
  /** The node's time, in nanoseconds. */
  readonly nowNs: bigint;
  /** This node's peer id. */
  readonly self: string;
  /** The peer whose envelope started this work; undefined for local work. */
  readonly source: string | undefined;
  /** The node's seeded generator: the same sequence for the same calls. */
  random(): bigint;
  /** Sends a control-plane message to the component at the same slot on peer `to` (its onMessage). */
  sendMessage(to: string, op: string, payload?: Uint8Array): void;
  /** Calls this component's onTimer(token) at or after atNs. */
  setTimer(atNs: bigint, token?: bigint | number): void;
  /** Publishes an application event (a step `appEvent` with this topic). */
  emit(topic: string, value: Value): void;
  /** Adds delta (default 1) to a named counter (BbNode.counter). */
  count(name: string, delta?: bigint | number): void;
  /** Calls an op of another component of this node by slot, synchronously. */
  call(slot: string, op: string, inputs?: readonly (Value | undefined)[], outputs?: number): (Value | undefined)[];
}

export interface OpCall {
  /** The op, e.g. "NextBatch". */
  readonly op: string;
  /** Inputs by position (undefined where the graph left an optional input empty). */
  readonly inputs: readonly (Value | undefined)[];
  /** The op's attributes (INT as bigint; TENSOR ones undefined). */
  readonly attributes: Readonly<Record<string, AttributeReading>>;
  /** How many outputs the op has. */
  readonly outputCount: number;
  /** The node's time, in nanoseconds. */
  readonly nowNs: bigint;
  readonly context: ComponentContext;
}

/** Outputs by position; undefined leaves one unset (its consumers do not run). */
export type OpOutputs = readonly (Value | undefined)[];

/** A control-plane message from the component at the same slot on peer `from`. */
export interface ControlMessage {
  readonly op: string;
  readonly from: string;
  readonly payload: Uint8Array;
}

export interface ComponentInstance {
  invoke(call: OpCall): OpOutputs | Promise<OpOutputs>;
  onMessage?(message: ControlMessage, context: ComponentContext): void;
  onTimer?(token: bigint, context: ComponentContext): void;
  /** Its state for a snapshot (none: empty). */
  save?(): Uint8Array;
  /** State a save gave, into a fresh instance. */
  load?(state: Uint8Array): void;
  destroy?(): void;
}

export interface ComponentType {
  /** The concrete type name artifacts bind (not a shipped type's). */
  readonly name: string;
  readonly roles: readonly Role[];
  /** `ai.bytesandbrains.protocol.<name>` (or just `<name>`): the slotless ops of that domain run here. */
  readonly protocolDomain?: string;
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

/** The context of one callback, refused once `end` ran. */
class CallbackContext implements ComponentContext {
  readonly #bb: Bb;
  readonly #owner: string;
  #open = true;

  constructor(bb: Bb, owner: string) {
    this.#bb = bb;
    this.#owner = owner;
  }

  end(): void {
    this.#open = false;
  }

  #live(what: string): Bb {
    if (!this.#open) throw new BbError(BbErrorCode.InvalidArgument, `${this.#owner}: context.${what} after the callback returned`);
    return this.#bb;
  }

  get nowNs(): bigint {
    return BigInt.asUintN(64, this.#live('nowNs').exports.bb_wasm_call_now());
  }
  get self(): string {
    const bb = this.#live('self');
    bb.check(bb.exports.bb_wasm_call_self());
    return bb.resultText();
  }
  get source(): string | undefined {
    const bb = this.#live('source');
    bb.check(bb.exports.bb_wasm_call_source());
    return bb.resultText() || undefined;
  }
  random(): bigint {
    return BigInt.asUintN(64, this.#live('random').exports.bb_wasm_call_random());
  }
  sendMessage(to: string, op: string, payload: Uint8Array = new Uint8Array(0)): void {
    const bb = this.#live('sendMessage');
    bb.withStrings([to, op], (tp, op_) => bb.withBytes(payload, (p, l) => bb.check(bb.exports.bb_wasm_call_send_message(tp!, op_!, p, l))));
  }
  setTimer(atNs: bigint, token: bigint | number = 0): void {
    const bb = this.#live('setTimer');
    bb.check(bb.exports.bb_wasm_call_set_timer(BigInt.asUintN(64, atNs), BigInt.asUintN(64, BigInt(token))));
  }
  emit(topic: string, value: Value): void {
    const bb = this.#live('emit');
    bb.withStrings([topic], (tp) => bb.withBytes(encodeValueList([value]), (p, l) => bb.check(bb.exports.bb_wasm_call_emit(tp!, p, l))));
  }
  count(name: string, delta: bigint | number = 1): void {
    const bb = this.#live('count');
    bb.withStrings([name], (np) => bb.check(bb.exports.bb_wasm_call_count(np!, BigInt.asUintN(64, BigInt(delta)))));
  }
  call(slot: string, op: string, inputs: readonly (Value | undefined)[] = [], outputs = 1): (Value | undefined)[] {
    const bb = this.#live('call');
    bb.withStrings([slot, op], (sp, op_) =>
      bb.withBytes(encodeValueList(inputs), (p, l) => bb.check(bb.exports.bb_wasm_call_dependency(sp!, op_!, p, l, outputs))),
    );
    return decodeValueList(bb.resultBytes());
  }
}

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
      onMessage: (id, opPtr, fromPtr, payloadPtr, len) => this.#onMessage(id, opPtr, fromPtr, payloadPtr, len),
      onTimer: (id, token) => this.#onTimer(id, token),
      save: (id) => this.#save(id),
      load: (id, statePtr, len) => this.#load(id, statePtr, len),
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
    const domain = type.protocolDomain === undefined || type.protocolDomain.includes('.') ? type.protocolDomain : `ai.bytesandbrains.protocol.${type.protocolDomain}`;
    const id = bb.withStrings([type.name, domain], (namePtr, domainPtr) => bb.check(bb.exports.bb_wasm_host_type_add(namePtr!, roles, domainPtr!)));
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
      config: utf8.decode(bb.memory().slice(configPtr >>> 0, (configPtr >>> 0) + (configLen >>> 0))),
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
    const context = new CallbackContext(bb, `${live.type.name}.${op}`);
    let answer: OpOutputs | Promise<OpOutputs>;
    try {
      bb.check(bb.exports.bb_wasm_call_inputs());
      const inputs = decodeValueList(bb.resultBytes());
      if (inputs.length !== nInputs) throw new BbError(BbErrorCode.Malformed, `${inputs.length} inputs, ${nInputs} expected`);
      bb.check(bb.exports.bb_wasm_call_attributes());
      const attributes = decodeAttributes(bb.resultBytes());
      const nowNs = BigInt.asUintN(64, bb.exports.bb_wasm_call_now());
      answer = live.instance.invoke({ op, inputs, attributes, outputCount: nOutputs, nowNs, context });
      if (!isPromise(answer)) {
        this.#setOutputs(live.type.name, op, answer, nOutputs);
        return 0;
      }
    } catch (error) {
      return this.#fail(errorCode(error), `${live.type.name}.${op}: ${messageOf(error)}`);
    } finally {
      context.end();
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

  /** Runs a callback that returns nothing; a throw fails it with its message. */
  #run(id: number, what: string, use: (live: Live, context: CallbackContext) => void, withContext = true): number {
    const live = this.#live.get(id);
    if (live === undefined) return this.#fail(BbErrorCode.InvalidArgument, `component instance ${id} is gone`);
    const context = new CallbackContext(this.#bb, `${live.type.name}.${what}`);
    if (!withContext) context.end();
    try {
      use(live, context);
      return 0;
    } catch (error) {
      return this.#fail(errorCode(error), `${live.type.name}.${what}: ${messageOf(error)}`);
    } finally {
      context.end();
    }
  }

  #onMessage(id: number, opPtr: number, fromPtr: number, payloadPtr: number, len: number): number {
    const bb = this.#bb;
    const op = bb.readCString(opPtr);
    const from = bb.readCString(fromPtr);
    const payload = bb.memory().slice(payloadPtr >>> 0, (payloadPtr >>> 0) + (len >>> 0));
    return this.#run(id, `onMessage(${op})`, ({ instance }, context) => {
      if (instance.onMessage === undefined) throw new BbError(BbErrorCode.Unsupported, 'it takes no control-plane messages (no onMessage)');
      instance.onMessage({ op, from, payload }, context);
    });
  }

  #onTimer(id: number, token: bigint): number {
    return this.#run(id, 'onTimer', ({ instance }, context) => {
      if (instance.onTimer === undefined) throw new BbError(BbErrorCode.Unsupported, 'it set a timer but has no onTimer');
      instance.onTimer(BigInt.asUintN(64, token), context);
    });
  }

  #save(id: number): number {
    return this.#run(
      id,
      'save',
      ({ instance }) => {
        const state = instance.save?.() ?? new Uint8Array(0);
        const bb = this.#bb;
        bb.withBytes(state, (p, l) => bb.check(bb.exports.bb_wasm_call_set_state(p, l)));
      },
      false,
    );
  }

  #load(id: number, statePtr: number, len: number): number {
    const state = this.#bb.memory().slice(statePtr >>> 0, (statePtr >>> 0) + (len >>> 0));
    return this.#run(
      id,
      'load',
      ({ instance }) => {
        if (instance.load !== undefined) instance.load(state);
        else if (state.length > 0) throw new BbError(BbErrorCode.Unsupported, `${state.length} bytes of state, and no load`);
      },
      false,
    );
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
