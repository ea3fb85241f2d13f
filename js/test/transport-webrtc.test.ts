import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { Identity } from '../src/identity/index.js';
import { SignalClient, type WebSocketConstructor } from '../src/signal/index.js';
import { SignalServer } from '../src/signal/node.js';
import { TransportError, WebRtcTransport, type PeerState, type WebRtcTransportOptions } from '../src/transport/index.js';

let server: SignalServer;
let url: string;
const transports: WebRtcTransport[] = [];

const connections = new Map<string, RTCPeerConnection[]>();
/** Each transport's signalling client, to watch what it sends. */
const transportsSignals = new Map<WebRtcTransport, SignalClient>();
/** Identities named a, b, c, … whose peer ids sort in that order (the smaller id offers). */
let named = new Map<string, Identity>();
const idOf = (name: string): string => named.get(name)!.peerId;

/** Each transport's signalling sockets, newest last, to cut them as a network blip would. */
const sockets = new Map<string, WebSocket[]>();

/** A signalling client for `id` whose socket the test can reach. */
function signalOf(id: string): Promise<SignalClient> {
  const made = sockets.get(id) ?? [];
  sockets.set(id, made);
  const Recording = class extends WebSocket {
    constructor(address: string) {
      super(address);
      made.push(this);
    }
  };
  return SignalClient.connect({ url, room: 'room', identity: named.get(id)!, WebSocket: Recording as unknown as WebSocketConstructor });
}

async function peer(id: string, options: Partial<WebRtcTransportOptions> & { hangFirstRemoteDescription?: boolean } = {}): Promise<WebRtcTransport> {
  const { RTCPeerConnection: Base } = await import('node-datachannel/polyfill');
  const made: RTCPeerConnection[] = [];
  connections.set(id, made);
  const { hangFirstRemoteDescription, ...rest } = options;
  const hangFirst = hangFirstRemoteDescription === true;
  const Recording = class extends Base {
    constructor(config?: RTCConfiguration) {
      super(config);
      made.push(this as unknown as RTCPeerConnection);
    }

    override setRemoteDescription(description: RTCSessionDescriptionInit): Promise<void> {
      // a lost offer: the first connection never gets its remote description
      if (hangFirst && made[0] === (this as unknown as RTCPeerConnection)) return new Promise(() => {});
      return super.setRemoteDescription(description);
    }
  } as unknown as WebRtcTransportOptions['RTCPeerConnection'] & object;
  const signal = await signalOf(id);
  const t = await WebRtcTransport.create({ signal, RTCPeerConnection: Recording, rtcConfig: { iceServers: [], bindAddress: '127.0.0.1' }, reconnectBaseMs: 50, ...rest });
  transports.push(t);
  transportsSignals.set(t, signal);
  return t;
}

function until(t: WebRtcTransport, other: string, state: PeerState, timeoutMs = 10_000): Promise<void> {
  if (t.state(other) === state) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${t.self}→${other} never reached ${state}`)), timeoutMs);
    const off = t.events.on('state', (p, s) => {
      if (p === other && s === state) {
        off();
        clearTimeout(timer);
        resolve();
      }
    });
  });
}

/** Resolves once `t` sees `other` in the room (presence arrives a moment after a join). */
async function present(t: WebRtcTransport, other: string): Promise<void> {
  for (let i = 0; i < 200 && !t.peers().includes(other); i++) await new Promise((r) => setTimeout(r, 10));
  expect(t.peers()).toContain(other);
}

/** Links `x` to `y` (x asks) and waits until both ends are open. */
async function link(x: WebRtcTransport, y: WebRtcTransport): Promise<void> {
  await present(x, y.self);
  x.connect(y.self);
  await until(x, y.self, 'open');
  await until(y, x.self, 'open');
}

function pattern(size: number, seed: number): Uint8Array {
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size; i++) bytes[i] = (i * 31 + seed) & 0xff;
  return bytes;
}

function same(a: Uint8Array, b: Uint8Array): boolean {
  return a.byteLength === b.byteLength && Buffer.compare(a, b) === 0;
}

beforeEach(async () => {
  server = await SignalServer.listen({ port: 0, host: '127.0.0.1' });
  url = `ws://127.0.0.1:${server.address.port}`;
  const made = await Promise.all(['a', 'b', 'c'].map(() => Identity.generate()));
  made.sort((x, y) => (x.peerId < y.peerId ? -1 : 1));
  named = new Map(made.map((identity, i) => [String.fromCharCode(97 + i), identity]));
});

afterEach(async () => {
  for (const t of transports.splice(0)) t.close();
  await server.close();
});

describe('WebRtcTransport between Node peers (node-datachannel)', () => {
  it('delivers envelopes of 0 B, 1 B, 64 KiB ± 1 and 5 MiB intact and in order', async () => {
    const a = await peer('a');
    const b = await peer('b');
    await link(a, b);
    const sizes = [0, 1, 65535, 65536, 65537, 5 * 1024 * 1024];
    const sent = sizes.map((size, i) => pattern(size, i));
    const got: Uint8Array[] = [];
    const done = new Promise<void>((resolve) => b.onEnvelope((from, bytes) => {
      expect(from).toBe(idOf('a'));
      got.push(bytes);
      if (got.length === sent.length) resolve();
    }));
    for (const bytes of sent) a.send(idOf('b'), bytes);
    await done;
    expect(got.map((g) => g.byteLength)).toEqual(sizes);
    got.forEach((g, i) => expect(same(g, sent[i]!)).toBe(true));
    expect(a.stats()).toMatchObject({ messagesOut: sizes.length, bytesOut: sizes.reduce((x, y) => x + y) });
    expect(b.stats()).toMatchObject({ messagesIn: sizes.length, bytesIn: sizes.reduce((x, y) => x + y) });
  });

  // On one machine both ends link host to host; an end whose connectivity check arrives
  // before the other's signalled candidate knows that candidate as peer-reflexive (the same
  // address, learnt from the check), so a remote end may be either. Never a relay.
  it('names the candidate pair a link runs over (host on one machine; none without a link)', async () => {
    const a = await peer('a');
    const b = await peer('b');
    expect(await a.selectedPair(idOf('b'))).toBeUndefined();
    await link(a, b);
    for (const pair of [await a.selectedPair(idOf('b')), await b.selectedPair(idOf('a'))]) {
      expect(pair?.local).toBe('host');
      expect(['host', 'prflx']).toContain(pair?.remote);
    }
  });

  it('queues under back-pressure and refuses beyond its bound with queue-full', async () => {
    const a = await peer('a', { maxQueuedBytes: 8 * 1024 * 1024, highWaterMark: 256 * 1024, lowWaterMark: 64 * 1024 });
    const b = await peer('b');
    await link(a, b);
    const envelope = pattern(3 * 1024 * 1024, 7);
    let received = 0;
    const done = new Promise<void>((resolve) => b.onEnvelope((_, bytes) => {
      expect(same(bytes, envelope)).toBe(true);
      if (++received === 2) resolve();
    }));
    a.send(idOf('b'), envelope);
    a.send(idOf('b'), envelope);
    // the channel took at most ~highWaterMark + one chunk; the rest waits in our queue
    expect(a.queuedBytes(idOf('b'))).toBeGreaterThan(4 * 1024 * 1024);
    let error: unknown;
    try {
      a.send(idOf('b'), envelope);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(TransportError);
    expect((error as TransportError).code).toBe('queue-full');
    await done;
    expect(a.queuedBytes(idOf('b'))).toBe(0);
  });

  it('refuses a peer not in the room, an envelope above the engine\'s cap, and links past its limits', async () => {
    const a = await peer('a', { maxLinks: 1, maxRequestedLinks: 0 });
    expect(() => a.send('nobody', new Uint8Array(1))).toThrow(expect.objectContaining({ code: 'unknown-peer' }));
    const [b, c] = [await peer('b'), await peer('c')];
    await present(a, b.self);
    await present(a, c.self);
    expect(() => a.send(b.self, new Uint8Array(16 * 1024 * 1024 + 1))).toThrow(expect.objectContaining({ code: 'message-too-large' }));
    expect(a.links()).toEqual([]); // refused before any link was made
    a.connect(b.self);
    expect(() => a.send(c.self, new Uint8Array(1))).toThrow(expect.objectContaining({ code: 'link-limit' }));
    // c asks for a link itself: a takes no links it did not address
    const refused = new Promise<TransportError>((resolve) => a.events.on('error', (e) => e.code === 'link-limit' && resolve(e)));
    c.connect(a.self);
    expect((await refused).peer).toBe(c.self);
    expect(a.links()).toEqual([b.self]);
  });

  it('takes links peers ask for up to maxRequestedLinks, counts them against maxLinks once it sends to them, and drops them when they fail', async () => {
    const a = await peer('a', { maxLinks: 1, maxRequestedLinks: 1 });
    const [b, c] = [await peer('b'), await peer('c', { connectTimeoutMs: 1000 })];
    await present(b, a.self);
    await present(c, a.self);
    await present(a, c.self);
    b.connect(a.self); // b's id sorts after a's: it asks a to offer
    await until(a, b.self, 'open');
    expect(a.requestedLinks()).toEqual([b.self]);
    const refused = new Promise<TransportError>((resolve) => a.events.on('error', (e) => e.code === 'link-limit' && resolve(e)));
    c.connect(a.self);
    expect((await refused).peer).toBe(c.self);
    // a's engine sends to b: the link is now one a addressed, and the requested slot is free
    const got = new Promise<number>((resolve) => b.onEnvelope((_, bytes) => resolve(bytes.byteLength)));
    a.send(b.self, new Uint8Array(3));
    expect(await got).toBe(3);
    expect(a.requestedLinks()).toEqual([]);
    expect(() => a.connect(c.self)).toThrow(expect.objectContaining({ code: 'link-limit' })); // maxLinks is 1
    await until(c, a.self, 'open', 20_000); // c asks again after its timeout, and gets the free slot
    expect(a.requestedLinks()).toEqual([c.self]);
    // the link c asked for breaks: a drops it rather than reconnecting to c
    const closed = until(a, c.self, 'closed');
    connections.get('c')!.at(-1)!.close();
    await closed;
    expect(a.links()).toEqual([b.self]);
  });

  it('gives the requested slot of a link idle for requestedIdleMs to the next peer that asks', async () => {
    const a = await peer('a', { maxRequestedLinks: 1, requestedIdleMs: 300 });
    const [b, c] = [await peer('b'), await peer('c')];
    await present(b, a.self);
    await present(c, a.self);
    const got = new Promise<number>((resolve) => a.onEnvelope((_, bytes) => resolve(bytes.byteLength)));
    b.send(a.self, new Uint8Array(10));
    expect(await got).toBe(10);
    const idle = new Promise<TransportError>((resolve) => a.events.on('error', (e) => e.code === 'link-idle' && resolve(e)));
    await new Promise((resolve) => setTimeout(resolve, 400));
    c.connect(a.self);
    expect((await idle).peer).toBe(b.self);
    await until(a, c.self, 'open');
    expect(a.requestedLinks()).toEqual([c.self]);
  });

  it('sends candidates only once both ends hold both descriptions', async () => {
    const a = await peer('a');
    const b = await peer('b');
    await present(a, b.self);
    const sent: string[] = [];
    for (const t of [a, b]) {
      const signal = transportsSignals.get(t)!;
      const send = signal.send.bind(signal);
      signal.send = (to: string, data: unknown) => {
        sent.push(`${t === a ? 'a' : 'b'}:${(data as { kind: string }).kind}`);
        send(to, data);
      };
    }
    a.connect(b.self);
    await until(a, b.self, 'open');
    // a candidate sent before its offer finds no link; checks that run before the offerer
    // has the answer start a DTLS handshake it cannot take part in yet
    expect(sent.filter((k) => k.startsWith('a:'))[0]).toBe('a:offer');
    expect(sent.filter((k) => k.startsWith('b:'))[0]).toBe('b:answer');
    expect(sent.indexOf('a:candidate')).toBeGreaterThan(sent.indexOf('b:answer'));
  });

  it('links only to the peers it addresses, never to the whole room', async () => {
    const [a, b, c] = [await peer('a'), await peer('b'), await peer('c')];
    await present(a, c.self);
    await present(b, c.self);
    const got = new Promise<string[]>((resolve) => {
      const seen: string[] = [];
      c.onEnvelope((from, bytes) => {
        seen.push(`${from === idOf('a') ? 'a' : 'b'}:${bytes.byteLength}`);
        if (seen.length === 2) resolve(seen.sort());
      });
    });
    a.send(idOf('c'), pattern(100_000, 1)); // a offers (its id is smaller)
    b.send(idOf('c'), pattern(10, 2));
    expect(await got).toEqual(['a:100000', 'b:10']);
    expect(a.links()).toEqual([c.self]);
    expect(b.links()).toEqual([c.self]);
    expect(c.links().sort()).toEqual([a.self, b.self].sort());
    expect(connections.get('a')!.length + connections.get('b')!.length).toBe(2); // no a–b connection
    // the larger id's first envelope makes the link too: it asks the smaller to offer
    const back = new Promise<number>((resolve) => a.onEnvelope((_, bytes) => resolve(bytes.byteLength)));
    c.send(idOf('a'), pattern(5, 3));
    expect(await back).toBe(5);
    expect(c.stats()).toMatchObject({ links: 2, partialBytes: 0, partialsEvicted: 0 });
  });

  it('the answering side asks the offerer to start over when only it saw the link fail', async () => {
    const a = await peer('a');
    const b = await peer('b', { hangFirstRemoteDescription: true, connectTimeoutMs: 1000 });
    await present(b, a.self);
    b.connect(a.self); // b addresses a, so it keeps the link and asks again
    await until(b, idOf('a'), 'failed');
    await until(a, idOf('b'), 'open', 15_000);
    await until(b, idOf('a'), 'open', 15_000);
    expect(connections.get('a')!.length).toBeGreaterThanOrEqual(2); // more under load: each slow attempt times out too
    const got = new Promise<number>((resolve) => b.onEnvelope((_, bytes) => resolve(bytes.byteLength)));
    a.send(idOf('b'), pattern(1, 0));
    expect(await got).toBe(1);
  });

  it('reports closed when a peer leaves, and reconnects after a failed link', async () => {
    const a = await peer('a');
    const b = await peer('b');
    await link(a, b);
    // close b's connection under it, as a network failure would: a (the offerer) reconnects
    const states: string[] = [];
    a.events.on('state', (p, s) => states.push(`${p}:${s}`));
    const failed = until(a, idOf('b'), 'failed');
    connections.get('b')!.at(-1)!.close();
    await failed;
    await until(a, idOf('b'), 'open', 15_000);
    await until(b, idOf('a'), 'open', 15_000);
    expect(states).toContain(`${idOf('b')}:failed`);
    expect(states).toContain(`${idOf('b')}:connecting`);
    const got = new Promise<number>((resolve) => b.onEnvelope((_, bytes) => resolve(bytes.byteLength)));
    a.send(idOf('b'), pattern(70_000, 3));
    expect(await got).toBe(70_000);
    const closed = until(a, idOf('b'), 'closed');
    b.close();
    await closed;
    expect(a.peers()).toEqual([]);
    expect(() => a.send(idOf('b'), new Uint8Array(1))).toThrow(expect.objectContaining({ code: 'unknown-peer' }));
  });

  it('keeps its open links when signalling closes, and makes new ones over the next signalling client', async () => {
    const [a, b, c] = [await peer('a'), await peer('b'), await peer('c')];
    await link(a, b);
    const lost = new Promise<TransportError>((resolve) => b.events.on('error', (e) => e.code === 'signal-closed' && resolve(e)));
    const states: string[] = [];
    for (const t of [a, b]) t.events.on('state', (p, state) => states.push(`${p}:${state}`));
    // b's signalling socket dies (a network blip; a server kick is the same to b): the
    // server tells a that b left
    sockets.get('b')!.at(-1)!.terminate();
    for (let i = 0; i < 300 && a.peers().includes(b.self); i++) await new Promise((r) => setTimeout(r, 10));
    expect(a.peers()).not.toContain(b.self);
    expect([a.state(b.self), b.state(a.self)]).toEqual(['open', 'open']);
    expect((await lost).message).toMatch(/open links carry on/);
    const echo = async (from: WebRtcTransport, to: WebRtcTransport, size: number): Promise<number> => {
      const got = new Promise<number>((resolve) => {
        const off = to.onEnvelope((sender, bytes) => {
          if (sender !== from.self) return;
          off();
          resolve(bytes.byteLength);
        });
      });
      from.send(to.self, pattern(size, 9));
      return got;
    };
    expect(await echo(a, b, 200_000)).toBe(200_000);
    expect(await echo(b, a, 70_000)).toBe(70_000);
    // without signalling b cannot make a new link: the envelope waits
    b.send(c.self, pattern(5, 1));
    expect(b.state(c.self)).toBe('failed');
    // b joins again and hands the transport the new client: the old link never blinked,
    // the waiting one is made
    b.attachSignal(await signalOf('b'));
    const toC = new Promise<number>((resolve) => c.onEnvelope((from, bytes) => from === b.self && resolve(bytes.byteLength)));
    expect(await toC).toBe(5);
    expect(await echo(a, b, 1)).toBe(1);
    expect(states.filter((change) => !change.startsWith(c.self))).toEqual([]); // the a–b link never changed state
  });
});

