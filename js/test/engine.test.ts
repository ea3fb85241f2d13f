import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';

import { beforeAll, describe, expect, test } from 'vitest';

import {
  BbError,
  BbErrorCode,
  BbNode,
  Compiler,
  Dataset,
  loadBb,
  LocalNetwork,
  peerIdFromU64,
  randomPeerId,
  registerComponentType,
  roundReporter,
  TENSOR_F32,
  tensorValue,
  u64Value,
  type Bb,
  type Step,
  type Value,
} from '../src/index.js';
import {
  compileFederatedDigits,
  installDigitsClient,
  installDigitsServer,
  splitDigits,
  startDigitsServer,
} from '../src/examples/index.js';
import {
  decodeValue,
  decodeValueList,
  encodeValue,
  encodeValueList,
  kindHash,
} from '../src/internals.js';
import { bbErrorOf, wasmBytes } from './support.js';

const DIGITS = '/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz';

let module: WebAssembly.Module;
let digitsCsv: Uint8Array;

beforeAll(async () => {
  module = await WebAssembly.compile(wasmBytes());
  digitsCsv = gunzipSync(readFileSync(DIGITS));
});

const ms = (n: number): bigint => BigInt(n) * 1_000_000n;

describe('values', () => {
  test('every kind survives its wire form, and the hashes are the documented ones', () => {
    const values: Value[] = [
      { kind: 'trigger' },
      { kind: 'bytes', bytes: new Uint8Array([1, 2, 3]) },
      tensorValue('float', new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3]),
      tensorValue('int64', new BigInt64Array([-1n, 2n])),
      u64Value(42),
      u64Value(7n, 'timestamp'),
      { kind: 'peer', peer: peerIdFromU64(9) },
      { kind: 'peers', peers: [peerIdFromU64(1), randomPeerId()] },
      { kind: 'address', address: [{ p2p: peerIdFromU64(3) }, { site: 12n }, { component: 4 }, { op: 'Forward' }] },
      { kind: 'addresses', addresses: [[{ site: 1n }], []] },
      { kind: 'composite', children: [u64Value(1), { kind: 'composite', children: [{ kind: 'trigger' }] }] },
    ];
    for (const value of values) expect(decodeValue(kindHash(value.kind), encodeValue(value))).toEqual(value);
    expect(decodeValueList(encodeValueList([values[2], undefined, values[4]]))).toEqual([values[2], undefined, values[4]]);
    // docs/WIRE.md's worked example: float32 [2] = 1.0, 2.0
    expect(kindHash('tensor')).toBe(0x19d3489be43df8e8n);
    expect([...encodeValue(tensorValue('float', new Float32Array([1, 2])))]).toEqual([
      1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40,
    ]);
  });

  test('bad payloads are refused with the reason', () => {
    const tensor = encodeValue(tensorValue('float', new Float32Array([1, 2])));
    expect(bbErrorOf(() => decodeValue(kindHash('tensor'), tensor.subarray(0, 20))).code).toBe(BbErrorCode.Malformed);
    expect(bbErrorOf(() => decodeValue(kindHash('u64'), new Uint8Array(9))).message).toMatch(/after/);
    expect(bbErrorOf(() => decodeValue(123n, new Uint8Array())).code).toBe(BbErrorCode.NotFound);
    const hugeCount = new Uint8Array(8).fill(0xff);
    expect(bbErrorOf(() => decodeValue(kindHash('peers'), hugeCount)).code).toBe(BbErrorCode.Malformed);
    expect(() => tensorValue('float', new Float32Array(3), [2, 2])).toThrow(RangeError);
    expect(bbErrorOf(() => encodeValue({ kind: 'peer', peer: '0OIl' })).code).toBe(BbErrorCode.Malformed);
  });
});

describe('the compiler in wasm', () => {
  let bb: Bb;
  beforeAll(async () => {
    bb = await loadBb(module);
  });

  test('lists the examples, records and compiles one, describes the artifact', () => {
    const names = Compiler.examples(bb).map((e) => e.name);
    expect(names).toContain('federated_digits');
    expect(names).toContain('gossip_digits');
    const artifact = compileFederatedDigits(bb, { quorum: 3, target: 4 });
    const description = Compiler.describe(bb, artifact, 'json');
    expect(description.partitions.map((p) => p.name.split('#')[0])).toEqual(
      expect.arrayContaining(['FedDigits', 'FedDigits_clients', 'FedDigits_server']),
    );
    const fedavg = description.bindings.find((b) => b.slot === 'aggregator');
    expect(fedavg?.type).toBe('FedAvg');
    expect(Compiler.describe(bb, artifact, 'dot')).toMatch(/^digraph/);
  });

  test('compile errors name their kind; misuse is a BbError', () => {
    const compiler = Compiler.forExample(bb, 'quickstart');
    compiler.unbind('model');
    const error = bbErrorOf(() => compiler.compile(Compiler.recordExample(bb, 'quickstart')));
    expect(error.message).toMatch(/^compile failed/);
    expect(compiler.lastErrorKind).not.toBe('Ok');
    expect(bbErrorOf(() => compiler.unbind('model')).code).toBe(BbErrorCode.NotFound);
    expect(bbErrorOf(() => compiler.declare('X', undefined, [['Nope' as 'Model', 'm']])).code).toBe(BbErrorCode.InvalidArgument);
    compiler.free();
    expect(bbErrorOf(() => compiler.bind('model', 'Model', 'CpuMlp')).message).toMatch(/freed/);
    expect(bbErrorOf(() => Compiler.recordExample(bb, 'no_such_example')).code).toBe(BbErrorCode.NotFound);
  });
});

describe('nodes', () => {
  test('four clients and a server reach 90 % on the digits, computed from the accuracy events', async () => {
    const bb = await loadBb(module);
    const artifact = compileFederatedDigits(bb, { quorum: 3, target: 4 });
    const split = splitDigits(bb, digitsCsv, 4);
    const serverId = peerIdFromU64(1);
    const clientIds = [2, 3, 4, 5].map((i) => peerIdFromU64(i));
    const server = installDigitsServer(bb, artifact, serverId, split.test);
    expect(server.self).toBe(serverId); // the C side prints the same text
    expect(server.targets.some((t) => t.startsWith('FedDigits_server'))).toBe(true);
    const nodes = new Map<string, BbNode>([[serverId, server]]);
    clientIds.forEach((id, i) => nodes.set(id, installDigitsClient(bb, artifact, id, serverId, split.shards[i]!, i + 2)));
    for (const id of clientIds) server.addPeer(id);
    startDigitsServer(server, clientIds, split.test, 0n);

    const reports: { round: number; accuracy: number }[] = [];
    server.onStep(roundReporter((r) => reports.push(r)));
    const failures: Step[] = [];
    const net = new LocalNetwork(nodes.values(), {
      onStep: (_, step) => {
        if (step.kind === 'opFailed' || step.kind === 'wireReceiveFailed') failures.push(step);
      },
    });
    for (let t = 1; t < 3000 && (reports.at(-1)?.round ?? 0) < 25; t++) net.poll(ms(5 * t));
    const last = reports.at(-1)!;
    expect(last.round).toBeGreaterThanOrEqual(25);
    expect(last.accuracy).toBeGreaterThanOrEqual(0.9);
    expect(reports[0]!.accuracy).toBeLessThan(0.5); // it learned: the first model was poor
    expect(failures).toEqual([]);
    expect(server.counter('wire.rejected')).toBe(0n);
    expect(server.expiry()).not.toBeNull();
    for (const node of nodes.values()) node.free();
    split.free();
  });

  test('a server snapshotted mid-run goes on in a fresh node', async () => {
    const bb = await loadBb(module);
    const artifact = compileFederatedDigits(bb, { quorum: 2, target: 2 });
    const split = splitDigits(bb, digitsCsv, 2);
    const serverId = peerIdFromU64(1);
    const ids = [peerIdFromU64(2), peerIdFromU64(3)];
    let server = installDigitsServer(bb, artifact, serverId, split.test);
    const nodes = new Map<string, BbNode>([[serverId, server]]);
    ids.forEach((id, i) => nodes.set(id, installDigitsClient(bb, artifact, id, serverId, split.shards[i]!)));
    for (const id of ids) server.addPeer(id);
    startDigitsServer(server, ids, split.test, 0n);
    const rounds: number[] = [];
    const report = roundReporter((r) => rounds.push(r.round));
    server.onStep(report);
    const net = new LocalNetwork(nodes.values());
    let t = 1;
    for (; (rounds.at(-1) ?? 0) < 3; t++) net.poll(ms(5 * t));
    while (server.hasWork()) server.poll(ms(5 * t));
    const snapshot = server.snapshot();
    expect(snapshot.length).toBeGreaterThan(1000);
    const moved = installDigitsServer(bb, artifact, serverId, split.test);
    moved.restore(snapshot);
    expect(bbErrorOf(() => installDigitsServer(bb, artifact, serverId, split.test).restore(snapshot.subarray(0, 10))).code).toBe(
      BbErrorCode.Malformed,
    );
    server.free();
    server = moved;
    net.add(moved); // takes the old server's place
    moved.onStep(report);
    const before = rounds.at(-1)!;
    for (let n = 0; n < 2000 && rounds.at(-1)! < before + 3; n++, t++) net.poll(ms(5 * t));
    expect(net.dropped).toBe(0);
    expect(rounds.at(-1)).toBeGreaterThanOrEqual(before + 3);
    split.free();
  });


  test("the round timer (roundMs) decides how soon the next round follows a closed one, unless nextRound is 'close'; 0 is refused", async () => {
    const bb = await loadBb(module);
    const split = splitDigits(bb, digitsCsv, 2);
    // the host's clock only moves to the nodes' next deadline when nothing is left to do:
    // the virtual time five rounds take is the round timer's doing alone
    const fiveRounds = (roundMs?: number, nextRound?: 'close'): bigint => {
      const artifact = compileFederatedDigits(bb, { quorum: 2, target: 2, ...(roundMs === undefined ? {} : { roundMs }), ...(nextRound === undefined ? {} : { nextRound }) });
      const serverId = peerIdFromU64(1);
      const ids = [peerIdFromU64(2), peerIdFromU64(3)];
      const server = installDigitsServer(bb, artifact, serverId, split.test);
      const net = new LocalNetwork([server, ...ids.map((id, i) => installDigitsClient(bb, artifact, id, serverId, split.shards[i]!))]);
      const rounds: number[] = [];
      server.onStep(roundReporter((r) => rounds.push(r.round)));
      startDigitsServer(server, ids, split.test, 0n);
      let t = 0n;
      for (let n = 0; n < 10_000 && rounds.length < 6; n++) {
        net.poll(t);
        if (!net.hasWork()) t = net.expiry() ?? t + 1n;
      }
      expect(rounds.length).toBe(6); // round 0's model, then five closed rounds
      // each round the timer started early: the one whose last update woke it (next=close)
      expect(server.counter('loops.woken')).toBe(nextRound === 'close' ? 5n : 0n);
      net.free();
      return t;
    };
    expect(fiveRounds()).toBeGreaterThanOrEqual(ms(5 * 200)); // federated_digits' 200 ms
    expect(fiveRounds(1)).toBeLessThanOrEqual(ms(5));
    // nextRound 'close': back to back with the 200 ms timer, the clock never moved — every
    // round started in the poll that took its second update, none at a tick
    expect(fiveRounds(200, 'close')).toBe(0n);
    expect(bbErrorOf(() => compileFederatedDigits(bb, { roundMs: 0 })).code).toBe(BbErrorCode.InvalidArgument);
    expect(bbErrorOf(() => compileFederatedDigits(bb, { nextRound: 'soon' as 'close' })).code).toBe(BbErrorCode.InvalidArgument);
    split.free();
  });

  test("codec 'f16' halves the clients' updates on the wire and the federation still learns", async () => {
    const bb = await loadBb(module);
    const split = splitDigits(bb, digitsCsv, 4, 1, 5);
    const run = (codec?: 'f16'): { updateBytes: number; accuracy: number } => {
      const artifact = compileFederatedDigits(bb, { quorum: 3, target: 4, roundMs: 1, ...(codec === undefined ? {} : { codec }) });
      const serverId = peerIdFromU64(1);
      const ids = [2, 3, 4, 5].map((k) => peerIdFromU64(k));
      const server = installDigitsServer(bb, artifact, serverId, split.test);
      let updateBytes = 0;
      const net = new LocalNetwork([server, ...ids.map((id, i) => installDigitsClient(bb, artifact, id, serverId, split.shards[i]!, i + 2))], {
        onDeliver: (to, _from, bytes) => void (to === serverId && (updateBytes = Math.max(updateBytes, bytes.byteLength))),
      });
      const accuracy: number[] = [];
      server.onStep(roundReporter((r) => accuracy.push(r.accuracy)));
      startDigitsServer(server, ids, split.test, 0n);
      let t = 0n;
      for (let n = 0; n < 100_000 && accuracy.length < 41; n++) {
        net.poll(t);
        if (!net.hasWork()) t = net.expiry() ?? t + 1n;
      }
      net.free();
      return { updateBytes, accuracy: accuracy.at(-1)! };
    };
    const plain = run();
    const f16 = run('f16');
    expect(plain.updateBytes).toBeGreaterThan(9000); // 64·32 + 32 + 32·10 + 10 = 2410 float32s
    expect(f16.updateBytes).toBeLessThan(plain.updateBytes * 0.55);
    expect(plain.accuracy).toBeGreaterThan(0.9);
    expect(f16.accuracy).toBeGreaterThan(0.9);
    split.free();
  });
  test('a LocalNetwork counts what it could not deliver and sleeps until its earliest deadline', async () => {
    const bb = await loadBb(module);
    const artifact = compileFederatedDigits(bb, { quorum: 1, target: 2 });
    const split = splitDigits(bb, digitsCsv, 2);
    const server = installDigitsServer(bb, artifact, peerIdFromU64(1), split.test);
    const absent = [peerIdFromU64(2), peerIdFromU64(3)];
    for (const id of absent) server.addPeer(id);
    const net = new LocalNetwork([server]);
    expect(net.expiry()).toBeNull();
    startDigitsServer(server, absent, split.test, 0n);
    expect(net.hasWork()).toBe(true);
    for (let t = 1; t < 5; t++) net.poll(ms(5 * t));
    expect(net.dropped).toBe(2); // the first global model, to two clients not in the network
    expect(net.expiry()).toBe(server.expiry());
    net.free();
    expect(server.freed).toBe(true);
    split.free();
  });

  test('install errors say why; a freed node refuses', async () => {
    const bb = await loadBb(module);
    const artifact = compileFederatedDigits(bb);
    const error = bbErrorOf(() => BbNode.install(bb, { artifact, targets: ['Nope'] }));
    expect(error.message).toMatch(/^install failed \(UnknownTarget\)/);
    expect(bbErrorOf(() => BbNode.install(bb, { artifact, targets: ['FedDigits_clients'] })).message).toMatch(
      /install failed \(ConstructionFailed\).*host_data/,
    );
    expect(bbErrorOf(() => BbNode.install(bb, { artifact: new Uint8Array([1, 2, 3]), targets: ['FedDigits'] })).message).toMatch(
      /install failed/,
    );
    expect(bbErrorOf(() => BbNode.install(bb, { artifact, targets: ['FedDigits'], self: 'not-base58-0OIl' })).code).toBe(
      BbErrorCode.Malformed,
    );
    const data = Dataset.fromArrays(bb, new Float32Array(64), 64, new Float32Array([3]));
    const node = BbNode.install(bb, { artifact, targets: ['FedDigits', 'FedDigits_server'], slots: { data: { dataset: data } } });
    data.free(); // the node keeps its own reference
    expect(bbErrorOf(() => node.deliver(peerIdFromU64(5), new Uint8Array([0xff, 0xff]))).code).toBe(BbErrorCode.Malformed);
    node.free();
    expect(node.freed).toBe(true);
    expect(bbErrorOf(() => node.poll()).message).toMatch(/freed/);
  });
});

describe('components written in TypeScript', () => {
  test('a TypeScript DataSource feeds the clients of a federation', async () => {
    const bb = await loadBb(module);
    const all = Dataset.fromCsv(bb, digitsCsv);
    const x = all.features().data;
    const y = all.labels().data;
    let calls = 0;
    registerComponentType(bb, {
      name: 'PageBatches',
      roles: ['DataSource'],
      create: ({ config, slot }) => {
        expect(slot).toBe('data');
        const batch = Number(/batch=(\d+)/.exec(config)?.[1] ?? 32);
        let next = 0;
        return {
          invoke: ({ op, outputCount }) => {
            expect(op).toBe('NextBatch');
            expect(outputCount).toBe(2);
            calls++;
            const bx = new Float32Array(batch * 64);
            const by = new Float32Array(batch);
            for (let i = 0; i < batch; i++, next = (next + 1) % 1200) {
              bx.set(x.subarray(next * 64, next * 64 + 64), i * 64);
              by[i] = y[next]!;
            }
            return [tensorValue('float', bx, [batch, 64]), tensorValue('float', by)];
          },
        };
      },
    });
    const compiler = Compiler.forExample(bb, 'federated_digits');
    compiler.rebind('data', 'DataSource', 'PageBatches', 'batch=16').declare('PageBatches', TENSOR_F32);
    compiler.rebind('aggregator', 'Aggregator', 'FedAvg', 'quorum=2,target=2,deadline_ms=1000,no_quorum=abandon,init=model');
    const artifact = compiler.compile(Compiler.recordExample(bb, 'federated_digits'));
    compiler.free();

    const serverId = peerIdFromU64(1);
    const ids = [peerIdFromU64(2), peerIdFromU64(3)];
    const server = BbNode.install(bb, { artifact, self: serverId, targets: ['FedDigits', 'FedDigits_server'] });
    const nodes = new Map<string, BbNode>([[serverId, server]]);
    for (const id of ids) {
      const client = BbNode.install(bb, { artifact, self: id, targets: ['FedDigits_clients'] });
      client.addPeer(serverId);
      client.bindInput('FedDigits_clients', 'server', { kind: 'peers', peers: [serverId] });
      server.addPeer(id);
      nodes.set(id, client);
    }
    const test = all.subset(Array.from({ length: 597 }, (_, i) => 1200 + i));
    startDigitsServer(server, ids, test, 0n);
    const reports: number[] = [];
    server.onStep(roundReporter((r) => reports.push(r.accuracy)));
    const net = new LocalNetwork(nodes.values());
    for (let t = 1; t < 2000 && reports.length < 12; t++) net.poll(ms(5 * t));
    expect(calls).toBeGreaterThan(20);
    expect(reports.at(-1)).toBeGreaterThanOrEqual(0.85);
    for (const node of nodes.values()) node.free();
  });

  test('an op answered with a Promise completes later; a rejection fails it with the message', async () => {
    const bb = await loadBb(module);
    let answer: (() => void) | undefined;
    let reject = false;
    let destroyed = 0;
    registerComponentType(bb, {
      name: 'LaterBatches',
      roles: ['DataSource'],
      create: () => ({
        invoke: () =>
          new Promise((resolve, fail) => {
            answer = () => (reject ? fail(new Error('camera unplugged')) : resolve([tensorValue('float', new Float32Array([1, 2]), [1, 2]), tensorValue('float', new Float32Array([0]))]));
          }),
        destroy: () => destroyed++,
      }),
    });
    expect(bbErrorOf(() => registerComponentType(bb, { name: 'LaterBatches', roles: ['DataSource'], create: () => ({ invoke: () => [] }) })).code).toBe(
      BbErrorCode.Exists,
    );
    const compiler = Compiler.forExample(bb, 'quickstart').rebind('data_source', undefined, 'LaterBatches').declare('LaterBatches', TENSOR_F32);
    const artifact = compiler.compile(Compiler.recordExample(bb, 'quickstart'));
    compiler.free();
    const node = BbNode.install(bb, { artifact, targets: ['Quickstart'] });
    const events: Step[] = [];
    node.onStep((s) => events.push(s));
    node.invoke('Quickstart', {}, 1n);
    node.poll(2n);
    expect(events.filter((s) => s.kind === 'appEvent')).toEqual([]);
    answer!();
    await Promise.resolve();
    await new Promise((r) => setTimeout(r, 0));
    expect(node.hasWork()).toBe(true);
    node.poll(3n);
    const prediction = events.find((s) => s.kind === 'appEvent');
    expect(prediction?.topic).toBe('prediction');
    expect(prediction?.value?.kind).toBe('tensor');

    reject = true;
    node.invoke('Quickstart', {}, 4n);
    node.poll(5n);
    answer!();
    await new Promise((r) => setTimeout(r, 0));
    node.poll(6n);
    const failed = events.find((s) => s.kind === 'opFailed');
    expect(failed?.detail).toMatch(/camera unplugged/);
    node.free();
    expect(destroyed).toBe(1);
  });

  test('forty types are told apart: the fortieth installs and answers as itself', async () => {
    const bb = await loadBb(module);
    const created: number[] = [];
    for (let i = 0; i < 40; i++) {
      registerComponentType(bb, {
        name: `Many${i}`,
        roles: ['DataSource'],
        create: () => {
          created.push(i);
          return { invoke: () => [tensorValue('float', new Float32Array([i, i]), [1, 2]), tensorValue('float', new Float32Array([0]))] };
        },
      });
    }
    const compiler = Compiler.forExample(bb, 'quickstart').rebind('data_source', undefined, 'Many39').declare('Many39', TENSOR_F32);
    const artifact = compiler.compile(Compiler.recordExample(bb, 'quickstart'));
    compiler.free();
    const node = BbNode.install(bb, { artifact, targets: ['Quickstart'] });
    expect(created).toEqual([39]);
    node.invoke('Quickstart', {}, 1n);
    const prediction = node.poll(2n).find((s) => s.kind === 'appEvent');
    expect(prediction?.topic).toBe('prediction');
    // quickstart's model is the identity: the batch the fortieth type answered
    expect(prediction?.value).toEqual(tensorValue('float', new Float32Array([39, 39]), [1, 2]));
    node.free();
  });

  test('a component that throws fails its op with its message', async () => {
    const bb = await loadBb(module);
    registerComponentType(bb, {
      name: 'Broken',
      roles: ['DataSource'],
      create: ({ config }) => {
        if (config === 'refuse') throw new Error('no camera here');
        return { invoke: () => { throw new Error('lens cap on'); } };
      },
    });
    const compile = (config?: string) => {
      const compiler = Compiler.forExample(bb, 'quickstart').rebind('data_source', undefined, 'Broken', config).declare('Broken', TENSOR_F32);
      try {
        return compiler.compile(Compiler.recordExample(bb, 'quickstart'));
      } finally {
        compiler.free();
      }
    };
    const refused = bbErrorOf(() => BbNode.install(bb, { artifact: compile('refuse'), targets: ['Quickstart'] }));
    expect(refused.message).toMatch(/no camera here/);
    const node = BbNode.install(bb, { artifact: compile(), targets: ['Quickstart'] });
    node.invoke('Quickstart', {}, 1n);
    const failed = node.poll(2n).find((s) => s.kind === 'opFailed');
    expect(failed?.detail).toMatch(/lens cap on/);
    node.free();
  });
});

test('BbError is what every engine failure throws', async () => {
  const bb = await loadBb(module);
  expect(() => Dataset.fromCsv(bb, '1,2\n3\n')).toThrow(BbError);
  expect(bbErrorOf(() => Dataset.fromCsv(bb, '1,2\n3\n')).message).toMatch(/line 2/);
});
