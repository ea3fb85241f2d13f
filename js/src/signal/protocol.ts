/**
 * The signalling protocol: JSON text frames over one WebSocket. See docs/TRANSPORT.md.
 */

import { concatBytes, fromBase64, lengthPrefixed, toBase64, utf8 } from '../identity/bytes.js';
import type { IceServer } from '../engine/platform.js';
import { parseBoundedJson, type JsonBounds } from './bounded-json.js';

/** What a peer is in a room: a data peer (`client`, `server`) or a `watcher`, which only sees presence. */
export type PeerRole = 'client' | 'server' | 'watcher';
export const PEER_ROLES: readonly PeerRole[] = ['client', 'server', 'watcher'];

/**
 * A client → server message. A join proves the peer id: `key` is the Ed25519 public key
 * the id holds (base64) and `sig` its signature (base64) of {@link joinSignedBytes}.
 */
export type ClientMessage =
  | { type: 'join'; room: string; peer: string; role: PeerRole; key: Uint8Array; sig: Uint8Array; token?: string }
  | { type: 'signal'; to: string; data: unknown }
  /** Fresh ICE servers (TURN credentials expire): the server answers with an `ice` message. */
  | { type: 'ice' }
  | { type: 'leave' };

/** The join as the client writes it: the key and signature in base64, the token as it is. */
export function joinFrame(room: string, peer: string, role: PeerRole, key: Uint8Array, sig: Uint8Array, token?: string): string {
  return JSON.stringify({ type: 'join', room, peer, role, key: toBase64(key), sig: toBase64(sig), ...(token === undefined ? {} : { token }) });
}

/** Bytes of the server's random challenge. */
export const CHALLENGE_BYTES = 32;
/** Domain of a join signature: no other signed message of this package starts this way. */
export const JOIN_DOMAIN = 'bytesandbrains signal join v1';

/**
 * What a join signs: the domain and a NUL, then the challenge, the room, the peer id and
 * the role, each after its length as a little-endian u16.
 */
export function joinSignedBytes(challenge: Uint8Array, room: string, peer: string, role: PeerRole): Uint8Array {
  return concatBytes(utf8(JOIN_DOMAIN), Uint8Array.of(0), lengthPrefixed(challenge), lengthPrefixed(utf8(room)), lengthPrefixed(utf8(peer)), lengthPrefixed(utf8(role)));
}

/** Why the server refused something, or why signalling failed. */
export type SignalErrorCode =
  | 'malformed'
  | 'too-large'
  | 'rate-limited'
  | 'not-joined'
  | 'already-joined'
  | 'unknown-peer'
  | 'room-full'
  | 'too-many-rooms'
  | 'bad-identity'
  | 'bad-signature'
  | 'not-admitted'
  | 'forbidden'
  | 'unreachable'
  | 'closed';

/** A server → client message. */
export type ServerMessage =
  /** On connect and after a leave: what the next join must sign (base64). */
  | { type: 'challenge'; nonce: string }
  /**
   * `iceServers`: STUN/TURN servers for this member; `iceTtlSeconds`: how long its TURN
   * credentials last; `tokens`: the join token each of `peers` joined with, if any;
   * `operators`: the keys (base64) whose join tokens admit to the room, when it admits by
   * token — a node in such a room must check its members' tokens (connectPeer).
   */
  | { type: 'joined'; room: string; peer: string; role: PeerRole; peers: string[]; iceServers?: IceServer[]; iceTtlSeconds?: number; tokens?: Record<string, string>; operators?: string[] }
  | { type: 'ice'; iceServers: IceServer[]; iceTtlSeconds?: number }
  /**
   * Membership changes since the last one, coalesced: apply `left` first, then `joined`.
   * `tokens`: the join token each of `joined` joined with, if any — relayed so that every
   * member can verify it itself (a server cannot forge an operator's signature).
   */
  | { type: 'presence'; joined: string[]; left: string[]; tokens?: Record<string, string> }
  | { type: 'signal'; from: string; data: unknown }
  | { type: 'error'; code: SignalErrorCode; message: string };

/** WebSocket close codes the server uses, with the reason text it sends. */
export const CLOSE_CODES = {
  /** The socket did not join a room within the server's `joinTimeoutMs`. */
  joinTimeout: 4000,
  /** The same peer joined the same room again on another socket. */
  replaced: 4001,
  /** The socket read its own replies too slowly: what waited for it passed `maxBufferedBytes` and a reserve. */
  slowReader: 4002,
  /** The rooms this server shares with other signalling processes are out of reach: join another. */
  unavailable: 4003,
  /** Handling a message of this socket failed in the server (the standard "internal error"). */
  fault: 1011,
} as const;

/** Room names and peer ids: 1–128 of letters, digits, `_` and `-` (base58 ids fit). */
export const NAME_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;

/** The longest join token a join may carry (a well-formed one is shorter: token.ts). */
export const MAX_TOKEN_CHARS = 1024;

/** A failure of signalling: the server is unreachable, refused us, or closed. */
export class SignalError extends Error {
  override readonly name = 'SignalError';
  readonly code: SignalErrorCode;

  constructor(code: SignalErrorCode, message: string) {
    super(message);
    this.code = code;
  }
}

/**
 * Parses a client message within `bounds` (see bounded-json.ts): the message, or why the
 * text is not one. Nothing past the bounds is built.
 */
export function parseClientMessage(text: string, bounds: JsonBounds): ClientMessage | string {
  const parsed = parseBoundedJson(text, bounds);
  if ('error' in parsed) return parsed.error;
  const value = parsed.value;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'not a JSON object';
  const m = value as Record<string, unknown>;
  switch (m.type) {
    case 'join': {
      const role = m.role ?? 'client';
      const key = fromBase64(m.key, 32);
      const sig = fromBase64(m.sig, 64);
      if (typeof m.room !== 'string' || !NAME_PATTERN.test(m.room)) return 'a join names its room in 1–128 of [A-Za-z0-9_-]';
      if (typeof m.peer !== 'string' || !NAME_PATTERN.test(m.peer)) return 'a join names its peer id in 1–128 of [A-Za-z0-9_-]';
      if (!PEER_ROLES.includes(role as PeerRole)) return 'a join\'s role is client, server or watcher';
      if (key === null || sig === null) return 'a join carries a 32-byte key and a 64-byte signature in base64';
      if (m.token !== undefined && (typeof m.token !== 'string' || m.token.length > MAX_TOKEN_CHARS)) return `a join token is text of at most ${MAX_TOKEN_CHARS} characters`;
      return { type: 'join', room: m.room, peer: m.peer, role: role as PeerRole, key, sig, ...(m.token === undefined ? {} : { token: m.token }) };
    }
    case 'signal':
      if (typeof m.to !== 'string' || !NAME_PATTERN.test(m.to)) return 'a signal names its addressee (to) by peer id';
      return 'data' in m ? { type: 'signal', to: m.to, data: m.data } : 'a signal carries data';
    case 'leave':
      return { type: 'leave' };
    case 'ice':
      return { type: 'ice' };
    default:
      return 'not a join, signal, ice or leave message';
  }
}

/**
 * What a client takes from a server: a message deeper or larger is dropped (a server
 * relays nothing past its own, far smaller bounds).
 */
export const SERVER_MESSAGE_BOUNDS: JsonBounds = { maxDepth: 32, maxValues: 65_536 };

const isName = (value: unknown): value is string => typeof value === 'string' && NAME_PATTERN.test(value);
const isNames = (value: unknown): value is string[] => Array.isArray(value) && value.every(isName);
const isRecord = (value: unknown): boolean => typeof value === 'object' && value !== null && !Array.isArray(value);
const isOptional = (value: unknown, check: (value: unknown) => boolean): boolean => value === undefined || check(value);
const isIceServers = (value: unknown): boolean => Array.isArray(value) && value.every(isRecord);
const isSeconds = (value: unknown): boolean => typeof value === 'number' && Number.isFinite(value);
/** Most operator keys a `joined` may list. */
export const MAX_ROOM_OPERATORS = 64;
const isKeys = (value: unknown): boolean =>
  Array.isArray(value) && value.length <= MAX_ROOM_OPERATORS && value.every((key) => fromBase64(key, 32) !== null);

/**
 * Parses a server message, or returns null when `text` is not one (not JSON, past
 * {@link SERVER_MESSAGE_BOUNDS}, or a field of the wrong type): a client never acts on a
 * message it has not checked the shape of.
 */
export function parseServerMessage(text: string): ServerMessage | null {
  const parsed = parseBoundedJson(text, SERVER_MESSAGE_BOUNDS);
  if ('error' in parsed || !isRecord(parsed.value)) return null;
  const m = parsed.value as Record<string, unknown>;
  switch (m.type) {
    case 'challenge':
      return typeof m.nonce === 'string' ? (m as ServerMessage) : null;
    case 'joined':
      return isName(m.room) && isName(m.peer) && PEER_ROLES.includes(m.role as PeerRole) && isNames(m.peers) && isOptional(m.iceServers, isIceServers)
        && isOptional(m.iceTtlSeconds, isSeconds) && isOptional(m.tokens, isRecord) && isOptional(m.operators, isKeys) ? (m as ServerMessage) : null;
    case 'presence':
      return isNames(m.joined) && isNames(m.left) && isOptional(m.tokens, isRecord) ? (m as ServerMessage) : null;
    case 'signal':
      return isName(m.from) && 'data' in m ? (m as ServerMessage) : null;
    case 'ice':
      return isIceServers(m.iceServers) && isOptional(m.iceTtlSeconds, isSeconds) ? (m as ServerMessage) : null;
    case 'error':
      return typeof m.code === 'string' && typeof m.message === 'string' ? (m as ServerMessage) : null;
    default:
      return null;
  }
}
