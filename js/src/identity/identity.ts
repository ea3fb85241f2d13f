/**
 * A peer's identity: an Ed25519 key pair whose public key is its peer id. Only the holder
 * of the private key can sign for the id, which is what the signalling server checks at
 * join and what peers check on each other's offers and answers.
 */
import { concatBytes, equalBytes } from './bytes.js';
import { exportSeed, generateKeyPair, keyPairFromSeed, sign, verify, type KeyPair, type PrivateKeyHandle } from './ed25519.js';
import { peerIdFromPublicKey } from './peer-id.js';

/** What signs for a peer id: an {@link Identity}, or anything holding a key elsewhere. */
export interface Signer {
  readonly peerId: string;
  /** The 32-byte Ed25519 public key the peer id holds. */
  readonly publicKey: Uint8Array;
  sign(message: Uint8Array): Promise<Uint8Array>;
}

export interface IdentityOptions {
  /** Whether {@link Identity.export} may read the private key out (default true). */
  extractable?: boolean;
}

/** libp2p's protobuf PrivateKey { Type = Ed25519 (1), Data = 64 bytes }: 08 01 12 40. */
const EXPORT_PREFIX = Uint8Array.of(0x08, 0x01, 0x12, 0x40);
/** Size of {@link Identity.export}'s bytes: the prefix, the seed and the public key. */
export const IDENTITY_EXPORT_BYTES = EXPORT_PREFIX.byteLength + 64;

export class Identity implements Signer {
  readonly peerId: string;
  readonly publicKey: Uint8Array;
  readonly #key: PrivateKeyHandle;

  /** Use {@link generate}, {@link fromSeed}, {@link import} or the stores; this takes a key pair made by ed25519.ts. */
  constructor(pair: KeyPair) {
    this.#key = pair.handle;
    this.publicKey = pair.publicKey.slice();
    this.peerId = peerIdFromPublicKey(pair.publicKey);
  }

  /** A fresh random identity. */
  static async generate(options: IdentityOptions = {}): Promise<Identity> {
    return new Identity(await generateKeyPair(options.extractable ?? true));
  }

  /** The identity of a 32-byte Ed25519 seed (RFC 8032's private key). */
  static async fromSeed(seed: Uint8Array, options: IdentityOptions = {}): Promise<Identity> {
    return new Identity(await keyPairFromSeed(seed, options.extractable ?? true));
  }

  /** Reads {@link export}'s bytes back; throws when they are not an Ed25519 private key whose halves agree. */
  static async import(bytes: Uint8Array, options: IdentityOptions = {}): Promise<Identity> {
    if (bytes.byteLength !== IDENTITY_EXPORT_BYTES || !equalBytes(bytes.subarray(0, EXPORT_PREFIX.byteLength), EXPORT_PREFIX)) {
      throw new Error(`an exported identity is ${IDENTITY_EXPORT_BYTES} bytes starting 08 01 12 40 (a libp2p Ed25519 PrivateKey)`);
    }
    const seed = bytes.subarray(EXPORT_PREFIX.byteLength, EXPORT_PREFIX.byteLength + 32);
    const identity = await Identity.fromSeed(seed, options);
    if (!equalBytes(identity.publicKey, bytes.subarray(EXPORT_PREFIX.byteLength + 32))) {
      throw new Error('the exported identity\'s public key does not belong to its private key');
    }
    return identity;
  }

  /** The key pair as libp2p stores it: protobuf PrivateKey { Type = Ed25519, Data = seed ‖ public key }. */
  async export(): Promise<Uint8Array> {
    return concatBytes(EXPORT_PREFIX, await exportSeed(this.#key), this.publicKey);
  }

  /** The Ed25519 signature (64 bytes) of `message`. */
  sign(message: Uint8Array): Promise<Uint8Array> {
    return sign(this.#key, message);
  }

  /** The private key as it is stored (a CryptoKey can be kept in IndexedDB as it is). */
  get privateKey(): PrivateKeyHandle {
    return this.#key;
  }
}

/** Whether `signature` is `publicKey`'s Ed25519 signature of `message`. */
export function verifySignature(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): Promise<boolean> {
  return verify(publicKey, message, signature);
}
