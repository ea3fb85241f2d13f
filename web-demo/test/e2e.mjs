#!/usr/bin/env node
// web-demo in headless Chromium, as a visitor uses it: serve.mjs hosts the built page and a
// live federation (two client seats, quorum one) on every address of a private network
// namespace (scripts/e2e.sh --web-demo makes it: Chromium gathers ICE candidates there,
// and 192.0.2.10 is "another machine" a phone opens the page from over plain http).
//
//   server: responses are compressed for clients that accept br or gzip.
//   engine: the page is cross-origin isolated and runs bb-mt-relaxed.wasm on a thread per core (its
//     in-page peers bb-relaxed.wasm), and says so; over plain http from another host it
//     runs on one thread and says why.
//   desktop (1280×800): the program picture lists the peer classes, the labelled wire edges,
//     only the bindings each partition uses, and the server as one peer around its two
//     partitions; gates fold; ops explain themselves; a 4-client run in Web Workers:
//     envelope counters and animations advance; a paused and a killed client leave the
//     rounds below their quorum — listed as abandoned with the model unchanged, marked on
//     the curves — and the run goes on to 90 % once the paused one resumes; each client has
//     one colour in every view; the playground (learning rate, digits per client, which
//     digits each holds) starts the run again with what it says; hierarchical_digits is
//     drawn readable, and zooms; split_cnn's SplitFed (3 clients) shows the CNN cut in
//     two, counts activations up and gradients down, and trains every client past 90 %.
//   phone (390×844): a run at 800 ms latency learns, every round in its list closed with
//     its updates or abandoned with its reason; the page fits the screen, charts at the
//     screen's pixel ratio, text of at least 10 px; one tap opens an explanation; client
//     colours are the desktop's; hierarchical_digits is one readable column a pinch zooms.
//   a browser under the "C" locale loads the page and draws the charts.
//   live: a phone opening the page over plain http is told joining needs https and watches;
//     a browser without WebRTC is told so, watches, and holds no seat; two phones join
//     ("You are client N" on top), contribute, show each other's state, one reloads and
//     keeps its seat, a third is refused and watches; a visitor who left is named by its
//     seat; an empty room runs no rounds. The live federation is DP-FedAvg (--dp-clip 1
//     --dp-noise 1): status.json and the round list say the privacy spent after each round.
//     A second serve.mjs with --secure and three pages joined: each round the sum of three
//     masked updates with no client named or scored, the round line says so, and the page
//     draws one masked update (greys spread over the range) beside the step (reds, blues).
//   No page reports a console error. Screenshots of each step are saved and listed.
//
// Prints one line per check and `web-demo: N passed, M failed`. BB_CHROMIUM overrides
// /usr/bin/chromium; screenshots go to BB_TEST_LOG_DIR/web-demo (default build/test-logs).
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { createServer } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';

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
/** Waits like until(), but a timeout is left to the check that follows. */
const awhile = (what, predicate, timeoutMs) => until(what, predicate, timeoutMs).catch(() => undefined);
/** Runs the steps of a check; a step that throws (an element the page lacks) fails that check, and the run goes on. */
async function attempt(name, steps) {
  try {
    await steps();
  } catch (error) {
    check(name, false, String(error?.message ?? error).split('\n')[0]);
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

/** One GET as a client that accepts `encoding` sends it: the raw body and the headers. */
function fetchRaw(url, encoding) {
  return new Promise((resolve, reject) => {
    const r = httpRequest(url, { headers: encoding === undefined ? {} : { 'accept-encoding': encoding } }, (response) => {
      const chunks = [];
      response.on('data', (c) => chunks.push(c));
      response.on('end', () => resolve({ headers: response.headers, body: Buffer.concat(chunks) }));
    });
    r.on('error', reject);
    r.end();
  });
}
const decode = ({ headers, body }) => (headers['content-encoding'] === 'br' ? brotliDecompressSync(body) : headers['content-encoding'] === 'gzip' ? gunzipSync(body) : body);

// the namespace's own address: what a phone on the network opens
const lan = Object.values(networkInterfaces()).flat().find((a) => a?.family === 'IPv4' && !a.internal)?.address;
const port = await free();
const server = spawn(process.execPath, [join(demo, 'serve.mjs'), '--port', String(port), '--host', '0.0.0.0', '--clients', '2', '--quorum', '1', '--grace-ms', '8000', '--deadline-ms', '1000', '--dp-clip', '1', '--dp-noise', '1'], { stdio: ['ignore', 'pipe', 'pipe'] });
let serverLog = '';
server.stdout.on('data', (chunk) => (serverLog += chunk));
server.stderr.on('data', (chunk) => (serverLog += chunk));
const base = `http://127.0.0.1:${port}`;
/** serve.mjs --secure, started for the secure section. @type {import('node:child_process').ChildProcess | undefined} */
let secureServer;
const ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--disable-background-timer-throttling', '--disable-renderer-backgrounding', '--disable-backgrounding-occluded-windows'];
const browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
const consoleErrors = [];
const status = async () => (await fetch(`${base}/status.json`)).json();
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1280, height: 800 };

/** A page in a context of its own (its own IndexedDB and sessionStorage: another device). */
async function open(name, viewport, query = '', { at = base, from = browser, init } = {}) {
  const phone = viewport.width < 500;
  const context = await from.newContext({ viewport, deviceScaleFactor: phone ? 3 : 1, isMobile: phone, hasTouch: phone });
  if (init !== undefined) await context.addInitScript(init);
  context.setDefaultTimeout(15_000);
  const page = await context.newPage();
  page.on('pageerror', (error) => consoleErrors.push(`${name}: ${error.message}`));
  page.on('console', (message) => message.type() === 'error' && consoleErrors.push(`${name}: ${message.text()}`));
  await page.goto(`${at}/${query}`);
  await page.waitForFunction(() => document.querySelectorAll('#program [data-partition]').length > 0 || (window.demo?.errors.length ?? 0) > 0, undefined, { timeout: 60_000 });
  return page;
}

/** Elements wider than the viewport, or sticking out of it (what makes a phone scroll sideways); the picture's pan surface clips what it holds. */
async function overflowing(page) {
  return page.evaluate(() => {
    const width = document.documentElement.clientWidth;
    const out = [];
    for (const e of document.querySelectorAll('body *')) {
      const r = e.getBoundingClientRect();
      if (r.width === 0 || getComputedStyle(e).position === 'fixed' || e.id === 'tooltip' || e.closest('.program-viewport > *') !== null) continue;
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
    closed: d.state.rounds.filter((r) => r.outcome === 'closed').length,
    envelopes: d.state.totals.envelopes,
    lost: d.state.totals.lost,
    animated: d.federationView.animated,
    errors: d.errors,
    problems: d.problems,
    peers: [...d.state.peers.values()].map((p) => ({ id: p.id, label: p.label, state: p.state, sent: p.sent, received: p.received, lost: p.lost })),
  };
});

/** The round list as the visitor reads it, with what the page knows of each round. */
const roundList = (page) => page.evaluate(() => {
  const byRound = new Map(window.demo.state.rounds.map((r, i, all) => [r.round, { ...r, before: all[i - 1]?.accuracy }]));
  return [...document.querySelectorAll('#federation .round-strip li[data-round]')].map((li) => ({ text: li.textContent, outcome: li.getAttribute('data-outcome'), point: byRound.get(Number(li.getAttribute('data-round'))) }));
});

/** Each peer's colour in the federation picture, its card and its legend entry, by label. */
const coloursOf = (page) => page.evaluate(() => {
  const out = {};
  for (const p of window.demo.state.peers.values()) {
    out[p.label.replace(/^you: /, '')] = {
      node: document.querySelector(`#federation g[data-peer="${p.id}"]`)?.getAttribute('data-colour'),
      card: document.querySelector(`#federation .peer-card[data-peer="${p.id}"]`)?.getAttribute('data-colour'),
      legend: document.querySelector(`.chart-legend .chip[data-peer="${p.id}"]`)?.getAttribute('data-colour') ?? null,
    };
  }
  return out;
});

/** Picks an example from the program menu and waits for its picture. */
async function showProgram(page, value, name, partitions) {
  await page.selectOption('#program-select', value);
  await page.waitForFunction(([n, k]) => window.demo.graph?.name === n && document.querySelectorAll('#program [data-partition]').length === k, [name, partitions]);
}

/** The drawn size of the program picture's text: its font size times the picture's scale. */
const programText = (page) => page.evaluate(() => {
  const picture = document.querySelector('.program-picture');
  const scale = picture.getBoundingClientRect().width / picture.viewBox.baseVal.width;
  const sizes = [...picture.querySelectorAll('text')].map((t) => parseFloat(getComputedStyle(t).fontSize) * scale);
  return { scale, smallest: Math.min(...sizes), width: Math.round(picture.getBoundingClientRect().width) };
});

try {
  await until('serve.mjs to listen', () => serverLog.includes(`:${port}/`), 60_000);

  // ---- the server compresses --------------------------------------------------------------
  const page = await fetchRaw(`${base}/`);
  const script = /src="\.?\/?(assets\/index-[^"]+\.js)"/.exec(page.body.toString())?.[1];
  const plain = await fetchRaw(`${base}/${script}`);
  const br = await fetchRaw(`${base}/${script}`, 'br, gzip');
  const gz = await fetchRaw(`${base}/${script}`, 'gzip');
  const digits = await fetchRaw(`${base}/digits.csv`, 'gzip, deflate');
  check('responses are compressed for clients that accept it (br, else gzip)',
    plain.headers['content-encoding'] === undefined && br.headers['content-encoding'] === 'br' && gz.headers['content-encoding'] === 'gzip' && digits.headers['content-encoding'] === 'gzip'
      && decode(br).equals(plain.body) && decode(gz).equals(plain.body) && br.body.length < plain.body.length / 2,
    `${script}: ${plain.body.length} bytes, br ${br.body.length}, gzip ${gz.body.length}; digits.csv ${digits.headers['content-encoding'] ?? 'plain'} ${digits.body.length}`);

  // ---- a phone opens the page over plain http from another machine --------------------------
  const seatsBefore = (await status()).seats.filter((s) => s.state !== 'free').length;
  const httpPhone = await open('phone over http', PHONE, '?run=join', { at: `http://${lan}:${port}` });
  await awhile('the http phone to say why it only watches', async () => /https/.test((await httpPhone.textContent('#join-bar .join-message')) ?? '') && (await httpPhone.evaluate(() => window.demo.live !== undefined)), 20_000);
  const httpSays = await httpPhone.evaluate(() => ({
    message: document.querySelector('#join-bar .join-message')?.textContent ?? '',
    joinDisabled: document.getElementById('join-live')?.disabled,
    watching: window.demo.state.info.mode,
    errors: window.demo.errors,
    joinTop: document.getElementById('join-live')?.getBoundingClientRect().top ?? Infinity,
    share: document.getElementById('join')?.textContent ?? '',
    programTop: document.getElementById('program-section').getBoundingClientRect().top,
  }));
  check('a phone over plain http is told joining needs https, and watches', /Joining needs https/.test(httpSays.message) && httpSays.joinDisabled === true && httpSays.watching === 'live (watching)' && httpSays.errors.length === 0
    && /plain http, so a phone will watch but cannot join/.test(httpSays.share)
    && !consoleErrors.some((e) => e.startsWith('phone over http')),
  `${httpSays.watching}; "${httpSays.message.slice(0, 90)}…" ${[...httpSays.errors, ...consoleErrors].slice(0, 2).join(' | ')}`);
  const httpEngine = await httpPhone.evaluate(() => ({ isolated: crossOriginIsolated, engine: window.demo.engine, says: document.getElementById('engine')?.textContent ?? '' }));
  check('over plain http the page is not isolated: its engine runs on one thread and says why', !httpEngine.isolated && httpEngine.engine?.threads === 1
    && /one thread — not more, because this page came over plain http/.test(httpEngine.says), httpEngine.says);
  check('on a phone, joining is the first thing on the page', httpSays.joinTop < PHONE.height && httpSays.joinTop < httpSays.programTop, `Join at y=${Math.round(httpSays.joinTop)}`);
  await shoot(httpPhone, 'phone-over-http');
  await httpPhone.context().close();

  // ---- a browser without WebRTC --------------------------------------------------------------
  const noRtc = await open('no WebRTC', PHONE, '?run=join', { init: () => {
    delete window.RTCPeerConnection;
    delete window.webkitRTCPeerConnection;
  } });
  await awhile('the page without WebRTC to settle', () => noRtc.evaluate(() => /no WebRTC/.test(document.querySelector('#join-bar .join-message')?.textContent ?? '') || window.demo.errors.length > 0), 20_000);
  await sleep(500);
  const noRtcSays = await noRtc.evaluate(() => ({ message: document.querySelector('#join-bar .join-message')?.textContent ?? '', mode: window.demo.state.info.mode, errors: window.demo.errors }));
  const seatsAfter = (await status()).seats.filter((s) => s.state !== 'free').length;
  check('a browser without WebRTC is told so in plain words, watches, and holds no seat', /This browser has no WebRTC/.test(noRtcSays.message) && noRtcSays.mode === 'live (watching)' && seatsAfter === seatsBefore && noRtcSays.errors.length === 0,
    `seats taken ${seatsBefore} → ${seatsAfter}; "${noRtcSays.message.slice(0, 80)}"`);
  await noRtc.context().close();

  // ---- desktop: the program picture ---------------------------------------------------------
  const desk = await open('desktop', DESKTOP, '?latency=100');
  const engine = await desk.evaluate(() => ({ isolated: crossOriginIsolated, cores: navigator.hardwareConcurrency, engine: window.demo.engine, says: document.getElementById('engine')?.textContent ?? '' }));
  check('the page is cross-origin isolated: its engine is bb-mt-relaxed.wasm on a thread per core, its peers bb-relaxed.wasm, and the footer says so',
    engine.isolated && engine.engine?.build === (engine.cores > 1 ? 'bb-mt-relaxed.wasm' : 'bb-relaxed.wasm') && engine.engine.threads === engine.cores
      && engine.engine.peerBuild === 'bb-relaxed.wasm' && engine.says.includes(`${engine.engine.build} on ${engine.cores > 1 ? `${engine.cores} threads` : 'one thread'}`),
    engine.says);
  const picture = await desk.evaluate(() => ({
    partitions: [...document.querySelectorAll('#program [data-partition]')].map((g) => ({
      title: g.getAttribute('data-title'),
      peerClass: g.getAttribute('data-class'),
      bindings: [...g.querySelectorAll('[data-binding]')].map((b) => b.getAttribute('data-binding')).sort(),
      ops: [...g.querySelectorAll('.op')].map((o) => o.textContent),
    })),
    edges: [...document.querySelectorAll('#program .wire-edge')].map((e) => ({ label: e.getAttribute('data-label'), drawn: e.querySelector('path')?.getAttribute('d')?.length ?? 0 })),
    // which boxes lie inside the server's frame
    server: (() => {
      const frame = document.querySelector('#program [data-peer-group="server"] rect')?.getBoundingClientRect();
      if (frame === undefined) return [];
      return [...document.querySelectorAll('#program [data-partition]')].filter((g) => {
        const r = g.getBoundingClientRect();
        return r.left >= frame.left && r.right <= frame.right && r.top >= frame.top && r.bottom <= frame.bottom;
      }).map((g) => g.getAttribute('data-title')).sort();
    })(),
  }));
  check('the partition view draws the three peer classes', JSON.stringify(picture.partitions.map((p) => p.peerClass).sort()) === JSON.stringify(['@self', 'clients', 'server']),
    picture.partitions.map((p) => `${p.title} (${p.peerClass})`).join(', '));
  check('the server is drawn as one peer holding its two partitions', JSON.stringify(picture.server) === JSON.stringify(['FedDigits', 'FedDigits_server']), `in the server's frame: ${picture.server.join(', ') || 'no frame'}`);
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

  // ---- desktop: a 4-client federation in Web Workers; a pause and a kill ---------------------
  await desk.selectOption('#peer-count', '4');
  await desk.click('#start');
  await until('the first rounds', async () => (await demoState(desk)).rounds >= 4, 60_000);
  const early = await demoState(desk);
  await sleep(1500);
  const later = await demoState(desk);
  check('envelope counters and animations advance', later.envelopes > early.envelopes && later.animated > early.animated,
    `envelopes ${early.envelopes} → ${later.envelopes}, dots drawn ${early.animated} → ${later.animated}`);
  const edgeCounts = await desk.evaluate(() => [...document.querySelectorAll('#program .edge-count')].map((t) => t.textContent));
  check('the program picture counts the envelopes of each wire edge', edgeCounts.length === 2 && edgeCounts.every((t) => /^\d+ envelopes/.test(t ?? '') && !t.startsWith('0 ')), edgeCounts.join(' | '));
  const idOf = (state, label) => state.peers.find((p) => p.label === label).id;
  // client 1 paused, client 3 killed: two of four answer, one short of the quorum of three
  await desk.click(`#federation button[data-action=pause][data-peer="${idOf(later, 'client 1')}"]`);
  await desk.click(`#federation button[data-action=kill][data-peer="${idOf(later, 'client 3')}"]`);
  const stoppedAt = (await demoState(desk)).round;
  await awhile('two abandoned rounds', async () => (await roundList(desk)).filter((r) => r.outcome === 'abandoned').length >= 2, 30_000);
  const belowQuorum = await roundList(desk);
  const abandoned = belowQuorum.filter((r) => r.outcome === 'abandoned');
  const marks = await desk.evaluate(() => ({
    chart: [...document.querySelectorAll('.chart-marks li')].map((li) => `${li.getAttribute('data-mark')}: ${li.textContent}`),
    list: [...document.querySelectorAll('#federation .round-strip li.mark')].map((li) => li.textContent),
  }));
  check('rounds below the quorum are listed as abandoned, the model unchanged, credited with nothing',
    abandoned.length >= 2 && abandoned.every((r) => /abandoned at its 1\.1 s deadline — (only [12] of 4 updates|no update) came back, 3 needed; the model stays as it was/.test(r.text) && !r.text.includes('→')
      && r.point.unchanged === true && r.point.accuracy === r.point.before),
    abandoned.map((r) => r.text).slice(0, 2).join(' | ') || belowQuorum.map((r) => r.text).slice(0, 2).join(' | '));
  check('the pause and the kill are marked on the curves and in the round list',
    marks.chart.some((m) => /^pause: .*client 1 paused/.test(m)) && marks.chart.some((m) => /^kill: .*client 3 killed/.test(m)) && marks.list.some((m) => /client 3 killed/.test(m)),
    `${marks.chart.join(' | ')}`);
  await desk.evaluate(() => window.scrollTo(0, 0));
  await shoot(desk, 'desktop-below-quorum');
  await desk.click(`#federation button[data-action=resume][data-peer="${idOf(later, 'client 1')}"]`);
  const resumedAt = (await demoState(desk)).round;
  await until('5 rounds after the resume', async () => (await demoState(desk)).round >= resumedAt + 5, 90_000);
  const afterKill = await demoState(desk);
  const closedAgain = (await roundList(desk)).filter((r) => r.outcome === 'closed' && r.point.round > resumedAt);
  check('a killed client is gone and, with the paused one back, the rounds close with three of four',
    afterKill.peers.find((p) => p.label === 'client 3')?.state === 'gone' && closedAgain.length > 0 && closedAgain.every((r) => /closed with 3 of 4 updates/.test(r.text)),
    `stopped at round ${stoppedAt}, resumed at ${resumedAt}, now ${afterKill.round}; ${closedAgain[0]?.text ?? ''}`);
  await awhile('90 % held-out accuracy on the page', async () => Number(await desk.getAttribute('.chart-caption', 'data-accuracy')) >= 0.9, 120_000);
  const shown = Number(await desk.getAttribute('.chart-caption', 'data-accuracy'));
  const caption = await desk.textContent('.chart-caption');
  check('the in-page federation reaches 90 % and the page says so', shown >= 0.9 && /held-out accuracy 9\d\.\d %/.test(caption ?? ''), caption ?? '');
  const deskColours = await coloursOf(desk);
  check('each client has one colour in the picture, its card and its curve',
    ['client 1', 'client 2', 'client 4'].every((c) => deskColours[c]?.node !== undefined && deskColours[c].node === deskColours[c].card && deskColours[c].card === deskColours[c].legend)
      && new Set(['client 1', 'client 2', 'client 3', 'client 4'].map((c) => deskColours[c]?.card)).size === 4,
    JSON.stringify(deskColours));
  const finalDesk = await demoState(desk);
  check('the in-page run reported no problem', finalDesk.errors.length === 0 && finalDesk.problems.filter((p) => !p.includes('deadline')).length === 0, [...finalDesk.errors, ...finalDesk.problems].slice(0, 3).join(' | '));
  await desk.evaluate(() => window.scrollTo(0, 0));
  await shoot(desk, 'desktop-running');

  // ---- desktop: the playground starts the run again with what it says -----------------------
  await attempt('the playground starts the run again with its learning rate and the clients\' digits', async () => {
    const runsBefore = await desk.evaluate(() => window.demo.runs);
    await desk.selectOption('#learning-rate', '0.1');
    await desk.evaluate(() => {
      const range = document.getElementById('digits-per-client');
      range.value = '2';
      range.dispatchEvent(new Event('change', { bubbles: true }));
    });
    // client 1 holds 0 and 1: give it 9 as well
    await desk.click('#digit-grid button[data-client="0"][data-digit="9"]');
    await awhile('the playground run to close two rounds', async () => {
      const d = await demoState(desk);
      return (await desk.evaluate(() => window.demo.settings.digits[0].length)) === 3 && d.closed >= 2;
    }, 60_000);
    const replay = await desk.evaluate(() => ({
      runs: window.demo.runs,
      settings: window.demo.settings,
      cards: [...document.querySelectorAll('#federation .peer-card .place')].map((p) => p.textContent),
      closed: window.demo.state.rounds.filter((r) => r.outcome === 'closed').length,
      lr: window.demo.graph.partitions.flatMap((p) => p.bindings).find((b) => b.slot === 'model')?.config,
    }));
    check('the playground starts the run again with its learning rate and the clients\' digits',
      replay.runs > runsBefore && replay.settings.learningRate === 0.1 && /(^|,)lr=0\.1(,|$)/.test(replay.lr ?? '') && JSON.stringify(replay.settings.digits) === JSON.stringify([[0, 1, 9], [2, 3], [4, 5], [6, 7]])
        && replay.cards.includes('worker · digits 0 1 9') && replay.closed >= 2,
      `runs ${runsBefore} → ${replay.runs}; lr ${replay.settings.learningRate} (${replay.lr}); digits ${JSON.stringify(replay.settings.digits)}; ${replay.closed} rounds closed`);
  });
  await desk.click('#stop');
  await desk.click('#reset');
  const afterReset = await demoState(desk);
  check('stop and reset clear the federation', afterReset.rounds === 0 && afterReset.peers.length === 0, `${afterReset.rounds} rounds, ${afterReset.peers.length} peers`);

  // ---- desktop: a larger program -------------------------------------------------------------
  await attempt('hierarchical_digits is drawn readable, pans, zooms, and a box lists what it holds', async () => {
    await showProgram(desk, 'hierarchical_digits:0', 'HierDigits', 5);
    const hierDesk = await programText(desk);
    await desk.click('#program [data-zoom=out]');
    const zoomedOut = await programText(desk);
    await desk.click('#program [data-partition^="HierDigits_edge#"] .box-title');
    const details = await desk.textContent('#program .program-details');
    check('hierarchical_digits is drawn readable, pans, zooms, and a box lists what it holds', hierDesk.smallest >= 11 && zoomedOut.scale < hierDesk.scale
      && /HierDigits_edge/.test(details ?? '') && /Each edge runs it .* together with HierDigits_edges/.test(details ?? '') && /Aggregator\.Aggregate/.test(details ?? ''),
    `text ${hierDesk.smallest.toFixed(1)} px at ${Math.round(hierDesk.scale * 100)} %, zoomed out to ${Math.round(zoomedOut.scale * 100)} %; ${(details ?? '').slice(0, 80)}`);
  });
  await shoot(desk, 'desktop-hierarchical');
  await desk.context().close();

  // ---- split learning: split_cnn's SplitFed, three clients and a server in Web Workers -------------
  const split = await open('split', DESKTOP, '?program=split_cnn:2&peers=3&latency=0&run=local');
  await attempt('split learning shows its cut and trains every client past 90 %', async () => {
    const bar = 0.9;
    const latest = () => split.evaluate(() => {
      const last = new Map(window.demo.state.peerPoints.map((p) => [p.peer, p.accuracy]));
      return [...window.demo.state.peers.values()].filter((p) => p.index !== undefined).map((p) => last.get(p.id) ?? 0);
    });
    await awhile('every split client past the bar', async () => {
      const accuracies = await latest();
      return accuracies.length === 3 && accuracies.every((a) => a >= bar);
    }, 30_000);
    const seen = await split.evaluate(() => ({
      client: [...document.querySelectorAll('.split-client li')].map((li) => li.getAttribute('data-op')).join(' '),
      server: [...document.querySelectorAll('.split-server li')].map((li) => li.getAttribute('data-op')).join(' '),
      cut: document.querySelector('.split-cut')?.getAttribute('data-cut'),
      counts: [...document.querySelectorAll('.split-wire .split-count')].map((e) => e.textContent),
      moving: document.querySelectorAll('.split-wire.moving').length,
      animated: window.demo.federationView.animated,
    }));
    const accuracies = await latest();
    const counted = seen.counts.map((c) => Number(/^(\d+) envelopes/.exec(c ?? '')?.[1] ?? 0));
    check('split learning shows its cut and trains every client past 90 %',
      seen.cut === '/MaxPool_1_output_0' && seen.client.endsWith('Conv Relu MaxPool Conv Relu MaxPool') && seen.server === 'Flatten Gemm Relu Gemm'
        && counted.length === 2 && counted.every((n) => n > 10) && seen.moving > 0 && seen.animated > 0 && accuracies.length === 3 && accuracies.every((a) => a >= bar),
      `cut ${seen.cut}; activations ${seen.counts[0]}, gradients ${seen.counts[1]}; held out ${accuracies.map((a) => `${(a * 100).toFixed(1)} %`).join(', ')}`);
  });
  await shoot(split, 'desktop-split');
  await split.context().close();

  // ---- phone: 800 ms latency ------------------------------------------------------------------
  const phone = await open('phone', PHONE, '?latency=800&peers=4&run=local');
  await awhile('five rounds at 800 ms latency', async () => (await demoState(phone)).rounds >= 5, 90_000);
  const slow = await roundList(phone);
  const slowState = await demoState(phone);
  const start = await phone.evaluate(() => window.demo.state.rounds[0]?.accuracy ?? 0);
  check('at 800 ms latency the rounds close with their updates and the model learns',
    slowState.closed >= 4 && slowState.accuracy > start + 0.3 && slow.length > 0 && slow.every((r) => /closed with [34] of 4 updates|abandoned at its 2\.8 s deadline — .*needed|^start/.test(r.text)),
    `${slowState.closed} rounds closed, ${(start * 100).toFixed(1)} % → ${(slowState.accuracy * 100).toFixed(1)} %; ${slow[0]?.text ?? 'no rounds'}`);
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
  const phoneColours = await coloursOf(phone);
  check('client colours are the same in another run on another device', ['client 1', 'client 2', 'client 4'].every((c) => /^#[0-9a-f]{6}$/.test(phoneColours[c]?.card ?? '') && phoneColours[c].card === deskColours[c]?.card),
    ['client 1', 'client 2', 'client 4'].map((c) => `${c}: ${deskColours[c]?.card} / ${phoneColours[c]?.card}`).join(', '));
  await attempt('one tap opens an explanation (an op, a wire edge)', async () => {
    await phone.evaluate(() => window.scrollTo(0, 0));
    await phone.tap('#program [data-partition^="FedDigits_clients"] .op-role');
    const tapped = await phone.evaluate(() => (document.getElementById('tooltip')?.hidden ? '' : document.getElementById('tooltip')?.textContent ?? ''));
    await phone.tap('#program .wire-edge .edge-label');
    const tappedEdge = await phone.evaluate(() => (document.getElementById('tooltip')?.hidden ? '' : document.getElementById('tooltip')?.textContent ?? ''));
    check('one tap opens an explanation (an op, a wire edge)', /trains the model locally/i.test(tapped) && /wire “FedDigits\.(global|update)”/.test(tappedEdge), `${tapped.slice(0, 60)} | ${tappedEdge.slice(0, 60)}`);
  });
  await shoot(phone, 'phone-running');
  await phone.click('#stop');
  await attempt('on a phone hierarchical_digits is one readable column, and a pinch zooms it', async () => {
    await showProgram(phone, 'hierarchical_digits:0', 'HierDigits', 5);
    const hierPhone = await programText(phone);
    // two fingers on the picture, moving apart
    const at = await phone.evaluate(() => {
      const v = document.querySelector('.program-viewport');
      v.scrollIntoView();
      const r = v.getBoundingClientRect();
      return { x: r.left + r.width / 2, y: r.top + 200 };
    });
    const cdp = await phone.context().newCDPSession(phone);
    const fingers = (d) => [{ x: at.x - d, y: at.y, id: 0 }, { x: at.x + d, y: at.y, id: 1 }];
    await cdp.send('Input.dispatchTouchEvent', { type: 'touchStart', touchPoints: fingers(30) });
    for (let d = 35; d <= 60; d += 5) await cdp.send('Input.dispatchTouchEvent', { type: 'touchMove', touchPoints: fingers(d) });
    await cdp.send('Input.dispatchTouchEvent', { type: 'touchEnd', touchPoints: [] });
    const zoomedIn = await programText(phone);
    const page = await phone.evaluate(() => window.visualViewport.scale);
    check('on a phone hierarchical_digits is one readable column, and a pinch zooms it', hierPhone.smallest >= 11 && hierPhone.width <= 390 && zoomedIn.scale > 1.5 * hierPhone.scale && page === 1,
      `text ${hierPhone.smallest.toFixed(1)} px, ${hierPhone.width} px wide at ${Math.round(hierPhone.scale * 100)} %; pinched to ${Math.round(zoomedIn.scale * 100)} %, the page itself at ${page}x`);
  });
  await shoot(phone, 'phone-hierarchical');
  await phone.context().close();

  // ---- the "C" locale --------------------------------------------------------------------------
  const posix = await chromium.launch({ executablePath: CHROMIUM, args: [...ARGS, '--lang=C', '--accept-lang=C'], env: { ...process.env, LANG: 'C', LC_ALL: 'C', LANGUAGE: '' } });
  try {
    const c = await open('LANG=C', DESKTOP, '?peers=2&latency=0&run=local', { from: posix });
    await awhile('rounds under the C locale', async () => (await demoState(c)).rounds >= 2, 30_000);
    const underC = await c.evaluate(() => ({ status: document.getElementById('status').textContent, canvases: document.querySelectorAll('.chart canvas').length, rounds: window.demo.state.rounds.length, languages: navigator.languages.join(',') }));
    check('under the C locale the page loads and draws its charts', underC.status !== 'loading…' && underC.canvases === 2 && underC.rounds >= 2, `${underC.rounds} rounds, ${underC.canvases} charts, languages ${underC.languages}; "${underC.status.slice(0, 60)}"`);
  } catch (error) {
    check('under the C locale the page loads and draws its charts', false, String(error?.message ?? error));
  } finally {
    await posix.close();
  }

  // ---- live: two phones join, one reloads, a third watches ---------------------------------
  const joined = [];
  for (const name of ['visitor-1', 'visitor-2']) joined.push(await open(name, PHONE, '?run=join'));
  const seatOf = (p) => p.evaluate(() => ({ self: window.demo.live?.self, seat: window.demo.live?.last?.seats.find((s) => s.peer === window.demo.live?.self)?.index }));
  await until('both visitors in the room and the rounds going', async () => {
    const s = await status();
    return s.joined === 2 && s.rounds.length >= 3 ? s : undefined;
  }, 90_000);
  const ids = await Promise.all(joined.map(async (p) => (await seatOf(p)).self));
  const both = (rounds, after) => rounds.filter((r) => r.round > after).some((r) => ids.every((id) => r.contributors.includes(id)));
  await awhile('a round with both visitors\' updates', async () => both((await status()).rounds, 0), 60_000);
  let live = await status();
  check('two pages join the live federation and both contribute to its rounds', live.joined === 2 && live.started && both(live.rounds, 0),
    `${live.joined} in, ${live.rounds.length} rounds; ${live.note}`);
  const you = await joined[0].evaluate(() => {
    const banner = document.querySelector('#join-bar .you');
    return { text: banner?.textContent ?? '', hidden: banner?.hidden ?? true, top: banner?.getBoundingClientRect().top ?? Infinity };
  });
  const spent = live.rounds.filter((r) => r.round > 0).map((r) => r.epsilon);
  const readRoundLines = () => joined[0].evaluate(() => [...document.querySelectorAll('#federation .round-strip li[data-round]')].map((li) => li.textContent ?? ''));
  await awhile('the joined page\'s round list to say the privacy spent', async () => (await readRoundLines()).some((t) => /privacy spent/.test(t)), 20_000);
  const roundLines = await readRoundLines();
  check('each live round says the privacy spent so far (ε, never falling), in status.json and the round list',
    spent.length > 0 && spent.every((e, i) => typeof e === 'number' && e > 0 && (i === 0 || e >= spent[i - 1])) && roundLines.some((t) => /privacy spent: ε \d/.test(t)),
    `ε ${spent.slice(-3).join(', ')}; "${roundLines.find((t) => /privacy spent/.test(t))?.slice(0, 110) ?? roundLines.join(' | ').slice(0, 110)}"`);
  check('a phone that joined reads "You are client N" at the top', !you.hidden && /^You are client [12]\./.test(you.text) && you.top < PHONE.height, `"${you.text.slice(0, 60)}" at y=${Math.round(you.top)}`);
  await awhile('the peer cards to follow the envelopes', async () => (await joined[0].evaluate(() => [...document.querySelectorAll('#federation .peer-card .state')].filter((s) => s.getAttribute('data-state') === 'connecting').length)) === 0, 15_000);
  const cards = await joined[0].evaluate(() => [...document.querySelectorAll('#federation .peer-card')].map((c) => `${c.querySelector('strong')?.textContent}: ${c.querySelector('.state')?.getAttribute('data-state')}`));
  check('the live peer cards show what the peers do, not "connecting"', cards.length === 3 && cards.filter((c) => /client/.test(c)).every((c) => /: (training|waiting)$/.test(c)), cards.join(', '));
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
  await awhile('a round after the reload with the reloaded visitor\'s update', async () => both((await status()).rounds, roundsBefore + 1), 60_000);
  live = await status();
  check('a visitor who reloads keeps its seat, its node, and contributes again', after.seat === before.seat && after.self === before.self && restored && both(live.rounds, roundsBefore + 1),
    `seat ${before.seat} → ${after.seat}, node restored: ${restored}; rounds ${roundsBefore} → ${live.rounds.at(-1).round}`);
  const watcher = await open('watcher', PHONE, '?run=join');
  await until('the third visitor turned away and watching', async () => {
    const text = await watcher.evaluate(() => document.querySelector('.join-message')?.textContent);
    const state = await demoState(watcher);
    return /all 2 client seats are taken/.test(text ?? '') && state.rounds > 0 && state.envelopes > 0;
  }, 30_000);
  const watching = await demoState(watcher);
  check('a refused visitor watches the federation instead', watching.rounds > 0 && watching.peers.length >= 3, `${watching.rounds} rounds, ${watching.envelopes} envelopes replayed, ${watching.peers.length} peers shown`);
  const seen = await demoState(joined[0]);
  check('a joined page shows the live rounds and envelopes', seen.rounds > 0 && seen.envelopes > 0 && seen.peers.some((p) => p.label.startsWith('you')), `${seen.rounds} rounds, ${seen.envelopes} envelopes`);
  await shoot(joined[0], 'phone-live');
  await shoot(watcher, 'phone-watching');
  const gone = ids[0];
  await joined[0].context().close();
  await awhile('status.json to count only who is there', async () => (await status()).joined === 1, 30_000);
  check('status.json counts a visitor who left as gone', (await status()).joined === 1, `joined ${(await status()).joined}`);
  // a page opened after that visitor's seat was given back still names its curve by its seat
  await awhile('the seat of the visitor who left to be free', async () => !(await status()).seats.some((s) => s.peer === gone), 30_000);
  const late = await open('late watcher', PHONE, '?run=watch');
  await awhile('the late watcher to draw the curves', async () => (await late.evaluate((id) => document.querySelector(`.chart-legend .chip[data-peer="${id}"]`) !== null, gone)), 20_000);
  const legend = await late.evaluate(() => [...document.querySelectorAll('.chart-legend .chip')].map((c) => c.textContent));
  check('a visitor who left is named by its seat on the curves, not by an id', legend.length >= 3 && legend.every((t) => /^(global model|client \d( \(gone\))?|round abandoned: model unchanged|○round abandoned: model unchanged)$/.test(t ?? '')),
    legend.join(', '));
  await late.context().close();

  // ---- an empty room runs no rounds --------------------------------------------------------------
  await joined[1].context().close();
  await watcher.context().close();
  await awhile('the room to empty', async () => (await status()).joined === 0, 30_000);
  const emptyFrom = (await status()).rounds.at(-1)?.round ?? 0;
  await sleep(4000); // four deadlines of the live rounds
  const empty = await status();
  check('an empty room runs no rounds', empty.joined === 0 && (empty.rounds.at(-1)?.round ?? 0) === emptyFrom,
    `${empty.joined} in the room; last round ${emptyFrom} → ${empty.rounds.at(-1)?.round ?? 0}; ${empty.note ?? ''}`);

  // ---- secure aggregation: three pages, the server sees only each round's sum ------------------
  const securePort = await free();
  secureServer = spawn(process.execPath, [join(demo, 'serve.mjs'), '--port', String(securePort), '--host', '127.0.0.1', '--clients', '3', '--deadline-ms', '3000', '--secure'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let secureLog = '';
  secureServer.stdout.on('data', (chunk) => (secureLog += chunk));
  secureServer.stderr.on('data', (chunk) => (secureLog += chunk));
  await until('serve.mjs --secure to listen', () => secureLog.includes(`:${securePort}/`), 60_000);
  const secureBase = `http://127.0.0.1:${securePort}`;
  const securePages = [];
  for (const name of ['secure-1', 'secure-2', 'secure-3']) securePages.push(await open(name, PHONE, '?run=join', { at: secureBase }));
  const secureStatus = await until('three secure rounds', async () => {
    const s = await (await fetch(`${secureBase}/status.json`)).json();
    return s.rounds.filter((r) => r.secure?.summed === 3).length >= 3 && s.secureView !== undefined ? s : undefined;
  }, 60_000).catch(() => undefined);
  const secureRounds = secureStatus?.rounds.filter((r) => r.round > 0) ?? [];
  check('a --secure live federation: each round a sum of the 3 pages\' masked updates, no update the server could name or score',
    secureRounds.length >= 3 && secureRounds.every((r) => r.secure?.summed === 3 && r.contributors.length === 0 && r.members.length === 3) && secureStatus.points.length === 0,
    secureRounds.slice(-2).map((r) => `round ${r.round}: ${JSON.stringify(r.secure)}, ${r.contributors.length} contributors`).join('; ') + (secureStatus === undefined ? secureLog.split('\n').slice(-5).join(' | ') : ''));
  await awhile('the secure drawing on the page', async () => securePages[0].evaluate(() => document.querySelector('.secure-view')?.hidden === false), 20_000);
  const drawn = await securePages[0].evaluate(() => {
    const pixels = (selector) => {
      const canvas = document.querySelector(selector);
      if (!(canvas instanceof HTMLCanvasElement) || canvas.width === 0) return [];
      const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
      return Array.from({ length: data.length / 4 }, (_, i) => [data[i * 4], data[i * 4 + 1], data[i * 4 + 2]]);
    };
    return {
      line: document.querySelector('#federation .round-strip li[data-round]')?.textContent ?? '',
      caption: document.querySelector('.secure-view figcaption')?.textContent ?? '',
      masked: pixels('.secure-masked'),
      step: pixels('.secure-step'),
    };
  });
  // masked: greys spread over the whole range (uniform on the ring); the step: reds and blues
  const greys = drawn.masked.map(([r]) => r);
  const meanGrey = greys.reduce((a, b) => a + b, 0) / Math.max(1, greys.length);
  check('the page says the server saw only the sum and draws one masked update (noise) beside the step the sum gave',
    /the server saw only the sum of 3 masked updates/.test(drawn.line) && /masked update .* looks like noise/.test(drawn.caption) &&
      greys.length === 256 && drawn.masked.every(([r, g, b]) => r === g && g === b) && Math.abs(meanGrey - 127.5) < 25 && new Set(greys).size > 100 &&
      drawn.step.length === 256 && drawn.step.some(([r, , b]) => r > b) && drawn.step.some(([r, , b]) => b > r),
    `"${drawn.line.slice(0, 90)}"; ${greys.length} masked cells, mean grey ${meanGrey.toFixed(0)}, ${new Set(greys).size} greys`);
  await shoot(securePages[0], 'phone-secure');
  for (const page of securePages) await page.context().close();

  check('no page reported a console error', consoleErrors.length === 0, consoleErrors.slice(0, 4).join(' | '));
} catch (error) {
  check('web-demo run', false, String(error?.stack ?? error));
  console.log(serverLog.split('\n').slice(-15).join('\n'));
} finally {
  await browser.close();
  server.kill();
  secureServer?.kill();
}
console.log('screenshots:');
for (const path of saved) console.log(`  ${path}`);
const failed = results.filter((ok) => !ok).length;
console.log(`web-demo: ${results.length - failed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
