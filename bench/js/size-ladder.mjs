// Where bb.wasm's one-thread Sigmoid, Softmax, LogSoftmax or MatMul stands against tfjs-wasm's (and,
// with --ort, onnxruntime-web's) as the tensor grows: a fixed cost per run shows as a ratio
// that falls toward small sizes, a per-element one as a ratio that stays flat. In each of
// ROUNDS rounds every runtime runs a batch of calls in turn (bb's builds first, the peers
// last), so a round's ratios compare calls made moments apart under the same machine load;
// the medians over rounds are printed (CPU µs per call).
//
// compute (the default), as infer-vs-peers.mjs's compute column: CpuSession.run on a
// resident Tensor (outputs freed) against tf.sigmoid / tf.softmax / tf.logSoftmax on a
// resident tf.Tensor (disposed). MatMul: x [rows, cols] times a constant [cols, cols] (an
// initializer of the model; a resident tf.Tensor for tfjs).
// --e2e: a Float32Array in, a Float32Array out, as an application calls each package:
// bb: CpuSession.runArrays (a new output array), and "into" the same with the caller's
// output array (runArrays's `into`); a package without runArrays: Tensor.from, run,
// toArray, free. tfjs: tf.tensor, the op, dataSync, dispose. onnxruntime-web: run() on an
// ort.Tensor over the caller's array, the output's .data (its only way; async). Each
// runtime's output is checked against tfjs's first (max |difference| over max |tfjs| ≤ 1e-4).
//
//   cd bench/js && npm ci --ignore-scripts          # once
//   bash scripts/build-wasm.sh && (cd js && npm run build)
//   node bench/js/size-ladder.mjs [Sigmoid|Softmax|LogSoftmax|MatMul] [--e2e] [--ort]
//     [--sizes 1x4096,16x1000,64x1000,1024x1024] [--rounds 200]
//     [--wasm a.wasm [--wasm b.wasm ...]]       (several builds of the module, this package)
//     [--package [label=]old/js [--package new/js ...]] (several packages: dist/index.js with wasm/bb.wasm)
//     [--no-malloc-tuning]
// With --e2e the script re-runs itself with glibc's allocator tuned, as infer-vs-peers.mjs does
// (common.mjs, rerunWithTunedMalloc): freed multi-KiB output arrays are then reused rather
// than mmap()ed afresh, for every runtime alike.
import { createRequire } from 'node:module';
import { cpus, loadavg } from 'node:os';
import { dirname } from 'node:path';
import { pathToFileURL } from 'node:url';
import { defaultWasm, packageDist, randomFloats, requireBuilt, rerunWithTunedMalloc } from './common.mjs';

const tuned = process.argv.includes('--e2e') && rerunWithTunedMalloc(import.meta.url);
const args = process.argv.slice(2).filter((a) => a !== '--no-malloc-tuning');
const take = (flag) => {
  const values = [];
  for (let at = args.indexOf(flag); at >= 0; at = args.indexOf(flag)) values.push(args.splice(at, 2)[1]);
  return values;
};
const flag = (name) => {
  const at = args.indexOf(name);
  if (at >= 0) args.splice(at, 1);
  return at >= 0;
};
const builds = [
  ...take('--wasm').map((wasm) => ({ label: wasm.split('/').pop(), dist: packageDist, wasm })),
  ...take('--package').map((given) => {
    const [label, dir] = given.includes('=') ? given.split('=') : [given, given];
    return { label, dist: `${dir}/dist/index.js`, wasm: `${dir}/wasm/bb.wasm` };
  }),
];
if (builds.length === 0) builds.push({ label: 'bb.wasm', dist: packageDist, wasm: defaultWasm });
const sizes = (take('--sizes')[0] ?? '1x4096,16x1000,64x1000,256x1024,1024x1024').split(',').map((s) => s.split('x').map(Number));
const ROUNDS = Number(take('--rounds')[0] ?? 200);
const E2E = flag('--e2e');
const ORT = flag('--ort');
const op = args[0] ?? 'Sigmoid';
if (!['Sigmoid', 'Softmax', 'LogSoftmax', 'MatMul'].includes(op)) throw new Error(`op must be Sigmoid, Softmax, LogSoftmax or MatMul, not ${op}`);
if (ORT && !E2E) throw new Error('--ort needs --e2e: onnxruntime-web keeps no tensor in its module, so its only time is end to end');
for (const dims of sizes) {
  if (dims.length !== 2 || !dims.every((d) => Number.isInteger(d) && d > 0)) throw new Error(`bad size in --sizes: ${dims.join('x')}`);
}
builds.forEach((b) => requireBuilt(b.wasm));

const require = createRequire(import.meta.url);
const tf = await import('@tensorflow/tfjs-core');
const tfwasm = await import('@tensorflow/tfjs-backend-wasm');
tfwasm.setWasmPaths(`${dirname(require.resolve('@tensorflow/tfjs-backend-wasm'))}/`);
tfwasm.setThreadsCount(1);
await tf.setBackend('wasm');
await tf.ready();
let ort;
if (ORT) {
  ort = await import('onnxruntime-web');
  ort.env.wasm.numThreads = 1;
  ort.env.wasm.simd = true;
  ort.env.logLevel = 'error';
}
for (const b of builds) {
  b.pkg = await import(pathToFileURL(b.dist).href);
  b.bb = await b.pkg.loadBb(b.wasm);
}

const WARMUP_MS = 1500;
const median = (a) => [...a].sort((p, q) => p - q)[a.length >> 1];
const cpuMicros = async (fn, calls) => {
  const start = process.cpuUsage();
  for (let i = 0; i < calls; i++) {
    const pending = fn();
    if (pending instanceof Promise) await pending;
  }
  const spent = process.cpuUsage(start);
  return (spent.user + spent.system) / calls;
};
/** MatMul's constant right operand, [cols, cols], for a size [rows, cols]: an initializer for bb and ORT, a resident tf.Tensor for tfjs. */
const weightsOf = (dims) => randomFloats(dims[1] * dims[1], 11, -1, 1);
let tfWeights;
const tfOp = {
  Sigmoid: (x) => tf.sigmoid(x),
  Softmax: (x) => tf.softmax(x, -1),
  LogSoftmax: (x) => tf.logSoftmax(x, -1),
  MatMul: (x) => tf.matMul(x, tfWeights),
}[op];
const onnxOf = (encodeOnnxModel, dims) =>
  encodeOnnxModel({
    opset: 17,
    nodes: [{ opType: op, inputs: op === 'MatMul' ? ['x', 'w'] : ['x'], outputs: ['y'], attributes: op === 'Sigmoid' || op === 'MatMul' ? {} : { axis: { int: -1 } } }],
    inputs: [{ name: 'x', dtype: 'float', dims }],
    outputs: [{ name: 'y', dtype: 'float', dims }],
    initializers: op === 'MatMul' ? [{ name: 'w', dtype: 'float', dims: [dims[1], dims[1]], data: weightsOf(dims) }] : [],
  });

/** The runtimes timed on one size: { label, run, release } each; bb's builds first. */
async function runtimesFor(dims, data) {
  const runtimes = [];
  for (const { label, pkg, bb } of builds) {
    const { CpuSession, OnnxModel, Tensor, encodeOnnxModel } = pkg;
    const model = OnnxModel.decode(bb, onnxOf(encodeOnnxModel, dims));
    const session = new CpuSession(bb, model);
    const release = [session, model];
    if (!E2E) {
      const x = Tensor.from(bb, 'float', data, dims);
      release.push(x);
      runtimes.push({ label, run: () => { for (const t of Object.values(session.run({ x }))) t.free(); } });
    } else if (typeof session.runArrays === 'function') {
      const feeds = { x: { dtype: 'float', data, dims } };
      const into = { y: new Float32Array(data.length) };
      runtimes.push({ label: `${label} runArrays`, run: () => session.runArrays(feeds).y.data });
      runtimes.push({ label: `${label} runArrays into`, run: () => session.runArrays(feeds, into).y.data });
    } else {
      runtimes.push({
        label: `${label} from/run/toArray`,
        run: () => {
          const x = Tensor.from(bb, 'float', data, dims);
          const outputs = session.run({ x });
          const copy = outputs.y.toArray();
          for (const t of [x, ...Object.values(outputs)]) t.free();
          return copy;
        },
      });
    }
    runtimes[runtimes.length - 1].release = () => release.forEach((o) => o.free());
  }
  const bbCount = runtimes.length;
  if (E2E) {
    runtimes.push({
      label: 'tfjs',
      run: () => {
        const x = tf.tensor(data, dims);
        const y = tfOp(x);
        const copy = y.dataSync();
        x.dispose();
        y.dispose();
        return copy;
      },
    });
  } else {
    const tx = tf.tensor(data, dims);
    runtimes.push({ label: 'tfjs', run: () => tfOp(tx).dispose(), release: () => tx.dispose() });
  }
  if (ORT) {
    const session = await ort.InferenceSession.create(onnxOf(builds[0].pkg.encodeOnnxModel, dims), { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
    runtimes.push({ label: 'ORT-web', run: async () => (await session.run({ x: new ort.Tensor('float32', data, dims) })).y.data, release: () => session.release() });
  }
  return { runtimes, bbCount };
}

let header = false;
for (const dims of sizes) {
  const n = dims[0] * dims[1];
  const data = randomFloats(n, 7, -8, 8);
  if (op === 'MatMul') tfWeights = tf.tensor(weightsOf(dims), [dims[1], dims[1]]);
  const { runtimes, bbCount } = await runtimesFor(dims, data);
  const peers = runtimes.slice(bbCount);
  if (!header) {
    header = true;
    const ratioHeads = peers.flatMap((p) => runtimes.slice(0, bbCount).map((r) => `${p.label}/${r.label}`));
    console.log(`| ${op}${E2E ? ' e2e' : ''} | ${runtimes.map((r) => `${r.label} µs`).join(' | ')} | ${ratioHeads.join(' | ')} |`);
    console.log(`|---|${runtimes.map(() => '---:|').join('')}${ratioHeads.map(() => '---:|').join('')}`);
  }
  if (E2E) {
    // every runtime's output against tfjs's: max |difference| over max |tfjs|
    const reference = await runtimes[bbCount].run();
    const scale = reference.reduce((m, v) => Math.max(m, Math.abs(v)), 0) || 1;
    for (const r of runtimes) {
      const out = await r.run();
      const error = out.length === reference.length ? out.reduce((m, v, i) => Math.max(m, Math.abs(v - reference[i])), 0) / scale : Infinity;
      if (!(error <= 1e-4)) throw new Error(`[${dims}]: ${r.label} and tfjs disagree (max rel err ${error})`);
    }
  }
  const calls = Math.max(2, Math.round(2e5 / n));
  for (const start = performance.now(); performance.now() - start < WARMUP_MS; ) for (const r of runtimes) await cpuMicros(r.run, 1);
  const times = runtimes.map(() => []);
  const ratios = peers.map(() => runtimes.slice(0, bbCount).map(() => []));
  for (let round = 0; round < ROUNDS; round++) {
    const t = [];
    for (const r of runtimes) t.push(await cpuMicros(r.run, calls));
    t.forEach((v, i) => times[i].push(v));
    peers.forEach((_, p) => ratios[p].forEach((list, i) => list.push(t[bbCount + p] / t[i])));
  }
  const cells = [...times.map((t) => median(t).toFixed(1)), ...ratios.flat().map((r) => `${median(r).toFixed(2)}×`)];
  console.log(`| [${dims}] | ${cells.join(' | ')} |`);
  for (const r of runtimes) r.release?.();
  tfWeights?.dispose();
}
console.log(
  `\n${cpus()[0]?.model ?? '?'}, ${cpus().length} cores, load average ${loadavg()[0].toFixed(2)} at the end, ${ROUNDS} rounds` +
    `${E2E ? `, end to end${tuned ? '' : ', glibc malloc as started'}` : ', compute'}`,
);
