/**
 * federatedAveraging with secure aggregation (`secure: { threshold, shares }`), as
 * federations of bb.wasm nodes on a test clock (LocalNetwork): every round is a SecAgg+ sum
 * that gives the plain FedAvg model within the quantisation, a client that stops mid-round
 * (after masking) leaves the round closing with its update in the sum, too many stopping
 * abandons the round without moving the model, no update crosses the network in the clear,
 * and bad options are refused by name.
 */
import { beforeAll, describe, expect, test } from 'vitest';

import {
  BbError,
  componentModel,
  cpuMlp,
  federatedAveraging,
  loadBb,
  LocalNetwork,
  peerIdFromU64,
  type Bb,
  type BbNode,
  type ComponentContext,
  type FederatedAveragingOptions,
  type HostTensor,
  type RoundReport,
} from '../src/index.js';
import { LogisticRegression, twoBlobs, wasmBytes } from './support.js';

let bb: Bb;
beforeAll(async () => {
  bb = await loadBb(wasmBytes());
});

const MS = 1_000_000n;

/** A logistic regression whose Fit moves every parameter by a per-client step: client k (peer id k + 1) by 0.01 × k. */
function stepping(): FederatedAveragingOptions['model'] {
  const clientOf = new Map(Array.from({ length: 16 }, (_, k) => [peerIdFromU64(k + 2), k + 1] as const));
  return componentModel('Stepping', () => {
    const model = new LogisticRegression();
    return Object.assign(model, {
      fit(params: HostTensor, context: ComponentContext) {
        const k = clientOf.get(context.self) ?? 0;
        return { trained: { ...params, dtype: 'float' as const, data: (params.data as Float32Array).map((w) => w + 0.01 * k) }, samples: 1 };
      },
    });
  });
}

interface Run {
  reports: RoundReport[];
  globals: Float32Array[];
  counters: Map<string, bigint>;
  /** Every envelope a client sent the server, as delivered. */
  uploads: Uint8Array[];
  /** Clients stopped. */
  stopped: number;
}

/**
 * A federation of `clients` run until `rounds` reports; `stop(k)` is how many envelopes
 * client k (1-based) delivers to the server before its node is freed (undefined: never).
 */
function federate(options: Omit<FederatedAveragingOptions, 'clients'>, clients: number, rounds: number, stop: (k: number) => number | undefined = () => undefined): Run {
  const plan = federatedAveraging({ clients, deadlineMs: 500, fitSteps: 5, ...options });
  const artifact = plan.compile(bb);
  const test = twoBlobs(bb, 100, 99);
  const server = plan.installServer(bb, { artifact, self: peerIdFromU64(1), test, nowNs: 0n, seed: 1 });
  const nodes: BbNode[] = [server.node];
  for (let k = 0; k < clients; k++) {
    nodes.push(plan.installClient(bb, { artifact, self: peerIdFromU64(k + 2), server: server.node.self, data: twoBlobs(bb, 50, k + 7), nowNs: 0n, seed: k + 2 }));
  }
  const run: Run = { reports: [], globals: [], counters: new Map(), uploads: [], stopped: 0 };
  const delivered = new Map<string, number>();
  const stopping = new Set<BbNode>();
  const network = new LocalNetwork(nodes, {
    onDeliver(to, from, bytes) {
      if (to !== server.node.self) return;
      run.uploads.push(bytes);
      const count = (delivered.get(from) ?? 0) + 1;
      delivered.set(from, count);
      const k = nodes.findIndex((n) => n.self === from);
      if (k > 0 && count === stop(k)) stopping.add(nodes[k]!);
    },
  });
  server.onRound((report) => {
    run.reports.push(report);
    run.globals.push(server.parameters()!);
  });
  server.start(nodes.slice(1).map((n) => n.self), 0n);
  // 100 s of clock: a stage waits out its deadline (30 s) for a client that stopped
  for (let t = 1n; t < 5000n && run.reports.length <= rounds; t++) {
    network.poll(t * 20n * MS);
    for (const node of stopping) {
      if (node.freed) continue;
      node.free();
      run.stopped++;
    }
  }
  for (const name of ['fedavg.secagg_rounds', 'fedavg.secagg_summed', 'fedavg.secagg_aborted', 'fedavg.rounds_abandoned', 'fedavg.refused_plain']) {
    run.counters.set(name, server.node.counter(name));
  }
  network.free();
  test.free();
  return run;
}

const moved = (a: Float32Array, b: Float32Array): number[] => [...a].map((x, i) => x - b[i]!);
/** The quantisation of a sum of n: one ring step (16 / 2^22) per client, over the n weights. */
const QUANT = 16 / 2 ** 22;

describe('federatedAveraging with secure', () => {
  test('every round is a SecAgg+ sum: the model moves by the mean step, within the quantisation', () => {
    const run = federate({ model: stepping(), secure: {} }, 4, 3);
    expect(run.reports.length).toBeGreaterThan(3);
    expect(run.reports[0]!.secure).toEqual({ summed: 0 });
    for (let r = 1; r < run.reports.length; r++) {
      expect(run.reports[r]!.secure).toEqual({ summed: 4 });
      // clients 1..4 step by 0.01 k: the mean is 0.025
      for (const d of moved(run.globals[r]!, run.globals[r - 1]!)) expect(Math.abs(d - 0.025)).toBeLessThanOrEqual(QUANT + 1e-6);
    }
    expect(run.counters.get('fedavg.refused_plain')).toBe(0n);
  });

  test('a client that stops mid-round, after masking, leaves the round closing with its step in the sum', () => {
    // with seats (no registry traffic) client 2's 4th envelope is its masked vector, after its join, keys and shares
    const run = federate({ model: stepping(), discovery: 'seats', secure: { threshold: 2, shares: 3 } }, 4, 1, (k) => (k === 2 ? 4 : undefined));
    expect(run.reports.length).toBeGreaterThan(1);
    expect(run.reports[1]!.secure).toEqual({ summed: 4 });
    for (const d of moved(run.globals[1]!, run.globals[0]!)) expect(Math.abs(d - 0.025)).toBeLessThanOrEqual(QUANT + 1e-6);
    expect(run.stopped).toBe(1);
    expect(run.counters.get('fedavg.secagg_aborted')).toBe(0n);
  });

  test('too many stopping after masking: below the threshold the round is abandoned and the model does not move', () => {
    // 3 of 4 stop after masking; the one left holds fewer shares than the threshold of 3
    const run = federate({ model: stepping(), discovery: 'seats', secure: { threshold: 3, shares: 3 } }, 4, 1, (k) => (k <= 3 ? 4 : undefined));
    expect(run.stopped).toBe(3);
    expect(run.counters.get('fedavg.secagg_aborted')).toBe(1n);
    expect(run.counters.get('fedavg.secagg_rounds')).toBe(0n);
    expect(run.reports.length).toBeGreaterThan(1);
    expect(run.reports[1]!.secure).toEqual({ summed: 0 });
    expect([...run.globals[1]!]).toEqual([...run.globals[0]!]);
  });

  test('no update crosses the network in the clear', () => {
    // a client's trained parameters, as float32 bytes, appear in none of its envelopes
    const run = federate({ model: stepping(), secure: {} }, 3, 2);
    const trained = new Uint8Array(Float32Array.from(run.globals[0]!, (w) => w + 0.01).buffer);
    const contains = (hay: Uint8Array, needle: Uint8Array): boolean => {
      outer: for (let i = 0; i + needle.length <= hay.length; i++) {
        for (let j = 0; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
        return true;
      }
      return false;
    };
    expect(run.uploads.length).toBeGreaterThan(0);
    for (const bytes of run.uploads) expect(contains(bytes, trained.subarray(0, 8))).toBe(false);
  });

  test('bad options are refused by name', () => {
    const model = cpuMlp({ inputs: 2, outputs: 2 });
    const bad: [FederatedAveragingOptions, string][] = [
      [{ model, clients: 4, secure: { threshold: -1 } }, 'secure.threshold'],
      [{ model, clients: 4, secure: { shares: 1.5 } }, 'secure.shares'],
      [{ model, clients: 4, secure: null as unknown as object }, 'secure is'],
      [{ model, clients: 4, secure: {}, aggregator: 'median' }, "aggregator 'fedavg'"],
      [{ model, clients: 4, secure: {}, codec: 'f16' }, 'compress'],
      [{ model, clients: 4, secure: {}, mode: 'async', discovery: 'seats' }, 'async'],
      [{ model, clients: 4, secure: {}, dp: { clip: { initial: 1 }, noiseMultiplier: 1, delta: 1e-5 } }, 'fixed dp.clip'],
      [{ model, clients: 4, secure: {}, dp: { clip: 1, noiseMultiplier: 1, delta: 1e-5, sampleRate: 0.5 } }, 'dp.sampleRate'],
    ];
    for (const [options, message] of bad) {
      expect(() => federatedAveraging(options)).toThrow(BbError);
      expect(() => federatedAveraging(options)).toThrow(message);
    }
  });
});
