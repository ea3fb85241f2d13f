// Runs an ONNX model with onnxruntime-node (the package's dev dependency in js/), as a
// second, independent executor of the models bytesandbrains exports.
//
//   node ort_run.mjs MODEL.onnx INPUT_NAME INPUT.f32 ROWS COLS OUTPUT.f32
//
// INPUT.f32 holds ROWS×COLS little-endian float32 values, fed as [ROWS, COLS]; COLS may be
// dims joined by commas (1,8,8 feeds [ROWS, 1, 8, 8]). The model's first output is written
// to OUTPUT.f32 the same way. Prints the output's shape.
import { readFileSync, writeFileSync } from 'node:fs';
import { loadOrt } from './ort_load.mjs';

const [modelPath, inputName, inputPath, rows, cols, outputPath] = process.argv.slice(2);
if (!outputPath) {
  console.error('usage: ort_run.mjs MODEL.onnx INPUT_NAME INPUT.f32 ROWS COLS OUTPUT.f32');
  process.exit(2);
}
const ort = loadOrt('ort_run');
const raw = readFileSync(inputPath);
const shape = [Number(rows), ...cols.split(',').map(Number)];
const count = shape.reduce((a, b) => a * b, 1);
if (raw.length !== count * 4) {
  console.error(`ort_run: ${inputPath} holds ${raw.length} bytes, not ${shape.join('×')} float32 values`);
  process.exit(1);
}
const data = new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.length));
const session = await ort.InferenceSession.create(modelPath);
const results = await session.run({ [inputName]: new ort.Tensor('float32', data, shape) });
const output = results[session.outputNames[0]];
writeFileSync(outputPath, Buffer.from(output.data.buffer, output.data.byteOffset, output.data.byteLength));
console.log(`onnxruntime-node ${ort.env.versions?.common ?? ''}: ${session.outputNames[0]} ${JSON.stringify(output.dims)}`);
