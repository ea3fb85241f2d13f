/**
 * The split learning view: the digits CNN cut where split_cnn cuts it, its layers on each
 * side (held to the package's own ONNX decoder: every node and every parameter is on
 * exactly one side), and the traffic at the cut counted by direction on a real SplitFed
 * run of the splitLearning template — activations up, gradients down, each envelope the
 * size of the cut's tensor.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';

import { Compiler, Dataset, loadBb, LocalNetwork, OnnxModel, peerIdFromU64, splitLearning, type Bb } from 'bytesandbrains';
import { inspectArtifact } from 'bytesandbrains/internals';
import { beforeAll, expect, test } from 'vitest';

import { readEnvelope } from '../src/federation/local.js';
import { FederationState } from '../src/federation/state.js';
import { buildProgramGraph } from '../src/program/model.js';
import { modelLayers, splitPlanOptions, splitSides, splitTraffic, SPLIT_CUT } from '../src/program/split.js';

const CNN = new Uint8Array(readFileSync(join(import.meta.dirname, '..', '..', 'examples', 'models', 'digits_cnn.onnx')));
const DIGITS = gunzipSync(readFileSync('/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz'));

let bb: Bb;
beforeAll(async () => {
  bb = await loadBb();
});

test('the clients hold the convolutions up to the cut, the server the dense layers and the loss', () => {
  const sides = splitSides(modelLayers(CNN), SPLIT_CUT);
  expect(sides.client.map((l) => l.op)).toEqual(['Constant', 'Mul', 'Conv', 'Relu', 'MaxPool', 'Conv', 'Relu', 'MaxPool']);
  expect(sides.client.at(-1)!.outputs).toEqual([SPLIT_CUT]);
  expect(sides.server.map((l) => l.op)).toEqual(['Flatten', 'Gemm', 'Relu', 'Gemm']);
  expect(sides.server[0]!.inputs).toEqual([SPLIT_CUT]);
  // conv1 16·1·3·3 + 16 and conv2 32·16·3·3 + 32; fc1 64·128 + 64 and fc2 10·64 + 10 (onnx's dims)
  expect(sides.clientParameters).toBe(144 + 16 + 4608 + 32);
  expect(sides.serverParameters).toBe(8192 + 64 + 640 + 10);
  // the package's decoder sees the same nodes, ops and float parameters
  const model = OnnxModel.decode(bb, CNN);
  const summary = model.summary().graph!;
  model.free();
  expect(sides.client.length + sides.server.length).toBe(summary.nodes);
  const ops = new Map<string, number>();
  for (const l of [...sides.client, ...sides.server]) ops.set(l.op, (ops.get(l.op) ?? 0) + 1);
  expect(Object.fromEntries(ops)).toEqual(Object.fromEntries(summary.ops.map((o) => [o.op_type, o.count])));
  expect(4 * (sides.clientParameters + sides.serverParameters)).toBe(summary.initializer_bytes);
});

test('a cut the model does not have, and bytes that are no model, are refused by name', () => {
  expect(() => splitSides(modelLayers(CNN), 'conv_out')).toThrow('the cut conv_out is no node\'s output in this model');
  expect(() => modelLayers(CNN.subarray(0, 200))).toThrow(/truncated/);
  expect(() => modelLayers(new Uint8Array([0x0f]))).toThrow(/wire type 7/);
});

test('a SplitFed run: activations up and gradients down, counted per direction at the cut\'s size', () => {
  const plan = splitLearning({ ...splitPlanOptions(2), roundSteps: 3, batch: 16 });
  const artifact = plan.compile(bb);
  const graph = buildProgramGraph(Compiler.describe(bb, artifact, 'json'), inspectArtifact(artifact));
  expect(graph.peers.map((p) => p.peer)).toEqual(['server', 'client']);
  expect(graph.edges.find((e) => e.name.endsWith('.split_activations'))?.label).toBe('activations');
  expect(graph.edges.find((e) => e.name.endsWith('.split_gradients'))?.label).toBe('gradients');

  const all = Dataset.fromCsv(bb, DIGITS);
  const shards = [0, 1].map((k) => all.subset(Array.from({ length: 64 }, (_, i) => 64 * k + i)));
  const held = all.subset(Array.from({ length: 50 }, (_, i) => 1000 + i));
  const server = plan.installServer(bb, { artifact, model: CNN, self: peerIdFromU64(1n) });
  const clients = shards.map((data, k) => plan.installClient(bb, { artifact, model: CNN, self: peerIdFromU64(BigInt(k + 2)), server: server.node.self, data, test: held }));
  server.start(clients.map((c) => c.node.self));
  // the page's own reading of each envelope, counted as the page counts them
  const state = new FederationState();
  const network = new LocalNetwork([server.node, ...clients.map((c) => c.node)], {
    onDeliver: (to, from, bytes) => {
      const read = readEnvelope(graph, bytes);
      state.send(from, to, bytes.length, read.kind, read.edge);
    },
  });
  let now = 0n;
  for (const c of clients) c.start(now);
  for (let ms = 0; ms < 20_000 && !clients.every((c) => c.counts().shares >= 2); ms++) network.poll((now += 1_000_000n));
  const traffic = splitTraffic(graph, state.edges)!;
  const steps = clients.reduce((n, c) => n + c.counts().steps, 0);
  expect(steps).toBeGreaterThanOrEqual(6);
  // one activations envelope per step each way: the server answered every step a client took
  expect(traffic.gradients.envelopes).toBe(steps);
  expect(traffic.activations.envelopes).toBeGreaterThanOrEqual(steps);
  // 16 rows of the cut's float32[32,2,2] each way (activations also carry the labels)
  const cutBytes = 16 * 32 * 2 * 2 * 4;
  expect(traffic.gradients.bytes).toBeGreaterThanOrEqual(steps * cutBytes);
  expect(traffic.activations.bytes).toBeGreaterThan(traffic.activations.envelopes * cutBytes);
  // up is every envelope to the server's partitions: activations, held-out activations, parts
  const toServer = [...state.flights].filter((f) => f.to === server.node.self).reduce((sum, f) => sum + f.bytes, 0);
  expect(traffic.up.bytes).toBe(toServer);
  expect(traffic.up.bytes).toBeGreaterThan(traffic.activations.bytes);
  expect(traffic.down.bytes).toBeGreaterThanOrEqual(traffic.gradients.bytes);
  expect(traffic.up.envelopes + traffic.down.envelopes).toBe(state.totals.envelopes);
  for (const c of clients) c.node.free();
  server.node.free();
  for (const d of [all, held, ...shards]) d.free();
});

test('a program that is no split has no traffic at a cut', async () => {
  const compiler = Compiler.forExample(bb, 'federated_digits');
  const artifact = compiler.compile(Compiler.recordExample(bb, 'federated_digits'));
  compiler.free();
  const graph = buildProgramGraph(Compiler.describe(bb, artifact, 'json'), inspectArtifact(artifact));
  expect(splitTraffic(graph, new Map())).toBeUndefined();
});
