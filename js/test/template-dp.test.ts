/**
 * federatedAveraging with differential privacy (`dp: { clip, noiseMultiplier, delta }`),
 * as federations of nodes on a test clock (LocalNetwork): each client's update is clipped
 * (a client that moves its model by 1000 moves the global model by at most the clip), each
 * round reports the ε the Gaussian mechanism spent — checked against the closed form for
 * q = 1 — no noise and a clip nothing reaches is the plain FedAvg, and bad options are
 * refused by name.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { beforeAll, describe, expect, test } from 'vitest';

import {
  BbError,
  componentModel,
  cpuMlp,
  dpEpsilon,
  federatedAveraging,
  loadBb,
  LocalNetwork,
  onnxModel,
  peerIdFromU64,
  servedPlan,
  type Bb,
  type BbNode,
  type ComponentContext,
  type DpOptions,
  type FederatedAveragingOptions,
  type HostTensor,
  type RoundReport,
} from '../src/index.js';
import { parseServeArgs } from '../src/serve/config.js';
import { LogisticRegression, packageRoot, twoBlobs, wasmBytes } from './support.js';

let bb: Bb;
beforeAll(async () => {
  bb = await loadBb(wasmBytes());
});

const MS = 1_000_000n;
const LOGISTIC = cpuMlp({ inputs: 2, outputs: 2, lr: 0.1 });

interface Run {
  reports: RoundReport[];
  /** The global model after each report. */
  globals: Float32Array[];
  counter(name: string): bigint;
}

/** A federation of `clients` on the two blobs, run until `rounds` reports (seeded nodes: runs repeat). */
function federate(options: Omit<FederatedAveragingOptions, 'clients'>, clients: number, rounds: number): Run {
  const plan = federatedAveraging({ clients, deadlineMs: 500, fitSteps: 5, ...options });
  const artifact = plan.compile(bb);
  const test = twoBlobs(bb, 200, 99);
  const server = plan.installServer(bb, { artifact, self: peerIdFromU64(1), test, nowNs: 0n, seed: 1 });
  const nodes: BbNode[] = [server.node];
  for (let k = 0; k < clients; k++) {
    const data = twoBlobs(bb, 300, k + 7);
    nodes.push(plan.installClient(bb, { artifact, self: peerIdFromU64(k + 2), server: server.node.self, data, nowNs: 0n, seed: k + 2 }));
  }
  const network = new LocalNetwork(nodes);
  const run: Run = { reports: [], globals: [], counter: (name) => server.node.counter(name) };
  server.onRound((report) => {
    run.reports.push(report);
    run.globals.push(server.parameters()!);
  });
  server.start(nodes.slice(1).map((n) => n.self), 0n);
  for (let t = 1n; t < 4000n && run.reports.length <= rounds; t++) network.poll(t * 5n * MS);
  const counters = new Map(['fedavg.dp_rounds', 'fedavg.norm_clipped', 'fedavg.rounds_abandoned', 'fedavg.refused_unsampled'].map((name) => [name, server.node.counter(name)]));
  run.counter = (name) => counters.get(name)!;
  network.free();
  test.free();
  return run;
}

const distance = (a: Float32Array, b: Float32Array): number => Math.hypot(...a.map((x, i) => x - b[i]!));

/** The logistic regression, but the second client created (the server's is the first) sends its model moved by 1000. */
function withLiar(): FederatedAveragingOptions['model'] {
  let created = 0;
  return componentModel('MaybeLying', () => {
    const model = new LogisticRegression();
    if (++created !== 3) return model;
    return Object.assign(model, {
      fit(params: HostTensor, context: ComponentContext) {
        const { trained, samples } = LogisticRegression.prototype.fit.call(model, params, context);
        return { trained: { ...trained, data: trained.data.map((w) => w + 1000) }, samples };
      },
    });
  });
}

describe('federatedAveraging with dp', () => {
  test('each update is clipped: a client moving its model by 1000 moves the global model by at most the clip', () => {
    const clip = 0.25;
    const run = federate({ model: withLiar(), dp: { clip, noiseMultiplier: 0, delta: 1e-5 } }, 3, 8);
    expect(run.reports.length).toBeGreaterThan(8);
    for (let r = 1; r < run.globals.length; r++) {
      // the mean of three updates each within the clip of the model they started from
      expect(distance(run.globals[r]!, run.globals[r - 1]!)).toBeLessThanOrEqual(clip * (1 + 1e-6));
    }
    // the liar was clipped every round, and never left out
    expect(run.counter('fedavg.norm_clipped')).toBeGreaterThanOrEqual(8n);
    expect(run.reports.at(-1)!.epsilon).toBe(Infinity);
  });

  test('each round reports ε: the accountant over the rounds run, at q = 1', () => {
    const sigma = 1.1;
    const delta = 1e-5;
    const run = federate({ model: LOGISTIC, dp: { clip: 1, noiseMultiplier: sigma, delta } }, 3, 6);
    expect(run.counter('fedavg.rounds_abandoned')).toBe(0n);
    expect(run.reports[0]!.round).toBe(0);
    expect(run.reports[0]!.epsilon).toBe(0);
    for (const report of run.reports.slice(1)) {
      // every client in every round: T compositions of the Gaussian mechanism, RDP T·α / (2σ²)
      const T = report.round;
      let closed = Infinity;
      for (let alpha = 1.001; alpha < 2000; alpha *= 1.001) closed = Math.min(closed, (T * alpha) / (2 * sigma * sigma) + Math.log(1 / delta) / (alpha - 1));
      expect(report.epsilon).toBe(dpEpsilon(bb, { q: 1, sigma, steps: T, delta }).epsilon);
      // the accountant minimises over its orders: at the closed form's minimum or a little above
      expect(report.epsilon!).toBeGreaterThanOrEqual(closed * (1 - 1e-9));
      expect(report.epsilon!).toBeLessThanOrEqual(closed * 1.01);
    }
    expect(run.counter('fedavg.dp_rounds')).toBe(BigInt(run.reports.at(-1)!.round));
  });

  test('a server restored from its snapshot goes on from the privacy it spent', () => {
    const dp = { clip: 1, noiseMultiplier: 2, delta: 1e-6 };
    const plan = federatedAveraging({ model: LOGISTIC, clients: 2, deadlineMs: 500, fitSteps: 5, dp });
    const artifact = plan.compile(bb);
    const test = twoBlobs(bb, 200, 99);
    const self = peerIdFromU64(1);
    const first = plan.installServer(bb, { artifact, self, test, nowNs: 0n, seed: 1 });
    const clients = [0, 1].map((k) => plan.installClient(bb, { artifact, self: peerIdFromU64(k + 2), server: self, data: twoBlobs(bb, 300, k + 7), nowNs: 0n, seed: k + 2 }));
    const network = new LocalNetwork([first.node, ...clients]);
    const reports: RoundReport[] = [];
    first.onRound((report) => reports.push(report));
    first.start([], 0n);
    let now = 0n;
    while (now < 20_000n * MS && (reports.length < 4 || network.hasWork())) network.poll((now += 5n * MS));
    const spent = reports.at(-1)!;
    expect(spent.round).toBeGreaterThanOrEqual(3);
    const moved = plan.installServer(bb, { artifact, self, test, snapshot: first.node.snapshot() });
    first.node.free();
    network.add(moved.node);
    const later: RoundReport[] = [];
    moved.onRound((report) => later.push(report));
    while (now < 40_000n * MS && later.length < 2) network.poll((now += 5n * MS));
    network.free();
    test.free();
    expect(later.length).toBe(2);
    for (const report of later) {
      expect(report.round).toBeGreaterThan(spent.round);
      expect(report.epsilon).toBe(dpEpsilon(bb, { q: 1, sigma: 2, steps: report.round, delta: 1e-6 }).epsilon);
    }
  });

  test('without noise and with a clip nothing reaches, it is the plain FedAvg', () => {
    const plain = federate({ model: LOGISTIC }, 3, 6);
    const dp = federate({ model: LOGISTIC, dp: { clip: 1e6, noiseMultiplier: 0, delta: 1e-5 } }, 3, 6);
    expect(dp.counter('fedavg.norm_clipped')).toBe(0n);
    for (let r = 0; r <= 6; r++) {
      const a = plain.globals[r]!;
      const b = dp.globals[r]!;
      for (let i = 0; i < a.length; i++) expect(Math.abs(a[i]! - b[i]!)).toBeLessThanOrEqual(1e-6 * Math.max(1, Math.abs(a[i]!)));
    }
    // with noise the same federation's model is another
    const noised = federate({ model: LOGISTIC, dp: { clip: 1, noiseMultiplier: 0.5, delta: 1e-5 } }, 3, 2);
    expect(distance(noised.globals[2]!, plain.globals[2]!)).toBeGreaterThan(1e-4);
  });

  test('adaptive clipping: the liar moves the model by at most the clip, which moves by at most exp(η γ) a round; ε is the noise multiplier\'s', () => {
    const initial = 0.25;
    const run = federate({ model: withLiar(), dp: { clip: { initial, quantile: 0.5, learningRate: 0.2 }, noiseMultiplier: 0, delta: 1e-5 } }, 3, 6);
    expect(run.reports.length).toBeGreaterThan(6);
    for (let r = 1; r < run.globals.length; r++) {
      // round r's clip is at most initial × exp(0.2 × 0.5)^(r - 1): no update moves it further
      expect(distance(run.globals[r]!, run.globals[r - 1]!)).toBeLessThanOrEqual(initial * Math.exp(0.1 * (r - 1)) * (1 + 1e-6));
    }
    expect(run.counter('fedavg.norm_clipped')).toBeGreaterThanOrEqual(6n);
    const sigma = 1.1;
    const noised = federate({ model: LOGISTIC, dp: { clip: { initial: 1 }, noiseMultiplier: sigma, delta: 1e-5 } }, 3, 4);
    for (const report of noised.reports.slice(1)) {
      // the count's noise is paid for by the updates' larger multiplier: ε stays σ's
      expect(report.epsilon).toBe(dpEpsilon(bb, { q: 1, sigma, steps: report.round, delta: 1e-5 }).epsilon);
    }
  });

  test('Poisson sampling: ε accounted at q, below q = 1\'s; unsampled updates refused; every round spends', () => {
    const sigma = 1.1;
    const q = 0.5;
    const run = federate({ model: LOGISTIC, dp: { clip: 1, noiseMultiplier: sigma, delta: 1e-5, sampleRate: q } }, 4, 6);
    expect(run.reports.length).toBeGreaterThan(6);
    for (const report of run.reports.slice(1)) {
      expect(report.epsilon).toBe(dpEpsilon(bb, { q, sigma, steps: report.round, delta: 1e-5 }).epsilon);
      expect(report.epsilon!).toBeLessThan(dpEpsilon(bb, { q: 1, sigma, steps: report.round, delta: 1e-5 }).epsilon);
    }
    // a round with no sampled update still spends (and is given out noised): no round is lost
    expect(run.counter('fedavg.dp_rounds')).toBe(BigInt(run.reports.at(-1)!.round));
    expect(run.counter('fedavg.refused_unsampled')).toBeGreaterThan(0n);
  });

  test('bad dp options are refused, naming the field', () => {
    const bad: [unknown, RegExp][] = [
      [{ clip: 0, noiseMultiplier: 1, delta: 1e-5 }, /dp\.clip must be a finite number > 0, got 0/],
      [{ clip: Number.NaN, noiseMultiplier: 1, delta: 1e-5 }, /dp\.clip/],
      [{ clip: 1, noiseMultiplier: -1, delta: 1e-5 }, /dp\.noiseMultiplier must be a finite number >= 0, got -1/],
      [{ clip: 1, noiseMultiplier: Infinity, delta: 1e-5 }, /dp\.noiseMultiplier/],
      [{ clip: 1, noiseMultiplier: 1, delta: 1 }, /dp\.delta must be in \(0, 1\), got 1/],
      [{ clip: 1, noiseMultiplier: 1 }, /dp\.delta/],
      [null, /dp is \{ clip, noiseMultiplier, delta \}/],
      [{ clip: { initial: 0 }, noiseMultiplier: 1, delta: 1e-5 }, /dp\.clip\.initial must be a finite number > 0, got 0/],
      [{ clip: { initial: 1, quantile: 1 }, noiseMultiplier: 1, delta: 1e-5 }, /dp\.clip\.quantile must be in \(0, 1\), got 1/],
      [{ clip: { initial: 1, learningRate: 0 }, noiseMultiplier: 1, delta: 1e-5 }, /dp\.clip\.learningRate/],
      [{ clip: 1, noiseMultiplier: 1, delta: 1e-5, sampleRate: 0 }, /dp\.sampleRate must be in \(0, 1\], got 0/],
      [{ clip: 1, noiseMultiplier: 1, delta: 1e-5, sampleRate: 1.5 }, /dp\.sampleRate/],
    ];
    for (const [dp, message] of bad) {
      const make = (): unknown => federatedAveraging({ model: LOGISTIC, clients: 2, dp: dp as DpOptions });
      expect(make).toThrow(BbError);
      expect(make).toThrow(message);
    }
    for (const aggregator of ['median', 'trimmed-mean', 'centered-clipping'] as const) {
      expect(() => federatedAveraging({ model: LOGISTIC, clients: 2, aggregator, dp: { clip: 1, noiseMultiplier: 1, delta: 1e-5 } })).toThrow(
        new RegExp(`dp needs aggregator 'fedavg' \\(DP-FedAvg\\), not '${aggregator}'`),
      );
    }
  });
});

describe('bytesandbrains serve and its served plan carry dp', () => {
  test('--dp-clip, --dp-noise and --dp-delta reach the plan its clients build, which is the template\'s', () => {
    const config = parseServeArgs(['--model', 'm.onnx', '--test', 't.csv', '--dp-clip', '0.5', '--dp-noise', '1.1'], () => '');
    expect(config !== 'help' && config.dp).toEqual({ clip: 0.5, noiseMultiplier: 1.1, delta: 1e-5 });
    const model = new Uint8Array(readFileSync(join(packageRoot, 'models', 'digits_mlp.onnx')));
    const dp = { clip: 0.5, noiseMultiplier: 1.1, delta: 1e-5 };
    const description = { template: 'federatedAveraging', name: 'Federation', clients: 4, quorum: 2, deadlineMs: 1000, roundMs: 200, training: {} } as const;
    const served = servedPlan({ ...description, dp }, model).compile(bb);
    const direct = federatedAveraging({ name: 'Federation', model: onnxModel(model, {}), clients: 4, quorum: 2, deadlineMs: 1000, roundMs: 200, dp }).compile(bb);
    expect(Buffer.from(served).equals(Buffer.from(direct))).toBe(true);
    // the noise is in the artifact: without dp it is another
    expect(Buffer.from(servedPlan(description, model).compile(bb)).equals(Buffer.from(direct))).toBe(false);
    expect(() => servedPlan({ ...description, dp: { ...dp, clip: -1 } }, model)).toThrow(/dp\.clip must be a finite number > 0, got -1/);
  });

  test('--dp-clip-quantile makes the clip adaptive and --dp-sample-rate samples; both need --dp-clip', () => {
    const read = (...flags: string[]): unknown => {
      const config = parseServeArgs(['--model', 'm.onnx', '--test', 't.csv', ...flags], () => '');
      return config !== 'help' && config.dp;
    };
    expect(read('--dp-clip', '0.5', '--dp-noise', '1.1', '--dp-clip-quantile', '0.6', '--dp-sample-rate', '0.1')).toEqual({
      clip: { initial: 0.5, quantile: 0.6 },
      noiseMultiplier: 1.1,
      delta: 1e-5,
      sampleRate: 0.1,
    });
    expect(() => read('--dp-clip-quantile', '0.5')).toThrow(/--dp-clip-quantile and --dp-sample-rate need --dp-clip and --dp-noise/);
    expect(() => read('--dp-clip', '1', '--dp-noise', '1', '--dp-clip-quantile', '1')).toThrow(/--dp-clip-quantile must be in \(0, 1\)/);
    expect(() => read('--dp-clip', '1', '--dp-noise', '1', '--dp-sample-rate', '2')).toThrow(/--dp-sample-rate must be in \(0, 1\]/);
  });
});
