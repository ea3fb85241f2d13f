/**
 * A whole federation inside this page: every peer a Web Worker with its own bb.wasm and
 * node, the page the network between them. Each envelope a worker's node sends comes
 * here, is shown leaving its sender, waits out the link latency and is handed to the
 * addressed worker, whose answer (taken or refused) ends its flight. Peers can be paused
 * (their engine stops; envelopes wait for them) or killed (their worker ends; envelopes
 * to them are lost).
 */
import { peerIdFromU64, type Value } from 'bytesandbrains';
import { decodeEnvelope, decodeValue, ENVELOPE_SCHEMA_VERSION } from 'bytesandbrains/internals';

import { FedRounds, GossipRounds, type RoundCounters } from '../../shared/rounds.js';
import type { ProgramGraph, WireArrow } from '../program/model.js';
import { digitsText } from './digits.js';
import type { FromWorker, InitMessage, PeerRole, ToWorker } from './protocol.js';
import type { FederationState, Flight, FlightKind, PeerPoint, RoundPoint } from './state.js';

/** split_cnn: SplitFed of the digits CNN (the splitLearning template), a server and its clients. */
export type LocalProgram = 'federated_digits' | 'gossip_digits' | 'split_cnn';

export interface LocalRunOptions {
  readonly program: LocalProgram;
  /** Clients (federated) or peers (gossip). */
  readonly peers: number;
  /** One-way link latency, in milliseconds. */
  readonly latencyMs: number;
  readonly artifact: Uint8Array;
  readonly graph: ProgramGraph;
  /** bb.wasm, compiled once; every worker instantiates it. */
  readonly module: WebAssembly.Module;
  readonly csv: Uint8Array;
  /** The rows of the digits each client (or gossip peer) trains on, and the held-out rows. */
  readonly shards: readonly (readonly number[])[];
  /** The digits each shard holds, for its card. */
  readonly digits: readonly (readonly number[])[];
  readonly test: readonly number[];
  /** Scores a parameter vector on the test set (loss and accuracy), when the model is an MLP classifier. */
  readonly score?: (params: Float32Array) => { loss: number; accuracy: number };
  /** split_cnn: the ONNX model every side is given. */
  readonly model?: Uint8Array;
  /** What a worker reported that is not a normal step (an op failure, an error). */
  readonly onProblem?: (peer: string, text: string) => void;
}

interface WorkerPeer {
  readonly id: string;
  worker: Worker | undefined;
  paused: boolean;
  /** Envelopes that reached a paused peer: handed over when it resumes. */
  held: { from: string; bytes: Uint8Array; flight: Flight; update?: Value }[];
  ready: Promise<void>;
}

/**
 * The rounds of an in-page federated run: a round closes at once when every client
 * answered, or at its deadline with all but one; the deadline leaves room for the round
 * trip at the chosen latency (the global model out, the update back, each up to 1.2 times
 * the latency) and for training, so that a slow link makes rounds slower, not empty.
 */
export function roundRules(clients: number, latencyMs: number): { quorum: number; target: number; deadlineMs: number } {
  const roundTrip = 2 * 1.2 * latencyMs;
  return { quorum: Math.max(1, clients - 1), target: clients, deadlineMs: Math.max(1000, Math.ceil((roundTrip + 800) / 100) * 100) };
}

/** What an envelope carries, as the page shows it: data on a wire edge, protocol, or other. */
export interface EnvelopeRead {
  readonly kind: FlightKind;
  readonly edge?: WireArrow;
  /** The first value it carries on a wire edge. */
  readonly value?: Value;
}

/** Reads an envelope's wire edge (by its fills' sites) and first value; throws on bytes that are no envelope. */
export function readEnvelope(graph: ProgramGraph, bytes: Uint8Array): EnvelopeRead {
  let kind: FlightKind = 'other';
  let edge: WireArrow | undefined;
  let value: Value | undefined;
  const envelope = decodeEnvelope(bytes);
  // sites name wires only from schema 2 on; an older envelope's are positions the receiver refuses
  const byWire = envelope.schemaVersion === ENVELOPE_SCHEMA_VERSION;
  for (const fill of envelope.fills) {
    if (fill.op !== undefined) kind = 'protocol';
    const found = fill.site === undefined || !byWire ? undefined : graph.edgeByWire.get(fill.site);
    if (found === undefined) continue;
    kind = 'data';
    edge = found;
    if (value === undefined && fill.typeHash !== 0n) value = decodeValue(fill.typeHash, fill.payload);
  }
  return { kind, ...(edge === undefined ? {} : { edge }), ...(value === undefined ? {} : { value }) };
}

/**
 * The peer class a role's peer runs: a federated client the class that is not the invoking
 * one (@self is the server's), a split client @self (its Interval asks for the steps) and
 * a split server the class of the partitions the program's server runs.
 */
function classOf(graph: ProgramGraph, role: PeerRole): string {
  if (role === 'client') return graph.classes.find((c) => c !== '@self') ?? 'clients';
  if (role === 'split-server') {
    const server = graph.peers.find((p) => p.peer === 'server');
    return graph.partitions.find((p) => server?.partitions.includes(p.id) === true)?.peerClass ?? 'server';
  }
  return '@self';
}

/** The words for what happened to a peer, as its mark on the curves says it. */
const MARK_WORDS = { pause: 'paused', resume: 'resumed', kill: 'killed' } as const;

export class LocalRun {
  readonly #options: LocalRunOptions;
  readonly #state: FederationState;
  readonly #peers = new Map<string, WorkerPeer>();
  /** Envelopes handed to a worker, until it answers; with the update it carries to the server. */
  readonly #flights = new Map<number, { flight: Flight; to: string; update?: Value }>();
  readonly #timers = new Set<ReturnType<typeof setTimeout>>();
  readonly #fed: FedRounds | undefined;
  readonly #gossip: GossipRounds | undefined;
  #stopped = false;
  readonly serverId: string | undefined;

  constructor(state: FederationState, options: LocalRunOptions) {
    this.#options = options;
    this.#state = state;
    const sinks = {
      onRound: (point: RoundPoint) => state.addRound(point),
      onPeerPoint: (point: PeerPoint) => state.addPeerPoint(point),
    };
    if (options.program === 'federated_digits') {
      this.serverId = peerIdFromU64(1);
      this.#fed = new FedRounds(options.score, sinks);
    } else {
      // gossip peers and split clients report their own held-out accuracy every period
      if (options.program === 'split_cnn') this.serverId = peerIdFromU64(1);
      this.#gossip = new GossipRounds(options.score, sinks, () => [...this.#peers.values()].filter((p) => p.worker !== undefined && p.id !== this.serverId).length);
    }
  }

  /** Starts every peer and, for federated averaging, the server's rounds. */
  async start(): Promise<void> {
    const o = this.#options;
    const split = o.program === 'split_cnn';
    const served = this.serverId !== undefined;
    const ids = Array.from({ length: o.peers }, (_, k) => peerIdFromU64(k + (served ? 2 : 1)));
    this.#state.reset();
    this.#state.info = o.program === 'federated_digits' ? { mode: 'in this page', ...roundRules(o.peers, o.latencyMs) } : { mode: split ? 'in this page (split learning)' : 'in this page (gossip)' };
    const all = served ? [this.serverId!, ...ids] : ids;
    if (served) this.#addPeer(this.serverId!, split ? 'split-server' : 'server', 0, 1, all);
    ids.forEach((id, k) => this.#addPeer(id, split ? 'split-client' : served ? 'client' : 'gossip', k, k + 2, all));
    await Promise.all([...this.#peers.values()].map((p) => p.ready));
    if (this.#stopped) return;
    if (served) this.#post(this.#peers.get(this.serverId!)!, { type: 'start', clients: ids });
    // split clients take their first step once the server knows them
    if (split) for (const id of ids) this.#post(this.#peers.get(id)!, { type: 'start', clients: [] });
  }

  /** Pauses or resumes a peer's engine. */
  setPaused(id: string, paused: boolean): void {
    const peer = this.#peers.get(id);
    if (peer?.worker === undefined || peer.paused === paused) return;
    peer.paused = paused;
    this.#post(peer, { type: paused ? 'pause' : 'resume' });
    this.#state.setState(id, paused ? 'paused' : 'waiting');
    this.#mark(paused ? 'pause' : 'resume', id);
    if (!paused) for (const held of peer.held.splice(0)) this.#hand(peer, held.from, held.bytes, held.flight, held.update);
  }

  /** Ends a peer's worker: it is gone, and what is sent to it is lost. */
  kill(id: string): void {
    const peer = this.#peers.get(id);
    if (peer?.worker === undefined) return;
    peer.worker.terminate();
    peer.worker = undefined;
    peer.paused = false;
    for (const held of peer.held.splice(0)) this.#state.lose(held.flight);
    for (const [key, entry] of this.#flights) {
      if (entry.to !== id) continue;
      this.#state.lose(entry.flight);
      this.#flights.delete(key);
    }
    this.#state.setState(id, 'gone');
    this.#mark('kill', id);
  }

  #mark(kind: keyof typeof MARK_WORDS, id: string): void {
    this.#state.mark(kind, `${this.#state.nameOf(id).label} ${MARK_WORDS[kind]}`, id);
  }

  isAlive(id: string): boolean {
    return this.#peers.get(id)?.worker !== undefined;
  }

  isPaused(id: string): boolean {
    return this.#peers.get(id)?.paused === true;
  }

  /** Ends every worker; the state keeps what was seen. */
  stop(): void {
    this.#stopped = true;
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
    for (const peer of this.#peers.values()) {
      peer.worker?.terminate();
      peer.worker = undefined;
      this.#state.setState(peer.id, 'gone');
    }
    this.#state.info = { ...this.#state.info, mode: 'stopped' };
    this.#state.changed();
  }

  #addPeer(id: string, role: PeerRole, shard: number, seed: number, all: readonly string[]): void {
    const o = this.#options;
    const served = this.serverId !== undefined;
    const worker = new Worker(new URL('./worker.ts', import.meta.url), { type: 'module', name: `peer ${id}` });
    let ready!: () => void;
    const peer: WorkerPeer = { id, worker, paused: false, held: [], ready: new Promise<void>((resolve) => (ready = resolve)) };
    this.#peers.set(id, peer);
    const isServer = role === 'server' || role === 'split-server';
    const label = isServer ? 'server' : role === 'gossip' ? `peer ${shard + 1}` : `client ${shard + 1}`;
    const peerClass = classOf(o.graph, role);
    this.#state.upsertPeer(id, { label, peerClass, place: 'worker', state: 'starting', ...(isServer ? {} : { index: shard, holds: digitsText(o.digits[shard]!) }) });
    worker.onmessage = (event: MessageEvent<FromWorker>) => {
      if (peer.worker !== worker) return; // a message from a worker that was killed meanwhile
      const m = event.data;
      if (m.type === 'ready') {
        this.#state.setState(id, 'waiting');
        ready();
      } else if (m.type === 'send') this.#route(id, m.to, m.bytes);
      else if (m.type === 'delivered') this.#delivered(m.flight, m.ok, m.error);
      else if (m.type === 'event') this.#event(id, m.topic, m.value, m.counters);
      else if (m.type === 'failure') o.onProblem?.(id, `${m.kind}${m.reason ? ` (${m.reason})` : ''}: ${m.detail ?? ''}`);
      else o.onProblem?.(id, m.message);
    };
    worker.onerror = (event) => o.onProblem?.(id, event.message);
    const init: InitMessage = {
      type: 'init',
      module: o.module,
      artifact: o.artifact,
      role,
      self: id,
      ...(served ? { server: this.serverId! } : {}),
      peers: all.filter((p) => p !== this.serverId),
      rows: isServer ? [] : o.shards[shard]!,
      test: o.test,
      csv: o.csv,
      seed,
      ...(o.program === 'split_cnn' ? { split: { model: o.model!, clients: o.peers } } : {}),
    };
    this.#post(peer, init);
  }

  #post(peer: WorkerPeer, message: ToWorker, transfer: Transferable[] = []): void {
    peer.worker?.postMessage(message, transfer);
  }

  /** An envelope left `from`: shown, scored, then handed to `to` after the latency. */
  #route(from: string, to: string, bytes: Uint8Array): void {
    let read: EnvelopeRead = { kind: 'other' };
    try {
      read = readEnvelope(this.#options.graph, bytes);
    } catch (error) {
      this.#options.onProblem?.(from, `an envelope the page could not read: ${String(error)}`);
    }
    const { kind, edge, value } = read;
    const flight = this.#state.send(from, to, bytes.length, kind, edge);
    this.#state.setState(from, 'sending');
    // an update counts for its round once the server's node is handed it (#delivered)
    const update = kind === 'data' && this.#fed !== undefined && to === this.serverId ? value : undefined;
    if (kind === 'data' && value !== undefined) {
      if (this.#fed !== undefined && from === this.serverId) this.#fed.sent(to, value);
      if (this.#gossip !== undefined) this.#gossip.shared(from, value);
    }
    const receiver = this.#peers.get(to);
    const latency = this.#options.latencyMs * (0.8 + 0.4 * Math.random());
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      if (receiver?.worker === undefined) return this.#state.lose(flight);
      if (receiver.paused) receiver.held.push({ from, bytes, flight, ...(update === undefined ? {} : { update }) });
      else this.#hand(receiver, from, bytes, flight, update);
    }, latency);
    this.#timers.add(timer);
  }

  #hand(receiver: WorkerPeer, from: string, bytes: Uint8Array, flight: Flight, update?: Value): void {
    this.#flights.set(flight.id, { flight, to: receiver.id, ...(update === undefined ? {} : { update }) });
    this.#post(receiver, { type: 'deliver', from, bytes, flight: flight.id }, [bytes.buffer]);
  }

  #delivered(id: number, ok: boolean, error: string | undefined): void {
    const entry = this.#flights.get(id);
    if (entry === undefined) return;
    this.#flights.delete(id);
    if (!ok) {
      this.#state.lose(entry.flight);
      this.#options.onProblem?.(entry.to, `refused an envelope: ${error ?? ''}`);
      return;
    }
    this.#state.deliver(entry.flight);
    // the server's worker answers in the order its node took envelopes and reported rounds
    if (entry.update !== undefined) this.#fed?.update(entry.flight.from, entry.update);
    const sender = this.#state.peers.get(entry.flight.from);
    if (sender?.state === 'sending') this.#state.setState(entry.flight.from, 'waiting');
    const receiver = this.#state.peers.get(entry.to);
    if (receiver !== undefined && receiver.state !== 'paused' && receiver.state !== 'gone') {
      this.#state.setState(entry.to, entry.to === this.serverId ? 'aggregating' : 'training');
    }
  }

  #event(peer: string, topic: string, value: Value, counters: RoundCounters | undefined): void {
    if (this.#fed !== undefined) this.#fed.event(topic, value, counters);
    else if (topic === 'accuracy') this.#gossip?.accuracy(peer, value);
  }
}
