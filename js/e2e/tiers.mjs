#!/usr/bin/env node
// A federation past one machine's pieces (run by scripts/e2e.sh in its network namespace):
//
//   * Redis (redis-server, started here) and two signalling processes
//     (bin/bytesandbrains-signal.mjs --redis URL --policy FILE) sharing the room;
//   * hierarchical_digits: a root and two edge aggregators (Node), eight clients — two
//     Chromium pages, two Firefox pages and four Node peers — each edge with clients on both
//     signalling processes, so links are signalled across processes; every peer joins with
//     a join token of this run's operator, checked by whichever process it reached and,
//     as the room admits by token, by every node (installed with the room's admission);
//     the edges hold client tokens: to the root they are clients;
//   * the root's accuracy after ROUNDS rounds must be within a point of flat FedAvg
//     (federated_digits on the same eight shards, run here on a LocalNetwork).
// Ends with `e2e: N passed, M failed`.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { chromium } from 'playwright-core';
import puppeteer from 'puppeteer-core';

import {
  BbNode,
  Compiler,
  LocalNetwork,
  connectPeer,
  loadBb,
  peerIdFromU64,
  peersValue,
  roundReporter,
  tensorValue,
} from '../dist/index.js';
import { installDigitsClient, installDigitsServer, splitDigits, startDigitsServer } from '../dist/examples/index.js';
import { Identity } from '../dist/identity/index.js';
import { createJoinToken } from '../dist/signal/index.js';
import { CHROMIUM_ARGS, check, digitsCsv, openPeer, packageRoot, servePages, sleep, summary, until, wasmBytes } from './common.mjs';

const ROUNDS = 30;
const CLIENTS = 8;
const PER_EDGE = 4;
const room = 'tiers';
const work = mkdtempSync(join(tmpdir(), 'bb-tiers-'));
const children = [];
const freePort = () => new Promise((resolve) => {
  const probe = createServer().listen(0, '127.0.0.1', () => {
    const { port } = probe.address();
    probe.close(() => resolve(port));
  });
});
/** Starts a child process and resolves once its output shows `ready`. */
function start(command, args, ready) {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let output = '';
  return new Promise((resolve, reject) => {
    const take = (chunk) => {
      output += chunk;
      if (ready.test(output)) resolve(child);
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    child.once('exit', (code) => reject(new Error(`${command} exited with ${code}: ${output.slice(-500)}`)));
  });
}

const csv = digitsCsv();
const bb = await loadBb(wasmBytes());
const split = splitDigits(bb, csv, CLIENTS, 1, 3);
const x = split.test.features();
const y = split.test.labels();
const testInputs = { test_x: tensorValue('float', x.data, x.dims), test_y: tensorValue('float', y.data, y.dims) };

/**
 * Flat FedAvg on the same shards: federated_digits with FedAvg as the tiers have it (weight
 * bounds off), every client each round, on a LocalNetwork.
 */
function flatAccuracy(rounds) {
  const compiler = Compiler.forExample(bb, 'federated_digits');
  compiler.rebind('aggregator', 'Aggregator', 'FedAvg', `quorum=${CLIENTS},target=${CLIENTS},deadline_ms=1000,no_quorum=abandon,init=model,samples_factor=0,norm_factor=0,ascent_screen=0`);
  const artifact = compiler.compile(Compiler.recordExample(bb, 'federated_digits'));
  compiler.free();
  const ids = Array.from({ length: CLIENTS + 1 }, (_, i) => peerIdFromU64(i + 1));
  const server = installDigitsServer(bb, artifact, ids[0], split.test);
  const network = new LocalNetwork([server, ...split.shards.map((shard, k) => installDigitsClient(bb, artifact, ids[k + 1], ids[0], shard, k + 2))]);
  for (const id of ids.slice(1)) server.addPeer(id);
  let last = { round: 0, accuracy: 0 };
  server.onStep(roundReporter((r) => (last = r)));
  startDigitsServer(server, ids.slice(1), split.test, 0n);
  for (let t = 1; t < 200_000 && last.round < rounds; t++) network.poll(BigInt(t) * 5_000_000n);
  network.free();
  return last;
}

const running = [];
const browsers = [];
let pages = [];
let http;
try {
  // ---- Redis and two signalling processes sharing the room ------------------------------------
  const redisPort = await freePort();
  await start('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', work], /Ready to accept connections/);
  const redis = `redis://127.0.0.1:${redisPort}`;
  const operator = await Identity.generate();
  writeFileSync(join(work, 'policy.json'), JSON.stringify({ openRooms: false, rooms: { [room]: { operators: [Buffer.from(operator.publicKey).toString('base64')] } } }));
  const signals = [];
  for (let k = 0; k < 2; k++) {
    const port = await freePort();
    await start(process.execPath, [join(packageRoot, 'bin', 'bytesandbrains-signal.mjs'), '--port', String(port), '--host', '127.0.0.1',
      '--policy', join(work, 'policy.json'), '--redis', redis], /listening on .*sharing rooms through redis/);
    signals.push(`ws://127.0.0.1:${port}`);
  }
  check('two signalling processes share the room through Redis', signals.length === 2, signals.join(', '));
  const expiresAt = Math.floor(Date.now() / 1000) + 3600;
  const token = (peer, role) => createJoinToken(operator, { peer, role, room, expiresAt });
  const admission = { room, operators: [operator.publicKey] };

  // ---- the tiers ----------------------------------------------------------------------------
  const compiler = Compiler.forExample(bb, 'hierarchical_digits');
  const artifact = compiler.compile(Compiler.recordExample(bb, 'hierarchical_digits'));
  compiler.free();
  const identities = await Promise.all(Array.from({ length: 3 + CLIENTS }, () => Identity.generate()));
  const [rootId, ...edgeIds] = identities.slice(0, 3).map((i) => i.peerId);
  const served = await servePages();
  served.files.set('/artifact.bin', ['application/octet-stream', artifact]);
  http = served.server;
  const pagesBase = served.base;

  const root = BbNode.install(bb, { artifact, self: rootId, targets: ['HierDigits', 'HierDigits_root'], slots: { data: { dataset: split.test } }, seed: 1, admission });
  for (const edge of edgeIds) root.addPeer(edge);
  const reports = [];
  // the browser clients: in each edge's cohort a Chromium and a Firefox page, on different processes
  const clientIds = new Array(CLIENTS);
  const browserClients = [[1, 'chromium', 0], [2, 'firefox', 1], [5, 'chromium', 1], [6, 'firefox', 0]]; // [client number, engine, signal]
  const chrome = await chromium.launch({ executablePath: process.env.BB_CHROMIUM ?? '/usr/bin/chromium', args: CHROMIUM_ARGS });
  browsers.push(chrome);
  const context = await chrome.newContext();
  for (const [n, engine, s] of browserClients) {
    let where = context;
    if (engine === 'firefox') {
      where = await puppeteer.launch({ browser: 'firefox', executablePath: process.env.BB_FIREFOX ?? '/usr/bin/firefox-esr', headless: true, protocolTimeout: 60_000 });
      browsers.push(where);
    }
    const order = [signals[s], signals[1 - s]].join(',');
    const page = await openPeer(where, pagesBase, { role: 'hier', i: n, peers: CLIENTS, room, signal: order });
    page.number = n;
    pages.push(page);
    clientIds[n - 1] = page.self;
  }
  const nodeClients = [3, 4, 7, 8];
  nodeClients.forEach((n, k) => (clientIds[n - 1] = identities[3 + k].peerId));
  const edgeOf = (n) => edgeIds[Math.floor((n - 1) / PER_EDGE)];

  const failures = [];
  const joinRoom = async (node, identity, role, s, onStep) => {
    const steps = (step) => {
      if (step.kind === 'opFailed' && failures.length < 20) failures.push(`${identity.peerId.slice(0, 6)} ${step.op}: ${step.detail}`);
      onStep?.(step);
    };
    const r = await connectPeer(node, { url: [signals[s], signals[1 - s]], room, identity, role, token: await token(identity.peerId, role), onStep: steps });
    running.push(r);
    return r;
  };
  let started = performance.now();
  const rootRun = await joinRoom(root, identities[0], 'server', 0, roundReporter((r) => {
    reports.push(r);
    if (r.round % 5 === 0) console.log(`  round ${r.round}: accuracy ${r.accuracy.toFixed(3)} at ${((performance.now() - started) / 1000).toFixed(1)} s`);
  }));
  const edges = [];
  for (let e = 0; e < 2; e++) {
    const edge = BbNode.install(bb, { artifact, self: edgeIds[e], targets: ['HierDigits_edges', 'HierDigits_edge'], slots: { data: { dataset: split.test } }, seed: 10 + e, admission });
    const mine = clientIds.slice(e * PER_EDGE, (e + 1) * PER_EDGE);
    edge.addPeer(rootId);
    for (const id of mine) edge.addPeer(id);
    edge.bindInput('HierDigits_edges', 'clients', peersValue(mine));
    edge.bindInput('HierDigits_edge', 'root', peersValue([rootId]));
    edges.push(edge);
    await joinRoom(edge, identities[1 + e], 'client', e, undefined);
  }
  for (const [k, n] of nodeClients.entries()) {
    const node = BbNode.install(bb, { artifact, self: clientIds[n - 1], targets: ['HierDigits_clients'], slots: { data: { dataset: split.shards[n - 1] } }, seed: n + 1, admission });
    node.addPeer(edgeOf(n));
    node.bindInput('HierDigits_clients', 'edge', peersValue([edgeOf(n)]));
    await joinRoom(node, identities[3 + k], 'client', k % 2, undefined);
  }
  for (const page of pages) await page.start({ edge: edgeOf(page.number), token: await token(page.self, 'client') });
  check('a root, 2 edges and 8 clients (2 Chromium, 2 Firefox, 4 Node) joined across both processes with join tokens',
    new Set(clientIds).size === CLIENTS && running.length === 7);

  started = performance.now();
  root.invoke('HierDigits', { edges: peersValue(edgeIds), ...testInputs }, rootRun.driver.now());
  rootRun.driver.wake();
  await until(`round ${ROUNDS}`, () => (reports.at(-1)?.round ?? 0) >= ROUNDS, 300_000).catch(() => undefined);
  const last = reports.at(-1) ?? { round: 0, accuracy: 0 };
  const counts = (node) => ['rounds_closed', 'rounds_abandoned', 'late_dropped'].map((c) => `${c} ${node.counter(`fedavg.${c}`)}`).join(', ');
  check(`the tiers complete ${ROUNDS} rounds over WebRTC`, last.round >= ROUNDS,
    `round ${last.round} after ${((performance.now() - started) / 1000).toFixed(1)} s; root ${counts(root)}; edges ${edges.map(counts).join(' | ')}`);
  const flat = flatAccuracy(last.round);
  check('the root\'s accuracy is flat FedAvg\'s within a point', Math.abs(last.accuracy - flat.accuracy) <= 0.01,
    `tiers ${last.accuracy.toFixed(3)}, flat ${flat.accuracy.toFixed(3)} at round ${flat.round}`);
  check('no operation failed on the Node peers', failures.length === 0, failures.slice(0, 4).join(' | '));
  const states = await Promise.all(pages.map((p) => p.state()));
  check('every browser client sent updates to its edge', states.every((s) => s.sent > 0), states.map((s) => s.sent).join(' '));
  const errors = pages.flatMap((p) => p.errors);
  check('no page reported an error', errors.length === 0, errors.slice(0, 3).join(' | '));
} catch (error) {
  check('the tiers run', false, String(error?.stack ?? error));
} finally {
  for (const r of running) {
    r.stop();
    r.transport.close();
  }
  await Promise.all(browsers.map((b) => b.close().catch(() => undefined)));
  for (const child of children) child.kill();
  http?.close();
  split.free();
  rmSync(work, { recursive: true, force: true });
}
await sleep(100);
process.exit(summary());
