/**
 * Signalling on real networks: over WSS with a certificate made at test time (the openssl
 * command), sharing a port with the page's HTTPS server, and handing out short-lived TURN
 * credentials in coturn's REST scheme, checked against openssl's own HMAC-SHA1. And the
 * ICE servers reaching every RTCPeerConnection a transport or connectPeer makes.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpsServer, get as getHttps } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as connectTcp, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';

import { Identity } from '../src/identity/index.js';
import { connectPeer, type BbNode } from '../src/index.js';
import { SignalClient, type WebSocketConstructor } from '../src/signal/index.js';
import { SignalServer } from '../src/signal/node.js';
import { WebRtcTransport, type WebRtcTransportOptions } from '../src/transport/index.js';
import { WS } from './signal-support.js';

let dir = '';
let cert = '';
let key = '';
/** A WebSocket that trusts the test's certificate authority (itself). */
let Trusting: WebSocketConstructor;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'bb-tls-'));
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1',
    '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
    '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
  ], { stdio: 'ignore' });
  cert = readFileSync(join(dir, 'cert.pem'), 'utf8');
  key = readFileSync(join(dir, 'key.pem'), 'utf8');
  const ca = cert;
  Trusting = class extends WebSocket {
    constructor(url: string) {
      super(url, { ca });
    }
  } as unknown as WebSocketConstructor;
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function roundTrip(url: string): Promise<unknown> {
  const [alice, bob] = [await Identity.generate(), await Identity.generate()];
  const a = await SignalClient.connect({ url, room: 'tls', identity: alice, WebSocket: Trusting });
  const b = await SignalClient.connect({ url, room: 'tls', identity: bob, WebSocket: Trusting });
  try {
    const got = new Promise<unknown>((resolve) => a.events.on('signal', (from, data) => resolve({ from, data })));
    b.send(alice.peerId, { hello: 'over wss' });
    return await got;
  } finally {
    a.close();
    b.close();
  }
}

describe('signalling over TLS', () => {
  it('serves wss: with a certificate and key of its own', async () => {
    const server = await SignalServer.listen({ port: 0, host: '127.0.0.1', tls: { cert, key } });
    try {
      expect(await roundTrip(`wss://localhost:${server.address.port}`)).toMatchObject({ data: { hello: 'over wss' } });
      // a client that does not trust the certificate cannot connect at all
      const refused = await SignalClient.connect({ url: `wss://localhost:${server.address.port}`, room: 'tls', identity: await Identity.generate(), WebSocket: WS }).catch((e: Error) => e);
      expect(refused).toMatchObject({ code: 'unreachable' });
    } finally {
      await server.close();
    }
  });

  it('counts a wss: connection from its TCP accept, cuts it if it never upgrades, and keeps it once it has', async () => {
    const idleTcp = async (port: number): Promise<ReturnType<typeof connectTcp>> => {
      const idle = connectTcp({ host: '127.0.0.1', port });
      await new Promise((resolve) => idle.once('connect', resolve));
      return idle;
    };
    // a TCP connection that never starts its TLS handshake holds a place
    let server = await SignalServer.listen({ port: 0, host: '127.0.0.1', tls: { cert, key }, maxConnectionsPerAddress: 2 });
    try {
      const url = `wss://localhost:${server.address.port}`;
      const member = await SignalClient.connect({ url, room: 'tls', identity: await Identity.generate(), WebSocket: Trusting });
      const idle = await idleTcp(server.address.port);
      await vi.waitFor(() => expect(server.stats()).toMatchObject({ pendingUpgrades: 1 }));
      const third = await SignalClient.connect({ url, room: 'tls', identity: await Identity.generate(), WebSocket: Trusting }).catch((e: Error) => e);
      expect(third).toMatchObject({ code: 'unreachable' }); // past the cap of 2
      idle.destroy();
      member.close();
    } finally {
      await server.close();
    }
    // ... until its time is up; one that upgraded keeps its place past that time
    server = await SignalServer.listen({ port: 0, host: '127.0.0.1', tls: { cert, key }, upgradeTimeoutMs: 2000 });
    try {
      const url = `wss://localhost:${server.address.port}`;
      const member = await SignalClient.connect({ url, room: 'tls', identity: await Identity.generate(), WebSocket: Trusting });
      const idle = await idleTcp(server.address.port);
      await new Promise((resolve) => idle.once('close', resolve));
      await vi.waitFor(() => expect(server.stats()).toMatchObject({ pendingUpgrades: 0, upgradeTimeouts: 1 }));
      expect(member.closed).toBe(false); // accepted before the idle one, past its time too
      const again = await SignalClient.connect({ url, room: 'tls', identity: await Identity.generate(), WebSocket: Trusting });
      expect(again.peers()).toEqual([member.self]);
      member.close();
      again.close();
    } finally {
      await server.close();
    }
  });

  it('shares the port of the page\'s HTTPS server, on a path of its own', async () => {
    const https = createHttpsServer({ cert, key }, (_request, response) => response.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html>page'));
    await new Promise<void>((resolve) => https.listen(0, '127.0.0.1', resolve));
    const signal = SignalServer.attach(https, { path: '/signal' });
    const port = (https.address() as AddressInfo).port;
    try {
      const page = await new Promise<string>((resolve, reject) => {
        getHttps({ host: '127.0.0.1', port, path: '/', servername: 'localhost', ca: cert }, (response) => {
          let body = '';
          response.on('data', (chunk) => (body += chunk));
          response.on('end', () => resolve(body));
        }).on('error', reject);
      });
      expect(page).toBe('<!doctype html>page');
      expect(await roundTrip(`wss://localhost:${port}/signal`)).toMatchObject({ data: { hello: 'over wss' } });
      expect(signal.address.port).toBe(port);
    } finally {
      await signal.close();
      https.closeAllConnections();
      await new Promise((resolve) => https.close(resolve));
    }
  });
});

describe('TURN credentials in the REST scheme', () => {
  const secret = 'north-wind-42';
  const urls = ['turn:turn.example.org:3478?transport=udp', 'turns:turn.example.org:5349'];

  it('hands each member its own, HMAC-SHA1 as openssl computes it, expiring after the ttl', async () => {
    const server = await SignalServer.listen({ port: 0, host: '127.0.0.1', iceServers: [{ urls: 'stun:stun.example.org:3478' }], turn: { secret, urls, ttlSeconds: 600 } });
    try {
      const identity = await Identity.generate();
      const before = Math.floor(Date.now() / 1000);
      const client = await SignalClient.connect({ url: `ws://127.0.0.1:${server.address.port}`, room: 'r', identity, WebSocket: WS });
      const [stun, turn] = client.iceServers();
      client.close();
      expect(stun).toEqual({ urls: 'stun:stun.example.org:3478' });
      expect(turn!.urls).toEqual(urls);
      const [expiry, peer] = turn!.username!.split(/:(.*)/);
      expect(peer).toBe(identity.peerId);
      expect(Number(expiry) - before).toBeGreaterThanOrEqual(600);
      expect(Number(expiry) - before).toBeLessThanOrEqual(602);
      const hmac = execFileSync('openssl', ['dgst', '-sha1', '-hmac', secret, '-binary'], { input: turn!.username! });
      expect(turn!.credential).toBe(hmac.toString('base64'));
    } finally {
      await server.close();
    }
  });

  it('gives a member fresh ones before they expire', async () => {
    const server = await SignalServer.listen({ port: 0, host: '127.0.0.1', turn: { secret, urls, ttlSeconds: 1 } });
    try {
      const client = await SignalClient.connect({ url: `ws://127.0.0.1:${server.address.port}`, room: 'r', identity: await Identity.generate(), WebSocket: WS });
      const first = client.iceServers()[0]!.username;
      await new Promise((resolve) => setTimeout(resolve, 2200)); // asks at 0.8 s; the next expiry is a second or two later
      const second = client.iceServers()[0]!.username;
      client.close();
      expect(Number(second!.split(':')[0])).toBeGreaterThan(Number(first!.split(':')[0]));
    } finally {
      await server.close();
    }
  });
});

describe('ICE servers reach every connection', () => {
  it('the transport\'s own and the signalling server\'s, from WebRtcTransport and from connectPeer', async () => {
    const server = await SignalServer.listen({ port: 0, host: '127.0.0.1', turn: { secret: 's', urls: ['turn:relay.example.org:3478'] } });
    const url = `ws://127.0.0.1:${server.address.port}`;
    const configs: RTCConfiguration[] = [];
    const { RTCPeerConnection: Base } = await import('node-datachannel/polyfill');
    const Recording = class extends Base {
      constructor(config?: RTCConfiguration) {
        super({ ...config, iceServers: [] }); // record, but do not contact the made-up servers
        configs.push(config ?? {});
      }
    } as unknown as WebRtcTransportOptions['RTCPeerConnection'] & object;
    const [x, y] = [await Identity.generate(), await Identity.generate()];
    const [small, large] = x.peerId < y.peerId ? [x, y] : [y, x];
    const stun = { urls: 'stun:stun.example.org:3478' };
    const other = await SignalClient.connect({ url, room: 'r', identity: large, WebSocket: WS });
    const t = await WebRtcTransport.create({ signal: await SignalClient.connect({ url, room: 'r', identity: small, WebSocket: WS }), RTCPeerConnection: Recording, iceServers: [stun] });
    t.connect(large.peerId);
    expect(configs).toHaveLength(1);
    expect(configs[0]!.iceServers![0]).toEqual(stun);
    expect(configs[0]!.iceServers![1]).toMatchObject({ urls: ['turn:relay.example.org:3478'], username: expect.stringMatching(new RegExp(`:${small.peerId}$`)) });
    t.close();
    // connectPeer passes them the same way, and checks the node's id against the identity
    const node = { self: small.peerId, onStep: () => () => {}, deliver() {}, poll() {}, expiry: () => null, hasWork: () => false } as unknown as BbNode;
    await expect(connectPeer({ ...node, self: large.peerId } as unknown as BbNode, { url, room: 'r', identity: small })).rejects.toThrow(/install the node with self = identity.peerId/);
    const running = await connectPeer(node, { url, room: 'r', identity: small, iceServers: [stun], WebSocket: WS, transport: { RTCPeerConnection: Recording } });
    (running.transport as WebRtcTransport).connect(large.peerId);
    expect(configs).toHaveLength(2);
    expect(configs[1]!.iceServers![0]).toEqual(stun);
    expect(configs[1]!.iceServers![1]).toMatchObject({ username: expect.stringMatching(new RegExp(`:${small.peerId}$`)) });
    running.stop();
    running.transport.close();
    other.close();
    await server.close();
  });
});
