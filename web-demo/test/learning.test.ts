/**
 * The rounds and scores the page and serve.mjs derive from a federation's traffic, held to
 * the engine: federated_digits runs in a LocalNetwork, their envelopes decoded as the page
 * decodes them. The global model's accuracy computed in JavaScript is the server's own
 * Evaluate; each round's contributors are the clients whose updates the server took for
 * it, its members those it sent the model to; a round below its quorum is reported as
 * abandoned, as the aggregator's own counter has it, its model unchanged and its accuracy
 * the one before — and the round list says so in words.
 */
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';

import { loadBb, LocalNetwork, peerIdFromU64 } from 'bytesandbrains';
import {
  compileFederatedDigits,
  installDigitsClient,
  installDigitsServer,
  splitDigits,
  startDigitsServer,
} from 'bytesandbrains/examples';
import { decodeEnvelope, decodeValue, inspectArtifact } from 'bytesandbrains/internals';
import { expect, test } from 'vitest';

import { mlpShapeFromConfig, parameterCount, scoreMlp } from '../shared/mlp.js';
import { FedRounds, GossipRounds, roundCounters, scorer, type PeerPoint, type RoundPoint } from '../shared/rounds.js';
import { maskedColour, secureCaption, stepColour } from '../src/federation/secure-view.js';
import { privacySpent, roundLine, secureSeen } from '../src/federation/words.js';

const DIGITS = '/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz';

test('the MLP shape comes from CpuMlp configs, or none when it is not a classifier', () => {
  const shape = mlpShapeFromConfig('inputs=64,hidden=32,outputs=10,activation=relu,lr=0.05,input_scale=0.0625,data=data')!;
  expect(shape).toEqual({ sizes: [64, 32, 10], activation: 'relu', inputScale: 0.0625, inputShift: 0 });
  expect(parameterCount(shape)).toBe(2410); // docs/LEARNING.md's worked example
  expect(mlpShapeFromConfig('inputs=4,hidden=8x3,outputs=2,activation=tanh')!.sizes).toEqual([4, 8, 3, 2]);
  expect(mlpShapeFromConfig('inputs=4,outputs=1,loss=mse')).toBeUndefined();
  expect(mlpShapeFromConfig('batch=32')).toBeUndefined();
  expect(mlpShapeFromConfig('inputs=4,outputs=3,hidden=8x')).toBeUndefined();
  expect(() => scoreMlp(shape, new Float32Array(3), new Float32Array(64), new Float32Array(1))).toThrow(/needs 2410/);
});

test('a hand-set model: logits, loss and accuracy as computed by hand', () => {
  // 2 inputs, no hidden layer, 2 classes: W = [[1, 0], [0, 1]], b = [0, 0]
  const shape = { sizes: [2, 2], activation: 'relu' as const, inputScale: 1, inputShift: 0 };
  const score = scoreMlp(shape, Float32Array.from([1, 0, 0, 1, 0, 0]), Float32Array.from([2, 0, 0, 1]), Float32Array.from([0, 0]));
  // row 1: logits [2, 0], label 0 → right, loss log(1 + e^-2); row 2: logits [0, 1] → wrong, loss log(1 + e^1)
  expect(score.accuracy).toBe(0.5);
  expect(score.loss).toBeCloseTo((Math.log(1 + Math.exp(-2)) + Math.log(1 + Math.exp(1))) / 2, 12);
});

/** A federated_digits server and clients in a LocalNetwork, watched as the page watches them. */
async function federation(clients: number, rules: { quorum: number; target: number; deadlineMs?: number }, slowMs = 0) {
  const bb = await loadBb();
  const artifact = compileFederatedDigits(bb, rules);
  const split = splitDigits(bb, gunzipSync(readFileSync(DIGITS)), clients, 1, 0);
  const x = split.test.features().data as Float32Array;
  const y = split.test.labels().data as Float32Array;
  const shape = mlpShapeFromConfig(inspectArtifact(artifact).configs.get('model')!)!;
  const rounds: RoundPoint[] = [];
  const points: PeerPoint[] = [];
  const tracker = new FedRounds(scorer(shape, { x, y }), { onRound: (r) => rounds.push(r), onPeerPoint: (p) => points.push(p) }, () => 0);
  const serverId = peerIdFromU64(1);
  const ids = Array.from({ length: clients }, (_, k) => peerIdFromU64(k + 2));
  const server = installDigitsServer(bb, artifact, serverId, split.test);
  const nodes = ids.map((id, k) => installDigitsClient(bb, artifact, id, serverId, split.shards[k]!, k + 2));
  const fills = (bytes: Uint8Array) => decodeEnvelope(bytes).fills.filter((f) => f.typeHash !== 0n).map((f) => decodeValue(f.typeHash, f.payload));
  // each round the server reports its model, the round and the model's accuracy, in that order
  const engine: { round: number; accuracy: number; model: Float32Array }[] = [];
  server.onStep((step) => {
    if (step.kind === 'send') for (const value of fills(step.bytes!)) tracker.sent(step.peer!, value);
    if (step.kind !== 'appEvent') return;
    tracker.event(step.topic!, step.value, step.topic === 'round' ? roundCounters(server) : undefined);
    if (step.topic === 'model' && step.value?.kind === 'tensor') engine.push({ round: -1, accuracy: Number.NaN, model: step.value.tensor.data as Float32Array });
    if (step.topic === 'round' && step.value !== undefined && 'value' in step.value) engine.at(-1)!.round = Number(step.value.value);
    if (step.topic === 'accuracy' && step.value?.kind === 'tensor') engine.at(-1)!.accuracy = Number(step.value.tensor.data[0]);
  });
  // an update counts once the server's node is handed it, as the page counts it
  const take = (from: string, bytes: Uint8Array, nowNs: bigint): void => {
    server.deliver(from, bytes, nowNs);
    for (const value of fills(bytes)) tracker.update(from, value);
  };
  // with slowMs the last client is not in the network: what it gets and sends takes that long each way
  const slow = slowMs > 0 ? nodes.pop()! : undefined;
  const queue: { at: bigint; run: (nowNs: bigint) => void }[] = [];
  const later = (nowNs: bigint, run: (at: bigint) => void): void => void queue.push({ at: nowNs + BigInt(slowMs) * 1_000_000n, run });
  let now = 0n;
  if (slow !== undefined) {
    server.onStep((step) => step.kind === 'send' && step.peer === slow.self && later(now, (at) => slow.deliver(serverId, step.bytes!, at)));
    slow.onStep((step) => step.kind === 'send' && later(now, (at) => take(slow.self, step.bytes!, at)));
  }
  const network = new LocalNetwork([server, ...nodes], {
    onDeliver: (to, from, bytes) => {
      if (to === serverId) for (const value of fills(bytes)) tracker.update(from, value);
    },
  });
  for (const id of ids) server.addPeer(id);
  startDigitsServer(server, ids, split.test, 0n);
  let t = 0;
  const runUntil = (done: () => boolean): void => {
    for (const end = t + 4000; t < end && !done(); t++) {
      now = BigInt(t) * 5_000_000n;
      for (const due of queue.filter((q) => q.at <= now)) {
        queue.splice(queue.indexOf(due), 1);
        due.run(now);
      }
      network.poll(now);
      if (slow !== undefined && !slow.freed) slow.poll(now);
    }
  };
  return { server, ids, nodes, network, rounds, points, engine, shape, x, y, runUntil, free: () => { network.free(); slow?.free(); split.free(); } };
}

test('federated_digits: rounds and per-client scores from the traffic match the engine', async () => {
  const f = await federation(3, { quorum: 2, target: 3 });
  f.runUntil(() => f.rounds.length >= 12);
  const { rounds, engine, ids } = f;
  expect(rounds.length).toBeGreaterThanOrEqual(12);
  expect(rounds.map((r) => r.round)).toEqual(engine.map((e) => e.round));
  // the engine's Evaluate and the page's scoring agree on every global model
  for (const [i, r] of rounds.entries()) {
    expect(r.accuracy).toBe(engine[i]!.accuracy);
    expect(scoreMlp(f.shape, engine[i]!.model, f.x, f.y).accuracy).toBeCloseTo(engine[i]!.accuracy, 6);
  }
  // the starting model, then rounds closed with every client's update, sent to every client
  expect(rounds[0]).toMatchObject({ round: 0, outcome: 'start', contributors: [], members: [] });
  for (const r of rounds.slice(1)) {
    expect(r.outcome).toBe('closed');
    expect(r.unchanged).toBe(false);
    expect([...r.contributors].sort()).toEqual([...ids].sort());
    expect([...r.members!].sort()).toEqual([...ids].sort());
  }
  expect(rounds.filter((r) => r.outcome === 'closed')).toHaveLength(Number(f.server.counter('fedavg.rounds_closed')));
  // a client's update for round r goes into the model of round r + 1, and is plotted there
  for (const id of ids) expect(f.points.filter((p) => p.peer === id).map((p) => p.round).slice(0, 3)).toEqual([1, 2, 3]);
  expect(rounds.at(-1)!.loss!).toBeLessThan(rounds[0]!.loss! * 0.5);
  expect(rounds.at(-1)!.accuracy).toBeGreaterThan(0.8);
  expect(roundLine(rounds[3]!, { quorum: 2, target: 3, deadlineMs: 1000 }, (id) => `client ${ids.indexOf(id) + 1}`)).toMatch(/^round 3: closed with 3 of 3 updates \(client \d, client \d, client \d\) → \d+\.\d %$/);
  f.free();
});

test('rounds below their quorum are abandoned: reported so, the model unchanged, no accuracy credited', async () => {
  const f = await federation(3, { quorum: 2, target: 3, deadlineMs: 1000 });
  f.runUntil(() => f.rounds.length >= 4);
  // two of the three clients go: one update per round, one short of the quorum
  f.nodes[1]!.free();
  f.nodes[2]!.free();
  const before = f.rounds.length;
  f.runUntil(() => f.rounds.filter((r, i) => i >= before && r.outcome === 'abandoned').length >= 3);
  const after = f.rounds.slice(before);
  const abandoned = after.filter((r) => r.outcome === 'abandoned');
  expect(abandoned.length).toBeGreaterThanOrEqual(3);
  // the aggregator's own count
  expect(f.rounds.filter((r) => r.outcome === 'abandoned')).toHaveLength(Number(f.server.counter('fedavg.rounds_abandoned')));
  for (const r of abandoned) {
    const previous = f.rounds[f.rounds.indexOf(r) - 1]!;
    expect(r.unchanged).toBe(true);
    expect(r.accuracy).toBe(previous.accuracy);
    expect(r.contributors.length).toBeLessThan(2);
    expect(r.members).toHaveLength(3);
    const line = roundLine(r, { quorum: 2, target: 3, deadlineMs: 1000 }, String);
    expect(line).toMatch(new RegExp(`^round ${r.round}: abandoned at its 1 s deadline — (no update came back|only 1 of 3 updates came back), 2 needed; the model stays as it was`));
    expect(line).not.toContain('→');
  }
  f.free();
});

test('gossip rounds close in order, once every peer reported, or when a peer falls five behind', () => {
  const rounds: RoundPoint[] = [];
  const peers: PeerPoint[] = [];
  let live = 3;
  const gossip = new GossipRounds(undefined, { onRound: (r) => rounds.push(r), onPeerPoint: (p) => peers.push(p) }, () => live, () => 0);
  const acc = (v: number): { kind: 'tensor'; tensor: { dtype: 'float'; dims: number[]; data: Float32Array } } => ({ kind: 'tensor', tensor: { dtype: 'float', dims: [], data: Float32Array.from([v]) } });
  gossip.accuracy('a', acc(0.1));
  gossip.accuracy('b', acc(0.2));
  expect(rounds).toEqual([]);
  gossip.accuracy('c', acc(0.3));
  expect(rounds.map((r) => [r.round, Number(r.accuracy.toFixed(3))])).toEqual([[1, 0.2]]);
  // c stops: a's and b's rounds wait, then close without it five periods on
  live = 3;
  for (let i = 0; i < 6; i++) {
    gossip.accuracy('a', acc(0.5));
    gossip.accuracy('b', acc(0.7));
  }
  expect(rounds.map((r) => r.round)).toEqual([1, 2]);
  expect(rounds[1]!.contributors).toEqual(['a', 'b']);
  expect(peers.filter((p) => p.peer === 'a').map((p) => p.round)).toEqual([1, 2, 3, 4, 5, 6, 7]);
});

test('a client slower than the deadline: its updates come too late, counted as the aggregator dropped them', async () => {
  // the third client's model and update each take 0.8 s; rounds close at 1 s with the other two
  const f = await federation(3, { quorum: 2, target: 3, deadlineMs: 1000 }, 800);
  f.runUntil(() => f.rounds.length >= 8);
  const slow = f.ids[2]!;
  const closed = f.rounds.filter((r) => r.outcome === 'closed');
  expect(closed.length).toBeGreaterThanOrEqual(6);
  for (const r of closed) {
    expect(r.members).toContain(slow);
    expect(r.contributors).not.toContain(slow);
    expect(r.contributors).toHaveLength(2);
  }
  const late = f.rounds.reduce((n, r) => n + (r.late ?? 0), 0);
  expect(late).toBeGreaterThanOrEqual(4);
  expect(late).toBe(Number(f.server.counter('fedavg.late_dropped')));
  const line = roundLine(f.rounds.find((r) => (r.late ?? 0) > 0)!, { quorum: 2, target: 3, deadlineMs: 1000 }, String);
  expect(line).toMatch(/closed with 2 of 3 updates .* · 1 update for an earlier round came too late and was dropped$/);
  f.free();
});

test('with differential privacy a round says what the rounds up to it spent', () => {
  const closed: RoundPoint = { round: 4, at: 0, accuracy: 0.5, contributors: ['a', 'b'], members: ['a', 'b'], outcome: 'closed', epsilon: 2.3456 };
  expect(roundLine(closed, { quorum: 1 }, String)).toBe('round 4: closed with 2 of 2 updates (a, b) → 50.0 % · privacy spent: ε 2.35');
  expect(privacySpent({ ...closed, epsilon: null })).toBe(' · privacy spent: ε ∞ (clipping without noise)');
  expect(privacySpent(closed, 1e-5)).toBe(' · privacy spent: ε 2.35 at δ 0.00001');
  const { epsilon: _, ...plain } = closed;
  expect(roundLine(plain, { quorum: 1 }, String)).toBe('round 4: closed with 2 of 2 updates (a, b) → 50.0 %');
});

test('with secure aggregation a round says the server saw only the sum of its masked updates, never whose', () => {
  // a secure server takes no update it can read: FedRounds finds no contributors, the sum's count says what it saw
  const closed: RoundPoint = { round: 7, at: 0, accuracy: 0.8, contributors: [], members: ['a', 'b', 'c'], outcome: 'closed', secure: { summed: 3, aborted: 0 } };
  expect(roundLine(closed, { quorum: 3 }, String)).toBe('round 7: closed (sent to 3) → 80.0 % · the server saw only the sum of 3 masked updates');
  const abandoned: RoundPoint = { ...closed, round: 8, outcome: 'abandoned', secure: { summed: 0, aborted: 1 } };
  expect(roundLine(abandoned, { quorum: 3, deadlineMs: 2000 }, String)).toBe(
    'round 8: abandoned at its 2 s deadline, 3 needed; the model stays as it was (80.0 %) · no secure sum: the server saw no update · 1 secure round aborted',
  );
  expect(secureSeen({ ...closed, secure: { summed: 4, aborted: 2 } })).toBe(' · the server saw only the sum of 4 masked updates · 2 secure rounds aborted');
  // with differential privacy as well, both are said
  expect(roundLine({ ...closed, epsilon: 1.5 }, { quorum: 3 }, String)).toMatch(/sum of 3 masked updates · privacy spent: ε 1\.50$/);
  const { secure: _, ...plain } = closed;
  expect(secureSeen(plain)).toBe('');
  expect(roundLine({ ...plain, contributors: ['a', 'b', 'c'] }, { quorum: 3 }, String)).toBe('round 7: closed with 3 of 3 updates (a, b, c) → 80.0 %');
});

test('the secure round drawing: masked numbers as greys, the step red up and blue down, and words that say which is which', () => {
  expect(maskedColour(0)).toEqual([0, 0, 0]);
  expect(maskedColour(0.9999)).toEqual([255, 255, 255]);
  expect(maskedColour(0.5)).toEqual([128, 128, 128]);
  expect(stepColour(0.02, 0.02)).toEqual([255, 0, 0]);
  expect(stepColour(-0.01, 0.02)).toEqual([128, 128, 255]);
  expect(stepColour(0, 0)).toEqual([255, 255, 255]);
  const view = { round: 5, from: 'p', masked: [0.1, 0.7], step: [0.01, -0.02] };
  expect(secureCaption(view, () => 'client 2')).toBe(
    "round 5, what the server saw: client 2's masked update (left, 2 of its numbers) looks like noise; only the sum of the round's masked updates, unmasked, gives the model's step (right, the same 2 parameters; red up, blue down)",
  );
});
