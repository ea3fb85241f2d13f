/**
 * Draws the program picture: partitions as boxes in their peer class's colour (ops inside,
 * gates and plumbing folded until the box is opened, the bindings it uses at the bottom),
 * wire edges as arrows labelled with what they carry and how many envelopes took them.
 * Every element a visitor may wonder about explains itself (data-term / data-tip).
 */
import { classColour, formatBytes, svg } from '../ui/dom.js';
import type { EdgeCount } from '../federation/state.js';
import { bindingText, EDGE_LABEL_HEIGHT, HEADER, layoutProgram, PAD, ROW, type Measure, type PlacedBox, type PlacedEdge } from './layout.js';
import type { ProgramGraph } from './model.js';

/** A wire id as `bb inspect` prints it: 0x and 16 hex digits. */
const hex = (id: bigint): string => `0x${id.toString(16).padStart(16, '0')}`;

const FONT = '12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace';
const TITLE_FONT = '600 13px system-ui, sans-serif';

function canvasMeasure(): Measure {
  const context = document.createElement('canvas').getContext('2d');
  return (text, kind) => {
    if (context === null) return text.length * 7.5;
    context.font = kind === 'title' ? TITLE_FONT : FONT;
    return context.measureText(text).width;
  };
}

export class ProgramView {
  readonly #host: HTMLElement;
  #graph: ProgramGraph | undefined;
  readonly #expanded = new Set<string>();
  readonly #counts = new Map<string, SVGTextElement>();
  readonly #measure = canvasMeasure();
  #drawn = 0;

  constructor(host: HTMLElement) {
    this.#host = host;
    host.addEventListener('click', (event) => this.#toggle(event));
    host.addEventListener('keydown', (event) => {
      if (event.key === 'Enter' || event.key === ' ') this.#toggle(event);
    });
  }

  get graph(): ProgramGraph | undefined {
    return this.#graph;
  }

  async show(graph: ProgramGraph): Promise<void> {
    this.#graph = graph;
    this.#expanded.clear();
    await this.#draw();
  }

  /** Redraws at the host's current width (after a resize). */
  async redraw(): Promise<void> {
    if (this.#graph !== undefined) await this.#draw();
  }

  /** Writes each wire edge's envelope count and bytes on its arrow; pulses the ones that grew. */
  updateCounts(counts: ReadonlyMap<string, EdgeCount>): void {
    for (const [id, text] of this.#counts) {
      const count = counts.get(id);
      const line = count === undefined ? 'no envelopes yet' : `${count.envelopes} envelopes · ${formatBytes(count.bytes)}`;
      if (text.textContent === line) continue;
      text.textContent = line;
      const group = text.closest('.wire-edge');
      if (group !== null && count !== undefined) {
        // restart the pulse: off now, on at the next frame
        group.classList.remove('pulse');
        requestAnimationFrame(() => group.classList.add('pulse'));
      }
    }
  }

  #toggle(event: Event): void {
    const target = event.target instanceof Element ? event.target.closest('[data-toggle]') : null;
    if (target === null) return;
    event.preventDefault();
    const id = target.getAttribute('data-toggle')!;
    if (this.#expanded.has(id)) this.#expanded.delete(id);
    else this.#expanded.add(id);
    void this.#draw();
  }

  async #draw(): Promise<void> {
    const graph = this.#graph!;
    const drawing = ++this.#drawn;
    const available = Math.max(280, this.#host.clientWidth);
    const narrow = available < 640;
    const layout = await layoutProgram(graph, this.#expanded, this.#measure, { direction: narrow ? 'DOWN' : 'RIGHT', maxBoxWidth: narrow ? available - 28 : 360 });
    if (drawing !== this.#drawn) return; // a newer drawing started meanwhile
    this.#counts.clear();
    const picture = svg('svg', {
      class: 'program-picture',
      viewBox: `0 0 ${Math.ceil(layout.width)} ${Math.ceil(layout.height)}`,
      width: Math.ceil(Math.min(layout.width, available)),
      role: 'img',
      'aria-label': `${graph.name}: ${graph.partitions.length} partitions, ${graph.edges.length} wire edges`,
    });
    picture.append(
      svg('defs', {}, svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' }, svg('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#475569' }))),
    );
    for (const box of layout.boxes) picture.append(this.#box(box));
    for (const edge of layout.edges) picture.append(this.#edge(edge));
    this.#host.replaceChildren(picture);
  }

  #box(placed: PlacedBox): SVGGElement {
    const { box, rows } = placed;
    const colour = classColour(box.classIndex);
    const g = svg('g', { class: 'partition', 'data-partition': box.id, 'data-class': box.peerClass, 'data-title': box.title, transform: `translate(${placed.x},${placed.y})` });
    g.append(
      svg('rect', { width: placed.width, height: placed.height, rx: 8, fill: `${colour}14`, stroke: colour, 'stroke-width': 2 }),
      svg('rect', { width: placed.width, height: 6, rx: 3, fill: colour }),
      svg('text', { class: 'box-title', x: PAD, y: 22, 'data-term': 'partition' }, box.title),
      svg('text', { class: 'box-class', x: PAD, y: 36, fill: colour, 'data-term': box.peerClass === '@self' ? 'self' : 'peerClass' }, `runs on: ${box.peerClass}`),
    );
    let y = HEADER + ROW - 4;
    for (const op of rows.ops) {
      g.append(svg('text', { class: `op op-${op.kind}`, x: PAD, y, 'data-op': op.op, 'data-tip': op.explain, 'data-tip-title': op.op, tabindex: 0 }, op.label));
      y += ROW;
    }
    const foldable = box.ops.some((op) => op.kind === 'gate' || op.kind === 'plumbing');
    if (foldable) {
      const text = placed.expanded ? '▾ fold gates and plumbing' : `▸ ${rows.folded} gates and plumbing folded`;
      g.append(svg('text', { class: 'toggle', x: PAD, y, 'data-toggle': box.id, role: 'button', tabindex: 0, 'aria-expanded': placed.expanded ? 'true' : 'false' }, text));
      y += ROW;
    }
    if (rows.bindings.length > 0) {
      g.append(svg('line', { x1: PAD, x2: placed.width - PAD, y1: y - ROW + 8, y2: y - ROW + 8, stroke: `${colour}55` }));
      g.append(svg('text', { class: 'bindings-title', x: PAD, y: y + 2, 'data-term': 'binding' }, 'uses'));
      y += ROW;
      for (const b of rows.bindings) {
        const why = b.reach === 'op' ? 'its ops call this slot' : b.reach === 'dependency' ? `a declared dependency of ${b.from}` : `named in ${b.from}'s config`;
        g.append(
          svg('text', { class: 'binding', x: PAD, y, 'data-binding': b.slot, 'data-tip-title': `${b.role} slot "${b.slot}" = ${b.type}`, 'data-tip': `${why}. Config: ${b.config || '(none)'}`, tabindex: 0 }, bindingText(b)),
        );
        y += ROW;
      }
    }
    return g;
  }

  #edge(placed: PlacedEdge): SVGGElement {
    const { edge, points, label } = placed;
    const d = points.map((p, i) => `${i === 0 ? 'M' : 'L'}${p.x},${p.y}`).join(' ');
    const count = svg('text', { class: 'edge-count', x: label.x + 4, y: label.y + EDGE_LABEL_HEIGHT - 6 }, 'no envelopes yet');
    this.#counts.set(edge.id, count);
    return svg(
      'g',
      { class: 'wire-edge', 'data-edge': edge.id, 'data-from': edge.from, 'data-to': edge.to, 'data-label': edge.label },
      svg('path', { d, fill: 'none', stroke: '#475569', 'stroke-width': 2, 'marker-end': 'url(#arrow)' }),
      svg('rect', { x: label.x, y: label.y, width: label.width, height: label.height, rx: 4, fill: 'white', opacity: 0.9 }),
      svg('text', { class: 'edge-label', x: label.x + 4, y: label.y + 14, 'data-tip-title': `wire “${edge.name}”`, 'data-tip': `Carries ${edge.carries}, from a wire.Send to the wire.Recv “${edge.site}”. Each envelope of this edge names the wire by its id, ${hex(edge.wireId)}, and fills every Recv listening to it.`, tabindex: 0 }, edge.label),
      count,
    );
  }
}
