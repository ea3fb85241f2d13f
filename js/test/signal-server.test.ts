import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import { SignalClient, SignalError, type WebSocketConstructor } from '../src/signal/index.js';
import { SignalServer } from '../src/signal/node.js';
import { TokenBucket } from '../src/signal/bucket.js';
import { PresenceBatch } from '../src/signal/presence.js';

const WS = WebSocket as unknown as WebSocketConstructor;
let server: SignalServer;
let url: string;
const clients: SignalClient[] = [];

async function join(room: string, peer: string): Promise<SignalClient> {
  const client = await SignalClient.connect({ url, room, peer, WebSocket: WS });
  clients.push(client);
  return client;
}

function next<T extends unknown[]>(subscribe: (handler: (...args: T) => void) => () => void): Promise<T> {
  return new Promise((resolve) => {
    const off = subscribe((...args) => {
      off();
      resolve(args);
    });
  });
}

function raw(): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url);
    socket.once('open', () => resolve(socket));
    socket.once('error', reject);
  });
}

function reply(socket: WebSocket): Promise<{ type: string; code?: string }> {
  return new Promise((resolve) => socket.once('message', (data) => resolve(JSON.parse(String(data)))));
}

beforeEach(async () => {
  server = await SignalServer.listen({ port: 0, host: '127.0.0.1', maxMessageBytes: 4096, rateBurst: 30, ratePerSecond: 1 });
  url = `ws://127.0.0.1:${server.address.port}`;
});

afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  await server.close();
});

describe('signalling server and client', () => {
  it('joins a room, sees existing peers and join/leave notifications', async () => {
    const a = await join('r', 'alice');
    expect(a.peers()).toEqual([]);
    const joined = next<[string]>((h) => a.events.on('join', h));
    const b = await join('r', 'bob');
    expect(b.peers()).toEqual(['alice']);
    expect(await joined).toEqual(['bob']);
    expect(a.peers()).toEqual(['bob']);
    expect(server.members('r').sort()).toEqual(['alice', 'bob']);
    const left = next<[string]>((h) => a.events.on('leave', h));
    b.close();
    expect(await left).toEqual(['bob']);
    expect(a.peers()).toEqual([]);
  });

  it('refuses a duplicate peer id in the same room, not in another', async () => {
    await join('r', 'alice');
    const error = await SignalClient.connect({ url, room: 'r', peer: 'alice', WebSocket: WS }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SignalError);
    expect((error as SignalError).code).toBe('duplicate-peer');
    expect((error as SignalError).message).toMatch(/alice.*already taken/);
    await join('other', 'alice');
  });

  it('relays signals within a room only', async () => {
    const a = await join('r1', 'alice');
    const b = await join('r1', 'bob');
    const c = await join('r2', 'carol');
    const got = next<[string, unknown]>((h) => b.events.on('signal', h));
    a.send('bob', { kind: 'offer', sdp: 'x' });
    expect(await got).toEqual(['alice', { kind: 'offer', sdp: 'x' }]);
    let carolGot = false;
    c.events.on('signal', () => (carolGot = true));
    const refused = next<[SignalError]>((h) => a.events.on('error', h));
    a.send('carol', { kind: 'offer' });
    const [error] = await refused;
    expect(error.code).toBe('unknown-peer');
    expect(carolGot).toBe(false);
  });

  it('rejects with unreachable when the server is down', async () => {
    const port = server.address.port;
    await server.close();
    server = await SignalServer.listen({ port: 0 });
    const error = await SignalClient.connect({ url: `ws://127.0.0.1:${port}`, room: 'r', peer: 'x', WebSocket: WS }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SignalError);
    expect((error as SignalError).code).toBe('unreachable');
  });

  it('finds ws by itself in Node 20 (no injected constructor)', async () => {
    const client = await SignalClient.connect({ url, room: 'r', peer: 'solo' });
    clients.push(client);
    expect(client.self).toBe('solo');
  });

  it('drops a socket that stops answering pings and tells the room', async () => {
    await server.close();
    server = await SignalServer.listen({ port: 0, host: '127.0.0.1', heartbeatMs: 50, presenceIntervalMs: 10 });
    url = `ws://127.0.0.1:${server.address.port}`;
    const a = await join('r', 'alice');
    const mute = new WebSocket(url, { autoPong: false });
    await new Promise((r) => mute.once('open', r));
    const joined = reply(mute);
    mute.send(JSON.stringify({ type: 'join', room: 'r', peer: 'mute' }));
    expect(await joined).toMatchObject({ type: 'joined' });
    const [left] = await next<[string]>((h) => a.events.on('leave', h));
    expect(left).toBe('mute');
    expect(a.closed).toBe(false);
  });

  it('answers malformed, unjoined, oversize and too fast messages with errors', async () => {
    const s = await raw();
    let answer = reply(s);
    s.send('not json');
    expect(await answer).toMatchObject({ type: 'error', code: 'malformed' });
    answer = reply(s);
    s.send(JSON.stringify({ type: 'join', room: 'r', peer: 'bad id!' }));
    expect(await answer).toMatchObject({ type: 'error', code: 'malformed' });
    answer = reply(s);
    s.send(JSON.stringify({ type: 'signal', to: 'x', data: 1 }));
    expect(await answer).toMatchObject({ type: 'error', code: 'not-joined' });
    answer = reply(s);
    s.send(JSON.stringify({ type: 'join', room: 'r', peer: 'p' }));
    expect(await answer).toMatchObject({ type: 'joined', peers: [] });
    answer = reply(s);
    s.send(JSON.stringify({ type: 'join', room: 'r', peer: 'q' }));
    expect(await answer).toMatchObject({ type: 'error', code: 'already-joined' });
    const codes: string[] = [];
    s.on('message', (d) => codes.push(JSON.parse(String(d)).code));
    for (let i = 0; i < 30; i++) s.send(JSON.stringify({ type: 'signal', to: 'nobody', data: i }));
    await new Promise((r) => setTimeout(r, 200));
    expect(codes).toContain('rate-limited');
    const closed = new Promise<number>((r) => s.once('close', (code) => r(code)));
    s.send('x'.repeat(5000));
    expect(await closed).toBe(1009);
  });
});

describe('server limits', () => {
  async function restart(options: Parameters<typeof SignalServer.listen>[0]): Promise<void> {
    await server.close();
    server = await SignalServer.listen({ port: 0, host: '127.0.0.1', ...options });
    url = `ws://127.0.0.1:${server.address.port}`;
  }

  it('refuses a join past the room size and past the room count', async () => {
    await restart({ maxRoomSize: 2, maxRooms: 2 });
    await join('a', 'p1');
    await join('a', 'p2');
    const full = await SignalClient.connect({ url, room: 'a', peer: 'p3', WebSocket: WS }).catch((e: unknown) => e);
    expect((full as SignalError).code).toBe('room-full');
    await join('b', 'p1');
    const many = await SignalClient.connect({ url, room: 'c', peer: 'p1', WebSocket: WS }).catch((e: unknown) => e);
    expect((many as SignalError).code).toBe('too-many-rooms');
    expect(server.stats()).toMatchObject({ rooms: 2, members: 3 });
  });

  it('closes a socket that joins no room in time with 4000, also after it leaves', async () => {
    await restart({ joinTimeoutMs: 100 });
    const idle = await raw();
    const code = await new Promise<number>((resolve) => idle.once('close', (c) => resolve(c)));
    expect(code).toBe(4000);
    const s = await raw();
    const answer = reply(s);
    s.send(JSON.stringify({ type: 'join', room: 'r', peer: 'p' }));
    expect(await answer).toMatchObject({ type: 'joined' });
    await new Promise((r) => setTimeout(r, 200));
    expect(s.readyState).toBe(WebSocket.OPEN); // in a room: no timeout
    const closed = new Promise<number>((resolve) => s.once('close', (c) => resolve(c)));
    s.send(JSON.stringify({ type: 'leave' }));
    expect(await closed).toBe(4000);
    await vi.waitFor(() => expect(server.stats()).toMatchObject({ connections: 0, rooms: 0, joinTimeouts: 2 }));
  });

  it('refuses upgrades past the cap per address with HTTP 503', async () => {
    await restart({ maxConnectionsPerAddress: 2 });
    await raw();
    await raw();
    const status = await new Promise<number>((resolve) => {
      const third = new WebSocket(url);
      third.once('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0));
      third.once('open', () => resolve(101));
    });
    expect(status).toBe(503);
    expect(server.stats()).toMatchObject({ connections: 2, addresses: 1, refusedConnections: 1 });
  });

  it('closes a socket that does not read with 4002 once its buffer passes the bound', async () => {
    await restart({ maxBufferedBytes: 64 * 1024, maxMessageBytes: 60 * 1024, rateBurst: 1000, byteBurst: 1 << 30, bytesPerSecond: 1 << 30 });
    const sink = await raw();
    let answer = reply(sink);
    sink.send(JSON.stringify({ type: 'join', room: 'r', peer: 'sink' }));
    await answer;
    (sink as unknown as { _socket: { pause(): void } })._socket.pause();
    const source = await raw();
    answer = reply(source);
    source.send(JSON.stringify({ type: 'join', room: 'r', peer: 'source' }));
    await answer;
    const frame = JSON.stringify({ type: 'signal', to: 'sink', data: 'x'.repeat(50_000) });
    for (let i = 0; i < 400 && server.stats().slowReaders === 0; i++) {
      source.send(frame);
      await new Promise((r) => setTimeout(r, 1));
    }
    expect(server.stats().slowReaders).toBe(1);
    expect(server.members('r')).toEqual(['source']);
    const closed = new Promise<number>((resolve) => sink.once('close', (c) => resolve(c)));
    (sink as unknown as { _socket: { resume(): void } })._socket.resume();
    expect(await closed).toBe(4002);
  });

  it('coalesces churn: a join and leave between two announcements reach nobody', async () => {
    await restart({ presenceIntervalMs: 200 });
    const a = await join('r', 'alice');
    const seen: string[] = [];
    a.events.on('join', (p) => seen.push(`+${p}`));
    a.events.on('leave', (p) => seen.push(`-${p}`));
    for (let i = 0; i < 5; i++) (await join('r', `churn-${i}`)).close();
    await join('r', 'bob');
    await new Promise((r) => setTimeout(r, 400));
    expect(seen).toEqual(['+bob']);
  });
});

describe('PresenceBatch', () => {
  it('reports the net change per peer, and a left-and-back peer as both', () => {
    const batch = new PresenceBatch();
    const present = new Set(['old', 'back']);
    batch.joined('new');
    batch.joined('gone-again');
    batch.left('gone-again');
    batch.left('old');
    present.delete('old');
    batch.left('back');
    batch.joined('back');
    present.add('new');
    expect(batch.pending).toBe(true);
    expect(batch.take((p) => present.has(p))).toEqual({ joined: ['new', 'back'], left: ['old', 'back'] });
    expect(batch.pending).toBe(false);
    expect(batch.take((p) => present.has(p))).toEqual({ joined: [], left: [] });
  });
});

describe('TokenBucket', () => {
  it('refills at its rate up to its burst, and a forced spend leaves a debt', () => {
    const bucket = new TokenBucket(10, 20, 0);
    expect(bucket.spend(15, 0)).toBe(true);
    expect(bucket.spend(10, 0)).toBe(false);
    expect(bucket.level(500)).toBe(10);
    expect(bucket.level(10_000)).toBe(20);
    expect(bucket.spend(30, 10_000, true)).toBe(true);
    expect(bucket.level(10_000)).toBe(-10);
    expect(bucket.msUntilSolvent(10_000)).toBe(1000);
    expect(bucket.spend(50, 10_000, true)).toBe(true);
    expect(bucket.level(10_000)).toBe(-20); // the debt is bounded by the burst
  });
});
