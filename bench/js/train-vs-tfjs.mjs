// Training steps per second, batch 32, in one Node process: bb.wasm through the npm
// package (OnnxTrainer on the models the digits examples train, examples/models) against
// TensorFlow.js 4.22 with its WebAssembly backend on one thread, the same architectures
// written here with tfjs-layers, the same optimizer (Adam, lr 1e-3), the same batches.
//
//   cd bench/js && npm ci --ignore-scripts      # once
//   bash scripts/build-wasm.sh && (cd js && npm ci && npm run build)
//   node bench/js/train-vs-tfjs.mjs [--quick] [--only digits_cnn,28×28,digits_mlp] [--wasm js/wasm/bb-relaxed.wasm]
//                                   [--threads N]
//   (bb-relaxed.wasm needs `node --experimental-wasm-relaxed-simd` in Node 20)
//
// With --threads N bb runs the package's threaded module (bb-mt.wasm, loadBb({ threads }),
// or the threaded module --wasm names) on N threads, and both sides' windows are wall-clock time (CPU time would add the
// threads up). tfjs-backend-wasm stays on one thread: under Node its
// WASM_HAS_MULTITHREAD_SUPPORT flag answers false whatever setThreadsCount asked (tfjs
// issue 3830), so it never loads its threaded module there; its threads need a
// cross-origin-isolated page. N threads of bb are against one of tfjs.
//
// A step is one optimizer update on one batch, from JavaScript arrays in to the loss read
// back in JavaScript: for bb, OnnxTrainer.step({x, labels}) (the rows are copied into the
// module, the training and Adam graphs run, the loss is returned); for tfjs,
// optimizer.minimize(loss, true) and dataSync() of the loss. Both step for a few seconds
// first (V8 optimises WebAssembly in the background), then are timed in alternating
// windows of the process's CPU time (tfjs runs one thread, so the process's CPU time is
// the steps'); the best window of each counts.
//
// tfjs-backend-wasm 4.22 registers no Conv2DBackpropFilter kernel: the bench gives Conv2D a
// gradient made of kernels the wasm backend has, two ways, and times tfjs with each
// (train-models.mjs; the target is against the fast one). train-browser.mjs runs the same
// comparison in a cross-origin-isolated Chromium page, where tfjs has threads.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, loadavg } from 'node:os';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { packageDist, requireBuilt, wasmArgument } from './common.mjs';
import { BATCH, batchSource, checkFastGradient, convGradRoutes, mnistCnnOnnx, registerConvGradient, tfjsCnn, tfjsMlp, tfjsMnistCnn, tfjsTrainer } from './train-models.mjs';

const require = createRequire(import.meta.url);
const packageWasm = wasmArgument();
const models = fileURLToPath(new URL('../../examples/models/', import.meta.url));
requireBuilt(packageWasm);
let tf, tfl, tfwasm;
try {
  tf = await import('@tensorflow/tfjs-core');
  tfl = await import('@tensorflow/tfjs-layers');
  tfwasm = await import('@tensorflow/tfjs-backend-wasm');
} catch (error) {
  throw new Error(`TensorFlow.js is not installed: run \`npm ci --ignore-scripts\` in bench/js (${error.message})`);
}
const { encodeOnnxModel, loadBb, OnnxTrainer } = await import(packageDist);

const QUICK = process.argv.includes('--quick');
const THREADS = process.argv.includes('--threads') ? Number(process.argv[process.argv.indexOf('--threads') + 1]) : 0;
if (process.argv.includes('--threads') && !(Number.isInteger(THREADS) && THREADS >= 1)) throw new Error('--threads takes a whole number from 1');
const WINDOW_MS = QUICK ? 150 : 600;
const WINDOWS = QUICK ? 3 : 7;
const WARMUP = 20;
// V8 runs a WebAssembly function on its baseline compiler until the optimising one has
// compiled it in the background, seconds later on a busy machine: both runtimes step for
// this long before any window counts.
const WARMUP_MS = QUICK ? 1000 : 3000;

// ---- tfjs: the wasm backend, one thread --------------------------------------------------

tfwasm.setWasmPaths(`${dirname(require.resolve('@tensorflow/tfjs-backend-wasm'))}/`);
tfwasm.setThreadsCount(1);
await tf.setBackend('wasm');
await tf.ready();
const gradRoutes = convGradRoutes(tf);
let convGrad = 'fast';
registerConvGradient(tf, gradRoutes, () => convGrad);
const nextBatches = batchSource();

// ---- timing ---------------------------------------------------------------------------------

/** The process's CPU time in ms (user + system, every thread). */
const cpuMs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

/**
 * Steps per second of CPU time over one window of at least WINDOW_MS of it, cycling
 * through the batches. CPU time, not wall time: on a shared machine the wall clock measures
 * the share of the processor this process got, not how fast the step is.
 */
function window(step, data) {
  const clock = THREADS ? () => performance.now() : cpuMs;
  const start = clock();
  let n = 0;
  let elapsed = 0;
  do {
    step(data[n % data.length]);
    n++;
    elapsed = clock() - start;
  } while (elapsed < WINDOW_MS || n < 5);
  return (n * 1000) / elapsed;
}

/**
 * Steps per second of bb and of tfjs, tfjs once per Conv2D gradient route in `routes`
 * (names of the routes of `convGradRoutes`; a model without convolutions runs once), alternating windows.
 */
async function compare(name, onnx, makeTfjs, shape, routes) {
  const bb = THREADS
    ? await loadBb({ threads: THREADS, simd: 'baseline', ...(process.argv.includes('--wasm') ? { threadedSource: readFileSync(packageWasm) } : {}) })
    : await loadBb(readFileSync(packageWasm));
  if (THREADS) {
    if (bb.threadsUnavailable) throw new Error(`bb-mt.wasm did not load: ${bb.threadsUnavailable}`);
    bb.check(bb.exports.bb_wasm_set_threads(THREADS));
  }
  const trainer = OnnxTrainer.create(bb, typeof onnx === 'string' ? new Uint8Array(readFileSync(`${models}/${onnx}`)) : onnx, { optimizer: 'adam', lr: 1e-3 });
  const data = nextBatches(16, shape.reduce((a, b) => a * b, 1));
  const tfjs = tfjsTrainer(tf, makeTfjs(tfl), data, shape);
  const bbStep = (b) => trainer.step(b).loss;
  const tfRoute = (route) => () => {
    convGrad = route;
    return tfjs.step();
  };
  const sides = [['bb', bbStep, data], ...routes.map((route) => [route, tfRoute(route), data])];
  // both learn: the loss on a fixed batch falls over the warm-up (tfjs on the first route)
  const bbFirst = bbStep(data[0]);
  convGrad = routes[0];
  const tfFirst = tfjs.step();
  for (let i = 0; i < WARMUP; i++) bbStep(data[0]), tfjs.step();
  const bbLast = bbStep(data[0]);
  tfjs.rewind();
  const tfLast = tfjs.step();
  for (const [, step, batches] of sides) {
    const until = performance.now() + WARMUP_MS;
    for (let i = 0; performance.now() < until; i++) step(batches[i % batches.length]);
  }
  const rates = Object.fromEntries(sides.map(([side]) => [side, []]));
  for (let w = 0; w < WINDOWS; w++) {
    for (const [side, step, batches] of sides) {
      tfjs.rewind();
      rates[side].push(window(step, batches));
    }
  }
  const stats = trainer.stats();
  trainer.free();
  tfjs.dispose();
  const best = (r) => Math.max(...r);
  return {
    name,
    bb: best(rates.bb),
    tfjs: Object.fromEntries(routes.map((route) => [route, best(rates[route])])),
    learned: { bb: [bbFirst, bbLast], tfjs: [tfFirst, tfLast] },
    memory: stats,
    memoryMiB: bb.exports.memory.buffer.byteLength / 1048576,
  };
}

const cpu = cpus()[0]?.model ?? 'unknown CPU';
console.log(`train-vs-tfjs: Node ${process.versions.node}, ${cpu}, load average ${loadavg()[0].toFixed(1)}; batch ${BATCH}, Adam lr 1e-3`);
console.log(`tfjs ${tf.version_core} (backend ${tf.getBackend()}, 1 thread), bytesandbrains ${packageDist.replace(/.*\/js\//, 'js/')} with ${THREADS ? `bb-mt.wasm on ${THREADS} thread${THREADS > 1 ? 's' : ''}` : packageWasm.replace(/.*\/js\//, 'js/')}\n`);
const gradientError = checkFastGradient(tf, gradRoutes);
console.log(`tfjs Conv2D gradient through its fast kernels against its own slow kernels: max |difference| / max |slow| = ${gradientError.toExponential(1)}`);
if (!(gradientError < 1e-5)) throw new Error('the fast Conv2D gradient disagrees with tfjs\'s own');
const only = process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1].split(',') : undefined;
const MODELS = [
  ['CNN (digits_cnn)', 'digits_cnn.onnx', tfjsCnn, [8, 8, 1], ['fast', 'slow']],
  ['CNN 28×28 (infer-vs-peers)', mnistCnnOnnx(encodeOnnxModel), tfjsMnistCnn, [28, 28, 1], ['fast', 'slow']],
  ['MLP (digits_mlp)', 'digits_mlp.onnx', tfjsMlp, [64], ['fast']],
].filter(([name]) => only === undefined || only.some((word) => name.includes(word)));
const results = [];
for (const args of MODELS) results.push(await compare(...args));
const targets = { 'CNN (digits_cnn)': 2, 'CNN 28×28 (infer-vs-peers)': 2, 'MLP (digits_mlp)': 5 };
console.log(`steps per second of ${THREADS ? 'wall-clock' : 'CPU'} time, the best of each side's windows; tfjs "fast": its Conv2D gradient`);
console.log('through its XNNPACK conv2d kernel, "slow": through Conv2DBackpropInput and');
console.log('Conv3DBackpropFilterV2 (the target is against the fast one)\n');
console.log(`| model | ${THREADS ? `bb-mt.wasm ${THREADS}t` : 'bb.wasm'} steps/s | tfjs-wasm steps/s (fast) | bb / tfjs (fast) | target | tfjs-wasm steps/s (slow) | bb / tfjs (slow) | loss bb (first → after 21 steps) | loss tfjs |`);
console.log('|---|---:|---:|---:|---:|---:|---:|---|---|');
let met = 0;
for (const r of results) {
  const ratio = r.bb / r.tfjs.fast;
  const target = targets[r.name];
  if (ratio >= target) met++;
  const f = (pair) => pair.map((v) => v.toFixed(3)).join(' → ');
  const slow = r.tfjs.slow === undefined ? ['—', '—'] : [r.tfjs.slow.toFixed(0), `${(r.bb / r.tfjs.slow).toFixed(2)}×`];
  console.log(
    `| ${r.name} | ${r.bb.toFixed(0)} | ${r.tfjs.fast.toFixed(0)} | ${ratio.toFixed(2)}× | ≥ ${target}× ${ratio >= target ? 'met' : 'NOT met'} | ${slow[0]} | ${slow[1]} | ${f(r.learned.bb)} | ${f(r.learned.tfjs)} |`,
  );
}
for (const r of results) {
  const m = r.memory;
  console.log(
    `${r.name}: bb step memory ${(m.stepInUseBytes / 1024).toFixed(0)} KiB in use at the peak, ${(m.stepHeldBytes / 1024).toFixed(0)} KiB held by the recycling allocator, parameters and optimizer state ${(m.heldBytes / 1024).toFixed(0)} KiB; bb.wasm memory ${r.memoryMiB.toFixed(1)} MiB`,
  );
}
console.log(`train-vs-tfjs: ${met} of ${results.length} targets met`);
