/** The Node-only part of signalling: the server (it imports `ws`). */
export { SignalServer, type SignalServerOptions } from './server.js';
