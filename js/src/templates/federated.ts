/**
 * Federated averaging: one server and any number of clients. Each round the server sends
 * its global model to the clients; each client trains it on its own data and sends the
 * result back; the server aggregates what arrived into the next global model and scores
 * it on its test set.
 *
 * ```ts
 * const plan = federatedAveraging({ model: cpuMlp({ inputs: 2, outputs: 2 }), clients: 2 });
 * const artifact = plan.compile(bb);
 * const server = plan.installServer(bb, { artifact, test });       // then server.start()
 * const client = plan.installClient(bb, { artifact, server: server.node.self, data: shard });
 * ```
 *
 * With `mode: 'async'` there are no rounds (FedBuff, Nguyen et al. 2022): the server steps
 * the global model every `buffer` updates, weighing an update trained from an older version
 * down by 1/√(1 + staleness) and refusing one more than `maxStaleness` versions old, and
 * each client whose update arrives is sent the current model at once, so a fast client
 * never waits for a slow one. "round" is then the model's version.
 *
 * The Module is written with the DSL (`plan.module`); nothing of it is special-cased in C.
 */
import type { Compiler } from '../node/compiler.js';
import { TENSOR_F32 } from '../node/compiler.js';
import { BbError, BbErrorCode } from '../engine/errors.js';
import type { Graph } from '../dsl/graph.js';
import { module } from '../dsl/module.js';
import type { CodecSlot } from '../dsl/slots.js';
import { TYPES, type GraphValue } from '../dsl/value.js';
import { codecFor, type Compression } from './compress.js';
import { recordAnnounce, type Discovery } from './discovery.js';
import type { ModelChoice } from './models.js';
import { Plan } from './plan.js';

export interface FederatedAveragingOptions {
  /** What the federation trains (cpuMlp, componentModel, onnxModel). */
  readonly model: ModelChoice;
  /**
   * Clients a round waits for: it closes as soon as this many updates arrived (with
   * `dp.sampleRate`: the population each round samples from, and rounds close at their deadline).
   */
  readonly clients: number;
  /**
   * Updates a round needs once its deadline passed (default: half the clients, rounded up):
   * a round closes at its deadline with the clients that answered, so a client gone silent
   * or one whose update is refused (NaN, another length, no token) holds nobody up.
   */
  readonly quorum?: number;
  /** How long a round waits for all clients before it closes with a quorum (default 1000 ms). */
  readonly deadlineMs?: number;
  /** Rounds after which the server's `finished` resolves (default: none; the rounds go on). */
  readonly rounds?: number;
  /**
   * How updates become the global model. 'fedavg' (the default): the mean of the updates,
   * each within a distance bound of the global model (pulled back onto three times the
   * round's median distance, left out beyond four times it), a sample count weighing at most the
   * round's median count, and a client whose updates answer the model's moves like ascent
   * steps (its training reversed) left out by the ascent screen. 'centered-clipping': the
   * same, each update's deviation from where the model was heading clipped to 1.25 × the
   * round's median deviation (holds clients training on wrong labels when each class has
   * several clients; starves the classes fewer clients hold — docs/SECURITY.md). 'median'
   * or 'trimmed-mean': the coordinate-wise median or trimmed mean of one update per client
   * (RobustAvg), with the same screen. All of them run the same rounds.
   */
  readonly aggregator?: 'fedavg' | 'centered-clipping' | 'median' | 'trimmed-mean';
  /** The share trimmed at each end by 'trimmed-mean' (default 0.2). */
  readonly trim?: number;
  /**
   * Compresses the clients' updates on the wire (compress.ts): `{ kind: 'topk', k: 0.3 }`
   * sends the largest 30 % of each update as 8-bit codes with error feedback (about a ninth
   * of the bytes); 'f16' and 'u8' quantize all of it. Each update travels against the
   * global model the client trained from.
   */
  readonly compress?: Compression;
  /** The same as `compress: { kind: codec }`. */
  readonly codec?: 'f16' | 'u8';
  /** How the server learns its clients (default 'registry': they announce themselves). */
  readonly discovery?: Discovery;
  /** How often the server starts a round (default 200 ms). */
  readonly roundMs?: number;
  /**
   * When the next round starts (sync mode): 'timer' (the default) at the round timer's next
   * tick after a round closed; 'close' as soon as the round's `clients`-th update arrives —
   * the update that completes a round wakes the server's round timer (FedAvg's
   * `next=close`), so the round closes and the next broadcast goes out in the same poll.
   * A round that closes at its deadline with a quorum still waits for a tick of `roundMs`.
   */
  readonly nextRound?: 'timer' | 'close';
  /** Local SGD steps per round on each client (default 10), on batches of `batch` rows (default 32). */
  readonly fitSteps?: number;
  readonly batch?: number;
  /** A registered client silent this long leaves the federation (default 30000 ms). */
  readonly registryTtlMs?: number;
  /**
   * 'sync' (the default): rounds, as above. 'async': no rounds — FedBuff (docs/COMPONENTS.md):
   * the server steps the model every `buffer` updates and answers each client's update with
   * the current model. Needs `discovery: 'seats'` (the server answers the clients it was
   * started with); `aggregator` must be 'fedavg' (the buffer closes with FedAvg's bounds).
   */
  readonly mode?: 'sync' | 'async';
  /** async: updates per step of the global model (default 10, or the clients if fewer). */
  readonly buffer?: number;
  /** async: versions an update may lag before it is refused (default 16). */
  readonly maxStaleness?: number;
  /** async: a client silent this long since it was sent the model is sent it again when another answers (default 2000 ms). */
  readonly patienceMs?: number;
  /** The Module's name (default 'FederatedAveraging'); its partitions are named after it. */
  readonly name?: string;
  /**
   * Differential privacy (DP-FedAvg, docs/PRIVACY.md): the server clips each client's update
   * to L2 distance `clip` from the global model it was trained from, weighs every update 1,
   * and adds Gaussian noise of standard deviation `noiseMultiplier × clip` to their sum
   * (`noiseMultiplier × clip / m` on the mean of m updates). Each round's report then carries
   * `epsilon`: the privacy spent so far at `delta`, by the Rényi accountant, each round a
   * step of the Gaussian mechanism on every client (q = 1), or with `sampleRate` on a
   * Poisson sample of them. `clip: { initial, quantile }` makes the clip adaptive. Only with
   * the 'fedavg' aggregator; its median-relative distance bound, sample weights and ascent
   * screen are off (each lets one client change how the others count), the clip bounds
   * every update.
   */
  readonly dp?: DpOptions;
  /**
   * Secure aggregation (SecAgg+, docs/PRIVACY.md "SecAgg+ in a federation"): no update leaves
   * a client in the clear. Each client masks its step from the global model; the server
   * learns only each round's sum, even when clients drop out mid-round (up to what the
   * threshold allows; below it the round is abandoned and reveals nothing). `threshold`:
   * shares that rebuild a client's secrets; `shares`: neighbours each client shares them
   * with (both default to SecAgg+'s: every other client and a majority of them up to 32
   * clients). Every update weighs 1. Only with the 'fedavg' aggregator, in rounds, without
   * compression: the server cannot bound, screen or decode single updates it never sees.
   * With `dp` the clients clip and noise their steps before masking (distributed DP). Each
   * round's report carries `secure: { summed }`.
   */
  readonly secure?: SecureOptions;
}

/** The federation's secure aggregation; a field left out takes SecAgg+'s default. */
export interface SecureOptions {
  /** Shares that rebuild a client's secrets: more than half of `shares`, at most `shares`. */
  readonly threshold?: number;
  /** Neighbours each client shares its secrets with: even, or every other client (clients − 1); at most 254. */
  readonly shares?: number;
}

/** The federation's differential privacy: the clip, the noise, and the δ ε is reported at. */
export interface DpOptions {
  /** The L2 bound on one client's update (its distance from the global model), > 0, or an adaptive clip. */
  readonly clip: number | AdaptiveClip;
  /** The noise's standard deviation over the clip, >= 0 (0: clipping only, ε = ∞). */
  readonly noiseMultiplier: number;
  /** δ, in (0, 1): below one over the number of clients is the usual choice. */
  readonly delta: number;
  /**
   * q in (0, 1] (default 1): each round takes each client's update with probability q, by a
   * fresh coin from the server's CSPRNG, and ε is accounted at q — amplification by
   * sampling. `clients` is then the population sampled from: the mean divides by
   * q × clients, and a round closes at its deadline (`deadlineMs`) with every sampled update
   * that arrived, never on its first answers (docs/PRIVACY.md says what is claimed).
   */
  readonly sampleRate?: number;
}

/**
 * Adaptive clipping (Andrew et al. 2021): the clip starts at `initial` and after each round
 * moves by exp(−learningRate × (b̃ − quantile)), b̃ the noised fraction of updates within it,
 * towards the `quantile` of the update norms. The count's noise is taken from the budget:
 * the updates' noise multiplier grows so that ε stays that of `noiseMultiplier`.
 */
export interface AdaptiveClip {
  /** The first round's clip, > 0. */
  readonly initial: number;
  /** The quantile of the update norms the clip follows, in (0, 1) (default 0.5). */
  readonly quantile?: number;
  /** η of the geometric step, in (0, 10] (default 0.2). */
  readonly learningRate?: number;
}

function positive(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) throw new BbError(BbErrorCode.InvalidArgument, `federatedAveraging: ${name} must be a positive integer, got ${value}`);
  return value;
}

/** Half the clients, rounded up: what a round needs at its deadline unless told otherwise. */
export function majorityOf(clients: number): number {
  return Math.ceil(clients / 2);
}

/** The dp option checked: every field a finite number in its range, and only with FedAvg. */
function checkedDp(dp: DpOptions, aggregator: string): DpOptions {
  const fail = (message: string): never => {
    throw new BbError(BbErrorCode.InvalidArgument, `federatedAveraging: ${message}`);
  };
  if (typeof dp !== 'object' || dp === null) fail('dp is { clip, noiseMultiplier, delta }');
  const { clip, noiseMultiplier, delta } = dp;
  const finitePositive = (x: unknown): boolean => typeof x === 'number' && Number.isFinite(x) && x > 0 && x <= 3e38;
  if (typeof clip === 'object' && clip !== null) {
    const { initial, quantile = 0.5, learningRate = 0.2 } = clip;
    if (!finitePositive(initial)) fail(`dp.clip.initial must be a finite number > 0, got ${String(initial)}`);
    if (typeof quantile !== 'number' || !(quantile > 0 && quantile < 1)) fail(`dp.clip.quantile must be in (0, 1), got ${String(quantile)}`);
    if (typeof learningRate !== 'number' || !(learningRate > 0 && learningRate <= 10)) fail(`dp.clip.learningRate must be in (0, 10], got ${String(learningRate)}`);
  } else if (!finitePositive(clip)) {
    fail(`dp.clip must be a finite number > 0, got ${String(clip)} (or an adaptive clip: { initial, quantile, learningRate })`);
  }
  const sampleRate = dp.sampleRate ?? 1;
  if (typeof sampleRate !== 'number' || !(sampleRate > 0 && sampleRate <= 1)) fail(`dp.sampleRate must be in (0, 1], got ${String(sampleRate)}`);
  if (typeof noiseMultiplier !== 'number' || !Number.isFinite(noiseMultiplier) || noiseMultiplier < 0 || noiseMultiplier > 3e38) {
    fail(`dp.noiseMultiplier must be a finite number >= 0, got ${String(noiseMultiplier)}`);
  }
  if (typeof delta !== 'number' || !(delta > 0 && delta < 1)) fail(`dp.delta must be in (0, 1), got ${String(delta)}`);
  if (aggregator !== 'fedavg') fail(`dp needs aggregator 'fedavg' (DP-FedAvg), not '${aggregator}': its bound on one client's influence is what the noise covers`);
  return { clip, noiseMultiplier, delta, ...(sampleRate < 1 ? { sampleRate } : {}) };
}

/**
 * The FedAvg config of DP-FedAvg (numbers written exactly: shortest round trip). Under
 * sampling the round rules are the ones Poisson sampling needs — closing at the deadline
 * with every sampled update (target=0, quorum=1), a round nobody sampled answered still
 * noised (no_quorum=abandon) — and `clients` is the population.
 */
function dpConfig(dp: DpOptions, rounds: string, clients: number, deadlineMs: number): string {
  const clip = typeof dp.clip === 'number'
    ? `dp_clip=${dp.clip}`
    : `dp_clip=${dp.clip.initial},dp_clip_quantile=${dp.clip.quantile ?? 0.5},dp_clip_rate=${dp.clip.learningRate ?? 0.2}`;
  const noised = `${clip},dp_noise=${dp.noiseMultiplier}`;
  if (dp.sampleRate === undefined) return `${rounds},${noised}`;
  return `quorum=1,target=0,deadline_ms=${deadlineMs},no_quorum=abandon,init=model,${noised},dp_sample_rate=${dp.sampleRate},dp_clients=${clients}`;
}

/** The secure option checked: integers in range, and only where the server never needs one update. */
function checkedSecure(secure: SecureOptions, aggregator: string, options: FederatedAveragingOptions): Required<SecureOptions> {
  const fail = (message: string): never => {
    throw new BbError(BbErrorCode.InvalidArgument, `federatedAveraging: ${message}`);
  };
  if (typeof secure !== 'object' || secure === null) fail('secure is { threshold?, shares? }');
  const { threshold = 0, shares = 0 } = secure;
  for (const [name, value] of [['threshold', threshold], ['shares', shares]] as const) {
    if (!Number.isInteger(value) || value < 0 || value > 254) fail(`secure.${name} must be an integer in 1..254, got ${String(value)}`);
  }
  if (aggregator !== 'fedavg') fail(`secure needs aggregator 'fedavg', not '${aggregator}': the server sees only the sum, and '${aggregator}' needs each update`);
  if ((options.mode ?? 'sync') !== 'sync') fail("secure runs in rounds: not with mode 'async'");
  if (options.compress !== undefined || options.codec !== undefined) fail('secure takes no compress or codec: the masked vector is what travels');
  const dp = options.dp;
  if (dp !== undefined && (typeof dp.clip !== 'number' || dp.sampleRate !== undefined)) {
    fail('secure takes a fixed dp.clip and no dp.sampleRate: the server sees only the masked sum, not which updates were within the clip or which clients a sample drew');
  }
  return { threshold, shares };
}

export function federatedAveraging(options: FederatedAveragingOptions): Plan {
  const clients = positive('clients', options.clients);
  const quorum = positive('quorum', options.quorum ?? majorityOf(clients));
  if (quorum > clients) throw new BbError(BbErrorCode.InvalidArgument, `federatedAveraging: quorum ${quorum} is more than clients ${clients}`);
  const aggregator = options.aggregator ?? 'fedavg';
  const discovery = options.discovery ?? 'registry';
  const roundNs = BigInt(positive('roundMs', options.roundMs ?? 200)) * 1_000_000n;
  const nextRound = options.nextRound ?? 'timer';
  if (nextRound !== 'timer' && nextRound !== 'close') {
    throw new BbError(BbErrorCode.InvalidArgument, `federatedAveraging: nextRound is 'timer' or 'close', got '${String(nextRound)}'`);
  }
  if (nextRound === 'close' && (options.mode === 'async' || options.secure !== undefined)) {
    throw new BbError(BbErrorCode.InvalidArgument, `federatedAveraging: nextRound 'close' is for sync rounds in the clear (${options.mode === 'async' ? "mode 'async' has no rounds" : 'a secure round closes on its SecAgg+ messages'})`);
  }
  const dp = options.dp === undefined ? undefined : checkedDp(options.dp, aggregator);
  const secure = options.secure === undefined ? undefined : checkedSecure(options.secure, aggregator, options);
  const codec = codecFor('federatedAveraging', options.compress ?? (options.codec === undefined ? undefined : { kind: options.codec }), true);
  const async = (options.mode ?? 'sync') === 'async';
  if (options.mode !== undefined && options.mode !== 'sync' && options.mode !== 'async') {
    throw new BbError(BbErrorCode.InvalidArgument, `federatedAveraging: mode is 'sync' or 'async', got '${String(options.mode)}'`);
  }
  if (async && (discovery !== 'seats' || aggregator !== 'fedavg')) {
    throw new BbError(BbErrorCode.InvalidArgument, "federatedAveraging: mode 'async' needs discovery 'seats' and aggregator 'fedavg' (FedBuff answers the clients it was started with)");
  }
  if (async && dp !== undefined) {
    throw new BbError(BbErrorCode.InvalidArgument, "federatedAveraging: dp is DP-FedAvg's, which runs in rounds: not with mode 'async'");
  }
  const buffer = positive('buffer', options.buffer ?? Math.min(10, clients));
  const maxStaleness = options.maxStaleness ?? 16;
  if (!Number.isInteger(maxStaleness) || maxStaleness < 0 || maxStaleness > 1024) {
    throw new BbError(BbErrorCode.InvalidArgument, `federatedAveraging: maxStaleness is an integer in 0..1024, got ${maxStaleness}`);
  }
  const patienceMs = positive('patienceMs', options.patienceMs ?? 2000);

  const body = (g: Graph): void => {
    // in this order the seats variant is federated_digits' Module, byte for byte
    const clientsIn = discovery === 'seats' ? g.input('clients', TYPES.peerIds) : undefined;
    const server = g.input('server', TYPES.peerIds);
    const testX = g.input('test_x', TYPES.tensorF32);
    const testY = g.input('test_y', TYPES.tensorF32);
    const model = g.model('model');
    const agg = g.aggregator('aggregator');
    const wire: CodecSlot | undefined = codec === undefined ? undefined : g.codec('codec');

    // the server's round loop; with the registry each round waits for the live view, which
    // holds nothing while fewer than a quorum of clients are present (min_view). async: once
    // per invocation, to the clients it is invoked with
    const tick = async ? g.pulse() : g.interval(roundNs);
    const view = clientsIn === undefined ? g.peerSelector('clients', 'clients').currentView(tick) : undefined;
    const { params: aggregated, metadata: round } = agg.aggregate(view ?? tick);
    const loaded = model.loadParameters(aggregated);
    g.output('accuracy', model.evaluate(testX, testY, loaded));
    g.output('round', round);
    g.output('model', aggregated);
    g.netOut('global', clientsIn ?? view!, g.bundle(aggregated, round));

    // a client's round: the update goes back tagged with the round it trained for
    const global = g.lookupOutput('global');
    const [params, roundIn] = g.unbundle(global, [TYPES.tensorF32, TYPES.abstract]) as [GraphValue, GraphValue];
    const { trained, samples } = model.fit(params);
    if (secure !== undefined) {
      // secure: the client's own aggregator masks its step from `params` for the server (SecAgg+)
      const update = g.bundle(trained, samples, roundIn, params);
      agg.contribute(update, update);
      return;
    }
    const sent = wire === undefined ? trained : wire.encode(trained, params);
    g.netOut('update', server, g.bundle(sent, samples, roundIn));

    // the server takes it in
    const received = g.lookupOutput('update');
    if (wire === undefined) {
      agg.contribute(received, received);
    } else if (async) {
      // the step itself (FedBuff updates=deltas): the server re-bases it onto the current model
      const parts = g.unbundle(received, [TYPES.abstract, TYPES.abstract, TYPES.abstract]);
      agg.contribute(wire.decode(parts[0]!), g.bundle(...parts.slice(1)));
    } else {
      // the update comes back onto the model the server holds: the global model of the open round
      const parts = g.unbundle(received, [TYPES.abstract, TYPES.abstract, TYPES.abstract]);
      agg.contribute(wire.decode(parts[0]!, model.params(parts[0])), g.bundle(...parts.slice(1)));
    }
    // async: who answered, for the host to send the current model to
    if (async) g.output('ready', g.lookupSender('update'));
  };

  const bindRest = (compiler: Compiler): void => {
    // every aggregator runs the same rounds: a round opens when the server sends the global
    // model, takes updates only from the clients it was sent to, closes at `clients` updates
    // or at its deadline with a quorum, and is abandoned without one; the distance and weight
    // bounds are the aggregators' own defaults
    const rounds = `quorum=${quorum},target=${clients},deadline_ms=${options.deadlineMs ?? 1000},no_quorum=abandon,init=model${nextRound === 'close' ? ',next=close' : ''}`;
    if (async) {
      compiler.declare('FedBuff', TENSOR_F32, [['Model', 'model']]);
      compiler.bind('aggregator', 'Aggregator', 'FedBuff', `buffer=${buffer},max_staleness=${maxStaleness},init=model${codec === undefined ? '' : ',updates=deltas'}`);
    } else if (aggregator === 'fedavg' || aggregator === 'centered-clipping') {
      // DP-FedAvg: the clip and the noise multiplier, written exactly (shortest round trip)
      const masked = secure === undefined ? '' : `,secure=1,secure_threshold=${secure.threshold},secure_shares=${secure.shares}`;
      const config = (dp !== undefined ? dpConfig(dp, rounds, clients, options.deadlineMs ?? 1000) : aggregator === 'fedavg' ? rounds : `${rounds},center_clip=1.25`) + masked;
      compiler.declare('FedAvg', TENSOR_F32, [['Model', 'model']]);
      compiler.bind('aggregator', 'Aggregator', 'FedAvg', config);
    } else {
      const method = aggregator === 'median' ? 'median' : `trimmed,trim=${options.trim ?? 0.2}`;
      compiler.declare('RobustAvg', TENSOR_F32, [['Model', 'model']]);
      compiler.bind('aggregator', 'Aggregator', 'RobustAvg', `method=${method},${rounds}`);
    }
    if (codec !== undefined) compiler.bind('codec', 'Codec', codec.type, codec.config);
  };

  const name = options.name ?? 'FederatedAveraging';
  const recorded = module(name, body, discovery === 'registry' ? { bootstrap: recordAnnounce } : {});
  return new Plan(
    recorded,
    {
      name,
      aggregatorCounters: async ? 'fedbuff' : aggregator === 'fedavg' || aggregator === 'centered-clipping' ? 'fedavg' : 'robustavg',
      ...(async ? { answerReady: { patienceNs: BigInt(patienceMs) * 1_000_000n } } : {}),
      model: options.model,
      discovery,
      fitSteps: options.fitSteps ?? 10,
      batch: options.batch ?? 32,
      registryTtlMs: options.registryTtlMs ?? 30_000,
      minView: quorum,
      bindRest,
      ...(dp === undefined ? {} : { dp }),
      ...(secure === undefined ? {} : { secure: true }),
    },
    options.rounds,
  );
}
