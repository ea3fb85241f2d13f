export { SignalClient, type SignalClientOptions, type SignalClientEvents, type WebSocketLike, type WebSocketConstructor } from './client.js';
export { SignalError, NAME_PATTERN, type ClientMessage, type ServerMessage, type SignalErrorCode } from './protocol.js';
