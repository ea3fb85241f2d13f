// Poisoning the templates as a user gets them: federatedAveraging and gossipLearning built
// with no option but the model (and the number of clients), installed with the install
// options a federation on a network uses (a room with a join policy: `admission`), run on
// the package's LocalNetwork on a simulated clock, with honest and malicious peers.
//
//   (cd js && npm run build) && bash scripts/build-wasm.sh
//   node bench/template-poisoning.mjs [--rounds N] [--periods N] [--seeds K] [--attack NAME]
//                                     [--aggregator fedavg|centered-clipping|median|trimmed-mean]
//                                     [--fit-steps N] [--json]
//   node bench/template-poisoning.mjs --shapes 3x5,8x2,10x3 [--aggregator ...] [--plain] [--seeds K]
//
// --shapes runs no attack: clean federations of K clients holding C classes each (KxC),
// what the defaults cost a federation whose classes are spread thin; --plain runs them
// with plain FedAvg instead (the template's FedAvg with every bound off: the
// sample-weighted mean of every update), the yardstick.
//
// The data: scikit-learn's digits split into ten label-skewed shards (three digits each),
// a held-out set for the server. --aggregator and --fit-steps give federatedAveraging
// those options (the template options a run may set: --fit-steps 1 makes every client's
// step one SGD step on 32 rows, mostly noise). The clean row also says how many honest
// updates the ascent screen left out or cut (it should be none). FedAvg runs 30 rounds (ten clients); the score is the
// server's held-out accuracy after the last round. Gossip runs 200 periods (ten peers); the
// score is the mean held-out accuracy of the ten honest peers' models, each scored as the
// peer scores itself every period. Both are averaged over seeds 1..K (default 2).
//
// The attackers run programs of their own: the template's Module compiled with a Model
// written in TypeScript (componentModel) in place of CpuMlp, which trains honestly with a
// CpuMlp bound beside it (the honest artifact's model config, read from the artifact) and
// then rewrites what Fit gives back. They hold join tokens like the honest clients (they
// are admitted members lying within their role); the Sybils hold none. The rows marked
// "open room" run without a policy (no `admission`, no tokens): what admission is for.
//
// The functions below take the package's exports as `pkg`, so the test suite runs them on
// the sources (js/test/template-poisoning.test.ts) and this script on the built package.

/** CpuMlp 64 → 32 → 10 on the digits' 0..16 pixels: the model every run trains. */
export function digitsModel(pkg) {
  return pkg.cpuMlp({ inputs: 64, hidden: [32], outputs: 10, inputScale: 1 / 16 });
}

/** What the attackers of each FedAvg row do; `clients: 1` rows have one attacker whatever the count. */
export const FEDAVG_ATTACKS = {
  clean: { text: 'ten honest clients', clients: 0 },
  silent: { text: 'one client goes silent after round 1', clients: 1 },
  nan: { text: 'one client sends a NaN in every update', clients: 1 },
  scale: { text: 'send 100 x their trained parameters' },
  signflip: { text: 'send their parameters negated' },
  reverse: { text: 'send the reversed step g - (u - g)' },
  huge: { text: 'send 3e38 in every parameter' },
  samples: { text: 'claim 10^12 samples' },
  revsamples: { text: 'reversed step and 10^12 samples' },
  labelflip: { text: 'train on labels 9 - y' },
  sybil: { text: '10 ids without a token announce, send 100 x', clients: 0, sybils: 10 },
  sybilopen: { text: 'the same, open room', clients: 0, sybils: 10, open: true },
};

/** The gossip rows: Sybils (no token) that know one honest peer and send 100 x or 3e38. */
export const GOSSIP_ATTACKS = {
  clean: { text: 'ten honest peers', sybils: 0 },
  sybil1scale: { text: '1 Sybil sends 100 x its model', sybils: 1, mode: 'scale' },
  sybil1huge: { text: '1 Sybil sends 3e38 everywhere', sybils: 1, mode: 'huge' },
  sybil3scale: { text: '3 Sybils send 100 x', sybils: 3, mode: 'scale' },
  sybil3huge: { text: '3 Sybils send 3e38', sybils: 3, mode: 'huge' },
  sybil3scaleopen: { text: '3 Sybils send 100 x, open room', sybils: 3, mode: 'scale', open: true },
  sybil3hugeopen: { text: '3 Sybils send 3e38, open room', sybils: 3, mode: 'huge', open: true },
};

const MS = 1_000_000n;
const ROOM = 'poisoning';
const N_CLIENTS = 10;
const TOKEN_LIFETIME_S = 3600;

/** The update `trained` a lying Fit gives back instead, from the global model `global`. */
function rewrite(mode, global, trained) {
  const u = Float32Array.from(trained);
  for (let i = 0; i < u.length; i++) {
    if (mode === 'scale') u[i] = 100 * trained[i];
    else if (mode === 'signflip') u[i] = -trained[i];
    else if (mode === 'reverse' || mode === 'revsamples') u[i] = 2 * global[i] - trained[i];
    else if (mode === 'huge') u[i] = 3e38;
  }
  if (mode === 'nan') u[u.length >> 1] = Number.NaN;
  return u;
}

/** A Model that trains with the CpuMlp at slot `honest` and lies about the result as `mode` says. */
function liarModel(pkg, mode) {
  const tensor = (t) => pkg.tensorValue('float', t.data, t.dims);
  const call = (context, op, inputs, outputs) => context.call('honest', op, inputs, outputs);
  return {
    params: (context) => call(context, 'Params', [], 1)[0].tensor,
    loadParameters(params, context) {
      call(context, 'LoadParameters', [tensor(params)], 1);
    },
    fit(params, context) {
      const [trained, samples] = call(context, 'Fit', [tensor(params)], 2);
      const lie = rewrite(mode, params.data, trained.tensor.data);
      return { trained: { dtype: 'float', dims: trained.tensor.dims, data: lie }, samples: mode === 'samples' || mode === 'revsamples' ? 1_000_000_000_000n : samples.value };
    },
    evaluate: (x, labels, context) => call(context, 'Evaluate', [tensor(x), tensor(labels)], 1)[0].tensor.data[0],
  };
}

/**
 * The attacker's program: `makePlan(model)` (the template, with a lying Model) compiled
 * with a CpuMlp at `honest` configured as the honest artifact's model slot. Its plan
 * installs its peers.
 */
function liarProgram(pkg, bb, makePlan, honestArtifact, mode) {
  const honest = pkg.inspectArtifact(honestArtifact).configs.get('model');
  if (honest === undefined) throw new Error('template-poisoning: the artifact binds no model slot');
  const plan = makePlan(pkg.componentModel(`Liar_${mode}`, () => liarModel(pkg, mode)));
  const compiler = plan.compiler(bb);
  try {
    compiler.declare('CpuMlp', pkg.TENSOR_F32);
    compiler.bind('honest', 'Model', 'CpuMlp', honest);
    return { plan, artifact: compiler.compile(plan.module.build(bb)) };
  } finally {
    compiler.free();
  }
}

/** Runs the network on its own clock (1 ms steps while envelopes are in flight, else to the next expiry) until done() or limitNs. */
export function drive(network, done, limitNs) {
  let now = 0n;
  while (now < limitNs && !done()) {
    network.poll(now);
    const expiry = network.expiry();
    let next = network.hasWork() ? now + MS : expiry ?? now + 5n * MS;
    if (next <= now) next = now + MS;
    if (next > now + 50n * MS) next = now + 50n * MS;
    now = next;
  }
}

/** A room's operator and the tokens it signs. */
async function operatorOf(pkg) {
  const operator = await pkg.Identity.generate();
  return {
    admission: { room: ROOM, operators: [operator.publicKey] },
    token: (peer) => pkg.createJoinToken(operator, { room: ROOM, peer, role: 'client', expiresAt: Math.floor(Date.now() / 1000) + TOKEN_LIFETIME_S }),
  };
}

/** Labels y → 9 - y of a shard, as a new Dataset. */
function flipped(pkg, bb, shard) {
  const x = shard.features();
  const y = shard.labels();
  return pkg.Dataset.fromArrays(bb, x.data, x.dims[1], y.data.map((label) => 9 - label));
}

/**
 * One FedAvg run: federatedAveraging({ model, clients: 10 }) (with `aggregator` when
 * given) with `attackers` of the ten lying as `attack` says. Returns the server's held-out accuracy after round `rounds`
 * (NaN when the rounds stopped before it), the rounds closed and abandoned, and the
 * server's refusal counters.
 */
export async function runFederated(pkg, bb, csv, { attack, attackers = 2, rounds = 30, seed = 1, aggregator, fitSteps }) {
  const row = FEDAVG_ATTACKS[attack];
  if (row === undefined) throw new Error(`template-poisoning: no FedAvg attack ${attack}`);
  const liars = row.clients ?? attackers;
  const makePlan = (model) => pkg.federatedAveraging({ model, clients: N_CLIENTS, ...(aggregator === undefined ? {} : { aggregator }), ...(fitSteps === undefined ? {} : { fitSteps }) });
  const plan = makePlan(digitsModel(pkg));
  const artifact = plan.compile(bb);
  const split = pkg.splitDigits(bb, csv, N_CLIENTS, seed, 3);
  const room = await operatorOf(pkg);
  const admission = row.open ? {} : { admission: room.admission };
  const serverId = pkg.peerIdFromU64(1);
  const server = plan.installServer(bb, { artifact, self: serverId, test: split.test, seed, nowNs: 0n, ...admission });
  const nodes = [server.node];
  const lies = liars > 0 && attack !== 'silent' && attack !== 'labelflip';
  const liar = lies ? liarProgram(pkg, bb, makePlan, artifact, attack) : row.sybils ? liarProgram(pkg, bb, makePlan, artifact, 'scale') : undefined;
  const extra = [];
  for (let k = 0; k < N_CLIENTS + (row.sybils ?? 0); k++) {
    const self = pkg.peerIdFromU64(k + 2);
    const sybil = k >= N_CLIENTS;
    const attacker = !sybil && k >= N_CLIENTS - liars;
    let data = split.shards[sybil ? 0 : k];
    if (attacker && attack === 'labelflip') extra.push((data = flipped(pkg, bb, data)));
    const program = sybil || (attacker && lies) ? liar : { plan, artifact };
    nodes.push(program.plan.installClient(bb, { artifact: program.artifact, self, server: serverId, data, seed: seed * 100 + k, nowNs: 0n, ...admission }));
    if (!sybil && !row.open) server.node.admitToken(self, await room.token(self), Date.now() / 1000, 0n);
  }
  const silent = attack === 'silent' ? nodes[nodes.length - 1] : undefined;
  const network = new pkg.LocalNetwork(nodes);
  let last = { round: 0, accuracy: Number.NaN };
  server.onRound((report) => {
    last = report;
    if (silent !== undefined && report.round === 1 && !silent.freed) silent.free();
  });
  server.start([], 0n);
  drive(network, () => last.round >= rounds, BigInt(rounds) * 4000n * MS);
  const counters = {};
  for (const name of ['rounds_closed', 'rounds_abandoned', 'refused_nonfinite', 'norm_dropped', 'norm_clipped', 'samples_clipped', 'ascent_dropped', 'ascent_weighed', 'refused_unadmitted', 'refused_non_member']) {
    counters[name] = Number(server.node.counter(`fedavg.${name}`));
  }
  counters.registry_refused = Number(server.node.counter('global_registry.refused_unadmitted'));
  const result = { accuracy: last.round >= rounds ? last.accuracy : Number.NaN, round: last.round, counters };
  network.free();
  split.free();
  for (const d of extra) d.free();
  return result;
}

/**
 * One gossip run: gossipLearning({ model }) on ten honest peers (each seeded with the next
 * two in a ring) and `sybils` Sybils that know one honest peer. Returns the honest peers'
 * mean held-out accuracy over their last period scores after `periods` periods, and their
 * refusal counters summed.
 */
export async function runGossip(pkg, bb, csv, { attack, periods = 200, seed = 1 }) {
  const row = GOSSIP_ATTACKS[attack];
  if (row === undefined) throw new Error(`template-poisoning: no gossip attack ${attack}`);
  const makePlan = (model) => pkg.gossipLearning({ model });
  const plan = makePlan(digitsModel(pkg));
  const artifact = plan.compile(bb);
  const split = pkg.splitDigits(bb, csv, N_CLIENTS, seed, 3);
  const room = await operatorOf(pkg);
  const admission = row.open ? {} : { admission: room.admission };
  const ids = Array.from({ length: N_CLIENTS + row.sybils }, (_, k) => pkg.peerIdFromU64(k + 1));
  const honest = ids.slice(0, N_CLIENTS);
  const liar = row.sybils > 0 ? liarProgram(pkg, bb, makePlan, artifact, row.mode) : undefined;
  const scores = new Map();
  const peers = [];
  for (let k = 0; k < ids.length; k++) {
    const sybil = k >= N_CLIENTS;
    const seeds = sybil ? [honest[k % N_CLIENTS]] : [honest[(k + 1) % N_CLIENTS], honest[(k + 2) % N_CLIENTS]];
    const peer = (sybil ? liar.plan : plan).installPeer(bb, { artifact: sybil ? liar.artifact : artifact, self: ids[k], data: split.shards[k % N_CLIENTS], test: split.test, seeds, seed: seed * 100 + k, ...admission });
    if (!sybil) peer.onRound((r) => scores.set(ids[k], r));
    peers.push(peer);
  }
  if (!row.open) {
    // every honest peer holds a token and hands the others' to its node, as connectPeer does
    const tokens = new Map();
    for (const id of honest) tokens.set(id, await room.token(id));
    for (const peer of peers.slice(0, N_CLIENTS)) for (const [id, token] of tokens) if (id !== peer.node.self) peer.node.admitToken(id, token, Date.now() / 1000, 0n);
  }
  const network = new pkg.LocalNetwork(peers.map((p) => p.node));
  for (const peer of peers) peer.start(0n);
  drive(network, () => honest.every((id) => (scores.get(id)?.round ?? 0) >= periods), BigInt(periods) * 1000n * MS);
  const accuracies = honest.map((id) => scores.get(id)?.accuracy ?? Number.NaN);
  const counters = {};
  const total = (counter) => peers.slice(0, N_CLIENTS).reduce((sum, p) => sum + Number(p.node.counter(counter)), 0);
  for (const name of ['merged', 'norm_dropped', 'norm_clipped', 'refused_nonfinite', 'refused_unadmitted', 'refused_non_member']) {
    counters[name] = total(`gossip.${name}`);
  }
  counters.view_refused = total('gossip_view.refused_unadmitted');
  const result = { accuracy: accuracies.reduce((a, b) => a + b, 0) / accuracies.length, worst: Math.min(...accuracies), counters };
  network.free();
  split.free();
  return result;
}

/** The plan compiled with its FedAvg's bounds off: the plain sample-weighted mean. */
function plainFedAvg(pkg, bb, plan) {
  const compiler = plan.compiler(bb);
  try {
    const rounds = pkg.inspectArtifact(plan.compile(bb)).configs.get('aggregator');
    compiler.rebind('aggregator', 'Aggregator', 'FedAvg', `${rounds},samples_factor=0,norm_factor=0,ascent_screen=0`);
    return compiler.compile(plan.module.build(bb));
  } finally {
    compiler.free();
  }
}

/** A clean federatedAveraging({ model, clients }) run on `clients` shards of `classes` digits each: the accuracy after `rounds`. */
export async function runShape(pkg, bb, csv, { clients, classes, rounds = 30, seed = 1, aggregator, plain = false }) {
  const plan = pkg.federatedAveraging({ model: digitsModel(pkg), clients, ...(aggregator === undefined ? {} : { aggregator }) });
  const artifact = plain ? plainFedAvg(pkg, bb, plan) : plan.compile(bb);
  const split = pkg.splitDigits(bb, csv, clients, seed, classes);
  const server = plan.installServer(bb, { artifact, self: pkg.peerIdFromU64(1), test: split.test, seed, nowNs: 0n });
  const nodes = [server.node];
  for (let k = 0; k < clients; k++) {
    nodes.push(plan.installClient(bb, { artifact, self: pkg.peerIdFromU64(k + 2), server: server.node.self, data: split.shards[k], seed: seed * 100 + k, nowNs: 0n }));
  }
  const network = new pkg.LocalNetwork(nodes);
  let last = { round: 0, accuracy: Number.NaN };
  server.onRound((report) => (last = report));
  server.start([], 0n);
  drive(network, () => last.round >= rounds, BigInt(rounds) * 4000n * MS);
  network.free();
  split.free();
  return { accuracy: last.round >= rounds ? last.accuracy : Number.NaN };
}

// ---- the command line ------------------------------------------------------------------------

async function main() {
  const { readFileSync } = await import('node:fs');
  const { gunzipSync } = await import('node:zlib');
  const args = process.argv.slice(2);
  const option = (name, fallback) => {
    const at = args.indexOf(name);
    return at < 0 ? fallback : args[at + 1];
  };
  const rounds = Number(option('--rounds', 30));
  const periods = Number(option('--periods', 200));
  const seeds = Number(option('--seeds', 2));
  const only = option('--attack', undefined);
  if (only !== undefined && !(only in FEDAVG_ATTACKS) && !(only in GOSSIP_ATTACKS)) {
    console.error(`template-poisoning: no attack ${only} (${[...Object.keys(FEDAVG_ATTACKS), ...Object.keys(GOSSIP_ATTACKS)].join(', ')})`);
    process.exit(2);
  }
  const json = args.includes('--json');
  const aggregator = option('--aggregator', undefined);
  const fitSteps = option('--fit-steps', undefined) === undefined ? undefined : Number(option('--fit-steps'));
  const plain = args.includes('--plain');
  const root = new URL('..', import.meta.url);
  const pkg = {
    ...(await import(new URL('js/dist/index.js', root))),
    ...(await import(new URL('js/dist/examples/index.js', root))),
    ...(await import(new URL('js/dist/internals.js', root))),
    ...(await import(new URL('js/dist/signal/index.js', root))),
    ...(await import(new URL('js/dist/identity/index.js', root))),
  };
  const bb = await pkg.loadBb(readFileSync(new URL('js/wasm/bb.wasm', root)));
  const csv = gunzipSync(readFileSync('/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz'));
  let screened = 0; // honest updates the ascent screen left out or cut, over the clean runs
  const mean = async (run) => {
    let sum = 0;
    for (let s = 1; s <= seeds; s++) sum += (await run(s)).accuracy;
    return sum / seeds;
  };
  const rows = [];
  const say = (text) => json || console.log(text);
  const shapes = option('--shapes', undefined);
  if (shapes !== undefined) {
    const what = plain ? 'plain FedAvg (every bound off)' : `federatedAveraging({ model, clients${aggregator === undefined ? '' : `, aggregator: '${aggregator}'`} })`;
    say(`template-poisoning: clean ${what}, ${rounds} rounds, mean of seeds 1..${seeds}`);
    for (const shape of shapes.split(',')) {
      const [clients, classes] = shape.split('x').map(Number);
      const accuracy = await mean((seed) => runShape(pkg, bb, csv, { clients, classes, rounds, seed, aggregator, plain }));
      rows.push({ clients, classes, accuracy });
      say(`${`${clients} clients x ${classes} classes`.padEnd(24)} ${accuracy.toFixed(3)}`);
    }
    if (json) console.log(JSON.stringify(rows));
    return;
  }
  const cell = (a, clean) => `   ${a.toFixed(3)}  ${a - clean >= 0 ? '+' : '-'}${Math.abs(a - clean).toFixed(3)}`;
  const options = `${aggregator === undefined ? '' : `, aggregator: '${aggregator}'`}${fitSteps === undefined ? '' : `, fitSteps: ${fitSteps}`}`;
  say(`template-poisoning: federatedAveraging({ model, clients: 10${options} }), ${rounds} rounds; gossipLearning({ model }), ${periods} periods; mean of seeds 1..${seeds}`);
  say(`${'FedAvg row'.padEnd(12)} ${'the attackers...'.padEnd(44)}  2 of 10  vs clean   3 of 10  vs clean`);
  let clean = Number.NaN;
  for (const [attack, row] of Object.entries(FEDAVG_ATTACKS)) {
    if (only !== undefined && attack !== only && attack !== 'clean') continue;
    const counts = row.clients === undefined ? [2, 3] : [row.clients];
    const cells = [];
    for (const attackers of counts) {
      cells.push(await mean(async (seed) => {
        const run = await runFederated(pkg, bb, csv, { attack, attackers, rounds, seed, aggregator, fitSteps });
        if (attack === 'clean') screened += run.counters.ascent_dropped + run.counters.ascent_weighed;
        return run;
      }));
    }
    if (attack === 'clean') clean = cells[0];
    rows.push({ template: 'federatedAveraging', attack, text: row.text, accuracy: cells, clean, open: row.open === true, ...(attack === 'clean' ? { screened } : {}) });
    say(`${attack.padEnd(12)} ${row.text.padEnd(44)}${cells.map((a) => cell(a, clean)).join('')}${attack === 'clean' ? `   (honest updates screened: ${screened})` : ''}`);
  }
  say(`${'gossip row'.padEnd(16)} ${'the attackers...'.padEnd(40)}  honest peers  vs clean`);
  let gossipClean = Number.NaN;
  for (const [attack, row] of Object.entries(GOSSIP_ATTACKS)) {
    if (only !== undefined && attack !== only && attack !== 'clean') continue;
    const accuracy = await mean((seed) => runGossip(pkg, bb, csv, { attack, periods, seed }));
    if (attack === 'clean') gossipClean = accuracy;
    rows.push({ template: 'gossipLearning', attack, text: row.text, accuracy: [accuracy], clean: gossipClean, open: row.open === true });
    say(`${attack.padEnd(16)} ${row.text.padEnd(40)}${cell(accuracy, gossipClean)}`);
  }
  if (json) console.log(JSON.stringify(rows));
}

if (process.argv[1] !== undefined && import.meta.url === (await import('node:url')).pathToFileURL(process.argv[1]).href) await main();
