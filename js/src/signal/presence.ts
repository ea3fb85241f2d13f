/**
 * Who is in a room as its members were told, and what each member has yet to be told.
 *
 * A room's changes are coalesced between two announcements: however often a peer joins and
 * leaves in between, the members hear at most one `left` and one `joined` for it, so
 * churn costs them one message per announcement, not one per change. A member that reads
 * slower than the room changes, or a newcomer to a long roster, is not sent more than it
 * reads: what it knows that differs from the announced room is kept as a
 * {@link PresenceBacklog} — at most one entry per peer, however much happens — and it is
 * told the difference in pages as it reads.
 */

import type { Holding } from './budget.js';

/** What one peer in a member's backlog costs (a Map entry; the peer id and session are shared). */
export const BACKLOG_ENTRY_BYTES = 64;

/**
 * One stay of a peer in a room, from its join to its leave, with the join token it joined
 * with. Compared by identity: a peer that left and came back is another session, which
 * the members must hear as a `left` and a `joined`.
 */
export interface Session {
  readonly token?: string | undefined;
}

/** How one peer changed between two announcements (never `was === now`). */
export interface PresenceChange {
  readonly peer: string;
  readonly was: Session | undefined;
  readonly now: Session | undefined;
}

/** The session of each peer present now (undefined: absent, or a watcher). */
export type SessionOf = (peer: string) => Session | undefined;

export class RoomPresence {
  /** The room as its members were last told it: the session of each data peer. */
  readonly announced = new Map<string, Session>();
  /** Peers that joined or left since. */
  readonly #pending = new Set<string>();

  /** `peer` joined or left: the next announcement tells how it stands then. */
  changed(peer: string): void {
    this.#pending.add(peer);
  }

  /** Whether `peer` changed since the last announcement. */
  isPending(peer: string): boolean {
    return this.#pending.has(peer);
  }

  /** Every peer present now, with its session: the announced ones and those that came since. */
  roster(sessionOf: SessionOf): Array<[string, Session]> {
    const present: Array<[string, Session]> = [];
    for (const peer of new Set([...this.announced.keys(), ...this.#pending])) {
      const session = sessionOf(peer);
      if (session !== undefined) present.push([peer, session]);
    }
    return present;
  }

  /** What changed since the last call, given each peer's session now; it becomes the announced room. */
  take(sessionOf: SessionOf): PresenceChange[] {
    const changes: PresenceChange[] = [];
    for (const peer of this.#pending) {
      const was = this.announced.get(peer);
      const now = sessionOf(peer);
      if (was === now) continue;
      changes.push({ peer, was, now });
      if (now === undefined) this.announced.delete(peer);
      else this.announced.set(peer, now);
    }
    this.#pending.clear();
    return changes;
  }
}

/**
 * What one member knows of the peers on which it differs from the announced room (null:
 * nothing). Telling it, peer by peer, the `left` of what it knows and the `joined` of what
 * was announced brings it to the room as announced.
 */
export class PresenceBacklog {
  readonly #known = new Map<string, Session | null>();
  readonly #holding: Holding | undefined;

  /** Counts its entries in `holding`, if given. */
  constructor(holding?: Holding) {
    this.#holding = holding;
  }

  get empty(): boolean {
    return this.#known.size === 0;
  }

  /** What it knows of `peer`, if that may differ from the announced room. */
  knownOf(peer: string): Session | null | undefined {
    return this.#known.get(peer);
  }

  /** It knows `session` of `peer` (null: nothing), whatever the room announced. */
  set(peer: string, session: Session | null): void {
    this.#known.set(peer, session);
    this.#counted();
  }

  /** The room announced `changes` without telling it: it still knows what it knew before them. */
  add(changes: readonly PresenceChange[]): void {
    for (const change of changes) {
      if (!this.#known.has(change.peer)) this.#known.set(change.peer, change.was ?? null);
      if (this.#known.get(change.peer) === (change.now ?? null)) this.#known.delete(change.peer);
    }
    this.#counted();
  }

  /**
   * Takes up to `size` peers it is to be told of: what it knows of each and what the room
   * announced. Peers for which `wait` holds are left for later; a peer it already knows
   * as announced is dropped without telling.
   */
  takePage(size: number, announced: ReadonlyMap<string, Session>, wait: (peer: string) => boolean): PresenceChange[] {
    const page: PresenceChange[] = [];
    for (const [peer, known] of this.#known) {
      if (page.length >= size) break;
      if (wait(peer)) continue;
      this.#known.delete(peer);
      const now = announced.get(peer);
      if ((known ?? undefined) !== now) page.push({ peer, was: known ?? undefined, now });
    }
    this.#counted();
    return page;
  }

  /** Drops everything (its member left): nothing is counted any more. */
  release(): void {
    this.#known.clear();
    this.#holding?.close();
  }

  #counted(): void {
    this.#holding?.set(this.#known.size * BACKLOG_ENTRY_BYTES);
  }
}
