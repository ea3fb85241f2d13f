/**
 * federatedAveraging with secure aggregation (`secure: { threshold, shares }`), as
 * federations of bb.wasm nodes on a test clock (LocalNetwork): every round is a SecAgg+ sum
 * that gives the plain FedAvg model within the quantisation, a client that stops mid-round
 * (after masking) leaves the round closing with its update in the sum, too many stopping
 * abandons the round without moving the model, no update crosses the network in the clear,
 * and bad options are refused by name. Each client signs its SecAgg+ keys with its own
 * Identity (asynchronously, through bb.wasm's host signer); a server that substitutes one
 * client's keys with its own, signed by an identity of its own, is refused by the others.
 */
import { blake2b } from '@noble/hashes/blake2.js';
import { ed25519, x25519 } from '@noble/curves/ed25519.js';
import { beforeAll, describe, expect, test } from 'vitest';

import {
  BbError,
  componentModel,
  cpuMlp,
  federatedAveraging,
  Identity,
  loadBb,
  LocalNetwork,
  peerIdFromU64,
  type Bb,
  type BbNode,
  type ComponentContext,
  type FederatedAveragingOptions,
  type HostTensor,
  type RoundReport,
} from '../src/index.js';
import { LogisticRegression, twoBlobs, wasmBytes } from './support.js';

let bb: Bb;
/** Client k's identity (k from 0): its peer id, and what signs its SecAgg+ keys (WebCrypto, non-extractable). */
let identities: Identity[];
beforeAll(async () => {
  bb = await loadBb(wasmBytes());
  identities = await Promise.all(Array.from({ length: 8 }, () => Identity.generate({ extractable: false })));
});

const MS = 1_000_000n;

/** A logistic regression whose Fit moves every parameter by a per-client step: client k (identities[k - 1]) by 0.01 × k. */
function stepping(): FederatedAveragingOptions['model'] {
  const clientOf = new Map(identities.map((identity, k) => [identity.peerId, k + 1] as const));
  return componentModel('Stepping', () => {
    const model = new LogisticRegression();
    return Object.assign(model, {
      fit(params: HostTensor, context: ComponentContext) {
        const k = clientOf.get(context.self) ?? 0;
        return { trained: { ...params, dtype: 'float' as const, data: (params.data as Float32Array).map((w) => w + 0.01 * k) }, samples: 1 };
      },
    });
  });
}

interface Run {
  reports: RoundReport[];
  globals: Float32Array[];
  counters: Map<string, bigint>;
  /** Every envelope a client sent the server, as delivered. */
  uploads: Uint8Array[];
  /** Clients stopped. */
  stopped: number;
}

/** What the server sends client k (1-based) on its way, as a lying server would send it instead. */
type Tamper = (k: number, bytes: Uint8Array) => Uint8Array;

/**
 * A federation of `clients` run until `rounds` reports; `stop(k)` is how many envelopes
 * client k (1-based) delivers to the server before its node is freed (undefined: never).
 * Each tick of the test clock lets the event loop turn, so the clients' signatures
 * (WebCrypto, asynchronous) come in.
 */
async function federate(options: Omit<FederatedAveragingOptions, 'clients'>, clients: number, rounds: number, stop: (k: number) => number | undefined = () => undefined, tamper?: Tamper): Promise<Run> {
  const plan = federatedAveraging({ clients, deadlineMs: 500, fitSteps: 5, ...options });
  const artifact = plan.compile(bb);
  const test = twoBlobs(bb, 100, 99);
  const server = plan.installServer(bb, { artifact, self: peerIdFromU64(1), test, nowNs: 0n, seed: 1 });
  const nodes: BbNode[] = [server.node];
  for (let k = 0; k < clients; k++) {
    const client = plan.installClient(bb, { artifact, signer: identities[k]!, server: server.node.self, data: twoBlobs(bb, 50, k + 7), nowNs: 0n, seed: k + 2 });
    if (tamper !== undefined) {
      const deliver = client.deliver.bind(client);
      client.deliver = (from, bytes, nowNs) => deliver(from, from === server.node.self ? tamper(k + 1, bytes) : bytes, nowNs);
    }
    nodes.push(client);
  }
  const run: Run = { reports: [], globals: [], counters: new Map(), uploads: [], stopped: 0 };
  const delivered = new Map<string, number>();
  const stopping = new Set<BbNode>();
  const network = new LocalNetwork(nodes, {
    onDeliver(to, from, bytes) {
      if (to !== server.node.self) return;
      run.uploads.push(bytes);
      const count = (delivered.get(from) ?? 0) + 1;
      delivered.set(from, count);
      const k = nodes.findIndex((n) => n.self === from);
      if (k > 0 && count === stop(k)) stopping.add(nodes[k]!);
    },
  });
  server.onRound((report) => {
    run.reports.push(report);
    run.globals.push(server.parameters()!);
  });
  server.start(nodes.slice(1).map((n) => n.self), 0n);
  // 100 s of clock: a stage waits out its deadline (30 s) for a client that stopped
  for (let t = 1n; t < 5000n && run.reports.length <= rounds; t++) {
    network.poll(t * 20n * MS);
    await new Promise((resolve) => setImmediate(resolve));
    for (const node of stopping) {
      if (node.freed) continue;
      node.free();
      run.stopped++;
    }
  }
  for (const name of ['fedavg.secagg_rounds', 'fedavg.secagg_summed', 'fedavg.secagg_aborted', 'fedavg.rounds_abandoned', 'fedavg.refused_plain']) {
    run.counters.set(name, server.node.counter(name));
  }
  for (const name of ['fedavg.secagg_client_aborted', 'fedavg.secagg_refused']) {
    run.counters.set(name, nodes.slice(1).reduce((sum, node) => sum + (node.freed ? 0n : node.counter(name)), 0n));
  }
  network.free();
  test.free();
  return run;
}

// SecAgg+'s wire (docs/WIRE.md): a message starts "BBSA", version, type, the round's 16
// bytes and an index (26 bytes); a setup then holds 40 bytes of parameters and the
// identities; a keys message a count and entries of index, c_pk, s_pk, signature (132).
const MAGIC = new TextEncoder().encode('BBSA');
const HEADER = 26;
const SETUP = 1;
const KEYS = 3;
const SETUP_DOMAIN = new TextEncoder().encode('bytesandbrains secagg setup v1\0');
const SIGN_DOMAIN = new TextEncoder().encode('bytesandbrains secagg keys v1\0');
const concat = (...parts: Uint8Array[]): Uint8Array => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) out.set(p, (at += p.length) - p.length);
  return out;
};
const equal = (a: Uint8Array, b: Uint8Array): boolean => a.length === b.length && a.every((x, i) => x === b[i]);
const find = (hay: Uint8Array, needle: Uint8Array): number => {
  outer: for (let i = 0; i + needle.length <= hay.length; i++) {
    for (let j = 0; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
};

const moved = (a: Float32Array, b: Float32Array): number[] => [...a].map((x, i) => x - b[i]!);
/** The quantisation of a sum of n: one ring step (16 / 2^22) per client, over the n weights. */
const QUANT = 16 / 2 ** 22;

describe('federatedAveraging with secure', () => {
  test('every round is a SecAgg+ sum: the model moves by the mean step, within the quantisation', async () => {
    const run = await federate({ model: stepping(), secure: {} }, 4, 3);
    expect(run.reports.length).toBeGreaterThan(3);
    expect(run.reports[0]!.secure).toEqual({ summed: 0 });
    for (let r = 1; r < run.reports.length; r++) {
      expect(run.reports[r]!.secure).toEqual({ summed: 4 });
      // clients 1..4 step by 0.01 k: the mean is 0.025
      for (const d of moved(run.globals[r]!, run.globals[r - 1]!)) expect(Math.abs(d - 0.025)).toBeLessThanOrEqual(QUANT + 1e-6);
    }
    expect(run.counters.get('fedavg.refused_plain')).toBe(0n);
  });

  test('a client that stops mid-round, after masking, leaves the round closing with its step in the sum', async () => {
    // with seats (no registry traffic) client 2's 4th envelope is its masked vector, after its join, keys and shares
    const run = await federate({ model: stepping(), discovery: 'seats', secure: { threshold: 2, shares: 3 } }, 4, 1, (k) => (k === 2 ? 4 : undefined));
    expect(run.reports.length).toBeGreaterThan(1);
    expect(run.reports[1]!.secure).toEqual({ summed: 4 });
    for (const d of moved(run.globals[1]!, run.globals[0]!)) expect(Math.abs(d - 0.025)).toBeLessThanOrEqual(QUANT + 1e-6);
    expect(run.stopped).toBe(1);
    expect(run.counters.get('fedavg.secagg_aborted')).toBe(0n);
  });

  test('too many stopping after masking: below the threshold the round is abandoned and the model does not move', async () => {
    // 3 of 4 stop after masking; the one left holds fewer shares than the threshold of 3
    const run = await federate({ model: stepping(), discovery: 'seats', secure: { threshold: 3, shares: 3 } }, 4, 1, (k) => (k <= 3 ? 4 : undefined));
    expect(run.stopped).toBe(3);
    expect(run.counters.get('fedavg.secagg_aborted')).toBe(1n);
    expect(run.counters.get('fedavg.secagg_rounds')).toBe(0n);
    expect(run.reports.length).toBeGreaterThan(1);
    expect(run.reports[1]!.secure).toEqual({ summed: 0 });
    expect([...run.globals[1]!]).toEqual([...run.globals[0]!]);
  });

  test('no update crosses the network in the clear', async () => {
    // a client's trained parameters, as float32 bytes, appear in none of its envelopes
    const run = await federate({ model: stepping(), secure: {} }, 3, 2);
    const trained = new Uint8Array(Float32Array.from(run.globals[0]!, (w) => w + 0.01).buffer);
    const contains = (hay: Uint8Array, needle: Uint8Array): boolean => {
      outer: for (let i = 0; i + needle.length <= hay.length; i++) {
        for (let j = 0; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
        return true;
      }
      return false;
    };
    expect(run.uploads.length).toBeGreaterThan(0);
    for (const bytes of run.uploads) expect(contains(bytes, trained.subarray(0, 8))).toBe(false);
  });

  test("a server that substitutes a client's keys with its own, validly signed, is refused by the others", async () => {
    // The lying server (the bytes rewritten on their way to each other client, as it would
    // send them): in the keys message, client 1's X25519 keys are replaced by its own pair,
    // signed by an Ed25519 identity of its own over the round's setup, exactly as a client
    // signs. The setup lists client 1 by its peer id's key, so the others refuse.
    const victim = identities[0]!.publicKey;
    let setupHash: Uint8Array | undefined;
    let victimIndex = -1;
    let substituted = 0;
    const attacker = ed25519.keygen();
    const tamper: Tamper = (k, bytes) => {
      const at = find(bytes, MAGIC);
      if (at < 0) return bytes;
      const type = bytes[at + 5];
      const view = new DataView(bytes.buffer, bytes.byteOffset);
      if (type === SETUP) {
        const params = bytes.subarray(at + HEADER, at + HEADER + 40);
        const n = view.getUint32(at + HEADER, true);
        const ids = bytes.subarray(at + HEADER + 40, at + HEADER + 40 + 32 * n);
        setupHash = blake2b(concat(SETUP_DOMAIN, bytes.subarray(at + 6, at + 22), params, ids), { dkLen: 32 });
        for (let i = 0; i < n; i++) if (equal(ids.subarray(32 * i, 32 * i + 32), victim)) victimIndex = i;
        return bytes;
      }
      if (type !== KEYS || k === 1 || setupHash === undefined) return bytes;
      const out = bytes.slice();
      const outView = new DataView(out.buffer);
      const count = outView.getUint32(at + HEADER, true);
      for (let e = 0; e < count; e++) {
        const entry = at + HEADER + 4 + 132 * e;
        if (outView.getUint32(entry, true) !== victimIndex) continue;
        const cPk = x25519.getPublicKey(x25519.utils.randomSecretKey());
        const sPk = x25519.getPublicKey(x25519.utils.randomSecretKey());
        const index = new Uint8Array(4);
        new DataView(index.buffer).setUint32(0, victimIndex, true);
        const payload = concat(SIGN_DOMAIN, setupHash, index, cPk, sPk);
        const signature = ed25519.sign(payload, attacker.secretKey);
        expect(ed25519.verify(signature, payload, attacker.publicKey)).toBe(true);
        out.set(cPk, entry + 4);
        out.set(sPk, entry + 36);
        out.set(signature, entry + 68);
        substituted++;
      }
      return out;
    };
    const run = await federate({ model: stepping(), discovery: 'seats', secure: { threshold: 2, shares: 3 } }, 4, 1, undefined, tamper);
    expect(victimIndex).toBeGreaterThanOrEqual(0);
    expect(substituted).toBeGreaterThan(0);
    // each client handed the substituted keys refused them and aborted; no sum came in
    expect(run.counters.get('fedavg.secagg_refused')).toBe(BigInt(substituted));
    expect(run.counters.get('fedavg.secagg_client_aborted')).toBeGreaterThanOrEqual(BigInt(substituted));
    expect(run.counters.get('fedavg.secagg_rounds')).toBe(0n);
    expect(run.reports.slice(1).every((r) => r.secure?.summed === 0)).toBe(true);
  });

  test('a client without a signer cannot take part: its contribution is refused by name', () => {
    const plan = federatedAveraging({ model: stepping(), clients: 3, discovery: 'seats', deadlineMs: 500, secure: {} });
    const artifact = plan.compile(bb);
    const data = twoBlobs(bb, 10, 1);
    const server = plan.installServer(bb, { artifact, self: peerIdFromU64(1), test: data, nowNs: 0n, seed: 1 });
    const client = plan.installClient(bb, { artifact, self: peerIdFromU64(2), server: server.node.self, data, nowNs: 0n });
    const steps: string[] = [];
    client.onStep((step) => steps.push(step.detail ?? ''));
    const network = new LocalNetwork([server.node, client]);
    server.start([client.self], 0n);
    for (let t = 1n; t < 50n; t++) network.poll(t * 20n * MS);
    expect(client.counter('fedavg.secagg_no_identity')).toBeGreaterThan(0n);
    expect(steps.some((d) => d.includes('signs its SecAgg+ keys with its own identity'))).toBe(true);
    network.free();
    data.free();
  });

  test('bad options are refused by name', () => {
    const model = cpuMlp({ inputs: 2, outputs: 2 });
    const bad: [FederatedAveragingOptions, string][] = [
      [{ model, clients: 4, secure: { threshold: -1 } }, 'secure.threshold'],
      [{ model, clients: 4, secure: { shares: 1.5 } }, 'secure.shares'],
      [{ model, clients: 4, secure: null as unknown as object }, 'secure is'],
      [{ model, clients: 4, secure: {}, aggregator: 'median' }, "aggregator 'fedavg'"],
      [{ model, clients: 4, secure: {}, codec: 'f16' }, 'compress'],
      [{ model, clients: 4, secure: {}, mode: 'async', discovery: 'seats' }, 'async'],
      [{ model, clients: 4, secure: {}, dp: { clip: { initial: 1 }, noiseMultiplier: 1, delta: 1e-5 } }, 'fixed dp.clip'],
      [{ model, clients: 4, secure: {}, dp: { clip: 1, noiseMultiplier: 1, delta: 1e-5, sampleRate: 0.5 } }, 'dp.sampleRate'],
    ];
    for (const [options, message] of bad) {
      expect(() => federatedAveraging(options)).toThrow(BbError);
      expect(() => federatedAveraging(options)).toThrow(message);
    }
  });
});
