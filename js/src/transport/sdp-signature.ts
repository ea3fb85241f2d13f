/**
 * Offers and answers signed by their sender's identity. What is signed is the set of DTLS
 * certificate fingerprints in the SDP: the data channel's DTLS handshake then proves that
 * the far end holds that certificate, so a verified signature ties the connection to the
 * peer id, and neither the signalling server nor anyone in the room can sit in between.
 */
import { concatBytes, fromBase64, lengthPrefixed, toBase64, utf8 } from '../identity/bytes.js';
import { verifySignature, type Signer } from '../identity/identity.js';
import { publicKeyFromPeerId } from '../identity/peer-id.js';

/** Domain of an SDP signature: no other signed message of this package starts this way. */
export const SDP_DOMAIN = 'bytesandbrains sdp v1';
/** Bytes of an offer's nonce, which the answer signs too. */
export const SDP_NONCE_BYTES = 16;

export type SdpKind = 'offer' | 'answer';

/**
 * The DTLS fingerprints an SDP declares (`a=fingerprint:` lines, session or media level),
 * each as "<hash> <HEX:HEX:…>" with the hash in lower case and the hex in upper case,
 * without duplicates, sorted.
 */
export function dtlsFingerprints(sdp: string): string[] {
  const found = new Set<string>();
  for (const match of sdp.matchAll(/^a=fingerprint:(\S+)[ \t]+([0-9A-Fa-f:]+)[ \t]*\r?$/gm)) {
    found.add(`${match[1]!.toLowerCase()} ${match[2]!.toUpperCase()}`);
  }
  return [...found].sort();
}

/**
 * What an offer or answer signs: the domain and a NUL, then the kind, the sender's and
 * the receiver's peer ids, the offer's nonce and the fingerprints joined by "\n", each
 * after its length as a little-endian u16.
 */
export function sdpSignedBytes(kind: SdpKind, fingerprints: readonly string[], from: string, to: string, nonce: Uint8Array): Uint8Array {
  return concatBytes(
    utf8(SDP_DOMAIN), Uint8Array.of(0),
    lengthPrefixed(utf8(kind)), lengthPrefixed(utf8(from)), lengthPrefixed(utf8(to)), lengthPrefixed(nonce), lengthPrefixed(utf8(fingerprints.join('\n'))),
  );
}

/** The base64 signature of `sdp` from `signer` to `to`. */
export async function signSdp(signer: Signer, kind: SdpKind, sdp: string, to: string, nonce: Uint8Array): Promise<string> {
  const fingerprints = dtlsFingerprints(sdp);
  if (fingerprints.length === 0) throw new Error(`our ${kind} has no DTLS fingerprint to sign`);
  return toBase64(await signer.sign(sdpSignedBytes(kind, fingerprints, signer.peerId, to, nonce)));
}

/** Null when `signature` is `from`'s over this SDP to `to`; else why not. */
export async function sdpRefusal(kind: SdpKind, sdp: unknown, from: string, to: string, nonce: Uint8Array, signature: unknown): Promise<string | null> {
  if (typeof sdp !== 'string') return `the ${kind} carries no SDP`;
  const key = publicKeyFromPeerId(from);
  if (key === null) return `${from} is not a peer id bound to an Ed25519 key`;
  const sig = fromBase64(signature, 64);
  if (sig === null) return `the ${kind} carries no 64-byte signature`;
  const fingerprints = dtlsFingerprints(sdp);
  if (fingerprints.length === 0) return `the ${kind} declares no DTLS fingerprint`;
  const valid = await verifySignature(key, sdpSignedBytes(kind, fingerprints, from, to, nonce), sig);
  return valid ? null : `the ${kind}'s signature does not verify with ${from}'s key over its DTLS fingerprints`;
}
