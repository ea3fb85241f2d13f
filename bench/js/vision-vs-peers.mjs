// torchvision's resnet18, mobilenet_v2 and efficientnet_b0 (random weights and BatchNorm
// statistics, 100 classes, batch 1, 3×SIZE×SIZE) on bb.wasm (the package's CpuSession, with
// its load-time graph rewrites) against onnxruntime-web 1.30's wasm backend (numThreads 1,
// SIMD, every graph optimization), in one Node process. The ONNX files are the ones
// bench/vision_vs_peers.py exports (it writes them to a temporary directory for this
// script). Each network's outputs are checked to agree with onnxruntime-web's first, then
// the two are timed in alternating rounds after a warm-up (V8 tiers WebAssembly up in the
// background); the median over a runtime's rounds of the CPU time per inference counts
// (one thread each; CPU time, since on a shared machine the wall clock measures the share
// of the processor the process got).
//
// --wasm may be given several times: every module is timed in the same alternating rounds
// (old and new builds side by side, the load falling on both alike); a module is a path to
// bb.wasm or bb-relaxed.wasm (the relaxed one under node --experimental-wasm-relaxed-simd), or
// mt<threads>:<path> for bb-mt.wasm (or bb-mt-relaxed.wasm) on that many threads. --threads N
// sets onnxruntime-web's numThreads (default 1). Above one thread, or with --wall, the wall
// clock counts (the CPU time would hide a second thread's gain); the CPU time is printed
// beside it.
//
// With --train it also times bb's training step on the same networks (OnnxTrainer: softmax
// cross-entropy against a class label, then Adam; exported at opset 16, BatchNormalization
// in inference mode). onnxruntime-web has no training API, so that column has no peer.
//
//   cd bench/js && npm ci --ignore-scripts          # once
//   bash scripts/build-wasm.sh && (cd js && npm run build)
//   node bench/js/vision-vs-peers.mjs [--size 64] [--models resnet18,mobilenet_v2,efficientnet_b0]
//     [--quick] [--train] [--wasm path/to/bb.wasm ...] [--threads N]
//   node bench/js/vision-vs-peers.mjs --threads 2 --wasm mt2:OLD/bb-mt.wasm --wasm mt2:js/wasm/bb-mt.wasm
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultWasm, packageDist, requireBuilt, rerunWithTunedMalloc } from './common.mjs';

rerunWithTunedMalloc(import.meta.url);

const arg = (name, fallback) =>
  process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : fallback;
const modulesArg = process.argv.flatMap((a, i) => (a === '--wasm' && process.argv[i + 1] ? [process.argv[i + 1]] : []));
const MODULES = modulesArg.length ? modulesArg : [defaultWasm];
/** A module argument's thread count (mt<N>:path) and file. */
const parseModule = (m) => (m.startsWith('mt') && m.includes(':')
  ? { threads: Number(m.slice(2, m.indexOf(':'))), file: m.slice(m.indexOf(':') + 1) }
  : { threads: 0, file: m });
for (const m of MODULES) requireBuilt(parseModule(m).file);
const THREADS = Number(arg('--threads', 1));
/** Wall-clock rounds: above one thread, or with --wall (bb-mt.wasm on two threads against onnxruntime-web on one). */
const WALL = THREADS > 1 || process.argv.includes('--wall');
let ort;
try {
  ort = await import('onnxruntime-web');
} catch (error) {
  throw new Error(`onnxruntime-web is not installed: run \`npm ci --ignore-scripts\` in bench/js (${error.message})`);
}
const { CpuSession, OnnxModel, OnnxTrainer, Tensor, loadBb } = await import(packageDist);

const SIZE = Number(arg('--size', 64));
const MODELS = arg('--models', 'resnet18,mobilenet_v2,efficientnet_b0').split(',');
const QUICK = process.argv.includes('--quick');
const TRAIN = process.argv.includes('--train');
const WARMUP_MS = QUICK ? 500 : 2000;
const ROUNDS = QUICK ? 3 : 7;
/** CPU time per runtime, network and round. */
const ROUND_MS = QUICK ? 150 : 400;
/** Agreement required of the logits: max |difference| over max |reference|. */
const TOLERANCE = 1e-4;

ort.env.wasm.numThreads = THREADS;
ort.env.wasm.simd = true;
ort.env.logLevel = 'error';
const ORT_OPTIONS = { executionProviders: ['wasm'], graphOptimizationLevel: 'all' };

/** The networks as ONNX bytes, exported by bench/vision_vs_peers.py into a temporary directory. */
function exportModels(opset16) {
  const dir = mkdtempSync(join(tmpdir(), 'bb-vision-'));
  const script = fileURLToPath(new URL('../vision_vs_peers.py', import.meta.url));
  const args = [script, '--export', dir, '--models', MODELS.join(','), '--size', String(SIZE)];
  if (opset16) args.push('--train');
  const out = spawnSync('/usr/bin/python3', args, { encoding: 'utf8' });
  if (out.status !== 0) throw new Error(`exporting the networks failed: ${out.stderr}`);
  const bytes = Object.fromEntries(MODELS.map((m) => [m, new Uint8Array(readFileSync(join(dir, `${m}.onnx`)))]));
  rmSync(dir, { recursive: true, force: true });
  return bytes;
}

/** Uniform floats in [-0.5, 0.5) from a fixed seed, the same for both runtimes. */
function input() {
  const data = new Float32Array(3 * SIZE * SIZE);
  let seed = 12345;
  for (let i = 0; i < data.length; i++) {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
    data[i] = (seed >>> 8) / 16777216 - 0.5;
  }
  return data;
}

/** The process's CPU time in ms (user + system, every thread). */
const cpuMs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

/** Ms per call over one round of at least ROUND_MS (3 calls at least): CPU time at one thread, wall time above. */
async function round(call) {
  const start = cpuMs();
  const wallStart = performance.now();
  let n = 0;
  let elapsed = 0;
  do {
    await call();
    n++;
    elapsed = WALL ? performance.now() - wallStart : cpuMs() - start;
  } while (elapsed < ROUND_MS || n < 3);
  cpuPerCall.get(call)?.push((cpuMs() - start) / n);
  return elapsed / n;
}
/** Each timed call's CPU ms per call, round by round (printed beside wall times above one thread). */
const cpuPerCall = new Map();

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/** Warms every call up, then times them in alternating rounds: each one's median ms per call. */
async function alternate(calls) {
  for (const call of calls) {
    const until = performance.now() + WARMUP_MS;
    while (performance.now() < until) await call();
  }
  const times = calls.map(() => []);
  for (const call of calls) cpuPerCall.set(call, []);
  for (let r = 0; r < ROUNDS; r++) for (let i = 0; i < calls.length; i++) times[i].push(await round(calls[i]));
  return times.map(median);
}
const cpuMedian = (call) => median(cpuPerCall.get(call));

const lib = await import(packageDist);
/** Every module, loaded: { name, bb }. */
const modules = [];
for (const m of MODULES) {
  const { threads, file } = parseModule(m);
  let bb;
  if (threads > 0) {
    bb = await lib.loadBb({ threads: Math.max(threads, 2), threadedSource: readFileSync(file) });
    bb.check(bb.exports.bb_wasm_set_threads(threads));
  } else {
    bb = await loadBb(readFileSync(file));
  }
  modules.push({ name: m.replace(/.*\/js\//, 'js/'), bb });
}
const bb = modules[0].bb;
const dims = [1, 3, SIZE, SIZE];
const data = input();
const cpu = cpus()[0]?.model ?? 'unknown CPU';
console.log(`vision-vs-peers: Node ${process.versions.node}, ${cpu}, load average ${loadavg()[0].toFixed(1)}; ` +
            `batch 1, 3x${SIZE}x${SIZE}`);
console.log(`bytesandbrains ${bb.version} (${modules.map((m) => m.name).join(', ')}), onnxruntime-web ` +
            `${ort.env.versions.web} (wasm, numThreads ${ort.env.wasm.numThreads}, simd ${ort.env.wasm.simd})\n`);

const rows = [];
let failed = false;
const models = exportModels(false);
for (const name of MODELS) {
  const runners = modules.map(({ bb: m }) => {
    const model = OnnxModel.decode(m, models[name]);
    const session = new CpuSession(m, model);
    const x = Tensor.from(m, 'float', data, dims);
    const run = () => {
      const outputs = session.run({ x });
      const values = Object.values(outputs);
      const logits = values[0].toArray();
      for (const t of values) t.free();
      return logits;
    };
    return { run, free: () => { x.free(); session.free(); model.free(); } };
  });
  const ortSession = await ort.InferenceSession.create(models[name], ORT_OPTIONS);
  const ortRun = async () => {
    const out = await ortSession.run({ x: new ort.Tensor('float32', data, dims) });
    return Object.values(out)[0].data;
  };
  const theirs = await ortRun();
  const outputs = runners.map((r) => r.run());
  const errors = outputs.map((mine) => {
    let worst = 0;
    let scale = 0;
    for (let i = 0; i < theirs.length; i++) {
      worst = Math.max(worst, Math.abs(mine[i] - theirs[i]));
      scale = Math.max(scale, Math.abs(theirs[i]));
    }
    return mine.length === theirs.length ? worst / scale : Infinity;
  });
  if (!errors.every((e) => e <= TOLERANCE)) failed = true;
  const sameBits = outputs.map((o) => o.length === outputs[0].length && o.every((v, i) => Object.is(v, outputs[0][i])));
  const calls = [...runners.map((r) => r.run), ortRun];
  const msAll = await alternate(calls);
  const cpuAll = calls.map(cpuMedian);
  const ortMs = msAll[msAll.length - 1];
  rows.push({ name, bbMs: msAll.slice(0, -1), ortMs, cpu: cpuAll, errors, sameBits });
  console.log(`${name}: ${modules.map((m, i) => `${m.name} ${msAll[i].toFixed(2)} ms`).join(', ')}, onnxruntime-web ${ortMs.toFixed(2)} ms ` +
              `(agreement ${errors.map((e) => e.toExponential(1)).join(', ')}; the first module's bits: ${sameBits.join(', ')})`);
  await ortSession.release();
  for (const r of runners) r.free();
}

const trainRows = [];
if (TRAIN) {
  const train = exportModels(true);
  const labels = Float32Array.of(7);
  for (const name of MODELS) {
    const trainer = OnnxTrainer.create(bb, train[name], { optimizer: 'adam', lr: 1e-3 });
    const step = () => trainer.step({ x: data, labels });
    const first = step().loss;
    const [ms] = await alternate([step]);
    const last = step().loss;
    trainRows.push({ name, ms, first, last });
    trainer.free();
  }
}

const clock = WALL ? 'wall-clock' : 'CPU';
console.log(`\ninference, ${clock} ms per inference (median of ${ROUNDS} rounds), onnxruntime-web on ${THREADS} thread(s); ` +
            `ORT/bb > 1: bb faster; cpu: CPU ms per inference, all threads`);
modules.forEach((m, i) => console.log(`  [${i}] ${m.name}`));
console.log(`${'model'.padEnd(16)}${modules.map((_, i) => `[${i}]`.padStart(9)).join('')}${'ORT-web'.padStart(9)}` +
            `${modules.map((_, i) => `ORT/[${i}]`.padStart(10)).join('')}   cpu ${modules.map((_, i) => `[${i}]`).join(' ')} ORT`);
for (const r of rows) {
  console.log(`${r.name.padEnd(16)}${r.bbMs.map((v) => v.toFixed(2).padStart(9)).join('')}${r.ortMs.toFixed(2).padStart(9)}` +
              `${r.bbMs.map((v) => `${(r.ortMs / v).toFixed(2)}x`.padStart(10)).join('')}   ${r.cpu.map((v) => v.toFixed(2)).join(' ')}`);
}
if (TRAIN) {
  console.log(`\ntraining step (softmax cross-entropy, Adam), CPU ms per step; onnxruntime-web has no training API`);
  console.log(`${'model'.padEnd(16)}${'bb.wasm'.padStart(9)}   loss first -> after the timed steps`);
  for (const r of trainRows)
    console.log(`${r.name.padEnd(16)}${r.ms.toFixed(2).padStart(9)}   ${r.first.toFixed(3)} -> ${r.last.toFixed(3)}`);
}
if (failed) {
  console.error(`\na module's outputs differ from onnxruntime-web's by more than ${TOLERANCE} of their largest`);
  process.exit(1);
}
