/**
 * What the page knows about a running federation, whichever way it runs (peers in Web
 * Workers of this page, or the live federation over WebRTC): the peers and their state,
 * every envelope as it was sent and delivered, the rounds and the scores per round. The
 * views subscribe to it; the runners feed it.
 */
import type { WireArrow } from '../program/model.js';

export type PeerState = 'starting' | 'connecting' | 'waiting' | 'training' | 'sending' | 'aggregating' | 'paused' | 'gone';

/** Where a peer runs, as the page tells the visitor. */
export type PeerPlace = 'worker' | 'this page' | 'remote' | 'server process';

export interface Peer {
  readonly id: string;
  label: string;
  /** The peer class whose partition it runs (its colour). */
  peerClass: string;
  place: PeerPlace;
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

/** A round the server closed: the global model's scores, and who contributed. */
export interface RoundPoint {
  readonly round: number;
  readonly at: number;
  readonly accuracy: number;
  readonly loss?: number;
  /** Updates for this round the server received. */
  readonly contributors: readonly string[];
}

/** One peer's model scored at a round (a client's update, a gossip peer's model). */
export interface PeerPoint {
  readonly peer: string;
  readonly round: number;
  readonly accuracy: number;
  readonly loss?: number;
}

export interface EdgeCount {
  envelopes: number;
  bytes: number;
}

type Listener = () => void;

const MAX_FLIGHTS = 400;

export class FederationState {
  readonly peers = new Map<string, Peer>();
  /** Recent envelopes, oldest first (at most MAX_FLIGHTS kept). */
  readonly flights: Flight[] = [];
  readonly rounds: RoundPoint[] = [];
  readonly peerPoints: PeerPoint[] = [];
  /** Envelopes and bytes per wire edge id, and per other kind ('protocol', 'other'). */
  readonly edges = new Map<string, EdgeCount>();
  totals = { envelopes: 0, bytes: 0, delivered: 0, lost: 0 };
  /** The federation's settings as the runner reports them: quorum, target, mode. */
  info: { mode: string; quorum?: number; target?: number; note?: string } = { mode: 'idle' };
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
    this.changed();
    return peer;
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
    this.edges.clear();
    this.totals = { envelopes: 0, bytes: 0, delivered: 0, lost: 0 };
    this.info = { mode: 'idle' };
    this.changed();
  }
}
