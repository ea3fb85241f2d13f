/**
 * The scores the page and serve.mjs derive from a federation's traffic, held to the engine:
 * a federated_digits run in a LocalNetwork, its envelopes decoded as the page decodes them.
 * The global model's accuracy computed in JavaScript is the server's own Evaluate; each
 * round's contributors are the clients whose updates for it arrived; the loss falls.
 */
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';

import {
  compileFederatedDigits,
  decodeEnvelope,
  decodeValue,
  inspectArtifact,
  installDigitsClient,
  installDigitsServer,
  loadBb,
  LocalNetwork,
  peerIdFromU64,
  splitDigits,
  startDigitsServer,
} from 'bytesandbrains';
import { expect, test } from 'vitest';

import { mlpShapeFromConfig, parameterCount, scoreMlp } from '../shared/mlp.js';
import { FedRounds, GossipRounds, scorer, type PeerPoint, type RoundPoint } from '../shared/rounds.js';

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

test('federated_digits: rounds and per-client scores from the traffic match the engine', async () => {
  const bb = await loadBb();
  const artifact = compileFederatedDigits(bb, { quorum: 2, target: 3 });
  const split = splitDigits(bb, gunzipSync(readFileSync(DIGITS)), 3, 1, 0);
  const x = split.test.features().data as Float32Array;
  const y = split.test.labels().data as Float32Array;
  const shape = mlpShapeFromConfig(inspectArtifact(artifact).configs.get('model')!)!;
  const rounds: RoundPoint[] = [];
  const points: PeerPoint[] = [];
  const tracker = new FedRounds(scorer(shape, { x, y }), { onRound: (r) => rounds.push(r), onPeerPoint: (p) => points.push(p) }, () => 0);
  const serverId = peerIdFromU64(1);
  const ids = [2, 3, 4].map((n) => peerIdFromU64(n));
  const server = installDigitsServer(bb, artifact, serverId, split.test);
  const clients = ids.map((id, k) => installDigitsClient(bb, artifact, id, serverId, split.shards[k]!, k + 2));
  // each round the server reports its model, the round and the model's accuracy, in that order
  const engine: { round: number; accuracy: number; model: Float32Array }[] = [];
  server.onStep((step) => {
    if (step.kind !== 'appEvent') return;
    tracker.event(step.topic!, step.value);
    if (step.topic === 'model' && step.value?.kind === 'tensor') engine.push({ round: -1, accuracy: Number.NaN, model: step.value.tensor.data as Float32Array });
    if (step.topic === 'round' && step.value !== undefined && 'value' in step.value) engine.at(-1)!.round = Number(step.value.value);
    if (step.topic === 'accuracy' && step.value?.kind === 'tensor') engine.at(-1)!.accuracy = Number(step.value.tensor.data[0]);
  });
  for (const client of clients) {
    client.onStep((step) => {
      if (step.kind !== 'send') return;
      for (const fill of decodeEnvelope(step.bytes!).fills) tracker.update(client.self, decodeValue(fill.typeHash, fill.payload));
    });
  }
  const network = new LocalNetwork([server, ...clients]);
  for (const id of ids) server.addPeer(id);
  startDigitsServer(server, ids, split.test, 0n);
  for (let t = 1; t < 3000 && rounds.length < 12; t++) network.poll(BigInt(t) * 5_000_000n);
  expect(rounds.length).toBeGreaterThanOrEqual(12);
  expect(rounds.map((r) => r.round)).toEqual(engine.map((e) => e.round));
  // the engine's Evaluate and the page's scoring agree on every global model
  for (const [i, r] of rounds.entries()) {
    expect(r.accuracy).toBe(engine[i]!.accuracy);
    expect(scoreMlp(shape, engine[i]!.model, x, y).accuracy).toBeCloseTo(engine[i]!.accuracy, 6);
  }
  // after the first round every client's update for round r is counted towards round r + 1
  for (const r of rounds.slice(1)) expect([...r.contributors].sort()).toEqual([...ids].sort());
  expect(rounds[0]!.contributors).toEqual([]);
  for (const id of ids) expect(points.filter((p) => p.peer === id).length).toBeGreaterThanOrEqual(10);
  expect(rounds.at(-1)!.loss!).toBeLessThan(rounds[0]!.loss! * 0.5);
  expect(rounds.at(-1)!.accuracy).toBeGreaterThan(0.8);
  network.free();
  split.free();
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
