#!/usr/bin/env node
// A federated_digits server as a process of its own, for scenarios that run it on another
// network than the driver (nat.mjs runs it behind a NAT). It talks JSON lines:
//   stdout {"id": PEER}                   its identity, before it joins (the artifact the
//                                         clients install is written to ARTIFACT by then)
//   stdin  {"clients": [PEER, ...]}       the operator admitted them: join and start rounds
//   stdout {"round": R, "accuracy": A}    every round
// usage: node e2e/fed-server.mjs SIGNAL_URL ROOM CLIENTS ARTIFACT   (trusts NODE_EXTRA_CA_CERTS for wss:)
import { writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

import { compileFederatedDigits, connectPeer, installDigitsServer, loadBb, roundReporter, splitDigits, startDigitsServer } from '../dist/index.js';
import { Identity } from '../dist/identity/index.js';
import { digitsCsv, wasmBytes } from './common.mjs';

const [url, room, clientCount, artifactPath] = process.argv.slice(2);
const clients = Number(clientCount);
const bb = await loadBb(wasmBytes());
const artifact = compileFederatedDigits(bb, { quorum: clients, target: clients, deadlineMs: 3000 });
writeFileSync(artifactPath, artifact);
const split = splitDigits(bb, digitsCsv(), clients, 1, 5);
const identity = await Identity.generate();
const server = installDigitsServer(bb, artifact, identity.peerId, split.test);
const say = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);
say({ id: identity.peerId });

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  const { clients: ids } = JSON.parse(line);
  const running = await connectPeer(server, { url, room, identity, role: 'server', onStep: roundReporter((r) => say(r)) });
  for (const id of ids) server.addPeer(id);
  startDigitsServer(server, ids, split.test, running.driver.now());
  running.driver.wake();
  break;
}
