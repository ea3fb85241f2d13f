// What the training benches share, under Node (train-vs-tfjs.mjs) and in a cross-origin-
// isolated page (train-browser.mjs): the CNNs written with tfjs-layers beside their ONNX
// twins, the batches, and tfjs's Conv2D gradient made of kernels its wasm backend has.
// Plain JavaScript with no imports: a caller hands in tfjs (core, with tfjs-layers where a
// model is built) and the package's encodeOnnxModel, so a page loads it as it is.
//
// tfjs-backend-wasm 4.22 registers no Conv2DBackpropFilter kernel, so a conv2d layer cannot
// be trained on it as shipped ("Kernel 'Conv2DBackpropFilter' not registered").
// registerConvGradient gives Conv2D a gradient made of kernels the wasm backend has, two
// ways (convGradRoutes: 'fast' through its XNNPACK conv2d, 'slow' through loops over every
// output); the targets are against the fast one.

/** Rows a training step takes. */
export const BATCH = 32;

const pair = (v) => (Array.isArray(v) ? v : [v, v]);

/** Conv2D's gradient in tfjs two ways: `fast` (stride 1, dilation 1) and `slow` (any). */
export function convGradRoutes(tf) {
  /** The explicit [top, bottom, left, right] padding tfjs's own convolution uses for these shapes. */
  const padding = (x, filter, strides, pad) => tf.backend_util.computeConv2DInfo(x.shape, filter.shape, strides, 1, pad).padInfo;
  /**
   * Through tfjs's kernels without a fast path: conv2dTranspose (Conv2DBackpropInput) and
   * Conv3DBackpropFilterV2 at depth 1, both loops over every output without XNNPACK.
   */
  const slow = {
    x: (dy, x, filter, [sh, sw], pad) => tf.conv2dTranspose(dy, filter, x.shape, [sh, sw], pad),
    filter: (dy, x, filter, [sh, sw], pad) => {
      const [n, h, w, c] = x.shape;
      const [, oh, ow, m] = dy.shape;
      const grad = tf.engine().runKernel(
        'Conv3DBackpropFilterV2',
        { x: tf.reshape(x, [n, 1, h, w, c]), dy: tf.reshape(dy, [n, 1, oh, ow, m]) },
        { strides: [1, 1, sh, sw, 1], pad, filterShape: [1, ...filter.shape] },
      );
      return tf.reshape(grad, filter.shape);
    },
  };
  /**
   * Through tfjs's fast kernels (stride 1, which both CNNs use): the input gradient is a
   * convolution of dy with the filter turned 180° and its channels swapped (the Conv2D
   * kernel, XNNPACK); the filter gradient is a convolution too, of the input with its
   * channels as the batch and its batch as the channels (x transposed to [c, h, w, n]) by dy
   * as the filter ([oh, ow, n, m]), whose [c, kh, kw, m] result is transposed to the
   * filter's [kh, kw, c, m]. (A matMul of the input's column matrix with dy, the columns
   * built from slices of the padded input, measured 3–5× slower: tfjs's Slice and Concat.)
   */
  const fast = {
    x: (dy, x, filter, strides, pad) => {
      const [kh, kw] = filter.shape;
      const { top, bottom, left, right } = padding(x, filter, strides, pad);
      const turned = tf.transpose(tf.reverse(filter, [0, 1]), [0, 1, 3, 2]);
      return tf.conv2d(dy, turned, 1, [[0, 0], [kh - 1 - top, kh - 1 - bottom], [kw - 1 - left, kw - 1 - right], [0, 0]]);
    },
    filter: (dy, x, filter, strides, pad) => {
      const { top, bottom, left, right } = padding(x, filter, strides, pad);
      const images = tf.transpose(x, [3, 1, 2, 0]);
      const kernels = tf.transpose(dy, [1, 2, 0, 3]);
      return tf.transpose(tf.conv2d(images, kernels, 1, [[0, 0], [top, bottom], [left, right], [0, 0]]), [1, 2, 0, 3]);
    },
  };
  return { fast, slow };
}

/**
 * Registers Conv2D's gradient in `tf` through `routes[routeOf()]` (routeOf read at every
 * backward pass, so a caller switches routes between steps). The fast route refuses a
 * stride or dilation other than 1 rather than compute something else.
 */
export function registerConvGradient(tf, routes, routeOf) {
  tf.registerGradient({
    kernelName: 'Conv2D',
    inputsToSave: ['x', 'filter'],
    gradFunc: (dy, [x, filter], attrs) => {
      const route = routes[routeOf()];
      const strides = pair(attrs.strides);
      if (route === routes.fast && (strides[0] !== 1 || strides[1] !== 1 || pair(attrs.dilations ?? 1).some((d) => d !== 1))) {
        throw new Error('the fast Conv2D gradient of this bench handles stride 1 and dilation 1 only');
      }
      return {
        x: () => route.x(dy, x, filter, strides, attrs.pad),
        filter: () => route.filter(dy, x, filter, strides, attrs.pad),
      };
    },
  });
}

/** The largest |fast − slow| of both gradients over their largest |slow|, on one random conv. */
export function checkFastGradient(tf, routes) {
  return tf.tidy(() => {
    const x = tf.randomUniform([4, 8, 8, 3], -1, 1, 'float32', 1);
    const filter = tf.randomUniform([3, 3, 3, 5], -1, 1, 'float32', 2);
    const dy = tf.randomUniform([4, 8, 8, 5], -1, 1, 'float32', 3);
    let worst = 0;
    for (const part of ['x', 'filter']) {
      const slow = routes.slow[part](dy, x, filter, [1, 1], 'same');
      const fast = routes.fast[part](dy, x, filter, [1, 1], 'same');
      const scale = tf.max(tf.abs(slow)).dataSync()[0];
      worst = Math.max(worst, tf.max(tf.abs(tf.sub(fast, slow))).dataSync()[0] / scale);
    }
    return worst;
  });
}

/** digits_cnn.onnx as tfjs layers (channels last): x/16, conv 16, pool, conv 32, pool, dense 64, dense 10. */
export function tfjsCnn(tfl) {
  const m = tfl.sequential();
  m.add(tfl.layers.rescaling({ inputShape: [8, 8, 1], scale: 1 / 16 }));
  m.add(tfl.layers.conv2d({ filters: 16, kernelSize: 3, padding: 'same', activation: 'relu' }));
  m.add(tfl.layers.maxPooling2d({ poolSize: 2 }));
  m.add(tfl.layers.conv2d({ filters: 32, kernelSize: 3, padding: 'same', activation: 'relu' }));
  m.add(tfl.layers.maxPooling2d({ poolSize: 2 }));
  m.add(tfl.layers.flatten());
  m.add(tfl.layers.dense({ units: 64, activation: 'relu' }));
  m.add(tfl.layers.dense({ units: 10 }));
  return m;
}

/**
 * The small CNN of infer-vs-peers.mjs on 28×28 images: conv 3×3 1→16 (pad 1) → ReLU →
 * MaxPool 2 → conv 3×3 16→32 (pad 1) → ReLU → MaxPool 2 → Flatten → Gemm 1568→10, as ONNX
 * for bb (random weights, He-uniform like tfjs's default initialiser's scale).
 */
export function mnistCnnOnnx(encodeOnnxModel) {
  let state = 7;
  const uniform = (count, bound) => Float32Array.from({ length: count }, () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return (state / 4294967296 * 2 - 1) * bound;
  });
  const conv = { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] } };
  const pool = { kernel_shape: { ints: [2, 2] }, strides: { ints: [2, 2] } };
  return encodeOnnxModel({
    opset: 17,
    nodes: [
      { opType: 'Conv', inputs: ['x', 'w1', 'b1'], outputs: ['c1'], attributes: conv },
      { opType: 'Relu', inputs: ['c1'], outputs: ['r1'] },
      { opType: 'MaxPool', inputs: ['r1'], outputs: ['p1'], attributes: pool },
      { opType: 'Conv', inputs: ['p1', 'w2', 'b2'], outputs: ['c2'], attributes: conv },
      { opType: 'Relu', inputs: ['c2'], outputs: ['r2'] },
      { opType: 'MaxPool', inputs: ['r2'], outputs: ['p2'], attributes: pool },
      { opType: 'Flatten', inputs: ['p2'], outputs: ['f'], attributes: { axis: { int: 1 } } },
      { opType: 'Gemm', inputs: ['f', 'w3', 'b3'], outputs: ['y'], attributes: { transB: { int: 1 } } },
    ],
    inputs: [{ name: 'x', dtype: 'float', dims: ['N', 1, 28, 28] }],
    outputs: [{ name: 'y', dtype: 'float', dims: ['N', 10] }],
    initializers: [
      { name: 'w1', dtype: 'float', dims: [16, 1, 3, 3], data: uniform(144, Math.sqrt(6 / 9)) },
      { name: 'b1', dtype: 'float', dims: [16], data: new Float32Array(16) },
      { name: 'w2', dtype: 'float', dims: [32, 16, 3, 3], data: uniform(4608, Math.sqrt(6 / 144)) },
      { name: 'b2', dtype: 'float', dims: [32], data: new Float32Array(32) },
      { name: 'w3', dtype: 'float', dims: [10, 1568], data: uniform(15680, Math.sqrt(6 / 1568)) },
      { name: 'b3', dtype: 'float', dims: [10], data: new Float32Array(10) },
    ],
  });
}

/** mnistCnnOnnx's architecture as tfjs layers (NHWC; tfjs's own initial weights). */
export function tfjsMnistCnn(tfl) {
  const m = tfl.sequential();
  m.add(tfl.layers.conv2d({ inputShape: [28, 28, 1], filters: 16, kernelSize: 3, padding: 'same', activation: 'relu' }));
  m.add(tfl.layers.maxPooling2d({ poolSize: 2 }));
  m.add(tfl.layers.conv2d({ filters: 32, kernelSize: 3, padding: 'same', activation: 'relu' }));
  m.add(tfl.layers.maxPooling2d({ poolSize: 2 }));
  m.add(tfl.layers.flatten());
  m.add(tfl.layers.dense({ units: 10 }));
  return m;
}

/** digits_mlp.onnx: x/16, dense 32 relu, dense 10. */
export function tfjsMlp(tfl) {
  const m = tfl.sequential();
  m.add(tfl.layers.rescaling({ inputShape: [64], scale: 1 / 16 }));
  m.add(tfl.layers.dense({ units: 32, activation: 'relu' }));
  m.add(tfl.layers.dense({ units: 10 }));
  return m;
}

/**
 * A source of batches: `next(count, pixels)` gives `count` batches of BATCH rows (digits'
 * 0–16 grey levels for 64 pixels, uniform [0, 1) otherwise) and labels 0–9, from one
 * generator whose state runs on across calls (the same sequence for every caller).
 */
export function batchSource(seed = 42) {
  const random = () => ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 4294967296);
  return (count, pixels) =>
    Array.from({ length: count }, () => ({
      x: Float32Array.from({ length: BATCH * pixels }, () => (pixels === 64 ? Math.floor(random() * 17) : random())),
      labels: Float32Array.from({ length: BATCH }, () => Math.floor(random() * 10)),
    }));
}

/**
 * tfjs's training step on `model` with Adam (lr 1e-3): `step()` runs one optimizer update
 * on the next of `data`'s batches and returns the loss read back; `rewind()` starts the
 * batches over; `dispose()` frees the batches' tensors.
 */
export function tfjsTrainer(tf, model, data, shape) {
  const optimizer = tf.train.adam(1e-3);
  const tensors = data.map((b) => ({ x: tf.tensor(b.x, [BATCH, ...shape]), labels: tf.oneHot(tf.tensor1d(b.labels, 'int32'), 10) }));
  let index = 0;
  return {
    step() {
      const b = tensors[index++ % tensors.length];
      const loss = optimizer.minimize(() => tf.losses.softmaxCrossEntropy(b.labels, model.apply(b.x)), true);
      const value = loss.dataSync()[0];
      loss.dispose();
      return value;
    },
    rewind: () => void (index = 0),
    dispose: () => tensors.forEach((b) => (b.x.dispose(), b.labels.dispose())),
  };
}
