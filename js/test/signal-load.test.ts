/**
 * The signalling server under attack. It runs in a child process whose resident memory is
 * sampled all along, while 20 honest peers keep signalling in a room of their own and a
 * newcomer keeps joining it (another child process, so the attack cannot slow them down on
 * this side). Each attack is one test: a flood of connections and rooms, signals nested
 * thousands deep, members flooding members that read slowly, join/leave churn in a room
 * of 500 members, a room at `maxRoomSize` whose members hold join tokens, thousands of
 * sockets that never join, and members from many addresses that each make the server
 * hold all it may for one socket. Throughout, the server must stay up and under RSS_BOUND, and
 * keep answering honest joins; afterwards the memory must come back. The server takes its
 * shipped defaults but for fewer rooms, which makes the flood of rooms quicker. Nothing
 * here is timed: bench/signal-load.mjs runs the same attacks against the shipped command
 * and prints what they cost (honest join times among them).
 *
 * Attackers connect from other loopback addresses (127.0.0.2 and up) than the honest peers
 * (127.0.0.1), as they would from other hosts. They hold real identities: the server makes
 * every join prove one, and the attacks are what remains possible with them.
 */
import type { ChildProcess } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';

import { fromBase64, toBase64 } from '../src/identity/bytes.js';
import { Identity } from '../src/identity/index.js';
import { CHALLENGE_BYTES, createJoinToken, joinSignedBytes } from '../src/signal/index.js';
import { joinFrame } from '../src/signal/protocol.js';
import { SIGNAL_SERVER_DEFAULTS } from '../src/signal/node.js';
import { RawPeer, ask, serverUnderTest, startHoarders, type ServerUnderTest } from './signal-support.js';

const RSS_BOUND = 200 * 1024 * 1024;
const HONEST = 20;
const SERVER_OPTIONS = { port: 0, host: '127.0.0.1', maxRooms: 200 };
let operator: Identity;
/** The attackers' sockets of the current test, cut after it whatever happened. */
const opened: Array<{ terminate(): void }> = [];

let attacked: ServerUnderTest;
let child: ChildProcess;
let prober: ChildProcess;
let url = '';

interface ServerStats {
  connections: number;
  rooms: number;
  members: number;
  addresses: number;
  droppedSignals: number;
  slowReaders: number;
  faults: number;
  heldBytes: number;
  evictions: number;
}

interface ChildStats {
  rss: number;
  heapUsed: number;
  server: ServerStats;
}

/** Asks the server's process `what` ('stats', after a full collection, or 'peek'). */
function childStats(what: 'stats' | 'peek' = 'stats'): Promise<ChildStats> {
  return ask<ChildStats>(child, what, what);
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
const identities = (n: number): Promise<Identity[]> => Promise.all(Array.from({ length: n }, () => Identity.generate()));

/** `n` sockets from `address` (null where the server refused one). */
async function openMany(address: string, n: number): Promise<Array<RawPeer | null>> {
  const peers = await Promise.all(Array.from({ length: n }, () => RawPeer.open(url, address)));
  for (const peer of peers) if (peer !== null) opened.push(peer);
  return peers;
}

/** The most sockets the server held at once while `attack` ran (its counters, sampled; each sample also to `look`). */
async function mostHeldDuring(attack: () => Promise<void>, look: (stats: ChildStats) => void = () => undefined): Promise<number> {
  let most = 0;
  let sampling = true;
  const sampled = (async () => {
    while (sampling) {
      const stats = await childStats('peek');
      look(stats);
      most = Math.max(most, stats.server.connections);
      await sleep(20);
    }
  })();
  try {
    await attack();
  } finally {
    sampling = false;
    await sampled;
  }
  return most;
}

/** `n` sockets from `address`, each joined into `room` under an identity of its own. */
async function joinMany(address: string, n: number, room: string): Promise<RawPeer[]> {
  const [peers, keys] = await Promise.all([openMany(address, n), identities(n)]);
  return Promise.all(peers.map(async (peer, i) => {
    expect(peer).not.toBeNull();
    expect((await peer!.join(room, keys[i]!)).type).toBe('joined');
    return peer!;
  }));
}

/**
 * A member that joins `room` with `token` and then reads everything without looking at it
 * (a thousand of them parsing every presence message would be the load, not the server).
 */
function quietMember(address: string, room: string, identity: Identity, token: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { localAddress: address });
    opened.push(socket);
    socket.once('error', reject);
    socket.once('message', async (data) => {
      const challenge = fromBase64((JSON.parse(String(data)) as { nonce: string }).nonce, CHALLENGE_BYTES)!;
      const sig = await identity.sign(joinSignedBytes(challenge, room, identity.peerId, 'client'));
      socket.once('message', (reply) => {
        const type = (JSON.parse(String(reply)) as { type: string }).type;
        if (type === 'joined') resolve(socket);
        else reject(new Error(`a member of ${room} was answered ${String(reply)}`));
      });
      socket.send(joinFrame(room, identity.peerId, 'client', identity.publicKey, sig, token));
    });
  });
}

function tokenFor(identity: Identity, room: string): Promise<string> {
  return createJoinToken(operator, { peer: identity.peerId, role: 'client', room, expiresAt: Math.floor(Date.now() / 1000) + 3600 });
}

interface ProberReport {
  joins: number;
  failedJoins: number;
  signals: number;
  closed: number;
}

/** What the honest side saw since the last report. */
function honestReport(): Promise<ProberReport> {
  return ask<ProberReport>(prober, 'report', 'report');
}

beforeAll(async () => {
  operator = await Identity.generate();
  const policy = { rooms: { tokens: { operators: [toBase64(operator.publicKey)] } } };
  attacked = await serverUnderTest({ ...SERVER_OPTIONS, policy });
  ({ child, prober, url } = attacked);
}, 30_000);

afterEach(async () => {
  for (const socket of opened.splice(0)) socket.terminate();
  // the next attack starts from the honest peers alone (and the newcomer the prober may have in)
  while ((await childStats('peek')).server.connections > HONEST + 1) await sleep(50);
}, 60_000);

afterAll(() => attacked?.close());

describe('the signalling server under attack (child process, loopback)', () => {
  /**
   * Runs `attack` and checks the honest side throughout: the server up, every join
   * answered (how fast is the bench's to say), signals flowing, nobody cut — and, however
   * short the attack, a join and a signal completed since it began.
   */
  async function withHonestPeers(attack: () => Promise<void>): Promise<void> {
    await honestReport();
    await attack();
    expect(child.exitCode).toBeNull();
    const honest = await honestReport();
    while (honest.joins === 0 || honest.signals === 0) {
      await sleep(100);
      const more = await honestReport();
      for (const key of ['joins', 'failedJoins', 'signals'] as const) honest[key] += more[key];
      honest.closed = more.closed;
    }
    expect(honest.failedJoins).toBe(0);
    expect(honest.closed).toBe(0);
    expect(attacked.peakRss()).toBeLessThan(RSS_BOUND);
  }

  it('caps connections per address and the rooms a flood of joins may create', () => withHonestPeers(async () => {
    const keys = await identities(240);
    const most = await mostHeldDuring(async () => void (await openMany('127.0.0.2', 300)));
    // four more addresses, each joining its sockets into fresh rooms as soon as they open
    const replies: Array<{ type: string; code?: string } | undefined> = [];
    for (const [a, address] of ['127.0.0.3', '127.0.0.4', '127.0.0.5', '127.0.0.6'].entries()) {
      await Promise.all(keys.slice(a * 60, a * 60 + 60).map(async (key, k) => {
        const socket = (await openMany(address, 1))[0];
        replies.push(await socket?.join(`flood-${a * 60 + k}`, key));
      }));
    }
    // one address's 64, and the honest peers with their newcomer
    expect(most).toBeLessThanOrEqual(64 + HONEST + 1);
    expect(replies.filter((r) => r?.type === 'joined').length).toBeLessThanOrEqual(SERVER_OPTIONS.maxRooms);
    expect(replies.filter((r) => r?.code === 'too-many-rooms').length).toBeGreaterThan(0);
  }), 60_000);

  it('refuses signals nested thousands deep, in an open room and in one admitting by token', () => withHonestPeers(async () => {
    const target = (await joinMany('127.0.0.10', 1, 'deep'))[0]!;
    const open = (await joinMany('127.0.0.10', 20, 'deep'));
    const admitted = await Promise.all((await identities(20)).map(async (identity) => {
      const peer = (await openMany('127.0.0.11', 1))[0]!;
      expect(await peer.join('tokens', identity, 'client', { token: await tokenFor(identity, 'tokens') })).toMatchObject({ type: 'joined' });
      return peer;
    }));
    const inTokens = admitted[0]!.peerId!;
    const deepArrays = (to: string, depth: number) => `{"type":"signal","to":"${to}","data":${'['.repeat(depth)}${']'.repeat(depth)}}`;
    const deepObjects = (to: string, depth: number) => `{"type":"signal","to":"${to}","data":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}`;
    for (const peer of open) peer.send(deepArrays(target.peerId!, 6000));
    for (const peer of admitted.slice(1)) peer.send(deepObjects(inTokens, 5000));
    const replies = await Promise.all([...open, ...admitted.slice(1)].map((peer) => peer.nextOf('error')));
    expect(new Set(replies.map((r) => r.code))).toEqual(new Set(['malformed']));
  }), 60_000);

  it('keeps members that read slowly while others flood them, dropping the signals they cannot take', () => withHonestPeers(async () => {
    const slow = await joinMany('127.0.0.7', 33, 'slow');
    // they stop reading: the kernel's buffers fill, then the server's
    for (const peer of slow) peer.pause();
    // 60 senders from one more address, each with 30 signals of 60 kB for them: far more
    // than the kernel's socket buffers and the server's bound for one reader together
    const senders = await joinMany('127.0.0.8', 60, 'slow');
    const payload = 'x'.repeat(60_000);
    const frames = slow.map((peer) => Buffer.from(JSON.stringify({ type: 'signal', to: peer.peerId, data: payload })));
    for (let round = 0; round < 30; round++) {
      // half of it for the first slow reader; the rest spread over all of them
      senders.forEach((peer, i) => peer.socket.send(frames[round % 2 === 0 ? 0 : (round + i) % frames.length]!, { binary: false }));
      await yieldToLoop();
    }
    // the server works through what it takes of it (the kernel's socket buffers hold some
    // megabytes first, and a busy machine reads slower): until it has dropped some
    for (let waited = 0; waited < 30_000 && (await childStats('peek')).server.droppedSignals === 0; waited += 250) await sleep(250);
    const closedCodes: number[] = [];
    for (const peer of slow) void peer.closed.then((code) => closedCodes.push(code));
    // a slow reader that reads again is still a member: a signal sent now reaches it
    slow[0]!.resume();
    const heard = new Promise<unknown>((resolve) => slow[0]!.socket.on('message', (data) => {
      const message = JSON.parse(String(data)) as { type: string; data?: unknown };
      if (message.type === 'signal' && message.data === 'after the flood') resolve(message.data);
    }));
    // from a member that did not flood (a flooder's own bytes wait behind its flood), and
    // again until it arrives: while the backlog drains, a signal may still be dropped
    const honest = (await joinMany('127.0.0.12', 1, 'slow'))[0]!;
    const resend = setInterval(() => honest.send({ type: 'signal', to: slow[0]!.peerId, data: 'after the flood' }), 250);
    try {
      expect(await heard).toBe('after the flood');
    } finally {
      clearInterval(resend);
    }
    expect(closedCodes).toEqual([]);
    expect((await childStats('peek')).server.droppedSignals).toBeGreaterThan(0);
  }), 90_000);

  it('bounds what join/leave churn in a room of 500 costs its members', () => withHonestPeers(async () => {
    const members: RawPeer[] = [];
    let received = 0;
    for (let a = 0; members.length < 500; a++) members.push(...(await joinMany(`127.0.1.${10 + a}`, 50, 'big')));
    for (const member of members) member.socket.on('message', () => received++);
    const churners = (await openMany('127.0.0.9', 10)).map((peer) => peer!);
    const churnKeys = await identities(churners.length);
    await sleep(500);
    const before = received;
    // each churner joins and leaves as fast as the server lets it, 100 times or for 3 s
    await Promise.all(churners.map(async (peer, k) => {
      const until = performance.now() + 3000;
      for (let cycle = 0; cycle < 100 && performance.now() < until; cycle++) {
        peer.send(await peer.signedJoin('big', churnKeys[k]!));
        peer.send({ type: 'leave' });
        // joined, then a fresh challenge after the leave; or refused (rate-limited, said once a second)
        for (;;) {
          const reply = await peer.next(200).catch(() => null);
          if (reply === null || reply.type === 'challenge' || reply.type === 'error') break;
        }
      }
    }));
    await sleep(1500);
    const caused = received - before;
    // uncoalesced, 2,000 joins and leaves would be 1,000,000 messages to the members
    expect(caused).toBeLessThan(50 * members.length);
  }), 60_000);

  it('lets a newcomer into a room at maxRoomSize whose members hold join tokens, and tells it every one', () => withHonestPeers(async () => {
    const full = SIGNAL_SERVER_DEFAULTS.maxRoomSize;
    const keys = await identities(full - 1);
    const tokens = await Promise.all(keys.map((identity) => tokenFor(identity, 'tokens')));
    const members: WebSocket[] = [];
    for (let i = 0; i < keys.length; i += 60) {
      const address = `127.0.3.${1 + i / 60}`;
      members.push(...(await Promise.all(keys.slice(i, i + 60).map((identity, k) => quietMember(address, 'tokens', identity, tokens[i + k]!)))));
    }
    await sleep(500);
    const newcomer = (await openMany('127.0.4.1', 1))[0]!;
    const me = await Identity.generate();
    const joined = await newcomer.join('tokens', me, 'client', { token: await tokenFor(me, 'tokens') });
    expect(joined.type).toBe('joined');
    const told = new Map<string, unknown>();
    const take = (peers: string[], given: unknown): void => {
      for (const peer of peers) told.set(peer, (given as Record<string, unknown> | undefined)?.[peer]);
    };
    take(joined.peers!, joined.tokens);
    while (told.size < keys.length) {
      const page = await newcomer.reply();
      expect(page.type).toBe('presence');
      take(page.joined!, page.tokens);
    }
    expect([...told.keys()].sort()).toEqual(keys.map((identity) => identity.peerId).sort());
    expect(keys.every((identity, i) => told.get(identity.peerId) === tokens[i])).toBe(true);
    expect(newcomer.socket.readyState).toBe(WebSocket.OPEN);
    expect(members.every((member) => member.readyState === WebSocket.OPEN)).toBe(true);
  }), 120_000);

  it('closes sockets that never join, and caps how many one address holds', () => withHonestPeers(async () => {
    const idle: RawPeer[] = [];
    const most = await mostHeldDuring(async () => {
      for (let a = 0; a < 8; a++) idle.push(...(await openMany(`127.0.2.${a + 1}`, 500)).filter((s): s is RawPeer => s !== null));
    });
    const codes = await Promise.all(idle.map((peer) => peer.closed));
    // 8 addresses of 64 at most, and the honest peers with their newcomer
    expect(most).toBeLessThanOrEqual(8 * 64 + HONEST + 1);
    expect(new Set(codes)).toEqual(new Set([4000]));
  }), 120_000);

  it('holds within its budget members from many addresses that each make it hold all it may for one socket', () => withHonestPeers(async () => {
    // the connection cap less two addresses' worth, for the honest peers' room
    const count = 896;
    const hoarders = startHoarders(url, count, '127.0.5.1');
    opened.push({ terminate: () => hoarders.child.kill() });
    expect(await hoarders.told('joined')).toMatchObject({ members: count, refused: 0 });
    const held: number[] = [];
    const sampled = mostHeldDuring(async () => {
      hoarders.child.send('attack');
      await hoarders.told('attacked');
      await sleep(4000); // the server works through what it took of it
    }, (stats) => held.push(stats.server.heldBytes));
    await sampled;
    // every socket at its caps would be count × (maxBufferedBytes + 64 KiB): 280 MiB
    expect(attacked.peakRss()).toBeLessThan(RSS_BOUND);
    expect(Math.max(...held)).toBeLessThanOrEqual(SIGNAL_SERVER_DEFAULTS.maxHeldBytes);
    expect((await childStats('peek')).server.evictions).toBeGreaterThan(0);
  }), 120_000);

  it('gives the memory back once the attackers are gone', async () => {
    await sleep(1000);
    const stats = await childStats();
    // the honest peers, and the newcomer the prober may have in at this moment
    expect(stats.server.connections).toBeGreaterThanOrEqual(HONEST);
    expect(stats.server.connections).toBeLessThanOrEqual(HONEST + 2);
    expect(stats.server.members).toBeLessThanOrEqual(HONEST + 1);
    expect(stats.server.rooms).toBe(1);
    expect(stats.server.addresses).toBe(1);
    expect(stats.server.faults).toBe(0);
    expect(stats.heapUsed).toBeLessThan(40 * 1024 * 1024);
  }, 30_000);
});
