// The live federation's server peer, as serve.mjs runs it: the live plan (federated
// averaging with registry discovery, shared/live-plan.js) over the WebRTC transport of
// this process, with the visitors' pages as clients.
//
// The rounds start once `quorum` seated clients are in the room, and then never stop:
// each round goes to the clients registered at that moment, so a newcomer's announce makes
// it a member of the next round, and a visitor who leaves drops out when its registration
// lapses. A round closes at once with an update from every seat, or after its deadline
// with `quorum` of them.
//
// Everything the server sends and receives is logged (status.json replays it to watching
// pages), and every client update and global model is scored on the test set.
import { decodeEnvelope, decodeValue, ENVELOPE_SCHEMA_VERSION, inspectArtifact, runPeer } from 'bytesandbrains';

import { mlpShapeFromConfig } from '../shared/mlp.js';
import { FedRounds, scorer } from '../shared/rounds.js';

/** Envelopes remembered for watching pages. */
const MAX_EVENTS = 600;
/** Rounds and per-client points kept for status.json. */
const MAX_ROUNDS = 500;
const MAX_POINTS = 4000;

/**
 * @typedef {{ seq: number, at: number, from: string, to: string, bytes: number, edge: string }} WireEvent
 * @typedef {import('../shared/rounds.js').RoundPoint} RoundPoint
 * @typedef {import('../shared/rounds.js').PeerPoint} PeerPoint
 */

export class LiveFederation {
  #server;
  #seats;
  #quorum;
  #deadlineMs;
  #transport;
  #log;
  #now;
  /** @type {Map<bigint, string>} wire id → the wire's name (what the page calls the edge) */
  #wireOfId = new Map();
  #rounds;
  #running;
  #started = false;
  /** @type {WireEvent[]} */
  #events = [];
  #seq = 0;
  /** @type {RoundPoint[]} */
  #roundLog = [];
  /** @type {(PeerPoint & { id: number })[]} */
  #points = [];
  #pointSeq = 0;
  #note = '';
  /** @type {Map<string, { sent: number, received: number }>} envelopes to and from each client */
  #traffic = new Map();

  /**
   * @param {{
   *   plan: import('bytesandbrains').Plan, bb: import('bytesandbrains').Bb, artifact: Uint8Array,
   *   test: import('bytesandbrains').Dataset, seats: import('./seats.mjs').SeatBook, quorum: number,
   *   deadlineMs: number, transport: import('bytesandbrains/transport').Transport,
   *   log?: (line: string) => void, now?: () => number,
   * }} options
   */
  constructor({ plan, bb, artifact, test, seats, quorum, deadlineMs, transport, log = console.log, now = () => performance.now() }) {
    this.#seats = seats;
    this.#quorum = quorum;
    this.#deadlineMs = deadlineMs;
    this.#transport = transport;
    this.#log = log;
    this.#now = now;
    const inspection = inspectArtifact(artifact);
    for (const [id, wire] of inspection.wires) this.#wireOfId.set(id, wire.name);
    const x = test.features();
    const y = test.labels();
    const score = scorer(mlpShapeFromConfig(inspection.configs.get('model') ?? ''), { x: /** @type {Float32Array} */ (x.data), y: /** @type {Float32Array} */ (y.data) });
    this.#rounds = new FedRounds(score, {
      onRound: (point) => {
        this.#roundLog.push(point);
        if (this.#roundLog.length > MAX_ROUNDS) this.#roundLog.splice(0, this.#roundLog.length - MAX_ROUNDS);
        if (point.round % 10 === 0) this.#log(`web-demo: round ${point.round}, held-out accuracy ${(point.accuracy * 100).toFixed(1)} %`);
      },
      onPeerPoint: (point) => {
        this.#points.push({ ...point, id: ++this.#pointSeq });
        if (this.#points.length > MAX_POINTS) this.#points.splice(0, this.#points.length - MAX_POINTS);
      },
    });
    // the server runs from now on (its registry hears announces); its rounds start at the quorum
    this.#server = plan.installServer(bb, { artifact, self: transport.self, test, seed: 1 });
    this.#running = runPeer(this.#server.node, this.#observed(), {
      onStep: (step) => {
        if (step.kind === 'appEvent' && step.topic !== undefined) this.#rounds.event(step.topic, step.value);
      },
    });
  }

  get serverId() {
    return this.#transport.self;
  }

  /** Seats follow who is in the room; the rounds start once the quorum is in. */
  tick() {
    const released = this.#seats.present(new Set(this.#transport.peers()), Date.now());
    for (const peer of released) this.#log(`web-demo: the seat of ${peer} is free again (it left)`);
    const connected = this.#seats.connected().length;
    if (this.#started || connected < this.#quorum) return;
    this.#started = true;
    this.#server.start([], this.#running.driver.now());
    this.#running.driver.wake();
    this.#note = `the rounds started when ${connected} client${connected === 1 ? ' was' : 's were'} in; each round goes to the clients registered then`;
    this.#log(`web-demo: ${this.#note}`);
  }

  /**
   * The transport as the server's node uses it, logging each envelope and scoring updates.
   * @returns {import('bytesandbrains/transport').Transport}
   */
  #observed() {
    const t = this.#transport;
    const self = t.self;
    return {
      self,
      events: t.events,
      peers: () => t.peers(),
      stats: () => t.stats(),
      close: () => t.close(),
      send: (to, bytes) => {
        t.send(to, bytes);
        this.#record(self, to, bytes);
      },
      onEnvelope: (handler) =>
        t.onEnvelope((from, bytes) => {
          this.#record(from, self, bytes);
          handler(from, bytes);
        }),
    };
  }

  /**
   * @param {string} from
   * @param {string} to
   * @param {Uint8Array} bytes
   */
  #record(from, to, bytes) {
    let edge = 'other';
    try {
      const envelope = decodeEnvelope(bytes);
      for (const fill of envelope.fills) {
        if (fill.op !== undefined) {
          edge = `protocol:${fill.op}`;
          continue;
        }
        // sites name wires only from schema 2 on; an older envelope's are positions the server refuses
        const name = fill.site === undefined || envelope.schemaVersion !== ENVELOPE_SCHEMA_VERSION ? undefined : this.#wireOfId.get(fill.site);
        if (name === undefined) continue;
        edge = name;
        if (to === this.serverId && fill.typeHash !== 0n) this.#rounds.update(from, decodeValue(fill.typeHash, fill.payload));
      }
    } catch {
      edge = 'unreadable'; // the node refuses it and says why; the log only counts it
    }
    const client = from === this.serverId ? to : from;
    const traffic = this.#traffic.get(client) ?? { sent: 0, received: 0 };
    if (from === this.serverId) traffic.received++;
    else traffic.sent++;
    this.#traffic.set(client, traffic);
    this.#events.push({ seq: ++this.#seq, at: Math.round(this.#now()), from, to, bytes: bytes.length, edge });
    if (this.#events.length > MAX_EVENTS) this.#events.splice(0, this.#events.length - MAX_EVENTS);
  }

  /**
   * What status.json reports; `since` asks only for the envelopes, rounds and points after
   * those a page already has (by event number, round number and point number).
   * @param {{ events?: number, round?: number, points?: number }} [since]
   */
  status(since = {}) {
    const afterEvent = since.events ?? 0;
    const afterRound = since.round ?? -1;
    const afterPoint = since.points ?? 0;
    const seats = this.#seats.snapshot().map((seat) => ({ ...seat, ...(seat.peer === undefined ? {} : (this.#traffic.get(seat.peer) ?? { sent: 0, received: 0 })) }));
    return {
      clients: this.#seats.size,
      quorum: this.#quorum,
      deadlineMs: this.#deadlineMs,
      server: this.serverId,
      joined: this.#seats.connected().length,
      started: this.#started,
      note: this.#note,
      seats,
      now: Math.round(this.#now()),
      seq: this.#seq,
      rounds: this.#roundLog.filter((r) => r.round > afterRound),
      points: this.#points.filter((p) => p.id > afterPoint),
      events: this.#events.filter((e) => e.seq > afterEvent).slice(-300),
    };
  }

  stop() {
    this.#running.stop();
    this.#server.node.free();
  }
}
