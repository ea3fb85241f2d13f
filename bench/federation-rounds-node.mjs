// The federated round of bench/federation-rounds.mjs with Node processes for clients: the
// federated_digits server in this process and each of 4 clients in a Node process of its
// own, over the package's WebRtcTransport on node-datachannel (libdatachannel at both ends,
// loopback), signalling through a SignalServer in this process; beside it, in the same
// run, the same federation in this one process with envelopes handed straight from node to
// node. Both time the same span: from the server's first send() of a round's broadcast to
// the round's fourth update handed to the server (before its deliver). What it separates:
// the WebRTC path and four client processes on the cores, without a browser.
//   (cd js && npm run build) && scripts/build-wasm.sh && node bench/federation-rounds-node.mjs [rounds=30] [--next-round close|timer] [--steady-from 10]
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { gunzipSync } from 'node:zlib';

const root = new URL('..', import.meta.url).pathname;
const option = (name, fallback) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : fallback);
const rounds = Number(process.argv[2] && !process.argv[2].startsWith('--') ? process.argv[2] : 30);
const nextRound = option('--next-round', 'close');
const steadyFrom = Number(option('--steady-from', 10));
const CLIENTS = 4;
const rtcConfig = { iceServers: [], bindAddress: '127.0.0.1' };

const { loadBb, LocalNetwork, peerIdFromU64, roundReporter, runPeer } = await import('../js/dist/index.js');
const { federatedDigits, installDigitsClient, installDigitsServer, splitDigits, startDigitsServer } = await import('../js/dist/examples/index.js');
const { Identity } = await import('../js/dist/identity/index.js');
const { SignalClient } = await import('../js/dist/signal/index.js');
const { SignalServer } = await import('../js/dist/signal/node.js');
const { WebRtcTransport } = await import('../js/dist/transport/index.js');

const csvPath = '/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz';
const csv = gunzipSync(readFileSync(csvPath));
const wasm = readFileSync(join(root, 'js/wasm/bb.wasm'));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const abs = () => performance.timeOrigin + performance.now();
const nowNs = () => BigInt(Math.round(performance.now() * 1e6));

// ---- a client process: node bench/federation-rounds-node.mjs --client ARTIFACT INDEX URL ROOM SERVER
if (process.argv[2] === '--client') {
  const [artifactPath, index, url, room] = process.argv.slice(3);
  const bb = await loadBb(wasm);
  const identity = await Identity.generate();
  process.stdout.write(`${JSON.stringify({ id: identity.peerId })}\n`);
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    const message = JSON.parse(line);
    if (message.server !== undefined) {
      const split = splitDigits(bb, csv, CLIENTS, 1, 5);
      const node = installDigitsClient(bb, new Uint8Array(readFileSync(artifactPath)), identity.peerId, message.server, split.shards[Number(index)], Number(index) + 2);
      split.free();
      const transport = await WebRtcTransport.create({ signal: await SignalClient.connect({ url, room, identity }), rtcConfig });
      // when each envelope arrived and each update left (after its send() returned), on the machine's clock
      const arrivals = [];
      const sends = [];
      // and when each poll that did work began (wake: arrival to it; the rest: the engine and send())
      const pollStarts = [];
      const poll = node.poll.bind(node);
      node.poll = (now) => {
        const began = abs();
        const result = poll(now);
        if (abs() - began > 0.05) pollStarts.push(began);
        return result;
      };
      const running = runPeer(node, transport);
      transport.onEnvelope(() => arrivals.push(abs()));
      node.onStep((step) => step.kind === 'send' && sends.push(abs()));
      process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
      globalThis.report = () => ({ arrivals, sends, pollStarts, stats: running.stats() });
    } else if (message.report) {
      process.stdout.write(`${JSON.stringify(globalThis.report())}\n`);
    } else if (message.exit) {
      break;
    }
  }
  process.exit(0);
}

/** The artifact both sides run: federated_digits with the bench's FedAvg settings. */
function compileDigits(bb) {
  const plan = federatedDigits({ roundMs: 200, nextRound });
  const compiler = plan.compiler(bb);
  compiler.rebind('aggregator', 'Aggregator', 'FedAvg', `quorum=3,target=4,deadline_ms=1500,no_quorum=abandon,init=model,beyond_norm=clip${nextRound === 'close' ? ',next=close' : ''}`);
  const artifact = compiler.compile(plan.module.build(bb));
  compiler.free();
  return artifact;
}

/** Times rounds on `server`: from its first send of a broadcast to the fourth update handed to it. */
function roundClock(server) {
  const latencies = [];
  const timeline = [];
  let broadcastAt;
  let updates = 0;
  server.onStep((step) => {
    if (step.kind === 'send' && broadcastAt === undefined) {
      broadcastAt = performance.now();
      updates = 0;
      timeline.push({ start: abs(), sent: new Map(), arrived: new Map() });
    }
    if (step.kind === 'send') timeline.at(-1).sent.set(step.peer, abs());
  });
  const deliver = server.deliver.bind(server);
  server.deliver = (from, bytes, now) => {
    if (broadcastAt !== undefined) {
      timeline.at(-1).arrived.set(from, abs());
      if (++updates === CLIENTS) {
        latencies.push(performance.now() - broadcastAt);
        broadcastAt = undefined;
      }
    }
    return deliver(from, bytes, now);
  };
  return { latencies, timeline };
}

// ---- in one process --------------------------------------------------------------------------
async function inProcess() {
  const bb = await loadBb(wasm);
  const artifact = compileDigits(bb);
  const split = splitDigits(bb, csv, CLIENTS, 1, 5);
  const serverId = peerIdFromU64(1);
  const ids = [2, 3, 4, 5].map((k) => peerIdFromU64(k));
  const server = installDigitsServer(bb, artifact, serverId, split.test);
  for (const id of ids) server.addPeer(id);
  let round = 0;
  server.onStep(roundReporter((r) => (round = r.round)));
  const { latencies } = roundClock(server);
  const network = new LocalNetwork([server, ...ids.map((id, k) => installDigitsClient(bb, artifact, id, serverId, split.shards[k], k + 2))]);
  startDigitsServer(server, ids, split.test, nowNs());
  while (round < rounds + 1) {
    network.poll(nowNs());
    if (!network.hasWork()) {
      const waitMs = Number(network.expiry() - nowNs()) / 1e6;
      if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
  }
  return latencies;
}

// ---- over WebRTC, the clients in Node processes ----------------------------------------------
async function overWebRtc() {
  const bb = await loadBb(wasm);
  const artifact = compileDigits(bb);
  const artifactPath = join(mkdtempSync(join(tmpdir(), 'bb-rounds-node-')), 'artifact.bin');
  writeFileSync(artifactPath, artifact);
  const split = splitDigits(bb, csv, CLIENTS, 1, 5);
  const policies = new Map();
  const signal = await SignalServer.listen({ port: 0, host: '127.0.0.1', ratePerSecond: 500, rateBurst: 2000, rooms: (room) => policies.get(room), openRooms: false });
  const url = `ws://127.0.0.1:${signal.address.port}`;
  const room = `rounds-${process.pid}`;
  const serverIdentity = await Identity.generate();
  const allow = new Map([[serverIdentity.peerId, 'server']]);
  policies.set(room, { allow });
  const children = [];
  for (let k = 0; k < CLIENTS; k++) {
    const child = spawn(process.execPath, [new URL(import.meta.url).pathname, '--client', artifactPath, String(k), url, room], { stdio: ['pipe', 'pipe', 'inherit'] });
    // the child's JSON lines, in order, each to the next() that asks for it
    const queued = [];
    const waiting = [];
    createInterface({ input: child.stdout }).on('line', (line) => (waiting.length > 0 ? waiting.shift()(JSON.parse(line)) : queued.push(JSON.parse(line))));
    const next = () => (queued.length > 0 ? Promise.resolve(queued.shift()) : new Promise((resolve) => waiting.push(resolve)));
    const { id } = await next();
    allow.set(id, 'client');
    children.push({ child, id, next, send: (m) => child.stdin.write(`${JSON.stringify(m)}\n`) });
  }
  for (const c of children) c.send({ server: serverIdentity.peerId });
  for (const c of children) await c.next();
  const ids = children.map((c) => c.id);
  const server = installDigitsServer(bb, artifact, serverIdentity.peerId, split.test);
  let round = 0;
  let accuracy = 0;
  server.onStep(roundReporter((r) => ((round = r.round), (accuracy = r.accuracy))));
  const { latencies, timeline } = roundClock(server);
  const transport = await WebRtcTransport.create({ signal: await SignalClient.connect({ url, room, identity: serverIdentity, role: 'server' }), rtcConfig });
  const running = runPeer(server, transport);
  while (!ids.every((id) => transport.peers().includes(id))) await new Promise((resolve) => setTimeout(resolve, 20));
  const cpuAt = process.cpuUsage();
  startDigitsServer(server, ids, split.test, running.driver.now());
  running.driver.wake();
  while (round < rounds + 1) await new Promise((resolve) => setTimeout(resolve, 20));
  const cpu = process.cpuUsage(cpuAt);
  const reports = [];
  for (const c of children) {
    c.send({ report: true });
    reports.push(await c.next());
  }
  // per client of each round, as run.mjs's phases: down (server's send of its envelope to its
  // arrival), client (arrival to its update's send() returning), up (to the arrival at the server)
  const phases = { down: [], client: [], wake: [], up: [] };
  for (const r of timeline.slice(steadyFrom, latencies.length)) {
    for (const [i, id] of ids.entries()) {
      const sent = r.sent.get(id);
      const arrived = r.arrived.get(id);
      if (sent === undefined || arrived === undefined) continue;
      const received = reports[i].arrivals.find((t) => t >= sent);
      const replied = received === undefined ? undefined : reports[i].sends.find((t) => t >= received);
      if (replied === undefined || replied > arrived + 1) continue;
      phases.down.push(received - sent);
      phases.client.push(replied - received);
      phases.wake.push((reports[i].pollStarts.filter((t) => t >= received && t <= replied).at(-1) ?? received) - received);
      phases.up.push(arrived - replied);
    }
  }
  for (const c of children) c.send({ exit: true });
  running.stop();
  transport.close();
  await signal.close?.();
  return { latencies, accuracy, round, serverCpuMsPerRound: (cpu.user + cpu.system) / 1000 / round, phases: Object.fromEntries(Object.entries(phases).map(([k, v]) => [k, median(v)])) };
}

const fmt = (xs) => `${median(xs).toFixed(1)} ms / ${Math.max(...xs).toFixed(1)} ms`;
console.log(`federated_digits, 4 clients, ${rounds} rounds (broadcast → fourth update), next round on ${nextRound}, median / max:`);
const local = await inProcess();
const web = await overWebRtc();
const local2 = await inProcess();
const both = (xs, from) => xs.slice(from);
const ratio = (a, b) => (median(a) / median(b)).toFixed(2);
console.log(`  in one Node process (no network), before and after   ${fmt(both(local, 1))}, ${fmt(both(local2, 1))}`);
console.log(`  4 Node client processes over WebRTC                  ${fmt(both(web.latencies, 1))}   ${ratio(both(web.latencies, 1), both(local, 1))}x / ${ratio(both(web.latencies, 1), both(local2, 1))}x in-process`);
console.log(`  rounds ${steadyFrom + 1}..${rounds}: in process ${fmt(both(local, steadyFrom))}, ${fmt(both(local2, steadyFrom))}; over WebRTC ${fmt(both(web.latencies, steadyFrom))}   ${ratio(both(web.latencies, steadyFrom), both(local, steadyFrom))}x / ${ratio(both(web.latencies, steadyFrom), both(local2, steadyFrom))}x`);
console.log(`  phases over WebRTC (rounds ${steadyFrom + 1}.., every client, medians): down ${web.phases.down.toFixed(1)}, client ${web.phases.client.toFixed(1)} (of which the wake ${web.phases.wake.toFixed(1)}), up ${web.phases.up.toFixed(1)} ms; the server process's CPU ${web.serverCpuMsPerRound.toFixed(1)} ms a round`);
console.log(`  the WebRTC run ended at round ${web.round} with held-out accuracy ${web.accuracy.toFixed(3)}`);
process.exit(0);
