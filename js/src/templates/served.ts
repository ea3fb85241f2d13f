/**
 * The plan a `bytesandbrains serve` server runs, as JSON its clients can fetch
 * (`GET /plan.json`, with the model at `GET /model.onnx`), so a page builds the same plan —
 * and so compiles the same artifact — without repeating the server's options:
 *
 * ```ts
 * const base = 'http://server.example:8787';
 * const model = new Uint8Array(await (await fetch(`${base}/model.onnx`)).arrayBuffer());
 * const plan = servedPlan(await (await fetch(`${base}/plan.json`)).json(), model);
 * const client = plan.installClient(bb, { artifact: plan.compile(bb), signer: identity, server: serverId, data });
 * ```
 */
import { BbError, BbErrorCode } from '../engine/errors.js';
import { federatedAveraging, type DpOptions, type SecureOptions } from './federated.js';
import { onnxModel, type OnnxModelOptions } from './models.js';
import type { Plan } from './plan.js';

export interface ServedPlan {
  readonly template: 'federatedAveraging';
  readonly name: string;
  readonly clients: number;
  readonly quorum: number;
  readonly deadlineMs: number;
  readonly roundMs: number;
  /** How each client trains the model (onnxModel's options). */
  readonly training: OnnxModelOptions;
  /** The federation's differential privacy, when it has any (federatedAveraging's `dp`). */
  readonly dp?: DpOptions;
  /** The federation's secure aggregation, when it has it (federatedAveraging's `secure`): clients then need their identity as `signer`. */
  readonly secure?: SecureOptions;
}

const TRAINING_KEYS = new Set(['optimizer', 'lr', 'loss', 'batch', 'stepsPerRound', 'freeze']);

/** The plan `description` names, training `model` (its ONNX bytes); a description that is not one is refused. */
export function servedPlan(description: ServedPlan, model: Uint8Array): Plan {
  const d = description as Partial<Record<keyof ServedPlan, unknown>>;
  const fail = (why: string): never => {
    throw new BbError(BbErrorCode.InvalidArgument, `servedPlan: ${why}`);
  };
  if (typeof description !== 'object' || description === null) fail('the description is not an object');
  if (d.template !== 'federatedAveraging') fail(`template ${JSON.stringify(d.template)} is not federatedAveraging`);
  if (typeof d.name !== 'string') fail('name is not a text');
  for (const key of ['clients', 'quorum', 'deadlineMs', 'roundMs'] as const) {
    if (!Number.isInteger(d[key])) fail(`${key} is not a whole number`);
  }
  const training = d.training;
  if (typeof training !== 'object' || training === null) return fail('training is not an object');
  for (const key of Object.keys(training)) if (!TRAINING_KEYS.has(key)) fail(`training.${key} is not an option of onnxModel a server sets`);
  return federatedAveraging({
    name: description.name,
    model: onnxModel(model, training as OnnxModelOptions),
    clients: description.clients,
    quorum: description.quorum,
    deadlineMs: description.deadlineMs,
    roundMs: description.roundMs,
    ...(d.dp === undefined ? {} : { dp: d.dp as DpOptions }),
    ...(d.secure === undefined ? {} : { secure: d.secure as SecureOptions }),
  });
}
