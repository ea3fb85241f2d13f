/**
 * PollDriver's scheduling, driven by hand: a fake clock, animation frames, timers and
 * document visibility, and a scripted engine that records when it was polled. Then the
 * built driver with its defaults in Chromium, on a page and in a Worker.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { describe, expect, test } from 'vitest';

import {
  FRAME_PERIOD_MS,
  FRAME_WAIT_MS,
  PollDriver,
  type Pollable,
  type PollDriverOptions,
  type PollDriverStats,
  type VisibilitySource,
} from '../src/node/driver.js';
import { CHROMIUM, CHROMIUM_ARGS, packageRoot } from './support.js';

const MS = 1_000_000n;

/** A clock, ticks, rAF, timers and visibility that only move when the test says so. */
class FakeHost {
  now = 0n;
  visible = true;
  #frames = new Map<number, () => void>();
  #ticks: (() => void)[] = [];
  #timers = new Map<number, { at: bigint; callback: () => void }>();
  #nextHandle = 1;
  #listeners = new Set<() => void>();
  /** What ran, in order: 'tick', 'frame' and 'timer' entries. */
  readonly events: string[] = [];

  readonly visibility: VisibilitySource = {
    isVisible: () => this.visible,
    subscribe: (listener) => {
      this.#listeners.add(listener);
      return () => this.#listeners.delete(listener);
    },
  };

  options(extra: PollDriverOptions = {}): PollDriverOptions {
    return {
      clock: () => this.now,
      requestAnimationFrame: (callback) => {
        const handle = this.#nextHandle++;
        this.#frames.set(handle, callback);
        return handle;
      },
      cancelAnimationFrame: (handle) => this.#frames.delete(handle),
      tick: (callback) => this.#ticks.push(callback),
      timers: {
        setTimeout: (callback, delayMs) => {
          const handle = this.#nextHandle++;
          this.#timers.set(handle, { at: this.now + BigInt(delayMs) * MS, callback });
          return handle;
        },
        clearTimeout: (handle) => this.#timers.delete(handle as number),
      },
      visibility: this.visibility,
      ...extra,
    };
  }

  get pendingFrames(): number {
    return this.#frames.size;
  }

  get pendingTicks(): number {
    return this.#ticks.length;
  }

  get pendingTimers(): number {
    return this.#timers.size;
  }

  /** Runs the animation frames requested so far (not those they request). */
  frame(): void {
    const frames = [...this.#frames.values()];
    this.#frames.clear();
    this.events.push('frame');
    for (const callback of frames) callback();
  }

  /** Runs the ticks queued so far (not those they queue), as the event loop would. */
  tick(): void {
    const ticks = this.#ticks;
    this.#ticks = [];
    this.events.push('tick');
    for (const callback of ticks) callback();
  }

  /**
   * Moves the clock forward, firing each timer at its time, in order. A timer set while
   * advancing fires in the same call only if its time comes before the end, so
   * `advance(0)` runs one round of zero-delay timers, as one turn of an event loop would.
   */
  advance(ms: number): void {
    const end = this.now + BigInt(ms) * MS;
    const waiting = new Set(this.#timers.keys());
    for (;;) {
      const due = [...this.#timers.entries()]
        .filter(([handle, timer]) => timer.at <= end && (waiting.has(handle) || timer.at < end))
        .sort(([a, x], [b, y]) => (x.at === y.at ? a - b : x.at < y.at ? -1 : 1))[0];
      if (due === undefined) break;
      const [handle, timer] = due;
      this.#timers.delete(handle);
      if (timer.at > this.now) this.now = timer.at;
      this.events.push('timer');
      timer.callback();
    }
    if (this.now < end) this.now = end; // a slow poll may have moved it past the end
  }

  setVisible(visible: boolean): void {
    this.visible = visible;
    for (const listener of [...this.#listeners]) listener();
  }
}

/** An engine with a queue of work items and an optional deadline; each poll does one item. */
class ScriptedEngine implements Pollable {
  work = 0;
  deadline: bigint | null = null;
  readonly polledAt: bigint[] = [];
  /** Called on every poll, e.g. to make polls slow by moving the fake clock. */
  onPoll: (nowNs: bigint) => void = () => {};

  poll(nowNs: bigint): void {
    this.polledAt.push(nowNs);
    if (this.deadline !== null && this.deadline <= nowNs) this.deadline = null;
    if (this.work > 0) this.work--;
    this.onPoll(nowNs);
  }

  expiry(): bigint | null {
    return this.deadline;
  }

  hasWork(): boolean {
    return this.work > 0;
  }
}

function setup(extra: PollDriverOptions = {}): { host: FakeHost; engine: ScriptedEngine; driver: PollDriver } {
  const host = new FakeHost();
  const engine = new ScriptedEngine();
  const driver = new PollDriver(engine, host.options(extra));
  return { host, engine, driver };
}

describe('PollDriver wakes on delivery', () => {
  test('a delivered envelope is polled at the next tick, before any animation frame', () => {
    const { host, engine, driver } = setup();
    const order: string[] = [];
    engine.onPoll = () => order.push(`poll after ${host.events.join(',')}`);
    driver.start();
    host.tick();
    expect(driver.state).toBe('sleeping'); // idle, no deadline
    host.events.length = 0;
    order.length = 0;
    engine.work = 1; // the transport delivered an envelope
    driver.wake();
    expect(driver.state).toBe('tick');
    host.tick();
    expect(order).toEqual(['poll after tick']); // no frame ran before it
    expect(driver.stats.animationFrames).toBe(0);
  });

  test('a wake during a slice polls again at the next tick', () => {
    const { host, engine, driver } = setup();
    driver.start();
    let wakes = 1;
    engine.onPoll = () => {
      if (wakes-- > 0) driver.wake(); // delivered from inside a callback of the poll
    };
    host.tick();
    expect(driver.state).toBe('tick');
    host.tick();
    expect(engine.polledAt).toHaveLength(2);
    expect(driver.state).toBe('sleeping');
  });
});

describe('PollDriver tick source', () => {
  test('a visible document polls on ticks, with the clock of the tick', () => {
    const { host, engine, driver } = setup();
    driver.start();
    expect(driver.state).toBe('tick');
    expect(host.pendingTimers).toBe(0);
    expect(engine.polledAt).toEqual([]);
    host.now = 7n * MS;
    engine.work = 1;
    host.tick();
    expect(engine.polledAt).toEqual([7n * MS]);
    expect(driver.stats).toMatchObject({ polls: 1, frames: 1, animationFrames: 0 });
  });

  test('a hidden document polls on ticks, slice after slice, and never asks for a frame', () => {
    const { host, engine, driver } = setup();
    host.visible = false;
    engine.work = 3;
    engine.onPoll = () => (host.now += 3n * MS); // three polls overrun the 6 ms budget
    driver.start();
    host.tick();
    expect(engine.polledAt).toEqual([0n, 3n * MS]);
    host.tick();
    expect(engine.polledAt).toHaveLength(3);
    expect(host.pendingFrames).toBe(0);
    expect(driver.stats).toMatchObject({ polls: 3, frames: 2, animationFrames: 0, yields: 1 });
  });

  test('hiding the page moves a slice waiting for a frame to a tick; showing it meters frames again', () => {
    const { host, engine, driver } = setup();
    engine.work = 10;
    engine.onPoll = () => (host.now += 6n * MS); // one poll spends a frame's budget
    driver.start();
    host.tick();
    expect(driver.state).toBe('frame');
    host.setVisible(false);
    expect(driver.state).toBe('tick');
    host.tick();
    host.tick();
    expect(engine.polledAt).toHaveLength(3);
    host.setVisible(true);
    host.tick(); // the one queued while hidden
    expect(engine.polledAt).toHaveLength(4);
    expect(driver.state).toBe('frame');
    host.frame();
    expect(engine.polledAt).toHaveLength(5);
    expect(driver.stats.animationFrames).toBe(1);
  });

  test('without a document (a worker, Node) the defaults use setImmediate, timers and performance.now()', async () => {
    const engine = new ScriptedEngine();
    const driver = new PollDriver(engine);
    // The deadline is set by the first poll, 20 ms after it: on a loaded machine the first
    // tick itself can come later than any fixed deadline would.
    let first: bigint | undefined;
    let resolve: () => void = () => {};
    const reached = new Promise<void>((done) => (resolve = done));
    engine.onPoll = (now) => {
      if (first === undefined) {
        first = now;
        engine.deadline = now + 20n * MS;
      } else if (engine.deadline === null) {
        resolve();
      }
    };
    driver.start();
    expect(driver.state).toBe('tick');
    await reached;
    driver.stop();
    expect(engine.polledAt.length).toBeGreaterThanOrEqual(2); // the first slice, then the deadline
    expect(engine.polledAt.at(-1)! - first!).toBeGreaterThanOrEqual(20n * MS - MS); // Node timers may run up to 1 ms early
    expect(driver.stats.animationFrames).toBe(0);
    expect(driver.stats.sleptMs).toBeGreaterThan(10);
  });
});

describe('PollDriver sleeping and waking', () => {
  test('an idle engine sleeps until its deadline, then polls at it', () => {
    const { host, engine, driver } = setup();
    host.visible = false;
    engine.deadline = 50n * MS;
    driver.start();
    host.tick();
    expect(engine.polledAt).toEqual([0n]);
    expect(driver.state).toBe('sleeping');
    host.advance(49);
    expect(engine.polledAt).toEqual([0n]);
    host.advance(1); // the deadline's timer asks for a slice
    expect(driver.state).toBe('tick');
    host.tick();
    expect(engine.polledAt).toEqual([0n, 50n * MS]);
    expect(driver.state).toBe('sleeping'); // no deadline left: until a wake
    expect(host.pendingTimers).toBe(0);
    expect(driver.stats.sleptMs).toBe(50);
  });

  test('wake() cuts a sleep short and polls at once; the deadline still comes', () => {
    const { host, engine, driver } = setup();
    host.visible = false;
    engine.deadline = 1000n * MS;
    driver.start();
    host.tick();
    host.advance(10);
    engine.work = 1; // the host delivered bytes
    driver.wake();
    expect(driver.state).toBe('tick');
    expect(host.pendingTimers).toBe(0);
    host.tick();
    expect(engine.polledAt).toEqual([0n, 10n * MS]);
    expect(driver.state).toBe('sleeping');
    host.advance(990);
    host.tick();
    expect(engine.polledAt).toEqual([0n, 10n * MS, 1000n * MS]);
  });

  test('an engine with no deadline sleeps until woken', () => {
    const { host, engine, driver } = setup();
    host.visible = false;
    driver.start();
    host.tick();
    host.advance(60_000);
    expect(engine.polledAt).toEqual([0n]);
    expect(host.pendingTimers + host.pendingTicks).toBe(0);
    driver.wake();
    host.tick();
    expect(engine.polledAt).toHaveLength(2);
    expect(driver.state).toBe('sleeping');
    expect(driver.stats.sleptMs).toBe(60_000);
  });

  test('wake() while a slice is already requested asks for no second one; before start() it does nothing', () => {
    const { host, engine, driver } = setup();
    driver.wake();
    expect(host.pendingFrames + host.pendingTicks).toBe(0);
    driver.start();
    driver.wake();
    driver.wake();
    expect(host.pendingTicks).toBe(1);
    host.tick();
    expect(engine.polledAt).toHaveLength(1);
  });
});

describe('PollDriver bounds per slice and per frame', () => {
  test('while visible a slow engine gets at most the time budget per frame, then waits for the next frame', () => {
    const { host, engine, driver } = setup({ frameBudgetMs: 6 });
    engine.work = 10;
    engine.onPoll = () => (host.now += 2n * MS);
    driver.start();
    host.tick();
    expect(engine.polledAt).toHaveLength(3);
    const pollsPerFrame: number[] = [];
    while (driver.state === 'frame') {
      const before = engine.polledAt.length;
      const frameStart = host.now;
      host.frame();
      pollsPerFrame.push(engine.polledAt.length - before);
      expect(host.now - frameStart).toBeLessThanOrEqual(6n * MS);
      host.now += 10n * MS; // the rest of the 16 ms frame
    }
    expect(pollsPerFrame).toEqual([3, 3, 1]);
    expect(engine.work).toBe(0);
    expect(driver.stats).toMatchObject({ polls: 10, frames: 4, animationFrames: 3, yields: 3 });
  });

  test('a wake in a frame whose budget is left polls at once; one whose budget is spent waits for the frame', () => {
    const { host, engine, driver } = setup({ frameBudgetMs: 6 });
    driver.start();
    engine.onPoll = () => (host.now += 2n * MS);
    host.tick(); // 2 ms of this frame's 6
    driver.wake();
    expect(driver.state).toBe('tick');
    host.tick(); // 4 ms
    engine.onPoll = () => (host.now += 3n * MS);
    driver.wake();
    host.tick(); // 7 ms: spent
    driver.wake();
    expect(driver.state).toBe('frame');
    host.tick();
    expect(engine.polledAt).toHaveLength(3);
    host.frame();
    expect(engine.polledAt).toHaveLength(4);
  });

  test('polling under the budget asks for no animation frame: a page need not draw for a node that polls briefly', () => {
    const { host, engine, driver } = setup({ frameBudgetMs: 6 });
    engine.onPoll = () => (host.now += 2n * MS);
    driver.start();
    host.tick();
    for (let round = 0; round < 5; round++) {
      host.advance(200); // a round's quiet, then its envelope
      engine.work = 1;
      driver.wake();
      host.tick();
      expect(driver.state).toBe('sleeping');
      expect(host.pendingFrames).toBe(0);
    }
    expect(engine.polledAt).toHaveLength(6);
    expect(driver.stats).toMatchObject({ animationFrames: 0, missedFrames: 0 });
  });

  test('metering starts afresh a frame period after it began; within one the budget still holds and spending it asks for a frame', () => {
    const { host, engine, driver } = setup({ frameBudgetMs: 6 });
    engine.onPoll = () => (host.now += 4n * MS);
    driver.start();
    host.tick(); // 4 ms of 6, no frame asked for
    expect(host.pendingFrames).toBe(0);
    host.now += BigInt(Math.ceil(FRAME_PERIOD_MS)) * MS; // a frame period on: the meter starts afresh
    driver.wake();
    host.tick(); // 4 ms of a new 6
    expect(engine.polledAt).toHaveLength(2);
    expect(host.pendingFrames).toBe(0);
    host.now += 1n * MS; // within the same period: 8 ms of 6, the budget is spent
    driver.wake();
    host.tick();
    expect(engine.polledAt).toHaveLength(3);
    expect(host.pendingFrames).toBe(1); // the frame that resets the meter
    driver.wake();
    expect(driver.state).toBe('frame'); // the next slice waits for it
    host.now += 30n * MS; // even past a frame period: a frame asked for is waited for
    host.tick();
    expect(engine.polledAt).toHaveLength(3);
    host.frame();
    expect(engine.polledAt).toHaveLength(4);
    expect(driver.stats.animationFrames).toBe(1);
  });

  test('a visible page whose frames never come (a throttled iframe) still polls a delivery, FRAME_WAIT_MS after it at most', () => {
    const { host, engine, driver } = setup({ frameBudgetMs: 6 });
    driver.start();
    engine.work = 1;
    engine.onPoll = () => (host.now += 7n * MS); // one poll spends this frame's budget
    host.tick();
    expect(driver.state).toBe('sleeping');
    engine.work = 1; // an envelope is delivered; no animation frame ever runs from here on
    driver.wake();
    expect(driver.state).toBe('frame');
    host.tick();
    host.advance(FRAME_WAIT_MS - 1);
    expect(engine.polledAt).toHaveLength(1); // still waiting for the frame
    host.advance(1);
    expect(driver.state).toBe('tick');
    host.tick();
    expect(engine.polledAt).toHaveLength(2);
    expect(driver.state).toBe('sleeping');
    expect(driver.stats).toMatchObject({ animationFrames: 0, missedFrames: 1 });
  });

  test('after a missed frame polling is unmetered, slice after slice on ticks, until a frame comes; then the budget per frame holds again', () => {
    const { host, engine, driver } = setup({ frameBudgetMs: 6 });
    engine.work = 14;
    engine.onPoll = () => (host.now += 2n * MS);
    driver.start();
    host.tick(); // 3 polls, 6 ms: the frame's budget
    expect(driver.state).toBe('frame');
    host.advance(FRAME_WAIT_MS); // no frame came
    host.tick(); // a slice of 3 polls (its time budget), then the next at a tick, not a frame
    expect(driver.state).toBe('tick');
    host.tick();
    expect(engine.polledAt).toHaveLength(9);
    expect(driver.state).toBe('tick');
    host.frame(); // frames come again
    host.tick();
    expect(engine.polledAt).toHaveLength(12); // 3 polls: this frame's budget
    expect(driver.state).toBe('frame');
    host.frame();
    expect(engine.polledAt).toHaveLength(14);
    expect(driver.stats).toMatchObject({ missedFrames: 1, animationFrames: 1 });
    expect(driver.state).toBe('sleeping');
  });

  test('a frame that comes within FRAME_WAIT_MS runs the slice, and the wait leaves no timer behind', () => {
    const { host, engine, driver } = setup({ frameBudgetMs: 6 });
    engine.work = 4;
    engine.onPoll = () => (host.now += 2n * MS);
    driver.start();
    host.tick();
    expect(driver.state).toBe('frame');
    expect(host.pendingTimers).toBe(1); // the wait's bound
    host.advance(16);
    host.frame();
    expect(engine.polledAt).toHaveLength(4);
    expect(host.pendingTimers).toBe(0);
    host.advance(FRAME_WAIT_MS);
    expect(driver.stats).toMatchObject({ missedFrames: 0, animationFrames: 1 });
    expect(driver.state).toBe('sleeping');
  });

  test('a fast engine gets at most maxPollsPerFrame polls per slice', () => {
    const { host, engine, driver } = setup({ maxPollsPerFrame: 4 });
    engine.work = 10;
    driver.start();
    host.tick();
    expect(engine.polledAt).toHaveLength(4);
    host.tick();
    host.tick();
    expect(engine.polledAt).toHaveLength(10);
    expect(driver.state).toBe('sleeping');
  });

  test('a deadline already past counts as work', () => {
    const { host, engine, driver } = setup({ maxPollsPerFrame: 1 });
    host.now = 100n * MS;
    let rearm = true;
    engine.onPoll = () => {
      if (rearm) engine.deadline = 5n * MS; // a timer re-armed for a time already gone
      rearm = false;
    };
    driver.start();
    host.tick();
    expect(driver.state).toBe('tick');
    host.tick();
    expect(engine.polledAt).toEqual([100n * MS, 100n * MS]);
    expect(driver.state).toBe('sleeping');
  });

  test('bad bounds are refused', () => {
    const engine = new ScriptedEngine();
    expect(() => new PollDriver(engine, { frameBudgetMs: 0 })).toThrow(RangeError);
    expect(() => new PollDriver(engine, { maxPollsPerFrame: 0.5 })).toThrow(/maxPollsPerFrame/);
  });
});

describe('PollDriver start, stop and errors', () => {
  test('stop() cancels the pending tick, frame and timers; start() resumes', () => {
    const { host, engine, driver } = setup();
    engine.deadline = 20n * MS;
    driver.start();
    host.tick();
    expect(host.pendingTimers).toBe(1);
    driver.stop();
    expect(driver.running).toBe(false);
    expect(host.pendingTimers + host.pendingFrames).toBe(0);
    host.advance(100);
    host.tick();
    host.frame();
    expect(engine.polledAt).toHaveLength(1);
    driver.start();
    driver.start(); // twice is once
    driver.stop();
    host.tick(); // a cancelled tick does nothing
    expect(engine.polledAt).toHaveLength(1);
    driver.start();
    host.tick();
    expect(engine.polledAt).toHaveLength(2);
    driver.stop();
    host.setVisible(false); // no listener left behind
    expect(host.pendingTimers + host.pendingFrames).toBe(0);
  });

  test('stop() from inside poll ends the slice', () => {
    const { host, engine, driver } = setup();
    engine.work = 5;
    engine.onPoll = () => driver.stop();
    driver.start();
    host.tick();
    expect(engine.polledAt).toHaveLength(1);
    expect(host.pendingTimers + host.pendingFrames).toBe(0);
    host.tick();
    expect(engine.polledAt).toHaveLength(1);
  });

  test('an error from poll goes to onError and stops the driver by default', () => {
    const errors: unknown[] = [];
    const { host, engine, driver } = setup({ onError: (error) => errors.push(error) });
    const failure = new Error('engine broke');
    engine.work = 5;
    engine.onPoll = () => {
      throw failure;
    };
    driver.start();
    host.tick();
    expect(errors).toEqual([failure]);
    expect(driver.running).toBe(false);
    expect(driver.stats).toMatchObject({ polls: 1, errors: 1 });
    expect(host.pendingTimers + host.pendingFrames).toBe(0);
  });

  test('with stopOnError false it reports the error and polls again on the next tick', () => {
    const errors: unknown[] = [];
    const { host, engine, driver } = setup({ onError: (error) => errors.push(error), stopOnError: false });
    let failures = 2;
    engine.work = 1;
    engine.onPoll = () => {
      if (failures-- > 0) throw new Error(`failure ${failures}`);
    };
    driver.start();
    host.tick();
    host.tick();
    expect(driver.running).toBe(true);
    expect(errors.map((error) => (error as Error).message)).toEqual(['failure 1', 'failure 0']);
    host.tick();
    expect(driver.state).toBe('sleeping');
    expect(driver.stats).toMatchObject({ polls: 3, errors: 2, frames: 3 });
  });
});

describe('PollDriver when the engine or the error handler throws', () => {
  test('expiry() and hasWork() throwing are reported like poll() throwing', () => {
    const errors: unknown[] = [];
    const { host, engine, driver } = setup({ onError: (error) => errors.push(error), stopOnError: false });
    const failing = ['expiry', 'hasWork'];
    engine.expiry = () => {
      if (failing[0] === 'expiry') throw new Error(`${failing.shift()} broke`);
      return null;
    };
    engine.hasWork = () => {
      if (failing[0] === 'hasWork') throw new Error(`${failing.shift()} broke`);
      return false;
    };
    driver.start();
    host.tick();
    host.tick();
    expect(errors.map((error) => (error as Error).message)).toEqual(['expiry broke', 'hasWork broke']);
    expect(driver.state).toBe('tick');
    host.tick();
    expect(driver.state).toBe('sleeping');
  });

  test('an onError that throws leaves the driver scheduled (or stopped) as it should be', () => {
    const { host, engine, driver } = setup({
      stopOnError: false,
      onError: () => {
        throw new Error('the handler broke too');
      },
    });
    engine.onPoll = () => {
      throw new Error('engine broke');
    };
    driver.start();
    expect(() => host.tick()).toThrow('the handler broke too');
    expect(driver.state).toBe('tick');
    engine.onPoll = () => {};
    host.tick();
    expect(driver.state).toBe('sleeping');
    expect(driver.stats).toMatchObject({ polls: 2, errors: 1 });
  });

  test('onError may restart a driver that stopped on the error', () => {
    let restarted = false;
    const { host, engine, driver } = setup({
      onError: () => {
        restarted = true;
        driver.start();
      },
    });
    engine.onPoll = () => {
      if (!restarted) throw new Error('once');
    };
    driver.start();
    host.tick();
    expect(driver.state).toBe('tick');
    host.tick();
    expect(driver.state).toBe('sleeping');
    expect(engine.polledAt).toHaveLength(2);
  });
});

/**
 * The built driver in headless Chromium with its defaults: on a visible page and in a
 * module Worker (no document) it sleeps between an engine's deadlines, and on the page a
 * wake right after a delivery polls before the next animation frame.
 */
describe('PollDriver in Chromium', () => {
  /** An engine with ten deadlines 10 ms apart; resolves with the driver's stats after the last. */
  const RUN_DRIVER = `
import { PollDriver } from '/dist/driver.js';
export function runDriver() {
  return new Promise((resolve) => {
    let remaining = 10;
    let deadline = null;
    const started = performance.now();
    const driver = new PollDriver({
      poll(nowNs) {
        if (deadline !== null && deadline <= nowNs) { remaining--; deadline = null; }
        if (remaining > 0 && deadline === null) deadline = nowNs + 10_000_000n;
        if (remaining === 0) {
          driver.stop();
          resolve({ ...driver.stats, elapsedMs: performance.now() - started, hasDocument: typeof document !== 'undefined' });
        }
      },
      expiry: () => deadline,
      hasWork: () => false,
    });
    driver.start();
  });
}
/** Inside an animation frame: asks for the next frame, then delivers (wakes an idle driver);
 * resolves with the order of the wake, the poll and the next frame. */
export function wakeOrder() {
  return new Promise((resolve) => {
    const order = [];
    let work = 0;
    const driver = new PollDriver({
      poll() { if (work > 0) { work--; order.push('poll'); } },
      expiry: () => null,
      hasWork: () => work > 0,
    });
    driver.start();
    const deliver = () => {
      if (driver.state !== 'sleeping') return requestAnimationFrame(deliver);
      requestAnimationFrame(() => {
        order.push('next frame');
        driver.stop();
        resolve(order);
      });
      work = 1;
      driver.wake();
      order.push('wake');
    };
    requestAnimationFrame(deliver);
  });
}`;
  const PAGE_SCRIPT = `
import { runDriver, wakeOrder } from '/run-driver.js';
window.bbReport = (async () => {
  const page = await runDriver();
  const order = await wakeOrder();
  const worker = await new Promise((resolve) => {
    const w = new Worker('/worker.js', { type: 'module' });
    w.onmessage = (event) => resolve(event.data);
    w.onerror = (event) => resolve({ error: event.message || 'the worker failed to load' });
  });
  return { page, worker, order };
})();`;
  const WORKER_SCRIPT = `import { runDriver } from '/run-driver.js'; runDriver().then((stats) => postMessage(stats));`;
  const ROUTES: Record<string, [string, string]> = {
    '/': ['text/html', '<!doctype html><title>PollDriver</title><script type="module" src="/page.js"></script>'],
    '/page.js': ['text/javascript', PAGE_SCRIPT],
    '/worker.js': ['text/javascript', WORKER_SCRIPT],
    '/run-driver.js': ['text/javascript', RUN_DRIVER],
  };

  interface DriverReport extends PollDriverStats {
    elapsedMs: number;
    hasDocument: boolean;
  }

  /**
   * A cross-origin iframe the page does not display: Chromium draws it no frames, yet its
   * document reads as visible. The driver runs an engine of 20 polls of 2 ms each (the
   * frame budget is spent after three) and posts its stats and the frames the iframe saw.
   */
  const IFRAME_SCRIPT = `
import { PollDriver } from '/dist/driver.js';
let frames = 0;
const count = () => { frames++; requestAnimationFrame(count); };
requestAnimationFrame(count);
let work = 20;
const driver = new PollDriver({
  poll() {
    const end = performance.now() + 2;
    while (performance.now() < end);
    if (--work === 0) {
      driver.stop();
      parent.postMessage({ ...driver.stats, frames, visibility: document.visibilityState }, '*');
    }
  },
  expiry: () => null,
  hasWork: () => work > 0,
});
driver.start();`;
  const IFRAME_ROUTES: Record<string, [string, string]> = {
    '/iframe.html': ['text/html', '<!doctype html><script type="module" src="/iframe.js"></script>'],
    '/iframe.js': ['text/javascript', IFRAME_SCRIPT],
  };
  const iframeHost = (port: number): string =>
    `<!doctype html><script>addEventListener('message', (event) => (window.bbIframe = event.data));</script>` +
    `<iframe src="http://localhost:${port}/iframe.html" style="display:none"></iframe>`;

  test('in a cross-origin iframe that gets no animation frames though visible, the driver polls its work through', async () => {
    const driverJs = join(packageRoot, 'dist', 'node', 'driver.js');
    if (!existsSync(driverJs)) throw new Error(`${driverJs} is missing: run \`npm run build\` (npm test does)`);
    const server = createServer((request, response) => {
      const path = new URL(request.url ?? '/', 'http://localhost').pathname;
      const route = path === '/dist/driver.js' ? (['text/javascript', readFileSync(driverJs, 'utf8')] as const)
        : path === '/' ? (['text/html', iframeHost((server.address() as AddressInfo).port)] as const) : IFRAME_ROUTES[path];
      if (route === undefined) response.writeHead(404).end();
      else response.writeHead(200, { 'content-type': route[0] }).end(route[1]);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    try {
      const page = await browser.newPage();
      await page.goto(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
      // a driver that stalls on a frame never reports: the wait fails, naming the stall
      await page.waitForFunction('window.bbIframe !== undefined', null, { timeout: 15_000 }).catch(() => {
        throw new Error('the driver in the undisplayed iframe never finished its 20 polls: it waited for an animation frame that did not come');
      });
      const report = (await page.evaluate('window.bbIframe')) as PollDriverStats & { frames: number; visibility: string };
      expect(report.visibility).toBe('visible');
      expect(report.frames).toBe(0);
      expect(report.animationFrames).toBe(0);
      expect(report.polls).toBe(20);
      expect(report.missedFrames).toBeGreaterThanOrEqual(1);
    } finally {
      await browser.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }, 60_000);

  test('a page and a Worker sleep between deadlines; on the page a delivery is polled before the next frame', async () => {
    const driverJs = join(packageRoot, 'dist', 'node', 'driver.js');
    if (!existsSync(driverJs)) throw new Error(`${driverJs} is missing: run \`npm run build\` (npm test does)`);
    const server = createServer((request, response) => {
      const path = new URL(request.url ?? '/', 'http://localhost').pathname;
      const route = path === '/dist/driver.js' ? (['text/javascript', readFileSync(driverJs, 'utf8')] as const) : ROUTES[path];
      if (route === undefined) response.writeHead(404).end();
      else response.writeHead(200, { 'content-type': route[0] }).end(route[1]);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    try {
      const page = await browser.newPage();
      const pageErrors: string[] = [];
      page.on('pageerror', (error) => pageErrors.push(error.message));
      await page.goto(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
      await page.waitForFunction('window.bbReport !== undefined');
      const report = (await page.evaluate('window.bbReport')) as { page: DriverReport; worker: DriverReport; order: string[] };
      expect(pageErrors).toEqual([]);
      for (const where of ['page', 'worker'] as const) {
        const stats = report[where];
        expect(stats.errors, where).toBe(0);
        expect(stats.polls, where).toBeGreaterThanOrEqual(11); // the first slice and ten deadlines
        expect(stats.polls, where).toBeLessThan(40); // it slept rather than spun
        expect(stats.elapsedMs, where).toBeGreaterThanOrEqual(95);
        expect(stats.sleptMs, where).toBeGreaterThan(50);
      }
      expect(report.page.hasDocument).toBe(true);
      expect(report.worker.hasDocument).toBe(false);
      expect(report.worker.animationFrames).toBe(0);
      expect(report.order).toEqual(['wake', 'poll', 'next frame']);
    } finally {
      await browser.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }, 60_000);
});

describe('a template server on a running peer', () => {
  test('server.start() wakes the driver: the first round goes out at once, not at some later deadline', async () => {
    const { cpuMlp, federatedAveraging, loadBb, peerIdFromU64, runPeer, Dataset } = await import('../src/index.js');
    const { wasmBytes } = await import('./support.js');
    const bb = await loadBb(wasmBytes());
    const plan = federatedAveraging({ model: cpuMlp({ inputs: 2, outputs: 2 }), clients: 1, discovery: 'seats' });
    const test = Dataset.fromArrays(bb, new Float32Array([0, 0, 1, 1]), 2, new Float32Array([0, 1]));
    const server = plan.installServer(bb, { artifact: plan.compile(bb), self: peerIdFromU64(1), test, nowNs: 0n });
    const host = new FakeHost();
    const sent: string[] = [];
    const transport = {
      self: server.node.self,
      send: (to: string) => void sent.push(to),
      onEnvelope: () => () => {},
      events: { on: () => () => {} },
      peers: () => [],
      stats: () => ({ bytesOut: 0, bytesIn: 0, messagesOut: 0, messagesIn: 0 }),
      close() {},
    } as unknown as Parameters<typeof runPeer>[1];
    const peer = runPeer(server.node, transport, host.options({ requestAnimationFrame: null, visibility: null }));
    host.tick();
    expect(peer.driver.state).toBe('sleeping'); // nothing to do, no deadline: asleep until woken

    const client = peerIdFromU64(2);
    server.start([client], peer.driver.now());
    expect(peer.driver.state).toBe('tick');
    host.tick();
    host.advance(250); // the first round's tick (every 200 ms) sends the global model
    host.tick();
    expect(sent).toContain(client);
    peer.stop();
    server.node.free();
    test.free();
  });
});
