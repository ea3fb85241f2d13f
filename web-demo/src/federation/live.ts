/**
 * The live federation serve.mjs runs: join it as a client (this page's node over WebRTC),
 * or watch it. Either way the page follows status.json, which replays every envelope the
 * server sent or received (half a second late, in the order and spacing the server saw
 * them), the seats and their state, and the scores of every round and every update.
 *
 * A page keeps its seat across reloads, and its node too: its identity is kept in
 * IndexedDB under a name held in sessionStorage (one per tab), the seat's session token
 * beside it, and a snapshot of its node (taken every few seconds and as the page goes),
 * which the reloaded page restores. A fresh node would count its envelopes from one again,
 * and the server would drop those it had already seen from this peer as replays.
 */
import { BbNode, connectPeer, monotonicNowNs, type Bb, type Clock, type Dataset, type DpOptions, type NodeAdmission, type RunningPeer, type SecureOptions, type Signer } from 'bytesandbrains';
import { splitDigits } from 'bytesandbrains/examples';
import { loadIdentity } from 'bytesandbrains/identity';

import { livePlan } from '../../shared/live-plan.js';
import type { PeerPoint, RoundPoint, SecureView } from '../../shared/rounds.js';
import type { ProgramGraph } from '../program/model.js';
import { DIGITS, digitsText, rotationDigits } from './digits.js';
import type { FederationState, Mark, PeerState } from './state.js';

/** What serve.mjs says about itself (config.json). */
export interface LiveConfig {
  readonly live: boolean;
  readonly clients: number;
  readonly quorum: number;
  readonly deadlineMs: number;
  readonly registryTtlMs: number;
  readonly classesPerShard: number;
  readonly server: string;
  readonly room: string;
  readonly signalPath: string;
  /** Where phones and other machines reach this page. */
  readonly urls: readonly string[];
  /** Differential privacy, when the federation has it (serve.mjs --dp-clip, --dp-noise). */
  readonly dp?: DpOptions;
  /** Secure aggregation (SecAgg+), when the federation has it (serve.mjs --secure). */
  readonly secure?: SecureOptions;
}

interface SeatStatus {
  readonly index: number;
  readonly state: 'free' | 'reserved' | 'connected' | 'away';
  readonly peer?: string;
  readonly sent?: number;
  readonly received?: number;
}

interface Status {
  readonly clients: number;
  readonly quorum: number;
  readonly deadlineMs: number;
  readonly server: string;
  readonly joined: number;
  readonly started: boolean;
  /** The rounds wait: fewer than the quorum are in the room. */
  readonly waiting: boolean;
  readonly note: string;
  readonly seats: readonly SeatStatus[];
  readonly now: number;
  readonly seq: number;
  readonly rounds: readonly RoundPoint[];
  /** Each client update's scores, with the seat its sender held then. */
  readonly points: readonly (PeerPoint & { id: number; seat?: number })[];
  readonly marks: readonly (Mark & { id: number })[];
  /** A secure federation's last round as its server saw it, when newer than the page's. */
  readonly secureView?: SecureView;
  readonly events: readonly { seq: number; at: number; from: string; to: string; bytes: number; edge: string }[];
}

/** Why this page cannot be a client, in words for the visitor; undefined when it can. */
export function whyCannotJoin(scope: { isSecureContext?: boolean; crypto?: { subtle?: unknown }; RTCPeerConnection?: unknown; indexedDB?: unknown } = globalThis): { code: 'https' | 'webrtc' | 'storage'; text: string } | undefined {
  if (scope.isSecureContext !== true || scope.crypto?.subtle === undefined) {
    return {
      code: 'https',
      text: 'Joining needs https. This page came over plain http from another machine, and browsers keep from such pages the cryptography a client signs its messages with. Whoever runs the demo can serve it over https (make web-demo TLS_CERT=… TLS_KEY=…) and share that link.',
    };
  }
  if (typeof scope.RTCPeerConnection !== 'function') {
    return {
      code: 'webrtc',
      text: 'This browser has no WebRTC, which a client needs to reach the server directly: join from another browser.',
    };
  }
  if (scope.indexedDB === undefined) {
    return { code: 'storage', text: 'This browser gives the page no storage (IndexedDB) to keep a client\'s key in, as in some private windows.' };
  }
  return undefined;
}

/** How late envelopes are replayed, so that a poll's worth of them plays out in real time. */
const REPLAY_DELAY_MS = 600;
/** How long a replayed envelope takes on screen. */
const FLIGHT_MS = 450;
const POLL_MS = 500;

const SESSION_KEY = 'bytesandbrains-web-demo.session';
const SEAT_KEY = 'bytesandbrains-web-demo.seat';
const SNAPSHOT_KEY = 'bytesandbrains-web-demo.snapshot';
const SNAPSHOT_EVERY_MS = 3000;

/** A node's state as the page keeps it across a reload, with the node's clock then. */
interface Kept {
  readonly room: string;
  readonly peer: string;
  /** The node's clock (ns) and the wall clock (ms) when it was taken. */
  readonly clockNs: string;
  readonly wallMs: number;
  readonly snapshot: string;
}

function toBase64(bytes: Uint8Array): string {
  let text = '';
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(text);
}

function fromBase64(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

function sessionName(): string {
  const named = new URLSearchParams(location.search).get('identity');
  if (named !== null) return named;
  let name = sessionStorage.getItem(SESSION_KEY);
  if (name === null) {
    name = `tab-${crypto.getRandomValues(new Uint32Array(2)).join('-')}`;
    sessionStorage.setItem(SESSION_KEY, name);
  }
  return `web-demo-${name}`;
}

/** A seat and a running client, or why not: the server had no seat for it, or joining failed (and whether the seat claimed on the way was given back). */
export type JoinResult =
  | { readonly joined: true; readonly seat: number; readonly restored: boolean }
  | { readonly joined: false; readonly reason: string; readonly refused?: boolean; readonly released?: boolean };

export class LiveSession {
  readonly #bb: Bb;
  readonly #state: FederationState;
  readonly #config: LiveConfig;
  #graph: ProgramGraph | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #seq = 0;
  #round = -1;
  #point = 0;
  #mark = 0;
  /** Server clock → page clock. */
  #offset: number | undefined;
  #me: string | undefined;
  #running: RunningPeer | undefined;
  #keeper: ReturnType<typeof setInterval> | undefined;
  #stopped = false;
  /** The latest status (the test and the join panel read it). */
  last: Status | undefined;
  onStatus: ((status: Status) => void) | undefined;

  constructor(bb: Bb, state: FederationState, config: LiveConfig) {
    this.#bb = bb;
    this.#state = state;
    this.#config = config;
  }

  /** The digits the client of seat `index` trains on, as serve.mjs deals them ("all ten" without skew). */
  digitsOf(index: number): string {
    const k = this.#config.classesPerShard;
    return digitsText(k > 0 ? rotationDigits(index, k) : Array.from({ length: DIGITS }, (_, d) => d));
  }

  /** The page's own peer id once it joined. */
  get self(): string | undefined {
    return this.#me;
  }

  /** Takes a seat and runs a client on it; a refusal says why (then watch). */
  async join(artifact: Uint8Array, csv: Uint8Array, graph: ProgramGraph): Promise<JoinResult> {
    this.#graph = graph;
    const identity = await loadIdentity(sessionName());
    const session = sessionStorage.getItem(SEAT_KEY) ?? undefined;
    const response = await fetch('join', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ peer: identity.peerId, session }) });
    const seat = (await response.json()) as { index?: number; token?: string; session?: string; error?: string };
    if (seat.error !== undefined || seat.index === undefined || seat.token === undefined) return { joined: false, refused: true, reason: seat.error ?? `the server answered ${response.status}` };
    if (seat.session !== undefined) sessionStorage.setItem(SEAT_KEY, seat.session);
    const c = this.#config;
    const split = splitDigits(this.#bb, csv, c.clients, 1, c.classesPerShard);
    try {
      const plan = livePlan(c);
      const data = split.shards[seat.index]!;
      this.#me = identity.peerId;
      // the room admits by token: the node checks its members' tokens (connectPeer insists)
      const admission = (await import('bytesandbrains/signal')).admissionOf(seat.token);
      const restored = this.#restore(artifact, plan.clientTargets, data, seat.index + 2, admission, identity);
      const clock = restored?.clock ?? monotonicNowNs;
      const node = restored?.node ?? plan.installClient(this.#bb, { artifact, self: identity.peerId, signer: identity, server: c.server, data, seed: seat.index + 2, nowNs: clock(), admission });
      const url = new URL(c.signalPath, location.href);
      url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
      try {
        this.#running = await connectPeer(node, { url: url.href, room: c.room, identity, token: seat.token, clock });
      } catch (error) {
        node.free();
        throw error;
      }
      const keep = (): void => this.#keep(clock);
      this.#keeper = setInterval(keep, SNAPSHOT_EVERY_MS);
      addEventListener('pagehide', keep);
      this.watch();
      return { joined: true, seat: seat.index, restored: restored !== undefined };
    } catch (error) {
      // the seat goes back at once, not after the grace period: this page will not use it
      this.#me = undefined;
      const released = await this.#leave(identity.peerId, seat.session);
      if (released) sessionStorage.removeItem(SEAT_KEY);
      return { joined: false, reason: plainReason(error), released };
    } finally {
      split.free();
    }
  }

  /** Gives a seat this page claimed back to the server; whether it took it. */
  async #leave(peer: string, session: string | undefined): Promise<boolean> {
    if (session === undefined) return false;
    try {
      const response = await fetch('leave', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ peer, session }) });
      return ((await response.json()) as { released?: boolean }).released === true;
    } catch {
      return false;
    }
  }

  /** The node this tab kept before a reload, restored; undefined when there is none that fits. */
  #restore(artifact: Uint8Array, targets: readonly string[], data: Dataset, seed: number, admission: NodeAdmission, signer: Signer): { node: BbNode; clock: Clock } | undefined {
    const text = sessionStorage.getItem(SNAPSHOT_KEY);
    if (text === null) return undefined;
    const kept = JSON.parse(text) as Kept;
    if (kept.room !== this.#config.room || kept.peer !== this.#me) return undefined;
    const node = BbNode.install(this.#bb, { artifact, self: kept.peer, targets, slots: { data: { dataset: data } }, seed, admission, signer });
    try {
      node.restore(fromBase64(kept.snapshot));
    } catch {
      node.free();
      sessionStorage.removeItem(SNAPSHOT_KEY);
      return undefined;
    }
    // the node's clock goes on from where it was, plus the time the page was away
    const offset = BigInt(kept.clockNs) + BigInt(Math.max(0, Date.now() - kept.wallMs)) * 1_000_000n - monotonicNowNs();
    return { node, clock: () => monotonicNowNs() + offset };
  }

  /** Keeps a snapshot of this page's node for a reload (skipped while the node is busy). */
  #keep(clock: Clock): void {
    const node = this.#running?.node;
    if (node === undefined || node.freed) return;
    // finish what is due first: a snapshot is refused while the node has work
    for (let i = 0; i < 16 && node.hasWork(); i++) node.poll(clock());
    if (node.hasWork()) return;
    const kept: Kept = { room: this.#config.room, peer: node.self, clockNs: String(clock()), wallMs: Date.now(), snapshot: toBase64(node.snapshot()) };
    sessionStorage.setItem(SNAPSHOT_KEY, JSON.stringify(kept));
  }

  /** Follows status.json until stopped. */
  watch(): void {
    this.#state.info = { mode: this.#me === undefined ? 'live (watching)' : 'live (a client)', quorum: this.#config.quorum, target: this.#config.clients, deadlineMs: this.#config.deadlineMs };
    this.#state.upsertPeer(this.#config.server, { label: 'server', peerClass: '@self', place: 'server process', state: 'waiting' });
    void this.#poll();
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    if (this.#keeper !== undefined) clearInterval(this.#keeper);
    this.#running?.stop();
    this.#running?.transport.close();
    this.#running?.node.free();
    this.#running = undefined;
  }

  async #poll(): Promise<void> {
    if (this.#stopped) return;
    try {
      const response = await fetch(`status.json?events=${this.#seq}&round=${this.#round}&points=${this.#point}&marks=${this.#mark}`, { cache: 'no-store' });
      if (response.ok) this.#apply((await response.json()) as Status);
    } catch {
      // the server is unreachable for a moment: the next poll tries again
    }
    if (!this.#stopped) this.#timer = setTimeout(() => void this.#poll(), POLL_MS);
  }

  #apply(status: Status): void {
    const s = this.#state;
    this.last = status;
    const now = performance.now();
    this.#offset ??= now - status.now;
    // the server's clock runs with ours; a page that slept catches up
    if (Math.abs(now - status.now - this.#offset) > 2000) this.#offset = now - status.now;
    const clientClass = this.#graph?.classes.find((c) => c !== '@self') ?? 'clients';
    s.setState(status.server, !status.started || status.waiting ? 'waiting' : 'aggregating');
    for (const seat of status.seats) {
      if (seat.peer === undefined) continue;
      const mine = seat.peer === this.#me;
      const known = s.peers.get(seat.peer);
      // in the room: what its envelopes last said (training on a global model, or waiting
      // for the next one), else waiting; a seat claimed but not yet in the room is connecting
      const inRoom: PeerState = known !== undefined && (known.state === 'training' || known.state === 'waiting') ? known.state : 'waiting';
      const state: PeerState = seat.state === 'connected' ? inRoom : seat.state === 'reserved' ? 'connecting' : 'away';
      s.upsertPeer(seat.peer, { label: `${mine ? 'you: ' : ''}client ${seat.index + 1}`, index: seat.index, holds: this.digitsOf(seat.index), peerClass: clientClass, place: mine ? 'this page' : 'remote', state });
    }
    for (const [id, peer] of s.peers) {
      if (id !== status.server && !status.seats.some((seat) => seat.peer === id) && peer.state !== 'gone') s.setState(id, 'gone');
    }
    for (const e of status.events) {
      const at = e.at + this.#offset + REPLAY_DELAY_MS;
      const edge = this.#graph?.edges.find((g) => g.name === e.edge);
      const kind = edge !== undefined ? 'data' : e.edge.startsWith('protocol:') ? 'protocol' : 'other';
      const flight = s.send(e.from, e.to, e.bytes, kind, edge, at - FLIGHT_MS);
      flight.endAt = at;
      flight.outcome = 'delivered';
      s.totals.delivered++;
      const receiver = s.peers.get(e.to);
      if (receiver !== undefined) {
        receiver.received++;
        receiver.bytesIn += e.bytes;
      }
      // a global model sent to a client in the room sets it training; its update, waiting again
      if (kind === 'data') {
        const client = e.from === status.server ? e.to : e.from;
        const peer = s.peers.get(client);
        if (peer !== undefined && peer.state !== 'away' && peer.state !== 'gone' && peer.state !== 'connecting') s.setState(client, e.from === status.server ? 'training' : 'waiting');
      }
      this.#seq = Math.max(this.#seq, e.seq);
    }
    for (const r of status.rounds) {
      s.addRound(r);
      this.#round = Math.max(this.#round, r.round);
    }
    for (const p of status.points) {
      // a client that has left since is still named by the seat it had
      if (p.seat !== undefined && !s.peers.has(p.peer)) s.name(p.peer, { label: `client ${p.seat + 1}`, index: p.seat });
      s.addPeerPoint({ peer: p.peer, round: p.round, accuracy: p.accuracy, ...(p.loss === undefined ? {} : { loss: p.loss }) });
      this.#point = Math.max(this.#point, p.id);
    }
    for (const m of status.marks) {
      s.marks.push({ round: m.round, kind: m.kind, text: m.text, ...(m.peer === undefined ? {} : { peer: m.peer }) });
      this.#mark = Math.max(this.#mark, m.id);
    }
    if (status.secureView !== undefined) s.secureView = status.secureView;
    s.info = { ...s.info, note: status.note };
    s.changed();
    this.onStatus?.(status);
  }
}

/** What went wrong, for the visitor: the error's own message, without a stack. */
function plainReason(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}
