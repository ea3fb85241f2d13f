/**
 * bytesandbrains/examples: the federated examples as a web app runs them, on
 * scikit-learn's handwritten digits (64 pixels, ten classes). federated_digits and
 * gossip_digits are templates configured as the C examples configure them — a CpuMlp with
 * one hidden layer; their compiled artifacts are the ones the C examples compile (the
 * templates record the same Modules). federated_cnn trains a CNN exported from PyTorch
 * with OnnxModel (the page hands every peer the model's bytes) and is compiled from the
 * example's recorded Module. Used by the tests, the end-to-end run in Chromium and
 * web-demo; a template for an app of its own.
 */
import type { Bb } from '../engine/bb.js';
import { Compiler } from '../node/compiler.js';
import { Dataset, splitForFederation } from '../train/dataset.js';
import { loadBytes } from '../engine/loader.js';
import type { OnnxModel } from '../engine/model.js';
import { BbNode } from '../node/node.js';
import { federatedAveraging } from '../templates/federated.js';
import { gossipLearning } from '../templates/gossip.js';
import { cpuMlp, type ModelChoice } from '../templates/models.js';
import type { Plan } from '../templates/plan.js';
import { peersValue, tensorValue, type Value } from '../node/values.js';

export { roundReporter, type RoundReport } from '../templates/plan.js';

export interface FederatedDigitsConfig {
  /** Updates that close a round once its deadline passed (default 3). */
  readonly quorum?: number;
  /** Updates that close a round at once (default 4). */
  readonly target?: number;
  /** How long a round waits for its target (default 1000 ms). */
  readonly deadlineMs?: number;
  /** The clients' SGD learning rate (default 0.05; federated_digits only). */
  readonly learningRate?: number;
  /**
   * The server's round timer (default 200 ms; federated_digits only): a round that reached
   * its target closes, and the next one's broadcast goes out, at the timer's next tick. A
   * short period starts the next round almost as soon as one closes, for one poll of the
   * server every period while it waits.
   */
  readonly roundMs?: number;
  /**
   * When the next round starts (federated_digits only): 'timer' (default) at the round
   * timer's next tick; 'close' as soon as a round's target of updates arrived, in the same
   * poll (federatedAveraging's `nextRound`).
   */
  readonly nextRound?: 'timer' | 'close';
  /**
   * The clients' updates on the wire (federated_digits only; default float32): 'f16' halves
   * them, 'u8' quarters them (federatedAveraging's `codec`). The global model goes out whole.
   */
  readonly codec?: 'f16' | 'u8';
}

const digitsMlp = (lr = 0.05): ModelChoice => cpuMlp({ inputs: 64, hidden: [32], outputs: 10, activation: 'relu', lr, momentum: 0.9, inputScale: 0.0625 });
const DIGITS_MLP = digitsMlp();

/** federated_digits as a template: FedAvg over seats (the server is given its clients). */
export function federatedDigits(config: FederatedDigitsConfig = {}): Plan {
  const quorum = config.quorum ?? 3;
  return federatedAveraging({
    name: 'FedDigits',
    model: digitsMlp(config.learningRate),
    clients: config.target ?? Math.max(quorum, 4),
    quorum,
    deadlineMs: config.deadlineMs ?? 1000,
    discovery: 'seats',
    roundMs: config.roundMs ?? 200,
    ...(config.nextRound === undefined ? {} : { nextRound: config.nextRound }),
    ...(config.codec === undefined ? {} : { codec: config.codec }),
    fitSteps: 12,
    batch: 32,
  });
}

/** gossip_digits as a template. */
export const gossipDigits = gossipLearning({ name: 'GossipDigits', model: DIGITS_MLP, periodMs: 100, fitSteps: 4, view: { size: 6, shuffle: 3 } });

export const FEDERATED_DIGITS_SERVER_TARGETS = ['FedDigits', 'FedDigits_server'] as const;
export const FEDERATED_DIGITS_CLIENT_TARGETS = ['FedDigits_clients'] as const;
export const FEDERATED_CNN_SERVER_TARGETS = ['FedCnn', 'FedCnn_server'] as const;
export const FEDERATED_CNN_CLIENT_TARGETS = ['FedCnn_clients'] as const;

/** Compiles federated_digits with FedAvg sized for this many clients. */
export function compileFederatedDigits(bb: Bb, config: FederatedDigitsConfig = {}): Uint8Array {
  return federatedDigits(config).compile(bb);
}

/** Compiles federated_cnn with FedAvg sized for this many clients. */
export function compileFederatedCnn(bb: Bb, config: FederatedDigitsConfig = {}): Uint8Array {
  const quorum = config.quorum ?? 3;
  const target = config.target ?? Math.max(quorum, 4);
  const deadline = config.deadlineMs ?? 1000;
  const compiler = Compiler.forExample(bb, 'federated_cnn');
  try {
    compiler.rebind(
      'aggregator',
      'Aggregator',
      'FedAvg',
      `quorum=${quorum},target=${target},deadline_ms=${deadline},no_quorum=abandon,init=model`,
    );
    return compiler.compile(Compiler.recordExample(bb, 'federated_cnn'));
  } finally {
    compiler.free();
  }
}

/**
 * The CNN federated_cnn trains, exported from PyTorch (this package's
 * `bytesandbrains/models/digits_cnn.onnx`, or `source`): its ModelProto bytes.
 */
export async function loadDigitsCnn(source?: string | URL): Promise<Uint8Array> {
  return loadBytes(source ?? new URL('../../models/digits_cnn.onnx', import.meta.url), 'the digits CNN');
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
  startServer(server, FEDERATED_DIGITS_SERVER_TARGETS[0], clients, test, nowNs);
}

/** Installs a client on its shard, knowing its server. */
export function installDigitsClient(bb: Bb, artifact: Uint8Array, self: string, server: string, shard: Dataset, seed = 1): BbNode {
  return federatedDigits().installClient(bb, { artifact, self, server, data: shard, seed });
}

function startServer(server: BbNode, module: string, clients: readonly string[], test: Dataset, nowNs?: bigint): void {
  for (const client of clients) server.addPeer(client); // the server sends to them, so it must know them
  const x = test.features();
  const y = test.labels();
  const inputs: Record<string, Value> = {
    clients: peersValue(clients),
    test_x: tensorValue('float', x.data, x.dims),
    test_y: tensorValue('float', y.data, y.dims),
  };
  server.invoke(module, inputs, nowNs);
}

/**
 * Installs federated_cnn's server: the network to train (loadDigitsCnn's bytes, or any
 * model of the same inputs), the test set it evaluates on; its rounds start with
 * startCnnServer. It reports "round", "accuracy" and, each round, the global model as
 * plain ONNX ("onnx").
 */
export function installCnnServer(bb: Bb, artifact: Uint8Array, self: string, test: Dataset, model: Uint8Array | OnnxModel,
  seed = 1): BbNode {
  return BbNode.install(bb, { artifact, self, targets: FEDERATED_CNN_SERVER_TARGETS, slots: { data: { dataset: test }, model: { model } }, seed });
}

/** Starts federated_cnn's rounds for these clients, evaluating on the test set. */
export function startCnnServer(server: BbNode, clients: readonly string[], test: Dataset, nowNs?: bigint): void {
  startServer(server, FEDERATED_CNN_SERVER_TARGETS[0], clients, test, nowNs);
}

/** Installs a federated_cnn client on its shard with the same network, knowing its server. */
export function installCnnClient(bb: Bb, artifact: Uint8Array, self: string, server: string, shard: Dataset,
  model: Uint8Array | OnnxModel, seed = 1): BbNode {
  const node = BbNode.install(bb, {
    artifact,
    self,
    targets: FEDERATED_CNN_CLIENT_TARGETS,
    slots: { data: { dataset: shard }, model: { model } },
    seed,
  });
  node.addPeer(server);
  node.bindInput(FEDERATED_CNN_CLIENT_TARGETS[0], 'server', peersValue([server]));
  return node;
}
