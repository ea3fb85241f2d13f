// bb-mt.wasm and bb-mt-relaxed.wasm (the package's threaded modules, loadBb({ threads })) on
// 1 and 2 threads against onnxruntime-web's threaded wasm build with numThreads 1 and 2, and
// bb.wasm and bb-relaxed.wasm on one thread, in Node (the relaxed builds' children with
// --experimental-wasm-relaxed-simd): MatMul 512² and 1024², a Conv, and a small CNN's inference (the one of
// infer-vs-peers.mjs: conv 3×3 1→16 → ReLU → MaxPool 2 → conv 3×3 16→32 → ReLU → MaxPool 2 →
// Flatten → Gemm 1568→10, batch 64, random weights). Outputs of every runtime are checked
// against bb.wasm's (bb-mt.wasm's bit for bit, ORT's and the relaxed builds' to 1e-4), and
// bb-mt-relaxed.wasm's against bb-relaxed.wasm's bit for bit.
//
//   cd bench/js && npm ci --ignore-scripts          # once
//   bash scripts/build-wasm.sh && (cd js && npm run build)
//   node bench/js/threads.mjs [--quick] [--rounds N]
//
// onnxruntime-web fixes its thread count when its module starts, so every runtime and
// thread count runs in a child process of its own, and the children take turns: round
// after round, each configuration once per round (the machine's load, shared with others,
// changes over minutes). A child warms up, then times each case in wall-clock time (threads
// are the point: CPU time would hide them), median of its runs; the table shows the median
// over rounds, the speed-up of 2 threads over 1 per runtime, and bb's time against ORT's at
// the same thread count (> 1: bb faster). A second table gives CPU time per run (the
// process's, all threads), which the machine's load disturbs far less: on a loaded 2-core
// machine no runtime can get a second core, and only this one compares the work done.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { agreement, bbRunner, median, ortRunner, threadCases as cases } from './cases.mjs';
import { packageDist, requireBuilt } from './common.mjs';

const CONFIGS = [
  { runtime: 'bb.wasm', threads: 1 },
  { runtime: 'bb-mt.wasm', threads: 1 },
  { runtime: 'bb-mt.wasm', threads: 2 },
  { runtime: 'bb-relaxed.wasm', threads: 1 },
  { runtime: 'bb-mt-relaxed.wasm', threads: 1 },
  { runtime: 'bb-mt-relaxed.wasm', threads: 2 },
  { runtime: 'ort-web', threads: 1 },
  { runtime: 'ort-web', threads: 2 },
];
const QUICK = process.argv.includes('--quick');
const OPSET = 17;

// ---- a child: one runtime at one thread count -------------------------------------------

/** Median wall-clock ms of one run, and the process's CPU ms per run (all its threads) over the same runs. */
async function measure(run, runs) {
  const times = [];
  const cpuStart = process.cpuUsage();
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    await run();
    times.push(performance.now() - start);
  }
  const cpu = process.cpuUsage(cpuStart);
  times.sort((a, b) => a - b);
  return { ms: times[times.length >> 1], cpuMs: (cpu.user + cpu.system) / 1000 / runs };
}

async function child(runtime, threads, outFile) {
  const lib = await import(packageDist);
  const out = [];
  let run;
  if (runtime === 'ort-web') {
    const ort = await import('onnxruntime-web');
    ort.env.wasm.numThreads = threads;
    ort.env.wasm.simd = true;
    ort.env.logLevel = 'error';
    run = (testCase) => ortRunner(ort, lib.encodeOnnxModel({ opset: OPSET, ...testCase.spec }), testCase.feeds);
  } else {
    const simd = runtime.includes('relaxed') ? 'relaxed' : 'baseline';
    const bb = runtime.startsWith('bb-mt') ? await lib.loadBb({ threads: 2, simd }) : await lib.loadBb({ simd });
    if (runtime.startsWith('bb-mt')) bb.check(bb.exports.bb_wasm_set_threads(threads));
    run = async (testCase) => bbRunner(lib, bb, lib.encodeOnnxModel({ opset: OPSET, ...testCase.spec }), testCase.feeds);
  }
  for (const testCase of cases()) {
    const { once, output } = await run(testCase);
    const warm = performance.now();
    while (performance.now() - warm < (QUICK ? 100 : 400)) await once();
    const bytes = new Uint8Array(output.buffer, output.byteOffset, output.byteLength);
    out.push({ label: testCase.label, ...(await measure(once, QUICK ? 5 : 11)), output: Buffer.from(bytes).toString('base64') });
  }
  writeFileSync(outFile, JSON.stringify(out));
  process.exit(0);
}

// ---- the parent: rounds of children, then the table -------------------------------------

async function parent() {
  requireBuilt();
  const rounds = process.argv.includes('--rounds') ? Number(process.argv[process.argv.indexOf('--rounds') + 1]) : QUICK ? 1 : 3;
  const script = fileURLToPath(import.meta.url);
  const times = new Map(); // `${config}|${label}` → wall ms per round
  const cpuTimes = new Map(); // the same, CPU ms per run
  let reference;
  let relaxedReference;
  const scratch = mkdtempSync(join(tmpdir(), 'bb-threads-bench-'));
  for (let round = 0; round < rounds; round++) {
    for (const { runtime, threads } of CONFIGS) {
      const outFile = join(scratch, 'result.json');
      const flags = runtime.includes('relaxed') ? ['--experimental-wasm-relaxed-simd'] : [];
      const result = spawnSync(process.execPath, [...flags, script, '--child', runtime, String(threads), outFile, ...(QUICK ? ['--quick'] : [])], {
        encoding: 'utf8',
      });
      if (result.status !== 0) throw new Error(`${runtime} on ${threads} thread(s) failed: ${result.stderr}`);
      const rows = JSON.parse(readFileSync(outFile, 'utf8')).map((row) => {
        const bytes = Buffer.from(row.output, 'base64');
        return { ...row, output: new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4) };
      });
      if (reference === undefined) reference = rows; // bb.wasm, one thread
      if (relaxedReference === undefined && runtime === 'bb-relaxed.wasm') relaxedReference = rows;
      rows.forEach((row, i) => {
        const { relative } = agreement(row.output, reference[i].output);
        // the same bits as the single-threaded build of the same SIMD
        const [twin, twinRows] = runtime.includes('relaxed') ? ['bb-relaxed.wasm', relaxedReference] : ['bb.wasm', reference];
        if (runtime.startsWith('bb') && !agreement(row.output, twinRows[i].output).identical) throw new Error(`${runtime} on ${threads} threads: ${row.label} differs from ${twin}'s bits`);
        if (relative > 1e-4) throw new Error(`${runtime} on ${threads} threads: ${row.label} is off by ${relative} (relative)`);
        const key = `${runtime}@${threads}|${row.label}`;
        times.set(key, [...(times.get(key) ?? []), row.ms]);
        cpuTimes.set(key, [...(cpuTimes.get(key) ?? []), row.cpuMs]);
      });
    }
  }
  rmSync(scratch, { recursive: true, force: true });
  const ms = (runtime, threads, label) => median(times.get(`${runtime}@${threads}|${label}`));
  const header = ['case', 'bb.wasm 1t', 'bb-mt 1t', 'bb-mt 2t', 'bb-mt ×', 'relaxed 1t', 'mt-relaxed 1t', 'mt-relaxed 2t', 'mt-relaxed ×', 'ORT 1t', 'ORT 2t', 'ORT ×', 'bb/ORT 1t', 'bb/ORT 2t', 'relaxed/ORT 2t'];
  const table = [header];
  for (const { label } of reference) {
    const [b1, m1, m2, r1, mr1, mr2, o1, o2] = [
      ms('bb.wasm', 1, label), ms('bb-mt.wasm', 1, label), ms('bb-mt.wasm', 2, label),
      ms('bb-relaxed.wasm', 1, label), ms('bb-mt-relaxed.wasm', 1, label), ms('bb-mt-relaxed.wasm', 2, label),
      ms('ort-web', 1, label), ms('ort-web', 2, label),
    ];
    const t = (v) => `${v.toFixed(1)} ms`;
    const x = (v) => `${v.toFixed(2)}×`;
    table.push([label, t(b1), t(m1), t(m2), x(m1 / m2), t(r1), t(mr1), t(mr2), x(mr1 / mr2), t(o1), t(o2), x(o1 / o2), x(o1 / m1), x(o2 / m2), x(o2 / mr2)]);
  }
  const print = (rows) => {
    const widths = rows[0].map((_, c) => Math.max(...rows.map((row) => row[c].length)));
    for (const row of rows) console.log(row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]) : cell.padStart(widths[c]))).join('  '));
  };
  print(table);
  // CPU time per run (all threads of the process): the work each runtime does, whatever the
  // machine's load; on 2 threads it also counts the workers' waiting
  const cpu = (runtime, threads, label) => median(cpuTimes.get(`${runtime}@${threads}|${label}`));
  console.log('\nCPU time per run (all threads):');
  print([
    ['case', 'bb.wasm 1t', 'bb-mt 1t', 'bb-mt 2t', 'relaxed 1t', 'mt-relaxed 1t', 'mt-relaxed 2t', 'ORT 1t', 'ORT 2t', 'bb/ORT 1t'],
    ...reference.map(({ label }) => [
      label,
      ...CONFIGS.map(({ runtime, threads }) => `${cpu(runtime, threads, label).toFixed(1)} ms`),
      `${(cpu('ort-web', 1, label) / cpu('bb-mt.wasm', 1, label)).toFixed(2)}×`,
    ]),
  ]);
  console.log(
    `\n${cpus().length} cores (${cpus()[0]?.model ?? 'unknown'}), load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}; Node ${process.versions.node}; ` +
      `${rounds} round(s), wall-clock median per runtime. ×: time on 1 thread over time on 2 (the speed-up; 2.00× would be perfect on 2 cores). ` +
      'bb/ORT: ORT time over bb-mt.wasm\'s at that thread count, relaxed/ORT over bb-mt-relaxed.wasm\'s (> 1: bb faster). ' +
      "bb-mt.wasm gave bb.wasm's bits and bb-mt-relaxed.wasm bb-relaxed.wasm's on every case; ORT and the relaxed builds agreed with bb.wasm to 1e-4.",
  );
}

if (process.argv[2] === '--child') await child(process.argv[3], Number(process.argv[4]), process.argv[5]);
else await parent();
