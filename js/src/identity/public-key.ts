/**
 * Which 32-byte strings are Ed25519 public keys a signature can bind to. A point of small
 * order (one of the eight whose order divides the cofactor 8) has no secret behind it:
 * for such a key, forged signatures verify under RFC 8032's equation, and WebCrypto in
 * Node and browsers accepts them. libsodium refuses these keys and every non-canonical
 * encoding (y ≥ 2^255 − 19); every verifier of this package refuses the same ones, so the
 * signalling server, the peers and the C engine agree on who can sign.
 */
import { ED25519_PUBLIC_KEY_BYTES } from './peer-id.js';

/**
 * The y-coordinates (little-endian, the x sign bit clear) of the eight points of small
 * order: 1 (the identity), −1 (order 2), 0 (the two points of order 4), and ±y₈ (the four
 * of order 8).
 */
const SMALL_ORDER_Y = [
  '0100000000000000000000000000000000000000000000000000000000000000',
  'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  '0000000000000000000000000000000000000000000000000000000000000000',
  '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05',
  'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a',
].map((hex) => Uint8Array.from(hex.match(/../g)!, (byte) => parseInt(byte, 16)));

/** Whether the 255-bit y of `key` (its top bit, x's sign, aside) is below p = 2^255 − 19. */
function canonicalY(key: Uint8Array): boolean {
  if ((key[31]! & 0x7f) !== 0x7f) return true;
  for (let i = 30; i >= 1; i--) if (key[i] !== 0xff) return true;
  return key[0]! < 0xed;
}

function sameY(key: Uint8Array, y: Uint8Array): boolean {
  for (let i = 0; i < 31; i++) if (key[i] !== y[i]) return false;
  return (key[31]! & 0x7f) === y[31];
}

/**
 * Null when `key` may verify signatures; else why not: not 32 bytes, a non-canonical
 * encoding, or a point of small order (whatever its x sign bit says).
 */
export function ed25519KeyRefusal(key: Uint8Array): string | null {
  if (key.byteLength !== ED25519_PUBLIC_KEY_BYTES) return `an Ed25519 public key is ${ED25519_PUBLIC_KEY_BYTES} bytes, not ${key.byteLength}`;
  if (!canonicalY(key)) return 'its encoding is not canonical (y is not below 2^255 - 19)';
  if (SMALL_ORDER_Y.some((y) => sameY(key, y))) return 'it is a point of small order, which any forged signature verifies for';
  return null;
}
