/**
 * What every template returns: its Module, how it compiles (the bindings), which partitions
 * a server and a client install, and the installs themselves.
 */
import type { Bb } from '../engine/bb.js';
import { type Compiler, TENSOR_F32 } from '../node/compiler.js';
import type { Dataset } from '../train/dataset.js';
import type { Module } from '../dsl/module.js';
import { BbError, BbErrorCode } from '../engine/errors.js';
import { BbNode, type NodeAdmission, type Step } from '../node/node.js';
import { dpEpsilon } from '../train/privacy.js';
import { OnnxTrainer } from '../train/trainer.js';
import { CODEC_REFUSALS, trafficOf, type Traffic } from '../phones/traffic.js';
import { peersValue, scalarOf, type Value } from '../node/values.js';
import { answerServerRequests, REGISTRY_SLOT, type Discovery } from './discovery.js';
import { compilerWith, compileWith, identityOptions, testInputs } from './install.js';
import type { Signer } from '../identity/identity.js';
import { batchOf, bindModel, ensureModelType, modelSlots, type ModelChoice } from './models.js';

/** A round the server reported: its number and the model's score on the server's test set. */
export interface RoundReport {
  readonly round: number;
  readonly accuracy: number;
  /** A server's envelope bytes received since its previous report (the clients' uploads, mostly). */
  readonly bytesIn?: number;
  /** A server's envelope bytes sent since its previous report (the global model to each client, mostly). */
  readonly bytesOut?: number;
  /**
   * With differential privacy (the template's `dp`): the privacy spent so far, ε at the
   * plan's δ over the rounds that closed under it (the aggregator's `fedavg.dp_rounds`), by
   * the Rényi accountant (dpEpsilon, q = 1, or the plan's sample rate); Infinity with a
   * noise multiplier of 0.
   */
  readonly epsilon?: number;
  /**
   * With secure aggregation (the template's `secure`): the model of this report is the
   * SecAgg+ sum of `summed` clients' masked updates (0: no sum made it — the first model,
   * or a round given out again after an abandoned one).
   */
  readonly secure?: { readonly summed: number };
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
 * counters `<fedavg|robustavg|fedbuff>.<reason>`; asynchronous rounds also refuse an update
 * more versions old than maxStaleness, `refused_stale`): a contribution that was not a float32 update
 * (`refused_type`), carried bad metadata, had another length, held a NaN or an infinity,
 * claimed zero samples, named a round not yet open, came when the round was full, came from
 * a peer the round was not sent to (`refused_non_member`), without a client's join token
 * (`refused_unadmitted`, `refused_role`), or late; an update past the distance bound
 * (`norm_dropped`, `norm_clipped`), a sample count cut to the cap (`samples_clipped`), an
 * update whose sender has answered the model's moves like an ascent step — its training
 * reversed — left out or given part of its weight (`ascent_dropped`, `ascent_weighed`), a
 * round abandoned without a quorum; and the announces the registry refused for want of a
 * token (`registry_unadmitted`); and the compressed updates its codec refused
 * (`codec_length`, `codec_count`, `codec_index`, `codec_nonfinite`, `codec_reference`:
 * bytes that do not hold what their header says, a count out of bounds, an index out of
 * range or repeated, a NaN, a length other than the model's).
 */
export type Refusals = Readonly<Record<(typeof REFUSALS)[number] | 'registry_unadmitted' | `codec_${(typeof CODEC_REFUSALS)[number]}`, number>>;

const REFUSALS = [
  'refused_type', 'refused_metadata', 'refused_length', 'refused_nonfinite', 'refused_samples', 'refused_future',
  'refused_full', 'refused_key', 'refused_non_member', 'refused_unadmitted', 'refused_role', 'late_dropped',
  'norm_dropped', 'norm_clipped', 'samples_clipped', 'center_clipped', 'ascent_dropped', 'ascent_weighed',
  'rounds_abandoned', 'refused_stale',
] as const;

/** The choices a template compiles with. */
export interface PlanSettings {
  readonly name: string;
  /** The prefix of the aggregator's counters: `fedavg` (FedAvg) or `robustavg` (RobustAvg). */
  readonly aggregatorCounters: 'fedavg' | 'robustavg' | 'fedbuff';
  /**
   * Asynchronous rounds: the server is invoked again, with `clients` = the peers its "ready"
   * events name (each client whose update arrived), and with those sent the model more than
   * patienceNs ago and silent since.
   */
  readonly answerReady?: { readonly patienceNs: bigint };
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
  /** Differential privacy: what each round's `epsilon` is accounted with. */
  readonly dp?: PlanDp;
  /** Secure aggregation: the server has no partition of its own for updates, the clients no `server` input. */
  readonly secure?: boolean;
}

/** What a plan's ε is accounted with: the noise multiplier, δ, and the sampling rate (default 1). */
export interface PlanDp {
  readonly noiseMultiplier: number;
  readonly delta: number;
  readonly sampleRate?: number;
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
  /**
   * A server about to be restored from its checkpoint (restoreCheckpoint): its bootstrap
   * is not run, as a restore needs a node that has not run (the bootstrap is in the
   * checkpoint), and start() is not called.
   */
  readonly restoring?: boolean;
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
  /** What signs for the client's peer id (its Identity): a `secure` federation's clients sign their SecAgg+ keys with it and need it. */
  readonly signer?: Signer;
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
  /** What the server sent and received so far (bytes, envelopes, its codec's work). */
  traffic(): Traffic;
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
    return this.#settings.secure === true ? [this.name] : [this.name, `${this.name}_server`];
  }
  /** The partition a client installs. */
  get clientTargets(): readonly string[] {
    return [`${this.name}_clients`];
  }

  /** A compiler with the template's bindings and declarations (add your own before compiling). */
  compiler(bb: Bb): Compiler {
    const s = this.#settings;
    ensureModelType(bb, s.model);
    return compilerWith(bb, (compiler) => {
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
    });
  }

  /** Records and compiles the Module: the artifact every peer installs. */
  compile(bb: Bb): Uint8Array {
    return compileWith(bb, this.compiler(bb), this.module);
  }

  /** Installs the server: its model scores itself on `test` every round. */
  installServer(bb: Bb, options: ServerOptions): ServerNode {
    ensureModelType(bb, this.#settings.model);
    const node = BbNode.install(bb, {
      artifact: options.artifact,
      targets: this.serverTargets,
      slots: { data: { dataset: options.test }, ...modelSlots(this.#settings.model) },
      ...identityOptions(options),
    });
    if (options.snapshot !== undefined) node.restore(options.snapshot);
    const registry = this.#settings.discovery === 'registry';
    if (registry && options.snapshot === undefined && options.restoring !== true) answerServerRequests(node, node.self, options.nowNs);
    const listeners = new Set<(report: RoundReport) => void>();
    const rounds = this.#rounds;
    let seen = trafficOf(node);
    const dp = this.#settings.dp;
    const secure = this.#settings.secure === true;
    let summed = 0n;
    const finished = new Promise<RoundReport>((resolve) => {
      node.onStep(
        roundReporter((scored) => {
          const now = trafficOf(node);
          const report = {
            ...scored,
            bytesIn: now.bytesReceived - seen.bytesReceived,
            bytesOut: now.bytesSent - seen.bytesSent,
            ...(dp === undefined ? {} : { epsilon: privacySpent(bb, dp, Number(node.counter('fedavg.dp_rounds'))) }),
            ...(secure ? { secure: { summed: Number(node.counter('fedavg.secagg_summed') - summed) } } : {}),
          };
          if (secure) summed = node.counter('fedavg.secagg_summed');
          seen = now;
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
    const answerReady = this.#settings.answerReady;
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
        for (const reason of CODEC_REFUSALS) counts[`codec_${reason}`] = Number(node.counter(`codec.refused_${reason}`));
        return counts as Refusals;
      },
      traffic: () => trafficOf(node),
      onRound(listener) {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
      start(clients = [], nowNs) {
        const inputs: Record<string, Value> = { ...startInputs, ...testInputs(test) };
        if (!registry) {
          // seats: the server sends to these peers, so it must know them
          for (const client of clients) node.addPeer(client);
          inputs['clients'] = peersValue(clients);
        }
        node.invoke(name, inputs, nowNs);
        if (answerReady !== undefined) answerReadyClients(node, name, inputs, clients, answerReady.patienceNs, nowNs ?? 0n);
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
      ...identityOptions(options),
    });
    node.addPeer(options.server);
    if (this.#settings.secure !== true) node.bindInput(this.clientTargets[0]!, 'server', peersValue([options.server]));
    if (this.#settings.discovery === 'registry') answerServerRequests(node, options.server, options.nowNs);
    return node;
  }
}

/**
 * Asynchronous rounds: each "ready" event (a client's update arrived) invokes the server's
 * module again, at the time of the poll that raised it, with that client and those sent
 * the model patienceNs ago or more and silent since, so each gets the current model.
 */
function answerReadyClients(
  node: BbNode,
  name: string,
  inputs: Readonly<Record<string, Value>>,
  clients: readonly string[],
  patienceNs: bigint,
  startedNs: bigint,
): void {
  const servedAt = new Map<string, bigint>(clients.map((c) => [c, startedNs]));
  node.onStep((step) => {
    if (step.kind !== 'appEvent' || step.topic !== 'ready' || step.value?.kind !== 'peer' || !servedAt.has(step.value.peer)) return;
    const now = node.polledAt ?? startedNs;
    const to = [step.value.peer];
    for (const [client, at] of servedAt) if (client !== step.value.peer && now - at >= patienceNs) to.push(client);
    for (const client of to) servedAt.set(client, now);
    node.invoke(name, { ...inputs, clients: peersValue(to) }, now);
  });
}

/** ε at δ after `rounds` rounds of DP-FedAvg, each on every client (q = 1) or on a Poisson sample at the plan's rate. */
function privacySpent(bb: Bb, dp: PlanDp, rounds: number): number {
  if (rounds === 0) return 0;
  if (dp.noiseMultiplier === 0) return Infinity;
  return dpEpsilon(bb, { q: dp.sampleRate ?? 1, sigma: dp.noiseMultiplier, steps: rounds, delta: dp.delta }).epsilon;
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
