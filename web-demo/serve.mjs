#!/usr/bin/env node
// Hosts web-demo: the page, the package, bb.wasm and the digits — and, unless --no-live, a
// live federation: this process is the federated_digits server peer (node-datachannel) and
// runs the signalling; browsers that press "Join" become its clients over WebRTC (phones on
// the same network too), and any page can watch the rounds.
//
//   (cd js && npm run build) && scripts/build-wasm.sh
//   node web-demo/serve.mjs [--port 8080] [--host 0.0.0.0] [--clients 4] [--signal-port 8081] [--no-live]
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';

import {
  compileFederatedDigits, installDigitsServer, loadBb, peerIdFromU64, roundReporter, runPeer, splitDigits, startDigitsServer,
} from '../js/dist/index.js';
import { SignalClient } from '../js/dist/signal/index.js';
import { SignalServer } from '../js/dist/signal/node.js';
import { WebRtcTransport } from '../js/dist/transport/index.js';

const here = fileURLToPath(new URL('.', import.meta.url)).replace(/\/$/, '');
const repo = join(here, '..');
const arg = (name, fallback) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : fallback);
const port = Number(arg('--port', 8080));
const host = arg('--host', '0.0.0.0');
const clients = Number(arg('--clients', 4));
const signalPort = Number(arg('--signal-port', 8081));
const live = !process.argv.includes('--no-live');
// label skew: five digits per client from four clients up; fewer clients each get them all
const classesPerShard = clients >= 4 ? 5 : 0;
const DIGITS = '/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz';

for (const [file, hint] of [
  [join(repo, 'js/dist/index.js'), 'cd js && npm run build'],
  [join(repo, 'js/wasm/bb.wasm'), 'scripts/build-wasm.sh'],
  [DIGITS, 'install python3-sklearn (scripts/setup.sh does)'],
]) {
  if (!existsSync(file)) {
    console.error(`web-demo: ${file} is missing: ${hint}`);
    process.exit(1);
  }
}
if (!Number.isInteger(clients) || clients < 1 || clients > 64) {
  console.error('web-demo: --clients takes 1 to 64');
  process.exit(2);
}

const wasm = readFileSync(join(repo, 'js/wasm/bb.wasm'));
const csv = gunzipSync(readFileSync(DIGITS));
const TYPES = { '.js': 'text/javascript', '.html': 'text/html', '.css': 'text/css', '.map': 'application/json' };

// ---- the live federation ----------------------------------------------------------------
const status = { clients, joined: 0, rounds: [] };
const serverId = peerIdFromU64(1);
const room = `web-demo-${process.pid}`;
let artifact = new Uint8Array();
let nextSeat = 0;
if (live) {
  const bb = await loadBb(wasm);
  artifact = compileFederatedDigits(bb, { quorum: Math.max(1, clients - 1), target: clients, deadlineMs: 2000 });
  const split = splitDigits(bb, csv, clients, 1, classesPerShard);
  const server = installDigitsServer(bb, artifact, serverId, split.test);
  const ids = Array.from({ length: clients }, (_, k) => peerIdFromU64(k + 2));
  for (const id of ids) server.addPeer(id);
  const signal = await SignalServer.listen({ port: signalPort, host });
  const transport = await WebRtcTransport.create({ signal: await SignalClient.connect({ url: `ws://127.0.0.1:${signalPort}`, room, peer: serverId }) });
  const running = runPeer(server, transport, {
    onStep: roundReporter((report) => {
      status.rounds.push(report);
      console.log(`web-demo: round ${report.round}, held-out accuracy ${(report.accuracy * 100).toFixed(1)} %`);
    }),
  });
  const waiting = setInterval(() => {
    status.joined = ids.filter((id) => transport.peers().includes(id)).length;
    if (status.joined < clients) return;
    clearInterval(waiting);
    console.log(`web-demo: all ${clients} clients are in; starting the rounds`);
    startDigitsServer(server, ids, split.test, running.driver.now());
    running.driver.wake();
  }, 250);
}

function config() {
  return { live, clients, classesPerShard, server: serverId, room, signal: `ws://HOST:${signalPort}` };
}

function serveFile(path) {
  if (path === '/') path = '/index.html';
  for (const [prefix, dir] of [['/pkg/', join(repo, 'js/dist')], ['/', here]]) {
    if (!path.startsWith(prefix)) continue;
    const file = normalize(join(dir, path.slice(prefix.length)));
    if (!file.startsWith(dir + sep) || !existsSync(file) || file.endsWith('serve.mjs')) continue;
    return [TYPES[extname(file)] ?? 'application/octet-stream', readFileSync(file)];
  }
  return undefined;
}

const json = (value) => ['application/json', JSON.stringify(value)];
createServer((request, response) => {
  const path = new URL(request.url ?? '/', 'http://x').pathname;
  let found;
  if (path === '/bb.wasm') found = ['application/wasm', wasm];
  else if (path === '/digits.csv') found = ['text/csv', csv];
  else if (path === '/config.json') found = json(config());
  else if (path === '/status.json') found = json(status);
  else if (path === '/artifact.bin' && live) found = ['application/octet-stream', artifact];
  else if (path === '/join' && request.method === 'POST') {
    found = live && nextSeat < clients
      ? json({ index: nextSeat, peer: peerIdFromU64(++nextSeat + 1) })
      : json({ error: live ? `all ${clients} client seats are taken` : 'no live federation here' });
  } else found = serveFile(path);
  if (found === undefined) return response.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
  response.writeHead(200, { 'content-type': found[0], 'cache-control': 'no-store' }).end(found[1]);
}).listen(port, host, () => {
  console.log(`web-demo: http://${host === '0.0.0.0' ? 'localhost' : host}:${port}/` +
    (live ? ` — a live federation waits for ${clients} clients (signalling on port ${signalPort})` : ''));
});
