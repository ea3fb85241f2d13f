/**
 * connectPeer when signalling closes under it: the peer's signalling socket is cut (a
 * network blip; a server kick is the same to the client) while it has an open link. The
 * link must carry on, on both sides, and the peer must join again by itself and make new
 * links over the new connection; a peer whose id joined elsewhere must not fight back.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';

import { BbNode, Compiler, connectPeer, loadBb, type Bb, type RunningPeer, type SignallingEvent } from '../src/index.js';
import { Identity } from '../src/identity/index.js';
import { SignalClient, type WebSocketConstructor } from '../src/signal/index.js';
import { SignalServer } from '../src/signal/node.js';
import type { WebRtcTransport } from '../src/transport/index.js';
import { wasmBytes } from './support.js';

let bb: Bb;
let artifact: Uint8Array;
const cleanup: Array<() => unknown> = [];

beforeAll(async () => {
  bb = await loadBb(await WebAssembly.compile(wasmBytes()));
  const compiler = Compiler.forExample(bb, 'quickstart');
  artifact = compiler.compile(Compiler.recordExample(bb, 'quickstart'));
  compiler.free();
});

afterEach(async () => {
  for (const undo of cleanup.splice(0).reverse()) await undo();
});

async function until(what: string, done: () => boolean): Promise<void> {
  for (let i = 0; i < 1500 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 20));
  expect(done(), what).toBe(true);
}

/** A peer running the quickstart node; its signalling sockets are kept so the test can cut them. */
async function peer(url: string, identity: Identity): Promise<{ running: RunningPeer; transport: WebRtcTransport; sockets: WebSocket[]; events: SignallingEvent[] }> {
  const sockets: WebSocket[] = [];
  const Recording = class extends WebSocket {
    constructor(address: string) {
      super(address);
      sockets.push(this);
    }
  };
  const node = BbNode.install(bb, { artifact, self: identity.peerId, targets: ['Quickstart'] });
  const events: SignallingEvent[] = [];
  const running = await connectPeer(node, {
    url, room: 'room', identity, WebSocket: Recording as unknown as WebSocketConstructor,
    transport: { rtcConfig: { iceServers: [], bindAddress: '127.0.0.1' } },
    onSignalling: (event) => events.push(event),
  });
  cleanup.push(() => node.free(), () => running.transport.close(), () => running.stop());
  return { running, transport: running.transport as WebRtcTransport, sockets, events };
}

describe('connectPeer when signalling closes under it', () => {
  it('keeps its open link, joins again by itself, and links anew over the new connection', async () => {
    const server = await SignalServer.listen({ port: 0, host: '127.0.0.1', presenceIntervalMs: 20 });
    cleanup.push(() => server.close());
    const url = `ws://127.0.0.1:${server.address.port}`;
    const [a, b] = [await peer(url, await Identity.generate()), await peer(url, await Identity.generate())];
    await until('a sees b', () => a.transport.peers().includes(b.transport.self));
    a.transport.connect(b.transport.self);
    await until('a–b open', () => a.transport.state(b.transport.self) === 'open' && b.transport.state(a.transport.self) === 'open');
    const states: string[] = [];
    a.transport.events.on('state', (peer, state) => states.push(`${peer}:${state}`));
    b.transport.events.on('state', (peer, state) => states.push(`${peer}:${state}`));

    a.sockets.at(-1)!.terminate();
    await until('a joins again', () => a.events.some((e) => e.state === 'rejoined'));
    expect(a.events[0]).toMatchObject({ state: 'closed', code: 1006 });
    expect(a.sockets.length).toBe(2);
    await until('b sees a back', () => b.transport.peers().includes(a.transport.self));
    expect(states).toEqual([]); // the link never blinked
    const got = new Promise<number>((resolve) => b.transport.onEnvelope((_, bytes) => resolve(bytes.byteLength)));
    a.transport.send(b.transport.self, new Uint8Array(4321));
    expect(await got).toBe(4321);

    // a newcomer after the rejoin: a links to it over the new connection
    const c = await peer(url, await Identity.generate());
    await until('a sees c', () => a.transport.peers().includes(c.transport.self));
    a.transport.connect(c.transport.self);
    await until('a–c open', () => a.transport.state(c.transport.self) === 'open');
  });

  it('does not fight back when its id joins again elsewhere (4001)', async () => {
    const server = await SignalServer.listen({ port: 0, host: '127.0.0.1', presenceIntervalMs: 20 });
    cleanup.push(() => server.close());
    const url = `ws://127.0.0.1:${server.address.port}`;
    const identity = await Identity.generate();
    const a = await peer(url, identity);
    const elsewhere = await SignalClient.connect({ url, room: 'room', identity, WebSocket: WebSocket as unknown as WebSocketConstructor });
    cleanup.push(() => elsewhere.close());
    await until('a is replaced', () => a.events.length > 0);
    await new Promise((resolve) => setTimeout(resolve, 600)); // longer than the first rejoin delay
    expect(a.events).toEqual([{ state: 'closed', code: 4001, reason: expect.any(String) }]);
    expect(a.sockets.length).toBe(1);
    expect(elsewhere.closed).toBe(false);
  });
});
