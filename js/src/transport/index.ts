export { WebRtcTransport, type WebRtcTransportOptions, type SignalChannel, type SelectedPair } from './webrtc.js';
export { defaultPeerConnection, type RTCPeerConnectionConstructor, type PeerConnectionScope } from './peer-connection.js';
export { sdpSignedBytes, SDP_DOMAIN, SDP_NONCE_BYTES, type SdpKind } from './sdp-signature.js';
export { readSdp, SdpError, MAX_SDP_LENGTH, type StrictSdp } from './sdp.js';
export type { Transport, TransportEvents, TransportStats, PeerState } from './types.js';
export { TransportError, type TransportErrorCode } from './errors.js';
export { Emitter, type EventMap } from './emitter.js';
export {
  encodeChunk, encodeChunks, decodeChunkHeader, chunkCount,
  CHUNK_HEADER_BYTES, CHUNK_MAGIC, CHUNK_VERSION, DEFAULT_CHUNK_SIZE,
  type ChunkHeader,
} from './chunking.js';
export {
  Reassembler, ENGINE_MAX_ENVELOPE_BYTES, PARTIAL_OVERHEAD_BYTES, CHUNK_OVERHEAD_BYTES,
  type ReassemblyLimits, type EvictedPartial,
} from './reassembler.js';
