// Fills in the expected outputs of node-test folders with onnxruntime-node's answers.
//
//   node ort_node_tests.mjs ROOT
//
// Every ROOT/<test>/ holding meta.json ({inputs: [{name, type, dims, file}], outputs:
// [names]}) and model.onnx (or ort_model.onnx where present) is run with the raw inputs test_data_set_0/<file>
// (little-endian float32 or int32); each output is written as
// test_data_set_0/output_K.pb, a TensorProto, as ONNX's own node tests store them.
import { readFileSync, readdirSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { loadOrt } from './ort_load.mjs';

const root = process.argv[2];
if (!root) {
  console.error('usage: ort_node_tests.mjs ROOT');
  process.exit(2);
}
const ort = loadOrt('ort_node_tests');

function varint(n) {
  const out = [];
  let v = BigInt(n);
  if (v < 0n) v += 1n << 64n;
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v) byte |= 0x80;
    out.push(byte);
  } while (v);
  return out;
}

// TensorProto: dims = 1 (varint, repeated), data_type = 2 (FLOAT = 1), name = 8, raw_data = 9
function tensorProto(name, dims, data) {
  const bytes = [];
  for (const d of dims) bytes.push(0x08, ...varint(d));
  bytes.push(0x10, 1);
  const nameBytes = Buffer.from(name, 'utf8');
  bytes.push(0x42, ...varint(nameBytes.length), ...nameBytes);
  const raw = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  return Buffer.concat([Buffer.from(bytes), Buffer.from([0x4a, ...varint(raw.length)]), raw]);
}

let count = 0;
for (const test of readdirSync(root).sort()) {
  const dir = join(root, test);
  if (!existsSync(join(dir, 'meta.json'))) continue;
  const meta = JSON.parse(readFileSync(join(dir, 'meta.json'), 'utf8'));
  const feeds = {};
  for (const input of meta.inputs) {
    const raw = readFileSync(join(dir, 'test_data_set_0', input.file));
    const buffer = raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.length);
    const data = input.type === 'int32' ? new Int32Array(buffer) : new Float32Array(buffer);
    feeds[input.name] = new ort.Tensor(input.type, data, input.dims);
  }
  const twin = join(dir, 'ort_model.onnx'); // the same function in a form onnxruntime runs
  const session = await ort.InferenceSession.create(existsSync(twin) ? twin : join(dir, 'model.onnx'));
  const results = await session.run(feeds);
  meta.outputs.forEach((name, k) => {
    const out = results[name];
    writeFileSync(join(dir, 'test_data_set_0', `output_${k}.pb`), tensorProto(name, out.dims, out.data));
  });
  count++;
}
console.log(`onnxruntime-node: answered ${count} node tests in ${root}`);
