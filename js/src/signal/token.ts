/**
 * Join tokens: an operator's Ed25519 signature admitting one peer id to one room in one
 * role until an expiry. Binary, byte by byte as docs/SECURITY.md lays it out, so that any
 * Ed25519 verifier (libsodium's crypto_sign_verify_detached in the C engine) can check
 * one; carried as base64url text.
 *
 *   0  4  magic "BBJT"              14 32  operator public key
 *   4  1  version 1                 46  1  P, peer id length (1..76)
 *   5  1  role: 1 client,           47  P  peer id (multihash bytes)
 *         2 server, 3 watcher       47+P 1  R, room length (1..128)
 *   6  8  expiry, u64 LE Unix s     48+P R  room (ASCII)
 *   48+P+R 64  signature over "bytesandbrains join token v1" ‖ 00 ‖ bytes [0, 48+P+R)
 */
import { concatBytes, equalBytes, fromBase64, toBase64Url, utf8 } from '../identity/bytes.js';
import { verifySignature, type Signer } from '../identity/identity.js';
import { base58Encode, peerIdBytes } from '../node/values.js';
import { NAME_PATTERN, type PeerRole } from './protocol.js';

export const TOKEN_MAGIC = Uint8Array.of(0x42, 0x42, 0x4a, 0x54); // "BBJT"
export const TOKEN_VERSION = 1;
export const TOKEN_DOMAIN = 'bytesandbrains join token v1';
const ROLE_CODES: Record<PeerRole, number> = { client: 1, server: 2, watcher: 3 };
const ROLES_BY_CODE: Record<number, PeerRole> = { 1: 'client', 2: 'server', 3: 'watcher' };
const FIXED_BYTES = 47; // magic, version, role, expiry, operator key, peer id length
const MAX_TOKEN_BYTES = FIXED_BYTES + 76 + 1 + 128 + 64;

/** What a token says. */
export interface JoinToken {
  readonly peer: string;
  readonly role: PeerRole;
  readonly room: string;
  /** Unix seconds; the token admits while the verifier's clock is before it. */
  readonly expiresAt: number;
  /** The operator's 32-byte Ed25519 public key. */
  readonly operator: Uint8Array;
}

export interface JoinTokenGrant {
  readonly peer: string;
  readonly role: PeerRole;
  readonly room: string;
  /** Unix seconds, or a Date. */
  readonly expiresAt: number | Date;
}

/** The bytes a token's signature covers: the domain, a NUL and the token up to its signature. */
export function tokenSignedBytes(body: Uint8Array): Uint8Array {
  return concatBytes(utf8(TOKEN_DOMAIN), Uint8Array.of(0), body);
}

/** Signs a token with the operator's key; returns its base64url text. */
export async function createJoinToken(operator: Signer, grant: JoinTokenGrant): Promise<string> {
  const expiresAt = grant.expiresAt instanceof Date ? Math.floor(grant.expiresAt.getTime() / 1000) : grant.expiresAt;
  if (!Number.isSafeInteger(expiresAt) || expiresAt < 0) throw new RangeError(`a token's expiry is whole Unix seconds, not ${expiresAt}`);
  if (!NAME_PATTERN.test(grant.room)) throw new RangeError(`room ${JSON.stringify(grant.room)} is not 1–128 of [A-Za-z0-9_-]`);
  const role = ROLE_CODES[grant.role];
  if (role === undefined) throw new RangeError(`role ${String(grant.role)} is not client, server or watcher`);
  let peer: Uint8Array;
  try {
    peer = peerIdBytes(grant.peer);
  } catch (error) {
    throw new RangeError(`${JSON.stringify(grant.peer)} is not a peer id: ${(error as Error).message}`);
  }
  const room = utf8(grant.room);
  const body = new Uint8Array(FIXED_BYTES + peer.byteLength + 1 + room.byteLength);
  const view = new DataView(body.buffer);
  body.set(TOKEN_MAGIC, 0);
  body[4] = TOKEN_VERSION;
  body[5] = role;
  view.setBigUint64(6, BigInt(expiresAt), true);
  body.set(operator.publicKey, 14);
  body[46] = peer.byteLength;
  body.set(peer, 47);
  body[47 + peer.byteLength] = room.byteLength;
  body.set(room, 48 + peer.byteLength);
  return toBase64Url(concatBytes(body, await operator.sign(tokenSignedBytes(body))));
}

/** A token's fields and signed part, unverified; null when `text` is not a well-formed token. */
export function decodeJoinToken(text: unknown): { token: JoinToken; body: Uint8Array; signature: Uint8Array } | null {
  if (typeof text !== 'string' || text.length > Math.ceil((MAX_TOKEN_BYTES * 4) / 3)) return null;
  const bytes = fromBase64(text);
  if (bytes === null || bytes.byteLength < FIXED_BYTES + 1 + 1 + 1 + 64) return null;
  if (!equalBytes(bytes.subarray(0, 4), TOKEN_MAGIC) || bytes[4] !== TOKEN_VERSION) return null;
  const role = ROLES_BY_CODE[bytes[5]!];
  const peerLength = bytes[46]!;
  const roomAt = FIXED_BYTES + peerLength;
  if (role === undefined || peerLength === 0 || peerLength > 76 || roomAt >= bytes.byteLength) return null;
  const roomLength = bytes[roomAt]!;
  const end = roomAt + 1 + roomLength;
  if (end + 64 !== bytes.byteLength) return null;
  const room = String.fromCharCode(...bytes.subarray(roomAt + 1, end));
  if (!NAME_PATTERN.test(room)) return null;
  let peer: string;
  try {
    peer = base58Encode(bytes.subarray(FIXED_BYTES, roomAt));
    peerIdBytes(peer); // exactly one multihash
  } catch {
    return null;
  }
  const expiresAt = Number(new DataView(bytes.buffer).getBigUint64(6, true));
  return {
    token: { peer, role, room, expiresAt, operator: bytes.slice(14, 46) },
    body: bytes.subarray(0, end),
    signature: bytes.subarray(end),
  };
}

/**
 * The join policy a node holding this token checks its room's members by: the token's
 * room and the operator key that signed it (`BbNode.install(..., { admission })`, every
 * template install's `admission`). A room whose operators are several needs them all
 * listed instead. Throws a RangeError when `token` is not a well-formed join token.
 */
export function admissionOf(token: string): { readonly room: string; readonly operators: readonly Uint8Array[] } {
  const decoded = decodeJoinToken(token);
  if (decoded === null) throw new RangeError('admissionOf: not a well-formed join token');
  return { room: decoded.token.room, operators: [decoded.token.operator] };
}

/**
 * Checks a token for a join of `peer` to `room`: well formed, for that peer and room, not
 * expired at `now` (Unix seconds), signed by one of `operators`. Returns what it grants,
 * or throws an Error saying which check failed.
 */
export async function verifyJoinToken(text: unknown, expect: { peer: string; room: string; operators: readonly Uint8Array[]; now: number }): Promise<JoinToken> {
  const decoded = decodeJoinToken(text);
  if (decoded === null) throw new Error('the join token is not a well-formed token');
  const { token } = decoded;
  if (token.peer !== expect.peer) throw new Error(`the join token is for peer ${token.peer}, not ${expect.peer}`);
  if (token.room !== expect.room) throw new Error(`the join token is for room ${token.room}, not ${expect.room}`);
  if (expect.now >= token.expiresAt) throw new Error(`the join token expired at ${new Date(token.expiresAt * 1000).toISOString()}`);
  if (!expect.operators.some((key) => equalBytes(key, token.operator))) throw new Error('the join token is signed by a key that is not an operator of this room');
  if (!(await verifySignature(token.operator, tokenSignedBytes(decoded.body), decoded.signature))) {
    throw new Error('the join token\'s signature does not verify');
  }
  return token;
}
