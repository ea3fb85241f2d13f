/**
 * Puts chunks back into envelopes under memory limits that hold whatever senders announce.
 * Memory is reserved as bytes arrive, never as a header announces them: a 25-byte chunk
 * announcing 16 MiB costs 25 bytes (and a fixed overhead), not 16 MiB. What counts is what
 * is held — buffers at their allocated size, and each record at what it costs the engine
 * beyond its bytes — so no shape of chunks holds more than it is charged for. What is held
 * is bounded per peer and across all peers; past the global bound the stalest incomplete
 * message (least recently added to, whoever sent it) is dropped, and counted.
 */
import { CHUNK_HEADER_BYTES, decodeChunkHeader, expectedCount, strideOf, type ChunkHeader } from './chunking.js';
import { TransportError } from './errors.js';

/** The engine refuses envelopes above 16 MiB (bb_envelope_caps.max_total_bytes): so does the transport. */
export const ENGINE_MAX_ENVELOPE_BYTES = 16 * 1024 * 1024;
/** What an incomplete message costs beyond its bytes (its records and buffers' headers), counted against the limits. */
export const PARTIAL_OVERHEAD_BYTES = 1024;
/** What one chunk held out of order costs beyond its bytes (its entry in the index of held chunks). */
export const CHUNK_OVERHEAD_BYTES = 64;

/** Limits that bound the reassembler's memory. */
export interface ReassemblyLimits {
  /** Largest envelope accepted (default 16 MiB, the engine's own cap). */
  maxMessageBytes?: number;
  /** Messages from one peer that may be incomplete at once (default 4). */
  maxPartialsPerPeer?: number;
  /** Bytes held for one peer's incomplete messages (default 32 MiB). */
  maxPartialBytesPerPeer?: number;
  /** Bytes held for all peers' incomplete messages (default 128 MiB); past it the stalest is dropped. */
  maxPartialBytes?: number;
  /** A partial message untouched for this long is dropped by {@link Reassembler.expire} (default 30 s). */
  partialTimeoutMs?: number;
}

const EMPTY = new Uint8Array(0);

/** Payload bytes of chunk `index` of a partial message: the stride, but for the last chunk. */
function chunkLength(partial: Partial, index: number): number {
  const { count, total } = partial.header;
  return index < count - 1 ? partial.stride : total - (count - 1) * partial.stride;
}

/** An incomplete message dropped to make room for others. */
export interface EvictedPartial {
  peer: string;
  messageId: number;
  /** Bytes it held. */
  bytes: number;
}

interface Partial {
  readonly peer: string;
  readonly header: ChunkHeader;
  readonly stride: number;
  /** The message's first `contiguous` bytes, in a buffer that grows as they arrive. */
  buffer: Uint8Array;
  contiguous: number;
  /** Index of the next chunk that extends the contiguous prefix. */
  next: number;
  /**
   * Chunks that arrived ahead of the prefix (an ordered channel never sends any): chunk
   * index → where its bytes start in `arena`, which holds them back to back and at least
   * doubles when it grows. One buffer rather than one per chunk: a chunk of one byte then
   * costs its byte and an index entry, not an object of its own.
   */
  readonly ahead: Map<number, number>;
  arena: Uint8Array;
  arenaUsed: number;
  /** What this message holds against the limits. */
  reserved: number;
  touchedAt: number;
}

/**
 * Puts chunks back into envelopes, per peer. A chunk that breaks a rule throws a
 * {@link TransportError}; a duplicate leaves the partial message intact, any other refusal
 * discards it, so a confused sender cannot pin memory.
 */
export class Reassembler {
  readonly maxMessageBytes: number;
  readonly maxPartialsPerPeer: number;
  readonly maxPartialBytesPerPeer: number;
  readonly maxPartialBytes: number;
  readonly partialTimeoutMs: number;
  readonly #peers = new Map<string, Map<number, Partial>>();
  readonly #onEvict: (evicted: EvictedPartial) => void;
  #reserved = 0;
  #evictions = 0;

  constructor(limits: ReassemblyLimits = {}, onEvict: (evicted: EvictedPartial) => void = () => {}) {
    this.maxMessageBytes = limits.maxMessageBytes ?? ENGINE_MAX_ENVELOPE_BYTES;
    this.maxPartialsPerPeer = limits.maxPartialsPerPeer ?? 4;
    this.maxPartialBytesPerPeer = limits.maxPartialBytesPerPeer ?? 32 * 1024 * 1024;
    this.maxPartialBytes = limits.maxPartialBytes ?? 128 * 1024 * 1024;
    this.partialTimeoutMs = limits.partialTimeoutMs ?? 30_000;
    this.#onEvict = onEvict;
  }

  /** Takes one chunk from `peer`; returns the whole envelope when this chunk completes it, else null. */
  push(peer: string, chunk: Uint8Array, now: number): Uint8Array | null {
    const header = decodeChunkHeader(chunk, peer);
    const payload = chunk.subarray(CHUNK_HEADER_BYTES);
    const where = `message ${header.messageId} chunk ${header.index}/${header.count}`;
    if (header.total > this.maxMessageBytes) {
      throw new TransportError('message-too-large', `${where} announces ${header.total} bytes, above the ${this.maxMessageBytes}-byte limit`, peer);
    }
    const stride = strideOf(header, payload.byteLength);
    if (stride === null || expectedCount(header.total, stride) !== header.count) {
      this.#discard(peer, header.messageId);
      throw new TransportError('inconsistent-chunk', `${where}: ${payload.byteLength} bytes at offset ${header.offset} of ${header.total} do not tile ${header.count} chunks`, peer);
    }
    let partials = this.#peers.get(peer);
    let partial = partials?.get(header.messageId);
    if (header.count === 1) {
      if (partial !== undefined) {
        this.#discard(peer, header.messageId);
        throw new TransportError('inconsistent-chunk', `${where} reuses the id of an incomplete message`, peer);
      }
      return payload.slice();
    }
    if (partial === undefined) {
      if ((partials?.size ?? 0) >= this.maxPartialsPerPeer) {
        throw new TransportError('too-many-partials', `${where}: ${partials!.size} messages from this peer are already incomplete (limit ${this.maxPartialsPerPeer})`, peer);
      }
      partial = { peer, header, stride, buffer: EMPTY, contiguous: 0, next: 0, ahead: new Map(), arena: EMPTY, arenaUsed: 0, reserved: 0, touchedAt: now };
      if (partials === undefined) {
        partials = new Map();
        this.#peers.set(peer, partials);
      }
      partials.set(header.messageId, partial);
      this.#reserve(partial, PARTIAL_OVERHEAD_BYTES, where);
    } else if (partial.header.count !== header.count || partial.header.total !== header.total || partial.stride !== stride) {
      this.#discard(peer, header.messageId);
      throw new TransportError('inconsistent-chunk', `${where} disagrees with earlier chunks (count ${partial.header.count}, total ${partial.header.total}, stride ${partial.stride})`, peer);
    }
    if (header.index < partial.next || partial.ahead.has(header.index)) {
      throw new TransportError('duplicate-chunk', `${where} arrived twice`, peer);
    }
    partial.touchedAt = now;
    if (header.index === partial.next) {
      this.#extend(partial, payload, where);
      for (let at = partial.ahead.get(partial.next); at !== undefined; at = partial.ahead.get(partial.next)) {
        const held = partial.arena.subarray(at, at + chunkLength(partial, partial.next));
        partial.ahead.delete(partial.next);
        this.#release(partial, CHUNK_OVERHEAD_BYTES);
        this.#extend(partial, held, where);
      }
      if (partial.ahead.size === 0 && partial.arena !== EMPTY) {
        this.#release(partial, partial.arena.byteLength);
        partial.arena = EMPTY;
        partial.arenaUsed = 0;
      }
    } else {
      this.#hold(partial, header.index, payload, where);
    }
    if (partial.next < header.count) return null;
    this.#discard(peer, header.messageId);
    return partial.buffer.byteLength === partial.contiguous ? partial.buffer : partial.buffer.slice(0, partial.contiguous);
  }

  /** Drops partial messages untouched for `partialTimeoutMs`; returns which (peer, message id) it dropped. */
  expire(now: number): Array<{ peer: string; messageId: number }> {
    const dropped: Array<{ peer: string; messageId: number }> = [];
    for (const [peer, partials] of [...this.#peers]) {
      for (const [messageId, partial] of [...partials]) {
        if (now - partial.touchedAt < this.partialTimeoutMs) continue;
        this.#discard(peer, messageId);
        dropped.push({ peer, messageId });
      }
    }
    return dropped;
  }

  /** Forgets everything from `peer` (its connection is gone). */
  dropPeer(peer: string): void {
    for (const messageId of [...(this.#peers.get(peer)?.keys() ?? [])]) this.#discard(peer, messageId);
  }

  /** Bytes held for incomplete messages, all peers together (what counts against the limits). */
  get pendingBytes(): number {
    return this.#reserved;
  }

  /** Incomplete messages dropped so far to keep within `maxPartialBytes`. */
  get evictions(): number {
    return this.#evictions;
  }

  /** Incomplete messages from `peer`. */
  partialCount(peer: string): number {
    return this.#peers.get(peer)?.size ?? 0;
  }

  /**
   * Appends the next in-order payload. The buffer at least doubles when it grows (never past
   * the message's size), so it holds at most twice what arrived and is copied O(log n) times.
   */
  #extend(partial: Partial, payload: Uint8Array, where: string): void {
    const needed = partial.contiguous + payload.byteLength;
    if (needed > partial.buffer.byteLength) {
      const size = Math.min(partial.header.total, Math.max(needed, partial.buffer.byteLength * 2));
      this.#reserve(partial, size - partial.buffer.byteLength, where);
      const grown = new Uint8Array(size);
      grown.set(partial.buffer.subarray(0, partial.contiguous));
      partial.buffer = grown;
    }
    partial.buffer.set(payload, partial.contiguous);
    partial.contiguous = needed;
    partial.next++;
  }

  /** Keeps a chunk that arrived ahead of the in-order prefix, in the partial's arena. */
  #hold(partial: Partial, index: number, payload: Uint8Array, where: string): void {
    const needed = partial.arenaUsed + payload.byteLength;
    let grow = 0;
    if (needed > partial.arena.byteLength) grow = Math.min(partial.header.total, Math.max(needed, partial.arena.byteLength * 2)) - partial.arena.byteLength;
    this.#reserve(partial, grow + CHUNK_OVERHEAD_BYTES, where);
    if (grow > 0) {
      const grown = new Uint8Array(partial.arena.byteLength + grow);
      grown.set(partial.arena.subarray(0, partial.arenaUsed));
      partial.arena = grown;
    }
    partial.arena.set(payload, partial.arenaUsed);
    partial.ahead.set(index, partial.arenaUsed);
    partial.arenaUsed = needed;
  }

  /**
   * Counts `bytes` more against `partial`'s peer and against everyone. Past the peer's
   * bound the message is dropped (the sender's own doing); past the global bound the
   * stalest other messages go first, then this one if that is not enough.
   */
  #reserve(partial: Partial, bytes: number, where: string): void {
    let peerTotal = 0;
    for (const p of this.#peers.get(partial.peer)?.values() ?? []) peerTotal += p.reserved;
    if (peerTotal + bytes > this.maxPartialBytesPerPeer) {
      this.#discard(partial.peer, partial.header.messageId);
      throw new TransportError('too-many-partials', `${where}: ${peerTotal + bytes} bytes of incomplete messages would exceed the ${this.maxPartialBytesPerPeer}-byte limit per peer`, partial.peer);
    }
    while (this.#reserved + bytes > this.maxPartialBytes) {
      const stalest = this.#stalestExcept(partial);
      if (stalest === undefined) {
        this.#discard(partial.peer, partial.header.messageId);
        throw new TransportError('too-many-partials', `${where}: ${this.#reserved + bytes} bytes of incomplete messages would exceed the ${this.maxPartialBytes}-byte limit for all peers`, partial.peer);
      }
      this.#evictions++;
      this.#discard(stalest.peer, stalest.header.messageId);
      this.#onEvict({ peer: stalest.peer, messageId: stalest.header.messageId, bytes: stalest.reserved });
    }
    partial.reserved += bytes;
    this.#reserved += bytes;
  }

  #release(partial: Partial, bytes: number): void {
    partial.reserved -= bytes;
    this.#reserved -= bytes;
  }

  #stalestExcept(keep: Partial): Partial | undefined {
    let stalest: Partial | undefined;
    for (const partials of this.#peers.values()) {
      for (const p of partials.values()) if (p !== keep && (stalest === undefined || p.touchedAt < stalest.touchedAt)) stalest = p;
    }
    return stalest;
  }

  #discard(peer: string, messageId: number): void {
    const partials = this.#peers.get(peer);
    const partial = partials?.get(messageId);
    if (partials === undefined || partial === undefined) return;
    this.#reserved -= partial.reserved;
    partial.reserved = 0;
    partials.delete(messageId);
    if (partials.size === 0) this.#peers.delete(peer);
  }
}
