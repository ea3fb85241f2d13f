/**
 * The built package in a real browser (headless Chromium): a page imports dist/index.js,
 * loads bb.wasm from its default location over HTTP (streaming compilation) and from a
 * server that sends the wrong MIME type (the buffered fallback), and round-trips a model.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, normalize, sep } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, test } from 'vitest';

import { loadBb, OnnxModel } from '../src/index.js';
import { BB_WASM_ABI_VERSION } from '../src/internals.js';
import { addModel, CHROMIUM, CHROMIUM_ARGS, CONTENT_TYPES, packageRoot, wasmBytes } from './support.js';


let server: Server | undefined;
let base: string;
let browser: Browser | undefined;

/**
 * What the page runs, as a browser would get it from an application: the package's entry
 * module with its default wasm location, then the same module from a server that sends
 * it as application/octet-stream. It leaves its findings in `window.bbReport`.
 */
const PAGE_SCRIPT = `
import { loadBb, OnnxModel } from '/dist/index.js';
window.bbReport = (async () => {
  const bb = await loadBb();
  const fallback = await loadBb('/misconfigured/bb.wasm');
  const model = OnnxModel.decode(bb, new Uint8Array(await (await fetch('/test_add.onnx')).arrayBuffer()));
  const encoded = Array.from(model.encode());
  const summary = model.summary();
  model.free();
  let error = null;
  try {
    OnnxModel.decode(bb, new Uint8Array([0xff, 0xff]));
  } catch (caught) {
    error = { name: caught.name, code: caught.code, message: caught.message };
  }
  return { version: bb.version, abiVersion: bb.abiVersion, fallbackVersion: fallback.version, encoded, summary, error };
})();
`;
const PAGE = '<!doctype html><title>bytesandbrains</title><script type="module" src="/check.js"></script>';

/** Serves the package's dist/ and wasm/ as they would be deployed, plus the page and a model. */
function serve(path: string): { status: number; type?: string; body?: Uint8Array | string } {
  if (path === '/') return { status: 200, type: 'text/html', body: PAGE };
  if (path === '/check.js') return { status: 200, type: 'text/javascript', body: PAGE_SCRIPT };
  if (path === '/test_add.onnx') return { status: 200, type: 'application/octet-stream', body: addModel() };
  if (path === '/misconfigured/bb.wasm') return { status: 200, type: 'application/octet-stream', body: wasmBytes() };
  const file = normalize(join(packageRoot, path));
  const servable = [join(packageRoot, 'dist') + sep, join(packageRoot, 'wasm') + sep].some((dir) => file.startsWith(dir));
  if (!servable || !existsSync(file)) return { status: 404 };
  return { status: 200, type: CONTENT_TYPES[extname(file)] ?? 'application/octet-stream', body: readFileSync(file) };
}

beforeAll(async () => {
  wasmBytes(); // a clear failure when the module was not built
  if (!existsSync(join(packageRoot, 'dist', 'index.js'))) {
    throw new Error('js/dist/index.js is missing: run `npm run build` (npm test does)');
  }
  if (!existsSync(CHROMIUM)) {
    throw new Error(`Chromium is missing at ${CHROMIUM}: install the Debian package chromium (scripts/setup.sh does) or set BB_CHROMIUM`);
  }
  const httpServer = createServer((request, response) => {
    const { status, type, body } = serve(new URL(request.url ?? '/', 'http://localhost').pathname);
    response.writeHead(status, type === undefined ? {} : { 'content-type': type }).end(body);
  });
  server = httpServer;
  await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(httpServer.address() as AddressInfo).port}`;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
});

afterAll(async () => {
  await browser?.close();
  const httpServer = server;
  if (httpServer !== undefined) await new Promise<void>((resolve) => httpServer.close(() => resolve()));
});

interface PageReport {
  version: string;
  abiVersion: number;
  fallbackVersion: string;
  encoded: number[];
  summary: unknown;
  error: { name: string; code: number; message: string } | null;
}

test('the package loads bb.wasm and round-trips a model in Chromium', async () => {
  if (browser === undefined) throw new Error('Chromium did not start');
  const page = await browser.newPage();
  const pageErrors: string[] = [];
  page.on('pageerror', (error) => pageErrors.push(error.message));
  await page.goto(`${base}/`);

  const report = (await page.evaluate('window.bbReport')) as PageReport | undefined;
  if (report === undefined) throw new Error(`the page script did not run: ${pageErrors.join('; ') || 'no page error'}`);

  const bb = await loadBb(wasmBytes());
  const model = OnnxModel.decode(bb, addModel());
  expect(report.version).toBe(bb.version);
  expect(report.fallbackVersion).toBe(bb.version);
  expect(report.abiVersion).toBe(BB_WASM_ABI_VERSION);
  expect(new Uint8Array(report.encoded)).toEqual(model.encode());
  expect(report.summary).toEqual(model.summary());
  expect(report.error).toMatchObject({ name: 'BbError', code: -2 });
  expect(report.error?.message).toMatch(/^model decode: /);
  expect(pageErrors).toEqual([]);
  model.free();
  await page.close();
});
