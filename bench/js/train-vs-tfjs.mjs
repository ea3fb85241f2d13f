// Training steps per second, batch 32, in one Node process: bb.wasm through the npm
// package (OnnxTrainer on the models the digits examples train, examples/models) against
// TensorFlow.js 4.22 with its WebAssembly backend on one thread, the same architectures
// written here with tfjs-layers, the same optimizer (Adam, lr 1e-3), the same batches.
//
//   cd bench/js && npm ci --ignore-scripts      # once
//   bash scripts/build-wasm.sh && (cd js && npm ci && npm run build)
//   node bench/js/train-vs-tfjs.mjs [--quick] [--wasm js/wasm/bb-relaxed.wasm]
//   (bb-relaxed.wasm needs `node --experimental-wasm-relaxed-simd` in Node 20)
//
// A step is one optimizer update on one batch, from JavaScript arrays in to the loss read
// back in JavaScript: for bb, OnnxTrainer.step({x, labels}) (the rows are copied into the
// module, the training and Adam graphs run, the loss is returned); for tfjs,
// optimizer.minimize(loss, true) and dataSync() of the loss. Both step for a few seconds
// first (V8 optimises WebAssembly in the background), then are timed in alternating
// windows of the process's CPU time (tfjs runs one thread, so the process's CPU time is
// the steps'); the best window of each counts.
//
// tfjs-backend-wasm 4.22 registers no Conv2DBackpropFilter kernel, so a conv2d layer cannot
// be trained on it as shipped ("Kernel 'Conv2DBackpropFilter' not registered"). The bench
// gives Conv2D a gradient made of kernels the wasm backend has: the input gradient is
// conv2dTranspose (Conv2DBackpropInput, as tfjs's own gradient), the filter gradient is the
// backend's Conv3DBackpropFilterV2 over a depth of 1 — tfjs's own kernel for the same sum.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, loadavg } from 'node:os';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { packageDist, requireBuilt, wasmArgument } from './common.mjs';

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
const { loadBb, OnnxTrainer } = await import(packageDist);

const QUICK = process.argv.includes('--quick');
const BATCH = 32;
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
const pair = (v) => (Array.isArray(v) ? v : [v, v]);
tf.registerGradient({
  kernelName: 'Conv2D',
  inputsToSave: ['x', 'filter'],
  gradFunc: (dy, [x, filter], attrs) => {
    const [sh, sw] = pair(attrs.strides);
    return {
      x: () => tf.conv2dTranspose(dy, filter, x.shape, [sh, sw], attrs.pad),
      filter: () => {
        const [n, h, w, c] = x.shape;
        const [, oh, ow, m] = dy.shape;
        const grad = tf.engine().runKernel(
          'Conv3DBackpropFilterV2',
          { x: tf.reshape(x, [n, 1, h, w, c]), dy: tf.reshape(dy, [n, 1, oh, ow, m]) },
          { strides: [1, 1, sh, sw, 1], pad: attrs.pad, filterShape: [1, ...filter.shape] },
        );
        return tf.reshape(grad, filter.shape);
      },
    };
  },
});

/** digits_cnn.onnx as tfjs layers (channels last): x/16, conv 16, pool, conv 32, pool, dense 64, dense 10. */
function tfjsCnn() {
  const m = tfl.sequential();
  m.add(tfl.layers.rescaling({ inputShape: [8, 8, 1], scale: 1 / 16 }));
  m.add(tfl.layers.conv2d({ filters: 16, kernelSize: 3, padding: 'same', activation: 'relu' }));
  m.add(tfl.layers.maxPooling2d({ poolSize: 2 }));
  m.add(tfl.layers.conv2d({ filters: 32, kernelSize: 3, padding: 'same', activation: 'relu' }));
  m.add(tfl.layers.maxPooling2d({ poolSize: 2 }));
  m.add(tfl.layers.flatten());
  m.add(tfl.layers.dense({ units: 64, activation: 'relu' }));
  m.add(tfl.layers.dense({ units: 10 }));
  return m;
}

/** digits_mlp.onnx: x/16, dense 32 relu, dense 10. */
function tfjsMlp() {
  const m = tfl.sequential();
  m.add(tfl.layers.rescaling({ inputShape: [64], scale: 1 / 16 }));
  m.add(tfl.layers.dense({ units: 32, activation: 'relu' }));
  m.add(tfl.layers.dense({ units: 10 }));
  return m;
}

// ---- the same batches for both -------------------------------------------------------------

let seed = 42;
const random = () => ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 4294967296);
function batches(count) {
  return Array.from({ length: count }, () => ({
    x: Float32Array.from({ length: BATCH * 64 }, () => Math.floor(random() * 17)),
    labels: Float32Array.from({ length: BATCH }, () => Math.floor(random() * 10)),
  }));
}

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
  const start = cpuMs();
  let n = 0;
  let elapsed = 0;
  do {
    step(data[n % data.length]);
    n++;
    elapsed = cpuMs() - start;
  } while (elapsed < WINDOW_MS || n < 5);
  return (n * 1000) / elapsed;
}

async function compare(name, onnxFile, makeTfjs, shape) {
  const bb = await loadBb(readFileSync(packageWasm));
  const trainer = OnnxTrainer.create(bb, new Uint8Array(readFileSync(`${models}/${onnxFile}`)), { optimizer: 'adam', lr: 1e-3 });
  const model = makeTfjs();
  const optimizer = tf.train.adam(1e-3);
  const data = batches(16);
  const tfData = data.map((b) => ({
    x: tf.tensor(b.x, [BATCH, ...shape]),
    labels: tf.oneHot(tf.tensor1d(b.labels, 'int32'), 10),
  }));
  const bbStep = (b) => trainer.step(b).loss;
  let tfIndex = 0;
  const tfStep = () => {
    const b = tfData[tfIndex++ % tfData.length];
    const loss = optimizer.minimize(() => tf.losses.softmaxCrossEntropy(b.labels, model.apply(b.x)), true);
    const value = loss.dataSync()[0];
    loss.dispose();
    return value;
  };
  // both learn: the loss on a fixed batch falls over the warm-up
  const bbFirst = bbStep(data[0]);
  const tfFirst = tfStep();
  for (let i = 0; i < WARMUP; i++) bbStep(data[0]), tfStep();
  const bbLast = bbStep(data[0]);
  tfIndex = 0;
  const tfLast = tfStep();
  for (const [step, batches] of [[bbStep, data], [tfStep, tfData]]) {
    const until = performance.now() + WARMUP_MS;
    for (let i = 0; performance.now() < until; i++) step(batches[i % batches.length]);
  }
  const bbRates = [];
  const tfRates = [];
  for (let w = 0; w < WINDOWS; w++) {
    bbRates.push(window(bbStep, data));
    tfIndex = 0;
    tfRates.push(window(tfStep, tfData));
  }
  const stats = trainer.stats();
  trainer.free();
  for (const b of tfData) b.x.dispose(), b.labels.dispose();
  const best = (rates) => Math.max(...rates);
  return {
    name,
    bb: best(bbRates),
    tfjs: best(tfRates),
    learned: { bb: [bbFirst, bbLast], tfjs: [tfFirst, tfLast] },
    memory: stats,
    memoryMiB: bb.exports.memory.buffer.byteLength / 1048576,
  };
}

const cpu = cpus()[0]?.model ?? 'unknown CPU';
console.log(`train-vs-tfjs: Node ${process.versions.node}, ${cpu}, load average ${loadavg()[0].toFixed(1)}; batch ${BATCH}, Adam lr 1e-3`);
console.log(`tfjs ${tf.version_core} (backend ${tf.getBackend()}, 1 thread), bytesandbrains ${packageDist.replace(/.*\/js\//, 'js/')} with ${packageWasm.replace(/.*\/js\//, 'js/')}\n`);
const results = [
  await compare('CNN (digits_cnn)', 'digits_cnn.onnx', tfjsCnn, [8, 8, 1]),
  await compare('MLP (digits_mlp)', 'digits_mlp.onnx', tfjsMlp, [64]),
];
const targets = { 'CNN (digits_cnn)': 1.5, 'MLP (digits_mlp)': 5 };
console.log('steps per second of CPU time, the best of each side\'s windows\n');
console.log('| model | bb.wasm steps/s | tfjs-wasm steps/s | bb / tfjs | target | loss bb (first → after 21 steps) | loss tfjs |');
console.log('|---|---:|---:|---:|---:|---|---|');
let met = 0;
for (const r of results) {
  const ratio = r.bb / r.tfjs;
  const target = targets[r.name];
  if (ratio >= target) met++;
  const f = (pair) => pair.map((v) => v.toFixed(3)).join(' → ');
  console.log(
    `| ${r.name} | ${r.bb.toFixed(0)} | ${r.tfjs.toFixed(0)} | ${ratio.toFixed(2)}× | ≥ ${target}× ${ratio >= target ? 'met' : 'NOT met'} | ${f(r.learned.bb)} | ${f(r.learned.tfjs)} |`,
  );
}
for (const r of results) {
  const m = r.memory;
  console.log(
    `${r.name}: bb step memory ${(m.stepInUseBytes / 1024).toFixed(0)} KiB in use at the peak, ${(m.stepHeldBytes / 1024).toFixed(0)} KiB held by the recycling allocator, parameters and optimizer state ${(m.heldBytes / 1024).toFixed(0)} KiB; bb.wasm memory ${r.memoryMiB.toFixed(1)} MiB`,
  );
}
console.log(`train-vs-tfjs: ${met} of ${results.length} targets met`);
