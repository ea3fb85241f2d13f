/**
 * Places the program picture with elkjs (ELK's layered algorithm): one box per partition,
 * sized for the rows it shows, wire edges routed between them with room for their labels.
 * Left to right on a wide screen, top to bottom on a narrow one.
 */
import ELK from 'elkjs/lib/elk.bundled.js';
import type { ElkExtendedEdge, ElkNode } from 'elkjs/lib/elk-api.js';

import { FOLDED_KINDS, type OpItem, type PartitionBox, type ProgramGraph, type WireArrow } from './model.js';

/** Measures a line of text in pixels at the picture's font (the browser measures it; tests estimate). */
export type Measure = (text: string, kind: 'title' | 'row' | 'label') => number;

export const ROW = 18;
export const PAD = 10;
export const HEADER = 40;
const GAP = 8;

/** The rows a partition box shows: its ops (all of them when expanded), then its bindings. */
export interface BoxRows {
  readonly ops: readonly OpItem[];
  /** Ops folded away (gates and plumbing) while collapsed. */
  readonly folded: number;
  readonly bindings: PartitionBox['bindings'];
}

export function rowsOf(box: PartitionBox, expanded: boolean): BoxRows {
  const shown = expanded ? box.ops : box.ops.filter((op) => !FOLDED_KINDS.has(op.kind));
  const folded = box.ops.filter((op) => FOLDED_KINDS.has(op.kind)).reduce((n, op) => n + op.count, 0);
  return { ops: shown, folded: expanded ? 0 : folded, bindings: box.bindings };
}

export function bindingText(b: PartitionBox['bindings'][number]): string {
  return `${b.slot} = ${b.type}${b.reach === 'op' ? '' : ` (via ${b.from})`}`;
}

/** Rows of the box: ops, the fold toggle (when anything folds), a gap, the bindings. */
export function boxHeight(rows: BoxRows, hasFoldable: boolean): number {
  const toggle = hasFoldable ? 1 : 0;
  const bindings = rows.bindings.length > 0 ? rows.bindings.length + 1 : 0;
  return HEADER + (rows.ops.length + toggle + bindings) * ROW + GAP + PAD;
}

export interface PlacedBox {
  readonly box: PartitionBox;
  readonly rows: BoxRows;
  readonly expanded: boolean;
  readonly x: number;
  readonly y: number;
  readonly width: number;
  readonly height: number;
}

export interface PlacedEdge {
  readonly edge: WireArrow;
  /** The route: start, bend points, end. */
  readonly points: readonly { x: number; y: number }[];
  readonly label: { x: number; y: number; width: number; height: number };
}

export interface ProgramLayout {
  readonly width: number;
  readonly height: number;
  readonly boxes: readonly PlacedBox[];
  readonly edges: readonly PlacedEdge[];
}

const elk = new ELK();

/** Label lines of an edge: its name, then its live count. */
export const EDGE_LABEL_HEIGHT = 34;

export async function layoutProgram(
  graph: ProgramGraph,
  expanded: ReadonlySet<string>,
  measure: Measure,
  options: { direction: 'RIGHT' | 'DOWN'; maxBoxWidth: number },
): Promise<ProgramLayout> {
  const boxes = graph.partitions.map((box) => {
    const open = expanded.has(box.id);
    const rows = rowsOf(box, open);
    const hasFoldable = box.ops.some((op) => FOLDED_KINDS.has(op.kind));
    const texts = [
      measure(box.title, 'title'),
      measure(`runs on: ${box.peerClass}`, 'row'),
      ...rows.ops.map((op) => measure(op.label, 'row')),
      ...rows.bindings.map((b) => measure(bindingText(b), 'row')),
      hasFoldable ? measure(`▸ ${rows.folded} gates and plumbing folded`, 'row') : 0,
    ];
    const width = Math.min(options.maxBoxWidth, Math.ceil(Math.max(140, ...texts) + 2 * PAD));
    return { box, rows, expanded: open, width, height: boxHeight(rows, hasFoldable) };
  });
  const children: ElkNode[] = boxes.map((b) => ({ id: b.box.id, width: b.width, height: b.height }));
  const edges: ElkExtendedEdge[] = graph.edges.map((e) => ({
    id: e.id,
    sources: [e.from],
    targets: [e.to],
    labels: [{ id: `${e.id}#label`, text: e.label, width: Math.max(measure(e.label, 'label'), measure('0000 envelopes · 000.0 KB', 'label')) + 8, height: EDGE_LABEL_HEIGHT }],
  }));
  const graphIn: ElkNode = {
    id: 'program',
    layoutOptions: {
      'elk.algorithm': 'layered',
      'elk.direction': options.direction,
      'elk.spacing.nodeNode': '28',
      'elk.layered.spacing.nodeNodeBetweenLayers': '56',
      'elk.spacing.edgeLabel': '4',
      'elk.edgeLabels.inline': 'false',
      'elk.layered.edgeLabels.sideSelection': 'ALWAYS_UP',
      'elk.edgeRouting': 'ORTHOGONAL',
      'elk.padding': '[top=12,left=12,bottom=12,right=12]',
    },
    children,
    edges,
  };
  const root = await elk.layout(graphIn);
  const placed = new Map((root.children ?? []).map((n) => [n.id, n]));
  const placedBoxes = boxes.map((b) => {
    const n = placed.get(b.box.id);
    return { ...b, x: n?.x ?? 0, y: n?.y ?? 0 };
  });
  const placedEdges = (root.edges ?? []).flatMap((e): PlacedEdge[] => {
    const edge = graph.edges.find((g) => g.id === e.id);
    const section = e.sections?.[0];
    const label = e.labels?.[0];
    if (edge === undefined || section === undefined) return [];
    return [
      {
        edge,
        points: [section.startPoint, ...(section.bendPoints ?? []), section.endPoint],
        label: { x: label?.x ?? section.startPoint.x, y: label?.y ?? section.startPoint.y, width: label?.width ?? 0, height: label?.height ?? 0 },
      },
    ];
  });
  return { width: root.width ?? 0, height: root.height ?? 0, boxes: placedBoxes, edges: placedEdges };
}
