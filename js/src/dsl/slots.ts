/**
 * Role slot placeholders: `g.model('model')`, `g.aggregator('aggregator')`, ... The slot's
 * name is what the compiler binds a concrete component to (`Compiler.bind`); every slot
 * object of one name is the same slot. Each method records one op of the role's contract
 * (the inputs and outputs each takes are in docs/MODULES.md of the package); the `after`
 * arguments are ordering triggers: the op runs (again) once `after` has a value.
 */
import type { Role } from '../node/compiler.js';
import type { Attributes } from './attributes.js';
import type { GraphValue, ValueType } from './value.js';

/** Where a slot records its ops: the Graph of the Module being written (graph.ts). */
export interface RoleCallRecorder {
  roleCall(
    role: Role,
    slot: string,
    method: string,
    inputs: readonly GraphValue[],
    options: { readonly outputs?: number; readonly attributes?: Attributes; readonly peerClass?: string },
  ): GraphValue[];
}

abstract class Slot {
  protected readonly g: RoleCallRecorder;
  readonly name: string;
  abstract readonly role: Role;

  constructor(g: RoleCallRecorder, name: string) {
    this.g = g;
    this.name = name;
  }

  /** slot.method(inputs) with this many outputs. */
  protected recordOp(method: string, inputs: readonly (GraphValue | undefined)[], outputs = 1, attributes?: Attributes): GraphValue[] {
    const given = inputs.filter((v): v is GraphValue => v !== undefined);
    return this.g.roleCall(this.role, this.name, method, given, attributes === undefined ? { outputs } : { outputs, attributes });
  }

  protected recordOp1<T extends ValueType = ValueType>(method: string, inputs: readonly (GraphValue | undefined)[], attributes?: Attributes): GraphValue<T> {
    return this.recordOp(method, inputs, 1, attributes)[0] as GraphValue<T>;
  }
}

/** Model: one flat float32 parameter vector, trained and evaluated by its concrete. */
export class ModelSlot extends Slot {
  readonly role = 'Model' as const;
  /** y = f(x). */
  forward(x: GraphValue): GraphValue {
    return this.recordOp1('Forward', [x]);
  }
  /** The loss of a prediction against a target. */
  computeLoss(prediction: GraphValue, target: GraphValue): GraphValue {
    return this.recordOp1('ComputeLoss', [prediction, target]);
  }
  /** Gradients of the last loss and one optimizer step. */
  backward(grad: GraphValue): GraphValue {
    return this.recordOp1('Backward', [grad]);
  }
  applyDelta(delta: GraphValue): GraphValue {
    return this.recordOp1('ApplyDelta', [delta]);
  }
  loadParameters(params: GraphValue): GraphValue {
    return this.recordOp1('LoadParameters', [params]);
  }
  /** The current parameters. */
  params(after?: GraphValue): GraphValue {
    return this.recordOp1('Params', [after]);
  }
  /** Loads params, trains locally, and gives the trained params and how many samples it saw. */
  fit(params: GraphValue, after?: GraphValue): { trained: GraphValue; samples: GraphValue } {
    const [trained, samples] = this.recordOp('Fit', [params, after], 2) as [GraphValue, GraphValue];
    return { trained, samples };
  }
  /** A score of the model on labelled data (accuracy for classifiers). */
  evaluate(x: GraphValue, labels: GraphValue, after?: GraphValue): GraphValue {
    return this.recordOp1('Evaluate', [x, labels, after]);
  }
}

/** Aggregator: contributions in, aggregated parameters out when a round closes. */
export class AggregatorSlot extends Slot {
  readonly role = 'Aggregator' as const;
  /** Adds a contribution (from the peer it came from) with its metadata. */
  contribute(contribution: GraphValue, metadata: GraphValue): GraphValue {
    return this.recordOp1('Contribute', [contribution, metadata]);
  }
  /** When a round can close: the new parameters and the aggregator's metadata; otherwise nothing runs on. */
  aggregate(trigger: GraphValue): { params: GraphValue; metadata: GraphValue } {
    const [params, metadata] = this.recordOp('Aggregate', [trigger], 2) as [GraphValue, GraphValue];
    return { params, metadata };
  }
}

/** Codec: a lossy or lossless encoding of tensors for the wire. */
export class CodecSlot extends Slot {
  readonly role = 'Codec' as const;
  train(samples: GraphValue): GraphValue {
    return this.recordOp1('Train', [samples]);
  }
  /**
   * Encode(x) → [y]; with a reference, x travels relative to it (the shipped codecs send
   * x − reference: a client's update against the global model it trained from).
   */
  encode(x: GraphValue, reference?: GraphValue): GraphValue {
    return this.recordOp1('Encode', [x, reference]);
  }
  /** Decode(y) → [x]; with a reference, reference + what y holds (y alone: the difference). */
  decode(y: GraphValue, reference?: GraphValue): GraphValue {
    return this.recordOp1('Decode', [y, reference]);
  }
}

/** DataSource: batches of (features, labels). */
export class DataSourceSlot extends Slot {
  readonly role = 'DataSource' as const;
  nextBatch(after?: GraphValue): { batch: GraphValue; labels: GraphValue } {
    const [batch, labels] = this.recordOp('NextBatch', [after], 2) as [GraphValue, GraphValue];
    return { batch, labels };
  }
  reset(trigger: GraphValue): GraphValue {
    return this.recordOp1('Reset', [trigger]);
  }
  onDataLoaded(): GraphValue {
    return this.recordOp1('OnDataLoaded', []);
  }
}

/** Index: vectors in, nearest neighbours out. */
export class IndexSlot extends Slot {
  readonly role = 'Index' as const;
  add(vector: GraphValue): GraphValue {
    return this.recordOp1('Add', [vector]);
  }
  search(query: GraphValue, k: number): GraphValue {
    return this.recordOp1('Search', [query], { k: BigInt(k) });
  }
  remove(id: GraphValue): GraphValue {
    return this.recordOp1('Remove', [id]);
  }
  train(samples: GraphValue): GraphValue {
    return this.recordOp1('Train', [samples]);
  }
}

/** PeerSelector: the peers to talk to. Its outputs are peer ids of `peerClass`. */
export class PeerSelectorSlot extends Slot {
  readonly role = 'PeerSelector' as const;
  readonly peerClass: string | undefined;

  constructor(g: RoleCallRecorder, name: string, peerClass?: string) {
    super(g, name);
    this.peerClass = peerClass;
  }

  protected override recordOp(method: string, inputs: readonly (GraphValue | undefined)[], outputs = 1, attributes?: Attributes): GraphValue[] {
    const given = inputs.filter((v): v is GraphValue => v !== undefined);
    return this.g.roleCall(this.role, this.name, method, given, {
      outputs,
      ...(attributes === undefined ? {} : { attributes }),
      ...(this.peerClass === undefined ? {} : { peerClass: this.peerClass }),
    });
  }

  /** n peers drawn from the view. */
  sample(n: number, after?: GraphValue): GraphValue<'bb.peer_id'> {
    return this.recordOp1('Sample', [after], { n: BigInt(n) });
  }
  /** Every peer of the view. */
  currentView(after?: GraphValue): GraphValue<'bb.peer_id'> {
    return this.recordOp1('CurrentView', [after]);
  }
}

/** Backend: ONNX operators on the backend bound to the slot (CpuBackend runs the CPU executor's). */
export class BackendSlot extends Slot {
  readonly role = 'Backend' as const;
  /** One operator with one output, e.g. `cpu.op('MatMul', [x, w])`; OMITTED stands for an omitted optional input. */
  op(opType: string, inputs: readonly GraphValue[], attributes?: Attributes): GraphValue {
    return this.recordOp1(opType, inputs, attributes);
  }
  /** One operator with several outputs. */
  opWithOutputs(opType: string, inputs: readonly GraphValue[], outputs: number, attributes?: Attributes): GraphValue[] {
    return this.recordOp(opType, inputs, outputs, attributes);
  }
}
