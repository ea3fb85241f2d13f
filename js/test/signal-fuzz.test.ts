/**
 * Fuzzing the signalling server's message handling with structure-aware JSON: texts built
 * from the protocol's own messages, mutated (a field dropped, retyped or duplicated,
 * `__proto__`, `constructor` and `prototype` keys, unicode of every plane and lone
 * surrogates, numbers at the edges, nesting thousands deep, arrays and objects of
 * thousands of members, truncation, bytes that are not UTF-8, binary frames).
 *
 * First the parsers alone, against JSON.parse as the oracle: the bounded parser agrees
 * with it wherever it takes a text, and refuses only texts past its bounds or not JSON;
 * what the client and server parsers return can always be serialised again. Then the
 * server itself, in a child process with its rate limits lifted so every message is
 * handled: fuzzers joined to its rooms (the honest peers' room among them) send
 * generated messages for a bounded time, while 20 honest peers keep signalling. The
 * process must stay up, fail on no message (`faults`), stay under RSS_BOUND, and keep
 * serving the honest peers.
 *
 * The generator is seeded: BB_FUZZ_SEED=<n> replays a run (a failure names its seed).
 */
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';

import { Identity } from '../src/identity/index.js';
import { parseBoundedJson, type JsonBounds } from '../src/signal/bounded-json.js';
import { joinSignedBytes } from '../src/signal/index.js';
import { joinFrame, parseClientMessage, parseServerMessage } from '../src/signal/protocol.js';
import { SIGNAL_SERVER_DEFAULTS } from '../src/signal/node.js';
import { ask, serverUnderTest, type ServerUnderTest } from './signal-support.js';

const SEED = Number(process.env.BB_FUZZ_SEED ?? 0x5eed);
const FUZZ_MS = 8000;
const FUZZERS = 8;
const RSS_BOUND = 200 * 1024 * 1024;
const BOUNDS: JsonBounds = { maxDepth: SIGNAL_SERVER_DEFAULTS.maxMessageDepth, maxValues: SIGNAL_SERVER_DEFAULTS.maxMessageValues };

/** mulberry32: a small seeded generator, so a run can be replayed. */
function generator(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

class Fuzz {
  readonly #random: () => number;
  /** Peer ids the texts may name (members of the rooms, and strangers). */
  readonly names: string[] = [];

  constructor(seed: number) {
    this.#random = generator(seed);
  }

  int(n: number): number {
    return Math.floor(this.#random() * n);
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }

  chance(p: number): boolean {
    return this.#random() < p;
  }

  /** A string: protocol words, peer ids, unicode of every kind, long runs, escapes. */
  string(): string {
    switch (this.int(9)) {
      case 0: return this.pick(['join', 'signal', 'leave', 'ice', 'presence', 'client', 'server', 'watcher', '']);
      case 1: return this.names.length > 0 ? this.pick(this.names) : 'nobody';
      case 2: return '\u{1F600}\u200F\u202E\u0000\uFEFF日本語';
      case 3: return '\uD800'; // a lone surrogate
      case 4: return 'x'.repeat(this.int(4000));
      case 5: return '__proto__';
      case 6: return '"\\\n\t\u2028';
      case 7: return String.fromCodePoint(...Array.from({ length: 1 + this.int(20) }, () => this.int(0x10ffff) & ~0x800));
      default: return this.int(2 ** 30).toString(36);
    }
  }

  /** A JSON text of a value, at most `depth` more levels deep. */
  value(depth: number): string {
    const kind = depth <= 0 ? this.int(4) : this.int(8);
    switch (kind) {
      case 0: return this.pick(['null', 'true', 'false']);
      case 1: return this.pick(['0', '-0', '1e308', '1e309', '-1e-400', '123456789012345678901234567890', '0.1', '-7']);
      case 2: case 3: return JSON.stringify(this.string());
      case 4: case 5: return `[${Array.from({ length: this.int(6) }, () => this.value(depth - 1)).join(',')}]`;
      default: return this.object(depth - 1, {});
    }
  }

  /** An object text: `fields` as given (some dropped, retyped or repeated) and keys of its own. */
  object(depth: number, fields: Record<string, string>): string {
    const keys = ['type', 'to', 'data', 'room', 'peer', 'role', 'key', 'sig', 'token', '__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty'];
    const members: string[] = [];
    for (const [key, text] of Object.entries(fields)) {
      if (this.chance(0.1)) continue;
      members.push(`${JSON.stringify(key)}:${this.chance(0.15) ? this.value(depth) : text}`);
      if (this.chance(0.05)) members.push(`${JSON.stringify(key)}:${this.value(depth)}`); // a key twice
    }
    for (let i = this.int(3); i > 0; i--) members.push(`${JSON.stringify(this.pick(keys))}:${this.value(depth)}`);
    return `{${members.join(',')}}`;
  }

  /** Arrays or objects nested `depth` deep, around `inner`. */
  deep(depth: number, inner = '1'): string {
    return this.chance(0.5) ? `${'['.repeat(depth)}${inner}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}${inner}${'}'.repeat(depth)}`;
  }

  /** An array or object of `n` members. */
  wide(n: number): string {
    return this.chance(0.5)
      ? `[${Array.from({ length: n }, (_, i) => i).join(',')}]`
      : `{${Array.from({ length: n }, (_, i) => `"k${i}":${i}`).join(',')}}`;
  }

  /** The data of a signal: any value, one nested thousands deep, one thousands wide. */
  data(): string {
    switch (this.int(6)) {
      case 0: return this.deep(1 + this.int(8000));
      case 1: return this.wide(1 + this.int(6000));
      case 2: return this.deep(this.int(20), this.wide(this.int(1200)));
      default: return this.value(4);
    }
  }

  /** One message as a client might send it: the protocol's, mutated, or not JSON at all. */
  message(join: string | null): string {
    const type = (t: string): string => JSON.stringify(t);
    switch (this.int(10)) {
      case 0: case 1: case 2: return this.object(3, { type: type('signal'), to: JSON.stringify(this.string()), data: this.data() });
      case 3: {
        if (join === null) return this.object(3, { type: type('join'), room: JSON.stringify(this.string()), peer: JSON.stringify(this.string()) });
        const fields = JSON.parse(join) as Record<string, unknown>;
        return this.object(3, Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, JSON.stringify(v)])));
      }
      case 4: return this.object(2, { type: type(this.pick(['ice', 'leave', 'presence', 'joined', '__proto__'])) });
      case 5: return this.value(6);
      case 6: return this.deep(1 + this.int(20000));
      case 7: { // truncated somewhere
        const text = this.object(3, { type: type('signal'), to: JSON.stringify(this.string()), data: this.value(3) });
        return text.slice(0, this.int(text.length));
      }
      case 8: return `{"__proto__":{"type":"join","polluted":true},"type":"signal","to":${JSON.stringify(this.string())},"data":{"constructor":{"prototype":{"polluted":true}}}}`;
      default: return this.wide(1 + this.int(this.chance(0.1) ? 20000 : 3000)); // now and then past maxMessageBytes
    }
  }
}

/** Depth and values of a parsed JSON value counted as bounded-json.ts counts them, without recursion. */
function measure(root: unknown): { depth: number; values: number } {
  let depth = 0;
  let values = 0;
  const stack: Array<[unknown, number]> = [[root, 0]];
  while (stack.length > 0) {
    const [value, level] = stack.pop()!;
    values++;
    if (typeof value !== 'object' || value === null) continue;
    depth = Math.max(depth, level + 1);
    const children = Array.isArray(value) ? value : Object.values(value as object);
    if (!Array.isArray(value)) values += children.length; // member names
    if (children.length === 0) values++; // an empty one counts one value too many
    for (const child of children) stack.push([child, level + 1]);
  }
  return { depth, values };
}

/** The same, measured on the text: its strings taken out by a regular expression, then its brackets and separators counted. */
function measureText(text: string): { depth: number; values: number } {
  const bare = text.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  let depth = 0;
  let most = 0;
  for (const c of bare) {
    if (c === '[' || c === '{') most = Math.max(most, ++depth);
    else if (c === ']' || c === '}') depth--;
  }
  return { depth: most, values: 1 + (bare.match(/[[{,:]/g)?.length ?? 0) };
}

describe('the signalling parsers, fuzzed against JSON.parse', () => {
  it(`agree with JSON.parse within their bounds and return only what serialises again (seed ${SEED})`, () => {
    const fuzz = new Fuzz(SEED);
    fuzz.names.push('12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo');
    const counts = { parsed: 0, refused: 0, notJson: 0 };
    for (let i = 0; i < 1500; i++) {
      const text = fuzz.message(null);
      let reference: { value: unknown } | null;
      try {
        reference = { value: JSON.parse(text) };
      } catch {
        reference = null;
      }
      const bounded = parseBoundedJson(text, BOUNDS);
      if ('value' in bounded) {
        counts.parsed++;
        expect(reference, `seed ${SEED}, text ${i}`).not.toBeNull();
        expect(JSON.stringify(bounded.value)).toBe(JSON.stringify(reference!.value));
        const { depth, values } = measure(bounded.value);
        expect(depth).toBeLessThanOrEqual(BOUNDS.maxDepth);
        expect(values).toBeLessThanOrEqual(BOUNDS.maxValues);
      } else if (bounded.error === 'not JSON') {
        counts.notJson++;
        expect(reference, `seed ${SEED}, text ${i}`).toBeNull();
      } else {
        counts.refused++;
        // a refused text is not JSON, or its text passes a bound (a value may be smaller
        // than its text: of a key given twice, JSON.parse keeps the last)
        if (reference !== null) {
          const { depth, values } = measureText(text);
          expect(depth > BOUNDS.maxDepth || values > BOUNDS.maxValues, `seed ${SEED}, text ${i}: ${bounded.error}`).toBe(true);
        }
      }
      const message = parseClientMessage(text, BOUNDS);
      if (typeof message !== 'string') {
        expect(() => JSON.stringify(message)).not.toThrow();
        expect(Object.getPrototypeOf(message)).toBe(Object.prototype);
      }
      const reply = parseServerMessage(text);
      if (reply !== null) expect(() => JSON.stringify(reply)).not.toThrow();
    }
    // the generator reaches all three outcomes, or it tests little
    expect(Math.min(counts.parsed, counts.refused, counts.notJson)).toBeGreaterThan(50);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

let attacked: ServerUnderTest;

beforeAll(async () => {
  // every message handled: no rate or byte limit stands between the fuzzer and the handler
  attacked = await serverUnderTest({ port: 0, host: '127.0.0.1', ratePerSecond: 1e6, rateBurst: 1e6, bytesPerSecond: 1e9, byteBurst: 1e9, joinCost: 0 });
}, 30_000);

afterAll(() => attacked?.close());

/**
 * A fuzzer's socket: it joins `room` whenever the server hands it a challenge (on
 * connecting, and after a leave the fuzz sent), learns the peer ids it is told of, and
 * sends what the fuzz makes of the protocol.
 */
class Fuzzer {
  readonly socket: WebSocket;
  readonly opened: Promise<boolean>;
  /** The join it sent last: what mutated joins are made from. */
  join: string | null = null;
  /** In its room (its join answered with `joined`, and no leave since). */
  member = false;

  constructor(room: string, identity: Identity, address: string, fuzz: Fuzz) {
    this.socket = new WebSocket(attacked.url, { localAddress: address });
    this.opened = new Promise((resolve) => {
      this.socket.once('open', () => resolve(true));
      this.socket.once('error', () => resolve(false));
      this.socket.once('unexpected-response', () => resolve(false));
    });
    this.socket.on('message', (data) => {
      const text = String(data);
      if (text.startsWith('{"type":"challenge"')) {
        this.member = false;
        const challenge = Buffer.from((JSON.parse(text) as { nonce: string }).nonce, 'base64');
        void identity.sign(joinSignedBytes(challenge, room, identity.peerId, 'client')).then((sig) => {
          this.join = joinFrame(room, identity.peerId, 'client', identity.publicKey, sig);
          if (this.socket.readyState === this.socket.OPEN) this.socket.send(this.join);
        });
      } else if (text.startsWith('{"type":"joined"') || text.startsWith('{"type":"presence"')) {
        if (text.startsWith('{"type":"joined"')) this.member = true;
        const told = JSON.parse(text) as { peers?: string[]; joined?: string[] };
        for (const peer of told.peers ?? told.joined ?? []) if (fuzz.names.length < 200) fuzz.names.push(peer);
      }
    });
  }

  get open(): boolean {
    return this.socket.readyState === this.socket.OPEN;
  }
}

describe('the signalling server, fuzzed', () => {
  it(`stays up, fails on nothing and keeps serving honest peers under ${FUZZ_MS / 1000} s of generated messages (seed ${SEED})`, async () => {
    const fuzz = new Fuzz(SEED + 1);
    const { child, prober } = attacked;
    await ask(prober, 'report', 'report');
    const keys = await Promise.all(Array.from({ length: FUZZERS }, () => Identity.generate()));
    for (const key of keys) fuzz.names.push(key.peerId);
    const rooms = ['honest', 'fuzz', 'fuzz-2'];
    const fuzzers: Fuzzer[] = [];
    let sent = 0;
    let asMember = 0;
    let reconnects = 0;
    const end = performance.now() + FUZZ_MS;
    try {
      while (performance.now() < end && child.exitCode === null) {
        await Promise.all(keys.map(async (key, i) => {
          let fuzzer = fuzzers[i];
          if (fuzzer === undefined || !fuzzer.open) {
            // closed for what it sent (a frame too large, not UTF-8, a join timeout): again
            fuzzer?.socket.terminate();
            fuzzer = fuzzers[i] = new Fuzzer(rooms[i % rooms.length]!, key, `127.0.5.${i + 1}`, fuzz);
            reconnects++;
            if (!(await fuzzer.opened)) return;
          }
          // mostly as a member of its room, where signals reach the handler's depths
          for (let n = 0; n < 20 && fuzzer.open && (fuzzer.member || fuzz.chance(0.05)); n++) {
            const roll = fuzz.int(500);
            if (roll === 0) fuzzer.socket.send(Buffer.from([0xc3, 0x28, 0xff, 0xfe]), { binary: false }); // not UTF-8: closed with 1007
            else if (roll === 1) fuzzer.socket.send(Buffer.from(fuzz.message(fuzzer.join)), { binary: true });
            else fuzzer.socket.send(fuzz.message(fuzzer.join));
            sent++;
            if (fuzzer.member) asMember++;
          }
          await new Promise((resolve) => setTimeout(resolve, 5));
        }));
      }
    } finally {
      for (const fuzzer of fuzzers) fuzzer.socket.terminate();
    }
    expect(child.exitCode, `seed ${SEED + 1}`).toBeNull();
    const honest = await ask<{ joins: number; failedJoins: number; signals: number; closed: number }>(prober, 'report', 'report');
    const stats = await ask<{ server: { faults: number } }>(child, 'stats', 'stats');
    expect(stats.server.faults, `seed ${SEED + 1}`).toBe(0);
    expect(sent).toBeGreaterThan(1000);
    expect(asMember).toBeGreaterThan(sent / 2);
    expect(reconnects).toBeGreaterThan(FUZZERS); // the fuzz reached the closing paths too
    expect(honest.joins).toBeGreaterThan(0);
    expect(honest.failedJoins).toBe(0);
    expect(honest.signals).toBeGreaterThan(0);
    expect(honest.closed).toBe(0);
    expect(attacked.peakRss()).toBeLessThan(RSS_BOUND);
  }, 60_000);
});
