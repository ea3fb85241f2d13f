/**
 * What a template trains: the `model` option. One of
 * - {@link cpuMlp}: the shipped CpuMlp (a multilayer perceptron; no hidden layer is a
 *   logistic regression), trained by bb.wasm's CPU kernels;
 * - {@link componentModel}: a Model written in TypeScript (a {@link ModelComponent});
 * - {@link onnxModel}: an ONNX model (e.g. a PyTorch export), trained by the OnnxModel
 *   component — the option is accepted now and resolves once bb.wasm carries that
 *   component (README.md of the package, "Then a PyTorch-exported CNN").
 */
import type { Bb } from '../bb.js';
import type { ComponentInit } from '../component.js';
import { registerComponentType } from '../component.js';
import type { Compiler } from '../compiler.js';
import { TENSOR_F32 } from '../compiler.js';
import { BbError, BbErrorCode } from '../errors.js';
import { modelComponent, type ModelComponent } from '../roles.js';

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

/** A model the templates can bind. */
export type ModelChoice =
  | { readonly kind: 'cpuMlp'; readonly config: CpuMlpConfig }
  | { readonly kind: 'component'; readonly type: string; readonly config: string; readonly create: (init: ComponentInit) => ModelComponent }
  | { readonly kind: 'onnx'; readonly bytes: Uint8Array };

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

/** An ONNX model (ModelProto bytes) trained by the OnnxModel component. */
export function onnxModel(bytes: Uint8Array): ModelChoice {
  return { kind: 'onnx', bytes };
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
      throw new BbError(
        BbErrorCode.Unsupported,
        'onnxModel: training an ONNX model needs the OnnxModel component, which this bb.wasm does not carry yet; use cpuMlp or componentModel',
      );
  }
}
