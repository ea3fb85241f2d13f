#!/usr/bin/env node
// Starts the bytesandbrains signalling server: npx bytesandbrains-signal --port 8787 --host 0.0.0.0
// Every limit is an option of SignalServer (docs/SECURITY.md lists them with their defaults).
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import { parseRoomPolicies } from '../dist/signal/index.js';
import { SignalServer } from '../dist/signal/node.js';

const USAGE = `usage: bytesandbrains-signal [--port 8787] [--host 127.0.0.1] [--policy FILE] [--closed]
  --policy FILE   room admission (JSON): {"openRooms": false, "rooms": {"<room>":
                  {"allow": {"<peer id>": "server"}, "operators": ["<base64 key>"]}}}
  --closed        rooms without a policy admit nobody (same as "openRooms": false)`;

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '8787' },
    host: { type: 'string', default: '127.0.0.1' },
    policy: { type: 'string' },
    closed: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`bytesandbrains-signal: --port ${values.port} is not a port number`);
  process.exit(2);
}
const options = { port, host: values.host };
try {
  if (values.policy !== undefined) Object.assign(options, parseRoomPolicies(JSON.parse(readFileSync(values.policy, 'utf8'))));
} catch (error) {
  console.error(`bytesandbrains-signal: --policy ${values.policy}: ${error.message}`);
  process.exit(2);
}
if (values.closed) options.openRooms = false;
try {
  const server = await SignalServer.listen(options);
  const { host, port: bound } = server.address;
  console.log(`bytesandbrains-signal listening on ws://${host.includes(':') ? `[${host}]` : host}:${bound}`);
  const stop = () => server.close().then(() => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
} catch (error) {
  console.error(`bytesandbrains-signal: cannot listen on ${values.host}:${port}: ${error.message}`);
  process.exit(1);
}
