/**
 * Offers and answers signed over their DTLS fingerprints: the rules on their own, then two
 * transports whose signalling passes through someone who tampers with it (a signalling
 * server or a member of the room in the middle), over node-datachannel on loopback.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { Identity } from '../src/identity/index.js';
import { SignalClient } from '../src/signal/index.js';
import { SignalServer } from '../src/signal/node.js';
import { Emitter, TransportError, WebRtcTransport, dtlsFingerprints, type SignalChannel } from '../src/transport/index.js';
import { sdpRefusal, signSdp } from '../src/transport/sdp-signature.js';
import { WS } from './signal-support.js';

const SDP = [
  'v=0', 'o=- 1 2 IN IP4 127.0.0.1', 's=-', 't=0 0',
  'a=fingerprint:SHA-256 ab:cd:EF:01',
  'm=application 9 UDP/DTLS/SCTP webrtc-datachannel',
  'a=fingerprint:sha-256 AB:CD:EF:01',
  'a=fingerprint:sha-384 00:11',
  '',
].join('\r\n');
const NONCE = new Uint8Array(16).fill(7);

describe('SDP signatures', () => {
  it('reads the DTLS fingerprints of an SDP, normalised, once each, sorted', () => {
    expect(dtlsFingerprints(SDP)).toEqual(['sha-256 AB:CD:EF:01', 'sha-384 00:11']);
    expect(dtlsFingerprints('v=0\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\n')).toEqual([]);
  });

  it('verifies for the sender, receiver and nonce it was made for, and for nothing else', async () => {
    const alice = await Identity.generate();
    const bob = await Identity.generate();
    const sig = await signSdp(alice, 'offer', SDP, bob.peerId, NONCE);
    expect(await sdpRefusal('offer', SDP, alice.peerId, bob.peerId, NONCE, sig)).toBeNull();
    // case and line order of the fingerprints do not matter; their values do
    expect(await sdpRefusal('offer', SDP.replace('ab:cd:EF:01', 'AB:CD:ef:01'), alice.peerId, bob.peerId, NONCE, sig)).toBeNull();
    const refusals = await Promise.all([
      sdpRefusal('offer', SDP.replace('AB:CD:EF:01', 'AB:CD:EF:02'), alice.peerId, bob.peerId, NONCE, sig), // a fingerprint altered
      sdpRefusal('offer', SDP.replace('a=fingerprint:sha-384 00:11', 'a=fingerprint:sha-384 00:11\r\na=fingerprint:sha-1 99'), alice.peerId, bob.peerId, NONCE, sig), // one added
      sdpRefusal('answer', SDP, alice.peerId, bob.peerId, NONCE, sig), // an offer passed off as an answer
      sdpRefusal('offer', SDP, bob.peerId, alice.peerId, NONCE, sig), // turned around
      sdpRefusal('offer', SDP, alice.peerId, (await Identity.generate()).peerId, NONCE, sig), // to someone else
      sdpRefusal('offer', SDP, alice.peerId, bob.peerId, new Uint8Array(16), sig), // another offer's nonce
      sdpRefusal('offer', SDP, alice.peerId, bob.peerId, NONCE, 'not base64!'),
      sdpRefusal('offer', SDP.replace(/a=fingerprint:[^\r]*\r\n/g, ''), alice.peerId, bob.peerId, NONCE, sig),
      sdpRefusal('offer', SDP, 'QmNotAKeyBoundId', bob.peerId, NONCE, sig),
    ]);
    for (const refusal of refusals) expect(refusal).toEqual(expect.any(String));
  });
});

/** What the man in the middle does with a payload for `victim`: changes it, or drops it (null). */
type Tamper = (data: Record<string, unknown>, victim: string) => Promise<unknown>;

/**
 * A SignalClient seen through a man in the middle: whatever arrives for the victim passes
 * through `tamper` first, which may change it or drop it (null).
 */
function intercepted(inner: SignalClient, tamper: Tamper): SignalChannel {
  const events = new Emitter<{ join: [string]; leave: [string]; signal: [string, unknown]; error: [never]; close: [number, string] }>();
  inner.events.on('join', (peer) => events.emit('join', peer));
  inner.events.on('leave', (peer) => events.emit('leave', peer));
  inner.events.on('close', (code, reason) => events.emit('close', code, reason));
  inner.events.on('signal', (from, data) => {
    void tamper(data as Record<string, unknown>, inner.self).then((changed) => changed !== null && events.emit('signal', from, changed));
  });
  return {
    self: inner.self, room: inner.room, identity: inner.identity, events: events as unknown as SignalClient['events'],
    get closed() { return inner.closed; },
    peers: () => inner.peers(),
    iceServers: () => inner.iceServers(),
    send: (to, data) => inner.send(to, data),
    close: () => inner.close(),
  };
}

describe('a man in the middle of signalling', () => {
  let server: SignalServer;
  let url: string;
  const transports: WebRtcTransport[] = [];
  const rtcConfig = { iceServers: [], bindAddress: '127.0.0.1' };

  beforeEach(async () => {
    server = await SignalServer.listen({ port: 0, host: '127.0.0.1' });
    url = `ws://127.0.0.1:${server.address.port}`;
  });
  afterEach(async () => {
    for (const t of transports.splice(0)) t.close();
    await server.close();
  });

  /** Two identities, the offerer (smaller peer id) first. */
  async function pair(): Promise<[Identity, Identity]> {
    const [x, y] = [await Identity.generate(), await Identity.generate()];
    return x.peerId < y.peerId ? [x, y] : [y, x];
  }

  async function transport(signal: SignalChannel): Promise<WebRtcTransport> {
    const t = await WebRtcTransport.create({ signal, rtcConfig, connectTimeoutMs: 3000 });
    transports.push(t);
    return t;
  }

  /** Runs the pair with the answerer's signalling tampered; returns the answerer's errors after a while, and whether it ever opened. */
  async function attack(tamper: Tamper): Promise<{ errors: TransportError[]; opened: boolean }> {
    const [offerer, answerer] = await pair();
    const a = await transport(await SignalClient.connect({ url, room: 'r', identity: offerer, WebSocket: WS }));
    const victim = await SignalClient.connect({ url, room: 'r', identity: answerer, WebSocket: WS });
    const b = await transport(intercepted(victim, tamper));
    const errors: TransportError[] = [];
    let opened = false;
    b.events.on('error', (error) => errors.push(error));
    b.events.on('state', (_, state) => (opened ||= state === 'open'));
    a.events.on('state', (_, state) => (opened ||= state === 'open'));
    for (let i = 0; i < 200 && !a.peers().includes(b.self); i++) await new Promise((r) => setTimeout(r, 10));
    a.connect(b.self);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    return { errors, opened };
  }

  it('the untampered pair connects (the control)', async () => {
    const { errors, opened } = await attack(async (data) => data);
    expect(errors).toEqual([]);
    expect(opened).toBe(true);
  });

  it('an offer whose fingerprint was altered is refused and never applied', async () => {
    const { errors, opened } = await attack(async (data) => {
      if (data.kind !== 'offer') return data;
      return { ...data, sdp: String(data.sdp).replace(/(a=fingerprint:\S+ )([0-9A-F])/i, (_m, head: string, digit: string) => head + (digit === '0' ? '1' : '0')) };
    });
    expect(opened).toBe(false);
    expect(errors.some((e) => e.code === 'bad-signature' && /DTLS fingerprints/.test(e.message))).toBe(true);
  });

  it('a relay that answers with an offer of its own (its own certificate) is refused', async () => {
    const { RTCPeerConnection } = await import('node-datachannel/polyfill');
    const mallory = new RTCPeerConnection(rtcConfig);
    mallory.createDataChannel('bb');
    const own = await mallory.createOffer();
    const { errors, opened } = await attack(async (data) => (data.kind === 'offer' ? { ...data, sdp: own.sdp } : data));
    mallory.close();
    expect(opened).toBe(false);
    expect(errors.some((e) => e.code === 'bad-signature')).toBe(true);
  });

  it('a relay that signs its own offer with its own key, in the sender\'s name, is refused', async () => {
    const { RTCPeerConnection } = await import('node-datachannel/polyfill');
    const mallory = await Identity.generate();
    const pc = new RTCPeerConnection(rtcConfig);
    pc.createDataChannel('bb');
    const own = await pc.createOffer();
    const { errors, opened } = await attack(async (data, victim) => {
      if (data.kind !== 'offer') return data;
      const nonce = Buffer.from(String(data.nonce), 'base64');
      // mallory signs for the victim, but the offer still comes from the offerer's id
      return { ...data, sdp: own.sdp, sig: await signSdp(mallory, 'offer', own.sdp ?? '', victim, nonce) };
    });
    pc.close();
    expect(opened).toBe(false);
    expect(errors.some((e) => e.code === 'bad-signature')).toBe(true);
  });
});
