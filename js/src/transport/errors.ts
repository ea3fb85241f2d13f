/** Why a transport or a chunk reassembler refused something. */
export type TransportErrorCode =
  | 'malformed-chunk'
  | 'duplicate-chunk'
  | 'inconsistent-chunk'
  | 'message-too-large'
  | 'too-many-partials'
  | 'partial-evicted'
  | 'link-limit'
  | 'partial-timeout'
  | 'queue-full'
  | 'unknown-peer'
  | 'closed'
  | 'connection-failed'
  | 'bad-signature'
  | 'link-idle'
  | 'signal-closed'
  | 'no-webrtc';

/** A failure of the transport layer; {@link code} says which, the message says which peer or byte. */
export class TransportError extends Error {
  override readonly name = 'TransportError';
  readonly code: TransportErrorCode;
  /** The remote peer concerned, when there is one. */
  readonly peer: string | undefined;

  constructor(code: TransportErrorCode, message: string, peer?: string) {
    super(message);
    this.code = code;
    this.peer = peer;
  }
}
