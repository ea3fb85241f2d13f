/**
 * The signalling client. Uses the global WebSocket (browsers, Node ≥ 22) or, when there is
 * none, imports `ws` lazily so browser bundles never need it; a constructor may be injected.
 */
import { fromBase64 } from '../identity/bytes.js';
import type { Signer } from '../identity/identity.js';
import { Emitter } from '../transport/emitter.js';
import {
  CHALLENGE_BYTES, SignalError, joinFrame, joinSignedBytes, parseServerMessage, type ClientMessage, type PeerRole, type ServerMessage,
} from './protocol.js';
import { decodeJoinToken } from './token.js';
import type { IceServer } from '../engine/platform.js';

/** The part of the WebSocket API the client uses (the DOM's and `ws`'s both have it). */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: ((event: unknown) => void) | null;
}
export type WebSocketConstructor = new (url: string) => WebSocketLike;

export interface SignalClientOptions {
  /**
   * ws:// or wss:// address of a signalling server, or of several sharing rooms (through
   * Redis): they are tried in order, and the first one reachable is joined.
   */
  url: string | readonly string[];
  room: string;
  /** Who joins: the peer id is the identity's, proven by signing the server's challenge. */
  identity: Signer;
  /**
   * What to be in the room: `client` or `server` (data peers), or `watcher` (sees who is
   * there, nothing more). Default: the token's role, else `client`. A room with an
   * admission policy admits a peer only in the role the policy gives it.
   */
  role?: PeerRole;
  /** A join token from the room's operator (base64url), for rooms that take tokens. */
  token?: string;
  /** A WebSocket constructor to use instead of the global one or `ws`. */
  WebSocket?: WebSocketConstructor;
  /** Give up connecting after this long (default 10 s). */
  timeoutMs?: number;
}

export type SignalClientEvents = {
  /** Another peer entered the room. */
  join: [peer: string];
  /** A peer left the room (or its socket died). */
  leave: [peer: string];
  /** A relayed payload from another member. */
  signal: [from: string, data: unknown];
  /** The server refused one of our messages after joining. */
  error: [error: SignalError];
  /** The socket closed (`code` 4001: this id joined again elsewhere); no more events follow. */
  close: [code: number, reason: string];
};

async function defaultWebSocket(): Promise<WebSocketConstructor> {
  const global = (globalThis as { WebSocket?: unknown }).WebSocket;
  if (typeof global === 'function') return global as WebSocketConstructor;
  const name = 'ws'; // a variable specifier keeps bundlers from resolving it
  const mod = (await import(/* @vite-ignore */ name)) as { default: unknown };
  return mod.default as WebSocketConstructor;
}

/** One peer's membership of one room on a signalling server. */
export class SignalClient {
  readonly events = new Emitter<SignalClientEvents>();
  readonly room: string;
  readonly self: string;
  readonly role: PeerRole;
  /** What signs for {@link self}: the transport signs its offers and answers with it too. */
  readonly identity: Signer;
  /**
   * The keys whose join tokens admit to this room, as the server told them at the join;
   * empty when the room admits by no token (open rooms, allowlists) or the server did not
   * say. A node in a room that admits by token must check tokens itself (connectPeer
   * refuses to run one that does not).
   */
  readonly operators: readonly Uint8Array[];
  readonly #socket: WebSocketLike;
  readonly #peers: Set<string>;
  /** The join token each member joined with, as the server relays it (unverified here). */
  readonly #tokens = new Map<string, string>();
  #iceServers: IceServer[];
  #iceRefresh: ReturnType<typeof setTimeout> | null = null;
  #closed = false;

  private constructor(socket: WebSocketLike, identity: Signer, joined: Extract<ServerMessage, { type: 'joined' }>) {
    this.#socket = socket;
    this.identity = identity;
    this.room = joined.room;
    this.self = joined.peer;
    this.role = joined.role;
    this.operators = (joined.operators ?? []).map((key) => fromBase64(key, 32)!);
    this.#peers = new Set(joined.peers);
    this.#keepTokens(joined.peers, joined.tokens);
    this.#iceServers = joined.iceServers ?? [];
    this.#scheduleIceRefresh(joined.iceTtlSeconds);
    socket.onmessage = (event) => this.#receive(event.data);
    socket.onclose = (event) => this.#finish(event.code, event.reason);
    socket.onerror = () => this.#finish(1006, 'socket error');
  }

  /**
   * Connects and joins the room. Rejects with a {@link SignalError}: `unreachable` when the
   * server cannot be reached, or the server's code (`bad-signature`, `room-full`, ...).
   */
  static async connect(options: SignalClientOptions): Promise<SignalClient> {
    const WebSocketImpl = options.WebSocket ?? (await defaultWebSocket());
    const urls = typeof options.url === 'string' ? [options.url] : options.url;
    if (urls.length === 0) throw new SignalError('unreachable', 'no signalling server address given');
    let unreachable: SignalError | undefined;
    for (const url of urls) {
      try {
        return await SignalClient.#connectTo(url, WebSocketImpl, options);
      } catch (error) {
        // the next server may be up; a refusal (admission, identity) would be the same there
        if (!(error instanceof SignalError) || error.code !== 'unreachable') throw error;
        unreachable = error;
      }
    }
    throw unreachable!;
  }

  static #connectTo(url: string, WebSocketImpl: WebSocketConstructor, options: SignalClientOptions): Promise<SignalClient> {
    const role = options.role ?? decodeJoinToken(options.token)?.token.role ?? 'client';
    const timeoutMs = options.timeoutMs ?? 10_000;
    return new Promise((resolve, reject) => {
      let socket: WebSocketLike;
      try {
        socket = new WebSocketImpl(url);
      } catch (error) {
        reject(new SignalError('unreachable', `cannot open ${url}: ${(error as Error).message}`));
        return;
      }
      let settled = false;
      const fail = (error: SignalError): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        socket.onopen = socket.onmessage = socket.onclose = null;
        socket.onerror = () => {}; // closing a socket still connecting reports an error
        try {
          socket.close();
        } catch {
          // already closed
        }
        reject(error);
      };
      const timer = setTimeout(() => fail(new SignalError('unreachable', `no answer from ${url} within ${timeoutMs} ms`)), timeoutMs);
      socket.onerror = () => fail(new SignalError('unreachable', `signalling server ${url} is unreachable`));
      socket.onclose = (event) => fail(new SignalError('unreachable', `signalling server ${url} closed the connection (code ${event.code}${event.reason ? `: ${event.reason}` : ''})`));
      socket.onmessage = (event) => {
        const message = serverMessageOf(event.data);
        if (message?.type === 'challenge') {
          const challenge = fromBase64(message.nonce, CHALLENGE_BYTES);
          if (challenge === null) return fail(new SignalError('malformed', `${url} sent a challenge that is not ${CHALLENGE_BYTES} bytes of base64`));
          const { identity, room } = options;
          identity.sign(joinSignedBytes(challenge, room, identity.peerId, role)).then(
            (sig) => {
              if (!settled) socket.send(joinFrame(room, identity.peerId, role, identity.publicKey, sig, options.token));
            },
            (error: unknown) => fail(new SignalError('closed', `cannot sign the join: ${(error as Error).message}`)),
          );
          return;
        }
        if (message?.type === 'error') return fail(new SignalError(message.code, message.message));
        if (message?.type !== 'joined' || message.peer !== options.identity.peerId) {
          return fail(new SignalError('malformed', `expected 'joined' for ${options.identity.peerId} from ${url}`));
        }
        settled = true;
        clearTimeout(timer);
        resolve(new SignalClient(socket, options.identity, message));
      };
    });
  }

  /** STUN/TURN servers the signalling server handed out (short-lived TURN credentials); empty when none. */
  iceServers(): IceServer[] {
    return this.#iceServers.map((server) => ({ ...server }));
  }

  /** The other members of the room. */
  peers(): string[] {
    return [...this.#peers];
  }

  /**
   * The join token `peer` joined with, as the server relayed it; undefined when it brought
   * none. Unverified: whoever relies on it checks it (BbNode.admitToken does).
   */
  tokenOf(peer: string): string | undefined {
    return this.#tokens.get(peer);
  }

  /** Relays `data` (JSON-serialisable) to `to` in the same room. */
  send(to: string, data: unknown): void {
    if (this.#closed) throw new SignalError('closed', 'the signalling connection is closed');
    this.#socket.send(JSON.stringify({ type: 'signal', to, data } satisfies ClientMessage));
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Leaves the room and closes the socket. */
  close(): void {
    if (this.#closed) return;
    try {
      this.#socket.send(JSON.stringify({ type: 'leave' } satisfies ClientMessage));
      this.#socket.close(1000, 'leave');
    } catch {
      // the socket was already going away
    }
    this.#finish(1000, 'leave');
  }

  #receive(data: unknown): void {
    const message = serverMessageOf(data);
    if (message === null) return;
    switch (message.type) {
      case 'presence':
        // left before joined: a peer that left and came back is a new session
        for (const peer of message.left) {
          this.#tokens.delete(peer);
          if (this.#peers.delete(peer)) this.events.emit('leave', peer);
        }
        this.#keepTokens(message.joined, message.tokens);
        for (const peer of message.joined) {
          if (peer === this.self || this.#peers.has(peer)) continue;
          this.#peers.add(peer);
          this.events.emit('join', peer);
        }
        return;
      case 'signal':
        return this.events.emit('signal', message.from, message.data);
      case 'error':
        return this.events.emit('error', new SignalError(message.code, message.message));
      case 'ice':
        this.#iceServers = message.iceServers;
        return this.#scheduleIceRefresh(message.iceTtlSeconds);
      case 'joined':
      case 'challenge':
        return;
    }
  }

  /** Records the tokens a server message gives for `peers` (strings only, as the join takes them). */
  #keepTokens(peers: readonly string[], tokens: unknown): void {
    if (typeof tokens !== 'object' || tokens === null) return;
    for (const peer of peers) {
      const token = Object.hasOwn(tokens, peer) ? (tokens as Record<string, unknown>)[peer] : undefined;
      if (typeof token === 'string' && token.length <= 1024 && peer !== this.self) this.#tokens.set(peer, token);
    }
  }

  /** TURN credentials expire: ask for fresh ones when four fifths of their life has passed. */
  #scheduleIceRefresh(ttlSeconds: number | undefined): void {
    if (this.#iceRefresh !== null) clearTimeout(this.#iceRefresh);
    this.#iceRefresh = null;
    if (ttlSeconds === undefined || !(ttlSeconds > 0)) return;
    this.#iceRefresh = setTimeout(() => {
      this.#iceRefresh = null;
      if (!this.#closed) this.#socket.send(JSON.stringify({ type: 'ice' } satisfies ClientMessage));
    }, Math.min(ttlSeconds * 800, 2 ** 31 - 1));
    (this.#iceRefresh as { unref?: () => void }).unref?.();
  }

  #finish(code: number, reason: string): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#iceRefresh !== null) clearTimeout(this.#iceRefresh);
    this.#socket.onmessage = this.#socket.onclose = this.#socket.onerror = null;
    this.events.emit('close', code, reason);
  }
}

/** A frame's text (a string in browsers, a Buffer from `ws`), checked as a server message. */
function serverMessageOf(data: unknown): ServerMessage | null {
  const text = typeof data === 'string' ? data : typeof data === 'object' && data !== null && 'toString' in data ? String(data) : null;
  return text === null ? null : parseServerMessage(text);
}
