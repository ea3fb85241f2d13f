#!/usr/bin/env node
// Phones as they are, in real Chromium pages (inside the private network namespace
// scripts/e2e.sh makes): a Node federatedAveraging server (top-k uploads) and two phone
// pages (js/e2e/phone.js) over WebRTC.
//
//   1. Phone A's battery says it is not charging (the Battery API stands in through an
//      init script, the test's environment; the page's own code asks navigator.getBattery
//      as an app would): it must not train while the rounds go on, and say why; plugged in,
//      it must join the rounds.
//   2. Phone B is reloaded mid-training: it must come back from its saved record under the
//      same id, without downloading the artifact again, carry its counters on, and the
//      server must take its updates again.
//   3. Phone B's record is damaged in IndexedDB and the page reloaded: the page must refuse
//      it with a clear reason, start afresh (downloading the artifact) and train on.
//
// Prints one line per check and ends with `e2e: N passed, M failed`.
// BB_CHROMIUM overrides /usr/bin/chromium.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { chromium } from 'playwright-core';

import { splitDigits } from '../dist/examples/index.js';
import * as pkg from '../dist/index.js';
import { Identity } from '../dist/identity/index.js';
import { SignalClient } from '../dist/signal/index.js';
import { SignalServer } from '../dist/signal/node.js';
import { WebRtcTransport } from '../dist/transport/index.js';
import { CHROMIUM_ARGS, check, digitsCsv, packageRoot, servePages, sleep, summary, until } from './common.mjs';
import { phonePlan } from './phone-plan.js';

const CHROMIUM = process.env.BB_CHROMIUM ?? '/usr/bin/chromium';

const bb = await pkg.loadBb(readFileSync(join(packageRoot, 'wasm', 'bb.wasm')));
const plan = phonePlan(pkg);
const artifact = plan.compile(bb);
const { server: http, files, base } = await servePages();
files.set('/artifact.bin', ['application/octet-stream', artifact]);
files.set('/artifact.sha256', ['text/plain', Buffer.from(createHash('sha256').update(artifact).digest('hex'))]);
let artifactDownloads = 0;
http.on('request', (request) => void (request.url?.startsWith('/artifact.bin') && artifactDownloads++));

const room = `phones-${process.pid}`;
const serverIdentity = await Identity.generate();
const allow = new Map([[serverIdentity.peerId, 'server']]);
const signalServer = await SignalServer.listen({ port: 0, host: '127.0.0.1', rooms: (r) => (r === room ? { allow } : undefined), openRooms: false });
const signalUrl = `ws://127.0.0.1:${signalServer.address.port}`;

// the server: the template's, over node-datachannel; it counts the envelopes each peer sends it
const split = splitDigits(bb, digitsCsv(), 2, 1, 5);
const server = plan.installServer(bb, { artifact, self: serverIdentity.peerId, test: split.test });
const rtc = await WebRtcTransport.create({ signal: await SignalClient.connect({ url: signalUrl, room, identity: serverIdentity, role: 'server' }) });
const envelopesFrom = new Map();
rtc.onEnvelope((from) => envelopesFrom.set(from, (envelopesFrom.get(from) ?? 0) + 1));
const reports = [];
server.onRound((r) => reports.push(r));
const running = pkg.runPeer(server.node, rtc);
const round = () => reports.at(-1)?.round ?? 0;

const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
const context = await browser.newContext();
// The test's environment: a Battery API whose `charging` the query decides (charging=1), and
// window.e2ePlug() to plug the phone in. The page's code reads navigator.getBattery as is.
await context.addInitScript(() => {
  const battery = new EventTarget();
  battery.charging = new URLSearchParams(location.search).get('charging') === '1';
  battery.level = 0.5;
  Object.defineProperty(navigator, 'getBattery', { configurable: true, value: () => Promise.resolve(battery) });
  window.e2ePlug = () => {
    battery.charging = true;
    battery.dispatchEvent(new Event('chargingchange'));
  };
});

/** Phone page i (phone.html), once it has made (or loaded) its identity. */
const phonePage = async (i, charging) => {
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (error) => errors.push(error.message));
  page.on('console', (message) => void (message.type() === 'error' && errors.push(message.text())));
  await page.goto(`${base}/phone.html?${new URLSearchParams({ i, room, signal: signalUrl, charging: charging ? 1 : 0 })}`);
  const peer = { page, errors, state: () => page.evaluate(() => ({ ...window.e2e })) };
  await loaded(peer, i);
  peer.self = (await peer.state()).self;
  return peer;
};
const loaded = async (peer, i) => {
  await until(`phone ${i} to make its identity`, () => peer.page.evaluate(() => window.e2e?.self || window.e2e?.error), 60_000);
  const s = await peer.state();
  if (s.error) throw new Error(`phone ${i}: ${s.error}`);
};
const startPhone = async (peer) => {
  await peer.page.evaluate((c) => window.e2eStart(c), { server: serverIdentity.peerId });
  await until('the phone to run', async () => (await peer.state()).ready || (await peer.state()).error, 60_000);
  const s = await peer.state();
  if (s.error) throw new Error(`phone: ${s.error}`);
  return s;
};

try {
  const a = await phonePage(0, false);
  const b = await phonePage(1, true);
  for (const p of [a, b]) allow.set(p.self, 'client');
  await startPhone(a);
  await startPhone(b);
  server.start([], running.driver.now());
  running.driver.wake();

  // 1. not charging: no training while the rounds go on
  await until('4 rounds', () => round() >= 4, 120_000);
  let sa = await a.state();
  let sb = await b.state();
  check('a phone that is not charging does not train, and says why',
    sa.trainSteps === 0 && sa.policy?.waiting?.includes('not-charging') && !envelopesFrom.has(a.self),
    `phone A: ${sa.trainSteps} steps, waiting ${JSON.stringify(sa.policy?.waiting)}, ${envelopesFrom.get(a.self) ?? 0} envelopes at the server; phone B: ${sb.trainSteps} steps`);
  check('the phone that is charging trains meanwhile', sb.trainSteps > 0 && (envelopesFrom.get(b.self) ?? 0) > 0, `${sb.trainSteps} steps`);
  await a.page.evaluate(() => window.e2ePlug());
  await until('phone A to train once plugged in', async () => (await a.state()).trainSteps > 0 && (envelopesFrom.get(a.self) ?? 0) > 0, 60_000).catch(() => undefined);
  sa = await a.state();
  check('plugged in, it joins the rounds', sa.trainSteps > 0 && sa.policy?.participating === true && (envelopesFrom.get(a.self) ?? 0) > 0,
    `${sa.trainSteps} steps, ${envelopesFrom.get(a.self) ?? 0} envelopes at the server`);

  // 2. phone B reloaded mid-training
  await until('phone B to have saved its state', async () => (await b.state()).saves > 0 && (await b.state()).trainSteps >= 20, 60_000);
  // paused, it trains no more: what its record holds at the reload is at most what it trained
  await b.page.evaluate(() => window.e2ePause());
  await until('phone B to stop training', async () => (await b.state()).policy?.participating === false, 10_000);
  await sleep(500);
  const downloads = artifactDownloads;
  const stepsBefore = (await b.state()).trainSteps;
  const idBefore = b.self;
  await b.page.reload();
  await loaded(b, 1);
  sb = await startPhone(b);
  const fromB = envelopesFrom.get(idBefore) ?? 0;
  const roundAtReload = round();
  check('a reloaded phone resumes under the same id, without downloading the artifact again',
    sb.resumed && sb.self === idBefore && artifactDownloads === downloads && sb.resumedSteps > 0 && sb.resumedSteps <= stepsBefore,
    `resumed ${sb.resumed}, ${sb.resumedSteps} of its ${stepsBefore} steps in the record, artifact downloads ${downloads} → ${artifactDownloads}`);
  await until('the server to take the resumed phone\'s updates', async () => (envelopesFrom.get(idBefore) ?? 0) >= fromB + 3 && (await b.state()).trainSteps > sb.resumedSteps, 60_000).catch(() => undefined);
  sb = await b.state();
  check('the server takes its updates again, counted under the same id',
    (envelopesFrom.get(idBefore) ?? 0) >= fromB + 3 && sb.trainSteps > sb.resumedSteps,
    `envelopes from it ${fromB} → ${envelopesFrom.get(idBefore) ?? 0} (round ${roundAtReload} → ${round()}), steps ${sb.resumedSteps} → ${sb.trainSteps}`);

  // 3. a damaged record: refused with the reason, a fresh start, training goes on. The
  // page stops saving first (a test hook), so what the reload reads is what was damaged.
  await b.page.evaluate(async (key) => {
    await window.e2eStopSaving();
    const db = await new Promise((resolve, reject) => {
      const r = indexedDB.open('bytesandbrains-state', 1);
      r.onsuccess = () => resolve(r.result);
      r.onerror = () => reject(r.error);
    });
    const store = () => db.transaction('nodes', 'readwrite').objectStore('nodes');
    const bytes = await new Promise((resolve) => (store().get(key).onsuccess = (e) => resolve(e.target.result)));
    bytes[bytes.length >> 1] ^= 0x40;
    await new Promise((resolve) => (store().put(bytes, key).onsuccess = resolve));
  }, `phones/${idBefore}`);
  const downloadsBefore = artifactDownloads;
  await b.page.reload();
  await loaded(b, 1);
  sb = await startPhone(b);
  check('a damaged record is refused with the reason, and the phone starts afresh under its id',
    !sb.resumed && /SHA-256/.test(sb.resumeError ?? '') && sb.self === idBefore && artifactDownloads === downloadsBefore + 1,
    `resumed ${sb.resumed}, reason: ${sb.resumeError}, artifact downloads ${downloadsBefore} → ${artifactDownloads}`);
  await until('phone B to train afresh', async () => (await b.state()).trainSteps > 0, 60_000).catch(() => undefined);
  check('and trains on', (await b.state()).trainSteps > 0, `${(await b.state()).trainSteps} steps`);
  const errors = [...a.errors, ...b.errors].filter((e) => !/favicon/.test(e));
  check('no page errors', errors.length === 0, errors.slice(0, 3).join(' | '));
} catch (error) {
  check('the phones scenario ran', false, String(error?.stack ?? error));
} finally {
  running.stop();
  await browser.close().catch(() => undefined);
  rtc.close();
  await signalServer.close();
  http.close();
}
process.exit(summary());
