/**
 * The strict SDP reading against the DTLS stacks' own: libdatachannel (node-datachannel,
 * what Node peers run) and Chromium. Each crafted SDP — a real offer with a second
 * certificate's fingerprint slipped in, line ends and control characters varied — goes to
 * readSdp and to each stack's setRemoteDescription; what a stack will enforce is the
 * fingerprint of its own re-serialised remoteDescription, and for libdatachannel a real
 * DTLS handshake confirms it. Whatever readSdp accepts, both stacks must read as it does;
 * so every SDP either stack reads another way is refused.
 */
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { readSdp, SdpError } from '../src/transport/index.js';
import { CHROMIUM, CHROMIUM_ARGS } from './support.js';

const rtcConfig = { iceServers: [], bindAddress: '127.0.0.1' };
type PC = RTCPeerConnection;

/** What a reader made of an SDP: the fingerprint it takes ("sha-256 AB:…"), none, or a refusal. */
type Reading = string;
const REFUSED = 'refused';
const NONE = 'none';

/** The fingerprint a stack's re-serialised description declares (they write exactly one, canonically). */
function declared(sdp: string | undefined): Reading {
  const all = [...(sdp ?? '').matchAll(/^a=fingerprint:(.*)\r$/gm)].map((m) => m[1]!);
  if (all.length > 1) throw new Error(`a stack re-serialised ${all.length} fingerprints: ${all.join(' | ')}`);
  if (all[0] === undefined) return NONE;
  const [hash, value] = all[0].split(' ');
  return `${hash!.toLowerCase()} ${value!.toUpperCase()}`;
}

function ours(sdp: string): Reading {
  try {
    return readSdp(sdp).fingerprint;
  } catch (error) {
    if (error instanceof SdpError) return REFUSED;
    throw error;
  }
}

let Polyfill: new (config?: RTCConfiguration & Record<string, unknown>) => PC;

async function libdatachannel(sdp: string): Promise<Reading> {
  const pc = new Polyfill(rtcConfig);
  try {
    await pc.setRemoteDescription({ type: 'offer', sdp });
    return declared(pc.remoteDescription?.sdp);
  } catch {
    return REFUSED;
  } finally {
    pc.close();
  }
}

let browser: Browser | undefined;
let page: Page;

function inChromium(sdp: string): Promise<Reading> {
  return page.evaluate(async (offer) => {
    const pc = new RTCPeerConnection();
    try {
      await pc.setRemoteDescription({ type: 'offer', sdp: offer });
      return pc.remoteDescription?.sdp ?? '';
    } catch {
      return null;
    } finally {
      pc.close();
    }
  }, sdp).then((text) => (text === null ? REFUSED : declared(text)));
}

interface Offerer {
  pc: PC;
  sdp: string;
  fingerprint: string;
  /** Its ICE candidates so far; later ones are pushed too. */
  candidates: RTCIceCandidate[];
}

/** An offer of a fresh node-datachannel connection (its data channel made), and that connection. */
async function offerer(): Promise<Offerer> {
  const pc = new Polyfill(rtcConfig);
  const candidates: RTCIceCandidate[] = [];
  pc.onicecandidate = (event) => event.candidate && candidates.push(event.candidate);
  pc.createDataChannel('bb');
  const offer = await pc.createOffer();
  await pc.setLocalDescription(offer);
  return { pc, sdp: offer.sdp!, fingerprint: /a=fingerprint:(.*)\r\n/.exec(offer.sdp!)![1]!, candidates };
}

/**
 * Whether `offer`'s own connection opens a data channel with a fresh connection that was
 * given `crafted` (the offer's ICE credentials, fingerprints varied): it does exactly when
 * that connection enforces the offerer's fingerprint in the DTLS handshake.
 */
async function handshakes(offer: Offerer, crafted: string): Promise<boolean> {
  const answerer = new Polyfill(rtcConfig);
  const outcome = new Promise<boolean>((resolve) => {
    answerer.ondatachannel = (event) => (event.channel.onopen = () => resolve(true));
    // libdatachannel closes a connection whose certificate does not match
    const ended = (pc: PC): void => void (['failed', 'closed'].includes(pc.connectionState) && resolve(false));
    answerer.onconnectionstatechange = () => ended(answerer);
    offer.pc.onconnectionstatechange = () => ended(offer.pc);
  });
  answerer.onicecandidate = (event) => event.candidate && void offer.pc.addIceCandidate(event.candidate).catch(() => undefined);
  await answerer.setRemoteDescription({ type: 'offer', sdp: crafted });
  const answer = await answerer.createAnswer();
  await answerer.setLocalDescription(answer);
  await offer.pc.setRemoteDescription(answer);
  const add = (candidate: RTCIceCandidate): void => void answerer.addIceCandidate(candidate).catch(() => undefined);
  offer.candidates.forEach(add);
  offer.pc.onicecandidate = (event) => event.candidate && add(event.candidate);
  try {
    return await outcome;
  } finally {
    answerer.close();
  }
}

beforeAll(async () => {
  ({ RTCPeerConnection: Polyfill } = (await import('node-datachannel/polyfill')) as unknown as { RTCPeerConnection: typeof Polyfill });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  page = await browser.newPage();
}, 60_000);

afterAll(async () => {
  await browser?.close();
});

describe('readSdp against libdatachannel and Chromium', () => {
  it('accepts only what both stacks read as it does, and refuses every SDP they read otherwise', async () => {
    const genuine = await offerer();
    const other = await offerer(); // a second certificate: what a man in the middle would slip in
    const [p, q] = [genuine.fingerprint, other.fingerprint];
    genuine.pc.close();
    other.pc.close();
    const base = genuine.sdp;
    const line = (fingerprint: string): string => `a=fingerprint:${fingerprint}`;
    const at = (where: 'session' | 'media', extra: string): string =>
      where === 'session' ? base.replace('t=0 0\r\n', `t=0 0\r\n${extra}\r\n`) : base.replace('a=setup:', `${extra}\r\na=setup:`);
    const without = base.replace(`${line(p)}\r\n`, '');
    const variants: Record<string, string> = {
      'the genuine offer': base,
      'a second fingerprint, session level': at('session', line(q)),
      'a second fingerprint, media level': at('media', line(q)),
      'the genuine one twice': at('media', line(p)),
      'the genuine one moved to media level': without.replace('a=setup:', `${line(p)}\r\na=setup:`),
      'a second one ending in a form feed': at('media', `${line(q)}\f`),
      'a second one ending in a vertical tab': at('media', `${line(q)}\v`),
      'a second one ending in a tab': at('media', `${line(q)}\t`),
      'a second one ending in a space': at('media', `${line(q)} `),
      'a second one ending in a NUL': at('media', `${line(q)}\0`),
      'a second one after a bare CR': base.replace('a=mid:0\r\n', `a=mid:0\r${line(q)}\r\n`),
      'a second one after a bare LF': base.replace('a=mid:0\r\n', `a=mid:0\n${line(q)}\r\n`),
      'a second one with a tab for its space': at('media', line(q).replace(' ', '\t')),
      'the genuine one with a tab, a second ending in a form feed': without.replace('a=setup:', `${line(q)}\f\r\n${line(p).replace(' ', '\t')}\r\na=setup:`),
      'a second one spelt a=Fingerprint': at('media', line(q).replace('fingerprint', 'Fingerprint')),
      'a second one in upper case': at('media', line(q).replace('sha-256', 'SHA-256')),
      'a second one in lower-case hex': at('media', line(q).toLowerCase()),
      'a second one with a leading space': at('media', ` ${line(q)}`),
      'a second one in a second data channel section': `${base}m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\na=mid:1\r\n${line(q)}\r\n`,
      'the genuine one in lower-case hex': base.replace(line(p), line(p).replace(/ .*/, (hex) => hex.toLowerCase())),
      'the genuine one as SHA-256': base.replace(line(p), line(p).replace('sha-256', 'SHA-256')),
      'the genuine one with a tab for its space': base.replace(line(p), line(p).replace(' ', '\t')),
      'the genuine one ending in a space': base.replace(line(p), `${line(p)} `),
      'the genuine one ending in a form feed': base.replace(line(p), `${line(p)}\f`),
      'LF line ends': base.replace(/\r\n/g, '\n'),
      'a NUL in another line': base.replace('a=mid:0', 'a=mid:0\0'),
      'no fingerprint': without,
      'a sha-1 fingerprint instead': base.replace(line(p), 'a=fingerprint:sha-1 00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33'),
    };
    const table: Array<{ variant: string; ours: Reading; libdatachannel: Reading; chromium: Reading }> = [];
    for (const [variant, sdp] of Object.entries(variants)) {
      table.push({ variant, ours: ours(sdp), libdatachannel: await libdatachannel(sdp), chromium: await inChromium(sdp) });
    }
    const name = (reading: Reading): string => (reading === p ? 'genuine' : reading === q ? 'second' : reading);
    const shown = table.map((row) => `${row.variant}: ours ${name(row.ours)}, libdatachannel ${name(row.libdatachannel)}, Chromium ${name(row.chromium)}`).join('\n');
    if (process.env['BB_SHOW_SDP_READINGS']) console.log(shown);
    // the genuine offer passes everywhere alike
    expect(table[0], shown).toMatchObject({ ours: p, libdatachannel: p, chromium: p });
    for (const row of table) {
      if (row.ours !== REFUSED) expect([row.libdatachannel, row.chromium], `${row.variant}\n${shown}`).toEqual([row.ours, row.ours]);
    }
    // the variants are not idle: the stacks take the slipped-in certificate, and disagree
    const taken = table.filter((row) => row.libdatachannel === q || row.chromium === q);
    const disagreeing = table.filter((row) => row.libdatachannel !== row.chromium);
    expect(taken.length, shown).toBeGreaterThanOrEqual(5);
    expect(disagreeing.length, shown).toBeGreaterThanOrEqual(3);
    for (const row of [...taken, ...disagreeing]) expect(row.ours, row.variant).toBe(REFUSED);
    // readSdp takes the genuine offer, and nothing else here
    expect(table.filter((row) => row.ours !== REFUSED).map((row) => row.variant)).toEqual(['the genuine offer', 'the genuine one moved to media level']);
  });

  it('libdatachannel enforces the fingerprint its re-serialised description declares (a real DTLS handshake)', async () => {
    const other = await offerer();
    other.pc.close();
    // the genuine offer with a second fingerprint ending in a form feed: libdatachannel takes the second
    const slipped = await offerer();
    const crafted = slipped.sdp.replace('a=setup:', `a=fingerprint:${other.fingerprint}\f\r\na=setup:`);
    expect(await libdatachannel(crafted)).toBe(other.fingerprint);
    expect(await handshakes(slipped, crafted)).toBe(false);
    slipped.pc.close();
    // the same with the second one ending in a tab: it keeps the genuine one (the control)
    const kept = await offerer();
    const control = kept.sdp.replace('a=setup:', `a=fingerprint:${other.fingerprint.replace(' ', '\t')}\r\na=setup:`);
    expect(await libdatachannel(control)).toBe(kept.fingerprint);
    expect(await handshakes(kept, control)).toBe(true);
    kept.pc.close();
  });
});
