/**
 * One peer of a compiled program: bb_node, sans-IO. The host installs the artifact for its
 * targets, feeds it what the transport received and the time, polls it, and sends what the
 * steps say. A BbNode is a Pollable, so a PollDriver can run it; steps reach `onStep`
 * listeners (and are returned by poll).
 *
 * ```ts
 * const node = BbNode.install(bb, { artifact, targets: ['FedDigits_clients'], slots: { data: { dataset } } });
 * node.onStep((step) => { if (step.kind === 'send') transport.send(step.peer, step.bytes); });
 * transport.onEnvelope((from, bytes) => { node.deliver(from, bytes); driver.wake(); });
 * const driver = new PollDriver(node); driver.start();
 * ```
 */
import type { Bb } from '../engine/bb.js';
import { hostComponents, type CompletionSink, type OpOutputs } from './component.js';
import type { Dataset } from '../train/dataset.js';
import type { Pollable } from './driver.js';
import { BbError, BbErrorCode } from '../engine/errors.js';
import { concatBytes, fromBase64 } from '../identity/bytes.js';
import type { PeerRole } from '../signal/protocol.js';
import { decodeValue, encodeValueList, randomPeerId, type Value } from './values.js';
import { OnnxModel } from '../engine/model.js';
import { Notices, watchNode, type Logger } from './notices.js';
import type { Signer } from '../identity/identity.js';
import { peerIdFromPublicKey } from '../identity/peer-id.js';

export type StepKind =
  | 'send'
  | 'appEvent'
  | 'opFailed'
  | 'wireReceiveFailed'
  | 'peerResolveFailed'
  | 'outboundDropped'
  | 'cycleBudgetExceeded'
  | 'bootstrapComplete'
  | 'waitingOnBootstrap'
  | 'opCompleted'
  | 'asyncSuspended'
  | 'ingressDropped';

const STEP_KINDS: readonly StepKind[] = [
  'send',
  'appEvent',
  'opFailed',
  'wireReceiveFailed',
  'peerResolveFailed',
  'outboundDropped',
  'cycleBudgetExceeded',
  'bootstrapComplete',
  'waitingOnBootstrap',
  'opCompleted',
  'asyncSuspended',
  'ingressDropped',
];

/** What a poll reports (bb_step): which fields are set depends on the kind. */
export interface Step {
  readonly kind: StepKind;
  /** send: the destination; failures: the peer involved. */
  readonly peer?: string;
  /** send: the envelope to hand to that peer. */
  readonly bytes?: Uint8Array;
  /** appEvent, bootstrap and op steps: the partition. */
  readonly module?: string;
  /** appEvent: the output or event name. */
  readonly topic?: string;
  /** appEvent: the value. */
  readonly value?: Value;
  /** op steps: "domain::OpType" and the node name. */
  readonly op?: string;
  /** failures: a stable token ("deadline_exceeded", ...). */
  readonly reason?: string;
  /** failures: the full message. */
  readonly detail?: string;
  readonly execId: bigint;
  readonly command: bigint;
  readonly count: bigint;
  readonly typeHash: bigint;
  readonly fillIndex: number;
}

export interface SlotOptions {
  /** Overrides the artifact's config for this slot. */
  readonly config?: string;
  /** The data an ArraySource bound here reads. */
  readonly dataset?: Dataset;
  /**
   * The ONNX model an OnnxModel bound here trains: its ModelProto bytes or a decoded
   * {@link OnnxModel} (read at install; bb.wasm reads no files, so this is how a page
   * hands a model to a federation).
   */
  readonly model?: Uint8Array | OnnxModel;
}

export interface NodeOptions {
  /** The compiled artifact (Compiler.compile). */
  readonly artifact: Uint8Array;
  /** Partition names, exact or the part before '#' (e.g. "FedDigits_clients"). */
  readonly targets: readonly string[];
  /** My peer id (base58 text); default a fresh random one. */
  readonly self?: string;
  readonly slots?: Readonly<Record<string, SlotOptions>>;
  /** The node's RNG seed (components derive theirs from it); default 0. */
  readonly seed?: bigint | number;
  /**
   * The room's join tokens decide who takes part: only peers whose token the host handed
   * over (admitToken) enter the address book, and the aggregators take updates only from
   * clients' tokens. Default: no tokens are checked.
   */
  readonly admission?: NodeAdmission;
  /**
   * Signs for the node's peer id (an Identity, or a Signer holding its key elsewhere): what
   * a FedAvg client under secure aggregation signs its SecAgg+ keys with, so that its
   * neighbours check them against its peer id. Its peerId must be `self`. Default none:
   * such a client's contribution is refused by name.
   */
  readonly signer?: Signer;
  /**
   * Where the node tells what goes wrong quietly — refused values, unresolved peers, failed
   * ops, dropped envelopes, skipped training steps, refused contributions — one line per
   * kind, rate-limited (notices.ts); default the default logger (console.warn), false: none.
   */
  readonly log?: Logger | false;
}

/** A room's join policy as the engine checks it: the room a token must name, and whose signatures count. */
export interface NodeAdmission {
  /** The room (1–128 of [A-Za-z0-9_-]) a token must name. */
  readonly room: string;
  /** The operators' 32-byte Ed25519 public keys whose tokens the room trusts (at least one). */
  readonly operators: readonly Uint8Array[];
}

const ROLES_BY_CODE: readonly (PeerRole | null)[] = [null, 'client', 'server', 'watcher'];

export interface NodeStats {
  readonly executions: number;
  readonly frontier: number;
  readonly pendingAsync: number;
  readonly timers: number;
  readonly ingress: number;
  readonly outbound: number;
  readonly ingressBytes: number;
}

const NO_EXPIRY = 0xffffffffffffffffn;
const utf8 = new TextDecoder();

/** The default clock: performance.now() in nanoseconds (what PollDriver uses too). */
export function monotonicNowNs(): bigint {
  return BigInt(Math.round(performance.now() * 1e6));
}

export class BbNode implements Pollable, CompletionSink {
  readonly #bb: Bb;
  #handle = 0;
  readonly #listeners = new Set<(step: Step) => void>();
  readonly #workListeners = new Set<() => void>();
  /** My peer id. */
  readonly self: string;
  /** The resolved target names (e.g. "FedDigits_clients#9f3a…"). */
  readonly targets: readonly string[];
  /** Whether the node checks join tokens (installed with `admission`): see admitToken. */
  readonly checksTokens: boolean;
  /** The join policy the node checks tokens against (its install's `admission`), if any. */
  readonly admission: NodeAdmission | undefined;
  #signer: Signer | undefined;

  private constructor(bb: Bb, handle: number, admission: NodeAdmission | undefined) {
    this.#bb = bb;
    this.#handle = handle;
    this.checksTokens = admission !== undefined;
    this.admission = admission === undefined ? undefined : { room: admission.room, operators: admission.operators.map((key) => key.slice()) };
    const info = this.#info();
    this.self = info.self;
    this.targets = info.targets;
  }

  /** Installs an artifact; an error is a BbError whose message starts "install failed (<kind>)". */
  static install(bb: Bb, options: NodeOptions): BbNode {
    const self = options.self ?? options.signer?.peerId ?? randomPeerId();
    if (options.signer !== undefined && (options.signer.peerId !== self || peerIdFromPublicKey(options.signer.publicKey) !== self)) {
      throw new BbError(BbErrorCode.InvalidArgument, `BbNode.install: the signer signs for ${options.signer.peerId}, not for the node's peer id ${self}`);
    }
    const slots = Object.entries(options.slots ?? {});
    if (slots.some(([, o]) => o.dataset !== undefined && o.model !== undefined)) {
      throw new BbError(BbErrorCode.InvalidArgument, 'BbNode.install: a slot takes a dataset or a model, not both');
    }
    // models given as bytes are decoded for the install and freed after it
    const decoded = slots.map(([, o]) => (o.model instanceof Uint8Array ? OnnxModel.decode(bb, o.model) : undefined));
    const hostData = new Int32Array(
      slots.map(([, o], i) => o.dataset?.handle ?? decoded[i]?.handle ?? (o.model as OnnxModel | undefined)?.handle ?? 0),
    );
    try {
      return BbNode.#install(bb, options, self, slots, hostData);
    } finally {
      for (const model of decoded) model?.free();
    }
  }

  static #install(bb: Bb, options: NodeOptions, self: string, slots: [string, SlotOptions][], datasets: Int32Array): BbNode {
    const targets = packStrings(options.targets);
    const slotText = packStrings(slots.flatMap(([slot, o]) => [slot, o.config ?? '']));
    const seed = BigInt.asUintN(64, BigInt(options.seed ?? 0));
    const artifact = options.artifact;
    const operators = options.admission?.operators ?? [];
    for (const key of operators) {
      if (key.byteLength !== 32) throw new BbError(BbErrorCode.InvalidArgument, `install: an operator key of ${key.byteLength} bytes, not 32`);
    }
    const packed = concat([artifact, targets, slotText, concatBytes(...operators)]);
    return hostComponents(bb).install(() =>
      bb.withStrings([self, options.admission?.room], (selfPtr, roomPtr) =>
        bb.withBytes(packed, (ptr) =>
          // the host data handles in a block of their own (int32-aligned for the C side)
          bb.withBytes(new Uint8Array(datasets.buffer), (datasetsPtr) => {
            const targetsAt = ptr + artifact.length;
            const slotsAt = targetsAt + targets.length;
            const keysAt = slotsAt + slotText.length;
            const handle = bb.check(
              bb.exports.bb_wasm_node_install(ptr, artifact.length, selfPtr!, targetsAt, targets.length, slotsAt,
                slotText.length, datasets.length > 0 ? datasetsPtr : 0, seed, roomPtr!, keysAt, operators.length,
                options.signer === undefined ? 0 : 1),
            );
            const node = new BbNode(bb, handle, options.admission);
            if (options.signer !== undefined) node.#signWith(options.signer);
            watchNode(node, new Notices(options.log));
            return node;
          }),
        ),
      ),
    );
  }

  /** Calls `listener` with every step a poll produces; returns the function that unsubscribes. */
  onStep(listener: (step: Step) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Calls `listener` after each call that gives the node work outside a poll (invoke,
   * complete, fail, runBootstrap, restore): a PollDriver running the node wakes on it.
   */
  onWork(listener: () => void): () => void {
    this.#workListeners.add(listener);
    return () => this.#workListeners.delete(listener);
  }

  #worked(): void {
    for (const listener of [...this.#workListeners]) listener();
  }

  addPeer(peer: string): void {
    this.#peerCall(peer, (ptr) => this.#bb.exports.bb_wasm_node_add_peer(this.#live('addPeer'), ptr));
  }

  forgetPeer(peer: string): void {
    this.#peerCall(peer, (ptr) => this.#bb.exports.bb_wasm_node_forget_peer(this.#live('forgetPeer'), ptr));
  }

  /** Refuses everything from (and to) a peer, or lifts that. */
  blockPeer(peer: string, blocked = true): void {
    this.#peerCall(peer, (ptr) => this.#bb.exports.bb_wasm_node_block_peer(this.#live('blockPeer'), ptr, blocked ? 1 : 0));
  }

  /**
   * Verifies the join token `peer` presents (base64url text or its bytes) at the wall-clock
   * time `nowUnixSeconds` and, when it admits, lets the peer take part in the role it
   * grants until its expiry. Returns that role; a refused token throws a BbError
   * (Malformed, or Denied: another peer's or room's, expired, not an operator's, forged)
   * whose message names the check that failed. Only for a node installed with `admission`.
   */
  admitToken(peer: string, token: string | Uint8Array, nowUnixSeconds: number = Date.now() / 1000, nowNs: bigint = monotonicNowNs()): PeerRole {
    const bytes = typeof token === 'string' ? fromBase64(token) : token;
    if (bytes === null) throw new BbError(BbErrorCode.Malformed, `admit token: the join token of ${peer} is not base64url`);
    const bb = this.#bb;
    const now = BigInt(Math.max(0, Math.floor(nowUnixSeconds)));
    const role = bb.withStrings([peer], (peerPtr) =>
      bb.withBytes(bytes, (ptr, len) => bb.check(bb.exports.bb_wasm_node_admit_token(this.#live('admitToken'), peerPtr!, ptr, len, now, nowNs))),
    );
    return ROLES_BY_CODE[role]!;
  }

  /** The role `peer`'s admitted token grants now; null when it has none or it expired. */
  peerRole(peer: string): PeerRole | null {
    const bb = this.#bb;
    const role = bb.withStrings([peer], (ptr) => bb.check(bb.exports.bb_wasm_node_peer_role(this.#live('peerRole'), ptr!)));
    return ROLES_BY_CODE[role] ?? null;
  }

  runBootstrap(nowNs: bigint = monotonicNowNs()): void {
    this.#bb.check(this.#bb.exports.bb_wasm_node_run_bootstrap(this.#live('runBootstrap'), nowNs));
    this.#worked();
  }

  /** One envelope a peer sent (BbError Malformed / Limit when refused; nothing is queued then). */
  deliver(from: string, bytes: Uint8Array, nowNs: bigint = monotonicNowNs()): void {
    const bb = this.#bb;
    bb.withStrings([from], (fromPtr) =>
      bb.withBytes(bytes, (ptr, len) => bb.check(bb.exports.bb_wasm_node_deliver(this.#live('deliver'), fromPtr!, ptr, len, nowNs))),
    );
  }

  /** The time of the poll whose steps the listeners are being given (undefined before the first). */
  get polledAt(): bigint | undefined {
    return this.#polledAt;
  }
  #polledAt: bigint | undefined;

  /** Runs what is ready at `nowNs`; the steps go to the listeners and are returned. */
  poll(nowNs: bigint = monotonicNowNs()): Step[] {
    const bb = this.#bb;
    this.#polledAt = nowNs;
    const n = bb.check(bb.exports.bb_wasm_node_poll(this.#live('poll'), nowNs));
    if (n === 0) return [];
    const steps = parseSteps(bb.resultBytes(), n);
    for (const step of steps) for (const listener of [...this.#listeners]) listener(step);
    return steps;
  }

  /** The next timer or deadline (ns), or null when none. */
  expiry(): bigint | null {
    const at = BigInt.asUintN(64, this.#bb.exports.bb_wasm_node_expiry(this.#live('expiry')));
    return at === NO_EXPIRY ? null : at;
  }

  hasWork(): boolean {
    return this.#bb.check(this.#bb.exports.bb_wasm_node_has_work(this.#live('hasWork'))) === 1;
  }

  /** Runs a target once with named inputs. */
  invoke(module: string, inputs: Readonly<Record<string, Value>> = {}, nowNs: bigint = monotonicNowNs()): void {
    const bb = this.#bb;
    const entries = Object.entries(inputs);
    const names = packStrings(entries.map(([name]) => name));
    const values = encodeValueList(entries.map(([, value]) => value));
    bb.withStrings([module], (modulePtr) =>
      bb.withBytes(names, (namesPtr, namesLen) =>
        bb.withBytes(values, (valuesPtr, valuesLen) =>
          bb.check(bb.exports.bb_wasm_node_invoke(this.#live('invoke'), modulePtr!, namesPtr, namesLen, valuesPtr, valuesLen, nowNs)),
        ),
      ),
    );
    this.#worked();
  }

  /** Gives an input of a target a value every new run starts with (undefined unbinds). */
  bindInput(module: string, input: string, value: Value | undefined): void {
    const bb = this.#bb;
    bb.withStrings([module, input], (modulePtr, inputPtr) =>
      bb.withBytes(encodeValueList([value]), (ptr, len) =>
        bb.check(bb.exports.bb_wasm_node_bind_input(this.#live('bindInput'), modulePtr!, inputPtr!, ptr, len)),
      ),
    );
  }

  /** Completes an asynchronous op (a host component's deferred call) with its outputs. */
  complete(command: bigint, outputs: OpOutputs): void {
    if (this.#handle === 0) return; // the node went while the op was out
    const bb = this.#bb;
    bb.withBytes(encodeValueList(outputs), (ptr, len) => bb.check(bb.exports.bb_wasm_node_complete(this.#handle, command, ptr, len)));
    this.#worked();
  }

  /** Fails an asynchronous op with a message. */
  fail(command: bigint, detail: string): void {
    if (this.#handle === 0) return;
    const bb = this.#bb;
    bb.withStrings([detail], (ptr) => bb.check(bb.exports.bb_wasm_node_fail(this.#handle, command, ptr!)));
    this.#worked();
  }

  /** A named counter (wire.rejected, ops.failed, ...); 0n when unknown. */
  counter(name: string): bigint {
    const bb = this.#bb;
    const handle = this.#live('counter');
    return bb.withStrings([name], (ptr) => BigInt.asUintN(64, bb.exports.bb_wasm_node_counter(handle, ptr!)));
  }

  stats(): NodeStats {
    return this.#info().stats;
  }

  /** The node's whole state (refused while it has work: poll until hasWork() is false). */
  snapshot(): Uint8Array {
    this.#bb.check(this.#bb.exports.bb_wasm_node_snapshot(this.#live('snapshot')));
    return this.#bb.resultBytes();
  }

  /** Restores a snapshot into this node, freshly installed from the same artifact and targets. */
  restore(snapshot: Uint8Array): void {
    const bb = this.#bb;
    bb.withBytes(snapshot, (ptr, len) => bb.check(bb.exports.bb_wasm_node_restore(this.#live('restore'), ptr, len)));
    this.#worked();
  }

  get freed(): boolean {
    return this.#handle === 0;
  }

  free(): void {
    if (this.#handle === 0) return;
    const handle = this.#handle;
    this.#handle = 0;
    signingNodes.get(this.#bb)?.delete(handle);
    this.#listeners.clear();
    this.#workListeners.clear();
    this.#bb.check(this.#bb.exports.bb_wasm_node_free(handle));
  }

  /** Answers the node's signing requests (bb_host_sign) with `signer`, asynchronously. */
  #signWith(signer: Signer): void {
    this.#signer = signer;
    let nodes = signingNodes.get(this.#bb);
    if (nodes === undefined) {
      const byHandle = new Map<number, BbNode>();
      nodes = byHandle;
      signingNodes.set(this.#bb, byHandle);
      this.#bb.setSigner((handle, slot, message) => {
        const node = byHandle.get(handle);
        return node === undefined ? false : node.#sign(slot, message);
      });
    }
    nodes.set(this.#handle, this);
  }

  #sign(slot: string, message: Uint8Array): boolean {
    const signer = this.#signer;
    if (signer === undefined) return false;
    const handle = this.#handle;
    // a signature that fails or comes after the node was freed is dropped: the SecAgg+
    // client that asked aborts at its deadline
    void signer.sign(message).then(
      (signature) => {
        if (this.#handle !== handle || signature.byteLength !== 64) return;
        const bb = this.#bb;
        bb.withStrings([slot], (slotPtr) => bb.withBytes(signature, (sigPtr) => bb.check(bb.exports.bb_wasm_node_signed(handle, slotPtr!, sigPtr))));
        this.#worked();
      },
      () => undefined,
    );
    return true;
  }

  #peerCall(peer: string, call: (ptr: number) => number): void {
    const bb = this.#bb;
    bb.withStrings([peer], (ptr) => bb.check(call(ptr!)));
  }

  #info(): { self: string; targets: string[]; stats: NodeStats } {
    const bb = this.#bb;
    bb.check(bb.exports.bb_wasm_node_info(this.#live('info')));
    const bytes = bb.resultBytes();
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    let at = 0;
    const text = (): string => {
      const len = view.getUint32(at, true);
      const out = utf8.decode(bytes.subarray(at + 4, at + 4 + len));
      at += 4 + len;
      return out;
    };
    const self = text();
    const count = view.getUint32(at, true);
    at += 4;
    const targets = Array.from({ length: count }, text);
    const field = (): number => {
      const v = Number(view.getBigUint64(at, true));
      at += 8;
      return v;
    };
    const stats: NodeStats = {
      executions: field(),
      frontier: field(),
      pendingAsync: field(),
      timers: field(),
      ingress: field(),
      outbound: field(),
      ingressBytes: field(),
    };
    return { self, targets, stats };
  }

  #live(what: string): number {
    if (this.#handle === 0) throw new BbError(BbErrorCode.InvalidArgument, `BbNode.${what}: the node was freed`);
    return this.#handle;
  }
}

/** The nodes of each module instance that sign, by handle (what bb_host_sign names). */
const signingNodes = new WeakMap<Bb, Map<number, BbNode>>();

/** Parses bb_wasm_node_poll's result (bb_wasm.h, "Steps"). */
export function parseSteps(bytes: Uint8Array, expected?: number): Step[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const count = view.getUint32(0, true);
  if (expected !== undefined && count !== expected) {
    throw new BbError(BbErrorCode.Malformed, `the poll reported ${expected} steps, its result holds ${count}`);
  }
  let at = 4;
  const field = (): Uint8Array => {
    const len = view.getUint32(at, true);
    const out = bytes.subarray(at + 4, at + 4 + len);
    at += 4 + len;
    return out;
  };
  const text = (): string | undefined => {
    const b = field();
    return b.length === 0 ? undefined : utf8.decode(b);
  };
  const steps: Step[] = [];
  for (let i = 0; i < count; i++) {
    const kindCode = view.getUint32(at, true);
    const fillIndex = view.getInt32(at + 4, true);
    const execId = view.getBigUint64(at + 8, true);
    const command = view.getBigUint64(at + 16, true);
    const stepCount = view.getBigUint64(at + 24, true);
    const typeHash = view.getBigUint64(at + 32, true);
    at += 40;
    const kind = STEP_KINDS[kindCode - 1];
    if (kind === undefined) throw new BbError(BbErrorCode.Malformed, `unknown step kind ${kindCode}`);
    const peer = text();
    const payload = field();
    const module = text();
    const topic = text();
    const op = text();
    const reason = text();
    const detail = text();
    const step: Step = {
      kind,
      execId,
      command,
      count: stepCount,
      typeHash,
      fillIndex,
      ...(peer !== undefined && { peer }),
      ...(kind === 'send' && { bytes: payload.slice() }),
      ...(kind === 'appEvent' && { value: decodeValue(typeHash, payload) }),
      ...(module !== undefined && { module }),
      ...(topic !== undefined && { topic }),
      ...(op !== undefined && { op }),
      ...(reason !== undefined && { reason }),
      ...(detail !== undefined && { detail }),
    };
    steps.push(step);
  }
  return steps;
}

function packStrings(strings: readonly string[]): Uint8Array {
  const encoder = new TextEncoder();
  return concat(strings.map((s) => {
    if (s.includes('\0')) throw new BbError(BbErrorCode.InvalidArgument, `"${s}" holds a NUL`);
    return encoder.encode(`${s}\0`);
  }));
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}
