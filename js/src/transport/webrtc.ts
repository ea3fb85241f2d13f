/**
 * WebRtcTransport: one ordered, reliable, binary RTCDataChannel per remote peer, set up
 * through a {@link SignalClient}. Envelopes are chunked (chunking.ts), sent under
 * back-pressure, and reassembled on the other side. The peer with the smaller id offers,
 * so two peers never offer to each other at once; it also drives reconnects.
 */
import type { SignalClient } from '../signal/client.js';
import { DEFAULT_CHUNK_SIZE, Reassembler, chunkCount, encodeChunk, type ReassemblyLimits } from './chunking.js';
import { Emitter } from './emitter.js';
import { TransportError } from './errors.js';
import type { PeerState, Transport, TransportEvents, TransportStats } from './types.js';

export type RTCPeerConnectionConstructor = new (config?: RTCConfiguration) => RTCPeerConnection;

export interface WebRtcTransportOptions {
  /** A joined signalling client; the transport owns it from now on and closes it on close(). */
  signal: SignalClient;
  /** Defaults to the browser's global, else `node-datachannel/polyfill` (imported lazily). */
  RTCPeerConnection?: RTCPeerConnectionConstructor;
  /** Passed to every RTCPeerConnection (node-datachannel also takes `bindAddress`). */
  rtcConfig?: RTCConfiguration & Record<string, unknown>;
  /** Largest chunk in bytes, header included (default 64 KiB; lowered to the remote maxMessageSize). */
  chunkSize?: number;
  /** Bytes of envelopes that may wait for one peer before send() throws `queue-full` (default 64 MiB). */
  maxQueuedBytes?: number;
  /** Stop handing chunks to the channel above this many buffered bytes (default 1 MiB)... */
  highWaterMark?: number;
  /** ...and resume once it drains below this (default 256 KiB). */
  lowWaterMark?: number;
  /** A link not open after this long counts as failed (default 15 s). */
  connectTimeoutMs?: number;
  /** First reconnect delay, doubled per failed attempt up to `reconnectMaxMs` (defaults 250 ms, 10 s). */
  reconnectBaseMs?: number;
  reconnectMaxMs?: number;
  reassembly?: ReassemblyLimits;
}

/** What signalling carries between two transports (JSON, off the hot path). */
type LinkSignal =
  | { kind: 'offer'; gen: number; sdp: string }
  | { kind: 'answer'; gen: number; sdp: string }
  | { kind: 'candidate'; gen: number; candidate: string; mid: string | null }
  /** From the answering side when its link failed: the offerer should start over. */
  | { kind: 'restart'; gen: number };

interface Outgoing {
  bytes: Uint8Array;
  messageId: number;
  nextChunk: number;
}

interface Link {
  peer: string;
  state: PeerState;
  gen: number;
  pc: RTCPeerConnection | null;
  channel: RTCDataChannel | null;
  chunkSize: number;
  remoteSet: boolean;
  pendingCandidates: RTCIceCandidateInit[];
  queue: Outgoing[];
  queuedBytes: number;
  attempts: number;
  timer: ReturnType<typeof setTimeout> | null;
}

async function defaultPeerConnection(): Promise<RTCPeerConnectionConstructor> {
  const global = (globalThis as { RTCPeerConnection?: unknown }).RTCPeerConnection;
  if (typeof global === 'function') return global as RTCPeerConnectionConstructor;
  const name = 'node-datachannel/polyfill'; // a variable specifier keeps bundlers from resolving it
  let mod: { RTCPeerConnection: unknown };
  try {
    mod = (await import(/* @vite-ignore */ name)) as { RTCPeerConnection: unknown };
  } catch (cause) {
    throw new Error(
      'WebRtcTransport: this runtime has no RTCPeerConnection, and node-datachannel is not installed: ' +
        'in Node run `npm install node-datachannel` (0.26 or later), or pass `RTCPeerConnection` in the options',
      { cause },
    );
  }
  return mod.RTCPeerConnection as RTCPeerConnectionConstructor;
}

export class WebRtcTransport implements Transport {
  readonly self: string;
  readonly events = new Emitter<TransportEvents>();
  readonly #envelopes = new Emitter<{ envelope: [from: string, bytes: Uint8Array] }>();
  readonly #signal: SignalClient;
  readonly #PC: RTCPeerConnectionConstructor;
  readonly #options: WebRtcTransportOptions;
  readonly #links = new Map<string, Link>();
  readonly #reassembler: Reassembler;
  readonly #expiry: ReturnType<typeof setInterval>;
  readonly #stats: TransportStats = { bytesOut: 0, bytesIn: 0, messagesOut: 0, messagesIn: 0 };
  readonly #unsubscribe: Array<() => void>;
  #nextMessageId = 0;
  #closed = false;

  private constructor(options: WebRtcTransportOptions, PC: RTCPeerConnectionConstructor) {
    this.#options = options;
    this.#signal = options.signal;
    this.#PC = PC;
    this.self = options.signal.self;
    this.#reassembler = new Reassembler(options.reassembly);
    this.#expiry = setInterval(() => this.#expire(), Math.max(100, this.#reassembler.partialTimeoutMs / 2));
    (this.#expiry as { unref?: () => void }).unref?.();
    this.#unsubscribe = [
      this.#signal.events.on('join', (peer) => this.#addPeer(peer)),
      this.#signal.events.on('leave', (peer) => this.#removePeer(peer)),
      this.#signal.events.on('signal', (from, data) => void this.#onSignal(from, data as LinkSignal)),
      this.#signal.events.on('close', () => this.close()),
    ];
    for (const peer of this.#signal.peers()) this.#addPeer(peer);
  }

  /** Starts linking to every peer in the signalling room, present and future. */
  static async create(options: WebRtcTransportOptions): Promise<WebRtcTransport> {
    const PC = options.RTCPeerConnection ?? (await defaultPeerConnection());
    return new WebRtcTransport(options, PC);
  }

  /**
   * Queues an envelope for `to` (copied; the caller may reuse `bytes`). Throws
   * `unknown-peer` when `to` is not in the room, `queue-full` when its queue is at its
   * bound, `closed` after close(). A peer still connecting gets it once its link opens.
   */
  send(to: string, bytes: Uint8Array): void {
    if (this.#closed) throw new TransportError('closed', 'the transport is closed', to);
    const link = this.#links.get(to);
    if (link === undefined) throw new TransportError('unknown-peer', `no peer ${to} in room ${this.#signal.room}`, to);
    const limit = this.#options.maxQueuedBytes ?? 64 * 1024 * 1024;
    if (link.queuedBytes + bytes.byteLength > limit) {
      throw new TransportError('queue-full', `${link.queuedBytes} bytes already wait for ${to}; ${bytes.byteLength} more would exceed ${limit}`, to);
    }
    link.queue.push({ bytes: bytes.slice(), messageId: this.#nextMessageId, nextChunk: 0 });
    this.#nextMessageId = (this.#nextMessageId + 1) >>> 0;
    link.queuedBytes += bytes.byteLength;
    this.#pump(link);
  }

  onEnvelope(handler: (from: string, bytes: Uint8Array) => void): () => void {
    return this.#envelopes.on('envelope', handler);
  }

  peers(): string[] {
    return [...this.#links.keys()];
  }

  /** Where the link to `peer` stands, or undefined for a peer not in the room. */
  state(peer: string): PeerState | undefined {
    return this.#links.get(peer)?.state;
  }

  /** Bytes of envelopes waiting for `peer` (not yet handed to its channel). */
  queuedBytes(peer: string): number {
    return this.#links.get(peer)?.queuedBytes ?? 0;
  }

  stats(): TransportStats {
    return { ...this.#stats };
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

  #addPeer(peer: string): void {
    if (this.#closed || this.#links.has(peer) || peer === this.self) return;
    const link: Link = {
      peer, state: 'closed', gen: 0, pc: null, channel: null, chunkSize: this.#options.chunkSize ?? DEFAULT_CHUNK_SIZE,
      remoteSet: false, pendingCandidates: [], queue: [], queuedBytes: 0, attempts: 0, timer: null,
    };
    this.#links.set(peer, link);
    this.#setState(link, 'connecting');
    if (this.#initiates(peer)) void this.#offer(link);
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

  #newConnection(link: Link): RTCPeerConnection {
    const pc = new this.#PC({ iceServers: [], ...this.#options.rtcConfig });
    const gen = link.gen;
    link.pc = pc;
    link.remoteSet = false;
    link.pendingCandidates = [];
    pc.onicecandidate = (event) => {
      if (event.candidate && link.pc === pc) {
        this.#sendSignal(link.peer, { kind: 'candidate', gen, candidate: event.candidate.candidate, mid: event.candidate.sdpMid });
      }
    };
    pc.onconnectionstatechange = () => {
      if (link.pc === pc && (pc.connectionState === 'failed' || pc.connectionState === 'closed')) this.#fail(link, `connection ${pc.connectionState}`);
    };
    link.timer = setTimeout(() => {
      if (link.pc === pc && link.state !== 'open') this.#fail(link, `not open after ${this.#options.connectTimeoutMs ?? 15_000} ms`);
    }, this.#options.connectTimeoutMs ?? 15_000);
    return pc;
  }

  async #offer(link: Link): Promise<void> {
    link.gen++;
    const pc = this.#newConnection(link);
    this.#wireChannel(link, pc, pc.createDataChannel('bb', { ordered: true }));
    try {
      const offer = await pc.createOffer();
      await pc.setLocalDescription(offer);
      if (link.pc === pc) this.#sendSignal(link.peer, { kind: 'offer', gen: link.gen, sdp: offer.sdp ?? '' });
    } catch (error) {
      if (link.pc === pc) this.#fail(link, `offer failed: ${(error as Error).message}`);
    }
  }

  async #onSignal(from: string, data: LinkSignal): Promise<void> {
    const link = this.#links.get(from);
    if (link === undefined || typeof data !== 'object' || data === null) return;
    try {
      if (data.kind === 'offer' && !this.#initiates(from)) {
        this.#teardown(link);
        link.gen = data.gen;
        this.#setState(link, 'connecting');
        const pc = this.#newConnection(link);
        pc.ondatachannel = (event) => this.#wireChannel(link, pc, event.channel);
        await pc.setRemoteDescription({ type: 'offer', sdp: data.sdp });
        await this.#remoteDescriptionSet(link, pc);
        const answer = await pc.createAnswer();
        await pc.setLocalDescription(answer);
        if (link.pc === pc) this.#sendSignal(from, { kind: 'answer', gen: data.gen, sdp: answer.sdp ?? '' });
      } else if (data.kind === 'answer' && data.gen === link.gen && link.pc !== null && !link.remoteSet) {
        const pc = link.pc;
        await pc.setRemoteDescription({ type: 'answer', sdp: data.sdp });
        await this.#remoteDescriptionSet(link, pc);
      } else if (data.kind === 'restart' && this.#initiates(from) && data.gen === link.gen && link.pc !== null) {
        this.#fail(link, `${from} lost the link`);
      } else if (data.kind === 'candidate' && data.gen === link.gen && link.pc !== null) {
        const candidate = { candidate: data.candidate, sdpMid: data.mid };
        if (link.remoteSet) await link.pc.addIceCandidate(candidate);
        else link.pendingCandidates.push(candidate);
      }
    } catch (error) {
      this.#fail(link, `signalling ${data.kind} failed: ${(error as Error).message}`);
    }
  }

  async #remoteDescriptionSet(link: Link, pc: RTCPeerConnection): Promise<void> {
    if (link.pc !== pc) return;
    link.remoteSet = true;
    for (const candidate of link.pendingCandidates.splice(0)) await pc.addIceCandidate(candidate);
  }

  #wireChannel(link: Link, pc: RTCPeerConnection, channel: RTCDataChannel): void {
    channel.binaryType = 'arraybuffer';
    channel.bufferedAmountLowThreshold = this.#options.lowWaterMark ?? 256 * 1024;
    channel.onopen = () => {
      if (link.pc !== pc) return;
      link.channel = channel;
      link.attempts = 0;
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
    channel.onmessage = (event: MessageEvent) => this.#receive(link.peer, event.data);
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

  /** The link broke: drop it, tell the caller, and (if we offer) try again later. */
  #fail(link: Link, why: string): void {
    if (link.pc === null && link.channel === null) return;
    this.#teardown(link);
    if (this.#closed || !this.#links.has(link.peer)) return;
    this.events.emit('error', new TransportError('connection-failed', `link to ${link.peer} failed: ${why}`, link.peer));
    this.#setState(link, 'failed');
    if (!this.#initiates(link.peer)) {
      // the offerer may not have noticed (a lost offer, a one-sided timeout): ask it to start over
      this.#sendSignal(link.peer, { kind: 'restart', gen: link.gen });
      return;
    }
    const base = this.#options.reconnectBaseMs ?? 250;
    const delay = Math.min(this.#options.reconnectMaxMs ?? 10_000, base * 2 ** link.attempts);
    link.attempts++;
    link.timer = setTimeout(() => {
      link.timer = null;
      if (this.#closed || this.#links.get(link.peer) !== link || !this.#signal.peers().includes(link.peer)) return;
      this.#setState(link, 'connecting');
      void this.#offer(link);
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
