#!/usr/bin/env node
// bb.wasm in each browser engine against the same module in Node (V8 without a browser):
// MatMul GFLOP/s (64² and 512², CpuSession.run) and training steps/s (federated_digits in
// the page), measured by js/e2e/engines.mjs --bench in WebKitGTK, Firefox and Chromium.
// Prints the median of --runs runs per engine and its ratio to Node in the same run.
//
//   scripts/build-wasm.sh && (cd js && npm ci && npm run build)
//   node bench/engines.mjs [--engines webkit,firefox,chromium] [--runs 5]
// (WebKit needs Debian's webkit2gtk-driver and xvfb: scripts/setup.sh installs them.)
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const js = join(dirname(fileURLToPath(import.meta.url)), '..', 'js');
const option = (name, fallback) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : fallback);
const engines = [...option('--engines', 'webkit,firefox,chromium').split(','), 'node'];
const runs = Number(option('--runs', '5'));
if (!Number.isInteger(runs) || runs < 1) throw new Error('--runs takes a whole number of at least 1');

const work = mkdtempSync(join(tmpdir(), 'bb-engines-'));
const samples = new Map(engines.map((e) => [e, []]));
try {
  for (let run = 1; run <= runs; run++) {
    const file = join(work, `run${run}.json`);
    process.stderr.write(`run ${run}/${runs}: ${engines.join(', ')}\n`);
    const child = spawnSync(process.execPath, ['e2e/engines.mjs', '--only', engines.join(','), '--bench', file], { cwd: js, stdio: ['ignore', 'inherit', 'inherit'] });
    if (child.status !== 0) process.stderr.write(`run ${run}: e2e/engines.mjs failed a check (above); its figures still count\n`);
    if (!existsSync(file)) throw new Error(`run ${run}: e2e/engines.mjs wrote no figures`);
    const { figures } = JSON.parse(readFileSync(file, 'utf8'));
    for (const [key, f] of Object.entries(figures)) {
      samples.get(key)?.push({ engine: f.engine, small: f.matmul[0].gflops, large: f.matmul[1].gflops, steps: f.training.stepsPerSecond });
    }
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}

const median = (values) => {
  const v = [...values].sort((a, b) => a - b);
  return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
};
const summary = new Map([...samples].filter(([, s]) => s.length > 0).map(([key, s]) => [key, {
  engine: s[0].engine, small: median(s.map((x) => x.small)), large: median(s.map((x) => x.large)), steps: median(s.map((x) => x.steps)), n: s.length,
}]));
const node = summary.get('node');
const ratio = (value, base) => (base ? `${(value / base).toFixed(2)}×` : '—');
console.log(`median of ${runs} run${runs === 1 ? '' : 's'}; ratios against Node (V8) measured in the same runs`);
console.log('| engine | MatMul 64² GFLOP/s | MatMul 512² GFLOP/s | vs Node | training steps/s | vs Node |');
console.log('|---|---:|---:|---:|---:|---:|');
for (const key of engines) {
  const s = summary.get(key);
  if (s === undefined) {
    console.log(`| ${key} | (no figures: the engine did not run, see above) | | | | |`);
    continue;
  }
  console.log(`| ${s.engine} | ${s.small.toFixed(1)} | ${s.large.toFixed(1)} | ${ratio(s.large, node?.large)} | ${s.steps.toFixed(0)} | ${ratio(s.steps, node?.steps)} |`);
}
