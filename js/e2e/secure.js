// One client of js/e2e/secure.mjs: a federatedAveraging client with secure aggregation, its
// identity in IndexedDB, over WebRTC to a Node server. Its aggregator slot masks each
// update (SecAgg+): what leaves the page is a join, keys, sealed shares, the masked vector
// and shares for unmasking. Progress is published on window.e2e; secure.mjs calls
// window.e2eStart({ server }).
import * as pkg from '/pkg/index.js';
import { connectPeer, loadBb } from '/pkg/index.js';
import { splitDigits } from '/pkg/examples/index.js';
import { loadIdentity } from '/pkg/identity/index.js';
import { securePlan } from './secure-plan.js';

const params = new URLSearchParams(location.search);
const index = Number(params.get('i'));
const state = { ready: false, error: null, joined: 0, done: 0, aborted: 0, sentBytes: 0 };
window.e2e = state;
const log = (line) => (document.getElementById('log').textContent += `${line}\n`);

async function main() {
  const bb = await loadBb(new URL('/bb.wasm', location.href));
  const identity = await loadIdentity(`secure-${index}`);
  const self = identity.peerId;
  state.self = self;
  const start = await new Promise((resolve) => (window.e2eStart = resolve));
  const csv = new Uint8Array(await (await fetch('/digits.csv')).arrayBuffer());
  const split = splitDigits(bb, csv, 4, 1, 5);
  const artifact = new Uint8Array(await (await fetch('/artifact.bin')).arrayBuffer());
  const node = securePlan(pkg).installClient(bb, { artifact, self, signer: identity, server: start.server, data: split.shards[index] });
  // a test hook: once armed, the page takes nothing in after it sends its masked vector
  // (the only envelope of a client as large as the model) — so it never answers the
  // unmask request — and tells the test, which closes it once the vector has arrived
  let armed = false;
  window.e2eArm = () => void (armed = true);
  node.onStep((step) => {
    if (!armed || state.stopped || step.kind !== 'send' || step.bytes.length < 9000) return;
    state.stopped = true;
    node.deliver = () => undefined;
    void window.e2eMasked(index);
  });
  const onStep = (step) => step.kind === 'opFailed' && log(`op failed: ${step.op}: ${step.detail}`);
  await connectPeer(node, { url: params.get('signal'), room: params.get('room'), identity, onStep });
  setInterval(() => {
    Object.assign(state, {
      joined: Number(node.counter('fedavg.secagg_joined')),
      done: Number(node.counter('fedavg.secagg_client_done')),
      aborted: Number(node.counter('fedavg.secagg_client_aborted')),
      sentBytes: Number(node.counter('fedavg.secagg_bytes_sent')),
    });
  }, 50);
  state.ready = true;
  log(`secure client ${self} ready`);
}

main().catch((error) => {
  state.error = String(error?.stack ?? error);
  log(state.error);
});
