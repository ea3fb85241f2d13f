// Round latency of federated_digits with 4 clients, and wasm memory per peer: over real
// WebRTC data channels with the clients in Chromium pages (js/e2e/run.mjs inside a network
// namespace), against the same federation in one Node process with envelopes handed
// straight from node to node (no network, no browser) — the named peer of the ratio.
// A round's latency runs from the server's broadcast of the global model to the arrival of
// the round's last client update (the 200 ms round timer is not part of it). Beside them, the
// data channels alone: a 10 KB envelope from this process to each of 4 pages and straight back.
//   (cd js && npm run build) && scripts/build-wasm.sh && node bench/federation-rounds.mjs [rounds=30]
import { execFileSync } from 'node:child_process';
import { readFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';

const root = new URL('..', import.meta.url).pathname;
const rounds = Number(process.argv[2] ?? 30);
const { loadBb, LocalNetwork, peerIdFromU64, roundReporter } = await import('../js/dist/index.js');
const { compileFederatedDigits, installDigitsClient, installDigitsServer, splitDigits, startDigitsServer } = await import('../js/dist/examples/index.js');

// ---- in one process ----------------------------------------------------------------------
const bb = await loadBb(readFileSync(join(root, 'js/wasm/bb.wasm')));
const csv = gunzipSync(readFileSync('/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz'));
const artifact = compileFederatedDigits(bb, { quorum: 3, target: 4, deadlineMs: 1500 });
const split = splitDigits(bb, csv, 4, 1, 5);
const serverId = peerIdFromU64(1);
const ids = [2, 3, 4, 5].map((k) => peerIdFromU64(k));
const server = installDigitsServer(bb, artifact, serverId, split.test);
for (const id of ids) server.addPeer(id);
const now = () => BigInt(Math.round(performance.now() * 1e6));
let round = 0;
server.onStep(roundReporter((r) => (round = r.round)));
const latencies = [];
let broadcastAt;
let updates = 0;
server.onStep((step) => {
  if (step.kind === 'send' && broadcastAt === undefined) (broadcastAt = performance.now()), (updates = 0);
});
const network = new LocalNetwork([server, ...ids.map((id, k) => installDigitsClient(bb, artifact, id, serverId, split.shards[k], k + 2))], {
  onDeliver(to) {
    if (to === serverId && broadcastAt !== undefined && ++updates === ids.length) {
      latencies.push(performance.now() - broadcastAt);
      broadcastAt = undefined;
    }
  },
});
startDigitsServer(server, ids, split.test, now());
while (round < rounds + 1) {
  network.poll(now());
  if (!network.hasWork()) {
    const waitMs = Number(network.expiry() - now()) / 1e6;
    if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const local = { median: median(latencies.slice(1)), max: Math.max(...latencies.slice(1)), memory: bb.exports.memory.buffer.byteLength };

// ---- browsers over WebRTC ------------------------------------------------------------------
const out = join(mkdtempSync(join(tmpdir(), 'bb-rounds-')), 'result.json');
// four Chromium pages (run.mjs mixes in Firefox pages unless told otherwise)
execFileSync('bash', [join(root, 'scripts/e2e.sh'), '--only', 'federated', '--full-rounds', String(rounds), '--engines', 'chromium'], {
  env: { ...process.env, BB_E2E_RESULT: out },
  stdio: ['ignore', 'ignore', 'inherit'],
});
const web = JSON.parse(readFileSync(out, 'utf8'));
// the data channels alone: a round's 10 KB envelope to each of 4 Chromium pages and back,
// after 200 ms of quiet as a broadcast follows the round timer (no engine, no driver)
execFileSync('bash', [join(root, 'scripts/e2e.sh'), '--only', 'echo', '--echoes', String(rounds)], {
  env: { ...process.env, BB_E2E_RESULT: out },
  stdio: ['ignore', 'ignore', 'inherit'],
});
const echo = JSON.parse(readFileSync(out, 'utf8'));

const mib = (b) => (b / 1048576).toFixed(1);
console.log(`federated_digits round latency, 4 clients, ${rounds} rounds (broadcast → last update), median / max:`);
console.log(`  in one Node process (no network)       ${local.median.toFixed(1)} ms / ${local.max.toFixed(1)} ms`);
console.log(`  4 Chromium pages over WebRTC            ${web.roundLatencyMs.median.toFixed(1)} ms / ${web.roundLatencyMs.max.toFixed(1)} ms`);
console.log(`  ratio (WebRTC / in-process, median)     ${(web.roundLatencyMs.median / local.median).toFixed(2)}x`);
console.log(`  the data channels alone: 10 KB to each page and back (no engine)  ${echo.echoMs.median.toFixed(1)} ms / ${echo.echoMs.max.toFixed(1)} ms`);
console.log(`  ratio (echo / in-process, median)       ${(echo.echoMs.median / local.median).toFixed(2)}x`);
console.log(`wasm memory high-water: server ${mib(web.serverMemoryBytes)} MiB, each page ${web.pageMemoryBytes.map(mib).join(' / ')} MiB, ` +
  `all five nodes in one instance ${mib(local.memory)} MiB`);
console.log(`the WebRTC run ended at round ${web.rounds} with held-out accuracy ${web.accuracy.toFixed(3)}`);
