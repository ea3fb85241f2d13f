#!/usr/bin/env node
// A federated_digits server as a process of its own, for scenarios that run it on another
// network than the driver (nat.mjs runs it behind a NAT). It talks JSON lines:
//   stdout {"id": PEER}                   its identity, before it joins (the artifact the
//                                         clients install is written to ARTIFACT by then)
//   stdin  {"clients": [PEER, ...]}       the operator admitted them: join and start rounds
//   stdout {"round": R, "accuracy": A, "counters": {...}, "transport": {...}, "links": {...}}
//                                         every round, with the server's counters, its
//                                         transport's figures and its links' states
// usage: node e2e/fed-server.mjs SIGNAL_URL ROOM CLIENTS ARTIFACT   (trusts NODE_EXTRA_CA_CERTS for wss:)
import { writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

import { Compiler, connectPeer, loadBb, roundReporter } from '../dist/index.js';
import { installDigitsServer, splitDigits, startDigitsServer } from '../dist/examples/index.js';
import { Identity } from '../dist/identity/index.js';
import { digitsCsv, wasmBytes } from './common.mjs';

const [url, room, clientCount, artifactPath] = process.argv.slice(2);
const clients = Number(clientCount);
const bb = await loadBb(wasmBytes());
// Updates past FedAvg's distance bound are pulled back onto it rather than dropped: the
// clients' shards are label-skewed, and dropping the farthest of three starves the model of
// its classes for that round (accuracy fell from 0.72 to 0.48).
const compiler = Compiler.forExample(bb, 'federated_digits');
compiler.rebind('aggregator', 'Aggregator', 'FedAvg', `quorum=${clients},target=${clients},deadline_ms=3000,no_quorum=abandon,init=model,beyond_norm=clip`);
const artifact = compiler.compile(Compiler.recordExample(bb, 'federated_digits'));
compiler.free();
writeFileSync(artifactPath, artifact);
const split = splitDigits(bb, digitsCsv(), clients, 1, 5);
const identity = await Identity.generate();
const server = installDigitsServer(bb, artifact, identity.peerId, split.test);
// The server's FedAvg counters, reported with every round: why a round went without a client.
const COUNTERS = ['fedavg.rounds_closed', 'fedavg.rounds_abandoned', 'fedavg.refused_non_member', 'fedavg.late_dropped', 'fedavg.replaced', 'fedavg.norm_dropped', 'fedavg.norm_clipped',
  'wire.envelopes_received', 'wire.fills_delivered', 'wire.expired', 'wire.rejected', 'wire.duplicates', 'send.envelopes', 'outbound.dropped', 'ops.failed'];
const say = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);
say({ id: identity.peerId });

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  const { clients: ids } = JSON.parse(line);
  let transport;
  const running = await connectPeer(server, { url, room, identity, role: 'server', onStep: roundReporter((r) => say({ ...r, counters: Object.fromEntries(COUNTERS.map((c) => [c, Number(server.counter(c))])), transport: transport?.stats(), links: transport ? Object.fromEntries(transport.links().map((p) => [p, transport.state(p)])) : {} })) });
  transport = running.transport;
  for (const id of ids) server.addPeer(id);
  startDigitsServer(server, ids, split.test, running.driver.now());
  running.driver.wake();
  break;
}
