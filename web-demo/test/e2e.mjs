#!/usr/bin/env node
// web-demo in headless Chromium, as a visitor uses it: serve.mjs hosts the built page and a
// live federation (two client seats, quorum one). Run inside a network namespace where
// Chromium gathers ICE candidates (scripts/e2e.sh --web-demo makes it).
//
//   desktop (1280×800): the program picture lists the peer classes, the labelled wire edges
//     and only the bindings each partition uses; gates fold; ops explain themselves; a
//     4-client run in Web Workers reaches 90 % on the page, its envelope counters and
//     animations advance, a killed client is lost and the rounds go on without it.
//   phone (390×844): the same page fits the screen (no element wider than the viewport),
//     the charts are drawn at the screen's pixel ratio with legible text.
//   live: two phones join the live federation, one reloads and keeps its seat, a third is
//     refused and watches; status.json counts who is there.
//   No page reports a console error. Screenshots of each step are saved and listed.
//
// Prints one line per check and `web-demo: N passed, M failed`. BB_CHROMIUM overrides
// /usr/bin/chromium; screenshots go to BB_TEST_LOG_DIR/web-demo (default build/test-logs).
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

const here = fileURLToPath(new URL('.', import.meta.url));
const demo = join(here, '..');
const repo = join(demo, '..');
const shots = join(process.env.BB_TEST_LOG_DIR ?? join(repo, 'build', 'test-logs'), 'web-demo');
mkdirSync(shots, { recursive: true });
const CHROMIUM = process.env.BB_CHROMIUM ?? '/usr/bin/chromium';

const results = [];
const saved = [];
function check(name, ok, detail = '') {
  results.push(ok);
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${detail ? ` — ${detail}` : ''}`);
  return ok;
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
async function until(what, predicate, timeoutMs, everyMs = 200) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await predicate();
    if (value) return value;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}
async function shoot(page, name) {
  const path = join(shots, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  saved.push(path);
}

const free = () =>
  new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });

const port = await free();
const server = spawn(process.execPath, [join(demo, 'serve.mjs'), '--port', String(port), '--host', '127.0.0.1', '--clients', '2', '--quorum', '1', '--grace-ms', '8000'], { stdio: ['ignore', 'pipe', 'pipe'] });
let serverLog = '';
server.stdout.on('data', (chunk) => (serverLog += chunk));
server.stderr.on('data', (chunk) => (serverLog += chunk));
const base = `http://127.0.0.1:${port}`;
const browser = await chromium.launch({
  executablePath: CHROMIUM,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync',
    '--disable-background-timer-throttling', '--disable-renderer-backgrounding', '--disable-backgrounding-occluded-windows'],
});
const consoleErrors = [];
const status = async () => (await fetch(`${base}/status.json`)).json();

/** A page in a context of its own (its own IndexedDB and sessionStorage: another device). */
async function open(name, viewport, query = '') {
  const context = await browser.newContext({ viewport, deviceScaleFactor: viewport.width < 500 ? 3 : 1, isMobile: viewport.width < 500, hasTouch: viewport.width < 500 });
  const page = await context.newPage();
  page.on('pageerror', (error) => consoleErrors.push(`${name}: ${error.message}`));
  page.on('console', (message) => message.type() === 'error' && consoleErrors.push(`${name}: ${message.text()}`));
  await page.goto(`${base}/${query}`);
  await page.waitForFunction(() => document.querySelectorAll('#program [data-partition]').length > 0 || (window.demo?.errors.length ?? 0) > 0, undefined, { timeout: 60_000 });
  return page;
}

/** Elements wider than the viewport, or sticking out of it (what makes a phone scroll sideways). */
async function overflowing(page) {
  return page.evaluate(() => {
    const width = document.documentElement.clientWidth;
    const out = [];
    for (const e of document.querySelectorAll('body *')) {
      const r = e.getBoundingClientRect();
      if (r.width === 0 || getComputedStyle(e).position === 'fixed' || e.id === 'tooltip') continue;
      if (r.right > width + 1 || r.left < -1) out.push(`${e.tagName.toLowerCase()}${e.id ? `#${e.id}` : ''}.${[...e.classList].join('.')} ${Math.round(r.left)}..${Math.round(r.right)}`);
    }
    return { width, scroll: document.documentElement.scrollWidth, out: out.slice(0, 8) };
  });
}

const demoState = (page) => page.evaluate(() => {
  const d = window.demo;
  const last = d.state.rounds.at(-1);
  return {
    rounds: d.state.rounds.length,
    round: last?.round ?? 0,
    accuracy: last?.accuracy ?? 0,
    envelopes: d.state.totals.envelopes,
    lost: d.state.totals.lost,
    animated: d.federationView.animated,
    errors: d.errors,
    problems: d.problems,
    peers: [...d.state.peers.values()].map((p) => ({ id: p.id, label: p.label, state: p.state, sent: p.sent, received: p.received, lost: p.lost })),
  };
});

try {
  await until('serve.mjs to listen', () => serverLog.includes(`:${port}/`), 60_000);

  // ---- desktop: the program picture ---------------------------------------------------------
  const desk = await open('desktop', { width: 1280, height: 800 }, '?latency=100');
  const picture = await desk.evaluate(() => ({
    partitions: [...document.querySelectorAll('#program [data-partition]')].map((g) => ({
      title: g.getAttribute('data-title'),
      peerClass: g.getAttribute('data-class'),
      bindings: [...g.querySelectorAll('[data-binding]')].map((b) => b.getAttribute('data-binding')).sort(),
      ops: [...g.querySelectorAll('.op')].map((o) => o.textContent),
    })),
    edges: [...document.querySelectorAll('#program .wire-edge')].map((e) => ({ label: e.getAttribute('data-label'), drawn: e.querySelector('path')?.getAttribute('d')?.length ?? 0 })),
  }));
  check('the partition view draws the three peer classes', JSON.stringify(picture.partitions.map((p) => p.peerClass).sort()) === JSON.stringify(['@self', 'clients', 'server']),
    picture.partitions.map((p) => `${p.title} (${p.peerClass})`).join(', '));
  check('the wire edges are drawn and labelled with what they carry', picture.edges.length === 2 && picture.edges.every((e) => e.drawn > 0) && picture.edges.map((e) => e.label).join() === 'global model,model update',
    picture.edges.map((e) => e.label).join(', '));
  const bindings = Object.fromEntries(picture.partitions.map((p) => [p.title, p.bindings.join(' ')]));
  check('each partition lists only the bindings it uses', bindings.FedDigits_clients === 'data model' && bindings.FedDigits_server === 'aggregator model' && bindings.FedDigits === 'aggregator data model',
    JSON.stringify(bindings));
  const clientOps = picture.partitions.find((p) => p.title === 'FedDigits_clients')?.ops ?? [];
  check('gates and plumbing are folded by default', !clientOps.some((op) => /Gate|Bundle/.test(op)), clientOps.join(' | '));
  await desk.click('#program [data-partition^="FedDigits_clients"] [data-toggle]');
  await desk.waitForFunction(() => [...document.querySelectorAll('#program [data-partition^="FedDigits_clients"] .op')].some((o) => o.textContent === 'DedupGateRx'));
  check('opening a partition shows its gates', true);
  await desk.hover('#program [data-partition^="FedDigits_clients"] .op-role');
  const tip = await desk.evaluate(() => (document.getElementById('tooltip')?.hidden ? '' : document.getElementById('tooltip')?.textContent ?? ''));
  check('an op explains itself on hover', /trains the model locally/i.test(tip), tip);
  await shoot(desk, 'desktop-program');

  // ---- desktop: a 4-client federation in Web Workers ------------------------------------
  await desk.selectOption('#peer-count', '4');
  await desk.click('#start');
  await until('the first rounds', async () => (await demoState(desk)).rounds >= 3, 60_000);
  const early = await demoState(desk);
  await sleep(1500);
  const later = await demoState(desk);
  check('envelope counters and animations advance', later.envelopes > early.envelopes && later.animated > early.animated,
    `envelopes ${early.envelopes} → ${later.envelopes}, dots drawn ${early.animated} → ${later.animated}`);
  const edgeCounts = await desk.evaluate(() => [...document.querySelectorAll('#program .edge-count')].map((t) => t.textContent));
  check('the program picture counts the envelopes of each wire edge', edgeCounts.length === 2 && edgeCounts.every((t) => /^\d+ envelopes/.test(t ?? '') && !t.startsWith('0 ')), edgeCounts.join(' | '));
  const victim = later.peers.find((p) => p.label === 'client 3');
  await desk.click(`#federation button[data-action=kill][data-peer="${victim.id}"]`);
  const killedAt = (await demoState(desk)).round;
  await until('5 rounds after the kill', async () => (await demoState(desk)).round >= killedAt + 5, 90_000);
  const afterKill = await demoState(desk);
  check('a killed client is gone and the rounds go on without it', afterKill.peers.find((p) => p.id === victim.id)?.state === 'gone' && afterKill.round >= killedAt + 5,
    `killed at round ${killedAt}, now round ${afterKill.round}; ${afterKill.lost} envelopes lost`);
  await until('90 % held-out accuracy on the page', async () => Number(await desk.getAttribute('.chart-caption', 'data-accuracy')) >= 0.9, 120_000).catch(() => undefined);
  const shown = Number(await desk.getAttribute('.chart-caption', 'data-accuracy'));
  const caption = await desk.textContent('.chart-caption');
  check('the in-page federation reaches 90 % and the page says so', shown >= 0.9 && /held-out accuracy 9\d\.\d %/.test(caption ?? ''), caption ?? '');
  const finalDesk = await demoState(desk);
  check('the in-page run reported no problem', finalDesk.errors.length === 0 && finalDesk.problems.filter((p) => !p.includes('deadline')).length === 0, [...finalDesk.errors, ...finalDesk.problems].slice(0, 3).join(' | '));
  await desk.evaluate(() => window.scrollTo(0, 0));
  await shoot(desk, 'desktop-running');
  await desk.click('#stop');
  await desk.click('#reset');
  const afterReset = await demoState(desk);
  check('stop and reset clear the federation', afterReset.rounds === 0 && afterReset.peers.length === 0, `${afterReset.rounds} rounds, ${afterReset.peers.length} peers`);

  // ---- phone: the same page at 390 px ----------------------------------------------------
  const phone = await open('phone', { width: 390, height: 844 }, '?latency=100&peers=3&run=local');
  await until('rounds on the phone', async () => (await demoState(phone)).rounds >= 5, 90_000);
  const fit = await overflowing(phone);
  check('nothing is wider than the viewport at 390 px', fit.scroll <= fit.width && fit.out.length === 0, `scroll width ${fit.scroll} of ${fit.width}; ${fit.out.join(', ')}`);
  const charts = await phone.evaluate(() => [...document.querySelectorAll('.chart canvas')].map((c) => ({ pixels: c.width, css: c.getBoundingClientRect().width, ratio: devicePixelRatio })));
  check('the charts are drawn at the screen\'s pixel ratio and fit it', charts.length === 2 && charts.every((c) => Math.abs(c.pixels - c.css * c.ratio) <= c.ratio && c.css <= 390),
    charts.map((c) => `${c.pixels} px for ${Math.round(c.css)} css px at ${c.ratio}x`).join(', '));
  const fonts = await phone.evaluate(() => [...document.querySelectorAll('#program text, .chart .u-title, .peer-card, .round-strip')].map((e) => {
    const svgScale = e instanceof SVGElement && e.ownerSVGElement ? e.ownerSVGElement.getBoundingClientRect().width / e.ownerSVGElement.viewBox.baseVal.width : 1;
    return parseFloat(getComputedStyle(e).fontSize) * svgScale;
  }));
  check('text on the phone is at least 10 px', fonts.length > 0 && Math.min(...fonts) >= 10, `smallest ${Math.min(...fonts).toFixed(1)} px`);
  await shoot(phone, 'phone-running');
  await phone.click('#stop');

  // ---- live: two phones join, one reloads, a third watches ---------------------------------
  const joined = [];
  for (const name of ['visitor-1', 'visitor-2']) joined.push(await open(name, { width: 390, height: 844 }, '?run=join'));
  const seatOf = (page) => page.evaluate(() => ({ self: window.demo.live?.self, seat: window.demo.live?.last?.seats.find((s) => s.peer === window.demo.live?.self)?.index }));
  await until('both visitors in the room and the rounds going', async () => {
    const s = await status();
    return s.joined === 2 && s.rounds.length >= 3 ? s : undefined;
  }, 90_000);
  const ids = await Promise.all(joined.map(async (p) => (await seatOf(p)).self));
  const both = (rounds, after) => rounds.filter((r) => r.round > after).some((r) => ids.every((id) => r.contributors.includes(id)));
  await until('a round with both visitors\' updates', async () => both((await status()).rounds, 0), 60_000).catch(() => undefined);
  let live = await status();
  check('two pages join the live federation and both contribute to its rounds', live.joined === 2 && live.started && both(live.rounds, 0),
    `${live.joined} in, ${live.rounds.length} rounds; ${live.note}`);
  const before = await seatOf(joined[1]);
  const roundsBefore = live.rounds.at(-1).round;
  await joined[1].reload();
  await until('the reloaded visitor back in its seat', async () => {
    const s = await status();
    const mine = await seatOf(joined[1]).catch(() => ({}));
    return s.joined === 2 && mine.seat !== undefined ? mine : undefined;
  }, 60_000);
  const after = await seatOf(joined[1]);
  const restored = await joined[1].evaluate(() => window.demo.joined?.restored === true);
  await until('a round after the reload with the reloaded visitor\'s update', async () => both((await status()).rounds, roundsBefore + 1), 60_000).catch(() => undefined);
  live = await status();
  check('a visitor who reloads keeps its seat, its node, and contributes again', after.seat === before.seat && after.self === before.self && restored && both(live.rounds, roundsBefore + 1),
    `seat ${before.seat} → ${after.seat}, node restored: ${restored}; rounds ${roundsBefore} → ${live.rounds.at(-1).round}`);
  const watcher = await open('watcher', { width: 390, height: 844 }, '?run=join');
  await until('the third visitor turned away and watching', async () => {
    const text = await watcher.textContent('.join-message');
    const state = await demoState(watcher);
    return /No seat for this page/.test(text ?? '') && state.rounds > 0 && state.envelopes > 0;
  }, 30_000);
  const watching = await demoState(watcher);
  check('a refused visitor watches the federation instead', watching.rounds > 0 && watching.peers.length >= 3, `${watching.rounds} rounds, ${watching.envelopes} envelopes replayed, ${watching.peers.length} peers shown`);
  const seen = await demoState(joined[0]);
  check('a joined page shows the live rounds and envelopes', seen.rounds > 0 && seen.envelopes > 0 && seen.peers.some((p) => p.label.startsWith('you')), `${seen.rounds} rounds, ${seen.envelopes} envelopes`);
  await shoot(joined[0], 'phone-live');
  await shoot(watcher, 'phone-watching');
  await joined[0].context().close();
  await until('status.json to count only who is there', async () => (await status()).joined === 1, 30_000).catch(() => undefined);
  check('status.json counts a visitor who left as gone', (await status()).joined === 1, `joined ${(await status()).joined}`);

  check('no page reported a console error', consoleErrors.length === 0, consoleErrors.slice(0, 4).join(' | '));
} catch (error) {
  check('web-demo run', false, String(error?.stack ?? error));
  console.log(serverLog.split('\n').slice(-15).join('\n'));
} finally {
  await browser.close();
  server.kill();
}
console.log('screenshots:');
for (const path of saved) console.log(`  ${path}`);
const failed = results.filter((ok) => !ok).length;
console.log(`web-demo: ${results.length - failed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
