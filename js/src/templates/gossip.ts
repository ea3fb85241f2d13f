/**
 * Gossip learning: no server. Every peer scores its model, trains it on its own data and
 * sends it to one peer its gossip view samples; what a peer receives is mixed into its own
 * model (GossipAvg). The views exchange entries (GossipView), so a peer needs to know only
 * a few others to start (`seeds`).
 *
 * ```ts
 * const plan = gossipLearning({ model: cpuMlp({ inputs: 2, outputs: 2 }) });
 * const artifact = plan.compile(bb);       // every peer compiles the same bytes
 * const peer = plan.installPeer(bb, { artifact, data, test, seeds: [other] });
 * peer.start();
 * ```
 */
import type { Bb } from '../engine/bb.js';
import { type Compiler, TENSOR_F32 } from '../node/compiler.js';
import type { Dataset } from '../train/dataset.js';
import type { Graph } from '../dsl/graph.js';
import { module, type Module } from '../dsl/module.js';
import { TYPES } from '../dsl/value.js';
import { BbError, BbErrorCode } from '../engine/errors.js';
import { BbNode, type NodeAdmission } from '../node/node.js';
import { codecFor, type Compression } from './compress.js';
import { compilerWith, compileWith, identityOptions, testInputs } from './install.js';
import { batchOf, bindModel, ensureModelType, modelSlots, type ModelChoice } from './models.js';
import { roundReporter, type RoundReport } from './plan.js';

export interface GossipLearningOptions {
  readonly model: ModelChoice;
  /** The gossip view: how many peers each keeps (default 6) and trades per exchange (default 3). */
  readonly view?: { readonly size?: number; readonly shuffle?: number };
  /** How often each peer trains and gossips (default 100 ms). */
  readonly periodMs?: number;
  /** How much of a received model is mixed in (default 0.5). */
  readonly weight?: number;
  readonly fitSteps?: number;
  readonly batch?: number;
  /** Compresses the models peers send each other: 'f16' or 'u8' (compress.ts; top-k needs a model both ends hold). */
  readonly compress?: Compression;
  /** The Module's name (default 'GossipLearning'). */
  readonly name?: string;
}

export interface GossipPeerOptions {
  readonly artifact: Uint8Array;
  readonly self?: string;
  /** This peer's data (its ArraySource). */
  readonly data: Dataset;
  /** What it scores itself on each period. */
  readonly test: Dataset;
  /** Peers it knows to begin with (its view's first entries; they need not be all). */
  readonly seeds: readonly string[];
  readonly seed?: bigint | number;
  /**
   * The room's join policy (its room and operator keys): the node checks join tokens, so
   * only peers whose token the host hands over (node.admitToken; connectPeer does it for
   * every member of the room) enter its view and mix into its model. Give it whenever the
   * room has a policy.
   */
  readonly admission?: NodeAdmission;
}

export interface GossipPeer {
  readonly node: BbNode;
  /** Starts the gossip at nowNs. */
  start(nowNs?: bigint): void;
  /** Each period's score ("round" counts the periods). */
  onRound(listener: (report: RoundReport) => void): () => void;
}

export class GossipPlan {
  readonly module: Module;
  readonly #options: GossipLearningOptions;

  /** @internal */
  constructor(module: Module, options: GossipLearningOptions) {
    this.module = module;
    this.#options = options;
  }

  get name(): string {
    return this.module.name;
  }

  #viewConfig(seeds: readonly string[] = []): string {
    const view = this.#options.view ?? {};
    const config = `view=${view.size ?? 6},shuffle=${view.shuffle ?? 3}`;
    return seeds.length > 0 ? `seeds=${seeds.join(';')},${config}` : config;
  }

  compiler(bb: Bb): Compiler {
    const o = this.#options;
    ensureModelType(bb, o.model);
    return compilerWith(bb, (compiler) => {
      compiler.setPermissiveTypes(true); // sample counts and peer lists have no storage type
      bindModel(compiler, o.model, 'model', o.fitSteps ?? 4, 'data');
      compiler.declare('ArraySource', TENSOR_F32);
      compiler.declare('GossipAvg', TENSOR_F32, [['Model', 'model']]);
      compiler.bind('data', 'DataSource', 'ArraySource', `batch=${batchOf(o.model, o.batch ?? 32)}`);
      compiler.bind('view', 'PeerSelector', 'GossipView', this.#viewConfig());
      compiler.bind('aggregator', 'Aggregator', 'GossipAvg', `model=model,weight=${o.weight ?? 0.5}`);
      const codec = codecFor('gossipLearning', o.compress, false);
      if (codec !== undefined) compiler.bind('codec', 'Codec', codec.type, codec.config);
    });
  }

  compile(bb: Bb): Uint8Array {
    return compileWith(bb, this.compiler(bb), this.module);
  }

  installPeer(bb: Bb, options: GossipPeerOptions): GossipPeer {
    ensureModelType(bb, this.#options.model);
    const node = BbNode.install(bb, {
      artifact: options.artifact,
      targets: [this.name],
      slots: { data: { dataset: options.data }, view: { config: this.#viewConfig(options.seeds) }, ...modelSlots(this.#options.model) },
      ...identityOptions(options),
    });
    for (const peer of options.seeds) node.addPeer(peer);
    const name = this.name;
    const test = options.test;
    return {
      node,
      start(nowNs) {
        node.invoke(name, testInputs(test), nowNs);
      },
      onRound: (listener) => node.onStep(roundReporter(listener)),
    };
  }
}

export function gossipLearning(options: GossipLearningOptions): GossipPlan {
  const periodMs = options.periodMs ?? 100;
  if (!Number.isInteger(periodMs) || periodMs < 1) throw new BbError(BbErrorCode.InvalidArgument, `gossipLearning: periodMs must be a positive integer, got ${periodMs}`);
  const compressed = codecFor('gossipLearning', options.compress, false) !== undefined;
  const body = (g: Graph): void => {
    const testX = g.input('test_x', TYPES.tensorF32);
    const testY = g.input('test_y', TYPES.tensorF32);
    const model = g.model('model');
    const tick = g.interval(BigInt(periodMs) * 1_000_000n);
    const params = model.params(tick);
    // the model as gossip left it is what the peer has learnt: score it before training
    const accuracy = model.evaluate(testX, testY, params);
    g.output('accuracy', accuracy);
    const { trained } = model.fit(params, accuracy);
    const wire = compressed ? g.codec('codec') : undefined;
    g.netOut('share', g.peerSelector('view').sample(1, tick), wire === undefined ? trained : wire.encode(trained));
    const shared = g.lookupOutput('share');
    const received = wire === undefined ? shared : wire.decode(shared);
    g.aggregator('aggregator').contribute(received, received);
  };
  return new GossipPlan(module(options.name ?? 'GossipLearning', body), options);
}
