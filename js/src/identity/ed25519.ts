/**
 * Ed25519 through WebCrypto where the platform has it (Node 20, Chromium, Firefox, Safari
 * 17), else through @noble/curves (audited, pure JavaScript), which is only imported then.
 * Never hand-written: this file only adapts the two to one shape.
 */
import { fromBase64 } from './bytes.js';
import { ed25519KeyRefusal } from './public-key.js';
import type { WebCryptoKey } from '../engine/platform.js';

export type Ed25519Backend = 'webcrypto' | 'noble';

/** A private key: a WebCrypto key (possibly not extractable), or the 32-byte seed for noble. */
export type PrivateKeyHandle = { readonly kind: 'webcrypto'; readonly key: WebCryptoKey } | { readonly kind: 'noble'; readonly seed: Uint8Array };

export interface KeyPair {
  readonly handle: PrivateKeyHandle;
  readonly publicKey: Uint8Array;
}

const ALGORITHM = { name: 'Ed25519' } as const;
/** PKCS#8 PrivateKeyInfo for Ed25519 (RFC 8410) up to the 32-byte seed. */
const PKCS8_PREFIX = Uint8Array.of(0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20);
/** RFC 8032 §7.1 test 1's public key: importing it tells whether WebCrypto knows Ed25519. */
const PROBE_KEY = Uint8Array.of(
  0xd7, 0x5a, 0x98, 0x01, 0x82, 0xb1, 0x0a, 0xb7, 0xd5, 0x4b, 0xfe, 0xd3, 0xc9, 0x64, 0x07, 0x3a,
  0x0e, 0xe1, 0x72, 0xf3, 0xda, 0xa6, 0x23, 0x25, 0xaf, 0x02, 0x1a, 0x68, 0xf7, 0x07, 0x51, 0x1a,
);

let chosen: Promise<Ed25519Backend> | undefined;

/** Which implementation this platform uses (decided once). */
export function ed25519Backend(): Promise<Ed25519Backend> {
  chosen ??= crypto.subtle.importKey('raw', PROBE_KEY, ALGORITHM, false, ['verify']).then(
    () => 'webcrypto' as const,
    () => 'noble' as const,
  );
  return chosen;
}

/** Makes every later call use `backend` (tests check that both agree). */
export function useEd25519Backend(backend: Ed25519Backend): void {
  chosen = Promise.resolve(backend);
}

type Noble = typeof import('@noble/curves/ed25519.js').ed25519;
let noble: Promise<Noble> | undefined;
function loadNoble(): Promise<Noble> {
  noble ??= import('@noble/curves/ed25519.js').then((module) => module.ed25519);
  return noble;
}

export async function generateKeyPair(extractable: boolean): Promise<KeyPair> {
  if ((await ed25519Backend()) === 'noble') return keyPairFromSeed((await loadNoble()).utils.randomSecretKey(), extractable);
  const pair = (await crypto.subtle.generateKey(ALGORITHM, extractable, ['sign', 'verify'])) as CryptoKeyPair;
  const publicKey = new Uint8Array(await crypto.subtle.exportKey('raw', pair.publicKey));
  return { handle: { kind: 'webcrypto', key: pair.privateKey }, publicKey };
}

export async function keyPairFromSeed(seed: Uint8Array, extractable: boolean): Promise<KeyPair> {
  if (seed.byteLength !== 32) throw new RangeError(`an Ed25519 seed is 32 bytes, not ${seed.byteLength}`);
  if ((await ed25519Backend()) === 'noble') {
    return { handle: { kind: 'noble', seed: seed.slice() }, publicKey: (await loadNoble()).getPublicKey(seed) };
  }
  const pkcs8 = new Uint8Array(PKCS8_PREFIX.byteLength + 32);
  pkcs8.set(PKCS8_PREFIX);
  pkcs8.set(seed, PKCS8_PREFIX.byteLength);
  // WebCrypto derives the public key only into a JWK, which needs an extractable key
  const open = await crypto.subtle.importKey('pkcs8', pkcs8, ALGORITHM, true, ['sign']);
  const publicKey = fromBase64((await crypto.subtle.exportKey('jwk', open)).x, 32);
  if (publicKey === null) throw new Error('WebCrypto exported an Ed25519 key without its 32-byte public part');
  const key = extractable ? open : await crypto.subtle.importKey('pkcs8', pkcs8, ALGORITHM, false, ['sign']);
  pkcs8.fill(0);
  return { handle: { kind: 'webcrypto', key }, publicKey };
}

/** The 32-byte seed; throws when the key was made not extractable. */
export async function exportSeed(handle: PrivateKeyHandle): Promise<Uint8Array> {
  if (handle.kind === 'noble') return handle.seed.slice();
  if (!handle.key.extractable) throw new Error('this identity was made not extractable: its private key cannot be exported');
  return new Uint8Array(await crypto.subtle.exportKey('pkcs8', handle.key)).slice(PKCS8_PREFIX.byteLength);
}

export async function sign(handle: PrivateKeyHandle, message: Uint8Array): Promise<Uint8Array> {
  if (handle.kind === 'noble') return (await loadNoble()).sign(message, handle.seed);
  return new Uint8Array(await crypto.subtle.sign(ALGORITHM, handle.key, message as Uint8Array<ArrayBuffer>));
}

/**
 * Whether `signature` is `publicKey`'s over `message` (RFC 8032; false for malformed input,
 * never a throw). Keys of small order and non-canonical encodings never verify, whatever
 * the backend would say (public-key.ts).
 */
export async function verify(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): Promise<boolean> {
  if (ed25519KeyRefusal(publicKey) !== null || signature.byteLength !== 64) return false;
  try {
    if ((await ed25519Backend()) === 'noble') return (await loadNoble()).verify(signature, message, publicKey, { zip215: false });
    const key = await crypto.subtle.importKey('raw', publicKey as Uint8Array<ArrayBuffer>, ALGORITHM, false, ['verify']);
    return await crypto.subtle.verify(ALGORITHM, key, signature as Uint8Array<ArrayBuffer>, message as Uint8Array<ArrayBuffer>);
  } catch {
    return false;
  }
}
