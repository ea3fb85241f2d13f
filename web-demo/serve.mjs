#!/usr/bin/env node
// Hosts web-demo: the built page (dist/, `npm run build`) and, unless --no-live, a live
// federation (shared/live-plan.js: federated averaging of the digits, clients found by
// registry). This process is its server peer (node-datachannel) and runs the signalling on
// the same port (path /signal); pages that press "Join" take a client seat and become
// clients over WebRTC (phones on the same network too), and any page can watch. The room
// admits the server by its peer id and each client by a join token this process signs
// when it hands out the client's seat.
//
//   make web-demo            (builds the package, bb.wasm and the page, then runs this)
//   node web-demo/serve.mjs [--port 8080] [--host 0.0.0.0] [--clients 4] [--quorum N]
//        [--deadline-ms 2000] [--grace-ms 20000] [--no-live]
//        [--dp-clip X --dp-noise Z [--dp-delta D]] [--secure [--secure-threshold T --secure-shares S]]
//        [--tls-cert FILE --tls-key FILE] [--ice-server URL]... [--turn-secret SECRET]
//
// --clients is the number of client seats; the rounds run while --quorum of them (default
// half, rounded up) are in the room, and wait while fewer are. A round closes at once with
// an update from every seat, or after --deadline-ms with --quorum of them. A seat whose
// page left is given back after --grace-ms (and its registration lapses as long after its
// last heartbeat), a seat whose page could not join at once (POST /leave); a page that
// reloads keeps its seat (its session token). --tls-cert/--tls-key serve https:
// (and wss: for signalling): browsers only give pages from other hosts than localhost
// WebCrypto and IndexedDB there. Responses are compressed (br or gzip) for clients that
// accept it: the page's files once, when first asked for, status.json each time. The page is
// served cross-origin isolated where browsers allow it (https, a proxy's X-Forwarded-Proto:
// https, loopback), so its engine runs on a thread per core (bb-mt-relaxed.wasm or bb-mt.wasm). --ice-server adds a STUN or TURN server (repeat it); turn:
// URLs take --turn-secret, coturn's static-auth-secret, and every peer then gets TURN
// credentials of its own for an hour. --dp-clip and --dp-noise make the federation DP-FedAvg
// (the template's dp: each update clipped to X, the sum noised with Z × X); the page shows
// the privacy spent, ε at --dp-delta (default 1e-5), after every round. --secure makes it
// secure aggregation (SecAgg+, the template's secure): each client masks its update and the
// server sees only each round's sum (a sum holds at least 3 updates: it needs --clients and
// --quorum of 3 or more, and --quorum defaults to at least 3); the page says of each round
// how many masked updates the sum held. --secure-threshold and --secure-shares default to
// SecAgg+'s.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createRequire } from 'node:module';
import { networkInterfaces } from 'node:os';
import { extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { brotliCompress, constants as zlib, gunzipSync, gzip } from 'node:zlib';

import { loadBb } from 'bytesandbrains';
import { splitDigits } from 'bytesandbrains/examples';
import { SignalClient, createJoinToken } from 'bytesandbrains/signal';
import { Identity, publicKeyFromPeerId } from 'bytesandbrains/identity';
import { SignalServer } from 'bytesandbrains/signal/server';
import { WebRtcTransport } from 'bytesandbrains/transport';
import QRCode from 'qrcode';

import { LiveFederation } from './live/federation.mjs';
import { SeatBook } from './live/seats.mjs';
import { livePlan } from './shared/live-plan.js';

const here = fileURLToPath(new URL('.', import.meta.url)).replace(/\/$/, '');
const dist = join(here, 'dist');
const arg = (name, fallback) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : fallback);
const args = (name) => process.argv.flatMap((value, i) => (process.argv[i - 1] === name ? [value] : []));
const port = Number(arg('--port', 8080));
const host = arg('--host', '0.0.0.0');
const clients = Number(arg('--clients', 4));
const secure = process.argv.includes('--secure');
const secureThreshold = arg('--secure-threshold');
const secureShares = arg('--secure-shares');
// a secure sum holds at least 3 updates: the rounds wait for that many
const quorum = Number(arg('--quorum', secure ? Math.max(3, Math.ceil(clients / 2)) : Math.ceil(clients / 2)));
const deadlineMs = Number(arg('--deadline-ms', 2000));
const graceMs = Number(arg('--grace-ms', 20_000));
// a client's registration outlives its last heartbeat as long as its seat outlives its page
const registryTtlMs = Math.max(5000, graceMs);
const live = !process.argv.includes('--no-live');
const tlsCert = arg('--tls-cert');
const tlsKey = arg('--tls-key');
const iceUrls = args('--ice-server');
const turnSecret = arg('--turn-secret');
const dpClip = arg('--dp-clip');
const dpNoise = arg('--dp-noise');
const dp = dpClip === undefined ? undefined : { clip: Number(dpClip), noiseMultiplier: Number(dpNoise), delta: Number(arg('--dp-delta', 1e-5)) };
// label skew: six of the ten digits per client from four clients up (each digit on several
// clients, so a visitor who leaves takes no digit with it); fewer clients each get them all
const classesPerShard = clients >= 4 ? 6 : 0;
const DIGITS = '/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz';

const usage = (why) => {
  console.error(`web-demo: ${why}`);
  process.exit(2);
};
if (!Number.isInteger(clients) || clients < 1 || clients > 64) usage('--clients takes 1 to 64');
if (secure && clients < 3) usage(`--secure needs --clients of at least 3 (a secure sum holds at least 3 updates), got ${clients}`);
if (!Number.isInteger(quorum) || quorum < 1 || quorum > clients) usage(`--quorum takes 1 to --clients (${clients})`);
if (!(deadlineMs >= 100 && deadlineMs <= 60_000)) usage('--deadline-ms takes 100 to 60000');
if (!(graceMs >= 1000 && graceMs <= 3_600_000)) usage('--grace-ms takes 1000 to 3600000');
if ((tlsCert === undefined) !== (tlsKey === undefined)) usage('--tls-cert and --tls-key go together');
if ((dpClip === undefined) !== (dpNoise === undefined)) usage('--dp-clip and --dp-noise go together');
if (!secure && (secureThreshold !== undefined || secureShares !== undefined)) usage('--secure-threshold and --secure-shares need --secure');
if (secure && quorum < 3) usage(`--secure needs --quorum of at least 3 (a secure sum holds at least 3 updates), got ${quorum}`);
// 0: SecAgg+'s default; the template checks the range and names what is wrong
const secureOptions = secure ? { threshold: Number(secureThreshold ?? 0), shares: Number(secureShares ?? 0) } : undefined;
const turnUrls = iceUrls.filter((url) => /^turns?:/.test(url));
if (turnUrls.length > 0 && turnSecret === undefined) usage('TURN servers (--ice-server turn:...) need --turn-secret');
for (const [file, hint] of [
  [join(dist, 'index.html'), 'build the page: (cd web-demo && npm run build), or make web-demo'],
  [DIGITS, 'install python3-sklearn (scripts/setup.sh does)'],
]) {
  if (!existsSync(file)) {
    console.error(`web-demo: ${file} is missing: ${hint}`);
    process.exit(1);
  }
}

const csv = gunzipSync(readFileSync(DIGITS));
const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript',
  '.css': 'text/css',
  '.wasm': 'application/wasm',
  '.csv': 'text/csv',
  '.svg': 'image/svg+xml',
  '.json': 'application/json',
  '.map': 'application/json',
};

// The page is cross-origin isolated (COOP + COEP), so it has SharedArrayBuffer and runs the
// engine's work pool on Web Workers (bb-mt-relaxed.wasm or bb-mt.wasm); everything it loads comes from this
// origin, and CORP same-origin on every response says so. Browsers isolate only
// potentially trustworthy origins (https, or loopback) and report COOP from any other as a
// console error, so COOP and COEP go with https (ours, or a proxy's X-Forwarded-Proto) and
// with loopback hosts; a page over plain http from another machine runs on one thread.
const CORP = { 'cross-origin-resource-policy': 'same-origin' };
const ISOLATION = { ...CORP, 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' };

/** The cross-origin headers for this request: all three where the browser can isolate the page, CORP alone elsewhere. */
function isolation(request) {
  if (tls !== undefined || String(request.headers['x-forwarded-proto'] ?? '').split(',')[0].trim() === 'https') return ISOLATION;
  const hostname = String(request.headers.host ?? '').replace(/:\d+$/, '').toLowerCase();
  const loopback = hostname === 'localhost' || hostname.endsWith('.localhost') || /^127(\.\d+){3}$/.test(hostname) || hostname === '[::1]';
  return loopback ? ISOLATION : CORP;
}

// ---- page and signalling on one port ------------------------------------------------------
const tls = tlsCert === undefined ? undefined : { cert: readFileSync(tlsCert), key: readFileSync(tlsKey) };
const http = tls === undefined ? createServer() : createHttpsServer(tls);
http.on('request', (request, response) => void respond(request, response).catch((error) => {
  console.error(`web-demo: ${request.url}: ${error?.message ?? error}`);
  if (!response.headersSent) response.writeHead(500, { ...isolation(request), 'content-type': 'text/plain' }).end('server error');
}));

const room = `web-demo-${process.pid}`;
const seats = new SeatBook({ seats: clients, graceMs });
/** @type {LiveFederation | undefined} */
let federation;
let artifact = new Uint8Array();
let serverId = '';
// signs the join tokens of the seats it hands out; lives as long as this process
const operator = await Identity.generate();

if (live) {
  const bb = await loadBb();
  // the template checks dp and names what is wrong
  let plan;
  try {
    plan = livePlan({ clients, quorum, deadlineMs, registryTtlMs, dp, secure: secureOptions });
  } catch (error) {
    usage(error.message);
  }
  artifact = plan.compile(bb);
  const split = splitDigits(bb, csv, clients, 1, classesPerShard);
  const serverIdentity = await Identity.generate();
  serverId = serverIdentity.peerId;
  SignalServer.attach(http, {
    path: '/signal',
    rooms: { [room]: { allow: { [serverId]: 'server' }, operators: [operator.publicKey] } },
    openRooms: false,
    iceServers: iceUrls.filter((url) => !turnUrls.includes(url)).map((urls) => ({ urls })),
    ...(turnSecret === undefined ? {} : { turn: { secret: turnSecret, urls: turnUrls } }),
  });
  await listen();
  // this process joins its own room over loopback; its own certificate needs no check there
  const WebSocket = createRequire(import.meta.resolve('bytesandbrains'))('ws');
  const Loopback = class extends WebSocket {
    constructor(url) {
      super(url, { rejectUnauthorized: false });
    }
  };
  const self = `${tls === undefined ? 'ws' : 'wss'}://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}/signal`;
  // the server joins the room now; its node is installed when the rounds start
  const signal = await SignalClient.connect({ url: self, room, identity: serverIdentity, role: 'server', WebSocket: Loopback });
  const transport = await WebRtcTransport.create({ signal });
  const admission = { room, operators: [operator.publicKey] };
  federation = new LiveFederation({ plan, bb, artifact, test: split.test, seats, quorum, deadlineMs, transport, signal, admission });
  setInterval(() => federation.tick(), 250);
} else {
  await listen();
}

function listen() {
  return new Promise((resolve, reject) => {
    http.once('error', reject);
    http.listen(port, host, resolve);
  });
}

function config() {
  return { live, clients, quorum, deadlineMs, registryTtlMs, classesPerShard, server: serverId, room, signalPath: 'signal', urls: urls(), ...(dp === undefined ? {} : { dp }), ...(secureOptions === undefined ? {} : { secure: secureOptions }) };
}

/** This page's addresses: localhost, then every IPv4 address of this machine (what a phone on the LAN opens). */
function urls() {
  const scheme = tls === undefined ? 'http' : 'https';
  if (host !== '0.0.0.0') return [`${scheme}://${host}:${port}/`];
  const lan = Object.values(networkInterfaces())
    .flat()
    .filter((a) => a !== undefined && a.family === 'IPv4' && !a.internal)
    .map((a) => `${scheme}://${a.address}:${port}/`);
  return [`${scheme}://localhost:${port}/`, ...lan];
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

/** Gives back a seat the caller claimed and will not use (its peer id and session token). */
async function leave(request) {
  const { peer, session } = await body(request);
  if (typeof peer !== 'string' || typeof session !== 'string') return { released: false };
  const released = seats.release(peer, session, Date.now());
  if (released) console.log(`web-demo: the seat of ${peer} is free again (its page could not join)`);
  return { released };
}

/** A seat for the page's peer id (the same one again with its session token), with its join token. */
async function seat(request) {
  if (federation === undefined) return { error: 'no live federation here' };
  const { peer, session } = await body(request);
  if (typeof peer !== 'string' || publicKeyFromPeerId(peer) === null) return { error: 'send {"peer": "<your peer id>"}: a key-bound peer id' };
  const claimed = seats.claim(peer, typeof session === 'string' ? session : undefined, Date.now());
  if ('error' in claimed) return claimed;
  const token = await createJoinToken(operator, { peer, role: 'client', room, expiresAt: Math.floor(Date.now() / 1000) + 12 * 3600 });
  return { index: claimed.index, session: claimed.session, token };
}

function serveFile(path) {
  const file = normalize(join(dist, path === '/' ? 'index.html' : decodeURIComponent(path)));
  if (!file.startsWith(dist + sep) || !existsSync(file)) return undefined;
  return [TYPES[extname(file)] ?? 'application/octet-stream', readFileSync(file), `${file}@${statSync(file).mtimeMs}`];
}

// ---- compression ---------------------------------------------------------------------------
const compressors = {
  br: (bytes, quality) => promisify(brotliCompress)(bytes, { params: { [zlib.BROTLI_PARAM_QUALITY]: quality, [zlib.BROTLI_PARAM_SIZE_HINT]: bytes.length } }),
  gzip: (bytes, quality) => promisify(gzip)(bytes, { level: quality === 9 ? 9 : 6 }),
};
/** Files already compressed, by file, version and encoding (the page's files do not change while served). */
const compressedFiles = new Map();
const MIN_COMPRESS = 1024;

/** The encoding to answer with: br, else gzip, when the client accepts it (q > 0); else none. */
function encodingFor(request) {
  const accepted = new Map(String(request.headers['accept-encoding'] ?? '').split(',').map((part) => {
    const [name, ...params] = part.trim().toLowerCase().split(';');
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    return [name, q === undefined ? 1 : Number(q.slice(2))];
  }));
  return ['br', 'gzip'].find((encoding) => (accepted.get(encoding) ?? accepted.get('*') ?? 0) > 0);
}

/** The body as sent: compressed for clients that accept it, a file's compressed copy kept. */
async function encoded(request, bytes, fileKey) {
  const encoding = encodingFor(request);
  if (encoding === undefined || bytes.length < MIN_COMPRESS) return { bytes };
  if (fileKey === undefined) return { encoding, bytes: await compressors[encoding](bytes, 4) };
  const key = `${encoding}:${fileKey}`;
  if (!compressedFiles.has(key)) compressedFiles.set(key, compressors[encoding](bytes, 9));
  return { encoding, bytes: await compressedFiles.get(key) };
}

const json = (value) => ['application/json', JSON.stringify(value)];

async function respond(request, response) {
  const url = new URL(request.url ?? '/', 'http://x');
  const path = url.pathname;
  const since = (name) => (url.searchParams.has(name) ? Number(url.searchParams.get(name)) : undefined);
  let found;
  if (path === '/config.json') found = json(config());
  else if (path === '/status.json') found = json(federation === undefined ? { live: false } : federation.status({ events: since('events'), round: since('round'), points: since('points'), marks: since('marks') }));
  else if (path === '/artifact.bin' && live) found = ['application/octet-stream', artifact, 'artifact.bin'];
  else if (path === '/join' && request.method === 'POST') found = json(await seat(request));
  else if (path === '/leave' && request.method === 'POST') found = json(await leave(request));
  else found = serveFile(path);
  if (found === undefined) return response.writeHead(404, { ...isolation(request), 'content-type': 'text/plain' }).end('not found');
  const cache = path.startsWith('/assets/') ? 'public, max-age=31536000, immutable' : 'no-store';
  const raw = typeof found[1] === 'string' ? Buffer.from(found[1]) : found[1];
  const sent = await encoded(request, raw, found[2]);
  response.writeHead(200, {
    ...isolation(request),
    'content-type': found[0],
    'cache-control': cache,
    vary: 'accept-encoding',
    ...(sent.encoding === undefined ? {} : { 'content-encoding': sent.encoding }),
  }).end(sent.bytes);
}

const addresses = urls();
console.log(`web-demo: ${addresses[0]}` + (live ? ` — a live federation with ${clients} client seats; the rounds start once ${quorum} are in (signalling on the same port, /signal)` : ''));
const phone = addresses.find((u) => !/\/\/(localhost|127\.)/.test(u));
if (phone !== undefined) {
  const joinLink = `${phone}?run=join`;
  console.log(`web-demo: on a phone on this network: ${joinLink}${tls === undefined ? ' (phones can only watch over http; joining needs https: see docs/WEB-DEMO.md)' : ''}`);
  if (process.stdout.isTTY) console.log(await QRCode.toString(joinLink, { type: 'terminal', small: true }));
}
