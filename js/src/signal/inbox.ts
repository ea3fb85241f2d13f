/**
 * Signals waiting for one member, queued per sender and handed out round robin: however
 * many members flood it, another sender's next signal waits behind at most one signal of
 * each of them. A full inbox makes room for a new signal by dropping the newest signal of
 * the sender holding the most, as long as that sender would still hold more than the
 * newcomer's: a flood displaces itself, never a sender that sends little.
 */
import type { Holding } from './budget.js';
import type { Session } from './presence.js';

/** A relayed signal as it will be written, and the stay of its sender it belongs to (if known). */
export interface QueuedSignal {
  readonly text: string;
  readonly bytes: number;
  readonly session: Session | undefined;
}

interface SenderQueue {
  readonly signals: QueuedSignal[];
  bytes: number;
}

export class Inbox {
  /** Senders in the order they are served next. */
  readonly #senders = new Map<string, SenderQueue>();
  readonly #holding: Holding;

  /** Counts what waits in `holding`. */
  constructor(holding: Holding) {
    this.#holding = holding;
  }

  /** Bytes waiting. */
  get bytes(): number {
    return this.#holding.bytes;
  }

  get empty(): boolean {
    return this.#senders.size === 0;
  }

  /**
   * Queues `signal` from `sender` so that at most `capacity` bytes wait, dropping the
   * newest signals of heavier senders to make room; when that cannot make room, nothing
   * is dropped but `signal`. Returns how many signals were dropped, `signal` included.
   */
  offer(sender: string, signal: QueuedSignal, capacity: number): number {
    if (signal.bytes > capacity) return 1;
    const own = this.#senders.get(sender)?.bytes ?? 0;
    const taken: Array<[SenderQueue, QueuedSignal]> = [];
    let bytes = this.bytes;
    while (bytes + signal.bytes > capacity) {
      const [heaviest, queue] = this.#heaviest();
      if (heaviest === sender || queue.bytes <= own + signal.bytes) {
        for (const [from, dropped] of taken.reverse()) {
          from.signals.push(dropped);
          from.bytes += dropped.bytes;
        }
        return 1;
      }
      const dropped = queue.signals.pop()!;
      queue.bytes -= dropped.bytes;
      bytes -= dropped.bytes;
      taken.push([queue, dropped]);
    }
    for (const [name, queue] of this.#senders) if (queue.signals.length === 0) this.#senders.delete(name);
    this.#holding.remove(this.bytes - bytes);
    let queue = this.#senders.get(sender);
    if (queue === undefined) this.#senders.set(sender, (queue = { signals: [], bytes: 0 }));
    queue.signals.push(signal);
    queue.bytes += signal.bytes;
    this.#holding.add(signal.bytes);
    return taken.length;
  }

  /** The next signal, from the sender whose turn it is; its sender goes to the back of the line. */
  take(): { sender: string; signal: QueuedSignal } | undefined {
    const next = this.#senders.entries().next();
    if (next.done === true) return undefined;
    const [sender, queue] = next.value;
    const signal = queue.signals.shift()!;
    queue.bytes -= signal.bytes;
    this.#holding.remove(signal.bytes);
    this.#senders.delete(sender);
    if (queue.signals.length > 0) this.#senders.set(sender, queue);
    return { sender, signal };
  }

  /** Drops everything (its member left). */
  clear(): void {
    this.#senders.clear();
    this.#holding.close();
  }

  /** The sender holding the most (the inbox is not empty when this is asked). */
  #heaviest(): [string, SenderQueue] {
    let heaviest: [string, SenderQueue] | undefined;
    for (const entry of this.#senders) if (heaviest === undefined || entry[1].bytes > heaviest[1].bytes) heaviest = entry;
    return heaviest!;
  }
}
