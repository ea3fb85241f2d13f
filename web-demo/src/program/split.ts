/**
 * Split learning as the page shows it: the ONNX model the split cuts, its layers on each
 * side of the cut (the clients run what the cut's value is computed from, the server the
 * rest), and the traffic at the cut by direction — activations up to the server, gradients
 * back down. Pure data: the model's bytes, the program graph and the page's edge counts in;
 * no DOM.
 *
 * The in-page run is SplitFed of the digits CNN (the package's `splitLearning` template,
 * module `SplitFedCnn`, as split_cnn records it) with as many clients as the visitor picks.
 */
import type { SplitLearningOptions } from 'bytesandbrains';

import type { EdgeCount } from '../federation/state.js';
import type { ProgramGraph } from './model.js';

/** The digits CNN is cut after its second convolution block: the clients run the convolutions. */
export const SPLIT_CUT = '/MaxPool_1_output_0';
/** The Module's name: split_cnn's SplitFed Module. */
export const SPLIT_MODULE = 'SplitFedCnn';

/** The plan every peer of the in-page split makes (the same options give the same artifact). */
export function splitPlanOptions(clients: number): SplitLearningOptions {
  return {
    name: SPLIT_MODULE,
    cut: SPLIT_CUT,
    clients,
    training: { loss: 'xent', optimizer: 'nesterov', lr: 0.05 },
    batch: 32,
    evalMs: 1000,
    // a round of SplitFed waits out the page's latency; the clients then train on
    deadlineMs: 3000,
  };
}

/** One node of the ONNX graph. */
export interface Layer {
  readonly op: string;
  readonly name: string;
  readonly inputs: readonly string[];
  readonly outputs: readonly string[];
  /** Parameters (initializer elements) the node reads. */
  readonly parameters: number;
}

export interface SplitSides {
  readonly cut: string;
  /** In the model's order: the layers the cut's value is computed from. */
  readonly client: readonly Layer[];
  readonly server: readonly Layer[];
  readonly clientParameters: number;
  readonly serverParameters: number;
}

// ---- a minimal reader of the ModelProto fields the picture needs --------------------------

interface Field {
  readonly number: number;
  readonly wire: number;
  readonly value: number;
  readonly bytes?: Uint8Array;
}

function* fields(buffer: Uint8Array): Generator<Field> {
  let at = 0;
  const varint = (): number => {
    let result = 0;
    let scale = 1;
    for (;;) {
      if (at >= buffer.length) throw new Error('the ONNX model is truncated inside a varint');
      const byte = buffer[at++]!;
      result += (byte & 0x7f) * scale;
      if ((byte & 0x80) === 0) return result;
      scale *= 128;
    }
  };
  while (at < buffer.length) {
    const key = varint();
    const number = Math.floor(key / 8);
    const wire = key & 7;
    if (wire === 0) yield { number, wire, value: varint() };
    else if (wire === 1 || wire === 5) {
      at += wire === 1 ? 8 : 4;
      yield { number, wire, value: 0 };
    } else if (wire === 2) {
      const length = varint();
      if (at + length > buffer.length) throw new Error(`the ONNX model is truncated: field ${number} needs ${length} bytes`);
      yield { number, wire, value: length, bytes: buffer.subarray(at, at + length) };
      at += length;
    } else throw new Error(`the ONNX model has a field of wire type ${wire}, which ModelProto does not use`);
  }
}

const text = new TextDecoder();

/** The graph's nodes in order, with the parameters each reads (ModelProto.graph: nodes 1, initializers 5). */
export function modelLayers(model: Uint8Array): Layer[] {
  const graph = [...fields(model)].find((f) => f.number === 7 && f.bytes !== undefined)?.bytes;
  if (graph === undefined) throw new Error('the ONNX model has no graph');
  const sizes = new Map<string, number>();
  const nodes: Omit<Layer, 'parameters'>[] = [];
  for (const field of fields(graph)) {
    if (field.bytes === undefined) continue;
    if (field.number === 5) {
      // TensorProto: dims 1 (packed or not), name 8
      let name = '';
      let size = 1;
      for (const t of fields(field.bytes)) {
        if (t.number === 8 && t.bytes !== undefined) name = text.decode(t.bytes);
        else if (t.number === 1 && t.bytes !== undefined) for (const d of packedVarints(t.bytes)) size *= d;
        else if (t.number === 1) size *= t.value;
      }
      sizes.set(name, size);
    } else if (field.number === 1) {
      const node = { op: '', name: '', inputs: [] as string[], outputs: [] as string[] };
      for (const n of fields(field.bytes)) {
        if (n.bytes === undefined) continue;
        if (n.number === 1) node.inputs.push(text.decode(n.bytes));
        else if (n.number === 2) node.outputs.push(text.decode(n.bytes));
        else if (n.number === 3) node.name = text.decode(n.bytes);
        else if (n.number === 4) node.op = text.decode(n.bytes);
      }
      nodes.push(node);
    }
  }
  return nodes.map((n) => ({ ...n, parameters: n.inputs.reduce((sum, input) => sum + (sizes.get(input) ?? 0), 0) }));
}

/** Packed varints (a repeated int64 field). */
function packedVarints(packed: Uint8Array): number[] {
  const values: number[] = [];
  let value = 0;
  let scale = 1;
  for (const byte of packed) {
    value += (byte & 0x7f) * scale;
    scale *= 128;
    if ((byte & 0x80) === 0) {
      values.push(value);
      value = 0;
      scale = 1;
    }
  }
  return values;
}

/**
 * The layers on each side of a vanilla cut: the client's are every node the cut's value is
 * computed from; the server's the rest. A cut that names no node's output is refused.
 */
export function splitSides(layers: readonly Layer[], cut: string): SplitSides {
  const producer = new Map<string, number>();
  layers.forEach((layer, k) => layer.outputs.forEach((o) => producer.set(o, k)));
  if (!producer.has(cut)) throw new Error(`the cut ${cut} is no node's output in this model`);
  const upstream = new Set<number>();
  const pending = [producer.get(cut)!];
  while (pending.length > 0) {
    const k = pending.pop()!;
    if (upstream.has(k)) continue;
    upstream.add(k);
    for (const input of layers[k]!.inputs) {
      const from = producer.get(input);
      if (from !== undefined) pending.push(from);
    }
  }
  const client = layers.filter((_, k) => upstream.has(k));
  const server = layers.filter((_, k) => !upstream.has(k));
  const sum = (side: readonly Layer[]): number => side.reduce((s, l) => s + l.parameters, 0);
  return { cut, client, server, clientParameters: sum(client), serverParameters: sum(server) };
}

/** The traffic at the cut: up (client to server) and down, and the step's two wires by name. */
export interface SplitTraffic {
  readonly up: EdgeCount;
  readonly down: EdgeCount;
  /** `split_activations`: a batch's activations at the cut (and its labels). */
  readonly activations: EdgeCount;
  /** `split_gradients`: d loss / d the cut, back to the client that sent the activations. */
  readonly gradients: EdgeCount;
}

/**
 * Sums the page's per-edge counts by direction: an edge is up when it ends in a partition
 * the server runs. Without a known server (a program that is not a split) there is none.
 */
export function splitTraffic(graph: ProgramGraph, counts: ReadonlyMap<string, EdgeCount>): SplitTraffic | undefined {
  const server = graph.peers.find((p) => p.peer === 'server');
  if (server === undefined || !graph.edges.some((e) => e.name.endsWith('.split_activations'))) return undefined;
  const zero = (): { envelopes: number; bytes: number } => ({ envelopes: 0, bytes: 0 });
  const up = zero();
  const down = zero();
  const activations = zero();
  const gradients = zero();
  for (const edge of graph.edges) {
    const count = counts.get(edge.id);
    if (count === undefined) continue;
    const add = (to: { envelopes: number; bytes: number }): void => {
      to.envelopes += count.envelopes;
      to.bytes += count.bytes;
    };
    add(server.partitions.includes(edge.to) ? up : down);
    if (edge.name.endsWith('.split_activations')) add(activations);
    if (edge.name.endsWith('.split_gradients')) add(gradients);
  }
  return { up, down, activations, gradients };
}
