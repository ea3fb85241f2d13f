/**
 * Offers and answers signed by their sender's identity. What is signed is the whole SDP,
 * after it passed the strict reading of sdp.ts: the receiver hands that very string to
 * setRemoteDescription, and the data channel's DTLS handshake then proves that the far end
 * holds the certificate of its one fingerprint. A verified signature so ties the connection
 * to the peer id, and neither the signalling server nor anyone in the room can sit in
 * between: changing any byte of the SDP breaks the signature, and no SDP whose fingerprint
 * two DTLS stacks could read differently is signed or taken.
 */
import { concatBytes, fromBase64, lengthPrefixed, toBase64, utf8 } from '../identity/bytes.js';
import { verifySignature, type Signer } from '../identity/identity.js';
import { publicKeyFromPeerId } from '../identity/peer-id.js';
import { readSdp, SdpError } from './sdp.js';

/** Domain of an SDP signature: no other signed message of this package starts this way. */
export const SDP_DOMAIN = 'bytesandbrains sdp v2';
/** Bytes of an offer's nonce, which the answer signs too. */
export const SDP_NONCE_BYTES = 16;

export type SdpKind = 'offer' | 'answer';

/**
 * What an offer or answer signs: the domain and a NUL, then the kind, the sender's and
 * the receiver's peer ids, the offer's nonce and the SDP, each after its length as a
 * little-endian u16.
 */
export function sdpSignedBytes(kind: SdpKind, sdp: string, from: string, to: string, nonce: Uint8Array): Uint8Array {
  return concatBytes(
    utf8(SDP_DOMAIN), Uint8Array.of(0),
    lengthPrefixed(utf8(kind)), lengthPrefixed(utf8(from)), lengthPrefixed(utf8(to)), lengthPrefixed(nonce), lengthPrefixed(utf8(sdp)),
  );
}

/** The base64 signature of `sdp` from `signer` to `to`; throws when our own SDP does not pass the strict reading. */
export async function signSdp(signer: Signer, kind: SdpKind, sdp: string, to: string, nonce: Uint8Array): Promise<string> {
  try {
    readSdp(sdp);
  } catch (error) {
    if (error instanceof SdpError) throw new Error(`our ${kind}'s SDP cannot be signed: ${error.message}`);
    throw error;
  }
  return toBase64(await signer.sign(sdpSignedBytes(kind, sdp, signer.peerId, to, nonce)));
}

/** Null when `sdp` passes the strict reading and `signature` is `from`'s over it to `to`; else why not. */
export async function sdpRefusal(kind: SdpKind, sdp: unknown, from: string, to: string, nonce: Uint8Array, signature: unknown): Promise<string | null> {
  let checked: string;
  try {
    checked = readSdp(sdp).sdp;
  } catch (error) {
    if (error instanceof SdpError) return `the ${kind}'s SDP is refused: ${error.message}`;
    throw error;
  }
  const key = publicKeyFromPeerId(from);
  if (key === null) return `${from} is not a peer id bound to an Ed25519 key`;
  const sig = fromBase64(signature, 64);
  if (sig === null) return `the ${kind} carries no 64-byte signature`;
  const valid = await verifySignature(key, sdpSignedBytes(kind, checked, from, to, nonce), sig);
  return valid ? null : `the ${kind}'s signature does not verify with ${from}'s key over its SDP`;
}
