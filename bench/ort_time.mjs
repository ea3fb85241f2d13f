// onnxruntime-node's inference time for one model, as bench/vision_vs_peers.py measures it:
// THREADS intra-op threads (1 unless given) and one inter-op thread, every graph
// optimization on (its default), a random input of the given shape, 3 warm-up runs, then
// the median and best CPU time of the process (process.cpuUsage: user + system) over the
// timed runs, or the wall-clock time when THREADS is given (1 too, for the speed-up).
//
//   node bench/ort_time.mjs MODEL.onnx INPUT N,C,H,W RUNS [THREADS]
import { ortCommand } from './ort_command.mjs';

const { ort, modelPath, runs, threads, threadsGiven, feeds } = ortCommand('ort_time');
const session = await ort.InferenceSession.create(modelPath, {
  intraOpNumThreads: threads,
  interOpNumThreads: 1,
  executionMode: 'sequential',
  graphOptimizationLevel: 'all',
});
for (let i = 0; i < 3; i++) await session.run(feeds);
const times = [];
for (let r = 0; r < runs; r++) {
  const t0 = process.cpuUsage(), w0 = performance.now();
  await session.run(feeds);
  const d = process.cpuUsage(t0);
  times.push(threadsGiven ? performance.now() - w0 : (d.user + d.system) / 1000);
}
times.sort((a, b) => a - b);
console.log(`ort_time: ${modelPath} median ${times[times.length >> 1].toFixed(3)} ms, best ${times[0].toFixed(3)} ms ` +
            `over ${times.length} runs (onnxruntime-node ${ort.env.versions?.common ?? ''}, ` +
            `${threads} thread${threads > 1 ? 's' : ''}, ${threadsGiven ? 'wall clock' : 'CPU time'})`);
