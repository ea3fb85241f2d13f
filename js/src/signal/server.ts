/**
 * The WebSocket signalling server (Node only: it imports `ws`). It relays offer, answer and
 * candidate payloads between the members of a room, and stays up under abuse: every socket,
 * room and byte it holds for someone has a cap (see {@link SIGNAL_SERVER_DEFAULTS}), and all
 * of them together one more (`maxHeldBytes`, budget.ts); every message is measured before
 * it is parsed, and a message whose handling fails closes only its own socket.
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
import { Holding, MemoryBudget, SIGNAL_FLOOR, SIGNAL_SHARE } from './budget.js';
import type { RemoteMember, RoomBus, RoomBusHandlers } from './bus.js';
import { FrameMeter } from './frames.js';
import { Inbox } from './inbox.js';
import { PresenceBacklog, RoomPresence, type PresenceChange, type Session } from './presence.js';
import { SocketLedger } from './sockets.js';
import { DEFAULT_TURN_TTL_SECONDS, turnCredentials, type TurnOptions } from './turn.js';
import {
  CHALLENGE_BYTES, CLOSE_CODES, MAX_ROOM_OPERATORS, joinSignedBytes, parseClientMessage, type ClientMessage, type PeerRole, type ServerMessage,
  type SignalErrorCode,
} from './protocol.js';
import type { IceServer } from '../engine/platform.js';

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
  /**
   * Sustained bytes per second read from all sockets together, with bursts up to
   * `totalByteBurst`. Past it, a socket that sent something is not read from, and its
   * messages wait, until the others had their turn: the sockets with the least waiting
   * go first, so a join or a signal is not stuck behind floods.
   */
  totalBytesPerSecond?: number;
  totalByteBurst?: number;
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
   * Bytes that may wait for one member: signals relayed to it and what waits to be
   * written to its socket (in `ws` and Node, before the kernel takes it). Its senders share
   * it: signals wait per sender and go out in turn, and when it is full a signal displaces
   * the newest of the sender holding the most, or is dropped if that is its own sender — a
   * member that reads slowly loses signals, not its place, and a flood at it loses its own
   * signals, not another sender's. Presence waits for it to read, kept as at most one
   * entry per peer. Its own replies may pass it by {@link REPLY_RESERVE_BYTES}; past that,
   * it asks for more than it reads and is closed with 4002.
   */
  maxBufferedBytes?: number;
  /**
   * Bytes held for all sockets together (budget.ts): what waits to be written, signals
   * waiting for members, presence backlogs, input read and not yet handled, signals on
   * their way to other processes. Relayed signals may fill half of it (each member still
   * gets 16 KiB); past three quarters presence waits and the messages of sockets holding
   * more than their share of it (their unread replies and unhandled input) wait their
   * turn; past all of it, the socket holding the most unfinished input is cut.
   */
  maxHeldBytes?: number;
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
  totalBytesPerSecond: 8 * 1024 * 1024,
  totalByteBurst: 2 * 1024 * 1024,
  heartbeatMs: 15_000,
  maxConnections: 1_024,
  maxConnectionsPerAddress: 64,
  upgradeTimeoutMs: 10_000,
  maxRooms: 1_000,
  maxRoomSize: 512,
  joinTimeoutMs: 10_000,
  maxBufferedBytes: 256 * 1024,
  maxHeldBytes: 8 * 1024 * 1024,
  closeGraceMs: 5_000,
  presenceIntervalMs: 100,
} as const;

type Limits = { -readonly [K in keyof typeof SIGNAL_SERVER_DEFAULTS]: number };

/** Peers in one `joined` or `presence` message: a long roster goes out in pages, as the member reads. */
export const PRESENCE_PAGE_PEERS = 64;

/** What a socket's own replies may add past `maxBufferedBytes` (a full socket still hears its answers). */
export const REPLY_RESERVE_BYTES = 64 * 1024;

/** Input a socket may hold unfinished before it may be cut for it when the budget is spent (an honest one holds far less). */
export const EVICTION_FLOOR_BYTES = 16 * 1024;

/** The most Node reads from a socket at once: what a socket given its turn may cost before it is paused again. */
const READ_CHUNK_BYTES = 64 * 1024;

/** What a message waiting its turn costs beside the buffer it keeps (the array slot and its view). */
const WAITING_MESSAGE_BYTES = 64;

/** How often sockets that are not read from are looked at (what they hold, whether they may go on). */
const SWEEP_MS = 100;

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
  /** Signals dropped: their addressee's queue was full and their sender held the most of it, or the budget's share for signals was spent. */
  droppedSignals: number;
  /** Bytes held for all sockets now, against `maxHeldBytes`. */
  heldBytes: number;
  /** Sockets whose messages wait their turn now (the budget is tight and they hold more than their share). */
  waitingSockets: number;
  /** Sockets cut because they held the most unfinished input when the budget was spent. */
  evictions: number;
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
  /** The TCP (or TLS) socket under it: what is read while it is paused waits there. */
  readonly tcp: Socket;
  /** Its part of the budget: what waits to be written to it, its own replies apart. */
  readonly outgoing: Holding;
  /** Its replies not yet written out: with its input, what it holds by its own doing. */
  readonly replies: Holding;
  /** Input read and not handled yet: an unfinished message, messages waiting their turn, bytes read while paused. */
  readonly input: Holding;
  readonly frames: FrameMeter;
  /** Messages taken while it held more than its share of a tight budget (or was paused), handled in order as it may go on. */
  readonly waiting: Array<{ data: Buffer; binary: boolean; bytes: number }>;
  /** What they cost: their bytes, and {@link WAITING_MESSAGE_BYTES} each. */
  waitingBytes: number;
  /** Signals relayed to it, waiting for their turn; null unless it is a data peer in a room. */
  inbox: Inbox | null;
  /** Not read from while its byte budget is in debt. */
  throttled: boolean;
  /** Not read from until its turn at the bytes all sockets may read together comes. */
  starved: boolean;
  /** Not read from while as much as a message waits its turn. */
  full: boolean;
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
  readonly #counters = { refusedConnections: 0, upgradeTimeouts: 0, slowReaders: 0, droppedSignals: 0, joinTimeouts: 0, faults: 0, evictions: 0 };
  readonly #budget: MemoryBudget;
  /** Signals handed to the bus and not yet sent on. */
  readonly #busHolding: Holding;
  /** Connections whose messages wait their turn, in the order they began to wait. */
  readonly #waitingTurn = new Set<Connection>();
  /** Connections whose presence waits for the budget, not for their socket. */
  readonly #waitingPresence = new Set<Connection>();
  /** Connections not read from (throttled or full): what they read meanwhile is measured each sweep. */
  readonly #paused = new Set<Connection>();
  /** Connections holding at least {@link EVICTION_FLOOR_BYTES} of input: the ones that may be cut for it. */
  readonly #inputHolders = new Set<Connection>();
  /** The bytes all sockets may read together. */
  readonly #reads: TokenBucket;
  /** Connections waiting for their turn at it. */
  readonly #starved = new Set<Connection>();
  #turnTimer: ReturnType<typeof setTimeout> | null = null;
  #sweep: ReturnType<typeof setInterval> | null = null;
  #wakeScheduled = false;
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
    this.#budget = new MemoryBudget(this.#limits.maxHeldBytes, () => this.#released());
    this.#busHolding = new Holding(this.#budget);
    this.#reads = new TokenBucket(this.#limits.totalBytesPerSecond, this.#limits.totalByteBurst, Date.now());
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
      rooms: this.#rooms.size, members, ...this.#counters, heldBytes: this.#budget.held, waitingSockets: this.#waitingTurn.size,
    };
  }

  /** Closes every socket and stops taking new ones; a server of its own stops listening. */
  close(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#closed = true;
    clearInterval(this.#heartbeat);
    if (this.#sweep !== null) clearInterval(this.#sweep);
    if (this.#turnTimer !== null) clearTimeout(this.#turnTimer);
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
    this.#wss.handleUpgrade(request, socket, head, (ws) => this.#accept(ws, socket));
  }

  #accept(socket: WebSocket, tcp: Socket): void {
    const now = Date.now();
    const connection: Connection = {
      socket, room: null, peer: null, role: null, session: null, unsent: null, challenge: randomBytes(CHALLENGE_BYTES), joining: false, alive: true,
      messages: new TokenBucket(this.#limits.ratePerSecond, this.#limits.rateBurst, now),
      bytes: new TokenBucket(this.#limits.bytesPerSecond, this.#limits.byteBurst, now),
      resumeTimer: null, limitedNoticeAt: 0, joinTimer: null, closing: false,
      tcp, outgoing: new Holding(this.#budget), replies: new Holding(this.#budget), input: new Holding(this.#budget), frames: new FrameMeter(),
      waiting: [], waitingBytes: 0, inbox: null, throttled: false, starved: false, full: false,
    };
    this.#connections.add(connection);
    this.#awaitJoin(connection);
    socket.on('pong', () => (connection.alive = true));
    socket.on('message', (data, isBinary) => {
      try {
        this.#take(connection, toBuffer(data), isBinary);
      } catch (error) {
        this.#fault(connection, error);
      }
    });
    // after ws's own listener: the messages of each chunk are taken by then, what is left is unfinished
    tcp.on('data', (chunk: Buffer) => {
      connection.frames.read(chunk);
      this.#measureInput(connection);
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
    connection.waiting.length = 0;
    connection.waitingBytes = 0;
    for (const set of [this.#waitingTurn, this.#waitingPresence, this.#paused, this.#inputHolders, this.#starved]) set.delete(connection);
    for (const holding of [connection.outgoing, connection.replies, connection.input]) holding.close();
  }

  /**
   * A message read from `connection`: handled now, or — while the budget is tight and it
   * holds more than its share, or messages of its wait already — queued behind them. As
   * much as one message waiting stops its reading.
   */
  #take(connection: Connection, data: Buffer, binary: boolean): void {
    if (connection.closing) return;
    this.#throttle(connection, data.length);
    this.#share(connection, data.length);
    if (connection.waiting.length === 0 && !connection.throttled && !connection.starved && !this.#mustWait(connection)) {
      return this.#receive(connection, binary ? null : data.toString());
    }
    // kept as read: a view keeps the whole buffer it came in, which costs that much (once,
    // for the messages that came in it one after another)
    const shared = connection.waiting.at(-1)?.data.buffer === data.buffer;
    const bytes = (shared ? data.length : Math.max(data.length, data.buffer.byteLength)) + WAITING_MESSAGE_BYTES;
    connection.waiting.push({ data, binary, bytes });
    connection.waitingBytes += bytes;
    this.#waitingTurn.add(connection);
    if (!connection.full && connection.waitingBytes >= this.#limits.maxMessageBytes) {
      connection.full = true;
      this.#reading(connection);
    }
    this.#measureInput(connection);
  }

  /**
   * Whether the budget is tight and `connection` holds more than its share of it by its
   * own doing: replies it has not read, input it has not finished (its messages waiting
   * their turn apart, which it cannot hurry).
   */
  #mustWait(connection: Connection): boolean {
    if (!this.#budget.tight) return false;
    return connection.replies.bytes + connection.input.bytes - connection.waitingBytes > this.#fairShare;
  }

  /** What each socket may hold when all share the budget. */
  get #fairShare(): number {
    return this.#budget.fairShare(this.#connections.size);
  }

  /** Handles the messages of `connection` that waited, in order, while it may go on. */
  #handleWaiting(connection: Connection): void {
    while (connection.waiting.length > 0 && !connection.closing && !connection.throttled && !connection.starved && !this.#mustWait(connection)) {
      const { data, binary, bytes } = connection.waiting.shift()!;
      connection.waitingBytes -= bytes;
      try {
        this.#receive(connection, binary ? null : data.toString());
      } catch (error) {
        this.#fault(connection, error);
      }
    }
    if (connection.closing) return;
    if (connection.waiting.length === 0) {
      this.#waitingTurn.delete(connection);
      connection.waitingBytes = 0;
    }
    connection.full = connection.waitingBytes >= this.#limits.maxMessageBytes;
    this.#reading(connection);
    this.#measureInput(connection);
  }

  /** Pauses or resumes reading `connection` as its byte budget and its waiting messages say. */
  #reading(connection: Connection): void {
    if (connection.closing) return;
    const pause = connection.throttled || connection.starved || connection.full;
    if (pause === this.#paused.has(connection)) return;
    if (pause) {
      connection.socket.pause();
      this.#paused.add(connection);
      this.#sweep ??= setInterval(() => this.#sweepPaused(), SWEEP_MS);
      this.#sweep.unref?.();
    } else {
      this.#paused.delete(connection);
      connection.socket.resume();
      if (this.#paused.size === 0 && this.#sweep !== null) {
        clearInterval(this.#sweep);
        this.#sweep = null;
      }
    }
  }

  /**
   * What `connection` holds of its input: its unfinished message, its messages waiting,
   * what was read while it was paused. Past the budget, the input most held goes.
   */
  #measureInput(connection: Connection): void {
    connection.input.set(connection.frames.held + connection.waitingBytes + connection.tcp.readableLength);
    if (connection.input.bytes >= EVICTION_FLOOR_BYTES) this.#inputHolders.add(connection);
    else this.#inputHolders.delete(connection);
    if (!this.#budget.admits(0)) this.#evict();
  }

  /**
   * The budget is spent: the sockets holding the most unhandled input (at least
   * {@link EVICTION_FLOOR_BYTES}: more than an honest client's message) are cut until it is
   * not. Their input goes with them, and what waited for them to read.
   */
  #evict(): void {
    while (!this.#budget.admits(0)) if (!this.#evictHeaviest()) return;
  }

  /** Cuts the socket holding the most unhandled input (at least EVICTION_FLOOR_BYTES); false when none does. */
  #evictHeaviest(): boolean {
    let next: Connection | undefined;
    for (const connection of this.#inputHolders) if (connection.input.bytes > (next?.input.bytes ?? 0)) next = connection;
    if (next === undefined) return false;
    this.#counters.evictions++;
    next.closing = true;
    next.socket.terminate();
    this.#forget(next);
    return true;
  }

  /**
   * Every sweep: what paused sockets read meanwhile is measured, and those whose turn came
   * go on. A tight budget that no waiting socket may go on under is held by those messages
   * themselves (they count until handled): then the socket holding the most unhandled input
   * is cut, one a sweep, as past the budget.
   */
  #sweepPaused(): void {
    for (const connection of this.#paused) this.#measureInput(connection);
    this.#wake();
    if (!this.#budget.tight || this.#waitingTurn.size === 0) return;
    for (const connection of this.#waitingTurn) if (!this.#mustWait(connection)) return;
    this.#evictHeaviest();
  }

  /** Bytes were given back: what waits for the budget may go, soon (not inside whatever gave them back). */
  #released(): void {
    if (this.#wakeScheduled || this.#budget.tight || (this.#waitingTurn.size === 0 && this.#waitingPresence.size === 0)) return;
    this.#wakeScheduled = true;
    setImmediate(() => {
      this.#wakeScheduled = false;
      this.#wake();
    });
  }

  /** Lets go on, in the order they began to wait, the messages and the presence that may now. */
  #wake(): void {
    for (const connection of this.#waitingTurn) if (!this.#mustWait(connection)) this.#handleWaiting(connection);
    for (const connection of this.#waitingPresence) {
      if (!this.#mayTell(connection)) continue;
      this.#waitingPresence.delete(connection);
      this.#pump(connection);
    }
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
    connection.inbox = role === 'watcher' ? null : new Inbox(new Holding(this.#budget));
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
    const backlog = new PresenceBacklog(new Holding(this.#budget));
    for (const [member, session] of first) if (room.presence.announced.get(member) !== session) backlog.set(member, session);
    for (const [member] of roster.slice(first.length)) backlog.set(member, null);
    for (const member of room.presence.announced.keys()) if (member !== peer && sessionOf(member) === undefined) backlog.set(member, null);
    if (backlog.empty) backlog.release();
    connection.unsent = backlog.empty ? null : backlog;
    const peers = first.map(([member]) => member);
    this.#reply(connection, { type: 'joined', room: room.name, peer: peer!, role: role!, peers, ...this.#iceFor(peer!), ...tokensOf(first), ...this.#operatorsOf(room.name) });
    this.#pump(connection);
  }

  /** The keys whose join tokens admit to `room`, as `joined` tells them (none: it takes no tokens). */
  #operatorsOf(room: string): { operators?: string[] } {
    const keys = (policyOf(this.#policies, room)?.operators ?? []).slice(0, MAX_ROOM_OPERATORS);
    return keys.length === 0 ? {} : { operators: keys.map((key) => toBase64(key)) };
  }

  /**
   * A signal for a member of another process goes through the bus, counted against the
   * budget until it has left this process, and dropped past the signals' share of it;
   * false when no other process holds that member.
   */
  #relayedByBus(room: string, from: string, to: string, data: unknown): boolean {
    const role = this.#bus?.remote(room, to)?.role;
    if (role === undefined || role === 'watcher') return false;
    // what the bus publishes: the signal with its room and addressee, as JSON
    const bytes = Buffer.byteLength(JSON.stringify(data) ?? '') + room.length + from.length + to.length + 64;
    if (!this.#budget.admits(bytes, SIGNAL_SHARE)) {
      this.#counters.droppedSignals++;
      return true;
    }
    const sent = this.#bus!.relay(room, from, to, data);
    if (sent === undefined) return false;
    this.#busHolding.add(bytes);
    const done = (): void => this.#busHolding.remove(bytes);
    sent.then(done, done);
    return true;
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
    connection.unsent?.release();
    connection.unsent = null;
    connection.inbox?.clear();
    connection.inbox = null;
    this.#waitingPresence.delete(connection);
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
        this.#pump(member); // what waited for this announcement
      } catch (error) {
        this.#fault(member, error);
      }
    }
  }

  /** A member up to date with room to spare (its own and the budget's) gets a page now; another keeps it in its backlog. */
  #tell(member: Connection, changes: PresenceChange[], frame: Buffer): void {
    if (member.unsent === null && member.outgoing.bytes < this.#flushBelow && this.#mayTell(member)) return this.#write(member, frame);
    (member.unsent ??= new PresenceBacklog(new Holding(this.#budget))).add(changes);
  }

  /** Presence goes to a member while the budget is not tight, or while it has less than half its share waiting. */
  #mayTell(member: Connection): boolean {
    return !this.#budget.tight || member.outgoing.bytes < this.#fairShare / 2;
  }

  /** What waits is written while less than this waits for the socket: a quarter of `maxBufferedBytes`. */
  get #flushBelow(): number {
    return this.#limits.maxBufferedBytes / 4;
  }

  /**
   * Writes what waits for a member while it reads: pages of its presence backlog first,
   * then the signals relayed to it, one sender after another. Called again as each write
   * completes. A peer that changed since the last announcement waits for the next; while
   * the budget is tight presence waits for it.
   */
  #pump(connection: Connection): void {
    const { room } = connection;
    if (room === null) return;
    while (this.#writable(connection) && connection.outgoing.bytes < this.#flushBelow) {
      if (!this.#pumpPresence(connection, room) && !this.#pumpSignal(connection, room)) break;
    }
  }

  /** Writes a page of the member's presence backlog; false when none may go now. */
  #pumpPresence(connection: Connection, room: Room): boolean {
    const unsent = connection.unsent;
    if (unsent === null) return false;
    if (!this.#mayTell(connection)) {
      this.#waitingPresence.add(connection);
      return false;
    }
    const page = unsent.takePage(PRESENCE_PAGE_PEERS, room.presence.announced, (peer) => room.presence.isPending(peer));
    if (unsent.empty) {
      unsent.release();
      connection.unsent = null;
    }
    if (page.length === 0) return false; // all of it waits for the next announcement
    this.#write(connection, presenceText(page));
    return true;
  }

  /**
   * Writes the next signal relayed to the member. One of a sender's stay that has ended
   * is dropped; a member that does not know its sender's stay in the room yet hears of it
   * first, so no signal overtakes its sender's presence. False when none waits.
   */
  #pumpSignal(connection: Connection, room: Room): boolean {
    const next = connection.inbox?.take();
    if (next === undefined) return false;
    const { sender, signal } = next;
    const now = this.#sessionOf(room, sender);
    if (signal.session !== undefined && now !== signal.session) {
      this.#counters.droppedSignals++;
      return true;
    }
    const known = connection.unsent?.knownOf(sender);
    const knows = known === undefined ? room.presence.announced.get(sender) : known ?? undefined;
    if (now !== undefined && knows !== now) {
      (connection.unsent ??= new PresenceBacklog(new Holding(this.#budget))).set(sender, now);
      this.#write(connection, presenceText([{ peer: sender, was: knows, now }]));
    }
    this.#write(connection, signal.text);
    return true;
  }

  /**
   * Queues a signal for `target` behind its other senders' (inbox.ts). Its queue and
   * socket together hold at most `maxBufferedBytes`; all members' signals at most the
   * budget's share for signals, each member's first {@link SIGNAL_FLOOR} bytes apart.
   * What does not fit is dropped, and the addressee keeps its place.
   */
  #relay(target: Connection, from: string, data: unknown): void {
    const { room, inbox } = target;
    if (!this.#writable(target) || room === null || inbox === null) return;
    const text = JSON.stringify({ type: 'signal', from, data } satisfies ServerMessage);
    const bytes = Buffer.byteLength(text);
    const shared = Math.max(this.#budget.roomBelow(SIGNAL_SHARE), Math.min(SIGNAL_FLOOR - inbox.bytes, this.#budget.roomBelow(1)));
    const capacity = Math.min(this.#limits.maxBufferedBytes - target.outgoing.bytes - target.replies.bytes, inbox.bytes + Math.max(0, shared));
    this.#counters.droppedSignals += inbox.offer(from, { text, bytes, session: this.#sessionOf(room, from) }, capacity);
    this.#pump(target);
  }

  #refuse(connection: Connection, code: SignalErrorCode, message: string): void {
    this.#reply(connection, { type: 'error', code, message });
  }

  /** Answers the socket's own message; past `maxBufferedBytes` and its reserve waiting, it reads too slowly and is closed. */
  #reply(connection: Connection, message: ServerMessage): void {
    if (!this.#writable(connection)) return;
    const text = JSON.stringify(message);
    const most = this.#limits.maxBufferedBytes + REPLY_RESERVE_BYTES;
    if (connection.outgoing.bytes + connection.replies.bytes + Buffer.byteLength(text) > most) {
      this.#counters.slowReaders++;
      return this.#shut(connection, CLOSE_CODES.slowReader, `read its replies too slowly: over ${most} bytes waited for it`);
    }
    this.#write(connection, text, connection.replies);
  }

  #writable(connection: Connection): boolean {
    return !connection.closing && connection.socket.readyState === connection.socket.OPEN;
  }

  /**
   * Hands `data` to the socket, counted in `holding` until it is written out; then what
   * waits for the socket may follow, and a socket whose messages waited may go on.
   */
  #write(connection: Connection, data: string | Buffer, holding = connection.outgoing): void {
    const bytes = typeof data === 'string' ? Buffer.byteLength(data) : data.length;
    holding.add(bytes);
    connection.socket.send(data, { binary: false }, () => {
      holding.remove(bytes);
      if (!this.#connections.has(connection)) return;
      this.#pump(connection);
      if (connection.waiting.length > 0 && !this.#mustWait(connection)) this.#handleWaiting(connection);
    });
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
    if (connection.resumeTimer !== null || connection.bytes.msUntilSolvent(Date.now()) === 0) return;
    connection.throttled = true;
    this.#reading(connection);
    const wait = (): void => {
      const ms = connection.bytes.msUntilSolvent(Date.now());
      if (ms > 0) {
        connection.resumeTimer = setTimeout(wait, ms);
        return;
      }
      connection.resumeTimer = null;
      connection.throttled = false;
      this.#handleWaiting(connection);
    };
    wait();
  }

  /**
   * Charges what was read to the bytes all sockets may read together. In debt, the socket
   * is not read from and its messages wait for its turn ({@link #giveTurns}).
   */
  #share(connection: Connection, bytes: number): void {
    this.#reads.spend(bytes, Date.now(), true);
    if (connection.starved || this.#reads.msUntilSolvent(Date.now()) === 0) return;
    connection.starved = true;
    this.#starved.add(connection);
    this.#reading(connection);
    this.#turnTimer ??= setTimeout(() => this.#giveTurns(), this.#reads.msUntilSolvent(Date.now()));
  }

  /**
   * The shared bytes are back: sockets waiting for them go on, those with the least
   * waiting first (a join before a flood), as many as what they may read at once — a
   * read of up to {@link READ_CHUNK_BYTES} each — leaves within the budget.
   */
  #giveTurns(): void {
    this.#turnTimer = null;
    let level = this.#reads.level(Date.now());
    while (this.#starved.size > 0 && level > 0) {
      let next: Connection | undefined;
      for (const connection of this.#starved) if (next === undefined || connection.waitingBytes < next.waitingBytes) next = connection;
      this.#starved.delete(next!);
      next!.starved = false;
      this.#handleWaiting(next!);
      level -= READ_CHUNK_BYTES;
    }
    if (this.#starved.size === 0) return;
    const ms = Math.max(1, Math.ceil(((READ_CHUNK_BYTES - Math.max(0, level)) / this.#reads.rate) * 1000));
    this.#turnTimer = setTimeout(() => this.#giveTurns(), ms);
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

/** A message as `ws` hands it over (a Buffer, given its default binaryType), as one Buffer. */
function toBuffer(data: Buffer | ArrayBuffer | Buffer[]): Buffer {
  return Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
}

function checkedLimit(name: string, value: unknown): number {
  // a rate, burst, cap or timeout of 0 would refuse everything; a join may be free, presence immediate
  const least = name === 'joinCost' || name === 'presenceIntervalMs' ? 0 : 1;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < least) {
    throw new RangeError(`signalling server option ${name} must be a finite number ≥ ${least}, not ${String(value)}`);
  }
  return value;
}
