/**
 * decodeEnvelope against the wire layer's published vector (tests/wire/test_wire_envelope.c),
 * and hostile bytes: every truncation, cut varints, wrong wire types, caps, unknown
 * address protocols, bad schema versions.
 */
import { expect, test } from 'vitest';

import { addressPeer, BbError, BbErrorCode, decodeEnvelope, ENVELOPE_CAPS, parseAddress, peerIdFromU64 } from '../src/index.js';

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

function malformed(bytes: Uint8Array): BbError {
  try {
    decodeEnvelope(bytes);
  } catch (error) {
    if (error instanceof BbError) return error;
    throw error;
  }
  throw new Error('decoded');
}

test('the published vector decodes field by field', () => {
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

test('protocol messages name their component and op', () => {
  const suffix = [0xe3, 0x01, 0, 0, 0, 7, 0xe4, 0x01, 0x08, ...new TextEncoder().encode('FindNode')];
  const fill = [0x0a, suffix.length, ...suffix, 0x18, 0x01];
  const e = decodeEnvelope(Uint8Array.from([0x12, fill.length, ...fill]));
  expect(e.fills[0]).toMatchObject({ component: 7, op: 'FindNode', triggerOnly: true });
  expect(e.fills[0]!.site).toBeUndefined();
  expect(e.correlation).toBeUndefined();
});

test('every truncation of the vector is refused, never read past its end', () => {
  for (let n = 1; n < VECTOR.length; n++) {
    const cut = VECTOR.subarray(0, n);
    let outcome: string;
    try {
      decodeEnvelope(cut);
      outcome = 'ok';
    } catch (error) {
      expect(error).toBeInstanceOf(BbError);
      expect((error as BbError).code).toBe(BbErrorCode.Malformed);
      outcome = 'refused';
    }
    // a cut exactly between top-level fields is a shorter, valid envelope
    const boundaries = [15, 52, 58, 63, 65];
    expect(outcome, `cut at ${n}`).toBe(boundaries.includes(n) ? 'ok' : 'refused');
  }
});

test('hostile fields are refused with what and where', () => {
  expect(malformed(Uint8Array.from([0x12, 0x05, 0x0a])).message).toMatch(/field 2 claims 5 bytes, 1 are left \(field at byte 0\)/);
  expect(malformed(Uint8Array.from([0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])).message).toMatch(/varint is longer than 10 bytes/);
  expect(malformed(Uint8Array.from([0x0b])).message).toMatch(/wire type 3/); // a group
  expect(malformed(Uint8Array.from([0x38, 0x02])).message).toMatch(/schema_version mismatch: got=2/);
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
