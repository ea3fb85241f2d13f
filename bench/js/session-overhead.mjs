// What a CpuSession.run costs from JavaScript beyond the module's own work: a one-node
// Softmax on [1, N] (N = 4 by default: next to no arithmetic) run through the package's
// CpuSession.run (outputs freed) and CpuSession.runArrays (with and without `into`), against the same two exports called directly
// (bb_wasm_session_run with a block prepared once, then bb_wasm_tensor_free). CPU time
// per call, the last of three rounds of 200000 calls.
//
//   bash scripts/build-wasm.sh && (cd js && npm run build)
//   node bench/js/session-overhead.mjs [N] [--wasm path/to/bb.wasm]
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2);
const wasmAt = args.indexOf('--wasm');
const wasm = wasmAt >= 0 ? args.splice(wasmAt, 2)[1] : fileURLToPath(new URL('../../js/wasm/bb.wasm', import.meta.url));
const cols = Number(args[0] ?? 4);
const { CpuSession, OnnxModel, Tensor, encodeOnnxModel, loadBb } = await import(new URL('../../js/dist/index.js', import.meta.url));
const bb = await loadBb(wasm);
const model = OnnxModel.decode(
  bb,
  encodeOnnxModel({
    opset: 17,
    nodes: [{ opType: 'Softmax', inputs: ['x'], outputs: ['y'], attributes: { axis: { int: -1 } } }],
    inputs: [{ name: 'x', dtype: 'float', dims: [1, cols] }],
    outputs: [{ name: 'y', dtype: 'float', dims: [1, cols] }],
  }),
);
const session = new CpuSession(bb, model);
const x = Tensor.from(bb, 'float', new Float32Array(cols).fill(0.5), [1, cols]);
const e = bb.exports;
// the block session.run hands the module: input handle, output handle, "x\0"
const names = new TextEncoder().encode('x\0');
const block = e.bb_wasm_alloc(8 + names.length) >>> 0;
new Uint8Array(e.memory.buffer).set(names, block + 8);
new DataView(e.memory.buffer).setInt32(block, x.handle, true);
const feeds = { x: { dtype: 'float', data: new Float32Array(cols).fill(0.5), dims: [1, cols] } };
const into = { y: new Float32Array(cols) };
const cases = {
  'CpuSession.runArrays, into the caller\'s array': () => session.runArrays(feeds, into),
  'CpuSession.runArrays': () => session.runArrays(feeds),
  'CpuSession.run, outputs freed': () => {
    for (const t of Object.values(session.run({ x }))) t.free();
  },
  'the exports alone': () => {
    bb.check(e.bb_wasm_session_run(session.handle, 1, block + 8, names.length, block, block + 4));
    bb.check(e.bb_wasm_tensor_free(new DataView(e.memory.buffer).getInt32(block + 4, true)));
  },
};
const CALLS = 200000;
for (let round = 0; round < 3; round++) {
  for (const [name, fn] of Object.entries(cases)) {
    for (let i = 0; i < CALLS / 10; i++) fn();
    const start = process.cpuUsage();
    for (let i = 0; i < CALLS; i++) fn();
    const spent = process.cpuUsage(start);
    if (round === 2) console.log(`Softmax [1,${cols}], ${name}: ${(((spent.user + spent.system) / CALLS) * 1000).toFixed(0)} ns per call`);
  }
}
e.bb_wasm_free(block);
x.free();
session.free();
model.free();
