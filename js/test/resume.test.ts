/**
 * Resume after a reload or a crash (js/src/phones/resume.ts, js/src/phones/checkpoint.ts), as a phone and
 * a server live it, on a LocalNetwork with a test clock:
 * - a phone kept by keepNode is reloaded mid-federation (its node freed, a new one made from
 *   the saved record alone — no artifact downloaded): it comes back under its id with its
 *   model, data position, residual and counters, and the server takes its updates again;
 * - a record that was damaged, or saved by another peer or for another artifact, is refused
 *   with a BbError saying which; one forged with a matching digest meets the engine's own
 *   checks (a BbError or a working node, never a crash);
 * - a server restarted from its checkpoint file carries its rounds on (the round numbers go
 *   on from where they were) with the same clients.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';

import { restoreCheckpoint, saveCheckpoint } from '../src/phones/checkpoint.js';
import {
  BbError,
  cpuMlp,
  federatedAveraging,
  keepNode,
  loadBb,
  LocalNetwork,
  memoryStore,
  peerIdFromU64,
  readSavedNode,
  resumeNode,
  trafficOf,
  type Bb,
  type BbNode,
  type Dataset,
  type RoundReport,
} from '../src/index.js';
import { decodeSavedNode, encodeSavedNode } from '../src/internals.js';
import { twoBlobs, wasmBytes } from './support.js';

let bb: Bb;
beforeAll(async () => {
  bb = await loadBb(wasmBytes());
});

const MS = 1_000_000n;

const points = (seed: number): Dataset => twoBlobs(bb, 200, seed);

const plan = (): ReturnType<typeof federatedAveraging> =>
  federatedAveraging({ model: cpuMlp({ inputs: 2, hidden: [8], outputs: 2 }), clients: 2, deadlineMs: 300, compress: { kind: 'topk', k: 0.3 } });

/** A server and two clients on a LocalNetwork; `run(rounds)` polls on until the server reported that many more. */
function federation() {
  const p = plan();
  const artifact = p.compile(bb);
  const ids = [1, 2, 3].map((i) => peerIdFromU64(i));
  const server = p.installServer(bb, { artifact, self: ids[0]!, test: points(9), nowNs: 0n });
  const clients = [1, 2].map((i) => p.installClient(bb, { artifact, self: ids[i]!, server: ids[0]!, data: points(i), nowNs: 0n }));
  const reports: RoundReport[] = [];
  server.onRound((r) => reports.push(r));
  const fromPhone: number[] = [];
  let network = new LocalNetwork([server.node, ...clients]);
  let now = 0n;
  const run = (rounds: number): void => {
    const target = (reports.at(-1)?.round ?? 0) + rounds;
    while ((reports.at(-1)?.round ?? 0) < target && now < 600_000n * MS) network.poll((now += 5n * MS));
  };
  const idle = (node: BbNode): void => {
    while (node.hasWork()) network.poll((now += MS));
  };
  return {
    p, artifact, ids, server, clients, reports, fromPhone, run, idle,
    now: () => now,
    /** The nodes as they are now on a new network (a node replaced, or a server restarted). */
    rewire(nodes: BbNode[]): void {
      network = new LocalNetwork(nodes, { onDeliver: (to, from) => void (from === ids[2] && to === ids[0] && fromPhone.push(reports.at(-1)?.round ?? 0)) });
    },
  };
}

describe('a phone reloaded mid-federation', () => {
  test('resumes from its saved record alone, under its id, and the server takes its updates again', async () => {
    const f = federation();
    const phone = f.clients[1]!;
    const store = memoryStore();
    const keeper = keepNode(phone, { store, key: 'phone', artifact: f.artifact, clock: f.now, minIntervalMs: 0 });
    f.server.start([], 0n);
    f.run(5);
    f.idle(phone);
    await keeper.flush();
    expect(keeper.stats.saves).toBeGreaterThan(0);
    const stepsBefore = phone.counter('train.steps');
    const encodedBefore = trafficOf(phone).encodedBytes;
    const saved = phone.snapshot();
    await keeper.stop();
    phone.free(); // the page is gone

    // the next load: only the store, the identity and the data — no artifact is fetched
    const record = await readSavedNode(store, 'phone');
    expect(record?.artifact).toEqual(f.artifact);
    const { node, clock } = await resumeNode(bb, record!, { self: f.ids[2]!, slots: { data: { dataset: points(2) } } });
    expect(node.self).toBe(f.ids[2]);
    expect(node.snapshot()).toEqual(saved);
    expect(clock()).toBeGreaterThanOrEqual(record!.clockNs);
    const roundAtReload = f.reports.at(-1)!.round;
    f.rewire([f.server.node, f.clients[0]!, node]);
    f.run(6);
    expect(node.counter('train.steps')).toBeGreaterThan(stepsBefore);
    expect(trafficOf(node).encodedBytes).toBeGreaterThan(encodedBefore);
    // its updates after the reload reached the server, which refused none of them
    expect(f.fromPhone.filter((r) => r > roundAtReload).length).toBeGreaterThanOrEqual(4);
    const refusals = f.server.refusals();
    expect(refusals.refused_non_member + refusals.refused_future + refusals.late_dropped + refusals.codec_index + refusals.codec_reference).toBe(0);
    expect(f.server.node.counter('wire.duplicates')).toBe(0n);
    expect(f.reports.at(-1)!.accuracy).toBeGreaterThanOrEqual(0.9);
    node.free();
    f.server.node.free();
    f.clients[0]!.free();
  });

  test('the keeper saves by itself once the node has sent something, and not before', async () => {
    const f = federation();
    const phone = f.clients[1]!;
    const store = memoryStore();
    const keeper = keepNode(phone, { store, key: 'phone', artifact: f.artifact, clock: f.now, minIntervalMs: 0 });
    expect(await store.get('phone')).toBeUndefined();
    f.server.start([], 0n);
    f.run(2);
    for (let i = 0; i < 1000 && keeper.stats.saves === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(keeper.stats.saves).toBeGreaterThan(0);
    expect(keeper.stats.failures).toBe(0);
    await keeper.stop();
    for (const n of [f.server.node, ...f.clients]) n.free();
  });
});

describe('a saved record is untrusted', () => {
  async function savedRecord(): Promise<{ bytes: Uint8Array; artifact: Uint8Array; self: string }> {
    const f = federation();
    f.server.start([], 0n);
    f.run(2);
    f.idle(f.clients[1]!);
    const store = memoryStore();
    const keeper = keepNode(f.clients[1]!, { store, key: 'k', artifact: f.artifact, clock: f.now });
    await keeper.flush();
    await keeper.stop();
    for (const n of [f.server.node, ...f.clients]) n.free();
    return { bytes: (await store.get('k'))!, artifact: f.artifact, self: f.ids[2]! };
  }

  test('a damaged record is refused by its digest, naming it', async () => {
    const { bytes } = await savedRecord();
    for (const at of [0, 5, 40, bytes.length >> 1, bytes.length - 1]) {
      const damaged = bytes.slice();
      damaged[at]! ^= 0x20;
      await expect(decodeSavedNode(damaged)).rejects.toThrow(BbError);
    }
    await expect(decodeSavedNode(bytes.slice(0, bytes.length - 1))).rejects.toThrow(/SHA-256|saved node/);
    await expect(decodeSavedNode(new Uint8Array(10))).rejects.toThrow(/not a saved node record/);
    const store = memoryStore();
    const damaged = bytes.slice();
    damaged[bytes.length >> 1]! ^= 1;
    await store.put('k', damaged);
    await expect(readSavedNode(store, 'k')).rejects.toThrow(/SHA-256 at the end does not match/);
  });

  test("another peer's record, or one for another artifact, is refused", async () => {
    const { bytes, artifact, self } = await savedRecord();
    const record = await decodeSavedNode(bytes);
    await expect(resumeNode(bb, record, { self: peerIdFromU64(99), slots: { data: { dataset: points(2) } } })).rejects.toThrow(/is peer/);
    const other = federatedAveraging({ model: cpuMlp({ inputs: 2, hidden: [9], outputs: 2 }), clients: 2 }).compile(bb);
    await expect(resumeNode(bb, record, { self, artifact: other, slots: { data: { dataset: points(2) } } })).rejects.toThrow(/ran artifact/);
    const resumed = await resumeNode(bb, record, { self, artifact, slots: { data: { dataset: points(2) } } });
    resumed.node.free();
  });

  test('a forged record with a matching digest meets the engine: an error or a node, never a crash', async () => {
    const { bytes, self } = await savedRecord();
    const record = await decodeSavedNode(bytes);
    let refused = 0;
    let state = 1;
    for (let trial = 0; trial < 200; trial++) {
      const snapshot = record.snapshot.slice();
      for (let m = 0; m < 3; m++) {
        state = (state * 1103515245 + 12345) % 2147483648;
        snapshot[state % snapshot.length] = state & 0xff;
      }
      const forged = await decodeSavedNode(await encodeSavedNode({ ...record, snapshot }));
      try {
        const { node } = await resumeNode(bb, forged, { self, slots: { data: { dataset: points(2) } } });
        node.poll(record.clockNs + 1n);
        node.free();
      } catch (error) {
        expect(error).toBeInstanceOf(BbError);
        refused++;
      }
    }
    expect(refused).toBeGreaterThan(0);
  });
});

describe('a server restarted from its checkpoint file', () => {
  test('carries its rounds on with the same clients', async () => {
    const f = federation();
    f.server.start([], 0n);
    f.run(5);
    f.idle(f.server.node);
    const file = join(mkdtempSync(join(tmpdir(), 'bb-checkpoint-')), 'server.bbsv');
    const written = await saveCheckpoint(file, f.server.node, { artifact: f.artifact, clock: f.now });
    expect(readFileSync(file).length).toBe(written);
    const roundAtCrash = f.reports.at(-1)!.round;
    const closedAtCrash = f.server.node.counter('fedavg.rounds_closed');
    f.server.node.free(); // the process died

    const restarted = f.p.installServer(bb, { artifact: f.artifact, self: f.ids[0]!, test: points(9), restoring: true });
    const clock = await restoreCheckpoint(file, restarted.node, { artifact: f.artifact });
    expect(clock()).toBeGreaterThanOrEqual(f.now());
    restarted.onRound((r) => f.reports.push(r));
    f.rewire([restarted.node, ...f.clients]);
    f.run(5);
    const after = f.reports.filter((r) => r.round > roundAtCrash);
    expect(after.length).toBeGreaterThanOrEqual(5);
    expect(after[0]!.round).toBe(roundAtCrash + 1);
    expect(restarted.node.counter('fedavg.rounds_closed')).toBeGreaterThan(closedAtCrash);
    expect(restarted.node.counter('global_registry.joined')).toBe(2n); // nobody had to join again
    expect(f.reports.at(-1)!.accuracy).toBeGreaterThanOrEqual(0.9);

    // a damaged file is refused, and so is one saved by another server
    const damaged = readFileSync(file);
    damaged[damaged.length >> 1]! ^= 4;
    writeFileSync(file, damaged);
    const fresh = f.p.installServer(bb, { artifact: f.artifact, self: f.ids[0]!, test: points(9), restoring: true });
    await expect(restoreCheckpoint(file, fresh.node, { artifact: f.artifact })).rejects.toThrow(/SHA-256/);
    const stranger = f.p.installServer(bb, { artifact: f.artifact, self: peerIdFromU64(50), test: points(9), restoring: true });
    await saveCheckpoint(file, restarted.node, { artifact: f.artifact, clock: f.now });
    await expect(restoreCheckpoint(file, stranger.node, { artifact: f.artifact })).rejects.toThrow(/is peer/);
    for (const n of [restarted.node, fresh.node, stranger.node, ...f.clients]) n.free();
  });
});
