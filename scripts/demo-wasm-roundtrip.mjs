// Part of `make demo`: decodes a model with bb.wasm under Node, re-encodes it, and writes
// the result so the shell driver can compare it with the native build's bytes.
// usage: node demo-wasm-roundtrip.mjs IN.onnx OUT.onnx
import { readFile, writeFile } from 'node:fs/promises';
import { loadBb, OnnxModel } from '../js/dist/index.js';

const [input, output] = process.argv.slice(2);
const bb = await loadBb();
const model = OnnxModel.decode(bb, await readFile(input));
const bytes = model.encode();
const summary = JSON.parse(model.summary(true));
model.free();
await writeFile(output, bytes);
const nodes = summary.graph ? summary.graph.nodes : 0;
console.log(`wasm: bb.wasm ${bb.version} decoded and re-encoded ${bytes.length} bytes (${nodes} nodes)`);
