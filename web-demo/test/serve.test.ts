/**
 * serve.mjs makes the page cross-origin isolated: every response — the page, each of its
 * built files (scripts, workers, the three builds of the module), the JSON it answers and
 * its 404s — carries Cross-Origin-Opener-Policy: same-origin,
 * Cross-Origin-Embedder-Policy: require-corp and Cross-Origin-Resource-Policy: same-origin,
 * where the browser can isolate it (loopback, https, https at a proxy); over plain http to
 * another host (where browsers ignore COOP and log an error) CORP alone.
 * Runs the real serve.mjs (--no-live) on the built page, dist/ (`npm run build` first).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, beforeAll, expect, test } from 'vitest';

const demo = fileURLToPath(new URL('..', import.meta.url));
const dist = join(demo, 'dist');
let server: ChildProcess | undefined;
let base = '';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

beforeAll(async () => {
  if (!existsSync(join(dist, 'index.html'))) throw new Error(`${dist} has no index.html: build the page first (npm run build)`);
  const port = await freePort();
  server = spawn(process.execPath, [join(demo, 'serve.mjs'), '--no-live', '--host', '127.0.0.1', '--port', String(port)], { stdio: ['ignore', 'pipe', 'pipe'] });
  await new Promise<void>((resolve, reject) => {
    let said = '';
    server!.stdout!.on('data', (chunk: Buffer) => {
      said += chunk.toString();
      if (said.includes('web-demo: http')) resolve();
    });
    server!.stderr!.on('data', (chunk: Buffer) => (said += chunk.toString()));
    server!.once('exit', (code) => reject(new Error(`serve.mjs exited (${code}): ${said}`)));
  });
  base = `http://127.0.0.1:${port}`;
});

afterAll(() => {
  server?.kill();
});

function expectIsolation(response: Response, what: string): void {
  expect(response.headers.get('cross-origin-opener-policy'), what).toBe('same-origin');
  expect(response.headers.get('cross-origin-embedder-policy'), what).toBe('require-corp');
  expect(response.headers.get('cross-origin-resource-policy'), what).toBe('same-origin');
}

test('the page, every file it is built of, its JSON and a 404 are served cross-origin isolated', async () => {
  const assets = readdirSync(join(dist, 'assets')).map((file) => `/assets/${file}`);
  expect(assets.filter((path) => path.endsWith('.wasm')).map((path) => path.replace(/-[\w-]{8}\.wasm$/, '.wasm')).sort())
    .toEqual(['/assets/bb-mt-relaxed.wasm', '/assets/bb-mt.wasm', '/assets/bb-relaxed.wasm', '/assets/bb.wasm']);
  expect(assets.some((path) => /thread-worker-.*\.js$/.test(path))).toBe(true);
  for (const path of ['/', '/index.html', '/digits.csv', '/config.json', '/status.json', ...assets]) {
    const response = await fetch(base + path, { headers: { 'accept-encoding': 'br' } });
    expect(response.status, path).toBe(200);
    expectIsolation(response, path);
    await response.arrayBuffer();
  }
  const missing = await fetch(`${base}/no-such-file.js`);
  expect(missing.status).toBe(404);
  expectIsolation(missing, '404');
});

/** The response headers to a GET of `path` sent with these request headers (Host among them). */
function headersFor(path: string, headers: Record<string, string>): Promise<IncomingHttpHeaders> {
  return new Promise((resolve, reject) => {
    const r = httpRequest(base + path, { headers }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.headers));
    });
    r.on('error', reject);
    r.end();
  });
}

test('over plain http to another host only CORP is sent; https at a proxy and loopback names get all three', async () => {
  const port = new URL(base).port;
  for (const path of ['/', '/no-such-file.js']) {
    const lan = await headersFor(path, { host: `192.0.2.10:${port}` });
    expect(lan['cross-origin-resource-policy'], path).toBe('same-origin');
    expect(lan['cross-origin-opener-policy'], path).toBeUndefined();
    expect(lan['cross-origin-embedder-policy'], path).toBeUndefined();
    const trusted: Record<string, string>[] = [{ host: 'demo.example.org', 'x-forwarded-proto': 'https' }, { host: `localhost:${port}` }, { host: `[::1]:${port}` }];
    for (const headers of trusted) {
      const isolated = await headersFor(path, headers);
      expect(isolated['cross-origin-opener-policy'], JSON.stringify(headers)).toBe('same-origin');
      expect(isolated['cross-origin-embedder-policy'], JSON.stringify(headers)).toBe('require-corp');
    }
  }
});
