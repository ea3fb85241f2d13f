// The command line bench/ort_time.mjs and bench/ort_profile.mjs take,
// MODEL.onnx INPUT N,C,H,W RUNS [THREADS], and the input both run: the same pseudo-random
// floats in [-0.5, 0.5) for the shape, so their figures are of one input.
import { loadOrt } from '../tests/tools/ort_load.mjs';

/** Parses the arguments (exit 2 with the usage on a bad line) and loads onnxruntime-node. */
export function ortCommand(script) {
  const [modelPath, inputName, shapeText, runsText, threadsText] = process.argv.slice(2);
  const threads = Number(threadsText ?? 1);
  const runs = Number(runsText);
  if (!shapeText || !(runs >= 1) || !(threads >= 1)) {
    console.error(`usage: ${script}.mjs MODEL.onnx INPUT N,C,H,W RUNS [THREADS]`);
    process.exit(2);
  }
  const ort = loadOrt(script);
  const shape = shapeText.split(',').map(Number);
  const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
  let seed = 12345;
  for (let i = 0; i < data.length; i++) {
    seed = (seed * 1103515245 + 12345) >>> 0;
    data[i] = (seed >>> 8) / (1 << 24) - 0.5;
  }
  return {
    ort, modelPath, runs, threads,
    threadsGiven: threadsText !== undefined,
    feeds: { [inputName]: new ort.Tensor('float32', data, shape) },
  };
}
