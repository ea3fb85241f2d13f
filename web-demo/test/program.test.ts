/**
 * The program picture's model and layout on the examples' real artifacts: peer classes,
 * wire edges named by their wires and matched to the wire ids envelopes carry, only the
 * bindings each partition uses, gates and plumbing folded, the partitions one peer runs
 * together (only for the programs whose hosts are known), and layouts whose boxes do not
 * overlap, each inside its peer's frame: elkjs left to right, and on a phone one column as
 * wide as the screen with the labels clear of the boxes.
 */
import { Compiler, loadBb, type Bb } from 'bytesandbrains';
import { compileFederatedDigits } from 'bytesandbrains/examples';
import { inspectArtifact, wireId } from 'bytesandbrains/internals';

import { livePlan } from '../shared/live-plan.js';
import { beforeAll, expect, test } from 'vitest';

import { explainOp, TERMS } from '../src/program/glossary.js';
import { layoutProgram, rowsOf, type ProgramLayout } from '../src/program/layout.js';
import { buildProgramGraph, FOLDED_KINDS, wirePort, type ProgramGraph } from '../src/program/model.js';

let bb: Bb;
beforeAll(async () => {
  bb = await loadBb();
});

function graphOf(artifact: Uint8Array): ProgramGraph {
  return buildProgramGraph(Compiler.describe(bb, artifact, 'json'), inspectArtifact(artifact));
}

function example(name: string, module = 0): Uint8Array {
  const compiler = Compiler.forExample(bb, name, module);
  try {
    return compiler.compile(Compiler.recordExample(bb, name, module));
  } finally {
    compiler.free();
  }
}

/** Character widths as a monospace font at 12 px has them (the page measures; tests estimate). */
const measure = (text: string): number => text.length * 7.3;

type Rect = { x: number; y: number; width: number; height: number };
const meet = (a: Rect, b: Rect): boolean => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
const inside = (a: Rect, b: Rect): boolean => a.x >= b.x && a.y >= b.y && a.x + a.width <= b.x + b.width && a.y + a.height <= b.y + b.height;

/** Boxes that overlap, boxes outside their peer's frame or inside another's. */
function overlaps(layout: ProgramLayout): string[] {
  const out: string[] = [];
  for (const [i, a] of layout.boxes.entries()) {
    for (const b of layout.boxes.slice(i + 1)) if (meet(a, b)) out.push(`${a.box.title} / ${b.box.title}`);
    for (const g of layout.groups) {
      const member = g.group.partitions.includes(a.box.id);
      if (member && !inside(a, g)) out.push(`${a.box.title} outside its ${g.group.peer}`);
      if (!member && meet(a, g)) out.push(`${a.box.title} in the ${g.group.peer}'s frame`);
    }
  }
  return out;
}

test('federated_digits: three partitions, two labelled wire edges, bindings each one uses', () => {
  const artifact = compileFederatedDigits(bb, { quorum: 3, target: 4 });
  const graph = graphOf(artifact);
  expect(graph.name).toBe('FedDigits');
  expect(graph.classes).toEqual(['@self', 'clients', 'server']);
  expect(graph.partitions.map((p) => p.title)).toEqual(['FedDigits', 'FedDigits_clients', 'FedDigits_server']);
  expect(graph.edges.map((e) => [e.name, e.label, e.from.split('#')[0], e.to.split('#')[0]])).toEqual([
    ['FedDigits.global', 'global model', 'FedDigits', 'FedDigits_clients'],
    ['FedDigits.update', 'model update', 'FedDigits_clients', 'FedDigits_server'],
  ]);
  expect(graph.edges[0]!.carries).toBe('a bundle of Aggregator.Aggregate output 1, Aggregator.Aggregate output 2');
  expect(graph.edges[1]!.carries).toBe('a bundle of Model.Fit output 1, Model.Fit output 2, Unbundle output 2');
  const wires = inspectArtifact(artifact).wires;
  for (const edge of graph.edges) {
    expect(edge.wireId).toBe(wireId(edge.name));
    expect(graph.edgeByWire.get(edge.wireId)).toBe(edge);
    expect(wires.get(edge.wireId)?.recvs).toContainEqual({ fn: edge.to, value: edge.site });
  }
  expect(graph.edgeByWire.size).toBe(2);
  const slots = (title: string): string[] => graph.partitions.find((p) => p.title === title)!.bindings.map((b) => b.slot).sort();
  expect(slots('FedDigits_clients')).toEqual(['data', 'model']); // no aggregator: clients never aggregate
  expect(slots('FedDigits_server')).toEqual(['aggregator', 'model']); // FedAvg's init=model
  expect(slots('FedDigits')).toEqual(['aggregator', 'data', 'model']);
  const clients = graph.partitions.find((p) => p.title === 'FedDigits_clients')!;
  expect(clients.ops.filter((op) => !FOLDED_KINDS.has(op.kind)).map((op) => op.label)).toEqual(['receive “global model”', 'Model.Fit', 'send “model update”']);
  expect(clients.ops.filter((op) => FOLDED_KINDS.has(op.kind)).map((op) => op.label).sort()).toEqual(['BackoffGateRx', 'Bundle', 'DeadlineCheck', 'DedupGateRx', 'PeerHealthGateRx', 'Unbundle']);
  const self = graph.partitions.find((p) => p.title === 'FedDigits')!;
  expect(self.ops.find((op) => op.label.startsWith('PassThrough'))?.label).toBe('PassThrough ×3');
  expect(rowsOf(self, false).folded).toBe(5); // 3 PassThrough, Bundle, DeadlineCheck
  expect(rowsOf(self, true).folded).toBe(0);
});

test('the partitions one peer runs together come from the hosts this page knows, and only from them', () => {
  const peers = (artifact: Uint8Array): string[][] => graphOf(artifact).peers.map((g) => [g.peer, ...g.partitions.map((id) => id.split('#')[0]!)]);
  expect(peers(compileFederatedDigits(bb))).toEqual([['server', 'FedDigits', 'FedDigits_server'], ['client', 'FedDigits_clients']]);
  expect(peers(livePlan({ clients: 2, quorum: 1, deadlineMs: 1000, registryTtlMs: 5000 }).compile(bb))).toEqual([['server', 'LiveDigits', 'LiveDigits_server'], ['client', 'LiveDigits_clients']]);
  expect(peers(example('hierarchical_digits'))).toEqual([['root', 'HierDigits', 'HierDigits_root'], ['edge', 'HierDigits_edges', 'HierDigits_edge'], ['client', 'HierDigits_clients']]);
  // a program whose host the page does not know is drawn partition by partition
  expect(peers(example('federated_learning', 1))).toEqual([]);
});

test('gossip_digits: one class, a wire edge to itself, the view as a binding', () => {
  const graph = graphOf(example('gossip_digits'));
  expect(graph.classes).toEqual(['@self']);
  expect(graph.edges).toHaveLength(1);
  expect(graph.edges[0]).toMatchObject({ name: 'GossipDigits.share', label: 'trained model' });
  expect(graph.edges[0]!.from).toBe(graph.edges[0]!.to);
  expect(graph.partitions[0]!.bindings.map((b) => b.slot).sort()).toEqual(['aggregator', 'data', 'model', 'view']);
});

test('every example lays out with elkjs, wide and narrow, without overlapping boxes', async () => {
  for (const info of Compiler.examples(bb)) {
    for (let m = 0; m < info.modules; m++) {
      const graph = graphOf(example(info.name, m));
      for (const direction of ['RIGHT', 'DOWN'] as const) {
        const expanded = new Set(direction === 'DOWN' ? graph.partitions.map((p) => p.id) : []);
        const layout = await layoutProgram(graph, expanded, measure, { direction, maxBoxWidth: 340 });
        expect(overlaps(layout), `${info.name} ${direction}`).toEqual([]);
        expect(layout.edges).toHaveLength(graph.edges.length);
        for (const box of layout.boxes) {
          expect(box.x + box.width).toBeLessThanOrEqual(layout.width);
          if (direction === 'DOWN') expect(box.width).toBeLessThanOrEqual(340);
        }
        for (const edge of layout.edges) expect(edge.points.length).toBeGreaterThanOrEqual(2);
      }
    }
  }
});

test('narrow layouts are one column as wide as the phone, labels clear of the boxes; every op has an explanation and every term a text', async () => {
  for (const graph of [graphOf(compileFederatedDigits(bb)), graphOf(example('hierarchical_digits'))]) {
    const layout = await layoutProgram(graph, new Set(), measure, { direction: 'DOWN', maxBoxWidth: 366 });
    expect(layout.width, graph.name).toBe(366);
    const ys = layout.boxes.map((b) => b.y);
    expect(new Set(ys).size).toBe(ys.length);
    expect(new Set(layout.boxes.map((b) => b.x)).size).toBe(1);
    for (const e of layout.edges) {
      expect(layout.boxes.filter((b) => meet(b, e.label)).map((b) => b.box.title), e.edge.label).toEqual([]);
      expect(e.label.x + e.label.width).toBeLessThanOrEqual(layout.width);
    }
    // the server's two partitions sit in one frame, one above the other
    const frame = layout.groups.find((g) => g.group.peer === 'server' || g.group.peer === 'root')!;
    expect(layout.boxes.filter((b) => inside(b, frame))).toHaveLength(2);
  }
  const graph = graphOf(compileFederatedDigits(bb));
  for (const p of graph.partitions) for (const op of p.ops) expect(op.explain.length).toBeGreaterThan(10);
  expect(explainOp('ai.bytesandbrains.role.model', 'Fit')).toMatch(/own data/);
  expect(explainOp('', 'Relu')).toMatch(/ONNX operator Relu/);
  expect(wirePort('FedDigits.update')).toBe('update');
  expect(wirePort('custom_name')).toBe('custom_name');
  for (const key of ['partition', 'wireEdge', 'envelope', 'round', 'quorum', 'binding', 'self']) expect(TERMS[key]!.text.length).toBeGreaterThan(40);
});
