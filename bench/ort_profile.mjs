// onnxruntime-node's own per-node profile of one model (enableProfiling): the median kernel
// time of each node over RUNS runs after 3 warm-up runs, one line per node in the order it
// ran (op type, node name, output shape, µs), then the sum. THREADS intra-op threads (1
// unless given), every graph optimization on, the input as bench/ort_time.mjs makes it.
// Its profiler adds a few µs to each node, so small nodes read high.
//
//   node bench/ort_profile.mjs MODEL.onnx INPUT N,C,H,W RUNS [THREADS]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ortCommand } from './ort_command.mjs';

const { ort, modelPath, runs, threads, threadsGiven, feeds } = ortCommand('ort_profile');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ort-profile-'));
const session = await ort.InferenceSession.create(modelPath, {
  intraOpNumThreads: threads,
  interOpNumThreads: 1,
  executionMode: 'sequential',
  graphOptimizationLevel: 'all',
  enableProfiling: true,
  profileFilePrefix: path.join(dir, 'p'),
});
for (let i = 0; i < 3 + runs; i++) await session.run(feeds);
session.endProfiling();
const file = fs.readdirSync(dir).find((f) => f.endsWith('.json'));
const events = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));
fs.rmSync(dir, { recursive: true });
const nodes = new Map(); // name -> {op, shape, times}
for (const e of events) {
  if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
  const name = e.name.slice(0, -'_kernel_time'.length);
  if (!nodes.has(name)) {
    const out = e.args.output_type_shape?.[0];
    nodes.set(name, { op: e.args.op_name, shape: out ? JSON.stringify(Object.values(out)[0]) : '', times: [] });
  }
  nodes.get(name).times.push(e.dur);
}
let sum = 0;
for (const [name, n] of nodes) {
  const t = n.times.slice(3).sort((a, b) => a - b);
  const median = t[t.length >> 1];
  sum += median;
  console.log(`${n.op}\t${name}\t${n.shape}\t${median}`);
}
console.log(`sum\t${nodes.size} nodes\t\t${sum}`);
