/** The Node-only part of signalling: the server (it imports `ws`). */
export { SignalServer, SIGNAL_SERVER_DEFAULTS, PRESENCE_PAGE_PEERS, REPLY_RESERVE_BYTES, type SignalServerOptions, type SignalServerStats } from './server.js';
export { turnCredentials, DEFAULT_TURN_TTL_SECONDS, type TurnOptions } from './turn.js';
export { RedisRoomBus, type RedisRoomBusOptions } from './redis.js';
export type { RoomBus, RoomBusHandlers, RemoteMember } from './bus.js';
