/**
 * Values of a recording: typed handles of what a Module's ops produce, and the type
 * denotations values carry (docs/IR.md of the package lists the vocabulary).
 */
import { BbError, BbErrorCode } from '../engine/errors.js';

/** Value types by their denotations. "" is abstract: a bound the compiler refines. */
export const TYPES = {
  abstract: '',
  bytes: 'ai.bytesandbrains.opaque',
  peerId: 'bb.peer_id',
  peerIds: 'bb.peer_id_vec',
  trigger: 'bb.trigger',
  wireRequest: 'bb.wire_req_id',
  multiaddress: 'ai.bytesandbrains.multiaddress',
  addresses: 'ai.bytesandbrains.address_vec',
  composite: 'ai.bytesandbrains.composite',
  f32: 'bb.f32',
  f64: 'bb.f64',
  f16: 'bb.f16',
  u8: 'bb.u8',
  i32: 'bb.i32',
  tensorF32: 'ai.bytesandbrains.tensor.f32',
  tensorF64: 'ai.bytesandbrains.tensor.f64',
  tensorF16: 'ai.bytesandbrains.tensor.f16',
  tensorI64: 'ai.bytesandbrains.tensor.i64',
  tensorU8: 'ai.bytesandbrains.tensor.u8',
} as const;

/** A type denotation: one of {@link TYPES} or any other name of letters, digits and `._@-`. */
export type ValueType = (typeof TYPES)[keyof typeof TYPES] | (string & {});

/** The tensor denotation of an element type name (`tensorType('f32')`). */
export function tensorType(element: 'f32' | 'f64' | 'f16' | 'bf16' | 'u8' | 'u16' | 'u32' | 'u64' | 'i8' | 'i16' | 'i32' | 'i64' | 'bool'): string {
  return `ai.bytesandbrains.tensor.${element}`;
}

/** @internal What a value asks of the build that made it. */
export interface ValueSource {
  /** True while the build that made the value is running. */
  readonly live: boolean;
  valueName(value: number): string;
  valueType(value: number): string;
}

/** The numbers bb.wasm gives values that are not entries of a build (bb_wasm.h). */
export const VALUE_EMPTY = 0;
export const VALUE_OMITTED = 1;
export const VALUE_FOREIGN = 2;

/**
 * A value recorded in a Module: the output of an op, an input, a port. Pass it to other
 * ops of the same function; its name and type can be read while its build runs. A value
 * from a refused call is empty (the recording has failed by then; the build says why).
 */
export class GraphValue<T extends ValueType = ValueType> {
  /** @internal The build's number for it (bb_wasm.h). */
  readonly number: number;
  /** @internal */
  readonly source: ValueSource | undefined;
  #name: string | undefined;
  #type: T | undefined;

  /** @internal Made by the recorder. */
  constructor(source: ValueSource | undefined, number: number) {
    this.source = source;
    this.number = number;
  }

  /** True for "no value": what a refused call returns. */
  get empty(): boolean {
    return this.number === VALUE_EMPTY;
  }

  /** Its ONNX value name ("v3", an input's or port's name). */
  get name(): string {
    return (this.#name ??= this.#read('name', (source) => source.valueName(this.number)));
  }

  /** Its type denotation ("" abstract). */
  get type(): T {
    return (this.#type ??= this.#read('type', (source) => source.valueType(this.number)) as T);
  }

  #read(what: string, read: (source: ValueSource) => string): string {
    if (this.number === VALUE_EMPTY || this.number === VALUE_OMITTED) return '';
    const source = this.source;
    if (source === undefined || !source.live) {
      throw new BbError(BbErrorCode.InvalidArgument, `GraphValue.${what}: the build that recorded this value is over`);
    }
    return read(source);
  }
}

/** The omitted optional input of a Backend op (recorded as ""); other ops refuse it. */
export const OMITTED: GraphValue = new GraphValue(undefined, VALUE_OMITTED);
