// The echo page of run.mjs --only echo: a Chromium page that sends every envelope back to
// its sender over the package's WebRtcTransport, nothing else (no node, no driver): what
// the data channels alone cost a round. The page makes an identity and publishes its peer
// id on window.e2e; run.mjs admits it and calls window.e2eStart({ room, signal }).
import { Identity } from '/pkg/identity/index.js';
import { SignalClient } from '/pkg/signal/index.js';
import { WebRtcTransport } from '/pkg/transport/index.js';

const state = { self: '', ready: false, error: null, echoed: 0 };
window.e2e = state;

async function main() {
  const identity = await Identity.generate();
  state.self = identity.peerId;
  const { room, signal } = await new Promise((resolve) => (window.e2eStart = resolve));
  const transport = await WebRtcTransport.create({ signal: await SignalClient.connect({ url: signal, room, identity }) });
  transport.onEnvelope((from, bytes) => {
    transport.send(from, bytes);
    state.echoed++;
  });
  state.ready = true;
}

main().catch((error) => {
  state.error = String(error?.stack ?? error);
  document.getElementById('log').textContent += `${state.error}\n`;
});
