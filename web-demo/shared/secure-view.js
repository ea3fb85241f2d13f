// What the server of a secure federation (SecAgg+) sees, read off the envelopes it gets, by
// the wire format docs/WIRE.md gives ("Secure aggregation messages"): FedAvg carries SecAgg+
// messages as control-plane fills (op SecAggServer / SecAggClient), each payload a u64 FedAvg
// round then the message — a 26-byte header (magic "BBSA", version, type, round id, index)
// and its body. The setup (type 1) names the ring's modulus bits; a masked input (type 6) is
// `u32 vector_len` ring elements of ⌈modulus_bits / 8⌉ bytes, little-endian. Plain
// JavaScript with JSDoc types, for serve.mjs and the tests.

const MAGIC = [0x42, 0x42, 0x53, 0x41];
const HEADER = 26;
/** Ring elements kept of a masked vector (evenly spaced), and of the step beside it. */
export const SAMPLE = 256;

/**
 * The FedAvg round and SecAgg+ message type of a SecAgg fill's payload; undefined when it
 * is not one.
 * @param {Uint8Array} payload
 * @returns {{ round: number, type: number, body: DataView } | undefined}
 */
export function secaggMessage(payload) {
  if (payload.length < 8 + HEADER || MAGIC.some((b, i) => payload[8 + i] !== b)) return undefined;
  const view = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  return { round: Number(view.getBigUint64(0, true)), type: payload[8 + 5], body: new DataView(payload.buffer, payload.byteOffset + 8 + HEADER, payload.length - 8 - HEADER) };
}

/**
 * The ring's modulus bits a setup (type 1) names: after n_clients, degree, threshold,
 * min_clients and vector_len. Undefined for another message.
 * @param {ReturnType<typeof secaggMessage>} message
 */
export function setupModulusBits(message) {
  if (message === undefined || message.type !== 1 || message.body.byteLength < 24) return undefined;
  const bits = message.body.getUint32(20, true);
  return bits >= 1 && bits <= 64 ? bits : undefined;
}

/**
 * The indices a vector of `length` is sampled at: SAMPLE evenly spaced (all, when fewer).
 * @param {number} length
 */
export function sampleIndices(length) {
  const n = Math.min(SAMPLE, length);
  return Array.from({ length: n }, (_, i) => Math.floor((i * length) / n));
}

/**
 * A masked input's (type 6) ring elements, each over the modulus (so in [0, 1)), at the
 * sample indices of the model's elements (all but the last, the update's weight).
 * Undefined for another message or one whose body does not fit the modulus.
 * @param {ReturnType<typeof secaggMessage>} message
 * @param {number} modulusBits
 * @returns {number[] | undefined}
 */
export function maskedSample(message, modulusBits) {
  if (message === undefined || message.type !== 6 || message.body.byteLength < 4) return undefined;
  const count = message.body.getUint32(0, true);
  const width = Math.ceil(modulusBits / 8);
  const length = count - 1;
  if (length < 1 || message.body.byteLength !== 4 + count * width) return undefined;
  const scale = 2 ** modulusBits;
  return sampleIndices(length).map((i) => {
    let value = 0;
    for (let b = width - 1; b >= 0; b--) value = value * 256 + message.body.getUint8(4 + i * width + b);
    // four decimals, rounded down: the ring's top elements stay below 1 (rounding to
    // nearest would show 2^bits - 1 as 1.0000)
    return Math.min(Math.floor((value / scale) * 1e4), 9999) / 1e4;
  });
}
