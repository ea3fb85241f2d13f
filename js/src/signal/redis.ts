/**
 * A {@link RoomBus} over Redis (Node only; `ioredis`, an optional dependency, is imported
 * when a bus is made). Every signalling process holding a member of room R keeps it in
 * the hash `<prefix>room:R` (peer → "<process>|<role>", then "|<join token>" when it
 * joined with one) and says so on the channel
 * `<prefix>presence`; a signal for a member held elsewhere goes to the channel of the
 * process holding it, `<prefix>node:<process>`. Each process refreshes `<prefix>alive:<process>`
 * (expiring after `aliveMs`); the members of a process whose key expired — one that died
 * without leaving — are removed by the first survivor to notice, which announces them as
 * left. So a process that dies loses only its own sockets; their peers join again on
 * another process and the room goes on. A process that was only stalled (and found its
 * alive key gone when it beat again) announces its members afresh and reads the rooms it
 * follows again, as it does when its subscription reconnects: a stall or a lost
 * connection splits no room.
 */
import type { Redis as RedisClient } from 'ioredis';

import { randomBytes, toBase64 } from '../identity/bytes.js';
import type { RemoteMember, RoomBus, RoomBusHandlers } from './bus.js';
import type { PeerRole } from './protocol.js';

export interface RedisRoomBusOptions {
  /** redis://host:port (default redis://127.0.0.1:6379). */
  url?: string;
  /** Prefix of every key and channel (default `bb:signal:`): processes sharing rooms share it. */
  prefix?: string;
  /** A process not heard from for this long is taken for dead (default 3000 ms). */
  aliveMs?: number;
}

type BusMessage =
  | { kind: 'joined'; room: string; peer: string; role: PeerRole; node: string; token?: string }
  | { kind: 'left'; room: string; peer: string; node: string }
  | { kind: 'signal'; room: string; from: string; to: string; data: unknown }
  | { kind: 'replaced'; room: string; peer: string };

interface Holder {
  readonly node: string;
  readonly role: PeerRole;
  readonly token?: string;
}

/** A member held by another process; the same object for as long as its stay lasts. */
type Remote = RemoteMember & Holder;

const ROLES: ReadonlySet<string> = new Set(['client', 'server', 'watcher']);

/** A member's value in its room's hash (process ids are base64: they hold no bar). */
function holderValue(holder: Holder): string {
  return `${holder.node}|${holder.role}${holder.token === undefined ? '' : `|${holder.token}`}`;
}

function parseHolder(value: string): Holder | null {
  const bar = value.indexOf('|');
  const end = value.indexOf('|', bar + 1);
  const role = value.slice(bar + 1, end < 0 ? undefined : end);
  if (bar <= 0 || !ROLES.has(role)) return null;
  return { node: value.slice(0, bar), role: role as PeerRole, ...(end < 0 ? {} : { token: value.slice(end + 1) }) };
}

/** Deletes a member only if the process and role given still hold it, then announces it left. */
const RELEASE = `if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('PUBLISH', KEYS[2], ARGV[3])
  return 1
end
return 0`;

/** The same, only while the holding process's alive key (KEYS[3]) is gone: one that beat again keeps its members. */
const RELEASE_DEAD = `if redis.call('EXISTS', KEYS[3]) == 0 and redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('PUBLISH', KEYS[2], ARGV[3])
  return 1
end
return 0`;

export class RedisRoomBus implements RoomBus {
  /** This process's id on the bus. */
  readonly node = toBase64(randomBytes(9));
  readonly #cmd: RedisClient;
  readonly #sub: RedisClient;
  readonly #prefix: string;
  readonly #aliveMs: number;
  /** Members held elsewhere, of the rooms this process has members in. */
  readonly #remote = new Map<string, Map<string, Remote>>();
  /** Members held here: room → peer → its holder (this process). */
  readonly #mine = new Map<string, Map<string, Holder>>();
  #handlers: RoomBusHandlers | null = null;
  #timer: ReturnType<typeof setInterval> | null = null;
  /** Whether this process's alive key was set once: its absence later means the others took it for dead. */
  #beaten = false;
  #closed = false;

  private constructor(cmd: RedisClient, sub: RedisClient, options: RedisRoomBusOptions) {
    this.#cmd = cmd;
    this.#sub = sub;
    this.#prefix = options.prefix ?? 'bb:signal:';
    this.#aliveMs = options.aliveMs ?? 3000;
    if (!(this.#aliveMs >= 100)) throw new RangeError(`aliveMs must be at least 100, not ${options.aliveMs}`);
  }

  /** Connects to Redis (two connections: commands, and the subscription). */
  static async connect(options: RedisRoomBusOptions = {}): Promise<RedisRoomBus> {
    const name = 'ioredis'; // a variable specifier: only processes that scale out need it
    const { Redis } = (await import(/* @vite-ignore */ name)) as typeof import('ioredis');
    const url = options.url ?? 'redis://127.0.0.1:6379';
    const cmd = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 3 });
    const sub = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 3 });
    try {
      await Promise.all([cmd.connect(), sub.connect()]);
    } catch (error) {
      cmd.disconnect();
      sub.disconnect();
      throw new Error(`cannot reach Redis at ${url}: ${(error as Error).message}`);
    }
    return new RedisRoomBus(cmd, sub, options);
  }

  #key(kind: string, name: string): string {
    return `${this.#prefix}${kind}:${name}`;
  }

  async start(handlers: RoomBusHandlers): Promise<void> {
    this.#handlers = handlers;
    this.#sub.on('message', (_channel: string, text: string) => this.#receive(text));
    await this.#sub.subscribe(`${this.#prefix}presence`, this.#key('node', this.node));
    // a subscription that reconnects missed what was said meanwhile
    this.#sub.on('ready', () => void this.#resync().catch(() => undefined));
    await this.#beat();
    this.#timer = setInterval(() => void this.#beat().then(() => this.#sweep()).catch(() => undefined), this.#aliveMs / 3);
    this.#timer.unref?.();
  }

  async join(room: string, peer: string, role: PeerRole, token?: string): Promise<RemoteMember[]> {
    let mine = this.#mine.get(room);
    if (mine === undefined) this.#mine.set(room, (mine = new Map()));
    const held: Holder = { node: this.node, role, ...(token === undefined ? {} : { token }) };
    mine.set(peer, held);
    // followed from now, so a join elsewhere announced meanwhile is not missed
    let remote = this.#remote.get(room);
    if (remote === undefined) this.#remote.set(room, (remote = new Map()));
    const key = this.#key('room', room);
    const replies = await this.#cmd.multi().hget(key, peer).hset(key, peer, holderValue(held)).hgetall(key).exec();
    const old = replies?.[0]?.[1] as string | null | undefined;
    const all = (replies?.[2]?.[1] ?? {}) as Record<string, string>;
    const previous = old ? parseHolder(old) : null;
    if (previous !== null && previous.node !== this.node) void this.#publish(this.#key('node', previous.node), { kind: 'replaced', room, peer });
    void this.#publish(`${this.#prefix}presence`, { kind: 'joined', room, peer, role, node: this.node, ...(token === undefined ? {} : { token }) });
    for (const [member, holder] of await this.#aliveHolders(all)) if (member !== peer && !remote.has(member)) remote.set(member, { peer: member, ...holder });
    return [...remote.values()];
  }

  leave(room: string, peer: string): void {
    const mine = this.#mine.get(room);
    const held = mine?.get(peer);
    if (mine === undefined || held === undefined) return;
    mine.delete(peer);
    if (mine.size === 0) this.#mine.delete(room);
    this.#release(room, peer, held);
  }

  remote(room: string, peer: string): RemoteMember | undefined {
    return this.#remote.get(room)?.get(peer);
  }

  relay(room: string, from: string, to: string, data: unknown): Promise<void> | undefined {
    const holder = this.#remote.get(room)?.get(to);
    if (holder === undefined) return undefined;
    return this.#publish(this.#key('node', holder.node), { kind: 'signal', room, from, to, data });
  }

  forget(room: string): void {
    if (!this.#mine.has(room)) this.#remote.delete(room);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#timer !== null) clearInterval(this.#timer);
    for (const [room, members] of this.#mine) for (const [peer, held] of members) this.#release(room, peer, held);
    this.#mine.clear();
    try {
      await this.#cmd.del(this.#key('alive', this.node));
      await Promise.all([this.#cmd.quit(), this.#sub.quit()]);
    } catch {
      this.#cmd.disconnect();
      this.#sub.disconnect();
    }
  }

  /** Publishes `message`; settles once Redis took it, or gave up (a lost message is the same as a dropped one). */
  #publish(channel: string, message: BusMessage): Promise<void> {
    if (this.#closed && message.kind !== 'left') return Promise.resolve();
    return this.#cmd.publish(channel, JSON.stringify(message)).then(() => undefined, () => undefined);
  }

  #release(room: string, peer: string, holder: Holder): void {
    const left: BusMessage = { kind: 'left', room, peer, node: holder.node };
    this.#cmd.eval(RELEASE, 2, this.#key('room', room), `${this.#prefix}presence`, peer, holderValue(holder), JSON.stringify(left)).catch(() => undefined);
  }

  /**
   * Refreshes this process's alive key. Found gone, the others took this process for dead
   * (it stalled past `aliveMs`) and may have released its members: they are announced
   * again, and the rooms it follows read again.
   */
  async #beat(): Promise<void> {
    const key = this.#key('alive', this.node);
    const replies = await this.#cmd.multi().get(key).set(key, '1', 'PX', this.#aliveMs).exec();
    const takenForDead = this.#beaten && replies?.[0]?.[1] === null;
    this.#beaten = true;
    if (!takenForDead || this.#closed) return;
    for (const [room, members] of this.#mine) {
      for (const [peer, held] of members) {
        // written back unless another process holds it now (it told this one it replaced it)
        const hash = this.#key('room', room);
        const value = holderValue(held);
        if ((await this.#cmd.hsetnx(hash, peer, value)) === 0 && (await this.#cmd.hget(hash, peer)) !== value) continue;
        void this.#publish(`${this.#prefix}presence`, { kind: 'joined', room, peer, role: held.role, node: this.node, ...(held.token === undefined ? {} : { token: held.token }) });
      }
    }
    await this.#resync();
  }

  /** The holders in a room's hash that are not this process and whose process is alive. */
  async #aliveHolders(hash: Record<string, string>): Promise<Map<string, Holder>> {
    const holders = new Map<string, Holder>();
    for (const [member, value] of Object.entries(hash)) {
      const holder = parseHolder(value);
      if (holder !== null && holder.node !== this.node) holders.set(member, holder);
    }
    const nodes = [...new Set([...holders.values()].map((h) => h.node))];
    const flags = await Promise.all(nodes.map((node) => this.#cmd.exists(this.#key('alive', node))));
    const alive = new Set(nodes.filter((_, i) => flags[i] === 1));
    for (const [member, holder] of holders) if (!alive.has(holder.node)) holders.delete(member);
    return holders;
  }

  /** Reads every followed room again and tells the server who came and went unheard. */
  async #resync(): Promise<void> {
    for (const [room, remote] of this.#remote) {
      const holders = await this.#aliveHolders(await this.#cmd.hgetall(this.#key('room', room)));
      if (this.#remote.get(room) !== remote) continue; // forgotten meanwhile
      for (const [peer, member] of remote) {
        const holder = holders.get(peer);
        if (holder !== undefined && sameHolder(holder, member)) continue;
        remote.delete(peer);
        this.#handlers?.presence(room, peer, null);
      }
      for (const [peer, holder] of holders) {
        if (remote.has(peer) || this.#mine.get(room)?.has(peer)) continue;
        remote.set(peer, { peer, ...holder });
        this.#handlers?.presence(room, peer, holder.role);
      }
    }
  }

  /** Members of followed rooms held by processes that stopped beating are released. */
  async #sweep(): Promise<void> {
    const nodes = new Set<string>();
    for (const members of this.#remote.values()) for (const holder of members.values()) nodes.add(holder.node);
    const flags = await Promise.all([...nodes].map((node) => this.#cmd.exists(this.#key('alive', node))));
    const dead = new Set([...nodes].filter((_, i) => flags[i] === 0));
    for (const [room, members] of this.#remote) {
      for (const [peer, holder] of members) {
        if (!dead.has(holder.node)) continue;
        const left: BusMessage = { kind: 'left', room, peer, node: holder.node };
        const keys = [this.#key('room', room), `${this.#prefix}presence`, this.#key('alive', holder.node)];
        this.#cmd.eval(RELEASE_DEAD, 3, ...keys, peer, holderValue(holder), JSON.stringify(left)).catch(() => undefined);
      }
    }
  }

  /** A message of another process; one that is not what this bus sends is dropped. */
  #receive(text: string): void {
    const handlers = this.#handlers;
    if (handlers === null) return;
    try {
      const message = JSON.parse(text) as unknown;
      if (typeof message === 'object' && message !== null && typeof (message as BusMessage).room === 'string') this.#handle(message as BusMessage, handlers);
    } catch {
      // a message this process cannot take harms nobody else: the others go on
    }
  }

  #handle(message: BusMessage, handlers: RoomBusHandlers): void {
    switch (message.kind) {
      case 'joined': {
        const remote = this.#remote.get(message.room);
        if (message.node === this.node || remote === undefined || !ROLES.has(message.role)) return;
        const holder: Holder = { node: message.node, role: message.role, ...(typeof message.token === 'string' ? { token: message.token } : {}) };
        const known = remote.get(message.peer);
        if (known !== undefined && sameHolder(known, holder)) return; // announced again, the same stay
        remote.set(message.peer, { peer: message.peer, ...holder });
        return handlers.presence(message.room, message.peer, message.role);
      }
      case 'left': {
        const remote = this.#remote.get(message.room);
        if (message.node === this.node || remote?.get(message.peer)?.node !== message.node) return;
        remote.delete(message.peer);
        return handlers.presence(message.room, message.peer, null);
      }
      case 'signal':
        return handlers.signal(message.room, message.from, message.to, message.data);
      case 'replaced':
        return handlers.replaced(message.room, message.peer);
    }
  }
}

function sameHolder(a: Holder, b: Holder): boolean {
  return a.node === b.node && a.role === b.role && a.token === b.token;
}
