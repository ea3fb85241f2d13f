/**
 * The signalling server under attack. It runs in a child process whose resident memory is
 * sampled all along, while 20 honest peers keep signalling in a room of their own. Each
 * attack is one test: a flood of connections and rooms, slow readers, join/leave churn in a
 * room of 1,000 members, and thousands of sockets that never join. Throughout, the server
 * must stay under RSS_BOUND and answer an honest join within JOIN_BOUND_MS; afterwards the
 * memory must come back.
 *
 * Attackers connect from other loopback addresses (127.0.0.2 and up) than the honest peers
 * (127.0.0.1), as they would from other hosts.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';

import { SignalClient, type WebSocketConstructor } from '../src/signal/index.js';

const RSS_BOUND = 200 * 1024 * 1024;
const JOIN_BOUND_MS = 1000;
const HONEST = 20;
const SERVER_OPTIONS = { port: 0, host: '127.0.0.1', joinTimeoutMs: 1500, closeGraceMs: 10_000, maxRooms: 200 };
const WS = WebSocket as unknown as WebSocketConstructor;

let child: ChildProcess;
let url = '';
let rssMax = 0;
let sampler: ReturnType<typeof setInterval>;
const honest: SignalClient[] = [];
let honestSignals = 0;
let honestTicker: ReturnType<typeof setInterval>;
let bystanders = 0;

interface ChildStats {
  rss: number;
  heapUsed: number;
  server: { connections: number; rooms: number; members: number; addresses: number } | null;
}

function rssOf(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match === null ? 0 : Number(match[1]) * 1024;
}

function childStats(): Promise<ChildStats> {
  return new Promise((resolve) => {
    const on = (message: { type: string } & ChildStats): void => {
      if (message.type !== 'stats') return;
      child.off('message', on);
      resolve(message);
    };
    child.on('message', on);
    child.send('stats');
  });
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** The close code each attack socket got, once it closed. */
const closeCodes = new WeakMap<WebSocket, Promise<number>>();

/** A raw socket from `address`; null when the server refuses the connection. */
function openFrom(address: string): Promise<WebSocket | null> {
  return new Promise((resolve) => {
    // a zero mask spares this process masking the attack's bytes (the server unmasks anyway)
    const socket = new WebSocket(url, { localAddress: address, generateMask: (mask) => void mask.fill(0) });
    socket.once('open', () => resolve(socket));
    closeCodes.set(socket, new Promise((closed) => socket.once('close', (code) => closed(code))));
    socket.once('unexpected-response', (_request, response) => {
      response.resume();
      resolve(null);
    });
    socket.once('error', () => resolve(null));
  });
}

/** The server's next message to `socket`, parsed. */
function nextMessage(socket: WebSocket, timeoutMs = 10_000): Promise<{ type: string; code?: string }> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no message within ${timeoutMs} ms`)), timeoutMs);
    socket.once('message', (data) => {
      clearTimeout(timer);
      resolve(JSON.parse(String(data)) as { type: string; code?: string });
    });
  });
}

async function rawJoin(socket: WebSocket, room: string, peer: string): Promise<{ type: string; code?: string }> {
  const reply = nextMessage(socket);
  socket.send(JSON.stringify({ type: 'join', room, peer }));
  return reply;
}

/** How long an honest newcomer waits for the server to let it into the honest room. */
async function honestJoinMs(): Promise<number> {
  const started = performance.now();
  const client = await SignalClient.connect({ url, room: 'honest', peer: `bystander-${bystanders++}`, WebSocket: WS, timeoutMs: 30_000 });
  const elapsed = performance.now() - started;
  client.close();
  return elapsed;
}

/** Measures honest joins one after another until `done` settles; returns the slowest. */
async function joinsDuring(done: Promise<unknown>): Promise<number> {
  let finished = false;
  void done.finally(() => (finished = true));
  let slowest = 0;
  do {
    slowest = Math.max(slowest, await honestJoinMs());
    await sleep(100);
  } while (!finished);
  return slowest;
}

function closeAll(sockets: Array<WebSocket | null>): void {
  for (const socket of sockets) socket?.terminate();
}

beforeAll(async () => {
  child = fork(new URL('./fixtures/signal-child.mjs', import.meta.url), [JSON.stringify(SERVER_OPTIONS)], { execArgv: ['--expose-gc'] });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (message: { type: string; port: number }) => resolve(message.port));
    child.once('exit', (code) => reject(new Error(`the server child exited with ${code}`)));
  });
  url = `ws://127.0.0.1:${port}`;
  sampler = setInterval(() => (rssMax = Math.max(rssMax, rssOf(child.pid!))), 50);
  for (let i = 0; i < HONEST; i++) {
    const client = await SignalClient.connect({ url, room: 'honest', peer: `honest-${i}`, WebSocket: WS });
    client.events.on('signal', () => honestSignals++);
    honest.push(client);
  }
  honestTicker = setInterval(() => {
    honest.forEach((client, i) => {
      if (!client.closed) client.send(`honest-${(i + 1) % HONEST}`, { at: Date.now() });
    });
  }, 100);
}, 30_000);

afterAll(async () => {
  clearInterval(sampler);
  clearInterval(honestTicker);
  for (const client of honest) client.close();
  child?.send('close');
  await new Promise((resolve) => child?.once('exit', resolve));
});

describe('the signalling server under attack (child process, loopback)', () => {
  it('caps connections per address and the rooms a flood of joins may create', async () => {
    const signalsBefore = honestSignals;
    const attempts: Array<Promise<WebSocket | null>> = [];
    for (let i = 0; i < 300; i++) attempts.push(openFrom('127.0.0.2'));
    const sockets = await Promise.all(attempts);
    const accepted = sockets.filter((s) => s !== null).length;
    // four more addresses, each joining its sockets into fresh rooms
    const roomSockets: Array<WebSocket | null> = [];
    for (const address of ['127.0.0.3', '127.0.0.4', '127.0.0.5', '127.0.0.6']) {
      roomSockets.push(...(await Promise.all(Array.from({ length: 60 }, () => openFrom(address)))));
    }
    const replies = await Promise.all(roomSockets.map((s, i) => (s === null ? null : rawJoin(s, `flood-${i}`, `p${i}`))));
    const roomsMade = replies.filter((r) => r?.type === 'joined').length;
    const slowest = await joinsDuring(sleep(300));
    closeAll([...sockets, ...roomSockets]);
    expect(accepted).toBeLessThanOrEqual(64);
    expect(roomsMade).toBeLessThanOrEqual(200);
    expect(slowest).toBeLessThan(JOIN_BOUND_MS);
    expect(honestSignals).toBeGreaterThan(signalsBefore);
  }, 30_000);

  it('closes slow readers with a close code instead of buffering for them without end', async () => {
    const slow: WebSocket[] = [];
    for (let i = 0; i < 33; i++) {
      const socket = (await openFrom('127.0.0.7'))!;
      expect((await rawJoin(socket, 'slow', `slow-${i}`)).type).toBe('joined');
      slow.push(socket);
    }
    // they stop reading: the kernel's buffers fill, then the server's
    for (const socket of slow) (socket as unknown as { _socket: { pause(): void } })._socket.pause();
    // 60 senders from one more address, each with 100 signals of 60 kB for them: far more
    // than the kernel's socket buffers and the server's bound for one reader together
    const senders: WebSocket[] = [];
    const batch = await Promise.all(Array.from({ length: 60 }, () => openFrom('127.0.0.8')));
    await Promise.all(batch.map(async (socket, i) => {
      expect((await rawJoin(socket!, 'slow', `sender-${i}`)).type).toBe('joined');
      senders.push(socket!);
    }));
    const payload = 'x'.repeat(60_000);
    const frames = slow.map((_, j) => JSON.stringify({ type: 'signal', to: `slow-${j}`, data: payload }));
    const flood = (async () => {
      for (let round = 0; round < 100; round++) {
        // half of it for slow-0, which must be dropped; the rest spread over all of them
        senders.forEach((socket, i) => socket.send(frames[round % 2 === 0 ? 0 : (round + i) % frames.length]!));
        await yieldToLoop();
      }
      await sleep(4000); // the server works through what it takes of it
    })();
    const slowest = await joinsDuring(flood);
    // a slow reader that reads again finds the reason it was dropped
    const closed = closeCodes.get(slow[0]!)!;
    (slow[0] as unknown as { _socket: { resume(): void } })._socket.resume();
    const code = await Promise.race([closed, sleep(8000).then(() => -1)]);
    closeAll([...slow, ...senders]);
    expect(rssMax).toBeLessThan(RSS_BOUND);
    expect(slowest).toBeLessThan(JOIN_BOUND_MS);
    expect(code).toBe(4002);
  }, 60_000);

  it('bounds what join/leave churn in a room of 1,000 costs its members', async () => {
    const members: WebSocket[] = [];
    let received = 0;
    for (let a = 0; members.length < 1000; a++) {
      const batch = await Promise.all(Array.from({ length: 50 }, () => openFrom(`127.0.1.${10 + a}`)));
      await Promise.all(batch.map(async (socket, i) => {
        expect(socket).not.toBeNull();
        const reply = await rawJoin(socket!, 'big', `m${a}-${i}`);
        expect(reply.type).toBe('joined');
        socket!.on('message', () => received++);
        members.push(socket!);
      }));
    }
    const churners = await Promise.all(Array.from({ length: 10 }, () => openFrom('127.0.0.9')));
    await sleep(500);
    const before = received;
    const churn = (async () => {
      for (let cycle = 0; cycle < 100; cycle++) {
        churners.forEach((socket, k) => {
          socket!.send(JSON.stringify({ type: 'join', room: 'big', peer: `churn-${k}` }));
          socket!.send(JSON.stringify({ type: 'leave' }));
        });
        await yieldToLoop();
      }
      await sleep(1500);
    })();
    const slowest = await joinsDuring(churn);
    const caused = received - before;
    closeAll([...members, ...churners]);
    expect(slowest).toBeLessThan(JOIN_BOUND_MS);
    // uncoalesced, the 2,000 joins and leaves would be 2,000,000 messages to the members
    expect(caused).toBeLessThan(50_000);
    expect(rssMax).toBeLessThan(RSS_BOUND);
  }, 60_000);

  it('closes sockets that never join, and caps how many one address holds', async () => {
    const idle: Array<WebSocket | null> = [];
    for (let a = 0; a < 8; a++) idle.push(...(await Promise.all(Array.from({ length: 500 }, () => openFrom(`127.0.2.${a + 1}`)))));
    const held = idle.filter((s): s is WebSocket => s !== null);
    const slowest = await joinsDuring(sleep(500));
    const codes = Promise.all(held.map((socket) => closeCodes.get(socket)!));
    const outcome = await Promise.race([codes, sleep(SERVER_OPTIONS.joinTimeoutMs + 5000).then(() => null)]);
    closeAll(idle);
    expect(held.length).toBeLessThanOrEqual(8 * 64);
    expect(slowest).toBeLessThan(JOIN_BOUND_MS);
    expect(outcome).not.toBeNull();
    expect(new Set(outcome)).toEqual(new Set([4000]));
    expect(rssMax).toBeLessThan(RSS_BOUND);
  }, 60_000);

  it('gives the memory back once the attackers are gone', async () => {
    await sleep(1000);
    const stats = await childStats();
    expect(stats.server).not.toBeNull();
    expect(stats.server!.connections).toBe(HONEST);
    expect(stats.server!.rooms).toBe(1);
    expect(stats.server!.members).toBe(HONEST);
    expect(stats.server!.addresses).toBe(1);
    expect(stats.heapUsed).toBeLessThan(40 * 1024 * 1024);
    expect(honest.every((client) => !client.closed)).toBe(true);
  }, 30_000);
});
