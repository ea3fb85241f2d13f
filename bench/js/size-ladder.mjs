// Where bb.wasm's one-thread Sigmoid or Softmax stands against tfjs-wasm's as the tensor
// grows: a fixed cost per run shows as a ratio that falls toward small sizes, a per-element
// one as a ratio that stays flat. In each of ROUNDS rounds every runtime runs a batch of
// calls in turn (bb.wasm builds first, tfjs last), so a round's ratios compare calls made
// moments apart under the same machine load; the medians over rounds are printed.
// compute only, as infer-vs-peers.mjs's compute column: CpuSession.run on a resident
// Tensor (outputs freed) against tf.sigmoid / tf.softmax on a resident tf.Tensor (disposed).
//
//   cd bench/js && npm ci --ignore-scripts          # once
//   bash scripts/build-wasm.sh && (cd js && npm run build)
//   node bench/js/size-ladder.mjs [Sigmoid|Softmax] [--sizes 1x4096,16x1000,64x1000,1024x1024]
//     [--wasm a.wasm [--wasm b.wasm ...]]    (several builds side by side)
import { createRequire } from 'node:module';
import { cpus, loadavg } from 'node:os';
import { dirname } from 'node:path';
import { defaultWasm, packageDist, randomFloats, requireBuilt } from './common.mjs';

const args = process.argv.slice(2);
const wasms = [];
for (let at = args.indexOf('--wasm'); at >= 0; at = args.indexOf('--wasm')) wasms.push(args.splice(at, 2)[1]);
if (wasms.length === 0) wasms.push(defaultWasm);
const sizesAt = args.indexOf('--sizes');
const sizes = (sizesAt >= 0 ? args.splice(sizesAt, 2)[1] : '1x4096,16x1000,64x1000,256x1024,1024x1024')
  .split(',')
  .map((s) => s.split('x').map(Number));
const op = args[0] ?? 'Sigmoid';
if (op !== 'Sigmoid' && op !== 'Softmax') throw new Error(`op must be Sigmoid or Softmax, not ${op}`);
for (const dims of sizes) {
  if (dims.length !== 2 || !dims.every((d) => Number.isInteger(d) && d > 0)) throw new Error(`bad size in --sizes: ${dims.join('x')}`);
}
wasms.forEach((w) => requireBuilt(w));

const require = createRequire(import.meta.url);
const tf = await import('@tensorflow/tfjs-core');
const tfwasm = await import('@tensorflow/tfjs-backend-wasm');
tfwasm.setWasmPaths(`${dirname(require.resolve('@tensorflow/tfjs-backend-wasm'))}/`);
tfwasm.setThreadsCount(1);
await tf.setBackend('wasm');
await tf.ready();
const { CpuSession, OnnxModel, Tensor, encodeOnnxModel, loadBb } = await import(packageDist);
const bbs = [];
for (const w of wasms) bbs.push(await loadBb(w));

const ROUNDS = 200;
const WARMUP_MS = 1500;
const median = (a) => [...a].sort((p, q) => p - q)[a.length >> 1];
const cpuMicros = (fn, calls) => {
  const start = process.cpuUsage();
  for (let i = 0; i < calls; i++) fn();
  const spent = process.cpuUsage(start);
  return (spent.user + spent.system) / calls;
};

console.log(`| ${op} | ${wasms.map((w) => `bb µs (${w.split('/').pop()})`).join(' | ')} | tfjs µs | ${wasms.map(() => 'tfjs/bb').join(' | ')} |`);
console.log(`|---|${wasms.map(() => '---:|').join('')}---:|${wasms.map(() => '---:|').join('')}`);
for (const dims of sizes) {
  const n = dims[0] * dims[1];
  const data = randomFloats(n, 7, -8, 8);
  const owned = [];
  const runs = bbs.map((bb) => {
    const model = OnnxModel.decode(
      bb,
      encodeOnnxModel({
        opset: 17,
        nodes: [{ opType: op, inputs: ['x'], outputs: ['y'], attributes: op === 'Softmax' ? { axis: { int: -1 } } : {} }],
        inputs: [{ name: 'x', dtype: 'float', dims }],
        outputs: [{ name: 'y', dtype: 'float', dims }],
      }),
    );
    const session = new CpuSession(bb, model);
    const x = Tensor.from(bb, 'float', data, dims);
    owned.push(x, session, model);
    return () => {
      for (const t of Object.values(session.run({ x }))) t.free();
    };
  });
  const tx = tf.tensor(data, dims);
  runs.push(op === 'Sigmoid' ? () => tf.sigmoid(tx).dispose() : () => tf.softmax(tx).dispose());
  const calls = Math.max(2, Math.round(2e5 / n));
  for (const start = performance.now(); performance.now() - start < WARMUP_MS; ) for (const run of runs) run();
  const times = runs.map(() => []);
  const ratios = bbs.map(() => []);
  for (let r = 0; r < ROUNDS; r++) {
    const round = runs.map((run) => cpuMicros(run, calls));
    round.forEach((t, i) => times[i].push(t));
    bbs.forEach((_, i) => ratios[i].push(round[bbs.length] / round[i]));
  }
  const cells = [...times.map((t) => median(t).toFixed(1)), ...ratios.map((r) => `${median(r).toFixed(2)}×`)];
  console.log(`| [${dims}] | ${cells.join(' | ')} |`);
  tx.dispose();
  for (const o of owned) o.free();
}
console.log(`\n${cpus()[0]?.model ?? '?'}, ${cpus().length} cores, load average ${loadavg()[0].toFixed(2)} at the end, ${ROUNDS} rounds`);
