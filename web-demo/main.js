// web-demo: watch federated_digits compile and train, in this page or as a live federation
// of browsers (web-demo/serve.mjs runs the server peer and the signalling).
import {
  Compiler,
  compileFederatedDigits,
  connectPeer,
  installDigitsClient,
  installDigitsServer,
  loadBb,
  LocalNetwork,
  PollDriver,
  peerIdFromU64,
  roundReporter,
  splitDigits,
  startDigitsServer,
} from '/pkg/index.js';

const $ = (id) => document.getElementById(id);
const status = (text) => ($('status').textContent = text);
const state = { rounds: [], peers: new Map(), mode: 'idle' };
window.demo = state; // for the test and the curious

// ---- drawing ------------------------------------------------------------------------------

function showPartitions(description) {
  const box = $('partitions');
  box.replaceChildren();
  for (const p of description.partitions) {
    const div = document.createElement('div');
    div.className = 'partition';
    const counts = new Map();
    for (const node of p.nodes) {
      const op = typeof node === 'string' ? node : `${node.domain ?? ''}::${node.op_type ?? node.op ?? '?'}`;
      const short = op.replace(/^ai\.bytesandbrains\./, '');
      counts.set(short, (counts.get(short) ?? 0) + 1);
    }
    const bound = description.bindings.filter((b) => b.target === p.name).map((b) => `${b.slot} = ${b.type}`);
    div.innerHTML = `<h3>${p.name} <span class="class">(${p.peer_class})</span></h3>
      <div>${p.nodes.length} ops${bound.length ? ` · ${bound.join(', ')}` : ''}</div>
      <div class="ops"></div>`;
    div.querySelector('.ops').textContent = [...counts].map(([op, n]) => (n > 1 ? `${op} ×${n}` : op)).join('  ');
    box.append(div);
  }
  const edges = document.createElement('p');
  edges.className = 'hint';
  edges.textContent = `wire edges: ${description.wire_edges.map((e) => `${e.from.split('#')[0]} → ${e.to.split('#')[0]} (${e.value})`).join(', ')}`;
  box.append(edges);
}

function drawChart() {
  const canvas = $('chart');
  const g = canvas.getContext('2d');
  const w = canvas.width;
  const h = canvas.height;
  g.clearRect(0, 0, w, h);
  g.strokeStyle = '#dde';
  g.fillStyle = '#677';
  g.font = '12px system-ui';
  for (const level of [0, 0.25, 0.5, 0.75, 0.9, 1]) {
    const y = h - 20 - level * (h - 40);
    g.beginPath();
    g.moveTo(40, y);
    g.lineTo(w - 10, y);
    g.stroke();
    g.fillText(`${Math.round(level * 100)}%`, 4, y + 4);
  }
  const points = state.rounds;
  if (points.length === 0) return;
  const maxRound = Math.max(20, points.at(-1).round);
  g.strokeStyle = '#2a62c9';
  g.lineWidth = 2;
  g.beginPath();
  points.forEach(({ round, accuracy }, i) => {
    const x = 40 + (round / maxRound) * (w - 55);
    const y = h - 20 - accuracy * (h - 40);
    if (i === 0) g.moveTo(x, y);
    else g.lineTo(x, y);
  });
  g.stroke();
  g.fillStyle = '#1d2430';
  g.fillText(`round ${points.at(-1).round}: ${(points.at(-1).accuracy * 100).toFixed(1)} % held-out accuracy`, 50, 16);
}

function drawPeers() {
  const body = $('peers').tBodies[0];
  body.replaceChildren();
  for (const [id, p] of state.peers) {
    const row = body.insertRow();
    for (const cell of ['…' + id.slice(-8), p.role, p.sent, p.received, p.state]) row.insertCell().textContent = String(cell);
  }
}

function onRound(report) {
  state.rounds.push(report);
  status(`${state.mode}: round ${report.round}, held-out accuracy ${(report.accuracy * 100).toFixed(1)} %`);
  drawChart();
}

// ---- a whole federation in this page ------------------------------------------------------

async function runLocal(bb, csv) {
  state.mode = 'in this page';
  const clients = 4;
  const artifact = compileFederatedDigits(bb, { quorum: 3, target: clients });
  showPartitions(Compiler.describe(bb, artifact, 'json'));
  const split = splitDigits(bb, csv, clients, 1, 3);
  const serverId = peerIdFromU64(1);
  const ids = Array.from({ length: clients }, (_, k) => peerIdFromU64(k + 2));
  const server = installDigitsServer(bb, artifact, serverId, split.test);
  const clientNodes = ids.map((id, k) => installDigitsClient(bb, artifact, id, serverId, split.shards[k], k + 2));
  for (const id of ids) server.addPeer(id);
  // the five nodes as one Pollable: envelopes go from one to another with no transport
  const network = new LocalNetwork([server, ...clientNodes], { onDeliver: (to) => state.peers.get(to).received++ });
  for (const [id, node] of network.nodes) {
    state.peers.set(id, { role: id === serverId ? 'server' : 'client', sent: 0, received: 0, state: 'in page' });
    node.onStep((step) => step.kind === 'send' && state.peers.get(id).sent++);
  }
  server.onStep(roundReporter(onRound));
  const driver = new PollDriver(network);
  startDigitsServer(server, ids, split.test, driver.now());
  driver.start();
  setInterval(drawPeers, 500);
}

// ---- live: this page is a client of the server serve.mjs runs -------------------------------

async function join(bb, csv, config) {
  state.mode = 'live client';
  // the page's identity lives in IndexedDB: the same peer id (and seat) after a reload;
  // ?identity=NAME gives pages of one browser identities of their own
  const { loadIdentity } = await import('/pkg/identity/index.js');
  const identity = await loadIdentity(new URLSearchParams(location.search).get('identity') ?? 'web-demo');
  const seat = await (await fetch('/join', { method: 'POST', body: JSON.stringify({ peer: identity.peerId }) })).json();
  if (seat.error) throw new Error(seat.error);
  const artifact = new Uint8Array(await (await fetch('/artifact.bin')).arrayBuffer());
  showPartitions(Compiler.describe(bb, artifact, 'json'));
  const split = splitDigits(bb, csv, config.clients, 1, config.classesPerShard);
  const node = installDigitsClient(bb, artifact, identity.peerId, config.server, split.shards[seat.index], seat.index + 2);
  // signalling shares the page's port and its security: wss: on an https: page
  const url = `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}${config.signalPath}`;
  const me = { role: `client ${seat.index + 1} of ${config.clients}`, sent: 0, received: 0, state: 'connecting' };
  state.peers.set(identity.peerId, me);
  const running = await connectPeer(node, { url, room: config.room, identity, token: seat.token });
  running.transport.events.on('state', (_, s) => (me.state = s));
  status(`live client ${seat.index + 1}: waiting for the server to start the rounds`);
  watch(() => Object.assign(me, { sent: running.stats().sent, received: running.stats().received }));
}

// ---- watch the live federation's progress -----------------------------------------------------

function watch(every = () => {}) {
  if (state.mode === 'idle') state.mode = 'live federation';
  setInterval(async () => {
    every();
    const live = await (await fetch('/status.json')).json();
    for (const report of live.rounds.slice(state.rounds.length)) onRound(report);
    if (live.rounds.length === 0) status(`${state.mode}: ${live.joined} of ${live.clients} clients joined; rounds start when all are in`);
    drawPeers();
  }, 500);
}

async function main() {
  const bb = await loadBb(new URL('/bb.wasm', location.href));
  const csv = new Uint8Array(await (await fetch('/digits.csv')).arrayBuffer());
  const config = await (await fetch('/config.json')).json().catch(() => ({}));
  status(`bb.wasm ${bb.version} loaded; ${config.live ? 'a live federation is being served' : 'no live federation here'}`);
  showPartitions(Compiler.describe(bb, compileFederatedDigits(bb), 'json'));
  drawChart();
  const buttons = ['run-local', 'join', 'watch'].map($);
  const disable = () => buttons.forEach((b) => (b.disabled = true));
  if (config.live) $('join').hidden = $('watch').hidden = false;
  $('run-local').onclick = () => (disable(), runLocal(bb, csv).catch(fail));
  $('join').onclick = () => (disable(), join(bb, csv, config).catch(fail));
  $('watch').onclick = () => (disable(), watch());
  const auto = new URLSearchParams(location.search).get('run');
  if (auto === 'local') $('run-local').click();
  if (auto === 'join') $('join').click();
}

function fail(error) {
  status(`error: ${error.message ?? error}`);
  state.error = String(error);
  console.error(error);
}

main().catch(fail);
