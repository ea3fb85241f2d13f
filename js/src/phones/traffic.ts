/**
 * What a node sent and received, from its counters: envelope bytes on the wire both ways
 * (every envelope a poll handed out to send, every one `deliver` accepted), and what its
 * codec encoded and decoded. A server reports it per round (RoundReport.bytesIn/bytesOut);
 * a client reads it whenever it likes.
 *
 * ```ts
 * const before = trafficOf(node);
 * // ... a round ...
 * const upload = trafficOf(node).bytesSent - before.bytesSent;
 * ```
 */
import type { BbNode } from '../node/node.js';

export interface Traffic {
  /** Bytes of the envelopes handed out to send (`send.bytes`). */
  readonly bytesSent: number;
  /** Bytes of the envelopes `deliver` accepted (`wire.bytes_received`). */
  readonly bytesReceived: number;
  /** Envelopes of wire sends queued (`send.envelopes`; control messages not counted). */
  readonly envelopesSent: number;
  /** Envelopes `deliver` accepted (`wire.envelopes_received`). */
  readonly envelopesReceived: number;
  /** Bytes the node's codec produced (`codec.bytes_encoded`): the compressed updates. */
  readonly encodedBytes: number;
  /** Bytes the node's codec took in and decoded (`codec.bytes_decoded`). */
  readonly decodedBytes: number;
  /** Encodings the codec refused (`codec.refused_*`, all reasons). */
  readonly codecRefused: number;
}

/** The codec's refusal counters, by reason (docs/COMPONENTS.md, "Codecs"). */
export const CODEC_REFUSALS = ['length', 'count', 'index', 'nonfinite', 'reference'] as const;

export function trafficOf(node: BbNode): Traffic {
  const count = (name: string): number => Number(node.counter(name));
  return {
    bytesSent: count('send.bytes'),
    bytesReceived: count('wire.bytes_received'),
    envelopesSent: count('send.envelopes'),
    envelopesReceived: count('wire.envelopes_received'),
    encodedBytes: count('codec.bytes_encoded'),
    decodedBytes: count('codec.bytes_decoded'),
    codecRefused: CODEC_REFUSALS.reduce((sum, reason) => sum + count(`codec.refused_${reason}`), 0),
  };
}
