// Two or more builds of bb's module on one case of threads.mjs, in one Node process with
// their runs interleaved (A B C A B C ...), so that the machine's load, which changes over
// seconds on a shared VM, falls on every build alike. Reports each build's median and 10th
// percentile CPU ms per run (the process's; its pool's workers are idle at one thread) and
// the first build's time over each other's (> 1: that build faster), and whether each
// build gives the first one's bits.
//
//   node bench/js/modules-ab.mjs <case prefix> <module> <module> ...   [ROUNDS=30]
//
// A module is a path to bb.wasm or bb-relaxed.wasm, or mt<threads>:<path> for bb-mt.wasm
// on that many threads; the relaxed ones need --experimental-wasm-relaxed-simd. The case
// prefix picks a case of cases.mjs's threadCases ("Conv", "MatMul 1024", "small CNN").
import { readFileSync } from 'node:fs';
import { bbRunner, median, threadCases } from './cases.mjs';
import { packageDist } from './common.mjs';

const lib = await import(packageDist);
const [want, ...paths] = process.argv.slice(2);
const testCase = threadCases().find((t) => t.label.startsWith(want));
if (!testCase || paths.length === 0) throw new Error('usage: modules-ab.mjs <case prefix> <module> <module> ...');
const runners = [];
for (const path of paths) {
  let bb;
  if (path.startsWith('mt')) {
    const [count, file] = [Number(path.slice(2, path.indexOf(':'))), path.slice(path.indexOf(':') + 1)];
    bb = await lib.loadBb({ threads: Math.max(count, 2), threadedSource: readFileSync(file) });
    bb.check(bb.exports.bb_wasm_set_threads(count));
  } else {
    bb = await lib.loadBb(readFileSync(path));
  }
  runners.push(bbRunner(lib, bb, lib.encodeOnnxModel({ opset: 17, ...testCase.spec }), testCase.feeds));
}
for (let i = 1; i < runners.length; i++) {
  const [a, b] = [runners[0].output, runners[i].output];
  let same = a.length === b.length;
  let largest = 0;
  for (let j = 0; j < a.length; j++) {
    if (a[j] !== b[j]) same = false;
    largest = Math.max(largest, Math.abs(a[j] - b[j]));
  }
  console.log(`${paths[i]} against ${paths[0]}: ${same ? 'the same bits' : `largest |difference| ${largest}`}`);
}
const rounds = Number(process.env.ROUNDS ?? 30);
const times = runners.map(() => []);
for (let round = 0; round < rounds + 3; round++) {
  runners.forEach((runner, i) => {
    const start = process.cpuUsage();
    runner.once();
    const used = process.cpuUsage(start);
    if (round >= 3) times[i].push((used.user + used.system) / 1000); // the first three warm up
  });
}
const p10 = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 10)];
const [m0, l0] = [median(times[0]), p10(times[0])];
console.log(`${testCase.label}, CPU ms per run, median (10th percentile), ${rounds} interleaved rounds:`);
paths.forEach((path, i) => {
  const [m, l] = [median(times[i]), p10(times[i])];
  console.log(`  ${path}: ${m.toFixed(1)} (${l.toFixed(1)})  first/this ${(m0 / m).toFixed(3)}× (${(l0 / l).toFixed(3)}×)`);
});
process.exit(0);
