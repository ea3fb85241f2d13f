/**
 * The participation policy (js/src/phones/participation.ts) as a phone's environment drives it:
 * a battery that is not charging, a cellular link, Save-Data, a hidden page, a Worker, a
 * browser without the APIs, an hour's budget of steps spent — each gives the reason the
 * client waits, and each change of the environment reaches the app; and a peer run with
 * the policy (runPeer) trains nothing while it waits and takes part once the conditions
 * hold. The environment here is a fake (a BatteryManager, a NetworkInformation, a
 * document); docs say which real API each stands for, and js/e2e/phones.mjs runs the
 * policy in Chromium.
 */
import { afterEach, beforeAll, describe, expect, test } from 'vitest';

import {
  cpuMlp,
  Dataset,
  federatedAveraging,
  loadBb,
  ParticipationPolicy,
  peerIdFromU64,
  runPeer,
  type Bb,
  type BatteryLike,
  type ParticipationState,
  type RunningPeer,
} from '../src/index.js';
import type { Transport } from '../src/transport/types.js';
import { Emitter } from '../src/transport/emitter.js';
import type { TransportEvents } from '../src/transport/types.js';
import { wasmBytes } from './support.js';

/** A BatteryManager whose charging and level the test sets. */
class FakeBattery extends EventTarget implements BatteryLike {
  constructor(
    public charging: boolean,
    public level = 0.8,
  ) {
    super();
  }
  set(charging: boolean, level = this.level): void {
    const events = [charging !== this.charging ? 'chargingchange' : undefined, level !== this.level ? 'levelchange' : undefined];
    this.charging = charging;
    this.level = level;
    for (const type of events) if (type !== undefined) this.dispatchEvent(new Event(type));
  }
}

class FakeConnection extends EventTarget {
  constructor(
    public type: string,
    public saveData = false,
  ) {
    super();
  }
  change(type: string, saveData = this.saveData): void {
    this.type = type;
    this.saveData = saveData;
    this.dispatchEvent(new Event('change'));
  }
}

class FakeDocument extends EventTarget {
  visibilityState = 'visible';
  hide(hidden: boolean): void {
    this.visibilityState = hidden ? 'hidden' : 'visible';
    this.dispatchEvent(new Event('visibilitychange'));
  }
}

const policies: ParticipationPolicy[] = [];
afterEach(() => {
  for (const p of policies.splice(0)) p.stop();
});
async function policy(...args: Parameters<typeof ParticipationPolicy.start>): Promise<ParticipationPolicy> {
  const p = await ParticipationPolicy.start(...args);
  policies.push(p);
  return p;
}

describe('a phone that is not charging', () => {
  test('waits with the reason, and takes part as soon as it is plugged in', async () => {
    const battery = new FakeBattery(false);
    const p = await policy({ navigator: { getBattery: async () => battery }, document: null });
    expect(p.state).toMatchObject({ participating: false, waiting: ['not-charging'], charging: false, visible: 'worker' });
    const seen: ParticipationState[] = [];
    p.onChange((s) => seen.push(s));
    battery.set(true);
    expect(p.state.participating).toBe(true);
    expect(seen.map((s) => s.waiting)).toEqual([[]]);
    battery.set(false);
    expect(seen.at(-1)!.waiting).toEqual(['not-charging']);
  });

  test('with minBatteryLevel, waits on a low battery unless charging', async () => {
    const battery = new FakeBattery(false, 0.15);
    const p = await policy({ charging: false, minBatteryLevel: 0.3, navigator: { getBattery: async () => battery }, document: null });
    expect(p.state.waiting).toEqual(['battery-low']);
    battery.set(true);
    expect(p.state.participating).toBe(true);
  });
});

describe('a browser without the APIs', () => {
  test('takes part by default, and waits with unknown: wait', async () => {
    const open = await policy({ navigator: {}, document: null });
    expect(open.state).toMatchObject({ participating: true, charging: 'unknown', link: 'unknown', saveData: 'unknown' });
    const strict = await policy({ navigator: {}, document: null, unknown: 'wait' });
    expect(strict.state.waiting).toEqual(['not-charging', 'metered', 'save-data']);
    const none = await policy({ navigator: null, document: null });
    expect(none.state.participating).toBe(true);
  });

  test('a Battery API that refuses (a permissions policy) leaves charging unknown', async () => {
    const p = await policy({ navigator: { getBattery: () => Promise.reject(new Error('not allowed')) }, document: null });
    expect(p.state.charging).toBe('unknown');
    expect(p.state.participating).toBe(true);
  });
});

describe('the link', () => {
  test('a cellular link and Save-Data each make it wait; wifi does not', async () => {
    const connection = new FakeConnection('cellular');
    const p = await policy({ charging: false, navigator: { connection }, document: null });
    expect(p.state.waiting).toEqual(['metered']);
    connection.change('wifi', true);
    expect(p.state.waiting).toEqual(['save-data']);
    connection.change('wifi', false);
    expect(p.state.participating).toBe(true);
    const anyLink = await policy({ charging: false, unmetered: false, respectSaveData: false, navigator: { connection: new FakeConnection('cellular', true) }, document: null });
    expect(anyLink.state.participating).toBe(true);
  });
});

describe('visibility', () => {
  test('a hidden page waits when the policy asks for a visible one; a Worker runs', async () => {
    const doc = new FakeDocument();
    const p = await policy({ charging: false, visible: true, navigator: null, document: doc });
    expect(p.state.participating).toBe(true);
    doc.hide(true);
    expect(p.state.waiting).toEqual(['hidden']);
    const background = await policy({ charging: false, navigator: null, document: doc });
    expect(background.state.participating).toBe(true);
    const worker = await policy({ charging: false, visible: true, navigator: null, document: null });
    expect(worker.state).toMatchObject({ participating: true, visible: 'worker' });
  });
});

describe('the budget', () => {
  test('an hour of steps spent: waits until the oldest work leaves the hour', async () => {
    let now = 1_000_000;
    const timers: { at: number; run: () => void }[] = [];
    const p = await policy({
      charging: false, navigator: null, document: null, budget: { stepsPerHour: 100 },
      nowMs: () => now,
      setTimeout: (run, ms) => timers.push({ at: now + ms, run }),
      clearTimeout: () => timers.splice(0),
    });
    p.record(60, 1);
    now += 10 * 60_000;
    p.record(50, 1);
    expect(p.state.waiting).toEqual(['budget']);
    expect(p.state.budget).toMatchObject({ steps: 110, resumesAtMs: 1_000_000 + 3_600_000 });
    // the timer the policy set fires when the first 60 steps leave the hour
    now = timers.at(-1)!.at;
    timers.at(-1)!.run();
    expect(p.state.participating).toBe(true);
    expect(p.state.budget.steps).toBe(50);
  });

  test('seconds per hour count as well, and pause() waits whatever the rest says', async () => {
    const p = await policy({ charging: false, navigator: null, document: null, budget: { secondsPerHour: 2 } });
    p.record(10, 2.5);
    expect(p.state.waiting).toEqual(['budget']);
    const q = await policy({ charging: false, navigator: null, document: null });
    q.pause();
    expect(q.state.waiting).toEqual(['paused']);
    q.resume();
    expect(q.state.participating).toBe(true);
  });

  test('a budget or battery level out of range is refused', async () => {
    await expect(ParticipationPolicy.start({ budget: { stepsPerHour: 0 } })).rejects.toThrow(/stepsPerHour/);
    await expect(ParticipationPolicy.start({ minBatteryLevel: 2 })).rejects.toThrow(/minBatteryLevel/);
  });
});

// ---- a peer run with the policy ------------------------------------------------------------

/** Transports of one process: what one sends, the other receives on the next tick. */
function linkedTransports(ids: readonly string[]): Transport[] {
  const handlers = new Map<string, (from: string, bytes: Uint8Array) => void>();
  return ids.map((self) => ({
    self,
    send(to: string, bytes: Uint8Array) {
      const copy = bytes.slice();
      setTimeout(() => handlers.get(to)?.(self, copy), 0);
    },
    onEnvelope(handler: (from: string, bytes: Uint8Array) => void) {
      handlers.set(self, handler);
      return () => handlers.delete(self);
    },
    events: new Emitter<TransportEvents>(),
    peers: () => ids.filter((p) => p !== self),
    stats: () => ({ bytesIn: 0, bytesOut: 0, messagesIn: 0, messagesOut: 0 }),
    close() {},
  }));
}

async function until(what: string, done: () => boolean): Promise<void> {
  for (let i = 0; i < 2000 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  expect(done(), what).toBe(true);
}

describe('a peer run with the policy', () => {
  let bb: Bb;
  beforeAll(async () => {
    bb = await loadBb(wasmBytes());
  });

  test('trains nothing while not charging, and joins the rounds once plugged in', async () => {
    const points = (seed: number): Dataset => {
      const x = new Float32Array(200);
      const y = new Float32Array(100);
      for (let r = 0; r < 100; r++) {
        y[r] = r % 2;
        x[2 * r] = (r % 2 ? 4 : 2) + ((seed * 7 + r * 13) % 10) / 10;
        x[2 * r + 1] = (r % 2 ? 4 : 2) + ((seed * 3 + r * 7) % 10) / 10;
      }
      return Dataset.fromArrays(bb, x, 2, y);
    };
    const plan = federatedAveraging({ model: cpuMlp({ inputs: 2, outputs: 2 }), clients: 2, quorum: 1, deadlineMs: 100, roundMs: 20, registryTtlMs: 2000 });
    const artifact = plan.compile(bb);
    const ids = [1, 2, 3].map((i) => peerIdFromU64(i));
    const server = plan.installServer(bb, { artifact, self: ids[0]!, test: points(9) });
    const plugged = plan.installClient(bb, { artifact, self: ids[1]!, server: ids[0]!, data: points(1) });
    const phone = plan.installClient(bb, { artifact, self: ids[2]!, server: ids[0]!, data: points(2) });
    const battery = new FakeBattery(false);
    const p = await policy({ navigator: { getBattery: async () => battery }, document: null });
    const [ts, tp, tq] = linkedTransports(ids);
    let round = 0;
    server.onRound((r) => (round = r.round));
    const running: RunningPeer[] = [runPeer(server.node, ts!), runPeer(plugged, tp!), runPeer(phone, tq!, { participation: p })];
    try {
      server.start();
      await until('five rounds', () => round >= 5);
      expect(phone.counter('train.steps')).toBe(0n);
      expect(running[2]!.driver.state).toBe('stopped');
      expect(plugged.counter('train.steps')).toBeGreaterThan(0n);
      battery.set(true);
      await until('the phone to train', () => phone.counter('train.steps') > 0n);
      expect(p.state.participating).toBe(true);
    } finally {
      for (const r of running) r.stop();
      for (const n of [server.node, plugged, phone]) n.free();
    }
  });
});
