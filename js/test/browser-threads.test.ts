/**
 * bb-mt.wasm and bb-mt-relaxed.wasm in a real browser (headless Chromium): a cross-origin-isolated page (served
 * with COOP/COEP) loads the built package with `loadBb({ threads: 2 })`, which starts a
 * Web Worker on shared memory, and computes a MatMul 512², a Conv, the digits CNN's
 * inference and two training steps; the page's bits equal bb.wasm's in the same page and
 * in Node, and bb-mt-relaxed.wasm's (loadBb's default there) equal bb-relaxed.wasm's. The
 * same page served without the headers falls back to one thread and says why on the console.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, normalize, sep } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, test } from 'vitest';

import { CpuSession, OnnxModel, OnnxTrainer, Tensor, encodeOnnxModel, loadBb, type Bb } from '../src/index.js';
import { randomFloats } from './random.mjs';
import { CHROMIUM, CHROMIUM_ARGS, CONTENT_TYPES, packageRoot, wasmBytes } from './support.js';

/**
 * The work, written once: run in the page (as source text) and in Node (as a function);
 * both have randomFloats (test/random.mjs) in scope.
 */
const WORK = `
/** FNV-1a over the float32 bit patterns: equal digests, equal bits. */
function digest(values) {
  const bytes = new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  let h = 0x811c9dc5;
  for (const b of bytes) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  return h.toString(16) + '/' + values.length;
}
function runModel(lib, bb, spec, inputs) {
  const model = lib.OnnxModel.decode(bb, lib.encodeOnnxModel({ opset: 17, ...spec }));
  const session = new lib.CpuSession(bb, model);
  const tensors = Object.fromEntries(Object.entries(inputs).map(([name, [data, dims]]) => [name, lib.Tensor.from(bb, 'float', data, dims)]));
  const outputs = session.run(tensors);
  const out = digest(Object.values(outputs)[0].toArray());
  for (const tensor of [...Object.values(outputs), ...Object.values(tensors)]) tensor.free();
  session.free();
  model.free();
  return out;
}
function work(lib, bb, cnnBytes) {
  const f32 = (name, dims) => ({ name, dtype: 'float', dims });
  const matmul = runModel(lib, bb, { nodes: [{ opType: 'MatMul', inputs: ['a', 'b'], outputs: ['y'] }], inputs: [f32('a', [512, 512]), f32('b', [512, 512])], outputs: [f32('y', [512, 512])] },
    { a: [randomFloats(512 * 512, 1), [512, 512]], b: [randomFloats(512 * 512, 2), [512, 512]] });
  const conv = runModel(lib, bb, { nodes: [{ opType: 'Conv', inputs: ['x', 'w', 'b'], outputs: ['y'], attributes: { pads: { ints: [1, 1, 1, 1] } } }],
      inputs: [f32('x', [4, 16, 32, 32]), f32('w', [32, 16, 3, 3]), f32('b', [32])], outputs: [f32('y', [4, 32, 32, 32])] },
    { x: [randomFloats(4 * 16 * 32 * 32, 3), [4, 16, 32, 32]], w: [randomFloats(32 * 16 * 9, 4), [32, 16, 3, 3]], b: [randomFloats(32, 5), [32]] });
  const trainer = lib.OnnxTrainer.create(bb, cnnBytes, { optimizer: 'momentum', lr: 0.05, momentum: 0.9 });
  const x = randomFloats(32 * 64, 6).map((v) => (v + 1) * 8);
  const labels = Float32Array.from({ length: 32 }, (_, i) => (i * 7) % 10);
  const inference = digest(trainer.predict(x, 32));
  const losses = [0, 1].map(() => trainer.step({ x, labels }).loss);
  const parameters = digest(trainer.parameters());
  trainer.free();
  return { matmul, conv, inference, losses, parameters };
}
`;

const PAGE_SCRIPT = `
import * as lib from './dist/index.js';
import { randomFloats } from './test/random.mjs';
${WORK}
const warnings = [];
const warn = console.warn;
console.warn = (...args) => { warnings.push(args.join(' ')); warn(...args); };
window.bbReport = (async () => {
  const cnn = new Uint8Array(await (await fetch('./models/digits_cnn.onnx')).arrayBuffer());
  // bb.wasm, not bb-relaxed.wasm (which Chromium would get by default): the bits every machine shares
  const single = await lib.loadBb({ simd: 'baseline' });
  const threaded = await lib.loadBb({ threads: 2, simd: 'baseline' });
  const report = {
    isolated: globalThis.crossOriginIsolated === true,
    threaded: threaded.threaded,
    threads: threaded.threads,
    threadsUnavailable: threaded.threadsUnavailable ?? null,
    warnings: [...warnings], // the first threaded load's
    single: work(lib, single, cnn),
    multi: work(lib, threaded, cnn),
  };
  // a worker the machine did not schedule during a job leaves its tasks to the caller: more
  // of the work, bounded, gives it the chance (a pool whose workers never take one still fails)
  for (let i = 0; i < 20 && threaded.poolStats().tasksOnWorkers === 0; i++) work(lib, threaded, cnn);
  report.stats = threaded.poolStats();
  threaded.dispose();
  // the relaxed builds, as loadBb picks them by default here: bb-relaxed.wasm on one thread,
  // bb-mt-relaxed.wasm on two (where the page is isolated), the same bits
  const relaxedSingle = await lib.loadBb();
  const relaxedThreaded = await lib.loadBb({ threads: 2 });
  report.relaxed = {
    simd: [relaxedSingle.simd, relaxedThreaded.simd],
    threaded: relaxedThreaded.threaded,
    single: work(lib, relaxedSingle, cnn),
    multi: work(lib, relaxedThreaded, cnn),
  };
  relaxedThreaded.dispose();
  return report;
})();
`;
const PAGE = '<!doctype html><title>bytesandbrains threads</title><script type="module" src="./check.js"></script>';
const ISOLATION = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };

interface Work {
  matmul: string;
  conv: string;
  inference: string;
  losses: number[];
  parameters: string;
}
interface PageReport {
  isolated: boolean;
  threaded: boolean;
  threads: number;
  threadsUnavailable: string | null;
  warnings: string[];
  single: Work;
  multi: Work;
  stats: { jobs: number; tasks: number; tasksOnWorkers: number; workersLive: number };
  relaxed: { simd: string[]; threaded: boolean; single: Work; multi: Work };
}

let server: Server | undefined;
let base: string;
let browser: Browser | undefined;

/** /isolated/... with the cross-origin isolation headers, /plain/... without; the package's dist, wasm and models, and test/random.mjs, under both. */
function serve(path: string): { status: number; type?: string; body?: Uint8Array | string; headers?: Record<string, string> } {
  const match = /^\/(isolated|plain)(\/.*)$/.exec(path);
  if (match === null) return { status: 404 };
  const headers = match[1] === 'isolated' ? ISOLATION : {};
  const rest = match[2]!;
  if (rest === '/') return { status: 200, type: 'text/html', body: PAGE, headers };
  if (rest === '/check.js') return { status: 200, type: 'text/javascript', body: PAGE_SCRIPT, headers };
  const file = normalize(join(packageRoot, rest));
  const servable = rest === '/test/random.mjs' || ['dist', 'wasm', 'models'].some((dir) => file.startsWith(join(packageRoot, dir) + sep));
  if (!servable || !existsSync(file)) return { status: 404 };
  return { status: 200, type: CONTENT_TYPES[extname(file)] ?? 'application/octet-stream', body: readFileSync(file), headers };
}

beforeAll(async () => {
  wasmBytes();
  for (const needed of [join('dist', 'index.js'), join('wasm', 'bb-mt.wasm'), join('models', 'digits_cnn.onnx')]) {
    if (!existsSync(join(packageRoot, needed))) throw new Error(`js/${needed} is missing: run \`bash scripts/build-wasm.sh\` and \`npm run build\``);
  }
  if (!existsSync(CHROMIUM)) throw new Error(`Chromium is missing at ${CHROMIUM}: install the Debian package chromium (scripts/setup.sh does)`);
  const httpServer = createServer((request, response) => {
    const { status, type, body, headers } = serve(new URL(request.url ?? '/', 'http://localhost').pathname);
    response.writeHead(status, { ...headers, ...(type === undefined ? {} : { 'content-type': type }) }).end(body);
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

async function report(path: string): Promise<PageReport> {
  if (browser === undefined) throw new Error('Chromium did not start');
  const page = await browser.newPage();
  const pageErrors: string[] = [];
  page.on('pageerror', (error) => pageErrors.push(error.message));
  await page.goto(`${base}${path}`);
  const found = (await page.evaluate('window.bbReport')) as PageReport | undefined;
  await page.close();
  if (found === undefined) throw new Error(`the page script did not run: ${pageErrors.join('; ') || 'no page error'}`);
  expect(pageErrors).toEqual([]);
  return found;
}

/** What bb.wasm computes in Node, the reference for both pages. */
async function nodeReference(): Promise<Work> {
  const bb: Bb = await loadBb(wasmBytes());
  const run = new Function('lib', 'bb', 'cnn', 'randomFloats', `${WORK}\nreturn work(lib, bb, cnn);`) as (
    lib: unknown,
    bb: Bb,
    cnn: Uint8Array,
    random: typeof randomFloats,
  ) => Work;
  return run({ CpuSession, OnnxModel, OnnxTrainer, Tensor, encodeOnnxModel }, bb, new Uint8Array(readFileSync(join(packageRoot, 'models', 'digits_cnn.onnx'))), randomFloats);
}

test('a cross-origin-isolated page runs bb-mt.wasm and bb-mt-relaxed.wasm on a Web Worker, with the bits of bb.wasm and bb-relaxed.wasm', async () => {
  const found = await report('/isolated/');
  expect(found.isolated).toBe(true);
  expect(found.threaded).toBe(true);
  expect(found.threads).toBe(2);
  expect(found.threadsUnavailable).toBeNull();
  expect(found.warnings).toEqual([]);
  expect(found.stats.tasksOnWorkers).toBeGreaterThan(0);
  expect(found.stats.workersLive).toBe(1);
  const reference = await nodeReference();
  expect(found.single).toEqual(reference);
  expect(found.multi).toEqual(reference);
  // bb-mt-relaxed.wasm on two threads: bb-relaxed.wasm's bits, which are not bb.wasm's
  expect(found.relaxed.simd).toEqual(['relaxed', 'relaxed']);
  expect(found.relaxed.threaded).toBe(true);
  expect(found.relaxed.multi).toEqual(found.relaxed.single);
  expect(found.relaxed.single.matmul).not.toEqual(reference.matmul);
});

test('a page that is not cross-origin isolated falls back to bb.wasm and says why', async () => {
  const found = await report('/plain/');
  expect(found.isolated).toBe(false);
  expect(found.threaded).toBe(false);
  expect(found.threads).toBe(1);
  expect(found.threadsUnavailable).toMatch(/not cross-origin isolated.*Cross-Origin-Opener-Policy: same-origin.*Cross-Origin-Embedder-Policy: require-corp/);
  expect(found.warnings).toEqual([expect.stringMatching(/^bytesandbrains: 2 threads asked for, running on one: the page is not cross-origin isolated/)]);
  expect(found.stats.jobs).toBe(0);
  expect(found.multi).toEqual(found.single);
  expect(found.relaxed.threaded).toBe(false);
  expect(found.relaxed.multi).toEqual(found.relaxed.single);
});
