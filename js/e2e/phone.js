// One phone of js/e2e/phones.mjs: a federatedAveraging client as a phone app runs it — its
// identity and its node's saved state kept in IndexedDB, a participation policy over the
// Battery API, top-k uploads — over WebRTC to a Node server. On load it resumes from its
// saved record when the artifact is still the server's (no download), else it fetches the
// artifact and starts afresh (a damaged record is refused, and the reason shown).
// Progress is published on window.e2e; phones.mjs calls window.e2eStart({ server }).
import * as pkg from '/pkg/index.js';
import {
  connectPeer,
  indexedDbStore,
  keepNode,
  loadBb,
  ParticipationPolicy,
  readSavedNode,
  resumeNode,
} from '/pkg/index.js';
import { splitDigits } from '/pkg/examples/index.js';
import { loadIdentity } from '/pkg/identity/index.js';
import { phonePlan } from './phone-plan.js';

const params = new URLSearchParams(location.search);
const index = Number(params.get('i'));
const state = { ready: false, error: null, resumed: false, resumeError: null, trainSteps: 0, saves: 0, sent: 0, droppedWaiting: 0, policy: null };
window.e2e = state;
const log = (line) => (document.getElementById('log').textContent += `${line}\n`);
/** A saved record the package refused (damaged, foreign, stale): the page starts afresh. */
const refused = (error) => {
  state.resumeError = String(error?.message ?? error);
  log(`saved state refused: ${state.resumeError}`);
};

async function main() {
  const bb = await loadBb(new URL('/bb.wasm', location.href));
  const identity = await loadIdentity(`phone-${index}`);
  const self = identity.peerId;
  state.self = self;
  const start = await new Promise((resolve) => (window.e2eStart = resolve));
  const csv = new Uint8Array(await (await fetch('/digits.csv')).arrayBuffer());
  const split = splitDigits(bb, csv, 2, 1, 5);
  const data = split.shards[index];
  const store = indexedDbStore();
  const key = `phones/${self}`;
  const saved = await readSavedNode(store, key).catch((error) => void refused(error));
  const current = (await (await fetch('/artifact.sha256')).text()).trim();
  const artifact = saved?.artifactSha256 === current ? saved.artifact : new Uint8Array(await (await fetch('/artifact.bin')).arrayBuffer());
  const { node, clock } = saved?.artifactSha256 === current
    ? await resumeNode(bb, saved, { self, slots: { data: { dataset: data } } })
    : { node: phonePlan(pkg).installClient(bb, { artifact, self, server: start.server, data }), clock: undefined };
  const keeper = keepNode(node, { store, key, artifact, minIntervalMs: 300, ...(clock ? { clock } : {}) });
  state.resumed = saved?.artifactSha256 === current;
  if (state.resumed) state.resumedSteps = Number(node.counter('train.steps'));
  // a test hook: stop saving, so a record the test damages stays as it left it
  window.e2eStopSaving = () => keeper.stop();
  // a phone's policy: train while charging (the Battery API; the test's init script stands in for it)
  const policy = await ParticipationPolicy.start({ charging: true, unmetered: false, respectSaveData: false });
  policy.onChange((s) => log(s.participating ? 'training' : `waiting: ${s.waiting.join(', ')}`));
  // a test hook: stop training, so the steps the test reads before a reload are the last ones
  window.e2ePause = () => policy.pause();
  const url = params.get('signal');
  const room = params.get('room');
  const onStep = (step) => step.kind === 'opFailed' && log(`op failed: ${step.op}: ${step.detail}`);
  const running = await connectPeer(node, { url, room, identity, participation: policy, onStep, ...(clock ? { clock } : {}) });
  setInterval(() => {
    const s = running.stats();
    Object.assign(state, { trainSteps: Number(node.counter('train.steps')), saves: keeper.stats.saves, sent: s.sent, droppedWaiting: s.droppedWaiting, policy: policy.state });
  }, 100);
  state.ready = true;
  log(`phone ${self} ready (${state.resumed ? 'resumed' : 'fresh'})`);
}

main().catch((error) => {
  state.error = String(error?.stack ?? error);
  log(state.error);
});
