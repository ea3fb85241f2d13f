import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';

import { Identity } from '../src/identity/index.js';
import { TokenBucket } from '../src/signal/bucket.js';
import { SignalClient, SignalError, joinSignedBytes } from '../src/signal/index.js';
import { SignalServer, type SignalServerOptions } from '../src/signal/node.js';
import { PresenceBatch } from '../src/signal/presence.js';
import { joinFrame } from '../src/signal/protocol.js';
import { RawPeer, WS, idOf, identity } from './signal-support.js';

let server: SignalServer;
let url: string;
const clients: SignalClient[] = [];
const raws: RawPeer[] = [];

async function join(room: string, name: string): Promise<SignalClient> {
  const client = await SignalClient.connect({ url, room, identity: await identity(name), WebSocket: WS });
  clients.push(client);
  return client;
}

async function refusal(room: string, name: string): Promise<SignalError> {
  const error = await SignalClient.connect({ url, room, identity: await identity(name), WebSocket: WS }).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(SignalError);
  return error as SignalError;
}

function next<T extends unknown[]>(subscribe: (handler: (...args: T) => void) => () => void): Promise<T> {
  return new Promise((resolve) => {
    const off = subscribe((...args) => {
      off();
      resolve(args);
    });
  });
}

async function raw(): Promise<RawPeer> {
  const peer = await RawPeer.open(url);
  if (peer === null) throw new Error('the server refused the connection');
  raws.push(peer);
  return peer;
}

async function restart(options: SignalServerOptions): Promise<void> {
  await server.close();
  server = await SignalServer.listen({ port: 0, host: '127.0.0.1', ...options });
  url = `ws://127.0.0.1:${server.address.port}`;
}

beforeEach(async () => {
  server = await SignalServer.listen({ port: 0, host: '127.0.0.1', maxMessageBytes: 4096, rateBurst: 30, ratePerSecond: 1 });
  url = `ws://127.0.0.1:${server.address.port}`;
});

afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const r of raws.splice(0)) r.terminate();
  await server.close();
});

describe('signalling server and client', () => {
  it('joins a room, sees existing peers and join/leave notifications', async () => {
    const [alice, bob] = [await idOf('alice'), await idOf('bob')];
    const a = await join('r', 'alice');
    expect(a.self).toBe(alice);
    expect(a.self).toMatch(/^12D3KooW/);
    expect(a.peers()).toEqual([]);
    const joined = next<[string]>((h) => a.events.on('join', h));
    const b = await join('r', 'bob');
    expect(b.peers()).toEqual([alice]);
    expect(await joined).toEqual([bob]);
    expect(a.peers()).toEqual([bob]);
    expect(server.members('r').sort()).toEqual([alice, bob].sort());
    const left = next<[string]>((h) => a.events.on('leave', h));
    b.close();
    expect(await left).toEqual([bob]);
    expect(a.peers()).toEqual([]);
  });

  it('relays signals within a room only, from the id the sender proved', async () => {
    const a = await join('r1', 'alice');
    const b = await join('r1', 'bob');
    const c = await join('r2', 'carol');
    const got = next<[string, unknown]>((h) => b.events.on('signal', h));
    a.send(b.self, { kind: 'offer', sdp: 'x' });
    expect(await got).toEqual([a.self, { kind: 'offer', sdp: 'x' }]);
    let carolGot = false;
    c.events.on('signal', () => (carolGot = true));
    const refused = next<[SignalError]>((h) => a.events.on('error', h));
    a.send(c.self, { kind: 'offer' });
    const [error] = await refused;
    expect(error.code).toBe('unknown-peer');
    expect(carolGot).toBe(false);
  });

  it('rejects with unreachable when the server is down', async () => {
    const port = server.address.port;
    await server.close();
    server = await SignalServer.listen({ port: 0 });
    const error = await SignalClient.connect({ url: `ws://127.0.0.1:${port}`, room: 'r', identity: await identity('x'), WebSocket: WS }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SignalError);
    expect((error as SignalError).code).toBe('unreachable');
  });

  it('finds ws by itself in Node 20 (no injected constructor)', async () => {
    const client = await SignalClient.connect({ url, room: 'r', identity: await identity('solo') });
    clients.push(client);
    expect(client.self).toBe(await idOf('solo'));
  });

  it('drops a socket that stops answering pings and tells the room', async () => {
    await restart({ heartbeatMs: 50, presenceIntervalMs: 10 });
    const a = await join('r', 'alice');
    const mute = new WebSocket(url, { autoPong: false });
    const challenge = await new Promise<string>((resolve) => mute.once('message', (data) => resolve(JSON.parse(String(data)).nonce)));
    const signer = await identity('mute');
    const sig = await signer.sign(joinSignedBytes(Buffer.from(challenge, 'base64'), 'r', signer.peerId, 'client'));
    const joined = new Promise((resolve) => mute.once('message', (data) => resolve(JSON.parse(String(data)))));
    mute.send(joinFrame('r', signer.peerId, 'client', signer.publicKey, sig));
    expect(await joined).toMatchObject({ type: 'joined' });
    const [left] = await next<[string]>((h) => a.events.on('leave', h));
    expect(left).toBe(signer.peerId);
    expect(a.closed).toBe(false);
  });

  it('answers malformed, unjoined, oversize and too fast messages with errors', async () => {
    const s = await raw();
    s.send('not json');
    expect(await s.reply()).toMatchObject({ type: 'error', code: 'malformed' });
    s.send({ type: 'join', room: 'r', peer: 'bad id!' });
    expect(await s.reply()).toMatchObject({ type: 'error', code: 'malformed' });
    s.send({ type: 'join', room: 'r', peer: await idOf('p') }); // no key, no signature
    expect(await s.reply()).toMatchObject({ type: 'error', code: 'malformed' });
    s.send({ type: 'signal', to: 'x', data: 1 });
    expect(await s.reply()).toMatchObject({ type: 'error', code: 'not-joined' });
    expect(await s.join('r', await identity('p'))).toMatchObject({ type: 'joined', peers: [] });
    s.send({ type: 'join', room: 'r', peer: await idOf('q') });
    expect(await s.reply()).toMatchObject({ type: 'error', code: 'malformed' });
    const codes: string[] = [];
    s.socket.on('message', (d) => codes.push(JSON.parse(String(d)).code));
    for (let i = 0; i < 30; i++) s.send({ type: 'signal', to: 'nobody', data: i });
    await new Promise((r) => setTimeout(r, 200));
    expect(codes).toContain('rate-limited');
    s.send('x'.repeat(5000));
    expect(await s.closed).toBe(1009);
  });
});

describe('identity at join', () => {
  it('refuses a join whose peer id is not the id of the key it carries', async () => {
    const s = await raw();
    const mallory = await identity('mallory');
    const alice = await identity('alice');
    await s.next(); // the challenge
    const sig = await mallory.sign(joinSignedBytes(s.challenge!, 'r', alice.peerId, 'client'));
    s.send(joinFrame('r', alice.peerId, 'client', mallory.publicKey, sig));
    const reply = await s.reply();
    expect(reply).toMatchObject({ type: 'error', code: 'bad-identity' });
    expect(server.members('r')).toEqual([]);
  });

  it('refuses a forged signature: the key of the id, signed by another key', async () => {
    const s = await raw();
    const mallory = await identity('mallory');
    const alice = await identity('alice');
    await s.next();
    const sig = await mallory.sign(joinSignedBytes(s.challenge!, 'r', alice.peerId, 'client'));
    s.send(joinFrame('r', alice.peerId, 'client', alice.publicKey, sig));
    expect(await s.reply()).toMatchObject({ type: 'error', code: 'bad-signature' });
  });

  it('refuses a replayed join: a signature is good for one connection\'s challenge only', async () => {
    const alice = await identity('alice');
    const first = await raw();
    await first.next();
    const sig = await alice.sign(joinSignedBytes(first.challenge!, 'r', alice.peerId, 'client'));
    const frame = joinFrame('r', alice.peerId, 'client', alice.publicKey, sig);
    first.send(frame);
    expect(await first.reply()).toMatchObject({ type: 'joined' });
    // an eavesdropper replays the frame on a connection of its own
    const replay = await raw();
    await replay.next();
    replay.send(frame);
    expect(await replay.reply()).toMatchObject({ type: 'error', code: 'bad-signature' });
    // and on the same connection after a leave, which hands out a new challenge
    first.send({ type: 'leave' });
    expect((await first.next()).type).toBe('challenge');
    first.send(frame);
    expect(await first.reply()).toMatchObject({ type: 'error', code: 'bad-signature' });
    // the role is signed too
    const other = await raw();
    await other.next();
    const signed = await alice.sign(joinSignedBytes(other.challenge!, 'r', alice.peerId, 'client'));
    other.send(joinFrame('r', alice.peerId, 'watcher', alice.publicKey, signed));
    expect(await other.reply()).toMatchObject({ type: 'error', code: 'bad-signature' });
  });

  it('lets the key holder replace its stale socket, and nobody else take the id', async () => {
    const bob = await join('r', 'bob');
    const bobSawAlice = next<[string]>((h) => bob.events.on('join', h));
    const stale = await join('r', 'alice');
    await bobSawAlice;
    const closed = next<[number, string]>((h) => stale.events.on('close', h));
    const seen: string[] = [];
    bob.events.on('leave', (p) => seen.push(`-${p}`));
    bob.events.on('join', (p) => seen.push(`+${p}`));
    const fresh = await join('r', 'alice');
    const [code] = await closed;
    expect(code).toBe(4001);
    expect(fresh.peers()).toEqual([bob.self]);
    expect(server.members('r').sort()).toEqual([bob.self, fresh.self].sort());
    await vi.waitFor(() => expect(seen).toEqual([`-${fresh.self}`, `+${fresh.self}`]));
    // while alice is away, another key cannot join under her id
    fresh.close();
    const s = await raw();
    const mallory = await identity('mallory');
    await s.next();
    const sig = await mallory.sign(joinSignedBytes(s.challenge!, 'r', fresh.self, 'client'));
    s.send(joinFrame('r', fresh.self, 'client', mallory.publicKey, sig));
    expect(await s.reply()).toMatchObject({ type: 'error', code: 'bad-identity' });
  });

  it('answers an identity the client cannot prove with the server\'s code', async () => {
    const real = await identity('alice');
    const impostor = { peerId: real.peerId, publicKey: real.publicKey, sign: async (m: Uint8Array) => (await Identity.generate()).sign(m) };
    const error = await SignalClient.connect({ url, room: 'r', identity: impostor, WebSocket: WS }).catch((e: unknown) => e);
    expect((error as SignalError).code).toBe('bad-signature');
  });
});

describe('server limits', () => {
  it('refuses a join past the room size and past the room count', async () => {
    await restart({ maxRoomSize: 2, maxRooms: 2 });
    await join('a', 'p1');
    await join('a', 'p2');
    expect((await refusal('a', 'p3')).code).toBe('room-full');
    await join('b', 'p1');
    expect((await refusal('c', 'p1')).code).toBe('too-many-rooms');
    expect(server.stats()).toMatchObject({ rooms: 2, members: 3 });
  });

  it('closes a socket that joins no room in time with 4000, also after it leaves', async () => {
    await restart({ joinTimeoutMs: 100 });
    const idle = await raw();
    expect(await idle.closed).toBe(4000);
    const s = await raw();
    expect(await s.join('r', await identity('p'))).toMatchObject({ type: 'joined' });
    await new Promise((r) => setTimeout(r, 200));
    expect(s.socket.readyState).toBe(WebSocket.OPEN); // in a room: no timeout
    s.send({ type: 'leave' });
    expect(await s.closed).toBe(4000);
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
    await sink.join('r', await identity('sink'));
    sink.pause();
    const source = await raw();
    await source.join('r', await identity('source'));
    const frame = JSON.stringify({ type: 'signal', to: await idOf('sink'), data: 'x'.repeat(50_000) });
    for (let i = 0; i < 400 && server.stats().slowReaders === 0; i++) {
      source.send(frame);
      await new Promise((r) => setTimeout(r, 1));
    }
    expect(server.stats().slowReaders).toBe(1);
    expect(server.members('r')).toEqual([await idOf('source')]);
    sink.resume();
    expect(await sink.closed).toBe(4002);
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
    expect(seen).toEqual([`+${await idOf('bob')}`]);
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
