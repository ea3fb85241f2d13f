/**
 * The WebSocket signalling server (Node only: it imports `ws`). It relays offer, answer and
 * candidate payloads between the members of a room, and stays up under abuse: every socket,
 * room and byte it holds for someone has a cap (see {@link SIGNAL_SERVER_DEFAULTS}), every
 * message is measured before it is parsed, and a message whose handling fails closes only
 * its own socket.
 */
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';

import { randomBytes, toBase64 } from '../identity/bytes.js';
import { verifySignature } from '../identity/identity.js';
import { peerIdFromPublicKey } from '../identity/peer-id.js';
import { admissionRefusal, policyOf, type RoomPolicies } from './admission.js';
import { TokenBucket } from './bucket.js';
import type { RemoteMember, RoomBus, RoomBusHandlers } from './bus.js';
import { PresenceBacklog, RoomPresence, type PresenceChange, type Session } from './presence.js';
import { SocketLedger } from './sockets.js';
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
  /** Arrays and objects nested in one message; a deeper one is refused as `malformed` before it is parsed. */
  maxMessageDepth?: number;
  /** Values in one message (every array, object, member name and scalar); more are refused as `malformed` before parsing. */
  maxMessageValues?: number;
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
  /**
   * Connections, all addresses together; beyond it new ones are refused with HTTP 503. A
   * server of its own counts a TCP connection from its accept, upgraded or not.
   */
  maxConnections?: number;
  /** Connections from one remote address; beyond it new ones are refused with HTTP 503. */
  maxConnectionsPerAddress?: number;
  /** A connection to a server of its own that has not finished its WebSocket upgrade this long after its accept is cut. */
  upgradeTimeoutMs?: number;
  /** Rooms at once; a join that would make one more is refused with `too-many-rooms`. */
  maxRooms?: number;
  /** Members of one room; a join beyond it is refused with `room-full`. */
  maxRoomSize?: number;
  /** A socket that is in no room this long after connecting (or leaving) is closed with 4000. */
  joinTimeoutMs?: number;
  /**
   * Bytes that may wait to be written to one socket (in `ws` and Node, before the kernel
   * takes them). A signal relayed to a socket past it is dropped: a member that reads
   * slowly loses signals, not its place. Presence waits for it to read, kept as at most
   * one entry per peer. Its own replies may pass it by {@link REPLY_RESERVE_BYTES}; past
   * that, it asks for more than it reads and is closed with 4002.
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
  /**
   * Told of each failure handling a message (a bug, or a `rooms` function that threw):
   * the socket that sent it is closed with 1011 and counted in `faults`; the server goes on.
   */
  onFault?: (error: unknown) => void;
}

/** The limits a server takes when an option is not given. */
export const SIGNAL_SERVER_DEFAULTS = {
  maxMessageBytes: 64 * 1024,
  maxMessageDepth: 16,
  maxMessageValues: 1_024,
  ratePerSecond: 50,
  rateBurst: 200,
  joinCost: 10,
  bytesPerSecond: 64 * 1024,
  byteBurst: 256 * 1024,
  heartbeatMs: 15_000,
  maxConnections: 4_096,
  maxConnectionsPerAddress: 64,
  upgradeTimeoutMs: 10_000,
  maxRooms: 1_000,
  maxRoomSize: 1_024,
  joinTimeoutMs: 10_000,
  maxBufferedBytes: 256 * 1024,
  closeGraceMs: 5_000,
  presenceIntervalMs: 100,
} as const;

type Limits = { -readonly [K in keyof typeof SIGNAL_SERVER_DEFAULTS]: number };

/** Peers in one `joined` or `presence` message: a long roster goes out in pages, as the member reads. */
export const PRESENCE_PAGE_PEERS = 64;

/** What a socket's own replies may add past `maxBufferedBytes` (a full socket still hears its answers). */
export const REPLY_RESERVE_BYTES = 64 * 1024;

/** What the server holds now, and what it turned away since it started. */
export interface SignalServerStats {
  /** Open WebSockets. */
  connections: number;
  /** TCP connections of a server of its own that have not finished their upgrade yet. */
  pendingUpgrades: number;
  /** Remote addresses with at least one connection. */
  addresses: number;
  rooms: number;
  /** Sockets in a room. */
  members: number;
  /** Connections refused for the connection caps. */
  refusedConnections: number;
  /** Connections cut for not finishing their upgrade in time. */
  upgradeTimeouts: number;
  /** Sockets closed because their own replies waited for them past `maxBufferedBytes` and its reserve. */
  slowReaders: number;
  /** Signals dropped because their addressee had `maxBufferedBytes` waiting already. */
  droppedSignals: number;
  /** Sockets closed because they joined no room in time. */
  joinTimeouts: number;
  /** Messages whose handling failed: their sockets were closed (a bus's were dropped). */
  faults: number;
}

interface Room {
  readonly name: string;
  readonly members: Map<string, Connection>;
  readonly presence: RoomPresence;
  timer: ReturnType<typeof setTimeout> | null;
}

interface Connection {
  readonly socket: WebSocket;
  room: Room | null;
  peer: string | null;
  role: PeerRole | null;
  /** Its stay in its room as a data peer, with the join token it joined with (admission verified it). */
  session: Session | null;
  /** What it knows of its room where that differs from the announced room; null when nothing does. */
  unsent: PresenceBacklog | null;
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
  /** Called once each write is handed to the kernel: the presence it waits for can follow. */
  readonly written: () => void;
}

export class SignalServer {
  readonly #http: HttpServer;
  readonly #ownsHttp: boolean;
  readonly #tls: boolean;
  readonly #wss: WebSocketServer;
  readonly #limits: Limits;
  readonly #path: string | undefined;
  readonly #addressOf: (request: IncomingMessage) => string;
  /** Whether a connection's address is its TCP peer's, known at its accept. */
  readonly #addressAtAccept: boolean;
  readonly #policies: RoomPolicies | undefined;
  readonly #openRooms: boolean;
  readonly #iceServers: IceServer[];
  readonly #turn: TurnOptions | undefined;
  readonly #bus: RoomBus | undefined;
  readonly #busReady: Promise<void>;
  readonly #onFault: ((error: unknown) => void) | undefined;
  readonly #rooms = new Map<string, Room>();
  readonly #connections = new Set<Connection>();
  readonly #sockets = new SocketLedger();
  /** Connections refused at their accept: their request, if it still comes, is not looked at. */
  readonly #refused = new WeakSet<Socket>();
  readonly #heartbeat: ReturnType<typeof setInterval>;
  readonly #onConnection = (socket: Socket): void => this.#acceptTcp(socket);
  readonly #onUpgrade = (request: IncomingMessage, socket: Duplex, head: Buffer): void => this.#upgrade(request, socket as Socket, head);
  readonly #counters = { refusedConnections: 0, upgradeTimeouts: 0, slowReaders: 0, droppedSignals: 0, joinTimeouts: 0, faults: 0 };
  #closed = false;

  private constructor(http: HttpServer, ownsHttp: boolean, options: SignalServerOptions) {
    this.#http = http;
    this.#ownsHttp = ownsHttp;
    this.#tls = ownsHttp && options.tls !== undefined;
    this.#limits = { ...SIGNAL_SERVER_DEFAULTS };
    for (const key of Object.keys(SIGNAL_SERVER_DEFAULTS) as Array<keyof Limits>) {
      const value = options[key];
      if (value !== undefined) this.#limits[key] = checkedLimit(key, value);
    }
    this.#path = options.path;
    this.#addressOf = options.addressOf ?? ((request) => request.socket.remoteAddress ?? 'unknown');
    this.#addressAtAccept = ownsHttp && options.addressOf === undefined;
    this.#policies = options.rooms;
    this.#openRooms = options.openRooms ?? true;
    this.#iceServers = options.iceServers ?? [];
    this.#turn = options.turn;
    this.#onFault = options.onFault;
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
      http.on('connection', this.#onConnection);
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
   * when other upgrades go elsewhere. {@link close} leaves that server running. Its
   * connections count from their upgrade: until then they are the caller's server's
   * (its `headersTimeout` and `maxConnections` bound them).
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
    return {
      connections: this.#connections.size, pendingUpgrades: this.#sockets.pending, addresses: this.#sockets.addresses,
      rooms: this.#rooms.size, members, ...this.#counters,
    };
  }

  /** Closes every socket and stops taking new ones; a server of its own stops listening. */
  close(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#closed = true;
    clearInterval(this.#heartbeat);
    this.#http.off('upgrade', this.#onUpgrade);
    this.#http.off('connection', this.#onConnection);
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

  /** Why one more connection from `address` (null: not known yet) would pass a cap; null when it would not. */
  #capRefusal(address: string | null): string | null {
    if (this.#closed || this.#sockets.size >= this.#limits.maxConnections) {
      return `the signalling server holds its limit of ${this.#limits.maxConnections} connections`;
    }
    return address === null ? null : this.#addressRefusal(address);
  }

  #addressRefusal(address: string): string | null {
    const most = this.#limits.maxConnectionsPerAddress;
    return this.#sockets.countOf(address) >= most ? `${address} holds its limit of ${most} connections` : null;
  }

  /** A TCP connection to a server of its own: counted from now, and cut unless it upgrades in time. */
  #acceptTcp(socket: Socket): void {
    socket.on('error', () => socket.destroy());
    const address = this.#addressAtAccept ? socket.remoteAddress ?? 'unknown' : null;
    const refusal = this.#capRefusal(address);
    if (refusal !== null) {
      this.#counters.refusedConnections++;
      this.#refused.add(socket);
      // before its TLS handshake, a client of wss: could not read an HTTP answer
      return this.#tls ? void socket.destroy() : refuseUpgrade(socket, 503, refusal);
    }
    this.#sockets.hold(socket, address, this.#limits.upgradeTimeoutMs, () => this.#counters.upgradeTimeouts++);
  }

  #upgrade(request: IncomingMessage, socket: Socket, head: Buffer): void {
    if (this.#refused.has(socket)) return; // answered already
    socket.on('error', () => socket.destroy());
    if (this.#path !== undefined && new URL(request.url ?? '/', 'http://x').pathname !== this.#path) {
      if (this.#ownsHttp) refuseUpgrade(socket, 404, 'no signalling on this path');
      return; // another listener of the caller's server may take it
    }
    const address = this.#addressOf(request);
    // taken at its accept, it counts in the total already, and against its address too when that is its TCP peer's
    const held = this.#sockets.holds(socket);
    const refusal = !held ? this.#capRefusal(address) : this.#addressAtAccept ? null : this.#addressRefusal(address);
    if (refusal !== null) {
      this.#counters.refusedConnections++;
      return refuseUpgrade(socket, 503, refusal);
    }
    if (!held && !this.#sockets.hold(socket, null)) return void socket.destroy(); // gone already
    this.#sockets.upgraded(socket, address);
    this.#wss.handleUpgrade(request, socket, head, (ws) => this.#accept(ws));
  }

  #accept(socket: WebSocket): void {
    const now = Date.now();
    const connection: Connection = {
      socket, room: null, peer: null, role: null, session: null, unsent: null, challenge: randomBytes(CHALLENGE_BYTES), joining: false, alive: true,
      messages: new TokenBucket(this.#limits.ratePerSecond, this.#limits.rateBurst, now),
      bytes: new TokenBucket(this.#limits.bytesPerSecond, this.#limits.byteBurst, now),
      resumeTimer: null, limitedNoticeAt: 0, joinTimer: null, closing: false,
      written: () => this.#flush(connection),
    };
    this.#connections.add(connection);
    this.#awaitJoin(connection);
    socket.on('pong', () => (connection.alive = true));
    socket.on('message', (data, isBinary) => {
      try {
        this.#throttle(connection, byteLength(data));
        this.#receive(connection, isBinary ? null : data.toString());
      } catch (error) {
        this.#fault(connection, error);
      }
    });
    socket.on('close', () => this.#forget(connection));
    socket.on('error', () => socket.terminate()); // e.g. a frame over maxPayload
    this.#reply(connection, { type: 'challenge', nonce: toBase64(connection.challenge) });
  }

  /** Everything held for a socket that closed goes, so its memory can be reclaimed. */
  #forget(connection: Connection): void {
    if (!this.#connections.delete(connection)) return;
    this.#leave(connection);
    if (connection.joinTimer !== null) clearTimeout(connection.joinTimer);
    if (connection.resumeTimer !== null) clearTimeout(connection.resumeTimer);
    connection.joinTimer = connection.resumeTimer = null;
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
    const bounds = { maxDepth: this.#limits.maxMessageDepth, maxValues: this.#limits.maxMessageValues };
    const message = text === null ? 'a binary frame: messages are JSON text' : parseClientMessage(text, bounds);
    const churn = typeof message !== 'string' && (message.type === 'join' || message.type === 'leave');
    if (!connection.messages.spend(churn ? this.#limits.joinCost : 1, Date.now(), churn && message.type === 'leave')) {
      const now = Date.now();
      if (now - connection.limitedNoticeAt < 1000) return;
      connection.limitedNoticeAt = now;
      return this.#refuse(connection, 'rate-limited', 'more messages than the rate limit allows; dropped');
    }
    if (typeof message === 'string') return this.#refuse(connection, 'malformed', message);
    switch (message.type) {
      case 'join':
        return void this.#join(connection, message).catch((error: unknown) => this.#fault(connection, error));
      case 'signal': {
        if (connection.room === null || connection.peer === null) return this.#refuse(connection, 'not-joined', 'join a room before signalling');
        if (connection.role === 'watcher') return this.#refuse(connection, 'forbidden', 'a watcher only sees presence: it sends no signals');
        const target = connection.room.members.get(message.to);
        if (target === undefined && this.#relayedByBus(connection.room.name, connection.peer, message.to, message.data)) return;
        // watchers are invisible to the room: as if they were not there
        if (target === undefined || target.role === 'watcher') return this.#refuse(connection, 'unknown-peer', `no peer ${message.to} in room ${connection.room.name}`);
        return this.#relay(target, connection.peer, message.data);
      }
      case 'ice':
        if (connection.peer === null) return this.#refuse(connection, 'not-joined', 'join a room before asking for ICE servers');
        return this.#reply(connection, { type: 'ice', ...this.#iceFor(connection.peer) });
      case 'leave':
        if (connection.room === null) return;
        this.#leave(connection);
        connection.challenge = randomBytes(CHALLENGE_BYTES);
        this.#reply(connection, { type: 'challenge', nonce: toBase64(connection.challenge) });
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
    let remote: RemoteMember[] = [];
    if (this.#bus !== undefined) {
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
    }
    room = this.#rooms.get(roomName); // the stale socket may have been its last member
    if (room === undefined) {
      room = { name: roomName, members: new Map(), presence: new RoomPresence(), timer: null };
      for (const member of remote) if (member.role !== 'watcher') room.presence.announced.set(member.peer, member);
      this.#rooms.set(roomName, room);
    }
    room.members.set(peer, connection);
    connection.room = room;
    connection.peer = peer;
    connection.role = role;
    connection.session = role === 'watcher' ? null : { token: join.token };
    connection.challenge = new Uint8Array(0); // used up: a leave hands out a fresh one
    if (connection.joinTimer !== null) clearTimeout(connection.joinTimer);
    connection.joinTimer = null;
    if (role !== 'watcher') this.#announce(room, peer);
    this.#welcome(connection, room);
  }

  /**
   * Sends a newcomer `joined` with the first page of the room as it is now; the rest of a
   * long room, and how the room differs from what was announced, wait in its backlog.
   */
  #welcome(connection: Connection, room: Room): void {
    const { peer, role } = connection;
    const sessionOf = (member: string): Session | undefined => this.#sessionOf(room, member);
    const roster = room.presence.roster(sessionOf).filter(([member]) => member !== peer);
    const first = roster.slice(0, PRESENCE_PAGE_PEERS);
    const backlog = new PresenceBacklog();
    for (const [member, session] of first) if (room.presence.announced.get(member) !== session) backlog.set(member, session);
    for (const [member] of roster.slice(first.length)) backlog.set(member, null);
    for (const member of room.presence.announced.keys()) if (member !== peer && sessionOf(member) === undefined) backlog.set(member, null);
    connection.unsent = backlog.empty ? null : backlog;
    const peers = first.map(([member]) => member);
    this.#reply(connection, { type: 'joined', room: room.name, peer: peer!, role: role!, peers, ...this.#iceFor(peer!), ...tokensOf(first) });
    this.#flush(connection);
  }

  /** A signal for a member of another process goes through the bus; false when none holds it. */
  #relayedByBus(room: string, from: string, to: string, data: unknown): boolean {
    const role = this.#bus?.remote(room, to)?.role;
    return role !== undefined && role !== 'watcher' && this.#bus!.relay(room, from, to, data);
  }

  /**
   * What the bus tells this process about members held by the others. A message of the
   * bus whose handling fails is counted as a fault and dropped: no socket sent it.
   */
  #busHandlers(): RoomBusHandlers {
    const contained = <A extends unknown[]>(handle: (...args: A) => void) => (...args: A): void => {
      try {
        handle(...args);
      } catch (error) {
        this.#counters.faults++;
        this.#onFault?.(error);
      }
    };
    return {
      presence: contained((roomName: string, peer: string) => {
        const room = this.#rooms.get(roomName);
        if (room !== undefined) this.#announce(room, peer);
      }),
      signal: contained((roomName: string, from: string, to: string, data: unknown) => {
        const target = this.#rooms.get(roomName)?.members.get(to);
        if (target !== undefined && target.role !== 'watcher') this.#relay(target, from, data);
      }),
      replaced: contained((roomName: string, peer: string) => {
        const stale = this.#rooms.get(roomName)?.members.get(peer);
        if (stale !== undefined) this.#shut(stale, CLOSE_CODES.replaced, `${peer} joined room ${roomName} again on another signalling process`);
      }),
    };
  }

  /** The stay of `peer` as a data member of `room`, here or on another process; undefined when it is none. */
  #sessionOf(room: Room, peer: string): Session | undefined {
    const local = room.members.get(peer);
    if (local !== undefined) return local.session ?? undefined;
    const remote = this.#bus?.remote(room.name, peer);
    return remote === undefined || remote.role === 'watcher' ? undefined : remote;
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
    connection.session = null;
    connection.unsent = null;
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
    if (role !== 'watcher') this.#announce(room, peer);
  }

  /** Records that `peer` joined or left; the room hears it with the others of its interval. */
  #announce(room: Room, peer: string): void {
    room.presence.changed(peer);
    if (room.timer !== null) return;
    room.timer = setTimeout(() => {
      room.timer = null;
      this.#tellRoom(room);
    }, this.#limits.presenceIntervalMs);
  }

  /** Tells every member what changed since the last time, in pages encoded once for all. */
  #tellRoom(room: Room): void {
    const changes = room.presence.take((peer) => this.#sessionOf(room, peer));
    const pages: Array<{ changes: PresenceChange[]; frame: Buffer }> = [];
    for (let i = 0; i < changes.length; i += PRESENCE_PAGE_PEERS) {
      const page = changes.slice(i, i + PRESENCE_PAGE_PEERS);
      pages.push({ changes: page, frame: Buffer.from(presenceText(page)) });
    }
    for (const member of [...room.members.values()]) {
      try {
        for (const page of pages) this.#tell(member, page.changes, page.frame);
        this.#flush(member); // what waited for this announcement
      } catch (error) {
        this.#fault(member, error);
      }
    }
  }

  /** A member up to date with room to spare gets a page now; another keeps it in its backlog. */
  #tell(member: Connection, changes: PresenceChange[], frame: Buffer): void {
    if (member.unsent === null && member.socket.bufferedAmount < this.#flushBelow) return this.#write(member, frame);
    (member.unsent ??= new PresenceBacklog()).add(changes);
  }

  /** Presence is written while less than this waits for the socket: a quarter of `maxBufferedBytes`. */
  get #flushBelow(): number {
    return this.#limits.maxBufferedBytes / 4;
  }

  /**
   * Tells a member pages of its backlog while it reads; called again as each write
   * completes. A peer that changed since the last announcement waits for the next.
   */
  #flush(connection: Connection): void {
    const { room, unsent } = connection;
    if (room === null || unsent === null) return;
    const wait = (peer: string): boolean => room.presence.isPending(peer);
    while (!unsent.empty && this.#writable(connection) && connection.socket.bufferedAmount < this.#flushBelow) {
      const page = unsent.takePage(PRESENCE_PAGE_PEERS, room.presence.announced, wait);
      if (page.length === 0) break; // all of it waits
      this.#write(connection, presenceText(page));
    }
    if (unsent.empty) connection.unsent = null;
  }

  /**
   * Relays a signal unless `maxBufferedBytes` waits for its addressee already: then it is
   * dropped, and the addressee keeps its place. An addressee that does not know the
   * sender's stay in the room yet hears of it first, so no signal overtakes its sender's
   * presence.
   */
  #relay(target: Connection, from: string, data: unknown): void {
    const room = target.room;
    if (!this.#writable(target) || room === null) return;
    const signal = JSON.stringify({ type: 'signal', from, data } satisfies ServerMessage);
    const known = target.unsent?.knownOf(from);
    const knows = known === undefined ? room.presence.announced.get(from) : known ?? undefined;
    const now = this.#sessionOf(room, from);
    const news = now !== undefined && knows !== now ? presenceText([{ peer: from, was: knows, now }]) : '';
    if (target.socket.bufferedAmount + Buffer.byteLength(signal) + Buffer.byteLength(news) > this.#limits.maxBufferedBytes) {
      this.#counters.droppedSignals++;
      return;
    }
    if (news !== '') {
      (target.unsent ??= new PresenceBacklog()).set(from, now!);
      this.#write(target, news);
    }
    this.#write(target, signal);
  }

  #refuse(connection: Connection, code: SignalErrorCode, message: string): void {
    this.#reply(connection, { type: 'error', code, message });
  }

  /** Answers the socket's own message; past `maxBufferedBytes` and its reserve waiting, it reads too slowly and is closed. */
  #reply(connection: Connection, message: ServerMessage): void {
    if (!this.#writable(connection)) return;
    const text = JSON.stringify(message);
    const most = this.#limits.maxBufferedBytes + REPLY_RESERVE_BYTES;
    if (connection.socket.bufferedAmount + Buffer.byteLength(text) > most) {
      this.#counters.slowReaders++;
      return this.#shut(connection, CLOSE_CODES.slowReader, `read its replies too slowly: over ${most} bytes waited for it`);
    }
    this.#write(connection, text);
  }

  #writable(connection: Connection): boolean {
    return !connection.closing && connection.socket.readyState === connection.socket.OPEN;
  }

  #write(connection: Connection, data: string | Buffer): void {
    connection.socket.send(data, { binary: false }, connection.written);
  }

  /** Handling a message of `connection` failed: that socket goes, the server stays. */
  #fault(connection: Connection, error: unknown): void {
    this.#counters.faults++;
    this.#onFault?.(error);
    this.#shut(connection, CLOSE_CODES.fault, 'the server failed handling a message of this socket');
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

/** A presence message telling `changes`, with the join token of each session that joined. */
function presenceText(changes: readonly PresenceChange[]): string {
  const left = changes.filter((change) => change.was !== undefined).map((change) => change.peer);
  const joined = changes.flatMap((change): Array<[string, Session]> => (change.now === undefined ? [] : [[change.peer, change.now]]));
  return JSON.stringify({ type: 'presence', left, joined: joined.map(([peer]) => peer), ...tokensOf(joined) } satisfies ServerMessage);
}

/** The join tokens of `members`' sessions (none: no field at all). */
function tokensOf(members: ReadonlyArray<[string, Session]>): { tokens?: Record<string, string> } {
  const tokens: Record<string, string> = Object.create(null) as Record<string, string>;
  let any = false;
  for (const [peer, session] of members) {
    if (session.token !== undefined) (tokens[peer] = session.token), (any = true);
  }
  return any ? { tokens } : {};
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
