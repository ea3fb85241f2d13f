#!/usr/bin/env node
// Federated learning across two NATs, through TURN, over HTTPS/WSS (scripts/e2e-nat.sh makes
// the namespaces and starts coturn; this runs in the public one, at 203.0.113.1):
//
//   * a test CA and a certificate for 203.0.113.1 are made with openssl; Chromium trusts the
//     CA through an NSS database in a HOME of its own (a real trust anchor, no flag to skip
//     checks); the page, the package and bb.wasm come over HTTPS, signalling over WSS on
//     the same port (SignalServer.attach);
//   * the signalling server hands every member TURN credentials of its own (coturn's REST
//     scheme with the secret the script gave coturn);
//   * the federated_digits server (fed-server.mjs, Node) runs in n1 with one Chromium client;
//     two Chromium clients run in n2. Rounds must close with all three, the n2 clients'
//     links to the server must be relayed (getStats' selected pair), the n1 client's not.
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync, chmodSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

import { chromium } from 'playwright-core';

import { SignalServer } from '../dist/signal/node.js';
import { CHROMIUM_ARGS, check, here, openPeer, servePages, summary, until } from './common.mjs';

const PUBLIC = '203.0.113.1';
const prefix = process.env.BB_NAT_NS_PREFIX;
const secret = process.env.BB_TURN_SECRET;
const work = process.env.BB_NAT_WORK;
if (!prefix || !secret || !work) {
  console.error('nat.mjs runs inside scripts/e2e-nat.sh');
  process.exit(2);
}
const ROUNDS = 4;

// ---- a test CA, a server certificate it signs, and an NSS database trusting it --------------
const file = (name) => join(work, name);
const openssl = (...args) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-keyout', file('ca.key'),
  '-out', file('ca.pem'), '-subj', '/CN=bytesandbrains e2e test CA', '-addext', 'basicConstraints=critical,CA:TRUE',
  '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', file('server.key'), '-out', file('server.csr'),
  '-subj', `/CN=${PUBLIC}`);
writeFileSync(file('server.ext'), `subjectAltName=IP:${PUBLIC}\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n`);
openssl('x509', '-req', '-in', file('server.csr'), '-CA', file('ca.pem'), '-CAkey', file('ca.key'), '-CAcreateserial', '-days', '1',
  '-out', file('server.pem'), '-extfile', file('server.ext'));
const home = file('home');
mkdirSync(join(home, '.pki', 'nssdb'), { recursive: true });
execFileSync('certutil', ['-N', '-d', `sql:${home}/.pki/nssdb`, '--empty-password']);
execFileSync('certutil', ['-A', '-d', `sql:${home}/.pki/nssdb`, '-n', 'bb-e2e-ca', '-t', 'C,,', '-i', file('ca.pem')]);
const tls = { cert: readFileSync(file('server.pem')), key: readFileSync(file('server.key')) };

// ---- page and signalling on one HTTPS port --------------------------------------------------
const { server: https, files, base } = await servePages({ host: PUBLIC, tls });
const room = 'nat';
const allow = new Map();
const signal = SignalServer.attach(https, {
  path: '/signal', ratePerSecond: 500, rateBurst: 2000, openRooms: false, rooms: (name) => (name === room ? { allow } : undefined),
  turn: { secret, urls: [`turn:${PUBLIC}:3478?transport=udp`], ttlSeconds: 600 },
});
const signalUrl = `wss://${PUBLIC}:${https.address().port}/signal`;

// ---- the server peer, behind NAT 1 ------------------------------------------------------------
const clients = 3;
const serverProcess = spawn('ip', ['netns', 'exec', `${prefix}-n1`, process.execPath, join(here, 'fed-server.mjs'), signalUrl, room, String(clients), file('artifact.bin')],
  { env: { ...process.env, NODE_EXTRA_CA_CERTS: file('ca.pem') }, stdio: ['pipe', 'pipe', 'inherit'] });
const reports = [];
let serverId;
createInterface({ input: serverProcess.stdout }).on('line', (line) => {
  const message = JSON.parse(line);
  if (message.id) serverId = message.id;
  if (message.round !== undefined) reports.push(message);
});

// ---- Chromium in each private network, trusting the test CA ------------------------------------
function inNamespace(ns) {
  const wrapper = file(`chromium-${ns}`);
  writeFileSync(wrapper, `#!/bin/sh\nexec ip netns exec ${prefix}-${ns} /usr/bin/chromium "$@"\n`);
  chmodSync(wrapper, 0o755);
  return chromium.launch({ executablePath: wrapper, args: CHROMIUM_ARGS, env: { ...process.env, HOME: home } });
}
const browsers = [];
try {
  await until('the server peer to start', () => serverId, 60_000);
  allow.set(serverId, 'server');
  files.set('/artifact.bin', ['application/octet-stream', readFileSync(file('artifact.bin'))]);
  const [b1, b2] = await Promise.all([inNamespace('n1'), inNamespace('n2')]);
  browsers.push(b1, b2);
  const query = (i) => ({ role: 'fed', i, peers: clients, room, signal: signalUrl });
  const pages = [await openPeer(await b1.newContext(), base, query(1))];
  const n2 = await b2.newContext();
  pages.push(await openPeer(n2, base, query(2)), await openPeer(n2, base, query(3)));
  const protocols = await Promise.all(pages.map((p) => p.page.evaluate(() => location.protocol)));
  check('Chromium in both private networks loads the page over HTTPS, trusting the test CA', protocols.every((p) => p === 'https:'), protocols.join(' '));
  const ids = pages.map((p) => p.self);
  for (const id of ids) allow.set(id, 'client');
  serverProcess.stdin.write(`${JSON.stringify({ clients: ids })}\n`);
  for (const p of pages) await p.start({ server: serverId });
  // the server process joins on its own time (it reads the clients, then connects over WSS):
  // the room is read once all four are in it, or the wait gives up
  const everyone = [serverId, ...ids];
  await until('the server and the clients in the room', () => everyone.every((id) => signal.members(room).includes(id)), 60_000).catch(() => undefined);
  const members = signal.members(room);
  const missing = everyone.filter((id) => !members.includes(id));
  check('3 clients joined over WSS (1 in n1, 2 in n2) with the server in n1', missing.length === 0 && members.length === clients + 1,
    `${members.length} members${missing.length > 0 ? `; not in the room: ${missing.map((id) => (id === serverId ? 'the server' : `client ${ids.indexOf(id) + 1}`)).join(', ')}` : ''}`);

  // The rounds start at once; a relayed link takes longer to come up than a direct one (and a
  // first attempt that does not open within the transport's connect timeout is made again),
  // so the rounds are counted from the moment the server holds an open link to every client.
  const linked = () => Promise.all(pages.map((p) => p.page.evaluate((peer) => window.e2ePair(peer), serverId)));
  const serverLinksOpen = () => {
    const links = Object.values(reports.at(-1)?.links ?? {});
    return links.length === clients && links.every((state) => state === 'open');
  };
  await until('the server linked to every client', serverLinksOpen, 120_000).catch(() => undefined);
  const sentBefore = await Promise.all(pages.map(async (p) => (await p.state()).sent));
  const from = reports.at(-1)?.round ?? 0;
  // A round closes only with every client's update (the server's quorum is all 3 clients);
  // one whose updates miss the server's deadline (3 s) is abandoned and the next one starts.
  // A relayed link on a loaded machine may miss it now and then: what is counted is rounds
  // closed, each with all three updates, and the abandoned ones are named beside them.
  const closed = () => reports.at(-1)?.counters?.['fedavg.rounds_closed'] ?? 0;
  const abandoned = () => reports.at(-1)?.counters?.['fedavg.rounds_abandoned'] ?? 0;
  const closedBefore = closed();
  const abandonedBefore = abandoned();
  await until(`${ROUNDS} rounds closed after round ${from}`, () => closed() >= closedBefore + ROUNDS, 180_000).catch(() => undefined);
  const last = reports.at(-1);
  const states = await Promise.all(pages.map((p) => p.state()));
  const sent = states.map((st, i) => st.sent - sentBefore[i]);
  check(`${ROUNDS} federated rounds close across the two NATs, each with every client's update`,
    closed() >= closedBefore + ROUNDS && sent.every((n) => n >= ROUNDS - 1) && (last?.accuracy ?? 0) > 0.5,
    `rounds ${from} → ${last?.round ?? 0}: ${closed() - closedBefore} closed, ${abandoned() - abandonedBefore} abandoned; accuracy ${(last?.accuracy ?? 0).toFixed(3)}, updates sent per client since ${sent.join(' ')} (envelopes received in all ${states.map((st) => st.received).join(' ')}); server ${JSON.stringify(last?.counters ?? {})} ${JSON.stringify(last?.transport ?? {})}; server links ${JSON.stringify(last?.links ?? {})}`);
  const pairs = await linked();
  const relayed = (pair) => pair !== undefined && pair !== null && (pair.local === 'relay' || pair.remote === 'relay');
  check('the n2 clients reach the server in n1 through the TURN relay (selected pair from getStats)', relayed(pairs[1]) && relayed(pairs[2]),
    pairs.slice(1).map((p) => (p ? `${p.local}→${p.remote}/${p.protocol}` : 'none')).join(', '));
  check('the n1 client, on the server\'s network, links directly', pairs[0] !== undefined && pairs[0] !== null && !relayed(pairs[0]),
    pairs[0] ? `${pairs[0].local}→${pairs[0].remote}` : 'none');
  const errors = pages.flatMap((p) => p.errors);
  check('no page reported an error', errors.length === 0, errors.slice(0, 3).join(' | '));
} catch (error) {
  check('the NAT/TURN/TLS run', false, String(error?.message ?? error));
} finally {
  serverProcess.kill();
  await Promise.all(browsers.map((b) => b.close()));
  await signal.close();
  https.close();
  https.closeAllConnections();
}
process.exit(summary());
