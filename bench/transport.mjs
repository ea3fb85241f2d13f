// Envelope throughput through WebRtcTransport against raw data-channel throughput with the
// same chunk size, between two Node peers (node-datachannel) on loopback. Not a test.
//   cd js && npm run build && cd .. && node bench/transport.mjs [MiB=200] [envelopeMiB=5]
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';

const require = createRequire(new URL('../js/package.json', import.meta.url));
const WebSocket = require('ws');
const { RTCPeerConnection } = require('node-datachannel/polyfill');
const { SignalServer } = await import('../js/dist/signal/node.js');
const { SignalClient } = await import('../js/dist/signal/index.js');
const { Identity } = await import('../js/dist/identity/index.js');
const { WebRtcTransport, DEFAULT_CHUNK_SIZE } = await import('../js/dist/transport/index.js');

const totalMiB = Number(process.argv[2] ?? 200);
const envelopeMiB = Number(process.argv[3] ?? 5);
const CHUNK = DEFAULT_CHUNK_SIZE;
const HIGH = 1024 * 1024;
const LOW = 256 * 1024;
const rtcConfig = { iceServers: [], bindAddress: '127.0.0.1' };

async function raw() {
  const a = new RTCPeerConnection(rtcConfig);
  const b = new RTCPeerConnection(rtcConfig);
  // candidates wait until both descriptions are set (adding one earlier throws)
  const pending = [];
  a.onicecandidate = (e) => e.candidate && pending.push(() => b.addIceCandidate(e.candidate));
  b.onicecandidate = (e) => e.candidate && pending.push(() => a.addIceCandidate(e.candidate));
  const channel = a.createDataChannel('raw', { ordered: true });
  channel.binaryType = 'arraybuffer';
  const total = totalMiB * 1024 * 1024;
  let received = 0;
  const done = new Promise((resolve) => {
    b.ondatachannel = (e) => {
      e.channel.binaryType = 'arraybuffer';
      e.channel.onmessage = (m) => {
        received += m.data.byteLength;
        if (received >= total) resolve();
      };
    };
  });
  const offer = await a.createOffer();
  await a.setLocalDescription(offer);
  await b.setRemoteDescription(offer);
  const answer = await b.createAnswer();
  await b.setLocalDescription(answer);
  await a.setRemoteDescription(answer);
  const flush = () => { for (const add of pending.splice(0)) add(); };
  flush();
  const flusher = setInterval(flush, 10);
  await new Promise((resolve) => (channel.onopen = resolve));
  clearInterval(flusher);
  const chunk = new Uint8Array(CHUNK);
  channel.bufferedAmountLowThreshold = LOW;
  let sent = 0;
  const start = performance.now();
  const pump = () => {
    while (sent < total && channel.bufferedAmount <= HIGH) {
      channel.send(chunk);
      sent += CHUNK;
    }
  };
  channel.onbufferedamountlow = pump;
  pump();
  await done;
  const seconds = (performance.now() - start) / 1000;
  a.close();
  b.close();
  return received / 1024 / 1024 / seconds;
}

async function transport() {
  const server = await SignalServer.listen({ port: 0 });
  const url = `ws://127.0.0.1:${server.address.port}`;
  const envelopeBytes = envelopeMiB * 1024 * 1024;
  // envelopes above the engine's 16 MiB need larger reassembly bounds on the receiver
  const reassembly = { maxMessageBytes: Math.max(16 << 20, envelopeBytes), maxPartialBytesPerPeer: Math.max(32 << 20, 2 * envelopeBytes), maxPartialBytes: Math.max(128 << 20, 2 * envelopeBytes) };
  const make = async () =>
    WebRtcTransport.create({ signal: await SignalClient.connect({ url, room: 'bench', identity: await Identity.generate(), WebSocket }), RTCPeerConnection, rtcConfig, chunkSize: CHUNK, maxQueuedBytes: 1 << 30, reassembly });
  const a = await make();
  const b = await make();
  while (!a.peers().includes(b.self)) await new Promise((resolve) => setTimeout(resolve, 10));
  a.connect(b.self);
  await new Promise((resolve) => {
    const check = () => a.state(b.self) === 'open' && b.state(a.self) === 'open' && resolve();
    a.events.on('state', check);
    b.events.on('state', check);
    check();
  });
  const envelope = new Uint8Array(envelopeBytes);
  const count = Math.ceil(totalMiB / envelopeMiB);
  let received = 0;
  let bytes = 0;
  const done = new Promise((resolve) => b.onEnvelope((_, e) => {
    bytes += e.byteLength;
    if (++received === count) resolve();
  }));
  const start = performance.now();
  for (let i = 0; i < count; i++) a.send(b.self, envelope);
  await done;
  const seconds = (performance.now() - start) / 1000;
  a.close();
  b.close();
  await server.close();
  return bytes / 1024 / 1024 / seconds;
}

const rawMiBs = await raw();
const envMiBs = await transport();
console.log(`raw data channel, ${CHUNK / 1024} KiB messages: ${rawMiBs.toFixed(1)} MiB/s`);
console.log(`WebRtcTransport, ${envelopeMiB} MiB envelopes: ${envMiBs.toFixed(1)} MiB/s`);
console.log(`ratio: ${(envMiBs / rawMiBs).toFixed(2)}`);
process.exit(0);
