/**
 * CPU sessions through bb.wasm: ONNX backend-test models against their expected outputs
 * (decoded in JavaScript), models built here against results computed here, and every
 * way a run can be refused.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, beforeEach, describe, expect, test } from 'vitest';

import {
  BbError,
  BbErrorCode,
  CpuSession,
  DTYPE_NAMES,
  encodeOnnxModel,
  loadBb,
  OnnxModel,
  Tensor,
  type Bb,
  type DType,
  type OnnxModelSpec,
  type TensorArray,
} from '../src/index.js';
import { BB_WASM_MAX_HANDLES, bbErrorOf, onnxNodeTests, repoRoot, wasmBytes } from './support.js';
import { readTensorProto } from './tensor-proto.js';

let module: WebAssembly.Module;
let bb: Bb;

beforeAll(async () => {
  module = await WebAssembly.compile(wasmBytes());
});

beforeEach(async () => {
  bb = await loadBb(module);
});

function lastError(): { code: number; message: string } {
  return { code: bb.exports.bb_wasm_last_error_code(), message: bb.readCString(bb.exports.bb_wasm_last_error()) };
}

/** A model of one node over float inputs and outputs of the given shapes. */
function oneNode(opType: string, inputs: Record<string, number[]>, outputs: Record<string, number[]>): OnnxModelSpec {
  return {
    opset: 17,
    nodes: [{ opType, name: `the_${opType.toLowerCase()}`, inputs: Object.keys(inputs), outputs: Object.keys(outputs) }],
    inputs: Object.entries(inputs).map(([name, dims]) => ({ name, dtype: 'float', dims })),
    outputs: Object.entries(outputs).map(([name, dims]) => ({ name, dtype: 'float', dims })),
  };
}

/** A graph without nodes whose outputs are its inputs: every run passes tensors straight through. */
function passThrough(values: Record<string, DType>): OnnxModelSpec {
  const infos = Object.entries(values).map(([name, dtype]) => ({ name, dtype, dims: ['n'] }));
  return { opset: 17, nodes: [], inputs: infos, outputs: infos };
}

function sessionOf(spec: OnnxModelSpec): { model: OnnxModel; session: CpuSession } {
  const model = OnnxModel.decode(bb, encodeOnnxModel(spec));
  return { model, session: new CpuSession(bb, model) };
}

function freeAll(...objects: ({ free(): void } | undefined)[]): void {
  for (const object of objects) object?.free();
}

/** Where two arrays differ beyond the ONNX backend tests' tolerance (rtol 1e-3, atol 1e-7), or undefined. */
function mismatch(actual: TensorArray, expected: TensorArray): string | undefined {
  if (actual.length !== expected.length) return `length ${actual.length}, expected ${expected.length}`;
  for (let i = 0; i < actual.length; i++) {
    const a = Number(actual[i]);
    const e = Number(expected[i]);
    if (Number.isNaN(a) && Number.isNaN(e)) continue;
    if (!(Math.abs(a - e) <= 1e-7 + 1e-3 * Math.abs(e))) return `element ${i} is ${a}, expected ${e}`;
  }
  return undefined;
}

describe('ONNX backend tests run through CpuSession', () => {
  const CASES = [
    'test_add',
    'test_add_bcast',
    'test_add_uint8',
    'test_relu',
    'test_matmul_2d',
    'test_matmul_4d',
    'test_gemm_all_attributes',
    'test_conv_with_strides_padding',
    'test_reshape_extended_dims',
    'test_softmax_axis_1',
    'test_reduce_sum_keepdims_example',
  ];

  test.each(CASES)('%s gives the expected outputs', (name) => {
    const dir = join(onnxNodeTests, name);
    const data = join(dir, 'test_data_set_0');
    const pbs = (prefix: string): string[] =>
      readdirSync(data)
        .filter((file) => file.startsWith(prefix))
        .sort()
        .map((file) => join(data, file));
    const model = OnnxModel.decode(bb, readFileSync(join(dir, 'model.onnx')));
    const session = new CpuSession(bb, model);
    // As the ONNX backend runner does: input_N feeds the Nth input, output_N is the Nth output.
    const inputs = pbs('input_').map((path) => readTensorProto(path));
    expect(inputs.length).toBe(session.inputNames.length);
    const tensors = inputs.map(({ dtype, dims, data: values }) => Tensor.from(bb, dtype, values, dims));
    const outputs = session.run(Object.fromEntries(session.inputNames.map((input, i) => [input, tensors[i] as Tensor])));
    const expected = pbs('output_').map((path) => readTensorProto(path));
    expect(Object.keys(outputs)).toEqual(session.outputNames);
    expected.forEach((want, i) => {
      const got = outputs[session.outputNames[i] as string] as Tensor;
      expect(got.dtype).toBe(want.dtype);
      expect(got.dims).toEqual(want.dims);
      expect(mismatch(got.toArray(), want.data)).toBeUndefined();
    });
    freeAll(session, model, ...tensors, ...Object.values(outputs));
  });
});

describe('models built in JavaScript', () => {
  test('a MatMul with a constant operand matches the product computed here, and reports its memory', () => {
    const [m, k, n] = [5, 7, 3];
    const a = Float32Array.from({ length: m * k }, (_, i) => Math.sin(i));
    const b = Float32Array.from({ length: k * n }, (_, i) => Math.cos(i) - 0.25);
    const { model, session } = sessionOf({
      opset: 17,
      nodes: [{ opType: 'MatMul', inputs: ['a', 'b'], outputs: ['y'] }],
      inputs: [{ name: 'a', dtype: 'float', dims: ['m', k] }],
      outputs: [{ name: 'y', dtype: 'float', dims: ['m', n] }],
      initializers: [{ name: 'b', dtype: 'float', dims: [k, n], data: b }],
    });
    expect(session.inputNames).toEqual(['a']); // the initializer is not an input
    expect(session.outputNames).toEqual(['y']);
    const input = Tensor.from(bb, 'float', a, [m, k]);
    const { y } = session.run({ a: input });
    const expected = new Float32Array(m * n);
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let sum = 0;
        for (let p = 0; p < k; p++) sum += (a[i * k + p] as number) * (b[p * n + j] as number);
        expected[i * n + j] = sum;
      }
    }
    expect(y?.dims).toEqual([m, n]);
    expect(mismatch(y?.toArray() ?? new Float32Array(0), expected)).toBeUndefined();
    // One node: the only intermediate alive is its output.
    expect(session.peakBytes).toBe(m * n * 4);
    freeAll(y, input, session, model);
  });

  test('tensors of every type pass through a graph unchanged, and outlive the session, model and inputs', () => {
    const types = Object.fromEntries(DTYPE_NAMES.map((dtype) => [`v_${dtype}`, dtype]));
    const { model, session } = sessionOf(passThrough(types));
    expect(session.inputNames).toEqual(Object.keys(types));
    const inputs = Object.fromEntries(
      DTYPE_NAMES.map((dtype) => {
        const tensor = Tensor.zeros(bb, dtype, [3]);
        const view = tensor.view();
        const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
        bytes.forEach((_, i) => {
          bytes[i] = (i * 37 + dtype.length) & 0xff;
        });
        return [`v_${dtype}`, tensor];
      }),
    );
    const expected = Object.fromEntries(Object.entries(inputs).map(([name, tensor]) => [name, tensor.toArray()]));
    const outputs = session.run(inputs);
    freeAll(session, model, ...Object.values(inputs));
    for (const [name, tensor] of Object.entries(outputs)) {
      expect(tensor.dtype).toBe(types[name]);
      expect(tensor.toArray()).toEqual(expected[name]);
      tensor.free();
    }
  });

  test('each run binds its inputs by their own names, whatever the order or names of the run before', () => {
    const { model, session } = sessionOf(oneNode('Sub', { a: [2], b: [2] }, { d: [2] }));
    const x = Tensor.from(bb, 'float', Float32Array.of(10, 20), [2]);
    const y = Tensor.from(bb, 'float', Float32Array.of(1, 2), [2]);
    const difference = (inputs: Record<string, Tensor>): number[] => {
      const { d } = session.run(inputs);
      const values = Array.from(d!.toArray() as Float32Array);
      d!.free();
      return values;
    };
    expect(difference({ a: x, b: y })).toEqual([9, 18]);
    expect(difference({ a: x, b: y })).toEqual([9, 18]);
    expect(difference({ b: y, a: x })).toEqual([9, 18]);
    expect(difference({ a: y, b: x })).toEqual([-9, -18]);
    expect(bbErrorOf(() => session.run({ a: x, c: y })).message).toBe('session run: the graph has no input named c');
    expect(bbErrorOf(() => session.run({ a: x })).message).toBe('session run: graph input b was not given');
    expect(difference({ b: x, a: y })).toEqual([-9, -18]);
    freeAll(x, y, session, model);
  });

  test('outputs are own properties whatever their names (__proto__ too), with their dims read from the module', () => {
    const { model, session } = sessionOf(oneNode('Relu', { x: [2, 3] }, { ['__proto__']: [2, 3] }));
    const x = Tensor.from(bb, 'float', Float32Array.of(-1, 2, -3, 4, -5, 6), [2, 3]);
    for (let run = 0; run < 2; run++) {
      const outputs = session.run({ x });
      expect(Object.keys(outputs)).toEqual(['__proto__']);
      const y = Object.getOwnPropertyDescriptor(outputs, '__proto__')?.value as Tensor;
      expect(Object.getPrototypeOf(outputs)).toBe(Object.prototype);
      expect(y.dims).toEqual([2, 3]);
      expect(Object.isFrozen(y.dims)).toBe(true);
      expect(y.size).toBe(6);
      expect(y.toArray()).toEqual(Float32Array.of(0, 2, 0, 4, 0, 6));
      y.free();
    }
    // a name with NUL is refused even right after a run whose names were accepted
    const error = bbErrorOf(() => session.run({ ['x\0']: x }));
    expect(error.code).toBe(BbErrorCode.InvalidArgument);
    expect(error.message).toBe('CpuSession.run: an input name contains NUL');
    freeAll(x, session, model);
  });

  test('a run of many inputs and outputs (more than the run keeps on its stack) binds each by name', () => {
    const names = Array.from({ length: 24 }, (_, i) => `v${i}`);
    const { model, session } = sessionOf(passThrough(Object.fromEntries(names.map((name) => [name, 'float' as const]))));
    const inputs = Object.fromEntries(names.map((name, i) => [name, { dtype: 'float' as const, data: Float32Array.of(i, -i), dims: [2] }]));
    for (let run = 0; run < 2; run++) {
      const outputs = session.runArrays(inputs);
      expect(Object.keys(outputs)).toEqual(names);
      names.forEach((name, i) => expect(outputs[name]?.data).toEqual(Float32Array.of(i, -i)));
    }
    freeAll(session, model);
  });

  test('the model may be freed before its session, which keeps running', () => {
    const model = OnnxModel.decode(bb, encodeOnnxModel(oneNode('Relu', { x: [4] }, { y: [4] })));
    const session = new CpuSession(bb, model);
    const handle = model.handle;
    model.free();
    expect(bb.exports.bb_wasm_model_encode(handle)).toBe(BbErrorCode.InvalidArgument);
    const x = Tensor.from(bb, 'float', Float32Array.of(-1, 2, -3, 4), [4]);
    const { y } = session.run({ x });
    expect(y?.toArray()).toEqual(Float32Array.of(0, 2, 0, 4));
    freeAll(x, y, session);
  });

  test('the operator listing is the native `bb ops` listing', () => {
    const ops = CpuSession.ops(bb);
    expect(ops.length).toBeGreaterThan(0);
    expect(ops.map((op) => op.name)).toEqual(ops.map((op) => op.name).sort());
    const tool = process.env['BB_NATIVE_BB'] ?? join(repoRoot, 'build', 'bb');
    if (!existsSync(tool)) throw new Error(`the native bb tool is missing at ${tool}: build it with cmake (see README)`);
    const lines = execFileSync(tool, ['ops'], { encoding: 'utf8' }).split('\n');
    // the ai.onnx section: from its heading to the ai.bytesandbrains.grad heading
    const native = lines
      .slice(1, lines.findIndex((line) => line.includes('ai.bytesandbrains.grad operators')))
      .filter((line) => line.trim() !== '')
      .map((line) => {
        const [name = '', types = ''] = line.trim().split(/\s+/);
        return { name, types: types.split(',') };
      });
    expect(ops).toEqual(native);
    for (const op of ops) for (const type of op.types) expect(DTYPE_NAMES).toContain(type);

    expect(bb.exports.bb_wasm_cpu_op_name(ops.length)).toBe(0);
    expect(lastError()).toEqual({
      code: BbErrorCode.InvalidArgument,
      message: `operator ${ops.length} does not exist: the CPU backend has ${ops.length}`,
    });
    expect(bb.exports.bb_wasm_cpu_op_types(-1)).toBe(0);
  });
});

/** How many more handles the instance can issue now (each test has a fresh instance). */
function freeHandleCount(): number {
  const made: Tensor[] = [];
  try {
    for (;;) made.push(Tensor.zeros(bb, 'uint8', [0]));
  } catch (error) {
    if (!(error instanceof BbError) || error.code !== BbErrorCode.Limit) throw error;
  }
  freeAll(...made);
  return made.length;
}

describe('runArrays: typed arrays in, typed arrays out', () => {
  const softmaxSpec: OnnxModelSpec = {
    opset: 17,
    nodes: [{ opType: 'Softmax', inputs: ['x'], outputs: ['y'], attributes: { axis: { int: -1 } } }],
    inputs: [{ name: 'x', dtype: 'float', dims: ['n', 3] }],
    outputs: [{ name: 'y', dtype: 'float', dims: ['n', 3] }],
  };
  /** softmax over each row of 3, in double */
  const softmaxRows = (x: Float32Array): number[] =>
    Array.from(x, (_, i) => {
      const row = x.subarray(i - (i % 3), i - (i % 3) + 3);
      const max = Math.max(...row);
      return Math.exp(x[i]! - max) / row.reduce((sum, v) => sum + Math.exp(v - max), 0);
    });

  test('each run computes on its own data, across changes of shape, and returns copies outside module memory', () => {
    const { model, session } = sessionOf(softmaxSpec);
    const handlesBefore = freeHandleCount();
    const inputs = [
      { data: Float32Array.of(1, 2, 3), dims: [1, 3] },
      { data: Float32Array.of(3, 2, 1), dims: [1, 3] },
      { data: Float32Array.of(0, 0, 0, -1, 5, 2), dims: [2, 3] },
      { data: Float32Array.of(-4, 4, 0), dims: [1, 3] },
    ];
    const results = inputs.map(({ data, dims }) => session.runArrays({ x: { dtype: 'float', data, dims } }));
    results.forEach(({ y }, k) => {
      expect(y?.dtype).toBe('float');
      expect(y?.dims).toEqual(inputs[k]!.dims);
      expect(y?.data.buffer).not.toBe(bb.exports.memory.buffer);
      const expected = softmaxRows(inputs[k]!.data);
      Array.from(y!.data as Float32Array).forEach((v, i) => expect(v).toBeCloseTo(expected[i]!, 6));
    });
    // the same values as run() on a Tensor
    const x = Tensor.from(bb, 'float', inputs[2]!.data, [2, 3]);
    const { y } = session.run({ x });
    expect(results[2]!['y']!.data).toEqual(y!.toArray());
    freeAll(x, y);
    // one tensor is kept for the input between runs, and released with the session
    expect(freeHandleCount()).toBe(handlesBefore - 1);
    freeAll(session, model);
    expect(freeHandleCount()).toBe(handlesBefore + 2);
  });

  test('into: each output is written into the caller\'s array, which is returned', () => {
    const { model, session } = sessionOf(softmaxSpec);
    const into = new Float32Array(3).fill(NaN);
    for (const data of [Float32Array.of(1, 2, 3), Float32Array.of(9, 0, 0)]) {
      const { y } = session.runArrays({ x: { dtype: 'float', data, dims: [1, 3] } }, { y: into });
      expect(y?.data).toBe(into);
      expect(y?.dims).toEqual([1, 3]);
      Array.from(into).forEach((v, i) => expect(v).toBeCloseTo(softmaxRows(data)[i]!, 6));
    }
    freeAll(session, model);
  });

  test('the module memory growing between runs: the input still lands in its tensor, not at a stale address', () => {
    const { model, session } = sessionOf(oneNode('Relu', { x: [4] }, { y: [4] }));
    const first = session.runArrays({ x: { dtype: 'float', data: Float32Array.of(-1, 2, -3, 4), dims: [4] } });
    expect(first['y']?.data).toEqual(Float32Array.of(0, 2, 0, 4));
    const buffer = bb.exports.memory.buffer;
    bb.exports.memory.grow(4);
    expect(buffer.byteLength).toBe(0); // the old buffer is detached
    const second = session.runArrays({ x: { dtype: 'float', data: Float32Array.of(5, -6, 7, -8), dims: [4] } });
    expect(second['y']?.data).toEqual(Float32Array.of(5, 0, 7, 0));
    expect(first['y']?.data).toEqual(Float32Array.of(0, 2, 0, 4)); // a copy, untouched by the runs after it
    freeAll(session, model);
  });

  test('an input viewing module memory that staging grows: its elements are copied, no handle leaks', () => {
    const { model, session } = sessionOf(oneNode('Relu', { x: [-1] }, { y: [-1] }));
    const handlesBefore = freeHandleCount();
    // a tensor as large as the whole memory, so that staging a copy of it must grow the memory
    const n = bb.exports.memory.buffer.byteLength / 4;
    const source = Tensor.zeros(bb, 'float', [n]);
    const elements = source.view();
    elements.set(Float32Array.of(-1, 2, -3, 4));
    elements[n - 1] = 5;
    const buffer = bb.exports.memory.buffer;
    const { y } = session.runArrays({ x: { dtype: 'float', data: elements, dims: [n] } });
    expect(buffer.byteLength).toBe(0); // staging grew the memory: the caller's view is detached
    expect(y?.data.subarray(0, 4)).toEqual(Float32Array.of(0, 2, 0, 4));
    expect(y?.data[n - 1]).toBe(5);
    // Tensor.from on such a view: the same elements, or a clear error, never a leaked handle
    const copy = Tensor.from(bb, 'float', source.view(), [n]);
    expect(copy.view()[n - 1]).toBe(5);
    freeAll(copy, source, session, model);
    expect(freeHandleCount()).toBe(handlesBefore + 2);
  });

  test('bad inputs and into arrays are refused with the reason, leaking no handle', () => {
    const { model, session } = sessionOf(oneNode('Add', { a: [2], b: [2] }, { sum: [2] }));
    const a = { dtype: 'float', data: Float32Array.of(1, 2), dims: [2] } as const;
    session.runArrays({ a, b: a });
    const handlesBefore = freeHandleCount();
    const refused = (call: () => unknown): [number, string] => {
      const error = bbErrorOf(call);
      return [error.code, error.message];
    };
    expect(refused(() => session.runArrays({ a, b: { dtype: 'float', data: Float64Array.of(1, 2), dims: [2] } as never }))).toEqual([
      BbErrorCode.Type,
      'CpuSession.runArrays: input b: float tensors take a Float32Array, got Float64Array',
    ]);
    expect(refused(() => session.runArrays({ a, b: { dtype: 'float', data: Float32Array.of(1, 2, 3), dims: [2] } }))).toEqual([
      BbErrorCode.InvalidArgument,
      'CpuSession.runArrays: input b: dims [2] need 2 Float32Array elements, got 3',
    ]);
    expect(refused(() => session.runArrays({ a, b: { dtype: 'float', data: Float32Array.of(1, 2, 3), dims: [4] } }))).toEqual([
      BbErrorCode.InvalidArgument,
      'CpuSession.runArrays: input b: dims [4] need 4 Float32Array elements, got 3',
    ]);
    const detached = Float32Array.of(1, 2);
    structuredClone(detached.buffer, { transfer: [detached.buffer] });
    expect(refused(() => session.runArrays({ a, b: { dtype: 'float', data: detached, dims: [2] } }))).toEqual([
      BbErrorCode.InvalidArgument,
      'CpuSession.runArrays: input b: dims [2] need 2 Float32Array elements, got 0 (its buffer is detached: transferred to a worker or a memory that grew)',
    ]);
    expect(refused(() => session.runArrays({ a, b: { dtype: 'floaty', data: a.data, dims: [2] } as never }))).toEqual([
      BbErrorCode.Type,
      'CpuSession.runArrays: input b: floaty is not an element type',
    ]);
    expect(refused(() => session.runArrays({ a, b: a.data as never }))).toEqual([
      BbErrorCode.Type,
      'CpuSession.runArrays: input b: undefined is not an element type',
    ]);
    expect(refused(() => session.runArrays({ a, b: null as never }))).toEqual([
      BbErrorCode.InvalidArgument,
      'CpuSession.runArrays: input b is null, not { dtype, data, dims }',
    ]);
    expect(refused(() => session.runArrays({ a, b: { dtype: 'int32', data: Int32Array.of(1, 2), dims: [2] } }))).toEqual([
      BbErrorCode.Type,
      'session run: input b: the graph declares float, got int32[2]',
    ]);
    expect(refused(() => session.runArrays({ a, b: a }, { total: new Float32Array(2) }))).toEqual([
      BbErrorCode.NotFound,
      'CpuSession.runArrays: into names total, which is not an output of the graph',
    ]);
    expect(refused(() => session.runArrays({ a, b: a }, { sum: new Float32Array(3) }))).toEqual([
      BbErrorCode.InvalidArgument,
      'CpuSession.runArrays: into.sum: dims [2] need 2 Float32Array elements, got 3',
    ]);
    expect(refused(() => session.runArrays({ a, b: a }, { sum: new Int32Array(2) }))).toEqual([
      BbErrorCode.Type,
      'CpuSession.runArrays: into.sum: the output is float, which takes a Float32Array, got Int32Array',
    ]);
    // the refused runs left the kept input tensors (one re-made as int32) and nothing else
    expect(freeHandleCount()).toBe(handlesBefore);
    expect(session.runArrays({ a, b: a })['sum']?.data).toEqual(Float32Array.of(2, 4));
    freeAll(session, model);
    expect(bbErrorOf(() => session.runArrays({ a, b: a })).message).toBe('CpuSession.runArrays: the session was freed');
  });

  test('an into array refused leaves every into array as it was', () => {
    const spec: OnnxModelSpec = {
      ...oneNode('Relu', { x: [2] }, { a: [2], b: [2] }),
      nodes: [
        { opType: 'Relu', inputs: ['x'], outputs: ['a'] },
        { opType: 'Neg', inputs: ['x'], outputs: ['b'] },
      ],
    };
    const { model, session } = sessionOf(spec);
    const x = { dtype: 'float', data: Float32Array.of(-1, 2), dims: [2] } as const;
    const a = new Float32Array(2).fill(7);
    for (const b of [new Int32Array(2), new Float32Array(3)]) {
      expect(() => session.runArrays({ x }, { a, b })).toThrow(BbError);
      expect(a).toEqual(Float32Array.of(7, 7));
    }
    const { a: written, b: negated } = session.runArrays({ x }, { a, b: new Float32Array(2) });
    expect(written?.data).toBe(a);
    expect(a).toEqual(Float32Array.of(0, 2));
    expect(negated?.data).toEqual(Float32Array.of(1, -2));
    freeAll(session, model);
  });

  test('names the run refuses, and initializers overridden, keep no tensor after the run', () => {
    const spec: OnnxModelSpec = {
      ...oneNode('Add', { a: [2] }, { sum: [2] }),
      nodes: [{ opType: 'Add', inputs: ['a', 'w'], outputs: ['sum'] }],
      initializers: [{ name: 'w', dtype: 'float', dims: [2], data: Float32Array.of(10, 20) }],
    };
    const { model, session } = sessionOf(spec);
    const a = { dtype: 'float', data: Float32Array.of(1, 2), dims: [2] } as const;
    expect(session.runArrays({ a })['sum']?.data).toEqual(Float32Array.of(11, 22));
    const handlesBefore = freeHandleCount();
    for (let i = 0; i < 5; i++) {
      const error = bbErrorOf(() => session.runArrays({ a, [`z${i}`]: a }));
      expect([error.code, error.message]).toEqual([BbErrorCode.NotFound, `session run: the graph has no input named z${i}`]);
    }
    expect(session.runArrays({ a, w: { dtype: 'float', data: Float32Array.of(100, 200), dims: [2] } })['sum']?.data).toEqual(
      Float32Array.of(101, 202),
    );
    expect(session.runArrays({ a })['sum']?.data).toEqual(Float32Array.of(11, 22));
    expect(freeHandleCount()).toBe(handlesBefore);
    freeAll(session, model);
  });

  test('an output named __proto__ is an own property of the result, into the caller\'s array too', () => {
    const { model, session } = sessionOf(oneNode('Relu', { x: [2] }, { ['__proto__']: [2] }));
    const into = new Float32Array(2);
    for (const target of [undefined, { ['__proto__']: into }]) {
      const feeds = { x: { dtype: 'float', data: Float32Array.of(-1, 2), dims: [2] } } as const;
      const outputs = target === undefined ? session.runArrays(feeds) : session.runArrays(feeds, Object.fromEntries([['__proto__', into]]));
      expect(Object.keys(outputs)).toEqual(['__proto__']);
      expect(Object.getPrototypeOf(outputs)).toBe(Object.prototype);
      const y = Object.getOwnPropertyDescriptor(outputs, '__proto__')?.value as { data: Float32Array };
      expect(y.data).toEqual(Float32Array.of(0, 2));
      if (target !== undefined) expect(y.data).toBe(into);
    }
    freeAll(session, model);
  });

  test('an output that is the input itself (a graph without nodes) is copied out into the caller\'s array', () => {
    const { model, session } = sessionOf(passThrough({ x: 'float' }));
    const into = new Float32Array(2);
    const { x } = session.runArrays({ x: { dtype: 'float', data: Float32Array.of(7, 8), dims: [2] } }, { x: into });
    expect(x?.data).toBe(into);
    expect(into).toEqual(Float32Array.of(7, 8));
    freeAll(session, model);
  });
});

describe('runs that are refused, with the library’s reason', () => {
  const addSpec = oneNode('Add', { a: [2], b: [2] }, { sum: [2] });

  test('an unknown input name', () => {
    const { model, session } = sessionOf(addSpec);
    const a = Tensor.from(bb, 'float', Float32Array.of(1, 2), [2]);
    const error = bbErrorOf(() => session.run({ a, b: a, c: a }));
    expect(error.code).toBe(BbErrorCode.NotFound);
    expect(error.message).toBe('session run: the graph has no input named c');
    freeAll(a, session, model);
  });

  test('a missing input', () => {
    const { model, session } = sessionOf(addSpec);
    const a = Tensor.from(bb, 'float', Float32Array.of(1, 2), [2]);
    const error = bbErrorOf(() => session.run({ a }));
    expect(error.code).toBe(BbErrorCode.InvalidArgument);
    expect(error.message).toBe('session run: graph input b was not given');
    freeAll(a, session, model);
  });

  test('an input of the wrong element type', () => {
    const { model, session } = sessionOf(addSpec);
    const a = Tensor.from(bb, 'float', Float32Array.of(1, 2), [2]);
    const b = Tensor.from(bb, 'int32', Int32Array.of(1, 2), [2]);
    const error = bbErrorOf(() => session.run({ a, b }));
    expect(error.code).toBe(BbErrorCode.Type);
    expect(error.message).toBe('session run: input b: the graph declares float, got int32[2]');
    freeAll(a, b, session, model);
  });

  test('a node that fails names itself', () => {
    const { model, session } = sessionOf(addSpec);
    const a = Tensor.from(bb, 'float', Float32Array.of(1, 2), [2]);
    const b = Tensor.from(bb, 'float', Float32Array.of(1, 2, 3), [3]);
    const error = bbErrorOf(() => session.run({ a, b }));
    expect(error.code).toBe(BbErrorCode.Type);
    expect(error.message).toMatch(/^session run: node the_add \(Add\): .*\[2\].*\[3\]/);
    freeAll(a, b, session, model);
  });

  test('an operator the backend lacks, when the session is made', () => {
    const model = OnnxModel.decode(bb, encodeOnnxModel(oneNode('NoSuchOp', { x: [1] }, { y: [1] })));
    const error = bbErrorOf(() => new CpuSession(bb, model));
    expect(error.code).toBe(BbErrorCode.Unsupported);
    expect(error.message).toBe('session new: node the_nosuchop: NoSuchOp is not supported by the CPU backend at opset 17');
    model.free();
  });

  test('freed tensors, sessions and models, and tensors of another instance', async () => {
    const { model, session } = sessionOf(addSpec);
    const a = Tensor.from(bb, 'float', Float32Array.of(1, 2), [2]);
    const freed = Tensor.from(bb, 'float', Float32Array.of(1, 2), [2]);
    freed.free();
    let error = bbErrorOf(() => session.run({ a, b: freed }));
    expect(error.code).toBe(BbErrorCode.InvalidArgument);
    expect(error.message).toBe('CpuSession.run: input b: the tensor was freed');

    const other = await loadBb(module);
    const foreign = Tensor.from(other, 'float', Float32Array.of(1, 2), [2]);
    error = bbErrorOf(() => session.run({ a, b: foreign }));
    expect(error.message).toBe('CpuSession.run: input b lives in another bb.wasm instance');

    model.free();
    error = bbErrorOf(() => new CpuSession(bb, model));
    expect(error.message).toBe('CpuSession: the model was freed');
    expect(bb.exports.bb_wasm_session_new(session.handle)).toBe(BbErrorCode.InvalidArgument);
    expect(lastError().message).toBe(`handle ${session.handle} names a session, not a model`);

    const handle = session.handle;
    session.free();
    session.free(); // a second free does nothing
    for (const call of [() => session.run({ a }), () => session.peakBytes]) {
      error = bbErrorOf(call);
      expect(error.code).toBe(BbErrorCode.InvalidArgument);
      expect(error.message).toMatch(/^CpuSession\.(run|peakBytes): the session was freed$/);
    }
    const stale = `session handle ${handle} is stale or unknown: its object was freed, or it was never issued`;
    for (const call of [
      () => bb.exports.bb_wasm_session_input_count(handle),
      () => bb.exports.bb_wasm_session_peak_bytes(handle),
      () => bb.exports.bb_wasm_session_run(handle, 0, 0, 0, 0, 0),
      () => bb.exports.bb_wasm_session_free(handle),
    ]) {
      expect(call()).toBe(BbErrorCode.InvalidArgument);
      expect(lastError().message).toBe(stale);
    }
    expect(bb.exports.bb_wasm_session_output_name(handle, 0)).toBe(0);
    expect(lastError().message).toBe(stale);
    freeAll(a, foreign);
  });
});

describe('the raw run call', () => {
  /** Lays out handles and packed names in module memory and runs; returns the code and the output handles. */
  function rawRun(session: number, handles: number[], packedNames: string, outputs: number): { rc: number; out: number[] } {
    const names = new TextEncoder().encode(packedNames);
    const block = new Uint8Array(4 * (handles.length + outputs) + names.length);
    const view = new DataView(block.buffer);
    handles.forEach((handle, i) => view.setInt32(4 * i, handle, true));
    block.set(names, 4 * (handles.length + outputs));
    return bb.withBytes(block, (ptr) => {
      const outAt = ptr + 4 * handles.length;
      const rc = bb.exports.bb_wasm_session_run(session, handles.length, outAt + 4 * outputs, names.length, ptr, outAt);
      const issued = new DataView(bb.exports.memory.buffer, outAt, 4 * outputs);
      return { rc, out: Array.from({ length: outputs }, (_, i) => issued.getInt32(4 * i, true)) };
    });
  }

  test('names must be exactly n NUL-terminated strings', () => {
    const { model, session } = sessionOf(passThrough({ x: 'float', y: 'float' }));
    const x = Tensor.zeros(bb, 'float', [1]);
    expect(rawRun(session.handle, [x.handle, x.handle], 'x\0', 2).rc).toBe(BbErrorCode.InvalidArgument);
    expect(lastError().message).toBe('session run: the 2 bytes of input names hold 1 names, not 2');
    expect(rawRun(session.handle, [x.handle, x.handle], 'x\0y', 2).rc).toBe(BbErrorCode.InvalidArgument);
    expect(lastError().message).toBe('session run: the 3 bytes of input names hold 1 names, not 2');
    expect(rawRun(session.handle, [x.handle], 'x\0y\0', 2).rc).toBe(BbErrorCode.InvalidArgument);
    expect(lastError().message).toBe('session run: 2 bytes follow the 1 input names');
    expect(bb.exports.bb_wasm_session_run(session.handle, -1, 0, 0, 0, 0)).toBe(BbErrorCode.InvalidArgument);
    const ok = rawRun(session.handle, [x.handle, x.handle], 'x\0y\0', 2);
    expect(ok.rc).toBe(0);
    expect(lastError()).toEqual({ code: 0, message: '' });
    for (const handle of ok.out) expect(bb.exports.bb_wasm_tensor_free(handle)).toBe(0);
    freeAll(x, session, model);
  });

  test('a stale or wrong-kind input handle is refused naming the input', () => {
    const { model, session } = sessionOf(passThrough({ x: 'float' }));
    const x = Tensor.zeros(bb, 'float', [1]);
    const stale = x.handle;
    x.free();
    expect(rawRun(session.handle, [stale], 'x\0', 1).rc).toBe(BbErrorCode.InvalidArgument);
    expect(lastError().message).toBe(
      `session run: input x: tensor handle ${stale} is stale or unknown: its object was freed, or it was never issued`,
    );
    expect(rawRun(session.handle, [model.handle], 'x\0', 1).rc).toBe(BbErrorCode.InvalidArgument);
    expect(lastError().message).toBe(`session run: input x: handle ${model.handle} names a model, not a tensor`);
    freeAll(session, model);
  });

  test('when the outputs find no free handles, none is issued and none leaks', () => {
    const { model, session } = sessionOf(passThrough({ x: 'float', y: 'float' }));
    const x = Tensor.zeros(bb, 'float', [1]);
    // Fill the table but for one slot: the first output gets it, the second finds none.
    const fillers: Tensor[] = [];
    for (let i = 3; i < BB_WASM_MAX_HANDLES - 1; i++) fillers.push(Tensor.zeros(bb, 'uint8', [0]));
    const error = bbErrorOf(() => session.run({ x, y: x }));
    expect(error.code).toBe(BbErrorCode.Limit);
    expect(error.message).toBe(`all ${BB_WASM_MAX_HANDLES} handles are in use: free objects that are done with`);
    // Exactly the one slot is still free.
    const last = Tensor.zeros(bb, 'uint8', [0]);
    expect(bbErrorOf(() => Tensor.zeros(bb, 'uint8', [0])).code).toBe(BbErrorCode.Limit);
    freeAll(last, ...fillers);
    const { x: outX, y: outY } = session.run({ x, y: x });
    expect(outX?.toArray()).toEqual(new Float32Array(1));
    freeAll(outX, outY, x, session, model);
  });

  test('input and output names and counts, with indexes out of range refused', () => {
    const { model, session } = sessionOf(oneNode('Add', { a: [2], b: [2] }, { sum: [2] }));
    expect(bb.exports.bb_wasm_session_input_count(session.handle)).toBe(2);
    expect(bb.exports.bb_wasm_session_output_count(session.handle)).toBe(1);
    expect(bb.readCString(bb.exports.bb_wasm_session_input_name(session.handle, 1))).toBe('b');
    expect(bb.exports.bb_wasm_session_input_name(session.handle, 2)).toBe(0);
    expect(lastError().message).toBe('input 2 does not exist: the session has 2');
    expect(bb.exports.bb_wasm_session_output_name(session.handle, -1)).toBe(0);
    expect(lastError().message).toBe('output -1 does not exist: the session has 1');
    freeAll(session, model);
  });
});
