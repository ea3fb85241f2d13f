/**
 * Byte helpers for what gets signed: UTF-8, base64 (standard and URL-safe) and the
 * length-prefixed concatenation every signed message of this package is built from, so two
 * different field lists can never produce the same bytes.
 */

const encoder = new TextEncoder();

/** The UTF-8 bytes of `text`. */
export function utf8(text: string): Uint8Array {
  return encoder.encode(text);
}

/** `parts` back to back. */
export function concatBytes(...parts: Uint8Array[]): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.byteLength, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.byteLength;
  }
  return out;
}

/** `bytes` after its length as a little-endian u16; throws past 65,535 bytes. */
export function lengthPrefixed(bytes: Uint8Array): Uint8Array {
  if (bytes.byteLength > 0xffff) throw new RangeError(`a signed field of ${bytes.byteLength} bytes exceeds 65,535`);
  const out = new Uint8Array(2 + bytes.byteLength);
  out[0] = bytes.byteLength & 0xff;
  out[1] = bytes.byteLength >>> 8;
  out.set(bytes, 2);
  return out;
}

export function toBase64(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

/** Base64 without padding, `-` and `_` for `+` and `/` (RFC 4648 §5): safe in URLs. */
export function toBase64Url(bytes: Uint8Array): string {
  return toBase64(bytes).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/**
 * Decodes base64 or base64url (padding optional); null when `text` is not one, or when
 * it does not decode to `length` bytes (if given).
 */
export function fromBase64(text: unknown, length?: number): Uint8Array<ArrayBuffer> | null {
  if (typeof text !== 'string' || !/^[A-Za-z0-9+/_-]*={0,2}$/.test(text) || text.length > 1 << 20) return null;
  const standard = text.replace(/-/g, '+').replace(/_/g, '/').replace(/=+$/, '');
  if (standard.length % 4 === 1) return null;
  let binary: string;
  try {
    binary = atob(standard + '='.repeat((4 - (standard.length % 4)) % 4));
  } catch {
    return null;
  }
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return length === undefined || bytes.byteLength === length ? bytes : null;
}

/** Constant-time comparison (both lengths are public). */
export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  let diff = 0;
  for (let i = 0; i < a.byteLength; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

/** `length` bytes from the platform's cryptographic generator. */
export function randomBytes(length: number): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(length);
  crypto.getRandomValues(bytes);
  return bytes;
}
