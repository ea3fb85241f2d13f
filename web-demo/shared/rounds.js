// Turns what a federation's traffic and events say into rounds and scores: the page runs
// it on the envelopes of its in-page peers, serve.mjs on its server peer's. Plain
// JavaScript with JSDoc types, for both.
//
// Federated averaging: a client's update is the bundle [trained model, samples, round];
// the server's round loop reports "round" (the id its new global model carries),
// "model" and "accuracy" each time a round closes. Every update is scored (the client's
// own point for that round), and each closed round gets the global model's scores and the
// clients whose updates for it reached the server.
// Gossip: every peer reports "accuracy" each period (its round), and the models peers
// share are scored for their loss.
import { scoreMlp } from './mlp.js';

/** @typedef {import('./mlp.js').MlpShape} MlpShape */
/** @typedef {{ round: number, at: number, accuracy: number, loss?: number, contributors: string[] }} RoundPoint */
/** @typedef {{ peer: string, round: number, accuracy: number, loss?: number }} PeerPoint */
/** @typedef {{ x: Float32Array, y: Float32Array }} TestSet */
/** @typedef {{ onRound?: (point: RoundPoint) => void, onPeerPoint?: (point: PeerPoint) => void }} RoundSinks */

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

/** The rounds of a federated averaging server. */
export class FedRounds {
  /** @type {Map<number, string[]>} client ids whose updates for a round arrived */
  #contributions = new Map();
  /** @type {{ round?: number, model?: Float32Array }} */
  #pending = {};
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
   * An update reached the server.
   * @param {string} from
   * @param {any} bundle the decoded fill: [trained, samples, round]
   */
  update(from, bundle) {
    if (bundle?.kind !== 'composite') return;
    const params = paramsOf(bundle.children[0]);
    const round = numberOf(bundle.children[2]);
    if (round === undefined) return;
    const list = this.#contributions.get(round) ?? [];
    if (!list.includes(from)) list.push(from);
    this.#contributions.set(round, list);
    // keep the last few rounds only: contributions to old rounds no longer change anything shown
    for (const old of this.#contributions.keys()) if (old < round - 8) this.#contributions.delete(old);
    if (params !== undefined && this.#score !== undefined) {
      const s = this.#score(params);
      this.#sinks.onPeerPoint?.({ peer: from, round, accuracy: s.accuracy, loss: s.loss });
    }
  }

  /**
   * One of the server loop's outputs ("round", "model", "accuracy", in that order per round).
   * @param {string} topic
   * @param {any} value
   */
  event(topic, value) {
    if (topic === 'round') this.#pending.round = numberOf(value);
    else if (topic === 'model') {
      const params = paramsOf(value);
      if (params !== undefined) this.#pending.model = params;
    } else if (topic === 'accuracy') {
      const round = this.#pending.round ?? 0;
      const accuracy = numberOf(value) ?? Number.NaN;
      const loss = this.#pending.model !== undefined && this.#score !== undefined ? this.#score(this.#pending.model).loss : undefined;
      // the model of round r is the average of the updates clients sent for round r - 1
      const contributors = this.#contributions.get(round - 1) ?? [];
      this.#sinks.onRound?.({ round, at: this.#now(), accuracy, ...(loss === undefined ? {} : { loss }), contributors: [...contributors] });
      this.#pending = {};
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
