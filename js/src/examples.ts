/**
 * The federated_digits example as a web app runs it: one server and any number of clients
 * learning scikit-learn's handwritten digits with federated averaging. Used by the tests,
 * the end-to-end run in Chromium and web-demo; a template for an app of its own.
 */
import type { Bb } from './bb.js';
import { Compiler } from './compiler.js';
import { Dataset, splitForFederation } from './dataset.js';
import { BbNode, type Step } from './node.js';
import { peersValue, scalarOf, tensorValue, type Value } from './values.js';

export interface FederatedDigitsConfig {
  /** Updates that close a round once its deadline passed (default 3). */
  readonly quorum?: number;
  /** Updates that close a round at once (default 4). */
  readonly target?: number;
  /** How long a round waits for its target (default 1000 ms). */
  readonly deadlineMs?: number;
}

export const FEDERATED_DIGITS_SERVER_TARGETS = ['FedDigits', 'FedDigits_server'] as const;
export const FEDERATED_DIGITS_CLIENT_TARGETS = ['FedDigits_clients'] as const;

/** Compiles federated_digits with FedAvg sized for this many clients. */
export function compileFederatedDigits(bb: Bb, config: FederatedDigitsConfig = {}): Uint8Array {
  const quorum = config.quorum ?? 3;
  const target = config.target ?? Math.max(quorum, 4);
  const deadline = config.deadlineMs ?? 1000;
  const compiler = Compiler.forExample(bb, 'federated_digits');
  try {
    compiler.rebind(
      'aggregator',
      'Aggregator',
      'FedAvg',
      `quorum=${quorum},target=${target},deadline_ms=${deadline},no_quorum=abandon,init=model`,
    );
    return compiler.compile(Compiler.recordExample(bb, 'federated_digits'));
  } finally {
    compiler.free();
  }
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

/**
 * Installs the server (its model's data slot holds the test set, as the native example's);
 * its round loop starts with startDigitsServer.
 */
export function installDigitsServer(bb: Bb, artifact: Uint8Array, self: string, test: Dataset, seed = 1): BbNode {
  return BbNode.install(bb, { artifact, self, targets: FEDERATED_DIGITS_SERVER_TARGETS, slots: { data: { dataset: test } }, seed });
}

/** Starts the server's rounds for these clients, evaluating on the test set. */
export function startDigitsServer(server: BbNode, clients: readonly string[], test: Dataset, nowNs?: bigint): void {
  const x = test.features();
  const y = test.labels();
  const inputs: Record<string, Value> = {
    clients: peersValue(clients),
    test_x: tensorValue('float', x.data, x.dims),
    test_y: tensorValue('float', y.data, y.dims),
  };
  server.invoke('FedDigits', inputs, nowNs);
}

/** Installs a client on its shard, knowing its server. */
export function installDigitsClient(bb: Bb, artifact: Uint8Array, self: string, server: string, shard: Dataset, seed = 1): BbNode {
  const node = BbNode.install(bb, { artifact, self, targets: FEDERATED_DIGITS_CLIENT_TARGETS, slots: { data: { dataset: shard } }, seed });
  node.addPeer(server);
  node.bindInput('FedDigits_clients', 'server', peersValue([server]));
  return node;
}

/** A round the server reported: its number and the global model's held-out accuracy. */
export interface RoundReport {
  readonly round: number;
  readonly accuracy: number;
}

/**
 * Turns the server's steps into round reports: "round" comes before "accuracy" in each
 * round's events.
 */
export function roundReporter(onRound: (report: RoundReport) => void): (step: Step) => void {
  let round = 0;
  return (step) => {
    if (step.kind !== 'appEvent') return;
    if (step.topic === 'round') round = scalarOf(step.value) ?? round;
    if (step.topic === 'accuracy') onRound({ round, accuracy: scalarOf(step.value) ?? Number.NaN });
  };
}
