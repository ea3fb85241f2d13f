/**
 * Split learning: one ONNX model cut across peers (docs/SPLIT.md). The clients run the
 * first layers on their own data, a server the rest; only the activations at the cut and
 * their gradients cross the network, and the model trained this way is the model trained
 * whole. U-shaped, the clients keep the last layers and the loss too, so the labels never
 * leave them. With several clients the clients' parts are averaged with FedAvg every round
 * of steps (SplitFed).
 *
 * ```ts
 * const plan = splitLearning({ model: cnn, cut: '/MaxPool_1_output_0', clients: 4 });
 * const artifact = plan.compile(bb);                         // the same bytes on every peer
 * const server = plan.installServer(bb, { artifact, model: cnn });  // builds the server's layers only
 * const client = plan.installClient(bb, { artifact, model: cnn, server: server.node.self, data, test });
 * server.start(clientIds);                                   // SplitFed: who the average goes to
 * client.start();                                            // steps, and "accuracy" every evalMs
 * ```
 *
 * The Module is the DSL's `g.split` (C's bb_rec_split); both sides bind SplitModel, which
 * the compiler tells which part it holds. Each peer builds only its own part: a phone
 * never builds the server's layers, and a server needs no data set.
 */
import type { Bb } from '../engine/bb.js';
import { type Compiler, TENSOR_F32 } from '../node/compiler.js';
import type { Dataset } from '../train/dataset.js';
import type { Graph } from '../dsl/graph.js';
import { module, type Module } from '../dsl/module.js';
import { TYPES } from '../dsl/value.js';
import { BbError, BbErrorCode } from '../engine/errors.js';
import type { OnnxModel } from '../engine/model.js';
import { BbNode, type NodeAdmission } from '../node/node.js';
import { peersValue, scalarOf } from '../node/values.js';
import { compilerWith, compileWith, identityOptions, testInputs } from './install.js';

/** The ONNX model a split trains: its ModelProto bytes, a decoded OnnxModel, or `onnxModel(bytes)`. */
export type SplitModelSource = Uint8Array | OnnxModel | { readonly kind: 'onnx'; readonly bytes: Uint8Array };

/** How each part is trained: SplitModel's keys (docs/COMPONENTS.md); unset keys keep its defaults. */
export interface SplitTraining {
  readonly loss?: 'xent' | 'mse' | 'bce';
  readonly optimizer?: 'sgd' | 'momentum' | 'nesterov' | 'adam' | 'adamw';
  readonly lr?: number;
  readonly momentum?: number;
  readonly weightDecay?: number;
}

export interface SplitLearningOptions {
  /**
   * Where the model is cut: a value of the ONNX graph (vanilla), or two in the model's order
   * (U-shaped: the clients' first layers end at the first, the server's middle at the second).
   */
  readonly cut: string | readonly [string, string];
  /** 'vanilla' (default with one cut) or 'u' (the clients keep the head and the loss; default with two). */
  readonly shape?: 'vanilla' | 'u';
  /** How many clients train with the server: SplitFed's rounds wait for their parts. */
  readonly clients: number;
  /** SplitFed: the clients' parts averaged (FedAvg) every `roundSteps` steps (default: with more than one client). */
  readonly average?: boolean;
  /** Steps a client takes between sharing its part (SplitFed; default 10). */
  readonly roundSteps?: number;
  /** Parts a SplitFed round needs once its deadline passed (default: all but a quarter of the clients). */
  readonly quorum?: number;
  /** How long a SplitFed round waits for every client's part (default 3000 ms). */
  readonly deadlineMs?: number;
  readonly training?: SplitTraining;
  /** Rows per step on each client (its ArraySource's batch; default 32). */
  readonly batch?: number;
  /**
   * Whether a client draws its rows in a shuffled order each pass (default true); false
   * takes them in their order, `batch` at a time, as a reproducible run needs.
   */
  readonly shuffle?: boolean;
  /** How often a client asks for a step (default 1 ms): a step waits while the last one waits for its gradients. */
  readonly stepMs?: number;
  /** How often a client scores the model on its held-out set (default 1000 ms). */
  readonly evalMs?: number;
  /** A client step whose gradients have not come back after this long is given up (default: SplitModel's 10 s). */
  readonly timeoutMs?: number;
  /** The Module's name (default 'SplitLearning'); its partitions are named after it. */
  readonly name?: string;
}

interface NodeIdentity {
  /** The peer id: its identity's `peerId` to join a signalling room (default a fresh id, which cannot). */
  readonly self?: string;
  readonly seed?: bigint | number;
  /** The room's join policy: the node checks join tokens (as the other templates' installs). */
  readonly admission?: NodeAdmission;
}

export interface SplitServerOptions extends NodeIdentity {
  /** The compiled artifact (plan.compile), the same on every peer. */
  readonly artifact: Uint8Array;
  /** The whole model, the same as the clients' (the server builds its own layers from it). */
  readonly model: SplitModelSource;
}

export interface SplitClientOptions extends NodeIdentity {
  readonly artifact: Uint8Array;
  /** The whole model, the same as the server's (the client builds its own layers from it). */
  readonly model: SplitModelSource;
  /** The server's peer id. */
  readonly server: string;
  /** The client's own data: its batches. */
  readonly data: Dataset;
  /** What the client scores the model on every evalMs (its part and the server's, through the server). */
  readonly test: Dataset;
}

/** SplitModel's counters on a node (`split.<name>`), as numbers. */
export interface SplitCounts {
  /** Steps whose part took its optimizer step. */
  readonly steps: number;
  /** Client steps given up for want of gradients. */
  readonly timeouts: number;
  /** Gradients or activations for a step that was gone. */
  readonly stale: number;
  /** Activations of the wrong shape, labels that do not fit, a loss that is not finite. */
  readonly refused_activations: number;
  /** Gradients of the wrong shape, or not finite. */
  readonly refused_gradients: number;
  readonly evicted: number;
  /** SplitFed: parts shared, and averages that did not come back in time. */
  readonly shares: number;
  readonly average_timeouts: number;
}

const COUNTS = ['steps', 'timeouts', 'stale', 'refused_activations', 'refused_gradients', 'evicted', 'shares', 'average_timeouts'] as const;

export interface SplitServer {
  readonly node: BbNode;
  /**
   * Tells the server its clients: SplitFed's average goes to them (otherwise the server
   * answers whoever sends, and runs from their first activations on).
   */
  start(clients?: readonly string[]): void;
  /** Calls `listener` with the loss of each step the server's part took (vanilla); returns the unsubscribe. */
  onLoss(listener: (loss: number) => void): () => void;
  counts(): SplitCounts;
}

export interface SplitClient {
  readonly node: BbNode;
  /** Starts the client's steps at nowNs. */
  start(nowNs?: bigint): void;
  /** Calls `listener` with each held-out score (every evalMs); returns the unsubscribe. */
  onAccuracy(listener: (accuracy: number) => void): () => void;
  counts(): SplitCounts;
}

function counts(node: BbNode): SplitCounts {
  return Object.fromEntries(COUNTS.map((name) => [name, Number(node.counter(`split.${name}`))])) as unknown as SplitCounts;
}

function listen(node: BbNode, topic: string, listener: (value: number) => void): () => void {
  return node.onStep((step) => {
    if (step.kind === 'appEvent' && step.topic === topic) listener(scalarOf(step.value) ?? Number.NaN);
  });
}

function modelOf(model: SplitModelSource): Uint8Array | OnnxModel {
  if (model instanceof Uint8Array) return model;
  if ('kind' in model) {
    if (model.kind === 'onnx') return model.bytes;
    throw new BbError(BbErrorCode.InvalidArgument, `splitLearning: a split cuts an ONNX model; ${String(model.kind)} is not one`);
  }
  return model;
}

function whole(name: string, value: number, least = 1): number {
  if (!Number.isInteger(value) || value < least) throw new BbError(BbErrorCode.InvalidArgument, `splitLearning: ${name} must be an integer of at least ${least}, got ${value}`);
  return value;
}

/** SplitModel's config text: the keys set, in the order the component documents them. */
function modelConfig(training: SplitTraining, timeoutMs: number | undefined, roundSteps: number | undefined): string {
  const parts: string[] = [];
  if (training.loss !== undefined) parts.push(`loss=${training.loss}`);
  if (training.optimizer !== undefined) parts.push(`optimizer=${training.optimizer}`);
  if (training.lr !== undefined) parts.push(`lr=${training.lr}`);
  if (training.momentum !== undefined) parts.push(`momentum=${training.momentum}`);
  if (training.weightDecay !== undefined) parts.push(`weight_decay=${training.weightDecay}`);
  if (timeoutMs !== undefined) parts.push(`timeout_ms=${whole('timeoutMs', timeoutMs)}`);
  if (roundSteps !== undefined) parts.push(`round_steps=${whole('roundSteps', roundSteps)}`);
  return parts.join(',');
}

/** The binding configs a plan compiles with (averager undefined: no SplitFed). */
interface SplitConfigs {
  readonly model: string;
  readonly data: string;
  readonly averager: string | undefined;
}

export class SplitPlan {
  readonly module: Module;
  readonly shape: 'vanilla' | 'u';
  /** Whether the clients' parts are averaged (SplitFed). */
  readonly averaged: boolean;
  readonly #configs: SplitConfigs;

  /** @internal Made by splitLearning. */
  constructor(module: Module, shape: 'vanilla' | 'u', configs: SplitConfigs) {
    this.module = module;
    this.shape = shape;
    this.averaged = configs.averager !== undefined;
    this.#configs = configs;
  }

  get name(): string {
    return this.module.name;
  }
  /** The partitions a client installs: its steps (and, SplitFed, where the average lands). */
  get clientTargets(): readonly string[] {
    return this.averaged ? [this.name, `${this.name}_clients`] : [this.name];
  }
  /** The partition the server installs. */
  get serverTargets(): readonly string[] {
    return [`${this.name}_server`];
  }

  /** A compiler with the split's bindings (add your own before compiling). */
  compiler(bb: Bb): Compiler {
    const c = this.#configs;
    return compilerWith(bb, (compiler) => {
      // SplitModel draws a client's batches from the DataSource at `data`: declared, so the
      // compiler binds it only where the clients' part runs
      compiler.declare('SplitModel', TENSOR_F32, [['DataSource', 'data']]);
      compiler.declare('ArraySource', TENSOR_F32);
      compiler.bind('client_model', 'Model', 'SplitModel', c.model || undefined);
      compiler.bind('server_model', 'Model', 'SplitModel', c.model || undefined);
      compiler.bind('data', 'DataSource', 'ArraySource', c.data);
      if (c.averager !== undefined) {
        compiler.declare('FedAvg', TENSOR_F32);
        compiler.bind('averager', 'Aggregator', 'FedAvg', c.averager);
      }
    });
  }

  /** Records and compiles the Module: the artifact every peer installs. */
  compile(bb: Bb): Uint8Array {
    return compileWith(bb, this.compiler(bb), this.module);
  }

  /** Installs the server: the server's layers (and SplitFed's averager). */
  installServer(bb: Bb, options: SplitServerOptions): SplitServer {
    const node = BbNode.install(bb, {
      artifact: options.artifact,
      targets: this.serverTargets,
      slots: { server_model: { model: modelOf(options.model) } },
      ...identityOptions(options),
    });
    const target = this.serverTargets[0]!;
    const averaged = this.averaged;
    return {
      node,
      start(clients = []) {
        for (const client of clients) node.addPeer(client);
        if (averaged) node.bindInput(target, 'clients', peersValue(clients));
      },
      onLoss: (listener) => listen(node, 'split_loss', listener),
      counts: () => counts(node),
    };
  }

  /** Installs a client on its own data and held-out set, knowing its server. */
  installClient(bb: Bb, options: SplitClientOptions): SplitClient {
    const node = BbNode.install(bb, {
      artifact: options.artifact,
      targets: this.clientTargets,
      slots: { client_model: { model: modelOf(options.model) }, data: { dataset: options.data } },
      ...identityOptions(options),
    });
    node.addPeer(options.server);
    const name = this.name;
    const server = options.server;
    const test = options.test;
    return {
      node,
      start(nowNs) {
        // bound, not handed to one run: the runs what arrives starts use them too (a U-shaped
        // client sends the head's gradients to the server and scores with test_y there)
        const held = testInputs(test);
        node.bindInput(name, 'server', peersValue([server]));
        node.bindInput(name, 'test_x', held.test_x);
        node.bindInput(name, 'test_y', held.test_y);
        node.invoke(name, {}, nowNs);
      },
      onAccuracy: (listener) => listen(node, 'accuracy', listener),
      counts: () => counts(node),
    };
  }
}

/**
 * Split learning of one ONNX model between clients and a server, from one Module the
 * template records (`plan.module`).
 */
export function splitLearning(options: SplitLearningOptions): SplitPlan {
  const cuts = typeof options.cut === 'string' ? [options.cut] : [...options.cut];
  const shape = options.shape ?? (cuts.length === 2 ? 'u' : 'vanilla');
  const clients = whole('clients', options.clients);
  const averaged = options.average ?? clients > 1;
  const quorum = whole('quorum', options.quorum ?? clients - Math.floor(clients / 4));
  if (quorum > clients) throw new BbError(BbErrorCode.InvalidArgument, `splitLearning: quorum ${quorum} is more than clients ${clients}`);
  const stepNs = BigInt(whole('stepMs', options.stepMs ?? 1)) * 1_000_000n;
  const evalNs = BigInt(whole('evalMs', options.evalMs ?? 1000)) * 1_000_000n;

  // in this order, split_cnn's Modules are recorded byte for byte (src/programs/split_cnn.c)
  const body = (g: Graph): void => {
    const server = g.input('server', TYPES.peerIds);
    const x = g.input('test_x', TYPES.tensorF32);
    const y = g.input('test_y', TYPES.tensorF32);
    const tick = g.interval(stepNs);
    const evalTick = g.interval(evalNs);
    const clientPeers = averaged ? g.input('clients', TYPES.peerIds) : undefined;
    g.split({
      shape,
      cuts,
      clientModel: g.model('client_model'),
      serverModel: g.model('server_model'),
      server,
      tick,
      heldOut: { x, y, tick: evalTick },
      ...(clientPeers === undefined ? {} : { averaging: { averager: g.aggregator('averager'), clients: clientPeers } }),
    });
  };
  return new SplitPlan(module(options.name ?? 'SplitLearning', body), shape, {
    model: modelConfig(options.training ?? {}, options.timeoutMs, options.roundSteps),
    data: `batch=${whole('batch', options.batch ?? 32)}${options.shuffle === false ? ',shuffle=0' : ''}`,
    averager: averaged ? `quorum=${quorum},target=${clients},deadline_ms=${whole('deadlineMs', options.deadlineMs ?? 3000)},no_quorum=extend` : undefined,
  });
}
