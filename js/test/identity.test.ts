/**
 * Identities: Ed25519 keys through WebCrypto and through @noble/curves (each checked
 * against RFC 8032's vector and against the other, and against node:crypto), peer ids as
 * libp2p derives them, export and import in libp2p's key format, files in Node and
 * IndexedDB in Chromium (the same peer id after a reload).
 */
import { createPublicKey, verify as nodeVerify } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { extname, join, normalize, sep } from 'node:path';
import { ed25519 as noble } from '@noble/curves/ed25519.js';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import {
  Identity, ed25519Backend, peerIdFromPublicKey, publicKeyFromPeerId, useEd25519Backend, verifySignature, type Ed25519Backend,
} from '../src/identity/index.js';
import { loadIdentityFile } from '../src/identity/node.js';
import { base58Decode } from '../src/node/values.js';
import { CHROMIUM, CHROMIUM_ARGS, CONTENT_TYPES, packageRoot } from './support.js';

const hex = (text: string): Uint8Array => Uint8Array.from(Buffer.from(text, 'hex'));
const toHex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');

// RFC 8032 §7.1, TEST 1 (the empty message) and TEST 2 (one byte)
const RFC_SEED = hex('9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60');
const RFC_PUBLIC = 'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a';
const RFC_SIGNATURE = 'e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b';
const RFC2_SEED = hex('4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb');
const RFC2_SIGNATURE = '92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00';
// libp2p's peer-id spec test vector: an Ed25519 PrivateKey protobuf and its PublicKey protobuf
const LIBP2P_PRIVATE = '080112407e0830617c4a7de83925dfb2694556b12936c477a0e1feb2e148ec9da60fee7d1ed1e8fae2c4a144b8be8fd4b47bf3d3b34b871c3cacf6010f0e42d474fce27e';
const LIBP2P_PUBLIC = '080112201ed1e8fae2c4a144b8be8fd4b47bf3d3b34b871c3cacf6010f0e42d474fce27e';

const natural = await ed25519Backend();
afterEach(() => useEd25519Backend(natural));

describe.each(['webcrypto', 'noble'] as Ed25519Backend[])('Ed25519 through %s', (backend) => {
  it('reproduces RFC 8032\'s keys and signatures', async () => {
    useEd25519Backend(backend);
    const one = await Identity.fromSeed(RFC_SEED);
    expect(toHex(one.publicKey)).toBe(RFC_PUBLIC);
    expect(toHex(await one.sign(new Uint8Array(0)))).toBe(RFC_SIGNATURE);
    const two = await Identity.fromSeed(RFC2_SEED);
    expect(toHex(await two.sign(Uint8Array.of(0x72)))).toBe(RFC2_SIGNATURE);
    expect(await verifySignature(one.publicKey, new Uint8Array(0), hex(RFC_SIGNATURE))).toBe(true);
    expect(await verifySignature(one.publicKey, Uint8Array.of(0), hex(RFC_SIGNATURE))).toBe(false);
  });

  it('signs what the other implementation and node:crypto verify, and verifies theirs', async () => {
    useEd25519Backend(backend);
    const identity = await Identity.generate();
    const message = new TextEncoder().encode(`signed through ${backend}`);
    const signature = await identity.sign(message);
    expect(noble.verify(signature, message, identity.publicKey, { zip215: false })).toBe(true);
    const spki = Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), identity.publicKey]);
    expect(nodeVerify(null, message, createPublicKey({ key: spki, format: 'der', type: 'spki' }), signature)).toBe(true);
    const seed = noble.utils.randomSecretKey();
    const theirs = noble.sign(message, seed);
    expect(await verifySignature(noble.getPublicKey(seed), message, theirs)).toBe(true);
    const tampered = theirs.slice();
    tampered[10]! ^= 1;
    expect(await verifySignature(noble.getPublicKey(seed), message, tampered)).toBe(false);
    expect(await verifySignature(new Uint8Array(31), message, theirs)).toBe(false);
  });

  it('exports to libp2p\'s key format and imports it back, the spec\'s vector too', async () => {
    useEd25519Backend(backend);
    const identity = await Identity.generate();
    const copy = await Identity.import(await identity.export());
    expect(copy.peerId).toBe(identity.peerId);
    const vector = await Identity.import(hex(LIBP2P_PRIVATE));
    expect(toHex(vector.publicKey)).toBe(LIBP2P_PUBLIC.slice(8));
    expect(toHex(await vector.export())).toBe(LIBP2P_PRIVATE);
    // the peer id: identity multihash (00, 36 bytes) of the PublicKey protobuf
    expect(toHex(base58Decode(vector.peerId))).toBe(`0024${LIBP2P_PUBLIC}`);
    const mismatched = hex(LIBP2P_PRIVATE);
    mismatched[mismatched.length - 1]! ^= 1;
    await expect(Identity.import(mismatched)).rejects.toThrow(/does not belong/);
    await expect(Identity.import(new Uint8Array(68))).rejects.toThrow(/08 01 12 40/);
  });
});

describe('peer ids bound to keys', () => {
  it('are the 12D3KooW… ids libp2p prints, and give their key back', async () => {
    const identity = await Identity.generate();
    expect(identity.peerId).toMatch(/^12D3KooW[1-9A-HJ-NP-Za-km-z]{44}$/);
    expect(publicKeyFromPeerId(identity.peerId)).toEqual(identity.publicKey);
    expect(peerIdFromPublicKey(identity.publicKey)).toBe(identity.peerId);
    expect(publicKeyFromPeerId('12D3KooWnot-base58')).toBeNull();
    expect(publicKeyFromPeerId('1AhaVSdbh5gV4')).toBeNull(); // peerIdFromU64(1): no key in it
    expect(() => peerIdFromPublicKey(new Uint8Array(31))).toThrow(RangeError);
  });

  it('a key made not extractable cannot be exported', async () => {
    useEd25519Backend('webcrypto');
    const identity = await Identity.generate({ extractable: false });
    await expect(identity.export()).rejects.toThrow(/not extractable/);
    expect(await verifySignature(identity.publicKey, Uint8Array.of(1), await identity.sign(Uint8Array.of(1)))).toBe(true);
  });
});

describe('identity files (Node)', () => {
  it('makes the file once, readable by its owner only, and reads the same identity back', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bb-identity-'));
    try {
      const path = join(dir, 'peer.key');
      const made = await loadIdentityFile(path);
      expect(statSync(path).mode & 0o777).toBe(0o600);
      expect(readFileSync(path).byteLength).toBe(68);
      expect((await loadIdentityFile(path)).peerId).toBe(made.peerId);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('identities in IndexedDB (Chromium)', () => {
  let server: Server | undefined;
  let browser: Browser | undefined;
  let base = '';

  beforeAll(async () => {
    if (!existsSync(join(packageRoot, 'dist', 'identity', 'index.js'))) throw new Error('js/dist is missing: run `npm run build`');
    server = createServer((request, response) => {
      const path = new URL(request.url ?? '/', 'http://x').pathname;
      const file = normalize(join(packageRoot, path));
      if (path === '/') response.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>identity</title>');
      else if (!file.startsWith(join(packageRoot, 'dist') + sep) || !existsSync(file)) response.writeHead(404).end();
      else response.writeHead(200, { 'content-type': CONTENT_TYPES[extname(file)] ?? 'application/octet-stream' }).end(readFileSync(file));
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    server?.close();
  });

  it('keeps a page\'s peer id across reloads, one per name, not extractable by default', async () => {
    const context = await browser!.newContext();
    const page = await context.newPage();
    await page.goto(base);
    const probe = `(async () => {
      const { loadIdentity, forgetIdentity, ed25519Backend, verifySignature } = await import('/dist/identity/index.js');
      const a = await loadIdentity('a');
      const b = await loadIdentity('b');
      const again = await loadIdentity('a');
      const signature = await again.sign(new Uint8Array([1, 2, 3]));
      let exported = 'exported';
      try { await a.export(); } catch (error) { exported = String(error.message); }
      return { backend: await ed25519Backend(), a: a.peerId, b: b.peerId, again: again.peerId,
        verified: await verifySignature(a.publicKey, new Uint8Array([1, 2, 3]), signature), exported, forget: typeof forgetIdentity };
    })()`;
    const first = (await page.evaluate(probe)) as Record<string, unknown>;
    expect(first.backend).toBe('webcrypto');
    expect(first.a).toMatch(/^12D3KooW/);
    expect(first.a).not.toBe(first.b);
    expect(first.again).toBe(first.a);
    expect(first.verified).toBe(true);
    expect(first.exported).toMatch(/not extractable/);
    await page.reload();
    const second = (await page.evaluate(probe)) as Record<string, unknown>;
    expect(second.a).toBe(first.a);
    expect(second.b).toBe(first.b);
    const renewed = await page.evaluate(`(async () => {
      const { loadIdentity, forgetIdentity } = await import('/dist/identity/index.js');
      await forgetIdentity('a');
      return (await loadIdentity('a')).peerId;
    })()`);
    expect(renewed).not.toBe(first.a);
    await context.close();
  }, 60_000);
});
