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
// With --train it also times bb's training step on the same networks (OnnxTrainer: softmax
// cross-entropy against a class label, then Adam; exported at opset 16, BatchNormalization
// in inference mode). onnxruntime-web has no training API, so that column has no peer.
//
//   cd bench/js && npm ci --ignore-scripts          # once
//   bash scripts/build-wasm.sh && (cd js && npm run build)
//   node bench/js/vision-vs-peers.mjs [--size 64] [--models resnet18,mobilenet_v2,efficientnet_b0]
//     [--quick] [--train] [--wasm path/to/bb.wasm]
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultWasm, packageDist, requireBuilt, rerunWithTunedMalloc } from './common.mjs';

rerunWithTunedMalloc(import.meta.url);

const arg = (name, fallback) =>
  process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : fallback;
const packageWasm = arg('--wasm', defaultWasm);
requireBuilt(packageWasm);
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

ort.env.wasm.numThreads = 1;
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

/** CPU ms per call over one round of at least ROUND_MS (3 calls at least). */
async function round(call) {
  const start = cpuMs();
  let n = 0;
  let elapsed = 0;
  do {
    await call();
    n++;
    elapsed = cpuMs() - start;
  } while (elapsed < ROUND_MS || n < 3);
  return elapsed / n;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/** Warms every call up, then times them in alternating rounds: each one's median ms per call. */
async function alternate(calls) {
  for (const call of calls) {
    const until = performance.now() + WARMUP_MS;
    while (performance.now() < until) await call();
  }
  const times = calls.map(() => []);
  for (let r = 0; r < ROUNDS; r++) for (let i = 0; i < calls.length; i++) times[i].push(await round(calls[i]));
  return times.map(median);
}

const bb = await loadBb(readFileSync(packageWasm));
const dims = [1, 3, SIZE, SIZE];
const data = input();
const cpu = cpus()[0]?.model ?? 'unknown CPU';
console.log(`vision-vs-peers: Node ${process.versions.node}, ${cpu}, load average ${loadavg()[0].toFixed(1)}; ` +
            `batch 1, 3x${SIZE}x${SIZE}`);
console.log(`bytesandbrains ${bb.version} (${packageWasm.replace(/.*\/js\//, 'js/')}), onnxruntime-web ` +
            `${ort.env.versions.web} (wasm, numThreads ${ort.env.wasm.numThreads}, simd ${ort.env.wasm.simd})\n`);

const rows = [];
let failed = false;
const models = exportModels(false);
for (const name of MODELS) {
  const model = OnnxModel.decode(bb, models[name]);
  const session = new CpuSession(bb, model);
  const x = Tensor.from(bb, 'float', data, dims);
  const bbRun = () => {
    const outputs = session.run({ x });
    const values = Object.values(outputs);
    const logits = values[0].toArray();
    for (const t of values) t.free();
    return logits;
  };
  const ortSession = await ort.InferenceSession.create(models[name], ORT_OPTIONS);
  const ortRun = async () => {
    const out = await ortSession.run({ x: new ort.Tensor('float32', data, dims) });
    return Object.values(out)[0].data;
  };
  const mine = bbRun();
  const theirs = await ortRun();
  let worst = 0;
  let scale = 0;
  for (let i = 0; i < theirs.length; i++) {
    worst = Math.max(worst, Math.abs(mine[i] - theirs[i]));
    scale = Math.max(scale, Math.abs(theirs[i]));
  }
  const error = mine.length === theirs.length ? worst / scale : Infinity;
  if (!(error <= TOLERANCE)) failed = true;
  const [bbMs, ortMs] = await alternate([bbRun, ortRun]);
  rows.push({ name, bbMs, ortMs, error });
  console.log(`${name}: bb.wasm ${bbMs.toFixed(2)} ms, onnxruntime-web ${ortMs.toFixed(2)} ms ` +
              `(outputs agree to ${error.toExponential(1)} of their largest)`);
  await ortSession.release();
  x.free();
  session.free();
  model.free();
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

console.log(`\ninference, CPU ms per inference (median of ${ROUNDS} rounds), one thread each`);
console.log(`${'model'.padEnd(16)}${'bb.wasm'.padStart(9)}${'ORT-web'.padStart(9)}${'ORT/bb'.padStart(9)}` +
            `${'agreement'.padStart(11)}`);
for (const r of rows) {
  console.log(`${r.name.padEnd(16)}${r.bbMs.toFixed(2).padStart(9)}${r.ortMs.toFixed(2).padStart(9)}` +
              `${(r.ortMs / r.bbMs).toFixed(2).padStart(8)}x${r.error.toExponential(1).padStart(11)}`);
}
if (TRAIN) {
  console.log(`\ntraining step (softmax cross-entropy, Adam), CPU ms per step; onnxruntime-web has no training API`);
  console.log(`${'model'.padEnd(16)}${'bb.wasm'.padStart(9)}   loss first -> after the timed steps`);
  for (const r of trainRows)
    console.log(`${r.name.padEnd(16)}${r.ms.toFixed(2).padStart(9)}   ${r.first.toFixed(3)} -> ${r.last.toFixed(3)}`);
}
if (failed) {
  console.error(`\nbb.wasm's outputs differ from onnxruntime-web's by more than ${TOLERANCE} of their largest`);
  process.exit(1);
}
