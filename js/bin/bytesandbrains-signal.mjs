#!/usr/bin/env node
// Starts the bytesandbrains signalling server: npx bytesandbrains-signal --port 8787 --host 0.0.0.0
// Every limit is an option of SignalServer (docs/SECURITY.md lists them with their defaults).
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import { parseRoomPolicies } from '../dist/signal/index.js';
import { RedisRoomBus, SignalServer } from '../dist/signal/node.js';

const USAGE = `usage: bytesandbrains-signal [--port 8787] [--host 127.0.0.1] [--policy FILE] [--closed]
                            [--tls-cert FILE --tls-key FILE] [--ice-server URL]... [--turn-secret SECRET]
                            [--redis redis://HOST:PORT]
  --policy FILE        room admission (JSON): {"openRooms": false, "rooms": {"<room>":
                       {"allow": {"<peer id>": "server"}, "operators": ["<base64 key>"]}}}
  --closed             rooms without a policy admit nobody (same as "openRooms": false)
  --tls-cert, --tls-key  serve wss: with this PEM certificate chain and key
  --ice-server URL     a STUN or TURN server handed to every member (repeat for more);
                       turn:/turns: URLs need --turn-secret
  --turn-secret SECRET coturn's static-auth-secret: members get TURN credentials of their
                       own, valid for --turn-ttl seconds (default 3600)
  --redis URL          share rooms with every other signalling process given the same
                       Redis (needs the ioredis package): peers joined on any of them
                       see and signal each other; give them all the same --policy`;

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '8787' },
    host: { type: 'string', default: '127.0.0.1' },
    policy: { type: 'string' },
    closed: { type: 'boolean', default: false },
    'tls-cert': { type: 'string' },
    'tls-key': { type: 'string' },
    'ice-server': { type: 'string', multiple: true, default: [] },
    'turn-secret': { type: 'string' },
    'turn-ttl': { type: 'string', default: '3600' },
    redis: { type: 'string' },
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
// a failure handling a message closes only that socket; the operator hears of it here
const options = { port, host: values.host, onFault: (error) => console.error(`bytesandbrains-signal: a message's handling failed (its socket was closed): ${error?.stack ?? error}`) };
try {
  if (values.policy !== undefined) Object.assign(options, parseRoomPolicies(JSON.parse(readFileSync(values.policy, 'utf8'))));
} catch (error) {
  console.error(`bytesandbrains-signal: --policy ${values.policy}: ${error.message}`);
  process.exit(2);
}
if (values.closed) options.openRooms = false;
if ((values['tls-cert'] === undefined) !== (values['tls-key'] === undefined)) {
  console.error('bytesandbrains-signal: --tls-cert and --tls-key go together');
  process.exit(2);
}
if (values['tls-cert'] !== undefined) options.tls = { cert: readFileSync(values['tls-cert']), key: readFileSync(values['tls-key']) };
const turnUrls = values['ice-server'].filter((url) => /^turns?:/.test(url));
options.iceServers = values['ice-server'].filter((url) => !/^turns?:/.test(url)).map((urls) => ({ urls }));
if (turnUrls.length > 0 && values['turn-secret'] === undefined) {
  console.error('bytesandbrains-signal: TURN servers need --turn-secret (their static-auth-secret)');
  process.exit(2);
}
if (values['turn-secret'] !== undefined) {
  if (turnUrls.length === 0) {
    console.error('bytesandbrains-signal: --turn-secret needs a turn: URL in --ice-server');
    process.exit(2);
  }
  options.turn = { secret: values['turn-secret'], urls: turnUrls, ttlSeconds: Number(values['turn-ttl']) };
}
try {
  if (values.redis !== undefined) options.bus = await RedisRoomBus.connect({ url: values.redis });
} catch (error) {
  console.error(`bytesandbrains-signal: --redis ${values.redis}: ${error.message}`);
  process.exit(1);
}
try {
  const server = await SignalServer.listen(options);
  const { host, port: bound } = server.address;
  console.log(`bytesandbrains-signal listening on ${options.tls ? 'wss' : 'ws'}://${host.includes(':') ? `[${host}]` : host}:${bound}${options.bus ? `, sharing rooms through ${values.redis}` : ''}`);
  const stop = () => server.close().then(() => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
} catch (error) {
  console.error(`bytesandbrains-signal: cannot listen on ${values.host}:${port}: ${error.message}`);
  process.exit(1);
}
