/**
 * The federated examples as a web app runs them: one server and any number of clients
 * learning scikit-learn's handwritten digits with federated averaging — federated_digits
 * (CpuMlp) and federated_cnn (a CNN exported from PyTorch, trained by OnnxModel; the page
 * hands every peer the model's bytes). Used by the tests, the end-to-end run in Chromium
 * and web-demo; a template for an app of its own.
 */
import type { Bb } from './bb.js';
import { Compiler } from './compiler.js';
import { Dataset, splitForFederation } from './dataset.js';
import { loadBytes } from './loader.js';
import type { OnnxModel } from './model.js';
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
export const FEDERATED_CNN_SERVER_TARGETS = ['FedCnn', 'FedCnn_server'] as const;
export const FEDERATED_CNN_CLIENT_TARGETS = ['FedCnn_clients'] as const;

/** A FedAvg example: its name, the server's round loop and the targets of each side. */
interface FedAvgExample {
  readonly name: string;
  readonly server: readonly [string, string];
  readonly clients: readonly [string];
}
const DIGITS: FedAvgExample = { name: 'federated_digits', server: FEDERATED_DIGITS_SERVER_TARGETS, clients: FEDERATED_DIGITS_CLIENT_TARGETS };
const CNN: FedAvgExample = { name: 'federated_cnn', server: FEDERATED_CNN_SERVER_TARGETS, clients: FEDERATED_CNN_CLIENT_TARGETS };

function compileFedAvg(bb: Bb, example: FedAvgExample, config: FederatedDigitsConfig): Uint8Array {
  const quorum = config.quorum ?? 3;
  const target = config.target ?? Math.max(quorum, 4);
  const deadline = config.deadlineMs ?? 1000;
  const compiler = Compiler.forExample(bb, example.name);
  try {
    compiler.rebind(
      'aggregator',
      'Aggregator',
      'FedAvg',
      `quorum=${quorum},target=${target},deadline_ms=${deadline},no_quorum=abandon,init=model`,
    );
    return compiler.compile(Compiler.recordExample(bb, example.name));
  } finally {
    compiler.free();
  }
}

/** Compiles federated_digits with FedAvg sized for this many clients. */
export function compileFederatedDigits(bb: Bb, config: FederatedDigitsConfig = {}): Uint8Array {
  return compileFedAvg(bb, DIGITS, config);
}

/** Compiles federated_cnn with FedAvg sized for this many clients. */
export function compileFederatedCnn(bb: Bb, config: FederatedDigitsConfig = {}): Uint8Array {
  return compileFedAvg(bb, CNN, config);
}

/**
 * The CNN federated_cnn trains, exported from PyTorch (this package's
 * `bytesandbrains/models/digits_cnn.onnx`, or `source`): its ModelProto bytes.
 */
export async function loadDigitsCnn(source?: string | URL): Promise<Uint8Array> {
  return loadBytes(source ?? new URL('../models/digits_cnn.onnx', import.meta.url), 'the digits CNN');
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
  return BbNode.install(bb, { artifact, self, targets: DIGITS.server, slots: { data: { dataset: test } }, seed });
}

/** Starts the server's rounds for these clients, evaluating on the test set. */
export function startDigitsServer(server: BbNode, clients: readonly string[], test: Dataset, nowNs?: bigint): void {
  startServer(server, DIGITS.server[0], clients, test, nowNs);
}

function startServer(server: BbNode, module: string, clients: readonly string[], test: Dataset, nowNs?: bigint): void {
  const x = test.features();
  const y = test.labels();
  const inputs: Record<string, Value> = {
    clients: peersValue(clients),
    test_x: tensorValue('float', x.data, x.dims),
    test_y: tensorValue('float', y.data, y.dims),
  };
  server.invoke(module, inputs, nowNs);
}

function installClient(bb: Bb, example: FedAvgExample, artifact: Uint8Array, self: string, server: string, shard: Dataset,
  seed: number, model?: Uint8Array | OnnxModel): BbNode {
  const slots = model === undefined ? { data: { dataset: shard } } : { data: { dataset: shard }, model: { model } };
  const node = BbNode.install(bb, { artifact, self, targets: example.clients, slots, seed });
  node.addPeer(server);
  node.bindInput(example.clients[0], 'server', peersValue([server]));
  return node;
}

/** Installs a client on its shard, knowing its server. */
export function installDigitsClient(bb: Bb, artifact: Uint8Array, self: string, server: string, shard: Dataset, seed = 1): BbNode {
  return installClient(bb, DIGITS, artifact, self, server, shard, seed);
}

/**
 * Installs federated_cnn's server: the network to train (loadDigitsCnn's bytes, or any
 * model of the same inputs), the test set it evaluates on; its rounds start with
 * startCnnServer. It reports "round", "accuracy" and, each round, the global model as
 * plain ONNX ("onnx").
 */
export function installCnnServer(bb: Bb, artifact: Uint8Array, self: string, test: Dataset, model: Uint8Array | OnnxModel,
  seed = 1): BbNode {
  return BbNode.install(bb, { artifact, self, targets: CNN.server, slots: { data: { dataset: test }, model: { model } }, seed });
}

/** Starts federated_cnn's rounds for these clients, evaluating on the test set. */
export function startCnnServer(server: BbNode, clients: readonly string[], test: Dataset, nowNs?: bigint): void {
  startServer(server, CNN.server[0], clients, test, nowNs);
}

/** Installs a federated_cnn client on its shard with the same network, knowing its server. */
export function installCnnClient(bb: Bb, artifact: Uint8Array, self: string, server: string, shard: Dataset,
  model: Uint8Array | OnnxModel, seed = 1): BbNode {
  return installClient(bb, CNN, artifact, self, server, shard, seed, model);
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
