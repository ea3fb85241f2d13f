/**
 * A template federation in a room with a join policy, set up as docs/WEB.md shows it: the
 * server's id on the room's allowlist, clients admitted by an operator's join tokens, every
 * node installed with the room's `admission`. A node that checks no tokens cannot take part
 * in such a room — connectPeer refuses to run it — and the server, set up as shown, takes
 * nothing from a peer without a token.
 */
import { afterEach, beforeAll, describe, expect, test } from 'vitest';

import { BbErrorCode, connectPeer, cpuMlp, Dataset, federatedAveraging, LocalNetwork, loadBb, type Bb, type Plan } from '../src/index.js';
import { Identity } from '../src/identity/index.js';
import { admissionOf, createJoinToken } from '../src/signal/index.js';
import { SignalServer } from '../src/signal/node.js';
import type { WebRtcTransportOptions } from '../src/transport/webrtc.js';
import { WS } from './signal-support.js';
import { wasmBytes } from './support.js';

/** No link is opened: the envelopes go over a LocalNetwork once the tokens are handed over. */
const NoPeerConnection = class {} as unknown as WebRtcTransportOptions['RTCPeerConnection'] & object;
const ROOM = 'points';
const MS = 1_000_000n;

let bb: Bb;
let plan: Plan;
let artifact: Uint8Array;
let data: Dataset;
const cleanup: Array<() => unknown> = [];

beforeAll(async () => {
  bb = await loadBb(wasmBytes());
  plan = federatedAveraging({ model: cpuMlp({ inputs: 2, outputs: 2 }), clients: 1 });
  artifact = plan.compile(bb);
  data = Dataset.fromArrays(bb, new Float32Array([0, 1, 1, 0, 1, 1, 0, 0]), 2, new Float32Array([0, 1, 1, 0]));
});

afterEach(async () => {
  for (const undo of cleanup.splice(0).reverse()) await undo();
});

/** The room of docs/WEB.md: the server on the allowlist, clients by the operator's tokens. */
async function policyRoom(): Promise<{ url: string; operator: Identity; server: Identity; signal: SignalServer }> {
  const operator = await Identity.generate();
  const server = await Identity.generate();
  const signal = await SignalServer.listen({
    port: 0, host: '127.0.0.1', presenceIntervalMs: 10, openRooms: false,
    rooms: { [ROOM]: { allow: { [server.peerId]: 'server' }, operators: [operator.publicKey] } },
  });
  cleanup.push(() => signal.close());
  return { url: `ws://127.0.0.1:${signal.address.port}`, operator, server, signal };
}

const clientToken = (operator: Identity, peer: string): Promise<string> =>
  createJoinToken(operator, { peer, role: 'client', room: ROOM, expiresAt: Math.floor(Date.now() / 1000) + 3600 });

/** connectPeer as the docs call it: the server in its role, a client with its token. */
const connect = (node: Parameters<typeof connectPeer>[0], url: string, identity: Identity, token?: string) =>
  connectPeer(node, {
    url, room: ROOM, identity, WebSocket: WS, transport: { RTCPeerConnection: NoPeerConnection }, rejoin: false,
    ...(token === undefined ? { role: 'server' as const } : { token }),
  });

/** Waits until `done()` holds (a few seconds at most). */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 300 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  expect(done()).toBe(true);
}

describe('a room that admits by join token', () => {
  test('a node that checks no tokens is refused by connectPeer, server and client alike', async () => {
    const room = await policyRoom();
    // the server joins by the allowlist, with no token: the room's operators come with `joined`
    const server = plan.installServer(bb, { artifact, self: room.server.peerId, test: data });
    cleanup.push(() => server.node.free());
    const refused = await connect(server.node, room.url, room.server).then(() => undefined, (error: unknown) => error);
    expect(refused).toMatchObject({ code: BbErrorCode.Denied });
    expect(String(refused)).toMatch(/room points admits by join token but node \S+ checks none: install it with admission/);
    // a client that brings a token but checks none
    const me = await Identity.generate();
    const client = plan.installClient(bb, { artifact, self: me.peerId, server: room.server.peerId, data });
    cleanup.push(() => client.free());
    await expect(connect(client, room.url, me, await clientToken(room.operator, me.peerId))).rejects.toThrow(/checks none/);
    // nor one that checks another room's tokens, or does not trust the key of its own token
    const elsewhere = plan.installClient(bb, { artifact, self: me.peerId, server: room.server.peerId, data, admission: { room: 'other', operators: [room.operator.publicKey] } });
    cleanup.push(() => elsewhere.free());
    await expect(connect(elsewhere, room.url, me, await clientToken(room.operator, me.peerId))).rejects.toThrow(/checks the join tokens of room other/);
    const stranger = (await Identity.generate()).publicKey;
    const distrusting = plan.installClient(bb, { artifact, self: me.peerId, server: room.server.peerId, data, admission: { room: ROOM, operators: [stranger] } });
    cleanup.push(() => distrusting.free());
    await expect(connect(distrusting, room.url, me, await clientToken(room.operator, me.peerId))).rejects.toThrow(/does not trust the operator key/);
    // each refused peer left the room again
    await until(() => room.signal.stats().members === 0);
  });

  test('set up as the docs show, the server takes part, admits a client\'s token and refuses an un-tokened Sybil', async () => {
    const room = await policyRoom();
    const admission = { room: ROOM, operators: [room.operator.publicKey] };
    const server = plan.installServer(bb, { artifact, self: room.server.peerId, test: data, admission, nowNs: 0n });
    const honest = await Identity.generate();
    const token = await clientToken(room.operator, honest.peerId);
    const client = plan.installClient(bb, { artifact, self: honest.peerId, server: room.server.peerId, data, admission: admissionOf(token), nowNs: 0n });
    // a peer no operator admitted, running the same program: it cannot join the room, but
    // its envelopes may still reach the server (a relay, a signalling server that lies)
    const sybil = plan.installClient(bb, { artifact, server: room.server.peerId, data, nowNs: 0n });
    cleanup.push(() => server.node.free(), () => client.free(), () => sybil.free());
    // the client joins first (what it sends before the server is in the room is dropped)
    const clientPeer = await connect(client, room.url, honest, token);
    clientPeer.stop();
    const serverPeer = await connect(server.node, room.url, room.server);
    cleanup.push(() => serverPeer.transport.close(), () => clientPeer.transport.close());
    await until(() => server.node.peerRole(honest.peerId) === 'client');
    serverPeer.stop();
    expect(server.node.peerRole(sybil.self)).toBeNull();

    const network = new LocalNetwork([server.node, client, sybil]);
    let round = 0;
    server.onRound((report) => (round = report.round));
    server.start([], 0n);
    for (let t = 1n; t < 20_000n && round < 3; t++) network.poll(t * MS);
    expect(round).toBeGreaterThanOrEqual(3);
    const refusals = server.refusals();
    expect(server.node.counter('fedavg.rounds_closed')).toBeGreaterThanOrEqual(2n); // the honest client's updates
    expect(refusals.rounds_abandoned).toBe(0);
    expect(refusals.registry_unadmitted).toBeGreaterThan(0); // the Sybil's announces
    expect(refusals.refused_unadmitted + refusals.refused_non_member).toBe(0); // it never got a round to answer
    expect(() => admissionOf('not a token')).toThrow(/well-formed/);
  });
});
