/**
 * What the page knows about a running federation, whichever way it runs (peers in Web
 * Workers of this page, or the live federation over WebRTC): the peers and their state,
 * every envelope as it was sent and delivered, the rounds and the scores per round. The
 * views subscribe to it; the runners feed it.
 */
import type { PeerPoint, RoundPoint, SecureView } from '../../shared/rounds.js';
import type { WireArrow } from '../program/model.js';

export type PeerState = 'starting' | 'connecting' | 'waiting' | 'training' | 'sending' | 'aggregating' | 'paused' | 'away' | 'gone';

/** Where a peer runs, as the page tells the visitor. */
export type PeerPlace = 'worker' | 'this page' | 'remote' | 'server process';

export interface Peer {
  readonly id: string;
  label: string;
  /** Client (or gossip peer) number from 0, which gives it its colour; none for a server. */
  index?: number;
  /** The peer class whose partition it runs (its colour). */
  peerClass: string;
  place: PeerPlace;
  /** The digits a client trains on ("0 1 2 3 4 5"), when the page knows them. */
  holds?: string;
  state: PeerState;
  sent: number;
  received: number;
  bytesOut: number;
  bytesIn: number;
  /** Envelopes addressed to it that never arrived (it was gone, or refused them). */
  lost: number;
}

/** data: a value along a wire edge; protocol: a component's own message (gossip views, registry heartbeats). */
export type FlightKind = 'data' | 'protocol' | 'other';

/** One envelope on its way: sent at `sentAt`, delivered (or lost) at `endAt` (performance.now ms). */
export interface Flight {
  readonly id: number;
  readonly from: string;
  readonly to: string;
  readonly bytes: number;
  readonly kind: FlightKind;
  readonly edge?: WireArrow;
  readonly sentAt: number;
  endAt?: number;
  outcome?: 'delivered' | 'lost';
}

export type { PeerPoint, RoundOutcome, RoundPoint } from '../../shared/rounds.js';

/**
 * Something that happened to the federation between two rounds, marked on the curves: a
 * peer paused, resumed, killed, joined or left; the live rounds waiting for a quorum.
 */
export interface Mark {
  /** Where it goes on the round axis: just after the last round reported when it happened. */
  readonly round: number;
  readonly kind: 'pause' | 'resume' | 'kill' | 'join' | 'leave' | 'wait' | 'go';
  /** "client 3 killed" */
  readonly text: string;
  readonly peer?: string;
}

/** What a peer is called, and its client number (its colour), even after it left. */
export interface PeerName {
  readonly label: string;
  readonly index?: number;
}

export interface EdgeCount {
  envelopes: number;
  bytes: number;
}

type Listener = () => void;

const MAX_FLIGHTS = 400;
const MAX_MARKS = 200;

export class FederationState {
  readonly peers = new Map<string, Peer>();
  /** Recent envelopes, oldest first (at most MAX_FLIGHTS kept). */
  readonly flights: Flight[] = [];
  readonly rounds: RoundPoint[] = [];
  readonly peerPoints: PeerPoint[] = [];
  readonly marks: Mark[] = [];
  /** A secure federation's last round as its server saw it (serve.mjs --secure). */
  secureView: SecureView | undefined;
  /** Every peer seen or named in this run, by id (peers that left keep their name). */
  readonly names = new Map<string, PeerName>();
  /** Envelopes and bytes per wire edge id, and per other kind ('protocol', 'other'). */
  readonly edges = new Map<string, EdgeCount>();
  totals = { envelopes: 0, bytes: 0, delivered: 0, lost: 0 };
  /** The federation's settings as the runner reports them: quorum, target, mode. */
  info: { mode: string; quorum?: number; target?: number; deadlineMs?: number; note?: string } = { mode: 'idle' };
  #nextFlight = 1;
  readonly #listeners = new Set<Listener>();
  #scheduled = false;

  /** Calls `listener` (at most once per animation frame) after changes. */
  subscribe(listener: Listener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  changed(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    const run = (): void => {
      this.#scheduled = false;
      for (const listener of [...this.#listeners]) listener();
    };
    if (typeof requestAnimationFrame === 'function' && document.visibilityState === 'visible') requestAnimationFrame(run);
    else setTimeout(run, 100);
  }

  upsertPeer(id: string, init: Omit<Peer, 'id' | 'sent' | 'received' | 'bytesOut' | 'bytesIn' | 'lost'>): Peer {
    let peer = this.peers.get(id);
    if (peer === undefined) {
      peer = { id, ...init, sent: 0, received: 0, bytesOut: 0, bytesIn: 0, lost: 0 };
      this.peers.set(id, peer);
    } else Object.assign(peer, init);
    this.name(id, { label: peer.label.replace(/^you: /, ''), ...(peer.index === undefined ? {} : { index: peer.index }) });
    this.changed();
    return peer;
  }

  /** Remembers what a peer is called (a client the page never saw, known from its seat). */
  name(id: string, name: PeerName): void {
    this.names.set(id, name);
  }

  /** A peer's name for the legend and the round list; "a client that left" for one never named. */
  nameOf(id: string): PeerName {
    const peer = this.peers.get(id);
    if (peer !== undefined) return { label: peer.label, ...(peer.index === undefined ? {} : { index: peer.index }) };
    return this.names.get(id) ?? { label: 'a client that left' };
  }

  /** Marks something that happened now, after the last round reported. */
  mark(kind: Mark['kind'], text: string, peer?: string): void {
    const last = this.rounds.at(-1)?.round ?? 0;
    this.marks.push({ round: last + 0.5, kind, text, ...(peer === undefined ? {} : { peer }) });
    if (this.marks.length > MAX_MARKS) this.marks.splice(0, this.marks.length - MAX_MARKS);
    this.changed();
  }

  setState(id: string, state: PeerState): void {
    const peer = this.peers.get(id);
    if (peer === undefined || peer.state === state) return;
    // a gone or paused peer only leaves that state by being revived or resumed (setState from its runner)
    peer.state = state;
    this.changed();
  }

  /** An envelope left `from` for `to`; returns its flight (deliver or lose it later). */
  send(from: string, to: string, bytes: number, kind: FlightKind, edge?: WireArrow, at = performance.now()): Flight {
    const flight: Flight = { id: this.#nextFlight++, from, to, bytes, kind, ...(edge === undefined ? {} : { edge }), sentAt: at };
    this.flights.push(flight);
    if (this.flights.length > MAX_FLIGHTS) this.flights.splice(0, this.flights.length - MAX_FLIGHTS);
    const sender = this.peers.get(from);
    if (sender !== undefined) {
      sender.sent++;
      sender.bytesOut += bytes;
    }
    const key = edge?.id ?? kind;
    const count = this.edges.get(key) ?? { envelopes: 0, bytes: 0 };
    count.envelopes++;
    count.bytes += bytes;
    this.edges.set(key, count);
    this.totals.envelopes++;
    this.totals.bytes += bytes;
    this.changed();
    return flight;
  }

  /** The flight arrived and the receiving node took it. */
  deliver(flight: Flight, at = performance.now()): void {
    if (flight.outcome !== undefined) return;
    flight.endAt = at;
    flight.outcome = 'delivered';
    const receiver = this.peers.get(flight.to);
    if (receiver !== undefined) {
      receiver.received++;
      receiver.bytesIn += flight.bytes;
    }
    this.totals.delivered++;
    this.changed();
  }

  /** The flight never arrived (the receiver was gone or refused it). */
  lose(flight: Flight, at = performance.now()): void {
    if (flight.outcome !== undefined) return;
    flight.endAt = at;
    flight.outcome = 'lost';
    const receiver = this.peers.get(flight.to);
    if (receiver !== undefined) receiver.lost++;
    this.totals.lost++;
    this.changed();
  }

  addRound(point: RoundPoint): void {
    this.rounds.push(point);
    this.changed();
  }

  addPeerPoint(point: PeerPoint): void {
    this.peerPoints.push(point);
    this.changed();
  }

  /** Forgets everything (the views then draw an empty federation). */
  reset(): void {
    this.peers.clear();
    this.flights.length = 0;
    this.rounds.length = 0;
    this.peerPoints.length = 0;
    this.marks.length = 0;
    this.secureView = undefined;
    this.names.clear();
    this.edges.clear();
    this.totals = { envelopes: 0, bytes: 0, delivered: 0, lost: 0 };
    this.info = { mode: 'idle' };
    this.changed();
  }
}
