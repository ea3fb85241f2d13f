/**
 * The parts of the signalling server's memory budget that can be checked alone: how much
 * unfinished input a socket's bytes hold (FrameMeter, against frames this test lays out
 * itself and cuts at random), and how a member's inbox shares its room among senders.
 */
import { describe, expect, it } from 'vitest';

import { Holding, MemoryBudget } from '../src/signal/budget.js';
import { FrameMeter, PIECE_BYTES } from '../src/signal/frames.js';
import { Inbox, type QueuedSignal } from '../src/signal/inbox.js';

/** A client frame (masked) with `payload` bytes of payload. */
function frame(opcode: number, final: boolean, payload: number): Uint8Array {
  const length = payload < 126 ? [payload] : payload < 65_536 ? [126, payload >> 8, payload & 0xff] : [127, 0, 0, 0, 0, (payload >>> 24) & 0xff, (payload >> 16) & 0xff, (payload >> 8) & 0xff, payload & 0xff];
  const header = [(final ? 0x80 : 0) | opcode, 0x80 | length[0]!, ...length.slice(1), 1, 2, 3, 4];
  const bytes = new Uint8Array(header.length + payload);
  bytes.set(header);
  return bytes;
}

function random(seed: number): (n: number) => number {
  let state = seed;
  return (n) => ((state = (state * 1103515245 + 12345) % 2 ** 31) % n);
}

describe('FrameMeter', () => {
  it('holds input exactly while a message or frame is unfinished, whatever the cuts', () => {
    const wrong: string[] = [];
    for (let seed = 1; seed <= 30; seed++) {
      const pick = random(seed);
      const frames: Uint8Array[] = [];
      /** Stretches of the stream, [start, end), inside which input is unfinished. */
      const spans: Array<[number, number]> = [];
      let at = 0;
      const add = (bytes: Uint8Array): void => {
        frames.push(bytes);
        at += bytes.length;
      };
      for (let m = 0; m < 12; m++) {
        if (pick(3) === 0) {
          const start = at;
          add(frame(0x9, true, pick(126))); // a ping between messages
          spans.push([start, at]);
        }
        const start = at;
        const fragments = 1 + pick(4);
        for (let f = 0; f < fragments; f++) {
          add(frame(f === 0 ? 0x1 : 0x0, f === fragments - 1, pick(4) === 0 ? 65_536 + pick(5000) : pick(3000)));
          if (f < fragments - 1 && pick(2) === 0) add(frame(0xa, true, pick(126))); // a pong inside it
        }
        spans.push([start, at]);
      }
      const stream = new Uint8Array(at);
      let offset = 0;
      for (const bytes of frames) {
        stream.set(bytes, offset);
        offset += bytes.length;
      }
      const meter = new FrameMeter();
      for (let cut = 0; cut < stream.length;) {
        const next = Math.min(stream.length, cut + 1 + pick(pick(2) === 0 ? 40 : 20_000));
        // each chunk a buffer of its own, as a socket delivers it
        meter.read(stream.slice(cut, next));
        cut = next;
        const open = spans.find(([start, end]) => start < cut && cut < end);
        const right = open === undefined ? meter.held === 0 : meter.held >= cut - open[0];
        if (!right) wrong.push(`seed ${seed}, after byte ${cut}: held ${meter.held}, unfinished since ${open?.[0] ?? 'nothing'}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('counts a message dripped a byte at a time at far more than its length', () => {
    const meter = new FrameMeter();
    const bytes = frame(0x1, true, 1000);
    for (let i = 0; i < 500; i++) meter.read(bytes.subarray(i, i + 1).slice());
    expect(meter.held).toBeGreaterThanOrEqual(500 * (1 + PIECE_BYTES));
    meter.read(bytes.subarray(500).slice());
    expect(meter.held).toBe(0);
  });

  it('counts the whole buffer an unfinished message has bytes in', () => {
    const meter = new FrameMeter();
    const chunk = new Uint8Array(65_536);
    const whole = frame(0x1, true, 65_536 - 100 - 14);
    chunk.set(whole);
    chunk.set(frame(0x1, true, 5000).subarray(0, 100 - 8 + 8), whole.length);
    meter.read(chunk);
    expect(meter.held).toBeGreaterThanOrEqual(65_536);
  });
});

describe('Inbox', () => {
  const signal = (bytes: number, tag = ''): QueuedSignal => ({ text: tag, bytes, session: undefined });

  it('makes room for a light sender by dropping the newest signals of the heaviest, never the other way', () => {
    const budget = new MemoryBudget(1 << 20, () => undefined);
    const inbox = new Inbox(new Holding(budget));
    for (let i = 0; i < 4; i++) expect(inbox.offer('flood', signal(1000, `f${i}`), 4000)).toBe(0);
    // full: the flood loses its newest, the newcomer gets in
    expect(inbox.offer('honest', signal(1500, 'h0'), 4000)).toBe(2);
    expect(inbox.bytes).toBe(3500);
    expect(budget.held).toBe(3500);
    // the flood cannot win the room back from a lighter sender
    expect(inbox.offer('flood', signal(1000, 'f4'), 4000)).toBe(1);
    expect(inbox.offer('flood', signal(100, 'f5'), 4000)).toBe(0);
    // a sender that is not heavier than the newcomer is not displaced
    expect(inbox.offer('other', signal(2000, 'o0'), 4000)).toBe(1);
    const order: string[] = [];
    for (let next = inbox.take(); next !== undefined; next = inbox.take()) order.push(next.signal.text);
    // round robin: a signal of each sender in turn, each sender's in its order
    expect(order).toEqual(['f0', 'h0', 'f1', 'f5']);
    expect(budget.held).toBe(0);
  });
});
