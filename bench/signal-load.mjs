#!/usr/bin/env node
// What attacks on the signalling server cost, against the shipped command with its
// defaults (`bytesandbrains-signal --policy`, one room admitting by join token): the
// attacks of js/test/signal-load.test.ts and signal-probes.test.ts, each on a fresh server,
// from loopback addresses of its own (127.0.0.2 and up). Throughout, 20 honest peers
// signal and a newcomer keeps joining their room (js/test/fixtures/signal-prober.mjs, a
// process of its own). Printed per attack: the server's resident memory before and at its
// peak, the honest joins (how many failed, the median and the slowest), and what the
// attack achieved.
//
//   (cd js && npm run build) && node bench/signal-load.mjs [--package DIR] [--only TEXT] [--hoarders N]
//
// --package attacks the command of another build of the package (say, an older commit's
// js/ after `npm run build`); the attackers and the honest peers stay this tree's. --only
// runs the attacks whose name contains TEXT. --hoarders sets how many members hold all
// they may (default: this tree's connection cap less 128, for the honest peers).
import { fork, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const pkg = join(here, '..', 'js');
const option = (name, fallback) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : fallback);
const attacked = resolve(option('--package', pkg));
const only = option('--only', '');
const WebSocket = createRequire(join(pkg, 'package.json'))('ws');
const { Identity, toBase64, fromBase64 } = await import(join(pkg, 'dist', 'identity', 'index.js'));
const { createJoinToken, joinSignedBytes } = await import(join(pkg, 'dist', 'signal', 'index.js'));
const { SIGNAL_SERVER_DEFAULTS } = await import(join(pkg, 'dist', 'signal', 'node.js'));

const ATTACK_TIMEOUT_MS = 90_000;
/** Attacking members the connection cap leaves room for beside the honest peers, 64 to an address. */
const HOARDERS = Number(option('--hoarders', SIGNAL_SERVER_DEFAULTS.maxConnections - 2 * 64));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const mib = (bytes) => (bytes / 1024 / 1024).toFixed(0);
const dir = mkdtempSync(join(tmpdir(), 'bb-signal-bench-'));
const operator = await Identity.generate();
writeFileSync(join(dir, 'policy.json'), JSON.stringify({ rooms: { tokens: { operators: [toBase64(operator.publicKey)] } } }));

/** The command as an operator starts it, and the honest peers on it. */
async function start() {
  const server = spawn(process.execPath, [join(attacked, 'bin', 'bytesandbrains-signal.mjs'), '--port', '0', '--policy', join(dir, 'policy.json')], { stdio: ['ignore', 'pipe', 'ignore'] });
  const exited = new Promise((resolve) => server.once('exit', (code, signal) => resolve(`server process EXITED (${signal ?? code})`)));
  const url = await new Promise((resolve, reject) => {
    let out = '';
    server.stdout.on('data', (chunk) => {
      out += chunk;
      const match = /listening on (ws:\/\/\S+)/.exec(out);
      if (match !== null) resolve(match[1]);
    });
    server.once('exit', (code) => reject(new Error(`bytesandbrains-signal exited with ${code}`)));
  });
  const prober = fork(join(pkg, 'test', 'fixtures', 'signal-prober.mjs'), [url]);
  await new Promise((resolve) => prober.once('message', resolve));
  return { server, prober, url, exited };
}

let current = null;
process.once('exit', () => {
  current?.server.kill();
  current?.prober.kill();
  rmSync(dir, { recursive: true, force: true });
});
for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, () => process.exit(1));

function rssOf(pid) {
  try {
    return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) * 1024;
  } catch {
    return 0;
  }
}

function report(prober) {
  return new Promise((resolve) => {
    const on = (message) => {
      if (message.type !== 'report') return;
      prober.off('message', on);
      resolve(message);
    };
    prober.on('message', on);
    prober.send('report');
  });
}

// --- the attackers' sockets
const opened = [];

/**
 * A socket from `address` joined to `room` as `identity` (with `token`); resolves with it
 * and the server's answer to the join, or rejects if it is closed first. What follows the
 * answer goes to `then` (attached in the same read, so nothing is missed).
 */
function member(url, room, identity, address, { token, then = () => {} } = {}) {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { localAddress: address });
    opened.push(socket);
    socket.once('error', reject);
    socket.once('unexpected-response', () => reject(new Error(`refused from ${address}`)));
    socket.once('close', (code) => reject(new Error(`closed with ${code}`)));
    socket.once('message', async (data) => {
      const challenge = fromBase64(JSON.parse(String(data)).nonce, 32);
      const sig = await identity.sign(joinSignedBytes(challenge, room, identity.peerId, 'client'));
      socket.once('message', (reply) => {
        socket.on('message', then);
        resolve({ socket, joined: JSON.parse(String(reply)) });
      });
      socket.send(JSON.stringify({ type: 'join', room, peer: identity.peerId, role: 'client', key: toBase64(identity.publicKey), sig: toBase64(sig), ...(token === undefined ? {} : { token }) }));
    });
  });
}

const tokenFor = (identity, room) => createJoinToken(operator, { peer: identity.peerId, role: 'client', room, expiresAt: Math.floor(Date.now() / 1000) + 3600 });
const identities = (n) => Promise.all(Array.from({ length: n }, () => Identity.generate()));
const nextOf = (socket, type) => new Promise((resolve) => {
  const on = (data) => {
    const message = JSON.parse(String(data));
    if (message.type !== type) return;
    socket.off('message', on);
    resolve(message);
  };
  socket.on('message', on);
});
const closedWith = (socket) => new Promise((resolve) => socket.once('close', (code) => resolve(code)));

const attacks = [
  ['none (baseline, 3 s)', async () => {
    await sleep(3000);
    return 'the honest peers alone';
  }],
  ['40 signals nested 6,000 deep (12 kB), open and token rooms', async (url) => {
    const target = await member(url, 'deep', await Identity.generate(), '127.0.0.2');
    const keys = await identities(40);
    const attackers = await Promise.all(keys.map(async (identity, i) => (
      i < 20 ? member(url, 'deep', identity, '127.0.0.2') : member(url, 'tokens', identity, '127.0.0.3', { token: await tokenFor(identity, 'tokens') })
    )));
    const replies = attackers.map(({ socket }) => nextOf(socket, 'error'));
    attackers.forEach(({ socket }, i) => socket.send(`{"type":"signal","to":"${i < 20 ? target.joined.peer : keys[20].peerId}","data":${'['.repeat(6000)}${']'.repeat(6000)}}`));
    const codes = (await Promise.all(replies)).map((reply) => reply.code);
    return `${codes.filter((code) => code === 'malformed').length}/40 refused as malformed`;
  }],
  ['300 sockets with 1,000-character junk tokens, open room', async (url) => {
    const keys = await identities(300);
    const outcomes = await Promise.all(keys.map((identity, i) => member(url, 'junk', identity, `127.0.0.${10 + Math.floor(i / 60)}`, { token: 'x'.repeat(1000) })
      .then(({ joined }) => joined.code ?? joined.type, () => 'closed')));
    const count = (outcome) => outcomes.filter((o) => o === outcome).length;
    const started = performance.now();
    const newcomer = await member(url, 'junk', await Identity.generate(), '127.0.0.20').then(() => `joined in ${(performance.now() - started).toFixed(0)} ms`, (error) => `was ${error.message}`);
    return `${count('not-admitted')} refused, ${count('joined')} joined, ${count('closed')} closed; a newcomer ${newcomer}`;
  }],
  [`a room at maxRoomSize (${SIGNAL_SERVER_DEFAULTS.maxRoomSize}) whose members hold join tokens`, async (url) => {
    const keys = await identities(SIGNAL_SERVER_DEFAULTS.maxRoomSize - 1);
    const tokens = await Promise.all(keys.map((identity) => tokenFor(identity, 'tokens')));
    let members = 0;
    for (let i = 0; i < keys.length; i += 60) {
      const batch = keys.slice(i, i + 60).map((identity, k) => member(url, 'tokens', identity, `127.0.3.${1 + i / 60}`, { token: tokens[i + k] }));
      members += (await Promise.allSettled(batch)).filter((result) => result.status === 'fulfilled' && result.value.joined.type === 'joined').length;
    }
    await sleep(500);
    const me = await Identity.generate();
    const told = new Set();
    let pages = 1;
    let complete;
    const allTold = new Promise((resolve) => (complete = resolve));
    const take = (data) => {
      const page = JSON.parse(String(data));
      if (page.type !== 'presence') return;
      pages++;
      for (const peer of page.joined) if (page.tokens?.[peer] !== undefined) told.add(peer);
      if (told.size >= keys.length) complete();
    };
    const started = performance.now();
    const answer = await member(url, 'tokens', me, '127.0.4.1', { token: await tokenFor(me, 'tokens'), then: take }).catch((error) => error);
    if (answer instanceof Error) return `${members} members joined; the newcomer was ${answer.message} before its answer`;
    const { socket, joined } = answer;
    const joinedMs = performance.now() - started;
    for (const peer of joined.peers ?? []) if (joined.tokens?.[peer] !== undefined) told.add(peer);
    if (told.size >= keys.length) complete();
    const code = await Promise.race([allTold.then(() => null), closedWith(socket)]);
    if (code !== null) return `${members} members joined; the newcomer was CLOSED with ${code} after hearing of ${told.size}`;
    return `the newcomer joined in ${joinedMs.toFixed(0)} ms and held all ${keys.length} members' tokens after ${(performance.now() - started).toFixed(0)} ms (${pages} messages)`;
  }],
  ['60 members flood one that reads nothing (8 × 60 kB signals each)', async (url) => {
    const victim = await member(url, 'busy', await Identity.generate(), '127.0.0.30');
    const closed = closedWith(victim.socket);
    victim.socket._socket.pause();
    const flooders = await Promise.all((await identities(60)).map((identity) => member(url, 'busy', identity, '127.0.0.31')));
    const frame = JSON.stringify({ type: 'signal', to: victim.joined.peer, data: 'x'.repeat(60_000) });
    for (let round = 0; round < 8; round++) {
      for (const { socket } of flooders) socket.send(frame);
      await sleep(250);
    }
    victim.socket._socket.resume();
    const honest = await member(url, 'busy', await Identity.generate(), '127.0.0.32');
    const started = performance.now();
    const heard = new Promise((resolve) => victim.socket.on('message', (data) => String(data).includes('"after the flood"') && resolve(null)));
    const resend = setInterval(() => honest.socket.send(JSON.stringify({ type: 'signal', to: victim.joined.peer, data: 'after the flood' })), 100);
    const code = await Promise.race([heard, closed]);
    clearInterval(resend);
    return code === null ? `victim kept its place; a signal sent after the flood reached it in ${(performance.now() - started).toFixed(0)} ms` : `victim CLOSED with ${code}`;
  }],
  [`${HOARDERS} members from ${HOARDERS / 64} addresses, each holding a full queue and an unfinished 64 KiB frame`, async (url) => {
    // small-window-sockets.py opens the connections (the kernel takes little of what is
    // written to them), then runs js/test/fixtures/signal-hoarders.mjs on them
    const fixtures = join(pkg, 'test', 'fixtures');
    const hoarders = spawn('/usr/bin/python3', [join(fixtures, 'small-window-sockets.py'), '127.0.0.1', new URL(url).port, String(HOARDERS), '64', '127.0.5.1',
      '--', process.execPath, join(fixtures, 'signal-hoarders.mjs'), url], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    opened.push({ terminate: () => hoarders.kill() });
    const told = (type) => new Promise((resolve, reject) => {
      hoarders.on('message', (message) => message.type === type && resolve(message));
      hoarders.once('exit', (code) => reject(new Error(`the hoarders exited with ${code}`)));
    });
    const { members, refused } = await told('joined');
    hoarders.send('attack');
    await told('attacked');
    await sleep(5000); // the server works through what it took
    return `${members} joined (${refused} refused or closed), and stopped reading with 4 × 60 kB signals for each and 64 KiB of a frame each`;
  }],
  ['200 TCP connections from one address that never upgrade', async (url) => {
    const port = Number(new URL(url).port);
    const sockets = await Promise.all(Array.from({ length: 200 }, () => new Promise((resolve) => {
      const socket = tcpConnect({ host: '127.0.0.1', port, localAddress: '127.0.0.40' }, () => resolve(socket));
      socket.on('error', () => resolve(socket));
      opened.push({ terminate: () => socket.destroy() });
    })));
    await sleep(1000);
    const held = () => sockets.filter((s) => !s.destroyed && s.readyState === 'open' && s.bytesRead === 0).length;
    const first = held();
    await sleep(SIGNAL_SERVER_DEFAULTS.upgradeTimeoutMs + 1000);
    return `${first} held after 1 s, ${held()} after ${SIGNAL_SERVER_DEFAULTS.upgradeTimeoutMs / 1000 + 1} s`;
  }],
];

console.log(`attacking ${join(attacked, 'bin', 'bytesandbrains-signal.mjs')}`);
console.log('| attack | server RSS MiB, before → peak | honest joins (failed) | honest join median / slowest ms | outcome |');
console.log('|---|---|---|---|---|');
for (const [name, attack] of attacks.filter(([name]) => name.includes(only))) {
  current = await start();
  const { server, prober, url, exited } = current;
  await report(prober);
  const before = rssOf(server.pid);
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, rssOf(server.pid))), 50);
  const outcome = await Promise.race([
    attack(url).catch((error) => `the attack failed: ${error.message}`),
    exited,
    sleep(ATTACK_TIMEOUT_MS).then(() => `not over after ${ATTACK_TIMEOUT_MS / 1000} s`),
  ]);
  clearInterval(sampler);
  const honest = await report(prober);
  const down = server.exitCode !== null || server.signalCode !== null;
  const times = honest.joins > honest.failedJoins ? `${honest.medianJoinMs.toFixed(0)} / ${honest.slowestJoinMs.toFixed(0)}` : '—';
  console.log(`| ${name} | ${mib(before)} → ${mib(peak)} | ${honest.joins} (${honest.failedJoins}) | ${times} | ${outcome}${down && !outcome.includes('EXITED') ? '; server process EXITED' : ''} |`);
  for (const socket of opened.splice(0)) socket.terminate();
  prober.send('close');
  server.kill();
  await Promise.all([exited, new Promise((resolve) => prober.once('exit', resolve))]);
  current = null;
}
