/**
 * The op contract of each role as a TypeScript interface, and the adapter that turns an
 * object implementing it into a component (for `registerComponentType`): what a Module's
 * `g.model('model').fit(...)` and the like reach when the slot is bound to a TypeScript
 * type. The adapters check the inputs' kinds as the C dispatchers do ("input 0 of Fit
 * must be a Tensor, got bytes") and write the outputs each op gives; a method may return a
 * Promise (the op then completes later), and a missing optional method fails the op with
 * "does not implement".
 *
 * ```ts
 * registerComponentType(bb, {
 *   name: 'LogisticRegression',
 *   roles: ['Model'],
 *   create: ({ config }) => modelComponent(new LogisticRegression(config)),
 * });
 * ```
 */
import type { ComponentContext, ComponentInstance, ControlMessage, OpCall, OpOutputs } from './component.js';
import { BbError, BbErrorCode } from '../engine/errors.js';
import { peersValue, tensorValue, trigger, u64Value, type HostTensor, type Value } from './values.js';

/** What every role's component may add to its ops: messages, timers, state, cleanup. */
export interface ComponentExtras {
  onMessage?(message: ControlMessage, context: ComponentContext): void;
  onTimer?(token: bigint, context: ComponentContext): void;
  save?(): Uint8Array;
  load?(state: Uint8Array): void;
  destroy?(): void;
}

type MaybePromise<T> = T | Promise<T>;

/** Model: one flat float32 parameter vector. */
export interface ModelComponent extends ComponentExtras {
  /** Params → [params]. */
  params(context: ComponentContext): HostTensor<'float'>;
  /** LoadParameters(params) → [trigger]. */
  loadParameters(params: HostTensor, context: ComponentContext): void;
  /** Fit(params) → [trained params, u64 samples]: load, train locally, report how many samples it saw. */
  fit(params: HostTensor, context: ComponentContext): MaybePromise<{ readonly trained: HostTensor<'float'>; readonly samples: number | bigint }>;
  /** Evaluate(x, labels) → [a float32 scalar]: a score (accuracy for classifiers). */
  evaluate(x: HostTensor, labels: HostTensor, context: ComponentContext): MaybePromise<number>;
  /** Forward(x) → [y]. */
  forward?(x: HostTensor, context: ComponentContext): MaybePromise<HostTensor>;
  /** ComputeLoss(prediction, target) → [loss]. */
  computeLoss?(prediction: HostTensor, target: HostTensor, context: ComponentContext): MaybePromise<HostTensor | number>;
  /** Backward(grad) → [trigger]: one optimizer step on the last loss (grad may be absent). */
  backward?(grad: HostTensor | undefined, context: ComponentContext): void;
  /** ApplyDelta(delta) → [trigger]. */
  applyDelta?(delta: HostTensor, context: ComponentContext): void;
}

/** Aggregator: contributions in, parameters out when a round closes. */
export interface AggregatorComponent extends ComponentExtras {
  /** Contribute(update, metadata) → [trigger]; `from` is the peer the update came from (this one for local values). */
  contribute(update: HostTensor, metadata: Value | undefined, from: string, context: ComponentContext): void;
  /** Aggregate(trigger) → [params, metadata] when a round can close; undefined: nothing runs on. */
  aggregate(context: ComponentContext): { readonly params: HostTensor<'float'>; readonly metadata?: Value } | undefined;
}

/** DataSource: batches of features and labels. */
export interface DataSourceComponent extends ComponentExtras {
  /** NextBatch → [batch, labels]. */
  nextBatch(context: ComponentContext): MaybePromise<{ readonly batch: HostTensor; readonly labels: HostTensor }>;
  /** Reset → [trigger]. */
  reset?(context: ComponentContext): void;
  /** OnDataLoaded → [trigger]. */
  onDataLoaded?(context: ComponentContext): void;
}

/**
 * Codec: tensors to a wire form and back. Encode and Decode may be given a reference (their
 * optional second input): x travels relative to it, as the shipped codecs do (x − reference
 * out, reference + the difference back). A codec that ignores it still round-trips x only
 * where the caller passes none.
 */
export interface CodecComponent extends ComponentExtras {
  /** Encode(x[, reference]) → [y]: any value (a tensor of another type, bytes, a bundle). */
  encode(x: HostTensor, context: ComponentContext, reference?: HostTensor): Value;
  /** Decode(y[, reference]) → [x]. */
  decode(y: Value, context: ComponentContext, reference?: HostTensor): HostTensor;
  /** Train(samples) → [trigger]; a codec without it learns nothing. */
  train?(samples: HostTensor, context: ComponentContext): void;
}

/** Index: vectors in, nearest neighbours out. */
export interface IndexComponent extends ComponentExtras {
  /** Add(vector) → [u64 id]. */
  add(vector: HostTensor, context: ComponentContext): number | bigint;
  /** Search(query; k) → [ids, distances]. */
  search(query: HostTensor, k: number, context: ComponentContext): { readonly ids: HostTensor; readonly distances: HostTensor };
  /** Remove(id) → [trigger]. */
  remove?(id: bigint, context: ComponentContext): void;
  /** Train(samples) → [trigger]. */
  train?(samples: HostTensor, context: ComponentContext): void;
}

/** PeerSelector: the peers to talk to. */
export interface PeerSelectorComponent extends ComponentExtras {
  /** Sample(; n) → [peers]. */
  sample(n: number, context: ComponentContext): readonly string[];
  /** CurrentView → [peers]. */
  currentView(context: ComponentContext): readonly string[];
}

/** Backend: ONNX operators by name (declare them with Compiler.declareOpSet). */
export interface BackendComponent extends ComponentExtras {
  readonly ops: Readonly<Record<string, (inputs: readonly (HostTensor | undefined)[], call: OpCall) => MaybePromise<HostTensor | readonly HostTensor[]>>>;
}

/** Protocol: its own ops (recorded with g.protocolCall) and the messages and timers of its peers. */
export interface ProtocolComponent extends ComponentExtras {
  readonly ops?: Readonly<Record<string, (call: OpCall) => MaybePromise<OpOutputs>>>;
}

// ---- the adapters ----------------------------------------------------------------------------

function tensorIn(call: OpCall, i: number): HostTensor {
  const v = call.inputs[i];
  if (v === undefined) throw new BbError(BbErrorCode.InvalidArgument, `input ${i} of ${call.op} is missing`);
  if (v.kind !== 'tensor') throw new BbError(BbErrorCode.Type, `input ${i} of ${call.op} must be a Tensor, got ${v.kind}`);
  return v.tensor;
}

function optionalTensorIn(call: OpCall, i: number): HostTensor | undefined {
  return call.inputs[i] === undefined ? undefined : tensorIn(call, i);
}

function out(t: HostTensor): Value {
  return tensorValue(t.dtype, t.data, t.dims);
}

function scalar(x: number): Value {
  return tensorValue('float', new Float32Array([x]), []);
}

function unsupported(role: string, op: string): never {
  throw new BbError(BbErrorCode.Unsupported, `this component does not implement ${role}.${op}`);
}

function unknownOp(role: string, op: string): never {
  throw new BbError(BbErrorCode.Unsupported, `${op} is not an op of role ${role}`);
}

/** Maps a result that may be a Promise. */
function then<T>(value: MaybePromise<T>, map: (v: T) => OpOutputs): MaybePromise<OpOutputs> {
  return value instanceof Promise ? value.then(map) : map(value);
}

/** The extras of an implementation, bound to it. */
function extras(impl: ComponentExtras): Omit<ComponentInstance, 'invoke'> {
  const bound: { -readonly [K in keyof ComponentExtras]: ComponentExtras[K] } = {};
  if (impl.onMessage) bound.onMessage = impl.onMessage.bind(impl);
  if (impl.onTimer) bound.onTimer = impl.onTimer.bind(impl);
  if (impl.save) bound.save = impl.save.bind(impl);
  if (impl.load) bound.load = impl.load.bind(impl);
  if (impl.destroy) bound.destroy = impl.destroy.bind(impl);
  return bound;
}

const DONE: OpOutputs = [trigger];

export function modelComponent(impl: ModelComponent): ComponentInstance {
  return {
    ...extras(impl),
    invoke(call) {
      const ctx = call.context;
      switch (call.op) {
        case 'Params':
          return [out(impl.params(ctx))];
        case 'LoadParameters':
          impl.loadParameters(tensorIn(call, 0), ctx);
          return DONE;
        case 'Fit':
          return then(impl.fit(tensorIn(call, 0), ctx), ({ trained, samples }) => [out(trained), u64Value(samples)]);
        case 'Evaluate':
          return then(impl.evaluate(tensorIn(call, 0), tensorIn(call, 1), ctx), (score) => [scalar(score)]);
        case 'Forward':
          if (!impl.forward) unsupported('Model', call.op);
          return then(impl.forward(tensorIn(call, 0), ctx), (y) => [out(y)]);
        case 'ComputeLoss':
          if (!impl.computeLoss) unsupported('Model', call.op);
          return then(impl.computeLoss(tensorIn(call, 0), tensorIn(call, 1), ctx), (loss) => [typeof loss === 'number' ? scalar(loss) : out(loss)]);
        case 'Backward': {
          if (!impl.backward) unsupported('Model', call.op);
          const grad = call.inputs[0];
          impl.backward(grad?.kind === 'tensor' ? grad.tensor : undefined, ctx);
          return DONE;
        }
        case 'ApplyDelta':
          if (!impl.applyDelta) unsupported('Model', call.op);
          impl.applyDelta(tensorIn(call, 0), ctx);
          return DONE;
        default:
          return unknownOp('Model', call.op);
      }
    },
  };
}

export function aggregatorComponent(impl: AggregatorComponent): ComponentInstance {
  return {
    ...extras(impl),
    invoke(call) {
      const ctx = call.context;
      if (call.op === 'Contribute') {
        const from = ctx.source ?? ctx.self;
        const first = call.inputs[0];
        // a bundle [update, metadata...] as one value, as the C dispatcher takes it
        if (first?.kind === 'composite' && first.children[0]?.kind === 'tensor') {
          const rest = first.children.slice(1);
          const meta: Value | undefined = rest.length === 0 ? undefined : rest.length === 1 ? rest[0] : { kind: 'composite', children: rest };
          impl.contribute(first.children[0].tensor, meta, from, ctx);
          return DONE;
        }
        const meta = call.inputs[1] === first ? undefined : call.inputs[1];
        impl.contribute(tensorIn(call, 0), meta, from, ctx);
        return DONE;
      }
      if (call.op === 'Aggregate') {
        const round = impl.aggregate(ctx);
        return round === undefined ? [] : [out(round.params), round.metadata];
      }
      return unknownOp('Aggregator', call.op);
    },
  };
}

export function dataSourceComponent(impl: DataSourceComponent): ComponentInstance {
  return {
    ...extras(impl),
    invoke(call) {
      const ctx = call.context;
      switch (call.op) {
        case 'NextBatch':
          return then(impl.nextBatch(ctx), ({ batch, labels }) => [out(batch), out(labels)]);
        case 'Reset':
          if (!impl.reset) unsupported('DataSource', call.op);
          impl.reset(ctx);
          return DONE;
        case 'OnDataLoaded':
          if (!impl.onDataLoaded) unsupported('DataSource', call.op);
          impl.onDataLoaded(ctx);
          return DONE;
        default:
          return unknownOp('DataSource', call.op);
      }
    },
  };
}

export function codecComponent(impl: CodecComponent): ComponentInstance {
  return {
    ...extras(impl),
    invoke(call) {
      const ctx = call.context;
      switch (call.op) {
        case 'Encode':
          return [impl.encode(tensorIn(call, 0), ctx, optionalTensorIn(call, 1))];
        case 'Decode': {
          const y = call.inputs[0];
          if (y === undefined) throw new BbError(BbErrorCode.InvalidArgument, 'input 0 of Decode is missing');
          return [out(impl.decode(y, ctx, optionalTensorIn(call, 1)))];
        }
        case 'Train':
          impl.train?.(tensorIn(call, 0), ctx);
          return DONE;
        default:
          return unknownOp('Codec', call.op);
      }
    },
  };
}

export function indexComponent(impl: IndexComponent): ComponentInstance {
  return {
    ...extras(impl),
    invoke(call) {
      const ctx = call.context;
      switch (call.op) {
        case 'Add':
          return [u64Value(impl.add(tensorIn(call, 0), ctx))];
        case 'Search': {
          const k = Number(call.attributes['k'] ?? 10);
          if (!(k >= 1)) throw new BbError(BbErrorCode.InvalidArgument, `Search needs k >= 1 (attribute \`k\` is ${k})`);
          const { ids, distances } = impl.search(tensorIn(call, 0), k, ctx);
          return [out(ids), out(distances)];
        }
        case 'Remove': {
          if (!impl.remove) unsupported('Index', call.op);
          const id = call.inputs[0];
          if (id?.kind !== 'u64') throw new BbError(BbErrorCode.Type, `input 0 of Remove must be an id (U64), got ${id?.kind ?? 'nothing'}`);
          impl.remove(id.value, ctx);
          return DONE;
        }
        case 'Train':
          impl.train?.(tensorIn(call, 0), ctx);
          return DONE;
        default:
          return unknownOp('Index', call.op);
      }
    },
  };
}

export function peerSelectorComponent(impl: PeerSelectorComponent): ComponentInstance {
  return {
    ...extras(impl),
    invoke(call) {
      const ctx = call.context;
      if (call.op === 'Sample') {
        const n = Number(call.attributes['n'] ?? 1);
        if (!(n >= 0)) throw new BbError(BbErrorCode.InvalidArgument, `Sample needs n >= 0 (got ${n})`);
        return [peersValue(impl.sample(n, ctx))];
      }
      if (call.op === 'CurrentView') return [peersValue(impl.currentView(ctx))];
      return unknownOp('PeerSelector', call.op);
    },
  };
}

export function backendComponent(impl: BackendComponent): ComponentInstance {
  return {
    ...extras(impl),
    invoke(call) {
      const run = impl.ops[call.op];
      if (run === undefined) throw new BbError(BbErrorCode.Unsupported, `this backend does not run ${call.op}`);
      const inputs = call.inputs.map((v, i) => (v === undefined ? undefined : tensorIn(call, i)));
      return then(run(inputs, call), (result) => (Array.isArray(result) ? result.map(out) : [out(result as HostTensor)]));
    },
  };
}

export function protocolComponent(impl: ProtocolComponent): ComponentInstance {
  return {
    ...extras(impl),
    invoke(call) {
      const run = impl.ops?.[call.op];
      if (run === undefined) throw new BbError(BbErrorCode.Unsupported, `this protocol has no op ${call.op}`);
      return run(call);
    },
  };
}
