#!/usr/bin/env node
// Secure aggregation in real Chromium pages (inside the private network namespace
// scripts/e2e.sh makes): a Node federatedAveraging server with `secure` and four client
// pages (js/e2e/secure.js) over WebRTC. Every round must be a SecAgg+ sum of the four;
// page 3 is closed right after it sends its masked vector (mid-round: before the
// server's unmask request reaches it) and that round must still close, with its step in
// the sum; the rounds must go on with the three left, none aborted.
//
// Prints one line per check and ends with `e2e: N passed, M failed`.
// BB_CHROMIUM overrides /usr/bin/chromium.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { chromium } from 'playwright-core';

import { splitDigits } from '../dist/examples/index.js';
import * as pkg from '../dist/index.js';
import { Identity } from '../dist/identity/index.js';
import { SignalClient } from '../dist/signal/index.js';
import { SignalServer } from '../dist/signal/node.js';
import { WebRtcTransport } from '../dist/transport/index.js';
import { CHROMIUM_ARGS, check, digitsCsv, packageRoot, servePages, summary, until } from './common.mjs';
import { securePlan } from './secure-plan.js';

const CHROMIUM = process.env.BB_CHROMIUM ?? '/usr/bin/chromium';
const CLIENTS = 4;

const bb = await pkg.loadBb(readFileSync(join(packageRoot, 'wasm', 'bb.wasm')));
const plan = securePlan(pkg);
const artifact = plan.compile(bb);
const { server: http, files, base } = await servePages();
files.set('/artifact.bin', ['application/octet-stream', artifact]);

const room = `secure-${process.pid}`;
const serverIdentity = await Identity.generate();
const allow = new Map([[serverIdentity.peerId, 'server']]);
const signalServer = await SignalServer.listen({ port: 0, host: '127.0.0.1', rooms: (r) => (r === room ? { allow } : undefined), openRooms: false });
const signalUrl = `ws://127.0.0.1:${signalServer.address.port}`;

const split = splitDigits(bb, digitsCsv(), CLIENTS, 1, 5);
const server = plan.installServer(bb, { artifact, self: serverIdentity.peerId, test: split.test });
const rtc = await WebRtcTransport.create({ signal: await SignalClient.connect({ url: signalUrl, room, identity: serverIdentity, role: 'server' }) });
// the masked vectors each peer sent the server: its only envelopes as large as the model
// (~9.8 KB); for each peer, how many rounds had closed when its last one arrived (the round
// it was masked for is the next to close: reports[closedBefore])
const masked = new Map();
const closedBefore = new Map();
rtc.onEnvelope((from, bytes) => {
  if ((bytes?.length ?? 0) < 9000) return;
  masked.set(from, (masked.get(from) ?? 0) + 1);
  closedBefore.set(from, reports.length);
});
const reports = [];
server.onRound((r) => reports.push(r));
const running = pkg.runPeer(server.node, rtc);

const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
const context = await browser.newContext();
const pages = [];
// page 3, once armed, takes nothing in after sending its masked vector and says so: the
// test closes it as soon as that vector has reached the server
let closed = null;
let maskedBefore = 0;
// (The round is the one open at the server when the vector arrived, not when the page's
// call reaches this process: the round may close in between, on the other pages' unmasking.)
await context.exposeFunction('e2eMasked', async (i) => {
  if (i !== 2 || closed !== null) return;
  await until('page 3\'s masked vector at the server', () => (masked.get(pages[2].self) ?? 0) > maskedBefore, 30_000);
  const reportsThen = closedBefore.get(pages[2].self);
  closed = { round: reports[reportsThen - 1]?.round ?? 0, reports: reportsThen };
  await pages[2].page.close();
});

try {
  for (let i = 0; i < CLIENTS; i++) {
    const page = await context.newPage();
    const errors = [];
    page.on('pageerror', (error) => errors.push(error.message));
    page.on('console', (message) => void (message.type() === 'error' && errors.push(message.text())));
    await page.goto(`${base}/secure.html?${new URLSearchParams({ i, room, signal: signalUrl })}`);
    await until(`page ${i} to make its identity`, () => page.evaluate(() => window.e2e?.self || window.e2e?.error), 60_000);
    const state = () => page.evaluate(() => ({ ...window.e2e }));
    const s = await state();
    if (s.error) throw new Error(`page ${i}: ${s.error}`);
    pages.push({ page, errors, state, self: s.self });
    allow.set(s.self, 'client');
  }
  for (const p of pages) {
    await p.page.evaluate((c) => window.e2eStart(c), { server: serverIdentity.peerId });
    await until('the page to run', async () => (await p.state()).ready || (await p.state()).error, 60_000);
  }
  server.start(pages.map((p) => p.self), running.driver.now());
  running.driver.wake();

  // the first rounds may be abandoned while the pages' connections come up
  await until('3 secure rounds of all 4', () => reports.filter((r) => r.secure?.summed === CLIENTS).length >= 3, 120_000);
  const since = reports.findIndex((r) => r.secure?.summed === CLIENTS);
  const full = reports.slice(since);
  check('every round once all 4 are connected is a SecAgg+ sum of the 4 clients', full.every((r) => r.secure?.summed === CLIENTS),
    `${JSON.stringify(reports.map((r) => r.secure?.summed))} (first sum of 4 in report ${since})`);

  maskedBefore = masked.get(pages[2].self) ?? 0;
  await pages[2].page.evaluate(() => window.e2eArm());
  await until('page 3 to be closed after masking', () => closed !== null, 60_000);
  const after = closed.reports;
  await until('the round page 3 left to close', () => reports.length > after, 120_000);
  const left = reports[after];
  check('a page closed mid-round (after its masked vector): the round still closes, its step in the sum',
    left?.secure?.summed === CLIENTS, `closed in round ${closed.round}; next report ${JSON.stringify(left)}`);
  await until('2 more rounds', () => reports.length > after + 2, 120_000);
  const later = reports.slice(after + 1, after + 3);
  check('the rounds go on with the 3 left, each a secure sum', later.every((r) => r.secure?.summed === CLIENTS - 1), JSON.stringify(later.map((r) => r.secure)));
  check('no round aborted, no update refused for coming in the clear',
    Number(server.node.counter('fedavg.refused_plain')) === 0 && Number(server.node.counter('fedavg.secagg_aborted')) === 0 && Number(server.node.counter('fedavg.secagg_rounds')) >= 6,
    `${server.node.counter('fedavg.secagg_rounds')} sums, ${server.node.counter('fedavg.secagg_aborted')} aborted; accuracy ${reports.at(-1)?.accuracy}`);
  const errors = pages.flatMap((p) => p.errors).filter((e) => !/favicon/.test(e));
  check('no page errors', errors.length === 0, errors.slice(0, 3).join(' | '));
} catch (error) {
  check('the secure scenario ran', false, String(error?.stack ?? error));
} finally {
  running.stop();
  await browser.close().catch(() => undefined);
  rtc.close();
  await signalServer.close();
  http.close();
}
process.exit(summary());
