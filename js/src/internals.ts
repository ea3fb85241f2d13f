/**
 * bytesandbrains/internals: what tools that look inside the engine's bytes need and an app
 * does not — the ABI of bb.wasm, the codecs of values, envelopes and saved nodes, the
 * artifact inspector (the web demo draws programs with it), dtype codes and the step
 * parser. These follow the wire format (docs/WIRE.md), not the app API's stability.
 */
export { BB_WASM_ABI_VERSION, type BbExports } from './engine/abi.js';
export { dtypeCode, dtypeFromCode } from './engine/dtype.js';
export { parseSteps } from './node/node.js';
export {
  base58Decode,
  base58Encode,
  decodeValue,
  decodeValueList,
  encodeValue,
  encodeValueList,
  kindHash,
  kindOfHash,
  peerIdBytes,
  typeHash,
  type AddressSegment,
} from './node/values.js';
export { addressPeer, decodeEnvelope, ENVELOPE_CAPS, ENVELOPE_SCHEMA_VERSION, parseAddress, type CorrelationKind, type Envelope, type EnvelopeFill } from './node/envelope.js';
export {
  ARTIFACT_KEYS,
  inspectArtifact,
  partitionBindings,
  wireId,
  type ArtifactFunction,
  type ArtifactInspection,
  type ArtifactNode,
  type ArtifactWire,
  type PartitionBinding,
  type WireDeclaration,
  type WireRecv,
} from './node/artifact.js';
export { artifactSha256, decodeSavedNode, encodeSavedNode } from './phones/resume.js';
