/**
 * The WebSocket signalling server (Node only: it imports `ws`). It relays offer, answer and
 * candidate payloads between the members of a room, and stays up under abuse: every socket,
 * room and byte it holds for someone has a cap (see {@link SIGNAL_SERVER_DEFAULTS}).
 */
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';

import { randomBytes, toBase64 } from '../identity/bytes.js';
import { verifySignature } from '../identity/identity.js';
import { peerIdFromPublicKey } from '../identity/peer-id.js';
import { admissionRefusal, policyOf, type RoomPolicies } from './admission.js';
import { TokenBucket } from './bucket.js';
import type { RoomBus, RoomBusHandlers } from './bus.js';
import { PresenceBatch } from './presence.js';
import { DEFAULT_TURN_TTL_SECONDS, turnCredentials, type TurnOptions } from './turn.js';
import {
  CHALLENGE_BYTES, CLOSE_CODES, joinSignedBytes, parseClientMessage, type ClientMessage, type PeerRole, type ServerMessage, type SignalErrorCode,
} from './protocol.js';
import type { IceServer } from '../platform.js';

export interface SignalServerOptions {
  /** Port to listen on (default 8787; 0 picks a free one). Ignored by {@link SignalServer.attach}. */
  port?: number;
  /** Address to bind (default 127.0.0.1). Ignored by {@link SignalServer.attach}. */
  host?: string;
  /** Serve `wss:` with this PEM certificate chain and key. Ignored by {@link SignalServer.attach}. */
  tls?: { cert: string | Buffer; key: string | Buffer };
  /** Take WebSocket upgrades on this path only (default: any path). */
  path?: string;
  /** Largest accepted frame in bytes; a larger one closes the socket with 1009. */
  maxMessageBytes?: number;
  /** Sustained messages per second per socket, with bursts up to `rateBurst`. */
  ratePerSecond?: number;
  rateBurst?: number;
  /** What a join or a leave costs in that budget (a message costs 1): churn is what floods a room. */
  joinCost?: number;
  /**
   * Sustained bytes per second read from one socket, with bursts up to `byteBurst`; a
   * socket past it is not read from (TCP pushes back on its sender) until it is within.
   */
  bytesPerSecond?: number;
  byteBurst?: number;
  /** A socket that has not answered a ping for this long is cut. */
  heartbeatMs?: number;
  /** Open sockets, all addresses together; beyond it upgrades are refused with HTTP 503. */
  maxConnections?: number;
  /** Open sockets from one remote address; beyond it upgrades are refused with HTTP 503. */
  maxConnectionsPerAddress?: number;
  /** Rooms at once; a join that would make one more is refused with `too-many-rooms`. */
  maxRooms?: number;
  /** Members of one room; a join beyond it is refused with `room-full`. */
  maxRoomSize?: number;
  /** A socket that is in no room this long after connecting (or leaving) is closed with 4000. */
  joinTimeoutMs?: number;
  /**
   * Bytes that may wait to be written to one socket (the `ws` buffer and the kernel's
   * unsent bytes); a message that would pass it closes the socket with 4002 instead.
   */
  maxBufferedBytes?: number;
  /** How long a socket closed for cause may take to read its close frame before it is cut. */
  closeGraceMs?: number;
  /** Membership changes of a room are announced at most this often, coalesced. */
  presenceIntervalMs?: number;
  /** The remote address a connection counts against (default: the TCP peer; behind a proxy, read its header here). */
  addressOf?: (request: IncomingMessage) => string;
  /** Who may join which room: an allowlist or operators whose join tokens admit (see admission.ts). */
  rooms?: RoomPolicies;
  /** Whether a room without a policy admits any proven identity in the role it asks for (default true). */
  openRooms?: boolean;
  /** STUN (or TURN with fixed credentials) servers handed to every member in `joined`. */
  iceServers?: IceServer[];
  /** A TURN server sharing this secret: every member gets credentials of its own, short-lived (turn.ts). */
  turn?: TurnOptions;
  /**
   * Rooms shared with other signalling processes (e.g. a {@link RedisRoomBus}): members
   * joined on any of them see and signal each other. Every process admits its own sockets
   * with its own policies (give them all the same). The caps count this process's sockets
   * only. The server closes the bus when it closes.
   */
  bus?: RoomBus;
}

/** The limits a server takes when an option is not given. */
export const SIGNAL_SERVER_DEFAULTS = {
  maxMessageBytes: 64 * 1024,
  ratePerSecond: 50,
  rateBurst: 200,
  joinCost: 10,
  bytesPerSecond: 64 * 1024,
  byteBurst: 256 * 1024,
  heartbeatMs: 15_000,
  maxConnections: 4_096,
  maxConnectionsPerAddress: 64,
  maxRooms: 1_000,
  maxRoomSize: 1_024,
  joinTimeoutMs: 10_000,
  maxBufferedBytes: 256 * 1024,
  closeGraceMs: 5_000,
  presenceIntervalMs: 100,
} as const;

type Limits = { -readonly [K in keyof typeof SIGNAL_SERVER_DEFAULTS]: number };

/** What the server holds now, and what it turned away since it started. */
export interface SignalServerStats {
  /** Open sockets. */
  connections: number;
  /** Remote addresses with at least one open socket. */
  addresses: number;
  rooms: number;
  /** Sockets in a room. */
  members: number;
  /** Upgrades refused for the connection caps. */
  refusedConnections: number;
  /** Sockets closed because they read too slowly. */
  slowReaders: number;
  /** Sockets closed because they joined no room in time. */
  joinTimeouts: number;
}

interface Room {
  readonly name: string;
  readonly members: Map<string, Connection>;
  readonly presence: PresenceBatch;
  timer: ReturnType<typeof setTimeout> | null;
}

interface Connection {
  readonly socket: WebSocket;
  readonly address: string;
  room: Room | null;
  peer: string | null;
  role: PeerRole | null;
  /** The join token it joined with, relayed to the room's members with its presence. */
  token: string | undefined;
  /** What the next join must sign; a join that succeeds uses it up. */
  challenge: Uint8Array;
  /** A join's signature is being checked: no second join meanwhile. */
  joining: boolean;
  alive: boolean;
  /** Messages (a join or leave costs `joinCost`). */
  readonly messages: TokenBucket;
  /** Bytes read; in debt, the socket is paused until `resumeTimer` finds it solvent. */
  readonly bytes: TokenBucket;
  resumeTimer: ReturnType<typeof setTimeout> | null;
  /** When this socket was last told it is rate limited (told at most once a second). */
  limitedNoticeAt: number;
  joinTimer: ReturnType<typeof setTimeout> | null;
  /** Being closed for cause: nothing more is sent to it or taken from it. */
  closing: boolean;
}

export class SignalServer {
  readonly #http: HttpServer;
  readonly #ownsHttp: boolean;
  readonly #wss: WebSocketServer;
  readonly #limits: Limits;
  readonly #path: string | undefined;
  readonly #addressOf: (request: IncomingMessage) => string;
  readonly #policies: RoomPolicies | undefined;
  readonly #openRooms: boolean;
  readonly #iceServers: IceServer[];
  readonly #turn: TurnOptions | undefined;
  readonly #bus: RoomBus | undefined;
  readonly #busReady: Promise<void>;
  readonly #rooms = new Map<string, Room>();
  readonly #connections = new Set<Connection>();
  readonly #perAddress = new Map<string, number>();
  readonly #heartbeat: ReturnType<typeof setInterval>;
  readonly #onUpgrade = (request: IncomingMessage, socket: Duplex, head: Buffer): void => this.#upgrade(request, socket, head);
  readonly #counters = { refusedConnections: 0, slowReaders: 0, joinTimeouts: 0 };
  #closed = false;

  private constructor(http: HttpServer, ownsHttp: boolean, options: SignalServerOptions) {
    this.#http = http;
    this.#ownsHttp = ownsHttp;
    this.#limits = { ...SIGNAL_SERVER_DEFAULTS };
    for (const key of Object.keys(SIGNAL_SERVER_DEFAULTS) as Array<keyof Limits>) {
      const value = options[key];
      if (value !== undefined) this.#limits[key] = checkedLimit(key, value);
    }
    this.#path = options.path;
    this.#addressOf = options.addressOf ?? ((request) => request.socket.remoteAddress ?? 'unknown');
    this.#policies = options.rooms;
    this.#openRooms = options.openRooms ?? true;
    this.#iceServers = options.iceServers ?? [];
    this.#turn = options.turn;
    if (this.#turn !== undefined && (this.#turn.secret.length === 0 || this.#turn.urls.length === 0)) {
      throw new RangeError('turn needs a secret and at least one turn: URL');
    }
    // closeTimeout: how long a close frame may wait (an option of ws 8.23 its typings lack)
    this.#wss = new WebSocketServer({
      noServer: true,
      maxPayload: this.#limits.maxMessageBytes,
      perMessageDeflate: false,
      clientTracking: false,
      closeTimeout: this.#limits.closeGraceMs,
    } as ConstructorParameters<typeof WebSocketServer>[0]);
    http.on('upgrade', this.#onUpgrade);
    if (ownsHttp) {
      http.on('request', (_request, response) => {
        response.writeHead(426, { 'content-type': 'text/plain', upgrade: 'websocket' }).end('a bytesandbrains signalling server: connect with WebSocket\n');
      });
    }
    this.#heartbeat = setInterval(() => this.#beat(), this.#limits.heartbeatMs);
    this.#heartbeat.unref?.();
    this.#bus = options.bus;
    this.#busReady = this.#bus?.start(this.#busHandlers()) ?? Promise.resolve();
    this.#busReady.catch(() => undefined); // a join awaiting it reports the failure
  }

  /** Starts an HTTP (or, with `tls`, HTTPS) server of its own; resolves once the port is bound. */
  static listen(options: SignalServerOptions = {}): Promise<SignalServer> {
    const http = options.tls === undefined ? createHttpServer() : createHttpsServer({ cert: options.tls.cert, key: options.tls.key });
    return new Promise((resolve, reject) => {
      http.once('error', reject);
      http.listen(options.port ?? 8787, options.host ?? '127.0.0.1', () => {
        http.off('error', reject);
        const server = new SignalServer(http, true, options);
        server.#busReady.then(() => resolve(server), (error: unknown) => {
          void server.close();
          reject(error);
        });
      });
    });
  }

  /**
   * Takes the WebSocket upgrades of a server the caller runs (HTTP or HTTPS), e.g. the one
   * serving the page, so page and signalling share a port and a certificate. Give `path`
   * when other upgrades go elsewhere. {@link close} leaves that server running.
   */
  static attach(server: HttpServer, options: SignalServerOptions = {}): SignalServer {
    return new SignalServer(server, false, options);
  }

  /** The bound address and port. */
  get address(): { host: string; port: number } {
    const a = this.#http.address() as AddressInfo;
    return { host: a.address, port: a.port };
  }

  /** Peers in `room` on this process, watchers included. */
  members(room: string): string[] {
    return [...(this.#rooms.get(room)?.members.keys() ?? [])];
  }

  stats(): SignalServerStats {
    let members = 0;
    for (const room of this.#rooms.values()) members += room.members.size;
    return { connections: this.#connections.size, addresses: this.#perAddress.size, rooms: this.#rooms.size, members, ...this.#counters };
  }

  /** Closes every socket and stops taking new ones; a server of its own stops listening. */
  close(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#closed = true;
    clearInterval(this.#heartbeat);
    this.#http.off('upgrade', this.#onUpgrade);
    for (const connection of this.#connections) connection.socket.terminate();
    for (const room of this.#rooms.values()) if (room.timer !== null) clearTimeout(room.timer);
    this.#rooms.clear();
    this.#wss.close();
    const bus = this.#bus?.close() ?? Promise.resolve();
    if (!this.#ownsHttp) return bus;
    const http = new Promise<void>((resolve) => {
      this.#http.close(() => resolve());
      this.#http.closeAllConnections();
    });
    return Promise.all([bus, http]).then(() => undefined);
  }

  #upgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    if (this.#path !== undefined && new URL(request.url ?? '/', 'http://x').pathname !== this.#path) {
      if (this.#ownsHttp) refuseUpgrade(socket, 404, 'no signalling on this path');
      return; // another listener of the caller's server may take it
    }
    const address = this.#addressOf(request);
    if (this.#closed || this.#connections.size >= this.#limits.maxConnections) {
      this.#counters.refusedConnections++;
      return refuseUpgrade(socket, 503, `the signalling server holds its limit of ${this.#limits.maxConnections} connections`);
    }
    if ((this.#perAddress.get(address) ?? 0) >= this.#limits.maxConnectionsPerAddress) {
      this.#counters.refusedConnections++;
      return refuseUpgrade(socket, 503, `${address} holds its limit of ${this.#limits.maxConnectionsPerAddress} connections`);
    }
    this.#wss.handleUpgrade(request, socket, head, (ws) => this.#accept(ws, address));
  }

  #accept(socket: WebSocket, address: string): void {
    const now = Date.now();
    const connection: Connection = {
      socket, address, room: null, peer: null, role: null, token: undefined, challenge: randomBytes(CHALLENGE_BYTES), joining: false, alive: true,
      messages: new TokenBucket(this.#limits.ratePerSecond, this.#limits.rateBurst, now),
      bytes: new TokenBucket(this.#limits.bytesPerSecond, this.#limits.byteBurst, now),
      resumeTimer: null, limitedNoticeAt: 0, joinTimer: null, closing: false,
    };
    this.#connections.add(connection);
    this.#perAddress.set(address, (this.#perAddress.get(address) ?? 0) + 1);
    this.#awaitJoin(connection);
    socket.on('pong', () => (connection.alive = true));
    socket.on('message', (data, isBinary) => {
      this.#throttle(connection, byteLength(data));
      this.#receive(connection, isBinary ? null : data.toString());
    });
    socket.on('close', () => this.#forget(connection));
    socket.on('error', () => socket.terminate()); // e.g. a frame over maxPayload
    this.#send(connection, { type: 'challenge', nonce: toBase64(connection.challenge) });
  }

  /** Everything held for a socket that closed goes, so its memory can be reclaimed. */
  #forget(connection: Connection): void {
    if (!this.#connections.delete(connection)) return;
    this.#leave(connection);
    if (connection.joinTimer !== null) clearTimeout(connection.joinTimer);
    if (connection.resumeTimer !== null) clearTimeout(connection.resumeTimer);
    connection.joinTimer = connection.resumeTimer = null;
    const count = (this.#perAddress.get(connection.address) ?? 1) - 1;
    if (count > 0) this.#perAddress.set(connection.address, count);
    else this.#perAddress.delete(connection.address);
  }

  #awaitJoin(connection: Connection): void {
    connection.joinTimer = setTimeout(() => {
      connection.joinTimer = null;
      this.#counters.joinTimeouts++;
      this.#shut(connection, CLOSE_CODES.joinTimeout, `joined no room within ${this.#limits.joinTimeoutMs} ms`);
    }, this.#limits.joinTimeoutMs);
    connection.joinTimer.unref?.();
  }

  #receive(connection: Connection, text: string | null): void {
    if (connection.closing) return;
    const message = text === null ? null : parseClientMessage(text);
    const cost = message?.type === 'join' || message?.type === 'leave' ? this.#limits.joinCost : 1;
    if (!connection.messages.spend(cost, Date.now(), message?.type === 'leave')) {
      const now = Date.now();
      if (now - connection.limitedNoticeAt < 1000) return;
      connection.limitedNoticeAt = now;
      return this.#refuse(connection, 'rate-limited', 'more messages than the rate limit allows; dropped');
    }
    if (message === null) return this.#refuse(connection, 'malformed', 'not a join, signal or leave message in JSON text');
    switch (message.type) {
      case 'join':
        return void this.#join(connection, message);
      case 'signal': {
        if (connection.room === null || connection.peer === null) return this.#refuse(connection, 'not-joined', 'join a room before signalling');
        if (connection.role === 'watcher') return this.#refuse(connection, 'forbidden', 'a watcher only sees presence: it sends no signals');
        const target = connection.room.members.get(message.to);
        if (target === undefined && this.#relayed(connection.room.name, connection.peer, message.to, message.data)) return;
        // watchers are invisible to the room: as if they were not there
        if (target === undefined || target.role === 'watcher') return this.#refuse(connection, 'unknown-peer', `no peer ${message.to} in room ${connection.room.name}`);
        return this.#send(target, { type: 'signal', from: connection.peer, data: message.data });
      }
      case 'ice':
        if (connection.peer === null) return this.#refuse(connection, 'not-joined', 'join a room before asking for ICE servers');
        return this.#send(connection, { type: 'ice', ...this.#iceFor(connection.peer) });
      case 'leave':
        if (connection.room === null) return;
        this.#leave(connection);
        connection.challenge = randomBytes(CHALLENGE_BYTES);
        this.#send(connection, { type: 'challenge', nonce: toBase64(connection.challenge) });
        return this.#awaitJoin(connection);
    }
  }

  /**
   * A join is taken when its peer id is the id of the key it carries and the key signed
   * this connection's challenge, the room and the id: only the key's holder can join as
   * that id, so a second join of the id is its holder coming back, and replaces the first.
   */
  async #join(connection: Connection, join: Extract<ClientMessage, { type: 'join' }>): Promise<void> {
    if (connection.room !== null || connection.joining) {
      return this.#refuse(connection, 'already-joined', connection.room === null ? 'a join is already being checked' : `already in room ${connection.room.name} as ${connection.peer}`);
    }
    const { room: roomName, peer, role } = join;
    if (peerIdFromPublicKey(join.key) !== peer) {
      return this.#refuse(connection, 'bad-identity', `peer id ${peer} is not the id of the Ed25519 key the join carries`);
    }
    connection.joining = true;
    let valid: boolean;
    try {
      valid = await verifySignature(join.key, joinSignedBytes(connection.challenge, roomName, peer, role), join.sig);
    } finally {
      connection.joining = false;
    }
    if (connection.closing || !this.#connections.has(connection)) return;
    if (!valid) return this.#refuse(connection, 'bad-signature', `the join signature does not verify: not ${peer}'s key over this connection's challenge`);
    connection.joining = true;
    let refusal: string | null;
    try {
      const request = { room: roomName, peer, role, token: join.token };
      refusal = await admissionRefusal(policyOf(this.#policies, roomName), this.#openRooms, request, Math.floor(Date.now() / 1000));
    } finally {
      connection.joining = false;
    }
    if (connection.closing || !this.#connections.has(connection)) return;
    if (refusal !== null) return this.#refuse(connection, 'not-admitted', refusal);
    const stale = this.#rooms.get(roomName)?.members.get(peer);
    let room = this.#rooms.get(roomName);
    if (room !== undefined && stale === undefined && room.members.size >= this.#limits.maxRoomSize) {
      return this.#refuse(connection, 'room-full', `room ${roomName} holds its limit of ${this.#limits.maxRoomSize} members`);
    }
    if (room === undefined && this.#rooms.size >= this.#limits.maxRooms) {
      return this.#refuse(connection, 'too-many-rooms', `the server holds its limit of ${this.#limits.maxRooms} rooms`);
    }
    if (stale !== undefined) this.#shut(stale, CLOSE_CODES.replaced, `${peer} joined room ${roomName} again on another connection`);
    // The room's members on other processes, asked before this socket is a member here: the
    // first message it gets is `joined`, and nothing of the room reaches it before.
    const peers: string[] = [];
    if (this.#bus !== undefined) {
      let remote;
      connection.joining = true;
      try {
        await this.#busReady;
        remote = await this.#bus.join(roomName, peer, role, join.token);
      } catch (error) {
        return this.#shut(connection, CLOSE_CODES.unavailable, `the rooms shared with other signalling processes are out of reach: ${(error as Error).message}`);
      } finally {
        connection.joining = false;
      }
      if (connection.closing || !this.#connections.has(connection)) return this.#bus.leave(roomName, peer);
      for (const member of remote) if (member.role !== 'watcher') peers.push(member.peer);
    }
    room = this.#rooms.get(roomName); // the stale socket may have been its last member
    if (room === undefined) {
      room = { name: roomName, members: new Map(), presence: new PresenceBatch(), timer: null };
      this.#rooms.set(roomName, room);
    }
    for (const [id, member] of room.members) if (member.role !== 'watcher' && !peers.includes(id)) peers.push(id);
    room.members.set(peer, connection);
    connection.room = room;
    connection.peer = peer;
    connection.role = role;
    connection.token = join.token;
    connection.challenge = new Uint8Array(0); // used up: a leave hands out a fresh one
    if (connection.joinTimer !== null) clearTimeout(connection.joinTimer);
    connection.joinTimer = null;
    const joined = room;
    if (role !== 'watcher') this.#announce(joined, () => joined.presence.joined(peer));
    this.#send(connection, { type: 'joined', room: roomName, peer, role, peers, ...this.#iceFor(peer), ...this.#tokensOf(room, peers) });
  }

  /** A signal for a member of another process goes through the bus; false when none holds it. */
  #relayed(room: string, from: string, to: string, data: unknown): boolean {
    const role = this.#bus?.remoteRole(room, to);
    return role !== undefined && role !== 'watcher' && this.#bus!.relay(room, from, to, data);
  }

  /** What the bus tells this process about members held by the others. */
  #busHandlers(): RoomBusHandlers {
    return {
      presence: (roomName, peer, role) => {
        const room = this.#rooms.get(roomName);
        if (room === undefined || role === 'watcher' || room.members.has(peer)) return;
        this.#announce(room, () => (role === null ? room.presence.left(peer) : room.presence.joined(peer)));
      },
      signal: (roomName, from, to, data) => {
        const target = this.#rooms.get(roomName)?.members.get(to);
        if (target !== undefined && target.role !== 'watcher') this.#send(target, { type: 'signal', from, data });
      },
      replaced: (roomName, peer) => {
        const stale = this.#rooms.get(roomName)?.members.get(peer);
        if (stale !== undefined) this.#shut(stale, CLOSE_CODES.replaced, `${peer} joined room ${roomName} again on another signalling process`);
      },
    };
  }

  /** The join tokens `peers` of `room` joined with, here or on another process (none: no field at all). */
  #tokensOf(room: Room, peers: readonly string[]): { tokens?: Record<string, string> } {
    const tokens: Record<string, string> = {};
    let any = false;
    for (const peer of peers) {
      const token = room.members.get(peer)?.token ?? this.#bus?.remoteToken(room.name, peer);
      if (token !== undefined) (tokens[peer] = token), (any = true);
    }
    return any ? { tokens } : {};
  }

  /** Whether `peer` is a data member of `room` here or on another process. */
  #present(room: Room, peer: string): boolean {
    const role = room.members.get(peer)?.role ?? this.#bus?.remoteRole(room.name, peer) ?? 'watcher';
    return role !== 'watcher';
  }

  /** The ICE servers a member gets: the fixed ones, and TURN credentials of its own. */
  #iceFor(peer: string): { iceServers: IceServer[]; iceTtlSeconds?: number } {
    if (this.#turn === undefined) return { iceServers: this.#iceServers };
    const turn = turnCredentials(this.#turn, peer, Math.floor(Date.now() / 1000));
    return { iceServers: [...this.#iceServers, turn], iceTtlSeconds: this.#turn.ttlSeconds ?? DEFAULT_TURN_TTL_SECONDS };
  }

  #leave(connection: Connection): void {
    const { room, peer, role } = connection;
    connection.room = null;
    connection.peer = null;
    connection.role = null;
    connection.token = undefined;
    if (room === null || peer === null || room.members.get(peer) !== connection) return;
    room.members.delete(peer);
    this.#bus?.leave(room.name, peer);
    if (room.members.size === 0) {
      // nobody is left to tell
      if (room.timer !== null) clearTimeout(room.timer);
      this.#rooms.delete(room.name);
      this.#bus?.forget(room.name);
      return;
    }
    if (role !== 'watcher') this.#announce(room, () => room.presence.left(peer));
  }

  /** Records a membership change; the room hears it with the others of its interval. */
  #announce(room: Room, record: () => void): void {
    record();
    if (room.timer !== null) return;
    room.timer = setTimeout(() => {
      room.timer = null;
      const changes = room.presence.take((peer) => this.#present(room, peer));
      if (changes.joined.length === 0 && changes.left.length === 0) return;
      const text = JSON.stringify({ type: 'presence', ...changes, ...this.#tokensOf(room, changes.joined) } satisfies ServerMessage);
      for (const member of [...room.members.values()]) this.#sendText(member, text);
    }, this.#limits.presenceIntervalMs);
  }

  /**
   * Charges what was read to the socket's byte budget. In debt, the socket is paused: its
   * sender's bytes wait in TCP, not in this process, and cost no parsing until it resumes.
   */
  #throttle(connection: Connection, bytes: number): void {
    connection.bytes.spend(bytes, Date.now(), true);
    if (connection.resumeTimer !== null) return;
    const wait = (): void => {
      const ms = connection.bytes.msUntilSolvent(Date.now());
      if (ms === 0) {
        connection.resumeTimer = null;
        connection.socket.resume();
        return;
      }
      connection.resumeTimer = setTimeout(wait, ms);
    };
    if (connection.bytes.msUntilSolvent(Date.now()) === 0) return;
    connection.socket.pause();
    wait();
  }

  #refuse(connection: Connection, code: SignalErrorCode, message: string): void {
    this.#send(connection, { type: 'error', code, message });
  }

  #send(connection: Connection, message: ServerMessage): void {
    this.#sendText(connection, JSON.stringify(message));
  }

  /** Writes to a socket unless what waits for it would pass `maxBufferedBytes`; then it is closed. */
  #sendText(connection: Connection, text: string): void {
    const socket = connection.socket;
    if (connection.closing || socket.readyState !== socket.OPEN) return;
    if (socket.bufferedAmount + Buffer.byteLength(text) > this.#limits.maxBufferedBytes) {
      this.#counters.slowReaders++;
      return this.#shut(connection, CLOSE_CODES.slowReader, `read too slowly: over ${this.#limits.maxBufferedBytes} bytes waited for it`);
    }
    socket.send(text);
  }

  /**
   * Closes a socket for cause: it leaves its room at once and gets nothing more; its close
   * frame waits behind what is buffered, and `closeGraceMs` later `ws` cuts it anyway.
   */
  #shut(connection: Connection, code: number, reason: string): void {
    if (connection.closing) return;
    connection.closing = true;
    this.#leave(connection);
    connection.socket.close(code, reason.slice(0, 120)); // a close reason is at most 123 bytes
  }

  #beat(): void {
    for (const connection of this.#connections) {
      if (!connection.alive) {
        connection.socket.terminate(); // its 'close' handler announces the leave
        continue;
      }
      connection.alive = false;
      connection.socket.ping();
    }
  }
}

function refuseUpgrade(socket: Duplex, status: 404 | 503, message: string): void {
  const reason = status === 404 ? 'Not Found' : 'Service Unavailable';
  socket.end(`HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(message)}\r\n\r\n${message}`);
  setTimeout(() => socket.destroy(), 1000).unref(); // a client that never reads must not hold it
}

function byteLength(data: Buffer | ArrayBuffer | Buffer[]): number {
  return Array.isArray(data) ? data.reduce((sum, part) => sum + part.byteLength, 0) : data.byteLength;
}

function checkedLimit(name: string, value: unknown): number {
  // a rate, burst, cap or timeout of 0 would refuse everything; a join may be free, presence immediate
  const least = name === 'joinCost' || name === 'presenceIntervalMs' ? 0 : 1;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < least) {
    throw new RangeError(`signalling server option ${name} must be a finite number ≥ ${least}, not ${String(value)}`);
  }
  return value;
}
