/** Paths and fixtures the tests share. */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';

import { BbError, Dataset, type Bb, type ComponentContext, type HostTensor, type ModelComponent } from '../src/index.js';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
export const packageRoot = join(repoRoot, 'js');
export const wasmPath = join(packageRoot, 'wasm', 'bb.wasm');
export const onnxNodeTests = '/usr/include/onnx/backend/test/data/node';

/** Objects alive at once in one instance (BB_WASM_MAX_HANDLES), and the slot bits of a handle. */
export const BB_WASM_SLOT_BITS = 10;
export const BB_WASM_MAX_HANDLES = 1 << BB_WASM_SLOT_BITS;

/** The bytes of js/wasm/bb.wasm; fails the test with the command that makes it. */
export function wasmBytes(): Uint8Array<ArrayBuffer> {
  if (!existsSync(wasmPath)) {
    throw new Error(`${wasmPath} is missing: build it with \`bash scripts/build-wasm.sh\` from ${repoRoot}`);
  }
  return new Uint8Array(readFileSync(wasmPath));
}

/** BB_VERSION_STRING as the C header defines it. */
export function headerVersion(): string {
  const header = readFileSync(join(repoRoot, 'include', 'bb', 'common.h'), 'utf8');
  const match = /#define\s+BB_VERSION_STRING\s+"([^"]*)"/.exec(header);
  if (match?.[1] === undefined) throw new Error('BB_VERSION_STRING not found in include/bb/common.h');
  return match[1];
}

/** Every `model.onnx` of the ONNX backend node tests (libonnx-testdata), sorted by test name. */
export function onnxNodeModels(): string[] {
  if (!existsSync(onnxNodeTests)) {
    throw new Error(`${onnxNodeTests} is missing: install the Debian package libonnx-testdata (scripts/setup.sh does)`);
  }
  return readdirSync(onnxNodeTests)
    .sort()
    .map((test) => join(onnxNodeTests, test, 'model.onnx'))
    .filter((path) => existsSync(path));
}

/** One small, real model: the backend test of Add. */
export function addModel(): Uint8Array {
  return readFileSync(join(onnxNodeTests, 'test_add', 'model.onnx'));
}

/** Runs `call` and returns the BbError it throws; fails when it throws none. */
export function bbErrorOf(call: () => unknown): BbError {
  try {
    call();
  } catch (error) {
    if (error instanceof BbError) return error;
    throw error;
  }
  throw new Error('expected a BbError, but the call succeeded');
}

/** Headless Chromium for the browser tests, its arguments, and the static servers' content types. */
export { CHROMIUM, CHROMIUM_ARGS, CONTENT_TYPES } from './chromium.mjs';

/** The native bb tool the tests compare against: build/bb, or BB_NATIVE_BB. */
export function nativeBbPath(): string {
  const path = process.env['BB_NATIVE_BB'] ?? join(repoRoot, 'build', 'bb');
  if (!existsSync(path)) {
    throw new Error(`the native bb tool is missing at ${path}: build it with \`cmake -S . -B build && cmake --build build\` from the repository root, or point BB_NATIVE_BB at it`);
  }
  return path;
}

/** Debian's python3-onnx lives under the system interpreter, not whatever python3 is first on PATH. */
export const ONNX_PYTHON = process.env['BB_ONNX_PYTHON'] ?? '/usr/bin/python3';

/** A recorded node as ONNX's own parser reads it. */
export interface ParsedNode {
  readonly op_type: string;
  readonly domain: string;
  readonly input: string[];
  readonly output: string[];
  readonly attribute: string[];
}

/**
 * The functions of ModelProto bytes, parsed by ONNX's Python package (and, with `check`,
 * passed by onnx.checker): name → nodes.
 */
export function onnxFunctions(bytes: Uint8Array, check = true): Record<string, ParsedNode[]> {
  if (!existsSync(ONNX_PYTHON)) throw new Error(`${ONNX_PYTHON} is missing: install python3-onnx (scripts/setup.sh does) or set BB_ONNX_PYTHON`);
  const script = [
    'import json, sys, onnx',
    'm = onnx.load_from_string(sys.stdin.buffer.read())',
    ...(check ? ['onnx.checker.check_model(m)'] : []),
    'print(json.dumps({f.name: [{"op_type": n.op_type, "domain": n.domain, "input": list(n.input), "output": list(n.output),',
    '  "attribute": [a.name for a in n.attribute]} for n in f.node] for f in m.functions}))',
  ].join('\n');
  return JSON.parse(execFileSync(ONNX_PYTHON, ['-c', script], { input: bytes, encoding: 'utf8' })) as Record<string, ParsedNode[]>;
}

/**
 * Two Gaussian blobs in 2-D, class 0 around (2, 2) and class 1 around (4, 4), σ 0.6, seeded:
 * off the origin, so an untrained linear model scores about half and a trained one past 90 %.
 */
export function twoBlobs(bb: Bb, rows: number, seed: number): Dataset {
  let state = seed;
  const uniform = (): number => ((state = (state * 1103515245 + 12345) % 2147483648) / 2147483648);
  const gauss = (): number => Math.sqrt(-2 * Math.log(uniform() + 1e-9)) * Math.cos(2 * Math.PI * uniform());
  const x = new Float32Array(rows * 2);
  const y = new Float32Array(rows);
  for (let r = 0; r < rows; r++) {
    const label = r % 2;
    y[r] = label;
    x[2 * r] = (label ? 4 : 2) + 0.6 * gauss();
    x[2 * r + 1] = (label ? 4 : 2) + 0.6 * gauss();
  }
  return Dataset.fromArrays(bb, x, 2, y);
}

/** A logistic regression written in TypeScript: the ModelComponent contract, trained on the batches of its data slot. */
export class LogisticRegression implements ModelComponent {
  w = new Float32Array(3); // w0, w1, bias
  params(): HostTensor<'float'> {
    return { dtype: 'float', dims: [3], data: this.w.slice() };
  }
  loadParameters(params: HostTensor): void {
    this.w = Float32Array.from(params.data as Float32Array);
  }
  fit(params: HostTensor, context: ComponentContext): { trained: HostTensor<'float'>; samples: number } {
    this.loadParameters(params);
    let samples = 0;
    for (let step = 0; step < 5; step++) {
      const [batch, labels] = context.call('data', 'NextBatch', [], 2);
      if (batch?.kind !== 'tensor' || labels?.kind !== 'tensor') throw new Error('NextBatch gave no tensors');
      const x = batch.tensor.data as Float32Array;
      const y = labels.tensor.data as Float32Array;
      const grad = new Float32Array(3);
      for (let r = 0; r < y.length; r++) {
        const p = 1 / (1 + Math.exp(-(this.w[0]! * x[2 * r]! + this.w[1]! * x[2 * r + 1]! + this.w[2]!)));
        const e = p - y[r]!;
        grad[0]! += e * x[2 * r]!;
        grad[1]! += e * x[2 * r + 1]!;
        grad[2]! += e;
      }
      for (let i = 0; i < 3; i++) this.w[i]! -= (0.5 * grad[i]!) / y.length;
      samples += y.length;
    }
    return { trained: this.params(), samples };
  }
  evaluate(x: HostTensor, labels: HostTensor): number {
    const xs = x.data as Float32Array;
    const ys = labels.data as Float32Array;
    let right = 0;
    for (let r = 0; r < ys.length; r++) right += Number((this.w[0]! * xs[2 * r]! + this.w[1]! * xs[2 * r + 1]! + this.w[2]! > 0) === (ys[r] === 1));
    return right / ys.length;
  }
}
