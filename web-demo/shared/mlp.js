// Scores a CpuMlp parameter vector on held-out data: held-out accuracy and the mean
// softmax cross-entropy. The page and serve.mjs use it on the models they see travelling
// in envelopes (each client's update, the global model), so every peer gets a loss and an
// accuracy per round without asking the engine. The layout is CpuMlp's (docs/LEARNING.md,
// "The flat parameter vector"): per layer W [out, in] row-major, then b.
// Plain JavaScript with JSDoc types: Node runs it as it is, the page's TypeScript checks it.

/** @typedef {'relu' | 'tanh' | 'sigmoid' | 'identity'} Activation */

/**
 * @typedef {object} MlpShape
 * @property {readonly number[]} sizes layer sizes from the input to the output: [64, 32, 10]
 * @property {Activation} activation of the hidden layers
 * @property {number} inputScale every feature is multiplied by it before layer 1
 * @property {number} inputShift then this is added
 */

/** @typedef {{ loss: number, accuracy: number }} Score */

const ACTIVATIONS = ['relu', 'tanh', 'sigmoid', 'identity'];

/**
 * The shape a CpuMlp config describes; undefined when it is not one that ends in softmax
 * classes (no inputs/outputs, or mse loss).
 * @param {string} config
 * @returns {MlpShape | undefined}
 */
export function mlpShapeFromConfig(config) {
  const pairs = new Map(
    config
      .split(',')
      .filter((p) => p.includes('='))
      .map((p) => [p.slice(0, p.indexOf('=')).trim(), p.slice(p.indexOf('=') + 1).trim()]),
  );
  const inputs = Number(pairs.get('inputs'));
  const outputs = Number(pairs.get('outputs'));
  if (!(inputs >= 1 && outputs >= 2) || (pairs.get('loss') ?? 'xent') !== 'xent') return undefined;
  const hiddenText = pairs.get('hidden') ?? '';
  const hidden = hiddenText === '' ? [] : hiddenText.split('x').map(Number);
  if (hidden.some((w) => !Number.isInteger(w) || w < 1)) return undefined;
  const activation = /** @type {Activation} */ (pairs.get('activation') ?? 'relu');
  if (!ACTIVATIONS.includes(activation)) return undefined;
  return {
    sizes: [inputs, ...hidden, outputs],
    activation,
    inputScale: Number(pairs.get('input_scale') ?? 1),
    inputShift: Number(pairs.get('input_shift') ?? 0),
  };
}

/**
 * P = Σ s_l (s_{l-1} + 1).
 * @param {MlpShape} shape
 */
export function parameterCount(shape) {
  let n = 0;
  for (let l = 1; l < shape.sizes.length; l++) n += shape.sizes[l] * (shape.sizes[l - 1] + 1);
  return n;
}

/**
 * @param {Activation} kind
 * @param {number} v
 */
function activate(kind, v) {
  if (kind === 'relu') return v > 0 ? v : 0;
  if (kind === 'tanh') return Math.tanh(v);
  if (kind === 'sigmoid') return 1 / (1 + Math.exp(-v));
  return v;
}

/**
 * Loss and accuracy of `params` on rows `x` ([n, inputs], row-major) with class ids `y`.
 * The predicted class is the first largest logit, as CpuMlp's Evaluate takes it. Throws
 * when the parameter count or the rows do not match the shape.
 * @param {MlpShape} shape
 * @param {Float32Array} params
 * @param {Float32Array} x
 * @param {Float32Array} y
 * @returns {Score}
 */
export function scoreMlp(shape, params, x, y) {
  const p = parameterCount(shape);
  if (params.length !== p) throw new Error(`the model has ${params.length} parameters; ${shape.sizes.join('→')} needs ${p}`);
  const inputs = shape.sizes[0];
  const rows = y.length;
  if (x.length !== rows * inputs) throw new Error(`x holds ${x.length} values, not ${rows} rows of ${inputs}`);
  const widest = Math.max(...shape.sizes);
  let a = new Float64Array(widest);
  let z = new Float64Array(widest);
  const classes = shape.sizes[shape.sizes.length - 1];
  let loss = 0;
  let correct = 0;
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < inputs; c++) a[c] = x[r * inputs + c] * shape.inputScale + shape.inputShift;
    let offset = 0;
    for (let l = 1; l < shape.sizes.length; l++) {
      const fanIn = shape.sizes[l - 1];
      const out = shape.sizes[l];
      const bias = offset + out * fanIn;
      const last = l === shape.sizes.length - 1;
      for (let o = 0; o < out; o++) {
        let sum = params[bias + o];
        const row = offset + o * fanIn;
        for (let c = 0; c < fanIn; c++) sum += params[row + c] * a[c];
        z[o] = last ? sum : activate(shape.activation, sum);
      }
      offset = bias + out;
      [a, z] = [z, a];
    }
    // a holds the logits: log-softmax for the loss, the first argmax for the accuracy
    let best = 0;
    let max = -Infinity;
    for (let k = 0; k < classes; k++) {
      if (a[k] > max) {
        max = a[k];
        best = k;
      }
    }
    let sumExp = 0;
    for (let k = 0; k < classes; k++) sumExp += Math.exp(a[k] - max);
    const label = y[r];
    loss += Math.log(sumExp) + max - a[label];
    if (best === label) correct++;
  }
  return { loss: rows === 0 ? Number.NaN : loss / rows, accuracy: rows === 0 ? Number.NaN : correct / rows };
}
