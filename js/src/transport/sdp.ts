/**
 * The one reading of an SDP that the signature check and the DTLS stack share. DTLS stacks
 * read `a=fingerprint` lines differently — libdatachannel splits lines at LF alone, trims
 * whitespace (space, tab, CR, form feed, vertical tab) from their ends and lets the first
 * media section's last fingerprint override the session's first; Chromium takes a media
 * section's last; Firefox accepts a certificate matching any of them — so an SDP that one
 * reader could take two ways is refused rather than read. What passes is a description of exactly one data
 * channel with exactly one fingerprint, in printable ASCII lines each ended by CR LF; the
 * transport hands that very string to setRemoteDescription.
 */

/** Longest SDP taken (a data-channel offer is under 1 KiB; signalling frames are at most 64 KiB). */
export const MAX_SDP_LENGTH = 32 * 1024;

/** Hashes a DTLS fingerprint may use, with their digest sizes in bytes. */
const FINGERPRINT_DIGEST_BYTES: Readonly<Record<string, number>> = { 'sha-256': 32, 'sha-384': 48, 'sha-512': 64 };
const FINGERPRINT_LINE = /^a=fingerprint:(sha-\d+) ((?:[0-9A-F]{2}:)*[0-9A-F]{2})$/;
const DATA_CHANNEL_SECTION = /^m=application \d{1,5} UDP\/DTLS\/SCTP webrtc-datachannel$/;
/** RFC 8866: `<type>=<value>`, the type one lower-case letter; here the value printable ASCII only. */
const SDP_LINE = /^[a-z]=[\x20-\x7e]*$/;

/** An SDP that passed {@link readSdp}, and the one DTLS fingerprint it declares. */
export interface StrictSdp {
  /** The description itself, unchanged: what the signature covers and setRemoteDescription gets. */
  readonly sdp: string;
  /** "<hash> <HEX:HEX:…>", e.g. "sha-256 AB:…", as the line writes it. */
  readonly fingerprint: string;
}

/** Why {@link readSdp} refused an SDP: which line broke which rule. */
export class SdpError extends Error {
  override readonly name = 'SdpError';
}

/**
 * Reads `sdp` strictly, or throws an {@link SdpError} saying why not: it must be at most
 * {@link MAX_SDP_LENGTH} characters of lines `<letter>=<printable ASCII>` each ended by
 * CR LF (no other control character anywhere, no bare CR or LF), with exactly one `m=`
 * line, a data channel's, and exactly one line mentioning a fingerprint in any case,
 * `a=fingerprint:<sha-256|sha-384|sha-512> <upper-case hex pairs joined by ':'>` of the
 * hash's size, nothing before or after.
 */
export function readSdp(sdp: unknown): StrictSdp {
  if (typeof sdp !== 'string') throw new SdpError('it is not a string');
  if (sdp.length > MAX_SDP_LENGTH) throw new SdpError(`it is ${sdp.length} characters long, above ${MAX_SDP_LENGTH}`);
  if (!sdp.endsWith('\r\n')) throw new SdpError('it does not end with CR LF');
  const lines = sdp.slice(0, -2).split('\r\n');
  let fingerprint: string | undefined;
  let sections = 0;
  lines.forEach((line, i) => {
    const where = `line ${i + 1}`;
    if (!SDP_LINE.test(line)) {
      const odd = /[^\x20-\x7e]/.exec(line);
      throw new SdpError(odd === null
        ? `${where} is not <lower-case letter>=<value>: ${JSON.stringify(line.slice(0, 80))}`
        : `${where} holds character U+${odd[0].charCodeAt(0).toString(16).padStart(4, '0').toUpperCase()} at column ${odd.index + 1} (only printable ASCII, lines ended by CR LF)`);
    }
    if (line.startsWith('m=')) {
      if (++sections > 1) throw new SdpError(`${where} opens a second media section (one data channel section only)`);
      if (!DATA_CHANNEL_SECTION.test(line)) throw new SdpError(`${where} is not a data channel section: ${JSON.stringify(line)}`);
    }
    if (!/fingerprint/i.test(line)) return;
    if (fingerprint !== undefined) throw new SdpError(`${where} declares a second fingerprint (exactly one is taken)`);
    const match = FINGERPRINT_LINE.exec(line);
    const bytes = match === null ? undefined : FINGERPRINT_DIGEST_BYTES[match[1]!];
    if (match === null || bytes === undefined || match[2]!.length !== bytes * 3 - 1) {
      throw new SdpError(`${where} is not a=fingerprint:<sha-256|sha-384|sha-512> <upper-case hex of the digest's size>: ${JSON.stringify(line.slice(0, 200))}`);
    }
    fingerprint = `${match[1]} ${match[2]}`;
  });
  if (sections === 0) throw new SdpError('it has no data channel section');
  if (fingerprint === undefined) throw new SdpError('it declares no DTLS fingerprint');
  return { sdp, fingerprint };
}
