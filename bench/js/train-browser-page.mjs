// The page of train-browser.mjs: one runtime at one thread count in a cross-origin-isolated
// page, as its address says (?runtime=bb-mt.wasm&threads=2&quick=0; or tfjs-wasm), stepping
// the CNNs of train-models.mjs (batch 32, Adam lr 1e-3) as train-vs-tfjs.mjs does under Node.
import { startTfjsWasm } from './cases.mjs';
import { BATCH, batchSource, checkFastGradient, convGradRoutes, mnistCnnOnnx, registerConvGradient, tfjsCnn, tfjsMnistCnn, tfjsTrainer } from './train-models.mjs';

const params = new URLSearchParams(location.search);
const runtime = params.get('runtime');
const threads = Number(params.get('threads'));
const quick = params.get('quick') === '1';
const WINDOW_MS = quick ? 150 : 600;
const WINDOWS = quick ? 3 : 7;
/** Steps whose losses are returned (the first is before any update). */
const LOSSES = 21;
/** Wall time each model steps before its windows count (V8 tiers WebAssembly up in the background). */
const WARMUP_MS = quick ? 1000 : 3000;

/** The models: name → [bb's ONNX (bytes, or a promise of them), tfjs's builder, one row's shape (NHWC)]. */
const MODELS = {
  digits_cnn: [(lib) => fetch('/examples/models/digits_cnn.onnx').then(async (r) => new Uint8Array(await r.arrayBuffer())), tfjsCnn, [8, 8, 1]],
  cnn28: [(lib) => mnistCnnOnnx(lib.encodeOnnxModel), tfjsMnistCnn, [28, 28, 1]],
};

/** One window of at least WINDOW_MS of wall time (and 5 steps), cycling through `data`: its steps and ms. */
function timedWindow(step, data) {
  const start = performance.now();
  let n = 0;
  let elapsed = 0;
  do {
    step(data[n % data.length]);
    n++;
    elapsed = performance.now() - start;
  } while (elapsed < WINDOW_MS || n < 5);
  return { steps: n, ms: elapsed };
}

/** A loaded runtime: `trainer(name, data)` resolves to `{ step(batch) → loss, rewind(), free() }`. */
async function load() {
  const lib = await import('../../js/dist/index.js');
  if (runtime === 'tfjs-wasm') {
    const tf = globalThis.tf; // tf-core, tf-layers and tf-backend-wasm's bundles, loaded by the page
    const describe = await startTfjsWasm(tf, threads, new URL('../../bench/js/node_modules/@tensorflow/tfjs-backend-wasm/dist/', import.meta.url).href);
    const routes = convGradRoutes(tf);
    registerConvGradient(tf, routes, () => 'fast');
    const gradientError = checkFastGradient(tf, routes);
    if (!(gradientError < 1e-5)) throw new Error(`tfjs's fast Conv2D gradient disagrees with its own slow one (${gradientError})`);
    return {
      describe: `${describe}; Conv2D's gradient through its conv2d kernel (within ${gradientError.toExponential(1)} of its slow kernels)`,
      trainer: async (name, data) => {
        const [, build, shape] = MODELS[name];
        const t = tfjsTrainer(tf, build(tf), data, shape);
        return { step: () => t.step(), rewind: t.rewind, free: t.dispose };
      },
    };
  }
  if (runtime !== 'bb-mt.wasm' && runtime !== 'bb-mt-relaxed.wasm') throw new Error(`unknown runtime ${runtime}`);
  // one thread: the threaded module with a worker that takes no part (jobs run on the page's thread)
  const bb = await lib.loadBb({ threads: Math.max(threads, 2), simd: runtime === 'bb-mt.wasm' ? 'baseline' : 'relaxed' });
  if (!bb.threaded) throw new Error(`${runtime} did not load: ${bb.threadsUnavailable}`);
  bb.check(bb.exports.bb_wasm_set_threads(threads));
  return {
    describe: `bytesandbrains ${bb.version} ${runtime} (${bb.simd} SIMD), ${threads} thread(s)`,
    trainer: async (name) => {
      const trainer = lib.OnnxTrainer.create(bb, await MODELS[name][0](lib), { optimizer: 'adam', lr: 1e-3 });
      return { step: (b) => trainer.step(b).loss, rewind: () => {}, free: () => trainer.free() };
    },
    tracePool: (on) => bb.exports.bb_wasm_pool_trace_set !== undefined && (bb.tracePool(on), true),
    poolTrace: () => bb.poolTrace(),
  };
}

// The parent drives the page (window.bench), so that it can read the renderer's CPU time
// around the timed windows: load() once, then per model start(name): the losses of its first
// LOSSES steps on one fixed batch (the first before any update: the same bits for
// bb-mt.wasm at any thread count), then WARMUP_MS of steps; time(trace): the windows' steps
// and wall ms (with trace, bb's pool trace over them); stop().
const nextBatches = batchSource();
const dataOf = Object.fromEntries(Object.entries(MODELS).map(([name, [, , shape]]) => [name, nextBatches(16, shape.reduce((a, b) => a * b, 1))]));
window.bench = {
  async load() {
    if (globalThis.crossOriginIsolated !== true) throw new Error('the page is not cross-origin isolated');
    this.runtime = await load();
    return { describe: this.runtime.describe, cores: navigator.hardwareConcurrency, batch: BATCH };
  },
  async start(name) {
    this.data = dataOf[name];
    this.trainer = await this.runtime.trainer(name, this.data);
    const losses = [];
    for (let i = 0; i < LOSSES; i++) {
      this.trainer.rewind();
      losses.push(this.trainer.step(this.data[0]));
    }
    const until = performance.now() + WARMUP_MS;
    for (let i = 0; performance.now() < until; i++) this.trainer.step(this.data[i % this.data.length]);
    return losses;
  },
  time(trace) {
    const traced = trace && this.runtime.tracePool?.(true);
    const windows = [];
    for (let w = 0; w < WINDOWS; w++) {
      this.trainer.rewind();
      windows.push(timedWindow(this.trainer.step, this.data));
    }
    const poolTrace = traced ? this.runtime.poolTrace() : null;
    if (traced) this.runtime.tracePool(false);
    return { windows, poolTrace };
  },
  stop() {
    this.trainer.free();
    this.trainer = undefined;
  },
};
