/**
 * The signalling client. Uses the global WebSocket (browsers, Node ≥ 22) or, when there is
 * none, imports `ws` lazily so browser bundles never need it; a constructor may be injected.
 */
import { Emitter } from '../transport/emitter.js';
import { SignalError, type ClientMessage, type ServerMessage } from './protocol.js';

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
  /** ws:// or wss:// address of a signalling server. */
  url: string;
  room: string;
  /** This peer's id, unique in the room. */
  peer: string;
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
  /** The socket closed; no more events follow. */
  close: [];
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
  readonly #socket: WebSocketLike;
  readonly #peers: Set<string>;
  #closed = false;

  private constructor(socket: WebSocketLike, room: string, self: string, peers: string[]) {
    this.#socket = socket;
    this.room = room;
    this.self = self;
    this.#peers = new Set(peers);
    socket.onmessage = (event) => this.#receive(event.data);
    socket.onclose = () => this.#finish();
    socket.onerror = () => this.#finish();
  }

  /**
   * Connects and joins the room. Rejects with a {@link SignalError}: `unreachable` when the
   * server cannot be reached, `duplicate-peer` (or another server code) when it refuses us.
   */
  static async connect(options: SignalClientOptions): Promise<SignalClient> {
    const WebSocketImpl = options.WebSocket ?? (await defaultWebSocket());
    return new Promise((resolve, reject) => {
      let socket: WebSocketLike;
      try {
        socket = new WebSocketImpl(options.url);
      } catch (error) {
        reject(new SignalError('unreachable', `cannot open ${options.url}: ${(error as Error).message}`));
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
      const timer = setTimeout(() => fail(new SignalError('unreachable', `no answer from ${options.url} within ${options.timeoutMs ?? 10_000} ms`)), options.timeoutMs ?? 10_000);
      socket.onerror = () => fail(new SignalError('unreachable', `signalling server ${options.url} is unreachable`));
      socket.onclose = (event) => fail(new SignalError('unreachable', `signalling server ${options.url} closed the connection (code ${event.code})`));
      socket.onopen = () => socket.send(JSON.stringify({ type: 'join', room: options.room, peer: options.peer } satisfies ClientMessage));
      socket.onmessage = (event) => {
        const message = parseServerMessage(event.data);
        if (message?.type === 'error') return fail(new SignalError(message.code, message.message));
        if (message?.type !== 'joined') return fail(new SignalError('malformed', `expected 'joined' from ${options.url}`));
        settled = true;
        clearTimeout(timer);
        resolve(new SignalClient(socket, message.room, message.peer, message.peers));
      };
    });
  }

  /** The other members of the room. */
  peers(): string[] {
    return [...this.#peers];
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
    this.#finish();
  }

  #receive(data: unknown): void {
    const message = parseServerMessage(data);
    if (message === null) return;
    switch (message.type) {
      case 'presence':
        // left before joined: a peer that left and came back is a new session
        for (const peer of message.left) if (this.#peers.delete(peer)) this.events.emit('leave', peer);
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
      case 'joined':
        return;
    }
  }

  #finish(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#socket.onmessage = this.#socket.onclose = this.#socket.onerror = null;
    this.events.emit('close');
  }
}

function parseServerMessage(data: unknown): ServerMessage | null {
  const text = typeof data === 'string' ? data : typeof data === 'object' && data !== null && 'toString' in data ? String(data) : null;
  if (text === null) return null;
  try {
    const value = JSON.parse(text) as ServerMessage;
    return typeof value === 'object' && value !== null && typeof value.type === 'string' ? value : null;
  } catch {
    return null;
  }
}
