// onnxruntime-node's inference time for one model, as bench/vision_vs_peers.py measures it:
// THREADS intra-op threads (1 unless given) and one inter-op thread, every graph
// optimization on (its default), a random input of the given shape, 3 warm-up runs, then
// the median and best CPU time of the process (process.cpuUsage: user + system) over the
// timed runs, or the wall-clock time when THREADS is given (1 too, for the speed-up).
//
//   node bench/ort_time.mjs MODEL.onnx INPUT N,C,H,W RUNS [THREADS]
import { loadOrt } from '../tests/tools/ort_load.mjs';

const [modelPath, inputName, shapeText, runsText, threadsText] = process.argv.slice(2);
const threads = Number(threadsText ?? 1);
if (!runsText || !(threads >= 1)) {
  console.error('usage: ort_time.mjs MODEL.onnx INPUT N,C,H,W RUNS [THREADS]');
  process.exit(2);
}
const ort = loadOrt('ort_time');
const shape = shapeText.split(',').map(Number);
const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
let seed = 12345;
for (let i = 0; i < data.length; i++) {
  seed = (seed * 1103515245 + 12345) >>> 0;
  data[i] = (seed >>> 8) / (1 << 24) - 0.5;
}
const session = await ort.InferenceSession.create(modelPath, {
  intraOpNumThreads: threads,
  interOpNumThreads: 1,
  executionMode: 'sequential',
  graphOptimizationLevel: 'all',
});
const feeds = { [inputName]: new ort.Tensor('float32', data, shape) };
for (let i = 0; i < 3; i++) await session.run(feeds);
const times = [];
for (let r = 0; r < Number(runsText); r++) {
  const t0 = process.cpuUsage(), w0 = performance.now();
  await session.run(feeds);
  const d = process.cpuUsage(t0);
  times.push(threadsText !== undefined ? performance.now() - w0 : (d.user + d.system) / 1000);
}
times.sort((a, b) => a - b);
console.log(`ort_time: ${modelPath} median ${times[times.length >> 1].toFixed(3)} ms, best ${times[0].toFixed(3)} ms ` +
            `over ${times.length} runs (onnxruntime-node ${ort.env.versions?.common ?? ''}, ` +
            `${threads} thread${threads > 1 ? 's' : ''}, ${threadsText !== undefined ? 'wall clock' : 'CPU time'})`);
