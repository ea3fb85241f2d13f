/**
 * Signalling past one process: SignalServers sharing rooms through Redis pub/sub (Debian's
 * redis-server, started here on a free port). Peers joined on different processes see and
 * signal each other, admission holds on every process, a peer joining again elsewhere
 * replaces its old socket, a process killed outright loses only its own sockets (they
 * join again on another process and the room goes on), a process stalled past the alive
 * window rejoins the room whole when it resumes, and a hostile signal costs no process.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join as joinPath } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { Identity } from '../src/identity/index.js';
import { createJoinToken, SignalClient, SignalError } from '../src/signal/index.js';
import { RedisRoomBus, SignalServer, type SignalServerOptions } from '../src/signal/node.js';
import { identity, RawPeer, WS } from './signal-support.js';

const ALIVE_MS = 600;
let redis: ChildProcess;
let redisUrl = '';
let dir = '';
const servers: SignalServer[] = [];
const children: ChildProcess[] = [];

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
async function until(what: string, predicate: () => boolean, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

beforeAll(async () => {
  dir = mkdtempSync(joinPath(tmpdir(), 'bb-redis-'));
  const port = await freePort();
  redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], { stdio: 'ignore' });
  redisUrl = `redis://127.0.0.1:${port}`;
  const { Redis } = await import('ioredis');
  await until('redis-server to answer', () => true);
  for (let tries = 0; ; tries++) {
    const probe = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 0 });
    try {
      await probe.connect();
      await probe.quit();
      break;
    } catch (error) {
      probe.disconnect();
      if (tries > 50) throw error;
      await sleep(100);
    }
  }
});

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await Promise.all(servers.map((s) => s.close()));
  redis?.kill();
  rmSync(dir, { recursive: true, force: true });
});

async function process_(options: SignalServerOptions = {}): Promise<{ server: SignalServer; url: string }> {
  const bus = await RedisRoomBus.connect({ url: redisUrl, aliveMs: ALIVE_MS, prefix: `t${process.pid}:` });
  const server = await SignalServer.listen({ port: 0, bus, ...options });
  servers.push(server);
  return { server, url: `ws://127.0.0.1:${server.address.port}` };
}

/** A signalling process apart from this one (the package as built: npm test builds it first), on the same Redis. */
async function childProcess(): Promise<{ child: ChildProcess; url: string }> {
  const port = await freePort();
  const script = `
    import { RedisRoomBus, SignalServer } from '${joinPath(process.cwd(), 'dist/signal/node.js')}';
    const bus = await RedisRoomBus.connect({ url: '${redisUrl}', aliveMs: ${ALIVE_MS}, prefix: 't${process.pid}:' });
    await SignalServer.listen({ port: ${port}, bus });
    console.log('listening');`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => chunk.toString().includes('listening') && resolve());
    child.once('exit', (code) => reject(new Error(`the signalling process exited with ${code}`)));
  });
  return { child, url: `ws://127.0.0.1:${port}` };
}

function join(url: string | string[], who: Identity, room = 'fed'): Promise<SignalClient> {
  return SignalClient.connect({ url, room, identity: who, WebSocket: WS });
}

function nextSignal(client: SignalClient): Promise<{ from: string; data: unknown }> {
  return new Promise((resolve) => {
    const off = client.events.on('signal', (from, data) => {
      off();
      resolve({ from, data });
    });
  });
}

describe('signalling processes sharing rooms through Redis', () => {
  it('peers on different processes find and signal each other; admission holds on each', async () => {
    const [alice, bob, eve] = await Promise.all([identity('alice'), identity('bob'), identity('eve')]);
    const rooms = { fed: { allow: { [alice.peerId]: 'client' as const, [bob.peerId]: 'server' as const } } };
    const a = await process_({ rooms, openRooms: false });
    const b = await process_({ rooms, openRooms: false });
    const onA = await join(a.url, alice);
    const aliceSeesBob = new Promise<string>((resolve) => onA.events.on('join', resolve));
    const onB = await SignalClient.connect({ url: b.url, room: 'fed', identity: bob, role: 'server', WebSocket: WS });
    expect(onB.peers()).toEqual([alice.peerId]); // told of the member held by the other process
    expect(await aliceSeesBob).toBe(bob.peerId);
    expect(a.server.members('fed')).toEqual([alice.peerId]);
    expect(b.server.members('fed')).toEqual([bob.peerId]);

    const toBob = nextSignal(onB);
    onA.send(bob.peerId, { offer: 'from A' });
    expect(await toBob).toEqual({ from: alice.peerId, data: { offer: 'from A' } });
    const toAlice = nextSignal(onA);
    onB.send(alice.peerId, { answer: 'from B' });
    expect(await toAlice).toEqual({ from: bob.peerId, data: { answer: 'from B' } });

    // not on the list: refused on either process
    const refused = await join(b.url, eve).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(SignalError);
    expect((refused as SignalError).code).toBe('not-admitted');

    const aliceSeesBobLeave = new Promise<string>((resolve) => onA.events.on('leave', resolve));
    onB.close();
    expect(await aliceSeesBobLeave).toBe(bob.peerId);
    onA.close();
  });

  it('members\' join tokens reach the room across processes', async () => {
    const [operator, grace, heidi] = await Promise.all([identity('operator'), identity('grace'), identity('heidi')]);
    const rooms = { tokens: { operators: [operator.publicKey] } };
    const a = await process_({ rooms, openRooms: false });
    const b = await process_({ rooms, openRooms: false });
    const expiresAt = Math.floor(Date.now() / 1000) + 3600;
    const token = (who: Identity) => createJoinToken(operator, { peer: who.peerId, role: 'client', room: 'tokens', expiresAt });
    const [forGrace, forHeidi] = [await token(grace), await token(heidi)];
    const onA = await SignalClient.connect({ url: a.url, room: 'tokens', identity: grace, token: forGrace, WebSocket: WS });
    const onB = await SignalClient.connect({ url: b.url, room: 'tokens', identity: heidi, token: forHeidi, WebSocket: WS });
    expect(onB.tokenOf(grace.peerId)).toBe(forGrace); // in 'joined', from the other process
    await until('grace to hear of heidi', () => onA.peers().includes(heidi.peerId));
    expect(onA.tokenOf(heidi.peerId)).toBe(forHeidi); // in 'presence', from the other process
    onB.close();
    await until('grace to hear heidi leave', () => !onA.peers().includes(heidi.peerId));
    expect(onA.tokenOf(heidi.peerId)).toBeUndefined();
    onA.close();
  });

  it('a peer joining again on another process replaces its old socket there', async () => {
    const carol = await identity('carol');
    const a = await process_();
    const b = await process_();
    const first = await join(a.url, carol, 'again');
    const closed = new Promise<number>((resolve) => first.events.on('close', (code) => resolve(code)));
    const second = await join(b.url, carol, 'again');
    expect(await closed).toBe(4001);
    await until('process A to let carol go', () => a.server.members('again').length === 0);
    expect(b.server.members('again')).toEqual([carol.peerId]);
    second.close();
  });

  it('a process killed outright loses only its own sockets, which join again on another', async () => {
    const [dave, frank] = await Promise.all([identity('dave'), identity('frank')]);
    const { child, url: doomed } = await childProcess();
    const b = await process_();
    const urls = [doomed, b.url];
    const onDoomed = await join(urls, dave, 'survive'); // the first address answers
    const onB = await join(urls.slice(1), frank, 'survive');
    expect(onB.peers()).toEqual([dave.peerId]);

    const daveCut = new Promise<void>((resolve) => onDoomed.events.on('close', () => resolve()));
    const frankSeesLeave = new Promise<string>((resolve) => onB.events.on('leave', resolve));
    child.kill('SIGKILL');
    await daveCut;
    // the survivor notices the dead process within its alive window and releases its members
    expect(await frankSeesLeave).toBe(dave.peerId);
    expect(onB.closed).toBe(false);

    const frankSeesJoin = new Promise<string>((resolve) => onB.events.on('join', resolve));
    const again = await join(urls, dave, 'survive'); // the dead address fails; the next one takes it
    expect(await frankSeesJoin).toBe(dave.peerId);
    expect(b.server.members('survive').sort()).toEqual([dave.peerId, frank.peerId].sort());
    const toDave = nextSignal(again);
    onB.send(dave.peerId, 'still here');
    expect(await toDave).toEqual({ from: frank.peerId, data: 'still here' });
    again.close();
    onB.close();
  });

  it('a process stalled past the alive window announces its members again when it resumes', async () => {
    const [grace, ivan] = await Promise.all([identity('grace'), identity('ivan')]);
    const { child, url: stalled } = await childProcess();
    const b = await process_();
    const onStalled = await join(stalled, grace, 'stall');
    const onB = await join(b.url, ivan, 'stall');
    expect(onB.peers()).toEqual([grace.peerId]);
    const ivanSeesLeave = new Promise<string>((resolve) => onB.events.on('leave', resolve));
    child.kill('SIGSTOP');
    try {
      expect(await ivanSeesLeave).toBe(grace.peerId); // taken for dead, its members released
      await sleep(ALIVE_MS);
    } finally {
      child.kill('SIGCONT');
    }
    await until('ivan to see grace again', () => onB.peers().includes(grace.peerId), 20_000);
    const toGrace = nextSignal(onStalled);
    onB.send(grace.peerId, 'across again');
    expect(await toGrace).toEqual({ from: ivan.peerId, data: 'across again' });
    const toIvan = nextSignal(onB);
    onStalled.send(ivan.peerId, 'and back');
    expect(await toIvan).toEqual({ from: grace.peerId, data: 'and back' });
    onStalled.close();
    onB.close();
    child.kill();
  });

  it('a signal nested thousands deep for a member elsewhere is refused, and both processes go on', async () => {
    const [judy, kim] = await Promise.all([identity('judy'), identity('kim')]);
    const { child, url: sender } = await childProcess();
    const b = await process_();
    const onB = await join(b.url, kim, 'deep');
    const probe = (await RawPeer.open(sender))!;
    expect(await probe.join('deep', judy)).toMatchObject({ type: 'joined', peers: [kim.peerId] });
    probe.send(`{"type":"signal","to":"${kim.peerId}","data":${'['.repeat(6000)}${']'.repeat(6000)}}`);
    expect(await probe.nextOf('error')).toMatchObject({ code: 'malformed' });
    expect(child.exitCode).toBeNull();
    const toKim = nextSignal(onB);
    probe.send({ type: 'signal', to: kim.peerId, data: [[['shallow']]] });
    expect(await toKim).toEqual({ from: judy.peerId, data: [[['shallow']]] });
    probe.terminate();
    onB.close();
    child.kill();
  });
});
