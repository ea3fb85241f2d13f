/**
 * Messages between the page and a peer running in a Web Worker. The page is the network:
 * every envelope a worker's node sends comes to the page, which shows it and hands it to
 * the addressed worker (after the link latency the visitor chose).
 */
import type { StepKind, Value } from 'bytesandbrains';

import type { RoundCounters } from '../../shared/rounds.js';

/** Which program a worker runs, and as what. */
/** split-server and split-client: the in-page split learning (SplitFed of the digits CNN). */
export type PeerRole = 'server' | 'client' | 'gossip' | 'split-server' | 'split-client';

export interface InitMessage {
  readonly type: 'init';
  /** bb.wasm, compiled once by the page. */
  readonly module: WebAssembly.Module;
  readonly artifact: Uint8Array;
  readonly role: PeerRole;
  readonly self: string;
  /** Clients: the server's id. */
  readonly server?: string;
  /** Every peer of the federation (gossip: the others are its first view). */
  readonly peers: readonly string[];
  /** The rows of the digits this peer trains on (none for a server). */
  readonly rows: readonly number[];
  /** The held-out rows (the server and gossip peers score on them). */
  readonly test: readonly number[];
  /** The digits CSV. */
  readonly csv: Uint8Array;
  readonly seed: number;
  /** Split learning: the ONNX model every side is given whole, and how many clients the plan has. */
  readonly split?: { readonly model: Uint8Array; readonly clients: number };
}

export type ToWorker =
  | InitMessage
  /** Server: start the rounds for these clients (a split client: start its steps). */
  | { readonly type: 'start'; readonly clients: readonly string[] }
  | { readonly type: 'deliver'; readonly from: string; readonly bytes: Uint8Array; readonly flight: number }
  | { readonly type: 'pause' }
  | { readonly type: 'resume' };

export type FromWorker =
  | { readonly type: 'ready' }
  | { readonly type: 'send'; readonly to: string; readonly bytes: Uint8Array }
  /** The node took the envelope (`ok`) or refused it (`error`). */
  | { readonly type: 'delivered'; readonly flight: number; readonly ok: boolean; readonly error?: string }
  /** An output of the program (round, accuracy, model); "round" comes with the aggregator's counters. */
  | { readonly type: 'event'; readonly topic: string; readonly value: Value; readonly counters?: RoundCounters }
  /** A step that reports a failure (opFailed, wireReceiveFailed, ...). */
  | { readonly type: 'failure'; readonly kind: StepKind; readonly reason?: string; readonly detail?: string }
  | { readonly type: 'error'; readonly message: string };
