// The live federation's server peer, as serve.mjs runs it: federated_digits over the
// WebRTC transport of this process, with the visitors' pages as clients.
//
// The rounds start as soon as `quorum` seated clients are in the room. The server's round
// loop is given its clients when it starts, so when a newcomer takes a seat the loop is
// started again with every seated client (a fresh global model; round numbers go on).
// Each round closes at once with an update from every client, or after its deadline with
// `quorum` of them: a visitor who leaves or reloads does not stop the others.
//
// Everything the server sends and receives is logged (status.json replays it to watching
// pages) and every client update and global model is scored on the test set.
import {
  BbNode,
  FEDERATED_DIGITS_SERVER_TARGETS,
  decodeEnvelope,
  decodeValue,
  inspectArtifact,
  runPeer,
  startDigitsServer,
} from 'bytesandbrains';

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
  #bb;
  #artifact;
  #test;
  #seats;
  #quorum;
  #deadlineMs;
  #transport;
  #log;
  #now;
  /** @type {Map<bigint, string>} site id → the wire edge's name */
  #edgeOfSite = new Map();
  #score;
  /** @type {import('bytesandbrains').RunningPeer | undefined} */
  #running;
  /** @type {string[]} */
  #members = [];
  /** @type {WireEvent[]} */
  #events = [];
  #seq = 0;
  /** @type {RoundPoint[]} */
  #rounds = [];
  /** @type {(PeerPoint & { id: number })[]} */
  #points = [];
  #pointSeq = 0;
  /** Rounds before the loop's latest start: round numbers go on across restarts. */
  #roundBase = 0;
  #starts = 0;
  #note = '';
  /** @type {Map<string, { sent: number, received: number }>} envelopes to and from each client */
  #traffic = new Map();

  /**
   * @param {{
   *   bb: import('bytesandbrains').Bb, artifact: Uint8Array, test: import('bytesandbrains').Dataset,
   *   seats: import('./seats.mjs').SeatBook, quorum: number, deadlineMs: number,
   *   transport: import('bytesandbrains/transport').Transport, log?: (line: string) => void, now?: () => number,
   * }} options
   */
  constructor({ bb, artifact, test, seats, quorum, deadlineMs, transport, log = console.log, now = () => performance.now() }) {
    this.#bb = bb;
    this.#artifact = artifact;
    this.#test = test;
    this.#seats = seats;
    this.#quorum = quorum;
    this.#deadlineMs = deadlineMs;
    this.#transport = transport;
    this.#log = log;
    this.#now = now;
    const inspection = inspectArtifact(artifact);
    for (const [site, recv] of inspection.recvSites) this.#edgeOfSite.set(site, recv.value.replace(/__recv_\d+$/, ''));
    const x = test.features();
    const y = test.labels();
    this.#score = scorer(mlpShapeFromConfig(inspection.configs.get('model') ?? ''), { x: /** @type {Float32Array} */ (x.data), y: /** @type {Float32Array} */ (y.data) });
  }

  get serverId() {
    return this.#transport.self;
  }

  /** Seats follow who is in the room; the rounds start (again) when the clients call for it. */
  tick() {
    const released = this.#seats.present(new Set(this.#transport.peers()), Date.now());
    for (const peer of released) this.#log(`web-demo: seat of ${peer} given back (it left)`);
    const connected = this.#seats.connected();
    if (this.#running === undefined) {
      if (connected.length >= this.#quorum) this.#start(connected);
      return;
    }
    if (connected.some((peer) => !this.#members.includes(peer))) {
      const seated = this.#members.filter((peer) => this.#seats.indexOf(peer) !== undefined && !connected.includes(peer));
      this.#start([...connected, ...seated]);
    }
  }

  /** @param {string[]} members */
  #start(members) {
    const restart = this.#running !== undefined;
    if (this.#running !== undefined) {
      this.#running.stop();
      this.#running.node.free();
      // the new loop counts from round 0 again: its rounds follow the last one shown
      const last = this.#rounds.at(-1);
      if (last !== undefined) this.#roundBase = last.round + 1;
    }
    this.#members = members;
    this.#starts++;
    const quorum = Math.max(1, Math.min(this.#quorum, members.length));
    const node = BbNode.install(this.#bb, {
      artifact: this.#artifact,
      self: this.serverId,
      targets: FEDERATED_DIGITS_SERVER_TARGETS,
      slots: {
        data: { dataset: this.#test },
        aggregator: { config: `quorum=${quorum},target=${members.length},deadline_ms=${this.#deadlineMs},no_quorum=abandon,init=model` },
      },
      seed: 1,
    });
    for (const peer of members) node.addPeer(peer);
    const base = this.#roundBase;
    const rounds = new FedRounds(this.#score, {
      onRound: (point) => {
        const shown = { ...point, round: base + point.round };
        this.#rounds.push(shown);
        if (this.#rounds.length > MAX_ROUNDS) this.#rounds.splice(0, this.#rounds.length - MAX_ROUNDS);
        this.#log(`web-demo: round ${shown.round}, held-out accuracy ${(shown.accuracy * 100).toFixed(1)} %`);
      },
      onPeerPoint: (point) => {
        this.#points.push({ ...point, round: base + point.round, id: ++this.#pointSeq });
        if (this.#points.length > MAX_POINTS) this.#points.splice(0, this.#points.length - MAX_POINTS);
      },
    });
    this.#running = runPeer(node, this.#observed(rounds), {
      onStep: (step) => {
        if (step.kind === 'appEvent' && step.topic !== undefined) rounds.event(step.topic, step.value);
      },
    });
    startDigitsServer(node, members, this.#test, this.#running.driver.now());
    this.#running.driver.wake();
    this.#note = restart
      ? `round ${base}: a new client took a seat, so the rounds started again with ${members.length} clients and a fresh model`
      : `the rounds started with ${members.length} client${members.length === 1 ? '' : 's'}`;
    this.#log(`web-demo: ${this.#note}`);
  }

  /**
   * The transport as the server's node uses it, logging each envelope and scoring updates.
   * @param {FedRounds} rounds
   * @returns {import('bytesandbrains/transport').Transport}
   */
  #observed(rounds) {
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
        this.#record(self, to, bytes, undefined);
      },
      onEnvelope: (handler) =>
        t.onEnvelope((from, bytes) => {
          this.#record(from, self, bytes, rounds);
          handler(from, bytes);
        }),
    };
  }

  /**
   * @param {string} from
   * @param {string} to
   * @param {Uint8Array} bytes
   * @param {FedRounds | undefined} rounds given for envelopes that reached the server
   */
  #record(from, to, bytes, rounds) {
    let edge = 'other';
    try {
      for (const fill of decodeEnvelope(bytes).fills) {
        const name = fill.site === undefined ? undefined : this.#edgeOfSite.get(fill.site);
        if (name === undefined) continue;
        edge = name;
        if (rounds !== undefined && fill.typeHash !== 0n) rounds.update(from, decodeValue(fill.typeHash, fill.payload));
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
      started: this.#running !== undefined,
      members: this.#members,
      starts: this.#starts,
      note: this.#note,
      seats,
      now: Math.round(this.#now()),
      seq: this.#seq,
      rounds: this.#rounds.filter((r) => r.round > afterRound),
      points: this.#points.filter((p) => p.id > afterPoint),
      events: this.#events.filter((e) => e.seq > afterEvent).slice(-300),
    };
  }

  stop() {
    this.#running?.stop();
    this.#running?.node.free();
    this.#running = undefined;
  }
}
