/**
 * Ed25519 public keys of small order, and non-canonical encodings, as an attacker uses
 * them: for such a key anyone can make a signature over any message that RFC 8032's
 * equation accepts (WebCrypto in Node accepts them), so whoever holds none of the secret
 * could join as its peer id, sign offers for it, or pass for an operator. Every verifier of
 * the package must refuse them: the identity module's (both backends), the signalling
 * server's join, join tokens checked in JavaScript, and bb.wasm's libsodium. The vector:
 * the eight points of order dividing 8, and the six non-canonical encodings of them
 * (noble's point arithmetic is the oracle that they are of small order).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { ED25519_TORSION_SUBGROUP, ed25519 } from '@noble/curves/ed25519.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { BbErrorCode, BbNode, Compiler, loadBb, type Bb } from '../src/index.js';
import { ed25519KeyRefusal, Identity, peerIdFromPublicKey, useEd25519Backend, verifySignature, type Signer } from '../src/identity/index.js';
import { createJoinToken, decodeJoinToken, tokenSignedBytes, verifyJoinToken } from '../src/signal/index.js';
import { SignalServer } from '../src/signal/node.js';
import { sdpRefusal, sdpSignedBytes } from '../src/transport/sdp-signature.js';
import { RawPeer } from './signal-support.js';
import { bbErrorOf, repoRoot, wasmBytes } from './support.js';

/**
 * The vector, shared with the C tests (tests/wire/small_order_keys.h): the eight
 * small-order points canonically encoded, then six other encodings of them, each with a
 * forged signature over the join token the tests make for it.
 */
const HEADER = readFileSync(join(repoRoot, 'tests', 'wire', 'small_order_keys.h'), 'utf8');
const ROWS = [...HEADER.matchAll(/\{"([0-9a-f]{64})",\s*"([0-9a-f]{128})"\}/g)].map((m) => ({ key: m[1]!, forged: m[2]! }));
const CANONICAL = Number(/BBT_SMALL_ORDER_CANONICAL (\d+)/.exec(HEADER)![1]);
const SMALL_ORDER_KEYS = ROWS.slice(0, CANONICAL).map((row) => row.key);
const NON_CANONICAL_SMALL_ORDER_KEYS = ROWS.slice(CANONICAL).map((row) => row.key);
/** The token each forged signature is over: the SECURITY.md vector's peer, room and expiry, role client. */
const TOKEN_GRANT = { peer: '12D3KooWCd3eX8r5ihRvzK7P1yPq5aakaBJhG5GNj18YTztPhoCa', role: 'client', room: 'federation-1', expiresAt: 2_000_000_000 } as const;
const hex = (text: string): Uint8Array => Uint8Array.from(text.match(/../g)!, (b) => parseInt(b, 16));
const VECTOR = [...SMALL_ORDER_KEYS, ...NON_CANONICAL_SMALL_ORDER_KEYS].map(hex);
const { Point } = ed25519;
const L = Point.Fn.ORDER;

const littleEndian = (bytes: Uint8Array): bigint => bytes.reduceRight((n, byte) => (n << 8n) | BigInt(byte), 0n);
const toLittleEndian = (n: bigint): Uint8Array => Uint8Array.from({ length: 32 }, (_, i) => Number((n >> BigInt(8 * i)) & 0xffn));
const same = (a: Uint8Array, b: Uint8Array): boolean => a.length === b.length && a.every((byte, i) => byte === b[i]);

/**
 * A signature by small-order `key` over `message` that RFC 8032's cofactorless equation
 * [S]B = R + [k]A accepts, made without any secret: R = [S]B + T for a torsion point T, so
 * the equation holds when [k]A = -T, which some T and S give after a few tries.
 */
function forge(key: Uint8Array, message: Uint8Array): Uint8Array {
  const A = Point.fromBytes(key, true);
  for (let s = 0n; s < 64n; s++) {
    for (const t of ED25519_TORSION_SUBGROUP) {
      const R = Point.BASE.multiplyUnsafe(s).add(Point.fromHex(t)).toBytes();
      const k = littleEndian(createHash('sha512').update(R).update(key).update(message).digest()) % L;
      if (same(Point.BASE.multiplyUnsafe(s).subtract(A.multiplyUnsafe(k)).toBytes(), R)) return new Uint8Array([...R, ...toLittleEndian(s)]);
    }
  }
  throw new Error('no forgery found');
}

/** Node's WebCrypto, asked directly (what the package used without its own check). */
async function webCryptoAccepts(key: Uint8Array, message: Uint8Array, signature: Uint8Array): Promise<boolean> {
  try {
    const imported = await crypto.subtle.importKey('raw', key as Uint8Array<ArrayBuffer>, { name: 'Ed25519' }, false, ['verify']);
    return await crypto.subtle.verify({ name: 'Ed25519' }, imported, signature as Uint8Array<ArrayBuffer>, message as Uint8Array<ArrayBuffer>);
  } catch {
    return false;
  }
}

/** Whoever signs "for" a small-order key: no secret, only forgeries. */
function forger(key: Uint8Array): Signer {
  return { peerId: peerIdFromPublicKey(key), publicKey: key, sign: async (message) => forge(key, message) };
}

describe('the small-order vector', () => {
  it('is eight distinct points of small order and six other encodings of them (noble)', () => {
    expect([SMALL_ORDER_KEYS.length, NON_CANONICAL_SMALL_ORDER_KEYS.length]).toEqual([8, 6]);
    const points = VECTOR.map((key) => Point.fromBytes(key, true));
    for (const point of points) expect(point.isSmallOrder()).toBe(true);
    expect(new Set(points.map((p) => p.toHex())).size).toBe(8);
    expect(SMALL_ORDER_KEYS.map((k) => Point.fromHex(k).toHex())).toEqual(SMALL_ORDER_KEYS);
    expect(new Set(SMALL_ORDER_KEYS)).toEqual(new Set(ED25519_TORSION_SUBGROUP));
    for (const key of NON_CANONICAL_SMALL_ORDER_KEYS) expect(() => Point.fromHex(key)).toThrow();
  });

  it('verifies forgeries through WebCrypto, and never through the package, whichever backend', async () => {
    const message = new TextEncoder().encode('anything at all');
    const accepted = [];
    for (const key of VECTOR) {
      const signature = forge(key, message);
      if (await webCryptoAccepts(key, message, signature)) accepted.push(key);
      expect(ed25519KeyRefusal(key)).toMatch(/small order|not canonical/);
      for (const backend of ['webcrypto', 'noble'] as const) {
        useEd25519Backend(backend);
        expect(await verifySignature(key, message, signature)).toBe(false);
      }
    }
    // WebCrypto takes every canonical one: the check is the package's own
    expect(accepted.length).toBeGreaterThanOrEqual(SMALL_ORDER_KEYS.length);
    useEd25519Backend('webcrypto');
  });

  it('comes with forged join tokens that WebCrypto accepts, remade here by forge()', async () => {
    for (const row of ROWS) {
      const key = hex(row.key);
      const token = await createJoinToken(forger(key), TOKEN_GRANT);
      const decoded = decodeJoinToken(token)!;
      expect(Buffer.from(decoded.signature).toString('hex'), row.key).toBe(row.forged);
      expect(await webCryptoAccepts(key, tokenSignedBytes(decoded.body), decoded.signature), row.key).toBe(true);
    }
  });

  it('leaves genuine keys alone', async () => {
    for (let i = 0; i < 50; i++) {
      const id = await Identity.generate();
      expect(ed25519KeyRefusal(id.publicKey)).toBeNull();
      const message = new Uint8Array([i]);
      expect(await verifySignature(id.publicKey, message, await id.sign(message))).toBe(true);
    }
    expect(ed25519KeyRefusal(new Uint8Array(31))).toMatch(/32 bytes/);
  });
});

describe('small-order keys refused by every verifier of the package', () => {
  let server: SignalServer;
  let bb: Bb;
  let artifact: Uint8Array;

  beforeAll(async () => {
    server = await SignalServer.listen({ port: 0, host: '127.0.0.1' });
    bb = await loadBb(await WebAssembly.compile(wasmBytes()));
    const compiler = Compiler.forExample(bb, 'quickstart');
    artifact = compiler.compile(Compiler.recordExample(bb, 'quickstart'));
    compiler.free();
  });
  afterAll(async () => {
    await server.close();
  });

  it('the signalling server: two strangers cannot join as one small-order id', async () => {
    const url = `ws://127.0.0.1:${server.address.port}`;
    for (const key of VECTOR.slice(0, SMALL_ORDER_KEYS.length)) {
      for (let stranger = 0; stranger < 2; stranger++) {
        const peer = (await RawPeer.open(url))!;
        const reply = await peer.join('open-room', forger(key) as unknown as Identity);
        expect(reply, `${peerIdFromPublicKey(key)} (stranger ${stranger})`).toMatchObject({ type: 'error', code: 'bad-signature' });
        peer.terminate();
      }
    }
  });

  it('SDP signatures and join tokens checked in JavaScript', async () => {
    const bob = await Identity.generate();
    const nonce = new Uint8Array(16);
    const sdp = 'v=0\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=fingerprint:sha-256 ' + Array(32).fill('AB').join(':') + '\r\n';
    for (const key of VECTOR) {
      const signer = forger(key);
      const sig = Buffer.from(forge(key, sdpSignedBytes('offer', sdp, signer.peerId, bob.peerId, nonce))).toString('base64');
      expect(await sdpRefusal('offer', sdp, signer.peerId, bob.peerId, nonce, sig)).toMatch(/does not verify/);
      const token = await createJoinToken(signer, TOKEN_GRANT);
      await expect(verifyJoinToken(token, { peer: TOKEN_GRANT.peer, room: TOKEN_GRANT.room, operators: [key], now: 1_700_000_000 })).rejects.toThrow(/signature does not verify/);
    }
  });

  it('bb.wasm (libsodium) refuses tokens of a small-order operator key', async () => {
    const bob = await Identity.generate();
    for (const key of VECTOR) {
      const node = BbNode.install(bb, { artifact, self: bob.peerId, targets: ['Quickstart'], admission: { room: TOKEN_GRANT.room, operators: [key] } });
      try {
        const token = await createJoinToken(forger(key), TOKEN_GRANT);
        const error = bbErrorOf(() => node.admitToken(TOKEN_GRANT.peer, token));
        expect(error.code).toBe(BbErrorCode.Denied);
        expect(error.message).toMatch(/bad_signature/);
      } finally {
        node.free();
      }
    }
  });
});
