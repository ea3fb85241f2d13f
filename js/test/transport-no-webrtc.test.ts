import { describe, expect, it } from 'vitest';

import { defaultPeerConnection, withEncodedCredentials } from '../src/transport/peer-connection.js';
import { TransportError } from '../src/transport/errors.js';

// A JavaScript engine without WebRTC (Debian's WebKitGTK; a browser with WebRTC turned
// off; Node without node-datachannel) must be told so, not fail resolving a module.
describe('an engine without RTCPeerConnection', () => {
  it('a browser engine gets no-webrtc naming the engine, and no import is tried', async () => {
    let imported = false;
    const scope = { navigator: { userAgent: 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/605.1.15 MiniBrowser' } };
    const error = await defaultPeerConnection(scope, async () => ((imported = true), {})).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TransportError);
    expect((error as TransportError).code).toBe('no-webrtc');
    expect((error as TransportError).message).toMatch(/WebRTC is not available: .*AppleWebKit.* has no RTCPeerConnection/);
    expect(imported).toBe(false);
  });

  it('Node without node-datachannel is told to install it', async () => {
    const scope = { process: { versions: { node: '20.0.0' } } };
    const missing = async () => {
      throw new Error("Cannot find package 'node-datachannel'");
    };
    const error = (await defaultPeerConnection(scope, missing).catch((e: unknown) => e)) as TransportError;
    expect(error.code).toBe('no-webrtc');
    expect(error.message).toMatch(/npm install node-datachannel/);
    expect(error.message).toMatch(/Cannot find package/);
  });

  it('the engine\'s own RTCPeerConnection wins, and Node takes the polyfill', async () => {
    class Fake {}
    expect(await defaultPeerConnection({ RTCPeerConnection: Fake })).toBe(Fake);
    const PC = await defaultPeerConnection({ process: { versions: { node: '20' } } }, async () => ({ RTCPeerConnection: Fake }));
    expect(new PC()).toBeInstanceOf(Fake); // the polyfill, its TURN credentials encoded (below)
    const bad = (await defaultPeerConnection({ process: { versions: { node: '20' } } }, async () => ({})).catch((e: unknown) => e)) as TransportError;
    expect(bad.code).toBe('no-webrtc');
  });
});

describe('TURN credentials for node-datachannel', () => {
  it('reach it percent-encoded: a REST username keeps its colon, a base64 credential its + / =', async () => {
    const seen: (RTCConfiguration | undefined)[] = [];
    class Capture {
      constructor(config?: RTCConfiguration) {
        seen.push(config);
      }
    }
    const PC = await defaultPeerConnection({ process: { versions: { node: '20' } } }, async () => ({ RTCPeerConnection: Capture }));
    new PC({ iceServers: [{ urls: 'stun:s.example' }, { urls: ['turn:t.example:3478'], username: '1795689381:peerA', credential: 'a+b/c=' }], iceTransportPolicy: 'relay' });
    expect(seen[0]).toEqual({
      iceServers: [{ urls: 'stun:s.example' }, { urls: ['turn:t.example:3478'], username: '1795689381%3ApeerA', credential: 'a%2Bb%2Fc%3D' }],
      iceTransportPolicy: 'relay',
    });
    new PC();
    expect(seen[1]).toBeUndefined();
    expect(withEncodedCredentials(Capture as never)).not.toBe(Capture);
  });
});
