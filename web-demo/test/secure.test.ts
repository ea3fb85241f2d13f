/**
 * The live federation with secure aggregation (serve.mjs --secure), as serve.mjs runs it:
 * the live plan (registry discovery) with SecAgg+, its clients installed with their
 * Identity as signer, on a test clock (LocalNetwork). The server's round reports carry the
 * count of masked updates each sum held (what status.json shows), the aggregator's own
 * counters say each round closed, and what the page derives from the server's traffic finds
 * no update it could score or name a client for — the round list says what the server saw.
 */
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';

import { Identity, loadBb, LocalNetwork, peerIdFromU64, type RoundReport } from 'bytesandbrains';
import { splitDigits } from 'bytesandbrains/examples';
import { decodeEnvelope, decodeValue, inspectArtifact } from 'bytesandbrains/internals';
import { expect, test } from 'vitest';

import { livePlan } from '../shared/live-plan.js';
import { mlpShapeFromConfig } from '../shared/mlp.js';
import { FedRounds, roundCounters, scorer, type PeerPoint, type RoundPoint } from '../shared/rounds.js';
import { maskedSample, SAMPLE, secaggMessage, setupModulusBits } from '../shared/secure-view.js';
import { roundLine } from '../src/federation/words.js';

const DIGITS = '/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz';
const MS = 1_000_000n;

test('a secure live federation: each round a sum of the clients\' masked updates, no update the server could read', async () => {
  const clients = 3;
  const bb = await loadBb();
  const plan = livePlan({ clients, quorum: 3, deadlineMs: 2000, registryTtlMs: 5000, secure: { threshold: 0, shares: 0 } });
  const artifact = plan.compile(bb);
  const split = splitDigits(bb, gunzipSync(readFileSync(DIGITS)), clients, 1, 0);
  const x = split.test.features().data as Float32Array;
  const y = split.test.labels().data as Float32Array;
  const rounds: RoundPoint[] = [];
  const points: PeerPoint[] = [];
  const tracker = new FedRounds(scorer(mlpShapeFromConfig(inspectArtifact(artifact).configs.get('model')!), { x, y }), { onRound: (r) => rounds.push(r), onPeerPoint: (p) => points.push(p) }, () => 0);
  const server = plan.installServer(bb, { artifact, self: peerIdFromU64(1), test: split.test, seed: 1, nowNs: 0n });
  const identities = await Promise.all(Array.from({ length: clients }, () => Identity.generate({ extractable: false })));
  const nodes = identities.map((identity, k) => plan.installClient(bb, { artifact, signer: identity, server: server.node.self, data: split.shards[k]!, seed: k + 2, nowNs: 0n }));
  // the values on the program's wires, as federation.mjs reads them (an envelope it cannot read it only counts)
  const wires = inspectArtifact(artifact).wires;
  const unreadable: Uint8Array[] = [];
  // the SecAgg+ messages the server sends and gets, read by the wire format as federation.mjs reads them
  let modulusBits = 0;
  const masked = new Map<number, number[][]>();
  const secagg = (bytes: Uint8Array, toServer: boolean) => {
    for (const fill of decodeEnvelope(bytes).fills) {
      const message = fill.op?.startsWith('SecAgg') ? secaggMessage(fill.payload) : undefined;
      if (!toServer) modulusBits = setupModulusBits(message) ?? modulusBits;
      const sample = toServer ? maskedSample(message, modulusBits) : undefined;
      if (sample !== undefined) masked.set(message!.round, [...(masked.get(message!.round) ?? []), sample]);
    }
  };
  const fills = (bytes: Uint8Array) => {
    try {
      const envelope = decodeEnvelope(bytes);
      return envelope.fills.filter((f) => f.op === undefined && f.site !== undefined && wires.has(f.site) && f.typeHash !== 0n).map((f) => decodeValue(f.typeHash, f.payload));
    } catch {
      unreadable.push(bytes);
      return [];
    }
  };
  // the server's traffic, watched as federation.mjs watches it
  server.node.onStep((step) => {
    if (step.kind === 'send') secagg(step.bytes!, false);
    if (step.kind === 'send') for (const value of fills(step.bytes!)) tracker.sent(step.peer!, value);
    if (step.kind === 'appEvent') tracker.event(step.topic!, step.value, step.topic === 'round' ? roundCounters(server.node) : undefined);
  });
  const reports: RoundReport[] = [];
  server.onRound((report) => reports.push(report));
  const network = new LocalNetwork([server.node, ...nodes], {
    onDeliver: (to, from, bytes) => {
      if (to === server.node.self) secagg(bytes, true);
      if (to === server.node.self) for (const value of fills(bytes)) tracker.update(from, value);
    },
  });
  server.start([], 0n);
  // each tick lets the event loop turn: the clients sign their SecAgg+ keys asynchronously
  for (let t = 1n; t < 3000n && reports.length < 4; t++) {
    network.poll(t * 20n * MS);
    await new Promise((resolve) => setImmediate(resolve));
  }
  expect(reports.length).toBeGreaterThanOrEqual(4);
  for (const report of reports.slice(1)) expect(report.secure).toEqual({ summed: clients });
  expect(server.node.counter('fedavg.secagg_summed')).toBeGreaterThanOrEqual(BigInt(3 * clients));
  expect(server.node.counter('fedavg.secagg_aborted')).toBe(0n);
  // the page's view of the same rounds: closed (the aggregator's counters), sent to every
  // client, and no update it could score or attribute
  const closed = rounds.filter((r) => r.round > 0);
  expect(closed.length).toBeGreaterThanOrEqual(3);
  for (const r of closed) {
    expect(r.outcome).toBe('closed');
    expect(r.contributors).toEqual([]);
    expect(r.members).toHaveLength(clients);
  }
  expect(points).toEqual([]);
  expect(unreadable).toEqual([]);
  // what the page draws: each client's masked vector, as the server got it, looks uniform on
  // the ring (its sampled elements' mean and spread those of U[0, 1)), unlike the model step
  expect(modulusBits).toBeGreaterThan(8);
  expect(masked.get(0)).toHaveLength(clients);
  for (const sample of masked.get(0)!) {
    expect(sample).toHaveLength(SAMPLE);
    expect(sample.every((v) => v >= 0 && v < 1)).toBe(true);
    const mean = sample.reduce((a, b) => a + b, 0) / sample.length;
    const variance = sample.reduce((a, b) => a + (b - mean) ** 2, 0) / sample.length;
    expect(Math.abs(mean - 0.5)).toBeLessThan(0.1); // 256 uniform draws: sd of the mean 0.018
    expect(Math.abs(variance - 1 / 12)).toBeLessThan(0.03);
  }
  expect(masked.get(0)![0]).not.toEqual(masked.get(0)![1]);
  // a message that is not a masked vector, or one cut short, is no sample
  const any = [...masked.keys()];
  expect(any.length).toBeGreaterThanOrEqual(3);
  expect(maskedSample(secaggMessage(new Uint8Array(40)), modulusBits)).toBeUndefined();
  const line = roundLine({ ...closed[0]!, secure: { summed: reports[1]!.secure!.summed, aborted: 0 } }, { quorum: 3 }, String);
  expect(line).toMatch(/^round 1: closed \(sent to 3\) → \d+\.\d % · the server saw only the sum of 3 masked updates$/);
  network.free();
  split.free();
});

test('a masked vector at the top of the ring is sampled below 1, at every modulus width', () => {
  for (const bits of [9, 16, 31, 32, 53, 64]) {
    const width = Math.ceil(bits / 8);
    const count = 3;
    // round (u64), the 26-byte header (magic "BBSA", version, type 6), then the body:
    // u32 count and `count` ring elements, each 2^bits - 1
    const payload = new Uint8Array(8 + 26 + 4 + count * width);
    payload.set([0x42, 0x42, 0x53, 0x41], 8);
    payload[8 + 5] = 6;
    new DataView(payload.buffer).setUint32(8 + 26, count, true);
    for (let e = 0; e < count; e++) {
      const at = 8 + 26 + 4 + e * width;
      payload.fill(0xff, at, at + width);
      if (bits % 8) payload[at + width - 1] = (1 << bits % 8) - 1;
    }
    const sample = maskedSample(secaggMessage(payload), bits);
    expect(sample).toHaveLength(count - 1);
    for (const v of sample!) {
      expect(v).toBeLessThan(1);
      expect(v).toBeGreaterThan(0.99);
    }
  }
});
