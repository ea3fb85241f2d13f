import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { SignalClient, SignalError, type WebSocketConstructor } from '../src/signal/index.js';
import { SignalServer } from '../src/signal/node.js';

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
  server = await SignalServer.listen({ port: 0, host: '127.0.0.1', maxMessageBytes: 4096, rateBurst: 20, ratePerSecond: 1 });
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
    server = await SignalServer.listen({ port: 0, host: '127.0.0.1', heartbeatMs: 50 });
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
