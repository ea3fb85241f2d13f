/**
 * Join tokens checked by the engine: BbNode.admitToken verifies a token in bb.wasm (with
 * libsodium's Ed25519), and connectPeer hands it each member's token as the signalling
 * server relays it. The server only relays: a token it forges or alters is refused by
 * the engine, whatever the server said at the join.
 */
import { WebSocketServer, type WebSocket as ServerSocket } from 'ws';
import { afterEach, beforeAll, describe, expect, test } from 'vitest';

import { BbError, BbErrorCode, BbNode, Compiler, connectPeer, loadBb, type Bb } from '../src/index.js';
import { randomBytes } from '../src/identity/bytes.js';
import { fromBase64, Identity, toBase64, toBase64Url } from '../src/identity/index.js';
import { createJoinToken, SignalClient, type PeerRole } from '../src/signal/index.js';
import { SignalServer } from '../src/signal/node.js';
import type { WebRtcTransportOptions } from '../src/transport/webrtc.js';
import { WS } from './signal-support.js';
import { bbErrorOf, wasmBytes } from './support.js';

// docs/SECURITY.md, "Test vector" (made by createJoinToken; independent of libsodium)
const VECTOR = {
  operator: '03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8',
  peer: '12D3KooWCd3eX8r5ihRvzK7P1yPq5aakaBJhG5GNj18YTztPhoCa',
  room: 'federation-1',
  token: 'QkJKVAEBAJQ1dwAAAAADoQe_884Qvh1w3RjnS8CZZ-TWMJulDV8d3IZkElUxuCYAJAgBEiAprLrhQbzK8LIuGpTTTQvHNh5SbQv-EsiXlLyTIpZt1wxmZWRlcmF0aW9uLTEKLADfj37oPt4WKZrQhERftDsu0J65a4gvLLM4WCXCKMJs0gqhyInbVB8yu5f6oCINTWHAMzbQLTd0lFPdOVUF',
};
const hex = (text: string): Uint8Array => Uint8Array.from(text.match(/../g)!.map((b) => parseInt(b, 16)));
/** No link is ever opened in these tests: the transport only needs a constructor. */
const NoPeerConnection = class {} as unknown as WebRtcTransportOptions['RTCPeerConnection'] & object;
const HOUR = (): number => Math.floor(Date.now() / 1000) + 3600;

let module: WebAssembly.Module;
let bb: Bb;
let artifact: Uint8Array;
const cleanup: Array<() => unknown> = [];

beforeAll(async () => {
  module = await WebAssembly.compile(wasmBytes());
  bb = await loadBb(module);
  const compiler = Compiler.forExample(bb, 'quickstart');
  artifact = compiler.compile(Compiler.recordExample(bb, 'quickstart'));
  compiler.free();
});

afterEach(async () => {
  for (const undo of cleanup.splice(0).reverse()) await undo();
});

function install(self: string, room: string, operators: Uint8Array[]): BbNode {
  const node = BbNode.install(bb, { artifact, self, targets: ['Quickstart'], admission: { room, operators } });
  cleanup.push(() => node.free());
  return node;
}


/** A token whose role byte was changed after signing. */
function withRole(token: string, role: PeerRole): string {
  const bytes = fromBase64(token)!;
  bytes[5] = { client: 1, server: 2, watcher: 3 }[role];
  return toBase64Url(bytes);
}

describe('BbNode.admitToken', () => {
  test('verifies the documented vector, and names every refusal', async () => {
    const node = install((await Identity.generate()).peerId, VECTOR.room, [hex(VECTOR.operator)]);
    expect(node.checksTokens).toBe(true);
    expect(node.admitToken(VECTOR.peer, VECTOR.token, 1_700_000_000)).toBe('client');
    expect(node.peerRole(VECTOR.peer)).toBe('client');
    // the same bytes, not base64url
    expect(node.admitToken(VECTOR.peer, fromBase64(VECTOR.token)!, 1_700_000_000)).toBe('client');

    const expired = bbErrorOf(() => node.admitToken(VECTOR.peer, VECTOR.token, 2_000_000_000));
    expect(expired.code).toBe(BbErrorCode.Denied);
    expect(expired.message).toMatch(/expired/);
    const other = (await Identity.generate()).peerId;
    expect(bbErrorOf(() => node.admitToken(other, VECTOR.token, 1_700_000_000)).message).toMatch(/other_peer/);
    expect(bbErrorOf(() => node.admitToken(VECTOR.peer, withRole(VECTOR.token, 'server'), 1_700_000_000)).message).toMatch(/bad_signature/);
    expect(bbErrorOf(() => node.admitToken(VECTOR.peer, VECTOR.token.slice(0, 40), 1_700_000_000)).code).toBe(BbErrorCode.Malformed);
    expect(bbErrorOf(() => node.admitToken(VECTOR.peer, '***', 1_700_000_000)).code).toBe(BbErrorCode.Malformed);
    expect(node.counter('admission.admitted')).toBe(2n);
    expect(node.counter('admission.refused_expired')).toBe(1n);
    expect(node.counter('admission.refused_bad_signature')).toBe(1n);

    // tokens made here, by an operator of this room and by one of no room
    const operator = await Identity.generate();
    const stranger = await Identity.generate();
    const room = install((await Identity.generate()).peerId, 'fed', [operator.publicKey]);
    const watcher = await Identity.generate();
    expect(room.admitToken(watcher.peerId, await createJoinToken(operator, { peer: watcher.peerId, role: 'watcher', room: 'fed', expiresAt: HOUR() }))).toBe('watcher');
    const foreign = await createJoinToken(stranger, { peer: other, role: 'client', room: 'fed', expiresAt: HOUR() });
    expect(bbErrorOf(() => room.admitToken(other, foreign)).message).toMatch(/untrusted/);
    const elsewhere = await createJoinToken(operator, { peer: other, role: 'client', room: 'fed-2', expiresAt: HOUR() });
    expect(bbErrorOf(() => room.admitToken(other, elsewhere)).message).toMatch(/other_room/);
    expect(room.peerRole(other)).toBeNull();
  });

  test('only on a node installed with a room', async () => {
    const plain = BbNode.install(bb, { artifact, targets: ['Quickstart'] });
    cleanup.push(() => plain.free());
    expect(plain.checksTokens).toBe(false);
    expect(bbErrorOf(() => plain.admitToken(VECTOR.peer, VECTOR.token)).code).toBe(BbErrorCode.InvalidArgument);
    expect(plain.peerRole(VECTOR.peer)).toBeNull();
    expect(bbErrorOf(() => BbNode.install(bb, { artifact, targets: ['Quickstart'], admission: { room: 'fed', operators: [new Uint8Array(31)] } })).code).toBe(BbErrorCode.InvalidArgument);
    expect(bbErrorOf(() => BbNode.install(bb, { artifact, targets: ['Quickstart'], admission: { room: 'fed', operators: [] } })).message).toMatch(/trusts no operator key/);
    expect(bbErrorOf(() => BbNode.install(bb, { artifact, targets: ['Quickstart'], admission: { room: 'a room', operators: [new Uint8Array(32)] } })).message).toMatch(/join policy/);
  });
});

/** Waits until `done()` holds (a few seconds at most). */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 300 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  expect(done()).toBe(true);
}

describe('tokens relayed by the signalling server', () => {
  test('the server relays each member\'s token; connectPeer\'s node admits the genuine ones', async () => {
    const operator = await Identity.generate();
    const server = await SignalServer.listen({ port: 0, host: '127.0.0.1', presenceIntervalMs: 10, rooms: { fed: { operators: [operator.publicKey] } }, openRooms: false });
    cleanup.push(() => server.close());
    const url = `ws://127.0.0.1:${server.address.port}`;
    const [me, alice, bob] = [await Identity.generate(), await Identity.generate(), await Identity.generate()];
    const expiresAt = HOUR();
    const token = (id: Identity, role: PeerRole) => createJoinToken(operator, { peer: id.peerId, role, room: 'fed', expiresAt });
    const a = await SignalClient.connect({ url, room: 'fed', identity: alice, WebSocket: WS, token: await token(alice, 'client') });
    cleanup.push(() => a.close());
    const node = install(me.peerId, 'fed', [operator.publicKey]);
    const refused: string[] = [];
    const running = await connectPeer(node, { url, room: 'fed', identity: me, token: await token(me, 'server'), WebSocket: WS, transport: { RTCPeerConnection: NoPeerConnection }, onRefused: (peer) => refused.push(peer) });
    cleanup.push(() => running.transport.close(), () => running.stop());
    expect(node.peerRole(alice.peerId)).toBe('client'); // from the joined message
    const b = await SignalClient.connect({ url, room: 'fed', identity: bob, WebSocket: WS, token: await token(bob, 'client') });
    cleanup.push(() => b.close());
    expect(b.tokenOf(alice.peerId)).toBe(await token(alice, 'client'));
    await until(() => node.peerRole(bob.peerId) === 'client'); // from presence
    await until(() => a.tokenOf(bob.peerId) !== undefined && a.tokenOf(me.peerId) !== undefined);
    expect(refused).toEqual([]);
    expect(node.counter('admission.admitted')).toBe(2n);
  });

  test('a forged token relayed by a modified server is refused by the engine', async () => {
    const operator = await Identity.generate();
    const [me, honest, forger, elsewhere, bare] = await Promise.all(Array.from({ length: 5 }, () => Identity.generate()));
    const grant = (id: Identity, role: PeerRole, room = 'fed') => createJoinToken(operator, { peer: id.peerId, role, room, expiresAt: HOUR() });
    const tokens = {
      [honest!.peerId]: await grant(honest!, 'client'),
      // the forger holds a watcher's token; the server turns it into a client's
      [forger!.peerId]: withRole(await grant(forger!, 'watcher'), 'client'),
    };
    const late = { [elsewhere!.peerId]: await grant(elsewhere!, 'client', 'fed-2') };
    // a server speaking the protocol that admits anyone and relays what it likes
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    await new Promise((resolve) => wss.once('listening', resolve));
    cleanup.push(() => new Promise((resolve) => wss.close(resolve)));
    wss.on('connection', (socket: ServerSocket) => {
      socket.send(JSON.stringify({ type: 'challenge', nonce: toBase64(randomBytes(32)) }));
      socket.on('message', (data) => {
        const join = JSON.parse(String(data)) as { type: string; room: string; peer: string; role: PeerRole };
        if (join.type !== 'join') return;
        socket.send(JSON.stringify({ type: 'joined', room: join.room, peer: join.peer, role: join.role, peers: Object.keys(tokens), tokens }));
        setTimeout(() => socket.send(JSON.stringify({ type: 'presence', joined: [elsewhere!.peerId, bare!.peerId], left: [], tokens: late })), 20);
      });
    });
    const url = `ws://127.0.0.1:${(wss.address() as { port: number }).port}`;
    const node = install(me!.peerId, 'fed', [operator.publicKey]);
    const refused = new Map<string, BbError>();
    const running = await connectPeer(node, { url, room: 'fed', identity: me!, WebSocket: WS, transport: { RTCPeerConnection: NoPeerConnection }, onRefused: (peer, error) => refused.set(peer, error as BbError) });
    cleanup.push(() => running.transport.close(), () => running.stop());
    await until(() => refused.size === 3);
    expect(node.peerRole(honest!.peerId)).toBe('client');
    expect(node.peerRole(forger!.peerId)).toBeNull();
    expect(refused.get(forger!.peerId)?.code).toBe(BbErrorCode.Denied);
    expect(refused.get(forger!.peerId)?.message).toMatch(/bad_signature/);
    expect(refused.get(elsewhere!.peerId)?.message).toMatch(/other_room/);
    expect(refused.get(bare!.peerId)?.message).toMatch(/without a join token/);
    expect(node.counter('admission.refused_bad_signature')).toBe(1n);
    expect(node.counter('admission.refused_other_room')).toBe(1n);
    expect(node.counter('admission.admitted')).toBe(1n);
  });
});
