#!/usr/bin/env node
// Every browser engine's compute path (engine.html): WebKit (WebKitGTK's MiniBrowser through
// WebKitWebDriver, under a virtual X display), Firefox ESR (puppeteer-core over WebDriver
// BiDi) and Chromium (playwright-core). In each, bb.wasm must load with its SIMD128 kernels,
// a MatMul must agree with a plain JavaScript product, loadBb() must pick bb-relaxed.wasm
// exactly where the engine runs relaxed SIMD (Chromium does) and agree too, and a federation of a server and four
// clients must train in the page. Debian's WebKitGTK is built without WebRTC: there the
// package must say so (TransportError `no-webrtc`), not fail resolving a module. `node` runs
// the same page script in this Node process (V8 without a browser), for comparison only.
//
//   node e2e/engines.mjs [--only webkit,firefox,chromium,node] [--bench FILE]
//
// --bench times longer and writes every engine's figures (MatMul GFLOP/s, training steps/s)
// as JSON to FILE (docs/PERFORMANCE.md quotes them). Ends with `e2e: N passed, M failed`.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { register } from 'node:module';
import { createServer } from 'node:net';

import { chromium } from 'playwright-core';
import puppeteer from 'puppeteer-core';

import { CHROMIUM_ARGS, check, servePages, sleep, summary, until } from './common.mjs';

const option = (name) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : undefined);
const only = (option('--only') ?? 'webkit,firefox,chromium').split(',');
const benchFile = option('--bench');
const MINIBROWSER = '/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser';
const TIMEOUT_MS = 180_000;

const { server: http, base } = await servePages();
const page = `${base}/engine.html${benchFile ? '' : '?quick'}`;
const pageResult = 'return window.engine ?? null';

function freePort() {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

/** One WebDriver command with a timeout (a WebDriver call may otherwise hang). */
async function webdriver(url, method, body, timeoutMs = 60_000) {
  const response = await fetch(url, {
    method, signal: AbortSignal.timeout(timeoutMs),
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
  const json = await response.json();
  if (!response.ok) throw new Error(`WebDriver ${method} ${url}: ${JSON.stringify(json.value ?? json)}`);
  return json.value;
}

async function webkit() {
  const port = await freePort();
  const driver = spawn('xvfb-run', ['-a', '-s', '-screen 0 1280x1024x24', 'WebKitWebDriver', `--port=${port}`], { detached: true, stdio: 'ignore' });
  const root = `http://127.0.0.1:${port}`;
  let session;
  try {
    await until('WebKitWebDriver to listen', () => fetch(`${root}/status`).then((r) => r.ok, () => false), 30_000, 200);
    const capabilities = { alwaysMatch: { 'webkitgtk:browserOptions': { binary: MINIBROWSER, args: ['--automation'] } } };
    session = (await webdriver(`${root}/session`, 'POST', { capabilities })).sessionId;
    await webdriver(`${root}/session/${session}/url`, 'POST', { url: page });
    return await until('the engine page in WebKit', () => webdriver(`${root}/session/${session}/execute/sync`, 'POST', { script: pageResult, args: [] }), TIMEOUT_MS, 500);
  } finally {
    if (session) await webdriver(`${root}/session/${session}`, 'DELETE').catch(() => undefined);
    try {
      process.kill(-driver.pid, 'SIGTERM'); // xvfb-run, Xvfb and the driver
    } catch {
      // already gone
    }
  }
}

async function firefox() {
  const browser = await puppeteer.launch({ browser: 'firefox', executablePath: process.env.BB_FIREFOX ?? '/usr/bin/firefox-esr', headless: true, protocolTimeout: TIMEOUT_MS });
  try {
    const tab = await browser.newPage();
    await tab.goto(page);
    return await until('the engine page in Firefox', () => tab.evaluate(() => window.engine ?? null), TIMEOUT_MS, 500);
  } finally {
    await browser.close();
  }
}

async function chromiumEngine() {
  const browser = await chromium.launch({ executablePath: process.env.BB_CHROMIUM ?? '/usr/bin/chromium', args: CHROMIUM_ARGS });
  try {
    const tab = await browser.newPage();
    await tab.goto(page);
    return await until('the engine page in Chromium', () => tab.evaluate(() => window.engine ?? null), TIMEOUT_MS, 500);
  } finally {
    await browser.close();
  }
}

/** engine.js in this process: its `/pkg/` imports resolve to ../dist, its page globals are stubs. */
async function nodeEngine() {
  const dist = new URL('../dist/', import.meta.url).href;
  const hooks = `export function resolve(s, c, next) { return s.startsWith('/pkg/') ? { url: new URL(s.slice(5), ${JSON.stringify(dist)}).href, shortCircuit: true } : next(s, c); }`;
  register(`data:text/javascript,${encodeURIComponent(hooks)}`);
  const at = new URL(page);
  const fetchAbsolute = globalThis.fetch;
  Object.assign(globalThis, { window: globalThis, location: at, fetch: (url, init) => fetchAbsolute(new URL(url, at), init) });
  globalThis.document = { getElementById: () => ({ textContent: '' }) };
  globalThis.navigator ??= { userAgent: `Node.js ${process.version}` };
  try {
    await import('./engine.js');
    return await until('the engine page in Node', () => globalThis.engine ?? null, TIMEOUT_MS, 500);
  } finally {
    globalThis.fetch = fetchAbsolute;
    delete globalThis.document;
  }
}

const ENGINES = {
  webkit: ['WebKit (WebKitGTK)', webkit], firefox: ['Firefox ESR', firefox], chromium: ['Chromium', chromiumEngine], node: ['Node.js (V8)', nodeEngine],
};
const figures = {};
try {
  for (const key of only) {
    const [name, run] = ENGINES[key] ?? [];
    if (run === undefined) {
      check(`engine ${key}`, false, 'not one of webkit, firefox, chromium, node');
      continue;
    }
    console.log(`\n== ${name}`);
    let r;
    try {
      r = await run();
    } catch (error) {
      check(`${name}: the engine page ran`, false, String(error?.message ?? error));
      continue;
    }
    if (r.error) {
      check(`${name}: the engine page ran`, false, r.error);
      continue;
    }
    const [small, large] = r.matmul;
    check(`${name}: bb.wasm loads and the engine validates SIMD128`, r.loaded && r.simd, r.userAgent);
    check(`${name}: loadBb() picks bb-relaxed.wasm exactly where the engine runs relaxed SIMD${key === 'chromium' ? ' (Chromium does)' : ''}`,
      r.chosen.simd === (r.relaxedSupported ? 'relaxed' : 'baseline') && (key !== 'chromium' || r.chosen.simd === 'relaxed'),
      `relaxed SIMD ${r.relaxedSupported ? 'runs' : 'does not run'}; the ${r.chosen.simd} build, MatMul 256² max error ${r.chosen.matmul.maxError.toExponential(1)}, ${r.chosen.matmul.gflops.toFixed(1)} GFLOP/s`);
    check(`${name}: MatMul on the chosen build agrees with JavaScript's product`, r.chosen.matmul.maxError < 1e-2, `max error ${r.chosen.matmul.maxError.toExponential(1)} (256²)`);
    check(`${name}: MatMul on bb's kernels agrees with JavaScript's product`, small.maxError < 1e-3 && large.maxError < 1e-2,
      `max error ${small.maxError.toExponential(1)} (64²), ${large.maxError.toExponential(1)} (512²); ${large.gflops.toFixed(1)} GFLOP/s at 512²`);
    check(`${name}: a server and four clients train in the page`, r.training.rounds >= 8 && r.training.accuracy >= 0.8,
      `${r.training.rounds} rounds, accuracy ${r.training.accuracy.toFixed(3)}, ${r.training.stepsPerSecond.toFixed(0)} SGD steps/s`);
    if (key === 'node') {
      // Node has no RTCPeerConnection global: the package links through node-datachannel
      check(`${name}: connecting reaches for the signalling server over node-datachannel`, !r.connect.ok && r.connect.code === 'unreachable',
        `${r.connect.code}: ${r.connect.message}`);
    } else if (key === 'webkit' && !r.webrtc) {
      check(`${name}: without RTCPeerConnection, connecting says WebRTC is missing`,
        !r.connect.ok && r.connect.code === 'no-webrtc' && /WebRTC is not available/.test(r.connect.message), r.connect.message);
    } else {
      // engines with WebRTC get as far as the (absent) signalling server
      check(`${name}: has WebRTC and connecting reaches for the signalling server`, r.webrtc && !r.connect.ok && r.connect.code === 'unreachable',
        `${r.connect.code}: ${r.connect.message}`);
    }
    figures[key] = { engine: name, userAgent: r.userAgent, matmul: r.matmul, chosen: r.chosen, training: r.training, webrtc: r.webrtc };
  }
} finally {
  http.close();
}
if (benchFile) writeFileSync(benchFile, `${JSON.stringify({ measuredAt: new Date().toISOString(), figures }, null, 2)}\n`);
await sleep(0);
process.exit(summary());
