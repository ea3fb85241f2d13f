/**
 * The WebSocket signalling server (Node only: it imports `ws`). Rooms of peers with ids the
 * clients choose; it relays offer/answer/candidate payloads between members of one room.
 */
import { WebSocketServer, type WebSocket } from 'ws';
import type { AddressInfo } from 'node:net';
import { parseClientMessage, type ServerMessage, type SignalErrorCode } from './protocol.js';

export interface SignalServerOptions {
  port?: number;
  host?: string;
  /** Largest accepted frame in bytes (default 64 KiB). */
  maxMessageBytes?: number;
  /** Sustained messages per second per socket (default 50), with bursts up to `rateBurst` (default 200). */
  ratePerSecond?: number;
  rateBurst?: number;
  /** A socket that has not answered a ping for this long is terminated (default 15 s). */
  heartbeatMs?: number;
}

interface Member {
  socket: WebSocket;
  room: string | null;
  peer: string | null;
  alive: boolean;
  tokens: number;
  refilledAt: number;
}

export class SignalServer {
  readonly #wss: WebSocketServer;
  readonly #rooms = new Map<string, Map<string, Member>>();
  readonly #members = new Set<Member>();
  readonly #heartbeat: ReturnType<typeof setInterval>;
  readonly #rate: number;
  readonly #burst: number;

  private constructor(wss: WebSocketServer, options: SignalServerOptions) {
    this.#wss = wss;
    this.#rate = options.ratePerSecond ?? 50;
    this.#burst = options.rateBurst ?? 200;
    wss.on('connection', (socket) => this.#accept(socket));
    this.#heartbeat = setInterval(() => this.#beat(), options.heartbeatMs ?? 15_000);
    this.#heartbeat.unref?.();
  }

  /** Starts listening; resolves once the port is bound. */
  static listen(options: SignalServerOptions = {}): Promise<SignalServer> {
    return new Promise((resolve, reject) => {
      const wss = new WebSocketServer({ port: options.port ?? 8787, host: options.host ?? '127.0.0.1', maxPayload: options.maxMessageBytes ?? 64 * 1024 });
      wss.once('error', reject);
      wss.once('listening', () => {
        wss.off('error', reject);
        resolve(new SignalServer(wss, options));
      });
    });
  }

  /** The bound address and port. */
  get address(): { host: string; port: number } {
    const a = this.#wss.address() as AddressInfo;
    return { host: a.address, port: a.port };
  }

  /** Peers in `room`. */
  members(room: string): string[] {
    return [...(this.#rooms.get(room)?.keys() ?? [])];
  }

  /** Closes every socket and stops listening. */
  close(): Promise<void> {
    clearInterval(this.#heartbeat);
    for (const client of this.#wss.clients) client.terminate();
    return new Promise((resolve) => this.#wss.close(() => resolve()));
  }

  #accept(socket: WebSocket): void {
    const member: Member = { socket, room: null, peer: null, alive: true, tokens: this.#burst, refilledAt: Date.now() };
    this.#members.add(member);
    socket.on('pong', () => (member.alive = true));
    socket.on('message', (data, isBinary) => this.#receive(member, isBinary ? null : data.toString()));
    socket.on('close', () => {
      this.#leave(member);
      this.#members.delete(member);
    });
    socket.on('error', () => socket.terminate()); // e.g. a frame over maxPayload
  }

  #receive(member: Member, text: string | null): void {
    if (!this.#takeToken(member)) return this.#refuse(member, 'rate-limited', 'more messages than the rate limit allows; dropped');
    const message = text === null ? null : parseClientMessage(text);
    if (message === null) return this.#refuse(member, 'malformed', 'not a join, signal or leave message in JSON text');
    switch (message.type) {
      case 'join': {
        if (member.room !== null) return this.#refuse(member, 'already-joined', `already in room ${member.room} as ${member.peer}`);
        let room = this.#rooms.get(message.room);
        if (room?.has(message.peer)) {
          return this.#refuse(member, 'duplicate-peer', `peer id ${message.peer} is already taken in room ${message.room}`);
        }
        if (room === undefined) {
          room = new Map();
          this.#rooms.set(message.room, room);
        }
        const peers = [...room.keys()];
        for (const other of room.values()) send(other.socket, { type: 'peer-joined', peer: message.peer });
        room.set(message.peer, member);
        member.room = message.room;
        member.peer = message.peer;
        return send(member.socket, { type: 'joined', room: message.room, peer: message.peer, peers });
      }
      case 'signal': {
        if (member.room === null || member.peer === null) return this.#refuse(member, 'not-joined', 'join a room before signalling');
        const target = this.#rooms.get(member.room)?.get(message.to);
        if (target === undefined) return this.#refuse(member, 'unknown-peer', `no peer ${message.to} in room ${member.room}`);
        return send(target.socket, { type: 'signal', from: member.peer, data: message.data });
      }
      case 'leave':
        return this.#leave(member);
    }
  }

  #leave(member: Member): void {
    if (member.room === null || member.peer === null) return;
    const room = this.#rooms.get(member.room);
    if (room?.get(member.peer) === member) {
      room.delete(member.peer);
      for (const other of room.values()) send(other.socket, { type: 'peer-left', peer: member.peer });
      if (room.size === 0) this.#rooms.delete(member.room);
    }
    member.room = null;
    member.peer = null;
  }

  #takeToken(member: Member): boolean {
    const now = Date.now();
    member.tokens = Math.min(this.#burst, member.tokens + ((now - member.refilledAt) / 1000) * this.#rate);
    member.refilledAt = now;
    if (member.tokens < 1) return false;
    member.tokens -= 1;
    return true;
  }

  #refuse(member: Member, code: SignalErrorCode, message: string): void {
    send(member.socket, { type: 'error', code, message });
  }

  #beat(): void {
    for (const member of this.#members) {
      if (!member.alive) {
        member.socket.terminate(); // its 'close' handler announces the leave
        continue;
      }
      member.alive = false;
      member.socket.ping();
    }
  }
}

function send(socket: WebSocket, message: ServerMessage): void {
  if (socket.readyState === socket.OPEN) socket.send(JSON.stringify(message));
}
