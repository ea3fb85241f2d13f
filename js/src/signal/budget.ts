/**
 * What a signalling server holds for all its sockets together, against one budget
 * (`maxHeldBytes`): bytes waiting to be written to sockets, signals queued for members,
 * presence backlogs, input read but not yet handled, and signals on their way to other
 * processes. Each socket's part is a {@link Holding}, so the server can tell who holds
 * how much: the budget is shared fairly rather than first come, first served.
 *
 * The budget has lines rather than one wall. Relayed signals — which nobody asked the
 * server for — may fill only `SIGNAL_SHARE` of it (past that each member still gets
 * `SIGNAL_FLOOR` bytes, within the whole budget); presence is written below `READ_LINE`
 * and otherwise waits in its backlog; past `READ_LINE` sockets holding more than their
 * fair share are not read from; past the whole budget, input nobody finished sending
 * is let go. Replies to a socket's own messages always go out: reading stops before they
 * can grow far.
 */

/** The fraction of the budget relayed signals may fill. */
export const SIGNAL_SHARE = 1 / 2;
/** The fraction past which presence waits in backlogs and heavy sockets are not read from. */
export const READ_LINE = 3 / 4;
/** Signal bytes any member may have queued whatever the others hold (an offer and its candidates fit). */
export const SIGNAL_FLOOR = 16 * 1024;

export class MemoryBudget {
  readonly limit: number;
  #held = 0;
  #onRelease: () => void;

  /** `onRelease` is called whenever bytes are given back (the server looks whether what waits may go). */
  constructor(limit: number, onRelease: () => void) {
    this.limit = limit;
    this.#onRelease = onRelease;
  }

  /** Bytes held now. */
  get held(): number {
    return this.#held;
  }

  /** Bytes left below `fraction` of the budget (negative: past it). */
  roomBelow(fraction: number): number {
    return this.limit * fraction - this.#held;
  }

  /** Whether holding `bytes` more stays below `fraction` of the budget. */
  admits(bytes: number, fraction = 1): boolean {
    return this.#held + bytes <= this.limit * fraction;
  }

  /** Past `READ_LINE`: heavy sockets are not read from, presence waits. */
  get tight(): boolean {
    return this.#held >= this.limit * READ_LINE;
  }

  /** The bytes each of `holders` may hold when they share the budget equally. */
  fairShare(holders: number): number {
    return this.limit / Math.max(1, holders);
  }

  charge(bytes: number): void {
    this.#held += bytes;
  }

  release(bytes: number): void {
    this.#held -= bytes;
    this.#onRelease();
  }
}

/** One socket's part of a {@link MemoryBudget}, of one kind (its writes, its input, ...). */
export class Holding {
  readonly #budget: MemoryBudget;
  #bytes = 0;
  #closed = false;

  constructor(budget: MemoryBudget) {
    this.#budget = budget;
  }

  get bytes(): number {
    return this.#bytes;
  }

  add(bytes: number): void {
    if (this.#closed || bytes === 0) return;
    this.#bytes += bytes;
    this.#budget.charge(bytes);
  }

  remove(bytes: number): void {
    if (this.#closed || bytes === 0) return;
    this.#bytes -= bytes;
    this.#budget.release(bytes);
  }

  /** Holds `bytes` from now on, whatever it held before. */
  set(bytes: number): void {
    if (bytes > this.#bytes) this.add(bytes - this.#bytes);
    else this.remove(this.#bytes - bytes);
  }

  /** Gives everything back; later changes (a write completing after its socket closed) count nothing. */
  close(): void {
    this.remove(this.#bytes);
    this.#closed = true;
  }
}
