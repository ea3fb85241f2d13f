// Where the small CNN's time goes, stage by stage, on bb.wasm and on TensorFlow.js's wasm
// backend (one thread each, one Node process): each runtime runs the network's prefixes
// (conv 1; + ReLU; + max pool; conv 2; + ReLU; + max pool; + Flatten and Gemm), and a
// stage's time is its prefix's time less the one before. A prefix keeps the whole
// network's fusions up to its end (bb's session fuses a ReLU into the convolution before
// it, so "+ ReLU" is what the fused ReLU costs); tfjs runs conv + bias + ReLU as one fused
// kernel, so its ReLU rows are folded into the convolutions'.
//
//   node bench/js/cnn-stages.mjs [--batch 64] [--rounds 7] [--wasm path/to/bb.wasm]... [--mt 1,2] [--no-tfjs]
//
// Several --wasm modules are timed side by side, in alternating rounds with tfjs (old and
// new builds in the same minute); --mt adds the package's bb-mt.wasm at those thread
// counts (its wall time per run is then shown beside the CPU time: on n threads the CPU
// time counts every thread's, spinning waits included). Times are CPU ms per run (process.cpuUsage), the median
// over rounds of each round's median batch. Outputs of the full network are checked
// against tfjs's (max |difference| over max |reference| ≤ 1e-4).
import { createRequire } from 'node:module';
import { cpus, loadavg } from 'node:os';
import { dirname } from 'node:path';
import { denseForNhwc, median, oihwToHwio, smallCnnNodes } from './cases.mjs';
import { defaultWasm, packageDist, randomFloats, requireBuilt, rerunWithTunedMalloc } from './common.mjs';

rerunWithTunedMalloc(import.meta.url);

const require = createRequire(import.meta.url);
const arg = (name, fallback) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : fallback);
const BATCH = Number(arg('--batch', 64));
const ROUNDS = Number(arg('--rounds', 7));
const TFJS = !process.argv.includes('--no-tfjs');
const modules = process.argv.flatMap((a, i) => (a === '--wasm' ? [process.argv[i + 1]] : []));
const MT = arg('--mt', '').split(',').filter((t) => t !== '').map(Number);
if (modules.length === 0) modules.push(defaultWasm);
for (const m of modules) requireBuilt(m);
const { CpuSession, OnnxModel, Tensor, encodeOnnxModel, loadBb } = await import(packageDist);
let tf;
if (TFJS) {
  tf = await import('@tensorflow/tfjs-core');
  const tfwasm = await import('@tensorflow/tfjs-backend-wasm');
  tfwasm.setWasmPaths(`${dirname(require.resolve('@tensorflow/tfjs-backend-wasm'))}/`);
  tfwasm.setThreadsCount(1);
  await tf.setBackend('wasm');
  await tf.ready();
}

const W = {
  w1: randomFloats(16 * 9, 101, -0.5, 0.5), b1: randomFloats(16, 102, -0.1, 0.1),
  w2: randomFloats(32 * 16 * 9, 103, -0.15, 0.15), b2: randomFloats(32, 104, -0.1, 0.1),
  w3: randomFloats(10 * 1568, 105, -0.05, 0.05), b3: randomFloats(10, 106, -0.1, 0.1),
};
const X = randomFloats(BATCH * 784, 7, 0, 1);
const f32 = (name, dims) => ({ name, dtype: 'float', dims });
const INITIALIZERS = [
  ['w1', [16, 1, 3, 3]], ['b1', [16]], ['w2', [32, 16, 3, 3]], ['b2', [32]], ['w3', [10, 1568]], ['b3', [10]],
].map(([name, dims]) => ({ name, dtype: 'float', dims, data: W[name] }));
/** bb's prefixes: the first k nodes of the network (the flatten rides with the Gemm). */
const NODES = smallCnnNodes();
const OUT_DIMS = [[16, 28, 28], [16, 28, 28], [16, 14, 14], [32, 14, 14], [32, 14, 14], [32, 7, 7], null, [10]];
const BB_STAGES = [['conv 1', 1], ['+ ReLU 1', 2], ['max pool 1', 3], ['conv 2', 4], ['+ ReLU 2', 5], ['max pool 2', 6], ['Flatten, Gemm', 8]];

function bbPrefixModel(k) {
  const nodes = NODES.slice(0, k);
  const used = new Set(nodes.flatMap((n) => n.inputs));
  const out = nodes[k - 1].outputs[0];
  return encodeOnnxModel({
    opset: 17,
    nodes,
    inputs: [f32('x', [BATCH, 1, 28, 28])],
    outputs: [f32(out, [BATCH, ...OUT_DIMS[k - 1]])],
    initializers: INITIALIZERS.filter((i) => used.has(i.name)),
  });
}

/** A runner: `prefixes[i]()` runs stage i's prefix once (its outputs freed), `full()` returns the network's output. */
async function bbRunner(path, threads) {
  let bb;
  if (threads === undefined) bb = await loadBb(path);
  else {
    bb = await loadBb({ threads: Math.max(threads, 2), simd: 'baseline' });
    if (!bb.threaded) throw new Error(`bb-mt.wasm did not load: ${bb.threadsUnavailable}`);
    bb.check(bb.exports.bb_wasm_set_threads(threads));
  }
  const x = Tensor.from(bb, 'float', X, [BATCH, 1, 28, 28]);
  const prefixes = BB_STAGES.map(([, k]) => {
    const model = OnnxModel.decode(bb, bbPrefixModel(k));
    const session = new CpuSession(bb, model);
    return () => {
      const outputs = session.run({ x });
      for (const t of Object.values(outputs)) t.free();
    };
  });
  const last = new CpuSession(bb, OnnxModel.decode(bb, bbPrefixModel(8)));
  const full = () => {
    const outputs = last.run({ x });
    const y = Object.values(outputs)[0].toArray();
    for (const t of Object.values(outputs)) t.free();
    return y;
  };
  const name = threads === undefined ? path.split('/').pop() : `bb-mt.wasm, ${threads} thread(s)`;
  return { name, stages: BB_STAGES.map(([s]) => s), prefixes, full };
}

function tfjsRunner() {
  const w = {
    w1: tf.tensor4d(oihwToHwio(W.w1, 16, 1, 3, 3), [3, 3, 1, 16]), b1: tf.tensor1d(W.b1),
    w2: tf.tensor4d(oihwToHwio(W.w2, 32, 16, 3, 3), [3, 3, 16, 32]), b2: tf.tensor1d(W.b2),
    w3: tf.tensor2d(denseForNhwc(W.w3, 10, 32, 49), [1568, 10]), b3: tf.tensor1d(W.b3),
  };
  const x = tf.tensor4d(X, [BATCH, 28, 28, 1]);
  const steps = [
    (h) => tf.fused.conv2d({ x: h, filter: w.w1, strides: 1, pad: 'same', bias: w.b1, activation: 'relu' }),
    (h) => tf.maxPool(h, 2, 2, 'valid'),
    (h) => tf.fused.conv2d({ x: h, filter: w.w2, strides: 1, pad: 'same', bias: w.b2, activation: 'relu' }),
    (h) => tf.maxPool(h, 2, 2, 'valid'),
    (h) => tf.fused.matMul({ a: tf.reshape(h, [BATCH, 1568]), b: w.w3, bias: w.b3 }),
  ];
  const prefix = (k) => () => tf.tidy(() => steps.slice(0, k).reduce((h, f) => f(h), x)).dispose();
  return {
    name: 'tfjs-wasm',
    stages: ['conv 1 + bias + ReLU', 'max pool 1', 'conv 2 + bias + ReLU', 'max pool 2', 'reshape, MatMul + bias'],
    prefixes: [1, 2, 3, 4, 5].map(prefix),
    full: () => tf.tidy(() => steps.reduce((h, f) => f(h), x)).dataSync(),
  };
}

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
/** The median CPU ms of one call over batches of calls lasting ~`ms`, and the median wall ms. */
function timeCpu(run, ms) {
  const batches = [];
  const walls = [];
  const until = performance.now() + ms;
  let calls = 1;
  do {
    const t = cpuMs();
    const w = performance.now();
    for (let i = 0; i < calls; i++) run();
    const spent = cpuMs() - t;
    batches.push(spent / calls);
    walls.push((performance.now() - w) / calls);
    if (spent < 4) calls *= 2;
  } while (performance.now() < until || batches.length < 5);
  return [median(batches), median(walls)];
}

const runners = [];
for (const m of modules) runners.push(await bbRunner(m));
for (const t of MT) runners.push(await bbRunner(undefined, t));
if (TFJS) runners.push(tfjsRunner());
const reference = runners.at(-1).full();
for (const r of runners) {
  const y = r.full();
  let diff = 0, scale = 0;
  for (let i = 0; i < y.length; i++) (diff = Math.max(diff, Math.abs(y[i] - reference[i]))), (scale = Math.max(scale, Math.abs(reference[i])));
  if (!(diff / scale <= 1e-4)) throw new Error(`${r.name}: output off by ${diff / scale}`);
}
// warm-up: V8 tiers the modules up in the background
for (const r of runners) for (const p of r.prefixes) timeCpu(p, 300);
const times = runners.map((r) => r.prefixes.map(() => []));
const walls = runners.map((r) => r.prefixes.map(() => []));
const loads = [];
for (let round = 0; round < ROUNDS; round++) {
  loads.push(loadavg()[0]);
  runners.forEach((r, i) =>
    r.prefixes.forEach((p, k) => {
      const [cpu, wall] = timeCpu(p, 150);
      times[i][k].push(cpu);
      walls[i][k].push(wall);
    }),
  );
}
console.log(`small CNN, batch ${BATCH}, tfjs and bb.wasm on 1 thread, ${cpus().length} cores, load ${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)}, ${ROUNDS} rounds; CPU ms per run (median over rounds), a stage = its prefix less the one before`);
runners.forEach((r, i) => {
  const prefix = times[i].map(median);
  const wall = walls[i].map(median);
  console.log(`\n${r.name}: whole network ${prefix.at(-1).toFixed(3)} ms CPU, ${wall.at(-1).toFixed(3)} ms wall`);
  r.stages.forEach((s, k) => {
    const stage = prefix[k] - (k ? prefix[k - 1] : 0);
    const wallStage = wall[k] - (k ? wall[k - 1] : 0);
    console.log(`  ${s.padEnd(24)} ${stage.toFixed(3).padStart(7)} ms  ${((100 * stage) / prefix.at(-1)).toFixed(1).padStart(5)} %   wall ${wallStage.toFixed(3).padStart(7)} ms`);
  });
});
