/**
 * A compiled artifact as the page draws it: partitions (one box per peer class) with the
 * ops they run sorted into what matters (role calls, sends and receives, timers, ONNX
 * compute) and what is folded away (gates, plumbing), the bindings each one really uses,
 * and the wire edges between them labelled with what they carry. Pure data from
 * `Compiler.describe` and `inspectArtifact`: no DOM.
 */
import { type ArtifactDescription } from 'bytesandbrains';
import { partitionBindings, wireId, type ArtifactInspection, type PartitionBinding } from 'bytesandbrains/internals';

import { explainOp, roleOf, shortDomain } from './glossary.js';
import { peerKindsOf } from './peers.js';

/** How an op is shown: the first five are listed, gates and plumbing fold away. */
export type OpKind = 'role' | 'wire' | 'timer' | 'compute' | 'syscall' | 'gate' | 'plumbing';
export const FOLDED_KINDS: ReadonlySet<OpKind> = new Set(['gate', 'plumbing']);

export interface OpItem {
  readonly kind: OpKind;
  /** What the box shows: "Model.Fit", "send “update”", "Relu ×3". */
  readonly label: string;
  /** `domain::op` of the ops grouped here. */
  readonly op: string;
  readonly count: number;
  /** One sentence on what it does. */
  readonly explain: string;
}

export interface PartitionBox {
  /** The partition's full name (with its #hash): the id the artifact uses. */
  readonly id: string;
  /** The name without the hash ("FedDigits_clients"). */
  readonly title: string;
  readonly peerClass: string;
  readonly ops: readonly OpItem[];
  readonly bindings: readonly PartitionBinding[];
  /** Ops in the partition, all kinds. */
  readonly opCount: number;
}

export interface WireArrow {
  /** `${from}->${to}:${site}` */
  readonly id: string;
  readonly from: string;
  readonly to: string;
  /** The wire's name ("FedDigits.global"): the same on every peer and every version of the program. */
  readonly name: string;
  /** What a visitor reads on the arrow ("global model"). */
  readonly label: string;
  /** What the envelope's value is made of, for the tooltip. */
  readonly carries: string;
  /** The value the wire.Send sends. */
  readonly value: string;
  /** The receiving wire.Recv's value. */
  readonly site: string;
  /** The wire's id, what envelopes of this edge carry as `/site/<id>` (decodeEnvelope's `fill.site`). */
  readonly wireId: bigint;
}

/** One kind of peer and the partitions it runs together (see peers.ts). */
export interface PeerGroup {
  /** "server", "client", ... */
  readonly peer: string;
  /** The partitions' ids (their full names). */
  readonly partitions: readonly string[];
}

export interface ProgramGraph {
  /** The module's name (the @self partition's title, or the first one's). */
  readonly name: string;
  /** Peer classes in order of first appearance. */
  readonly classes: readonly string[];
  /** The kinds of peer and what each runs, when the program's host is known; else none. */
  readonly peers: readonly PeerGroup[];
  readonly partitions: readonly PartitionBox[];
  readonly edges: readonly WireArrow[];
  /**
   * Wire id → the edge its envelopes take. A wire several partitions' Recvs listen to is
   * several edges; its envelopes are counted on the first (the examples have one per wire).
   */
  readonly edgeByWire: ReadonlyMap<bigint, WireArrow>;
}

/** Friendlier words for network outputs the examples name tersely. */
const EDGE_LABELS: Readonly<Record<string, string>> = {
  global: 'global model',
  update: 'model update',
  share: 'trained model',
  split_activations: 'activations',
  split_gradients: 'gradients',
  split_eval: 'held-out activations',
  split_score: 'held-out score',
  split_share: "client's part",
  split_average: 'averaged part',
};

const GATES = new Set(['DedupGateRx', 'PeerHealthGateRx', 'BackoffGateRx', 'PeerHealthGateTx', 'BackoffGateTx', 'DeadlineCheck']);
const PLUMBING = new Set(['PassThrough', 'Bundle', 'Unbundle', 'Constant', 'Identity']);

type DescribedNode = { readonly op_type: string; readonly domain: string; readonly inputs: readonly string[]; readonly outputs: readonly string[] };

/** The partition name without its hash suffix. */
export function titleOf(name: string): string {
  const hash = name.indexOf('#');
  return hash < 0 ? name : name.slice(0, hash);
}

/** The port of a wire's name, what the arrow is labelled by ("FedDigits.update" → "update"). */
export function wirePort(wire: string): string {
  return wire.slice(wire.lastIndexOf('.') + 1);
}

function kindOf(node: DescribedNode): OpKind {
  const domain = shortDomain(node.domain);
  if (roleOf(node.domain) !== undefined) return 'role';
  if (domain === 'wire') return 'wire';
  if (domain === 'syscall' && node.op_type === 'Interval') return 'timer';
  if (GATES.has(node.op_type)) return 'gate';
  if (PLUMBING.has(node.op_type) || domain === 'composite') return 'plumbing';
  if (domain === '' || domain === 'ai.onnx') return 'compute';
  return 'syscall';
}

export function buildProgramGraph(description: ArtifactDescription, artifact: ArtifactInspection): ProgramGraph {
  const classes: string[] = [];
  const used = partitionBindings(description, artifact);
  const edges = description.wire_edges.map((e): WireArrow => {
    const port = wirePort(e.wire);
    return {
      id: `${e.from}->${e.to}:${e.site}`,
      from: e.from,
      to: e.to,
      name: e.wire,
      label: EDGE_LABELS[port] ?? port.replace(/_/g, ' '),
      carries: carried(description, e.from, e.value),
      value: e.value,
      site: e.site,
      wireId: wireId(e.wire),
    };
  });
  const partitions = description.partitions.map((p): PartitionBox => {
    if (!classes.includes(p.peer_class)) classes.push(p.peer_class);
    const nodes = p.nodes as readonly DescribedNode[];
    const groups = new Map<string, { kind: OpKind; label: string; op: string; count: number; explain: string }>();
    for (const node of nodes) {
      const kind = kindOf(node);
      const op = `${shortDomain(node.domain) || 'ai.onnx'}::${node.op_type}`;
      const label = labelOf(node, kind, p.name, edges);
      const key = `${kind}|${label}`;
      const group = groups.get(key);
      if (group !== undefined) group.count++;
      else groups.set(key, { kind, label, op, count: 1, explain: explainOp(node.domain, node.op_type) });
    }
    const ops = [...groups.values()].map((g) => ({ ...g, label: g.count > 1 ? `${g.label} ×${g.count}` : g.label }));
    return {
      id: p.name,
      title: titleOf(p.name),
      peerClass: p.peer_class,
      ops,
      bindings: used.get(p.name) ?? [],
      opCount: nodes.length,
    };
  });
  const self = partitions.find((p) => p.peerClass === '@self') ?? partitions[0];
  const edgeByWire = new Map<bigint, WireArrow>();
  for (const edge of edges) if (!edgeByWire.has(edge.wireId)) edgeByWire.set(edge.wireId, edge);
  const name = self === undefined ? '' : self.title;
  const kinds = peerKindsOf(name, partitions.map((p) => p.title)) ?? [];
  const peers = kinds.map((k) => ({ peer: k.peer, partitions: k.titles.map((t) => partitions.find((p) => p.title === t)!.id) }));
  return { name, classes, peers, partitions, edges, edgeByWire };
}

function labelOf(node: DescribedNode, kind: OpKind, partition: string, edges: readonly WireArrow[]): string {
  if (kind === 'role') return `${roleOf(node.domain)}.${node.op_type}`;
  if (kind === 'wire' && node.op_type === 'Send') {
    const edge = edges.find((e) => e.from === partition && node.inputs[0] === e.value);
    return edge === undefined ? 'send' : `send “${edge.label}”`;
  }
  if (kind === 'wire' && node.op_type === 'Recv') {
    const edge = edges.find((e) => e.to === partition && node.outputs[0] === e.site);
    return edge === undefined ? 'receive' : `receive “${edge.label}”`;
  }
  if (kind === 'timer') return 'every tick (timer)';
  return node.op_type;
}

/** What the value `value` of partition `from` is made of: a bundle's parts by the ops that made them. */
function carried(description: ArtifactDescription, from: string, value: string): string {
  const partition = description.partitions.find((p) => p.name === from);
  const nodes = (partition?.nodes ?? []) as readonly DescribedNode[];
  const producer = (v: string): DescribedNode | undefined => nodes.find((n) => n.outputs.includes(v));
  const describe = (v: string): string => {
    const n = producer(v);
    if (n === undefined) return v;
    const role = roleOf(n.domain);
    const name = role === undefined ? n.op_type : `${role}.${n.op_type}`;
    return n.outputs.length > 1 ? `${name} output ${n.outputs.indexOf(v) + 1}` : name;
  };
  const top = producer(value);
  if (top !== undefined && top.op_type === 'Bundle') return `a bundle of ${top.inputs.map(describe).join(', ')}`;
  return describe(value);
}
