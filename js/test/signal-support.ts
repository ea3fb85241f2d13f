/** What the signalling tests share: identities by name, a raw protocol peer, and child processes. */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import WebSocket from 'ws';

import { fromBase64 } from '../src/identity/bytes.js';
import { Identity } from '../src/identity/index.js';
import { CHALLENGE_BYTES, joinSignedBytes, type PeerRole, type WebSocketConstructor } from '../src/signal/index.js';
import { joinFrame } from '../src/signal/protocol.js';

export const WS = WebSocket as unknown as WebSocketConstructor;

const identities = new Map<string, Promise<Identity>>();

/** The identity a test calls `name` (made once per test file). */
export function identity(name: string): Promise<Identity> {
  let made = identities.get(name);
  if (made === undefined) {
    made = Identity.generate();
    identities.set(name, made);
  }
  return made;
}

/** The peer id of {@link identity}(name). */
export async function idOf(name: string): Promise<string> {
  return (await identity(name)).peerId;
}

export interface ServerReply {
  type: string;
  code?: string;
  nonce?: string;
  peers?: string[];
  joined?: string[];
  left?: string[];
  [key: string]: unknown;
}

/** A socket speaking the protocol by hand, its messages queued in order of arrival. */
export class RawPeer {
  readonly socket: WebSocket;
  readonly closed: Promise<number>;
  readonly #queue: ServerReply[] = [];
  readonly #waiting: Array<(message: ServerReply) => void> = [];
  #challenge: Uint8Array | null = null;
  /** The id it joined as, once a join succeeded. */
  peerId: string | null = null;

  private constructor(socket: WebSocket) {
    this.socket = socket;
    this.closed = new Promise((resolve) => socket.once('close', (code) => resolve(code)));
    socket.on('message', (data) => {
      const message = JSON.parse(String(data)) as ServerReply;
      if (message.type === 'challenge') this.#challenge = fromBase64(message.nonce, CHALLENGE_BYTES);
      const waiter = this.#waiting.shift();
      if (waiter !== undefined) waiter(message);
      else this.#queue.push(message);
    });
  }

  /** Connects from `localAddress` (default any); null when the server refuses the upgrade. */
  static open(url: string, localAddress?: string): Promise<RawPeer | null> {
    return new Promise((resolve) => {
      // a zero mask spares this process masking bulk bytes (the server unmasks anyway)
      const socket = new WebSocket(url, { ...(localAddress === undefined ? {} : { localAddress }), generateMask: (mask) => void mask.fill(0) });
      const peer = new RawPeer(socket);
      socket.once('open', () => resolve(peer));
      socket.once('unexpected-response', (_request, response) => {
        response.resume();
        resolve(null);
      });
      socket.once('error', () => resolve(null));
    });
  }

  /** The next message from the server. */
  next(timeoutMs = 10_000): Promise<ServerReply> {
    const queued = this.#queue.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no message within ${timeoutMs} ms`)), timeoutMs);
      this.#waiting.push((message) => {
        clearTimeout(timer);
        resolve(message);
      });
    });
  }

  /** The next message that is not a challenge. */
  async reply(timeoutMs?: number): Promise<ServerReply> {
    for (;;) {
      const message = await this.next(timeoutMs);
      if (message.type !== 'challenge') return message;
    }
  }

  /** The next message of `type`, skipping the others (presence of the room, say). */
  async nextOf(type: string, timeoutMs?: number): Promise<ServerReply> {
    for (;;) {
      const message = await this.next(timeoutMs);
      if (message.type === type) return message;
    }
  }

  /** Waits for the server's challenge (once), then joins `room` as `signer`; returns the reply. */
  async join(room: string, signer: Identity, role: PeerRole = 'client', extra: Record<string, unknown> = {}): Promise<ServerReply> {
    while (this.#challenge === null) await this.next();
    const sig = await signer.sign(joinSignedBytes(this.#challenge, room, signer.peerId, role));
    const frame = { ...JSON.parse(joinFrame(room, signer.peerId, role, signer.publicKey, sig)), ...extra };
    this.socket.send(JSON.stringify(frame));
    const reply = await this.reply();
    if (reply.type === 'joined') {
      this.#challenge = null; // used up
      this.peerId = signer.peerId;
    }
    return reply;
  }

  /** A join frame for the current challenge, signed by `signer` (not sent). */
  async signedJoin(room: string, signer: Identity, role: PeerRole = 'client'): Promise<string> {
    while (this.#challenge === null) await this.next();
    return joinFrame(room, signer.peerId, role, signer.publicKey, await signer.sign(joinSignedBytes(this.#challenge, room, signer.peerId, role)));
  }

  /** The challenge the server last handed out, once it arrived. */
  get challenge(): Uint8Array | null {
    return this.#challenge;
  }

  send(message: unknown): void {
    this.socket.send(typeof message === 'string' ? message : JSON.stringify(message));
  }

  /** Stops reading: what the server sends piles up in the kernel, then in the server. */
  pause(): void {
    (this.socket as unknown as { _socket: { pause(): void } })._socket.pause();
  }

  resume(): void {
    (this.socket as unknown as { _socket: { resume(): void } })._socket.resume();
  }

  terminate(): void {
    this.socket.terminate();
  }
}

/** Resident memory of process `pid` in bytes (0 once it is gone). */
export function rssOf(pid: number): number {
  try {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match === null ? 0 : Number(match[1]) * 1024;
  } catch {
    return 0;
  }
}

/** Sends `question` to a child process and resolves with its first message of type `answer`; rejects if it exits first. */
export function ask<T>(child: ChildProcess, question: string, answer: string): Promise<T> {
  const answered = reportOf<T>(child, answer, `asked ${question}`);
  if (child.connected) child.send(question);
  return answered;
}

/** The next message of type `type` from a child process; rejects if it exits first (`what`: what it was waiting for). */
export function reportOf<T>(child: ChildProcess, type: string, what = `waited for ${type}`): Promise<T> {
  return new Promise((resolve, reject) => {
    const on = (message: { type: string }): void => {
      if (message.type !== type) return;
      done();
      resolve(message as T);
    };
    const exit = (code: number | null): void => {
      done();
      reject(new Error(`the child process exited with ${code} (${what})`));
    };
    const done = (): void => {
      child.off('message', on);
      child.off('exit', exit);
    };
    if (child.exitCode !== null || child.signalCode !== null) return reject(new Error(`the child process is gone (${what})`));
    child.on('message', on);
    child.once('exit', exit);
  });
}

/** The first message of a child process (its 'listening' or 'ready'); rejects if it exits first. */
export function readyOf(child: ChildProcess, what: string): Promise<{ type: string; port?: number }> {
  return new Promise((resolve, reject) => {
    child.once('message', resolve);
    child.once('exit', (code) => reject(new Error(`${what} exited with ${code}`)));
  });
}

/** A signalling server in a process of its own with 20 honest peers on it, its memory sampled. */
export interface ServerUnderTest {
  /** The server's process (fixtures/signal-child.mjs: answers 'stats' and 'peek'). */
  readonly child: ChildProcess;
  /** The honest peers' process (fixtures/signal-prober.mjs: answers 'report'). */
  readonly prober: ChildProcess;
  readonly url: string;
  /** The most resident memory the server's process held so far. */
  peakRss(): number;
  close(): Promise<void>;
}

/** Starts the server with `options` (as JSON; `policy` as a --policy file holds it) and the honest peers on it. */
export async function serverUnderTest(options: Record<string, unknown>): Promise<ServerUnderTest> {
  const child = fork(new URL('./fixtures/signal-child.mjs', import.meta.url), [JSON.stringify(options)], { execArgv: ['--expose-gc'] });
  const url = `ws://127.0.0.1:${(await readyOf(child, 'the server')).port}`;
  let peak = 0;
  const sampler = setInterval(() => (peak = Math.max(peak, rssOf(child.pid!))), 50);
  const prober = fork(new URL('./fixtures/signal-prober.mjs', import.meta.url), [url]);
  await readyOf(prober, 'the honest peers');
  return {
    child, prober, url,
    peakRss: () => peak,
    async close() {
      clearInterval(sampler);
      for (const process of [prober, child]) {
        if (process.exitCode !== null || process.signalCode !== null) continue;
        process.send('close');
        await new Promise((resolve) => process.once('exit', resolve));
      }
    },
  };
}

/** Members of fixtures/signal-hoarders.mjs, on connections of fixtures/small-window-sockets.py. */
export interface Hoarders {
  readonly child: ChildProcess;
  /** Its next report of `type` ('joined', then 'attacked' once sent 'attack'); rejects if it exits first. */
  told(type: string): Promise<{ type: string; members?: number; refused?: number }>;
}

/** `count` hoarding members joined to the server at `url`, 64 from each address counting up from `first`. */
export function startHoarders(url: string, count: number, first: string): Hoarders {
  const fixtures = new URL('./fixtures/', import.meta.url).pathname;
  const child = spawn('/usr/bin/python3', [`${fixtures}small-window-sockets.py`, '127.0.0.1', new URL(url).port, String(count), '64', first,
    '--', process.execPath, `${fixtures}signal-hoarders.mjs`, url], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return { child, told: (type) => reportOf(child, type) };
}
