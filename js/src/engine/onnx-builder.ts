/**
 * Writes small ONNX models (ModelProto bytes) from a plain description: a graph of nodes
 * with typed inputs and outputs, attributes and initializers. Enough to build test and
 * benchmark graphs in JavaScript without Python; the encoding is plain protobuf, which
 * any ONNX runtime reads.
 */
import { dtypeCode, type DType, type TensorArray } from './dtype.js';

/** An attribute value, tagged with its ONNX attribute type. */
export type OnnxAttribute =
  | { readonly int: number }
  | { readonly float: number }
  | { readonly string: string }
  | { readonly ints: readonly number[] }
  | { readonly floats: readonly number[] }
  | { readonly strings: readonly string[] };

export interface OnnxNodeSpec {
  readonly opType: string;
  readonly inputs: readonly string[];
  readonly outputs: readonly string[];
  readonly name?: string;
  /** The operator set domain; ai.onnx ("") when omitted. */
  readonly domain?: string;
  readonly attributes?: Readonly<Record<string, OnnxAttribute>>;
}

/** A graph input or output; a string dim is symbolic (e.g. `'N'`, a batch size). */
export interface OnnxValueSpec {
  readonly name: string;
  readonly dtype: DType;
  readonly dims: readonly (number | string)[];
}

/** A constant tensor of the graph, stored as raw little-endian bytes. */
export interface OnnxInitializerSpec {
  readonly name: string;
  readonly dtype: DType;
  readonly dims: readonly number[];
  readonly data: TensorArray;
}

export interface OnnxModelSpec {
  /** The ai.onnx opset version the graph is written for. */
  readonly opset: number;
  /** The IR version; 8 (ONNX 1.12) when omitted. */
  readonly irVersion?: number;
  readonly graphName?: string;
  readonly producer?: string;
  readonly nodes: readonly OnnxNodeSpec[];
  readonly inputs: readonly OnnxValueSpec[];
  readonly outputs: readonly OnnxValueSpec[];
  readonly initializers?: readonly OnnxInitializerSpec[];
}

const DEFAULT_IR_VERSION = 8;

// Field numbers of onnx.proto.
const MODEL = { irVersion: 1, producerName: 2, graph: 7, opsetImport: 8 } as const;
const OPSET = { domain: 1, version: 2 } as const;
const GRAPH = { node: 1, name: 2, initializer: 5, input: 11, output: 12 } as const;
const NODE = { input: 1, output: 2, name: 3, opType: 4, attribute: 5, domain: 7 } as const;
const ATTRIBUTE = { name: 1, f: 2, i: 3, s: 4, floats: 7, ints: 8, strings: 9, type: 20 } as const;
const ATTRIBUTE_TYPE = { float: 1, int: 2, string: 3, floats: 6, ints: 7, strings: 8 } as const;
const VALUE_INFO = { name: 1, type: 2 } as const;
const TYPE = { tensorType: 1 } as const;
const TENSOR_TYPE = { elemType: 1, shape: 2 } as const;
const SHAPE = { dim: 1 } as const;
const DIMENSION = { dimValue: 1, dimParam: 2 } as const;
const TENSOR = { dims: 1, dataType: 2, name: 8, rawData: 9 } as const;

const WIRE_VARINT = 0;
const WIRE_LENGTH_DELIMITED = 2;
const WIRE_FIXED32 = 5;

const utf8 = new TextEncoder();

/** Appends protobuf fields to a growing byte list. */
class ProtoWriter {
  readonly #bytes: number[] = [];

  varint(field: number, value: number | bigint): this {
    this.#tag(field, WIRE_VARINT);
    this.#varint(BigInt.asUintN(64, BigInt(value)));
    return this;
  }

  float(field: number, value: number): this {
    this.#tag(field, WIRE_FIXED32);
    const bits = new Uint8Array(4);
    new DataView(bits.buffer).setFloat32(0, value, true);
    this.#bytes.push(...bits);
    return this;
  }

  bytes(field: number, value: Uint8Array): this {
    this.#tag(field, WIRE_LENGTH_DELIMITED);
    this.#varint(BigInt(value.length));
    for (const byte of value) this.#bytes.push(byte);
    return this;
  }

  string(field: number, value: string): this {
    return this.bytes(field, utf8.encode(value));
  }

  message(field: number, write: (inner: ProtoWriter) => void): this {
    const inner = new ProtoWriter();
    write(inner);
    return this.bytes(field, inner.finish());
  }

  finish(): Uint8Array {
    return Uint8Array.from(this.#bytes);
  }

  #tag(field: number, wireType: number): void {
    this.#varint(BigInt((field << 3) | wireType));
  }

  #varint(value: bigint): void {
    let rest = value;
    while (rest >= 0x80n) {
      this.#bytes.push(Number(rest & 0x7fn) | 0x80);
      rest >>= 7n;
    }
    this.#bytes.push(Number(rest));
  }
}

/** Encodes the described model as ONNX ModelProto bytes. */
export function encodeOnnxModel(spec: OnnxModelSpec): Uint8Array {
  return new ProtoWriter()
    .varint(MODEL.irVersion, spec.irVersion ?? DEFAULT_IR_VERSION)
    .string(MODEL.producerName, spec.producer ?? 'bytesandbrains')
    .message(MODEL.graph, (graph) => writeGraph(graph, spec))
    .message(MODEL.opsetImport, (opset) => opset.string(OPSET.domain, '').varint(OPSET.version, spec.opset))
    .finish();
}

function writeGraph(graph: ProtoWriter, spec: OnnxModelSpec): void {
  for (const node of spec.nodes) graph.message(GRAPH.node, (w) => writeNode(w, node));
  graph.string(GRAPH.name, spec.graphName ?? 'graph');
  for (const initializer of spec.initializers ?? []) graph.message(GRAPH.initializer, (w) => writeTensor(w, initializer));
  for (const input of spec.inputs) graph.message(GRAPH.input, (w) => writeValueInfo(w, input));
  for (const output of spec.outputs) graph.message(GRAPH.output, (w) => writeValueInfo(w, output));
}

function writeNode(w: ProtoWriter, node: OnnxNodeSpec): void {
  for (const input of node.inputs) w.string(NODE.input, input);
  for (const output of node.outputs) w.string(NODE.output, output);
  if (node.name !== undefined) w.string(NODE.name, node.name);
  w.string(NODE.opType, node.opType);
  for (const [name, value] of Object.entries(node.attributes ?? {})) {
    w.message(NODE.attribute, (a) => writeAttribute(a, name, value));
  }
  if (node.domain !== undefined) w.string(NODE.domain, node.domain);
}

// Repeated scalars are written unpacked, as proto2's onnx.proto declares them.
function writeAttribute(w: ProtoWriter, name: string, value: OnnxAttribute): void {
  w.string(ATTRIBUTE.name, name);
  if ('int' in value) w.varint(ATTRIBUTE.i, value.int).varint(ATTRIBUTE.type, ATTRIBUTE_TYPE.int);
  else if ('float' in value) w.float(ATTRIBUTE.f, value.float).varint(ATTRIBUTE.type, ATTRIBUTE_TYPE.float);
  else if ('string' in value) w.string(ATTRIBUTE.s, value.string).varint(ATTRIBUTE.type, ATTRIBUTE_TYPE.string);
  else if ('ints' in value) {
    for (const item of value.ints) w.varint(ATTRIBUTE.ints, item);
    w.varint(ATTRIBUTE.type, ATTRIBUTE_TYPE.ints);
  } else if ('floats' in value) {
    for (const item of value.floats) w.float(ATTRIBUTE.floats, item);
    w.varint(ATTRIBUTE.type, ATTRIBUTE_TYPE.floats);
  } else {
    for (const item of value.strings) w.string(ATTRIBUTE.strings, item);
    w.varint(ATTRIBUTE.type, ATTRIBUTE_TYPE.strings);
  }
}

function writeValueInfo(w: ProtoWriter, value: OnnxValueSpec): void {
  w.string(VALUE_INFO.name, value.name);
  w.message(VALUE_INFO.type, (type) =>
    type.message(TYPE.tensorType, (tensor) => {
      tensor.varint(TENSOR_TYPE.elemType, dtypeCode(value.dtype));
      tensor.message(TENSOR_TYPE.shape, (shape) => {
        for (const dim of value.dims) {
          shape.message(SHAPE.dim, (d) =>
            typeof dim === 'string' ? d.string(DIMENSION.dimParam, dim) : d.varint(DIMENSION.dimValue, dim),
          );
        }
      });
    }),
  );
}

function writeTensor(w: ProtoWriter, tensor: OnnxInitializerSpec): void {
  for (const dim of tensor.dims) w.varint(TENSOR.dims, dim);
  w.varint(TENSOR.dataType, dtypeCode(tensor.dtype));
  w.string(TENSOR.name, tensor.name);
  w.bytes(TENSOR.rawData, new Uint8Array(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength));
}
