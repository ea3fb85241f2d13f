/**
 * When a phone takes part: a participation policy says whether the conditions a user
 * would ask for hold now — charging, an unmetered link without Save-Data, a visible page
 * (or a Worker), a budget of training steps or seconds per hour — and, when they do not,
 * why the client waits. A peer run with it (`runPeer`/`connectPeer`, option
 * `participation`) polls its node only while the policy allows: a waiting client trains
 * nothing, sends nothing and drops what arrives (its registry lease runs out, so the
 * server stops waiting for it); when the conditions hold again it carries on where it was.
 *
 * ```ts
 * const policy = await ParticipationPolicy.start({ budget: { stepsPerHour: 2000 } });
 * policy.onChange((s) => show(s.participating ? 'training' : `waiting: ${s.waiting.join(', ')}`));
 * const peer = await connectPeer(node, { url, room, identity, participation: policy });
 * ```
 *
 * What each condition reads, and what happens where the browser lacks the API
 * (`unknown: 'allow'`, the default, takes part; `'wait'` does not):
 *
 * | condition | reads | where it is missing |
 * |---|---|---|
 * | charging | `navigator.getBattery()`: `charging`, `level` (events `chargingchange`, `levelchange`) | Firefox, Safari: unknown |
 * | unmetered | `navigator.connection.type` (`cellular` is metered; `wifi`, `ethernet` are not) | desktop Chromium has no `type`, Firefox and Safari no `connection`: unknown |
 * | saveData | `navigator.connection.saveData` | as above: unknown |
 * | visible | `document.visibilityState` (event `visibilitychange`) | a Worker has no document: it runs when its page let it start, so the condition holds |
 * | budget | the node's `train.steps` counter, the time its polls that trained took | always known |
 */
import type { Pollable } from '../node/driver.js';
import { BbError, BbErrorCode } from '../engine/errors.js';
import type { BbNode } from '../node/node.js';

/**
 * Why a client waits: `not-charging` (the policy asks for charging and the battery is
 * not), `battery-low` (below minBatteryLevel and not charging), `metered` (the link is
 * cellular), `save-data` (the user asked the browser to save data), `hidden` (the page is
 * hidden and the policy asks for a visible one), `budget` (this hour's steps or seconds
 * are spent: state.budget.resumesAtMs says until when), `paused` (the app paused it). A
 * condition whose API is missing counts as not holding only with `unknown: 'wait'`.
 */
export type WaitReason = 'not-charging' | 'battery-low' | 'metered' | 'save-data' | 'hidden' | 'budget' | 'paused';

export interface ParticipationOptions {
  /** Train only while charging (default true). */
  readonly charging?: boolean;
  /** When not charging, train only above this battery level in [0, 1] (default 0: any). */
  readonly minBatteryLevel?: number;
  /** Train only on a link that is not cellular (default true). */
  readonly unmetered?: boolean;
  /** Wait while the user asks the browser to save data (default true). */
  readonly respectSaveData?: boolean;
  /** Train only while the page is visible (default false; a Worker always may). */
  readonly visible?: boolean;
  /** What a condition whose API the browser lacks counts as (default 'allow'). */
  readonly unknown?: 'allow' | 'wait';
  /** At most this much training in any hour: steps (the node's train.steps) and/or seconds of polls that trained. */
  readonly budget?: { readonly stepsPerHour?: number; readonly secondsPerHour?: number };
  /** The environment (default the global navigator and document; null: none). */
  readonly navigator?: NavigatorLike | null;
  readonly document?: DocumentLike | null;
  /** Wall-clock milliseconds (default Date.now) and timers, for the budget's hour. */
  readonly nowMs?: () => number;
  readonly setTimeout?: (callback: () => void, ms: number) => unknown;
  readonly clearTimeout?: (handle: unknown) => void;
}

/** What the policy sees now. */
export interface ParticipationState {
  readonly participating: boolean;
  /** Every reason it waits (empty while participating), in the order of the table above. */
  readonly waiting: readonly WaitReason[];
  readonly charging: boolean | 'unknown';
  readonly batteryLevel: number | 'unknown';
  /** navigator.connection.type, or 'unknown'. */
  readonly link: string;
  readonly saveData: boolean | 'unknown';
  /** 'worker' where there is no document. */
  readonly visible: boolean | 'worker';
  /** Training in the last hour, and when the budget allows again (while it is spent). */
  readonly budget: { readonly steps: number; readonly seconds: number; readonly resumesAtMs?: number };
}

/** The parts of a BatteryManager the policy reads. */
export interface BatteryLike {
  readonly charging: boolean;
  readonly level: number;
  addEventListener(type: 'chargingchange' | 'levelchange', listener: () => void): void;
  removeEventListener(type: 'chargingchange' | 'levelchange', listener: () => void): void;
}
/** The parts of a NetworkInformation the policy reads. */
export interface ConnectionLike {
  readonly type?: string;
  readonly saveData?: boolean;
  addEventListener?(type: 'change', listener: () => void): void;
  removeEventListener?(type: 'change', listener: () => void): void;
}
export interface NavigatorLike {
  getBattery?: () => Promise<BatteryLike>;
  readonly connection?: ConnectionLike;
}
export interface DocumentLike {
  readonly visibilityState: string;
  addEventListener(type: 'visibilitychange', listener: () => void): void;
  removeEventListener(type: 'visibilitychange', listener: () => void): void;
}

const HOUR_MS = 3_600_000;

interface Spent {
  readonly atMs: number;
  readonly steps: number;
  readonly seconds: number;
}

export class ParticipationPolicy {
  readonly #options: ParticipationOptions;
  readonly #navigator: NavigatorLike | null;
  readonly #document: DocumentLike | null;
  readonly #nowMs: () => number;
  readonly #listeners = new Set<(state: ParticipationState) => void>();
  readonly #undo: (() => void)[] = [];
  #battery: BatteryLike | null = null;
  #spent: Spent[] = [];
  #paused = false;
  #timer: unknown = undefined;
  #state: ParticipationState;

  private constructor(options: ParticipationOptions) {
    const level = options.minBatteryLevel ?? 0;
    if (!(level >= 0 && level <= 1)) throw new BbError(BbErrorCode.InvalidArgument, `participation: minBatteryLevel is in [0, 1], got ${level}`);
    for (const [name, value] of Object.entries(options.budget ?? {})) {
      if (value !== undefined && !(typeof value === 'number' && value > 0)) throw new BbError(BbErrorCode.InvalidArgument, `participation: budget.${name} must be a positive number, got ${String(value)}`);
    }
    this.#options = options;
    const g = globalThis as { navigator?: NavigatorLike; document?: DocumentLike };
    this.#navigator = options.navigator === undefined ? (g.navigator ?? null) : options.navigator;
    this.#document = options.document === undefined ? (g.document ?? null) : options.document;
    this.#nowMs = options.nowMs ?? Date.now;
    this.#state = this.#evaluate();
  }

  /** A policy watching its environment (it waits for the battery, where there is one). */
  static async start(options: ParticipationOptions = {}): Promise<ParticipationPolicy> {
    const policy = new ParticipationPolicy(options);
    await policy.#watch();
    return policy;
  }

  get state(): ParticipationState {
    return this.#state;
  }

  /** Calls `listener` with each new state (one that differs in a reason or a reading); returns the function that unsubscribes. */
  onChange(listener: (state: ParticipationState) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Training the client did (steps and the seconds it took), counted against the hour's budget. */
  record(steps: number, seconds: number): void {
    if (steps <= 0 && seconds <= 0) return;
    this.#spent.push({ atMs: this.#nowMs(), steps, seconds });
    this.#update();
  }

  /** Stops taking part until resume(), whatever the conditions. */
  pause(): void {
    this.#paused = true;
    this.#update();
  }
  resume(): void {
    this.#paused = false;
    this.#update();
  }

  /** Stops watching the environment. */
  stop(): void {
    for (const undo of this.#undo.splice(0)) undo();
    this.#clearTimer();
    this.#listeners.clear();
  }

  async #watch(): Promise<void> {
    const update = (): void => this.#update();
    const nav = this.#navigator;
    if (nav?.getBattery !== undefined) {
      try {
        const battery = await nav.getBattery();
        this.#battery = battery;
        for (const type of ['chargingchange', 'levelchange'] as const) {
          battery.addEventListener(type, update);
          this.#undo.push(() => battery.removeEventListener(type, update));
        }
      } catch {
        // a browser that refuses the Battery API (a permissions policy) leaves charging unknown
      }
    }
    const connection = nav?.connection;
    if (connection?.addEventListener !== undefined) {
      connection.addEventListener('change', update);
      this.#undo.push(() => connection.removeEventListener?.('change', update));
    }
    const doc = this.#document;
    if (doc !== null) {
      doc.addEventListener('visibilitychange', update);
      this.#undo.push(() => doc.removeEventListener('visibilitychange', update));
    }
    this.#update();
  }

  #update(): void {
    const next = this.#evaluate();
    const changed = JSON.stringify(next) !== JSON.stringify(this.#state);
    this.#state = next;
    this.#scheduleBudgetCheck(next.budget.resumesAtMs);
    if (changed) for (const listener of [...this.#listeners]) listener(next);
  }

  #evaluate(): ParticipationState {
    const o = this.#options;
    const allowUnknown = (o.unknown ?? 'allow') === 'allow';
    const battery = this.#battery;
    const connection = this.#navigator?.connection;
    const charging: boolean | 'unknown' = battery === null ? 'unknown' : battery.charging;
    const batteryLevel: number | 'unknown' = battery === null ? 'unknown' : battery.level;
    const link = connection?.type ?? 'unknown';
    const saveData: boolean | 'unknown' = connection?.saveData ?? 'unknown';
    const visible: boolean | 'worker' = this.#document === null ? 'worker' : this.#document.visibilityState === 'visible';
    const budget = this.#budget();
    const waiting: WaitReason[] = [];
    if ((o.charging ?? true) && (charging === 'unknown' ? !allowUnknown : !charging)) waiting.push('not-charging');
    const minLevel = o.minBatteryLevel ?? 0;
    if (minLevel > 0 && charging !== true && (batteryLevel === 'unknown' ? !allowUnknown : batteryLevel < minLevel)) waiting.push('battery-low');
    if ((o.unmetered ?? true) && (link === 'unknown' ? !allowUnknown : link === 'cellular')) waiting.push('metered');
    if ((o.respectSaveData ?? true) && (saveData === 'unknown' ? !allowUnknown : saveData)) waiting.push('save-data');
    if ((o.visible ?? false) && visible === false) waiting.push('hidden');
    if (budget.resumesAtMs !== undefined) waiting.push('budget');
    if (this.#paused) waiting.push('paused');
    return { participating: waiting.length === 0, waiting, charging, batteryLevel, link, saveData, visible, budget };
  }

  /** The last hour's training, and when it will be under budget again if it is not now. */
  #budget(): ParticipationState['budget'] {
    const now = this.#nowMs();
    this.#spent = this.#spent.filter((s) => s.atMs > now - HOUR_MS);
    const steps = this.#spent.reduce((n, s) => n + s.steps, 0);
    const seconds = this.#spent.reduce((n, s) => n + s.seconds, 0);
    const limits = this.#options.budget ?? {};
    const over = (st: number, sec: number): boolean =>
      (limits.stepsPerHour !== undefined && st >= limits.stepsPerHour) || (limits.secondsPerHour !== undefined && sec >= limits.secondsPerHour);
    if (!over(steps, seconds)) return { steps, seconds };
    // the budget allows again once enough of the oldest work has left the hour
    let st = steps;
    let sec = seconds;
    for (const s of this.#spent) {
      st -= s.steps;
      sec -= s.seconds;
      if (!over(st, sec)) return { steps, seconds, resumesAtMs: s.atMs + HOUR_MS };
    }
    return { steps, seconds, resumesAtMs: now + HOUR_MS };
  }

  #scheduleBudgetCheck(atMs: number | undefined): void {
    this.#clearTimer();
    if (atMs === undefined) return;
    const set = this.#options.setTimeout ?? ((callback: () => void, ms: number): unknown => setTimeout(callback, ms));
    this.#timer = set(() => {
      this.#timer = undefined;
      this.#update();
    }, Math.max(0, atMs - this.#nowMs()) + 1);
  }

  #clearTimer(): void {
    if (this.#timer === undefined) return;
    (this.#options.clearTimeout ?? ((handle: unknown): void => clearTimeout(handle as ReturnType<typeof setTimeout>)))(this.#timer);
    this.#timer = undefined;
  }
}

/**
 * The node as a PollDriver sees it, each poll measured: the training steps it ran (the
 * node's `train.steps` counter) and, for a poll that trained, the seconds it took go to the
 * policy's budget.
 */
export function measuredPolls(node: BbNode, policy: ParticipationPolicy, nowMs: () => number = () => performance.now()): Pollable {
  return {
    poll(nowNs: bigint): void {
      const steps = node.counter('train.steps');
      const started = nowMs();
      try {
        node.poll(nowNs);
      } finally {
        const trained = Number(node.counter('train.steps') - steps);
        if (trained > 0) policy.record(trained, (nowMs() - started) / 1000);
      }
    },
    expiry: () => node.expiry(),
    hasWork: () => node.hasWork(),
  };
}
