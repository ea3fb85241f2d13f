/**
 * WebRtcTransport: one ordered, reliable, binary RTCDataChannel per remote peer, set up
 * through a {@link SignalClient}. Envelopes are chunked (chunking.ts), sent under
 * back-pressure, and reassembled on the other side (reassembler.ts). A link is made only
 * to a peer the engine addresses (the first envelope for it, or connect()), up to
 * `maxLinks`, or that asks for one, up to the separate and smaller `maxRequestedLinks`;
 * never to the whole room. A link a peer asked for and the engine never addressed is
 * dropped when it fails, or gives way to a new request once idle, so strangers cannot hold
 * the slots. The peer with the smaller id always offers (so two peers never offer to each
 * other at once) and drives reconnects; the other asks it to with a `connect` signal.
 * Signalling only makes links: when it closes, open links carry on, and
 * {@link WebRtcTransport.attachSignal} resumes the rest over a new connection.
 */
import { fromBase64, randomBytes, toBase64 } from '../identity/bytes.js';
import type { SignalClient } from '../signal/client.js';
import { DEFAULT_CHUNK_SIZE, chunkCount, encodeChunk } from './chunking.js';
import { Emitter } from './emitter.js';
import { TransportError } from './errors.js';
import { defaultPeerConnection, type RTCPeerConnectionConstructor } from './peer-connection.js';
import { Reassembler, type ReassemblyLimits } from './reassembler.js';
import { SDP_NONCE_BYTES, sdpRefusal, signSdp } from './sdp-signature.js';
import type { PeerState, Transport, TransportEvents, TransportStats } from './types.js';
import type { IceServer, RtcConfiguration } from '../engine/platform.js';

/** What the transport takes from signalling: a {@link SignalClient}, or something that relays like one. */
/** The candidates a link runs over (see {@link WebRtcTransport.selectedPair}). */
export interface SelectedPair {
  local: string;
  remote: string;
  protocol: string;
}

export type SignalChannel = Pick<SignalClient, 'self' | 'room' | 'identity' | 'events' | 'closed' | 'peers' | 'send' | 'close' | 'iceServers'>;

export interface WebRtcTransportOptions {
  /** A joined signalling client; the transport owns it from now on and closes it on close(). */
  signal: SignalChannel;
  /** Defaults to the browser's global, else `node-datachannel/polyfill` (imported lazily). */
  RTCPeerConnection?: RTCPeerConnectionConstructor;
  /**
   * STUN and TURN servers for every connection, e.g. `[{ urls: 'stun:stun.example.org' }]`.
   * Those the signalling server hands out (short-lived TURN credentials) are added.
   */
  iceServers?: IceServer[];
  /** Passed to every RTCPeerConnection (node-datachannel also takes `bindAddress`). */
  rtcConfig?: RtcConfiguration;
  /** Largest chunk in bytes, header included (default 64 KiB; lowered to the remote maxMessageSize). */
  chunkSize?: number;
  /** Bytes of envelopes that may wait for one peer before send() throws `queue-full` (default 64 MiB). */
  maxQueuedBytes?: number;
  /** Links the engine addressed (send() or connect()) at once (default 256); past it send() throws `link-limit`. */
  maxLinks?: number;
  /**
   * Links at once that remote peers asked for and the engine has not addressed (default
   * 32). Such a link is dropped when it fails; past the limit a request takes the place of
   * the one idle longest if that carried nothing for `requestedIdleMs`, else it is refused
   * (`link-limit` error events). Once the engine sends to its peer the link counts against
   * `maxLinks` instead.
   */
  maxRequestedLinks?: number;
  /** How long a link only a remote peer asked for must have carried nothing before a new request may take its place (default 30 s). */
  requestedIdleMs?: number;
  /** Stop handing chunks to the channel above this many buffered bytes (default 1 MiB)... */
  highWaterMark?: number;
  /** ...and resume once it drains below this (default 256 KiB). */
  lowWaterMark?: number;
  /** A link not open after this long counts as failed (default 15 s). */
  connectTimeoutMs?: number;
  /** First reconnect delay, doubled per failed attempt up to `reconnectMaxMs` (defaults 250 ms, 10 s). */
  reconnectBaseMs?: number;
  reconnectMaxMs?: number;
  /** Bounds on reassembly; `maxMessageBytes` (default 16 MiB) also bounds what send() takes. */
  reassembly?: ReassemblyLimits;
}

/**
 * What signalling carries between two transports (JSON, off the hot path). An offer and
 * its answer are signed by their senders (sdp-signature.ts); the answer signs the offer's
 * nonce, so it answers that offer and no other.
 */
type LinkSignal =
  | { kind: 'offer'; gen: number; sdp: string; nonce: string; sig: string }
  | { kind: 'answer'; gen: number; sdp: string; sig: string }
  | { kind: 'candidate'; gen: number; candidate: string; mid: string | null }
  /**
   * From the answering side: it wants a link, or lost the one of offer `gen` (0: it had
   * none); the offerer starts one, or redoes offer `gen`.
   */
  | { kind: 'connect'; gen: number };

/** A signal that passed #check: for an offer or answer, its SDP as read and signed, and the offer's nonce. */
interface Accepted {
  nonce: Uint8Array;
  sdp: string;
}

interface Outgoing {
  bytes: Uint8Array;
  messageId: number;
  nextChunk: number;
}

interface Link {
  peer: string;
  state: PeerState;
  /** Whether the engine sent to this peer (or connect()ed it); else the peer asked for the link. */
  addressed: boolean;
  /** When the link last opened or carried a chunk either way (Date.now()). */
  activeAt: number;
  gen: number;
  pc: RTCPeerConnection | null;
  channel: RTCDataChannel | null;
  chunkSize: number;
  remoteSet: boolean;
  /** The nonce of the offer in flight on this link (ours, or the one we answer). */
  nonce: Uint8Array;
  pendingCandidates: RTCIceCandidateInit[];
  /**
   * Our candidates, held back until both ends hold both descriptions: the offerer's until
   * the answer is applied, the answerer's until the answer is sent. Connectivity checks (and
   * the DTLS handshake the answerer starts) then never run ahead of the offerer having the
   * answer, and no candidate reaches a peer before the offer that makes its link.
   */
  localCandidates: LinkSignal[] | null;
  queue: Outgoing[];
  queuedBytes: number;
  attempts: number;
  /** The connect timeout, or the reconnect delay after a failure. */
  timer: ReturnType<typeof setTimeout> | null;
}

export class WebRtcTransport implements Transport {
  readonly self: string;
  readonly events = new Emitter<TransportEvents>();
  readonly #envelopes = new Emitter<{ envelope: [from: string, bytes: Uint8Array] }>();
  #signal: SignalChannel;
  readonly #PC: RTCPeerConnectionConstructor;
  readonly #options: WebRtcTransportOptions;
  readonly #links = new Map<string, Link>();
  /** Per peer, the last of its signals still being checked (see #onSignal). */
  readonly #inbox = new Map<string, Promise<void>>();
  readonly #reassembler: Reassembler;
  readonly #maxLinks: number;
  readonly #maxRequestedLinks: number;
  readonly #requestedIdleMs: number;
  readonly #expiry: ReturnType<typeof setInterval>;
  readonly #stats = { bytesOut: 0, bytesIn: 0, messagesOut: 0, messagesIn: 0 };
  #unsubscribe: Array<() => void> = [];
  #nextMessageId = 0;
  #closed = false;

  private constructor(options: WebRtcTransportOptions, PC: RTCPeerConnectionConstructor) {
    this.#options = options;
    this.#signal = options.signal;
    this.#PC = PC;
    this.self = options.signal.self;
    this.#maxLinks = options.maxLinks ?? 256;
    this.#maxRequestedLinks = options.maxRequestedLinks ?? 32;
    this.#requestedIdleMs = options.requestedIdleMs ?? 30_000;
    this.#reassembler = new Reassembler(options.reassembly, (evicted) => {
      const why = `${evicted.bytes} bytes of message ${evicted.messageId} from ${evicted.peer} were dropped: incomplete messages of all peers reached ${this.#reassembler.maxPartialBytes} bytes`;
      this.events.emit('error', new TransportError('partial-evicted', why, evicted.peer));
    });
    this.#expiry = setInterval(() => this.#expire(), Math.max(100, this.#reassembler.partialTimeoutMs / 2));
    (this.#expiry as { unref?: () => void }).unref?.();
    this.#listen();
  }

  /** A transport over a joined signalling client; it links to peers as they are addressed. */
  static async create(options: WebRtcTransportOptions): Promise<WebRtcTransport> {
    const PC = options.RTCPeerConnection ?? (await defaultPeerConnection());
    return new WebRtcTransport(options, PC);
  }

  /**
   * Queues an envelope for `to` (copied; the caller may reuse `bytes`), making the link to
   * it first if there is none. Throws `unknown-peer` when `to` is not in the room,
   * `message-too-large` above `reassembly.maxMessageBytes`, `queue-full` when its queue is
   * at its bound, `link-limit` when a new link would pass `maxLinks`, `closed` after close().
   * While signalling is closed a new link waits (state `failed`) for {@link attachSignal}.
   */
  send(to: string, bytes: Uint8Array): void {
    if (this.#closed) throw new TransportError('closed', 'the transport is closed', to);
    if (bytes.byteLength > this.#reassembler.maxMessageBytes) {
      throw new TransportError('message-too-large', `an envelope of ${bytes.byteLength} bytes for ${to} is above the ${this.#reassembler.maxMessageBytes}-byte limit`, to);
    }
    const link = this.#addressed(to);
    const limit = this.#options.maxQueuedBytes ?? 64 * 1024 * 1024;
    if (link.queuedBytes + bytes.byteLength > limit) {
      throw new TransportError('queue-full', `${link.queuedBytes} bytes already wait for ${to}; ${bytes.byteLength} more would exceed ${limit}`, to);
    }
    link.queue.push({ bytes: bytes.slice(), messageId: this.#nextMessageId, nextChunk: 0 });
    this.#nextMessageId = (this.#nextMessageId + 1) >>> 0;
    link.queuedBytes += bytes.byteLength;
    link.activeAt = Date.now();
    this.#pump(link);
  }

  /** Makes the link to `peer` now rather than on its first envelope (same errors as send()). */
  connect(peer: string): void {
    if (this.#closed) throw new TransportError('closed', 'the transport is closed', peer);
    this.#addressed(peer);
  }

  /**
   * Carries on over a new signalling connection for the same peer id, after the last one
   * closed (the transport owns it from now on; a previous one still open is closed). Open
   * links are untouched; links that failed or waited meanwhile start again.
   */
  attachSignal(signal: SignalChannel): void {
    if (this.#closed) throw new TransportError('closed', 'the transport is closed');
    if (signal.self !== this.self) throw new RangeError(`the signalling client is ${signal.self}, but this transport is ${this.self}`);
    for (const off of this.#unsubscribe) off();
    if (signal !== this.#signal && !this.#signal.closed) this.#signal.close();
    this.#signal = signal;
    this.#listen();
    if (signal.closed) return this.#signalClosed();
    for (const link of [...this.#links.values()]) {
      if (link.state !== 'failed' || link.timer !== null) continue;
      if (signal.peers().includes(link.peer)) this.#start(link);
      else this.#removePeer(link.peer);
    }
  }

  onEnvelope(handler: (from: string, bytes: Uint8Array) => void): () => void {
    return this.#envelopes.on('envelope', handler);
  }

  /** The other members of the room, linked or not. */
  peers(): string[] {
    return this.#signal.peers();
  }

  /** Peers there is a link to (in any state). */
  links(): string[] {
    return [...this.#links.keys()];
  }

  /** Peers there is a link to that they asked for and the engine has not addressed. */
  requestedLinks(): string[] {
    return [...this.#links.values()].filter((link) => !link.addressed).map((link) => link.peer);
  }

  /** Whether close() was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Where the link to `peer` stands; undefined when there is none (not addressed yet, or not in the room). */
  state(peer: string): PeerState | undefined {
    return this.#links.get(peer)?.state;
  }

  /** Bytes of envelopes waiting for `peer` (not yet handed to its channel). */
  queuedBytes(peer: string): number {
    return this.#links.get(peer)?.queuedBytes ?? 0;
  }

  /**
   * The candidate pair the link to `peer` runs over, from the connection's getStats():
   * each side's candidate type (`host`, `srflx`, `prflx` or `relay` — a TURN server
   * carries the traffic) and the transport protocol. Undefined while no pair is selected.
   */
  async selectedPair(peer: string): Promise<SelectedPair | undefined> {
    const pc = this.#links.get(peer)?.pc;
    if (!pc) return undefined;
    const report = await pc.getStats();
    const byId = new Map<string, Record<string, unknown>>();
    report.forEach((entry: Record<string, unknown>) => byId.set(entry.id as string, entry));
    let pair: Record<string, unknown> | undefined;
    for (const entry of byId.values()) {
      if (entry.type === 'transport' && typeof entry.selectedCandidatePairId === 'string') pair = byId.get(entry.selectedCandidatePairId);
    }
    // engines without the transport entry (Firefox) mark the pair itself
    for (const entry of byId.values()) {
      if (pair === undefined && entry.type === 'candidate-pair' && entry.state === 'succeeded' && (entry.selected === true || entry.nominated === true)) pair = entry;
    }
    const local = pair && byId.get(pair.localCandidateId as string);
    const remote = pair && byId.get(pair.remoteCandidateId as string);
    if (!local || !remote) return undefined;
    return { local: String(local.candidateType), remote: String(remote.candidateType), protocol: String(local.protocol ?? '') };
  }

  stats(): TransportStats {
    return { ...this.#stats, links: this.#links.size, partialBytes: this.#reassembler.pendingBytes, partialsEvicted: this.#reassembler.evictions };
  }

  /** Closes every link and the signalling client. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#expiry);
    for (const off of this.#unsubscribe) off();
    for (const peer of [...this.#links.keys()]) this.#removePeer(peer);
    this.#signal.close();
  }

  /** Subscribes to the current signalling client. */
  #listen(): void {
    const signal = this.#signal;
    this.#unsubscribe = [
      signal.events.on('leave', (peer) => this.#onLeave(peer)),
      signal.events.on('signal', (from, data) => this.#onSignal(from, data as LinkSignal)),
      signal.events.on('close', (code, reason) => {
        if (signal === this.#signal) this.#signalClosed(code, reason);
      }),
    ];
  }

  /**
   * Signalling is gone (a server kick, a network blip): open links carry on. Links being
   * made cannot be: those the engine addressed wait (state `failed`) for attachSignal,
   * those only a peer asked for are dropped.
   */
  #signalClosed(code?: number, reason?: string): void {
    if (this.#closed) return;
    const why = code === undefined ? 'is closed' : `closed (code ${code}${reason ? `: ${reason}` : ''})`;
    this.events.emit('error', new TransportError('signal-closed', `signalling ${why}: open links carry on; new links wait for attachSignal()`));
    for (const link of [...this.#links.values()]) {
      if (link.state === 'open') continue;
      if (link.addressed) this.#fail(link, 'signalling closed');
      else this.#removePeer(link.peer);
    }
  }

  /**
   * The link to a member the engine addresses: the one there is (a link the peer asked for
   * now counts against `maxLinks`), else a new one — we offer, or ask the peer to.
   */
  #addressed(peer: string): Link {
    const existing = this.#links.get(peer);
    if (existing?.addressed === true) return existing;
    if (existing === undefined && (peer === this.self || !this.#signal.peers().includes(peer))) {
      throw new TransportError('unknown-peer', `no peer ${peer} in room ${this.#signal.room}`, peer);
    }
    if (this.#count(true) >= this.#maxLinks) throw new TransportError('link-limit', `a link to ${peer} would pass the limit of ${this.#maxLinks} links`, peer);
    if (existing !== undefined) {
      existing.addressed = true;
      return existing;
    }
    const link = this.#newLink(peer, true);
    this.#start(link);
    return link;
  }

  /**
   * Makes room for a peer's request: drops the open link that only its peer asked for and
   * that carried nothing for the longest, if that is at least `requestedIdleMs`.
   */
  #dropIdleRequested(): boolean {
    let idlest: Link | undefined;
    for (const link of this.#links.values()) {
      if (!link.addressed && link.state === 'open' && (idlest === undefined || link.activeAt < idlest.activeAt)) idlest = link;
    }
    const idleMs = idlest === undefined ? 0 : Date.now() - idlest.activeAt;
    if (idlest === undefined || idleMs < this.#requestedIdleMs) return false;
    this.events.emit('error', new TransportError('link-idle', `dropped the link ${idlest.peer} asked for to make room for another: nothing crossed it for ${idleMs} ms and the engine never sent to ${idlest.peer}`, idlest.peer));
    this.#removePeer(idlest.peer);
    return true;
  }

  /** Links the engine addressed (`addressed`), or that only a peer asked for. */
  #count(addressed: boolean): number {
    let n = 0;
    for (const link of this.#links.values()) if (link.addressed === addressed) n++;
    return n;
  }

  #newLink(peer: string, addressed: boolean): Link {
    const link: Link = {
      peer, state: 'closed', addressed, activeAt: Date.now(), gen: 0, pc: null, channel: null, chunkSize: this.#options.chunkSize ?? DEFAULT_CHUNK_SIZE,
      remoteSet: false, nonce: new Uint8Array(0), pendingCandidates: [], localCandidates: [], queue: [], queuedBytes: 0, attempts: 0, timer: null,
    };
    this.#links.set(peer, link);
    return link;
  }

  /** (Re)starts a link: the offerer offers; the other side asks it to and waits for the offer. */
  #start(link: Link): void {
    if (this.#signal.closed) {
      this.#setState(link, 'failed');
      return;
    }
    this.#setState(link, 'connecting');
    if (this.#initiates(link.peer)) {
      void this.#offer(link);
      return;
    }
    this.#sendSignal(link.peer, { kind: 'connect', gen: link.gen });
    this.#armConnectTimeout(link);
  }

  /** A member left the room: a link still being made is dropped; an open one lasts as long as its channel. */
  #onLeave(peer: string): void {
    if (this.#links.get(peer)?.state !== 'open') this.#removePeer(peer);
  }

  #removePeer(peer: string): void {
    const link = this.#links.get(peer);
    if (link === undefined) return;
    this.#links.delete(peer);
    this.#teardown(link);
    if (link.queue.length > 0) {
      this.events.emit('error', new TransportError('closed', `${link.queue.length} envelopes (${link.queuedBytes} bytes) for ${peer} were not delivered: it left`, peer));
    }
    this.#setState(link, 'closed');
  }

  #initiates(peer: string): boolean {
    return this.self < peer;
  }

  #rtcConfiguration(): RtcConfiguration {
    const base = this.#options.iceServers ?? this.#options.rtcConfig?.iceServers ?? [];
    return { ...this.#options.rtcConfig, iceServers: [...base, ...this.#signal.iceServers()] };
  }

  #armConnectTimeout(link: Link): void {
    if (link.timer !== null) clearTimeout(link.timer);
    const ms = this.#options.connectTimeoutMs ?? 15_000;
    const gen = link.gen;
    link.timer = setTimeout(() => {
      link.timer = null;
      if (link.state !== 'open' && link.gen === gen) this.#fail(link, `not open after ${ms} ms`);
    }, ms);
  }

  #newConnection(link: Link): RTCPeerConnection {
    const pc = new this.#PC(this.#rtcConfiguration());
    const gen = link.gen;
    link.pc = pc;
    link.remoteSet = false;
    link.pendingCandidates = [];
    link.localCandidates = [];
    pc.onicecandidate = (event) => {
      if (!event.candidate || link.pc !== pc) return;
      const candidate: LinkSignal = { kind: 'candidate', gen, candidate: event.candidate.candidate, mid: event.candidate.sdpMid };
      if (link.localCandidates !== null) link.localCandidates.push(candidate);
      else this.#sendSignal(link.peer, candidate);
    };
    pc.onconnectionstatechange = () => {
      if (link.pc === pc && (pc.connectionState === 'failed' || pc.connectionState === 'closed')) this.#fail(link, `connection ${pc.connectionState}`);
    };
    this.#armConnectTimeout(link);
    return pc;
  }

  async #offer(link: Link): Promise<void> {
    link.gen++;
    const pc = this.#newConnection(link);
    this.#wireChannel(link, pc, pc.createDataChannel('bb', { ordered: true }));
    try {
      const offer = await pc.createOffer();
      await pc.setLocalDescription(offer);
      const nonce = randomBytes(SDP_NONCE_BYTES);
      const sig = await signSdp(this.#signal.identity, 'offer', offer.sdp ?? '', link.peer, nonce);
      if (link.pc !== pc) return;
      link.nonce = nonce;
      this.#sendSignal(link.peer, { kind: 'offer', gen: link.gen, sdp: offer.sdp ?? '', nonce: toBase64(nonce), sig });
    } catch (error) {
      if (link.pc === pc) this.#fail(link, `offer failed: ${(error as Error).message}`);
    }
  }

  /**
   * Signals from one peer are taken in the order they came: checking a signature takes a
   * moment, and the candidates that follow an offer must find the link that offer made.
   */
  #onSignal(from: string, data: LinkSignal): void {
    if (this.#closed || typeof data !== 'object' || data === null) return;
    const checked = (this.#inbox.get(from) ?? Promise.resolve()).then(() => this.#check(from, data));
    const done = checked.then((accepted) => {
      if (accepted !== null) void this.#apply(from, data, accepted);
    });
    this.#inbox.set(from, done);
    void done.then(() => {
      if (this.#inbox.get(from) === done) this.#inbox.delete(from);
    });
  }

  /**
   * Null when `data` is to be dropped (an SDP or signature that does not hold is reported);
   * else, for an offer or answer, the SDP that passed the strict reading and the signature
   * (the very string the connection is then given) and the offer's nonce.
   */
  async #check(from: string, data: LinkSignal): Promise<Accepted | null> {
    if (data.kind === 'offer') {
      if (this.#initiates(from)) return null; // offers come from the smaller id only
      const nonce = fromBase64(data.nonce, SDP_NONCE_BYTES);
      if (nonce === null) return this.#refuseSignal(from, 'the offer carries no nonce');
      const refusal = await sdpRefusal('offer', data.sdp, from, this.self, nonce, data.sig);
      return refusal === null ? { nonce, sdp: data.sdp } : this.#refuseSignal(from, refusal);
    }
    if (data.kind === 'answer') {
      const link = this.#links.get(from);
      if (link === undefined || data.gen !== link.gen) return null;
      const refusal = await sdpRefusal('answer', data.sdp, from, this.self, link.nonce, data.sig);
      return refusal === null ? { nonce: link.nonce, sdp: data.sdp } : this.#refuseSignal(from, refusal);
    }
    return { nonce: new Uint8Array(0), sdp: '' };
  }

  async #apply(from: string, data: LinkSignal, accepted: Accepted): Promise<void> {
    if (this.#closed) return;
    let link = this.#links.get(from);
    // only the two requests that start a link may come for a peer we have none with. The
    // server relays only from members of the room, so the sender is one even when its
    // presence has not reached us yet.
    if (link === undefined) {
      const starts = data.kind === 'offer' || (data.kind === 'connect' && this.#initiates(from));
      if (!starts) return;
      if (this.#count(false) >= this.#maxRequestedLinks && !this.#dropIdleRequested()) {
        this.events.emit('error', new TransportError('link-limit', `refused a link ${from} asked for: ${this.#maxRequestedLinks} links peers asked for are open`, from));
        return;
      }
      link = this.#newLink(from, false);
      if (data.kind === 'connect') return this.#start(link);
    }
    try {
      if (data.kind === 'offer') {
        this.#teardown(link);
        link.nonce = accepted.nonce;
        link.gen = data.gen;
        this.#setState(link, 'connecting');
        const pc = this.#newConnection(link);
        pc.ondatachannel = (event) => this.#wireChannel(link, pc, event.channel);
        await pc.setRemoteDescription({ type: 'offer', sdp: accepted.sdp });
        const answer = await pc.createAnswer();
        await pc.setLocalDescription(answer);
        const sig = await signSdp(this.#signal.identity, 'answer', answer.sdp ?? '', from, accepted.nonce);
        if (link.pc !== pc) return;
        this.#sendSignal(from, { kind: 'answer', gen: data.gen, sdp: answer.sdp ?? '', sig });
        await this.#remoteDescriptionSet(link, pc);
      } else if (data.kind === 'answer' && data.gen === link.gen && link.pc !== null && !link.remoteSet) {
        const pc = link.pc;
        await pc.setRemoteDescription({ type: 'answer', sdp: accepted.sdp });
        await this.#remoteDescriptionSet(link, pc);
      } else if (data.kind === 'connect' && this.#initiates(from)) {
        // the other side lost our current offer's link: redo it (a request that crossed a
        // newer offer names an older generation, and that offer answers it)
        if (data.gen === link.gen) this.#fail(link, `${from} lost the link`);
      } else if (data.kind === 'candidate' && data.gen === link.gen && link.pc !== null) {
        const candidate = { candidate: data.candidate, sdpMid: data.mid };
        if (link.remoteSet) await link.pc.addIceCandidate(candidate);
        else link.pendingCandidates.push(candidate);
      }
    } catch (error) {
      this.#fail(link, `signalling ${data.kind} failed: ${(error as Error).message}`);
    }
  }

  /** An offer or answer whose SDP or signature does not hold is never applied (null); the link's timeout covers it. */
  #refuseSignal(from: string, why: string): null {
    this.events.emit('error', new TransportError('bad-signature', `refused signalling from ${from}: ${why}`, from));
    return null;
  }

  /** Both descriptions are in place on our side (and, as the answerer, sent): candidates may flow both ways. */
  async #remoteDescriptionSet(link: Link, pc: RTCPeerConnection): Promise<void> {
    if (link.pc !== pc) return;
    link.remoteSet = true;
    for (const candidate of link.localCandidates ?? []) this.#sendSignal(link.peer, candidate);
    link.localCandidates = null;
    for (const candidate of link.pendingCandidates.splice(0)) await pc.addIceCandidate(candidate);
  }

  #wireChannel(link: Link, pc: RTCPeerConnection, channel: RTCDataChannel): void {
    channel.binaryType = 'arraybuffer';
    channel.bufferedAmountLowThreshold = this.#options.lowWaterMark ?? 256 * 1024;
    channel.onopen = () => {
      if (link.pc !== pc) return;
      link.channel = channel;
      link.attempts = 0;
      link.activeAt = Date.now();
      const remoteMax = pc.sctp?.maxMessageSize;
      const wanted = this.#options.chunkSize ?? DEFAULT_CHUNK_SIZE;
      link.chunkSize = remoteMax !== undefined && remoteMax > 0 && remoteMax < wanted ? remoteMax : wanted;
      if (link.timer !== null) clearTimeout(link.timer);
      link.timer = null;
      this.#setState(link, 'open');
      this.#pump(link);
    };
    channel.onbufferedamountlow = () => this.#pump(link);
    channel.onclose = () => {
      if (link.pc === pc) this.#fail(link, 'data channel closed');
    };
    channel.onmessage = (event: MessageEvent) => {
      link.activeAt = Date.now();
      this.#receive(link.peer, event.data);
    };
  }

  #receive(peer: string, data: unknown): void {
    let bytes: Uint8Array;
    if (data instanceof ArrayBuffer) bytes = new Uint8Array(data);
    else if (ArrayBuffer.isView(data)) bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    else {
      this.events.emit('error', new TransportError('malformed-chunk', `${peer} sent a text message on the data channel`, peer));
      return;
    }
    let envelope: Uint8Array | null;
    try {
      envelope = this.#reassembler.push(peer, bytes, Date.now());
    } catch (error) {
      if (error instanceof TransportError) return this.events.emit('error', error);
      throw error;
    }
    if (envelope === null) return;
    this.#stats.messagesIn++;
    this.#stats.bytesIn += envelope.byteLength;
    this.#envelopes.emit('envelope', peer, envelope);
  }

  #pump(link: Link): void {
    const channel = link.channel;
    if (channel === null || channel.readyState !== 'open') return;
    const high = this.#options.highWaterMark ?? 1024 * 1024;
    try {
      while (link.queue.length > 0 && channel.bufferedAmount <= high) {
        const head = link.queue[0]!;
        channel.send(encodeChunk(head.bytes, head.messageId, head.nextChunk, link.chunkSize));
        head.nextChunk++;
        if (head.nextChunk < chunkCount(head.bytes.byteLength, link.chunkSize)) continue;
        link.queue.shift();
        link.queuedBytes -= head.bytes.byteLength;
        this.#stats.messagesOut++;
        this.#stats.bytesOut += head.bytes.byteLength;
      }
    } catch (error) {
      this.#fail(link, `send failed: ${(error as Error).message}`);
    }
  }

  /**
   * The link broke: drop its connection and tell the caller. A link the engine addressed is
   * tried again later while the peer is in the room (once signalling is back, if it is
   * gone); one only the peer asked for is dropped, freeing its slot (the peer may ask again).
   */
  #fail(link: Link, why: string): void {
    if (link.state === 'failed' || link.state === 'closed') return;
    this.#teardown(link);
    if (this.#closed || this.#links.get(link.peer) !== link) return;
    this.events.emit('error', new TransportError('connection-failed', `link to ${link.peer} failed: ${why}`, link.peer));
    if (!link.addressed || !this.#signal.peers().includes(link.peer)) return this.#removePeer(link.peer);
    this.#setState(link, 'failed');
    if (this.#signal.closed) return;
    const base = this.#options.reconnectBaseMs ?? 250;
    const delay = Math.min(this.#options.reconnectMaxMs ?? 10_000, base * 2 ** link.attempts);
    link.attempts++;
    link.timer = setTimeout(() => {
      link.timer = null;
      if (this.#closed || this.#links.get(link.peer) !== link) return;
      if (this.#signal.peers().includes(link.peer)) this.#start(link);
      else this.#removePeer(link.peer);
    }, delay);
  }

  /** Closes the link's connection without events; a half-sent envelope restarts from its first chunk. */
  #teardown(link: Link): void {
    if (link.timer !== null) clearTimeout(link.timer);
    link.timer = null;
    const { pc, channel } = link;
    link.pc = null;
    link.channel = null;
    if (channel !== null) {
      channel.onopen = channel.onclose = channel.onmessage = channel.onbufferedamountlow = null;
      channel.close();
    }
    if (pc !== null) {
      pc.onicecandidate = pc.onconnectionstatechange = pc.ondatachannel = null;
      pc.close();
    }
    const head = link.queue[0];
    if (head !== undefined) head.nextChunk = 0;
    this.#reassembler.dropPeer(link.peer);
  }

  #setState(link: Link, state: PeerState): void {
    if (link.state === state) return;
    link.state = state;
    this.events.emit('state', link.peer, state);
  }

  #sendSignal(peer: string, data: LinkSignal): void {
    if (!this.#signal.closed) this.#signal.send(peer, data);
  }

  #expire(): void {
    for (const { peer, messageId } of this.#reassembler.expire(Date.now())) {
      this.events.emit('error', new TransportError('partial-timeout', `message ${messageId} from ${peer} was incomplete for ${this.#reassembler.partialTimeoutMs} ms; dropped`, peer));
    }
  }
}
