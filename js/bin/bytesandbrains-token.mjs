#!/usr/bin/env node
// Operator keys and join tokens for rooms that admit by token (docs/SECURITY.md):
//   bytesandbrains-token keygen --out operator.key
//   bytesandbrains-token issue --key operator.key --peer <peer id> --room <room> [--role client|server|watcher] [--ttl 24h | --expires <unix s>]
//   bytesandbrains-token inspect <token>
import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';

import { toBase64, verifySignature } from '../dist/identity/index.js';
import { loadIdentityFile } from '../dist/identity/node.js';
import { createJoinToken, decodeJoinToken, tokenSignedBytes } from '../dist/signal/index.js';

const USAGE = `usage:
  bytesandbrains-token keygen --out FILE
      makes an operator key (a 68-byte file, mode 0600); prints its public key for the
      signalling server's room policy
  bytesandbrains-token issue --key FILE --peer ID --room ROOM [--role client|server|watcher] [--ttl 24h | --expires UNIX_SECONDS]
      prints a join token admitting ID to ROOM in ROLE (default client) until the expiry
      (default 24 hours from now; --ttl takes s, m, h or d)
  bytesandbrains-token inspect TOKEN
      prints what a token says and whether its signature verifies with the key it names`;

function fail(message) {
  console.error(`bytesandbrains-token: ${message}`);
  process.exit(2);
}

function seconds(ttl) {
  const match = /^(\d+)([smhd]?)$/.exec(ttl);
  if (match === null) fail(`--ttl ${ttl} is not a duration like 90s, 30m, 24h or 7d`);
  return Number(match[1]) * { '': 1, s: 1, m: 60, h: 3600, d: 86400 }[match[2]];
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    out: { type: 'string' },
    key: { type: 'string' },
    peer: { type: 'string' },
    room: { type: 'string' },
    role: { type: 'string', default: 'client' },
    ttl: { type: 'string' },
    expires: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
const [command, argument] = positionals;
if (values.help || command === undefined) {
  console.log(USAGE);
  process.exit(values.help ? 0 : 2);
}

try {
  if (command === 'keygen') {
    if (values.out === undefined) fail('keygen needs --out FILE');
    if (existsSync(values.out)) fail(`${values.out} exists: an operator key is never overwritten`);
    const operator = await loadIdentityFile(values.out);
    console.log(`operator key written to ${values.out} (keep it secret)`);
    console.log(`public key (base64): ${toBase64(operator.publicKey)}`);
    console.log(`peer id: ${operator.peerId}`);
  } else if (command === 'issue') {
    for (const name of ['key', 'peer', 'room']) if (values[name] === undefined) fail(`issue needs --${name}`);
    if (!existsSync(values.key)) fail(`no operator key at ${values.key} (make one with keygen)`);
    if (values.ttl !== undefined && values.expires !== undefined) fail('give --ttl or --expires, not both');
    const expiresAt = values.expires !== undefined ? Number(values.expires) : Math.floor(Date.now() / 1000) + seconds(values.ttl ?? '24h');
    const operator = await loadIdentityFile(values.key);
    console.log(await createJoinToken(operator, { peer: values.peer, room: values.room, role: values.role, expiresAt }));
  } else if (command === 'inspect') {
    const decoded = decodeJoinToken(argument);
    if (decoded === null) fail('that is not a well-formed join token');
    const { token, body, signature } = decoded;
    const valid = await verifySignature(token.operator, tokenSignedBytes(body), signature);
    console.log(JSON.stringify({
      peer: token.peer,
      room: token.room,
      role: token.role,
      expiresAt: token.expiresAt,
      expires: new Date(token.expiresAt * 1000).toISOString(),
      expired: Date.now() / 1000 >= token.expiresAt,
      operator: toBase64(token.operator),
      signatureValid: valid,
    }, null, 2));
    process.exitCode = valid ? 0 : 1;
  } else {
    fail(`unknown command ${command}\n${USAGE}`);
  }
} catch (error) {
  fail(error.message);
}
