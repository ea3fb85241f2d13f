// The client seats of the live federation. A page claims a seat with its peer id and gets
// a session token back; the same token (kept by the page across reloads) gets the same seat
// again, even while the seat still counts the old connection. A seat whose peer left the
// room is given back after a grace period, and so is one claimed but never used, so that
// visitors who go do not keep seats from those who come. Time is passed in (ms), so the
// rules are tested without waiting.

/**
 * @typedef {'free' | 'reserved' | 'connected' | 'away'} SeatState
 * @typedef {{ index: number, state: SeatState, peer?: string, session?: string, since: number }} Seat
 * @typedef {{ index: number, session: string, peer: string, replaced?: string }} Claimed
 */

export class SeatBook {
  /** @type {Seat[]} */
  #seats;
  #graceMs;
  #randomToken;

  /**
   * @param {{ seats: number, graceMs?: number, randomToken?: () => string }} options
   *   graceMs: how long a seat stays with a peer that left (or never came); default 20 s
   */
  constructor({ seats, graceMs = 20_000, randomToken = defaultToken }) {
    if (!Number.isInteger(seats) || seats < 1) throw new RangeError(`seats must be a positive integer, got ${seats}`);
    this.#seats = Array.from({ length: seats }, (_, index) => ({ index, state: 'free', since: 0 }));
    this.#graceMs = graceMs;
    this.#randomToken = randomToken;
  }

  /**
   * A seat for `peer`. The session token a page got with its seat gets that seat back (a
   * reload); it moves the seat to another peer id only while the seat's peer is not in the
   * room (a page that lost its identity). Without the token, a peer id that already holds a
   * seat gets nothing: the token is what proves the seat is the caller's.
   * @param {string} peer
   * @param {string | undefined} session
   * @param {number} now
   * @returns {Claimed | { error: string }}
   */
  claim(peer, session, now) {
    const held = session === undefined ? undefined : this.#seats.find((s) => s.state !== 'free' && s.session === session);
    if (held !== undefined) {
      if (held.peer !== peer && held.state === 'connected') return { error: 'this seat is in use by another page of yours' };
      const replaced = held.peer !== peer ? held.peer : undefined;
      held.peer = peer;
      if (held.state !== 'connected') Object.assign(held, { state: 'reserved', since: now });
      return { index: held.index, session: /** @type {string} */ (held.session), peer, ...(replaced === undefined ? {} : { replaced }) };
    }
    if (this.#seats.some((s) => s.state !== 'free' && s.peer === peer)) return { error: 'this peer already holds a seat: rejoin with the session token it came with' };
    const seat = this.#seats.find((s) => s.state === 'free');
    if (seat === undefined) return { error: `all ${this.#seats.length} client seats are taken: watch the federation, or come back when a visitor leaves` };
    Object.assign(seat, { state: 'reserved', peer, session: this.#randomToken(), since: now });
    return { index: seat.index, session: /** @type {string} */ (seat.session), peer };
  }

  /**
   * Updates the seats from the peers now in the room; returns the peer ids whose seats were
   * given back (they left, or never came, more than the grace period ago).
   * @param {ReadonlySet<string>} inRoom
   * @param {number} now
   * @returns {string[]}
   */
  present(inRoom, now) {
    const released = [];
    for (const seat of this.#seats) {
      if (seat.state === 'free') continue;
      const here = inRoom.has(/** @type {string} */ (seat.peer));
      if (here && seat.state !== 'connected') Object.assign(seat, { state: 'connected', since: now });
      else if (!here && seat.state === 'connected') Object.assign(seat, { state: 'away', since: now });
      else if (!here && now - seat.since > this.#graceMs) {
        released.push(/** @type {string} */ (seat.peer));
        this.#seats[seat.index] = { index: seat.index, state: 'free', since: now };
      }
    }
    return released;
  }

  /**
   * Gives a seat back at once: the page that claimed it (its peer id and session token)
   * will not use it. A seat whose peer is in the room is not given back this way.
   * @param {string} peer
   * @param {string} session
   * @param {number} now
   * @returns {boolean} whether a seat was freed
   */
  release(peer, session, now) {
    const seat = this.#seats.find((s) => s.state !== 'free' && s.peer === peer && s.session === session);
    if (seat === undefined || seat.state === 'connected') return false;
    this.#seats[seat.index] = { index: seat.index, state: 'free', since: now };
    return true;
  }

  /** Peer ids of the seats whose peer is in the room now. */
  connected() {
    return this.#seats.filter((s) => s.state === 'connected').map((s) => /** @type {string} */ (s.peer));
  }

  /** @param {string} peer */
  indexOf(peer) {
    return this.#seats.find((s) => s.state !== 'free' && s.peer === peer)?.index;
  }

  get size() {
    return this.#seats.length;
  }

  /** The seats without their session tokens (what status.json shows). */
  snapshot() {
    return this.#seats.map(({ index, state, peer, since }) => ({ index, state, ...(peer === undefined ? {} : { peer }), since }));
  }
}

function defaultToken() {
  const bytes = new Uint8Array(18);
  globalThis.crypto.getRandomValues(bytes);
  return Buffer.from(bytes).toString('base64url');
}
