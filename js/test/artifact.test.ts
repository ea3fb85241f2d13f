/**
 * inspectArtifact and partitionBindings on the examples' artifacts: the functions, configs
 * and wire tables are the ones the compiler wrote, the wire ids are the ones describe()
 * reports and the engine puts in real envelopes (a federated_digits round in a
 * LocalNetwork), wire tables the compiler would not write are refused, and each partition
 * keeps exactly the bindings it uses.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';

import { beforeAll, expect, test } from 'vitest';

import {
  BbError,
  Compiler,
  loadBb,
  LocalNetwork,
  peerIdFromU64,
  type Bb,
} from '../src/index.js';
import {
  compileFederatedDigits,
  installDigitsClient,
  installDigitsServer,
  splitDigits,
  startDigitsServer,
} from '../src/examples/index.js';
import {
  ARTIFACT_KEYS,
  decodeEnvelope,
  decodeValue,
  inspectArtifact,
  partitionBindings,
  wireId,
} from '../src/internals.js';
import { repoRoot, wasmBytes } from './support.js';

const DIGITS = '/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz';
let bb: Bb;

beforeAll(async () => {
  bb = await loadBb(wasmBytes());
});

function compileExample(name: string, module = 0): Uint8Array {
  const compiler = Compiler.forExample(bb, name, module);
  try {
    return compiler.compile(Compiler.recordExample(bb, name, module));
  } finally {
    compiler.free();
  }
}

test('the keys are the ones include/bb/artifact.h spells', () => {
  const header = readFileSync(join(repoRoot, 'include', 'bb', 'artifact.h'), 'utf8');
  const define = (name: string): string => new RegExp(`#define ${name} "([^"]*)"`).exec(header)![1]!;
  expect(ARTIFACT_KEYS.compiled).toBe(define('BB_KEY_COMPILED'));
  expect(ARTIFACT_KEYS.configPrefix).toBe(define('BB_KEY_CONFIG_PREFIX'));
  expect(ARTIFACT_KEYS.peerClass).toBe(define('BB_KEY_PEER_CLASS'));
  expect(ARTIFACT_KEYS.slotName).toBe(define('BB_KEY_SLOT_NAME'));
  expect(ARTIFACT_KEYS.wireDomain).toBe(define('BB_DOMAIN_WIRE'));
  expect(ARTIFACT_KEYS.wireOutPrefix).toBe(define('BB_KEY_WIRE_OUT_PREFIX'));
  expect(ARTIFACT_KEYS.wireInPrefix).toBe(define('BB_KEY_WIRE_IN_PREFIX'));
  expect(ARTIFACT_KEYS.wireName).toBe(define('BB_KEY_WIRE_ID'));
  expect(header).toContain(`#define BB_KEY_DEP_PREFIX "${ARTIFACT_KEYS.depPrefix}"`);
});

test('every example: the partitions, nodes and edges describe() reports, read in TypeScript', () => {
  for (const example of Compiler.examples(bb)) {
    for (let module = 0; module < example.modules; module++) {
      const bytes = compileExample(example.name, module);
      const artifact = inspectArtifact(bytes);
      const description = Compiler.describe(bb, bytes, 'json');
      const partitions = artifact.functions.filter((fn) => fn.peerClass !== undefined);
      expect(partitions.map((fn) => [fn.name, fn.peerClass])).toEqual(description.partitions.map((p) => [p.name, p.peer_class]));
      for (const [i, p] of description.partitions.entries()) {
        const nodes = p.nodes as { op_type: string; domain: string; inputs: string[]; outputs: string[] }[];
        expect(partitions[i]!.nodes.map((n) => [n.opType, n.domain, n.inputs, n.outputs])).toEqual(nodes.map((n) => [n.op_type, n.domain, n.inputs, n.outputs]));
      }
      // the wire table, row for row as describe() prints it (ids computed in C)
      const hex = (n: bigint): string => `0x${n.toString(16).padStart(16, '0')}`;
      const rows = [...artifact.wires.values()].flatMap((w) =>
        (['out', 'in'] as const).flatMap((direction) => {
          const d = w[direction];
          return d === undefined ? [] : [{ name: w.name, direction, kind: d.kind, type: d.type, type_hash: hex(d.typeHash), id: hex(w.id) }];
        }),
      );
      const byKey = (r: { name: string; direction: string }): string => `${r.direction} ${r.name}`;
      expect(rows.sort((a, b) => byKey(a).localeCompare(byKey(b))), example.name).toEqual([...description.wires].sort((a, b) => byKey(a).localeCompare(byKey(b))));
      // every wire edge lands on a Recv listening to the edge's wire
      for (const edge of description.wire_edges) {
        expect(artifact.wires.get(wireId(edge.wire))?.recvs, `${example.name} ${edge.wire}`).toContainEqual({ fn: edge.to, value: edge.site });
      }
      // every wire a Recv listens to is declared received
      for (const w of artifact.wires.values()) if (w.recvs.length > 0) expect(w.in, `${example.name} ${w.name}`).toBeDefined();
      // bindings kept are a subset of the table, and every slot an op names is kept
      const used = partitionBindings(description, artifact);
      for (const p of description.partitions) {
        const kept = used.get(p.name)!.map((b) => b.slot);
        const table = description.bindings.filter((b) => b.target === p.name).map((b) => b.slot);
        for (const slot of kept) expect(table).toContain(slot);
        const fn = partitions.find((f) => f.name === p.name)!;
        for (const node of fn.nodes) {
          const slot = node.metadata.get(ARTIFACT_KEYS.slotName);
          if (slot !== undefined) expect(kept, `${p.name} calls ${slot}`).toContain(slot);
        }
      }
    }
  }
});

test('federated_digits: configs, and only the bindings each partition uses', () => {
  const bytes = compileFederatedDigits(bb, { quorum: 2, target: 3 });
  const artifact = inspectArtifact(bytes);
  expect(artifact.configs.get('aggregator')).toBe('quorum=2,target=3,deadline_ms=1000,no_quorum=abandon,init=model');
  expect(artifact.configs.get('data')).toBe('batch=32');
  const used = partitionBindings(Compiler.describe(bb, bytes, 'json'), artifact);
  const of = (prefix: string): string[] =>
    [...used.entries()].find(([name]) => name.startsWith(`${prefix}#`))![1].map((b) => `${b.slot}:${b.reach}${b.from ? `<${b.from}` : ''}`).sort();
  // the round loop aggregates and evaluates; FedAvg's init=model names the model it already calls
  expect(of('FedDigits')).toEqual(['aggregator:op', 'data:config<model', 'model:op']);
  // a client fits its model, which draws batches from the data slot (data=data)
  expect(of('FedDigits_clients')).toEqual(['data:config<model', 'model:op']);
  // the server's update partition only contributes; FedAvg names the model it starts from,
  // whose own data slot is the model's business, not the partition's
  expect(of('FedDigits_server')).toEqual(['aggregator:op', 'model:config<aggregator']);
});

test('the wire ids are the ones the engine writes into its envelopes', () => {
  const bytes = compileFederatedDigits(bb, { quorum: 2, target: 2 });
  const artifact = inspectArtifact(bytes);
  const description = Compiler.describe(bb, bytes, 'json');
  const split = splitDigits(bb, gunzipSync(readFileSync(DIGITS)), 2, 1, 0);
  const serverId = peerIdFromU64(1);
  const ids = [peerIdFromU64(2), peerIdFromU64(3)];
  const server = installDigitsServer(bb, bytes, serverId, split.test);
  const clients = ids.map((id, k) => installDigitsClient(bb, bytes, id, serverId, split.shards[k]!, k + 2));
  const seen: { from: string; to: string; wire: string; recvs: string[]; kinds: string[] }[] = [];
  for (const node of [server, ...clients]) {
    node.onStep((step) => {
      if (step.kind !== 'send') return;
      const envelope = decodeEnvelope(step.bytes!);
      for (const fill of envelope.fills) {
        if (fill.site === undefined) continue;
        expect(envelope.schemaVersion).toBe(2);
        const wire = artifact.wires.get(fill.site);
        const value = decodeValue(fill.typeHash, fill.payload);
        const kinds = value.kind === 'composite' ? value.children.map((c) => c.kind) : [value.kind];
        seen.push({ from: node.self, to: step.peer!, wire: wire?.name ?? '?', recvs: wire?.recvs.map((r) => `${r.fn} ${r.value}`) ?? [], kinds });
      }
    });
  }
  const network = new LocalNetwork([server, ...clients]);
  for (const id of ids) server.addPeer(id);
  startDigitsServer(server, ids, split.test, 0n);
  for (let t = 1; t < 400 && seen.length < 8; t++) network.poll(BigInt(t) * 5_000_000n);
  const globalEdge = description.wire_edges.find((e) => e.wire === 'FedDigits.global')!;
  const updateEdge = description.wire_edges.find((e) => e.wire === 'FedDigits.update')!;
  const toClients = seen.filter((s) => s.from === serverId);
  const toServer = seen.filter((s) => s.to === serverId);
  expect(toClients.length).toBeGreaterThanOrEqual(2);
  expect(toServer.length).toBeGreaterThanOrEqual(2);
  for (const s of toClients) expect(s).toMatchObject({ wire: 'FedDigits.global', recvs: [`${globalEdge.to} ${globalEdge.site}`], kinds: ['tensor', 'u64'] });
  for (const s of toServer) expect(s).toMatchObject({ wire: 'FedDigits.update', recvs: [`${updateEdge.to} ${updateEdge.site}`] });
  expect(toServer[0]!.kinds[0]).toBe('tensor');
  network.free();
  split.free();
});

test('wire ids: FNV-1a-64 of the name, as docs/WIRE.md lists them', () => {
  expect(wireId('ClientLogic.updated_params')).toBe(0x43cff40e340c5278n);
  expect(wireId('FedNetwork.prediction_port')).toBe(0xa27609087b67af71n);
  expect(wireId('bf13eaba83dea434')).toBe(0x5e08d54d78217e0en);
  expect(wireId('b3b828bb3655e2a7')).toBe(0x5e08d54d78217e0en);
});

/** The artifact with one more model metadata entry (field 14), appended as protobuf allows. */
function withMetadata(bytes: Uint8Array, key: string, value: string): Uint8Array {
  const text = (field: number, s: string): number[] => {
    const b = [...new TextEncoder().encode(s)];
    return [(field << 3) | 2, ...varint(b.length), ...b];
  };
  const entry = [...text(1, key), ...text(2, value)];
  return Uint8Array.from([...bytes, 0x72, ...varint(entry.length), ...entry]);
}

function varint(n: number): number[] {
  const out: number[] = [];
  for (; n >= 0x80; n = Math.floor(n / 128)) out.push((n & 0x7f) | 0x80);
  return [...out, n];
}

test('wire tables the compiler would not write are refused', () => {
  const bytes = compileExample('multi_target_network');
  const wire = inspectArtifact(bytes).wires.get(wireId('FedNetwork.prediction_port'))!;
  expect(wire.out).toMatchObject({ kind: 'Tensor', type: expect.stringMatching(/^ai\.bytesandbrains\.tensor\./) });
  expect(wire.recvs).toHaveLength(1);
  const out = ARTIFACT_KEYS.wireOutPrefix;
  const good = `Composite|ai.bytesandbrains.composite|0x8aef80be67049517`;
  expect(inspectArtifact(withMetadata(bytes, `${out}Extra.port`, good)).wires.get(wireId('Extra.port'))).toEqual({
    name: 'Extra.port',
    id: wireId('Extra.port'),
    out: { kind: 'Composite', type: 'ai.bytesandbrains.composite', typeHash: 0x8aef80be67049517n },
    recvs: [],
  });
  expect(inspectArtifact(withMetadata(bytes, `${ARTIFACT_KEYS.wireInPrefix}Any.port`, 'Any||0x0000000000000000')).wires.get(wireId('Any.port'))!.in).toEqual({ kind: 'Any', type: '', typeHash: 0n });
  for (const value of [
    'Composite|ai.bytesandbrains.composite|0x8aef80be67049518', // the hash of another type
    'Composite|ai.bytesandbrains.composite|0x8AEF80BE67049517', // not as bb_wire_entry_format writes it
    'Thing|ai.bytesandbrains.composite|0x8aef80be67049517', // no such kind
    'Composite|ai.bytesandbrains.composite', // no hash
    `${good}|x`,
  ]) {
    expect(() => inspectArtifact(withMetadata(bytes, `${out}Extra.port`, value)), value).toThrow(/is not `<Kind>\|<type>\|0x<type hash>`/);
  }
  expect(() => inspectArtifact(withMetadata(bytes, `${out}a b`, good))).toThrow(/`a b`, which is not a wire name/);
  expect(() => inspectArtifact(withMetadata(bytes, out, good))).toThrow(/which is not a wire name/);
  const twins = withMetadata(withMetadata(bytes, `${out}bf13eaba83dea434`, good), `${out}b3b828bb3655e2a7`, good);
  expect(() => inspectArtifact(twins)).toThrow(/`bf13eaba83dea434` and `b3b828bb3655e2a7` share the id 0x5e08d54d78217e0e/);
});

test('bytes that are not an artifact are refused', () => {
  expect(() => inspectArtifact(Compiler.recordExample(bb, 'federated_digits'))).toThrow(/not a compiled artifact/);
  expect(() => inspectArtifact(Uint8Array.from([0xca, 0x01, 0x05, 0x0a]))).toThrow(BbError);
});
