// This engine's compute path, with no network (engines.mjs drives it in WebKit, Firefox and
// Chromium): bb.wasm (SIMD128) loads, a MatMul runs on its kernels and agrees with a plain
// JavaScript product, so does the build loadBb() picks by itself (bb-relaxed.wasm where the
// engine runs relaxed SIMD), a federation of a server and four clients trains in the page
// (LocalNetwork), and connecting a peer either works or says why not. Published on
// window.engine once done; `?quick` times less.
import {
  CpuSession,
  LocalNetwork,
  OnnxModel,
  Tensor,
  connectPeer,
  encodeOnnxModel,
  loadBb,
  peerIdFromU64,
  relaxedSimdSupported,
  roundReporter,
} from '/pkg/index.js';
import {
  compileFederatedDigits,
  installDigitsClient,
  installDigitsServer,
  splitDigits,
  startDigitsServer,
} from '/pkg/examples/index.js';
import { Identity } from '/pkg/identity/index.js';

const quick = new URLSearchParams(location.search).has('quick');
const log = (line) => (document.getElementById('log').textContent += `${line}\n`);

/** Runs `fn` in batches until `minMs` passed (WebKit and Firefox time in 1 ms steps); ms per call. */
function timePerCall(fn, minMs) {
  fn();
  let calls = 0;
  const start = performance.now();
  let elapsed = 0;
  for (let batch = 1; elapsed < minMs; batch *= 2) {
    for (let i = 0; i < batch; i++) fn();
    calls += batch;
    elapsed = performance.now() - start;
  }
  return elapsed / calls;
}

function matmul(bb, n) {
  const value = (name) => ({ name, dtype: 'float', dims: [n, n] });
  const model = OnnxModel.decode(bb, encodeOnnxModel({ opset: 13, nodes: [{ opType: 'MatMul', inputs: ['a', 'b'], outputs: ['y'] }], inputs: [value('a'), value('b')], outputs: [value('y')] }));
  const session = new CpuSession(bb, model);
  const a = new Float32Array(n * n).map((_, i) => ((i * 7919) % 17) / 17 - 0.5);
  const b = new Float32Array(n * n).map((_, i) => ((i * 104729) % 13) / 13 - 0.5);
  const ta = Tensor.from(bb, 'float', a, [n, n]);
  const tb = Tensor.from(bb, 'float', b, [n, n]);
  const run = () => session.run({ a: ta, b: tb }).y;
  const y = run();
  const got = y.toArray();
  y.free();
  let worst = 0; // a few entries against the plain product
  for (const [r, c] of [[0, 0], [n - 1, n - 1], [n >> 1, 3], [7, n - 2]]) {
    let want = 0;
    for (let k = 0; k < n; k++) want += a[r * n + k] * b[k * n + c];
    worst = Math.max(worst, Math.abs(got[r * n + c] - want));
  }
  const ms = timePerCall(() => run().free(), quick ? 200 : 1000);
  for (const o of [ta, tb, session, model]) o.free();
  return { n, maxError: worst, ms, gflops: (2 * n * n * n) / (ms * 1e6) };
}

/** A server and four clients in this page: rounds, accuracy, and local SGD steps per second. */
function federate(bb, csv) {
  const clients = 4;
  const artifact = compileFederatedDigits(bb, { quorum: clients, target: clients });
  const split = splitDigits(bb, csv, clients, 1, 5);
  const ids = Array.from({ length: clients + 1 }, (_, k) => peerIdFromU64(k + 1));
  const server = installDigitsServer(bb, artifact, ids[0], split.test);
  const nodes = ids.slice(1).map((id, k) => installDigitsClient(bb, artifact, id, ids[0], split.shards[k], k + 2));
  const network = new LocalNetwork([server, ...nodes]);
  for (const id of ids.slice(1)) server.addPeer(id);
  const reports = [];
  server.onStep(roundReporter((r) => reports.push(r)));
  startDigitsServer(server, ids.slice(1), split.test, 0n);
  // benchmarking times a few hundred ms of work: WebKit and Firefox time in 1 ms steps
  const rounds = quick ? 8 : 100;
  const start = performance.now();
  for (let t = 1; t < 100_000 && (reports.at(-1)?.round ?? 0) < rounds; t++) network.poll(BigInt(t) * 5_000_000n);
  const seconds = (performance.now() - start) / 1000;
  network.free();
  split.free();
  const last = reports.at(-1) ?? { round: 0, accuracy: 0 };
  // each client round is fit_steps=12 SGD steps of the example's CpuMlp (batches of 32)
  return { rounds: last.round, accuracy: last.accuracy, seconds, stepsPerSecond: (last.round * clients * 12) / seconds };
}

async function main() {
  const result = { userAgent: navigator.userAgent };
  result.simd = WebAssembly.validate(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11]));
  const bb = await loadBb(new URL('/bb.wasm', location.href));
  result.loaded = true;
  result.matmul = [matmul(bb, 64), matmul(bb, 512)];
  // the package's own choice of build: bb-relaxed.wasm where this engine runs relaxed SIMD
  const chosen = await loadBb();
  result.relaxedSupported = relaxedSimdSupported();
  result.chosen = { simd: chosen.simd, matmul: matmul(chosen, 256) };
  log(`loadBb() chose the ${chosen.simd} build: MatMul 256² ${result.chosen.matmul.gflops.toFixed(1)} GFLOP/s`);
  log(`MatMul 512²: ${result.matmul[1].gflops.toFixed(1)} GFLOP/s`);
  const csv = new Uint8Array(await (await fetch('/digits.csv')).arrayBuffer());
  result.training = federate(bb, csv);
  log(`federation: ${result.training.rounds} rounds, accuracy ${result.training.accuracy.toFixed(3)}`);
  result.webrtc = typeof RTCPeerConnection === 'function';
  try {
    // a node is needed to try: the connection attempt must fail before any socket opens
    const identity = await Identity.generate();
    const node = { self: identity.peerId };
    await connectPeer(node, { url: 'ws://127.0.0.1:9/none', room: 'engine', identity });
    result.connect = { ok: true };
  } catch (error) {
    result.connect = { ok: false, name: error.name, code: error.code ?? null, message: String(error.message) };
  }
  return result;
}

main().then((r) => (window.engine = r), (error) => (window.engine = { error: String(error?.stack ?? error) }));
