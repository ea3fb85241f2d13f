/**
 * A node, a transport and a PollDriver wired together: what a page or a Node process runs
 * to be a peer. Envelopes the node sends go to the transport; envelopes that arrive are
 * delivered (and wake the driver); the driver polls on animation frames while the page is
 * visible, on timers otherwise, and sleeps until the node's next deadline.
 *
 * ```ts
 * const identity = await loadIdentity('my-app');          // bytesandbrains/identity
 * const node = BbNode.install(bb, { artifact, self: identity.peerId, ... });
 * const peer = await connectPeer(node, { url, room, identity, iceServers, onStep: (step) => show(step) });
 * ```
 * or, with a transport of one's own, `runPeer(node, transport, options)`. In a room that
 * admits by join token the node must be installed with the room's `admission`
 * (`admissionOf(token)` from bytesandbrains/signal reads it off a token): connectPeer
 * refuses to run one that checks no tokens.
 */
import { PollDriver, type PollDriverOptions } from './driver.js';
import { BbError, BbErrorCode } from '../engine/errors.js';
import type { Signer } from '../identity/identity.js';
import { measuredPolls, type ParticipationPolicy } from '../phones/participation.js';
import type { BbNode, Step } from './node.js';
import { Notices, shortPeer } from './notices.js';
import type { SignalClient, WebSocketConstructor } from '../signal/client.js';
import type { PeerRole, SignalErrorCode } from '../signal/protocol.js';
import type { Transport } from '../transport/types.js';
import type { WebRtcTransport, WebRtcTransportOptions } from '../transport/webrtc.js';
import type { IceServer } from '../engine/platform.js';

export interface PeerOptions extends PollDriverOptions {
  /** Every step but sends (which go to the transport). */
  readonly onStep?: (step: Step) => void;
  /**
   * When this peer takes part (phones/participation.ts): while the policy waits the node is not
   * polled (it trains and sends nothing) and what arrives is dropped (`droppedWaiting`).
   */
  readonly participation?: ParticipationPolicy;
  /**
   * An envelope the node refused or the transport could not take (the protocol's deadlines
   * cover the loss). Default: a notice to the default logger (notices.ts).
   */
  readonly onDrop?: (error: unknown, peer: string, direction: 'in' | 'out') => void;
}

export interface PeerStats {
  readonly sent: number;
  readonly received: number;
  readonly droppedOut: number;
  readonly droppedIn: number;
  /** Envelopes dropped because the participation policy was waiting. */
  readonly droppedWaiting: number;
}

export interface RunningPeer {
  readonly node: BbNode;
  readonly transport: Transport;
  readonly driver: PollDriver;
  stats(): PeerStats;
  /** Stops the driver and unhooks the node from the transport (neither is freed or closed). */
  stop(): void;
}

export function runPeer(node: BbNode, transport: Transport, options: PeerOptions = {}): RunningPeer {
  const policy = options.participation;
  const driver = new PollDriver(policy === undefined ? node : measuredPolls(node, policy), options);
  const counts = { sent: 0, received: 0, droppedOut: 0, droppedIn: 0, droppedWaiting: 0 };
  const notices = new Notices(undefined);
  const onDrop = options.onDrop ?? ((error: unknown, peer: string, direction: 'in' | 'out') =>
    notices.notice(`drop-${direction}`, `peer ${shortPeer(node.self)}: an envelope ${direction === 'in' ? 'from' : 'to'} ${peer} was dropped: ${error instanceof Error ? error.message : String(error)}`));
  const unStep = node.onStep((step) => {
    if (step.kind !== 'send') {
      options.onStep?.(step);
      return;
    }
    try {
      transport.send(step.peer!, step.bytes!);
      counts.sent++;
    } catch (error) {
      counts.droppedOut++;
      onDrop(error, step.peer!, 'out');
    }
  });
  const unEnvelope = transport.onEnvelope((from, bytes) => {
    if (policy !== undefined && !policy.state.participating) {
      counts.droppedWaiting++;
      return;
    }
    try {
      node.deliver(from, bytes, driver.now());
      counts.received++;
    } catch (error) {
      counts.droppedIn++;
      onDrop(error, from, 'in');
    }
    driver.wake();
  });
  const unPolicy = policy?.onChange((state) => (state.participating ? driver.start() : driver.stop()));
  if (policy === undefined || policy.state.participating) driver.start();
  return {
    node,
    transport,
    driver,
    stats: () => ({ ...counts }),
    stop() {
      driver.stop();
      unStep();
      unEnvelope();
      unPolicy?.();
    },
  };
}

export interface ConnectPeerOptions extends PeerOptions {
  /** ws:// or wss:// address of the signalling server. */
  readonly url: string;
  readonly room: string;
  /** The node's identity: its peer id must be the node's. */
  readonly identity: Signer;
  /**
   * A join token from the room's operator, for rooms that admit by token. The node must
   * then check tokens of this room, trusting the key that signed this one (installed with
   * `admission: admissionOf(token)` or the room's whole policy).
   */
  readonly token?: string;
  /** `client` or `server` (default: the token's role, else `client`). */
  readonly role?: PeerRole;
  /** STUN and TURN servers for every connection; those the signalling server hands out are added. */
  readonly iceServers?: IceServer[];
  /** The rest of the transport's options (rtcConfig, maxLinks, reassembly limits, an RTCPeerConnection, ...). */
  readonly transport?: Omit<WebRtcTransportOptions, 'signal' | 'iceServers'>;
  /** A WebSocket constructor for the signalling client (default: the global one, else `ws`). */
  readonly WebSocket?: WebSocketConstructor;
  /**
   * A member the node does not admit: a node installed with `admission` checks the join
   * token each member joined with (relayed by the signalling server) and refuses a
   * missing, expired, forged or foreign one (`error`: the BbError saying why).
   */
  readonly onRefused?: (peer: string, error: unknown) => void;
  /**
   * Join the room again when the signalling connection closes under the peer (a server
   * kick, a network blip), after 250 ms × 2ⁿ, at most 10 s (default true). Open links
   * carry on meanwhile; the transport makes new ones over the new connection. Never after
   * the same id joined elsewhere (close code 4001), nor once the server refuses the join
   * for who we are (`not-admitted`, `bad-signature`, ...).
   */
  readonly rejoin?: boolean;
  /** Where signalling stands: lost (with the close code), joined again, or given up (with the refusal). */
  readonly onSignalling?: (event: SignallingEvent) => void;
}

export type SignallingEvent =
  | { readonly state: 'closed'; readonly code: number; readonly reason: string }
  | { readonly state: 'rejoined' }
  | { readonly state: 'given-up'; readonly error: unknown };

/** Refusals of a join that may pass later: the server was away, busy or full. */
const RETRIED_REFUSALS: readonly SignalErrorCode[] = ['unreachable', 'closed', 'rate-limited', 'room-full', 'too-many-rooms'];

/**
 * Joins the room, makes a WebRtcTransport and runs the node on it, joining again whenever
 * signalling closes under it (`rejoin`). The networking code is loaded only here, so pages
 * that never connect never load it. `stop()` also stops rejoining but leaves the transport
 * open: close it with `running.transport.close()`.
 */
export async function connectPeer(node: BbNode, options: ConnectPeerOptions): Promise<RunningPeer> {
  if (node.self !== options.identity.peerId) {
    throw new Error(`the node is ${node.self} but the identity is ${options.identity.peerId}: install the node with self = identity.peerId`);
  }
  const [{ SignalClient }, { CLOSE_CODES }, { decodeJoinToken }, { WebRtcTransport }, { defaultPeerConnection }] = await Promise.all([
    import('../signal/client.js'), import('../signal/protocol.js'), import('../signal/token.js'), import('../transport/webrtc.js'),
    import('../transport/peer-connection.js'),
  ]);
  // an engine without WebRTC is told so before it joins a room it could not take part in
  const RTCPeerConnection = options.transport?.RTCPeerConnection ?? (await defaultPeerConnection());
  const join = (): Promise<SignalClient> => SignalClient.connect({
    url: options.url,
    room: options.room,
    identity: options.identity,
    ...(options.token === undefined ? {} : { token: options.token }),
    ...(options.role === undefined ? {} : { role: options.role }),
    ...(options.WebSocket === undefined ? {} : { WebSocket: options.WebSocket }),
  });
  const signal = await join();
  try {
    requireAdmission(node, signal.room, signal.operators, options.token === undefined ? undefined : decodeJoinToken(options.token)?.token.operator);
  } catch (error) {
    signal.close();
    throw error;
  }
  const transport = await WebRtcTransport.create({ ...options.transport, RTCPeerConnection, signal, ...(options.iceServers === undefined ? {} : { iceServers: options.iceServers }) });
  const unJoined = keepJoined(node, transport, signal, join, CLOSE_CODES.replaced, options);
  const running = runPeer(node, transport, options);
  return {
    ...running,
    stop() {
      unJoined();
      running.stop();
    },
  };
}

/**
 * A node in a room that admits by join token checks each member's token itself, or it
 * would take whoever the signalling server let in: the room admits by token when this
 * peer joined with one (signed by `own`) or the server named the room's `operators`.
 * Throws a BbError (Denied) saying what to install the node with when it checks none, or
 * checks another room's, or does not trust the key that signed this peer's own token.
 */
function requireAdmission(node: BbNode, room: string, operators: readonly Uint8Array[], own: Uint8Array | undefined): void {
  if (own === undefined && operators.length === 0) return;
  const admission = node.admission;
  const fix = `install it with admission: { room: '${room}', operators: [the room's operator keys] } (admissionOf(token) reads them off a join token of the room)`;
  if (admission === undefined) {
    throw new BbError(BbErrorCode.Denied, `room ${room} admits by join token but node ${node.self} checks none: ${fix}`);
  }
  if (admission.room !== room) {
    throw new BbError(BbErrorCode.Denied, `node ${node.self} checks the join tokens of room ${admission.room}, not of room ${room}: ${fix}`);
  }
  const same = (a: Uint8Array, b: Uint8Array): boolean => a.length === b.length && a.every((byte, i) => byte === b[i]);
  if (own !== undefined && !admission.operators.some((key) => same(key, own))) {
    throw new BbError(BbErrorCode.Denied, `node ${node.self} does not trust the operator key that signed its own join token, so it would refuse every member that key admits: ${fix}`);
  }
}

/**
 * Hands the node each member's join token over `signal`, and when `signal` closes under
 * the transport joins again (backing off) and hands the transport and the node the new
 * client. Returns a function that stops both.
 */
function keepJoined(
  node: BbNode, transport: WebRtcTransport, signal: SignalClient, join: () => Promise<SignalClient>, replacedCode: number, options: ConnectPeerOptions,
): () => void {
  let stopped = false;
  let attempts = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let unhook = (): void => {};
  const live = (): boolean => !stopped && !transport.closed;
  const retry = (): void => {
    timer = setTimeout(() => void rejoin(), Math.min(10_000, 250 * 2 ** attempts++));
  };
  const rejoin = async (): Promise<void> => {
    if (!live()) return;
    let client: SignalClient;
    try {
      client = await join();
    } catch (error) {
      const code = (error as { code?: SignalErrorCode }).code;
      if (code !== undefined && RETRIED_REFUSALS.includes(code)) return retry();
      return options.onSignalling?.({ state: 'given-up', error });
    }
    if (!live()) return client.close();
    attempts = 0;
    hook(client);
    transport.attachSignal(client);
    options.onSignalling?.({ state: 'rejoined' });
  };
  const hook = (client: SignalClient): void => {
    unhook();
    const unAdmit = node.checksTokens ? admitMembers(node, client, options.onRefused) : () => {};
    const unClose = client.events.on('close', (code, reason) => {
      if (!live()) return;
      options.onSignalling?.({ state: 'closed', code, reason });
      // replaced: this id joined again elsewhere, and joining back would take its place there
      if (options.rejoin !== false && code !== replacedCode) retry();
    });
    unhook = () => {
      unAdmit();
      unClose();
    };
  };
  hook(signal);
  return () => {
    stopped = true;
    clearTimeout(timer);
    unhook();
  };
}

/**
 * For a host that joins with a SignalClient and runs its node on a transport of its own
 * (runPeer), what connectPeer does: refuses (a BbError, Denied) a node that checks no
 * tokens in a room the server says admits by token, then hands the node each member's
 * join token, now and as members join. Returns the function that stops.
 */
export function admitRoomMembers(node: BbNode, signal: SignalClient, onRefused?: ConnectPeerOptions['onRefused']): () => void {
  requireAdmission(node, signal.room, signal.operators, undefined);
  return node.checksTokens ? admitMembers(node, signal, onRefused) : () => {};
}

/**
 * Hands the join token of each member of the room, now and as members join, to a node
 * that checks tokens. The node verifies each itself: the signalling server only relays
 * them, so it cannot make the engine admit anyone the operator did not sign for.
 */
function admitMembers(node: BbNode, signal: SignalClient, onRefused: ConnectPeerOptions['onRefused']): () => void {
  const admit = (peer: string): void => {
    const token = signal.tokenOf(peer);
    try {
      if (token === undefined) throw new BbError(BbErrorCode.Denied, `${peer} joined the room without a join token`);
      node.admitToken(peer, token);
    } catch (error) {
      onRefused?.(peer, error);
    }
  };
  for (const peer of signal.peers()) admit(peer);
  return signal.events.on('join', admit);
}
