/**
 * Which RTCPeerConnection a transport uses when it is given none: the JavaScript engine's
 * own (every browser with WebRTC), else in Node the `node-datachannel` polyfill. An engine
 * with neither — a browser built without WebRTC, such as Debian's WebKitGTK, or Node
 * without the optional dependency — gets a {@link TransportError} `no-webrtc` saying so,
 * never the failure of the module import that was only the fallback's.
 */
import { TransportError } from './errors.js';
import type { PeerConnection, RtcConfiguration } from '../engine/platform.js';

/** A constructor of RTCPeerConnection: the platform's own, or node-datachannel's polyfill. */
export type RTCPeerConnectionConstructor = new (config?: RtcConfiguration) => PeerConnection;

/** What the choice looks at: the global scope, and how the Node fallback is imported. */
export interface PeerConnectionScope {
  RTCPeerConnection?: unknown;
  process?: { versions?: { node?: string } };
  navigator?: { userAgent?: string };
}

const POLYFILL = 'node-datachannel/polyfill';

export async function defaultPeerConnection(
  scope: PeerConnectionScope = globalThis as PeerConnectionScope,
  load: (specifier: string) => Promise<unknown> = (specifier) => import(/* @vite-ignore */ specifier),
): Promise<RTCPeerConnectionConstructor> {
  if (typeof scope.RTCPeerConnection === 'function') return scope.RTCPeerConnection as RTCPeerConnectionConstructor;
  const node = scope.process?.versions?.node;
  if (node === undefined) {
    const engine = scope.navigator?.userAgent ?? 'this JavaScript engine';
    throw new TransportError('no-webrtc',
      `WebRTC is not available: ${engine} has no RTCPeerConnection (a browser built without WebRTC, or WebRTC turned off). ` +
      'The package computes and trains without it, but cannot link to peers here; pass options.RTCPeerConnection to use another implementation.');
  }
  let mod: { RTCPeerConnection?: unknown };
  try {
    mod = (await load(POLYFILL)) as { RTCPeerConnection?: unknown };
  } catch (error) {
    throw new TransportError('no-webrtc',
      `WebRTC is not available in Node ${node}: node-datachannel is not installed: in Node run \`npm install node-datachannel\` (0.26 or later), ` +
      `or pass RTCPeerConnection in the options (importing ${POLYFILL} failed: ${String((error as Error)?.message ?? error)})`);
  }
  if (typeof mod.RTCPeerConnection !== 'function') {
    throw new TransportError('no-webrtc', `${POLYFILL} has no RTCPeerConnection constructor`);
  }
  return withEncodedCredentials(mod.RTCPeerConnection as RTCPeerConnectionConstructor);
}

/**
 * node-datachannel's polyfill hands a TURN server to libdatachannel as one URL,
 * `turn:<username>:<credential>@host`, which libdatachannel splits at the first ':' and
 * then percent-decodes. A username of coturn's REST scheme ("<expiry>:<peer id>") and a
 * base64 credential ('+', '/', '=') must therefore arrive percent-encoded, or the TURN
 * server sees the expiry alone as the user and refuses it.
 */
export function withEncodedCredentials(PC: RTCPeerConnectionConstructor): RTCPeerConnectionConstructor {
  const encode = (config?: RTCConfiguration): RTCConfiguration | undefined =>
    config?.iceServers === undefined ? config : {
      ...config,
      iceServers: config.iceServers.map((server) => server.username === undefined || server.credential === undefined ? server : {
        ...server, username: encodeURIComponent(server.username), credential: encodeURIComponent(String(server.credential)),
      }),
    };
  return class extends (PC as new (config?: RTCConfiguration) => RTCPeerConnection) {
    constructor(config?: RTCConfiguration) {
      super(encode(config));
    }
  } as RTCPeerConnectionConstructor;
}
