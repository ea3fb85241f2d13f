/**
 * A man in the middle on the signalling path, as a relaying signalling server would be:
 * two unmodified transports join through a WebSocket relay in front of the real server,
 * and the relay terminates DTLS on both sides with node-datachannel connections of its own
 * (Mallory), rewriting every offer, answer and candidate so that each peer links to
 * Mallory while the signatures it checks still hold. The link must be refused, and
 * Mallory must read nothing.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';

import { Identity } from '../src/identity/index.js';
import { SignalClient } from '../src/signal/index.js';
import { SignalServer } from '../src/signal/node.js';
import { TransportError, WebRtcTransport } from '../src/transport/index.js';
import { WS } from './signal-support.js';

type Json = Record<string, unknown>;
const rtcConfig = { iceServers: [], bindAddress: '127.0.0.1' };

/**
 * A signalling "server" that relays every frame to the real one and back, except that the
 * server's `signal` frames pass through `rewrite` first, which returns what to deliver
 * instead (null: nothing). `inject` sends a signal to a client as if from `from`.
 */
class Relay {
  readonly #wss: WebSocketServer;
  readonly #clients = new Map<string, WebSocket>();
  rewrite: (to: string, from: string, data: Json) => Promise<Json | null> = async (_to, _from, data) => data;

  private constructor(wss: WebSocketServer, upstream: string) {
    this.#wss = wss;
    wss.on('connection', (client) => {
      const server = new WebSocket(upstream);
      const early: string[] = [];
      let self = '';
      client.on('message', (data) => (server.readyState === WebSocket.OPEN ? server.send(String(data)) : early.push(String(data))));
      server.on('open', () => early.splice(0).forEach((frame) => server.send(frame)));
      server.on('message', (raw) => {
        const message = JSON.parse(String(raw)) as Json;
        if (message.type === 'joined') {
          self = String(message.peer);
          this.#clients.set(self, client);
        }
        if (message.type !== 'signal') return client.send(String(raw));
        // frames of one sender stay in order through the (asynchronous) rewrite
        void this.rewrite(self, String(message.from), message.data as Json).then((data) => {
          if (data !== null) client.send(JSON.stringify({ type: 'signal', from: message.from, data }));
        });
      });
      client.on('close', () => server.close());
      server.on('close', () => client.close());
    });
  }

  static async listen(upstream: string): Promise<Relay> {
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    await new Promise((resolve) => wss.once('listening', resolve));
    return new Relay(wss, upstream);
  }

  get url(): string {
    return `ws://127.0.0.1:${(this.#wss.address() as { port: number }).port}`;
  }

  inject(to: string, from: string, data: Json): void {
    this.#clients.get(to)?.send(JSON.stringify({ type: 'signal', from, data }));
  }

  close(): Promise<void> {
    for (const client of this.#wss.clients) client.terminate();
    return new Promise((resolve) => this.#wss.close(() => resolve()));
  }
}

/** The SDP's canonical fingerprint line's value ("sha-256 AB:…"). */
function fingerprintOf(sdp: string): string {
  const found = /a=fingerprint:(sha-256 [0-9A-F:]+)\r\n/.exec(sdp);
  if (found === null) throw new Error(`no fingerprint in ${sdp}`);
  return found[1]!;
}

/**
 * Mallory's SDP (her own certificate) dressed up with `shown`, the fingerprint the
 * signature was made over: hers with a form feed at the end of its line, which a DTLS
 * stack that trims whitespace takes; the shown one with a tab between hash and value,
 * which a stack that splits on spaces skips.
 */
function disguise(mallorys: string, shown: string): string {
  const own = fingerprintOf(mallorys);
  const [hash, value] = shown.split(' ');
  return mallorys.replace(`a=fingerprint:${own}\r\n`, `a=fingerprint:${own}\f\r\na=fingerprint:${hash}\t${value}\r\n`);
}

/**
 * Mallory on the relay: for the offer from `offerer` to `answerer` she answers the offerer
 * with one connection and offers the answerer with another, then copies the data channel
 * across, recording every message.
 */
async function mallory(relay: Relay): Promise<{ read: Uint8Array[]; bridged: Promise<void> }> {
  const { RTCPeerConnection } = await import('node-datachannel/polyfill');
  const read: Uint8Array[] = [];
  const toOfferer = new RTCPeerConnection(rtcConfig);
  const toAnswerer = new RTCPeerConnection(rtcConfig);
  const channelB = toAnswerer.createDataChannel('bb', { ordered: true });
  let channelA: RTCDataChannel | null = null;
  let answerToOfferer = '';
  let bridgedResolve: () => void = () => {};
  const bridged = new Promise<void>((resolve) => (bridgedResolve = resolve));
  const pipe = (from: RTCDataChannel, to: () => RTCDataChannel | null): void => {
    from.binaryType = 'arraybuffer';
    const waiting: Array<Uint8Array<ArrayBuffer>> = [];
    from.onmessage = (event: MessageEvent) => {
      const bytes = new Uint8Array(event.data as ArrayBuffer);
      read.push(bytes);
      waiting.push(bytes);
      const out = to();
      if (out?.readyState === 'open') for (const message of waiting.splice(0)) out.send(message);
    };
  };
  toOfferer.ondatachannel = (event) => {
    channelA = event.channel;
    pipe(channelA, () => channelB);
    channelA.onopen = () => bridgedResolve();
  };
  pipe(channelB, () => channelA);
  let gen = 0;
  let offerer = '';
  let answerer = '';
  // her candidates reach each peer only after the description they belong to
  const held = new Map<string, Json[] | null>();
  const candidateTo = (peer: () => string, from: () => string) => (event: RTCPeerConnectionIceEvent) => {
    if (!event.candidate) return;
    const data = { kind: 'candidate', gen, candidate: event.candidate.candidate, mid: event.candidate.sdpMid };
    const queue = held.get(peer());
    if (queue === null) relay.inject(peer(), from(), data);
    else held.set(peer(), [...(queue ?? []), data]);
  };
  const deliver = (to: string, from: string, data: Json): null => {
    relay.inject(to, from, data);
    for (const candidate of held.get(to) ?? []) relay.inject(to, from, candidate);
    held.set(to, null);
    return null;
  };
  toOfferer.onicecandidate = candidateTo(() => offerer, () => answerer);
  toAnswerer.onicecandidate = candidateTo(() => answerer, () => offerer);
  relay.rewrite = async (to, from, data) => {
    if (data.kind === 'offer') {
      [offerer, answerer, gen] = [from, to, Number(data.gen)];
      await toOfferer.setRemoteDescription({ type: 'offer', sdp: String(data.sdp) });
      const answer = await toOfferer.createAnswer();
      await toOfferer.setLocalDescription(answer);
      answerToOfferer = answer.sdp ?? '';
      const offer = await toAnswerer.createOffer();
      await toAnswerer.setLocalDescription(offer);
      return deliver(to, from, { ...data, sdp: disguise(offer.sdp ?? '', fingerprintOf(String(data.sdp))) });
    }
    if (data.kind === 'answer') {
      await toAnswerer.setRemoteDescription({ type: 'answer', sdp: String(data.sdp) });
      return deliver(to, from, { ...data, sdp: disguise(answerToOfferer, fingerprintOf(String(data.sdp))) });
    }
    if (data.kind === 'candidate') {
      const candidate = { candidate: String(data.candidate), sdpMid: data.mid as string };
      await (to === answerer ? toOfferer : toAnswerer).addIceCandidate(candidate).catch(() => undefined);
      return null;
    }
    return data;
  };
  return { read, bridged };
}

describe('a relaying signalling server in the middle of a link', () => {
  let server: SignalServer;
  let relay: Relay;
  const closers: Array<() => unknown> = [];

  beforeEach(async () => {
    server = await SignalServer.listen({ port: 0, host: '127.0.0.1' });
    relay = await Relay.listen(`ws://127.0.0.1:${server.address.port}`);
  });
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    await relay.close();
    await server.close();
  });

  async function transport(identity: Identity): Promise<WebRtcTransport> {
    const signal = await SignalClient.connect({ url: relay.url, room: 'r', identity, WebSocket: WS });
    const t = await WebRtcTransport.create({ signal, rtcConfig, connectTimeoutMs: 5000 });
    closers.push(() => t.close());
    return t;
  }

  it('substituting its own certificate under a fingerprint the checker skips: the link is refused and nothing is read', async () => {
    const [x, y] = [await Identity.generate(), await Identity.generate()];
    const [offerer, answerer] = x.peerId < y.peerId ? [x, y] : [y, x];
    const { read, bridged } = await mallory(relay);
    const a = await transport(offerer);
    const b = await transport(answerer);
    const errors: TransportError[] = [];
    b.events.on('error', (error) => errors.push(error));
    a.events.on('error', (error) => errors.push(error));
    for (let i = 0; i < 300 && !a.peers().includes(b.self); i++) await new Promise((r) => setTimeout(r, 10));
    const secret = new TextEncoder().encode('the model update of a');
    const delivered = new Promise<string>((resolve) => b.onEnvelope((_from, bytes) => resolve(new TextDecoder().decode(bytes))));
    const refused = new Promise<string>((resolve) => b.events.on('error', (e) => e.code === 'bad-signature' && resolve(e.message)));
    a.send(b.self, secret);
    const outcome = await Promise.race([
      delivered.then((text) => `delivered: ${text}`),
      refused.then((why) => `refused: ${why}`),
      new Promise<string>((resolve) => setTimeout(() => resolve('neither'), 20_000)),
    ]);
    const bridgedNow = await Promise.race([bridged.then(() => true), Promise.resolve(false)]);
    expect(outcome).toMatch(/^refused: /);
    expect(outcome).toMatch(/SDP|signature/);
    expect(b.state(a.self)).not.toBe('open');
    expect(bridgedNow).toBe(false);
    expect(read).toEqual([]);
  });
});
