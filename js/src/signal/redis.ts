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
 * another process and the room goes on.
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
  node: string;
  role: PeerRole;
  token?: string;
}

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

export class RedisRoomBus implements RoomBus {
  /** This process's id on the bus. */
  readonly node = toBase64(randomBytes(9));
  readonly #cmd: RedisClient;
  readonly #sub: RedisClient;
  readonly #prefix: string;
  readonly #aliveMs: number;
  /** Members held elsewhere, of the rooms this process has members in. */
  readonly #remote = new Map<string, Map<string, Holder>>();
  /** Members held here: room → peer → its holder (this process). */
  readonly #mine = new Map<string, Map<string, Holder>>();
  #handlers: RoomBusHandlers | null = null;
  #timer: ReturnType<typeof setInterval> | null = null;
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
    if (previous !== null && previous.node !== this.node) this.#publish(this.#key('node', previous.node), { kind: 'replaced', room, peer });
    this.#publish(`${this.#prefix}presence`, { kind: 'joined', room, peer, role, node: this.node, ...(token === undefined ? {} : { token }) });
    const holders = new Map<string, Holder>();
    for (const [member, value] of Object.entries(all)) {
      const holder = parseHolder(value);
      if (holder !== null && holder.node !== this.node && member !== peer) holders.set(member, holder);
    }
    const alive = await this.#alive([...new Set([...holders.values()].map((h) => h.node))]);
    for (const [member, holder] of holders) if (alive.has(holder.node) && !remote.has(member)) remote.set(member, holder);
    return [...remote].map(([member, holder]) => ({ peer: member, role: holder.role, ...(holder.token === undefined ? {} : { token: holder.token }) }));
  }

  leave(room: string, peer: string): void {
    const mine = this.#mine.get(room);
    const held = mine?.get(peer);
    if (mine === undefined || held === undefined) return;
    mine.delete(peer);
    if (mine.size === 0) this.#mine.delete(room);
    this.#release(room, peer, held);
  }

  remoteRole(room: string, peer: string): PeerRole | undefined {
    return this.#remote.get(room)?.get(peer)?.role;
  }

  remoteToken(room: string, peer: string): string | undefined {
    return this.#remote.get(room)?.get(peer)?.token;
  }

  relay(room: string, from: string, to: string, data: unknown): boolean {
    const holder = this.#remote.get(room)?.get(to);
    if (holder === undefined) return false;
    this.#publish(this.#key('node', holder.node), { kind: 'signal', room, from, to, data });
    return true;
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

  #publish(channel: string, message: BusMessage): void {
    if (this.#closed && message.kind !== 'left') return;
    this.#cmd.publish(channel, JSON.stringify(message)).catch(() => undefined);
  }

  #release(room: string, peer: string, holder: Holder): void {
    const left: BusMessage = { kind: 'left', room, peer, node: holder.node };
    this.#cmd.eval(RELEASE, 2, this.#key('room', room), `${this.#prefix}presence`, peer, holderValue(holder), JSON.stringify(left)).catch(() => undefined);
  }

  async #beat(): Promise<void> {
    await this.#cmd.set(this.#key('alive', this.node), '1', 'PX', this.#aliveMs);
  }

  async #alive(nodes: string[]): Promise<Set<string>> {
    if (nodes.length === 0) return new Set();
    const flags = await Promise.all(nodes.map((node) => this.#cmd.exists(this.#key('alive', node))));
    return new Set(nodes.filter((_, i) => flags[i] === 1));
  }

  /** Members of followed rooms held by processes that stopped beating are released. */
  async #sweep(): Promise<void> {
    const nodes = new Set<string>();
    for (const members of this.#remote.values()) for (const holder of members.values()) nodes.add(holder.node);
    const alive = await this.#alive([...nodes]);
    for (const [room, members] of this.#remote) {
      for (const [peer, holder] of members) if (!alive.has(holder.node)) this.#release(room, peer, holder);
    }
  }

  #receive(text: string): void {
    let message: BusMessage;
    try {
      message = JSON.parse(text) as BusMessage;
    } catch {
      return;
    }
    const handlers = this.#handlers;
    if (handlers === null || typeof message !== 'object' || message === null) return;
    switch (message.kind) {
      case 'joined': {
        const remote = this.#remote.get(message.room);
        if (message.node === this.node || remote === undefined || !ROLES.has(message.role)) return;
        const token = typeof message.token === 'string' ? { token: message.token } : {};
        remote.set(message.peer, { node: message.node, role: message.role, ...token });
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
