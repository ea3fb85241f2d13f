// The training comparison of train-vs-tfjs.mjs in a cross-origin-isolated Chromium page,
// where tfjs-backend-wasm runs its threaded SIMD build: steps per second of wall-clock time,
// batch 32, Adam lr 1e-3, the digits CNN (examples/models/digits_cnn.onnx) and the 28×28 CNN
// of infer-vs-peers.mjs, bb-mt.wasm (loadBb({ threads }), bb_wasm_set_threads(n)) against
// tfjs-backend-wasm (setThreadsCount(n)) with its Conv2D gradient through its fast conv2d
// kernel (train-models.mjs), each on 1 and 2 threads.
//
//   cd bench/js && npm ci --ignore-scripts          # once
//   bash scripts/build-wasm.sh && (cd js && npm run build)
//   flock /tmp/bb-e2e.lock nice node bench/js/train-browser.mjs [--quick] [--rounds N] [--threads 1,2]
//                                   [--only digits_cnn,cnn28] [--relaxed] [--trace]
//
// Every runtime at every thread count runs in a page of its own (tfjs fixes its threads when
// its module starts), served by common.mjs's isolated server to headless Chromium (Debian's,
// or BB_CHROMIUM, through playwright-core); the pages take turns round after round (the
// machine's load changes over minutes). In a page each model first steps 21 times on one
// fixed batch (the losses must fall; bb-mt.wasm's must be the same bits at every thread
// count), then steps for 3 s (V8 tiers WebAssembly up), then is timed in 7 windows of
// 600 ms of wall-clock time; a page's figure is its best window, the table's the median over
// rounds (and the best round), beside the steps per second of the renderer's CPU time over
// the windows (CDP SystemInfo.getProcessInfo: on a loaded machine the wall clock measures the
// share of the cores the page got; at one thread the CPU time measures the work). --relaxed adds bb-mt-relaxed.wasm; --trace prints bb's
// work-pool trace (Bb.tracePool) over the windows of its last round. --quick (1 s of
// warm-up, 150 ms windows) is a rough look only: one such run gave bb on one thread half its
// full-run rate (most likely V8 had not yet optimised its module).
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { median } from './cases.mjs';
import { CHROMIUM, CHROMIUM_ARGS } from '../../js/test/chromium.mjs';
import { requireBuilt, serveIsolatedPage } from './common.mjs';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const arg = (name, fallback) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : fallback);
const QUICK = process.argv.includes('--quick');
const ROUNDS = Number(arg('--rounds', QUICK ? 1 : 3));
const THREADS = arg('--threads', '1,2').split(',').map(Number);
const NAMES = { digits_cnn: 'CNN (digits_cnn)', cnn28: 'CNN 28×28 (infer-vs-peers)' };
const ONLY = arg('--only', Object.keys(NAMES).join(',')).split(',');
const TRACE = process.argv.includes('--trace');
for (const name of ONLY) if (!(name in NAMES)) throw new Error(`--only takes ${Object.keys(NAMES).join(', ')}`);
if (!(Number.isInteger(ROUNDS) && ROUNDS >= 1) || THREADS.some((n) => !(Number.isInteger(n) && n >= 1))) throw new Error('--rounds and --threads take whole numbers from 1');

requireBuilt(join(repoRoot, 'js/wasm/bb-mt.wasm'));
for (const file of ['bench/js/node_modules/@tensorflow/tfjs-layers/dist/tf-layers.min.js', 'bench/js/node_modules/@tensorflow/tfjs-backend-wasm/dist/tf-backend-wasm.min.js']) {
  if (!existsSync(join(repoRoot, file))) throw new Error(`${file} is missing: run \`npm ci --ignore-scripts\` in bench/js`);
}
if (!existsSync(CHROMIUM)) throw new Error(`Chromium is missing at ${CHROMIUM}: install the Debian package chromium (scripts/setup.sh does)`);
const { chromium } = createRequire(join(repoRoot, 'js', 'package.json'))('playwright-core');

const SERVED = [
  'js/dist/',
  'js/wasm/',
  'examples/models/digits_cnn.onnx',
  'bench/js/cases.mjs',
  'js/test/random.mjs',
  'bench/js/train-models.mjs',
  'bench/js/train-browser-page.mjs',
  'bench/js/node_modules/@tensorflow/tfjs-core/dist/',
  'bench/js/node_modules/@tensorflow/tfjs-layers/dist/',
  'bench/js/node_modules/@tensorflow/tfjs-backend-wasm/dist/',
];
const PAGE = `<!doctype html><title>bytesandbrains training bench</title>
<script src="/bench/js/node_modules/@tensorflow/tfjs-core/dist/tf-core.min.js"></script>
<script src="/bench/js/node_modules/@tensorflow/tfjs-layers/dist/tf-layers.min.js"></script>
<script src="/bench/js/node_modules/@tensorflow/tfjs-backend-wasm/dist/tf-backend-wasm.min.js"></script>
<script type="module" src="/bench/js/train-browser-page.mjs"></script>`;
const server = await serveIsolatedPage(PAGE, SERVED);
const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
const cdp = await browser.newBrowserCDPSession();
/** CPU ms of Chromium's renderer processes (one page open at a time: its own, workers included). */
async function rendererCpuMs() {
  const { processInfo } = await cdp.send('SystemInfo.getProcessInfo');
  return processInfo.filter((p) => p.type === 'renderer').reduce((sum, p) => sum + p.cpuTime * 1000, 0);
}

/**
 * One page: `runtime` on `threads` threads; its description, core count, and per model its
 * losses, each window's steps per second of wall time, the steps per second of the
 * renderer's CPU time over all windows, and the pool's trace.
 */
async function runPage(runtime, threads, trace) {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (error) => errors.push(error.message));
  page.on('console', (message) => message.type() === 'error' && errors.push(message.text()));
  page.on('requestfailed', (request) => errors.push(`${request.url()} failed`));
  page.on('response', (response) => response.status() >= 400 && errors.push(`${response.url()}: ${response.status()}`));
  const modules = new Set();
  page.on('request', (request) => {
    const name = new URL(request.url()).pathname.split('/').pop();
    if (name.endsWith('.wasm')) modules.add(name);
  });
  try {
    await page.goto(`${server.base}/?runtime=${runtime}&threads=${threads}&quick=${QUICK ? 1 : 0}`);
    await page.waitForFunction(() => window.bench !== undefined, undefined, { timeout: 60_000 });
    const { describe, cores } = await page.evaluate(() => window.bench.load());
    const models = {};
    for (const name of ONLY) {
      const losses = await page.evaluate((n) => window.bench.start(n), name);
      const cpuStart = await rendererCpuMs();
      const { windows, poolTrace } = await page.evaluate((t) => window.bench.time(t), trace);
      const cpuMs = (await rendererCpuMs()) - cpuStart;
      await page.evaluate(() => window.bench.stop());
      const steps = windows.reduce((sum, w) => sum + w.steps, 0);
      models[name] = { losses, rates: windows.map((w) => (w.steps * 1000) / w.ms), cpuRate: (steps * 1000) / cpuMs, poolTrace };
    }
    return { describe: `${describe}; fetched ${[...modules].join(', ')}`, cores, models };
  } catch (error) {
    throw new Error(`${runtime} on ${threads} thread(s): ${error.message}${errors.length ? ` (page errors: ${errors.join('; ')})` : ''}`);
  } finally {
    await page.close();
  }
}

const RUNTIMES = [['bb-mt.wasm', 'bb-mt'], ...(process.argv.includes('--relaxed') ? [['bb-mt-relaxed.wasm', 'mt-relaxed']] : []), ['tfjs-wasm', 'tfjs']];
const configs = THREADS.flatMap((threads) => RUNTIMES.map(([runtime]) => ({ runtime, threads })));
const rates = new Map(); // `${runtime}@${threads}|${model}` → best window's steps/s per round
const cpuRates = new Map(); // the same, steps per second of the renderer's CPU time over the windows
const described = new Map();
const firstLosses = new Map(); // `${runtime}|${model}` → the first page's losses (bb's builds: every page's must equal them)
const traces = [];
const loads = [];
let cores;
for (let round = 0; round < ROUNDS; round++) {
  loads.push(loadavg()[0]);
  for (const { runtime, threads } of configs) {
    const result = await runPage(runtime, threads, TRACE && round === ROUNDS - 1);
    cores = result.cores;
    described.set(`${runtime}@${threads}`, result.describe);
    for (const [name, { losses, rates: windows, cpuRate, poolTrace }] of Object.entries(result.models)) {
      const last = losses.at(-1);
      if (!(Number.isFinite(losses[0]) && last < losses[0])) throw new Error(`${runtime} on ${threads} thread(s): ${name} did not learn (loss ${losses[0]} → ${last})`);
      const key = `${runtime}|${name}`;
      if (!firstLosses.has(key)) firstLosses.set(key, losses);
      if (runtime.startsWith('bb') && losses.some((l, i) => !Object.is(l, firstLosses.get(key)[i]))) {
        throw new Error(`${runtime} on ${threads} thread(s): ${name}'s losses differ from its first page's bits`);
      }
      const at = `${runtime}@${threads}|${name}`;
      rates.set(at, [...(rates.get(at) ?? []), Math.max(...windows)]);
      cpuRates.set(at, [...(cpuRates.get(at) ?? []), cpuRate]);
      if (poolTrace) traces.push({ runtime, threads, name, windows: windows.length, poolTrace });
    }
  }
}
await browser.close();
server.close();

const print = (rows) => {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((row) => row[c].length)));
  for (const row of rows) console.log(row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]) : cell.padStart(widths[c]))).join('  '));
};
const med = (runtime, threads, name) => median(rates.get(`${runtime}@${threads}|${name}`));
const best = (runtime, threads, name) => Math.max(...rates.get(`${runtime}@${threads}|${name}`));
console.log(`Chromium ${browser.version()} (headless, cross-origin isolated, navigator.hardwareConcurrency ${cores}); ${cpus().length} cores (${cpus()[0]?.model ?? 'unknown'}); batch 32, Adam lr 1e-3`);
for (const [key, text] of described) if (!key.startsWith('bb') || key.endsWith('@1')) console.log(`  ${key}: ${text}`);
console.log(`\ntraining steps per second of wall-clock time: the median over ${ROUNDS} round(s) of each page's best window (the best round)`);
print([
  ['model', ...THREADS.flatMap((n) => RUNTIMES.map(([, label]) => `${label} ${n}t`)), ...THREADS.map((n) => `bb/tfjs ${n}t`), ...THREADS.filter((n) => n > 1).flatMap((n) => [`bb ×${n}t`, `tfjs ×${n}t`])],
  ...ONLY.map((name) => [
    NAMES[name],
    ...THREADS.flatMap((n) => RUNTIMES.map(([runtime]) => `${med(runtime, n, name).toFixed(0)} (${best(runtime, n, name).toFixed(0)})`)),
    ...THREADS.map((n) => `${(med('bb-mt.wasm', n, name) / med('tfjs-wasm', n, name)).toFixed(2)}× (${(best('bb-mt.wasm', n, name) / best('tfjs-wasm', n, name)).toFixed(2)}×)`),
    ...THREADS.filter((n) => n > 1).flatMap((n) => ['bb-mt.wasm', 'tfjs-wasm'].map((runtime) => `${(med(runtime, n, name) / med(runtime, 1, name)).toFixed(2)}×`)),
  ]),
]);
const short = ONLY.flatMap((name) => THREADS.filter((n) => med('bb-mt.wasm', n, name) < 2 * med('tfjs-wasm', n, name)).map((n) => `${NAMES[name]} at ${n}t`));
console.log(`target bb-mt.wasm ≥ 2× tfjs-wasm at every thread count, by the medians: ${short.length === 0 ? 'met' : `NOT met (${short.join(', ')})`}`);
const cpuMed = (runtime, threads, name) => median(cpuRates.get(`${runtime}@${threads}|${name}`));
console.log('\nsteps per second of the renderer\'s CPU time (the page and its workers, spinning included), median over rounds: at one thread what the load disturbs least');
print([
  ['model', ...THREADS.flatMap((n) => RUNTIMES.map(([, label]) => `${label} ${n}t`)), ...THREADS.map((n) => `bb/tfjs ${n}t`)],
  ...ONLY.map((name) => [
    NAMES[name],
    ...THREADS.flatMap((n) => RUNTIMES.map(([runtime]) => cpuMed(runtime, n, name).toFixed(0))),
    ...THREADS.map((n) => `${(cpuMed('bb-mt.wasm', n, name) / cpuMed('tfjs-wasm', n, name)).toFixed(2)}×`),
  ]),
]);
for (const { runtime, threads, name, windows, poolTrace: t } of traces) {
  const per = (x) => (x / windows).toFixed(1);
  console.log(
    `trace ${runtime} ${threads}t ${name}, per window: ${per(t.jobs)} jobs, ${per(t.jobMs)} ms in them; caller ${per(t.callerMs)} ms in ${per(t.callerTasks)} tasks, ${per(t.waitMs)} ms waiting; ` +
      `workers ${per(t.workerMs)} ms in ${per(t.workerTasks)} tasks; wake ${((t.wakeMs / Math.max(1, t.wakes)) * 1000).toFixed(0)} µs (${per(t.wakes)} wakes, ${per(t.late)} late), ${per(t.sleeps)} sleeps, ${per(t.notifyMs)} ms waking them`,
  );
}
console.log(
  `\nload average (1 min) at the start of each round: ${loads.map((l) => l.toFixed(1)).join(', ')}; now ${loadavg().map((l) => l.toFixed(1)).join(' ')}. ` +
    "Every runtime's loss fell over 21 steps on a fixed batch; bb-mt.wasm's losses were the same bits on every page and thread count.",
);
