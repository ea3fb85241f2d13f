/**
 * What goes wrong quietly, said out loud. A node's engine reports every refusal as a step
 * or a counter; nobody need subscribe to them for the host to hear of one: each node (and
 * each peer, trainer and LocalNetwork) tells a logger — by default `console.warn` — one line
 * per kind of trouble, at most one every ten seconds per kind, the ones in between counted
 * into the next line.
 *
 * ```ts
 * setDefaultLogger(null);                                     // silence every notice
 * setDefaultLogger({ warn: (line) => myLog.push(line) });      // or send them elsewhere
 * BbNode.install(bb, { ...options, log: false });              // or silence one node
 * ```
 */
import type { BbNode, Step } from './node.js';

const nowMs = (): number => performance.now();

/** Where notices go. */
export interface Logger {
  warn(line: string): void;
}

const consoleLogger: Logger = { warn: (line) => console.warn(line) };
let defaultLogger: Logger | null = consoleLogger;

/** Sets the logger of everything made afterwards without a logger of its own; null silences them. */
export function setDefaultLogger(logger: Logger | null): void {
  defaultLogger = logger;
}

/** The logger things are made with when given none (console.warn unless set otherwise). */
export function getDefaultLogger(): Logger | null {
  return defaultLogger;
}

/** Kinds remembered at once; past it the oldest is forgotten (kinds come from a fixed vocabulary). */
const MAX_KINDS = 64;
const DEFAULT_INTERVAL_MS = 10_000;

/** Lines by kind, rate-limited: the first of a kind at once, then at most one per interval. */
export class Notices {
  readonly #logger: Logger | null;
  readonly #intervalMs: number;
  readonly #now: () => number;
  readonly #kinds = new Map<string, { last: number; held: number }>();

  constructor(logger: Logger | null | false | undefined, intervalMs = DEFAULT_INTERVAL_MS, now: () => number = nowMs) {
    this.#logger = logger === undefined ? defaultLogger : logger === false ? null : logger;
    this.#intervalMs = intervalMs;
    this.#now = now;
  }

  get silent(): boolean {
    return this.#logger === null;
  }

  /** Says `line` unless a line of this kind was said within the interval (then it is counted). */
  notice(kind: string, line: string): void {
    if (this.#logger === null) return;
    const now = this.#now();
    const seen = this.#kinds.get(kind);
    if (seen !== undefined && now - seen.last < this.#intervalMs) {
      seen.held++;
      return;
    }
    const held = seen?.held ?? 0;
    this.#kinds.delete(kind);
    if (this.#kinds.size >= MAX_KINDS) this.#kinds.delete(this.#kinds.keys().next().value!);
    this.#kinds.set(kind, { last: now, held: 0 });
    this.#logger.warn(`bytesandbrains: ${line}${held > 0 ? ` (and ${held} more like it since the last such line)` : ''}`);
  }
}

/** Counters a node keeps for trouble no step reports, and what each means. */
const WATCHED_COUNTERS: readonly (readonly [string, (n: bigint) => string])[] = [
  ['onnx_model.steps_skipped', (n) => `${n} local training step(s) changed nothing: the loss or a gradient was not finite (NaN or infinite values in the data?)`],
  ['fedavg.rounds_abandoned', (n) => `${n} round(s) abandoned: fewer updates than the quorum came by the deadline`],
  ['robustavg.rounds_abandoned', (n) => `${n} round(s) abandoned: fewer updates than the quorum came by the deadline`],
  ['fedavg.norm_dropped', (n) => `${n} update(s) left out: past the distance bound from the global model`],
  ['gossip.refused_length', (n) => `${n} gossiped model(s) refused: another parameter count than this peer's model`],
  ['refusal_notice.unsent', (n) => `${n} refusal notice(s) could not be sent back to the contributor`],
];
/** Counters are read at most this often (wall clock), and at least every so many steps. */
const COUNTER_CHECK_MS = 250;
const COUNTER_CHECK_STEPS = 16;

/** A peer id cut short, its start and end: enough to tell peers apart in a line. */
export function shortPeer(peer: string | undefined): string {
  return peer === undefined ? 'an unknown peer' : peer.length > 14 ? `${peer.slice(0, 6)}…${peer.slice(-6)}` : peer;
}

/** The line a step that reports trouble becomes, by kind; undefined for the steps that are not trouble. */
function troubleLine(who: string, step: Step): [kind: string, line: string] | undefined {
  const detail = step.detail ?? step.reason ?? '';
  switch (step.kind) {
    case 'opFailed':
      return [`opFailed ${step.op ?? ''} ${step.reason ?? ''}`, `${who}: ${step.op ?? 'an op'} failed: ${detail}`];
    case 'wireReceiveFailed':
      return [`wireReceiveFailed ${step.reason ?? ''}`, `${who}: refused what ${shortPeer(step.peer)} sent (${step.reason ?? 'refused'}): ${detail}`];
    case 'peerResolveFailed':
      return [
        'peerResolveFailed',
        `${who}: could not send to ${shortPeer(step.peer)}: its address book does not hold that peer (node.addPeer it, or let it announce itself)${detail === '' ? '' : `: ${detail}`}`,
      ];
    case 'outboundDropped':
      return ['outboundDropped', `${who}: an outgoing envelope was dropped (the outbound queue is full): ${detail}`];
    case 'ingressDropped':
      return ['ingressDropped', `${who}: an incoming envelope from ${shortPeer(step.peer)} was dropped (the ingress budget is spent): ${detail}`];
    case 'cycleBudgetExceeded':
      return ['cycleBudgetExceeded', `${who}: a poll stopped at its work budget: ${detail}`];
    case 'appEvent':
      if (step.topic === 'refused' && step.value?.kind === 'bytes') {
        return ['refused', `${who}: its contribution was refused by the peer it went to: ${new TextDecoder().decode(step.value.bytes)}`];
      }
      return undefined;
    default:
      return undefined;
  }
}

/**
 * Tells `notices` what goes wrong on `node`: the steps that report trouble as they come,
 * and the counters of trouble no step reports at most once a second. Returns the function
 * that stops it.
 */
export function watchNode(node: BbNode, notices: Notices): () => void {
  if (notices.silent) return () => {};
  const who = `node ${shortPeer(node.self)}`;
  const seen = new Map<string, bigint>();
  let checkedAt = -Infinity;
  let steps = 0;
  const checkCounters = (): void => {
    const now = nowMs();
    if ((now - checkedAt < COUNTER_CHECK_MS && ++steps < COUNTER_CHECK_STEPS) || node.freed) return;
    checkedAt = now;
    steps = 0;
    for (const [name, say] of WATCHED_COUNTERS) {
      const value = node.counter(name);
      const delta = value - (seen.get(name) ?? 0n);
      seen.set(name, value);
      if (delta > 0n) notices.notice(name, `${who}: ${say(delta)}`);
    }
  };
  return node.onStep((step) => {
    const trouble = troubleLine(who, step);
    if (trouble !== undefined) notices.notice(trouble[0], trouble[1]);
    checkCounters();
  });
}
