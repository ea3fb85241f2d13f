#!/usr/bin/env node
// The end-to-end run: real browsers as real peers. Inside a private network namespace
// (scripts/e2e.sh makes it), a signalling server, a static server, a Node peer over
// node-datachannel and headless Chromium pages run the package as a web app would:
//
//   federated: the Node process is the federated_digits server; 4 pages are its clients.
//              Page 1 is hidden at round 5 and must keep contributing; page 3 closes 5
//              rounds later and the rounds must go on; the global model must reach 90 %.
//              Pages 1 and 3 are Firefox (ESR, over WebDriver BiDi), 2 and 4 Chromium.
//   cnn:       the Node process is the federated_cnn server; 4 pages are its clients, each
//              handed the CNN exported from PyTorch (examples/models/digits_cnn.onnx) and
//              training it with OnnxModel; the global model must reach 97 %, and the
//              server's export of it, scored by onnxruntime-node, the same accuracy.
//   split:     the Node process is the server of split learning (the splitLearning template,
//              SplitFed) of the same CNN cut after its convolutions; 4 pages are its
//              clients, each building only the convolutions and sending their activations:
//              every client's held-out accuracy must reach 97 %.
//   gossip:    6 pages run gossip_digits with no server; every peer must reach 85 %.
//              Peer 0 is Firefox among five Chromium peers.
//   Each Firefox page is a browser of its own: Firefox clamps the timers of a window's
//   background tabs to a second.
//   Every peer has an identity (the pages keep theirs in IndexedDB); this process is the
//   operator: the federated room admits by list, the gossip room by join token.
//   (web-demo's live federation has a browser test of its own: web-demo/test/e2e.mjs,
//   scripts/e2e.sh --web-demo.)
//
// Prints one line per check and ends with `e2e: N passed, M failed`. Options:
//   --only federated|cnn|split|gossip   --full-rounds N (rounds before page 1 is hidden; default 5)
//   --steady-from K (the federated run's steady rounds: those after the first K; default 10)
//   --round-ms MS (the federated server's round timer; default 200) --codec f16 (its clients' updates in float16)
//   --next-round close (the next round starts as soon as one closes: FedAvg's next=close)
//   --only echo --echoes N [--echo-pages 4] [--echo-quiet 200] [--echo-bytes 10000]: the data channels alone
//   (not run otherwise; bench/federation-rounds.mjs)
//   --only echo-pair [--echo-pages 1,4] [--echo-bytes 64,10000] [--echo-quiet 0,200] --echoes N: the same
//   between Chromium pages alone, plain RTCPeerConnections (bench/echo-pair.mjs is its Node twin)
//   --engines mixed|chromium (default mixed: the Firefox pages above; chromium: none)
//   --client-browsers shared|own: the federated run's and the echo's Chromium clients as pages of one
//   browser (default), or each in a browser of its own (its browser, renderer and network service
//   processes), as each phone of a deployment runs its own browser; with own, the federated run
//   also reports each client's CPU per steady round
//   --local-clients N (with --engines chromium): the federated run's last N clients run in this
//   process, handed the server's envelopes directly as in the in-process round, so the Chromium
//   clients have the machine to themselves; its rounds end after --full-rounds (no page hidden
//   or closed). With N 3: one phone's path through a round whose server serves four clients
//   BB_E2E_RESULT=file writes the federated (or echo) run's figures as JSON (bench/federation-rounds.mjs)
//   BB_E2E_PROFILE=file writes a CPU profile of this process (the federated server) over the rounds measured
//   BB_E2E_PAGE_PROFILE=file writes a CPU profile of the federated run's last page over its steady rounds
//   BB_CHROMIUM overrides /usr/bin/chromium; BB_CHROMIUM_ARGS adds flags (space-separated)
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

import { chromium } from 'playwright-core';
import puppeteer from 'puppeteer-core';

import {
  loadBb,
  peerIdFromU64,
  roundReporter,
  runPeer,
  splitLearning,
} from '../dist/index.js';
import {
  compileFederatedCnn,
  federatedDigits,
  installCnnServer,
  installDigitsClient,
  installDigitsServer,
  splitDigits,
  startCnnServer,
  startDigitsServer,
} from '../dist/examples/index.js';
import { Identity } from '../dist/identity/index.js';
import { SignalClient, createJoinToken } from '../dist/signal/index.js';
import { SignalServer } from '../dist/signal/node.js';
import { WebRtcTransport } from '../dist/transport/index.js';
import { CHROMIUM_ARGS, check, digitsCsv as readDigits, openPeer as openPage, packageRoot, servePages, sleep, summary, until } from './common.mjs';

const CHROMIUM = process.env.BB_CHROMIUM ?? '/usr/bin/chromium';
const option = (name) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : undefined);
const only = option('--only');
// rounds with all four clients before one is hidden (the benchmark asks for more)
const fullRounds = Number(option('--full-rounds') ?? 5);
// the federated run's steady rounds: those after the first --steady-from (default 10)
const steadyFrom = Number(option('--steady-from') ?? 10);
const mixed = (option('--engines') ?? 'mixed') === 'mixed';
// the federated server's round timer (default federated_digits' 200 ms; bench/federation-rounds.mjs
// also measures 1 ms: the next round starts about as soon as one closes)
const roundMs = Number(option('--round-ms') ?? 200);
// the clients' updates on the wire: float32 (default) or --codec f16
const codec = option('--codec');
// when the next round starts: at the round timer's tick (default) or --next-round close
const nextRound = option('--next-round') ?? 'timer';
if (nextRound !== 'timer' && nextRound !== 'close') throw new Error(`--next-round is timer or close, got ${nextRound}`);
const FIREFOX = process.env.BB_FIREFOX ?? '/usr/bin/firefox-esr';
const clientBrowsers = option('--client-browsers') ?? 'shared';
if (clientBrowsers !== 'shared' && clientBrowsers !== 'own') throw new Error(`--client-browsers is shared or own, got ${clientBrowsers}`);

// ---- the servers ------------------------------------------------------------------------

const digitsCsv = readDigits();
const { server: http, files, base } = await servePages();
const cnnModel = readFileSync(join(packageRoot, '..', 'examples', 'models', 'digits_cnn.onnx'));
files.set('/digits_cnn.onnx', ['application/octet-stream', cnnModel]);

// Every room of the run has an admission policy (set as the run makes it): the federated
// room lists its peers, the gossip room takes join tokens; rooms without one admit nobody.
const policies = new Map();
const signalServer = await SignalServer.listen({ port: 0, host: '127.0.0.1', ratePerSecond: 500, rateBurst: 2000, rooms: (room) => policies.get(room), openRooms: false });
const signalUrl = `ws://127.0.0.1:${signalServer.address.port}`;

// BB_CHROMIUM_ARGS: more flags, space-separated (bench/federation-rounds.mjs passes its environment on)
const launchChromium = () => chromium.launch({ executablePath: CHROMIUM, args: [...CHROMIUM_ARGS, ...(process.env.BB_CHROMIUM_ARGS ?? '').split(' ').filter(Boolean)] });
const browser = await launchChromium();
/** Every process's parent, from /proc. */
function parentPids() {
  const parent = new Map();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      parent.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // the process ended while we read
    }
  }
  return parent;
}
/** Whether process `pid` is this process or below it, by the `parent` of parentPids(). */
function ours(parent, pid) {
  for (let p = pid; p !== undefined && p > 1; p = parent.get(p)) if (p === process.pid) return true;
  return false;
}
/** The pids of this process's children (a browser launched is one of them, its processes below it). */
const childPids = () => [...parentPids()].filter(([, parent]) => parent === process.pid).map(([pid]) => pid);

/**
 * Where the Chromium clients of one scenario run (--client-browsers): `context(k)` is the
 * context of client k's page, with `pids[k]` the pid of its own browser (undefined when the
 * clients share the run's browser); `close()` closes what it opened.
 */
async function chromiumClients(clients) {
  const shared = await browser.newContext();
  if (clientBrowsers === 'shared') return { context: () => shared, pids: [], close: () => shared.close() };
  const own = [];
  const pids = [];
  for (let k = 0; k < clients; k++) {
    const before = new Set(childPids());
    const b = await launchChromium();
    own.push(b);
    pids.push(childPids().find((pid) => !before.has(pid)));
  }
  const contexts = await Promise.all(own.map((b) => b.newContext()));
  return { context: (k) => contexts[k], pids, close: async () => (await shared.close(), await Promise.all(own.map((b) => b.close()))) };
}
const openPeer = (context, query) => openPage(context, base, query);

/** A Firefox of its own (something with newPage(), as a Chromium context has). */
const firefoxes = [];
async function firefox() {
  const browser = await puppeteer.launch({ browser: 'firefox', executablePath: FIREFOX, headless: true, protocolTimeout: 60_000 });
  firefoxes.push(browser);
  return browser;
}
async function closeFirefoxes() {
  await Promise.all(firefoxes.splice(0).map((b) => b.close().catch(() => undefined)));
}
/** Which engine each page runs: `Firefox/…` or `Chrome/…` from its user agent. */
const engineOf = async (peer) => ((await peer.page.evaluate(() => navigator.userAgent)).match(/(Firefox|Chrome)\/\d+/)?.[0] ?? 'unknown');

// ---- federated ----------------------------------------------------------------------------

/**
 * Where a round's time goes: per client of each round, on one clock (the machine's), the
 * moment the server began that client's send() after the broadcast began (`queued`), from
 * there to the envelope's arrival at the page's data channel (`down`), on to the page's
 * update leaving its send() (`client`: wake, poll, 12 SGD steps, encode, send; split into
 * `wake`, up to the start of the poll that sent it, and `poll`, that poll up to the send's
 * return), and on to its arrival at the server's data channel (`up`). `down` and `up`
 * each carry the offset between the two processes' clocks (time origins); their sum does not. Medians over every client of every
 * round (`all`) and over the client whose update closed each round (`last`).
 */
function roundPhases(rounds, pageStates, ids, serverBusy = [], next = []) {
  const firstAtOrAfter = (xs, t) => xs.find((x) => x >= t);
  const rows = { all: [], last: [] };
  const server = { busy: [], close: [] };
  for (const [r, round] of rounds.entries()) {
    // the server's own work (polls, delivers) between the broadcast and the round's last
    // update, and from that update to the next broadcast's first send()
    const lastArrival = Math.max(...round.arrived.values());
    let busy = 0;
    for (const [a, b] of serverBusy) busy += Math.max(0, Math.min(b, lastArrival) - Math.max(a, round.start));
    server.busy.push(busy);
    if (next[r] !== undefined) server.close.push(next[r].start - lastArrival);
    let last;
    for (const [i, id] of ids.entries()) {
      const sent = round.sent.get(id);
      const arrived = round.arrived.get(id);
      if (sent === undefined || arrived === undefined) continue;
      const received = firstAtOrAfter(pageStates[i].arrivals ?? [], sent);
      const replied = received === undefined ? undefined : firstAtOrAfter(pageStates[i].sends ?? [], received);
      if (replied === undefined || replied > arrived + 1) continue; // not this round's (clocks agree within 0.1 ms)
      // the poll that sent the update: the last one that began before it left
      const polled = (pageStates[i].pollStarts ?? []).filter((t) => t >= received && t <= replied).at(-1) ?? received;
      // within that poll, the page's transport.send() of the update (the rest is the engine's)
      const sending = (pageStates[i].sendStarts ?? []).filter((t) => t >= polled && t <= replied).at(-1) ?? replied;
      const row = { queued: sent - round.start, down: received - sent, client: replied - received, wake: polled - received, poll: replied - polled, engine: sending - polled, send: replied - sending, up: arrived - replied, arrived };
      rows.all.push(row);
      if (last === undefined || arrived > last.arrived) last = row;
    }
    if (last !== undefined) rows.last.push(last);
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
  const summary = (list) => Object.fromEntries(['queued', 'down', 'client', 'wake', 'poll', 'engine', 'send', 'up'].map((k) => [k, median(list.map((r) => r[k]))]));
  return { all: summary(rows.all), last: summary(rows.last), samples: rows.last.length, serverBusy: median(server.busy), serverClose: median(server.close) };
}

/**
 * CPU time (ms) of this process's descendants (the browsers and their renderer, network and
 * GPU processes), or of process `root` and its descendants (one client's browser), from
 * /proc: what the pages cost the machine, which the other work on a shared machine does not
 * lengthen as it does wall-clock time.
 */
function descendantsCpuMs(root = process.pid) {
  const parent = new Map();
  const cpu = new Map();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      parent.set(Number(name), Number(fields[1]));
      cpu.set(Number(name), Number(fields[11]) + Number(fields[12]));
    } catch {
      // the process ended while we read
    }
  }
  let ticks = root === process.pid ? 0 : (cpu.get(root) ?? 0);
  for (const [pid, t] of cpu) {
    for (let p = parent.get(pid); p !== undefined && p > 1; p = parent.get(p)) {
      if (p === root) {
        ticks += t;
        break;
      }
    }
  }
  return (ticks * 1000) / 100; // USER_HZ is 100 on Linux
}

/**
 * CPU time (ms) of every thread of this process and of its descendants, keyed by where it
 * runs: `node <thread>` for this process (the server's main thread, libdatachannel's and
 * libuv's threads), `<kind> <thread>` for the browsers' processes (kind: browser, renderer,
 * gpu, network, utility, zygote), thread names from /proc (CrRendererMain,
 * WebRTC_Network, ...). The difference of two readings says which threads a round keeps busy.
 */
function threadsCpuMs() {
  const parent = parentPids();
  const kindOf = (pid) => {
    if (pid === process.pid) return 'node';
    let cmdline = '';
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      return 'gone';
    }
    const type = /--type=([a-z-]+)/.exec(cmdline)?.[1];
    if (type === undefined) return cmdline.includes('chrom') ? 'browser' : 'other';
    if (type === 'utility') return cmdline.includes('NetworkService') ? 'network' : 'utility';
    return type === 'gpu-process' ? 'gpu' : type;
  };
  const totals = new Map();
  for (const pid of parent.keys()) {
    if (!ours(parent, pid)) continue;
    const kind = kindOf(pid);
    let tids = [];
    try {
      tids = readdirSync(`/proc/${pid}/task`);
    } catch {
      continue;
    }
    for (const tid of tids) {
      try {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        // this process's threads all say `node`: its main thread (the server, the signalling
        // and static servers, the browser automation) is told apart from the rest (V8's
        // platform workers: GC, compilers; Node's own helpers)
        const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')).replace(/[0-9]+$/, '#');
        const comm = kind === 'node' && name === 'node' ? (tid === String(pid) ? 'main' : 'v8-helpers') : name;
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        const key = `${kind} ${comm}`;
        totals.set(key, (totals.get(key) ?? 0) + ((Number(fields[11]) + Number(fields[12])) * 1000) / 100);
      } catch {
        // the thread ended while we read
      }
    }
  }
  return totals;
}

/**
 * The time (ms) every thread of this process and of its descendants has spent runnable but
 * waiting for a core (/proc/…/schedstat): what the round loses to the other threads on the
 * machine, its own and everyone else's, at each of its hand-offs from thread to thread.
 */
function runQueueWaitMs() {
  const parent = parentPids();
  let ns = 0;
  for (const pid of parent.keys()) {
    if (!ours(parent, pid)) continue;
    let tids = [];
    try {
      tids = readdirSync(`/proc/${pid}/task`);
    } catch {
      continue; // the process ended while we read
    }
    for (const tid of tids) {
      try {
        ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[1]);
      } catch {
        // the thread ended while we read
      }
    }
  }
  return ns / 1e6;
}

/**
 * This network namespace's UDP datagrams and bytes so far (/proc/net/snmp, /proc/net/dev):
 * every packet of the data channels (DTLS over UDP; the pages and the server share the
 * namespace, so a datagram counts once out and once in).
 */
function udpCounters() {
  const lines = readFileSync('/proc/net/snmp', 'utf8').split('\n').filter((l) => l.startsWith('Udp:'));
  const [names, values] = lines.map((l) => l.split(/\s+/).slice(1));
  const udp = Object.fromEntries(names.map((n, k) => [n, Number(values[k])]));
  let bytes = 0;
  for (const line of readFileSync('/proc/net/dev', 'utf8').split('\n').slice(2)) {
    const [name, rest] = line.split(':');
    if (rest !== undefined && name.trim() !== '') bytes += Number(rest.trim().split(/\s+/)[8]);
  }
  return { datagrams: udp.OutDatagrams, bytes };
}

/** Per round, the CPU time each thread kind spent between two readings of threadsCpuMs (largest first, over 0.2 ms). */
function threadsPerRound(before, after, rounds) {
  const rows = [];
  for (const [key, ms] of after) {
    const per = (ms - (before.get(key) ?? 0)) / rounds;
    if (per >= 0.2) rows.push([key, Number(per.toFixed(2))]);
  }
  return Object.fromEntries(rows.sort((a, b) => b[1] - a[1]));
}

async function federated() {
  console.log('\n== federated_digits: a Node server and 4 browser clients over WebRTC');
  const clients = 4;
  const bb = await loadBb(readFileSync(join(packageRoot, 'wasm', 'bb.wasm')));
  // Updates past FedAvg's distance bound are pulled back onto it rather than dropped: once
  // page 3 closes, three label-skewed clients remain, and the farthest of three is past
  // twice the median distance nearly every round — dropping it starved the model of its
  // classes (accuracy fell from 0.90 to 0.51).
  // federated_digits' Module as its template records it, with the round timer of --round-ms
  const plan = federatedDigits({ roundMs, nextRound, ...(codec === undefined ? {} : { codec }) });
  const compiler = plan.compiler(bb);
  compiler.rebind('aggregator', 'Aggregator', 'FedAvg', `quorum=3,target=${clients},deadline_ms=1500,no_quorum=abandon,init=model,beyond_norm=clip${nextRound === 'close' ? ',next=close' : ''}`);
  const artifact = compiler.compile(plan.module.build(bb));
  compiler.free();
  files.set('/artifact.bin', ['application/octet-stream', artifact]);
  const split = splitDigits(bb, digitsCsv, clients, 1, 5);
  const serverIdentity = await Identity.generate();
  const serverId = serverIdentity.peerId;
  const server = installDigitsServer(bb, artifact, serverId, split.test);
  const room = `fed-${process.pid}`;
  // the room admits the peers on its list: the server, then each page once it has its id
  const allow = new Map([[serverId, 'server']]);
  policies.set(room, { allow });
  const rtc = await WebRtcTransport.create({ signal: await SignalClient.connect({ url: signalUrl, room, identity: serverIdentity, role: 'server' }) });
  // Round latency: from the server's broadcast of a global model to the last client update
  // of that round arriving (while all clients take part).
  const latencies = [];
  // per round: the time the broadcast's send() calls took together (the data channel's own
  // send blocks on the WebRTC stack's threads)
  const sendMs = [];
  let broadcastAt;
  let updates = 0;
  // per round, on the clock the pages read too (time origin + performance.now()): when the
  // broadcast began, when each client's send() returned, when each client's update arrived
  // (the time origin read once: Node computes it afresh on every read)
  const origin = performance.timeOrigin;
  const abs = () => origin + performance.now();
  const timeline = [];
  // --local-clients: each client in this process, by id, with the handler its runPeer
  // delivers to; an envelope either way is handed over on the next turn of the event loop
  const localClients = Number(option('--local-clients') ?? 0);
  if (!(Number.isInteger(localClients) && localClients >= 0 && localClients < clients)) throw new Error(`--local-clients is 0..${clients - 1}, got ${localClients}`);
  if (localClients > 0 && mixed) throw new Error('--local-clients is for Chromium clients alone (--engines chromium)');
  const pageCount = clients - localClients;
  const local = new Map();
  let serverHandler;
  const transport = {
    self: rtc.self,
    events: rtc.events,
    peers: () => [...rtc.peers(), ...local.keys()],
    stats: () => rtc.stats(),
    close: () => rtc.close(),
    send(to, bytes) {
      if (broadcastAt === undefined) (broadcastAt = performance.now()), (updates = 0), sendMs.push(0), timeline.push({ start: abs(), sent: new Map(), arrived: new Map() });
      const before = performance.now();
      timeline.at(-1).sent.set(to, abs());
      const client = local.get(to);
      if (client === undefined) rtc.send(to, bytes);
      else setImmediate(client.deliver, serverId, bytes.slice());
      sendMs[sendMs.length - 1] += performance.now() - before;
    },
    onEnvelope(handler) {
      serverHandler = (from, bytes) => {
        if (broadcastAt !== undefined) timeline.at(-1).arrived.set(from, abs());
        if (broadcastAt !== undefined && ++updates === liveClients) {
          latencies.push(performance.now() - broadcastAt);
          broadcastAt = undefined;
        }
        handler(from, bytes);
      };
      return rtc.onEnvelope(serverHandler);
    },
  };
  for (let k = pageCount + 1; k <= clients; k++) {
    // client k's shard and seed, as page k would take them (peer.js)
    const id = peerIdFromU64(1000 + k);
    const client = { deliver: undefined, running: undefined };
    local.set(id, client);
    const link = {
      self: id,
      events: rtc.events, // runPeer reads no events of its transport
      peers: () => [serverId],
      stats: () => rtc.stats(),
      close() {},
      send: (_to, bytes) => setImmediate(serverHandler, id, bytes.slice()),
      onEnvelope: (handler) => ((client.deliver = handler), () => (client.deliver = undefined)),
    };
    client.running = runPeer(installDigitsClient(bb, artifact, id, serverId, split.shards[k - 1], k + 1), link);
  }
  let liveClients = clients;
  // the server's main thread: when each of its polls and delivers ran (on the same clock)
  const serverBusy = [];
  for (const method of ['poll', 'deliver']) {
    const call = server[method].bind(server);
    server[method] = (...args) => {
      const began = abs();
      try {
        return call(...args);
      } finally {
        if (serverBusy.length < 20_000) serverBusy.push([began, abs()]);
      }
    };
  }
  const reports = [];
  const running = runPeer(server, transport, {
    onStep: roundReporter((r) => {
      reports.push(r);
      if (r.round % 5 === 0) console.log(`  round ${r.round}: held-out accuracy ${r.accuracy.toFixed(3)}`);
    }),
  });

  if (mixed && clientBrowsers === 'own') throw new Error('--client-browsers own is for Chromium clients alone (--engines chromium)');
  const chromiums = await chromiumClients(pageCount);
  const pages = [];
  for (let k = 1; k <= pageCount; k++) {
    const where = mixed && (k === 1 || k === 3) ? await firefox() : chromiums.context(k - 1);
    pages.push(await openPeer(where, { role: 'fed', i: k, peers: clients, room, signal: signalUrl }));
  }
  const engines = await Promise.all(pages.map(engineOf));
  if (mixed) check('Firefox and Chromium clients share the federation', engines.some((e) => e.startsWith('Firefox')) && engines.some((e) => e.startsWith('Chrome')), engines.join(', '));
  const pageIds = pages.map((p) => p.self);
  const clientIds = [...pageIds, ...local.keys()];
  for (const id of pageIds) allow.set(id, 'client');
  for (const id of clientIds) server.addPeer(id);
  for (const p of pages) await p.start({ server: serverId });
  check(`${pageCount} browser clients made identities, installed the artifact and joined the room${localClients > 0 ? ` (and ${localClients} in this process)` : ''}`, pages.length === pageCount && new Set(clientIds).size === clients);
  await until('every client in the room', () => pageIds.every((id) => rtc.peers().includes(id)), 30_000);

  // the Node process's garbage collections (count and pause), read with the steady rounds' traffic
  const gc = { count: 0, ms: 0 };
  const gcObserver = new (await import('node:perf_hooks')).PerformanceObserver((list) => {
    for (const entry of list.getEntries()) (gc.count++, (gc.ms += entry.duration));
  });
  gcObserver.observe({ entryTypes: ['gc'] });
  const started = performance.now();
  const cpuAtStart = { pages: descendantsCpuMs(), server: process.cpuUsage(), threads: threadsCpuMs() };
  const framesAt = async () => (await Promise.all(pages.map((p) => p.state()))).reduce((sum, s) => sum + s.framesAsked, 0);
  const framesAtStart = await framesAt();
  // BB_E2E_PROFILE=file: a CPU profile of this process (the server's main thread) over the rounds measured
  const profiler = process.env.BB_E2E_PROFILE ? new (await import('node:inspector/promises')).Session() : undefined;
  if (profiler) {
    profiler.connect();
    await profiler.post('Profiler.enable');
    await profiler.post('Profiler.setSamplingInterval', { interval: 200 });
    await profiler.post('Profiler.start');
  }
  startDigitsServer(server, clientIds, split.test, running.driver.now());
  running.driver.wake();
  const round = () => reports.at(-1)?.round ?? 0;
  // the threads' CPU over the steady rounds too (the pages' wasm compiled and tiered up), when
  // the run has any: one reading of /proc between rounds steadyFrom and steadyFrom + 1 (the
  // pages are not asked anything until the rounds end)
  const measureSteady = steadyFrom < fullRounds;
  if (measureSteady) await until(`round ${steadyFrom}`, () => round() >= steadyFrom, 120_000 + fullRounds * 1000);
  const steadyAt = measureSteady ? { round: round(), threads: threadsCpuMs(), pages: descendantsCpuMs(), clients: chromiums.pids.map((pid) => descendantsCpuMs(pid)), runQueueWait: runQueueWaitMs(), server: process.cpuUsage(), driver: running.driver.stats, udp: udpCounters(), transport: rtc.stats(), gc: { ...gc } } : undefined;
  // BB_E2E_PAGE_PROFILE=file: a CPU profile of the last Chromium page over the steady rounds (or all)
  const pageProfiler = process.env.BB_E2E_PAGE_PROFILE ? await pages.at(-1).page.context().newCDPSession(pages.at(-1).page) : undefined;
  if (pageProfiler) {
    await pageProfiler.send('Profiler.enable');
    await pageProfiler.send('Profiler.setSamplingInterval', { interval: 100 });
    await pageProfiler.send('Profiler.start');
  }
  await until(`round ${fullRounds}`, () => round() >= fullRounds, 120_000 + fullRounds * 1000);
  if (pageProfiler) {
    const { profile } = await pageProfiler.send('Profiler.stop');
    (await import('node:fs')).writeFileSync(process.env.BB_E2E_PAGE_PROFILE, JSON.stringify(profile));
    await pageProfiler.detach();
  }
  if (profiler) {
    const { profile } = await profiler.post('Profiler.stop');
    (await import('node:fs')).writeFileSync(process.env.BB_E2E_PROFILE, JSON.stringify(profile));
    profiler.disconnect();
  }
  check('the first rounds complete over real data channels', round() >= fullRounds, `${round()} rounds in ${((performance.now() - started) / 1000).toFixed(1)} s`);

  // hide page 1: its driver must fall back to timers and the client keep training
  const fullLatencies = [...latencies];
  const serverCpu = process.cpuUsage(cpuAtStart.server);
  const cpuPerRound = { pages: (descendantsCpuMs() - cpuAtStart.pages) / round(), server: (serverCpu.user + serverCpu.system) / 1000 / round() };
  const threadsNow = threadsCpuMs();
  const threadsMsPerRound = threadsPerRound(cpuAtStart.threads, threadsNow, round());
  let steadyCpu = {};
  if (steadyAt !== undefined) {
    const rounds = round() - steadyAt.round;
    const serverCpu = process.cpuUsage(steadyAt.server);
    const driverNow = running.driver.stats;
    steadyCpu = {
      steadyCpuMsPerRound: { pages: (descendantsCpuMs() - steadyAt.pages) / rounds, server: (serverCpu.user + serverCpu.system) / 1000 / rounds },
      // with a browser for each client: each client's browser (all its processes) per steady round
      steadyClientCpuMsPerRound: chromiums.pids.map((pid, k) => Number(((descendantsCpuMs(pid) - steadyAt.clients[k]) / rounds).toFixed(2))),
      // the time the run's threads (this process's and the browsers') spent waiting for a core, per steady round
      steadyRunQueueWaitMsPerRound: Number(((runQueueWaitMs() - steadyAt.runQueueWait) / rounds).toFixed(2)),
      steadyThreadsMsPerRound: threadsPerRound(steadyAt.threads, threadsNow, rounds),
      // the server's driver: slices and polls per steady round
      steadyServerDriver: Object.fromEntries(['frames', 'polls'].map((k) => [k, Number(((driverNow[k] - steadyAt.driver[k]) / rounds).toFixed(2))])),
      // per steady round: the server's envelopes and their bytes each way, and the UDP
      // datagrams (every hop's packets, both ways) and bytes on the wire that carried them
      steadyTrafficPerRound: (() => {
        const t = rtc.stats();
        const udp = udpCounters();
        const per = (now, then) => Number(((now - then) / rounds).toFixed(1));
        return {
          envelopesOut: per(t.messagesOut, steadyAt.transport.messagesOut), envelopesIn: per(t.messagesIn, steadyAt.transport.messagesIn),
          bytesOut: per(t.bytesOut, steadyAt.transport.bytesOut), bytesIn: per(t.bytesIn, steadyAt.transport.bytesIn),
          udpDatagrams: per(udp.datagrams, steadyAt.udp.datagrams), wireBytes: per(udp.bytes, steadyAt.udp.bytes),
          nodeGcs: per(gc.count, steadyAt.gc.count), nodeGcMs: Number(((gc.ms - steadyAt.gc.ms) / rounds).toFixed(3)),
        };
      })(),
    };
  }
  // animation frames the 4 pages asked for per round
  const framesAskedPerRound = ((await framesAt()) - framesAtStart) / round();
  const pageStates = await Promise.all(pages.map((p) => p.state()));
  const phases = roundPhases(timeline.slice(1, fullLatencies.length), pageStates, pageIds, serverBusy, timeline.slice(2, fullLatencies.length + 1));
  const steadyPhases = roundPhases(timeline.slice(steadyFrom, fullLatencies.length), pageStates, pageIds, serverBusy, timeline.slice(steadyFrom + 1, fullLatencies.length + 1));
  liveClients = Number.POSITIVE_INFINITY; // from here on a round's updates are not all counted
  if (localClients === 0) await hideAndClose();
  /** Page 1 hidden, then page 3 closed: the rounds must go on. */
  async function hideAndClose() {
    const hidden = pages[0];
    await hidden.page.evaluate(() => window.e2eHide());
    await sleep(300);
    const before = await hidden.state();
    const hiddenAt = round();
    await until('5 more rounds with page 1 hidden', () => round() >= hiddenAt + 5, 120_000);
    await sleep(500);
    const after = await hidden.state();
    check(`the hidden page (${engines[0]}) polls on timers, not animation frames`, after.visibility === 'hidden' && after.animationFrames === before.animationFrames && after.frames > before.frames,
      `animation frames ${before.animationFrames} → ${after.animationFrames}, slices ${before.frames} → ${after.frames}`);
    check(`the hidden page (${engines[0]}) keeps sending its updates`, after.sent >= before.sent + 4, `updates sent ${before.sent} → ${after.sent}`);

    // close page 3: the quorum carries the rounds on
    await until('5 more rounds', () => round() >= hiddenAt + 5, 120_000);
    const closedAt = round();
    await pages[2].page.close();
    await until('5 rounds after a client closed', () => round() >= closedAt + 5, 120_000);
    check(`rounds still complete after a client closed its page (${engines[2]})`, round() >= closedAt + 5, `round ${closedAt} → ${round()}`);
  }

  await until('accuracy 0.90', () => (reports.at(-1)?.accuracy ?? 0) >= 0.9 && round() >= 20, 180_000).catch(() => undefined);
  const last = reports.at(-1);
  const sentBy = [];
  for (const p of pages) sentBy.push(p.page.isClosed() ? 'closed' : (await p.state()).sent);
  const counters = ['rounds_closed', 'rounds_abandoned', 'refused_non_member', 'late_dropped', 'norm_dropped'].map((c) => `${c} ${server.counter(`fedavg.${c}`)}`);
  check('the global model reaches the native example\'s 90 % held-out accuracy', last.accuracy >= 0.9,
    `round ${last.round}: ${last.accuracy.toFixed(3)}; updates sent per page ${sentBy.join(' ')}; ${counters.join(', ')}`);
  const pageErrors = pages.flatMap((p) => p.errors);
  check('no page reported an error', pageErrors.length === 0, pageErrors.slice(0, 3).join(' | '));

  const sorted = fullLatencies.slice(1).sort((a, b) => a - b); // the first includes connecting
  // the rounds after the first --steady-from (default 10): each page's wasm tiered up and
  // compiled, as the in-process federation's is after as many rounds
  const steady = fullLatencies.slice(steadyFrom).sort((a, b) => a - b);
  // each client's path through a steady round: the broadcast's start to its update's arrival
  const steadyClientPathMs = clientIds.map((id) => {
    const paths = timeline.slice(steadyFrom, fullLatencies.length).map((t) => t.arrived.get(id) - t.start).filter(Number.isFinite).sort((a, b) => a - b);
    return Number(paths[Math.floor(paths.length / 2)]?.toFixed(2));
  });
  const sends = sendMs.slice(1, fullLatencies.length).sort((a, b) => a - b);
  const memory = [];
  for (const p of pages) if (!p.page.isClosed()) memory.push((await p.state()).memoryBytes);
  const result = {
    roundMs,
    nextRound,
    codec: codec ?? 'f32',
    rounds: last.round,
    accuracy: last.accuracy,
    roundLatencyMs: { median: sorted[Math.floor(sorted.length / 2)] ?? NaN, max: sorted.at(-1) ?? NaN, samples: sorted.length },
    steadyFrom,
    steadyLatencyMs: { median: steady[Math.floor(steady.length / 2)] ?? NaN, max: steady.at(-1) ?? NaN, samples: steady.length },
    steadyClientPathMs,
    steadyPhasesMs: steadyPhases,
    broadcastSendMs: { median: sends[Math.floor(sends.length / 2)] ?? NaN, max: sends.at(-1) ?? NaN },
    phasesMs: phases,
    cpuMsPerRound: cpuPerRound,
    threadsMsPerRound,
    ...steadyCpu,
    framesAskedPerRound,
    serverMemoryBytes: bb.exports.memory.buffer.byteLength,
    pageMemoryBytes: memory,
  };
  console.log(`  ${JSON.stringify(result)}`);
  gcObserver.disconnect();
  running.stop();
  for (const { running } of local.values()) running.stop(), running.node.free();
  transport.close();
  server.free();
  split.free();
  await chromiums.close();
  await closeFirefoxes();
  return result;
}

// ---- data-channel echo --------------------------------------------------------------------

/**
 * What the data channels alone cost a federated round: this process sends an envelope of a
 * round's size (10 KB, as the global model and each update are) to each of 4 Chromium pages
 * (echo.html: WebRtcTransport and nothing else), each sends it straight back, and a sample
 * runs from the first send to the last echo — a round's exchange with no engine and no
 * training. Each sample follows 200 ms of quiet, as a round's broadcast follows the round
 * timer. Run only when asked (--only echo, --echoes N; --echo-pages, --echo-quiet MS and
 * --echo-bytes change the 4 pages, the 200 ms and the 10 KB): bench/federation-rounds.mjs.
 */
async function echo() {
  const samples = Number(option('--echoes') ?? 30);
  const pageCount = Number(option('--echo-pages') ?? 4);
  const quietMs = Number(option('--echo-quiet') ?? 200);
  const bytes = Number(option('--echo-bytes') ?? 10_000);
  console.log(`\n== data-channel echo: ${samples} times ${bytes} bytes from Node to ${pageCount} Chromium pages and back, ${quietMs} ms apart`);
  const room = `echo-${process.pid}`;
  const identity = await Identity.generate();
  const allow = new Map([[identity.peerId, 'server']]);
  policies.set(room, { allow });
  const chromiums = await chromiumClients(pageCount);
  const pages = [];
  for (let k = 0; k < pageCount; k++) {
    const page = await chromiums.context(k).newPage();
    await page.goto(`${base}/echo.html`);
    const self = await until('an echo page', () => page.evaluate(() => window.e2e?.self || window.e2e?.error), 30_000);
    allow.set(self, 'client');
    await page.evaluate((c) => window.e2eStart(c), { room, signal: signalUrl });
    await until('an echo page to join', () => page.evaluate(() => window.e2e.ready || window.e2e.error), 30_000);
    const error = await page.evaluate(() => window.e2e.error);
    if (error) throw new Error(`echo page: ${error}`);
    pages.push({ page, self });
  }
  const transport = await WebRtcTransport.create({ signal: await SignalClient.connect({ url: signalUrl, room, identity, role: 'server' }) });
  let echoed;
  transport.onEnvelope((from) => echoed?.(from));
  /** Sends `payload` to every page; resolves with the time until the last echo came back. */
  const exchange = (payload) => new Promise((resolve, reject) => {
    const started = performance.now();
    const waiting = new Set(pages.map((p) => p.self));
    const timer = setTimeout(() => reject(new Error(`no echo within 10 s from ${[...waiting].join(', ')}`)), 10_000);
    echoed = (from) => {
      waiting.delete(from);
      if (waiting.size > 0) return;
      clearTimeout(timer);
      resolve(performance.now() - started);
    };
    for (const { self } of pages) transport.send(self, payload);
  });
  await exchange(new Uint8Array(bytes)); // the first one waits for the links
  const times = [];
  const threadsAtStart = threadsCpuMs();
  const cpuAtStart = { pages: descendantsCpuMs(), node: process.cpuUsage(), udp: udpCounters() };
  for (let k = 0; k < samples; k++) {
    if (quietMs > 0) await sleep(quietMs);
    times.push(await exchange(new Uint8Array(bytes).fill(k)));
  }
  const threadsMsPerExchange = threadsPerRound(threadsAtStart, threadsCpuMs(), samples);
  // per exchange: the UDP datagrams under it and the CPU of every process (Chromium's and this one)
  const node = process.cpuUsage(cpuAtStart.node);
  const perExchange = (x) => Number((x / samples).toFixed(2));
  const cpuMsPerExchange = { pages: perExchange(descendantsCpuMs() - cpuAtStart.pages), node: perExchange((node.user + node.system) / 1000) };
  const udpDatagramsPerExchange = perExchange(udpCounters().datagrams - cpuAtStart.udp.datagrams);
  const sorted = [...times].sort((a, b) => a - b);
  const result = { bytes, pages: pageCount, quietMs, echoMs: { median: sorted[Math.floor(sorted.length / 2)], max: sorted.at(-1), samples: sorted.length }, threadsMsPerExchange, cpuMsPerExchange, udpDatagramsPerExchange };
  check(`${samples} times, all ${pageCount} pages sent the ${bytes}-byte envelope back`, times.length === samples, JSON.stringify(result));
  transport.close();
  await chromiums.close();
  return result;
}

// ---- data-channel echo between Chromium pages ----------------------------------------------

/**
 * The data channels with no Node peer and no package code: page 0 holds one plain
 * RTCPeerConnection (one ordered, reliable channel) to each of P other Chromium pages of the
 * same browser, sends each a message they send straight back, and times in the page from the
 * first send() to the last echo, after --echo-quiet ms (a list, e.g. 0,200) of quiet.
 * Descriptions go through this process whole (ICE gathered first). Run only when asked:
 * --only echo-pair [--echo-pages 1,4] [--echo-bytes 64,10000] [--echo-quiet 0,200] --echoes N.
 */
async function echoPair() {
  const samples = Number(option('--echoes') ?? 30);
  const lists = (name, fallback) => (option(name) ?? fallback).split(',').map(Number);
  const results = [];
  for (const pageCount of lists('--echo-pages', '1,4')) {
    const context = await browser.newContext();
    const hub = await context.newPage();
    await hub.goto(`${base}/echo.html`);
    const echoers = [];
    for (let k = 0; k < pageCount; k++) {
      const page = await context.newPage();
      await page.goto(`${base}/echo.html`);
      echoers.push(page);
    }
    const gathered = 'new Promise((resolve) => { if (pc.iceGatheringState === "complete") resolve(); else pc.onicegatheringstatechange = () => pc.iceGatheringState === "complete" && resolve(); })';
    for (const [k, page] of echoers.entries()) {
      const offer = await hub.evaluate(`(async () => {
        const pc = new RTCPeerConnection();
        (window.pcs ??= []).push(pc);
        const channel = pc.createDataChannel('echo', { ordered: true });
        channel.binaryType = 'arraybuffer';
        (window.channels ??= []).push(channel);
        window.opened = (window.opened ?? []);
        window.opened.push(new Promise((resolve) => (channel.onopen = resolve)));
        await pc.setLocalDescription(await pc.createOffer());
        await ${gathered};
        return pc.localDescription.toJSON();
      })()`);
      const answer = await page.evaluate(`(async (offer) => {
        const pc = new RTCPeerConnection();
        window.pc = pc;
        pc.ondatachannel = (e) => {
          e.channel.binaryType = 'arraybuffer';
          e.channel.onmessage = (m) => e.channel.send(m.data);
        };
        await pc.setRemoteDescription(offer);
        await pc.setLocalDescription(await pc.createAnswer());
        await ${gathered};
        return pc.localDescription.toJSON();
      })(${JSON.stringify(offer)})`);
      await hub.evaluate(`window.pcs[${k}].setRemoteDescription(${JSON.stringify(answer)})`);
    }
    await hub.evaluate('Promise.all(window.opened)');
    for (const bytes of lists('--echo-bytes', '64,10000')) {
      for (const quietMs of lists('--echo-quiet', '0,200')) {
        const times = await hub.evaluate(`(async ({ samples, bytes, quietMs }) => {
          const channels = window.channels;
          let waiting = 0;
          let done;
          for (const c of channels) c.onmessage = () => --waiting === 0 && done();
          const exchange = (payload) => new Promise((resolve) => {
            const started = performance.now();
            waiting = channels.length;
            done = () => resolve(performance.now() - started);
            for (const c of channels) c.send(payload);
          });
          await exchange(new Uint8Array(bytes));
          const times = [];
          for (let k = 0; k < samples; k++) {
            if (quietMs > 0) await new Promise((resolve) => setTimeout(resolve, quietMs));
            times.push(await exchange(new Uint8Array(bytes).fill(k)));
          }
          return times;
        })(${JSON.stringify({ samples, bytes, quietMs })})`);
        const sorted = [...times].sort((a, b) => a - b);
        const result = { pages: pageCount, bytes, quietMs, echoMs: { median: sorted[Math.floor(sorted.length / 2)], max: sorted.at(-1), samples: sorted.length } };
        results.push(result);
        check(`Chromium page to ${pageCount} Chromium page(s), ${bytes} B, ${quietMs} ms quiet: every echo came back`, times.length === samples, JSON.stringify(result));
      }
    }
    await context.close();
  }
  return results;
}

// ---- federated_cnn ----------------------------------------------------------------------------

/** The share of rows onnxruntime-node classifies right with a model's first output. */
async function ortAccuracy(model, x, y) {
  const { createRequire } = await import('node:module');
  const ort = createRequire(import.meta.url)('onnxruntime-node');
  const session = await ort.InferenceSession.create(model);
  const n = y.length;
  const out = await session.run({ [session.inputNames[0]]: new ort.Tensor('float32', x, [n, 1, 8, 8]) });
  const logits = out[session.outputNames[0]].data;
  let right = 0;
  for (let i = 0; i < n; i++) {
    let best = 0;
    for (let k = 1; k < 10; k++) if (logits[i * 10 + k] > logits[i * 10 + best]) best = k;
    if (best === y[i]) right++;
  }
  return right / n;
}

async function cnn() {
  console.log('\n== federated_cnn: a Node server and 4 browser clients train a PyTorch CNN with OnnxModel over WebRTC');
  const clients = 4;
  const bb = await loadBb(readFileSync(join(packageRoot, 'wasm', 'bb.wasm')));
  const artifact = compileFederatedCnn(bb, { quorum: 3, target: clients, deadlineMs: 1500 });
  files.set('/artifact-cnn.bin', ['application/octet-stream', artifact]);
  const split = splitDigits(bb, digitsCsv, clients, 1, 5);
  const serverIdentity = await Identity.generate();
  const serverId = serverIdentity.peerId;
  const server = installCnnServer(bb, artifact, serverId, split.test, new Uint8Array(cnnModel));
  const room = `cnn-${process.pid}`;
  const allow = new Map([[serverId, 'server']]);
  policies.set(room, { allow });
  const transport = await WebRtcTransport.create({ signal: await SignalClient.connect({ url: signalUrl, room, identity: serverIdentity, role: 'server' }) });
  const reports = [];
  // every serving tick outputs one accuracy and one export, in either order and not always
  // in one poll: the k-th export is the model the k-th accuracy was measured on
  const exports = [];
  const report = roundReporter((r) => {
    reports.push(r);
    if (r.round % 5 === 0) console.log(`  round ${r.round}: held-out accuracy ${r.accuracy.toFixed(3)}`);
  });
  const running = runPeer(server, transport, {
    onStep(step) {
      if (step.kind === 'appEvent' && step.topic === 'onnx' && step.value?.kind === 'bytes') exports.push(step.value.bytes);
      report(step);
    },
  });
  const context = await browser.newContext();
  const pages = [];
  for (let k = 1; k <= clients; k++) pages.push(await openPeer(context, { role: 'cnn', i: k, peers: clients, room, signal: signalUrl }));
  const clientIds = pages.map((p) => p.self);
  for (const id of clientIds) {
    allow.set(id, 'client');
    server.addPeer(id);
  }
  for (const p of pages) await p.start({ server: serverId });
  check('cnn: 4 browser clients fetched the PyTorch CNN, installed it as OnnxModel and joined the room', pages.length === clients);
  await until('every client in the room', () => clientIds.every((id) => transport.peers().includes(id)), 30_000);
  const started = performance.now();
  startCnnServer(server, clientIds, split.test, running.driver.now());
  running.driver.wake();
  await until('accuracy 0.97', () => (reports.at(-1)?.accuracy ?? 0) >= 0.97, 240_000).catch(() => undefined);
  const last = reports.at(-1) ?? { round: 0, accuracy: 0 };
  check('cnn: the global CNN reaches 97 % held-out accuracy in the browser federation', last.accuracy >= 0.97,
    `round ${last.round}: ${last.accuracy.toFixed(3)} after ${((performance.now() - started) / 1000).toFixed(1)} s`);
  // the server exports each round's global model after evaluating it: score the last export
  // against the accuracy measured in the same tick
  await until('an export and its accuracy', () => exports.length > 0 && reports.length >= exports.length, 5_000).catch(() => undefined);
  const k = exports.length - 1;
  const x = split.test.features(), y = split.test.labels();
  const onnx = k >= 0 ? await ortAccuracy(exports[k], x.data, y.data) : 0;
  const reported = reports[k]?.accuracy ?? Number.NaN;
  check('cnn: onnxruntime-node scores the exported global model at the accuracy the federation reported',
    Math.abs(onnx - reported) <= 1 / y.data.length + 1e-6,
    `export ${k + 1} of ${exports.length} (round ${reports[k]?.round}): onnxruntime ${onnx.toFixed(3)}, federation ${reported.toFixed(3)}`);
  const pageErrors = pages.flatMap((p) => p.errors);
  check('cnn: no page reported an error', pageErrors.length === 0, pageErrors.slice(0, 3).join(' | '));
  running.stop();
  transport.close();
  server.free();
  split.free();
  await context.close();
}

// ---- split_cnn ------------------------------------------------------------------------------

/** The split every peer makes with one template call (the pages get the same options). */
const SPLIT_CNN = { cut: '/MaxPool_1_output_0', clients: 4, training: { loss: 'xent', optimizer: 'nesterov', lr: 0.05 }, evalMs: 500 };

async function split() {
  console.log('\n== split_cnn: a Node server holds the CNN\'s dense layers, 4 browser clients its convolutions (SplitFed) over WebRTC');
  const clients = SPLIT_CNN.clients;
  const bb = await loadBb(readFileSync(join(packageRoot, 'wasm', 'bb.wasm')));
  const plan = splitLearning(SPLIT_CNN);
  const artifact = plan.compile(bb);
  files.set('/artifact-split.bin', ['application/octet-stream', artifact]);
  const serverIdentity = await Identity.generate();
  const server = plan.installServer(bb, { artifact, model: new Uint8Array(cnnModel), self: serverIdentity.peerId, seed: 1 });
  const room = `split-${process.pid}`;
  const allow = new Map([[serverIdentity.peerId, 'server']]);
  policies.set(room, { allow });
  const transport = await WebRtcTransport.create({ signal: await SignalClient.connect({ url: signalUrl, room, identity: serverIdentity, role: 'server' }) });
  const running = runPeer(server.node, transport);
  const context = await browser.newContext();
  const pages = [];
  for (let k = 1; k <= clients; k++) pages.push(await openPeer(context, { role: 'split', i: k, peers: clients, room, signal: signalUrl }));
  const clientIds = pages.map((p) => p.self);
  for (const id of clientIds) allow.set(id, 'client');
  server.start(clientIds);
  for (const p of pages) await p.start({ server: serverIdentity.peerId, plan: SPLIT_CNN });
  const started = performance.now();
  // the pages' states when the last client reached the bar (a later score may dip below it)
  let states = [];
  let lowest = 0;
  const worst = async () => {
    states = await Promise.all(pages.map((p) => p.state()));
    return (lowest = Math.min(...states.map((s) => s.accuracy.at(-1) ?? 0)));
  };
  await until('every client at 0.97', async () => (await worst()) >= 0.97, 300_000, 500).catch(() => undefined);
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  const counts = server.counts();
  check('split: every client\'s held-out accuracy reaches 97 % with its convolutions in the browser and the rest on the server', lowest >= 0.97,
    `worst ${lowest.toFixed(3)} after ${seconds} s; per client ${states.map((s) => (s.accuracy.at(-1) ?? 0).toFixed(3)).join(' ')}; client steps ${states.map((s) => s.split?.steps ?? 0).join(' ')}, server steps ${counts.steps}`);
  const averages = Number(server.node.counter('fedavg.rounds_closed'));
  check('split: SplitFed averaged the clients\' convolutions: the server closed rounds and every client shared its part', averages > 0 && states.every((s) => (s.split?.shares ?? 0) > 0),
    `${averages} rounds closed; shares per client ${states.map((s) => s.split?.shares ?? 0).join(' ')}`);
  check('split: nothing was refused, no step was given up', counts.refused_activations === 0 && states.every((s) => s.split && s.split.refused_gradients === 0 && s.split.timeouts === 0 && s.split.average_timeouts === 0),
    `server ${JSON.stringify(counts)}; clients ${states.map((s) => JSON.stringify(s.split)).join(' ')}`);
  const pageErrors = pages.flatMap((p) => p.errors);
  check('split: no page reported an error', pageErrors.length === 0, pageErrors.slice(0, 3).join(' | '));
  running.stop();
  transport.close();
  server.node.free();
  await context.close();
}

// ---- gossip -------------------------------------------------------------------------------

async function gossip() {
  console.log('\n== gossip_digits: 6 browser peers, no server');
  const n = 6;
  const room = `gossip-${process.pid}`;
  // the room admits holders of join tokens from this run's operator key
  const operator = await Identity.generate();
  policies.set(room, { operators: [operator.publicKey] });
  const context = await browser.newContext();
  const pages = [];
  for (let k = 0; k < n; k++) pages.push(await openPeer(mixed && k === 0 ? await firefox() : context, { role: 'gossip', i: k, peers: n, room, signal: signalUrl }));
  if (mixed) check('a Firefox gossip peer among Chromium peers', (await engineOf(pages[0])).startsWith('Firefox') && (await engineOf(pages[1])).startsWith('Chrome'));
  const ids = pages.map((p) => p.self);
  const expiresAt = Math.floor(Date.now() / 1000) + 3600;
  for (const p of pages) await p.start({ peers: ids, token: await createJoinToken(operator, { peer: p.self, role: 'client', room, expiresAt }) });
  check('6 browser peers compiled the example, installed it and joined the room with join tokens', pages.length === n);
  const worst = async () => {
    const states = await Promise.all(pages.map((p) => p.state()));
    return Math.min(...states.map((s) => s.accuracy.at(-1) ?? 0));
  };
  const started = performance.now();
  let lowest = 0;
  await until('every peer at 0.85', async () => (lowest = await worst()) >= 0.85, 180_000, 500).catch(() => undefined);
  const states = await Promise.all(pages.map((p) => p.state()));
  check('every gossip peer reaches the native example\'s 85 %', lowest >= 0.85,
    `worst ${lowest.toFixed(3)} after ${((performance.now() - started) / 1000).toFixed(1)} s; per peer ${states.map((s) => (s.accuracy.at(-1) ?? 0).toFixed(2)).join(' ')}`);
  check('every peer exchanged models with others', states.every((s) => s.sent > 0 && s.received > 0),
    states.map((s) => `${s.sent}/${s.received}`).join(' '));
  const pageErrors = pages.flatMap((p) => p.errors);
  check('no page reported an error', pageErrors.length === 0, pageErrors.slice(0, 3).join(' | '));
  await context.close();
  await closeFirefoxes();
}

try {
  if (only === undefined || only === 'federated') {
    try {
      const result = await federated();
      if (process.env.BB_E2E_RESULT) {
        const { writeFileSync } = await import('node:fs');
        writeFileSync(process.env.BB_E2E_RESULT, JSON.stringify(result));
      }
    } catch (error) {
      check('federated run', false, String(error?.message ?? error));
    }
  }
  if (only === 'echo') {
    try {
      const result = await echo();
      if (process.env.BB_E2E_RESULT) {
        const { writeFileSync } = await import('node:fs');
        writeFileSync(process.env.BB_E2E_RESULT, JSON.stringify(result));
      }
    } catch (error) {
      check('echo run', false, String(error?.message ?? error));
    }
  }
  if (only === 'echo-pair') {
    try {
      const result = await echoPair();
      if (process.env.BB_E2E_RESULT) {
        const { writeFileSync } = await import('node:fs');
        writeFileSync(process.env.BB_E2E_RESULT, JSON.stringify(result));
      }
    } catch (error) {
      check('echo-pair run', false, String(error?.message ?? error));
    }
  }
  if (only === undefined || only === 'cnn') {
    try {
      await cnn();
    } catch (error) {
      check('cnn run', false, String(error?.message ?? error));
    }
  }
  if (only === undefined || only === 'split') {
    try {
      await split();
    } catch (error) {
      check('split run', false, String(error?.message ?? error));
    }
  }
  if (only === undefined || only === 'gossip') {
    try {
      await gossip();
    } catch (error) {
      check('gossip run', false, String(error?.message ?? error));
    }
  }
} finally {
  await closeFirefoxes();
  await browser.close();
  await signalServer.close();
  http.close();
}
process.exit(summary());
