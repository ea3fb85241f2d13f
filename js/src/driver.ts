/**
 * Drives a sans-IO engine: calls `poll(now)` when there is work or a deadline is due,
 * and sleeps until the next deadline otherwise. The engine never reads a clock, so the
 * driver owns one and passes its time to every poll.
 *
 * Where it ticks from:
 * - a visible document: `requestAnimationFrame`, so polling shares each frame with
 *   rendering instead of competing with it;
 * - a hidden document (rAF does not run in background tabs), a Web Worker and Node:
 *   timers.
 * Each tick runs one slice of polls bounded by a time budget and a poll count, then
 * yields to the event loop, so a busy engine never freezes the page.
 */

/** What the driver needs from an engine; anything that throws here goes to `onError`. */
export interface Pollable {
  /** Does the engine's work due at `nowNs`: timers, queued deliveries, steps. */
  poll(nowNs: bigint): void;
  /** The next deadline, in the driver's clock; null when nothing is scheduled. */
  expiry(): bigint | null;
  /** True while work is queued that the next poll would do regardless of the time. */
  hasWork(): boolean;
  /**
   * Calls `listener` whenever the host gives the engine work outside a poll (an invoke,
   * a completion, a bootstrap); returns the function that unsubscribes. A driver running
   * the engine then polls at once instead of sleeping until its next deadline.
   */
  onWork?(listener: () => void): () => void;
}

/** Monotonic time in nanoseconds. */
export type Clock = () => bigint;

/** Whether the document is visible, and a way to hear when that changes. */
export interface VisibilitySource {
  isVisible(): boolean;
  /** Calls `listener` on every change; returns the function that unsubscribes. */
  subscribe(listener: () => void): () => void;
}

export interface PollDriverOptions {
  /** The engine's clock; default: `performance.now()` in nanoseconds. */
  readonly clock?: Clock;
  /** Longest a slice of polls runs before it yields, in milliseconds; default 6. */
  readonly frameBudgetMs?: number;
  /** Most polls in one slice; default 64. */
  readonly maxPollsPerFrame?: number;
  /**
   * Ticks while the document is visible; default: the global `requestAnimationFrame`
   * where there is a document. `null` uses timers only (as in a worker).
   */
  readonly requestAnimationFrame?: ((callback: () => void) => number) | null;
  readonly cancelAnimationFrame?: (handle: number) => void;
  /** Timers for hidden pages, workers, Node and sleeping; default: the global ones. */
  readonly timers?: Timers;
  /** Default: the document's `visibilityState`; without a document, never visible. */
  readonly visibility?: VisibilitySource | null;
  /** Called with whatever the engine throws; default: `reportError`, else `console.error`. */
  readonly onError?: (error: unknown) => void;
  /** Stop after an error (the default) or keep polling. */
  readonly stopOnError?: boolean;
}

/** setTimeout/clearTimeout; methods, so Node's and the DOM's handle types both fit. */
export interface Timers {
  setTimeout(callback: () => void, delayMs: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** Counters since the driver was made. */
export interface PollDriverStats {
  /** `poll` calls. */
  readonly polls: number;
  /** Slices run, from either tick source. */
  readonly frames: number;
  /** Slices run on an animation frame. */
  readonly animationFrames: number;
  /** Slices that ended with work left (the time budget, the poll cap, a wake during the slice): another follows at once. */
  readonly yields: number;
  /** Time spent asleep waiting for a deadline or a wake, in milliseconds of the clock. */
  readonly sleptMs: number;
  /** Errors thrown by the engine's `poll`, `expiry` or `hasWork`. */
  readonly errors: number;
}

/**
 * What the driver is doing: waiting for an animation frame or a zero-delay timer to run
 * the next slice, sleeping until a deadline or a wake, polling, or nothing.
 */
export type PollDriverState = 'stopped' | 'frame' | 'timer' | 'sleeping' | 'polling';

const DEFAULT_FRAME_BUDGET_MS = 6;
const DEFAULT_MAX_POLLS_PER_FRAME = 64;
const NS_PER_MS = 1_000_000n;
/** setTimeout takes a signed 32-bit delay; longer ones fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class PollDriver {
  readonly #pollable: Pollable;
  readonly #clock: Clock;
  readonly #budgetNs: bigint;
  readonly #maxPolls: number;
  readonly #raf: ((callback: () => void) => number) | null;
  readonly #cancelRaf: (handle: number) => void;
  readonly #timers: Timers;
  readonly #visibility: VisibilitySource | null;
  readonly #onError: (error: unknown) => void;
  readonly #stopOnError: boolean;

  #state: PollDriverState = 'stopped';
  /** Handle of the pending frame or timer, by state. */
  #rafHandle: number | undefined;
  #timerHandle: unknown;
  #sleepingSince: bigint | undefined;
  #wokenDuringSlice = false;
  #unsubscribe: (() => void) | undefined;
  #unsubscribeWork: (() => void) | undefined;
  #stats = { polls: 0, frames: 0, animationFrames: 0, yields: 0, sleptMs: 0, errors: 0 };

  constructor(pollable: Pollable, options: PollDriverOptions = {}) {
    this.#pollable = pollable;
    this.#clock = options.clock ?? performanceClock;
    const budgetMs = options.frameBudgetMs ?? DEFAULT_FRAME_BUDGET_MS;
    const maxPolls = options.maxPollsPerFrame ?? DEFAULT_MAX_POLLS_PER_FRAME;
    if (!(budgetMs > 0)) throw new RangeError(`PollDriver: frameBudgetMs must be positive, got ${budgetMs}`);
    if (!Number.isInteger(maxPolls) || maxPolls < 1) {
      throw new RangeError(`PollDriver: maxPollsPerFrame must be a positive integer, got ${maxPolls}`);
    }
    this.#budgetNs = BigInt(Math.round(budgetMs * 1e6));
    this.#maxPolls = maxPolls;
    const hasDocument = typeof document !== 'undefined';
    this.#raf =
      options.requestAnimationFrame === undefined
        ? hasDocument && typeof requestAnimationFrame === 'function'
          ? (callback) => requestAnimationFrame(callback)
          : null
        : options.requestAnimationFrame;
    this.#cancelRaf =
      options.cancelAnimationFrame ??
      (typeof cancelAnimationFrame === 'function' ? (handle) => cancelAnimationFrame(handle) : () => {});
    this.#timers = options.timers ?? globalTimers;
    this.#visibility = options.visibility === undefined ? documentVisibility() : options.visibility;
    this.#onError = options.onError ?? reportUncaught;
    this.#stopOnError = options.stopOnError ?? true;
  }

  /** The driver's clock: pass it to `deliver` so the engine sees one timeline. */
  now(): bigint {
    return this.#clock();
  }

  get running(): boolean {
    return this.#state !== 'stopped';
  }

  get state(): PollDriverState {
    return this.#state;
  }

  get stats(): PollDriverStats {
    const sleeping = this.#sleepingSince === undefined ? 0 : nsToMs(this.#clock() - this.#sleepingSince);
    return { ...this.#stats, sleptMs: this.#stats.sleptMs + sleeping };
  }

  /** Starts polling: a first slice on the next tick. Does nothing when running. */
  start(): void {
    if (this.#state !== 'stopped') return;
    this.#unsubscribe = this.#visibility?.subscribe(() => this.#visibilityChanged());
    this.#unsubscribeWork = this.#pollable.onWork?.(() => this.wake());
    this.#requestSlice();
  }

  /** Stops polling and cancels whatever is pending; `start` resumes. */
  stop(): void {
    if (this.#state === 'stopped') return;
    this.#cancelPending();
    this.#endSleep();
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
    this.#unsubscribeWork?.();
    this.#unsubscribeWork = undefined;
    this.#state = 'stopped';
  }

  /**
   * Polls soon instead of sleeping until the next deadline: call it after delivering
   * bytes to the engine or anything else that gives it work.
   */
  wake(): void {
    switch (this.#state) {
      case 'sleeping':
        this.#cancelPending();
        this.#requestSlice();
        break;
      case 'polling':
        this.#wokenDuringSlice = true;
        break;
      default: // stopped, or a slice is already on its way
    }
  }

  /** Runs polls until the engine is idle, the budget is spent or the poll cap is reached. */
  #slice(fromAnimationFrame: boolean): void {
    this.#rafHandle = undefined;
    this.#timerHandle = undefined;
    this.#state = 'polling';
    this.#wokenDuringSlice = false;
    this.#stats.frames++;
    if (fromAnimationFrame) this.#stats.animationFrames++;
    const started = this.#clock();
    let now = started;
    let polls = 0;
    let expiry: bigint | null;
    let due: boolean;
    try {
      // The first poll always runs: a slice starts because of a wake or a deadline.
      do {
        this.#stats.polls++;
        polls++;
        this.#pollable.poll(now);
        now = this.#clock();
        expiry = this.#pollable.expiry();
        due = this.#pollable.hasWork() || (expiry !== null && expiry <= now);
      } while (this.#state === 'polling' && due && polls < this.#maxPolls && now - started < this.#budgetNs);
    } catch (error) {
      this.#failed(error);
      return;
    }
    // poll may have stopped the driver (or stopped and restarted it).
    if (this.#state !== 'polling') return;
    if (due || this.#wokenDuringSlice) {
      this.#stats.yields++;
      this.#requestSlice();
    } else {
      this.#sleep(now, expiry);
    }
  }

  /**
   * Reports what the engine threw once the driver has stopped or scheduled its next
   * slice, so `onError` may stop or restart it, and a throwing `onError` leaves it sound.
   */
  #failed(error: unknown): void {
    this.#stats.errors++;
    if (this.#stopOnError) {
      this.stop();
    } else if (this.#state === 'polling') {
      this.#requestSlice();
    }
    this.#onError(error);
  }

  /** Sleeps until the engine's next deadline, or until `wake` when it has none. */
  #sleep(now: bigint, expiry: bigint | null): void {
    this.#state = 'sleeping';
    this.#sleepingSince = now;
    if (expiry === null) return;
    const delayMs = Math.min(MAX_TIMER_MS, Math.max(0, Math.ceil(nsToMs(expiry - now))));
    this.#timerHandle = this.#timers.setTimeout(() => this.#requestSlice(), delayMs);
  }

  #endSleep(): void {
    if (this.#sleepingSince === undefined) return;
    this.#stats.sleptMs += nsToMs(this.#clock() - this.#sleepingSince);
    this.#sleepingSince = undefined;
  }

  /** Asks for the next slice from the tick source that fits: a frame when visible, else a timer. */
  #requestSlice(): void {
    this.#endSleep();
    if (this.#raf !== null && this.#visibility?.isVisible() === true) {
      this.#state = 'frame';
      this.#rafHandle = this.#raf(() => this.#slice(true));
    } else {
      this.#state = 'timer';
      this.#timerHandle = this.#timers.setTimeout(() => this.#slice(false), 0);
    }
  }

  #cancelPending(): void {
    if (this.#rafHandle !== undefined) this.#cancelRaf(this.#rafHandle);
    if (this.#timerHandle !== undefined) this.#timers.clearTimeout(this.#timerHandle);
    this.#rafHandle = undefined;
    this.#timerHandle = undefined;
  }

  /** A pending frame never comes in a hidden page, and a pending timer slice is slower than a frame. */
  #visibilityChanged(): void {
    if (this.#state === 'frame' || this.#state === 'timer') {
      this.#cancelPending();
      this.#requestSlice();
    }
  }
}

function nsToMs(ns: bigint): number {
  return Number(ns) / Number(NS_PER_MS);
}

function performanceClock(): bigint {
  return BigInt(Math.round(performance.now() * 1e6));
}

const globalTimers: Timers = {
  setTimeout: (callback, delayMs) => setTimeout(callback, delayMs),
  clearTimeout: (handle) => clearTimeout(handle as number),
};

function documentVisibility(): VisibilitySource | null {
  if (typeof document === 'undefined') return null;
  return {
    isVisible: () => document.visibilityState === 'visible',
    subscribe(listener) {
      document.addEventListener('visibilitychange', listener);
      return () => document.removeEventListener('visibilitychange', listener);
    },
  };
}

function reportUncaught(error: unknown): void {
  const host = globalThis as { reportError?: (error: unknown) => void };
  if (typeof host.reportError === 'function') host.reportError(error);
  else console.error('PollDriver: poll threw', error);
}
