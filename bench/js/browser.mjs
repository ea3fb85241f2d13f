// bb in a cross-origin-isolated Chromium page against onnxruntime-web and TensorFlow.js's
// wasm backend at the same thread counts: bb-mt.wasm and bb-mt-relaxed.wasm
// (loadBb({ threads: n, simd })), bb.wasm and bb-relaxed.wasm (one thread), onnxruntime-web's threaded wasm (env.wasm.numThreads = n)
// and tfjs-backend-wasm (setThreadsCount(n)), on the cases of cases.mjs (MatMul 512² and
// 1024², a Conv 3×3, a small CNN's inference at batch 64) and on torchvision's resnet18,
// mobilenet_v2 and efficientnet_b0 (batch 1, 3×64×64, as bench/vision_vs_peers.py exports
// them; bb and onnxruntime-web: tfjs does not load ONNX), with --train bb's training step
// on them (no peer has one in a page), at 1, 2 and navigator.hardwareConcurrency threads.
//
//   cd bench/js && npm ci --ignore-scripts          # once
//   bash scripts/build-wasm.sh && (cd js && npm run build)
//   flock /tmp/bb-e2e.lock node bench/js/browser.mjs [--quick] [--rounds N] [--train] [--models resnet18,... | none]
//   node bench/js/browser.mjs --page ort-web 2    # one page alone: its times, nothing checked
//   ... [--ort-bundle ort.min.mjs] [--warm MS]    # onnxruntime-web's entry (default ort.wasm.min.mjs); warm-up per case
//   ... [--cases CNN,Conv]                         # only the cases whose label contains one of these
//
// A static server (port 0) serves the page, the package's dist/ and wasm/, and the peers'
// files from bench/js/node_modules, all with COOP/COEP, to headless Chromium (Debian's, or
// BB_CHROMIUM, through playwright-core). Every runtime at every thread count runs in a page
// of its own (onnxruntime-web and tfjs fix their threads when their module starts), the
// pages taking turns round after round (the machine's load changes over minutes). A page
// warms up, then times each case in wall-clock time (a page has no CPU clock), median of
// its runs; the tables show the median over rounds. Outputs are checked before the tables:
// bb-mt.wasm's must be bb.wasm's bits, bb-mt-relaxed.wasm's bb-relaxed.wasm's, every other runtime's within 1e-4 (max |difference|
// over max |reference|) of bb.wasm's. ×: the speed-up t1/tn of a runtime on n threads;
// peer/bb: the peer's time over bb-mt.wasm's at the same thread count (> 1: bb faster). Since a page
// has no CPU clock, the script also reads the renderer process's CPU time (CDP
// SystemInfo.getProcessInfo) around each case's timed runs: on a loaded machine the wall
// clock measures the share of the cores the page got, the CPU time the work done.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { agreement, median } from './cases.mjs';
import { CHROMIUM, CHROMIUM_ARGS } from '../../js/test/chromium.mjs';
import { requireBuilt, serveIsolatedPage } from './common.mjs';

const QUICK = process.argv.includes('--quick');
const ROUNDS = process.argv.includes('--rounds') ? Number(process.argv[process.argv.indexOf('--rounds') + 1]) : QUICK ? 1 : 3;
const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const arg = (name, fallback) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : fallback);
/** torchvision's networks, exported by bench/vision_vs_peers.py (PyTorch and torchvision needed); --models none leaves them out. */
const MODELS = arg('--models', 'resnet18,mobilenet_v2,efficientnet_b0').split(',').filter((m) => m !== 'none' && m !== '');
const TRAIN = process.argv.includes('--train');
/** onnxruntime-web's entry in the page (default its wasm-only ort.wasm.min.mjs; browser-page.mjs says why). */
const ORT_BUNDLE = arg('--ort-bundle', undefined);
/** Each case's warm-up in ms before it is timed (default 400; 100 with --quick). */
const WARM_MS = arg('--warm', undefined);
/** Only the cases whose label contains one of these (comma-separated), or all. */
const CASES = arg('--cases', undefined);

requireBuilt();
for (const file of ['bench/js/node_modules/onnxruntime-web/dist/ort.min.mjs', 'bench/js/node_modules/@tensorflow/tfjs-backend-wasm/dist/tf-backend-wasm.min.js']) {
  if (!existsSync(join(repoRoot, file))) throw new Error(`${file} is missing: build the wasm modules (scripts/build-wasm.sh) and run \`npm ci --ignore-scripts\` in bench/js`);
}
if (!existsSync(CHROMIUM)) throw new Error(`Chromium is missing at ${CHROMIUM}: install the Debian package chromium (scripts/setup.sh does)`);
const { chromium } = createRequire(join(repoRoot, 'js', 'package.json'))('playwright-core');

/** Exports the networks into a temporary directory (NAME.onnx; train/NAME.onnx at opset 16). */
function exportModels() {
  const dir = mkdtempSync(join(tmpdir(), 'bb-browser-bench-'));
  const script = join(repoRoot, 'bench', 'vision_vs_peers.py');
  for (const [out, extra] of [[dir, []], ...(TRAIN ? [[join(dir, 'train'), ['--train']]] : [])]) {
    if (MODELS.length === 0) break;
    const run = spawnSync('/usr/bin/python3', [script, '--export', out, '--models', MODELS.join(','), '--size', '64', ...extra], { encoding: 'utf8' });
    if (run.status !== 0) throw new Error(`exporting the networks failed (PyTorch and torchvision are needed; --models none leaves them out): ${run.stderr}`);
  }
  return dir;
}
const visionDir = exportModels();

// ---- the server: the page, the package, the peers; every answer cross-origin isolated ----

const SERVED = ['js/dist/', 'js/wasm/', 'js/test/random.mjs', 'bench/js/cases.mjs', 'bench/js/browser-page.mjs', 'bench/js/node_modules/onnxruntime-web/dist/', 'bench/js/node_modules/@tensorflow/tfjs-core/dist/', 'bench/js/node_modules/@tensorflow/tfjs-backend-wasm/dist/'];
const PAGE = `<!doctype html><title>bytesandbrains threads bench</title>
<script src="/bench/js/node_modules/@tensorflow/tfjs-core/dist/tf-core.min.js"></script>
<script src="/bench/js/node_modules/@tensorflow/tfjs-backend-wasm/dist/tf-backend-wasm.min.js"></script>
<script type="module" src="/bench/js/browser-page.mjs"></script>`;

const server = await serveIsolatedPage(PAGE, SERVED, (path) => {
  const network = /^\/vision\/((?:train\/)?[a-z0-9_]+\.onnx)$/.exec(path);
  if (network === null) return undefined;
  const file = join(visionDir, network[1]);
  return existsSync(file) ? { type: 'application/octet-stream', body: readFileSync(file) } : null;
});
const base = server.base;
const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });

const cdp = await browser.newBrowserCDPSession();
/** CPU ms of Chromium's renderer processes (one page open at a time: its own, workers included). */
async function rendererCpuMs() {
  const { processInfo } = await cdp.send('SystemInfo.getProcessInfo');
  return processInfo.filter((p) => p.type === 'renderer').reduce((sum, p) => sum + p.cpuTime * 1000, 0);
}

/**
 * One page: `runtime` on `threads` threads; its description, the page's core count, and per
 * case the wall-clock median ms, the renderer's CPU ms per run over the same runs, and the output.
 */
async function runPage(runtime, threads) {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (error) => errors.push(error.message));
  // the WebAssembly modules the page fetched: which build of a peer actually ran
  const modules = new Set();
  page.on('request', (request) => {
    const name = new URL(request.url()).pathname.split('/').pop();
    if (name.endsWith('.wasm')) modules.add(name);
  });
  try {
    const networks = `&vision=${MODELS.join(',')}${TRAIN ? `&train=${MODELS.join(',')}` : ''}`;
    await page.goto(`${base}/?runtime=${runtime}&threads=${threads}&quick=${QUICK ? 1 : 0}${networks}${ORT_BUNDLE ? `&ortBundle=${ORT_BUNDLE}` : ''}${WARM_MS ? `&warm=${WARM_MS}` : ''}${CASES ? `&cases=${encodeURIComponent(CASES)}` : ''}`);
    await page.waitForFunction(() => window.bench !== undefined, undefined, { timeout: 60_000 });
    const { describe, cores, runs: supported } = await page.evaluate(() => window.bench.load());
    const rows = [];
    for (const { i, label } of supported) {
      const bytes = Buffer.from(await page.evaluate((i) => window.bench.prepare(i), i), 'base64');
      await page.evaluate((i) => window.bench.warm(i), i);
      const cpuStart = await rendererCpuMs();
      const { ms, runs } = await page.evaluate((i) => window.bench.time(i), i);
      const cpuMs = ((await rendererCpuMs()) - cpuStart) / runs;
      await page.evaluate((i) => window.bench.release(i), i);
      rows.push({ label, ms, cpuMs, output: new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4) });
    }
    return { describe: `${describe}; fetched ${[...modules].join(', ')}`, cores, rows };
  } catch (error) {
    throw new Error(`${runtime} on ${threads} thread(s): ${error.message}${errors.length ? ` (page errors: ${errors.join('; ')})` : ''}`);
  } finally {
    await page.close();
  }
}

// ---- rounds of pages ---------------------------------------------------------------------

if (process.argv.includes('--page')) {
  const at = process.argv.indexOf('--page');
  const result = await runPage(process.argv[at + 1], Number(process.argv[at + 2] ?? 1));
  console.log(result.describe);
  for (const row of result.rows) console.log(`  ${row.label}: ${row.ms.toFixed(1)} ms, CPU ${row.cpuMs.toFixed(1)} ms per run`);
  await browser.close();
  server.close();
  rmSync(visionDir, { recursive: true, force: true });
  process.exit(0);
}
if (!existsSync(join(repoRoot, 'js/wasm/bb-mt.wasm'))) throw new Error('js/wasm/bb-mt.wasm is missing: run `bash scripts/build-wasm.sh`');

const probe = await runPage('bb.wasm', 1);
const cores = probe.cores;
const threadCounts = [...new Set([1, 2, cores])].sort((a, b) => a - b);
/** The runtimes measured at every thread count, and their names in the tables. */
const THREADED = [['bb-mt.wasm', 'bb-mt'], ['bb-mt-relaxed.wasm', 'mt-relaxed'], ['ort-web', 'ORT'], ['tfjs-wasm', 'tfjs']];
const configs = [
  { runtime: 'bb.wasm', threads: 1 },
  { runtime: 'bb-relaxed.wasm', threads: 1 },
  ...THREADED.map(([runtime]) => runtime).flatMap((runtime) => threadCounts.map((threads) => ({ runtime, threads }))),
];
const reference = probe.rows;
const referenceOf = new Map(reference.map((row) => [row.label, row]));
const relaxedReferenceOf = new Map(); // bb-relaxed.wasm's rows, which bb-mt-relaxed.wasm's must equal bit for bit
const times = new Map(); // `${runtime}@${threads}|${label}` → wall ms per round
const cpuTimes = new Map(); // the same, the renderer's CPU ms per run
const described = new Map();
const loads = [];
for (let round = 0; round < ROUNDS; round++) {
  loads.push(loadavg()[0]);
  for (const { runtime, threads } of configs) {
    const result = await runPage(runtime, threads);
    described.set(`${runtime}@${threads}`, result.describe);
    result.rows.forEach((row) => {
      const { identical, relative } = agreement(row.output, referenceOf.get(row.label).output);
      if (runtime === 'bb-relaxed.wasm' && !relaxedReferenceOf.has(row.label)) relaxedReferenceOf.set(row.label, row);
      if (runtime === 'bb-mt.wasm' && !identical) throw new Error(`bb-mt.wasm on ${threads} threads: ${row.label} differs from bb.wasm's bits`);
      if (runtime === 'bb-mt-relaxed.wasm' && !agreement(row.output, relaxedReferenceOf.get(row.label).output).identical) {
        throw new Error(`bb-mt-relaxed.wasm on ${threads} threads: ${row.label} differs from bb-relaxed.wasm's bits`);
      }
      if (!(relative <= 1e-4)) throw new Error(`${runtime} on ${threads} threads: ${row.label} is off by ${relative} (relative to bb.wasm)`);
      const key = `${runtime}@${threads}|${row.label}`;
      times.set(key, [...(times.get(key) ?? []), row.ms]);
      cpuTimes.set(key, [...(cpuTimes.get(key) ?? []), row.cpuMs]);
    });
  }
}
await browser.close();
server.close();
rmSync(visionDir, { recursive: true, force: true });

// ---- the tables ----------------------------------------------------------------------------

/** The median over rounds, undefined where the runtime has no such case (tfjs: ONNX networks; the peers: training). */
const ms = (runtime, threads, label) => {
  const values = times.get(`${runtime}@${threads}|${label}`);
  return values === undefined ? undefined : median(values);
};
const print = (rows) => {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((row) => row[c].length)));
  for (const row of rows) console.log(row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]) : cell.padStart(widths[c]))).join('  '));
};
const fmt = (v) => (v === undefined ? '—' : `${v.toFixed(1)} ms`);
/** The fastest round's wall ms. */
const best = (runtime, threads, label) => {
  const values = times.get(`${runtime}@${threads}|${label}`);
  return values === undefined ? undefined : Math.min(...values);
};
const ratio = (v) => (Number.isFinite(v) ? `${v.toFixed(2)}×` : '—');
const many = threadCounts.filter((n) => n > 1);

console.log(`Chromium ${browser.version()} (headless, cross-origin isolated, navigator.hardwareConcurrency ${cores}); ${cpus().length} cores (${cpus()[0]?.model ?? 'unknown'})`);
for (const key of [...described.keys()].filter((k) => !k.startsWith('bb'))) console.log(`  ${key}: ${described.get(key)}`);
console.log(`\nwall-clock ms per run: the median over ${ROUNDS} round(s) (the best round)`);
print([
  ['case', 'bb.wasm 1t', 'bb-relaxed 1t', ...THREADED.flatMap(([, name]) => threadCounts.map((n) => `${name} ${n}t`))],
  ...reference.map(({ label }) => [
    label,
    ...[['bb.wasm', 1], ['bb-relaxed.wasm', 1], ...THREADED.flatMap(([runtime]) => threadCounts.map((n) => [runtime, n]))].map(([runtime, n]) =>
      ms(runtime, n, label) === undefined ? '—' : `${fmt(ms(runtime, n, label))} (${best(runtime, n, label).toFixed(1)})`,
    ),
  ]),
]);
console.log('\nspeed-up t1/tn (and per core, t1/tn/n) of each runtime, from the medians; then from the best rounds');
print([
  ['case', ...THREADED.flatMap(([, name]) => many.map((n) => `${name} ${n}t`))],
  ...reference.map(({ label }) => [
    label,
    ...THREADED.flatMap(([runtime]) =>
      many.map((n) => {
        const speedUp = ms(runtime, 1, label) / ms(runtime, n, label);
        const bestSpeedUp = best(runtime, 1, label) / best(runtime, n, label);
        return Number.isFinite(speedUp) ? `${ratio(speedUp)} (${(speedUp / n).toFixed(2)}); ${ratio(bestSpeedUp)}` : '—';
      }),
    ),
  ]),
]);
const cpu = (runtime, threads, label) => {
  const values = cpuTimes.get(`${runtime}@${threads}|${label}`);
  return values === undefined ? undefined : median(values);
};
console.log('\nCPU ms per run (the renderer process: the page and its workers; median over rounds)');
print([
  ['case', 'bb.wasm 1t', 'bb-relaxed 1t', ...THREADED.flatMap(([, name]) => threadCounts.map((n) => `${name} ${n}t`))],
  ...reference.map(({ label }) => [
    label,
    fmt(cpu('bb.wasm', 1, label)),
    fmt(cpu('bb-relaxed.wasm', 1, label)),
    ...THREADED.flatMap(([runtime]) => threadCounts.map((n) => fmt(cpu(runtime, n, label)))),
  ]),
]);
console.log(
  '\nthe speed-up the CPU time allows, n·CPU(1t)/CPU(nt): what n threads would give on n idle cores with the work split evenly ' +
    '(every thread busy all along; spinning waits count as work)',
);
print([
  ['case', ...THREADED.flatMap(([, name]) => many.map((n) => `${name} ${n}t`))],
  ...reference.map(({ label }) => [
    label,
    ...THREADED.flatMap(([runtime]) => many.map((n) => ratio((n * cpu(runtime, 1, label)) / cpu(runtime, n, label)))),
  ]),
]);
console.log('\npeer/bb: the peer\'s time over bb-mt.wasm\'s (ORT/mt-relaxed: over bb-mt-relaxed.wasm\'s) at the same thread count (> 1: bb faster)');
print([
  ['case', ...threadCounts.map((n) => `ORT/bb ${n}t`), ...threadCounts.map((n) => `tfjs/bb ${n}t`), ...threadCounts.map((n) => `ORT/mt-relaxed ${n}t`), 'ORT/bb CPU 1t', 'tfjs/bb CPU 1t'],
  ...reference.map(({ label }) => [
    label,
    ...['ort-web', 'tfjs-wasm'].flatMap((runtime) => threadCounts.map((n) => ratio(ms(runtime, n, label) / ms('bb-mt.wasm', n, label)))),
    ...threadCounts.map((n) => ratio(ms('ort-web', n, label) / ms('bb-mt-relaxed.wasm', n, label))),
    ...['ort-web', 'tfjs-wasm'].map((runtime) => ratio(cpu(runtime, 1, label) / cpu('bb-mt.wasm', 1, label))),
  ]),
]);
console.log(
  `\nload average (1 min) at the start of each round: ${loads.map((l) => l.toFixed(1)).join(', ')}; now ${loadavg().map((l) => l.toFixed(1)).join(' ')}. ` +
    "bb-mt.wasm gave bb.wasm's bits, and bb-mt-relaxed.wasm bb-relaxed.wasm's, on every case and thread count (training: the first step's loss); the relaxed builds, onnxruntime-web and tfjs agreed with bb.wasm to 1e-4. " +
    '—: the runtime has no such case (tfjs cannot load the ONNX networks; neither peer has a training step here).',
);
