// What the thread benches share, in Node (threads.mjs) and in a browser page (browser.mjs):
// the cases (one-node MatMul and Conv models and a small CNN, as ONNX specs, their inputs,
// and the same computations for TensorFlow.js), wall-clock timing, and the comparison of
// outputs. Plain JavaScript with no Node imports, so a page loads it as it is.
import { randomFloats } from '../../js/test/random.mjs';

export { randomFloats };

const f32 = (name, dims) => ({ name, dtype: 'float', dims });
const init = (name, dims, seed, scale = 1) => ({ name, dtype: 'float', dims, data: randomFloats(dims.reduce((a, b) => a * b, 1), seed, -scale, scale) });

/** OIHW → HWIO (ONNX's convolution weights as TensorFlow's). */
export function oihwToHwio(w, o, i, h, k) {
  const out = new Float32Array(w.length);
  for (let a = 0; a < o; a++)
    for (let b = 0; b < i; b++)
      for (let y = 0; y < h; y++) for (let x = 0; x < k; x++) out[((y * k + x) * i + b) * o + a] = w[((a * i + b) * h + y) * k + x];
  return out;
}

/** NCHW data → NHWC (and back with `inverse`). */
function nchwToNhwc(data, [n, c, h, w], inverse = false) {
  const out = new Float32Array(data.length);
  for (let a = 0; a < n; a++)
    for (let ch = 0; ch < c; ch++)
      for (let p = 0; p < h * w; p++) {
        const nchw = (a * c + ch) * h * w + p;
        const nhwc = (a * h * w + p) * c + ch;
        if (inverse) out[nchw] = data[nhwc];
        else out[nhwc] = data[nchw];
      }
  return out;
}

/**
 * A Gemm's weights [outputs, C·H·W] (ONNX's Flatten of NCHW: channel-major) as the
 * [H·W·C, outputs] matrix that multiplies an NHWC flatten to the same sums.
 */
export function denseForNhwc(w, outputs, channels, positions) {
  const dense = new Float32Array(w.length);
  for (let o = 0; o < outputs; o++)
    for (let c = 0; c < channels; c++)
      for (let p = 0; p < positions; p++) dense[(p * channels + c) * outputs + o] = w[o * channels * positions + c * positions + p];
  return dense;
}

/**
 * The cases: `label`, `spec` (encodeOnnxModel's, without the opset), `feeds` (name →
 * [data, dims]) and `tfjs(tf)`, which returns `{ once, release }`: `once()` runs the
 * computation on inputs already in the backend and returns the output in the ONNX model's
 * layout (tfjs runs convolutions NHWC; the transposition back is outside what is timed:
 * `once` returns `{ data, layout }` and `toReference` applies it).
 */
/** The small CNN both the thread benches and infer-vs-peers run: conv 3×3 16, ReLU, max pool 2,
 * conv 3×3 32, ReLU, max pool 2, flatten, dense 10 (inputs x, w1, b1, w2, b2, w3, b3; output y). */
export function smallCnnNodes() {
  return [
    { opType: 'Conv', inputs: ['x', 'w1', 'b1'], outputs: ['c1'], attributes: { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] } } },
    { opType: 'Relu', inputs: ['c1'], outputs: ['r1'] },
    { opType: 'MaxPool', inputs: ['r1'], outputs: ['p1'], attributes: { kernel_shape: { ints: [2, 2] }, strides: { ints: [2, 2] } } },
    { opType: 'Conv', inputs: ['p1', 'w2', 'b2'], outputs: ['c2'], attributes: { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] } } },
    { opType: 'Relu', inputs: ['c2'], outputs: ['r2'] },
    { opType: 'MaxPool', inputs: ['r2'], outputs: ['p2'], attributes: { kernel_shape: { ints: [2, 2] }, strides: { ints: [2, 2] } } },
    { opType: 'Flatten', inputs: ['p2'], outputs: ['f'] },
    { opType: 'Gemm', inputs: ['f', 'w3', 'b3'], outputs: ['y'], attributes: { transB: { int: 1 } } },
  ];
}

export function threadCases() {
  const matmul = (n) => {
    const a = randomFloats(n * n, 1);
    const b = randomFloats(n * n, 2);
    return {
      label: `MatMul ${n}x${n} · ${n}x${n}`,
      spec: { nodes: [{ opType: 'MatMul', inputs: ['a', 'b'], outputs: ['y'] }], inputs: [f32('a', [n, n]), f32('b', [n, n])], outputs: [f32('y', [n, n])] },
      feeds: { a: [a, [n, n]], b: [b, [n, n]] },
      tfjs: (tf) => {
        const [ta, tb] = [tf.tensor2d(a, [n, n]), tf.tensor2d(b, [n, n])];
        return { once: () => tf.tidy(() => tf.matMul(ta, tb)).dataSync(), toReference: (y) => y, release: () => tf.dispose([ta, tb]) };
      },
    };
  };
  const convW = init('w', [64, 32, 3, 3], 3, 0.1);
  const convB = init('b', [64], 4, 0.1);
  const convX = randomFloats(4 * 32 * 56 * 56, 5);
  const conv = {
    label: 'Conv 3x3 4x32x56x56 -> 64ch, pad 1',
    spec: {
      nodes: [{ opType: 'Conv', inputs: ['x', 'w', 'b'], outputs: ['y'], attributes: { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] } } }],
      inputs: [f32('x', [4, 32, 56, 56])],
      outputs: [f32('y', [4, 64, 56, 56])],
      initializers: [convW, convB],
    },
    feeds: { x: [convX, [4, 32, 56, 56]] },
    tfjs: (tf) => {
      const x = tf.tensor4d(nchwToNhwc(convX, [4, 32, 56, 56]), [4, 56, 56, 32]);
      const filter = tf.tensor4d(oihwToHwio(convW.data, 64, 32, 3, 3), [3, 3, 32, 64]);
      const bias = tf.tensor1d(convB.data);
      return {
        once: () => tf.tidy(() => tf.fused.conv2d({ x, filter, strides: 1, pad: 'same', bias })).dataSync(),
        toReference: (y) => nchwToNhwc(y, [4, 64, 56, 56], true),
        release: () => tf.dispose([x, filter, bias]),
      };
    },
  };
  const weights = {
    w1: init('w1', [16, 1, 3, 3], 11, 0.3), b1: init('b1', [16], 12, 0.1),
    w2: init('w2', [32, 16, 3, 3], 13, 0.1), b2: init('b2', [32], 14, 0.1),
    w3: init('w3', [10, 1568], 15, 0.05), b3: init('b3', [10], 16, 0.1),
  };
  const cnnX = randomFloats(64 * 28 * 28, 17);
  const cnn = {
    label: 'small CNN inference, batch 64 (1x28x28)',
    spec: {
      nodes: smallCnnNodes(),
      inputs: [f32('x', [64, 1, 28, 28])],
      outputs: [f32('y', [64, 10])],
      initializers: Object.values(weights),
    },
    feeds: { x: [cnnX, [64, 1, 28, 28]] },
    tfjs: (tf) => {
      const w = {
        w1: tf.tensor4d(oihwToHwio(weights.w1.data, 16, 1, 3, 3), [3, 3, 1, 16]),
        b1: tf.tensor1d(weights.b1.data),
        w2: tf.tensor4d(oihwToHwio(weights.w2.data, 32, 16, 3, 3), [3, 3, 16, 32]),
        b2: tf.tensor1d(weights.b2.data),
        w3: tf.tensor2d(denseForNhwc(weights.w3.data, 10, 32, 49), [1568, 10]),
        b3: tf.tensor1d(weights.b3.data),
      };
      // one channel: N×1×28×28 and N×28×28×1 are the same bytes
      const x = tf.tensor4d(cnnX, [64, 28, 28, 1]);
      const forward = () =>
        tf.tidy(() => {
          let h = tf.fused.conv2d({ x, filter: w.w1, strides: 1, pad: 'same', bias: w.b1, activation: 'relu' });
          h = tf.maxPool(h, 2, 2, 'valid');
          h = tf.fused.conv2d({ x: h, filter: w.w2, strides: 1, pad: 'same', bias: w.b2, activation: 'relu' });
          h = tf.maxPool(h, 2, 2, 'valid');
          return tf.fused.matMul({ a: tf.reshape(h, [64, 1568]), b: w.w3, bias: w.b3 });
        });
      return {
        once: () => {
          const y = forward();
          const data = y.dataSync();
          y.dispose();
          return data;
        },
        toReference: (y) => y,
        release: () => tf.dispose([x, ...Object.values(w)]),
      };
    },
  };
  return [matmul(512), matmul(1024), conv, cnn];
}

/**
 * bb's side of a case: `bytes` (an ONNX model) in a CpuSession, `inputs` (name → [data, dims])
 * resident in the module; `once()` runs it and returns the first output as a Float32Array.
 * `lib` is the package (js/dist/index.js), `bb` a loaded engine.
 */
export function bbRunner(lib, bb, bytes, inputs) {
  const model = lib.OnnxModel.decode(bb, bytes);
  const session = new lib.CpuSession(bb, model);
  const resident = Object.fromEntries(Object.entries(inputs).map(([n, [d, dims]]) => [n, lib.Tensor.from(bb, 'float', d, dims)]));
  const once = () => {
    const outputs = Object.values(session.run(resident));
    const y = outputs[0].toArray();
    for (const t of outputs) t.free();
    return y;
  };
  const release = () => {
    for (const t of Object.values(resident)) t.free();
    session.free();
    model.free();
  };
  return { once, output: once(), release };
}

/** onnxruntime-web's side: a session on `bytes` (every graph optimization); `once()` resolves to the first output. */
export async function ortRunner(ort, bytes, inputs) {
  const session = await ort.InferenceSession.create(bytes, { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
  const feeds = Object.fromEntries(Object.entries(inputs).map(([n, [d, dims]]) => [n, new ort.Tensor('float32', d, dims)]));
  const once = async () => Object.values(await session.run(feeds))[0].data;
  return { once, output: await once(), release: () => session.release() };
}

export const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1];

/**
 * Calls `run` (which may be async) `minRuns` times and on until `minMs` have passed: the
 * median wall-clock ms of a call, and the number of calls.
 */
export async function wallMs(run, minRuns, minMs) {
  const times = [];
  const start = performance.now();
  while (times.length < minRuns || performance.now() - start < minMs) {
    const t = performance.now();
    await run();
    times.push(performance.now() - t);
  }
  return { ms: median(times), runs: times.length };
}

/**
 * Starts tfjs-backend-wasm (the page's tf-core and tf-backend-wasm bundles, `tf`) on
 * `threads` threads, its files from `wasmPath`. tfjs-backend-wasm 4.22 runs at most
 * navigator.hardwareConcurrency / 2 threads (it takes a core for two hyper-threads),
 * whatever setThreadsCount asks: its module is told 2·n cores, so that n threads are what it
 * runs. Resolves to a description: version, threads, and whether its threaded SIMD build loaded.
 */
export async function startTfjsWasm(tf, threads, wasmPath) {
  Object.defineProperty(Navigator.prototype, 'hardwareConcurrency', { get: () => 2 * threads, configurable: true });
  tf.wasm.setWasmPaths(wasmPath);
  tf.wasm.setThreadsCount(threads);
  if (!(await tf.setBackend('wasm'))) throw new Error('tfjs: the wasm backend did not start');
  await tf.ready();
  return `tfjs ${tf.version_core} wasm, ${tf.wasm.getThreadsCount()} threads (threaded build: ${await tf.env().getAsync('WASM_HAS_MULTITHREAD_SUPPORT')}, SIMD: ${await tf.env().getAsync('WASM_HAS_SIMD_SUPPORT')})`;
}

/** Calls `run` for `ms` milliseconds of wall time (V8 tiers WebAssembly up in the background). */
export async function warmUp(run, ms) {
  const until = performance.now() + ms;
  do await run();
  while (performance.now() < until);
}

/** Whether `actual` has `reference`'s bits, and its max |difference| over max |reference|. */
export function agreement(actual, reference) {
  let diff = 0;
  let scale = 0;
  let identical = actual.length === reference.length;
  for (let i = 0; i < reference.length; i++) {
    if (!Object.is(actual[i], reference[i])) identical = false;
    diff = Math.max(diff, Math.abs(actual[i] - reference[i]));
    scale = Math.max(scale, Math.abs(reference[i]));
  }
  return { identical, relative: actual.length === reference.length ? diff / (scale || 1) : Infinity };
}
