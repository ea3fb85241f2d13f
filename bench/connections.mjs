#!/usr/bin/env node
// How many WebRTC links one Node server peer (node-datachannel) sustains: a signalling
// server and the server peer in this process; client peers in child processes
// (connections-client.mjs, 50 each), added in steps. At each step every client sends the
// server a 1 KiB envelope a second; reported: links open, how long the step took to open
// them, envelopes received per second, the server process's CPU share and memory.
// Loopback only (bindAddress 127.0.0.1).
//
//   (cd js && npm run build) && node bench/connections.mjs [--steps 50,100,200,400] [--seconds 10]
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const pkg = join(here, '..', 'js', 'dist');
const { Identity } = await import(join(pkg, 'identity', 'index.js'));
const { SignalClient } = await import(join(pkg, 'signal', 'index.js'));
const { SignalServer } = await import(join(pkg, 'signal', 'node.js'));
const { WebRtcTransport } = await import(join(pkg, 'transport', 'index.js'));

const option = (name, fallback) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : fallback);
const steps = option('--steps', '50,100,200,400').split(',').map(Number);
const seconds = Number(option('--seconds', '10'));
const PER_PROCESS = 50;
const OPEN_TIMEOUT_MS = 120_000;

const most = steps.at(-1);
const signal = await SignalServer.listen({ port: 0, maxConnectionsPerAddress: most + 10, maxConnections: most + 10, maxRoomSize: most + 10, ratePerSecond: 1000, rateBurst: 5000, bytesPerSecond: 1 << 20, byteBurst: 4 << 20, joinCost: 0 });
const url = `ws://127.0.0.1:${signal.address.port}`;
const identity = await Identity.generate();
const server = await WebRtcTransport.create({
  signal: await SignalClient.connect({ url, room: 'bench', identity, role: 'server' }),
  rtcConfig: { iceServers: [], bindAddress: '127.0.0.1' }, maxLinks: most + 10, connectTimeoutMs: 60_000,
});
let received = 0;
server.onEnvelope(() => received++);
const open = () => server.links().filter((peer) => server.state(peer) === 'open').length;
const children = [];
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

console.log('| links asked | links open | s to open the step | envelopes/s received | server CPU % | server RSS MiB | KiB RSS per link |');
console.log('|---|---|---|---|---|---|---|');
const baseRss = process.memoryUsage().rss;
let asked = 0;
try {
  for (const target of steps) {
    const started = performance.now();
    while (asked < target) {
      const n = Math.min(PER_PROCESS, target - asked);
      children.push(spawn(process.execPath, [join(here, 'connections-client.mjs'), url, identity.peerId, String(n)], { stdio: ['ignore', 'ignore', 'inherit'] }));
      asked += n;
    }
    const deadline = performance.now() + OPEN_TIMEOUT_MS;
    while (open() < target && performance.now() < deadline) await sleep(200);
    const opened = open();
    const openSeconds = (performance.now() - started) / 1000;
    const cpu0 = process.cpuUsage();
    const received0 = received;
    await sleep(seconds * 1000);
    const cpu = process.cpuUsage(cpu0);
    const rss = process.memoryUsage().rss;
    console.log(`| ${target} | ${opened} | ${openSeconds.toFixed(1)} | ${((received - received0) / seconds).toFixed(0)} | ${((cpu.user + cpu.system) / 1e4 / seconds).toFixed(0)} | ${(rss / 2 ** 20).toFixed(0)} | ${opened ? ((rss - baseRss) / 1024 / opened).toFixed(0) : '-'} |`);
    if (opened < target) {
      console.log(`(stopped: ${target - opened} links did not open within ${OPEN_TIMEOUT_MS / 1000} s)`);
      break;
    }
  }
} finally {
  for (const child of children) child.kill();
  server.close();
  await signal.close();
}
process.exit(0);
