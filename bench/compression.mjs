// Small uploads, as a user gets them: federatedAveraging({ model, clients: 10, compress })
// on ten label-skewed shards of scikit-learn's digits (three digits each), the CpuMlp
// 64 → 32 → 10 (2,410 parameters), run on the package's LocalNetwork on a simulated clock
// (bench/template-poisoning.mjs's model and driver). Each compression runs beside the uncompressed
// federation on the same seeds, and is reported against it:
//
//   (cd js && npm run build) && bash scripts/build-wasm.sh
//   node bench/compression.mjs [--rounds N] [--seeds K] [--only NAME] [--json]
//
// Columns: the server's held-out accuracy after the last round and its mean over the last
// five (both averaged over the seeds, with the difference from the uncompressed run in
// points); the upload, in envelope bytes the server received per round (its round
// reports' bytesIn: the clients' updates with the envelopes around them, plus the
// registry's few bytes), and the ratio of the uncompressed upload to it; and the bytes
// one encoded update takes (the codec's output, without the envelope).
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';

import { digitsModel, drive } from './template-poisoning.mjs';

const MS = 1_000_000n;
const N_CLIENTS = 10;
const DIGITS = '/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz';

/** The compressions compared, by name. */
export const COMPRESSIONS = {
  none: undefined,
  f16: { kind: 'f16' },
  u8: { kind: 'u8' },
  'topk-0.30 (u8)': { kind: 'topk', k: 0.3 },
  'topk-0.20 (u8)': { kind: 'topk', k: 0.2 },
  'topk-0.10 (u8)': { kind: 'topk', k: 0.1 },
  'topk-0.30-f32': { kind: 'topk', k: 0.3, values: 'f32' },
  'topk-0.05-f32': { kind: 'topk', k: 0.05, values: 'f32' },
  'topk-0.30-no-feedback': { kind: 'topk', k: 0.3, feedback: false },
};

/**
 * One federation: the accuracy after `rounds` (NaN if the rounds stopped before), the mean
 * over the last five, the server's upload bytes per round (rounds 2..) and the mean bytes
 * of one encoded update (0 without a codec).
 */
export function runCompressed(pkg, bb, csv, { compress, rounds = 30, seed = 1 }) {
  const plan = pkg.federatedAveraging({ model: digitsModel(pkg), clients: N_CLIENTS, ...(compress === undefined ? {} : { compress }) });
  const artifact = plan.compile(bb);
  const split = pkg.splitDigits(bb, csv, N_CLIENTS, seed, 3);
  const server = plan.installServer(bb, { artifact, self: pkg.peerIdFromU64(1), test: split.test, seed, nowNs: 0n });
  const clients = split.shards.map((data, k) =>
    plan.installClient(bb, { artifact, self: pkg.peerIdFromU64(k + 2), server: server.node.self, data, seed: seed * 100 + k, nowNs: 0n }),
  );
  const network = new pkg.LocalNetwork([server.node, ...clients]);
  const reports = [];
  server.onRound((report) => reports.push(report));
  server.start([], 0n);
  drive(network, () => (reports.at(-1)?.round ?? 0) >= rounds, BigInt(rounds) * 4000n * MS);
  const last = reports.at(-1);
  const tail = reports.slice(-5);
  const counted = reports.slice(1);
  // each update is one Fit of the template's 10 local steps
  const updates = clients.reduce((n, c) => n + Number(c.counter('train.steps')) / 10, 0);
  const encoded = clients.reduce((n, c) => n + pkg.trafficOf(c).encodedBytes, 0);
  const result = {
    accuracy: last !== undefined && last.round >= rounds ? last.accuracy : Number.NaN,
    tail: tail.reduce((s, r) => s + r.accuracy, 0) / tail.length,
    uploadPerRound: counted.reduce((s, r) => s + r.bytesIn, 0) / Math.max(1, counted.length),
    perUpdate: updates > 0 && encoded > 0 ? encoded / updates : 0,
  };
  network.free();
  split.free();
  return result;
}

const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

async function main() {
  const pkg = { ...(await import('../js/dist/index.js')), ...(await import('../js/dist/examples/index.js')) };
  const option = (name, fallback) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : fallback);
  const rounds = Number(option('--rounds', 30));
  const seeds = Number(option('--seeds', 3));
  const only = option('--only', undefined);
  const json = process.argv.includes('--json');
  const { readFile } = await import('node:fs/promises');
  const bb = await pkg.loadBb(await readFile(new URL('../js/wasm/bb.wasm', import.meta.url)));
  const csv = gunzipSync(readFileSync(DIGITS));
  const names = Object.keys(COMPRESSIONS).filter((n) => only === undefined || n === only || n === 'none');
  const rows = {};
  for (const name of names) {
    const runs = [];
    for (let seed = 1; seed <= seeds; seed++) runs.push(runCompressed(pkg, bb, csv, { compress: COMPRESSIONS[name], rounds, seed }));
    rows[name] = {
      accuracy: mean(runs.map((r) => r.accuracy)),
      tail: mean(runs.map((r) => r.tail)),
      uploadPerRound: mean(runs.map((r) => r.uploadPerRound)),
      perUpdate: mean(runs.map((r) => r.perUpdate)),
    };
  }
  if (json) return console.log(JSON.stringify({ rounds, seeds, rows }, null, 2));
  const base = rows.none;
  console.log(`compression: federatedAveraging({ model: CpuMlp 64-32-10, clients: ${N_CLIENTS}, compress }), digits, ${rounds} rounds, seeds 1..${seeds}`);
  console.log('compress                 accuracy (Δ pts)   last-5 mean (Δ pts)   upload B/round   ratio   B/update');
  for (const [name, r] of Object.entries(rows)) {
    const delta = (a, b) => `${a >= b ? '+' : ''}${((a - b) * 100).toFixed(2)}`;
    console.log(
      `${name.padEnd(24)} ${(r.accuracy * 100).toFixed(2).padStart(6)} (${delta(r.accuracy, base.accuracy).padStart(6)})   ` +
        `${(r.tail * 100).toFixed(2).padStart(6)} (${delta(r.tail, base.tail).padStart(6)})     ` +
        `${r.uploadPerRound.toFixed(0).padStart(10)}   ${(base.uploadPerRound / r.uploadPerRound).toFixed(2).padStart(5)}×   ${r.perUpdate ? r.perUpdate.toFixed(0).padStart(8) : '       -'}`,
    );
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
