/**
 * The signalling protocol: JSON text frames over one WebSocket. See docs/TRANSPORT.md.
 */

/** A client → server message. */
export type ClientMessage =
  | { type: 'join'; room: string; peer: string }
  | { type: 'signal'; to: string; data: unknown }
  | { type: 'leave' };

/** Why the server refused something, or why signalling failed. */
export type SignalErrorCode =
  | 'duplicate-peer'
  | 'malformed'
  | 'too-large'
  | 'rate-limited'
  | 'not-joined'
  | 'already-joined'
  | 'unknown-peer'
  | 'room-full'
  | 'too-many-rooms'
  | 'unreachable'
  | 'closed';

/** A server → client message. */
export type ServerMessage =
  | { type: 'joined'; room: string; peer: string; peers: string[] }
  /** Membership changes since the last one, coalesced: apply `left` first, then `joined`. */
  | { type: 'presence'; joined: string[]; left: string[] }
  | { type: 'signal'; from: string; data: unknown }
  | { type: 'error'; code: SignalErrorCode; message: string };

/** WebSocket close codes the server uses, with the reason text it sends. */
export const CLOSE_CODES = {
  /** The socket did not join a room within the server's `joinTimeoutMs`. */
  joinTimeout: 4000,
  /** The same peer joined the same room again on another socket. */
  replaced: 4001,
  /** The socket read too slowly: what waited for it passed `maxBufferedBytes`. */
  slowReader: 4002,
} as const;

/** Room names and peer ids: 1–128 of letters, digits, `_` and `-` (base58 ids fit). */
export const NAME_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;

/** A failure of signalling: the server is unreachable, refused us, or closed. */
export class SignalError extends Error {
  override readonly name = 'SignalError';
  readonly code: SignalErrorCode;

  constructor(code: SignalErrorCode, message: string) {
    super(message);
    this.code = code;
  }
}

/** Parses a client message, or returns null when it is not one. */
export function parseClientMessage(text: string): ClientMessage | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const m = value as Record<string, unknown>;
  switch (m.type) {
    case 'join':
      return typeof m.room === 'string' && NAME_PATTERN.test(m.room) && typeof m.peer === 'string' && NAME_PATTERN.test(m.peer)
        ? { type: 'join', room: m.room, peer: m.peer }
        : null;
    case 'signal':
      return typeof m.to === 'string' && 'data' in m ? { type: 'signal', to: m.to, data: m.data } : null;
    case 'leave':
      return { type: 'leave' };
    default:
      return null;
  }
}
