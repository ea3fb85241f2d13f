// One browser peer of the end-to-end runs (run.mjs, nat.mjs, tiers.mjs): a federated_digits
// client, a federated_cnn client (the page fetches the PyTorch CNN and hands it to its
// OnnxModel), a split learning client (the splitLearning template: the page builds the
// CNN's convolutions only), a gossip_digits peer or a hierarchical_digits client, with the package's
// identity, node, WebRTC transport, signalling client
// and PollDriver, exactly as a web app would use them. Progress is published on window.e2e.
// The page makes its identity (kept in IndexedDB) and publishes its peer id; run.mjs, the
// operator, admits it and calls window.e2eStart({ server, peers, token }).
import {
  BbNode,
  Compiler,
  connectPeer,
  loadBb,
  peersValue,
  scalarOf,
  splitLearning,
  tensorValue,
} from '/pkg/index.js';
import { installCnnClient, installDigitsClient, splitDigits } from '/pkg/examples/index.js';
import { loadIdentity } from '/pkg/identity/index.js';
import { admissionOf } from '/pkg/signal/index.js';

const params = new URLSearchParams(location.search);
const role = params.get('role');
const index = Number(params.get('i'));
const peers = Number(params.get('peers'));
const state = { ready: false, error: null, accuracy: [], sent: 0, received: 0, frames: 0, animationFrames: 0, visibility: '', links: {} };
window.e2e = state;
const log = (line) => (document.getElementById('log').textContent += `${line}\n`);

// A test hook: make this page behave as a hidden tab does (headless Chromium cannot hide
// one): the visibility API reports hidden and animation frames stop.
window.e2eHide = () => {
  Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' });
  Object.defineProperty(document, 'hidden', { configurable: true, get: () => true });
  window.requestAnimationFrame = () => 0;
  document.dispatchEvent(new Event('visibilitychange'));
};

// how many animation frames the page asked for (the driver asks only once a slice spends
// its frame's budget; run.mjs reports them per round)
state.framesAsked = 0;
const requestFrame = window.requestAnimationFrame.bind(window);
window.requestAnimationFrame = (callback) => {
  state.framesAsked++;
  return requestFrame(callback);
};

async function main() {
  const bb = await loadBb(new URL('/bb.wasm', location.href));
  const csv = new Uint8Array(await (await fetch('/digits.csv')).arrayBuffer());
  const identity = await loadIdentity(`e2e-${role}-${index}`);
  const self = identity.peerId;
  state.self = self;
  const start = await new Promise((resolve) => (window.e2eStart = resolve));
  // a room that admits by token: the node checks its members' tokens (connectPeer insists)
  const admission = start.token === undefined ? undefined : admissionOf(start.token);
  let node;
  let afterConnect;
  // what the page's state adds when it is read (window.e2eRead): nothing runs on a timer
  // while rounds are measured
  const refreshers = [];
  if (role === 'hier') {
    // a client of hierarchical_digits: it reports to its edge aggregator (start.edge)
    const artifact = new Uint8Array(await (await fetch('/artifact.bin')).arrayBuffer());
    const split = splitDigits(bb, csv, peers, 1, 3);
    node = BbNode.install(bb, { artifact, self, targets: ['HierDigits_clients'], slots: { data: { dataset: split.shards[index - 1] } }, seed: index + 1, admission });
    node.addPeer(start.edge);
    node.bindInput('HierDigits_clients', 'edge', peersValue([start.edge]));
    split.free();
  } else if (role === 'fed') {
    const artifact = new Uint8Array(await (await fetch('/artifact.bin')).arrayBuffer());
    const split = splitDigits(bb, csv, peers, 1, 5);
    node = installDigitsClient(bb, artifact, self, start.server, split.shards[index - 1], index + 1);
    split.free();
  } else if (role === 'cnn') {
    const artifact = new Uint8Array(await (await fetch('/artifact-cnn.bin')).arrayBuffer());
    const model = new Uint8Array(await (await fetch('/digits_cnn.onnx')).arrayBuffer());
    const split = splitDigits(bb, csv, peers, 1, 5);
    node = installCnnClient(bb, artifact, self, start.server, split.shards[index - 1], model, index + 1);
    split.free();
  } else if (role === 'split') {
    // the operator's template options: the page makes the same plan and installs its side
    const artifact = new Uint8Array(await (await fetch('/artifact-split.bin')).arrayBuffer());
    const model = new Uint8Array(await (await fetch('/digits_cnn.onnx')).arrayBuffer());
    const split = splitDigits(bb, csv, peers, 1, 5);
    const client = splitLearning(start.plan).installClient(bb, { artifact, model, self, server: start.server, data: split.shards[index - 1], test: split.test, seed: index + 1 });
    node = client.node;
    // the steps start once the link to the server is open: an activation that waited for
    // it would arrive past its deadline and the step would wait out its timeout
    afterConnect = async (running) => {
      const open = new Promise((resolve) => running.transport.events.on('state', (peer, s) => peer === start.server && s === 'open' && resolve()));
      running.transport.connect(start.server);
      if (running.transport.state(start.server) !== 'open') await open;
      client.start(running.driver.now());
      split.free();
      running.driver.wake();
      refreshers.push(() => (state.split = client.counts()));
    };
  } else {
    // gossip: the page compiles the example itself (the compiler is deterministic, so every
    // peer gets the same artifact) and learns on its own shard
    const compiler = Compiler.forExample(bb, 'gossip_digits');
    const artifact = compiler.compile(Compiler.recordExample(bb, 'gossip_digits'));
    compiler.free();
    const split = splitDigits(bb, csv, peers, 1, 3);
    const seeds = `${start.peers[(index + 1) % peers]};${start.peers[(index + 2) % peers]}`;
    node = BbNode.install(bb, {
      artifact,
      self,
      targets: ['GossipDigits'],
      slots: { data: { dataset: split.shards[index] }, view: { config: `seeds=${seeds},view=6,shuffle=3` } },
      seed: 1000 + index,
      admission,
    });
    for (const peer of start.peers) if (peer !== self) node.addPeer(peer);
    const x = split.test.features();
    const y = split.test.labels();
    node.invoke('GossipDigits', { test_x: tensorValue('float', x.data, x.dims), test_y: tensorValue('float', y.data, y.dims) });
    split.free();
  }
  const running = await connectPeer(node, {
    url: params.get('signal').split(','),
    room: params.get('room'),
    identity,
    ...(start.token === undefined ? {} : { token: start.token }),
    onStep(step) {
      if (step.kind === 'appEvent' && step.topic === 'accuracy') state.accuracy.push(scalarOf(step.value));
      if (step.kind === 'opFailed') log(`op failed: ${step.op}: ${step.detail}`);
    },
  });
  running.transport.events.on('state', (peer, s) => (state.links[peer] = s));
  // where a round's time goes (run.mjs): when each envelope arrived at the data channel and
  // when this node's next send step left, on the clock the server reads too (time origin +
  // performance.now(), one machine)
  const origin = performance.timeOrigin;
  const abs = () => origin + performance.now();
  state.arrivals = [];
  state.sends = [];
  running.transport.onEnvelope(() => state.arrivals.length < 2000 && state.arrivals.push(abs()));
  node.onStep((step) => step.kind === 'send' && state.sends.length < 2000 && state.sends.push(abs()));
  // and when each poll that did work began (the driver calls node.poll for every poll)
  state.pollStarts = [];
  const poll = node.poll.bind(node);
  node.poll = (nowNs) => {
    const began = abs();
    const result = poll(nowNs);
    if (state.pollStarts.length < 4000 && abs() - began > 0.05) state.pollStarts.push(began);
    return result;
  };
  // and when each of its transport.send() calls began (the poll's remainder is the engine's)
  state.sendStarts = [];
  const send = running.transport.send.bind(running.transport);
  running.transport.send = (to, bytes) => {
    if (state.sendStarts.length < 2000) state.sendStarts.push(abs());
    send(to, bytes);
  };
  // the candidate types the link to `peer` runs over (relay: through a TURN server)
  window.e2ePair = (peer) => running.transport.selectedPair(peer);
  refreshers.push(() => {
    const s = running.stats();
    const d = running.driver.stats;
    Object.assign(state, { sent: s.sent, received: s.received, frames: d.frames, animationFrames: d.animationFrames, polls: d.polls, visibility: document.visibilityState, driverState: running.driver.state, memoryBytes: bb.exports.memory.buffer.byteLength });
  });
  window.e2eRead = () => {
    for (const refresh of refreshers) refresh();
    return state;
  };
  await afterConnect?.(running);
  state.ready = true;
  log(`peer ${self} ready (${role})`);
}

main().catch((error) => {
  state.error = String(error?.stack ?? error);
  log(state.error);
});
