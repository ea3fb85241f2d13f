/**
 * What every template returns: its Module, how it compiles (the bindings), which partitions
 * a server and a client install, and the installs themselves.
 */
import type { Bb } from '../bb.js';
import { Compiler, TENSOR_F32 } from '../compiler.js';
import type { Dataset } from '../dataset.js';
import type { Module } from '../dsl/module.js';
import { BbError, BbErrorCode } from '../errors.js';
import { BbNode, type NodeAdmission, type Step } from '../node.js';
import { OnnxTrainer } from '../trainer.js';
import { peersValue, scalarOf, tensorValue, type Value } from '../values.js';
import { answerServerRequests, REGISTRY_SLOT, type Discovery } from './discovery.js';
import { batchOf, bindModel, ensureModelType, modelSlots, type ModelChoice } from './models.js';

/** A round the server reported: its number and the model's score on the server's test set. */
export interface RoundReport {
  readonly round: number;
  readonly accuracy: number;
}

/**
 * Turns a server's steps into round reports: each "accuracy" event is a round, numbered
 * by the "round" event before it when the Module reports one, else counted.
 */
export function roundReporter(onRound: (report: RoundReport) => void): (step: Step) => void {
  let round = 0;
  let numbered = false;
  return (step) => {
    if (step.kind !== 'appEvent') return;
    if (step.topic === 'round') {
      round = scalarOf(step.value) ?? round;
      numbered = true;
    }
    if (step.topic === 'accuracy') onRound({ round: numbered ? round : ++round, accuracy: scalarOf(step.value) ?? Number.NaN });
  };
}

/**
 * What the server's aggregator refused, left out or cut so far, by reason (its node
 * counters `<fedavg|robustavg>.<reason>`): a contribution that was not a float32 update
 * (`refused_type`), carried bad metadata, had another length, held a NaN or an infinity,
 * claimed zero samples, named a round not yet open, came when the round was full, came from
 * a peer the round was not sent to (`refused_non_member`), without a client's join token
 * (`refused_unadmitted`, `refused_role`), or late; an update past the distance bound
 * (`norm_dropped`, `norm_clipped`), a sample count cut to the cap (`samples_clipped`), a
 * round abandoned without a quorum; and the announces the registry refused for want of a
 * token (`registry_unadmitted`).
 */
export type Refusals = Readonly<Record<(typeof REFUSALS)[number] | 'registry_unadmitted', number>>;

const REFUSALS = [
  'refused_type', 'refused_metadata', 'refused_length', 'refused_nonfinite', 'refused_samples', 'refused_future',
  'refused_full', 'refused_key', 'refused_non_member', 'refused_unadmitted', 'refused_role', 'late_dropped',
  'norm_dropped', 'norm_clipped', 'samples_clipped', 'center_clipped', 'rounds_abandoned',
] as const;

/** The choices a template compiles with. */
export interface PlanSettings {
  readonly name: string;
  /** The prefix of the aggregator's counters: `fedavg` (FedAvg) or `robustavg` (RobustAvg). */
  readonly aggregatorCounters: 'fedavg' | 'robustavg';
  readonly model: ModelChoice;
  readonly discovery: Discovery;
  readonly fitSteps: number;
  readonly batch: number;
  readonly registryTtlMs: number;
  /** With the registry: live clients the server waits for before a round (the quorum). */
  readonly minView: number;
  /** Binds what else the template needs (aggregator, codec, view) after the model and data. */
  readonly bindRest: (compiler: Compiler) => void;
  /** Inputs the server's run starts with besides its test set and clients. */
  readonly startInputs?: Readonly<Record<string, Value>>;
}

export interface ServerOptions {
  /** The compiled artifact (plan.compile), the same on every peer. */
  readonly artifact: Uint8Array;
  /** The server's peer id: its identity's `peerId` to join a signalling room (default a fresh id, which cannot). */
  readonly self?: string;
  /** What the server scores the model on each round. */
  readonly test: Dataset;
  readonly seed?: bigint | number;
  /** The node's clock now (default: monotonicNowNs, PollDriver's clock): when its bootstrap starts. */
  readonly nowNs?: bigint;
  /**
   * The room's join policy (its room and operator keys): the node checks join tokens, so
   * only peers whose token the host hands over (node.admitToken; connectPeer does it for
   * every member of the room) take part. Give it whenever the room has a policy.
   */
  readonly admission?: NodeAdmission;
  /**
   * A snapshot of an earlier server of the same plan, artifact and id (`node.snapshot()`,
   * taken once the node had no work): the server goes on from it — its rounds, global
   * model, registry and clock — so do not `start()` it again. Poll it with a clock that
   * continues the snapshot's (its time then, plus the time since).
   */
  readonly snapshot?: Uint8Array;
}

export interface ClientOptions {
  readonly artifact: Uint8Array;
  /** The client's peer id: its identity's `peerId` to join a signalling room (default a fresh id, which cannot). */
  readonly self?: string;
  /** The server's peer id. */
  readonly server: string;
  /** The client's own data: its ArraySource reads it. */
  readonly data: Dataset;
  readonly seed?: bigint | number;
  /** The node's clock now (default: monotonicNowNs, PollDriver's clock): when its bootstrap starts. */
  readonly nowNs?: bigint;
  /** The room's join policy, as the server's (ServerOptions.admission). */
  readonly admission?: NodeAdmission;
}

/** A server node and its rounds. */
export interface ServerNode {
  readonly node: BbNode;
  /**
   * Starts the rounds at nowNs. With discovery 'seats' it needs the clients' ids; with
   * 'registry' the clients announce themselves (any given are ignored).
   */
  start(clients?: readonly string[], nowNs?: bigint): void;
  /** Calls `listener` with each round; returns the function that unsubscribes. */
  onRound(listener: (report: RoundReport) => void): () => void;
  /** Resolves with the report of round `rounds` (the plan's), if it has one. */
  readonly finished: Promise<RoundReport>;
  /** What the aggregator refused, left out or cut so far, by reason. */
  refusals(): Refusals;
  /** The global model's flat parameters as the last round left them (undefined before the first round). */
  parameters(): Float32Array | undefined;
  /**
   * The global model as plain ONNX (inference form, the initializers' names kept), for an
   * `onnxModel` federation: onnxruntime or CpuSession run it. Throws before the first round,
   * and for models that are not ONNX.
   */
  exportModel(): Uint8Array;
}

export class Plan {
  readonly module: Module;
  readonly #settings: PlanSettings;
  readonly #rounds: number | undefined;

  /** @internal Made by the templates. */
  constructor(module: Module, settings: PlanSettings, rounds?: number) {
    this.module = module;
    this.#settings = settings;
    this.#rounds = rounds;
  }

  get name(): string {
    return this.module.name;
  }
  get discovery(): Discovery {
    return this.#settings.discovery;
  }

  /** The partitions the server installs: the round loop (@self) and where updates land. */
  get serverTargets(): readonly string[] {
    return [this.name, `${this.name}_server`];
  }
  /** The partition a client installs. */
  get clientTargets(): readonly string[] {
    return [`${this.name}_clients`];
  }

  /** A compiler with the template's bindings and declarations (add your own before compiling). */
  compiler(bb: Bb): Compiler {
    const s = this.#settings;
    ensureModelType(bb, s.model);
    const compiler = new Compiler(bb);
    try {
      // round ids and sample counts are values without a storage type
      compiler.setPermissiveTypes(true);
      bindModel(compiler, s.model, 'model', s.fitSteps, 'data');
      compiler.declare('ArraySource', TENSOR_F32);
      compiler.bind('data', 'DataSource', 'ArraySource', `batch=${batchOf(s.model, s.batch)}`);
      s.bindRest(compiler);
      if (s.discovery === 'registry') {
        compiler.bind('clients', 'PeerSelector', 'GlobalRegistryServer', `ttl_ms=${s.registryTtlMs},registry=clients,min_view=${s.minView}`);
        compiler.bind(REGISTRY_SLOT, 'Protocol', 'GlobalRegistryClient', 'registry=clients');
      }
      return compiler;
    } catch (error) {
      compiler.free();
      throw error;
    }
  }

  /** Records and compiles the Module: the artifact every peer installs. */
  compile(bb: Bb): Uint8Array {
    const compiler = this.compiler(bb);
    try {
      return compiler.compile(this.module.build(bb));
    } finally {
      compiler.free();
    }
  }

  /** Installs the server: its model scores itself on `test` every round. */
  installServer(bb: Bb, options: ServerOptions): ServerNode {
    ensureModelType(bb, this.#settings.model);
    const node = BbNode.install(bb, {
      artifact: options.artifact,
      targets: this.serverTargets,
      slots: { data: { dataset: options.test }, ...modelSlots(this.#settings.model) },
      ...(options.self === undefined ? {} : { self: options.self }),
      ...(options.seed === undefined ? {} : { seed: options.seed }),
      ...(options.admission === undefined ? {} : { admission: options.admission }),
    });
    if (options.snapshot !== undefined) node.restore(options.snapshot);
    const registry = this.#settings.discovery === 'registry';
    if (registry && options.snapshot === undefined) answerServerRequests(node, node.self, options.nowNs);
    const listeners = new Set<(report: RoundReport) => void>();
    const rounds = this.#rounds;
    const finished = new Promise<RoundReport>((resolve) => {
      node.onStep(
        roundReporter((report) => {
          for (const listener of [...listeners]) listener(report);
          if (rounds !== undefined && report.round >= rounds) resolve(report);
        }),
      );
    });
    const name = this.name;
    const test = options.test;
    const startInputs = this.#settings.startInputs ?? {};
    const prefix = this.#settings.aggregatorCounters;
    const model = this.#settings.model;
    let global: Float32Array | undefined;
    node.onStep((step) => {
      if (step.kind === 'appEvent' && step.topic === 'model' && step.value?.kind === 'tensor' && step.value.tensor.data instanceof Float32Array) {
        global = step.value.tensor.data.slice();
      }
    });
    return {
      node,
      finished,
      parameters: () => global?.slice(),
      exportModel() {
        if (global === undefined) throw new BbError(BbErrorCode.InvalidArgument, 'exportModel: no round has closed yet, so there is no global model');
        return exportOnnx(bb, model, global);
      },
      refusals() {
        const counts: Record<string, number> = { registry_unadmitted: Number(node.counter('global_registry.refused_unadmitted')) };
        for (const reason of REFUSALS) counts[reason] = Number(node.counter(`${prefix}.${reason}`));
        return counts as Refusals;
      },
      onRound(listener) {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
      start(clients = [], nowNs) {
        const x = test.features();
        const y = test.labels();
        const inputs: Record<string, Value> = {
          ...startInputs,
          test_x: tensorValue('float', x.data, x.dims),
          test_y: tensorValue('float', y.data, y.dims),
        };
        if (!registry) {
          // seats: the server sends to these peers, so it must know them
          for (const client of clients) node.addPeer(client);
          inputs['clients'] = peersValue(clients);
        }
        node.invoke(name, inputs, nowNs);
      },
    };
  }

  /** Installs a client on its own data, knowing its server (registry: it announces itself). */
  installClient(bb: Bb, options: ClientOptions): BbNode {
    ensureModelType(bb, this.#settings.model);
    const node = BbNode.install(bb, {
      artifact: options.artifact,
      targets: this.clientTargets,
      slots: { data: { dataset: options.data }, ...modelSlots(this.#settings.model) },
      ...(options.self === undefined ? {} : { self: options.self }),
      ...(options.seed === undefined ? {} : { seed: options.seed }),
      ...(options.admission === undefined ? {} : { admission: options.admission }),
    });
    node.addPeer(options.server);
    node.bindInput(this.clientTargets[0]!, 'server', peersValue([options.server]));
    if (this.#settings.discovery === 'registry') answerServerRequests(node, options.server, options.nowNs);
    return node;
  }
}

/** An ONNX model with these parameters, as plain ONNX (an OnnxTrainer made for the export and freed). */
function exportOnnx(bb: Bb, model: ModelChoice, params: Float32Array): Uint8Array {
  if (model.kind !== 'onnx') {
    throw new BbError(BbErrorCode.Unsupported, `exportModel: a ${model.kind === 'cpuMlp' ? 'cpuMlp' : 'componentModel'} federation has no ONNX form here; federate an onnxModel to export one (parameters() gives the flat vector)`);
  }
  const { batch: _batch, stepsPerRound: _steps, ...options } = model.options;
  const trainer = OnnxTrainer.create(bb, model.bytes, options);
  try {
    trainer.setParameters(params);
    return trainer.export();
  } finally {
    trainer.free();
  }
}
