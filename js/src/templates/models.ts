/**
 * What a template trains: the `model` option. One of
 * - {@link cpuMlp}: the shipped CpuMlp (a multilayer perceptron; no hidden layer is a
 *   logistic regression), trained by bb.wasm's CPU kernels;
 * - {@link componentModel}: a Model written in TypeScript (a {@link ModelComponent});
 * - {@link onnxModel}: any ONNX model (e.g. a PyTorch export), trained by the OnnxModel
 *   component through its gradient and optimizer graphs; every peer is handed the model's
 *   bytes at install.
 */
import type { Bb } from '../engine/bb.js';
import type { ComponentInit } from '../node/component.js';
import { registerComponentType } from '../node/component.js';
import type { Compiler } from '../node/compiler.js';
import { TENSOR_F32 } from '../node/compiler.js';
import { BbError, BbErrorCode } from '../engine/errors.js';
import type { SlotOptions } from '../node/node.js';
import { modelComponent, type ModelComponent } from '../node/roles.js';
import { trainerConfigText, type TrainerOptions } from '../train/trainer.js';

/** CpuMlp's config (docs/COMPONENTS.md of the package has every key). */
export interface CpuMlpConfig {
  readonly inputs: number;
  /** Hidden layer widths; none (the default) is a logistic regression. */
  readonly hidden?: readonly number[];
  readonly outputs: number;
  readonly activation?: 'relu' | 'tanh' | 'sigmoid' | 'identity';
  readonly loss?: 'xent' | 'mse';
  /** Learning rate (default 0.05). */
  readonly lr?: number;
  /** Momentum (default 0.9). */
  readonly momentum?: number;
  readonly weightDecay?: number;
  /** The initial weights' seed (default: the slot's seed). */
  readonly seed?: number;
  /** Applied to every feature before the first layer: x * scale + shift. */
  readonly inputScale?: number;
  readonly inputShift?: number;
}

/**
 * How an ONNX model trains in a federation: the optimizer and loss (OnnxTrainer's options,
 * torch.optim's meanings and defaults: Adam at lr 0.001, softmax cross-entropy), which
 * initializers stay frozen, and how much each peer trains per round.
 */
export interface OnnxModelOptions extends Omit<TrainerOptions, 'seed'> {
  /** Rows per local step (the peer's ArraySource batch); default the template's `batch`. */
  readonly batch?: number;
  /** Local steps each peer takes per round; default the template's `fitSteps`. */
  readonly stepsPerRound?: number;
  /** The initial parameters' and Dropout masks' seed (default: the slot's). */
  readonly seed?: number;
}

/** A model the templates can bind. */
export type ModelChoice =
  | { readonly kind: 'cpuMlp'; readonly config: CpuMlpConfig }
  | { readonly kind: 'component'; readonly type: string; readonly config: string; readonly create: (init: ComponentInit) => ModelComponent }
  | { readonly kind: 'onnx'; readonly bytes: Uint8Array; readonly options: OnnxModelOptions };

export function cpuMlp(config: CpuMlpConfig): ModelChoice {
  return { kind: 'cpuMlp', config };
}

/**
 * A Model written in TypeScript, registered as concrete type `type` in each bb.wasm
 * instance that compiles or installs the template (`config` reaches `create`).
 */
export function componentModel(type: string, create: (init: ComponentInit) => ModelComponent, config = ''): ModelChoice {
  return { kind: 'component', type, config, create };
}

/**
 * An ONNX model (ModelProto bytes, e.g. `torch.onnx.export`'s) trained by the OnnxModel
 * component: `onnxModel(bytes, { optimizer: 'sgd', lr: 0.05, batch: 32, stepsPerRound: 5,
 * freeze: ['mean', 'std'] })`. The options are checked here; what the model itself cannot
 * do (an operator without a gradient, an input of another width) is named at install.
 */
export function onnxModel(bytes: Uint8Array, options: OnnxModelOptions = {}): ModelChoice {
  if (!(bytes instanceof Uint8Array) || bytes.length === 0) {
    throw new BbError(BbErrorCode.InvalidArgument, 'onnxModel: give the ONNX model\'s bytes (a non-empty Uint8Array)');
  }
  for (const key of ['batch', 'stepsPerRound'] as const) {
    const value = options[key];
    if (value !== undefined && !(Number.isInteger(value) && value >= (key === 'batch' ? 1 : 0))) {
      throw new BbError(BbErrorCode.InvalidArgument, `onnxModel: ${key} must be a whole number${key === 'batch' ? ' >= 1' : ' >= 0'}, got ${value}`);
    }
  }
  onnxModelConfigText({ kind: 'onnx', bytes, options }, 1, 'data'); // refuses bad option values now
  return { kind: 'onnx', bytes, options };
}

/** The OnnxModel config text: the training options, then the steps per round and the data slot. */
function onnxModelConfigText(model: Extract<ModelChoice, { kind: 'onnx' }>, fitSteps: number, dataSlot: string): string {
  const { batch: _batch, stepsPerRound, seed, ...trainer } = model.options;
  const parts = [trainerConfigText(trainer, 'onnxModel'), `fit_steps=${stepsPerRound ?? fitSteps}`, `data=${dataSlot}`];
  if (seed !== undefined) parts.push(`seed=${seed}`);
  return parts.filter((part) => part !== '').join(',');
}

/** The data slot's batch: the model's own choice, else the template's. */
export function batchOf(model: ModelChoice, templateBatch: number): number {
  return model.kind === 'onnx' ? (model.options.batch ?? templateBatch) : templateBatch;
}

/** What every node of a template hands its model slot at install: an ONNX model's bytes. */
export function modelSlots(model: ModelChoice, slot = 'model'): Record<string, SlotOptions> {
  return model.kind === 'onnx' ? { [slot]: { model: model.bytes } } : {};
}

/** The CpuMlp config text, keys in the order the component documents them. */
export function cpuMlpConfigText(config: CpuMlpConfig, fitSteps: number, dataSlot: string): string {
  const parts: string[] = [`inputs=${config.inputs}`];
  if (config.hidden !== undefined && config.hidden.length > 0) parts.push(`hidden=${config.hidden.join('x')}`);
  parts.push(`outputs=${config.outputs}`);
  if (config.activation !== undefined) parts.push(`activation=${config.activation}`);
  if (config.loss !== undefined) parts.push(`loss=${config.loss}`);
  if (config.lr !== undefined) parts.push(`lr=${config.lr}`);
  if (config.momentum !== undefined) parts.push(`momentum=${config.momentum}`);
  if (config.weightDecay !== undefined) parts.push(`weight_decay=${config.weightDecay}`);
  if (config.seed !== undefined) parts.push(`seed=${config.seed}`);
  if (config.inputScale !== undefined) parts.push(`input_scale=${config.inputScale}`);
  if (config.inputShift !== undefined) parts.push(`input_shift=${config.inputShift}`);
  parts.push(`fit_steps=${fitSteps}`, `data=${dataSlot}`);
  return parts.join(',');
}

const registered = new WeakMap<Bb, Set<string>>();

/** Registers a TypeScript model's type in this instance once (compiling and installing need it). */
export function ensureModelType(bb: Bb, model: ModelChoice): void {
  if (model.kind !== 'component') return;
  const types = registered.get(bb) ?? new Set<string>();
  registered.set(bb, types);
  if (types.has(model.type)) return;
  registerComponentType(bb, { name: model.type, roles: ['Model'], create: (init) => modelComponent(model.create(init)) });
  types.add(model.type);
}

/** Declares and binds the model at `slot` (its batches come from `dataSlot`). */
export function bindModel(compiler: Compiler, model: ModelChoice, slot: string, fitSteps: number, dataSlot: string): void {
  switch (model.kind) {
    case 'cpuMlp':
      compiler.declare('CpuMlp', TENSOR_F32);
      compiler.bind(slot, 'Model', 'CpuMlp', cpuMlpConfigText(model.config, fitSteps, dataSlot));
      return;
    case 'component':
      compiler.declare(model.type, TENSOR_F32);
      compiler.bind(slot, 'Model', model.type, model.config || undefined);
      return;
    case 'onnx':
      compiler.declare('OnnxModel', TENSOR_F32);
      compiler.bind(slot, 'Model', 'OnnxModel', onnxModelConfigText(model, fitSteps, dataSlot));
      return;
  }
}
