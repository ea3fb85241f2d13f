/**
 * The templates (js/src/templates), run as federations of nodes in one process on a test
 * clock (LocalNetwork): a logistic regression on 2-D points learnt by federated averaging —
 * with the registry or seats, FedAvg, the median or the trimmed mean, float16 or 8-bit
 * updates, CpuMlp or a Model written in TypeScript — by gossip, and scored by federated
 * evaluation; the digits helpers compile the C examples' artifacts (an ONNX model in
 * every template: template-onnx.test.ts).
 */
import { beforeAll, describe, expect, test } from 'vitest';

import {
  Compiler,
  componentModel,
  cpuMlp,
  Dataset,
  federatedAveraging,
  federatedEvaluation,
  gossipLearning,
  loadBb,
  LocalNetwork,
  peerIdFromU64,
  type Bb,
  type BbNode,
  type RoundReport,
} from '../src/index.js';
import { compileFederatedDigits, gossipDigits } from '../src/examples/index.js';
import { LogisticRegression, twoBlobs, wasmBytes } from './support.js';

let bb: Bb;
beforeAll(async () => {
  bb = await loadBb(wasmBytes());
});

const MS = 1_000_000n;

/** The two Gaussian blobs of support.ts: an untrained linear model scores about half. */
const dataset = (rows: number, seed: number): Dataset => twoBlobs(bb, rows, seed);

/** Runs the network on a 5 ms clock until `done` or the time runs out; the last report. */
function runUntil(network: LocalNetwork, done: () => boolean, limitMs = 20_000): void {
  for (let t = 1n; t * 5n < BigInt(limitMs) && !done(); t++) network.poll(t * 5n * MS);
}

const LOGISTIC = cpuMlp({ inputs: 2, outputs: 2, lr: 0.1 });

interface Federation {
  first: RoundReport | undefined;
  last: RoundReport;
  network: LocalNetwork;
}

function federate(plan: ReturnType<typeof federatedAveraging>, clients: number, rounds: number): Federation {
  const artifact = plan.compile(bb);
  const test = dataset(200, 99);
  const server = plan.installServer(bb, { artifact, self: peerIdFromU64(1), test, nowNs: 0n });
  const nodes: BbNode[] = [server.node];
  for (let k = 0; k < clients; k++) {
    nodes.push(plan.installClient(bb, { artifact, self: peerIdFromU64(k + 2), server: server.node.self, data: dataset(300, k + 7), nowNs: 0n }));
  }
  const network = new LocalNetwork(nodes);
  const federation: Federation = { first: undefined, last: { round: 0, accuracy: 0 }, network };
  server.onRound((report) => {
    federation.first ??= report;
    federation.last = report;
  });
  server.start(nodes.slice(1).map((n) => n.self), 0n);
  runUntil(network, () => federation.last.round >= rounds);
  return federation;
}

describe('federatedAveraging on 2-D points', () => {
  for (const [what, options] of [
    ['registry, FedAvg', {}],
    ['seats, FedAvg, float16 updates', { discovery: 'seats', codec: 'f16' }],
    ['registry, median, 8-bit updates', { aggregator: 'median', codec: 'u8' }],
    ['seats, trimmed mean', { discovery: 'seats', aggregator: 'trimmed-mean', trim: 0.25 }],
  ] as const) {
    test(`${what}: the global model goes from chance to 90 %`, () => {
      const plan = federatedAveraging({ model: LOGISTIC, clients: 3, deadlineMs: 500, fitSteps: 5, ...options });
      const { first, last, network } = federate(plan, 3, 14);
      const server = network.nodes.get(peerIdFromU64(1))!;
      // FedAvg closes its rounds on the clients' updates (none abandoned at the deadline)
      if (!('aggregator' in options)) expect(server.counter('fedavg.rounds_closed')).toBeGreaterThanOrEqual(13n);
      network.free();
      expect(first?.accuracy).toBeLessThan(0.75);
      expect(last.round).toBeGreaterThanOrEqual(14);
      expect(last.accuracy).toBeGreaterThanOrEqual(0.9);
    });
  }

  test('with the registry, the server learns its clients as they announce themselves', () => {
    const plan = federatedAveraging({ model: LOGISTIC, clients: 2, quorum: 1, deadlineMs: 200 });
    const { network } = federate(plan, 2, 3);
    const server = network.nodes.get(peerIdFromU64(1))!;
    expect(server.counter('global_registry.joined')).toBe(2n);
    for (let k = 0; k < 2; k++) expect(network.nodes.get(peerIdFromU64(k + 2))!.counter('global_registry.handshakes')).toBe(1n);
    network.free();
  });
});

describe('a Model written in TypeScript', () => {
  test('trains in the federation like CpuMlp does', () => {
    const plan = federatedAveraging({ model: componentModel('TsLogistic', () => new LogisticRegression()), clients: 2, deadlineMs: 500 });
    const { first, last, network } = federate(plan, 2, 10);
    network.free();
    expect(first?.accuracy).toBeLessThan(0.75);
    expect(last.round).toBeGreaterThanOrEqual(10);
    expect(last.accuracy).toBeGreaterThanOrEqual(0.9);
  });
});

describe('gossipLearning and federatedEvaluation', () => {
  test('gossip: every peer learns the points with no server', () => {
    const plan = gossipLearning({ model: LOGISTIC, periodMs: 50, view: { size: 3, shuffle: 2 } });
    const artifact = plan.compile(bb);
    const ids = [1, 2, 3, 4].map((i) => peerIdFromU64(i));
    const test = dataset(200, 99);
    const best = new Map<string, number>();
    const peers = ids.map((self, k) => {
      const peer = plan.installPeer(bb, { artifact, self, data: dataset(200, k + 11), test, seeds: [ids[(k + 1) % 4]!], seed: k });
      peer.onRound((r) => best.set(self, r.accuracy));
      return peer;
    });
    const network = new LocalNetwork(peers.map((p) => p.node));
    for (const peer of peers) peer.start(0n);
    runUntil(network, () => ids.every((id) => (best.get(id) ?? 0) >= 0.9), 10_000);
    network.free();
    for (const id of ids) expect(best.get(id), id).toBeGreaterThanOrEqual(0.9);
  });

  test("evaluation: the clients' mean score of the server's model, given parameters or its own", () => {
    // a logistic regression that splits the points along x0 + x1 = 6, class 1 above (CpuMlp's
    // flat vector: the weights [out, in] row-major, then the biases): logits 0 and x0 + x1 - 6
    const trained = new Float32Array([0, 0, 1, 1, 0, -6]);
    const scores: Record<string, number[]> = {};
    for (const [what, params] of [['given', trained], ['its own', undefined]] as const) {
      const plan = federatedEvaluation({ model: LOGISTIC, clients: 2, batch: 100, discovery: 'seats', roundMs: 100, ...(params === undefined ? {} : { params }) });
      const artifact = plan.compile(bb);
      const server = plan.installServer(bb, { artifact, self: peerIdFromU64(1), test: dataset(50, 3), nowNs: 0n });
      const clients = [2, 3].map((i) => plan.installClient(bb, { artifact, self: peerIdFromU64(i), server: server.node.self, data: dataset(100, i), nowNs: 0n }));
      const network = new LocalNetwork([server.node, ...clients]);
      const seen: number[] = (scores[what] = []);
      server.onRound((r) => seen.push(r.accuracy));
      server.start(clients.map((c) => c.self), 0n);
      runUntil(network, () => seen.length >= 2, 5_000);
      network.free();
    }
    expect(scores['given']!.length).toBeGreaterThanOrEqual(2);
    for (const s of scores['given']!) expect(s).toBeGreaterThanOrEqual(0.9);
    // an untrained model splits the points through the origin: about half
    for (const s of scores['its own']!) expect(s).toBeLessThan(0.75);
  });
});

describe('the digits helpers and the options', () => {
  test('compileFederatedDigits and gossipDigits compile the C examples\' artifacts', () => {
    const rebound = Compiler.forExample(bb, 'federated_digits').rebind('aggregator', 'Aggregator', 'FedAvg', 'quorum=3,target=4,deadline_ms=1000,no_quorum=abandon,init=model');
    const fromC = rebound.compile(Compiler.recordExample(bb, 'federated_digits'));
    rebound.free();
    expect(Buffer.from(compileFederatedDigits(bb, { quorum: 3, target: 4 })).equals(Buffer.from(fromC))).toBe(true);
    const gossip = Compiler.forExample(bb, 'gossip_digits');
    const gossipFromC = gossip.compile(Compiler.recordExample(bb, 'gossip_digits'));
    gossip.free();
    expect(Buffer.from(gossipDigits.compile(bb)).equals(Buffer.from(gossipFromC))).toBe(true);
  });

  test('the server starts no round before a quorum of its clients is present', () => {
    const plan = federatedAveraging({ model: LOGISTIC, clients: 3, quorum: 2, deadlineMs: 500, fitSteps: 5 });
    const artifact = plan.compile(bb);
    const test = dataset(200, 99);
    const server = plan.installServer(bb, { artifact, self: peerIdFromU64(1), test, nowNs: 0n });
    const network = new LocalNetwork([server.node]);
    const reports: RoundReport[] = [];
    server.onRound((report) => reports.push(report));
    server.start([], 0n);
    let now = 0n;
    const run = (ms: number, until: () => boolean = () => false): void => {
      for (const end = now + BigInt(ms) * MS; now < end && !until(); ) network.poll((now += 5n * MS));
    };
    const join = (k: number): void =>
      network.add(plan.installClient(bb, { artifact, self: peerIdFromU64(k + 2), server: server.node.self, data: dataset(300, k + 7), nowNs: now }));
    run(3000); // an empty room: no round opens, none is abandoned, nothing is reported
    join(0);
    run(3000); // one client of the two a round needs: still none
    expect(reports).toEqual([]);
    expect(server.node.counter('fedavg.rounds_abandoned')).toBe(0n);
    join(1);
    run(20_000, () => reports.length >= 14);
    expect(reports.length).toBeGreaterThanOrEqual(14);
    // every round that ran closed on the two clients' updates
    expect(server.node.counter('fedavg.rounds_abandoned')).toBe(0n);
    expect(reports.at(-1)!.accuracy).toBeGreaterThanOrEqual(0.9);
    network.free();
    test.free();
  });

  test('bad options name what is wrong', () => {
    expect(() => federatedAveraging({ model: LOGISTIC, clients: 2, quorum: 3 })).toThrow(/quorum 3 is more than clients 2/);
    expect(() => federatedAveraging({ model: LOGISTIC, clients: 0 })).toThrow(/clients must be a positive integer/);
  });
});
