/**
 * federatedAveraging({ mode: 'async' }): FedBuff over a LocalNetwork on a test clock — no
 * rounds; the server steps the model every `buffer` updates and answers each client's
 * update with the current model. Two of the four clients are slow phones (what reaches
 * them is held 100 ms, twenty ticks of the clock). A logistic regression on 2-D points goes
 * from chance to 90 % while the fast clients train many times for each time of the slow
 * ones; the slow ones' stale updates are weighed down (and refused past maxStaleness),
 * compressed updates travel as steps, and the options that cannot work are refused by name.
 */
import { beforeAll, describe, expect, test } from 'vitest';

import { cpuMlp, federatedAveraging, loadBb, LocalNetwork, peerIdFromU64, type Bb, type BbNode, type RoundReport } from '../src/index.js';
import { twoBlobs, wasmBytes } from './support.js';

let bb: Bb;
beforeAll(async () => {
  bb = await loadBb(wasmBytes());
});

const MS = 1_000_000n;
const LOGISTIC = cpuMlp({ inputs: 2, outputs: 2, lr: 0.1 });

interface Run {
  first: RoundReport | undefined;
  last: RoundReport;
  server: BbNode;
  clients: BbNode[];
  refusedStale: number;
  network: LocalNetwork;
}

/** A slow phone: what is delivered to it is held `delayNs` first; call the result each tick. */
function slow(node: BbNode, delayNs: bigint): (nowNs: bigint) => void {
  const held: { from: string; bytes: Uint8Array; at: bigint }[] = [];
  const deliver = node.deliver.bind(node);
  node.deliver = (from: string, bytes: Uint8Array, nowNs = 0n): void => {
    held.push({ from, bytes: bytes.slice(), at: nowNs + delayNs });
  };
  return (nowNs) => {
    while (held.length > 0 && held[0]!.at <= nowNs) {
      const h = held.shift()!;
      deliver(h.from, h.bytes, nowNs);
    }
  };
}

/** Four clients on their own points; runs a 5 ms clock until `versions` versions or 20 s. */
function runAsync(options: Partial<Parameters<typeof federatedAveraging>[0]>, versions: number): Run {
  const plan = federatedAveraging({ model: LOGISTIC, clients: 4, discovery: 'seats', mode: 'async', buffer: 2, fitSteps: 5, ...options });
  const artifact = plan.compile(bb);
  const server = plan.installServer(bb, { artifact, self: peerIdFromU64(1), test: twoBlobs(bb, 200, 99), nowNs: 0n });
  const nodes: BbNode[] = [server.node];
  for (let k = 0; k < 4; k++) {
    nodes.push(plan.installClient(bb, { artifact, self: peerIdFromU64(k + 2), server: server.node.self, data: twoBlobs(bb, 300, k + 7), nowNs: 0n }));
  }
  const network = new LocalNetwork(nodes);
  const release = [slow(nodes[3]!, 100n * MS), slow(nodes[4]!, 100n * MS)];
  const run: Run = { first: undefined, last: { round: 0, accuracy: 0 }, server: server.node, clients: nodes.slice(1), refusedStale: 0, network };
  server.onRound((report) => {
    run.first ??= report;
    run.last = report;
  });
  server.start(nodes.slice(1).map((n) => n.self), 0n);
  for (let t = 1n; t * 5n < 20_000n && run.last.round < versions; t++) {
    for (const r of release) r(t * 5n * MS);
    network.poll(t * 5n * MS);
  }
  run.refusedStale = server.refusals().refused_stale;
  return run;
}

describe("federatedAveraging({ mode: 'async' })", () => {
  test('the global model goes from chance to 90 % without rounds', () => {
    const run = runAsync({}, 40);
    const steps = run.server.counter('fedbuff.steps');
    const accepted = run.server.counter('fedbuff.accepted');
    const staleness = run.server.counter('fedbuff.staleness');
    const rounds = run.server.counter('fedavg.rounds_closed');
    const [fast, , slowSteps] = run.clients.map((c) => c.counter('train.steps'));
    run.network.free();
    // no barrier: a fast client trained several times for each time a slow one did
    expect(fast!).toBeGreaterThan(3n * slowSteps!);
    expect(slowSteps!).toBeGreaterThan(0n);
    expect(run.first?.accuracy).toBeLessThan(0.75);
    expect(run.last.round).toBeGreaterThanOrEqual(40);
    expect(run.last.accuracy).toBeGreaterThanOrEqual(0.9);
    // FedBuff stepped every two updates or more, and the slow phones' updates were trained
    // from older versions than the one they joined, and taken in
    expect(steps).toBeGreaterThanOrEqual(40n);
    expect(accepted).toBeGreaterThanOrEqual(2n * steps);
    expect(staleness).toBeGreaterThan(0n);
    expect(rounds).toBe(0n);
  });

  test('an update more versions old than maxStaleness is refused, and the model still learns', () => {
    const run = runAsync({ maxStaleness: 0 }, 40);
    const staleness = run.server.counter('fedbuff.staleness');
    run.network.free();
    expect(run.refusedStale).toBeGreaterThan(0);
    expect(staleness).toBe(0n); // nothing stale was taken in
    expect(run.last.accuracy).toBeGreaterThanOrEqual(0.9);
  });

  test('top-k updates travel as steps from the version each client trained from', () => {
    const run = runAsync({ compress: { kind: 'topk', k: 0.5 } }, 40);
    const accepted = run.server.counter('fedbuff.accepted');
    run.network.free();
    expect(accepted).toBeGreaterThan(0n);
    expect(run.last.accuracy).toBeGreaterThanOrEqual(0.9);
  });

  test('what cannot run asynchronously is refused by name', () => {
    expect(() => federatedAveraging({ model: LOGISTIC, clients: 4, mode: 'async' })).toThrow(/mode 'async' needs discovery 'seats'/);
    expect(() => federatedAveraging({ model: LOGISTIC, clients: 4, discovery: 'seats', mode: 'async', aggregator: 'median' })).toThrow(/aggregator 'fedavg'/);
    expect(() => federatedAveraging({ model: LOGISTIC, clients: 4, discovery: 'seats', mode: 'async', buffer: 0 })).toThrow(/buffer/);
    expect(() => federatedAveraging({ model: LOGISTIC, clients: 4, discovery: 'seats', mode: 'async', maxStaleness: 2000 })).toThrow(/maxStaleness/);
    expect(() => federatedAveraging({ model: LOGISTIC, clients: 4, discovery: 'seats', mode: 'async', dp: { clip: 1, noiseMultiplier: 1, delta: 1e-5 } })).toThrow(/not with mode 'async'/);
    expect(() => federatedAveraging({ model: LOGISTIC, clients: 4, discovery: 'seats', mode: 'async', nextRound: 'close' })).toThrow(/nextRound 'close' is for sync rounds/);
  });
});
