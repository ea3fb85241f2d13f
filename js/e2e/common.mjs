// What the end-to-end scenarios share: checks and their closing line, waiting, the static
// server of the pages (peer.html, the package, bb.wasm, the digits), and opening a peer page.
import { existsSync, readFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';

export const here = fileURLToPath(new URL('.', import.meta.url)).replace(/\/$/, '');
export const packageRoot = join(here, '..');
export const DIGITS = '/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz';
export const digitsCsv = () => gunzipSync(readFileSync(DIGITS));
export const wasmBytes = () => readFileSync(join(packageRoot, 'wasm', 'bb.wasm'));

const results = [];
/** Records one check and prints it. */
export function check(name, ok, detail = '') {
  results.push({ name, ok });
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${detail ? ` — ${detail}` : ''}`);
  return ok;
}
/** Prints `e2e: N passed, M failed` and returns the exit code. */
export function summary() {
  const failed = results.filter((r) => !r.ok).length;
  console.log(`e2e: ${results.length - failed} passed, ${failed} failed`);
  return failed === 0 && results.length > 0 ? 0 : 1;
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
export async function until(what, predicate, timeoutMs, everyMs = 100) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await predicate();
    if (value) return value;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

const TYPES = { '.js': 'text/javascript', '.html': 'text/html', '.map': 'application/json', '.wasm': 'application/wasm' };

/**
 * Serves the pages: /pkg/ is the built package, / this folder, and `files` (a Map of url
 * path → [content type, bytes], which the caller may add to) first. With `tls` ({cert,
 * key}) it is HTTPS. Resolves with { server, files, base } once listening on host:0.
 */
export async function servePages({ host = '127.0.0.1', tls, port = 0 } = {}) {
  const files = new Map([
    ['/bb.wasm', ['application/wasm', wasmBytes()]],
    // where the package's loadBb() without a source looks (beside /pkg/, as beside dist/)
    ['/wasm/bb.wasm', ['application/wasm', wasmBytes()]],
    ['/wasm/bb-relaxed.wasm', ['application/wasm', readFileSync(join(packageRoot, 'wasm', 'bb-relaxed.wasm'))]],
    ['/digits.csv', ['text/csv', digitsCsv()]],
    ['/favicon.ico', ['image/x-icon', Buffer.alloc(0)]],
  ]);
  const find = (path) => {
    if (files.has(path)) return files.get(path);
    for (const [prefix, dir] of [['/pkg/', join(packageRoot, 'dist')], ['/', here]]) {
      if (!path.startsWith(prefix)) continue;
      const file = normalize(join(dir, path.slice(prefix.length)));
      if (!file.startsWith(dir + sep) || !existsSync(file)) continue;
      return [TYPES[extname(file)] ?? 'application/octet-stream', readFileSync(file)];
    }
    return undefined;
  };
  const handler = (request, response) => {
    const found = find(new URL(request.url ?? '/', 'http://x').pathname);
    if (found === undefined) {
      if (process.env.BB_E2E_DEBUG) console.log(`  404 ${request.url}`);
      return response.writeHead(404).end('not found');
    }
    response.writeHead(200, { 'content-type': found[0] }).end(found[1]);
  };
  const server = tls === undefined ? createHttpServer(handler) : createHttpsServer(tls, handler);
  await new Promise((resolve) => server.listen(port, host, resolve));
  const base = `${tls === undefined ? 'http' : 'https'}://${host}:${server.address().port}`;
  return { server, files, base };
}

/**
 * A page of peer.html in `context`; resolves once it made its identity, with its peer id as
 * `self`. `state()` reads the page's figures when called (window.e2eRead): the page runs no
 * timer to publish them, so reading costs the pages nothing while rounds are measured.
 */
export async function openPeer(context, base, query) {
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (error) => errors.push(error.message));
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(message.text());
  });
  await page.goto(`${base}/peer.html?${new URLSearchParams(query)}`);
  const self = await waitForPage(page, errors, query.i, () => window.e2e?.self || window.e2e?.error);
  const peer = { page, errors, self, state: () => page.evaluate(() => ({ ...(window.e2eRead?.() ?? window.e2e) })) };
  /** Hands the page what the operator decided (server id, peer ids, token); resolves once it runs. */
  peer.start = async (config) => {
    await page.evaluate((c) => window.e2eStart(c), config);
    await waitForPage(page, errors, query.i, () => window.e2e?.ready || window.e2e?.error);
  };
  return peer;
}

async function waitForPage(page, errors, i, predicate) {
  try {
    await until(`page ${i} to start`, () => page.evaluate(predicate), 60_000);
  } catch (error) {
    const text = await page.evaluate(() => document.getElementById('log')?.textContent ?? '').catch(() => '');
    throw new Error(`${error.message}; page log: ${text} ${errors.join(' | ')}`);
  }
  const state = await page.evaluate(() => window.e2e);
  if (state.error) throw new Error(`page ${i}: ${state.error}`);
  return state.self;
}

/** Chromium's flags for these runs (TOOLCHAIN: no sandbox as root, no throttling of background pages). */
export const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--disable-background-timer-throttling', '--disable-renderer-backgrounding',
  '--disable-backgrounding-occluded-windows'];
