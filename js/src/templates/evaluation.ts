/**
 * Federated evaluation: how good is a model on data that never leaves the clients? Every
 * period the server sends its model; each client scores it on a batch of its own data and
 * sends the score back; the server averages the scores of a round (FedAvg over the
 * one-number "updates") and reports it as "accuracy". Nothing is trained.
 *
 * ```ts
 * const plan = federatedEvaluation({ model: cpuMlp({ inputs: 2, outputs: 2 }), clients: 3, batch: 100 });
 * const artifact = plan.compile(bb);
 * const server = plan.installServer(bb, { artifact, test });  // installs as the other templates' servers do
 * server.start();                                             // each round reports the clients' mean score
 * ```
 * The model scored is the server's: its initial parameters, or `params` (a trained model's,
 * e.g. the last "model" event of a federatedAveraging server), loaded when it starts.
 */
import type { Compiler } from '../node/compiler.js';
import { TENSOR_F32 } from '../node/compiler.js';
import { BbError, BbErrorCode } from '../engine/errors.js';
import type { Graph } from '../dsl/graph.js';
import { module } from '../dsl/module.js';
import { TYPES, type GraphValue } from '../dsl/value.js';
import { codecFor, type Compression } from './compress.js';
import { recordAnnounce, type Discovery } from './discovery.js';
import { majorityOf } from './federated.js';
import type { ModelChoice } from './models.js';
import { tensorValue } from '../node/values.js';
import { Plan } from './plan.js';

export interface FederatedEvaluationOptions {
  readonly model: ModelChoice;
  /** Scores a round waits for (it closes as soon as this many arrived). */
  readonly clients: number;
  /** Scores a round needs once its deadline passed (default: half the clients, rounded up). */
  readonly quorum?: number;
  readonly deadlineMs?: number;
  /** Rows each client scores per round (its ArraySource's batch; default 256). */
  readonly batch?: number;
  readonly rounds?: number;
  readonly discovery?: Discovery;
  /** How often the server starts a round (default 500 ms). */
  readonly roundMs?: number;
  readonly registryTtlMs?: number;
  /** Compresses the model the server sends: 'f16' or 'u8' (compress.ts; top-k needs a model both ends hold). */
  readonly compress?: Compression;
  /** The parameters to score (the model's flat vector); default the model's initial ones. */
  readonly params?: Float32Array;
  /** The Module's name (default 'FederatedEvaluation'). */
  readonly name?: string;
}

export function federatedEvaluation(options: FederatedEvaluationOptions): Plan {
  const clients = options.clients;
  const quorum = options.quorum ?? majorityOf(clients);
  if (!Number.isInteger(clients) || clients < 1 || !Number.isInteger(quorum) || quorum < 1 || quorum > clients) {
    throw new BbError(BbErrorCode.InvalidArgument, `federatedEvaluation: need 1 <= quorum <= clients, got quorum ${quorum}, clients ${clients}`);
  }
  const discovery = options.discovery ?? 'registry';
  const roundNs = BigInt(options.roundMs ?? 500) * 1_000_000n;
  const codec = codecFor('federatedEvaluation', options.compress, false);

  const body = (g: Graph): void => {
    const clientsIn = discovery === 'seats' ? g.input('clients', TYPES.peerIds) : undefined;
    const server = g.input('server', TYPES.peerIds);
    // the server's inputs of every template (its own test set is not scored here)
    g.input('test_x', TYPES.tensorF32);
    g.input('test_y', TYPES.tensorF32);
    const model = g.model('model');
    const scores = g.aggregator('aggregator');
    const tick = g.interval(roundNs);
    const to: GraphValue = clientsIn ?? g.peerSelector('clients', 'clients').currentView(tick);
    // with given parameters, every round waits until they are loaded
    const ready = options.params === undefined ? tick : g.gate(tick, model.loadParameters(g.input('params', TYPES.tensorF32)));
    const wire = codec === undefined ? undefined : g.codec('codec');
    const params = model.params(ready);
    g.netOut('global', to, wire === undefined ? params : wire.encode(params));
    // with the registry a round waits for the live view (nothing below a quorum: min_view)
    const { params: mean } = scores.aggregate(clientsIn === undefined ? to : tick);
    g.output('accuracy', mean);

    // a client scores the model on a batch of its data
    const global = g.lookupOutput('global');
    const loaded = model.loadParameters(wire === undefined ? global : wire.decode(global));
    const { batch, labels } = g.dataSource('data').nextBatch(loaded);
    g.netOut('score', server, model.evaluate(batch, labels));

    const received = g.lookupOutput('score');
    scores.contribute(received, received);
  };

  const bindRest = (compiler: Compiler): void => {
    compiler.declare('FedAvg', TENSOR_F32);
    compiler.bind('aggregator', 'Aggregator', 'FedAvg', `quorum=${quorum},target=${clients},deadline_ms=${options.deadlineMs ?? 1000},no_quorum=abandon`);
    if (codec !== undefined) compiler.bind('codec', 'Codec', codec.type, codec.config);
  };

  const name = options.name ?? 'FederatedEvaluation';
  return new Plan(
    module(name, body, discovery === 'registry' ? { bootstrap: recordAnnounce } : {}),
    {
      name,
      aggregatorCounters: 'fedavg',
      model: options.model,
      discovery,
      fitSteps: 1,
      batch: options.batch ?? 256,
      registryTtlMs: options.registryTtlMs ?? 30_000,
      minView: quorum,
      bindRest,
      ...(options.params === undefined ? {} : { startInputs: { params: tensorValue('float', options.params, [options.params.length]) } }),
    },
    options.rounds,
  );
}
