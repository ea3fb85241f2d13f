// Turns what a federation's traffic and events say into rounds and scores: the page runs
// it on the envelopes of its in-page peers, serve.mjs on its server peer's. Plain
// JavaScript with JSDoc types, for both.
//
// Federated averaging: the server's global model travels as the bundle [model, round] to
// the round's members, and a client's update comes back as [trained model, samples,
// round]. The server's round loop reports "round" (the id of the round it opens), "model"
// and "accuracy" whenever its aggregator gives a model: the starting model, the average of
// a round that closed, or — for a round abandoned at its deadline without a quorum — the
// previous model again, unchanged. A round's report says which of these it was (the
// aggregator's counters tell, or else whether the model changed), which clients it was
// sent to and whose updates the server took before it ended; updates for rounds that had
// already ended are counted as late. Every update is scored (the client's own point).
// Gossip: every peer reports "accuracy" each period (its round), and the models peers
// share are scored for their loss.
import { scoreMlp } from './mlp.js';

/** @typedef {import('./mlp.js').MlpShape} MlpShape */
/**
 * start: the model the rounds start from; closed: the average of the updates the round
 * took; abandoned: the round ended at its deadline below its quorum and the model stayed.
 * @typedef {'start' | 'closed' | 'abandoned'} RoundOutcome
 */
/**
 * @typedef {object} RoundPoint
 * @property {number} round federated: the global model's number, the rounds done (0: the
 *   starting model); gossip: the period
 * @property {number} at
 * @property {number} accuracy
 * @property {number} [loss]
 * @property {string[]} contributors federated: the clients whose updates for the round the
 *   server took before it ended; gossip: the peers that reported
 * @property {RoundOutcome} [outcome] federated only
 * @property {string[]} [members] federated: the clients the round's global model was sent to
 * @property {number} [late] federated: updates for rounds that had already ended, taken
 *   while this one was open: those the aggregator dropped as late, by its own count
 * @property {boolean} [unchanged] federated: the global model is the previous one, bit for bit
 * @property {number | null} [epsilon] federated with differential privacy: the privacy spent
 *   up to this round, ε at the plan's δ (null: infinite, clipping without noise)
 * @property {SecureRound} [secure] federated with secure aggregation: what the server saw
 */
/**
 * What the server of a secure federation (SecAgg+) saw of a round: only the sum of `summed`
 * masked updates (0: no sum, the round was abandoned), and `aborted` secure rounds since the
 * previous round's report (fedavg.secagg_aborted). It never sees which clients' updates
 * the sum holds, nor any one of them.
 * @typedef {{ summed: number, aborted: number }} SecureRound
 */
/**
 * The last secure round as the server saw it: `masked`, one client's (`from`) masked vector
 * for the round, each ring element over the modulus (uniform in [0, 1) to whoever holds no
 * mask); `step`, the global model's change the round's unmasked sum gave; both at the same
 * sampled parameters (shared/secure-view.js).
 * @typedef {{ round: number, from: string, masked: number[], step: number[] }} SecureView
 */
/**
 * A federated client's update, scored; `round` is the global model it went into (its
 * round tag + 1), so a client's point and the model of that round share the x axis.
 * @typedef {{ peer: string, round: number, accuracy: number, loss?: number }} PeerPoint
 */
/**
 * The aggregator's own count of the rounds it closed and abandoned and of the late updates
 * it dropped (node counters fedavg.rounds_closed, fedavg.rounds_abandoned,
 * fedavg.late_dropped; robustavg.* for RobustAvg), read when the round's report comes.
 * @typedef {{ closed: number, abandoned: number, lateDropped: number }} RoundCounters
 */
/** @typedef {{ x: Float32Array, y: Float32Array }} TestSet */
/** @typedef {{ onRound?: (point: RoundPoint) => void, onPeerPoint?: (point: PeerPoint) => void }} RoundSinks */

/** The counters FedAvg and RobustAvg keep of their rounds. */
const AGGREGATORS = ['fedavg', 'robustavg'];

/**
 * Reads a server node's round counters.
 * @param {{ counter(name: string): bigint }} node
 * @returns {RoundCounters}
 */
export function roundCounters(node) {
  let closed = 0;
  let abandoned = 0;
  let lateDropped = 0;
  for (const prefix of AGGREGATORS) {
    closed += Number(node.counter(`${prefix}.rounds_closed`));
    abandoned += Number(node.counter(`${prefix}.rounds_abandoned`));
    lateDropped += Number(node.counter(`${prefix}.late_dropped`));
  }
  return { closed, abandoned, lateDropped };
}

/**
 * A scorer of flat parameter vectors on the test set; undefined when the model is not a
 * CpuMlp classifier (then rounds carry the engine's accuracy and no loss).
 * @param {MlpShape | undefined} shape
 * @param {TestSet} test
 * @returns {((params: Float32Array) => import('./mlp.js').Score) | undefined}
 */
export function scorer(shape, test) {
  if (shape === undefined) return undefined;
  return (params) => scoreMlp(shape, params, test.x, test.y);
}

/**
 * @param {any} value a decoded Value
 * @returns {number | undefined}
 */
function numberOf(value) {
  if (value?.kind === 'tensor' && value.tensor.data.length > 0) return Number(value.tensor.data[0]);
  if (value !== undefined && value !== null && 'value' in value) return Number(value.value);
  return undefined;
}

/**
 * @param {any} value a decoded Value
 * @returns {Float32Array | undefined}
 */
function paramsOf(value) {
  return value?.kind === 'tensor' && value.tensor.data instanceof Float32Array ? value.tensor.data : undefined;
}

/**
 * @param {Float32Array} a
 * @param {Float32Array} b
 */
function sameValues(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Rounds remembered for members and contributions: older ones no longer change anything shown. */
const KEEP_ROUNDS = 8;

/** The rounds of a federated averaging server. */
export class FedRounds {
  /** @type {Map<number, string[]>} round id → the clients whose updates for it the server took */
  #contributions = new Map();
  /** @type {Map<number, string[]>} round id → the clients its global model was sent to */
  #members = new Map();
  /** @type {{ round?: number, model?: Float32Array, counters?: RoundCounters }} */
  #pending = {};
  /** The round the server has open (the id of its last report). */
  #open = /** @type {number | undefined} */ (undefined);
  /** @type {Float32Array | undefined} */
  #model;
  /** The counters as far as the reports so far account for them. */
  #seen = { closed: 0, abandoned: 0, lateDropped: 0 };
  #late = 0;
  #reports = 0;
  #score;
  #sinks;
  #now;

  /**
   * @param {((params: Float32Array) => import('./mlp.js').Score) | undefined} score
   * @param {RoundSinks} sinks
   * @param {() => number} [now]
   */
  constructor(score, sinks, now = () => performance.now()) {
    this.#score = score;
    this.#sinks = sinks;
    this.#now = now;
  }

  /**
   * The server sent its global model to a client.
   * @param {string} to
   * @param {any} bundle the decoded fill: [model, round]
   */
  sent(to, bundle) {
    if (bundle?.kind !== 'composite') return;
    const round = numberOf(bundle.children[1]);
    if (round === undefined) return;
    const list = this.#members.get(round) ?? [];
    if (!list.includes(to)) list.push(to);
    this.#members.set(round, list);
    this.#prune(round);
  }

  /**
   * The server took a client's update (call it when the server's node is handed the
   * envelope: what it takes before a round's report went into that round).
   * @param {string} from
   * @param {any} bundle the decoded fill: [trained, samples, round]
   */
  update(from, bundle) {
    if (bundle?.kind !== 'composite') return;
    const params = paramsOf(bundle.children[0]);
    const round = numberOf(bundle.children[2]);
    if (round === undefined) return;
    if (this.#open !== undefined && round < this.#open) this.#late++;
    else {
      const list = this.#contributions.get(round) ?? [];
      if (!list.includes(from)) list.push(from);
      this.#contributions.set(round, list);
      this.#prune(round);
    }
    if (params !== undefined && this.#score !== undefined) {
      const s = this.#score(params);
      this.#sinks.onPeerPoint?.({ peer: from, round: round + 1, accuracy: s.accuracy, loss: s.loss });
    }
  }

  /**
   * One of the server loop's outputs ("round", "model", "accuracy", in that order per
   * report), with the aggregator's counters read when "round" came, if the caller has them.
   * @param {string} topic
   * @param {any} value
   * @param {RoundCounters} [counters]
   */
  event(topic, value, counters) {
    if (topic === 'round') {
      this.#pending.round = numberOf(value);
      if (counters !== undefined) this.#pending.counters = counters;
    } else if (topic === 'model') {
      const params = paramsOf(value);
      if (params !== undefined) this.#pending.model = params;
    } else if (topic === 'accuracy') {
      this.#report(numberOf(value) ?? Number.NaN);
      this.#pending = {};
    }
  }

  /** @param {number} accuracy */
  #report(accuracy) {
    const { model, counters } = this.#pending;
    const round = this.#pending.round ?? (this.#open ?? -1) + 1;
    const unchanged = model !== undefined && this.#model !== undefined && sameValues(model, this.#model);
    const outcome = this.#outcome(counters, unchanged);
    // the model of round r comes from the round the server had open before, r - 1
    const ended = round - 1;
    const contributors = outcome === 'start' ? [] : [...(this.#contributions.get(ended) ?? [])];
    const members = outcome === 'start' ? [] : [...(this.#members.get(ended) ?? [])];
    const loss = model !== undefined && this.#score !== undefined ? this.#score(model).loss : undefined;
    // late updates: those the aggregator dropped since the last report, when it says so
    const late = counters === undefined ? this.#late : counters.lateDropped - this.#seen.lateDropped;
    if (counters !== undefined) this.#seen.lateDropped = counters.lateDropped;
    this.#late = 0;
    this.#open = round;
    if (model !== undefined) this.#model = model;
    this.#reports++;
    this.#sinks.onRound?.({ round, at: this.#now(), accuracy, ...(loss === undefined ? {} : { loss }), contributors, outcome, members, late, unchanged });
  }

  /**
   * What a report is: the counters say whether the aggregator closed or abandoned a round
   * since the last report; when they moved both ways (two reports in one poll) or are not
   * known, an abandoned round is the one whose model did not change.
   * @param {RoundCounters | undefined} counters
   * @param {boolean} unchanged
   * @returns {RoundOutcome}
   */
  #outcome(counters, unchanged) {
    if (counters === undefined) return this.#reports === 0 ? 'start' : unchanged ? 'abandoned' : 'closed';
    const closed = counters.closed - this.#seen.closed;
    const abandoned = counters.abandoned - this.#seen.abandoned;
    if (closed <= 0 && abandoned <= 0) return this.#reports === 0 ? 'start' : unchanged ? 'abandoned' : 'closed';
    const outcome = abandoned > 0 && (closed <= 0 || unchanged) ? 'abandoned' : 'closed';
    this.#seen[outcome]++;
    return outcome;
  }

  /** @param {number} round */
  #prune(round) {
    for (const map of [this.#contributions, this.#members]) {
      for (const old of map.keys()) if (old < round - KEEP_ROUNDS) map.delete(old);
    }
  }
}

/** The rounds of a gossip federation: each peer's period is its round. */
export class GossipRounds {
  /** @type {Map<string, number>} */
  #ticks = new Map();
  /** @type {Map<number, Map<string, number>>} accuracy by round, then peer */
  #byRound = new Map();
  /** @type {Map<string, number>} when each peer's shared model was last scored */
  #scoredAt = new Map();
  /** @type {Map<string, number>} */
  #loss = new Map();
  #score;
  #sinks;
  #now;
  #reported = 0;
  /** @type {() => number} peers taking part now */
  #live;

  /**
   * @param {((params: Float32Array) => import('./mlp.js').Score) | undefined} score
   * @param {RoundSinks} sinks
   * @param {() => number} live how many peers take part now (a round is global once all reported it)
   * @param {() => number} [now]
   */
  constructor(score, sinks, live, now = () => performance.now()) {
    this.#score = score;
    this.#sinks = sinks;
    this.#live = live;
    this.#now = now;
  }

  /**
   * A peer reported its accuracy (once per period).
   * @param {string} peer
   * @param {any} value
   */
  accuracy(peer, value) {
    const accuracy = numberOf(value);
    if (accuracy === undefined) return;
    const round = (this.#ticks.get(peer) ?? 0) + 1;
    this.#ticks.set(peer, round);
    const loss = this.#loss.get(peer);
    this.#sinks.onPeerPoint?.({ peer, round, accuracy, ...(loss === undefined ? {} : { loss }) });
    const row = this.#byRound.get(round) ?? new Map();
    row.set(peer, accuracy);
    this.#byRound.set(round, row);
    // rounds close in order: each once every peer taking part reported it, or once it is
    // five periods behind this report (a peer that stopped does not hold the others up)
    for (const r of [...this.#byRound.keys()].sort((a, b) => a - b)) {
      const seen = this.#byRound.get(r);
      if (seen === undefined || (seen.size < this.#live() && r > round - 5)) break;
      this.#byRound.delete(r);
      if (r <= this.#reported) continue;
      const values = [...seen.values()];
      const mean = values.reduce((a, b) => a + b, 0) / values.length;
      const losses = [...seen.keys()].map((p) => this.#loss.get(p)).filter((l) => l !== undefined);
      const meanLoss = losses.length === 0 ? undefined : losses.reduce((a, b) => a + b, 0) / losses.length;
      this.#sinks.onRound?.({ round: r, at: this.#now(), accuracy: mean, ...(meanLoss === undefined ? {} : { loss: meanLoss }), contributors: [...seen.keys()] });
      this.#reported = r;
    }
  }

  /**
   * A peer shared its model: scored at most every `everyMs` per peer, for its loss.
   * @param {string} peer
   * @param {any} value the decoded fill (the trained parameters)
   * @param {number} [everyMs]
   */
  shared(peer, value, everyMs = 500) {
    const params = paramsOf(value);
    if (params === undefined || this.#score === undefined) return;
    const now = this.#now();
    if (now - (this.#scoredAt.get(peer) ?? -Infinity) < everyMs) return;
    this.#scoredAt.set(peer, now);
    this.#loss.set(peer, this.#score(params).loss);
  }
}
