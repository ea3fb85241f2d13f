/**
 * Drives a sans-IO engine: calls `poll(now)` when there is work or a deadline is due,
 * and sleeps until the next deadline otherwise. The engine never reads a clock, so the
 * driver owns one and passes its time to every poll.
 *
 * When it polls:
 * - on a wake (`wake()`, e.g. right after `deliver`): at the next tick — a MessageChannel
 *   task in browsers and workers, `setImmediate` in Node — not at the next animation frame,
 *   so an envelope is handled within the same frame it arrived in;
 * - at a deadline: a timer, then the same tick;
 * - while the engine has work left: slice after slice, each bounded by a time budget and a
 *   poll count, yielding to the event loop in between so a busy engine never freezes the
 *   page. While a document is visible, polling is also metered per animation frame: once
 *   it has had its budget since the last frame, the next slice waits for the next frame,
 *   so rendering keeps the rest of every frame. Only a slice that spends the budget asks
 *   for a frame: polling that stays under it asks for none, and its meter starts afresh
 *   {@link FRAME_PERIOD_MS} after it began (a 60 Hz frame), so a node that polls briefly
 *   now and then (a round's envelope) never makes its page draw.
 * - when a visible document's frames do not come (frames are throttled while the document
 *   still reads as visible: an iframe scrolled out of view or hidden): a slice waits for a
 *   frame at most {@link FRAME_WAIT_MS}, then runs at the next tick, and polling goes
 *   unmetered until a frame comes again — the node never stalls on a frame.
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
  /**
   * Longest a slice of polls runs before it yields, in milliseconds; while a document is
   * visible also the most polling between two animation frames. Default 6.
   */
  readonly frameBudgetMs?: number;
  /** Most polls in one slice; default 64. */
  readonly maxPollsPerFrame?: number;
  /**
   * Marks the frames polling is metered by while the document is visible; default: the
   * global `requestAnimationFrame` where there is a document. `null`: no metering (as in
   * a worker).
   */
  readonly requestAnimationFrame?: ((callback: () => void) => number) | null;
  readonly cancelAnimationFrame?: (handle: number) => void;
  /**
   * Runs `callback` as a task of its own soon, ahead of timers: what slices run on.
   * Default: a MessageChannel in browsers and workers, `setImmediate` in Node.
   */
  readonly tick?: (callback: () => void) => void;
  /** Timers for deadlines; default: the global ones. */
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
  /** Slices run. */
  readonly frames: number;
  /** Slices that waited for an animation frame (the frame's budget was spent). */
  readonly animationFrames: number;
  /** Slices that ended with work left (the time budget, the poll cap, a wake during the slice): another follows at once. */
  readonly yields: number;
  /** Waits for an animation frame that ended with none: the slice ran at a tick, and polling went unmetered until a frame came. */
  readonly missedFrames: number;
  /** Time spent asleep waiting for a deadline or a wake, in milliseconds of the clock. */
  readonly sleptMs: number;
  /** Errors thrown by the engine's `poll`, `expiry` or `hasWork`. */
  readonly errors: number;
}

/**
 * What the driver is doing: waiting for a tick to run the next slice, waiting for the
 * next animation frame (this frame's polling budget is spent), sleeping until a deadline
 * or a wake, polling, or nothing.
 */
export type PollDriverState = 'stopped' | 'tick' | 'frame' | 'sleeping' | 'polling';

const DEFAULT_FRAME_BUDGET_MS = 6;
/**
 * Longest a slice waits for an animation frame: three frames at 60 Hz. A visible document
 * draws one every 16.7 ms (33 ms at 30 Hz); one that sends none in 50 ms is not drawing.
 */
export const FRAME_WAIT_MS = 50;
/**
 * A 60 Hz frame: polling metered since longer than this, and not waiting for a frame,
 * starts a new meter without one (a frame would have come and reset it).
 */
export const FRAME_PERIOD_MS = 1000 / 60;
const FRAME_PERIOD_NS = BigInt(Math.round(FRAME_PERIOD_MS * 1e6));
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
  readonly #tick: (callback: () => void) => void;
  readonly #timers: Timers;
  readonly #visibility: VisibilitySource | null;
  readonly #onError: (error: unknown) => void;
  readonly #stopOnError: boolean;

  #state: PollDriverState = 'stopped';
  /** The pending animation frame (it resets the frame's meter) and deadline timer. */
  #rafHandle: number | undefined;
  #timerHandle: unknown;
  /** The timer that ends a wait for a frame that does not come. */
  #frameWaitHandle: unknown;
  /** No frame came when one was waited for: polling is not metered until one does. */
  #framesStalled = false;
  /** Ticks carry the generation they were asked in; a cancelled one finds it moved on. */
  #tickGeneration = 0;
  /** Polling time since the last animation frame, while metered... */
  #frameWorkNs = 0n;
  /** ...and when that metering began (undefined: nothing metered since the last reset). */
  #meterSinceNs: bigint | undefined;
  #sleepingSince: bigint | undefined;
  #wokenDuringSlice = false;
  #unsubscribe: (() => void) | undefined;
  #unsubscribeWork: (() => void) | undefined;
  #stats = { polls: 0, frames: 0, animationFrames: 0, yields: 0, missedFrames: 0, sleptMs: 0, errors: 0 };

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
    this.#tick = options.tick ?? defaultTick();
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
    if (this.#rafHandle !== undefined) this.#cancelRaf(this.#rafHandle);
    this.#rafHandle = undefined;
    this.#frameWorkNs = 0n;
    this.#meterSinceNs = undefined;
    this.#framesStalled = false;
    this.#endSleep();
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
    this.#unsubscribeWork?.();
    this.#unsubscribeWork = undefined;
    this.#state = 'stopped';
  }

  /**
   * Polls at the next tick instead of sleeping until the next deadline: call it after
   * delivering bytes to the engine or anything else that gives it work.
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

  /** Polling is metered by animation frames while a document is visible and drawing them. */
  #metered(): boolean {
    return this.#raf !== null && !this.#framesStalled && this.#visibility?.isVisible() === true;
  }

  /** Runs polls until the engine is idle, the budget is spent or the poll cap is reached. */
  #slice(fromAnimationFrame: boolean): void {
    this.#state = 'polling';
    this.#wokenDuringSlice = false;
    this.#stats.frames++;
    if (fromAnimationFrame) this.#stats.animationFrames++;
    const started = this.#clock();
    this.#meterLapse(started);
    const metered = this.#metered();
    const budget = metered && this.#frameWorkNs < this.#budgetNs ? this.#budgetNs - this.#frameWorkNs : this.#budgetNs;
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
      } while (this.#state === 'polling' && due && polls < this.#maxPolls && now - started < budget);
    } catch (error) {
      this.#meter(metered, started, this.#clock() - started);
      this.#failed(error);
      return;
    }
    // poll may have stopped the driver (or stopped and restarted it).
    if (this.#state !== 'polling') return;
    this.#meter(metered, started, now - started);
    if (due || this.#wokenDuringSlice) {
      this.#stats.yields++;
      this.#requestSlice();
    } else {
      this.#sleep(now, expiry);
    }
  }

  /**
   * Counts a slice's polling against this frame; once the budget is spent, asks for the
   * frame that resets the meter (the next slice waits for it). Under the budget it asks
   * for none: a page need not draw for a node's sake.
   */
  #meter(metered: boolean, startedNs: bigint, elapsedNs: bigint): void {
    if (!metered || this.#raf === null) return;
    this.#meterSinceNs ??= startedNs;
    this.#frameWorkNs += elapsedNs;
    if (this.#frameWorkNs >= this.#budgetNs && this.#rafHandle === undefined) this.#rafHandle = this.#raf(() => this.#animationFrame());
  }

  /** Metering that began a frame period ago or more, with no frame asked for, starts afresh. */
  #meterLapse(nowNs: bigint): void {
    if (this.#meterSinceNs === undefined || this.#rafHandle !== undefined || nowNs - this.#meterSinceNs < FRAME_PERIOD_NS) return;
    this.#frameWorkNs = 0n;
    this.#meterSinceNs = undefined;
  }

  #animationFrame(): void {
    this.#rafHandle = undefined;
    this.#frameWorkNs = 0n;
    this.#meterSinceNs = undefined;
    this.#framesStalled = false;
    if (this.#state !== 'frame') return;
    this.#cancelFrameWait();
    this.#slice(true);
  }

  /** No frame came within FRAME_WAIT_MS: the slice runs at a tick, unmetered until a frame comes. */
  #frameMissed(): void {
    this.#frameWaitHandle = undefined;
    if (this.#state !== 'frame') return;
    this.#stats.missedFrames++;
    this.#framesStalled = true;
    this.#frameWorkNs = 0n;
    this.#meterSinceNs = undefined;
    this.#requestSlice();
  }

  #cancelFrameWait(): void {
    if (this.#frameWaitHandle !== undefined) this.#timers.clearTimeout(this.#frameWaitHandle);
    this.#frameWaitHandle = undefined;
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
    this.#timerHandle = this.#timers.setTimeout(() => {
      this.#timerHandle = undefined;
      this.#requestSlice();
    }, delayMs);
  }

  #endSleep(): void {
    if (this.#sleepingSince === undefined) return;
    this.#stats.sleptMs += nsToMs(this.#clock() - this.#sleepingSince);
    this.#sleepingSince = undefined;
  }

  /**
   * The next slice: at the next tick, or at the next frame when this frame's budget is
   * spent (at a tick after all if no frame comes within FRAME_WAIT_MS).
   */
  #requestSlice(): void {
    this.#endSleep();
    this.#cancelFrameWait();
    this.#meterLapse(this.#clock());
    if (this.#metered() && this.#frameWorkNs >= this.#budgetNs) {
      this.#state = 'frame';
      if (this.#rafHandle === undefined) this.#rafHandle = this.#raf!(() => this.#animationFrame());
      this.#frameWaitHandle = this.#timers.setTimeout(() => this.#frameMissed(), FRAME_WAIT_MS);
      return;
    }
    this.#state = 'tick';
    const generation = ++this.#tickGeneration;
    this.#tick(() => {
      if (this.#state === 'tick' && generation === this.#tickGeneration) this.#slice(false);
    });
  }

  /** Cancels the pending tick and timers (a pending frame stays: it resets the meter). */
  #cancelPending(): void {
    this.#tickGeneration++;
    if (this.#timerHandle !== undefined) this.#timers.clearTimeout(this.#timerHandle);
    this.#timerHandle = undefined;
    this.#cancelFrameWait();
  }

  /** A background tab gets no frames: a slice waiting for one moves to a tick. */
  #visibilityChanged(): void {
    if (this.#visibility?.isVisible() === true) {
      this.#frameWorkNs = 0n;
      this.#meterSinceNs = undefined;
      this.#framesStalled = false;
      return;
    }
    if (this.#state === 'frame') this.#requestSlice();
  }
}

function nsToMs(ns: bigint): number {
  return Number(ns) / Number(NS_PER_MS);
}

function performanceClock(): bigint {
  return BigInt(Math.round(performance.now() * 1e6));
}

/** A task of its own, soon: setImmediate in Node (a MessageChannel port would keep the
 * process alive), a MessageChannel elsewhere, a zero-delay timer as the last resort. */
function defaultTick(): (callback: () => void) => void {
  const scope = globalThis as {
    process?: { versions?: { node?: unknown } };
    setImmediate?: (callback: () => void) => unknown;
  };
  if (typeof scope.process?.versions?.node === 'string' && typeof scope.setImmediate === 'function') {
    const setImmediate = scope.setImmediate;
    return (callback) => void setImmediate(callback);
  }
  if (typeof MessageChannel === 'function') {
    const channel = new MessageChannel();
    const queue: (() => void)[] = [];
    channel.port1.onmessage = () => queue.shift()?.();
    return (callback) => {
      queue.push(callback);
      channel.port2.postMessage(null);
    };
  }
  return (callback) => void setTimeout(callback, 0);
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
