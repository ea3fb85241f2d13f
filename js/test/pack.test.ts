/**
 * The package as a user gets it: `npm pack` of js/ (its prepack builds, ships the docs,
 * and refuses to pack without bb.wasm), installed from the tarball into scratch
 * applications, which then
 * - build with Vite 8 and Vite 7 (no plugin, no config) and run in headless Chromium, on
 *   the page and in a module Web Worker, each loading bb.wasm through the package, running
 *   a model on the CPU backend and a federation in the page; the same from both dev servers
 *   (Vite 7's with the `optimizeDeps.exclude` the README documents; without it the loader
 *   says what to add);
 * - run in a plain `<script type="module">` page that imports the installed files as
 *   they are (an import map names the package), and in Node 20;
 * - author their own federation with the tutorial of the installed README — its install
 *   commands, then a logistic regression on 2-D points, its files as written — and train it across two
 *   Chromium pages (one served by Vite 7's dev server, one built by Vite 8) and a Node
 *   server over WebRTC past 90 %.
 * The Vite bundle must not carry the Node-only parts (ws, node-datachannel); a Node peer
 * without node-datachannel is told to install it; `npx -p bytesandbrains
 * bytesandbrains-signal` runs from outside any app.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { extname, join, normalize, sep } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, test } from 'vitest';

import { loadBb, relaxedSimdSupported } from '../src/index.js';
import { BB_WASM_ABI_VERSION } from '../src/internals.js';
import { CHROMIUM, CHROMIUM_ARGS, CONTENT_TYPES, packageRoot, wasmBytes } from './support.js';
import { tutorialCommands, tutorialFiles } from './tutorial.js';

const VITE = join(packageRoot, 'node_modules', 'vite', 'bin', 'vite.js');
/** Vite 7, what `npm create vite` scaffolded before Vite 8 (installed as the alias vite7). */
const VITE7 = join(packageRoot, 'node_modules', 'vite7', 'bin', 'vite.js');
/** What the README tells Vite 7 users to write. */
const VITE7_CONFIG = "export default { optimizeDeps: { exclude: ['bytesandbrains'] } };\n";
const TSC = join(packageRoot, 'node_modules', 'typescript', 'bin', 'tsc');

/** y = a + b for these inputs, as float32. */
const A = [1, 2, 3];
const B = [0.5, 0.25, -3];
const Y = [1.5, 2.25, 0];

/**
 * The application's shared check: loads bb.wasm from `source` (the package's own copy
 * when undefined), builds an Add model with encodeOnnxModel, runs it and reports.
 */
const CHECK_JS = `
import { CpuSession, Dataset, encodeOnnxModel, loadBb, LocalNetwork, OnnxModel, peerIdFromU64, roundReporter, Tensor } from 'bytesandbrains';
import { compileFederatedDigits, installDigitsClient, installDigitsServer, startDigitsServer } from 'bytesandbrains/examples';

/** A federated client in this page: a server and two clients as nodes of a LocalNetwork. */
function federate(bb) {
  let state = 7;
  const random = () => ((state = (state * 1103515245 + 12345) % 2147483648) / 2147483648);
  const rows = 400;
  const x = new Float32Array(rows * 64);
  const y = new Float32Array(rows);
  for (let r = 0; r < rows; r++) {
    y[r] = r % 10;
    for (let j = 0; j < 64; j++) x[r * 64 + j] = ((j * 7 + (r % 10) * 13) % 10 < 5 ? 12 : 4) + (random() - 0.5) * 6;
  }
  const all = Dataset.fromArrays(bb, x, 64, y);
  const test = all.subset(Array.from({ length: 100 }, (_, i) => 300 + i));
  // each client holds every class: alternate blocks of ten rows
  const shards = [0, 1].map((k) => all.subset(Array.from({ length: 150 }, (_, i) => (Math.floor(i / 10) * 2 + k) * 10 + (i % 10))));
  const artifact = compileFederatedDigits(bb, { quorum: 2, target: 2 });
  const serverId = peerIdFromU64(1);
  const ids = [peerIdFromU64(2), peerIdFromU64(3)];
  const server = installDigitsServer(bb, artifact, serverId, test);
  const network = new LocalNetwork([server, ...ids.map((id, k) => installDigitsClient(bb, artifact, id, serverId, shards[k]))]);
  for (const id of ids) server.addPeer(id);
  let last = { round: 0, accuracy: 0 };
  server.onStep(roundReporter((report) => (last = report)));
  startDigitsServer(server, ids, test, 0n);
  for (let t = 1; t < 2000 && last.round < 8; t++) network.poll(BigInt(t) * 5000000n);
  network.free();
  for (const object of [all, test, ...shards]) object.free();
  return last;
}

export async function check(source) {
  const bb = await loadBb(source);
  const value = (name) => ({ name, dtype: 'float', dims: [3] });
  const bytes = encodeOnnxModel({
    opset: 13,
    nodes: [{ opType: 'Add', inputs: ['a', 'b'], outputs: ['y'] }],
    inputs: [value('a'), value('b')],
    outputs: [value('y')],
  });
  const model = OnnxModel.decode(bb, bytes);
  const session = new CpuSession(bb, model);
  const a = Tensor.from(bb, 'float', new Float32Array(${JSON.stringify(A)}), [3]);
  const b = Tensor.from(bb, 'float', new Float32Array(${JSON.stringify(B)}), [3]);
  const { y } = session.run({ a, b });
  const report = { version: bb.version, abiVersion: bb.abiVersion, simd: bb.simd, y: Array.from(y.toArray()), federated: federate(bb), threads: bb.threads };
  for (const object of [a, b, y, session, model]) object.free();
  bb.dispose();
  return report;
}

/** Every check, as { name: report } or { name: { error } }. */
export async function checkAll(sources) {
  const reports = {};
  for (const [name, source] of Object.entries(sources)) {
    try {
      reports[name] = await check(await source());
    } catch (error) {
      reports[name] = { error: String(error && error.stack || error) };
    }
  }
  return reports;
}
`;

/**
 * The Vite page: loads the module itself (default location and a URL), bb-mt.wasm with two
 * threads (its Web Worker bundled by Vite; one thread where the page is not cross-origin
 * isolated), and bb.wasm in a worker.
 */
const MAIN_JS = `
import wasmUrl from 'bytesandbrains/bb.wasm?url';
import { checkAll } from './check.js';

function inWorker() {
  const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
  return new Promise((resolve) => {
    worker.onmessage = (event) => resolve(event.data);
    worker.onerror = (event) => resolve({ workerError: event.message || 'the worker failed to load' });
  });
}

window.bbReport = (async () => ({
  page: await checkAll({ default: () => undefined, url: () => wasmUrl, threads: () => ({ threads: 2 }) }),
  worker: await inWorker(),
}))();
`;

/** The worker: the default location, a Response (fetch) and the bytes. */
const WORKER_JS = `
import wasmUrl from 'bytesandbrains/bb.wasm?url';
import { checkAll } from './check.js';

checkAll({
  default: () => undefined,
  response: () => fetch(wasmUrl),
  bytes: async () => new Uint8Array(await (await fetch(wasmUrl)).arrayBuffer()),
}).then((reports) => postMessage(reports));
`;

const INDEX_HTML = '<!doctype html><title>bytesandbrains from npm</title><script type="module" src="./main.js"></script>';

/** No bundler: the installed package's files imported as they are. */
const PLAIN_HTML = `<!doctype html><title>bytesandbrains, plain module</title>
<script type="importmap">{ "imports": { "bytesandbrains": "/app/node_modules/bytesandbrains/dist/index.js", "bytesandbrains/examples": "/app/node_modules/bytesandbrains/dist/examples/index.js" } }</script>
<script type="module">
import { checkAll } from '/app/check.js';
window.bbReport = checkAll({ default: () => undefined });
</script>`;

/** Node: the default location, the exported path of bb.wasm, and its bytes. */
const NODE_MJS = `
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { checkAll } from './check.js';

const wasmPath = createRequire(import.meta.url).resolve('bytesandbrains/bb.wasm');
console.log(JSON.stringify(await checkAll({
  default: () => undefined,
  path: () => wasmPath,
  bytes: () => readFile(wasmPath),
})));
`;

/** A TypeScript user of the package: the declarations must resolve and describe the API. */
const CONSUMER_TS = `
import {
  BbNode, componentModel, cpuMlp, federatedAveraging, loadBb, module, OnnxModel, TYPES,
  type Bb, type HostTensor, type ModelComponent, type ModelSummary, type Step, type WasmSource,
} from 'bytesandbrains';

export const Double = module('Double', (g) => void g.output('y', g.backend('cpu').op('Add', [g.input('x', TYPES.tensorF32), g.input('x')])));
class Constant implements ModelComponent {
  params(): HostTensor<'float'> { return { dtype: 'float', dims: [1], data: new Float32Array(1) }; }
  loadParameters(): void {}
  fit(params: HostTensor) { return { trained: this.params(), samples: params.dims.length }; }
  evaluate(): number { return 0.5; }
}
export const plans = [
  federatedAveraging({ model: cpuMlp({ inputs: 2, outputs: 2 }), clients: 2 }),
  federatedAveraging({ model: componentModel('Constant', () => new Constant()), clients: 2, aggregator: 'median', codec: 'f16' }),
];

export function client(bb: Bb, artifact: Uint8Array): BbNode {
  return BbNode.install(bb, { artifact, targets: ['FedDigits_clients'], seed: 3n });
}
export function sends(steps: readonly Step[]): number {
  return steps.filter((step) => step.kind === 'send' && step.bytes !== undefined).length;
}

const source: WasmSource = new URL('https://example.com/bb.wasm');
export async function summary(bytes: Uint8Array): Promise<ModelSummary> {
  const bb: Bb = await loadBb(source);
  const model = OnnxModel.decode(bb, bytes);
  try {
    return model.summary();
  } finally {
    model.free();
  }
}
`;

interface CheckReport {
  federated?: { round: number; accuracy: number };
  threads?: number;
  version?: string;
  abiVersion?: number;
  simd?: string;
  y?: number[];
  error?: string;
}

let scratch: string;
let tarball: string;
let app: string;
/** The tutorial's application (the three files of the installed README). */
let points: string;
let server: Server | undefined;
let base: string;
let browser: Browser | undefined;
let expectedVersion: string;

function run(command: string, args: string[], cwd: string): string {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', timeout: 240_000 });
  if (result.status !== 0) {
    throw new Error(`${command} ${args.join(' ')} (in ${cwd}) failed: ${result.error?.message ?? ''}\n${result.stdout}\n${result.stderr}`);
  }
  return result.stdout;
}

/** Serves the application's Vite build at /, and the application folder itself at /app/. */
/** The Vite build of the app is served cross-origin isolated (COOP/COEP), so it may run threads. */
const ISOLATION = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };

function serve(path: string): { status: number; type?: string; body?: Uint8Array | string; headers?: Record<string, string> } {
  if (path === '/plain.html') return { status: 200, type: 'text/html', body: PLAIN_HTML };
  const roots: [string, string][] = [
    ['/app/', app],
    ['/v7/', join(app, 'dist7')],
    ['/points/', join(points, 'dist')],
  ];
  const [prefix, dir] = roots.find(([p]) => path.startsWith(p)) ?? ['/', join(app, 'dist')];
  const [root, rest] = [dir, path.slice(prefix.length - 1)];
  const file = normalize(join(root, rest === '/' ? '/index.html' : rest));
  if (!file.startsWith(root + sep) || !existsSync(file)) return { status: 404 };
  const headers = prefix === '/' ? ISOLATION : {};
  return { status: 200, type: CONTENT_TYPES[extname(file)] ?? 'application/octet-stream', body: readFileSync(file), headers };
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesUnder(join(dir, entry.name)) : [join(dir, entry.name)],
  );
}

/**
 * `chosen`: the build loadBb() must pick by itself here (`default`): bb-relaxed.wasm in
 * Chromium, which runs relaxed SIMD; every other source is bb.wasm.
 */
function expectWorking(reports: Record<string, CheckReport>, names: string[], chosen: 'relaxed' | 'baseline'): void {
  expect(Object.keys(reports)).toEqual(names);
  for (const [name, { federated, threads, ...report }] of Object.entries(reports)) {
    // the default location is the build this engine runs best; so is the threads check,
    // threaded (bb-mt-relaxed.wasm or bb-mt.wasm) or fallen back to one thread
    const simd = name === 'default' || name === 'threads' ? chosen : 'baseline';
    expect({ name, ...report }).toEqual({ name, version: expectedVersion, abiVersion: BB_WASM_ABI_VERSION, simd, y: Y });
    // a federated client trained in this environment: 8 rounds, and the model learned
    expect(federated?.round, name).toBeGreaterThanOrEqual(8);
    expect(federated?.accuracy, name).toBeGreaterThanOrEqual(0.9);
  }
}

beforeAll(async () => {
  wasmBytes(); // a clear failure when the module was not built
  if (!existsSync(join(packageRoot, 'dist', 'index.js'))) {
    throw new Error('js/dist/index.js is missing: run `npm run build` (npm test does)');
  }
  if (!existsSync(CHROMIUM)) {
    throw new Error(`Chromium is missing at ${CHROMIUM}: install the Debian package chromium (scripts/setup.sh does) or set BB_CHROMIUM`);
  }
  expectedVersion = (await loadBb(wasmBytes())).version;

  scratch = mkdtempSync(join(tmpdir(), 'bb-pack-'));
  // the package's own prepack must run (the machine's npm may be set to ignore scripts)
  const packed = JSON.parse(run('npm', ['pack', '--ignore-scripts=false', '--json', '--pack-destination', scratch], packageRoot)) as { filename: string }[];
  tarball = join(scratch, packed[0]!.filename);

  app = join(scratch, 'app');
  mkdirSync(app);
  const manifest = { name: 'bb-scratch-app', private: true, type: 'module', dependencies: { bytesandbrains: `file:${tarball}` } };
  writeFileSync(join(app, 'package.json'), JSON.stringify(manifest, null, 2));
  writeFileSync(join(app, 'index.html'), INDEX_HTML);
  writeFileSync(join(app, 'main.js'), MAIN_JS);
  writeFileSync(join(app, 'worker.js'), WORKER_JS);
  writeFileSync(join(app, 'check.js'), CHECK_JS);
  writeFileSync(join(app, 'node-check.mjs'), NODE_MJS);
  writeFileSync(join(app, 'consumer.ts'), CONSUMER_TS);
  writeFileSync(join(app, 'vite7.config.js'), VITE7_CONFIG);
  run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund'], app);
  // The repository's own Vites, run on the application (a build needs no config of its own).
  run(process.execPath, [VITE, 'build', '--logLevel', 'warn'], app);
  run(process.execPath, [VITE7, 'build', '--logLevel', 'warn', '--outDir', 'dist7', '--base', '/v7/'], app);

  // the tutorial's app, made as the installed README says: its install commands (the
  // tarball under the name it has, node-datachannel and vite from the repository's copies:
  // no download), then its files as written
  points = join(scratch, 'points');
  mkdirSync(points);
  const readme = readFileSync(join(app, 'node_modules', 'bytesandbrains', 'README.md'), 'utf8');
  const [install] = tutorialCommands(readme);
  const local = (name: string): string => `file:${join(packageRoot, 'node_modules', name)}`;
  for (const line of install!) {
    const words = line.split(/\s+/).map((word) => (word === 'node-datachannel' || word === 'vite' ? local(word) : word));
    const packed = words.find((word) => word.endsWith('.tgz'));
    if (packed !== undefined) cpSync(tarball, join(points, packed));
    if (words[0] === 'npm' && words[1] === 'install') words.push('--prefer-offline', '--no-audit', '--no-fund');
    run(words[0]!, words.slice(1), points);
  }
  for (const [name, code] of tutorialFiles(readme)) writeFileSync(join(points, name), code);
  writeFileSync(join(points, 'vite7.config.js'), VITE7_CONFIG);
  run(process.execPath, [VITE, 'build', '--logLevel', 'warn', '--base', '/points/'], points);

  const httpServer = createServer((request, response) => {
    const { status, type, body, headers } = serve(new URL(request.url ?? '/', 'http://localhost').pathname);
    response.writeHead(status, { ...headers, ...(type === undefined ? {} : { 'content-type': type }) }).end(body);
  });
  server = httpServer;
  await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(httpServer.address() as AddressInfo).port}`;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}, 300_000);

afterAll(async () => {
  await browser?.close();
  const httpServer = server;
  if (httpServer !== undefined) await new Promise<void>((resolve) => httpServer.close(() => resolve()));
  if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
});

/** Starts a Vite dev server on an application; resolves with its address once it listens. */
async function startViteDevServer(vite = VITE, cwd = app, extraArgs: string[] = []): Promise<{ url: string; child: ChildProcess }> {
  const port = await new Promise<number>((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port: free } = probe.address() as AddressInfo;
      probe.close(() => resolve(free));
    });
  });
  // Plain text: with CI or a terminal in the environment Vite colours its banner and
  // bolds the port, which split the address this waits for.
  const child = spawn(process.execPath, [vite, '--host', '127.0.0.1', '--port', String(port), '--strictPort', ...extraArgs], {
    cwd,
    env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' },
  });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`vite dev server did not start:\n${output}`)), 60_000);
    const listen = (chunk: Buffer): void => {
      output += chunk.toString();
      // eslint-disable-next-line no-control-regex
      if (output.replace(/\u001b\[[0-9;]*m/g, '').includes(`:${port}/`)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout.on('data', listen);
    child.stderr.on('data', listen);
    child.on('exit', (code) => reject(new Error(`vite dev server exited (${code}):\n${output}`)));
  });
  return { url: `http://127.0.0.1:${port}/`, child };
}

async function pageReport(path: string): Promise<unknown> {
  if (browser === undefined) throw new Error('Chromium did not start');
  const page = await browser.newPage();
  const pageErrors: string[] = [];
  page.on('pageerror', (error) => pageErrors.push(error.message));
  try {
    await page.goto(new URL(path, base).href);
    await page.waitForFunction('window.bbReport !== undefined', undefined, { timeout: 30_000 });
    const report: unknown = await page.evaluate('window.bbReport');
    expect(pageErrors).toEqual([]);
    return report;
  } finally {
    await page.close();
  }
}

test('the tarball holds the build, the sources, bb.wasm and the README', () => {
  const installed = join(app, 'node_modules', 'bytesandbrains');
  for (const file of ['package.json', 'README.md', 'dist/index.js', 'dist/index.d.ts', 'dist/node/driver.js', 'dist/dsl/index.js', 'dist/templates/index.js', 'src/index.ts', 'wasm/bb.wasm', 'wasm/bb-relaxed.wasm', 'wasm/bb-mt.wasm', 'wasm/bb-mt-relaxed.wasm', 'docs/WEB.md', 'docs/MODULES.md']) {
    expect(existsSync(join(installed, file)), file).toBe(true);
  }
  expect(readFileSync(join(installed, 'wasm', 'bb.wasm')).equals(wasmBytes())).toBe(true);
  expect(existsSync(join(installed, 'test'))).toBe(false);
  // The commands (the signalling server, operator keys and join tokens): declared always,
  // linked once their files are in the package.
  const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as { bin?: Record<string, string> };
  const commands = ['bytesandbrains', 'bytesandbrains-signal', 'bytesandbrains-token'];
  expect(manifest.bin).toEqual(Object.fromEntries(commands.map((name) => [name, `./bin/${name}.mjs`])));
  for (const name of commands) {
    if (!existsSync(join(packageRoot, 'bin', `${name}.mjs`))) continue;
    expect(existsSync(join(installed, 'bin', `${name}.mjs`))).toBe(true);
    expect(existsSync(join(app, 'node_modules', '.bin', name))).toBe(true);
  }
  expect(existsSync(join(installed, 'node_modules'))).toBe(false);
});

test('a Vite build of an app using the package runs in Chromium, on the page (on two threads too) and in a Worker', async () => {
  const report = (await pageReport('/')) as { page: Record<string, CheckReport>; worker: Record<string, CheckReport> };
  expectWorking(report.page, ['default', 'url', 'threads'], 'relaxed');
  expect(report.page['threads']?.threads).toBe(2); // bb-mt-relaxed.wasm, its worker bundled by Vite
  expectWorking(report.worker, ['default', 'response', 'bytes'], 'relaxed');
});

test('the same app runs from the Vite dev server, its dependency optimizer included', async () => {
  const { url, child } = await startViteDevServer();
  try {
    const report = (await pageReport(url)) as { page: Record<string, CheckReport>; worker: Record<string, CheckReport> };
    // the dev server sends no COOP/COEP: threads fall back to one
    expectWorking(report.page, ['default', 'url', 'threads'], 'relaxed');
    expect(report.page['threads']?.threads).toBe(1);
    expectWorking(report.worker, ['default', 'response', 'bytes'], 'relaxed');
  } finally {
    child.kill();
  }
});

test('the Vite build emits bb.wasm, bb-relaxed.wasm, bb-mt.wasm and bb-mt-relaxed.wasm as assets and bundles none of the Node-only parts', () => {
  const files = filesUnder(join(app, 'dist'));
  const wasm = files.filter((file) => file.endsWith('.wasm')).map((file) => readFileSync(file));
  const shipped = ['bb.wasm', 'bb-relaxed.wasm', 'bb-mt.wasm', 'bb-mt-relaxed.wasm'].map((name) => ({ name, bytes: readFileSync(join(packageRoot, 'wasm', name)) }));
  for (const { name, bytes } of shipped) expect(wasm.some((emitted) => emitted.equals(bytes)), `${name} emitted`).toBe(true);
  for (const bytes of wasm) expect(shipped.some((module) => module.bytes.equals(bytes))).toBe(true);
  const scripts = files.filter((file) => file.endsWith('.js'));
  expect(scripts.length).toBeGreaterThanOrEqual(3); // the page, the app's worker and the pool's
  for (const file of scripts) {
    const code = readFileSync(file, 'utf8');
    expect(code, file).not.toMatch(/node-datachannel/);
    expect(code, file).not.toMatch(/["']ws["']|WebSocketServer/);
  }
});

test('a plain <script type="module"> page imports the installed files as they are', async () => {
  const report = (await pageReport('/plain.html')) as Record<string, CheckReport>;
  expectWorking(report, ['default'], 'relaxed');
});

test('TypeScript finds the declarations under NodeNext and bundler resolution', () => {
  const common = ['--noEmit', '--strict', '--skipLibCheck', '--target', 'ES2022', '--lib', 'ES2022,DOM'];
  run(process.execPath, [TSC, ...common, '--module', 'nodenext', '--moduleResolution', 'nodenext', 'consumer.ts'], app);
  run(process.execPath, [TSC, ...common, '--module', 'esnext', '--moduleResolution', 'bundler', 'consumer.ts'], app);
});

/** Every entry point of the package, as a program imports them (the Node-only ones when `node`). */
function entryPoints(node: boolean): string {
  const entries = ['bytesandbrains', 'bytesandbrains/examples', 'bytesandbrains/internals', 'bytesandbrains/transport', 'bytesandbrains/signal', 'bytesandbrains/identity'];
  if (node) entries.push('bytesandbrains/signal/server', 'bytesandbrains/identity/node');
  return `${entries.map((entry, i) => `import * as entry${i} from '${entry}';`).join('\n')}\nexport const entries = [${entries.map((_, i) => `entry${i}`).join(', ')}];\n`;
}

/** TypeScript 7 (the native compiler `npm create vite` scaffolds with Vite 8). */
const TSGO = join(packageRoot, 'node_modules', '@typescript', 'native-preview', 'bin', 'tsgo');

test('the declarations compile, strict and with their own files checked, in a Node-only project and in a browser project, with TypeScript 6 and 7', () => {
  // a Node program: no DOM library, Node's types (what `npm i -D typescript @types/node` and `lib: ES2023` give)
  writeFileSync(join(app, 'node-only.ts'), entryPoints(true));
  const nodeOnly = { compilerOptions: { strict: true, skipLibCheck: false, noEmit: true, target: 'ES2022', module: 'nodenext', moduleResolution: 'nodenext', lib: ['ES2023'], types: ['node'], typeRoots: [join(packageRoot, 'node_modules', '@types')] }, files: ['node-only.ts'] };
  writeFileSync(join(app, 'tsconfig.node-only.json'), JSON.stringify(nodeOnly));
  for (const compiler of [TSC, TSGO]) run(process.execPath, [compiler, '-p', 'tsconfig.node-only.json'], app);
  // a page: the DOM library, no Node types (what a Vite app's tsconfig has)
  writeFileSync(join(app, 'browser-only.ts'), entryPoints(false));
  const browserOnly = { compilerOptions: { strict: true, skipLibCheck: false, noEmit: true, target: 'ES2022', module: 'esnext', moduleResolution: 'bundler', lib: ['ES2023', 'DOM', 'DOM.Iterable'], types: [] }, files: ['browser-only.ts'] };
  writeFileSync(join(app, 'tsconfig.browser-only.json'), JSON.stringify(browserOnly));
  for (const compiler of [TSC, TSGO]) run(process.execPath, [compiler, '-p', 'tsconfig.browser-only.json'], app);
});

test('Node 20 imports the installed package', () => {
  const output = run(process.execPath, ['node-check.mjs'], app);
  expectWorking(JSON.parse(output) as Record<string, CheckReport>, ['default', 'path', 'bytes'], relaxedSimdSupported() ? 'relaxed' : 'baseline');
});

test('Vite 7 builds the app with no configuration, and its dev server runs it with the documented optimizeDeps.exclude', async () => {
  const built = (await pageReport('/v7/')) as { page: Record<string, CheckReport>; worker: Record<string, CheckReport> };
  expectWorking(built.page, ['default', 'url', 'threads'], 'relaxed');
  expectWorking(built.worker, ['default', 'response', 'bytes'], 'relaxed');
  const { url, child } = await startViteDevServer(VITE7, app, ['--config', 'vite7.config.js']);
  try {
    const report = (await pageReport(url)) as { page: Record<string, CheckReport>; worker: Record<string, CheckReport> };
    expectWorking(report.page, ['default', 'url', 'threads'], 'relaxed');
    expectWorking(report.worker, ['default', 'response', 'bytes'], 'relaxed');
  } finally {
    child.kill();
  }
});

test("without the exclusion, Vite 7's dev server breaks the module's URL and the loader says what to add", async () => {
  const { url, child } = await startViteDevServer(VITE7, app);
  try {
    const report = (await pageReport(url)) as { page: Record<string, CheckReport> };
    expect(report.page['default']?.error).toMatch(/served an HTML page, not bb\.wasm.*optimizeDeps: \{ exclude: \['bytesandbrains'\] \}/);
  } finally {
    child.kill();
  }
});

test('npm pack refuses to pack without bb.wasm', () => {
  const copy = join(scratch, 'no-wasm');
  mkdirSync(copy);
  for (const entry of ['package.json', 'tsconfig.json', 'README.md', 'src', 'scripts', 'bin']) cpSync(join(packageRoot, entry), join(copy, entry), { recursive: true });
  symlinkSync(join(packageRoot, 'node_modules'), join(copy, 'node_modules'));
  const result = spawnSync('npm', ['pack', '--ignore-scripts=false', '--pack-destination', copy], { cwd: copy, encoding: 'utf8', timeout: 120_000 });
  expect(result.status).not.toBe(0);
  expect(result.stdout + result.stderr).toMatch(/prepack: wasm\/bb\.wasm is missing: build it with `bash scripts\/build-wasm\.sh`/);
});

test('npx -p bytesandbrains bytesandbrains-signal runs from outside any app', () => {
  const outside = mkdtempSync(join(scratch, 'outside-'));
  const output = run('npx', ['--yes', '--prefer-offline', '-p', tarball, 'bytesandbrains-signal', '--help'], outside);
  expect(output).toMatch(/usage: bytesandbrains-signal \[--port 8787\] \[--host 127\.0\.0\.1\]/);
});

test('a Node peer without node-datachannel is told what to install', () => {
  // the app installed the package alone (the tutorial's app has node-datachannel)
  writeFileSync(
    join(app, 'no-rtc.mjs'),
    "import { WebRtcTransport } from 'bytesandbrains/transport';\n" +
      'try { await WebRtcTransport.create({}); } catch (error) { console.log(error.message); }\n',
  );
  expect(run(process.execPath, ['no-rtc.mjs'], app)).toMatch(/node-datachannel is not installed: in Node run `npm install node-datachannel`/);
});

test('the tutorial of the installed README trains across two Chromium pages and a Node server over WebRTC', async () => {
  const port = await new Promise<number>((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port: free } = probe.address() as AddressInfo;
      probe.close(() => resolve(free));
    });
  });
  const serverPeer = spawn(process.execPath, ['server.mjs'], { cwd: points, env: { ...process.env, PORT: String(port) } });
  let output = '';
  serverPeer.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  serverPeer.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => serverPeer.on('exit', resolve));
  const dev = await startViteDevServer(VITE7, points, ['--config', 'vite7.config.js']);
  // WebRTC between pages and node-datachannel: host candidates, no mDNS names
  const rtcBrowser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [...CHROMIUM_ARGS, '--disable-quic', '--disable-features=WebRtcHideLocalIpsWithMdns', '--allow-loopback-in-peer-connection'],
  });
  try {
    const serverId = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the server printed no id:\n${output}`)), 30_000);
      // it may have printed it while the dev server started
      const look = (): void => {
        const id = /server peer id: (\w+)/.exec(output)?.[1];
        if (id !== undefined) clearTimeout(timer), resolve(id);
      };
      serverPeer.stdout.on('data', look);
      look();
    });
    const query = `?server=${serverId}&signal=ws://127.0.0.1:${port}`;
    const pageErrors: string[] = [];
    for (const address of [`${dev.url}${query}`, `${base}/points/${query}`]) {
      const page = await (await rtcBrowser.newContext()).newPage();
      page.on('pageerror', (error) => pageErrors.push(error.message));
      await page.goto(address);
      await page.waitForFunction('document.body.textContent.includes("training")', undefined, { timeout: 30_000 });
    }
    const code = await Promise.race([exited, new Promise<string>((resolve) => setTimeout(() => resolve('timed out'), 120_000))]);
    expect(pageErrors).toEqual([]);
    expect(code, output).toBe(0);
    expect(Number(/trained: ([\d.]+) %/.exec(output)?.[1]), output).toBeGreaterThanOrEqual(90);
  } finally {
    serverPeer.kill();
    dev.child.kill();
    await rtcBrowser.close();
  }
}, 300_000);

test('npx bytesandbrains serve, from the tarball: a server from one command that two Node clients train with', async () => {
  const outside = mkdtempSync(join(scratch, 'outside-'));
  expect(run('npx', ['--yes', '--prefer-offline', '-p', tarball, 'bytesandbrains', 'serve', '--help'], outside)).toMatch(/usage: bytesandbrains serve --model FILE\.onnx\|builtin:NAME --test FILE\.csv/);
  // the points app has node-datachannel (the tutorial's install); its clients import the installed package
  const client = readFileSync(join(packageRoot, 'test', 'fixtures', 'serve-client.mjs'), 'utf8')
    .replace("'../../dist/index.js'", "'bytesandbrains'")
    .replace("'../../dist/identity/index.js'", "'bytesandbrains/identity'");
  writeFileSync(join(points, 'serve-client.mjs'), client);
  const digits = gunzipSync(readFileSync('/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz')).toString().trim().split('\n');
  writeFileSync(join(points, 'digits-test.csv'), `${digits.filter((_, i) => i % 5 === 0).join('\n')}\n`);
  for (let k = 0; k < 2; k++) writeFileSync(join(points, `digits-${k}.csv`), `${digits.filter((_, i) => i % 5 !== 0 && i % 2 === k).join('\n')}\n`);
  const serve = spawn(join(points, 'node_modules', '.bin', 'bytesandbrains'), ['serve', '--model', 'builtin:digits-mlp', '--test', 'digits-test.csv', '--port', '0', '--clients', '2', '--rounds', '6', '--lr', '0.005'], { cwd: points });
  let output = '';
  serve.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  serve.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => serve.on('exit', resolve));
  const clients: ChildProcess[] = [];
  try {
    const base = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`serve printed no status address:\n${output}`)), 30_000);
      serve.stdout.on('data', () => {
        const url = /status: (http:\/\/[\d.:]+)\/status/.exec(output)?.[1];
        if (url !== undefined) clearTimeout(timer), resolve(url);
      });
    });
    for (let k = 0; k < 2; k++) clients.push(spawn(process.execPath, ['serve-client.mjs', base, `digits-${k}.csv`], { cwd: points }));
    const code = await Promise.race([exited, new Promise<string>((resolve) => setTimeout(() => resolve('timed out'), 90_000))]);
    expect(code, output).toBe(0);
    expect(output).toMatch(/^round 6: [\d.]+ %/m);
    expect(Number(/trained: ([\d.]+) % after 6 rounds/.exec(output)?.[1]), output).toBeGreaterThanOrEqual(80);
  } finally {
    serve.kill('SIGKILL');
    for (const child of clients) child.kill('SIGKILL');
  }
}, 180_000);
