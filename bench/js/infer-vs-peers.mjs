// Softmax, LogSoftmax, Exp, Sigmoid, Tanh and a small CNN's inference on bb.wasm against onnxruntime-web's
// wasm backend and TensorFlow.js 4.22's wasm backend, each on one thread, with the same
// inputs and weights in one Node process. Outputs are checked to agree, then each runtime
// is timed in alternating rounds (warm-up first, V8 tiers WebAssembly up in the
// background); the median over all of a runtime's timed batches of calls counts, in CPU
// time per call (each runtime runs one thread).
//
//   cd bench/js && npm ci --ignore-scripts          # once
//   bash scripts/build-wasm.sh && (cd js && npm run build)
//   node bench/js/infer-vs-peers.mjs [--quick] [--only Softmax,LogSoftmax,Exp,Sigmoid,Tanh,CNN]
//     [--wasm path/to/bb.wasm]    (another build of the module, e.g. to compare before/after)
//     [--package path/to/js]      (another build of the package: its dist/index.js and wasm/bb.wasm)
//
// Two times per runtime:
// * compute: the op or network alone on inputs already inside the runtime. bb:
//   CpuSession.run on resident Tensors (outputs freed); tfjs: the ops on a resident
//   tf.Tensor (outputs disposed; the wasm backend runs kernels synchronously). onnxruntime-web
//   has no way to keep a CPU tensor inside its module, so its run() always copies the inputs
//   in and the outputs out: its compute column is its end-to-end time.
// * end to end: JavaScript Float32Arrays in, a JavaScript Float32Array out. bb:
//   CpuSession.runArrays (a package without it: Tensor.from, run, toArray, free); tfjs:
//   tf.tensor, the ops, dataSync, dispose; ORT: run() (new ort.Tensor over the caller's
//   array, output .data). bb's "into" column: runArrays writing into the caller's array.
//
// The CNN is conv 3×3 (1→16, pad 1) → ReLU → MaxPool 2 → conv 3×3 (16→32, pad 1) → ReLU →
// MaxPool 2 → Flatten → Gemm (1568→10), on N×1×28×28 (NCHW; tfjs runs it NHWC with the
// same weights transposed, tf.fused.conv2d with bias and ReLU and tf.fused.matMul with bias,
// the kernels tfjs's graph converter would emit).
//
// As in ops-vs-ort.mjs, the script re-runs itself once with glibc's mmap and trim
// thresholds raised so that freed multi-MiB outputs are reused, for all runtimes alike.
import { createRequire } from 'node:module';
import { cpus, loadavg } from 'node:os';
import { dirname } from 'node:path';
import { denseForNhwc, oihwToHwio, smallCnnNodes } from './cases.mjs';
import { pathToFileURL } from 'node:url';
import { packageDist, randomFloats, requireBuilt, rerunWithTunedMalloc, wasmArgument } from './common.mjs';

const tuned = rerunWithTunedMalloc(import.meta.url);

const require = createRequire(import.meta.url);
const packageAt = process.argv.indexOf('--package');
const packageDir = packageAt >= 0 ? process.argv[packageAt + 1] : undefined;
const packageWasm = packageDir !== undefined ? `${packageDir}/wasm/bb.wasm` : wasmArgument();
requireBuilt(packageWasm);
let ort, tf, tfwasm;
try {
  ort = await import('onnxruntime-web');
  tf = await import('@tensorflow/tfjs-core');
  tfwasm = await import('@tensorflow/tfjs-backend-wasm');
} catch (error) {
  throw new Error(`the peers are not installed: run \`npm ci --ignore-scripts\` in bench/js (${error.message})`);
}
const { CpuSession, OnnxModel, Tensor, encodeOnnxModel, loadBb } = await import(
  packageDir !== undefined ? pathToFileURL(`${packageDir}/dist/index.js`).href : packageDist
);

const QUICK = process.argv.includes('--quick');
const only = process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1] : undefined;
/** Warm-up per runtime and case before any timing (V8's optimising tier compiles in the background). */
const WARMUP_MS = QUICK ? 300 : 1500;
const ROUNDS = QUICK ? 3 : 7;
/** Timed wall time per runtime, case and round. */
const ROUND_MS = QUICK ? 60 : 200;
const MIN_BATCHES = 5;
/** CPU time of one timed batch of calls. */
const BATCH_MS = 2;
/** Agreement required of float32 outputs: max |difference| over max |reference|. */
const TOLERANCE = 1e-4;
const OPSET = 17;

ort.env.wasm.numThreads = 1;
ort.env.wasm.simd = true;
ort.env.logLevel = 'error';
const ORT_OPTIONS = { executionProviders: ['wasm'], graphOptimizationLevel: 'all' };

tfwasm.setWasmPaths(`${dirname(require.resolve('@tensorflow/tfjs-backend-wasm'))}/`);
tfwasm.setThreadsCount(1);
await tf.setBackend('wasm');
await tf.ready();

// ---- inputs --------------------------------------------------------------------------------

/** Max |actual − reference| over max |reference|. */
function maxRelativeError(actual, reference) {
  if (actual.length !== reference.length) return Infinity;
  let diff = 0;
  let scale = 0;
  for (let i = 0; i < reference.length; i++) {
    diff = Math.max(diff, Math.abs(actual[i] - reference[i]));
    scale = Math.max(scale, Math.abs(reference[i]));
  }
  return Number.isNaN(diff) ? Infinity : diff / (scale || 1);
}

// ---- the cases: each gives an ONNX model and the same computation in tfjs --------------------

const f32 = (name, dims) => ({ name, dtype: 'float', dims });

function softmaxCase(op, rows, cols) {
  const tfOp = op === 'Softmax' ? (x) => tf.softmax(x, -1) : (x) => tf.logSoftmax(x, -1);
  return {
    label: `${op} [${rows},${cols}]`,
    group: op,
    inputDims: [rows, cols],
    input: (seed) => randomFloats(rows * cols, seed, -8, 8),
    onnx: () => encodeOnnxModel({
      opset: OPSET,
      nodes: [{ opType: op, inputs: ['x'], outputs: ['y'], attributes: { axis: { int: -1 } } }],
      inputs: [f32('x', [rows, cols])],
      outputs: [f32('y', [rows, cols])],
    }),
    tfjs: () => ({ shape: [rows, cols], forward: tfOp, release() {} }),
  };
}

const UNARY_TFJS = { Exp: (x) => tf.exp(x), Sigmoid: (x) => tf.sigmoid(x), Tanh: (x) => tf.tanh(x) };

function unaryCase(op, rows, cols) {
  return {
    label: `${op} [${rows},${cols}]`,
    group: op,
    inputDims: [rows, cols],
    input: (seed) => randomFloats(rows * cols, seed, -8, 8),
    onnx: () => encodeOnnxModel({
      opset: OPSET,
      nodes: [{ opType: op, inputs: ['x'], outputs: ['y'] }],
      inputs: [f32('x', [rows, cols])],
      outputs: [f32('y', [rows, cols])],
    }),
    tfjs: () => ({ shape: [rows, cols], forward: UNARY_TFJS[op], release() {} }),
  };
}

const CNN_WEIGHTS = {
  w1: randomFloats(16 * 1 * 9, 101, -0.5, 0.5),
  b1: randomFloats(16, 102, -0.1, 0.1),
  w2: randomFloats(32 * 16 * 9, 103, -0.15, 0.15),
  b2: randomFloats(32, 104, -0.1, 0.1),
  w3: randomFloats(10 * 1568, 105, -0.05, 0.05),
  b3: randomFloats(10, 106, -0.1, 0.1),
};

function cnnCase(batch) {
  return {
    label: `CNN 28×28, batch ${batch}`,
    group: 'CNN',
    inputDims: [batch, 1, 28, 28],
    input: (seed) => randomFloats(batch * 784, seed, 0, 1),
    onnx: () => encodeOnnxModel({
      opset: OPSET,
      nodes: smallCnnNodes(),
      inputs: [f32('x', [batch, 1, 28, 28])],
      outputs: [f32('y', [batch, 10])],
      initializers: [
        { name: 'w1', dtype: 'float', dims: [16, 1, 3, 3], data: CNN_WEIGHTS.w1 },
        { name: 'b1', dtype: 'float', dims: [16], data: CNN_WEIGHTS.b1 },
        { name: 'w2', dtype: 'float', dims: [32, 16, 3, 3], data: CNN_WEIGHTS.w2 },
        { name: 'b2', dtype: 'float', dims: [32], data: CNN_WEIGHTS.b2 },
        { name: 'w3', dtype: 'float', dims: [10, 1568], data: CNN_WEIGHTS.w3 },
        { name: 'b3', dtype: 'float', dims: [10], data: CNN_WEIGHTS.b3 },
      ],
    }),
    tfjs: () => {
      // ONNX flattens C×7×7 channel-major; NHWC flattens 7×7×C: the dense weights are
      // reordered so both compute the same sum.
      const dense = denseForNhwc(CNN_WEIGHTS.w3, 10, 32, 49);
      const w = {
        w1: tf.tensor4d(oihwToHwio(CNN_WEIGHTS.w1, 16, 1, 3, 3), [3, 3, 1, 16]),
        b1: tf.tensor1d(CNN_WEIGHTS.b1),
        w2: tf.tensor4d(oihwToHwio(CNN_WEIGHTS.w2, 32, 16, 3, 3), [3, 3, 16, 32]),
        b2: tf.tensor1d(CNN_WEIGHTS.b2),
        w3: tf.tensor2d(dense, [1568, 10]),
        b3: tf.tensor1d(CNN_WEIGHTS.b3),
      };
      return {
        // channels of 1: N×1×28×28 and N×28×28×1 are the same bytes
        shape: [batch, 28, 28, 1],
        forward: (x) => tf.tidy(() => {
          let h = tf.fused.conv2d({ x, filter: w.w1, strides: 1, pad: 'same', bias: w.b1, activation: 'relu' });
          h = tf.maxPool(h, 2, 2, 'valid');
          h = tf.fused.conv2d({ x: h, filter: w.w2, strides: 1, pad: 'same', bias: w.b2, activation: 'relu' });
          h = tf.maxPool(h, 2, 2, 'valid');
          return tf.fused.matMul({ a: tf.reshape(h, [batch, 1568]), b: w.w3, bias: w.b3 });
        }),
        release: () => Object.values(w).forEach((t) => t.dispose()),
      };
    },
  };
}

const CASES = [
  softmaxCase('Softmax', 1, 1000),
  softmaxCase('Softmax', 64, 1000),
  softmaxCase('Softmax', 1024, 1024),
  softmaxCase('LogSoftmax', 1, 1000),
  softmaxCase('LogSoftmax', 64, 1000),
  softmaxCase('LogSoftmax', 1024, 1024),
  unaryCase('Exp', 64, 1000),
  unaryCase('Exp', 1024, 1024),
  unaryCase('Sigmoid', 64, 1000),
  unaryCase('Sigmoid', 1024, 1024),
  unaryCase('Tanh', 64, 1000),
  unaryCase('Tanh', 1024, 1024),
  cnnCase(1),
  cnnCase(32),
].filter((c) => only === undefined || only.split(',').some((g) => c.group === g));

// ---- the runtimes: each gives compute() and endToEnd() -------------------------------------

async function bbRuntime(bb, testCase, data) {
  const model = OnnxModel.decode(bb, testCase.onnx());
  const session = new CpuSession(bb, model);
  const resident = Tensor.from(bb, 'float', data, testCase.inputDims);
  const feeds = { x: { dtype: 'float', data, dims: testCase.inputDims } };
  const into = { y: new Float32Array(session.runArrays?.(feeds).y.data.length ?? 0) };
  const endToEnd = session.runArrays
    ? () => session.runArrays(feeds).y.data
    : () => {
        const x = Tensor.from(bb, 'float', data, testCase.inputDims);
        try {
          const outputs = session.run({ x });
          const copy = outputs.y.toArray();
          for (const t of Object.values(outputs)) t.free();
          return copy;
        } finally {
          x.free();
        }
      };
  return {
    name: 'bb.wasm',
    endToEnd,
    into: session.runArrays && (() => session.runArrays(feeds, into).y.data),
    compute: () => {
      for (const t of Object.values(session.run({ x: resident }))) t.free();
    },
    release: () => {
      resident.free();
      session.free();
      model.free();
    },
  };
}

async function ortRuntime(testCase, data) {
  const session = await ort.InferenceSession.create(testCase.onnx(), ORT_OPTIONS);
  const run = async () => (await session.run({ x: new ort.Tensor('float32', data, testCase.inputDims) })).y.data;
  return { name: 'ORT-web', endToEnd: run, compute: undefined, release: () => session.release() };
}

function tfjsRuntime(testCase, data) {
  const net = testCase.tfjs();
  const resident = tf.tensor(data, net.shape);
  return {
    name: 'tfjs-wasm',
    endToEnd: () => {
      const x = tf.tensor(data, net.shape);
      const y = net.forward(x);
      const copy = y.dataSync();
      x.dispose();
      y.dispose();
      return copy;
    },
    compute: () => net.forward(resident).dispose(),
    release: () => {
      resident.dispose();
      net.release();
    },
  };
}

// ---- timing ----------------------------------------------------------------------------------

/** The process's CPU time in ms (user + system, every thread). */
const cpuMs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

async function callTimes(fn, calls) {
  for (let i = 0; i < calls; i++) {
    const pending = fn();
    if (pending instanceof Promise) await pending;
  }
}

/**
 * Runs fn in batches for at least ms of CPU time, pushing each batch's CPU time per call onto
 * samples. A batch is `calls` calls, chosen in the warm-up so that it takes about BATCH_MS:
 * process.cpuUsage() counts microseconds, and CPU time rather than wall time because on a
 * shared machine the wall clock measures the share of the processor the process got. Every
 * runtime here runs one thread, so the process's CPU time is the work's.
 */
async function sample(fn, ms, calls, samples) {
  let spent = 0;
  for (let n = 0; n < MIN_BATCHES || spent < ms; n++) {
    const start = cpuMs();
    await callTimes(fn, calls);
    const t = cpuMs() - start;
    spent += t;
    samples?.push(t / calls);
  }
}

/** Warms fn up for ms of CPU time and returns how many calls make a batch of about BATCH_MS. */
async function warmUp(fn, ms) {
  const start = cpuMs();
  let n = 0;
  do {
    await callTimes(fn, 1);
    n++;
  } while (cpuMs() - start < ms || n < 3);
  return Math.max(1, Math.round(BATCH_MS / ((cpuMs() - start) / n)));
}

const median = (values) => {
  const v = [...values].sort((a, b) => a - b);
  return v.length === 0 ? undefined : v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
};

// ---- the bench ------------------------------------------------------------------------------

const fmtMs = (ms) => (ms === undefined ? '—' : ms < 0.01 ? ms.toFixed(4) : ms < 1 ? ms.toFixed(3) : ms < 100 ? ms.toFixed(2) : ms.toFixed(1));
const fmtRatio = (peer, ours) => (peer === undefined || ours === undefined ? '—' : `${(peer / ours).toFixed(2)}×`);

const bb = await loadBb(packageWasm);
const rows = [];
const problems = [];
let seed = 1;
for (const testCase of CASES) {
  process.stderr.write(`${testCase.label} ...\n`);
  const data = testCase.input(seed++);
  const runtimes = [await bbRuntime(bb, testCase, data), await ortRuntime(testCase, data), tfjsRuntime(testCase, data)];
  const outputs = [];
  for (const r of runtimes) outputs.push(await r.endToEnd());
  const errors = outputs.map((o) => maxRelativeError(o, outputs[1]));
  runtimes.forEach((r, i) => {
    if (errors[i] > TOLERANCE) problems.push(`${testCase.label}: ${r.name} and ORT-web disagree (max rel err ${errors[i].toExponential(2)})`);
  });
  const samples = runtimes.map(() => ({ compute: [], endToEnd: [], into: [] }));
  const batch = [];
  for (const r of runtimes) {
    batch.push({
      endToEnd: await warmUp(r.endToEnd, WARMUP_MS / 2),
      compute: r.compute && (await warmUp(r.compute, WARMUP_MS / 2)),
      into: r.into && (await warmUp(r.into, WARMUP_MS / 2)),
    });
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const [i, r] of runtimes.entries()) {
      if (r.compute) await sample(r.compute, ROUND_MS, batch[i].compute, samples[i].compute);
      await sample(r.endToEnd, ROUND_MS, batch[i].endToEnd, samples[i].endToEnd);
      if (r.into) await sample(r.into, ROUND_MS, batch[i].into, samples[i].into);
    }
  }
  for (const r of runtimes) r.release();
  const [ours, web, tfjs] = samples.map((s) => ({ compute: median(s.compute), endToEnd: median(s.endToEnd), into: median(s.into) }));
  rows.push([
    testCase.label,
    fmtMs(ours.compute),
    fmtMs(tfjs.compute),
    fmtRatio(tfjs.compute, ours.compute),
    fmtMs(ours.endToEnd),
    fmtMs(web.endToEnd),
    fmtMs(tfjs.endToEnd),
    fmtRatio(web.endToEnd, ours.endToEnd),
    fmtRatio(tfjs.endToEnd, ours.endToEnd),
    fmtMs(ours.into),
    fmtRatio(tfjs.endToEnd, ours.into),
    fmtRatio(web.endToEnd, ours.compute),
    `${errors[0].toExponential(0)} / ${errors[2].toExponential(0)}`,
  ]);
}

const HEADER = [
  'case',
  'bb compute ms',
  'tfjs compute ms',
  'tfjs/bb compute',
  'bb e2e ms',
  'ORT-web e2e ms',
  'tfjs e2e ms',
  'ORT/bb e2e',
  'tfjs/bb e2e',
  'bb e2e into ms',
  'tfjs e2e/bb into',
  'ORT e2e/bb compute',
  'err bb / tfjs',
];
console.log(`| ${HEADER.join(' | ')} |`);
console.log(`|---|${HEADER.slice(1).map(() => '---:').join('|')}|`);
for (const row of rows) console.log(`| ${row.join(' | ')} |`);
console.log();
console.log(
  'ms: CPU time per call, the median over batches of calls in alternating rounds. compute: the op/network on inputs already in the runtime\n' +
    '(onnxruntime-web cannot keep inputs in its module: its only time is end to end). e2e: Float32Array in, Float32Array out\n' +
    '(bb: CpuSession.runArrays, or Tensor.from/run/toArray/free in a package without it); into: runArrays into the caller\'s array.\n' +
    'ratios: peer time over bb time (above 1: bb is faster). err: max |x − ORT-web| / max |ORT-web| of bb and tfjs outputs.',
);
console.log(
  `versions: bytesandbrains ${bb.version} (${bb.simd} SIMD build), onnxruntime-web ${ort.env.versions.web} (wasm, numThreads ${ort.env.wasm.numThreads}, simd ${ort.env.wasm.simd}), ` +
    `tfjs-core ${tf.version_core} (backend ${tf.getBackend()}, threads ${tfwasm.getThreadsCount()}), opset ${OPSET}`,
);
console.log(
  `machine: ${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} cores, load average ${loadavg()[0].toFixed(2)} at the end, Node ${process.version}; ` +
    `${ROUNDS} rounds of ${ROUND_MS} ms of CPU time per runtime and case, batches of ~${BATCH_MS} ms${QUICK ? ', --quick' : ''}${tuned ? '' : ', glibc malloc as started'}`,
);
for (const problem of problems) console.log(`note: ${problem}`);
if (problems.length > 0) process.exitCode = 1;
