/**
 * The reference examples federated_digits and gossip_digits as templates configure them:
 * scikit-learn's handwritten digits (64 pixels, ten classes) learnt by a CpuMlp with one
 * hidden layer. The compiled artifacts are the ones the C examples compile (the templates
 * record the same Modules), which is what the end-to-end run and web-demo install.
 */
import type { Bb } from './bb.js';
import { Dataset, splitForFederation } from './dataset.js';
import type { BbNode } from './node.js';
import { federatedAveraging } from './templates/federated.js';
import { gossipLearning } from './templates/gossip.js';
import { cpuMlp } from './templates/models.js';
import type { Plan } from './templates/plan.js';

export { roundReporter, type RoundReport } from './templates/plan.js';

export interface FederatedDigitsConfig {
  /** Updates that close a round once its deadline passed (default 3). */
  readonly quorum?: number;
  /** Updates that close a round at once (default 4). */
  readonly target?: number;
  /** How long a round waits for its target (default 1000 ms). */
  readonly deadlineMs?: number;
}

const DIGITS_MLP = cpuMlp({ inputs: 64, hidden: [32], outputs: 10, activation: 'relu', lr: 0.05, momentum: 0.9, inputScale: 0.0625 });

/** federated_digits as a template: FedAvg over seats (the server is given its clients). */
export function federatedDigits(config: FederatedDigitsConfig = {}): Plan {
  const quorum = config.quorum ?? 3;
  return federatedAveraging({
    name: 'FedDigits',
    model: DIGITS_MLP,
    clients: config.target ?? Math.max(quorum, 4),
    quorum,
    deadlineMs: config.deadlineMs ?? 1000,
    discovery: 'seats',
    roundMs: 200,
    fitSteps: 12,
    batch: 32,
  });
}

/** gossip_digits as a template. */
export const gossipDigits = gossipLearning({ name: 'GossipDigits', model: DIGITS_MLP, periodMs: 100, fitSteps: 4, view: { size: 6, shuffle: 3 } });

export const FEDERATED_DIGITS_SERVER_TARGETS = ['FedDigits', 'FedDigits_server'] as const;
export const FEDERATED_DIGITS_CLIENT_TARGETS = ['FedDigits_clients'] as const;

/** Compiles federated_digits with FedAvg sized for this many clients. */
export function compileFederatedDigits(bb: Bb, config: FederatedDigitsConfig = {}): Uint8Array {
  return federatedDigits(config).compile(bb);
}

/** The digits (CSV text: 64 pixel columns, then the digit) split for `clients` label-skewed shards. */
export interface DigitsSplit {
  readonly all: Dataset;
  readonly test: Dataset;
  readonly shards: Dataset[];
  free(): void;
}

export function splitDigits(bb: Bb, csv: string | Uint8Array, clients: number, seed = 1, classesPerShard = 3): DigitsSplit {
  const all = Dataset.fromCsv(bb, csv);
  const { test, shards } = splitForFederation(all.labels().data, { shards: clients, classesPerShard, seed });
  const testSet = all.subset(test);
  const shardSets = shards.map((rows) => all.subset(rows));
  return {
    all,
    test: testSet,
    shards: shardSets,
    free() {
      for (const d of [all, testSet, ...shardSets]) d.free();
    },
  };
}

/** Installs the server (its model's data slot holds the test set); its rounds start with startDigitsServer. */
export function installDigitsServer(bb: Bb, artifact: Uint8Array, self: string, test: Dataset, seed = 1): BbNode {
  return federatedDigits().installServer(bb, { artifact, self, test, seed }).node;
}

/** Starts the server's rounds for these clients, evaluating on the test set. */
export function startDigitsServer(server: BbNode, clients: readonly string[], test: Dataset, nowNs?: bigint): void {
  const x = test.features();
  const y = test.labels();
  server.invoke('FedDigits', { clients: { kind: 'peers', peers: clients }, test_x: { kind: 'tensor', tensor: x }, test_y: { kind: 'tensor', tensor: y } }, nowNs);
}

/** Installs a client on its shard, knowing its server. */
export function installDigitsClient(bb: Bb, artifact: Uint8Array, self: string, server: string, shard: Dataset, seed = 1): BbNode {
  return federatedDigits().installClient(bb, { artifact, self, server, data: shard, seed });
}
