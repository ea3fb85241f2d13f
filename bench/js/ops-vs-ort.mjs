// One-node ONNX models on bb.wasm's CpuSession against onnxruntime-web's wasm backend
// (single thread, SIMD128) and onnxruntime-node's native CPU provider (single thread),
// with identical random inputs in one Node process: outputs are checked to agree, then
// each runtime is timed (warm-up, then the median of several runs).
//
//   cd bench/js && npm ci --ignore-scripts          # once
//   bash scripts/build-wasm.sh && (cd js && npm run build)
//   node bench/js/ops-vs-ort.mjs [--quick] [--wasm js/wasm/bb-relaxed.wasm]
//   (bb-relaxed.wasm needs `node --experimental-wasm-relaxed-simd` in Node 20)
//
// Times are end to end from JavaScript arrays to JavaScript arrays, as ORT's run()
// works: for bb that is Tensor.from per input, run, toArray per output, free. The
// "bb run" column is the run alone on tensors already in wasm memory.
//
// Every run of every runtime allocates its output as a new JavaScript array. glibc
// serves allocations of 128 KiB and more with fresh mmap()ed pages and unmaps them on
// free, so each 4 MiB output pays for page faults: about 20 ms a time on sandboxed
// machines, far more than the op itself. The script therefore re-runs itself once with
// glibc's mmap and trim thresholds raised, which lets freed memory be reused; all
// measuring still happens in that one process. --no-malloc-tuning measures as started.
import { createRequire } from 'node:module';
import { cpus, loadavg } from 'node:os';
import { packageDist, randomFloats, requireBuilt, rerunWithTunedMalloc, wasmArgument } from './common.mjs';

const tuned = rerunWithTunedMalloc(import.meta.url);

const require = createRequire(import.meta.url);
const packageWasm = wasmArgument();
requireBuilt(packageWasm);
let ortWeb;
let ortNode;
try {
  ortWeb = await import('onnxruntime-web');
  ortNode = require('onnxruntime-node');
} catch (error) {
  throw new Error(`onnxruntime is not installed: run \`npm ci --ignore-scripts\` in bench/js (${error.message})`);
}
const { BbError, BbErrorCode, CpuSession, OnnxModel, Tensor, encodeOnnxModel, loadBb } = await import(packageDist);

const QUICK = process.argv.includes('--quick');
const WARMUP_MS = QUICK ? 30 : 200;
const MEASURE_MS = QUICK ? 150 : 1000;
const MIN_RUNS = QUICK ? 3 : 7;
const MAX_RUNS = 200;
/** Agreement required of float32 outputs: max |difference| over max |reference|. */
const TOLERANCE = 1e-4;
const OPSET = 17;

ortWeb.env.wasm.numThreads = 1;
ortWeb.env.wasm.simd = true;
ortWeb.env.logLevel = 'error';
const ORT_WEB_OPTIONS = { executionProviders: ['wasm'], graphOptimizationLevel: 'all' };
const ORT_NODE_OPTIONS = {
  executionProviders: ['cpu'],
  intraOpNumThreads: 1,
  interOpNumThreads: 1,
  executionMode: 'sequential',
  graphOptimizationLevel: 'all',
};

// ---- the cases ----------------------------------------------------------------------

const f32 = (name, dims) => ({ name, dtype: 'float', dims });

function matmul(label, m, k, n) {
  return {
    label,
    unit: 'flop',
    work: 2 * m * k * n,
    spec: { nodes: [{ opType: 'MatMul', inputs: ['a', 'b'], outputs: ['y'] }], inputs: [f32('a', [m, k]), f32('b', [k, n])], outputs: [f32('y', [m, n])] },
  };
}

const CASES = [
  matmul('MatMul 128x128 · 128x128', 128, 128, 128),
  matmul('MatMul 256x256 · 256x256', 256, 256, 256),
  matmul('MatMul 512x512 · 512x512', 512, 512, 512),
  matmul('MatMul 1024x1024 · 1024x1024', 1024, 1024, 1024),
  matmul('MatMul 32x784 · 784x128', 32, 784, 128),
  {
    label: 'Gemm 256x256x256 + bias[256]',
    unit: 'flop',
    work: 2 * 256 ** 3 + 256 * 256,
    spec: {
      nodes: [{ opType: 'Gemm', inputs: ['a', 'b', 'c'], outputs: ['y'] }],
      inputs: [f32('a', [256, 256]), f32('b', [256, 256]), f32('c', [256])],
      outputs: [f32('y', [256, 256])],
    },
  },
  {
    label: 'Conv 3x3 1x8x28x28 -> 16ch, pad 1',
    unit: 'flop',
    work: 2 * 16 * 28 * 28 * 8 * 9 + 16 * 28 * 28,
    spec: {
      nodes: [{ opType: 'Conv', inputs: ['x', 'w', 'b'], outputs: ['y'], attributes: { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] } } }],
      inputs: [f32('x', [1, 8, 28, 28]), f32('w', [16, 8, 3, 3]), f32('b', [16])],
      outputs: [f32('y', [1, 16, 28, 28])],
    },
  },
  {
    label: 'Add [1024,1024] + [1024]',
    unit: 'byte',
    work: 4 * (2 * 1024 * 1024 + 1024),
    spec: { nodes: [{ opType: 'Add', inputs: ['a', 'b'], outputs: ['y'] }], inputs: [f32('a', [1024, 1024]), f32('b', [1024])], outputs: [f32('y', [1024, 1024])] },
  },
  {
    label: 'Softmax [1024,1024] axis -1',
    unit: 'byte',
    work: 4 * 2 * 1024 * 1024,
    spec: { nodes: [{ opType: 'Softmax', inputs: ['x'], outputs: ['y'], attributes: { axis: { int: -1 } } }], inputs: [f32('x', [1024, 1024])], outputs: [f32('y', [1024, 1024])] },
  },
  {
    label: 'LogSoftmax [1024,1024] axis -1',
    unit: 'byte',
    work: 4 * 2 * 1024 * 1024,
    spec: { nodes: [{ opType: 'LogSoftmax', inputs: ['x'], outputs: ['y'], attributes: { axis: { int: -1 } } }], inputs: [f32('x', [1024, 1024])], outputs: [f32('y', [1024, 1024])] },
  },
  {
    label: 'Softmax [32,10] axis -1 (a batch of logits)',
    unit: 'byte',
    work: 4 * 2 * 32 * 10,
    spec: { nodes: [{ opType: 'Softmax', inputs: ['x'], outputs: ['y'], attributes: { axis: { int: -1 } } }], inputs: [f32('x', [32, 10])], outputs: [f32('y', [32, 10])] },
  },
  {
    label: 'MaxPool 2x2/2 16x8x28x28',
    unit: 'byte',
    work: 4 * (16 * 8 * 28 * 28 + 16 * 8 * 14 * 14),
    spec: {
      nodes: [{ opType: 'MaxPool', inputs: ['x'], outputs: ['y'], attributes: { kernel_shape: { ints: [2, 2] }, strides: { ints: [2, 2] } } }],
      inputs: [f32('x', [16, 8, 28, 28])],
      outputs: [f32('y', [16, 8, 14, 14])],
    },
  },
  {
    label: 'MaxPool 3x3/1 pad 1 16x8x28x28',
    unit: 'byte',
    work: 4 * 2 * 16 * 8 * 28 * 28,
    spec: {
      nodes: [{ opType: 'MaxPool', inputs: ['x'], outputs: ['y'], attributes: { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] } } }],
      inputs: [f32('x', [16, 8, 28, 28])],
      outputs: [f32('y', [16, 8, 28, 28])],
    },
  },
  {
    label: 'AveragePool 2x2/2 16x8x28x28',
    unit: 'byte',
    work: 4 * (16 * 8 * 28 * 28 + 16 * 8 * 14 * 14),
    spec: {
      nodes: [{ opType: 'AveragePool', inputs: ['x'], outputs: ['y'], attributes: { kernel_shape: { ints: [2, 2] }, strides: { ints: [2, 2] } } }],
      inputs: [f32('x', [16, 8, 28, 28])],
      outputs: [f32('y', [16, 8, 14, 14])],
    },
  },
  {
    label: 'ReduceSum [1024,1024] axes [1]',
    unit: 'byte',
    work: 4 * (1024 * 1024 + 1024),
    spec: {
      nodes: [{ opType: 'ReduceSum', inputs: ['x', 'axes'], outputs: ['y'], attributes: { keepdims: { int: 0 } } }],
      inputs: [f32('x', [1024, 1024])],
      outputs: [f32('y', [1024])],
      initializers: [{ name: 'axes', dtype: 'int64', dims: [1], data: BigInt64Array.of(1n) }],
    },
  },
];

// ---- inputs, agreement, timing ----------------------------------------------------------

/** Max |actual − reference| over max |reference|: agreement that tiny reference elements cannot blow up. */
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

/** Median milliseconds of one call of `run` (which may return a promise), after a warm-up. */
async function medianMs(run) {
  const once = async () => {
    const start = performance.now();
    const pending = run();
    if (pending instanceof Promise) await pending;
    return performance.now() - start;
  };
  let warm = 0;
  for (let i = 0; i < 3 || warm < WARMUP_MS; i++) warm += await once();
  const estimate = warm / 3;
  const runs = Math.min(MAX_RUNS, Math.max(MIN_RUNS, Math.floor(MEASURE_MS / Math.max(estimate, 1e-3))));
  const times = [];
  for (let i = 0; i < runs; i++) times.push(await once());
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}

// ---- the runtimes -----------------------------------------------------------------------

async function ortRunner(ort, options, bytes, feeds, outputName) {
  const session = await ort.InferenceSession.create(bytes, options);
  const tensors = Object.fromEntries(Object.entries(feeds).map(([name, { data, dims }]) => [name, new ort.Tensor('float32', data, dims)]));
  const run = async () => (await session.run(tensors))[outputName].data;
  return { output: await run(), ms: await medianMs(run), release: () => session.release() };
}

/** bb's outcome: timings and output, or why it could not run the case. */
function bbRunner(bb, bytes, feeds, outputName) {
  const model = OnnxModel.decode(bb, bytes);
  let session;
  try {
    session = new CpuSession(bb, model);
  } catch (error) {
    model.free();
    if (error instanceof BbError && error.code === BbErrorCode.Unsupported) return { unsupported: error.message };
    throw error;
  }
  const resident = Object.fromEntries(Object.entries(feeds).map(([name, { data, dims }]) => [name, Tensor.from(bb, 'float', data, dims)]));
  const endToEnd = () => {
    const inputs = Object.fromEntries(Object.entries(feeds).map(([name, { data, dims }]) => [name, Tensor.from(bb, 'float', data, dims)]));
    try {
      const outputs = session.run(inputs);
      const copy = outputs[outputName].toArray();
      for (const tensor of Object.values(outputs)) tensor.free();
      return copy;
    } finally {
      for (const tensor of Object.values(inputs)) tensor.free();
    }
  };
  const runOnly = () => {
    for (const tensor of Object.values(session.run(resident))) tensor.free();
  };
  return {
    output: endToEnd(),
    measure: async () => ({ ms: await medianMs(endToEnd), runMs: await medianMs(runOnly) }),
    release: () => {
      for (const tensor of Object.values(resident)) tensor.free();
      session.free();
      model.free();
    },
  };
}

// ---- the table ----------------------------------------------------------------------------

/** Columns padded to their widest cell: the first left-aligned, the rest right-aligned. */
function formatTable(header, rows) {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)));
  const line = (cells) => cells.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]) : cell.padStart(widths[column]))).join(' | ');
  return [line(header), widths.map((width) => '-'.repeat(width)).join('-|-'), ...rows.map(line)].join('\n');
}

// ---- the bench ----------------------------------------------------------------------------

function rate(unit, work, ms) {
  if (ms === undefined) return '';
  const perSecond = work / (ms / 1000) / 1e9;
  return `${perSecond.toFixed(perSecond < 10 ? 2 : 1)} ${unit === 'flop' ? 'GFLOP/s' : 'GB/s'}`;
}

const fmtMs = (ms) => (ms === undefined ? '' : ms < 1 ? ms.toFixed(3) : ms < 100 ? ms.toFixed(2) : ms.toFixed(1));
const fmtErr = (err) => (err === undefined ? '' : `${err.toExponential(1)}${err <= TOLERANCE ? '' : ' MISMATCH'}`);

const bb = await loadBb(packageWasm);
const rows = [];
const problems = [];
let seed = 1;
for (const testCase of CASES) {
  const bytes = encodeOnnxModel({ opset: OPSET, ...testCase.spec });
  const outputName = testCase.spec.outputs[0].name;
  const feeds = Object.fromEntries(
    testCase.spec.inputs.map(({ name, dims }) => [name, { dims, data: randomFloats(dims.reduce((a, b) => a * b, 1), seed++) }]),
  );
  process.stderr.write(`${testCase.label} ...\n`);
  const web = await ortRunner(ortWeb, ORT_WEB_OPTIONS, bytes, feeds, outputName);
  const native = await ortRunner(ortNode, ORT_NODE_OPTIONS, bytes, feeds, outputName);
  let ours;
  let bbCells;
  try {
    const runner = bbRunner(bb, bytes, feeds, outputName);
    if (runner.unsupported !== undefined) {
      bbCells = { status: 'unsupported by bb (yet)' };
      problems.push(`${testCase.label}: ${runner.unsupported}`);
    } else {
      const error = maxRelativeError(runner.output, web.output);
      ours = { ...(await runner.measure()), error };
      runner.release();
      if (error > TOLERANCE) problems.push(`${testCase.label}: bb.wasm and ORT-web disagree (max rel err ${error.toExponential(2)})`);
    }
  } catch (error) {
    bbCells = { status: 'bb failed' };
    problems.push(`${testCase.label}: bb failed: ${error.message}`);
  }
  const nodeError = maxRelativeError(native.output, web.output);
  if (nodeError > TOLERANCE) problems.push(`${testCase.label}: ORT-node and ORT-web disagree (max rel err ${nodeError.toExponential(2)})`);
  web.release();
  native.release();
  rows.push([
    testCase.label,
    fmtMs(web.ms),
    bbCells?.status ?? fmtMs(ours.ms),
    ours ? `${(web.ms / ours.ms).toFixed(2)}x` : '',
    rate(testCase.unit, testCase.work, web.ms),
    ours ? rate(testCase.unit, testCase.work, ours.ms) : '',
    ours ? fmtMs(ours.runMs) : '',
    ours ? rate(testCase.unit, testCase.work, ours.runMs) : '',
    fmtErr(ours?.error),
    fmtMs(native.ms),
    rate(testCase.unit, testCase.work, native.ms),
    fmtErr(nodeError),
  ]);
}

const HEADER = [
  'case',
  'ORT-web ms',
  'bb.wasm ms',
  'bb/ORT-web',
  'ORT-web rate',
  'bb.wasm rate',
  'bb run ms',
  'bb run rate',
  'bb err',
  'ORT-node ms',
  'ORT-node rate',
  'node err',
];
console.log(formatTable(HEADER, rows));
console.log();
console.log(
  'ms: median wall time of one run, JS arrays in to JS arrays out. bb/ORT-web: ORT-web time over bb.wasm time (above 1: bb is faster).\n' +
    'bb run: CpuSession.run alone on tensors already in wasm memory. rate: GFLOP/s for MatMul/Gemm/Conv (2·m·n·k, bias adds m·n),\n' +
    'GB/s for the others (bytes of inputs read plus output written). err: max |x − ORT-web| / max |ORT-web|.',
);
console.log(`bb.wasm memory high-water after the runs: ${(bb.exports.memory.buffer.byteLength / 2 ** 20).toFixed(1)} MiB (memory.buffer.byteLength)`);
console.log(
  `versions: bytesandbrains ${bb.version} (ABI ${bb.abiVersion}, ${bb.simd} SIMD build), onnxruntime-web ${ortWeb.env.versions.web} (wasm, numThreads ${ortWeb.env.wasm.numThreads}, simd ${ortWeb.env.wasm.simd}), ` +
    `onnxruntime-node ${ortNode.env.versions.node} (cpu, 1 thread), opset ${OPSET}`,
);
console.log(
  `machine: ${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} cores, load average ${loadavg()[0].toFixed(2)} at the end, Node ${process.version}; ` +
    `${tuned ? 'glibc malloc thresholds raised' : 'glibc malloc as started (--no-malloc-tuning)'}${QUICK ? ', --quick' : ''}`,
);
for (const problem of problems) console.log(`note: ${problem}`);
