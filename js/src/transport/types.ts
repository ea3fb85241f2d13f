import type { Emitter } from './emitter.js';
import type { TransportError } from './errors.js';

/** Where the link to one remote peer stands. */
export type PeerState = 'connecting' | 'open' | 'closed' | 'failed';

/** Events every transport emits. */
export type TransportEvents = {
  /** The link to `peer` changed state. */
  state: [peer: string, state: PeerState];
  /** Something went wrong that the caller did not cause synchronously (a bad chunk, a dropped queue, ...). */
  error: [error: TransportError];
};

/** Counters since the transport started, and what it holds now. */
export interface TransportStats {
  bytesOut: number;
  bytesIn: number;
  messagesOut: number;
  messagesIn: number;
  /** Links now, in any state. */
  links?: number;
  /** Bytes held for incomplete incoming envelopes now. */
  partialBytes?: number;
  /** Incomplete envelopes dropped so far to keep within the bound for all peers. */
  partialsEvicted?: number;
}

/** What the engine glue needs from a transport: envelopes out to a peer id, envelopes in from one. */
export interface Transport {
  /** This peer's id. */
  readonly self: string;
  /** Queues `bytes` for `to`; throws a TransportError (`unknown-peer`, `queue-full`, `closed`) when it cannot. */
  send(to: string, bytes: Uint8Array): void;
  /** Calls `handler` with every complete envelope; returns a function that unsubscribes it. */
  onEnvelope(handler: (from: string, bytes: Uint8Array) => void): () => void;
  readonly events: Emitter<TransportEvents>;
  /** Remote peers currently known (in the room), whatever their link state. */
  peers(): string[];
  stats(): TransportStats;
  close(): void;
}
