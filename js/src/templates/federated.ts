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
 * The Module is written with the DSL (`plan.module`); nothing of it is special-cased in C.
 */
import type { Compiler } from '../compiler.js';
import { TENSOR_F32 } from '../compiler.js';
import { BbError, BbErrorCode } from '../errors.js';
import type { Graph } from '../dsl/graph.js';
import { module } from '../dsl/module.js';
import type { CodecSlot } from '../dsl/slots.js';
import { TYPES, type GraphValue } from '../dsl/value.js';
import { recordAnnounce, type Discovery } from './discovery.js';
import type { ModelChoice } from './models.js';
import { Plan } from './plan.js';

export interface FederatedAveragingOptions {
  /** What the federation trains (cpuMlp, componentModel, onnxModel). */
  readonly model: ModelChoice;
  /** Clients a round waits for: it closes as soon as this many updates arrived. */
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
   * each within a distance bound of the global model (pulled back onto twice the round's
   * median distance, left out beyond three times it), a sample count weighing at most the
   * round's median count. 'centered-clipping': the same, each update's deviation from
   * where the model was heading clipped to 1.25 × the round's median deviation (holds
   * clients training on wrong labels when each class has several clients; starves a class
   * only one client holds — docs/SECURITY.md). 'median' or 'trimmed-mean': the
   * coordinate-wise median or trimmed mean of one update per client (RobustAvg). All of
   * them run the same rounds.
   */
  readonly aggregator?: 'fedavg' | 'centered-clipping' | 'median' | 'trimmed-mean';
  /** The share trimmed at each end by 'trimmed-mean' (default 0.2). */
  readonly trim?: number;
  /** Compresses the clients' updates on the wire: float16 or 8-bit quantization. */
  readonly codec?: 'f16' | 'u8';
  /** How the server learns its clients (default 'registry': they announce themselves). */
  readonly discovery?: Discovery;
  /** How often the server starts a round (default 200 ms). */
  readonly roundMs?: number;
  /** Local SGD steps per round on each client (default 10), on batches of `batch` rows (default 32). */
  readonly fitSteps?: number;
  readonly batch?: number;
  /** A registered client silent this long leaves the federation (default 30000 ms). */
  readonly registryTtlMs?: number;
  /** The Module's name (default 'FederatedAveraging'); its partitions are named after it. */
  readonly name?: string;
}

const CODECS = { f16: 'Float16Codec', u8: 'Uint8Codec' } as const;

function positive(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) throw new BbError(BbErrorCode.InvalidArgument, `federatedAveraging: ${name} must be a positive integer, got ${value}`);
  return value;
}

/** Half the clients, rounded up: what a round needs at its deadline unless told otherwise. */
export function majorityOf(clients: number): number {
  return Math.ceil(clients / 2);
}

export function federatedAveraging(options: FederatedAveragingOptions): Plan {
  const clients = positive('clients', options.clients);
  const quorum = positive('quorum', options.quorum ?? majorityOf(clients));
  if (quorum > clients) throw new BbError(BbErrorCode.InvalidArgument, `federatedAveraging: quorum ${quorum} is more than clients ${clients}`);
  const aggregator = options.aggregator ?? 'fedavg';
  const discovery = options.discovery ?? 'registry';
  const roundNs = BigInt(positive('roundMs', options.roundMs ?? 200)) * 1_000_000n;
  const codec = options.codec;

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
    // holds nothing while fewer than a quorum of clients are present (min_view)
    const tick = g.interval(roundNs);
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
    const sent = wire === undefined ? trained : wire.encode(trained);
    g.netOut('update', server, g.bundle(sent, samples, roundIn));

    // the server takes it in
    const received = g.lookupOutput('update');
    if (wire === undefined) {
      agg.contribute(received, received);
    } else {
      const parts = g.unbundle(received, [TYPES.abstract, TYPES.abstract, TYPES.abstract]);
      agg.contribute(wire.decode(parts[0]!), g.bundle(...parts.slice(1)));
    }
  };

  const bindRest = (compiler: Compiler): void => {
    // every aggregator runs the same rounds: a round opens when the server sends the global
    // model, takes updates only from the clients it was sent to, closes at `clients` updates
    // or at its deadline with a quorum, and is abandoned without one; the distance and weight
    // bounds are the aggregators' own defaults
    const rounds = `quorum=${quorum},target=${clients},deadline_ms=${options.deadlineMs ?? 1000},no_quorum=abandon,init=model`;
    if (aggregator === 'fedavg' || aggregator === 'centered-clipping') {
      compiler.declare('FedAvg', TENSOR_F32, [['Model', 'model']]);
      compiler.bind('aggregator', 'Aggregator', 'FedAvg', aggregator === 'fedavg' ? rounds : `${rounds},center_clip=1.25`);
    } else {
      const method = aggregator === 'median' ? 'median' : `trimmed,trim=${options.trim ?? 0.2}`;
      compiler.declare('RobustAvg', TENSOR_F32, [['Model', 'model']]);
      compiler.bind('aggregator', 'Aggregator', 'RobustAvg', `method=${method},${rounds}`);
    }
    if (codec !== undefined) compiler.bind('codec', 'Codec', CODECS[codec]);
  };

  const name = options.name ?? 'FederatedAveraging';
  const recorded = module(name, body, discovery === 'registry' ? { bootstrap: recordAnnounce } : {});
  return new Plan(
    recorded,
    {
      name,
      aggregatorCounters: aggregator === 'fedavg' || aggregator === 'centered-clipping' ? 'fedavg' : 'robustavg',
      model: options.model,
      discovery,
      fitSteps: options.fitSteps ?? 10,
      batch: options.batch ?? 32,
      registryTtlMs: options.registryTtlMs ?? 30_000,
      minView: quorum,
      bindRest,
    },
    options.rounds,
  );
}
