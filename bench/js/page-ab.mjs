// modules-ab.mjs in a cross-origin-isolated Chromium page: builds of bb's module, and
// optionally tfjs-wasm and onnxruntime-web, on one case of cases.mjs, all in ONE page with
// their runs interleaved (A B C A B C ...), so that the machine's load falls on every
// runtime alike and the ratios hold where browser.mjs's page-per-runtime medians swing.
// Wall-clock ms per run (a page has no CPU clock): each runtime's median and 10th
// percentile, and the first runtime's time over each other's (> 1: that one faster).
//
//   flock /tmp/bb-e2e.lock nice node bench/js/page-ab.mjs <case prefix> <runtime> <runtime> ...  [ROUNDS=30]
//
// A peer's pool may still spin after its run and take a core from the runtime after it: above one
// thread, compare bb's builds alone, or use browser.mjs (a page per runtime).
//
// A runtime is a path to bb.wasm or bb-relaxed.wasm, mt<threads>:<path> for bb-mt.wasm or
// bb-mt-relaxed.wasm on that many threads, or tfjs<threads> / ort<threads> (tfjs-backend-wasm's
// threaded SIMD build, onnxruntime-web's ort.wasm.min.mjs build; one of each per page: their
// thread counts are fixed when their modules start). The case prefix picks a case of
// cases.mjs's threadCases ("MatMul 512", "MatMul 1024", "Conv", "small CNN"). Every runtime's
// output is checked against the first's (bits for bb's builds, 1e-4 for the peers).
//
// GAP_MS=<ms> waits that long (a timer) before each run, so that every runtime's run starts
// with its pool idle (bb's workers spin 2 ms after a job, then sleep) and no pool's spinning
// takes a core from the run after it: each run is then one call from idle, the case of a
// page that runs a model now and then.
//
// TRACE=1 turns on the work pool's trace in every bb module that has one (bb.tracePool) for
// the timed rounds and prints, per run: the pool's jobs, the caller's time in its tasks and
// waiting for the workers after its last one, the workers' time in tasks, and how long a
// worker took to see a job (its wake) and how often it slept between jobs.
import { createRequire } from 'node:module';
import { existsSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CHROMIUM, CHROMIUM_ARGS } from '../../js/test/chromium.mjs';
import { requireBuilt, serveIsolatedPage } from './common.mjs';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const [want, ...runtimes] = process.argv.slice(2);
if (!want || runtimes.length === 0) throw new Error('usage: page-ab.mjs <case prefix> <runtime> <runtime> ...');
const rounds = Number(process.env.ROUNDS ?? 30);
requireBuilt();
const { chromium } = createRequire(join(repoRoot, 'js', 'package.json'))('playwright-core');

// bb's modules are served as /module/<i>.wasm, from wherever they are
const modules = runtimes.map((r) => (r.startsWith('tfjs') || r.startsWith('ort') ? null : resolve(r.startsWith('mt') ? r.slice(r.indexOf(':') + 1) : r)));
for (const file of modules) if (file !== null && !existsSync(file)) throw new Error(`${file} does not exist`);

const SERVED = ['js/dist/', 'js/wasm/', 'js/test/random.mjs', 'bench/js/cases.mjs', 'bench/js/node_modules/onnxruntime-web/dist/', 'bench/js/node_modules/@tensorflow/tfjs-core/dist/', 'bench/js/node_modules/@tensorflow/tfjs-backend-wasm/dist/'];

/** The page's script: loads every runtime, prepares the case on each, then runs them in turn. */
const PAGE_SCRIPT = `
import { bbRunner, ortRunner, startTfjsWasm, threadCases, warmUp } from '/bench/js/cases.mjs';
const lib = await import('/js/dist/index.js');
window.runAll = async (want, runtimes, rounds, trace, gapMs) => {
  const testCase = threadCases().find((t) => t.label.startsWith(want));
  if (!testCase) throw new Error('no case ' + want);
  const bytes = lib.encodeOnnxModel({ opset: 17, ...testCase.spec });
  const runners = [];
  const described = [];
  for (const [i, r] of runtimes.entries()) {
    if (r.startsWith('tfjs')) {
      const threads = Number(r.slice(4));
      const tf = globalThis.tf;
      await startTfjsWasm(tf, threads, location.origin + '/bench/js/node_modules/@tensorflow/tfjs-backend-wasm/dist/');
      const { once, toReference } = testCase.tfjs(tf);
      runners.push({ once, output: toReference(once()) });
      described.push('tfjs ' + tf.version_core + ' wasm, ' + tf.wasm.getThreadsCount() + ' thread(s)');
    } else if (r.startsWith('ort')) {
      const ort = await import('/bench/js/node_modules/onnxruntime-web/dist/ort.wasm.min.mjs');
      ort.env.wasm.wasmPaths = location.origin + '/bench/js/node_modules/onnxruntime-web/dist/';
      ort.env.wasm.numThreads = Number(r.slice(3));
      ort.env.logLevel = 'error';
      runners.push(await ortRunner(ort, bytes, testCase.feeds));
      described.push('onnxruntime-web ' + ort.env.versions.web + ', numThreads ' + r.slice(3));
    } else {
      const url = new URL('/module/' + i + '.wasm', location.href);
      let bb;
      if (r.startsWith('mt')) {
        const threads = Number(r.slice(2, r.indexOf(':')));
        bb = await lib.loadBb({ threads: Math.max(threads, 2), threadedSource: url });
        if (!bb.threaded) throw new Error(r + ' did not load: ' + bb.threadsUnavailable);
        bb.check(bb.exports.bb_wasm_set_threads(threads));
      } else {
        bb = await lib.loadBb(url);
      }
      runners.push({ ...bbRunner(lib, bb, bytes, testCase.feeds), bb });
      described.push(r + ' (' + bb.simd + ' SIMD)');
    }
  }
  for (const runner of runners) await warmUp(runner.once, 400);
  const times = runners.map(() => []);
  const traced = runners.map((runner) => trace && runner.bb?.exports.bb_wasm_pool_trace_set !== undefined);
  runners.forEach((runner, i) => traced[i] && runner.bb.tracePool(true));
  for (let round = 0; round < rounds; round++) {
    for (const [i, runner] of runners.entries()) {
      if (gapMs > 0) await new Promise((done) => setTimeout(done, gapMs));
      const t = performance.now();
      await runner.once();
      times[i].push(performance.now() - t);
    }
  }
  const agree = runners.map((runner) => {
    const [a, b] = [runner.output, runners[0].output];
    let same = a.length === b.length, diff = 0, scale = 0;
    for (let j = 0; j < b.length; j++) {
      if (!Object.is(a[j], b[j])) same = false;
      diff = Math.max(diff, Math.abs(a[j] - b[j]));
      scale = Math.max(scale, Math.abs(b[j]));
    }
    return { same, relative: diff / (scale || 1) };
  });
  const traces = runners.map((runner, i) => (traced[i] ? runner.bb.poolTrace() : null));
  return { label: testCase.label, described, times, agree, traces };
};
window.ready = true;
`;
const PAGE = `<!doctype html><title>bytesandbrains page A/B</title>
<script src="/bench/js/node_modules/@tensorflow/tfjs-core/dist/tf-core.min.js"></script>
<script src="/bench/js/node_modules/@tensorflow/tfjs-backend-wasm/dist/tf-backend-wasm.min.js"></script>
<script type="module" src="/page-ab.mjs"></script>`;

const server = await serveIsolatedPage(PAGE, SERVED, (path) => {
  if (path === '/page-ab.mjs') return { type: 'text/javascript', body: PAGE_SCRIPT };
  const module = /^\/module\/(\d+)\.wasm$/.exec(path);
  if (module !== null && modules[Number(module[1])]) return { type: 'application/wasm', body: readFileSync(modules[Number(module[1])]) };
  return undefined;
});
const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
try {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (error) => errors.push(error.message));
  await page.goto(`${server.base}/`);
  await page.waitForFunction(() => window.ready === true || undefined, undefined, { timeout: 60000 }).catch(() => {
    throw new Error(`the page did not start: ${errors.join('; ')}`);
  });
  const load = loadavg()[0];
  const trace = process.env.TRACE === '1';
  const gapMs = Number(process.env.GAP_MS ?? 0);
  const { label, described, times, agree, traces } = await page.evaluate(([w, r, n, t, g]) => window.runAll(w, r, n, t, g), [want, runtimes, rounds, trace, gapMs]);
  const median = (v) => [...v].sort((a, b) => a - b)[v.length >> 1];
  const p10 = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 10)];
  console.log(`${label}, wall ms per run in one page, median (10th percentile), ${rounds} interleaved rounds${gapMs > 0 ? `, ${gapMs} ms before each run` : ''}; load ${load.toFixed(1)} → ${loadavg()[0].toFixed(1)}:`);
  const [m0, l0] = [median(times[0]), p10(times[0])];
  runtimes.forEach((r, i) => {
    const [m, l] = [median(times[i]), p10(times[i])];
    const check = i === 0 ? '' : agree[i].same ? ', the same bits' : `, relative difference ${agree[i].relative.toExponential(1)}`;
    console.log(`  ${described[i]}: ${m.toFixed(2)} (${l.toFixed(2)})  first/this ${(m0 / m).toFixed(3)}× (${(l0 / l).toFixed(3)}×)${check}`);
    const t = traces[i];
    if (t) {
      const per = (x) => (x / rounds).toFixed(2);
      console.log(`    trace per run: ${per(t.jobs)} jobs, ${per(t.jobMs)} ms in them; caller ${per(t.callerMs)} ms in ${per(t.callerTasks)} tasks, ${per(t.waitMs)} ms waiting; ` +
        `workers ${per(t.workerMs)} ms in ${per(t.workerTasks)} tasks; wake ${((t.wakeMs / Math.max(1, t.wakes)) * 1000).toFixed(0)} µs (${per(t.wakes)} wakes, ${per(t.late)} late), ${per(t.sleeps)} sleeps, ${per(t.notifyMs)} ms waking them`);
    }
  });
  const bad = agree.findIndex((a, i) => i > 0 && !a.same && !(a.relative <= 1e-4));
  if (bad > 0) throw new Error(`${runtimes[bad]} disagrees with ${runtimes[0]}`);
} finally {
  await browser.close();
  server.close();
}
