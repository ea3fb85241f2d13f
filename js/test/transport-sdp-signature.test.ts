/**
 * The strict SDP reading and the signatures over whole SDPs: the rules on their own, then two
 * transports whose signalling passes through someone who tampers with it (a signalling
 * server or a member of the room in the middle), over node-datachannel on loopback.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { Identity } from '../src/identity/index.js';
import { SignalClient } from '../src/signal/index.js';
import { SignalServer } from '../src/signal/node.js';
import { Emitter, MAX_SDP_LENGTH, SdpError, TransportError, WebRtcTransport, readSdp, sdpSignedBytes, type SignalChannel } from '../src/transport/index.js';
import { sdpRefusal, signSdp } from '../src/transport/sdp-signature.js';
import { WS } from './signal-support.js';

/** A data-channel offer as Chromium writes one. */
const SDP = [
  'v=0', 'o=- 7734610327228690642 2 IN IP4 127.0.0.1', 's=-', 't=0 0', 'a=group:BUNDLE 0', 'a=extmap-allow-mixed', 'a=msid-semantic: WMS',
  'm=application 9 UDP/DTLS/SCTP webrtc-datachannel', 'c=IN IP4 0.0.0.0', 'a=ice-ufrag:JRDP', 'a=ice-pwd:KxfZvFfNFIcMzVetN5mDiK4d', 'a=ice-options:trickle',
  'a=fingerprint:sha-256 B9:09:6B:0A:C0:3E:2E:24:CD:8F:8E:49:92:31:96:AE:A0:2B:96:CC:73:33:B3:58:49:A4:C8:7F:61:C6:FC:8C',
  'a=setup:actpass', 'a=mid:0', 'a=sctp-port:5000', 'a=max-message-size:262144', '',
].join('\r\n');
const FINGERPRINT = 'sha-256 B9:09:6B:0A:C0:3E:2E:24:CD:8F:8E:49:92:31:96:AE:A0:2B:96:CC:73:33:B3:58:49:A4:C8:7F:61:C6:FC:8C';
/** An answer as Firefox 115 writes one (its fingerprint at session level). */
const FIREFOX_ANSWER = [
  'v=0', 'o=mozilla...THIS_IS_SDPARTA-99.0 2019161669409786848 0 IN IP4 0.0.0.0', 's=-', 't=0 0',
  'a=fingerprint:sha-256 3B:7A:71:2A:98:2F:85:05:19:43:CE:B0:89:50:F9:7B:7D:61:66:5E:EA:86:C7:85:A5:7A:25:8A:9C:4F:81:E7',
  'a=group:BUNDLE 0', 'a=ice-options:trickle', 'a=msid-semantic:WMS *', 'm=application 9 UDP/DTLS/SCTP webrtc-datachannel', 'c=IN IP4 0.0.0.0',
  'a=sendrecv', 'a=ice-pwd:f586b57922030117b29b64bcec755ecc', 'a=ice-ufrag:19aede37', 'a=mid:0', 'a=setup:active', 'a=sctp-port:5000',
  'a=max-message-size:1073741823', '',
].join('\r\n');
const NONCE = new Uint8Array(16).fill(7);
const FP_LINE = `a=fingerprint:${FINGERPRINT}`;
const OTHER = 'a=fingerprint:sha-256 00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF';

describe('the strict SDP reading', () => {
  it('reads the one fingerprint of the offers and answers browsers and libdatachannel write', async () => {
    expect(readSdp(SDP)).toEqual({ sdp: SDP, fingerprint: FINGERPRINT });
    expect(readSdp(FIREFOX_ANSWER).fingerprint).toMatch(/^sha-256 3B:7A:/);
    const { RTCPeerConnection } = await import('node-datachannel/polyfill');
    const rtcConfig = { iceServers: [], bindAddress: '127.0.0.1' };
    const pc = new RTCPeerConnection(rtcConfig);
    pc.createDataChannel('bb');
    const offer = (await pc.createOffer()).sdp!;
    pc.close();
    expect(readSdp(offer).fingerprint).toBe(/a=fingerprint:(.*)\r\n/.exec(offer)![1]);
  });

  it('refuses anything a DTLS stack could read another way, saying which line broke which rule', () => {
    const refused: Array<[string, string, RegExp]> = [
      ['a second fingerprint, media level', SDP.replace(FP_LINE, `${FP_LINE}\r\n${OTHER}`), /line 14 declares a second fingerprint/],
      ['a second fingerprint, session level', SDP.replace('t=0 0', `t=0 0\r\n${OTHER}`), /line 14 declares a second fingerprint/],
      ['the same line twice', SDP.replace(FP_LINE, `${FP_LINE}\r\n${FP_LINE}`), /second fingerprint/],
      ['a form feed after it', SDP.replace(FP_LINE, `${FP_LINE}\f`), /line 13 holds character U\+000C at column 118/],
      ['a vertical tab after it', SDP.replace(FP_LINE, `${FP_LINE}\v`), /U\+000B/],
      ['a tab after it', SDP.replace(FP_LINE, `${FP_LINE}\t`), /U\+0009/],
      ['a space after it', SDP.replace(FP_LINE, `${FP_LINE} `), /line 13 is not a=fingerprint/],
      ['a NUL inside', SDP.replace('a=mid:0', 'a=mid:0\0'), /U\+0000/],
      ['a bare CR between lines', SDP.replace('a=mid:0\r\n', 'a=mid:0\r'), /U\+000D/],
      ['a bare LF between lines', SDP.replace('a=mid:0\r\n', 'a=mid:0\n'), /U\+000A/],
      ['LF line ends', SDP.replace(/\r\n/g, '\n'), /does not end with CR LF/],
      ['a tab between hash and value', SDP.replace('sha-256 B9', 'sha-256\tB9'), /U\+0009/],
      ['lower-case hex', SDP.replace('B9:09:6B', 'b9:09:6b'), /not a=fingerprint/],
      ['an upper-case hash name', SDP.replace('sha-256 B9', 'SHA-256 B9'), /not a=fingerprint/],
      ['another spelling of the attribute', SDP.replace(FP_LINE, `${FP_LINE}\r\na=Fingerprint:sha-256 00:11`), /second fingerprint/],
      ['an unknown hash', SDP.replace('sha-256 B9', 'sha-1 B9'), /not a=fingerprint/],
      ['a digest of the wrong size', SDP.replace(':FC:8C', ':FC'), /not a=fingerprint/],
      ['a line with a leading space', SDP.replace(FP_LINE, ` ${FP_LINE}`), /line 13 is not <lower-case letter>=<value>/],
      ['non-ASCII', SDP.replace('s=-', 's=é'), /U\+00E9/],
      ['a second media section', `${SDP}m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\n`, /second media section/],
      ['an audio section', SDP.replace('m=application 9 UDP/DTLS/SCTP webrtc-datachannel', 'm=audio 9 UDP/TLS/RTP/SAVPF 111'), /not a data channel section/],
      ['no fingerprint', SDP.replace(`${FP_LINE}\r\n`, ''), /declares no DTLS fingerprint/],
      ['no media section', SDP.replace('m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\n', ''), /no data channel section/],
      ['an empty line', SDP.replace('a=mid:0\r\n', 'a=mid:0\r\n\r\n'), /line 16 is not/],
      ['too long', SDP + `a=x:${'y'.repeat(MAX_SDP_LENGTH)}\r\n`, /characters long/],
    ];
    for (const [what, sdp, why] of refused) {
      expect(() => readSdp(sdp), what).toThrow(SdpError);
      expect(() => readSdp(sdp), what).toThrow(why);
    }
    expect(() => readSdp(undefined)).toThrow(/not a string/);
  });
});

describe('SDP signatures', () => {
  it('verify for the SDP, sender, receiver and nonce they were made for, and for nothing else', async () => {
    const alice = await Identity.generate();
    const bob = await Identity.generate();
    const sig = await signSdp(alice, 'offer', SDP, bob.peerId, NONCE);
    expect(await sdpRefusal('offer', SDP, alice.peerId, bob.peerId, NONCE, sig)).toBeNull();
    const refusals = await Promise.all([
      sdpRefusal('offer', SDP.replace('B9:09', 'B9:0A'), alice.peerId, bob.peerId, NONCE, sig), // the fingerprint altered
      sdpRefusal('offer', SDP.replace('a=ice-ufrag:JRDP', 'a=ice-ufrag:JRDQ'), alice.peerId, bob.peerId, NONCE, sig), // any other byte
      sdpRefusal('offer', SDP.replace(FP_LINE, `${FP_LINE}\f`), alice.peerId, bob.peerId, NONCE, sig),
      sdpRefusal('answer', SDP, alice.peerId, bob.peerId, NONCE, sig), // an offer passed off as an answer
      sdpRefusal('offer', SDP, bob.peerId, alice.peerId, NONCE, sig), // turned around
      sdpRefusal('offer', SDP, alice.peerId, (await Identity.generate()).peerId, NONCE, sig), // to someone else
      sdpRefusal('offer', SDP, alice.peerId, bob.peerId, new Uint8Array(16), sig), // another offer's nonce
      sdpRefusal('offer', SDP, alice.peerId, bob.peerId, NONCE, 'not base64!'),
      sdpRefusal('offer', SDP, 'QmNotAKeyBoundId', bob.peerId, NONCE, sig),
    ]);
    for (const refusal of refusals) expect(refusal).toEqual(expect.any(String));
    expect(refusals[2]).toMatch(/SDP is refused: line 13 holds character U\+000C/);
    // nobody signs an SDP the strict reading refuses, not even their own
    await expect(signSdp(alice, 'offer', SDP.replace(FP_LINE, `${FP_LINE}\r\n${OTHER}`), bob.peerId, NONCE)).rejects.toThrow(/cannot be signed: line 14 declares a second fingerprint/);
  });

  it('sign the domain, kind, both ids, the nonce and the whole SDP, each length-prefixed', () => {
    const bytes = sdpSignedBytes('answer', SDP, 'from-id', 'to-id', NONCE);
    const lp = (text: string | Uint8Array): number[] => {
      const raw = typeof text === 'string' ? [...Buffer.from(text)] : [...text];
      return [raw.length & 0xff, raw.length >> 8, ...raw];
    };
    expect([...bytes]).toEqual([...Buffer.from('bytesandbrains sdp v2'), 0, ...lp('answer'), ...lp('from-id'), ...lp('to-id'), ...lp(NONCE), ...lp(SDP)]);
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
    expect(errors.some((e) => e.code === 'bad-signature' && /signature does not verify .* over its SDP/.test(e.message))).toBe(true);
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
