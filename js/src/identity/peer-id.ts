/**
 * Peer ids bound to keys, as libp2p makes them: the identity multihash (code 0x00, length
 * 0x24) of the protobuf PublicKey { Type = Ed25519 (1), Data = the 32-byte key }, i.e.
 * 00 24 08 01 12 20 ‖ key, written in base58btc ("12D3KooW…"). The key can be read back
 * from the id, so whoever signs for an id proves they hold it.
 */
import { base58Decode, base58Encode } from '../node/values.js';

/** The 6 bytes before the key: multihash identity, length 36, PublicKey{Type=Ed25519, Data: 32 bytes}. */
export const ED25519_PEER_ID_PREFIX = Uint8Array.of(0x00, 0x24, 0x08, 0x01, 0x12, 0x20);
export const ED25519_PUBLIC_KEY_BYTES = 32;

/** The peer id of an Ed25519 public key. */
export function peerIdFromPublicKey(publicKey: Uint8Array): string {
  if (publicKey.byteLength !== ED25519_PUBLIC_KEY_BYTES) {
    throw new RangeError(`an Ed25519 public key is ${ED25519_PUBLIC_KEY_BYTES} bytes, not ${publicKey.byteLength}`);
  }
  const bytes = new Uint8Array(ED25519_PEER_ID_PREFIX.byteLength + ED25519_PUBLIC_KEY_BYTES);
  bytes.set(ED25519_PEER_ID_PREFIX);
  bytes.set(publicKey, ED25519_PEER_ID_PREFIX.byteLength);
  return base58Encode(bytes);
}

/** The Ed25519 public key a peer id holds, or null when it is not a key-bound id. */
export function publicKeyFromPeerId(peerId: string): Uint8Array | null {
  if (typeof peerId !== 'string' || peerId.length > 64) return null;
  let bytes: Uint8Array;
  try {
    bytes = base58Decode(peerId);
  } catch {
    return null;
  }
  if (bytes.byteLength !== ED25519_PEER_ID_PREFIX.byteLength + ED25519_PUBLIC_KEY_BYTES) return null;
  for (let i = 0; i < ED25519_PEER_ID_PREFIX.byteLength; i++) if (bytes[i] !== ED25519_PEER_ID_PREFIX[i]) return null;
  return bytes.slice(ED25519_PEER_ID_PREFIX.byteLength);
}
