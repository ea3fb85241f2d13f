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
// tfjs-backend-wasm 4.22 registers no Conv2DBackpropFilter kernel, so a conv2d layer cannot
// be trained on it as shipped ("Kernel 'Conv2DBackpropFilter' not registered"). The bench
// gives Conv2D a gradient made of kernels the wasm backend has, two ways, and times tfjs
// with each (fastConvGrad and slowConvGrad below; the target is against the fast one).
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
const { encodeOnnxModel, loadBb, OnnxTrainer } = await import(packageDist);

const QUICK = process.argv.includes('--quick');
const THREADS = process.argv.includes('--threads') ? Number(process.argv[process.argv.indexOf('--threads') + 1]) : 0;
if (process.argv.includes('--threads') && !(Number.isInteger(THREADS) && THREADS >= 1)) throw new Error('--threads takes a whole number from 1');
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
/** The explicit [top, bottom, left, right] padding tfjs's own convolution uses for these shapes. */
function padding(x, filter, strides, pad) {
  const info = tf.backend_util.computeConv2DInfo(x.shape, filter.shape, strides, 1, pad);
  const { top, bottom, left, right } = info.padInfo;
  return { top, bottom, left, right, info };
}
/**
 * Conv2D's gradient through tfjs's kernels without a fast path ('slow'): conv2dTranspose
 * (Conv2DBackpropInput) and Conv3DBackpropFilterV2 at depth 1, both loops over every
 * output without XNNPACK.
 */
const slowConvGrad = {
  x: (dy, x, filter, [sh, sw], pad) => tf.conv2dTranspose(dy, filter, x.shape, [sh, sw], pad),
  filter: (dy, x, filter, [sh, sw], pad) => {
    const [n, h, w, c] = x.shape;
    const [, oh, ow, m] = dy.shape;
    const grad = tf.engine().runKernel(
      'Conv3DBackpropFilterV2',
      { x: tf.reshape(x, [n, 1, h, w, c]), dy: tf.reshape(dy, [n, 1, oh, ow, m]) },
      { strides: [1, 1, sh, sw, 1], pad, filterShape: [1, ...filter.shape] },
    );
    return tf.reshape(grad, filter.shape);
  },
};
/**
 * The same gradient through tfjs's fast kernels (stride 1, which both CNNs use): the input
 * gradient is a convolution of dy with the filter turned 180° and its channels swapped
 * (the Conv2D kernel, XNNPACK); the filter gradient is a convolution too, of the input with
 * its channels as the batch and its batch as the channels (x transposed to [c, h, w, n])
 * by dy as the filter ([oh, ow, n, m]), whose [c, kh, kw, m] result is transposed to the
 * filter's [kh, kw, c, m]. (A matMul of the input's column matrix with dy, the columns
 * built from slices of the padded input, measured 3–5× slower: tfjs's Slice and Concat.)
 */
const fastConvGrad = {
  x: (dy, x, filter, strides, pad) => {
    const [kh, kw] = filter.shape;
    const { top, bottom, left, right } = padding(x, filter, strides, pad);
    const turned = tf.transpose(tf.reverse(filter, [0, 1]), [0, 1, 3, 2]);
    return tf.conv2d(dy, turned, 1, [[0, 0], [kh - 1 - top, kh - 1 - bottom], [kw - 1 - left, kw - 1 - right], [0, 0]]);
  },
  filter: (dy, x, filter, strides, pad) => {
    const { top, bottom, left, right } = padding(x, filter, strides, pad);
    const images = tf.transpose(x, [3, 1, 2, 0]);
    const kernels = tf.transpose(dy, [1, 2, 0, 3]);
    return tf.transpose(tf.conv2d(images, kernels, 1, [[0, 0], [top, bottom], [left, right], [0, 0]]), [1, 2, 0, 3]);
  },
};
const convGradRoutes = { fast: fastConvGrad, slow: slowConvGrad };
let convGrad = fastConvGrad;
tf.registerGradient({
  kernelName: 'Conv2D',
  inputsToSave: ['x', 'filter'],
  gradFunc: (dy, [x, filter], attrs) => {
    const strides = pair(attrs.strides);
    if (convGrad === fastConvGrad && (strides[0] !== 1 || strides[1] !== 1 || pair(attrs.dilations ?? 1).some((d) => d !== 1))) {
      throw new Error('the fast Conv2D gradient of this bench handles stride 1 and dilation 1 only');
    }
    return {
      x: () => convGrad.x(dy, x, filter, strides, attrs.pad),
      filter: () => convGrad.filter(dy, x, filter, strides, attrs.pad),
    };
  },
});

/** The largest |fast − slow| of both gradients over their largest |slow|, on one random conv. */
function checkFastGradient() {
  return tf.tidy(() => {
    const x = tf.randomUniform([4, 8, 8, 3], -1, 1, 'float32', 1);
    const filter = tf.randomUniform([3, 3, 3, 5], -1, 1, 'float32', 2);
    const dy = tf.randomUniform([4, 8, 8, 5], -1, 1, 'float32', 3);
    let worst = 0;
    for (const part of ['x', 'filter']) {
      const slow = slowConvGrad[part](dy, x, filter, [1, 1], 'same');
      const fast = fastConvGrad[part](dy, x, filter, [1, 1], 'same');
      const scale = tf.max(tf.abs(slow)).dataSync()[0];
      worst = Math.max(worst, tf.max(tf.abs(tf.sub(fast, slow))).dataSync()[0] / scale);
    }
    return worst;
  });
}

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

/**
 * The small CNN of infer-vs-peers.mjs on 28×28 images: conv 3×3 1→16 (pad 1) → ReLU →
 * MaxPool 2 → conv 3×3 16→32 (pad 1) → ReLU → MaxPool 2 → Flatten → Gemm 1568→10, as ONNX
 * for bb (random weights, He-uniform like tfjs's default initialiser's scale) and as tfjs
 * layers (NHWC).
 */
function mnistCnnOnnx() {
  let state = 7;
  const uniform = (count, bound) => Float32Array.from({ length: count }, () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return (state / 4294967296 * 2 - 1) * bound;
  });
  const conv = { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] } };
  const pool = { kernel_shape: { ints: [2, 2] }, strides: { ints: [2, 2] } };
  return encodeOnnxModel({
    opset: 17,
    nodes: [
      { opType: 'Conv', inputs: ['x', 'w1', 'b1'], outputs: ['c1'], attributes: conv },
      { opType: 'Relu', inputs: ['c1'], outputs: ['r1'] },
      { opType: 'MaxPool', inputs: ['r1'], outputs: ['p1'], attributes: pool },
      { opType: 'Conv', inputs: ['p1', 'w2', 'b2'], outputs: ['c2'], attributes: conv },
      { opType: 'Relu', inputs: ['c2'], outputs: ['r2'] },
      { opType: 'MaxPool', inputs: ['r2'], outputs: ['p2'], attributes: pool },
      { opType: 'Flatten', inputs: ['p2'], outputs: ['f'], attributes: { axis: { int: 1 } } },
      { opType: 'Gemm', inputs: ['f', 'w3', 'b3'], outputs: ['y'], attributes: { transB: { int: 1 } } },
    ],
    inputs: [{ name: 'x', dtype: 'float', dims: ['N', 1, 28, 28] }],
    outputs: [{ name: 'y', dtype: 'float', dims: ['N', 10] }],
    initializers: [
      { name: 'w1', dtype: 'float', dims: [16, 1, 3, 3], data: uniform(144, Math.sqrt(6 / 9)) },
      { name: 'b1', dtype: 'float', dims: [16], data: new Float32Array(16) },
      { name: 'w2', dtype: 'float', dims: [32, 16, 3, 3], data: uniform(4608, Math.sqrt(6 / 144)) },
      { name: 'b2', dtype: 'float', dims: [32], data: new Float32Array(32) },
      { name: 'w3', dtype: 'float', dims: [10, 1568], data: uniform(15680, Math.sqrt(6 / 1568)) },
      { name: 'b3', dtype: 'float', dims: [10], data: new Float32Array(10) },
    ],
  });
}

function tfjsMnistCnn() {
  const m = tfl.sequential();
  m.add(tfl.layers.conv2d({ inputShape: [28, 28, 1], filters: 16, kernelSize: 3, padding: 'same', activation: 'relu' }));
  m.add(tfl.layers.maxPooling2d({ poolSize: 2 }));
  m.add(tfl.layers.conv2d({ filters: 32, kernelSize: 3, padding: 'same', activation: 'relu' }));
  m.add(tfl.layers.maxPooling2d({ poolSize: 2 }));
  m.add(tfl.layers.flatten());
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
function batches(count, pixels) {
  return Array.from({ length: count }, () => ({
    x: Float32Array.from({ length: BATCH * pixels }, () => (pixels === 64 ? Math.floor(random() * 17) : random())),
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
 * (names of `convGradRoutes`; a model without convolutions runs once), alternating windows.
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
  const model = makeTfjs();
  const optimizer = tf.train.adam(1e-3);
  const data = batches(16, shape.reduce((a, b) => a * b, 1));
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
  const tfRoute = (route) => () => {
    convGrad = convGradRoutes[route];
    return tfStep();
  };
  const sides = [['bb', bbStep, data], ...routes.map((route) => [route, tfRoute(route), tfData])];
  // both learn: the loss on a fixed batch falls over the warm-up (tfjs on the first route)
  const bbFirst = bbStep(data[0]);
  convGrad = convGradRoutes[routes[0]];
  const tfFirst = tfStep();
  for (let i = 0; i < WARMUP; i++) bbStep(data[0]), tfStep();
  const bbLast = bbStep(data[0]);
  tfIndex = 0;
  const tfLast = tfStep();
  for (const [, step, batches] of sides) {
    const until = performance.now() + WARMUP_MS;
    for (let i = 0; performance.now() < until; i++) step(batches[i % batches.length]);
  }
  const rates = Object.fromEntries(sides.map(([side]) => [side, []]));
  for (let w = 0; w < WINDOWS; w++) {
    for (const [side, step, batches] of sides) {
      tfIndex = 0;
      rates[side].push(window(step, batches));
    }
  }
  const stats = trainer.stats();
  trainer.free();
  for (const b of tfData) b.x.dispose(), b.labels.dispose();
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
const gradientError = checkFastGradient();
console.log(`tfjs Conv2D gradient through its fast kernels against its own slow kernels: max |difference| / max |slow| = ${gradientError.toExponential(1)}`);
if (!(gradientError < 1e-5)) throw new Error('the fast Conv2D gradient disagrees with tfjs\'s own');
const only = process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1].split(',') : undefined;
const MODELS = [
  ['CNN (digits_cnn)', 'digits_cnn.onnx', tfjsCnn, [8, 8, 1], ['fast', 'slow']],
  ['CNN 28×28 (infer-vs-peers)', mnistCnnOnnx(), tfjsMnistCnn, [28, 28, 1], ['fast', 'slow']],
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
