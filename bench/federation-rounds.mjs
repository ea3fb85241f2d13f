// Round latency of federated_digits with 4 clients, and wasm memory per peer: over real
// WebRTC data channels with the clients in Chromium pages (js/e2e/run.mjs inside a network
// namespace), against the same federation in one Node process with envelopes handed
// straight from node to node (no network, no browser) — the named peer of the ratio.
// A round's latency runs from the server's broadcast of the global model to the arrival of
// the round's last client update (the 200 ms round timer is not part of it). Beside them, the
// data channels alone: a 10 KB envelope from this process to each of 4 pages and straight back.
// Two configurations, each measured the same three ways:
//   default        federated_digits as it ships: a 200 ms round timer, so a round's broadcast
//                  follows ~190 ms of quiet (the echo waits 200 ms before each exchange)
//   back-to-back   a 1 ms round timer: the next round starts within a millisecond of the last
//                  one closing (the echo exchanges with no quiet)
//   back-to-back-f16  the same with the clients' updates in float16 (~5 KB instead of ~10 KB),
//                  in process too (its echo is back-to-back's: not run again)
//   on-close       the 200 ms timer, and the next round starts in the poll that takes a round's
//                  fourth update (FedAvg's next=close; its echo is back-to-back's: not run again)
//   on-close-f16   the same with the clients' updates in float16
//   on-close-browsers  on-close with each client in a Chromium browser of its own (its own
//                  browser, renderer and network service processes) instead of 4 pages of one
//   on-close-phones    the same with each browser's network service in its browser process, as
//                  Chrome on Android runs it (NetworkServiceInProcess2, on by default there)
//   default-phones the default configuration with the clients as on-close-phones runs them
//                  (with their own browsers, the bench also prints each client's CPU per round)
//   on-close-one-phone  on-close with one client as on-close-phones runs it and the other three
//                  in the server's process (run.mjs --local-clients 3, envelopes handed over as in
//                  process): one phone's path through a round whose server serves four clients,
//                  with the machine nearly to itself as a deployment's phone has its own cores — not
//                  the round of four browsers on this machine
// Over WebRTC the bench also prints where a round's time goes (run.mjs's phasesMs): the
// server's send() start after the broadcast began, the data channel down to the page, the
// page's own work (wake, then the poll: the engine's part and the data channel's send()), the
// data channel back; all on one clock. And the CPU time per round of the Chromium processes
// and of this process's e2e child (the Node server), which load lengthens less than wall time.
// Over the steady rounds it counts what a round sends: the server's envelopes and bytes each
// way, the UDP datagrams and wire bytes under them (all links, both ways), and the Node
// process's garbage collections.
//   (cd js && npm run build) && scripts/build-wasm.sh && node bench/federation-rounds.mjs [rounds=30] [--configs default,on-close,back-to-back,back-to-back-f16] [--steady-from K]
// (--steady-from K: the steady rounds are those after the first K, on both sides; default
// 50, or half the rounds when fewer than 100: V8 tiers each page's bb.wasm up over its first
// ~50 rounds, the renderers' thread pools 4-10 ms of CPU a round until then, under 1 after)
import { execFileSync } from 'node:child_process';
import { readFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';

const root = new URL('..', import.meta.url).pathname;
const rounds = Number(process.argv[2] && !process.argv[2].startsWith('--') ? process.argv[2] : 30);
const configsArg = process.argv.includes('--configs') ? process.argv[process.argv.indexOf('--configs') + 1] : 'default,on-close,back-to-back,back-to-back-f16';
// Chrome on Android runs the network service (the renderers' UDP sockets) in the browser
// process; desktop Chromium in a process of its own
const PHONE_CHROMIUM = '--enable-features=NetworkServiceInProcess2';
const CONFIGS = {
  default: { roundMs: 200, quietMs: 200 },
  'on-close': { roundMs: 200, quietMs: 0, nextRound: 'close', echo: false },
  'on-close-f16': { roundMs: 200, quietMs: 0, nextRound: 'close', codec: 'f16', echo: false },
  'on-close-browsers': { roundMs: 200, quietMs: 0, nextRound: 'close', echo: false, clientBrowsers: 'own' },
  'on-close-phones': { roundMs: 200, quietMs: 0, nextRound: 'close', echo: false, clientBrowsers: 'own', chromiumArgs: PHONE_CHROMIUM },
  'default-phones': { roundMs: 200, quietMs: 200, clientBrowsers: 'own', chromiumArgs: PHONE_CHROMIUM },
  'on-close-one-phone': { roundMs: 200, quietMs: 0, nextRound: 'close', echo: false, clientBrowsers: 'own', chromiumArgs: PHONE_CHROMIUM, localClients: 3 },
  'back-to-back': { roundMs: 1, quietMs: 0 },
  'back-to-back-f16': { roundMs: 1, quietMs: 0, codec: 'f16', echo: false },
};
// the steady rounds: those after the first STEADY_FROM, on both sides (every page's wasm has
// tiered up by then, as the one instance in process has); rounds 2..N are reported as well
const STEADY_FROM = process.argv.includes('--steady-from') ? Number(process.argv[process.argv.indexOf('--steady-from') + 1]) : Math.min(50, Math.floor(rounds / 2));
if (!(STEADY_FROM >= 1 && STEADY_FROM < rounds)) throw new Error(`--steady-from must be within 1..${rounds - 1}`);
const configs = configsArg.split(',').map((name) => {
  if (!(name in CONFIGS)) throw new Error(`--configs: no configuration ${name} (${Object.keys(CONFIGS).join(', ')})`);
  return { name, ...CONFIGS[name] };
});
const { loadBb, LocalNetwork, peerIdFromU64, roundReporter } = await import('../js/dist/index.js');
const { federatedDigits, installDigitsClient, installDigitsServer, splitDigits, startDigitsServer } = await import('../js/dist/examples/index.js');

// ---- in one process ----------------------------------------------------------------------
const csv = gunzipSync(readFileSync('/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz'));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** The artifact the WebRTC run (js/e2e/run.mjs) compiles: federated_digits with this round timer. */
function compileDigits(bb, roundMs, codec, nextRound = 'timer') {
  const plan = federatedDigits({ roundMs, nextRound, ...(codec === undefined ? {} : { codec }) });
  const compiler = plan.compiler(bb);
  compiler.rebind('aggregator', 'Aggregator', 'FedAvg', `quorum=3,target=4,deadline_ms=1500,no_quorum=abandon,init=model,beyond_norm=clip${nextRound === 'close' ? ',next=close' : ''}`);
  const artifact = compiler.compile(plan.module.build(bb));
  compiler.free();
  return artifact;
}

/** The federation in one process: every node in one bb.wasm instance, envelopes handed over directly. */
async function inProcess(roundMs, codec, nextRound) {
  const bb = await loadBb(readFileSync(join(root, 'js/wasm/bb.wasm')));
  const artifact = compileDigits(bb, roundMs, codec, nextRound);
  const split = splitDigits(bb, csv, 4, 1, 5);
  const serverId = peerIdFromU64(1);
  const ids = [2, 3, 4, 5].map((k) => peerIdFromU64(k));
  const server = installDigitsServer(bb, artifact, serverId, split.test);
  for (const id of ids) server.addPeer(id);
  const now = () => BigInt(Math.round(performance.now() * 1e6));
  let round = 0;
  server.onStep(roundReporter((r) => (round = r.round)));
  const latencies = [];
  // the CPU time of this process over the same span: the round's own cost, which the other
  // work on a shared machine does not lengthen as it does the wall-clock time
  const cpu = [];
  // and the time its thread waited for a core within the round (the WebRTC run reports its threads')
  const waits = [];
  const waitMs = () => Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[1]) / 1e6;
  let broadcastAt;
  let cpuAt;
  let waitAt;
  let updates = 0;
  // a round ends where it ends over WebRTC: the fourth update handed to the server, before its deliver
  const deliver = server.deliver.bind(server);
  server.deliver = (from, bytes, nowNs) => {
    if (broadcastAt !== undefined && ++updates === ids.length) {
      latencies.push(performance.now() - broadcastAt);
      const used = process.cpuUsage(cpuAt);
      cpu.push((used.user + used.system) / 1000);
      waits.push(waitMs() - waitAt);
      broadcastAt = undefined;
    }
    return deliver(from, bytes, nowNs);
  };
  server.onStep((step) => {
    if (step.kind === 'send' && broadcastAt === undefined) (waitAt = waitMs()), (cpuAt = process.cpuUsage()), (updates = 0), (broadcastAt = performance.now());
  });
  const network = new LocalNetwork([server, ...ids.map((id, k) => installDigitsClient(bb, artifact, id, serverId, split.shards[k], k + 2))]);
  startDigitsServer(server, ids, split.test, now());
  while (round < rounds + 1) {
    network.poll(now());
    if (!network.hasWork()) {
      const waitMs = Number(network.expiry() - now()) / 1e6;
      if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
  }
  return {
    median: median(latencies.slice(1)), max: Math.max(...latencies.slice(1)), cpuMedian: median(cpu.slice(1)),
    steady: { median: median(latencies.slice(STEADY_FROM)), max: Math.max(...latencies.slice(STEADY_FROM)), cpuMedian: median(cpu.slice(STEADY_FROM)), waitMean: waits.slice(STEADY_FROM).reduce((a, b) => a + b, 0) / (waits.length - STEADY_FROM) },
    memory: bb.exports.memory.buffer.byteLength,
  };
}

// ---- browsers over WebRTC ------------------------------------------------------------------
const out = join(mkdtempSync(join(tmpdir(), 'bb-rounds-')), 'result.json');
function e2e(args, chromiumArgs) {
  const env = { ...process.env, BB_E2E_RESULT: out, ...(chromiumArgs === undefined ? {} : { BB_CHROMIUM_ARGS: `${process.env.BB_CHROMIUM_ARGS ?? ''} ${chromiumArgs}` }) };
  execFileSync('bash', [join(root, 'scripts/e2e.sh'), ...args], { env, stdio: ['ignore', 'ignore', 'inherit'] });
  return JSON.parse(readFileSync(out, 'utf8'));
}

const mib = (b) => (b / 1048576).toFixed(1);
const ms = (x) => `${x.median.toFixed(1)} ms / ${x.max.toFixed(1)} ms`;
console.log(`federated_digits round latency, 4 clients, ${rounds} rounds (broadcast → last update), median / max:`);
// The in-process round with the 200 ms timer: the same computation as every configuration's
// (f16 adds its encoding), from one process that sleeps between rounds as the WebRTC peers do. One that
// never sleeps (back-to-back) is scheduled as a CPU hog on a loaded machine, and its longer
// round would flatter the WebRTC ratio; each back-to-back ratio is also given against this.
let reference;
for (const { name, roundMs, quietMs, codec, nextRound = 'timer', echo: withEcho = true, clientBrowsers = 'shared', chromiumArgs, localClients = 0 } of configs) {
  const local = await inProcess(roundMs, codec, nextRound);
  if (roundMs === 200 && codec === undefined && nextRound === 'timer') reference = local;
  // four Chromium pages (run.mjs mixes in Firefox pages unless told otherwise)
  const browsers = ['--client-browsers', clientBrowsers];
  const web = e2e(['--only', 'federated', '--full-rounds', String(rounds), '--engines', 'chromium', '--steady-from', String(STEADY_FROM), '--round-ms', String(roundMs), '--next-round', nextRound, '--local-clients', String(localClients), ...browsers, ...(codec === undefined ? [] : ['--codec', codec])], chromiumArgs);
  // the data channels alone: a round's 10 KB envelope to each of 4 Chromium pages and back,
  // with the quiet a broadcast follows in this configuration (no engine, no driver)
  const echo = withEcho ? e2e(['--only', 'echo', '--echoes', String(rounds), '--echo-quiet', String(quietMs), ...browsers], chromiumArgs) : undefined;
  const where = `${localClients > 0 ? `${4 - localClients} of them (the other ${localClients} in the server's process) ` : ''}${clientBrowsers === 'own' ? 'a Chromium browser each' : 'pages of one Chromium'}`;
  console.log(`${name} (round timer ${roundMs} ms, next round on ${nextRound}, updates ${codec ?? 'f32'}; clients in ${where}${chromiumArgs ? `, ${chromiumArgs}` : ''}):`);
  console.log(`  in one Node process (no network)       ${ms(local)}   (its CPU time: ${local.cpuMedian.toFixed(1)} ms median)`);
  const against = reference !== undefined && reference !== local ? `, ${(web.roundLatencyMs.median / reference.median).toFixed(2)}x the default in-process round` : '';
  console.log(`  4 Chromium pages over WebRTC            ${ms(web.roundLatencyMs)}   ${(web.roundLatencyMs.median / local.median).toFixed(2)}x in-process${against}`);
  const steadyAgainst = reference !== undefined && reference !== local ? `, ${(web.steadyLatencyMs.median / reference.steady.median).toFixed(2)}x the default in-process round` : '';
  console.log(`  rounds ${STEADY_FROM + 1}..${rounds} only (steady: wasm tiered up on both sides): in process ${ms(local.steady)} (CPU ${local.steady.cpuMedian.toFixed(1)} ms, waited for a core ${local.steady.waitMean.toFixed(2)} ms a round on average), over WebRTC ${ms(web.steadyLatencyMs)}   ${(web.steadyLatencyMs.median / local.steady.median).toFixed(2)}x in-process${steadyAgainst}`);
  console.log(`  each client's path through a steady round (broadcast → its update at the server), medians: ${web.steadyClientPathMs.join(' / ')} ms`);
  if (echo) console.log(`  the data channels alone: 10 KB to each page and back after ${quietMs} ms quiet (no engine)  ${ms(echo.echoMs)}   ${(echo.echoMs.median / local.median).toFixed(2)}x in-process`);
  if (echo?.cpuMsPerExchange) console.log(`    their CPU per exchange: Chromium ${echo.cpuMsPerExchange.pages} ms + Node ${echo.cpuMsPerExchange.node} ms for ${echo.udpDatagramsPerExchange} UDP datagrams: ${((1000 * (echo.cpuMsPerExchange.pages + echo.cpuMsPerExchange.node)) / echo.udpDatagramsPerExchange).toFixed(0)} µs a datagram`);
  if (echo?.threadsMsPerExchange) console.log(`    their CPU ms per exchange by process and thread: ${Object.entries(echo.threadsMsPerExchange).map(([k, v]) => `${k} ${v}`).join(', ')}`);
  console.log(`  the server's send() calls per broadcast (4 envelopes)  ${ms(web.broadcastSendMs)}`);
  const phase = (p) => `queued ${p.queued.toFixed(1)}, down ${p.down.toFixed(1)}, client ${p.client.toFixed(1)} (wake ${p.wake.toFixed(1)} + poll ${p.poll.toFixed(1)}: engine ${p.engine.toFixed(1)}, send() ${p.send.toFixed(1)}), up ${p.up.toFixed(1)} (down + up ${(p.down + p.up).toFixed(1)})`;
  console.log(`  phases over WebRTC, medians in ms (${web.phasesMs.samples} rounds): every client: ${phase(web.phasesMs.all)}; the round's last: ${phase(web.phasesMs.last)}`);
  console.log(`  phases over WebRTC, steady rounds (${web.steadyPhasesMs.samples}): every client: ${phase(web.steadyPhasesMs.all)}; the round's last: ${phase(web.steadyPhasesMs.last)}`);
  const server = (p) => `the server's polls and delivers within the round ${p.serverBusy.toFixed(1)}, its last update to the next broadcast ${p.serverClose.toFixed(1)}`;
  console.log(`  the server (medians in ms): ${server(web.phasesMs)}; steady rounds: ${server(web.steadyPhasesMs)}`);
  console.log(`  CPU time per round over WebRTC (timer's quiet included): the Chromium processes ${web.cpuMsPerRound.pages.toFixed(1)} ms, the Node process ${web.cpuMsPerRound.server.toFixed(1)} ms; animation frames the 4 pages asked for: ${web.framesAskedPerRound.toFixed(2)} a round`);
  if (web.threadsMsPerRound) console.log(`  CPU ms per round by process and thread: ${Object.entries(web.threadsMsPerRound).map(([k, v]) => `${k} ${v}`).join(', ')}`);
  if (web.steadyThreadsMsPerRound) {
    console.log(`  steady rounds: the server's driver per round ${web.steadyServerDriver.frames} slices, ${web.steadyServerDriver.polls} polls`);
    const t = web.steadyTrafficPerRound;
    if (t) console.log(`  steady rounds: the server's envelopes per round ${t.envelopesOut} out (${t.bytesOut} bytes), ${t.envelopesIn} in (${t.bytesIn} bytes); UDP datagrams per round ${t.udpDatagrams} (${t.wireBytes} bytes on the wire, every link both ways); the Node process's garbage collections per round ${t.nodeGcs} (${t.nodeGcMs} ms)`);
    console.log(`  steady rounds (${STEADY_FROM + 1}..): CPU per round the Chromium processes ${web.steadyCpuMsPerRound.pages.toFixed(1)} ms, the Node process ${web.steadyCpuMsPerRound.server.toFixed(1)} ms; by thread: ${Object.entries(web.steadyThreadsMsPerRound).map(([k, v]) => `${k} ${v}`).join(', ')}`);
    if (t) console.log(`  steady rounds: CPU per UDP datagram (all of a round's CPU, training included, over its datagrams) ${((1000 * (web.steadyCpuMsPerRound.pages + web.steadyCpuMsPerRound.server)) / t.udpDatagrams).toFixed(0)} µs`);
    if (web.steadyRunQueueWaitMsPerRound !== undefined) console.log(`  steady rounds: the run's threads (Node's and Chromium's) waited for a core ${web.steadyRunQueueWaitMsPerRound} ms a round on average, summed over threads`);
    if (web.steadyClientCpuMsPerRound?.length) console.log(`  steady rounds: each client's browser (all its processes), CPU per round ${web.steadyClientCpuMsPerRound.join(' / ')} ms`);
  }
  console.log(`  wasm memory high-water: server ${mib(web.serverMemoryBytes)} MiB, each page ${web.pageMemoryBytes.map(mib).join(' / ')} MiB, all five nodes in one instance ${mib(local.memory)} MiB`);
  console.log(`  the WebRTC run ended at round ${web.rounds} with held-out accuracy ${web.accuracy.toFixed(3)}`);
}
