// OnnxTrainer: a PyTorch-exported LeNet trains on the digits in bb.wasm, in Node's main
// thread and in a Worker; the exported model is plain ONNX that onnxruntime-node scores at
// the accuracy the trainer reports. Then the trainer's contract (parameters, snapshots, a
// warm step that allocates nothing, refusals), OnnxModel in a federation installed from
// TypeScript (federated_cnn's server and clients on a LocalNetwork), and the model shipped
// with the package. Also what PyTorch exports: torch.chunk trains every parameter, a
// parameter cut off by Round is refused by name unless frozen, an Embedding takes token ids.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { gunzipSync } from 'node:zlib';

import { beforeAll, describe, expect, test } from 'vitest';

import {
  BbError,
  BbErrorCode,
  LocalNetwork,
  OnnxModel,
  OnnxTrainer,
  encodeOnnxModel,
  loadBb,
  peerIdFromU64,
  roundReporter,
  type Bb,
  type BbNode,
  type Step,
} from '../src/index.js';
import {
  compileFederatedCnn,
  installCnnClient,
  installCnnServer,
  loadDigitsCnn,
  splitDigits,
  startCnnServer,
} from '../src/examples/index.js';
import { digitsSplit, trainLenet } from './fixtures/train-lenet.mjs';
import { bbErrorOf, packageRoot, repoRoot, wasmBytes } from './support.js';

const DIGITS = '/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz';
const LENET = join(repoRoot, 'tests', 'data', 'grad', 'lenet_dynamic.onnx');
const CNN = join(repoRoot, 'examples', 'models', 'digits_cnn.onnx');
const paths = {
  dist: join(packageRoot, 'dist', 'index.js'),
  wasm: join(packageRoot, 'wasm', 'bb.wasm'),
  model: LENET,
  digits: DIGITS,
  epochs: 8,
};

interface OrtTensor {
  readonly data: Float32Array;
}
interface OrtSession {
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  run(feeds: Record<string, unknown>): Promise<Record<string, OrtTensor>>;
}
interface Ort {
  InferenceSession: { create(bytes: Uint8Array): Promise<OrtSession> };
  Tensor: new (type: 'float32', data: Float32Array, dims: readonly number[]) => unknown;
}
const ort = createRequire(import.meta.url)('onnxruntime-node') as Ort;

/** The share of rows onnxruntime classifies right with the model's first output. */
async function ortAccuracy(model: Uint8Array, x: Float32Array, y: Float32Array): Promise<number> {
  const session = await ort.InferenceSession.create(model);
  const n = y.length;
  const out = await session.run({ [session.inputNames[0]!]: new ort.Tensor('float32', x, [n, 1, 8, 8]) });
  const logits = out[session.outputNames[0]!]!.data;
  const classes = logits.length / n;
  let right = 0;
  for (let i = 0; i < n; i++) {
    let best = 0;
    for (let k = 1; k < classes; k++) if (logits[i * classes + k]! > logits[i * classes + best]!) best = k;
    if (best === y[i]) right++;
  }
  return right / n;
}

let bb: Bb;
beforeAll(async () => {
  bb = await loadBb(wasmBytes());
});

describe('OnnxTrainer', () => {
  test('the PyTorch LeNet learns the digits in bb.wasm, and onnxruntime scores its export the same', async () => {
    const result = await trainLenet(paths);
    expect(result.fit.steps).toBe(8 * Math.ceil(1437 / 32));
    expect(result.fit.refused).toBe(0);
    expect(result.evaluation.score).toBeGreaterThan(0.9);
    expect(result.parameters.length).toBe(result.parameterCount);
    const onnx = await ortAccuracy(result.exported, result.test.x, result.test.y);
    expect(Math.abs(onnx - result.evaluation.score)).toBeLessThanOrEqual(1 / result.test.y.length);
  });

  test('it trains the same in a Worker', async () => {
    const worker = new Worker(new URL('./fixtures/train-lenet-worker.mjs', import.meta.url), { workerData: paths });
    const message = await new Promise<{ accuracy?: number; steps?: number; exported?: Uint8Array; error?: string }>(
      (resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
      },
    );
    await worker.terminate();
    expect(message.error).toBeUndefined();
    expect(message.accuracy).toBeGreaterThan(0.9);
    const { test: held } = digitsSplit(DIGITS);
    const onnx = await ortAccuracy(message.exported!, held.x, held.y);
    expect(Math.abs(onnx - message.accuracy!)).toBeLessThanOrEqual(1 / held.y.length);
  });

  test('parameters, snapshots, a warm step without allocations, and what it refuses', () => {
    const model = new Uint8Array(readFileSync(CNN));
    const { train } = digitsSplit(DIGITS);
    const batch = { x: train.x.slice(0, 32 * 64), labels: train.y.slice(0, 32) };
    const a = OnnxTrainer.create(bb, model, { optimizer: 'momentum', lr: 0.05, momentum: 0.9 });
    const b = OnnxTrainer.create(bb, OnnxModel.decode(bb, model), { optimizer: 'momentum', lr: 0.05, momentum: 0.9 });
    expect(a.parameterCount).toBe(13706);
    const first = a.step(batch);
    expect(first.applied).toBe(true);
    expect(first.loss).toBeGreaterThan(1);
    a.step(batch);
    const warm = a.stats();
    for (let i = 0; i < 3; i++) a.step(batch);
    const after = a.stats();
    expect(after.allocations).toBe(warm.allocations);
    expect(after.steps).toBe(5);
    expect(after.heldBytes).toBeGreaterThanOrEqual(2 * 4 * a.parameterCount); // parameters and momentum
    // a snapshot resumes exactly; parameters move between trainers
    b.restore(a.save());
    expect(b.step(batch).loss).toBe(a.step(batch).loss);
    b.setParameters(new Float32Array(b.parameterCount));
    expect(b.parameters().every((v) => v === 0)).toBe(true);
    expect(a.predict(batch.x, 32).length).toBe(32 * 10);
    // refusals name what was wrong
    const refuse = (fn: () => unknown): BbError => {
      try {
        fn();
      } catch (error) {
        if (error instanceof BbError) return error;
      }
      throw new Error('no BbError');
    };
    expect(refuse(() => a.step({ x: batch.x, labels: batch.labels.slice(0, 31) })).message).toMatch(/2048 values are not 31 rows/);
    expect(refuse(() => a.setParameters(new Float32Array(3))).code).toBe(BbErrorCode.Type);
    expect(refuse(() => OnnxTrainer.create(bb, model, { optimizer: 'rmsprop' as 'adam' })).message).toMatch(/rmsprop/);
    expect(refuse(() => OnnxTrainer.create(bb, model, { lr: Number.NaN })).message).toMatch(/lr/);
    expect(refuse(() => OnnxTrainer.create(bb, new Uint8Array([1, 2, 3]))).code).toBe(BbErrorCode.Malformed);
    a.free();
    b.free();
    a.free(); // twice is fine
    expect(refuse(() => a.step(batch)).message).toMatch(/freed/);
  });

  test('maxTotalBytes caps every run: a step past it changes nothing, a raised cap trains', () => {
    const model = new Uint8Array(readFileSync(CNN));
    const { train } = digitsSplit(DIGITS);
    const batch = { x: train.x.slice(0, 8 * 64), labels: train.y.slice(0, 8) };
    const tight = OnnxTrainer.create(bb, model, { maxTotalBytes: 4096 });
    const before = tight.parameters();
    const error = bbErrorOf(() => tight.step(batch));
    expect(error.code).toBe(BbErrorCode.Limit);
    expect(error.message).toMatch(/over the cap of 4096 \(bb_cpu_limits\.max_total_bytes\)/);
    expect(tight.parameters()).toEqual(before);
    const raised = OnnxTrainer.create(bb, model, { maxTotalBytes: 2 ** 31 });
    expect(raised.step(batch).applied).toBe(true);
    expect(bbErrorOf(() => OnnxTrainer.create(bb, model, { maxTotalBytes: -1 })).message).toMatch(/max_total_bytes/);
    tight.free();
    raised.free();
  });
});

/** x [N, 4] → MatMul(w1) → Round → MatMul(w2): w1 reaches the output only through Round. */
function roundedModel(): Uint8Array {
  const w1 = Float32Array.from({ length: 12 }, (_, i) => (i % 5) - 2);
  const w2 = Float32Array.from({ length: 6 }, (_, i) => 0.1 * (i - 3));
  return encodeOnnxModel({
    opset: 17,
    nodes: [
      { opType: 'MatMul', inputs: ['x', 'w1'], outputs: ['h'] },
      { opType: 'Round', inputs: ['h'], outputs: ['r'], name: 'round' },
      { opType: 'MatMul', inputs: ['r', 'w2'], outputs: ['y'] },
    ],
    inputs: [{ name: 'x', dtype: 'float', dims: ['N', 4] }],
    outputs: [{ name: 'y', dtype: 'float', dims: ['N', 2] }],
    initializers: [
      { name: 'w1', dtype: 'float', dims: [4, 3], data: w1 },
      { name: 'w2', dtype: 'float', dims: [3, 2], data: w2 },
    ],
  });
}

describe('OnnxTrainer on what PyTorch exports', () => {
  const data = (name: string): Uint8Array => new Uint8Array(readFileSync(join(repoRoot, 'tests', 'data', 'grad', name)));

  test('torch.chunk: every parameter trains, those before the Slice from Shape too', () => {
    const t = OnnxTrainer.create(bb, data('chunk.onnx'), { optimizer: 'sgd', lr: 0.5 });
    expect(t.parameterCount).toBe(4 * 6 + 6 + 3 * 2 + 2); // a.weight, a.bias, b.weight, b.bias
    const before = t.parameters();
    const x = Float32Array.from({ length: 20 }, (_, i) => Math.sin(i));
    expect(t.step({ x, labels: Float32Array.from([0, 1, 1, 0, 1]) }).applied).toBe(true);
    const after = t.parameters();
    const moved = (from: number, to: number): boolean => after.slice(from, to).some((v, i) => v !== before[from + i]);
    expect(moved(0, 30)).toBe(true); // the layer before the chunk
    expect(moved(30, 38)).toBe(true);
    t.free();
  });

  test('a parameter reached only through Round is refused by name, and trains the rest once frozen', () => {
    const error = bbErrorOf(() => OnnxTrainer.create(bb, roundedModel(), { optimizer: 'sgd' }));
    expect(error.message).toMatch(/parameter w1 reaches the loss .* only through values without a gradient: at node round \(Round\)/);
    const t = OnnxTrainer.create(bb, roundedModel(), { optimizer: 'sgd', lr: 0.1, freeze: ['w1'] });
    expect(t.parameterCount).toBe(6); // w2 alone
    expect(t.step({ x: Float32Array.from([1, 2, 3, 4, -1, 0.5, 2, 1]), labels: Float32Array.from([0, 1]) }).applied).toBe(true);
    t.free();
    expect(bbErrorOf(() => OnnxTrainer.create(bb, roundedModel(), { freeze: ['nope'] })).message).toMatch(
      /frozen parameter nope is not an initializer/,
    );
    expect(bbErrorOf(() => OnnxTrainer.create(bb, roundedModel(), { freeze: ['a|b'] })).code).toBe(BbErrorCode.InvalidArgument);
  });

  test("an Embedding's int64 token input takes whole-number rows, and refuses a fraction", () => {
    const t = OnnxTrainer.create(bb, data('transformer.onnx'), { optimizer: 'sgd', lr: 0.1, freeze: ['emb.weight'] });
    const all = OnnxTrainer.create(bb, data('transformer.onnx'), { optimizer: 'sgd', lr: 0.1 });
    expect(all.parameterCount - t.parameterCount).toBe(11 * 8); // the embedding table left out
    const tokens = Float32Array.from({ length: 10 }, (_, i) => (i * 3) % 11);
    expect(t.step({ x: tokens, labels: Float32Array.from([2, 0]) }).applied).toBe(true);
    tokens[3] = 2.5;
    expect(bbErrorOf(() => all.step({ x: tokens, labels: Float32Array.from([2, 0]) })).message).toMatch(
      /value 2.5 at 3 is not a whole number/,
    );
    t.free();
    all.free();
  });
});

describe('OnnxModel in a federation from TypeScript', () => {
  test('federated_cnn: a server and four clients train the CNN over FedAvg, and the server exports it', async () => {
    const model = await loadDigitsCnn(CNN);
    expect(model).toEqual(new Uint8Array(readFileSync(CNN)));
    const artifact = compileFederatedCnn(bb, { quorum: 3, target: 4 });
    const split = splitDigits(bb, gunzipSync(readFileSync(DIGITS)), 4, 1, 5);
    const serverId = peerIdFromU64(1);
    const clientIds = [2, 3, 4, 5].map((i) => peerIdFromU64(i));
    const server = installCnnServer(bb, artifact, serverId, split.test, model);
    const nodes = new Map<string, BbNode>([[serverId, server]]);
    clientIds.forEach((id, i) => nodes.set(id, installCnnClient(bb, artifact, id, serverId, split.shards[i]!, model, i + 2)));
    for (const id of clientIds) server.addPeer(id);
    startCnnServer(server, clientIds, split.test, 0n);
    const reports: { round: number; accuracy: number }[] = [];
    let exported: Uint8Array | undefined;
    server.onStep(roundReporter((r) => reports.push(r)));
    server.onStep((step: Step) => {
      if (step.kind === 'appEvent' && step.topic === 'onnx' && step.value?.kind === 'bytes') exported = step.value.bytes;
    });
    const failures: Step[] = [];
    const net = new LocalNetwork(nodes.values(), {
      onStep: (_, step) => {
        if (step.kind === 'opFailed') failures.push(step);
      },
    });
    for (let t = 1; t < 3000 && (reports.at(-1)?.round ?? 0) < 12; t++) net.poll(BigInt(t) * 5_000_000n);
    expect(failures).toEqual([]);
    const last = reports.at(-1)!;
    expect(last.round).toBeGreaterThanOrEqual(12);
    expect(last.accuracy).toBeGreaterThan(0.85);
    expect(reports[0]!.accuracy).toBeLessThan(0.5);
    // the last export is the last evaluated global model
    const test = split.test.features(), labels = split.test.labels();
    const onnx = await ortAccuracy(exported!, test.data, labels.data);
    expect(Math.abs(onnx - last.accuracy)).toBeLessThanOrEqual(1 / labels.data.length + 1e-6);
    // an OnnxModel slot without a model cannot install
    expect(() => installCnnClient(bb, artifact, peerIdFromU64(9), serverId, split.shards[0]!, new Uint8Array(0))).toThrow(BbError);
    for (const node of nodes.values()) node.free();
    split.free();
  });
});
