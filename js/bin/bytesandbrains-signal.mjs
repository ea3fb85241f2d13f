#!/usr/bin/env node
// Starts the bytesandbrains signalling server: npx bytesandbrains-signal --port 8787 --host 0.0.0.0
import { parseArgs } from 'node:util';
import { SignalServer } from '../dist/signal/node.js';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '8787' },
    host: { type: 'string', default: '127.0.0.1' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  console.log('usage: bytesandbrains-signal [--port 8787] [--host 127.0.0.1]');
  process.exit(0);
}
const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`bytesandbrains-signal: --port ${values.port} is not a port number`);
  process.exit(2);
}
try {
  const server = await SignalServer.listen({ port, host: values.host });
  const { host, port: bound } = server.address;
  console.log(`bytesandbrains-signal listening on ws://${host.includes(':') ? `[${host}]` : host}:${bound}`);
  const stop = () => server.close().then(() => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
} catch (error) {
  console.error(`bytesandbrains-signal: cannot listen on ${values.host}:${port}: ${error.message}`);
  process.exit(1);
}
