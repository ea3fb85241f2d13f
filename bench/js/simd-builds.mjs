// The two shipped builds side by side in one Node process: bb.wasm (SIMD128) against
// bb-relaxed.wasm (its kernels' multiply-adds as relaxed madd), on MatMul, convolutions,
// the digits CNN's inference and the CNN's and MLP's training step, one thread; with
// onnxruntime-web 1.30 (wasm, 1 thread) and TensorFlow.js 4.22 (wasm backend, 1 thread) on
// the same inference cases (tfjs on MatMul and the convolutions, channels last).
//
//   cd bench/js && npm ci --ignore-scripts      # once
//   bash scripts/build-wasm.sh && (cd js && npm ci && npm run build)
//   node --experimental-wasm-relaxed-simd bench/js/simd-builds.mjs [--quick] [--baseline FILE]
//
// --baseline FILE measures another non-relaxed module in bb.wasm's place: e.g. one built
// like bb-relaxed.wasm but without -mrelaxed-simd, to tell the multiply-adds' share of the
// difference from the compiler's (clang-19 against clang-14) and Binaryen's (bb.wasm is
// optimised by wasm-opt after linking, bb-relaxed.wasm is not).
//
// Each case runs on both builds with the same inputs (outputs checked to agree, max |diff|
// over max |output|), steps for a while first so V8's optimising tier has compiled both,
// then is timed in alternating windows of the process's CPU time (so other work on a
// shared machine does not count); the median window of each counts. Ratio above 1:
// bb-relaxed.wasm is faster. A call is the op on inputs already in the runtime and its
// output copied out to JavaScript (bb: CpuSession.run and toArray; tfjs: the op and
// dataSync); onnxruntime-web cannot keep inputs in its module, so its call is run(), inputs
// copied in as well.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, loadavg } from 'node:os';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultWasm, packageDist, requireBuilt } from './common.mjs';

const relaxedWasm = fileURLToPath(new URL('../../js/wasm/bb-relaxed.wasm', import.meta.url));
const baselineWasm = process.argv.includes('--baseline') ? process.argv[process.argv.indexOf('--baseline') + 1] : defaultWasm;
requireBuilt(baselineWasm);
requireBuilt(relaxedWasm);
const { CpuSession, OnnxModel, OnnxTrainer, Tensor, encodeOnnxModel, loadBb, relaxedSimdSupported } = await import(packageDist);
if (!relaxedSimdSupported()) {
  throw new Error('this engine does not run relaxed SIMD: run the bench as `node --experimental-wasm-relaxed-simd bench/js/simd-builds.mjs` (Node 20)');
}

const require = createRequire(import.meta.url);
const ort = await import('onnxruntime-web');
const tf = await import('@tensorflow/tfjs-core');
const tfwasm = await import('@tensorflow/tfjs-backend-wasm');
ort.env.wasm.numThreads = 1;
ort.env.wasm.simd = true;
ort.env.logLevel = 'error';
tfwasm.setWasmPaths(`${dirname(require.resolve('@tensorflow/tfjs-backend-wasm'))}/`);
tfwasm.setThreadsCount(1);
await tf.setBackend('wasm');
await tf.ready();

const QUICK = process.argv.includes('--quick');
const WINDOW_MS = QUICK ? 100 : 300;
const ROUNDS = QUICK ? 3 : 7;
const WARMUP_MS = QUICK ? 500 : 1500;
const models = fileURLToPath(new URL('../../js/models/', import.meta.url));

const builds = {
  baseline: await loadBb(readFileSync(baselineWasm)),
  relaxed: await loadBb(readFileSync(relaxedWasm)),
};
for (const [name, bb] of Object.entries(builds)) if (bb.simd !== name) throw new Error(`${name} loaded as ${bb.simd}`);

let state = 7;
const random = (n, scale = 1) => Float32Array.from({ length: n }, () => (((state = (Math.imul(state, 1103515245) + 12345) >>> 0) / 2 ** 32) * 2 - 1) * scale);
const f32 = (name, dims) => ({ name, dtype: 'float', dims });
/** A tfjs tensor's values, the tensor then disposed (not through tf.tidy, which walks what it returns). */
const read = (tensor) => {
  const values = tensor.dataSync();
  tensor.dispose();
  return values;
};
const size = (dims) => dims.reduce((a, b) => a * b, 1);

function matmul(n) {
  return {
    label: `MatMul ${n}² (${n}×${n} · ${n}×${n})`,
    flop: 2 * n ** 3,
    tfjs: ({ a, b }) => {
      const [ta, tb] = [tf.tensor2d(a, [n, n]), tf.tensor2d(b, [n, n])];
      return { once: () => read(tf.matMul(ta, tb)), release: () => (ta.dispose(), tb.dispose()) };
    },
    onnx: encodeOnnxModel({ opset: 17, nodes: [{ opType: 'MatMul', inputs: ['a', 'b'], outputs: ['y'] }], inputs: [f32('a', [n, n]), f32('b', [n, n])], outputs: [f32('y', [n, n])] }),
    dims: { a: [n, n], b: [n, n] },
  };
}

function conv(label, [n, c, h, w], m, k, group = 1) {
  const pad = (k - 1) / 2;
  return {
    label,
    flop: 2 * n * m * h * w * (c / group) * k * k,
    tfjs: (feeds) => {
      // NHWC input, HWIO (or HW·C·1 depthwise) filter: the same sums, in tfjs's layout
      const x = tf.tidy(() => tf.transpose(tf.tensor4d(feeds.x, [n, c, h, w]), [0, 2, 3, 1]));
      const filter = tf.tidy(() => tf.transpose(tf.tensor4d(feeds.w, [m, c / group, k, k]), group === 1 ? [2, 3, 1, 0] : [2, 3, 0, 1]));
      const bias = tf.tensor1d(feeds.b);
      const op = group === 1
        ? () => tf.fused.conv2d({ x, filter, strides: 1, pad: 'same', bias })
        : () => tf.add(tf.depthwiseConv2d(x, filter, 1, 'same'), bias);
      return {
        once: () => read(tf.tidy(() => tf.transpose(op(), [0, 3, 1, 2]))),
        time: () => read(tf.tidy(op)),
        release: () => (x.dispose(), filter.dispose(), bias.dispose()),
      };
    },
    onnx: encodeOnnxModel({
      opset: 17,
      nodes: [{ opType: 'Conv', inputs: ['x', 'w', 'b'], outputs: ['y'], attributes: { kernel_shape: { ints: [k, k] }, pads: { ints: [pad, pad, pad, pad] }, group: { int: group } } }],
      inputs: [f32('x', [n, c, h, w]), f32('w', [m, c / group, k, k]), f32('b', [m])],
      outputs: [f32('y', [n, m, h, w])],
    }),
    dims: { x: [n, c, h, w], w: [m, c / group, k, k], b: [m] },
  };
}

const cnn = (batch) => ({
  label: `digits CNN inference, batch ${batch}`,
  onnx: new Uint8Array(readFileSync(`${models}/digits_cnn.onnx`)),
  dims: { pixels: [batch, 1, 8, 8] },
  scale: 16,
});

const INFERENCE = [
  matmul(256),
  matmul(512),
  matmul(1024),
  conv('Conv 3×3, 1×8×28×28 → 16', [1, 8, 28, 28], 16, 3),
  conv('Conv 3×3, 1×32×56×56 → 64', [1, 32, 56, 56], 64, 3),
  conv('depthwise Conv 3×3, 1×64×56×56', [1, 64, 56, 56], 64, 3, 64),
  cnn(32),
  cnn(256),
];

/** A run of the case on one build: session and resident inputs, and the first output. */
function inferenceRunner(bb, testCase, feeds) {
  const model = OnnxModel.decode(bb, testCase.onnx);
  const session = new CpuSession(bb, model);
  const inputs = Object.fromEntries(Object.entries(feeds).map(([name, data]) => [name, Tensor.from(bb, 'float', data, testCase.dims[name])]));
  const once = () => {
    const outputs = session.run(inputs);
    const values = Object.values(outputs);
    const first = values[0].toArray();
    for (const t of values) t.free();
    return first;
  };
  return { once, release: () => (Object.values(inputs).forEach((t) => t.free()), session.free(), model.free()) };
}

function trainingRunner(bb, file) {
  const trainer = OnnxTrainer.create(bb, new Uint8Array(readFileSync(`${models}/${file}`)), { optimizer: 'adam', lr: 1e-3 });
  let s = 42;
  const r = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296);
  const data = Array.from({ length: 8 }, () => ({
    x: Float32Array.from({ length: 32 * 64 }, () => Math.floor(r() * 17)),
    labels: Float32Array.from({ length: 32 }, () => Math.floor(r() * 10)),
  }));
  let i = 0;
  return { once: () => [trainer.step(data[i++ % data.length]).loss], release: () => trainer.free() };
}

const cpuMs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

/** CPU ms per call over one window. */
async function window(once) {
  const start = cpuMs();
  let n = 0;
  let elapsed;
  do {
    await once();
    n++;
    elapsed = cpuMs() - start;
  } while (elapsed < WINDOW_MS || n < 3);
  return elapsed / n;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function measure(runners) {
  for (const r of Object.values(runners)) {
    const until = performance.now() + WARMUP_MS;
    while (performance.now() < until) await r.once();
  }
  const names = Object.keys(runners);
  const times = Object.fromEntries(names.map((name) => [name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 ? [...names].reverse() : names;
    for (const name of order) times[name].push(await window(runners[name].once));
  }
  return Object.fromEntries(names.map((name) => [name, median(times[name])]));
}

function difference(a, b) {
  let scale = 0;
  let diff = 0;
  for (let i = 0; i < a.length; i++) scale = Math.max(scale, Math.abs(b[i])), (diff = Math.max(diff, Math.abs(a[i] - b[i])));
  return scale === 0 ? diff : diff / scale;
}

async function ortRunner(testCase, feeds) {
  const session = await ort.InferenceSession.create(testCase.onnx, { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
  const tensors = Object.fromEntries(Object.entries(feeds).map(([name, data]) => [name, new ort.Tensor('float32', data, testCase.dims[name])]));
  const once = async () => Object.values(await session.run(tensors))[0].data;
  return { once, release: () => session.release() };
}

const rows = [];
for (const testCase of INFERENCE) {
  process.stderr.write(`${testCase.label} ...\n`);
  const feeds = Object.fromEntries(Object.entries(testCase.dims).map(([name, dims]) => [name, random(size(dims), testCase.scale ?? 1).map((v) => (testCase.scale ? Math.abs(v) : v))]));
  const runners = { baseline: inferenceRunner(builds.baseline, testCase, feeds), relaxed: inferenceRunner(builds.relaxed, testCase, feeds), ort: await ortRunner(testCase, feeds) };
  if (testCase.tfjs) runners.tfjs = testCase.tfjs(feeds);
  const reference = await runners.ort.once();
  const diff = difference(runners.relaxed.once(), runners.baseline.once());
  const diffs = Object.fromEntries(await Promise.all(Object.entries(runners).map(async ([name, r]) => [name, difference(await r.once(), reference)])));
  const timed = Object.fromEntries(Object.entries(runners).map(([name, r]) => [name, { once: r.time ?? r.once }]));
  rows.push({ label: testCase.label, flop: testCase.flop, diff, diffs, ...(await measure(timed)) });
  Object.values(runners).forEach((r) => r.release());
}
for (const [label, file] of [['digits CNN training step, batch 32 (Adam)', 'digits_cnn.onnx'], ['digits MLP training step, batch 32 (Adam)', 'digits_mlp.onnx']]) {
  process.stderr.write(`${label} ...\n`);
  const runners = { baseline: trainingRunner(builds.baseline, file), relaxed: trainingRunner(builds.relaxed, file) };
  const diff = difference(runners.relaxed.once(), runners.baseline.once());
  rows.push({ label, diff, ...(await measure(runners)) });
  Object.values(runners).forEach((r) => r.release());
}

const fmt = (ms) => (ms < 1 ? ms.toFixed(3) : ms < 100 ? ms.toFixed(2) : ms.toFixed(1));
const gflops = (flop, ms) => (flop === undefined ? '' : `${(flop / ms / 1e6).toFixed(1)}`);
console.log(`simd-builds: Node ${process.versions.node}, ${cpus()[0]?.model ?? 'unknown CPU'} (${cpus().length} cores), load average ${loadavg()[0].toFixed(1)}; one thread; CPU ms per call, median of ${ROUNDS} alternating windows`);
console.log(`baseline: ${baselineWasm}`);
console.log('| case | bb.wasm ms | bb-relaxed.wasm ms | ORT-web ms | tfjs ms | baseline / relaxed | ORT-web / relaxed | tfjs / relaxed | bb.wasm GFLOP/s | bb-relaxed GFLOP/s | relaxed vs baseline | vs ORT-web: baseline, relaxed, tfjs |');
console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|');
const ratio = (peer, ours) => (peer === undefined ? '' : `${(peer / ours).toFixed(2)}×`);
for (const r of rows) {
  const vs = r.diffs ? [r.diffs.baseline, r.diffs.relaxed, r.diffs.tfjs].map((d) => (d === undefined ? '–' : d.toExponential(0))).join(', ') : '';
  console.log(`| ${r.label} | ${fmt(r.baseline)} | ${fmt(r.relaxed)} | ${r.ort === undefined ? '' : fmt(r.ort)} | ${r.tfjs === undefined ? '' : fmt(r.tfjs)} | ` +
    `${ratio(r.baseline, r.relaxed)} | ${ratio(r.ort, r.relaxed)} | ${ratio(r.tfjs, r.relaxed)} | ${gflops(r.flop, r.baseline)} | ${gflops(r.flop, r.relaxed)} | ${r.diff.toExponential(1)} | ${vs} |`);
}
console.log(`versions: onnxruntime-web ${ort.env.versions.web} (wasm, numThreads ${ort.env.wasm.numThreads}), tfjs-core ${tf.version_core} (backend ${tf.getBackend()}, 1 thread)`);
