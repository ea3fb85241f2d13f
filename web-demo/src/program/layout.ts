/**
 * Places the program picture. On a wide screen with elkjs (ELK's layered algorithm, left to
 * right): one box per partition, sized for the rows it shows, the boxes of one peer inside
 * its frame, wire edges routed between them with room for their labels. On a narrow screen
 * as one column as wide as the screen: the peers one under the other (a peer's partitions
 * stacked in its frame), every wire edge in a lane of its own down the right-hand side,
 * leaving its sender's box and entering its receiver's, labelled in the gap it passes.
 */
import ELK from 'elkjs/lib/elk.bundled.js';
import type { ElkExtendedEdge, ElkNode } from 'elkjs/lib/elk-api.js';

import { FOLDED_KINDS, type OpItem, type PartitionBox, type PeerGroup, type ProgramGraph, type WireArrow } from './model.js';

const MARGIN = 12;
/** Between a peer's frame and its boxes. */
const INSET = 10;
/** Between the lanes the edges run down in, and before the first. */
const LANE = 12;
/** Between two boxes of one peer; between peers, at least this (more where labels sit). */
const STACK_GAP = 14;
const PEER_GAP = 24;

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

/** A peer that runs several partitions: a frame around their boxes. */
export interface PlacedGroup {
  readonly group: PeerGroup;
  readonly x: number;
  readonly y: number;
  readonly width: number;
  readonly height: number;
}

/** Room above a peer's boxes for its name. */
export const GROUP_HEADER = 26;

export interface ProgramLayout {
  readonly width: number;
  readonly height: number;
  readonly groups: readonly PlacedGroup[];
  readonly boxes: readonly PlacedBox[];
  readonly edges: readonly PlacedEdge[];
}

const elk = new ELK();

/** Label lines of an edge: its name, then its live count. */
export const EDGE_LABEL_HEIGHT = 34;

interface SizedBox {
  readonly box: PartitionBox;
  readonly rows: BoxRows;
  readonly expanded: boolean;
  /** What its text needs. */
  readonly width: number;
  readonly height: number;
}

/**
 * `maxBoxWidth`: the widest a box is drawn (RIGHT), or the width of the column the boxes
 * and the edges' lanes share (DOWN).
 */
export async function layoutProgram(
  graph: ProgramGraph,
  expanded: ReadonlySet<string>,
  measure: Measure,
  options: { direction: 'RIGHT' | 'DOWN'; maxBoxWidth: number },
): Promise<ProgramLayout> {
  const boxes: SizedBox[] = graph.partitions.map((box) => {
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
    const width = Math.ceil(Math.max(140, ...texts) + 2 * PAD);
    return { box, rows, expanded: open, width: options.direction === 'RIGHT' ? Math.min(options.maxBoxWidth, width) : width, height: boxHeight(rows, hasFoldable) };
  });
  const labelWidth = (e: WireArrow): number => Math.max(measure(e.label, 'label'), measure('0000 envelopes · 000.0 KB', 'label')) + 8;
  // a peer that runs several partitions holds their boxes; the rest stand alone
  const groups = graph.peers.filter((g) => g.partitions.length > 1);
  if (options.direction === 'DOWN') return columnLayout(graph, boxes, groups, labelWidth, options.maxBoxWidth);
  const grouped = new Set(groups.flatMap((g) => g.partitions));
  const node = (b: (typeof boxes)[number]): ElkNode => ({ id: b.box.id, width: b.width, height: b.height });
  const children: ElkNode[] = [
    ...groups.map((g, i): ElkNode => ({
      id: `peer#${i}`,
      layoutOptions: { 'elk.padding': `[top=${GROUP_HEADER + 6},left=10,bottom=10,right=10]`, 'elk.spacing.nodeNode': '18' },
      children: boxes.filter((b) => g.partitions.includes(b.box.id)).map(node),
    })),
    ...boxes.filter((b) => !grouped.has(b.box.id)).map(node),
  ];
  const edges: ElkExtendedEdge[] = graph.edges.map((e) => ({
    id: e.id,
    sources: [e.from],
    targets: [e.to],
    labels: [{ id: `${e.id}#label`, text: e.label, width: labelWidth(e), height: EDGE_LABEL_HEIGHT }],
  }));
  const graphIn: ElkNode = {
    id: 'program',
    layoutOptions: {
      'elk.algorithm': 'layered',
      'elk.direction': 'RIGHT',
      'elk.spacing.nodeNode': '28',
      'elk.layered.spacing.nodeNodeBetweenLayers': '56',
      'elk.spacing.edgeLabel': '4',
      'elk.edgeLabels.inline': 'false',
      'elk.layered.edgeLabels.sideSelection': 'ALWAYS_UP',
      'elk.edgeRouting': 'ORTHOGONAL',
      'elk.padding': '[top=12,left=12,bottom=12,right=12]',
      // edges may join boxes inside different peers; every position is the picture's own
      'elk.hierarchyHandling': 'INCLUDE_CHILDREN',
      // the program's own order (the peer that starts it first) decides which way a loop of
      // wire edges runs: the global model goes out to the clients, their updates come back
      'elk.layered.cycleBreaking.strategy': 'MODEL_ORDER',
      'elk.layered.considerModelOrder.strategy': 'NODES_AND_EDGES',
      'elk.json.shapeCoords': 'ROOT',
      'elk.json.edgeCoords': 'ROOT',
    },
    children,
    edges,
  };
  const root = await elk.layout(graphIn);
  const placed = new Map((root.children ?? []).flatMap((n) => [[n.id, n] as const, ...(n.children ?? []).map((c) => [c.id, c] as const)]));
  const placedGroups = groups.map((group, i) => {
    const n = placed.get(`peer#${i}`);
    return { group, x: n?.x ?? 0, y: n?.y ?? 0, width: n?.width ?? 0, height: n?.height ?? 0 };
  });
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
  return { width: root.width ?? 0, height: root.height ?? 0, groups: placedGroups, boxes: placedBoxes, edges: placedEdges };
}

/** The narrow picture: one column of peers, each wire edge in its own lane on the right. */
function columnLayout(graph: ProgramGraph, boxes: readonly SizedBox[], groups: readonly PeerGroup[], labelWidth: (e: WireArrow) => number, width: number): ProgramLayout {
  // the peers in the order the program's values flow: from the peer that starts it along its
  // wire edges (a peer where its first partition comes), each with its boxes
  const order: SizedBox[] = [];
  const visit = (b: SizedBox | undefined): void => {
    if (b === undefined || order.includes(b)) return;
    const group = groups.find((g) => g.partitions.includes(b.box.id));
    const members = group === undefined ? [b] : boxes.filter((x) => group.partitions.includes(x.box.id));
    order.push(...members.filter((m) => !order.includes(m)));
    for (const m of members) for (const e of graph.edges.filter((e) => e.from === m.box.id)) visit(boxes.find((x) => x.box.id === e.to));
  };
  visit(boxes.find((b) => b.box.peerClass === '@self'));
  for (const b of boxes) visit(b);
  const items: { group?: PeerGroup; boxes: SizedBox[] }[] = [];
  for (const b of order) {
    const group = groups.find((g) => g.partitions.includes(b.box.id));
    const item = group === undefined ? undefined : items.find((i) => i.group === group);
    if (item !== undefined) item.boxes.push(b);
    else items.push({ ...(group === undefined ? {} : { group }), boxes: [b] });
  }
  const itemOf = (id: string): number => items.findIndex((i) => i.boxes.some((b) => b.box.id === id));
  const lanes = graph.edges.length;
  const laneSpace = LANE * (lanes + 1);
  const boxWidth = Math.max(...boxes.map((b) => b.width), width - 2 * MARGIN - laneSpace - 2 * INSET);
  const total = boxWidth + 2 * INSET + laneSpace + 2 * MARGIN;
  // an edge's label sits in the gap below its sender's peer (going down) or above it (going up)
  const gapOf = (e: WireArrow): number => {
    const from = itemOf(e.from);
    const to = itemOf(e.to);
    return to < from ? from - 1 : Math.min(from, items.length - 1);
  };
  const labelsIn = (gap: number): WireArrow[] => graph.edges.filter((e) => gapOf(e) === gap);
  const placedBoxes: PlacedBox[] = [];
  const placedGroups: PlacedGroup[] = [];
  const labelAt = new Map<string, { x: number; y: number; width: number; height: number }>();
  let y = MARGIN;
  items.forEach((item, i) => {
    const framed = item.group !== undefined;
    const top = y;
    if (framed) y += GROUP_HEADER + 6;
    for (const [k, b] of item.boxes.entries()) {
      if (k > 0) y += STACK_GAP;
      placedBoxes.push({ box: b.box, rows: b.rows, expanded: b.expanded, x: MARGIN + INSET, y, width: boxWidth, height: b.height });
      y += b.height;
    }
    if (framed) {
      y += INSET;
      placedGroups.push({ group: item.group!, x: MARGIN, y: top, width: boxWidth + 2 * INSET, height: y - top });
    }
    const labels = labelsIn(i);
    if (labels.length === 0 && i < items.length - 1) y += PEER_GAP;
    if (labels.length > 0) y += 10;
    for (const e of labels) {
      const w = labelWidth(e);
      labelAt.set(e.id, { x: Math.max(MARGIN, total - MARGIN - laneSpace - w), y, width: w, height: EDGE_LABEL_HEIGHT });
      y += EDGE_LABEL_HEIGHT + 6;
    }
    if (labels.length > 0 && i < items.length - 1) y += 6;
  });
  const boxOf = (id: string): PlacedBox => placedBoxes.find((b) => b.box.id === id)!;
  const right = MARGIN + INSET + boxWidth;
  const placedEdges = graph.edges.map((edge, k): PlacedEdge => {
    const lane = right + INSET + LANE * (k + 1);
    const from = boxOf(edge.from);
    const to = boxOf(edge.to);
    const out = from.y + 14 + 8 * k;
    const into = to.y + 30 + 8 * k;
    return {
      edge,
      points: [{ x: from.x + from.width, y: out }, { x: lane, y: out }, { x: lane, y: into }, { x: to.x + to.width, y: into }],
      label: labelAt.get(edge.id)!,
    };
  });
  return { width: total, height: y + MARGIN, groups: placedGroups, boxes: placedBoxes, edges: placedEdges };
}
