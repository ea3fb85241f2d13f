/**
 * Reads a WireEnvelope (docs/WIRE.md) — the bytes of a `send` step, or what a transport
 * delivered — to see what it carries: for whom, which wires or component ops it fills,
 * the type and size of each payload. For showing and counting traffic; the node itself
 * decodes envelopes in C (`deliver`), with the same caps and the same schema versions.
 *
 * ```ts
 * const wires = inspectArtifact(artifact).wires;
 * node.onStep((step) => {
 *   if (step.kind !== 'send') return;
 *   const envelope = decodeEnvelope(step.bytes!);
 *   for (const fill of envelope.fills) console.log(wires.get(fill.site!)?.name ?? fill.op, fill.payload.length);
 * });
 * ```
 */
import { BbError, BbErrorCode } from '../engine/errors.js';
import { protoBytes, protoFields, protoNumber, type ProtoField } from '../engine/protobuf.js';
import { base58Encode, type AddressSegment } from './values.js';

/** The caps the engine's envelope decoder (bb_envelope_decode) applies by default. */
export const ENVELOPE_CAPS = {
  bytes: 16 * 1024 * 1024,
  fills: 64,
  destSuffixBytes: 256,
  addressesPerList: 16,
  addressBytes: 512,
  rttReports: 64,
} as const;

/**
 * The schema_version the engine writes and the highest this reader accepts
 * (BB_ENVELOPE_SCHEMA_VERSION): in it, a data fill's `/site/<n>` is the id of the wire it
 * travels on (`wireId` of the wire's name).
 * Versions 1 and 0 (the field left out) numbered sites by their position in the sender's
 * artifact; they still decode, but nodes refuse them and their sites name no wire.
 */
export const ENVELOPE_SCHEMA_VERSION = 2;

/** One value (or protocol message) an envelope carries. */
export interface EnvelopeFill {
  /** Where it lands on the receiver: `/site/<id>` for data, `/component/<ref>/op/<name>` for a protocol message. */
  readonly destination: readonly AddressSegment[];
  /**
   * For data fills, the `/site/<n>` segment: the id of the wire the value travels on
   * (`ArtifactInspection.wires` maps it to the wire) when the envelope's schemaVersion is
   * ENVELOPE_SCHEMA_VERSION; a position in the sender's artifact in versions 1 and 0.
   */
  readonly site?: bigint;
  /** The component and op, for protocol messages. */
  readonly component?: number;
  readonly op?: string;
  /** SlotFill.type_hash: the value's kind (kindOfHash), 0 when none. */
  readonly typeHash: bigint;
  readonly triggerOnly: boolean;
  /** The payload's bytes (a view into the envelope). */
  readonly payload: Uint8Array;
}

export type CorrelationKind = 'none' | 'request' | 'response';

export interface Envelope {
  /** The destination peer's addresses (in practice one `/p2p/<peer>`). */
  readonly to: readonly (readonly AddressSegment[])[];
  /** The sender's own addresses. */
  readonly from: readonly (readonly AddressSegment[])[];
  readonly fills: readonly EnvelopeFill[];
  readonly correlation?: { readonly kind: CorrelationKind; readonly requestId: bigint };
  /** Relative deadline left when it was sent, 0n for none. */
  readonly remainingDeadlineNs: bigint;
  /** 2 (ENVELOPE_SCHEMA_VERSION), or 1 or 0 for an envelope whose sites are positions. */
  readonly schemaVersion: number;
  /** The envelope's size. */
  readonly bytes: number;
}

const CORRELATION_KINDS: readonly CorrelationKind[] = ['none', 'request', 'response'];

/**
 * Decodes an envelope; a BbError names what was wrong and where: Malformed or Limit as the
 * C decoder has them, Unsupported for a schema_version above ENVELOPE_SCHEMA_VERSION.
 */
export function decodeEnvelope(bytes: Uint8Array): Envelope {
  if (bytes.length > ENVELOPE_CAPS.bytes) {
    throw new BbError(BbErrorCode.Limit, `envelope buffer too large: cap=${ENVELOPE_CAPS.bytes} got=${bytes.length}`);
  }
  const to: AddressSegment[][] = [];
  const from: AddressSegment[][] = [];
  const fills: EnvelopeFill[] = [];
  let correlation: Envelope['correlation'];
  let remainingDeadlineNs = 0n;
  let schemaVersion = 0;
  let rttReports = 0;
  for (const f of protoFields(bytes, 'envelope')) {
    switch (f.field) {
      case 1:
        to.push(addressField(f, to.length, 'dest_peer_addresses'));
        break;
      case 2:
        if (fills.length >= ENVELOPE_CAPS.fills) throw new BbError(BbErrorCode.Limit, `envelope carries too many slot fills (cap ${ENVELOPE_CAPS.fills})`);
        fills.push(slotFill(f));
        break;
      case 3:
        correlation = correlationOf(f);
        break;
      case 4:
        remainingDeadlineNs = protoNumber(f, 'envelope remaining_deadline_ns');
        break;
      case 5:
        protoBytes(f, 'envelope edge_rtt_reports');
        if (++rttReports > ENVELOPE_CAPS.rttReports) throw new BbError(BbErrorCode.Limit, `envelope carries too many RTT reports (cap ${ENVELOPE_CAPS.rttReports})`);
        break;
      case 7: {
        const version = protoNumber(f, 'envelope schema_version');
        if (version > BigInt(ENVELOPE_SCHEMA_VERSION)) {
          throw new BbError(BbErrorCode.Unsupported, `envelope schema_version mismatch: got=${version} supported=[1,${ENVELOPE_SCHEMA_VERSION}]`);
        }
        schemaVersion = Number(version);
        break;
      }
      case 8:
        from.push(addressField(f, from.length, 'src_peer_addresses'));
        break;
      default:
        break; // unknown fields (and the unused src_peer_bytes) are skipped, as proto3 does
    }
  }
  return { to, from, fills, ...(correlation === undefined ? {} : { correlation }), remainingDeadlineNs, schemaVersion, bytes: bytes.length };
}

/** The peer of an address list's first `/p2p` segment (an envelope's `to` or `from`). */
export function addressPeer(addresses: readonly (readonly AddressSegment[])[]): string | undefined {
  for (const address of addresses) for (const segment of address) if ('p2p' in segment) return segment.p2p;
  return undefined;
}

function addressField(f: ProtoField, count: number, what: string): AddressSegment[] {
  if (count >= ENVELOPE_CAPS.addressesPerList) throw new BbError(BbErrorCode.Limit, `envelope ${what}: more than ${ENVELOPE_CAPS.addressesPerList} addresses`);
  const bytes = protoBytes(f, `envelope ${what}`);
  if (bytes.length > ENVELOPE_CAPS.addressBytes) throw new BbError(BbErrorCode.Limit, `envelope ${what}: an address of ${bytes.length} bytes (cap ${ENVELOPE_CAPS.addressBytes})`);
  return parseAddress(bytes, `envelope ${what} at byte ${f.at}`);
}

function slotFill(f: ProtoField): EnvelopeFill {
  const message = protoBytes(f, 'envelope fills');
  let destination: AddressSegment[] = [];
  let payload: Uint8Array = new Uint8Array(0);
  let triggerOnly = false;
  let typeHash = 0n;
  for (const g of protoFields(message, 'slot fill', f.at)) {
    if (g.field === 1) {
      const suffix = protoBytes(g, 'slot fill dest_suffix');
      if (suffix.length > ENVELOPE_CAPS.destSuffixBytes) {
        throw new BbError(BbErrorCode.Limit, `slot fill dest_suffix exceeds cap: cap=${ENVELOPE_CAPS.destSuffixBytes} got=${suffix.length}`);
      }
      destination = parseAddress(suffix, `slot fill dest_suffix at byte ${g.at}`);
    } else if (g.field === 2) payload = protoBytes(g, 'slot fill payload');
    else if (g.field === 3) triggerOnly = protoNumber(g, 'slot fill trigger_only') !== 0n;
    else if (g.field === 4) typeHash = protoNumber(g, 'slot fill type_hash');
  }
  let site: bigint | undefined;
  let component: number | undefined;
  let op: string | undefined;
  for (const segment of destination) {
    if ('site' in segment) site = segment.site;
    else if ('component' in segment) component = segment.component;
    else if ('op' in segment) op = segment.op;
  }
  return {
    destination,
    ...(site === undefined ? {} : { site }),
    ...(component === undefined ? {} : { component }),
    ...(op === undefined ? {} : { op }),
    typeHash,
    triggerOnly,
    payload,
  };
}

function correlationOf(f: ProtoField): Envelope['correlation'] {
  let kind: CorrelationKind = 'none';
  let requestId = 0n;
  for (const g of protoFields(protoBytes(f, 'envelope correlation'), 'correlation', f.at)) {
    if (g.field === 1) {
      const code = Number(protoNumber(g, 'correlation kind'));
      const known = CORRELATION_KINDS[code];
      if (known === undefined) throw new BbError(BbErrorCode.Malformed, `correlation kind ${code} at byte ${g.at} is not NONE, REQUEST or RESPONSE`);
      kind = known;
    } else if (g.field === 2) requestId = protoNumber(g, 'correlation wire_req_id');
  }
  return { kind, requestId };
}

// ---- addresses in byte form (docs/WIRE.md, "Addresses") ----------------------------------

const P2P = 421;
const SITE = 0xe2;
const COMPONENT = 0xe3;
const OP = 0xe4;
const MAX_SEGMENTS = 8;
const MAX_OP_BYTES = 255;
const MAX_MULTIHASH_BYTES = 76;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** An address's segments (`/p2p/<id>/site/<n>/...`); unknown protocols and cut payloads are Malformed. */
export function parseAddress(bytes: Uint8Array, what = 'address'): AddressSegment[] {
  const segments: AddressSegment[] = [];
  let at = 0;
  const fail = (why: string): never => {
    throw new BbError(BbErrorCode.Malformed, `${what}: ${why} (offset ${at} of ${bytes.length})`);
  };
  const varint = (): number => {
    let value = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      if (at >= bytes.length) fail('a varint is cut short');
      const byte = bytes[at++]!;
      if (shift > 0 && byte === 0) fail('a varint is not minimal');
      value += (byte & 0x7f) * 2 ** shift;
      if ((byte & 0x80) === 0) return value;
    }
    return fail('a varint is too long');
  };
  const take = (n: number): Uint8Array => {
    if (bytes.length - at < n) fail(`${n} bytes needed, ${bytes.length - at} left`);
    const out = bytes.subarray(at, at + n);
    at += n;
    return out;
  };
  while (at < bytes.length) {
    if (segments.length >= MAX_SEGMENTS) fail(`more than ${MAX_SEGMENTS} segments`);
    const code = varint();
    if (code === P2P) {
      const length = varint();
      if (length > MAX_MULTIHASH_BYTES) fail(`a peer id of ${length} bytes`);
      segments.push({ p2p: base58Encode(take(length)) });
    } else if (code === SITE) {
      const b = take(8);
      segments.push({ site: new DataView(b.buffer, b.byteOffset, 8).getBigUint64(0, false) });
    } else if (code === COMPONENT) {
      const b = take(4);
      segments.push({ component: new DataView(b.buffer, b.byteOffset, 4).getUint32(0, false) });
    } else if (code === OP) {
      const length = varint();
      if (length > MAX_OP_BYTES) fail(`an op name of ${length} bytes`);
      try {
        segments.push({ op: utf8.decode(take(length)) });
      } catch (error) {
        if (error instanceof BbError) throw error;
        fail('an op name is not UTF-8');
      }
    } else fail(`unknown protocol code ${code}`);
  }
  return segments;
}
