/**
 * Models written by encodeOnnxModel, read back by ONNX's own Python package (the
 * reference parser and checker) and by bb.wasm.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';

import { encodeOnnxModel, loadBb, OnnxModel, type OnnxModelSpec } from '../src/index.js';
import { wasmBytes } from './support.js';

/** Debian's python3-onnx lives under the system interpreter, not whatever python3 is first on PATH. */
const PYTHON = process.env['BB_ONNX_PYTHON'] ?? '/usr/bin/python3';

const SPEC: OnnxModelSpec = {
  opset: 17,
  graphName: 'everything',
  nodes: [
    {
      opType: 'Conv',
      name: 'conv',
      inputs: ['x', 'w'],
      outputs: ['c'],
      attributes: { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] }, auto_pad: { string: 'NOTSET' } },
    },
    { opType: 'LeakyRelu', inputs: ['c'], outputs: ['l'], attributes: { alpha: { float: 0.25 } } },
    { opType: 'ReduceSum', inputs: ['l', 'axes'], outputs: ['y'], attributes: { keepdims: { int: 0 } } },
  ],
  inputs: [
    { name: 'x', dtype: 'float', dims: ['N', 2, 5, 5] },
    { name: 'w', dtype: 'float', dims: [3, 2, 3, 3] },
  ],
  outputs: [{ name: 'y', dtype: 'float', dims: ['N', 3] }],
  initializers: [{ name: 'axes', dtype: 'int64', dims: [2], data: BigInt64Array.of(-1n, -2n) }],
};

/** What ONNX's parser makes of the model, after its full checker (with shape inference) passed. */
const READ_BACK = `
import json, sys, onnx
from onnx import helper, numpy_helper
m = onnx.load(sys.argv[1])
onnx.checker.check_model(m, full_check=True)
def dims(v):
    return [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
print(json.dumps({
  "opset": [[o.domain, o.version] for o in m.opset_import],
  "graph": m.graph.name,
  "nodes": [{"op": n.op_type, "name": n.name, "in": list(n.input), "out": list(n.output),
             "attrs": {a.name: helper.get_attribute_value(a) if a.type != a.STRING else a.s.decode()
                       for a in n.attribute}} for n in m.graph.node],
  "inputs": [[v.name, v.type.tensor_type.elem_type, dims(v)] for v in m.graph.input],
  "outputs": [[v.name, v.type.tensor_type.elem_type, dims(v)] for v in m.graph.output],
  "initializers": [[t.name, numpy_helper.to_array(t).tolist()] for t in m.graph.initializer],
}))
`;

test('ONNX itself reads back what encodeOnnxModel wrote, and its checker accepts it', () => {
  if (!existsSync(PYTHON)) throw new Error(`${PYTHON} is missing: install python3-onnx (scripts/setup.sh does) or set BB_ONNX_PYTHON`);
  const scratch = mkdtempSync(join(tmpdir(), 'bb-builder-'));
  try {
    const path = join(scratch, 'model.onnx');
    writeFileSync(path, encodeOnnxModel(SPEC));
    const parsed: unknown = JSON.parse(execFileSync(PYTHON, ['-c', READ_BACK, path], { encoding: 'utf8' }));
    expect(parsed).toEqual({
      opset: [['', 17]],
      graph: 'everything',
      nodes: [
        { op: 'Conv', name: 'conv', in: ['x', 'w'], out: ['c'], attrs: { kernel_shape: [3, 3], pads: [1, 1, 1, 1], auto_pad: 'NOTSET' } },
        { op: 'LeakyRelu', name: '', in: ['c'], out: ['l'], attrs: { alpha: 0.25 } },
        { op: 'ReduceSum', name: '', in: ['l', 'axes'], out: ['y'], attrs: { keepdims: 0 } },
      ],
      inputs: [
        ['x', 1, ['N', 2, 5, 5]],
        ['w', 1, [3, 2, 3, 3]],
      ],
      outputs: [['y', 1, ['N', 3]]],
      initializers: [['axes', [-1, -2]]],
    });
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
});

test('bb.wasm decodes what encodeOnnxModel wrote', async () => {
  const bb = await loadBb(wasmBytes());
  const model = OnnxModel.decode(bb, encodeOnnxModel(SPEC));
  const ops = model.summary().graph?.ops.map((o) => o.op_type);
  for (const op of ['Conv', 'LeakyRelu', 'ReduceSum']) expect(ops).toContain(op);
  model.free();
});
