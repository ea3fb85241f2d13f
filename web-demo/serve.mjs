#!/usr/bin/env node
// Hosts web-demo: the page, the package, bb.wasm and the digits — and, unless --no-live, a
// live federation: this process is the federated_digits server peer (node-datachannel) and
// runs the signalling on the same port (path /signal); browsers that press "Join" become
// its clients over WebRTC (phones on the same network too), and any page can watch the rounds.
// The room admits the server by its peer id and each client by a join token this process
// signs when it hands out the client's seat.
//
//   (cd js && npm run build) && scripts/build-wasm.sh
//   node web-demo/serve.mjs [--port 8080] [--host 0.0.0.0] [--clients 4] [--no-live]
//        [--tls-cert FILE --tls-key FILE] [--ice-server URL]... [--turn-secret SECRET]
// --tls-cert/--tls-key serve https: (and wss: for signalling): browsers only give pages
// from other hosts than localhost WebCrypto and IndexedDB there. --ice-server adds a STUN or
// TURN server (repeat it); turn: URLs take --turn-secret, coturn's static-auth-secret, and
// every peer then gets TURN credentials of its own for an hour.
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';

import { createRequire } from 'node:module';

import {
  compileFederatedDigits, connectPeer, installDigitsServer, loadBb, roundReporter, splitDigits, startDigitsServer,
} from '../js/dist/index.js';
import { Identity, publicKeyFromPeerId } from '../js/dist/identity/index.js';
import { createJoinToken } from '../js/dist/signal/index.js';
import { SignalServer } from '../js/dist/signal/node.js';

const here = fileURLToPath(new URL('.', import.meta.url)).replace(/\/$/, '');
const repo = join(here, '..');
const arg = (name, fallback) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : fallback);
const args = (name) => process.argv.flatMap((value, i) => (process.argv[i - 1] === name ? [value] : []));
const port = Number(arg('--port', 8080));
const host = arg('--host', '0.0.0.0');
const clients = Number(arg('--clients', 4));
const live = !process.argv.includes('--no-live');
const tlsCert = arg('--tls-cert');
const tlsKey = arg('--tls-key');
const iceUrls = args('--ice-server');
const turnSecret = arg('--turn-secret');
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
if ((tlsCert === undefined) !== (tlsKey === undefined)) {
  console.error('web-demo: --tls-cert and --tls-key go together');
  process.exit(2);
}
const turnUrls = iceUrls.filter((url) => /^turns?:/.test(url));
if (turnUrls.length > 0 && turnSecret === undefined) {
  console.error('web-demo: TURN servers (--ice-server turn:...) need --turn-secret');
  process.exit(2);
}

const wasm = readFileSync(join(repo, 'js/wasm/bb.wasm'));
const csv = gunzipSync(readFileSync(DIGITS));
const TYPES = { '.js': 'text/javascript', '.html': 'text/html', '.css': 'text/css', '.map': 'application/json' };

// ---- the server: page and signalling on one port ----------------------------------------
const tls = tlsCert === undefined ? undefined : { cert: readFileSync(tlsCert), key: readFileSync(tlsKey) };
const http = tls === undefined ? createServer() : createHttpsServer(tls);
http.on('request', (request, response) => void respond(request, response));

// ---- the live federation ----------------------------------------------------------------
const status = { clients, joined: 0, rounds: [] };
const room = `web-demo-${process.pid}`;
const serverIdentity = await Identity.generate();
const serverId = serverIdentity.peerId;
// signs the join tokens of the seats it hands out; lives as long as this process
const operator = await Identity.generate();
const seats = []; // peer ids by seat
let artifact = new Uint8Array();
let seat = () => ({ error: 'no live federation here' });
if (live) {
  const bb = await loadBb(wasm);
  artifact = compileFederatedDigits(bb, { quorum: Math.max(1, clients - 1), target: clients, deadlineMs: 2000 });
  const split = splitDigits(bb, csv, clients, 1, classesPerShard);
  const server = installDigitsServer(bb, artifact, serverId, split.test);
  SignalServer.attach(http, {
    path: '/signal',
    rooms: { [room]: { allow: { [serverId]: 'server' }, operators: [operator.publicKey] } },
    openRooms: false,
    iceServers: iceUrls.filter((url) => !turnUrls.includes(url)).map((urls) => ({ urls })),
    ...(turnSecret === undefined ? {} : { turn: { secret: turnSecret, urls: turnUrls } }),
  });
  await new Promise((resolve) => http.listen(port, host, resolve));
  // this process joins its own room over loopback; its own certificate needs no check there
  const require = createRequire(new URL('../js/package.json', import.meta.url));
  const WebSocket = require('ws');
  const Loopback = class extends WebSocket {
    constructor(url) {
      super(url, { rejectUnauthorized: false });
    }
  };
  const self = `${tls === undefined ? 'ws' : 'wss'}://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}/signal`;
  const running = await connectPeer(server, {
    url: self, room, identity: serverIdentity, role: 'server', WebSocket: Loopback,
    onStep: roundReporter((report) => {
      status.rounds.push(report);
      console.log(`web-demo: round ${report.round}, held-out accuracy ${(report.accuracy * 100).toFixed(1)} %`);
    }),
  });
  const waiting = setInterval(() => {
    status.joined = seats.filter((id) => running.transport.peers().includes(id)).length;
    if (status.joined < clients) return;
    clearInterval(waiting);
    console.log(`web-demo: all ${clients} clients are in; starting the rounds`);
    startDigitsServer(server, seats, split.test, running.driver.now());
    running.driver.wake();
  }, 250);
  // a seat for the page's peer id (the same one again after a reload), with its join token
  seat = async (peer) => {
    if (typeof peer !== 'string' || publicKeyFromPeerId(peer) === null) return { error: 'send {"peer": "<your peer id>"}: a key-bound peer id' };
    let index = seats.indexOf(peer);
    if (index < 0) {
      if (seats.length >= clients) return { error: `all ${clients} client seats are taken` };
      index = seats.push(peer) - 1;
      server.addPeer(peer);
    }
    const token = await createJoinToken(operator, { peer, role: 'client', room, expiresAt: Math.floor(Date.now() / 1000) + 12 * 3600 });
    return { index, token };
  };
} else {
  await new Promise((resolve) => http.listen(port, host, resolve));
}

function config() {
  return { live, clients, classesPerShard, server: serverId, room, signalPath: '/signal' };
}

function body(request) {
  return new Promise((resolve) => {
    let text = '';
    request.on('data', (chunk) => {
      text += chunk;
      if (text.length > 4096) request.destroy();
    });
    request.on('end', () => {
      try {
        resolve(JSON.parse(text));
      } catch {
        resolve({});
      }
    });
  });
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

function json(value) {
  return ['application/json', JSON.stringify(value)];
}

async function respond(request, response) {
  const path = new URL(request.url ?? '/', 'http://x').pathname;
  let found;
  if (path === '/bb.wasm') found = ['application/wasm', wasm];
  else if (path === '/digits.csv') found = ['text/csv', csv];
  else if (path === '/config.json') found = json(config());
  else if (path === '/status.json') found = json(status);
  else if (path === '/artifact.bin' && live) found = ['application/octet-stream', artifact];
  else if (path === '/join' && request.method === 'POST') found = json(await seat((await body(request)).peer));
  else found = serveFile(path);
  if (found === undefined) return response.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
  response.writeHead(200, { 'content-type': found[0], 'cache-control': 'no-store' }).end(found[1]);
}

console.log(`web-demo: ${tls === undefined ? 'http' : 'https'}://${host === '0.0.0.0' ? 'localhost' : host}:${port}/` +
  (live ? ` — a live federation waits for ${clients} clients (signalling on the same port, /signal)` : ''));
