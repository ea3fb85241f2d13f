// The page of browser.mjs: one runtime at one thread count in a cross-origin-isolated page,
// as its address says (?runtime=bb-mt.wasm&threads=2&quick=0; also bb-mt-relaxed.wasm, bb.wasm, bb-relaxed.wasm, ort-web, tfjs-wasm), on the cases of cases.mjs.
import { bbRunner, ortRunner, randomFloats, startTfjsWasm, threadCases, wallMs, warmUp } from './cases.mjs';

const params = new URLSearchParams(location.search);
const runtime = params.get('runtime');
const threads = Number(params.get('threads'));
const quick = params.get('quick') === '1';
const pageCores = navigator.hardwareConcurrency;
const SIZE = 64;

/**
 * torchvision's networks as browser.mjs exports and serves them (/vision/NAME.onnx; at opset
 * 16 for training, /vision/train/NAME.onnx): inference on every runtime that loads ONNX,
 * and where asked, bb's training step (softmax cross-entropy, Adam; no peer has one here).
 */
const visionInput = randomFloats(3 * SIZE * SIZE, 21, -0.5, 0.5);
const visionCases = [
  ...(params.get('vision') ? params.get('vision').split(',') : []).map((name) => ({ label: `${name} inference, 1x3x${SIZE}x${SIZE}`, vision: name })),
  ...(params.get('train') ? params.get('train').split(',') : []).map((name) => ({ label: `${name} training step (Adam), 1x3x${SIZE}x${SIZE}`, train: name })),
];
const fetchBytes = async (path) => new Uint8Array(await (await fetch(path)).arrayBuffer());
/** A case's ONNX model and inputs (name → [data, dims]). */
const modelOf = (lib, testCase) => (testCase.vision ? fetchBytes(`/vision/${testCase.vision}.onnx`) : lib.encodeOnnxModel({ opset: 17, ...testCase.spec }));
const inputsOf = (testCase) => (testCase.vision ? { x: [visionInput, [1, 3, SIZE, SIZE]] } : testCase.feeds);

/** A loaded runtime: `prepare(testCase)` resolves to `{ once, output, release }`. */
async function load() {
  if (runtime === 'ort-web') {
    // onnxruntime-web/wasm (ort.wasm.min.mjs), as a page that runs ONNX on the CPU imports
    // it: its module is ort-wasm-simd-threaded.wasm. The package's default entry
    // (ort.min.mjs; ort.bundle.min.mjs under a bundler) loads the WebGPU/WebNN build
    // (ort-wasm-simd-threaded.jsep.wasm, made with Asyncify), whose CPU kernels run slower;
    // ?ortBundle=ort.min.mjs measures that one (browser.mjs --ort-bundle).
    const bundle = params.get('ortBundle') ?? 'ort.wasm.min.mjs';
    const ort = await import(`../../bench/js/node_modules/onnxruntime-web/dist/${bundle}`);
    const lib = await import('../../js/dist/index.js');
    ort.env.wasm.wasmPaths = new URL('../../bench/js/node_modules/onnxruntime-web/dist/', import.meta.url).href;
    ort.env.wasm.numThreads = threads;
    ort.env.logLevel = 'error';
    return {
      describe: `onnxruntime-web ${ort.env.versions.web} (${bundle}), numThreads ${threads}`,
      supports: (testCase) => testCase.train === undefined,
      prepare: async (testCase) => ortRunner(ort, await modelOf(lib, testCase), inputsOf(testCase)),
    };
  }
  if (runtime === 'tfjs-wasm') {
    const tf = globalThis.tf; // tf-core and tf-backend-wasm's bundles, loaded by the page
    const describe = await startTfjsWasm(tf, threads, new URL('../../bench/js/node_modules/@tensorflow/tfjs-backend-wasm/dist/', import.meta.url).href);
    return {
      supports: (testCase) => testCase.tfjs !== undefined,
      describe,
      prepare: async (testCase) => {
        const { once, toReference, release } = testCase.tfjs(tf);
        return { once, output: toReference(once()), release };
      },
    };
  }
  const lib = await import('../../js/dist/index.js');
  let bb;
  if (runtime === 'bb-mt.wasm' || runtime === 'bb-mt-relaxed.wasm') {
    // one thread: the threaded module with a worker that takes no part (jobs run on the page's thread)
    bb = await lib.loadBb({ threads: Math.max(threads, 2), simd: runtime === 'bb-mt.wasm' ? 'baseline' : 'relaxed' });
    if (!bb.threaded) throw new Error(`${runtime} did not load: ${bb.threadsUnavailable}`);
    bb.check(bb.exports.bb_wasm_set_threads(threads));
  } else {
    bb = await lib.loadBb({ simd: runtime === 'bb-relaxed.wasm' ? 'relaxed' : 'baseline' });
  }
  return {
    describe: `bytesandbrains ${bb.version} ${runtime}, ${bb.threads} thread(s)`,
    supports: () => true,
    prepare: async (testCase) => {
      if (testCase.train) {
        const trainer = lib.OnnxTrainer.create(bb, await fetchBytes(`/vision/train/${testCase.train}.onnx`), { optimizer: 'adam', lr: 1e-3 });
        const labels = Float32Array.of(7);
        const once = () => trainer.step({ x: visionInput, labels }).loss;
        // the first step's loss: the same for every build and thread count
        return { once, output: Float32Array.of(once()), release: () => trainer.free() };
      }
      return bbRunner(lib, bb, await modelOf(lib, testCase), inputsOf(testCase));
    },
  };
}

/** A Float32Array's bytes as base64 (how the output reaches the parent, which compares them). */
function base64(values) {
  const bytes = new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  let text = '';
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(text);
}

// The parent drives the page case by case (window.bench), so that it can read the page's
// CPU time (Chromium's, of the renderer process: the page and its workers) around the timed
// runs of each case: load() once (the cases the runtime has), then per case prepare(i) (the
// output, base64), warm(i), time(i) (wall-clock median ms and the number of runs), release(i).
const only = params.get('cases') ? params.get('cases').split(',') : undefined;
const cases = [...threadCases(), ...visionCases].filter((c) => only === undefined || only.some((s) => c.label.includes(s)));
const prepared = [];
window.bench = {
  async load() {
    if (globalThis.crossOriginIsolated !== true) throw new Error('the page is not cross-origin isolated');
    this.runtime = await load();
    // the cases this runtime runs: index and label
    const runs = cases.flatMap((c, i) => (this.runtime.supports(c) ? [{ i, label: c.label }] : []));
    return { describe: this.runtime.describe, cores: pageCores, runs };
  },
  async prepare(i) {
    prepared[i] = await this.runtime.prepare(cases[i]);
    return base64(prepared[i].output);
  },
  warm: (i) => warmUp(prepared[i].once, Number(params.get('warm') ?? (quick ? 100 : 400))),
  // enough runs for the renderer's CPU clock (10 ms ticks) to resolve a run
  time: (i) => wallMs(prepared[i].once, quick ? 5 : 11, quick ? 200 : 600),
  async release(i) {
    await prepared[i].release();
    prepared[i] = undefined;
  },
};
