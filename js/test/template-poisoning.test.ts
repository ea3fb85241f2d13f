/**
 * The templates' defaults under attack, as a user gets them: federatedAveraging({ model,
 * clients: 10 }) and gossipLearning({ model }) on ten label-skewed shards of the digits,
 * with the attackers of bench/template-poisoning.mjs (its runs, shortened). Each row held
 * the federation at chance or worse before the defaults changed: one silent phone or one
 * NaN abandoned every round (a quorum of all ten), a sample claim doubled a liar's weight,
 * the templates could not hand the engine a join policy, and GossipAvg took any model.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { beforeAll, describe, expect, test } from 'vitest';

import * as identity from '../src/identity/index.js';
import * as examples from '../src/examples/index.js';
import * as internals from '../src/internals.js';
import * as pkg from '../src/index.js';
import * as signal from '../src/signal/index.js';
import { repoRoot, wasmBytes } from './support.js';

interface FederatedRun {
  readonly accuracy: number;
  readonly round: number;
  readonly counters: Readonly<Record<string, number>>;
}
interface GossipRun {
  readonly accuracy: number;
  readonly worst: number;
  readonly counters: Readonly<Record<string, number>>;
}
interface Harness {
  runFederated(p: unknown, bb: pkg.Bb, csv: Uint8Array, o: { attack: string; attackers?: number; rounds?: number; seed?: number }): Promise<FederatedRun>;
  runGossip(p: unknown, bb: pkg.Bb, csv: Uint8Array, o: { attack: string; periods?: number; seed?: number }): Promise<GossipRun>;
}

const DIGITS = '/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz';
const ROUNDS = 15;
const PERIODS = 120;
const everything = { ...pkg, ...examples, ...internals, ...signal, ...identity };

let bb: pkg.Bb;
let csv: Uint8Array;
let harness: Harness;
beforeAll(async () => {
  bb = await pkg.loadBb(wasmBytes());
  csv = gunzipSync(readFileSync(DIGITS));
  harness = (await import(pathToFileURL(join(repoRoot, 'bench', 'template-poisoning.mjs')).href)) as Harness;
});

const federated = (attack: string, attackers = 2): Promise<FederatedRun> => harness.runFederated(everything, bb, csv, { attack, attackers, rounds: ROUNDS });
const gossip = (attack: string): Promise<GossipRun> => harness.runGossip(everything, bb, csv, { attack, periods: PERIODS });

describe('federatedAveraging({ model, clients: 10 }) holds', () => {
  let clean: FederatedRun;
  beforeAll(async () => {
    clean = await federated('clean');
  });

  test('the clean run learns', () => {
    expect(clean.accuracy).toBeGreaterThan(0.85);
    expect(clean.counters['rounds_abandoned']).toBe(0);
  });

  test('a client gone silent: every round closes at its deadline with the nine', async () => {
    const run = await federated('silent');
    expect(run.counters['rounds_closed']).toBeGreaterThanOrEqual(ROUNDS);
    expect(run.counters['rounds_abandoned']).toBe(0);
    expect(run.accuracy).toBeGreaterThan(clean.accuracy - 0.05);
  });

  test('a client sending NaN: refused alone and counted, the rounds go on', async () => {
    const run = await federated('nan');
    expect(run.counters['refused_nonfinite']).toBeGreaterThanOrEqual(ROUNDS - 1);
    expect(run.counters['rounds_abandoned']).toBe(0);
    expect(run.accuracy).toBeGreaterThan(clean.accuracy - 0.05);
  });

  test('two and three clients sending the reversed step g - (u - g): the ascent screen leaves them out', async () => {
    // each answers the model's moves like an ascent step; a few rounds in (two steps to
    // compare, a round whose steps shrink, a trust that fell) its updates weigh nothing
    for (const attackers of [2, 3]) {
      const run = await federated('reverse', attackers);
      expect(run.counters['ascent_dropped']).toBeGreaterThanOrEqual(attackers * (ROUNDS - 8));
      expect(run.accuracy).toBeGreaterThan(clean.accuracy - 0.05);
    }
  });

  test('two clients sending the reversed step gain nothing by claiming 10^12 samples', async () => {
    const claiming = await federated('revsamples');
    // until the screen leaves them out, the claim is cut to the round's median count: the
    // same weight as an honest client
    const { samples_clipped: clipped = 0, ascent_dropped: dropped = 0 } = claiming.counters;
    expect(clipped).toBeGreaterThanOrEqual(2);
    expect(clipped + dropped).toBeGreaterThanOrEqual(2 * (ROUNDS - 1)); // every claim: cut, or its update left out
    expect(claiming.accuracy).toBeGreaterThan(clean.accuracy - 0.05);
  });

  test('honest clients are never screened', () => {
    expect(clean.counters['ascent_dropped']).toBe(0);
    expect(clean.counters['ascent_weighed']).toBe(0);
  });

  test('ten Sybils announcing themselves to a server whose room has a policy: none is registered', async () => {
    const run = await federated('sybil');
    expect(run.counters['registry_refused']).toBeGreaterThanOrEqual(10);
    expect(run.accuracy).toBeGreaterThan(clean.accuracy - 0.03);
  });
});

describe('gossipLearning({ model }) holds', () => {
  let clean: GossipRun;
  beforeAll(async () => {
    clean = await gossip('clean');
  });

  test('a Sybil sending 3e38 in a room with a policy never enters a view', async () => {
    const run = await gossip('sybil1huge');
    expect(clean.accuracy).toBeGreaterThan(0.7);
    // its shuffles are refused and counted where they arrive
    expect(run.counters['view_refused']).toBeGreaterThan(0);
    expect(run.accuracy).toBeGreaterThan(clean.accuracy - 0.05);
  });

  test('three Sybils sending 3e38 in an open room: the distance bound leaves their models out', async () => {
    // they still take places in the views (an open room admits them), which slows the
    // honest peers down; but no honest model is poisoned (3e38 mixed in scores 0.10)
    const run = await gossip('sybil3hugeopen');
    expect(run.counters['norm_dropped']).toBeGreaterThan(0);
    expect(run.worst).toBeGreaterThan(0.2);
    expect(run.accuracy).toBeGreaterThan(0.4);
  });
});

describe('the templates take the room policy and report their refusals', () => {
  test('an admission option reaches every node, and refusals() reads the counters', () => {
    const operators = [new Uint8Array(32).fill(7)];
    const plan = pkg.federatedAveraging({ model: pkg.cpuMlp({ inputs: 2, outputs: 2 }), clients: 3 });
    const artifact = plan.compile(bb);
    const test = pkg.Dataset.fromArrays(bb, new Float32Array([1, 2, 3, 4]), 2, new Float32Array([0, 1]));
    const server = plan.installServer(bb, { artifact, test, admission: { room: 'r', operators } });
    const client = plan.installClient(bb, { artifact, server: server.node.self, data: test, admission: { room: 'r', operators } });
    const peer = pkg.gossipLearning({ model: pkg.cpuMlp({ inputs: 2, outputs: 2 }) });
    const gossipArtifact = peer.compile(bb);
    const gossipPeer = peer.installPeer(bb, { artifact: gossipArtifact, data: test, test, seeds: [], admission: { room: 'r', operators } });
    expect([server.node.checksTokens, client.checksTokens, gossipPeer.node.checksTokens]).toEqual([true, true, true]);
    expect(server.refusals().refused_nonfinite).toBe(0);
    expect(Object.keys(server.refusals())).toContain('registry_unadmitted');
    for (const node of [server.node, client, gossipPeer.node]) node.free();
    test.free();
  });

  test('a round needs half the clients at its deadline unless told otherwise', () => {
    const artifact = pkg.federatedAveraging({ model: pkg.cpuMlp({ inputs: 2, outputs: 2 }), clients: 7 }).compile(bb);
    expect(internals.inspectArtifact(artifact).configs.get('aggregator')).toMatch(/^quorum=4,target=7,deadline_ms=1000,/);
  });
});
