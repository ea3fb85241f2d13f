/**
 * The shipped builds, bb.wasm and bb-relaxed.wasm (and their threaded twins bb-mt.wasm and
 * bb-mt-relaxed.wasm), and the loader's choice between them. Node 20 runs relaxed SIMD only with --experimental-wasm-relaxed-simd, so each side
 * runs in a Node of its own, started with the flag or with its negation, on the built
 * package (dist/): the loader must pick bb-relaxed.wasm exactly where the engine validates
 * relaxed SIMD and bb.wasm when told to or when it does not, and both builds must agree
 * with onnxruntime (the native CPU provider) on MatMul, Conv, a depthwise Conv and the
 * digits CNN within float tolerance; the relaxed build repeats its own bits run after run.
 * bb-mt-relaxed.wasm must give bb-relaxed.wasm's bits on 1, 2 and 3 threads.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, test } from 'vitest';

import { BbLoadError, loadBb, relaxedSimdSupported } from '../src/index.js';
import { shippedModule } from '../src/engine/loader.js';
import { packageRoot, repoRoot } from './support.js';

const relaxedPath = join(packageRoot, 'wasm', 'bb-relaxed.wasm');
const threadedRelaxedPath = join(packageRoot, 'wasm', 'bb-mt-relaxed.wasm');
const dist = pathToFileURL(join(packageRoot, 'dist', 'index.js')).href;

function relaxedBytes(): Uint8Array<ArrayBuffer> {
  if (!existsSync(relaxedPath)) {
    throw new Error(`${relaxedPath} is missing: build it with \`bash scripts/build-wasm.sh\` from ${repoRoot}`);
  }
  return new Uint8Array(readFileSync(relaxedPath));
}

/** What the child reports for one model on one build. */
interface CaseReport {
  label: string;
  /** max |bb - onnxruntime| over max |onnxruntime|, per build */
  error: Record<string, number>;
  /** the relaxed build gave the same bits on a second run */
  repeats: boolean;
  /** elements where the relaxed and baseline builds differ (0 where the machine does not fuse) */
  differing: number;
}

interface ChildReport {
  supported: boolean;
  validatesRelaxedModule: boolean;
  auto: string;
  baseline: string;
  forced?: string;
  forcedError?: string;
  cases: CaseReport[];
}

// Runs in the child: loads the package's builds as a user would and runs each model on
// them and on onnxruntime-node with the same seeded inputs.
const CHILD = `
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
const { loadBb, relaxedSimdSupported, encodeOnnxModel, OnnxModel, CpuSession, Tensor, BbLoadError } = await import(${JSON.stringify(dist)});
const ort = createRequire(${JSON.stringify(join(packageRoot, 'package.json'))})('onnxruntime-node');
const report = { supported: relaxedSimdSupported(), validatesRelaxedModule: WebAssembly.validate(readFileSync(${JSON.stringify(relaxedPath)})) };
const auto = await loadBb();
report.auto = auto.simd;
const baseline = await loadBb(undefined, { simd: 'baseline' });
report.baseline = baseline.simd;
try { report.forced = (await loadBb(undefined, { simd: 'relaxed' })).simd; }
catch (error) { report.forcedError = (error instanceof BbLoadError ? 'BbLoadError: ' : '') + error.message; }

let state = 12345;
const random = (n) => Float32Array.from({ length: n }, () => ((state = (Math.imul(state, 1103515245) + 12345) >>> 0) / 2 ** 32) * 2 - 1);
const f32 = (name, dims) => ({ name, dtype: 'float', dims });
const matmul = (m, k, n) => ({ label: \`MatMul \${m}x\${k} · \${k}x\${n}\`, dims: { a: [m, k], b: [k, n] },
  bytes: encodeOnnxModel({ opset: 17, nodes: [{ opType: 'MatMul', inputs: ['a', 'b'], outputs: ['y'] }], inputs: [f32('a', [m, k]), f32('b', [k, n])], outputs: [f32('y', [m, n])] }) });
const conv = (label, x, w, attributes) => ({ label, dims: { x, w, b: [w[0]] }, bytes: encodeOnnxModel({ opset: 17, nodes: [{ opType: 'Conv', inputs: ['x', 'w', 'b'], outputs: ['y'], attributes }],
  inputs: [f32('x', x), f32('w', w), f32('b', [w[0]])], outputs: [f32('y', [x[0], w[0], x[2], x[3]])] }) });
const cases = [
  matmul(64, 200, 48),
  matmul(1, 300, 20),
  conv('Conv 3x3 1x8x20x20 -> 16', [1, 8, 20, 20], [16, 8, 3, 3], { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] } }),
  conv('depthwise Conv 3x3 1x12x19x19', [1, 12, 19, 19], [12, 1, 3, 3], { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] }, group: { int: 12 } }),
  { label: 'digits CNN, batch 16', dims: { pixels: [16, 1, 8, 8] }, bytes: readFileSync(${JSON.stringify(join(packageRoot, 'models', 'digits_cnn.onnx'))}) },
];

function runBb(bb, bytes, feeds) {
  const model = OnnxModel.decode(bb, bytes);
  const session = new CpuSession(bb, model);
  const inputs = Object.fromEntries(Object.entries(feeds).map(([name, { data, dims }]) => [name, Tensor.from(bb, 'float', data, dims)]));
  const outputs = session.run(inputs);
  const out = Object.values(outputs)[0].toArray();
  for (const t of [...Object.values(outputs), ...Object.values(inputs)]) t.free();
  session.free();
  model.free();
  return Float32Array.from(out);
}

report.cases = [];
for (const { label, bytes, dims } of cases) {
  const session = await ort.InferenceSession.create(bytes, { executionProviders: ['cpu'], intraOpNumThreads: 1 });
  const feeds = {};
  for (const name of session.inputNames) feeds[name] = { dims: dims[name], data: random(dims[name].reduce((a, b) => a * b, 1)) };
  const reference = Object.values(await session.run(Object.fromEntries(Object.entries(feeds).map(([n, { data, dims }]) => [n, new ort.Tensor('float32', data, dims)]))))[0].data;
  const scale = Math.max(...reference.map(Math.abs));
  const errorOf = (got) => Math.max(...got.map((v, i) => Math.abs(v - reference[i]))) / scale;
  const ours = runBb(auto, bytes, feeds), again = runBb(auto, bytes, feeds), base = runBb(baseline, bytes, feeds);
  report.cases.push({ label, error: { [auto.simd]: errorOf(ours), baseline: errorOf(base) },
    repeats: ours.every((v, i) => Object.is(v, again[i])), differing: ours.filter((v, i) => !Object.is(v, base[i])).length });
}
console.log(JSON.stringify(report));
`;

/** What the threaded child reports. */
interface ThreadedReport {
  validatesThreadedRelaxed: boolean;
  /** simd of loadBb({ threads: 3 }), and of the same with simd: 'baseline' */
  auto: string;
  baseline: string;
  forcedError?: string;
  /** per case: its label, and whether 1, 2 and 3 threads gave the one-thread relaxed build's bits */
  cases?: { label: string; sameBits: boolean[]; differsFromBaseline: number }[];
  tasksOnWorkers?: number;
}

// Runs in the child: the threaded modules as loadBb({ threads }) picks them; on the relaxed
// one each case at 1, 2 and 3 threads against bb-relaxed.wasm (loadBb() on one thread).
const THREADED_CHILD = `
import { readFileSync } from 'node:fs';
const { loadBb, relaxedSimdSupported, encodeOnnxModel, OnnxModel, CpuSession, Tensor, BbLoadError } = await import(${JSON.stringify(dist)});
const report = { validatesThreadedRelaxed: WebAssembly.validate(readFileSync(${JSON.stringify(threadedRelaxedPath)})) };
const threaded = await loadBb({ threads: 3 });
const baseline = await loadBb({ threads: 3, simd: 'baseline' });
report.auto = threaded.simd;
report.baseline = baseline.simd;
if (!relaxedSimdSupported()) {
  try { await loadBb({ threads: 2, simd: 'relaxed' }); } catch (error) { report.forcedError = (error instanceof BbLoadError ? 'BbLoadError: ' : '') + error.message; }
} else {
  const single = await loadBb();
  let state = 777;
  const random = (n) => Float32Array.from({ length: n }, () => ((state = (Math.imul(state, 1103515245) + 12345) >>> 0) / 2 ** 32) * 2 - 1);
  const f32 = (name, dims) => ({ name, dtype: 'float', dims });
  const cases = [
    { label: 'MatMul 192x256 · 256x160', dims: { a: [192, 256], b: [256, 160] }, bytes: encodeOnnxModel({ opset: 17, nodes: [{ opType: 'MatMul', inputs: ['a', 'b'], outputs: ['y'] }],
      inputs: [f32('a', [192, 256]), f32('b', [256, 160])], outputs: [f32('y', [192, 160])] }) },
    { label: 'Conv 3x3 2x16x24x24 -> 32', dims: { x: [2, 16, 24, 24], w: [32, 16, 3, 3] }, bytes: encodeOnnxModel({ opset: 17, nodes: [{ opType: 'Conv', inputs: ['x', 'w'], outputs: ['y'],
      attributes: { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] } } }], inputs: [f32('x', [2, 16, 24, 24]), f32('w', [32, 16, 3, 3])], outputs: [f32('y', [2, 32, 24, 24])] }) },
    { label: 'digits CNN, batch 32', dims: { pixels: [32, 1, 8, 8] }, bytes: readFileSync(${JSON.stringify(join(packageRoot, 'models', 'digits_cnn.onnx'))}) },
  ];
  const run = (bb, bytes, feeds) => {
    const model = OnnxModel.decode(bb, bytes);
    const session = new CpuSession(bb, model);
    const inputs = Object.fromEntries(Object.entries(feeds).map(([name, { data, dims }]) => [name, Tensor.from(bb, 'float', data, dims)]));
    const outputs = session.run(inputs);
    const out = new Uint32Array(Float32Array.from(Object.values(outputs)[0].toArray()).buffer);
    for (const t of [...Object.values(outputs), ...Object.values(inputs)]) t.free();
    session.free();
    model.free();
    return out;
  };
  const same = (a, b) => a.length === b.length && a.every((v, i) => v === b[i]);
  const feedsOf = (dims) => Object.fromEntries(Object.entries(dims).map(([name, d]) => [name, { dims: d, data: random(d.reduce((a, b) => a * b, 1)) }]));
  report.cases = cases.map(({ label, dims, bytes }) => {
    const feeds = feedsOf(dims);
    const reference = run(single, bytes, feeds);
    const sameBits = [1, 2, 3].map((n) => { threaded.check(threaded.exports.bb_wasm_set_threads(n)); return same(run(threaded, bytes, feeds), reference); });
    const base = run(baseline, bytes, feeds);
    return { label, sameBits, differsFromBaseline: reference.filter((v, i) => v !== base[i]).length };
  });
  // a worker the machine did not schedule during a job leaves its tasks to the caller: more
  // of the work, bounded, gives it the chance (a pool whose workers never take one still fails)
  for (let i = 0; i < 20 && threaded.poolStats().tasksOnWorkers === 0; i++) cases.forEach(({ dims, bytes }) => run(threaded, bytes, feedsOf(dims)));
  report.tasksOnWorkers = threaded.poolStats().tasksOnWorkers;
}
await threaded.dispose();
await baseline.dispose();
console.log(JSON.stringify(report));
process.exit(0);
`;

function child(flag: string): ChildReport {
  relaxedBytes();
  const out = execFileSync(process.execPath, [flag, '--input-type=module', '-e', CHILD], { encoding: 'utf8' });
  return JSON.parse(out.trim().split('\n').pop() ?? '') as ChildReport;
}

function threadedChild(flag: string): ThreadedReport {
  if (!existsSync(threadedRelaxedPath)) throw new Error(`${threadedRelaxedPath} is missing: build it with \`bash scripts/build-wasm.sh\` from ${repoRoot}`);
  // a file, not -e: the pool's worker_threads inherit the process's flags, and --input-type is for -e alone
  const dir = mkdtempSync(join(tmpdir(), 'bb-simd-threads-'));
  try {
    const script = join(dir, 'child.mjs');
    writeFileSync(script, THREADED_CHILD);
    const out = execFileSync(process.execPath, [flag, script], { encoding: 'utf8' });
    return JSON.parse(out.trim().split('\n').pop() ?? '') as ThreadedReport;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Agreement with onnxruntime asked of either build: relative to the output's largest magnitude. */
const TOLERANCE = 1e-5;

describe('the shipped builds', () => {
  test('bb-relaxed.wasm carries relaxed SIMD: it validates exactly where the engine runs relaxed SIMD', () => {
    expect(WebAssembly.validate(relaxedBytes())).toBe(relaxedSimdSupported());
  });

  test('where the engine runs relaxed SIMD, the loader picks bb-relaxed.wasm, and bb.wasm when told to; both agree with onnxruntime', () => {
    const report = child('--experimental-wasm-relaxed-simd');
    expect(report.supported).toBe(true);
    expect(report.validatesRelaxedModule).toBe(true);
    expect(report.auto).toBe('relaxed');
    expect(report.forced).toBe('relaxed');
    expect(report.baseline).toBe('baseline');
    expect(report.cases).toHaveLength(5);
    // on the record: how far each build is from onnxruntime, and how much the builds differ here
    console.info(report.cases.map((c) => `${c.label}: relaxed ${c.error['relaxed']?.toExponential(1)}, baseline ${c.error['baseline']?.toExponential(1)}, ${c.differing} outputs differ`).join('\n'));
    for (const c of report.cases) {
      expect(c.error['relaxed'], c.label).toBeLessThanOrEqual(TOLERANCE);
      expect(c.error['baseline'], c.label).toBeLessThanOrEqual(TOLERANCE);
      expect(c.repeats, `${c.label}: the relaxed build repeats its bits`).toBe(true);
    }
  });

  test('where it does not, the loader falls back to bb.wasm and refuses an explicit relaxed', () => {
    const report = child('--no-experimental-wasm-relaxed-simd');
    expect(report.supported).toBe(false);
    expect(report.validatesRelaxedModule).toBe(false);
    expect(report.auto).toBe('baseline');
    expect(report.baseline).toBe('baseline');
    expect(report.forced).toBeUndefined();
    expect(report.forcedError).toMatch(/^BbLoadError: .*does not run relaxed SIMD/);
    for (const c of report.cases) expect(c.error['baseline'], c.label).toBeLessThanOrEqual(TOLERANCE);
  });

  test('in this process the choice follows the engine, and a bad choice is refused', async () => {
    const bb = await loadBb();
    expect(bb.simd).toBe(relaxedSimdSupported() ? 'relaxed' : 'baseline');
    expect(shippedModule('baseline').url.pathname.endsWith('/wasm/bb.wasm')).toBe(true);
    expect(shippedModule('baseline', 'threaded').url.pathname.endsWith('/wasm/bb-mt.wasm')).toBe(true);
    expect(() => shippedModule('fast' as 'auto')).toThrow(BbLoadError);
    if (!relaxedSimdSupported()) {
      await expect(loadBb(relaxedBytes())).rejects.toThrow(/not a valid WebAssembly module/);
    }
  });

  test('with threads, the loader picks bb-mt-relaxed.wasm where the engine runs relaxed SIMD: bb-relaxed.wasm\'s bits on 1, 2 and 3 threads', () => {
    const report = threadedChild('--experimental-wasm-relaxed-simd');
    expect(report.validatesThreadedRelaxed).toBe(true);
    expect(report.auto).toBe('relaxed');
    expect(report.baseline).toBe('baseline');
    expect(report.cases).toHaveLength(3);
    console.info(report.cases!.map((c) => `${c.label}: ${c.differsFromBaseline} outputs differ from bb-mt.wasm's`).join('\n'));
    for (const c of report.cases!) expect(c.sameBits, c.label).toEqual([true, true, true]);
    expect(report.tasksOnWorkers).toBeGreaterThan(0);
  });

  test('where it does not, threads load bb-mt.wasm, and an explicit relaxed is refused', () => {
    const report = threadedChild('--no-experimental-wasm-relaxed-simd');
    expect(report.validatesThreadedRelaxed).toBe(false);
    expect(report.auto).toBe('baseline');
    expect(report.baseline).toBe('baseline');
    expect(report.forcedError).toMatch(/^BbLoadError: simd: 'relaxed' asks for bb-mt-relaxed\.wasm, but this engine does not run relaxed SIMD/);
  });
});
