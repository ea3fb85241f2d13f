/**
 * Small uploads (js/src/templates/compress.ts), as a phone's federation runs them: the
 * templates with `compress` on a LocalNetwork on a test clock. Top-k with error feedback
 * learns what the uncompressed federation learns while each upload carries a tenth of the
 * values; the server reports the bytes of every round, a client reads its own; a client
 * that lies in its compressed update (repeated or out-of-range indices, a hostile count,
 * a length of its own) is refused and counted by reason while the honest clients' rounds
 * go on; and the templates whose peers share no model refuse top-k by name.
 */
import { beforeAll, describe, expect, test } from 'vitest';

import {
  BbError,
  bytesValue,
  codecComponent,
  cpuMlp,
  federatedAveraging,
  federatedEvaluation,
  gossipLearning,
  loadBb,
  LocalNetwork,
  peerIdFromU64,
  registerComponentType,
  trafficOf,
  type Bb,
  type BbNode,
  type Compression,
  type Dataset,
  type RoundReport,
  type Value,
} from '../src/index.js';
import { twoBlobs, wasmBytes } from './support.js';

let bb: Bb;
beforeAll(async () => {
  bb = await loadBb(wasmBytes());
});

const MS = 1_000_000n;

const dataset = (rows: number, seed: number): Dataset => twoBlobs(bb, rows, seed);

/** An MLP with 2·32 + 32 + 32·2 + 2 = 162 parameters: enough for a tenth to be few. */
const MLP = cpuMlp({ inputs: 2, hidden: [32], outputs: 2, lr: 0.05 });
const PARAMS = 162;

interface Run {
  reports: RoundReport[];
  clients: BbNode[];
  server: ReturnType<ReturnType<typeof federatedAveraging>['installServer']>;
  network: LocalNetwork;
}

/** A federation of `honest` clients (and the installed `extra` ones) run for `rounds` rounds. */
function federate(compress: Compression | undefined, rounds: number, extra: (artifact: Uint8Array, server: string) => BbNode[] = () => []): Run {
  const plan = federatedAveraging({ model: MLP, clients: 3, deadlineMs: 300, fitSteps: 5, discovery: 'seats', ...(compress ? { compress } : {}) });
  const artifact = plan.compile(bb);
  const server = plan.installServer(bb, { artifact, self: peerIdFromU64(1), test: dataset(200, 99), nowNs: 0n });
  const clients: BbNode[] = [];
  for (let k = 0; k < 3; k++) {
    clients.push(plan.installClient(bb, { artifact, self: peerIdFromU64(k + 2), server: server.node.self, data: dataset(300, k + 7), nowNs: 0n }));
  }
  const others = extra(artifact, server.node.self);
  const network = new LocalNetwork([server.node, ...clients, ...others]);
  const reports: RoundReport[] = [];
  server.onRound((report) => reports.push(report));
  server.start([...clients, ...others].map((n) => n.self), 0n);
  for (let t = 1n; t < 8000n && (reports.at(-1)?.round ?? 0) < rounds; t++) network.poll(t * 5n * MS);
  return { reports, clients, server, network };
}

describe('federatedAveraging with compress', () => {
  test('top-k with error feedback learns as the full updates do, each upload a tenth of the values', () => {
    const full = federate(undefined, 12);
    const topk = federate({ kind: 'topk', k: 0.1 }, 12);
    const last = (run: Run): RoundReport => run.reports.at(-1)!;
    expect(last(full).accuracy).toBeGreaterThanOrEqual(0.9);
    expect(last(topk).accuracy).toBeGreaterThanOrEqual(0.9);
    // each update: 16 of 162 values: the 10-byte header, a 21-byte bitmap, 16 uint8 codes with their scale
    for (const client of topk.clients) {
      const t = trafficOf(client);
      expect(t.encodedBytes % (10 + 21 + 9 + 16)).toBe(0);
      expect(t.encodedBytes).toBeGreaterThan(0);
    }
    // the server reports each round's bytes; the uploads of the compressed run are smaller
    const upload = (run: Run): number => run.reports.slice(2).reduce((sum, r) => sum + r.bytesIn!, 0);
    expect(topk.reports.every((r) => typeof r.bytesIn === 'number' && typeof r.bytesOut === 'number')).toBe(true);
    expect(upload(topk)).toBeLessThan(upload(full) / 2.5);
    expect(topk.server.traffic().decodedBytes).toBeGreaterThan(0);
    expect(topk.server.refusals().codec_index).toBe(0);
    full.network.free();
    topk.network.free();
  });

  test('float16 and 8-bit updates against the global model learn too', () => {
    for (const kind of ['f16', 'u8'] as const) {
      const run = federate({ kind }, 10);
      expect(run.reports.at(-1)!.accuracy).toBeGreaterThanOrEqual(0.9);
      expect(trafficOf(run.clients[0]!).encodedBytes % (kind === 'f16' ? 4 + 2 * PARAMS : 9 + PARAMS)).toBe(0);
      run.network.free();
    }
  });

  test('a client lying in its compressed update is refused and counted; the rounds go on', () => {
    // the liar's program: the same template with its codec slot bound to a codec that
    // writes top-k bytes of its own making (an admitted client lying within its role)
    const lies: Uint8Array[] = [
      topkBytes(PARAMS, [[5, 1], [5, 1]]), // a repeated index
      topkBytes(PARAMS, [[PARAMS, 1]]), // an index past the end
      topkBytes(PARAMS, [], 0xffffffff), // a hostile count
      topkBytes(PARAMS + 1, [[0, 1]]), // a length other than the model's
      topkBytes(PARAMS, [[3, 1]]).subarray(0, 15), // bytes that end early
    ];
    let call = 0;
    registerComponentType(bb, {
      name: 'LyingTopK',
      roles: ['Codec'],
      create: () => codecComponent({ encode: (): Value => bytesValue(lies[call++ % lies.length]!), decode: () => ({ dtype: 'float', dims: [0], data: new Float32Array(0) }) }),
    });
    const run = federate({ kind: 'topk', k: 0.1 }, 12, (artifact, server) => {
      const plan = federatedAveraging({ model: MLP, clients: 3, deadlineMs: 300, fitSteps: 5, discovery: 'seats', compress: { kind: 'topk', k: 0.1 } });
      const compiler = plan.compiler(bb);
      let liar: Uint8Array;
      try {
        compiler.rebind('codec', 'Codec', 'LyingTopK');
        liar = compiler.compile(plan.module.build(bb));
      } finally {
        compiler.free();
      }
      expect(liar).not.toEqual(artifact);
      return [plan.installClient(bb, { artifact: liar, self: peerIdFromU64(9), server, data: dataset(300, 3), nowNs: 0n })];
    });
    const refusals = run.server.refusals();
    expect(refusals.codec_index).toBeGreaterThanOrEqual(2);
    expect(refusals.codec_count).toBeGreaterThanOrEqual(1);
    expect(refusals.codec_reference).toBeGreaterThanOrEqual(1);
    expect(refusals.codec_length).toBeGreaterThanOrEqual(1);
    expect(run.server.traffic().codecRefused).toBe(refusals.codec_index + refusals.codec_count + refusals.codec_reference + refusals.codec_length + refusals.codec_nonfinite);
    expect(run.reports.at(-1)!.round).toBeGreaterThanOrEqual(12);
    expect(run.reports.at(-1)!.accuracy).toBeGreaterThanOrEqual(0.9);
    run.network.free();
  });

  test('a k out of (0, 1] is refused by name', () => {
    for (const k of [0, -0.1, 1.5, Number.NaN]) {
      expect(() => federatedAveraging({ model: MLP, clients: 2, compress: { kind: 'topk', k } })).toThrow(/compress\.k/);
    }
  });
});

describe('compress in the templates whose peers share no model', () => {
  test('gossip and federated evaluation refuse top-k, naming why', () => {
    expect(() => gossipLearning({ model: MLP, compress: { kind: 'topk', k: 0.1 } })).toThrow(BbError);
    expect(() => gossipLearning({ model: MLP, compress: { kind: 'topk', k: 0.1 } })).toThrow(/share none/);
    expect(() => federatedEvaluation({ model: MLP, clients: 2, compress: { kind: 'topk', k: 0.1 } })).toThrow(/share none/);
  });

  test('gossip peers exchange float16 models and learn', () => {
    const plan = gossipLearning({ model: MLP, periodMs: 50, compress: { kind: 'f16' } });
    const artifact = plan.compile(bb);
    const ids = [1, 2, 3, 4].map((i) => peerIdFromU64(i));
    const scores = new Map<string, number>();
    const peers = ids.map((self, i) => {
      const peer = plan.installPeer(bb, { artifact, self, data: dataset(300, i + 11), test: dataset(200, 99), seeds: ids.filter((p) => p !== self), seed: i });
      peer.onRound((r) => scores.set(self, r.accuracy));
      return peer;
    });
    const network = new LocalNetwork(peers.map((p) => p.node));
    for (const p of peers) p.start(0n);
    for (let t = 1n; t < 800n; t++) network.poll(t * 5n * MS);
    expect(Math.min(...scores.values())).toBeGreaterThanOrEqual(0.9);
    expect(trafficOf(peers[0]!.node).encodedBytes % (4 + 2 * PARAMS)).toBe(0);
    expect(trafficOf(peers[0]!.node).decodedBytes).toBeGreaterThan(0);
    network.free();
  });

  test('federated evaluation sends the model as 8-bit codes and scores it', () => {
    const plan = federatedEvaluation({ model: MLP, clients: 2, discovery: 'seats', batch: 100, compress: { kind: 'u8' } });
    const artifact = plan.compile(bb);
    const server = plan.installServer(bb, { artifact, self: peerIdFromU64(1), test: dataset(50, 1), nowNs: 0n });
    const clients = [2, 3].map((i) => plan.installClient(bb, { artifact, self: peerIdFromU64(i), server: server.node.self, data: dataset(200, i), nowNs: 0n }));
    const reports: RoundReport[] = [];
    server.onRound((r) => reports.push(r));
    const network = new LocalNetwork([server.node, ...clients]);
    server.start(clients.map((c) => c.self), 0n);
    for (let t = 1n; t < 800n && reports.length < 2; t++) network.poll(t * 5n * MS);
    expect(reports.length).toBeGreaterThanOrEqual(2);
    expect(Number.isFinite(reports[0]!.accuracy)).toBe(true);
    expect(trafficOf(server.node).encodedBytes % (9 + PARAMS)).toBe(0);
    expect(trafficOf(clients[0]!).decodedBytes).toBeGreaterThan(0);
    network.free();
  });
});

/** A top-k encoding as the format lays it out: n, k (or a count of one's own), a list of indices, float32 values. */
function topkBytes(n: number, entries: readonly (readonly [number, number])[], count = entries.length): Uint8Array {
  const out = new Uint8Array(10 + 8 * entries.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, n, true);
  view.setUint32(4, count, true);
  out[8] = 1;
  out[9] = 1;
  entries.forEach(([index, value], j) => {
    view.setUint32(10 + 4 * j, index, true);
    view.setFloat32(10 + 4 * entries.length + 4 * j, value, true);
  });
  return out;
}
