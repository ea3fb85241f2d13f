// The data channels alone, with no package code on the path: this Node process sends a
// message to each of P other Node processes over node-datachannel (libdatachannel's
// RTCPeerConnection polyfill, one ordered reliable channel each, loopback), each sends it
// straight back, and a sample runs from the first send() to the last echo. Signalling goes
// over the children's stdin/stdout. For every size and quiet asked for: the median and max
// of N samples. The Chromium-to-Chromium twin is `scripts/e2e.sh --only echo-pair`.
//   node bench/echo-pair.mjs [samples=30] [--peers 1,4] [--bytes 64,10000] [--quiet 0,200] [--unordered]
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';

const require = createRequire(new URL('../js/package.json', import.meta.url));
const { RTCPeerConnection } = require('node-datachannel/polyfill');
const rtcConfig = { iceServers: [], bindAddress: '127.0.0.1' };
const option = (name, fallback) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : fallback);
const list = (name, fallback) => option(name, fallback).split(',').map(Number);
// --unordered: the channels unordered and unreliable (maxRetransmits 0) instead
const unordered = process.argv.includes('--unordered');

/** One end of a link: signalling messages go out through `send` and come in through the returned handler. */
function endpoint(send, offerer) {
  const pc = new RTCPeerConnection(rtcConfig);
  const pending = [];
  let described = false;
  pc.onicecandidate = (e) => e.candidate && send({ candidate: e.candidate.toJSON ? e.candidate.toJSON() : e.candidate });
  const channel = new Promise((resolve) => {
    if (offerer) {
      const c = pc.createDataChannel('echo', unordered ? { ordered: false, maxRetransmits: 0 } : { ordered: true });
      c.binaryType = 'arraybuffer';
      c.onopen = () => resolve(c);
    } else {
      pc.ondatachannel = (e) => {
        e.channel.binaryType = 'arraybuffer';
        resolve(e.channel);
      };
    }
  });
  // messages are handled one after another: a candidate waits for the description before it
  let chain = Promise.resolve();
  let failed;
  const failure = new Promise((_, reject) => (failed = reject));
  const receive = (m) => (chain = chain.then(() => handle(m)).catch(failed));
  const handle = async (m) => {
    if (m.sdp) {
      await pc.setRemoteDescription(m.sdp);
      if (m.sdp.type === 'offer') {
        await pc.setLocalDescription(await pc.createAnswer());
        send({ sdp: pc.localDescription });
      }
      described = true;
      for (const c of pending.splice(0)) await pc.addIceCandidate(c);
    } else if (m.candidate) {
      if (described) await pc.addIceCandidate(m.candidate);
      else pending.push(m.candidate);
    }
  };
  const start = async () => {
    await pc.setLocalDescription(await pc.createOffer());
    send({ sdp: pc.localDescription });
  };
  return { pc, channel: Promise.race([channel, failure]), receive, start };
}

if (process.argv.includes('--child')) {
  // the echoing peer: every message goes straight back
  const end = endpoint((m) => process.stdout.write(`${JSON.stringify(m)}\n`), false);
  createInterface({ input: process.stdin }).on('line', (line) => end.receive(JSON.parse(line)));
  const channel = await end.channel;
  channel.onmessage = (e) => channel.send(e.data);
  process.stdin.on('end', () => process.exit(0));
} else {
  const samples = Number(process.argv[2] && !process.argv[2].startsWith('--') ? process.argv[2] : 30);
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(`node-datachannel echo between Node processes (loopback, ${unordered ? 'unordered, maxRetransmits 0' : 'ordered, reliable'}), ${samples} samples each, median / max:`);
  for (const peers of list('--peers', '1,4')) {
    const children = [];
    // libdatachannel now and then refuses a description ("a remote candidate without ICE
    // transport"): that link is made again with a fresh process
    const link = async () => {
      const child = spawn(process.execPath, [new URL(import.meta.url).pathname, '--child'], { stdio: ['pipe', 'pipe', 'ignore'] });
      const end = endpoint((m) => child.stdin.write(`${JSON.stringify(m)}\n`), true);
      createInterface({ input: child.stdout }).on('line', (line) => end.receive(JSON.parse(line)));
      const exited = new Promise((_, reject) => child.on('exit', () => reject(new Error('the echoing process exited'))));
      const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error('no link in 10 s')), 10_000).unref());
      try {
        await end.start();
        return { child, channel: await Promise.race([end.channel, exited, timeout]) };
      } catch (error) {
        child.kill();
        end.pc.close();
        throw error;
      }
    };
    for (let k = 0; k < peers; k++) {
      for (let attempt = 1; ; attempt++) {
        try {
          children.push(await link());
          break;
        } catch (error) {
          if (attempt === 5) throw error;
        }
      }
    }
    let waiting = 0;
    let done;
    for (const { channel } of children) channel.onmessage = () => --waiting === 0 && done();
    const exchange = (payload) =>
      new Promise((resolve) => {
        const started = performance.now();
        waiting = children.length;
        done = () => resolve(performance.now() - started);
        for (const { channel } of children) channel.send(payload);
        sendMs.push(performance.now() - started);
      });
    let sendMs = [];
    for (const bytes of list('--bytes', '64,10000')) {
      for (const quiet of list('--quiet', '0,200')) {
        await exchange(new Uint8Array(bytes));
        const times = [];
        sendMs = [];
        for (let k = 0; k < samples; k++) {
          if (quiet > 0) await sleep(quiet);
          times.push(await exchange(new Uint8Array(bytes).fill(k)));
        }
        console.log(`  ${peers} peer(s), ${bytes} B, ${quiet} ms quiet before each: ${median(times).toFixed(2)} ms / ${Math.max(...times).toFixed(2)} ms` +
          ` (the send() calls: ${median(sendMs).toFixed(2)} ms / ${Math.max(...sendMs).toFixed(2)} ms)`);
      }
    }
    for (const { child } of children) child.stdin.end();
  }
  process.exit(0);
}
