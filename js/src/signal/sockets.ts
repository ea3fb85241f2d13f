/**
 * The TCP connections a signalling server holds, all together and per remote address,
 * counted from the moment it takes them until they close: on a server of its own from
 * the TCP accept (a connection that never finishes its WebSocket upgrade counts, and is
 * cut when its time is up), on an attached one from the upgrade.
 */
import type { Socket } from 'node:net';

interface Held {
  /** The TCP socket (under a TLS one, the same remote end). */
  readonly socket: Socket;
  /** The address it counts against, once known (null: in the total only). */
  address: string | null;
  /** Cuts it if it has not upgraded in time; null once it has. */
  timer: ReturnType<typeof setTimeout> | null;
}

/** A connection's key: a TLS socket and the TCP socket under it share their remote end. */
function keyOf(socket: Socket): string | null {
  return socket.remoteAddress === undefined ? null : `${socket.remoteAddress}|${socket.remotePort}`;
}

export class SocketLedger {
  readonly #held = new Map<string, Held>();
  readonly #perAddress = new Map<string, number>();
  #pending = 0;

  /** Connections held. */
  get size(): number {
    return this.#held.size;
  }

  /** Remote addresses holding at least one. */
  get addresses(): number {
    return this.#perAddress.size;
  }

  /** Connections held that have not upgraded yet. */
  get pending(): number {
    return this.#pending;
  }

  /** How many `address` holds. */
  countOf(address: string): number {
    return this.#perAddress.get(address) ?? 0;
  }

  /**
   * Counts `socket` until it closes, against `address` if given. With `upgradeMs`, it is
   * destroyed (and `onTimeout` called) unless {@link upgraded} is called for it in time.
   * False when it has no remote end (already gone): then nothing is counted.
   */
  hold(socket: Socket, address: string | null, upgradeMs?: number, onTimeout?: () => void): boolean {
    const key = keyOf(socket);
    if (key === null) return false;
    // a closed connection whose port came back before its close was seen is let go now
    const stale = this.#held.get(key);
    if (stale !== undefined) this.#release(key, stale);
    const held: Held = { socket, address: null, timer: null };
    this.#held.set(key, held);
    if (address !== null) this.#count(held, address);
    if (upgradeMs !== undefined) {
      this.#pending++;
      held.timer = setTimeout(() => {
        this.#stopTimer(held);
        onTimeout?.();
        socket.destroy();
      }, upgradeMs);
      held.timer.unref?.();
    }
    socket.once('close', () => this.#release(key, held));
    return true;
  }

  /** Whether `socket` (or the TCP socket under it) is held already, taken at its accept. */
  holds(socket: Socket): boolean {
    return this.#find(socket) !== undefined;
  }

  /** `socket` upgraded: its timer stops; it counts against `address` too if it did not yet. */
  upgraded(socket: Socket, address: string): void {
    const held = this.#find(socket);
    if (held === undefined) return;
    this.#stopTimer(held);
    if (held.address === null) this.#count(held, address);
  }

  #find(socket: Socket): Held | undefined {
    const key = keyOf(socket);
    const held = key === null ? undefined : this.#held.get(key);
    return held === undefined || held.socket.destroyed ? undefined : held;
  }

  #count(held: Held, address: string): void {
    held.address = address;
    this.#perAddress.set(address, this.countOf(address) + 1);
  }

  /** Lets a connection go (once, whichever of its close or its replacement comes first). */
  #release(key: string, held: Held): void {
    if (this.#held.get(key) !== held) return;
    this.#held.delete(key);
    this.#stopTimer(held);
    if (held.address === null) return;
    const left = this.countOf(held.address) - 1;
    if (left > 0) this.#perAddress.set(held.address, left);
    else this.#perAddress.delete(held.address);
  }

  #stopTimer(held: Held): void {
    if (held.timer === null) return;
    clearTimeout(held.timer);
    held.timer = null;
    this.#pending--;
  }
}
