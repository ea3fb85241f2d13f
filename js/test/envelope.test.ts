/**
 * decodeEnvelope against the wire layer's published vectors (tests/wire/test_wire_envelope.c:
 * the reference's schema 1 vector and docs/WIRE.md's schema 2 one), against envelopes the
 * engine sends (a federated_digits server's first round), and hostile bytes: every
 * truncation, cut varints, wrong wire types, caps, unknown address protocols, schema
 * versions above 2.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';

import { expect, test } from 'vitest';

import {
  BbError,
  BbErrorCode,
  loadBb,
  LocalNetwork,
  peerIdFromU64,
} from '../src/index.js';
import {
  compileFederatedDigits,
  installDigitsClient,
  installDigitsServer,
  splitDigits,
  startDigitsServer,
} from '../src/examples/index.js';
import {
  addressPeer,
  decodeEnvelope,
  decodeValue,
  ENVELOPE_CAPS,
  ENVELOPE_SCHEMA_VERSION,
  inspectArtifact,
  kindHash,
  parseAddress,
  wireId,
  type Envelope,
} from '../src/internals.js';
import { repoRoot, wasmBytes } from './support.js';

const P2P_1 = [0xa5, 0x03, 0x0a, 0x00, 0x08, 0, 0, 0, 0, 0, 0, 0, 1];
const P2P_2 = [0xa5, 0x03, 0x0a, 0x00, 0x08, 0, 0, 0, 0, 0, 0, 0, 2];
const SITE_17 = [0xe2, 0x01, 0, 0, 0, 0, 0, 0, 0, 0x11];
const PAYLOAD = [0x03, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x02, 0x03];
const TYPE_HASH = [0xbd, 0xd2, 0xa8, 0x88, 0xcc, 0xe1, 0x8c, 0xc1, 0x1d]; // 0x1d82330cc10a293d, BytesValue
const VECTOR = Uint8Array.from([
  0x0a, 0x0d, ...P2P_1,
  0x12, 0x23, 0x0a, 0x0a, ...SITE_17, 0x12, 0x0b, ...PAYLOAD, 0x20, ...TYPE_HASH,
  0x1a, 0x04, 0x08, 0x01, 0x10, 0x01,
  0x20, 0x80, 0xc2, 0xd7, 0x2f,
  0x38, 0x01,
  0x42, 0x0d, ...P2P_2,
]);

/** docs/WIRE.md, "The schema 2 envelope vector": a float32 tensor [1, 2] on wire ClientLogic.updated_params. */
const WIRE_SITE = [0xe2, 0x01, 0x43, 0xcf, 0xf4, 0x0e, 0x34, 0x0c, 0x52, 0x78];
const TENSOR = [1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40];
const TENSOR_HASH = [0xe8, 0xf1, 0xf7, 0xa1, 0xbe, 0x93, 0xd2, 0xe9, 0x19]; // 0x19d3489be43df8e8, Tensor
const VECTOR_V2 = Uint8Array.from([
  0x0a, 0x0d, ...P2P_1,
  0x12, 0x30, 0x0a, 0x0a, ...WIRE_SITE, 0x12, 0x18, ...TENSOR, 0x20, ...TENSOR_HASH,
  0x1a, 0x04, 0x08, 0x01, 0x10, 0x01,
  0x20, 0x80, 0xc2, 0xd7, 0x2f,
  0x38, 0x02,
  0x42, 0x0d, ...P2P_2,
]);

function malformed(bytes: Uint8Array): BbError {
  try {
    decodeEnvelope(bytes);
  } catch (error) {
    if (error instanceof BbError) return error;
    throw error;
  }
  throw new Error('decoded');
}

test('the reference vector (schema 1: its site is a position) decodes field by field', () => {
  const e = decodeEnvelope(VECTOR);
  expect(addressPeer(e.to)).toBe(peerIdFromU64(1));
  expect(addressPeer(e.from)).toBe(peerIdFromU64(2));
  expect(e.fills).toHaveLength(1);
  const fill = e.fills[0]!;
  expect(fill.site).toBe(17n);
  expect(fill.destination).toEqual([{ site: 17n }]);
  expect([...fill.payload]).toEqual(PAYLOAD);
  expect(fill.typeHash).toBe(0x1d82330cc10a293dn);
  expect(fill.triggerOnly).toBe(false);
  expect(e.correlation).toEqual({ kind: 'request', requestId: 1n });
  expect(e.remainingDeadlineNs).toBe(100_000_000n);
  expect(e.schemaVersion).toBe(1);
  expect(e.bytes).toBe(VECTOR.length);
});

test('the schema 2 vector: its site is the id of its wire', () => {
  expect(VECTOR_V2).toEqual(new Uint8Array(readFileSync(join(repoRoot, 'tests', 'fuzz', 'corpus', 'envelope-vector-v2.bin'))));
  const e = decodeEnvelope(VECTOR_V2);
  expect(e.schemaVersion).toBe(2);
  expect(e.schemaVersion).toBe(ENVELOPE_SCHEMA_VERSION);
  expect(addressPeer(e.to)).toBe(peerIdFromU64(1));
  expect(addressPeer(e.from)).toBe(peerIdFromU64(2));
  expect(e.fills).toHaveLength(1);
  const fill = e.fills[0]!;
  expect(fill.site).toBe(wireId('ClientLogic.updated_params'));
  expect(fill.site).toBe(0x43cff40e340c5278n);
  expect(fill.typeHash).toBe(kindHash('tensor'));
  const value = decodeValue(fill.typeHash, fill.payload);
  expect(value.kind === 'tensor' && [...value.tensor.dims, ...(value.tensor.data as Float32Array)]).toEqual([2, 1, 2]);
  expect(e.correlation).toEqual({ kind: 'request', requestId: 1n });
  expect(e.remainingDeadlineNs).toBe(100_000_000n);
  expect(e.bytes).toBe(93);
});

test('ENVELOPE_SCHEMA_VERSION is the one include/bb/wire.h writes; 0 is the field left out', () => {
  const header = readFileSync(join(repoRoot, 'include', 'bb', 'wire.h'), 'utf8');
  expect(ENVELOPE_SCHEMA_VERSION).toBe(Number(/#define BB_ENVELOPE_SCHEMA_VERSION (\d+)/.exec(header)![1]));
  const at = VECTOR_V2.length - 2 - P2P_2.length - 2; // `38 02`, before src_peer_addresses
  expect([...VECTOR_V2.subarray(at, at + 2)]).toEqual([0x38, 0x02]);
  const withoutVersion = Uint8Array.from([...VECTOR_V2.subarray(0, at), ...VECTOR_V2.subarray(at + 2)]);
  expect(decodeEnvelope(withoutVersion).schemaVersion).toBe(0);
  expect(decodeEnvelope(withoutVersion).fills[0]!.site).toBe(0x43cff40e340c5278n);
  expect(decodeEnvelope(Uint8Array.from([0x38, 0x00])).schemaVersion).toBe(0);
});

test('what the engine sends: schema 2, each data fill on a wire the artifact declares', async () => {
  const bb = await loadBb(wasmBytes());
  const bytes = compileFederatedDigits(bb, { quorum: 1, target: 1 });
  const wires = inspectArtifact(bytes).wires;
  const split = splitDigits(bb, gunzipSync(readFileSync('/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz')), 1, 1, 0);
  const serverId = peerIdFromU64(1);
  const clientId = peerIdFromU64(2);
  const server = installDigitsServer(bb, bytes, serverId, split.test);
  const client = installDigitsClient(bb, bytes, clientId, serverId, split.shards[0]!, 2);
  const sent: { from: string; envelope: Envelope }[] = [];
  for (const node of [server, client]) node.onStep((step) => step.kind === 'send' && sent.push({ from: node.self, envelope: decodeEnvelope(step.bytes!) }));
  const network = new LocalNetwork([server, client]);
  server.addPeer(clientId);
  startDigitsServer(server, [clientId], split.test, 0n);
  for (let t = 1; t < 400 && !sent.some((s) => s.from === clientId); t++) network.poll(BigInt(t) * 5_000_000n);
  const data = sent.filter((s) => s.envelope.fills.some((f) => f.site !== undefined));
  expect(data.map((s) => s.from)).toContain(serverId);
  expect(data.map((s) => s.from)).toContain(clientId);
  for (const { from, envelope } of data) {
    expect(envelope.schemaVersion).toBe(ENVELOPE_SCHEMA_VERSION);
    expect(addressPeer(envelope.from)).toBe(from);
    expect(addressPeer(envelope.to)).toBe(from === serverId ? clientId : serverId);
    for (const fill of envelope.fills) {
      const wire = wires.get(fill.site!);
      expect(wire?.name).toBe(from === serverId ? 'FedDigits.global' : 'FedDigits.update');
      expect(fill.typeHash).toBe(kindHash('composite'));
      expect(wire?.in?.kind).toBe('Composite');
    }
  }
  network.free();
  split.free();
});

test('protocol messages name their component and op', () => {
  const suffix = [0xe3, 0x01, 0, 0, 0, 7, 0xe4, 0x01, 0x08, ...new TextEncoder().encode('FindNode')];
  const fill = [0x0a, suffix.length, ...suffix, 0x18, 0x01];
  const e = decodeEnvelope(Uint8Array.from([0x12, fill.length, ...fill]));
  expect(e.fills[0]).toMatchObject({ component: 7, op: 'FindNode', triggerOnly: true });
  expect(e.fills[0]!.site).toBeUndefined();
  expect(e.correlation).toBeUndefined();
});

test('every truncation of either vector is refused, never read past its end', () => {
  // a cut exactly between top-level fields is a shorter, valid envelope
  for (const [vector, boundaries] of [
    [VECTOR, [15, 52, 58, 63, 65]],
    [VECTOR_V2, [15, 65, 71, 76, 78]],
  ] as const) {
    for (let n = 1; n < vector.length; n++) {
      let outcome: string;
      try {
        decodeEnvelope(vector.subarray(0, n));
        outcome = 'ok';
      } catch (error) {
        expect(error).toBeInstanceOf(BbError);
        expect((error as BbError).code).toBe(BbErrorCode.Malformed);
        outcome = 'refused';
      }
      expect(outcome, `cut at ${n} of ${vector.length}`).toBe((boundaries as readonly number[]).includes(n) ? 'ok' : 'refused');
    }
  }
});

test('hostile fields are refused with what and where', () => {
  expect(malformed(Uint8Array.from([0x12, 0x05, 0x0a])).message).toMatch(/field 2 claims 5 bytes, 1 are left \(field at byte 0\)/);
  expect(malformed(Uint8Array.from([0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])).message).toMatch(/varint is longer than 10 bytes/);
  expect(malformed(Uint8Array.from([0x0b])).message).toMatch(/wire type 3/); // a group
  expect(malformed(Uint8Array.from([0x38, 0x03])).message).toBe('envelope schema_version mismatch: got=3 supported=[1,2]');
  expect(malformed(Uint8Array.from([0x38, 0x03])).code).toBe(BbErrorCode.Unsupported);
  expect(malformed(Uint8Array.from([0x38, 0xff, 0xff, 0xff, 0xff, 0x0f])).message).toMatch(/got=4294967295 /);
  expect(malformed(Uint8Array.from([0x22, 0x00])).message).toMatch(/remaining_deadline_ns: field 4 at byte 0 is not a number/);
  expect(malformed(Uint8Array.from([0x0a, 0x05, 0x04, 127, 0, 0, 1])).message).toMatch(/unknown protocol code 4/);
  expect(malformed(Uint8Array.from([0x1a, 0x02, 0x08, 0x07])).message).toMatch(/correlation kind 7/);
  expect(malformed(Uint8Array.from([0x00])).message).toMatch(/field number 0/);
});

test('caps: fills, addresses, suffix and size, as the C decoder has them', () => {
  const fill = [0x12, 0x00];
  const many = Uint8Array.from(Array.from({ length: ENVELOPE_CAPS.fills + 1 }, () => fill).flat());
  expect(malformed(many).code).toBe(BbErrorCode.Limit);
  expect(decodeEnvelope(many.subarray(0, ENVELOPE_CAPS.fills * 2)).fills).toHaveLength(ENVELOPE_CAPS.fills);
  const addresses = Uint8Array.from(Array.from({ length: ENVELOPE_CAPS.addressesPerList + 1 }, () => [0x0a, 0x0d, ...P2P_1]).flat());
  expect(malformed(addresses).message).toMatch(/more than 16 addresses/);
  const long = new Uint8Array(ENVELOPE_CAPS.destSuffixBytes + 1 + 6);
  long.set([0x12, 0x84, 0x02, 0x0a, 0x81, 0x02]); // a fill of 260 bytes whose suffix claims 257
  expect(malformed(long).message).toMatch(/dest_suffix exceeds cap: cap=256 got=257/);
  expect(malformed(new Uint8Array(ENVELOPE_CAPS.bytes + 1)).message).toMatch(/envelope buffer too large/);
});

test('addresses: segments, minimal varints, at most 8 segments', () => {
  expect(parseAddress(Uint8Array.from([...P2P_1, ...SITE_17]))).toEqual([{ p2p: peerIdFromU64(1) }, { site: 17n }]);
  expect(() => parseAddress(Uint8Array.from(SITE_17.slice(0, 9)))).toThrow(/8 bytes needed, 7 left/);
  expect(() => parseAddress(Uint8Array.from([0xe2, 0x81, 0x00]))).toThrow(/not minimal/);
  expect(() => parseAddress(Uint8Array.from(Array.from({ length: 9 }, () => SITE_17).flat()))).toThrow(/more than 8 segments/);
  expect(() => parseAddress(Uint8Array.from([0xe4, 0x01, 0x01, 0xff]))).toThrow(/not UTF-8/);
});
