/**
 * The shipped signalling command under the probes an attacker runs from outside: the
 * `bytesandbrains-signal` process with no option but a room policy, attacked over raw
 * WebSockets and raw TCP from loopback addresses of its own (127.0.0.2 and up), while an
 * honest member (127.0.0.1) keeps being served. Each probe checks the process is still up,
 * the honest member still in, and a newcomer still admitted.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect as tcpConnect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';

import { Identity, toBase64 } from '../src/identity/index.js';
import { SignalClient, createJoinToken } from '../src/signal/index.js';
import { RawPeer, WS } from './signal-support.js';
import { packageRoot } from './support.js';

let dir = '';
let operator: Identity;
let server: ChildProcess;
let url = '';
let exited: Promise<number | null>;
const sockets: Array<{ terminate(): void }> = [];
const clients: SignalClient[] = [];

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Starts the command as an operator would, on a free port; resolves with its address. */
async function startCommand(): Promise<void> {
  server = spawn(process.execPath, [join(packageRoot, 'bin', 'bytesandbrains-signal.mjs'), '--port', '0', '--policy', join(dir, 'policy.json')], { stdio: ['ignore', 'pipe', 'pipe'] });
  exited = new Promise((resolve) => server.once('exit', (code) => resolve(code)));
  url = await new Promise<string>((resolve, reject) => {
    let out = '';
    server.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening on (ws:\/\/\S+)/.exec(out);
      if (match !== null) resolve(match[1]!);
    });
    server.once('exit', (code) => reject(new Error(`bytesandbrains-signal exited with ${code}`)));
  });
}

function running(): boolean {
  return server.exitCode === null && server.signalCode === null;
}

async function member(room: string, token?: string): Promise<SignalClient> {
  const identity = await Identity.generate();
  const grant = token ?? (room === 'fed' ? await tokenFor(identity, room) : undefined);
  const client = await SignalClient.connect({ url, room, identity, WebSocket: WS, ...(grant === undefined ? {} : { token: grant }) });
  clients.push(client);
  return client;
}

function tokenFor(identity: Identity, room: string): Promise<string> {
  return createJoinToken(operator, { peer: identity.peerId, role: 'client', room, expiresAt: Math.floor(Date.now() / 1000) + 3600 });
}

async function attacker(room: string, address = '127.0.0.2'): Promise<RawPeer> {
  const peer = await RawPeer.open(url, address);
  if (peer === null) throw new Error('the server refused the attacker');
  sockets.push(peer);
  const identity = await Identity.generate();
  const reply = await peer.join(room, identity, 'client', room === 'fed' ? { token: await tokenFor(identity, room) } : {});
  expect(reply.type).toBe('joined');
  return peer;
}

/** A signal whose data is arrays nested `depth` deep: 2 bytes a level. */
function deepSignal(to: string, depth: number): string {
  return `{"type":"signal","to":"${to}","data":${'['.repeat(depth)}${']'.repeat(depth)}}`;
}

/** The process is up, `honest` is still in and hears a signal, and a newcomer gets in. */
async function stillServes(honest: SignalClient, room: string): Promise<void> {
  await sleep(300);
  expect(running()).toBe(true);
  expect(honest.closed).toBe(false);
  const newcomer = await member(room);
  const heard = new Promise<unknown>((resolve) => honest.events.on('signal', (_from, data) => resolve(data)));
  newcomer.send(honest.self, 'still here');
  expect(await heard).toBe('still here');
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'bb-probes-'));
  operator = await Identity.generate();
  writeFileSync(join(dir, 'policy.json'), JSON.stringify({ rooms: { fed: { operators: [toBase64(operator.publicKey)] } } }));
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

beforeEach(startCommand);

afterEach(async () => {
  for (const client of clients.splice(0)) client.close();
  for (const socket of sockets.splice(0)) socket.terminate();
  server.kill();
  await exited;
});

describe('bytesandbrains-signal with its defaults, probed from outside', () => {
  for (const room of ['open', 'fed']) {
    it(`takes a signal nested thousands deep in ${room === 'fed' ? 'a room admitting by token' : 'an open room'} without going down`, async () => {
      const honest = await member(room);
      const probe = await attacker(room);
      probe.send(deepSignal(honest.self, 6000)); // 12 kB
      expect(await probe.nextOf('error')).toMatchObject({ code: 'malformed' });
      await stillServes(honest, room);
    });
  }

  it('lets a newcomer into an open room after hundreds of sockets joined with junk tokens', async () => {
    const honest = await member('open');
    const junk = 'x'.repeat(1000);
    const replies: string[] = [];
    for (let a = 0; a < 5; a++) {
      const peers = await Promise.all(Array.from({ length: 60 }, () => RawPeer.open(url, `127.0.0.${10 + a}`)));
      await Promise.all(peers.map(async (peer) => {
        sockets.push(peer!);
        replies.push((await peer!.join('open', await Identity.generate(), 'client', { token: junk })).type);
      }));
    }
    expect(replies.filter((type) => type === 'joined')).toEqual([]); // a token nobody can verify is refused
    await stillServes(honest, 'open');
  }, 60_000);

  it('keeps a member that reads slowly while others flood it, and drops their signals instead', async () => {
    const victim = await attacker('open', '127.0.0.3');
    victim.pause(); // a page busy training: it reads nothing for a while
    const flooders = await Promise.all(Array.from({ length: 60 }, () => attacker('open', '127.0.0.4')));
    const frame = JSON.stringify({ type: 'signal', to: victim.peerId, data: 'x'.repeat(60_000) });
    for (let round = 0; round < 8; round++) {
      for (const flooder of flooders) flooder.send(frame);
      await sleep(250);
    }
    const codes = new Set<number>();
    void victim.closed.then((code) => codes.add(code));
    victim.resume();
    await sleep(2000);
    expect(codes).toEqual(new Set());
    expect(victim.socket.readyState).toBe(victim.socket.OPEN);
    // it is still a member: what is sent to it once the flood is over arrives
    const honest = await member('open');
    const after = new Promise<unknown>((resolve) => victim.socket.on('message', (data) => {
      const message = JSON.parse(String(data)) as { type: string; from?: string; data?: unknown };
      if (message.type === 'signal' && message.from === honest.self) resolve(message.data);
    }));
    // sent again until it arrives: while its backlog drains, a signal may still be dropped
    const resend = setInterval(() => honest.send(victim.peerId!, 'after the flood'), 250);
    try {
      expect(await after).toBe('after the flood');
    } finally {
      clearInterval(resend);
    }
    expect(running()).toBe(true);
  }, 60_000);

  it('counts TCP connections that never upgrade against the cap per address', async () => {
    const honest = await member('open');
    const held: Socket[] = [];
    await Promise.all(Array.from({ length: 200 }, () => new Promise<void>((resolve) => {
      const socket = tcpConnect({ host: '127.0.0.1', port: Number(new URL(url).port), localAddress: '127.0.0.5' }, () => resolve());
      socket.on('error', () => resolve());
      held.push(socket);
      sockets.push({ terminate: () => socket.destroy() });
    })));
    // those past the cap are answered 503 at once; a loaded server may take a moment
    const unanswered = (): number => held.filter((socket) => !socket.destroyed && socket.readyState === 'open' && socket.bytesRead === 0).length;
    await vi.waitFor(() => expect(unanswered()).toBeLessThanOrEqual(64), { timeout: 20_000, interval: 200 });
    await stillServes(honest, 'open');
  });
});
