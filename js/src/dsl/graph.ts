/**
 * The recorder a Module's body and bootstrap write into: `g` in
 * `module('Name', (g) => { ... })`. Every method records one op of the function being
 * recorded through bb.wasm's recorder (the one C programs use; docs/MODULES.md) and
 * returns its outputs as {@link GraphValue}s.
 *
 * As in C, a refused call does not throw: the recording fails, later calls record nothing
 * and return empty values, and `Module.build` throws a BbError with the recorder's first
 * message, naming the module and the value, slot or port at fault. A Graph is usable only
 * while its own callback runs.
 */
import type { Bb } from '../engine/bb.js';
import { ROLES, type Role } from '../node/compiler.js';
import { BbError, BbErrorCode } from '../engine/errors.js';
import { encodeAttributes, encodeLiteral, type Attributes, type Literal } from './attributes.js';
import { AggregatorSlot, BackendSlot, CodecSlot, DataSourceSlot, IndexSlot, ModelSlot, PeerSelectorSlot } from './slots.js';
import { GraphValue, TYPES, VALUE_EMPTY, VALUE_FOREIGN, VALUE_OMITTED, type ValueSource, type ValueType } from './value.js';

/** @internal What a Graph needs of the build it records into. */
export interface BuildContext extends ValueSource {
  readonly bb: Bb;
  /** The Graph whose callback runs now. */
  readonly active: Graph | undefined;
  /** The C handle of a module (made on first use). */
  handleOf(module: CallableModule): number;
}

/** What a Graph can call: a Module (see module.ts). */
export interface CallableModule {
  readonly name: string;
}

/** The options of the generic op recorders. */
export interface OpOptions {
  readonly attributes?: Attributes;
  /** How many outputs the op gives (default 1). */
  readonly outputs?: number;
}

/**
 * Split learning of one ONNX model (Graph.split), C's `bb_split`: where the model is cut,
 * the two sides' Model slots, the server's peers, what starts a client's step, and
 * optionally a held-out set the clients score and SplitFed's averaging of the clients' parts.
 */
export interface SplitOptions {
  /** 'vanilla': the server holds the rest of the model and the loss (the labels travel);
   * 'u': the clients hold the first layers and the head with the loss, the server the middle. */
  readonly shape: 'vanilla' | 'u';
  /** Values of the model, in its order: one (vanilla) or two (U; the clients' first part ends at the first). */
  readonly cuts: readonly string[];
  readonly clientModel: ModelSlot;
  readonly serverModel: ModelSlot;
  /** The peers the clients send to (a peer-typed value; its name or class is the server's peer class). */
  readonly server: GraphValue;
  /** Each value asks for a client's step (an Interval); a step waits while the last one waits for its gradients. */
  readonly tick: GraphValue;
  /** A held-out set on the clients, scored at each value of `tick`: every client outputs "accuracy". */
  readonly heldOut?: { readonly x: GraphValue; readonly y: GraphValue; readonly tick: GraphValue };
  /** SplitFed: an Aggregator slot on the server's peers averages the clients' parts and sends the average to `clients`. */
  readonly averaging?: { readonly averager: AggregatorSlot; readonly clients: GraphValue };
}

/** A recorded call of a sub-module: its outputs by the callee's port names. */
export class ModuleCall {
  readonly #g: Graph;
  readonly #number: number;

  /** @internal */
  constructor(g: Graph, number: number) {
    this.#g = g;
    this.#number = number;
  }

  /** The callee's output port `port`, typed as the callee recorded it. */
  output<T extends ValueType = ValueType>(port: string): GraphValue<T> {
    return this.#g.recordValue('call output', (bb, [portPtr]) => bb.exports.bb_wasm_rec_call_output(this.#number, portPtr!), [port]);
  }
}

const utf8 = new TextEncoder();

/** NUL-terminated strings back to back. */
function packStrings(strings: readonly string[]): Uint8Array {
  const parts = strings.map((s) => utf8.encode(`${s}\0`));
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export class Graph {
  readonly #context: BuildContext;
  /** The module whose function this records, and whether its bootstrap. */
  readonly module: string;
  readonly bootstrap: boolean;

  /** @internal Made by Module.build for one callback. */
  constructor(context: BuildContext, module: string, bootstrap: boolean) {
    this.#context = context;
    this.module = module;
    this.bootstrap = bootstrap;
  }

  // ---- the plumbing every recorder shares --------------------------------------------------------

  #bb(what: string): Bb {
    if (this.#context.active !== this) {
      throw new BbError(
        BbErrorCode.InvalidArgument,
        `Graph.${what}: this Graph records module '${this.module}'${this.bootstrap ? ' bootstrap' : ''}, whose callback is not running`,
      );
    }
    return this.#context.bb;
  }

  /** The number bb.wasm knows a value by: values of another build are foreign. */
  #numberOf(value: GraphValue): number {
    if (value.number === VALUE_OMITTED || value.number === VALUE_EMPTY) return value.number;
    return value.source === this.#context ? value.number : VALUE_FOREIGN;
  }

  #value<T extends ValueType>(number: number): GraphValue<T> {
    return new GraphValue<T>(this.#context, number);
  }

  /** @internal Runs a recorder call that gives one value number, with C copies of `strings`. */
  recordValue<T extends ValueType = ValueType>(
    what: string,
    call: (bb: Bb, strings: number[]) => number,
    strings: readonly (string | undefined)[] = [],
  ): GraphValue<T> {
    const bb = this.#bb(what);
    return this.#value<T>(bb.withStrings(strings, (...ptrs) => bb.check(call(bb, ptrs))));
  }

  /** The numbers of values as int32 bytes. */
  #numbers(values: readonly GraphValue[]): Uint8Array {
    const bytes = new Uint8Array(4 * values.length);
    const view = new DataView(bytes.buffer);
    values.forEach((v, i) => view.setInt32(4 * i, this.#numberOf(v), true));
    return bytes;
  }

  /** Runs `use` with the value numbers in module memory and room for `outputs` more. */
  #withValues(
    what: string,
    inputs: readonly GraphValue[],
    outputs: number,
    use: (bb: Bb, inputsPtr: number, outputsPtr: number) => number,
  ): GraphValue[] {
    const bb = this.#bb(what);
    if (!Number.isInteger(outputs) || outputs < 0) throw new BbError(BbErrorCode.InvalidArgument, `Graph.${what}: ${outputs} outputs`);
    const bytes = new Uint8Array(4 * (inputs.length + outputs));
    bytes.set(this.#numbers(inputs));
    return bb.withBytes(bytes, (ptr) => {
      bb.check(use(bb, ptr, ptr + 4 * inputs.length));
      const memory = new DataView(bb.memory().buffer);
      return Array.from({ length: outputs }, (_, i) => this.#value(memory.getInt32(ptr + 4 * (inputs.length + i), true)));
    });
  }

  /** Runs `use` with attribute bytes in module memory. */
  #withAttributes<T>(bb: Bb, attributes: Attributes | undefined, use: (ptr: number, len: number) => T): T {
    const bytes = encodeAttributes(attributes);
    return bytes.length === 0 ? use(0, 0) : bb.withBytes(bytes, use);
  }

  // ---- the function's boundary -----------------------------------------------------------------

  /**
   * Declares an input of this function. Without a type it takes the type of the value a
   * caller binds to it (untyped bytes in the top-level module). Declaring it again returns it again.
   */
  input<T extends ValueType = ValueType>(name: string, type?: T): GraphValue<T> {
    return this.recordValue('input', (bb, [n, t]) => bb.exports.bb_wasm_rec_input(n!, t!), [name, type]);
  }

  /** Declares a local output port with this value (an app event of the top-level module's partition). */
  output<T extends ValueType>(name: string, value: GraphValue<T>): GraphValue<T> {
    const v = this.#numberOf(value);
    return this.recordValue('output', (bb, [n]) => bb.exports.bb_wasm_rec_output(n!, v), [name]);
  }

  /**
   * Sends `value` to `peers` (a peer id, a list of them, or an untyped input) as network
   * port `port`: on the receiving side, {@link lookupOutput}(port) is what arrived. Returns
   * the request handle.
   */
  netOut(port: string, peers: GraphValue, value: GraphValue): GraphValue<typeof TYPES.wireRequest> {
    const p = this.#numberOf(peers);
    const v = this.#numberOf(value);
    return this.recordValue('netOut', (bb, [n]) => bb.exports.bb_wasm_rec_net_out(n!, p, v), [port]);
  }

  /** The value of an output or network port this function declared. */
  lookupOutput<T extends ValueType = ValueType>(port: string): GraphValue<T> {
    return this.recordValue('lookupOutput', (bb, [n]) => bb.exports.bb_wasm_rec_lookup_output(n!), [port]);
  }

  /**
   * The peer that sent what arrives on network port `port`: a peer id the receiving side
   * answers to (`g.netOut('reply', g.lookupSender('ask'), ...)` goes back to the peer
   * class that sent). `port` must be a network port of this function.
   */
  lookupSender(port: string): GraphValue<typeof TYPES.peerId> {
    return this.recordValue('lookupSender', (bb, [n]) => bb.exports.bb_wasm_rec_lookup_sender(n!), [port]);
  }

  /** Packs values into one composite. */
  bundle(...parts: GraphValue[]): GraphValue<typeof TYPES.composite> {
    const bb = this.#bb('bundle');
    const numbers = this.#numbers(parts);
    return this.#value(bb.withBytes(numbers, (ptr) => bb.check(bb.exports.bb_wasm_rec_bundle(ptr, parts.length))));
  }

  /** Unpacks a composite into one value per type. */
  unbundle(composite: GraphValue, types: readonly ValueType[]): GraphValue[] {
    const c = this.#numberOf(composite);
    const packed = packStrings(types);
    return this.#withValues('unbundle', [], types.length, (bb, _in, out) =>
      packed.length === 0
        ? bb.exports.bb_wasm_rec_unbundle(c, 0, 0, out, types.length)
        : bb.withBytes(packed, (tp, tl) => bb.exports.bb_wasm_rec_unbundle(c, tp, tl, out, types.length)),
    );
  }

  // ---- sub-modules -----------------------------------------------------------------------------

  /**
   * Calls a sub-module (one listed in this module's `submodules`), binding each of its
   * inputs by name: its body is recorded into a function of its own on first use.
   */
  call(callee: CallableModule, bindings: Readonly<Record<string, GraphValue>> = {}): ModuleCall {
    return this.#call('call', callee, bindings, false);
  }

  /** From a bootstrap: composes a sub-module's bootstrap (nothing when it records none). */
  callBootstrap(callee: CallableModule, bindings: Readonly<Record<string, GraphValue>> = {}): ModuleCall {
    return this.#call('callBootstrap', callee, bindings, true);
  }

  #call(what: string, callee: CallableModule, bindings: Readonly<Record<string, GraphValue>>, bootstrap: boolean): ModuleCall {
    const bb = this.#bb(what);
    const handle = this.#context.handleOf(callee);
    const entries = Object.entries(bindings);
    const names = packStrings(entries.map(([name]) => name));
    const values = this.#numbers(entries.map(([, v]) => v));
    const number = bb.withBytes(names, (np, nl) =>
      bb.withBytes(values, (vp) => bb.check(bb.exports.bb_wasm_rec_call(handle, bootstrap ? 1 : 0, np, entries.length ? nl : 0, vp, entries.length))),
    );
    return new ModuleCall(this, number);
  }

  // ---- role slots ------------------------------------------------------------------------------

  /**
   * Records `slot.method(inputs)` on a slot of `role` — the generic form behind the slot
   * objects below. Backend methods are ONNX operator names.
   */
  roleCall(role: Role, slot: string, method: string, inputs: readonly GraphValue[], options: OpOptions & { readonly peerClass?: string } = {}): GraphValue[] {
    const outputs = options.outputs ?? 1;
    return this.#withValues('roleCall', inputs, outputs, (bb, inPtr, outPtr) =>
      this.#withAttributes(bb, options.attributes, (ap, al) =>
        bb.withStrings([slot, options.peerClass, method], (sp, pp, mp) =>
          bb.exports.bb_wasm_rec_role_call(ROLES[role], sp!, pp!, mp!, inPtr, inputs.length, ap, al, outPtr, outputs),
        ),
      ),
    );
  }

  /** A Model slot, named by the author; the compiler binds a concrete to it by that name. */
  model(name: string): ModelSlot {
    return new ModelSlot(this, name);
  }
  aggregator(name: string): AggregatorSlot {
    return new AggregatorSlot(this, name);
  }
  codec(name: string): CodecSlot {
    return new CodecSlot(this, name);
  }
  dataSource(name: string): DataSourceSlot {
    return new DataSourceSlot(this, name);
  }
  index(name: string): IndexSlot {
    return new IndexSlot(this, name);
  }
  /** A PeerSelector slot; `peerClass` names the class of the peers it picks (default: this peer's). */
  peerSelector(name: string, peerClass?: string): PeerSelectorSlot {
    return new PeerSelectorSlot(this, name, peerClass);
  }
  /** A Backend slot: its ops are ONNX operators, checked against the op set of the type bound to it. */
  backend(name: string): BackendSlot {
    return new BackendSlot(this, name);
  }

  /**
   * A protocol's own op, slotless, in `ai.bytesandbrains.protocol.<protocol>` (a name with
   * a dot is taken as the whole domain): the component whose type speaks that domain runs it.
   */
  protocolCall(protocol: string, op: string, inputs: readonly GraphValue[] = [], options: OpOptions = {}): GraphValue[] {
    const domain = protocol.includes('.') ? protocol : `ai.bytesandbrains.protocol.${protocol}`;
    const outputs = options.outputs ?? 1;
    return this.#withValues('protocolCall', inputs, outputs, (bb, inPtr, outPtr) =>
      this.#withAttributes(bb, options.attributes, (ap, al) =>
        bb.withStrings([domain, op], (dp, op_) => bb.exports.bb_wasm_rec_protocol_call(dp!, op_!, inPtr, inputs.length, ap, al, outPtr, outputs)),
      ),
    );
  }

  // ---- split learning --------------------------------------------------------------------------

  /**
   * Records split learning of one ONNX model between the peers that run this Module (the
   * clients) and the server's peers: the ops of a training step on the two Model slots and
   * the network ports between them, as C's `bb_rec_split` records them (docs/SPLIT.md).
   * Each slot is bound to a component that takes the model (SplitModel); the compiler
   * tells each which part it holds.
   */
  split(split: SplitOptions): void {
    const shape = split.shape === 'u' ? 1 : split.shape === 'vanilla' ? 0 : -1;
    const values = [split.server, split.tick, split.heldOut?.x, split.heldOut?.y, split.heldOut?.tick, split.averaging?.clients];
    const numbers = new Uint8Array(4 * values.length);
    const view = new DataView(numbers.buffer);
    values.forEach((v, i) => view.setInt32(4 * i, v === undefined ? VALUE_EMPTY : this.#numberOf(v), true));
    const cuts = packStrings(split.cuts);
    const bb = this.#bb('split');
    bb.withStrings([split.clientModel.name, split.serverModel.name, split.averaging?.averager.name], (cp, sp, ap) =>
      bb.withBytes(numbers, (vp) => {
        const record = (cutsPtr: number, cutsLen: number): number =>
          bb.check(bb.exports.bb_wasm_rec_split(shape, cutsPtr, cutsLen, cp!, sp!, ap!, vp, values.length));
        return cuts.length === 0 ? record(0, 0) : bb.withBytes(cuts, record);
      }),
    );
  }

  // ---- syscalls --------------------------------------------------------------------------------

  /** Any syscall the runtime implements, by op type (the typed methods below record each). */
  syscall(op: string, inputs: readonly GraphValue[] = [], options: OpOptions = {}): GraphValue[] {
    const outputs = options.outputs ?? 1;
    return this.#withValues('syscall', inputs, outputs, (bb, inPtr, outPtr) =>
      this.#withAttributes(bb, options.attributes, (ap, al) =>
        bb.withStrings([op], (opPtr) => bb.exports.bb_wasm_rec_syscall(opPtr!, inPtr, inputs.length, ap, al, outPtr, outputs)),
      ),
    );
  }

  #sys1<T extends ValueType = ValueType>(op: string, inputs: readonly GraphValue[], attributes?: Attributes): GraphValue<T> {
    return this.syscall(op, inputs, attributes === undefined ? {} : { attributes })[0] as GraphValue<T>;
  }

  #sys0(op: string, inputs: readonly GraphValue[], attributes: Attributes): void {
    this.syscall(op, inputs, { attributes, outputs: 0 });
  }

  /** A constant: the literal, typed `type` (default its tensor type); `label` is for diagnostics. */
  constant<T extends ValueType = ValueType>(literal: Literal, options: { readonly type?: T; readonly label?: string } = {}): GraphValue<T> {
    const bytes = encodeLiteral(literal);
    const bb = this.#bb('constant');
    return this.#value(
      bb.withStrings([options.label, options.type], (lp, tp) => bb.withBytes(bytes, (p, l) => bb.check(bb.exports.bb_wasm_rec_constant(lp!, tp!, p, l)))),
    );
  }

  /** x again, under a new name, same type. */
  passThrough<T extends ValueType>(x: GraphValue<T>): GraphValue<T> {
    return this.#sys1('PassThrough', [x]);
  }
  /** n copies of x. */
  tee<T extends ValueType>(x: GraphValue<T>, n: number): GraphValue<T>[] {
    return this.syscall('Tee', [x], { outputs: n }) as GraphValue<T>[];
  }
  /** x, once every condition has a value. */
  gate<T extends ValueType>(x: GraphValue<T>, ...conditions: GraphValue[]): GraphValue<T> {
    return this.#sys1('Gate', [x, ...conditions]);
  }
  /** The first of the values to arrive; with a group, only the group's first ever. */
  any(values: readonly GraphValue[], group?: string): GraphValue {
    return this.#sys1('Any', values, group === undefined ? undefined : { group });
  }
  /** A trigger once x has a value. */
  onTrigger(x: GraphValue): GraphValue<typeof TYPES.trigger> {
    return this.#sys1('OnTrigger', [x]);
  }
  /** A trigger as soon as the inputs (if any) have values. */
  pulse(...after: GraphValue[]): GraphValue<typeof TYPES.trigger> {
    return this.#sys1('Pulse', after);
  }
  eventSource(...after: GraphValue[]): GraphValue<typeof TYPES.trigger> {
    return this.#sys1('EventSource', after);
  }
  lifecyclePhase(...after: GraphValue[]): GraphValue<typeof TYPES.trigger> {
    return this.#sys1('LifecyclePhase', after);
  }
  /** A barrier over the inputs: untyped bytes out once all arrived. */
  gateDispatch(...inputs: GraphValue[]): GraphValue<typeof TYPES.bytes> {
    return this.#sys1('GateDispatch', inputs);
  }
  /** A trigger now and every periodNs after (omitted: the runtime's default, one second). */
  interval(periodNs?: number | bigint): GraphValue<typeof TYPES.trigger> {
    return this.#sys1('Interval', [], periodNs === undefined ? undefined : { period_ns: BigInt(periodNs) });
  }
  /** The node's time (nanoseconds) once the inputs have values. */
  clock(...after: GraphValue[]): GraphValue {
    return this.#sys1('Clock', after);
  }
  /** A number from the node's seeded generator. */
  random(...after: GraphValue[]): GraphValue {
    return this.#sys1('RngU64', after);
  }
  /** A trigger durationNs after the inputs have values (syscall Sleep). */
  sleep(durationNs: number | bigint, ...after: GraphValue[]): GraphValue<typeof TYPES.trigger> {
    return this.#sys1('Sleep', after, { duration_ns: BigInt(durationNs) });
  }
  /** A trigger delayNs after the inputs have values (syscall After). */
  delay(delayNs: number | bigint, ...after: GraphValue[]): GraphValue<typeof TYPES.trigger> {
    return this.#sys1('After', after, { delay_ns: BigInt(delayNs) });
  }
  /** At most `n` (default 1) in flight under `name`: acquire gives a trigger or nothing, release frees one. */
  limit(name: string, n?: number): { acquire(...after: GraphValue[]): GraphValue<typeof TYPES.trigger>; release(...after: GraphValue[]): GraphValue<typeof TYPES.trigger> } {
    return {
      acquire: (...after) => this.#sys1('Limit.Acquire', after, n === undefined ? { name } : { name, n: BigInt(n) }),
      release: (...after) => this.#sys1('Limit.Release', after, { name }),
    };
  }
  /** A named FIFO of Bytes values (syscall Serialize). */
  queue(name: string): { enqueue(value: GraphValue): GraphValue<typeof TYPES.trigger>; dequeue(...after: GraphValue[]): GraphValue<typeof TYPES.bytes> } {
    return {
      enqueue: (value) => this.#sys1('Serialize.Enqueue', [value], { queue: name }),
      dequeue: (...after) => this.#sys1('Serialize.Dequeue', after, { queue: name }),
    };
  }
  /** A named slot holding the last Bytes value stashed (syscall Hold). */
  hold(slot: string): { stash(value: GraphValue): void; flush(...after: GraphValue[]): GraphValue<typeof TYPES.bytes> } {
    return {
      stash: (value) => this.#sys0('Hold.Stash', [value], { slot }),
      flush: (...after) => this.#sys1('Hold.Flush', after, { slot }),
    };
  }
  /** Keeps a history of Bytes values under `name`. */
  record(name: string, value: GraphValue): void {
    this.#sys0('Record', [value], { name });
  }
  /** Publishes `value` as an application event (a step `appEvent` with this topic). */
  appEmit(topic: string, value: GraphValue): void {
    this.#sys0('AppEmit', [value], { name: topic });
  }
  /** Publishes an empty application event once the inputs have values. */
  appNotify(topic: string, ...after: GraphValue[]): void {
    this.#sys0('AppNotify', after, { name: topic });
  }
  /** Adds `delta` (default 1) to a named counter (BbNode.counter reads it). */
  incrMetric(name: string, options: { readonly delta?: number | bigint; readonly after?: readonly GraphValue[] } = {}): void {
    this.#sys0('IncrMetric', options.after ?? [], options.delta === undefined ? { name } : { name, delta: BigInt(options.delta) });
  }
  correlateTag(...after: GraphValue[]): GraphValue {
    return this.#sys1('CorrelateTag', after);
  }
  /** From a bootstrap: a command the host completes (BbNode.complete) before the body runs. */
  bootstrapDispatch(...after: GraphValue[]): GraphValue {
    return this.#sys1('BootstrapDispatch', after);
  }
  /** Waits for the host to complete the command; gives what it completed it with. */
  bootstrapOutput(command: GraphValue): GraphValue {
    return this.#sys1('BootstrapOutput', [command]);
  }

  // ---- the address book and the registry ----------------------------------------------------------

  readonly addressBook = {
    /** Adds one address for a peer. */
    insert: (peer: GraphValue, address: GraphValue): GraphValue<typeof TYPES.trigger> => this.#addressInsert(peer, address, false),
    /** Adds a list of addresses for a peer. */
    insertMany: (peer: GraphValue, addresses: GraphValue): GraphValue<typeof TYPES.trigger> => this.#addressInsert(peer, addresses, true),
    /** The addresses known for a peer. */
    lookup: (peer: GraphValue): GraphValue<typeof TYPES.addresses> => {
      const p = this.#numberOf(peer);
      return this.recordValue('addressBook.lookup', (bb) => bb.exports.bb_wasm_rec_address_book_lookup(p));
    },
  };

  #addressInsert(peer: GraphValue, addresses: GraphValue, many: boolean): GraphValue<typeof TYPES.trigger> {
    const p = this.#numberOf(peer);
    const a = this.#numberOf(addresses);
    return this.recordValue(many ? 'addressBook.insertMany' : 'addressBook.insert', (bb) => bb.exports.bb_wasm_rec_address_book_insert(p, a, many ? 1 : 0));
  }

  /**
   * Announces this peer to the registry server `serverPeer` (GlobalRegistry): the server's
   * PeerSelector then counts it among its live peers, and the client heartbeats.
   */
  announce(serverPeer: GraphValue): GraphValue<typeof TYPES.trigger> {
    const s = this.#numberOf(serverPeer);
    return this.recordValue('announce', (bb) => bb.exports.bb_wasm_rec_announce(s));
  }

  // ---- the author's own errors ---------------------------------------------------------------------

  /** Ends the recording with the author's own error (the build throws it, prefixed with the module). */
  fail(message: string, code: number = BbErrorCode.InvalidArgument): void {
    const bb = this.#bb('fail');
    bb.withStrings([message], (m) => bb.check(bb.exports.bb_wasm_rec_fail(code, m!)));
  }

  /** True once the recording has failed: a callback may stop early. */
  get failed(): boolean {
    const bb = this.#bb('failed');
    return bb.check(bb.exports.bb_wasm_rec_failed()) === 1;
  }
}
