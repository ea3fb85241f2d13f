/**
 * The splitLearning template (js/src/templates/split.ts): one template call gives split_cnn's
 * Modules and artifacts, byte for byte; a client and a server, each in a bb.wasm instance of
 * its own (a phone and a server), trained split step by step end with every parameter equal,
 * bit for bit, to the whole model trained by OnnxTrainer on the same batches — vanilla and
 * U-shaped; each side builds only its own part; SplitFed with several clients learns; what
 * a confused author gets wrong is refused with its reason.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';

import { beforeAll, describe, expect, test } from 'vitest';

import {
  BbErrorCode,
  Compiler,
  cpuMlp,
  Dataset,
  loadBb,
  LocalNetwork,
  OnnxTrainer,
  peerIdFromU64,
  splitLearning,
  type Bb,
  type BbNode,
  type SplitLearningOptions,
} from '../src/index.js';
import { protoBytes, protoFields } from '../src/engine/protobuf.js';
import { bbErrorOf, wasmBytes } from './support.js';
import { decodeTensorProto } from './tensor-proto.js';

const CNN = new Uint8Array(readFileSync(join(import.meta.dirname, '..', '..', 'examples', 'models', 'digits_cnn.onnx')));
const DIGITS = gunzipSync(readFileSync('/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz'));
const CUT = '/MaxPool_1_output_0';
const HEAD_CUT = '/Relu_2_output_0';
const TRAINING = { loss: 'xent', optimizer: 'nesterov', lr: 0.05 } as const;
const MS = 1_000_000n;

let bb: Bb;
beforeAll(async () => {
  bb = await loadBb(wasmBytes());
});

function compileExample(module: number): Uint8Array {
  const compiler = Compiler.forExample(bb, 'split_cnn', module);
  try {
    return compiler.compile(Compiler.recordExample(bb, 'split_cnn', module));
  } finally {
    compiler.free();
  }
}

describe('one template call is split_cnn', () => {
  const cases: [number, SplitLearningOptions][] = [
    [0, { name: 'SplitCnn', cut: CUT, clients: 1, training: TRAINING }],
    [1, { name: 'SplitCnnU', cut: [CUT, HEAD_CUT], clients: 1, training: TRAINING }],
    [2, { name: 'SplitFedCnn', cut: CUT, clients: 8, training: TRAINING }],
  ];
  for (const [index, options] of cases) {
    test(`${options.name}: the C example's Module and artifact, byte for byte`, () => {
      const plan = splitLearning(options);
      expect(Buffer.from(plan.module.build(bb)).equals(Buffer.from(Compiler.recordExample(bb, 'split_cnn', index)))).toBe(true);
      expect(Buffer.from(plan.compile(bb)).equals(Buffer.from(compileExample(index)))).toBe(true);
    });
  }
});

// ---- what a node's SplitModel holds ------------------------------------------------------------

const utf8 = new TextEncoder();

function u64le(n: number): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt(n), true);
  return b;
}

/** Where `needle` last occurs in `bytes`, or -1. */
function lastIndexOf(bytes: Uint8Array, needle: Uint8Array): number {
  outer: for (let at = bytes.length - needle.length; at >= 0; at--) {
    for (let k = 0; k < needle.length; k++) if (bytes[at + k] !== needle[k]) continue outer;
    return at;
  }
  return -1;
}

/**
 * The trained tensors of the SplitModel at `slot` on `node`, by name: its saved state (the
 * last section of a snapshot, docs/RUNTIME.md: the slot, the type, then the state), each
 * part a ModelProto whose initializers are what its trainer holds.
 */
function heldTensors(node: BbNode, slot: string): Map<string, Float32Array> {
  const snapshot = node.snapshot();
  const slotBytes = utf8.encode(slot);
  const typeBytes = utf8.encode('SplitModel');
  const head = new Uint8Array([...u64le(slotBytes.length), ...slotBytes, ...u64le(typeBytes.length), ...typeBytes, 1]);
  const at = lastIndexOf(snapshot, head);
  expect(at, `the snapshot holds no SplitModel at slot ${slot}`).toBeGreaterThanOrEqual(0);
  const view = new DataView(snapshot.buffer, snapshot.byteOffset);
  const stateAt = at + head.length + 8;
  const state = snapshot.subarray(stateAt, stateAt + Number(view.getBigUint64(at + head.length, true)));
  const held = new Map<string, Float32Array>();
  for (let p = 0; p < state.length; ) {
    const size = new DataView(state.buffer, state.byteOffset + p).getUint32(0, true);
    const model = state.subarray(p + 4, p + 4 + size);
    for (const tensor of initializers(model)) held.set(tensor.name, tensor.data as Float32Array);
    p += 4 + size;
  }
  return held;
}

/** The initializers of a ModelProto (field 7, the graph; its field 5). */
function initializers(model: Uint8Array): ReturnType<typeof decodeTensorProto>[] {
  const out: ReturnType<typeof decodeTensorProto>[] = [];
  for (const f of protoFields(model, 'ModelProto')) {
    if (f.field !== 7) continue;
    for (const g of protoFields(protoBytes(f, 'ModelProto.graph'), 'GraphProto')) if (g.field === 5) out.push(decodeTensorProto(protoBytes(g, 'initializer')));
  }
  return out;
}

// ---- a phone and a server --------------------------------------------------------------------------

interface Run {
  readonly client: BbNode;
  readonly server: BbNode;
  readonly network: LocalNetwork;
  now: bigint;
}

/** Steps the network on its own clock, 1 ms at a time, until done() or the limit. */
function runUntil(run: Run, done: () => boolean, limitMs = 60_000): void {
  for (let ms = 0; !done() && ms < limitMs; ms++) {
    run.now += MS;
    run.network.poll(run.now);
  }
  // let both nodes settle without time passing (a snapshot needs them quiet)
  for (let i = 0; i < 100 && (run.client.hasWork() || run.server.hasWork()); i++) run.network.poll(run.now);
}

describe('a phone and a server train the model as if it were whole', () => {
  const STEPS = 8;
  const BATCH = 32;
  for (const shape of ['vanilla', 'u'] as const) {
    test(`${shape}: after ${STEPS} steps every parameter is the whole model's, bit for bit`, async () => {
      const all = Dataset.fromCsv(bb, DIGITS);
      const mine = all.subset(Array.from({ length: 4 * BATCH }, (_, i) => i));
      const held = all.subset(Array.from({ length: 200 }, (_, i) => 1000 + i));
      const plan = splitLearning({ cut: shape === 'u' ? [CUT, HEAD_CUT] : CUT, clients: 1, training: TRAINING, batch: BATCH, shuffle: false });
      // the phone and the server each have a bb.wasm of their own
      const serverBb = await loadBb(wasmBytes());
      const artifact = plan.compile(bb);
      const server = plan.installServer(serverBb, { artifact, model: CNN, self: peerIdFromU64(1n) });
      const client = plan.installClient(bb, { artifact, model: CNN, self: peerIdFromU64(2n), server: server.node.self, data: mine, test: held });
      server.start([client.node.self]);
      const run: Run = { client: client.node, server: server.node, network: new LocalNetwork([client.node, server.node]), now: 0n };
      client.start(run.now);
      runUntil(run, () => client.counts().steps >= STEPS);
      expect(client.counts()).toMatchObject({ steps: STEPS, timeouts: 0, refused_gradients: 0 });
      expect(server.counts()).toMatchObject({ steps: STEPS, refused_activations: 0 });

      // the whole model, trained by one trainer on the same batches
      const trainer = OnnxTrainer.create(bb, CNN, TRAINING);
      const x = mine.features().data;
      const y = mine.labels().data;
      for (let s = 0; s < STEPS; s++) {
        const first = (s * BATCH) % (4 * BATCH);
        expect(trainer.step({ x: x.slice(first * 64, (first + BATCH) * 64), labels: y.slice(first, first + BATCH) }).applied).toBe(true);
      }
      const wholeParams = trainer.parameters();
      const phone = heldTensors(client.node, 'client_model');
      const rest = heldTensors(server.node, 'server_model');
      let at = 0;
      for (const { name, data } of initializers(CNN)) {
        if (!(data instanceof Float32Array)) continue;
        const split = phone.get(name) ?? rest.get(name);
        expect(split, `no side holds ${name}`).toBeDefined();
        expect(phone.has(name) && rest.has(name), `${name} is held on both sides`).toBe(false);
        const want = wholeParams.subarray(at, at + data.length);
        expect(Buffer.from(split!.buffer, split!.byteOffset, split!.byteLength).equals(Buffer.from(want.buffer, want.byteOffset, want.byteLength)), `${name} differs from the whole model's`).toBe(true);
        expect(Array.from(split!).some((v, i) => v !== data[i]), `${name} did not train`).toBe(true);
        at += data.length;
      }
      expect(at).toBe(wholeParams.length);
      // the phone built its own layers only: the server's are not on it, nor its own on the server
      expect(phone.has('conv1.weight') && !phone.has('fc1.weight')).toBe(true);
      expect(rest.has('fc1.weight') && !rest.has('conv1.weight')).toBe(true);
      trainer.free();
      client.node.free();
      server.node.free();
      for (const d of [all, mine, held]) d.free();
    });
  }
});

describe('SplitFed', () => {
  test("two clients' parts are averaged by the server every round of steps, and both train on", async () => {
    const all = Dataset.fromCsv(bb, DIGITS);
    const shards = [0, 1].map((k) => all.subset(Array.from({ length: 64 }, (_, i) => 64 * k + i)));
    const held = all.subset(Array.from({ length: 100 }, (_, i) => 1000 + i));
    const plan = splitLearning({ cut: CUT, clients: 2, roundSteps: 3, training: TRAINING, batch: 16 });
    expect(plan.averaged).toBe(true);
    const artifact = plan.compile(bb);
    const server = plan.installServer(bb, { artifact, model: CNN, self: peerIdFromU64(1n) });
    const clients = shards.map((data, k) =>
      plan.installClient(bb, { artifact, model: CNN, self: peerIdFromU64(BigInt(k + 2)), server: server.node.self, data, test: held }),
    );
    server.start(clients.map((c) => c.node.self));
    const network = new LocalNetwork([server.node, ...clients.map((c) => c.node)]);
    let now = 0n;
    for (const c of clients) c.start(now);
    for (let ms = 0; ms < 20_000 && !clients.every((c) => c.counts().shares >= 3); ms++) network.poll((now += MS));
    for (const c of clients) expect(c.counts()).toMatchObject({ average_timeouts: 0, timeouts: 0, refused_gradients: 0 });
    for (const c of clients) expect(c.counts().shares).toBeGreaterThanOrEqual(3);
    // every round closed with both parts, and each client took its steps between the averages
    expect(Number(server.node.counter('fedavg.rounds_closed'))).toBeGreaterThanOrEqual(2);
    for (const c of clients) expect(c.counts().steps).toBeGreaterThanOrEqual(9);
    for (const c of clients) c.node.free();
    server.node.free();
    for (const d of [all, held, ...shards]) d.free();
  });
});

describe('a confused author', () => {
  test('a model that is not ONNX', () => {
    const plan = splitLearning({ cut: CUT, clients: 1 });
    const artifact = plan.compile(bb);
    const error = bbErrorOf(() => plan.installServer(bb, { artifact, model: cpuMlp({ inputs: 64, outputs: 10 }) as never }));
    expect(error.message).toContain('a split cuts an ONNX model; cpuMlp is not one');
  });

  test('a vanilla split cut twice, and a cut the model does not have', () => {
    const twice = bbErrorOf(() => splitLearning({ cut: [CUT, HEAD_CUT], shape: 'vanilla', clients: 1 }).compile(bb));
    expect(twice.message).toContain('a vanilla split is cut at 1 value; got 2');
    const plan = splitLearning({ cut: 'conv_out', clients: 1 });
    const artifact = plan.compile(bb);
    const error = bbErrorOf(() => plan.installServer(bb, { artifact, model: CNN }));
    expect(error.message).toContain('the split at conv_out: the cut names conv_out, which is no value of the graph');
  });

  test('a quorum past the clients, no clients', () => {
    expect(bbErrorOf(() => splitLearning({ cut: CUT, clients: 2, quorum: 3 })).message).toContain('quorum 3 is more than clients 2');
    expect(bbErrorOf(() => splitLearning({ cut: CUT, clients: 0 })).code).toBe(BbErrorCode.InvalidArgument);
  });
});
