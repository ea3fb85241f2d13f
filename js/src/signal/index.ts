export { SignalClient, type SignalClientOptions, type SignalClientEvents, type WebSocketLike, type WebSocketConstructor } from './client.js';
export {
  SignalError, NAME_PATTERN, CLOSE_CODES, PEER_ROLES, JOIN_DOMAIN, CHALLENGE_BYTES, joinSignedBytes,
  type ClientMessage, type ServerMessage, type SignalErrorCode, type PeerRole,
} from './protocol.js';
export { admissionOf, createJoinToken, decodeJoinToken, verifyJoinToken, tokenSignedBytes, TOKEN_DOMAIN, TOKEN_MAGIC, TOKEN_VERSION, type JoinToken, type JoinTokenGrant } from './token.js';
export { admissionRefusal, parseRoomPolicies, policyOf, type RoomPolicy, type RoomPolicies, type AdmissionRequest } from './admission.js';
