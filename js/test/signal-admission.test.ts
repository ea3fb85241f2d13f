/**
 * Admission: join tokens (the documented test vector, checked against an independent
 * layout and two other Ed25519 verifiers, and every way a token can be wrong), rooms that
 * admit by list or by token, watchers, policy files and the token command.
 */
import { execFileSync } from 'node:child_process';
import { createPublicKey, verify as nodeVerify } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ed25519 as noble } from '@noble/curves/ed25519.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { Identity, toBase64 } from '../src/identity/index.js';
import {
  SignalClient, SignalError, createJoinToken, decodeJoinToken, parseRoomPolicies, verifyJoinToken, type RoomPolicies, type SignalErrorCode,
} from '../src/signal/index.js';
import { SignalServer, type SignalServerOptions } from '../src/signal/node.js';
import { RawPeer, WS } from './signal-support.js';
import { packageRoot, repoRoot } from './support.js';

const hex = (text: string): Uint8Array => Uint8Array.from(Buffer.from(text, 'hex'));
const toHex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');

/** The test vector as docs/SECURITY.md prints it: "name   value" lines in its text block. */
function documentedVector(): Record<string, string> {
  const doc = readFileSync(join(repoRoot, 'docs', 'SECURITY.md'), 'utf8');
  const block = /### Test vector[\s\S]*?```text\n([\s\S]*?)```/.exec(doc);
  if (block === null) throw new Error('docs/SECURITY.md has no test vector block');
  return Object.fromEntries(block[1]!.trim().split('\n').map((line) => {
    const match = /^(.+?)\s{2,}(\S+)$/.exec(line)!;
    return [match[1]!.trim(), match[2]!];
  }));
}

describe('join tokens', () => {
  it('reproduce the documented test vector, byte for byte', async () => {
    const v = documentedVector();
    const operator = await Identity.fromSeed(hex(v['operator seed']!));
    const peer = await Identity.fromSeed(hex(v['peer seed']!));
    expect(toHex(operator.publicKey)).toBe(v['operator public key']);
    expect(toHex(peer.publicKey)).toBe(v['peer public key']);
    expect(peer.peerId).toBe(v['peer id']);
    const token = await createJoinToken(operator, { peer: peer.peerId, room: v.room!, role: v.role as 'client', expiresAt: Number(v.expiry) });
    expect(token).toBe(v['token (base64url)']);
    expect(toHex(Buffer.from(token, 'base64url'))).toBe(v.token);
  });

  it('match the layout laid out in the docs, and verify with @noble/curves and node:crypto', () => {
    const v = documentedVector();
    const room = Buffer.from(v.room!, 'ascii');
    const peerId = Buffer.concat([Buffer.from('002408011220', 'hex'), hex(v['peer public key']!)]);
    const expiry = Buffer.alloc(8);
    expiry.writeBigUInt64LE(BigInt(v.expiry!));
    // built here from the table, not by the code under test
    const body = Buffer.concat([
      Buffer.from('BBJT', 'ascii'), Buffer.of(1, 1), expiry, hex(v['operator public key']!),
      Buffer.of(peerId.byteLength), peerId, Buffer.of(room.byteLength), room,
    ]);
    const token = hex(v.token!);
    expect(toHex(token.subarray(0, body.byteLength))).toBe(toHex(body));
    expect(toHex(token.subarray(body.byteLength))).toBe(v.signature);
    const signed = Buffer.concat([Buffer.from('bytesandbrains join token v1\0', 'ascii'), body]);
    expect(noble.verify(hex(v.signature!), signed, hex(v['operator public key']!), { zip215: false })).toBe(true);
    const spki = Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), hex(v['operator public key']!)]);
    expect(nodeVerify(null, signed, createPublicKey({ key: spki, format: 'der', type: 'spki' }), hex(v.signature!))).toBe(true);
  });

  it('are refused when any part is wrong: peer, room, expiry, operator, a flipped byte', async () => {
    const v = documentedVector();
    const operator = hex(v['operator public key']!);
    const good = { peer: v['peer id']!, room: v.room!, operators: [operator], now: Number(v.expiry) - 1 };
    const token = v['token (base64url)']!;
    expect(await verifyJoinToken(token, good)).toMatchObject({ peer: good.peer, room: good.room, role: 'client', expiresAt: Number(v.expiry) });
    const refusal = (text: string, expect: Partial<typeof good>): Promise<string> =>
      verifyJoinToken(text, { ...good, ...expect }).then(() => 'accepted', (error: Error) => error.message);
    expect(await refusal(token, { peer: (await Identity.generate()).peerId })).toMatch(/is for peer/);
    expect(await refusal(token, { room: 'federation-2' })).toMatch(/is for room federation-1/);
    expect(await refusal(token, { now: Number(v.expiry) })).toMatch(/expired/);
    expect(await refusal(token, { operators: [(await Identity.generate()).publicKey] })).toMatch(/not an operator/);
    const bytes = hex(v.token!);
    for (const at of [5, 6, 20, 50, 90, bytes.byteLength - 1]) {
      const flipped = bytes.slice();
      flipped[at]! ^= 1;
      expect(await refusal(Buffer.from(flipped).toString('base64url'), {})).not.toBe('accepted');
    }
    expect(await refusal('', {})).toMatch(/not a well-formed/);
    expect(decodeJoinToken(token.slice(0, -4))).toBeNull();
  });
});

describe('rooms with an admission policy', () => {
  let server: SignalServer;
  let url: string;
  const clients: SignalClient[] = [];
  let operator: Identity;
  const ids: Record<string, Identity> = {};

  async function listen(options: SignalServerOptions): Promise<void> {
    server = await SignalServer.listen({ port: 0, host: '127.0.0.1', presenceIntervalMs: 10, ...options });
    url = `ws://127.0.0.1:${server.address.port}`;
  }

  async function connect(room: string, name: string, extra: { role?: 'client' | 'server' | 'watcher'; token?: string } = {}): Promise<SignalClient> {
    const client = await SignalClient.connect({ url, room, identity: ids[name]!, WebSocket: WS, ...extra });
    clients.push(client);
    return client;
  }

  async function refused(room: string, name: string, extra: { role?: 'client' | 'server' | 'watcher'; token?: string } = {}): Promise<[SignalErrorCode, string]> {
    const error = await connect(room, name, extra).then(() => null, (e: unknown) => e as SignalError);
    expect(error).toBeInstanceOf(SignalError);
    return [error!.code, error!.message];
  }

  beforeEach(async () => {
    operator = await Identity.generate();
    for (const name of ['server', 'alice', 'bob', 'eve', 'watcher']) ids[name] = await Identity.generate();
  });

  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    await server.close();
  });

  it('an allowlist admits its peers in their roles, and nobody else', async () => {
    const rooms: RoomPolicies = { fed: { allow: { [ids.server!.peerId]: 'server', [ids.alice!.peerId]: 'client' } } };
    await listen({ rooms });
    const s = await connect('fed', 'server', { role: 'server' });
    expect(s.role).toBe('server');
    const a = await connect('fed', 'alice');
    expect(a.peers()).toEqual([s.self]);
    expect(await refused('fed', 'eve')).toEqual(['not-admitted', expect.stringMatching(/not on room fed's list/)]);
    expect(await refused('fed', 'alice', { role: 'server' })).toEqual(['not-admitted', expect.stringMatching(/as client, not as server/)]);
    // other rooms stay open by default, closed when the server says so
    await connect('elsewhere', 'eve');
    await server.close();
    await listen({ rooms, openRooms: false });
    expect((await refused('elsewhere', 'eve'))[0]).toBe('not-admitted');
  });

  it('join tokens admit their holder, in their role, until they expire', async () => {
    await listen({ rooms: { fed: { operators: [operator.publicKey] } } });
    const now = Math.floor(Date.now() / 1000);
    const grant = (name: string, role: 'client' | 'server' | 'watcher', expiresAt = now + 60, room = 'fed') =>
      createJoinToken(operator, { peer: ids[name]!.peerId, role, room, expiresAt });
    const s = await connect('fed', 'server', { token: await grant('server', 'server') });
    expect(s.role).toBe('server'); // the role defaults to the token's
    await connect('fed', 'alice', { token: await grant('alice', 'client') });
    expect(await refused('fed', 'bob')).toEqual(['not-admitted', expect.stringMatching(/brings no join token/)]);
    expect((await refused('fed', 'bob', { token: await grant('alice', 'client') }))[1]).toMatch(/is for peer/); // alice's token
    expect((await refused('fed', 'bob', { token: await grant('bob', 'client', now - 1) }))[1]).toMatch(/expired/);
    expect((await refused('fed', 'bob', { token: await grant('bob', 'client', now + 60, 'other') }))[1]).toMatch(/is for room other/);
    expect((await refused('fed', 'bob', { token: await grant('bob', 'client'), role: 'server' }))[1]).toMatch(/as client, not as server/);
    const forged = await createJoinToken(ids.eve!, { peer: ids.bob!.peerId, role: 'server', room: 'fed', expiresAt: now + 60 });
    expect((await refused('fed', 'bob', { token: forged }))[1]).toMatch(/not an operator/);
  });

  it('a token brought to a join is checked whatever admits it, and only one that holds is shown to the room', async () => {
    await listen({ rooms: { fed: { allow: { [ids.server!.peerId]: 'server' }, operators: [operator.publicKey] } } });
    const now = Math.floor(Date.now() / 1000);
    const signed = (by: Identity, name: string, room: string, expiresAt = now + 60) =>
      createJoinToken(by, { peer: ids[name]!.peerId, role: 'client', room, expiresAt });
    // an open room: junk, another peer's token or an expired one refuses the join; a
    // token its signer made for this peer and room is shown, for the members to judge
    const bob = await connect('open', 'bob', { token: await signed(ids.eve!, 'bob', 'open') });
    expect((await refused('open', 'alice', { token: 'x'.repeat(1000) }))[1]).toMatch(/not a well-formed token/);
    expect((await refused('open', 'alice', { token: await signed(ids.eve!, 'bob', 'open') }))[1]).toMatch(/is for peer/);
    expect((await refused('open', 'alice', { token: await signed(ids.eve!, 'alice', 'open', now - 1) }))[1]).toMatch(/expired/);
    const alice = await connect('open', 'alice', { token: await signed(ids.eve!, 'alice', 'open') });
    expect(alice.tokenOf(bob.self)).toBe(await signed(ids.eve!, 'bob', 'open'));
    // a room with operators: a listed peer's token must be theirs too
    expect((await refused('fed', 'server', { role: 'server', token: await signed(ids.eve!, 'server', 'fed') }))[1]).toMatch(/not an operator/);
    await connect('fed', 'server', { role: 'server' }); // listed, no token: admitted, none shown
  });

  it('a watcher sees the data peers come and go, is seen by nobody and signals nobody', async () => {
    const rooms: RoomPolicies = { fed: { allow: { [ids.alice!.peerId]: 'client', [ids.bob!.peerId]: 'client', [ids.watcher!.peerId]: 'watcher' } } };
    await listen({ rooms });
    const a = await connect('fed', 'alice');
    const w = await connect('fed', 'watcher', { role: 'watcher' });
    expect(w.peers()).toEqual([a.self]);
    const seen: string[] = [];
    w.events.on('join', (p) => seen.push(`+${p}`));
    w.events.on('leave', (p) => seen.push(`-${p}`));
    const b = await connect('fed', 'bob');
    expect(b.peers()).toEqual([a.self]); // not the watcher
    await new Promise((r) => setTimeout(r, 100));
    expect(a.peers()).toEqual([b.self]);
    expect(seen).toEqual([`+${b.self}`]);
    const errors: string[] = [];
    w.events.on('error', (e) => errors.push(e.code));
    b.events.on('error', (e) => errors.push(e.code));
    w.send(a.self, { kind: 'offer' });
    b.send(w.self, { kind: 'offer' });
    await new Promise((r) => setTimeout(r, 100));
    expect(errors.sort()).toEqual(['forbidden', 'unknown-peer']);
    b.close();
    await new Promise((r) => setTimeout(r, 100));
    expect(seen).toEqual([`+${b.self}`, `-${b.self}`]);
    expect(server.members('fed').sort()).toEqual([a.self, w.self].sort());
  });

  it('a raw join with a token field that is not text is malformed', async () => {
    await listen({ rooms: { fed: { operators: [operator.publicKey] } } });
    const peer = (await RawPeer.open(url))!;
    expect(await peer.join('fed', ids.alice!, 'client', { token: 42 })).toMatchObject({ code: 'malformed' });
    peer.terminate();
  });
});

describe('policy files and the token command', () => {
  it('parses a policy file and names what is wrong in a bad one', async () => {
    const key = (await Identity.generate()).publicKey;
    const peer = (await Identity.generate()).peerId;
    const parsed = parseRoomPolicies({ openRooms: false, rooms: { fed: { allow: { [peer]: 'server' }, operators: [toBase64(key)] } } });
    expect(parsed.openRooms).toBe(false);
    expect(parsed.rooms.fed!.operators).toEqual([key]);
    expect(() => parseRoomPolicies({ rooms: { fed: { allow: { [peer]: 'admin' } } } })).toThrow(/is not client, server or watcher/);
    expect(() => parseRoomPolicies({ rooms: { fed: { operators: ['short'] } } })).toThrow(/operators\[0\] is not a 32-byte key/);
    expect(() => parseRoomPolicies({ rooms: { 'bad room': {} } })).toThrow(/room name/);
  });

  it('keygen, issue and inspect make a token the server admits', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bb-token-'));
    const cli = join(packageRoot, 'bin', 'bytesandbrains-token.mjs');
    const run = (...args: string[]): string => execFileSync(process.execPath, [cli, ...args], { encoding: 'utf8' });
    let server: SignalServer | undefined;
    try {
      const keyFile = join(dir, 'operator.key');
      const publicKey = /public key \(base64\): (\S+)/.exec(run('keygen', '--out', keyFile))![1]!;
      expect(() => run('keygen', '--out', keyFile)).toThrow(); // never overwrites a key
      const peer = await Identity.generate();
      const token = run('issue', '--key', keyFile, '--peer', peer.peerId, '--room', 'fed', '--role', 'server', '--ttl', '1h').trim();
      const inspected = JSON.parse(run('inspect', token));
      expect(inspected).toMatchObject({ peer: peer.peerId, room: 'fed', role: 'server', expired: false, operator: publicKey, signatureValid: true });
      writeFileSync(join(dir, 'policy.json'), JSON.stringify({ rooms: { fed: { operators: [publicKey] } } }));
      server = await SignalServer.listen({ port: 0, host: '127.0.0.1', ...parseRoomPolicies(JSON.parse(readFileSync(join(dir, 'policy.json'), 'utf8'))) });
      const client = await SignalClient.connect({ url: `ws://127.0.0.1:${server.address.port}`, room: 'fed', identity: peer, token, WebSocket: WS });
      expect(client.role).toBe('server');
      client.close();
    } finally {
      await server?.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
