/**
 * An own ONNX model in every template, as a user brings one: an MLP written and exported
 * by PyTorch (test/fixtures/torch-tabular-mlp.py) for scikit-learn's breast-cancer table,
 * with its standardization as buffers the federation must freeze.
 * - federatedAveraging: four label-skewed clients reach what PyTorch reaches training the
 *   same network centrally (within 4 points); the server's export is plain ONNX that
 *   onnxruntime-node scores at the accuracy the server reported, with the frozen buffers
 *   as PyTorch wrote them;
 * - gossipLearning: four peers, no server, each past 90 %;
 * - federatedEvaluation: the clients score the federated model on their own rows;
 * - bad options are refused by `onnxModel`, a model that cannot train by the install.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, test } from 'vitest';

import {
  Dataset,
  federatedAveraging,
  federatedEvaluation,
  gossipLearning,
  loadBb,
  LocalNetwork,
  onnxModel,
  peerIdFromU64,
  type Bb,
  type BbNode,
  type RoundReport,
} from '../src/index.js';
import { packageRoot, wasmBytes } from './support.js';
import { modelInitializers } from './tensor-proto.js';

const CSV = '/usr/lib/python3/dist-packages/sklearn/datasets/data/breast_cancer.csv';
const MS = 1_000_000n;

interface OrtSession {
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  run(feeds: Record<string, unknown>): Promise<Record<string, { readonly data: Float32Array }>>;
}
interface Ort {
  InferenceSession: { create(bytes: Uint8Array): Promise<OrtSession> };
  Tensor: new (type: 'float32', data: Float32Array, dims: readonly number[]) => unknown;
}
const ort = createRequire(import.meta.url)('onnxruntime-node') as Ort;

let bb: Bb;
let scratch: string;
let exported: Uint8Array;
/** What PyTorch reaches training the same network on all training rows. */
let central: number;
const rows: { x: Float32Array; y: number }[] = [];

beforeAll(async () => {
  bb = await loadBb(wasmBytes());
  scratch = mkdtempSync(join(tmpdir(), 'bb-onnx-template-'));
  const made = spawnSync('/usr/bin/python3', [join(packageRoot, 'test', 'fixtures', 'torch-tabular-mlp.py'), join(scratch, 'mlp.onnx')], { encoding: 'utf8' });
  if (made.status !== 0) throw new Error(`the PyTorch export failed:\n${made.stderr}`);
  central = (JSON.parse(made.stdout) as { central: number }).central;
  exported = new Uint8Array(readFileSync(join(scratch, 'mlp.onnx')));
  for (const line of readFileSync(CSV, 'utf8').trim().split('\n').slice(1)) {
    const values = line.split(',').map(Number);
    rows.push({ x: Float32Array.from(values.slice(0, 30)), y: values[30]! });
  }
}, 60_000);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function dataset(picked: readonly { x: Float32Array; y: number }[]): Dataset {
  const x = new Float32Array(picked.length * 30);
  picked.forEach((row, i) => x.set(row.x, i * 30));
  return Dataset.fromArrays(bb, x, 30, Float32Array.from(picked.map((row) => row.y)));
}

/** The test rows (every fifth, as the PyTorch reference), and four label-skewed shards of the rest: 85 % of one class each. */
function split(): { test: typeof rows; shards: (typeof rows)[] } {
  const test = rows.filter((_, i) => i % 5 === 0);
  const train = rows.filter((_, i) => i % 5 !== 0);
  const shards: (typeof rows)[] = [[], [], [], []];
  const byClass = [train.filter((r) => r.y === 0), train.filter((r) => r.y === 1)];
  byClass.forEach((members, label) => {
    members.forEach((row, i) => {
      // clients 0 and 1 hold mostly class 0, clients 2 and 3 mostly class 1
      const home = label === 0 ? [0, 1] : [2, 3];
      const away = label === 0 ? [2, 3] : [0, 1];
      const pick = i % 20 < 17 ? home[i % 2]! : away[i % 2]!;
      shards[pick]!.push(row);
    });
  });
  return { test, shards };
}

async function ortAccuracy(model: Uint8Array, test: typeof rows): Promise<number> {
  const session = await ort.InferenceSession.create(model);
  const x = new Float32Array(test.length * 30);
  test.forEach((row, i) => x.set(row.x, i * 30));
  const out = await session.run({ [session.inputNames[0]!]: new ort.Tensor('float32', x, [test.length, 30]) });
  const logits = out[session.outputNames[0]!]!.data;
  return test.filter((row, i) => (logits[2 * i + 1]! > logits[2 * i]! ? 1 : 0) === row.y).length / test.length;
}

function initializer(model: Uint8Array, name: string): number[] {
  const found = modelInitializers(model).get(name);
  if (found === undefined) throw new Error(`the model has no initializer ${name}`);
  return Array.from(found.data as Float32Array);
}

const TRAINING = { optimizer: 'adam', lr: 0.01, batch: 32, stepsPerRound: 4, freeze: ['mean', 'std'] } as const;

describe('an own PyTorch export in the templates', () => {
  test('federatedAveraging: four label-skewed clients reach central PyTorch, and onnxruntime scores the export the same', async () => {
    const { test: testRows, shards } = split();
    const plan = federatedAveraging({ model: onnxModel(exported, TRAINING), clients: 4, deadlineMs: 500, rounds: 30 });
    const artifact = plan.compile(bb);
    const test = dataset(testRows);
    const server = plan.installServer(bb, { artifact, self: peerIdFromU64(1), test, nowNs: 0n });
    const clients = shards.map((shard, k) =>
      plan.installClient(bb, { artifact, self: peerIdFromU64(k + 2), server: server.node.self, data: dataset(shard), nowNs: 0n, seed: k }),
    );
    const network = new LocalNetwork([server.node, ...clients]);
    let last: RoundReport = { round: 0, accuracy: 0 };
    server.onRound((report) => (last = report));
    server.start([], 0n);
    for (let t = 1n; t < 20_000n && last.round < 30; t++) network.poll(t * 5n * MS);

    expect(last.round).toBeGreaterThanOrEqual(30);
    expect(last.accuracy).toBeGreaterThanOrEqual(central - 0.04);
    const model = server.exportModel();
    expect(await ortAccuracy(model, testRows)).toBeCloseTo(last.accuracy, 5);
    // the frozen buffers left the federation as PyTorch wrote them
    for (const name of ['mean', 'std']) expect(initializer(model, name)).toEqual(initializer(exported, name));
    expect(initializer(model, 'hidden.weight')).not.toEqual(initializer(exported, 'hidden.weight'));
    network.free();
    test.free();
  }, 120_000);

  test('gossipLearning: four peers and no server, each past 90 %', () => {
    const { test: testRows, shards } = split();
    const plan = gossipLearning({ model: onnxModel(exported, TRAINING), periodMs: 100 });
    const artifact = plan.compile(bb);
    const ids = shards.map((_, k) => peerIdFromU64(k + 1));
    const test = dataset(testRows);
    const peers = shards.map((shard, k) =>
      plan.installPeer(bb, { artifact, self: ids[k]!, data: dataset(shard), test, seeds: ids.filter((_, j) => j !== k), seed: k }),
    );
    const network = new LocalNetwork(peers.map((p) => p.node));
    const scores = peers.map(() => 0);
    peers.forEach((peer, k) => peer.onRound(({ accuracy }) => (scores[k] = accuracy)));
    for (const peer of peers) peer.start(0n);
    for (let t = 1n; t <= 1200n; t++) network.poll(t * 5n * MS);
    for (const score of scores) expect(score).toBeGreaterThanOrEqual(0.9);
    network.free();
    test.free();
  }, 120_000);

  test('federatedEvaluation: the clients score the model on their own rows', () => {
    const { shards } = split();
    const plan = federatedEvaluation({ model: onnxModel(exported, TRAINING), clients: 4, batch: 64, rounds: 3 });
    const artifact = plan.compile(bb);
    const test = dataset(shards[0]!.slice(0, 8));
    const server = plan.installServer(bb, { artifact, self: peerIdFromU64(1), test, nowNs: 0n });
    const clients: BbNode[] = shards.map((shard, k) =>
      plan.installClient(bb, { artifact, self: peerIdFromU64(k + 2), server: server.node.self, data: dataset(shard), nowNs: 0n }),
    );
    const network = new LocalNetwork([server.node, ...clients]);
    const reports: RoundReport[] = [];
    server.onRound((report) => reports.push(report));
    server.start([], 0n);
    for (let t = 1n; t < 4000n && reports.length < 3; t++) network.poll(t * 5n * MS);
    expect(reports.length).toBeGreaterThanOrEqual(3);
    // an untrained network scores a score, not NaN, on every client's batch
    for (const { accuracy } of reports) expect(accuracy).toBeGreaterThanOrEqual(0), expect(accuracy).toBeLessThanOrEqual(1);
    network.free();
    test.free();
  }, 60_000);

  test('bad options are refused by onnxModel, a model that cannot train by the install', () => {
    expect(() => onnxModel(new Uint8Array(0))).toThrow(/give the ONNX model's bytes/);
    expect(() => onnxModel(exported, { lr: Number.NaN })).toThrow(/onnxModel: lr is NaN/);
    expect(() => onnxModel(exported, { batch: 0 })).toThrow(/batch must be a whole number >= 1, got 0/);
    expect(() => onnxModel(exported, { freeze: ['a,b'] })).toThrow(/freeze name "a,b"/);
    const plan = federatedAveraging({ model: onnxModel(exported, { freeze: ['nonexistent'] }), clients: 1 });
    const artifact = plan.compile(bb);
    const test = dataset(rows.slice(0, 4));
    expect(() => plan.installServer(bb, { artifact, test })).toThrow(/nonexistent/);
    test.free();
  });
});
