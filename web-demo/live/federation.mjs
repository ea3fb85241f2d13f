// The live federation's server peer, as serve.mjs runs it: the live plan (federated
// averaging with registry discovery, shared/live-plan.js) over the WebRTC transport of
// this process, with the visitors' pages as clients.
//
// The rounds run while `quorum` seated clients are in the room: they start when the
// quorum first is, wait (the server's engine is not polled) whenever the room holds fewer,
// and go on when it holds enough again — an empty room runs no rounds. Each round goes to
// the clients registered at that moment, so a newcomer's announce makes it a member of the
// next round, and a visitor who leaves drops out when its registration lapses. A round
// closes at once with an update from every seat, or after its deadline with `quorum` of
// them; below that it is abandoned and the model stays.
//
// Everything the server sends and receives is logged (status.json replays it to watching
// pages), every client update and global model is scored on the test set, and what happens
// between rounds (a visitor comes or goes, the rounds wait or go on) is marked.
import { admitRoomMembers, runPeer } from 'bytesandbrains';
import { decodeEnvelope, decodeValue, ENVELOPE_SCHEMA_VERSION, inspectArtifact } from 'bytesandbrains/internals';

import { mlpShapeFromConfig } from '../shared/mlp.js';
import { FedRounds, roundCounters, scorer } from '../shared/rounds.js';
import { maskedSample, sampleIndices, secaggMessage, setupModulusBits } from '../shared/secure-view.js';

/** Envelopes remembered for watching pages. */
const MAX_EVENTS = 600;
/** Rounds and per-client points kept for status.json. */
const MAX_ROUNDS = 500;
const MAX_POINTS = 4000;
const MAX_MARKS = 200;

/**
 * @typedef {{ seq: number, at: number, from: string, to: string, bytes: number, edge: string }} WireEvent
 * @typedef {import('../shared/rounds.js').RoundPoint} RoundPoint
 * @typedef {import('../shared/rounds.js').PeerPoint} PeerPoint
 * @typedef {{ id: number, round: number, kind: 'join' | 'leave' | 'wait' | 'go', text: string, peer?: string }} LiveMark
 */

export class LiveFederation {
  #server;
  #seats;
  #quorum;
  /** @type {Map<number, number | null>} ε after each round (differential privacy), by round */
  #epsilonOf = new Map();
  /** @type {Map<number, import('../shared/rounds.js').SecureRound>} what the server saw of each round (secure aggregation), by round */
  #secureOf = new Map();
  /** The ring's modulus bits, as the server's last SecAgg+ setup named them. */
  #modulusBits = 0;
  /** @type {Map<number, { from: string, masked: number[] }>} one client's masked vector (sampled) of each FedAvg round, as the server got it */
  #maskedOf = new Map();
  /** @type {import('../shared/rounds.js').SecureView | undefined} the last secure round: one masked vector the server got beside the model step the sum gave */
  #secureView;
  /** @type {Float32Array | undefined} the global model of the last round reported */
  #lastGlobal;
  /** The server's count of secure rounds aborted, as of the last round's report. */
  #abortedBefore = 0;
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
  /** @type {(PeerPoint & { id: number, seat?: number })[]} */
  #points = [];
  #pointSeq = 0;
  /** @type {LiveMark[]} */
  #marks = [];
  #markSeq = 0;
  /** The last round reported (where marks go on the round axis). */
  #lastRound = 0;
  /** @type {Map<number, string>} seat index → the state it was in at the last tick, with its peer */
  #seatWas = new Map();
  #note = '';
  /** @type {Map<string, { sent: number, received: number }>} envelopes to and from each client */
  #traffic = new Map();

  /**
   * @param {{
   *   plan: import('bytesandbrains').Plan, bb: import('bytesandbrains').Bb, artifact: Uint8Array,
   *   test: import('bytesandbrains').Dataset, seats: import('./seats.mjs').SeatBook, quorum: number,
   *   deadlineMs: number, transport: import('bytesandbrains/transport').Transport,
   *   signal: import('bytesandbrains/signal').SignalClient, admission: import('bytesandbrains').NodeAdmission,
   *   log?: (line: string) => void, now?: () => number,
   * }} options
   */
  constructor({ plan, bb, artifact, test, seats, quorum, deadlineMs, transport, signal, admission, log = console.log, now = () => performance.now() }) {
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
        this.#lastRound = point.round;
        this.#roundLog.push(point);
        if (this.#roundLog.length > MAX_ROUNDS) this.#roundLog.splice(0, this.#roundLog.length - MAX_ROUNDS);
        if (point.round % 10 === 0) this.#log(`web-demo: round ${point.round}, held-out accuracy ${(point.accuracy * 100).toFixed(1)} %`);
      },
      onPeerPoint: (point) => {
        const seat = this.#seats.indexOf(point.peer);
        this.#points.push({ ...point, id: ++this.#pointSeq, ...(seat === undefined ? {} : { seat }) });
        if (this.#points.length > MAX_POINTS) this.#points.splice(0, this.#points.length - MAX_POINTS);
      },
    });
    // the server runs from now on (its registry hears announces); its rounds start at the quorum
    this.#server = plan.installServer(bb, { artifact, self: transport.self, test, seed: 1, admission });
    // with differential privacy each round's report says what it spent (JSON has no Infinity: null)
    this.#server.onRound((report) => {
      if (report.epsilon !== undefined) this.#epsilonOf.set(report.round, Number.isFinite(report.epsilon) ? report.epsilon : null);
      // with secure aggregation: how many masked updates the round's sum held, and how many
      // secure rounds aborted since the last report (the aggregator's own counts)
      if (report.secure !== undefined) this.#secureView = this.#view(report.round);
      if (report.secure !== undefined && report.round > 0) {
        const aborted = Number(this.#server.node.counter('fedavg.secagg_aborted'));
        this.#secureOf.set(report.round, { summed: report.secure.summed, aborted: aborted - this.#abortedBefore });
        this.#abortedBefore = aborted;
        // kept as long as the rounds they describe (Maps iterate oldest first)
        for (const round of this.#secureOf.keys()) {
          if (this.#secureOf.size <= MAX_ROUNDS) break;
          this.#secureOf.delete(round);
        }
      }
    });
    // the room admits by token: the server checks each member's token itself
    admitRoomMembers(this.#server.node, signal);
    this.#running = runPeer(this.#server.node, this.#observed(), {
      onStep: (step) => {
        // the counters after the poll say whether the aggregator closed or abandoned a round
        if (step.kind === 'appEvent' && step.topic !== undefined) this.#rounds.event(step.topic, step.value, step.topic === 'round' ? roundCounters(this.#server.node) : undefined);
      },
    });
  }

  /**
   * A secure round as the server saw it: one client's masked vector for the round (a model
   * of round r comes from FedAvg round r − 1) beside the step from the previous model to
   * this one, which the unmasked sum gave; both at the same sampled parameters.
   * @param {number} round
   * @returns {import('../shared/rounds.js').SecureView | undefined}
   */
  #view(round) {
    const global = this.#server.parameters();
    const previous = this.#lastGlobal;
    this.#lastGlobal = global === undefined ? undefined : Float32Array.from(global);
    const masked = this.#maskedOf.get(round - 1);
    for (const kept of this.#maskedOf.keys()) if (kept < round) this.#maskedOf.delete(kept);
    if (masked === undefined || global === undefined || previous === undefined || previous.length !== global.length) return this.#secureView;
    const step = sampleIndices(global.length).map((i) => Number((global[i] - previous[i]).toPrecision(4)));
    if (step.length !== masked.masked.length) return this.#secureView;
    return { round, from: masked.from, masked: masked.masked, step };
  }

  /**
   * SecAgg+ messages the server's node gets or sends: the setup's modulus and the first
   * masked vector of each round (what the page draws).
   * @param {string} from
   * @param {string} op
   * @param {Uint8Array} payload
   */
  #secagg(from, op, payload) {
    const message = secaggMessage(payload);
    if (message === undefined) return;
    if (op === 'SecAggServer' && from === this.serverId) this.#modulusBits = setupModulusBits(message) ?? this.#modulusBits;
    if (op !== 'SecAggClient' || from === this.serverId || this.#modulusBits === 0 || this.#maskedOf.has(message.round)) return;
    // only the round open now (a model of round r opens FedAvg round r) or next to it: a
    // client that names other rounds cannot make this keep more than three vectors
    if (Math.abs(message.round - this.#lastRound) > 1) return;
    const masked = maskedSample(message, this.#modulusBits);
    if (masked !== undefined) this.#maskedOf.set(message.round, { from, masked });
  }

  get serverId() {
    return this.#transport.self;
  }

  /** Seats follow who is in the room; the rounds run while the quorum is in. */
  tick() {
    const released = this.#seats.present(new Set(this.#transport.peers()), Date.now());
    for (const peer of released) this.#log(`web-demo: the seat of ${peer} is free again (it left)`);
    this.#markSeats();
    const connected = this.#seats.connected().length;
    const driver = this.#running.driver;
    const needed = `${this.#quorum} client${this.#quorum === 1 ? '' : 's'}`;
    if (!this.#started) {
      this.#note = `the rounds start once ${needed} ${this.#quorum === 1 ? 'is' : 'are'} in the room (${connected} now)`;
      if (connected < this.#quorum) return;
      this.#started = true;
      this.#server.start([], driver.now());
      driver.wake();
      this.#note = `the rounds started when ${connected} client${connected === 1 ? ' was' : 's were'} in; each round goes to the clients registered then`;
      this.#log(`web-demo: ${this.#note}`);
    } else if (connected < this.#quorum && driver.running) {
      driver.stop();
      this.#note = `the rounds wait: ${connected} of the ${needed} a round needs ${connected === 1 ? 'is' : 'are'} in the room`;
      this.#mark('wait', `rounds wait for ${needed} in the room`);
      this.#log(`web-demo: ${this.#note}`);
    } else if (connected >= this.#quorum && !driver.running) {
      driver.start();
      this.#note = `the rounds go on: ${connected} client${connected === 1 ? ' is' : 's are'} in the room`;
      this.#mark('go', 'rounds go on');
      this.#log(`web-demo: ${this.#note}`);
    }
  }

  /** Whether the rounds wait for a quorum in the room. */
  get waiting() {
    return !this.#started || !this.#running.driver.running;
  }

  /** Marks each visitor who came into the room or left it since the last tick. */
  #markSeats() {
    for (const seat of this.#seats.snapshot()) {
      const now = seat.peer === undefined ? 'free' : `${seat.state === 'connected' ? 'in' : 'out'} ${seat.peer}`;
      const was = this.#seatWas.get(seat.index) ?? 'free';
      this.#seatWas.set(seat.index, now);
      if (now === was || seat.peer === undefined) continue;
      if (now.startsWith('in ')) this.#mark('join', `client ${seat.index + 1} came in`, seat.peer);
      else if (was.startsWith('in ')) this.#mark('leave', `client ${seat.index + 1} left`, seat.peer);
    }
  }

  /**
   * @param {LiveMark['kind']} kind
   * @param {string} text
   * @param {string} [peer]
   */
  #mark(kind, text, peer) {
    // before the first round a mark goes before round 0, the starting model
    const round = this.#roundLog.length === 0 ? -0.5 : this.#lastRound + 0.5;
    this.#marks.push({ id: ++this.#markSeq, round, kind, text, ...(peer === undefined ? {} : { peer }) });
    if (this.#marks.length > MAX_MARKS) this.#marks.splice(0, this.#marks.length - MAX_MARKS);
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
          if (fill.op.startsWith('SecAgg')) this.#secagg(from, fill.op, fill.payload);
          continue;
        }
        // sites name wires only from schema 2 on; an older envelope's are positions the server refuses
        const name = fill.site === undefined || envelope.schemaVersion !== ENVELOPE_SCHEMA_VERSION ? undefined : this.#wireOfId.get(fill.site);
        if (name === undefined) continue;
        edge = name;
        if (fill.typeHash === 0n) continue;
        // what the server takes is handed to its node right after this (#observed)
        if (to === this.serverId) this.#rounds.update(from, decodeValue(fill.typeHash, fill.payload));
        else this.#rounds.sent(to, decodeValue(fill.typeHash, fill.payload));
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
   * @param {{ events?: number, round?: number, points?: number, marks?: number }} [since]
   */
  status(since = {}) {
    const afterEvent = since.events ?? 0;
    const afterRound = since.round ?? -1;
    const afterPoint = since.points ?? 0;
    const afterMark = since.marks ?? 0;
    const seats = this.#seats.snapshot().map((seat) => ({ ...seat, ...(seat.peer === undefined ? {} : (this.#traffic.get(seat.peer) ?? { sent: 0, received: 0 })) }));
    return {
      clients: this.#seats.size,
      quorum: this.#quorum,
      deadlineMs: this.#deadlineMs,
      server: this.serverId,
      joined: this.#seats.connected().length,
      started: this.#started,
      waiting: this.waiting,
      note: this.#note,
      seats,
      now: Math.round(this.#now()),
      seq: this.#seq,
      rounds: this.#roundLog.filter((r) => r.round > afterRound).map((r) => ({
        ...r,
        ...(this.#epsilonOf.has(r.round) ? { epsilon: this.#epsilonOf.get(r.round) } : {}),
        ...(this.#secureOf.has(r.round) ? { secure: this.#secureOf.get(r.round) } : {}),
      })),
      // the last secure round's drawing, to pages that do not have it yet
      ...(this.#secureView !== undefined && this.#secureView.round > afterRound ? { secureView: this.#secureView } : {}),
      points: this.#points.filter((p) => p.id > afterPoint),
      marks: this.#marks.filter((m) => m.id > afterMark),
      events: this.#events.filter((e) => e.seq > afterEvent).slice(-300),
    };
  }

  stop() {
    this.#running.stop();
    this.#server.node.free();
  }
}
