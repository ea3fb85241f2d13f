/**
 * Draws the program picture: partitions as boxes in their peer class's colour (ops inside,
 * gates and plumbing folded until the box is opened, the bindings it uses at the bottom),
 * a frame around the partitions one peer runs together, wire edges as arrows labelled with
 * what they carry and how many envelopes took them. Every element a visitor may wonder
 * about explains itself (data-term / data-tip).
 *
 * The picture is drawn at a size its text can be read at: when it is wider than the page
 * it pans (drag, scroll or swipe) and zooms (the buttons, ctrl + wheel, or a pinch), and
 * a tap on a box lists everything in it, in words, below the picture.
 */
import { partitionColour } from '../ui/colours.js';
import { el, formatBytes, svg } from '../ui/dom.js';
import type { EdgeCount } from '../federation/state.js';
import { bindingText, EDGE_LABEL_HEIGHT, GROUP_HEADER, HEADER, layoutProgram, PAD, ROW, type Measure, type PlacedBox, type PlacedEdge, type PlacedGroup, type ProgramLayout } from './layout.js';
import type { PartitionBox, ProgramGraph } from './model.js';

/** A wire id as `bb inspect` prints it: 0x and 16 hex digits. */
const hex = (id: bigint): string => `0x${id.toString(16).padStart(16, '0')}`;

const FONT = '12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace';
const TITLE_FONT = '600 13px system-ui, sans-serif';
/** The smallest scale the picture is drawn at by itself: its 12 px text at 11 px. */
const READABLE = 11 / 12;
const MAX_SCALE = 3;
const ZOOM_STEP = 1.25;

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
  readonly #viewport: HTMLElement;
  readonly #details: HTMLElement;
  readonly #zoomLabel: HTMLElement;
  #graph: ProgramGraph | undefined;
  #layout: ProgramLayout | undefined;
  #picture: SVGSVGElement | undefined;
  readonly #expanded = new Set<string>();
  readonly #counts = new Map<string, SVGTextElement>();
  readonly #measure = canvasMeasure();
  #drawn = 0;
  /** The scale the picture is drawn at; undefined until the visitor zooms (then: fit, or readable). */
  #scale: number | undefined;
  #selected: string | undefined;

  constructor(host: HTMLElement) {
    this.#host = host;
    this.#viewport = el('div', { class: 'program-viewport', tabindex: 0, 'aria-label': 'the program picture: scroll or drag to pan' });
    this.#details = el('div', { class: 'program-details', 'aria-live': 'polite' });
    this.#zoomLabel = el('span', { class: 'zoom-level', 'aria-live': 'polite' });
    const button = (action: string, text: string, label: string): HTMLButtonElement => el('button', { type: 'button', 'data-zoom': action, 'aria-label': label, title: label }, text);
    const tools = el('div', { class: 'program-tools' },
      button('out', '−', 'zoom out'), this.#zoomLabel, button('in', '+', 'zoom in'), button('fit', 'fit', 'fit the picture to the page'),
      el('span', { class: 'hint' }, 'drag or swipe to pan; tap a box for everything in it'));
    host.replaceChildren(tools, this.#viewport, this.#details);
    tools.addEventListener('click', (event) => {
      const action = event.target instanceof Element ? event.target.closest('[data-zoom]')?.getAttribute('data-zoom') : undefined;
      if (action === 'in') this.zoom(this.scale * ZOOM_STEP);
      else if (action === 'out') this.zoom(this.scale / ZOOM_STEP);
      else if (action === 'fit') this.zoom(this.#fitScale());
    });
    this.#viewport.addEventListener('click', (event) => this.#click(event));
    this.#viewport.addEventListener('keydown', (event) => {
      if (event.key === 'Enter' || event.key === ' ') this.#click(event);
    });
    this.#viewport.addEventListener('wheel', (event) => {
      if (!event.ctrlKey) return;
      event.preventDefault();
      this.zoom(this.scale * (event.deltaY < 0 ? ZOOM_STEP : 1 / ZOOM_STEP));
    }, { passive: false });
    this.#panAndPinch();
  }

  get graph(): ProgramGraph | undefined {
    return this.#graph;
  }

  /** The scale the picture is drawn at now. */
  get scale(): number {
    return this.#scale ?? this.#defaultScale();
  }

  async show(graph: ProgramGraph): Promise<void> {
    this.#graph = graph;
    this.#expanded.clear();
    this.#scale = undefined;
    this.#selected = undefined;
    await this.#draw();
  }

  /** Redraws at the host's current width (after a resize). */
  async redraw(): Promise<void> {
    if (this.#graph !== undefined) await this.#draw();
  }

  /** Draws the picture at `scale` (kept between the page's width and three times its size), keeping its middle in view. */
  zoom(scale: number): void {
    if (this.#layout === undefined) return;
    const next = Math.min(MAX_SCALE, Math.max(Math.min(this.#fitScale(), READABLE), scale));
    const v = this.#viewport;
    const middle = { x: (v.scrollLeft + v.clientWidth / 2) / this.scale, y: (v.scrollTop + v.clientHeight / 2) / this.scale };
    this.#scale = next;
    this.#applyScale();
    v.scrollLeft = middle.x * next - v.clientWidth / 2;
    v.scrollTop = middle.y * next - v.clientHeight / 2;
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

  #available(): number {
    return Math.max(280, this.#host.clientWidth);
  }

  #fitScale(): number {
    return this.#layout === undefined ? 1 : Math.min(1, this.#available() / Math.max(1, this.#layout.width));
  }

  /** The whole picture when it fits at a readable size, else its natural size to pan over. */
  #defaultScale(): number {
    const fit = this.#fitScale();
    return fit >= READABLE ? fit : 1;
  }

  #applyScale(): void {
    const layout = this.#layout;
    const picture = this.#picture;
    if (layout === undefined || picture === undefined) return;
    const scale = this.scale;
    picture.setAttribute('width', String(Math.ceil(layout.width * scale)));
    picture.setAttribute('height', String(Math.ceil(layout.height * scale)));
    picture.dataset['scale'] = scale.toFixed(3);
    this.#zoomLabel.textContent = `${Math.round(scale * 100)} %`;
    this.#viewport.classList.toggle('pans', layout.width * scale > this.#viewport.clientWidth + 1);
  }

  /** A tap or click: a fold toggle opens or closes its box; anywhere else in a box shows it below. */
  #click(event: Event): void {
    const target = event.target instanceof Element ? event.target : null;
    const toggle = target?.closest('[data-toggle]');
    if (toggle != null) {
      event.preventDefault();
      const id = toggle.getAttribute('data-toggle')!;
      if (this.#expanded.has(id)) this.#expanded.delete(id);
      else this.#expanded.add(id);
      void this.#draw();
      return;
    }
    const box = target?.closest('[data-partition]')?.getAttribute('data-partition');
    if (box != null && event.type === 'click') this.#select(box);
  }

  #select(id: string): void {
    this.#selected = id;
    for (const g of this.#viewport.querySelectorAll('[data-partition]')) g.classList.toggle('selected', g.getAttribute('data-partition') === id);
    const graph = this.#graph;
    const box = graph?.partitions.find((p) => p.id === id);
    if (graph === undefined || box === undefined) {
      this.#details.replaceChildren();
      return;
    }
    this.#details.replaceChildren(detailsOf(graph, box));
  }

  /** One finger (or a mouse) pans by scrolling the viewport; two fingers pinch to zoom. */
  #panAndPinch(): void {
    const v = this.#viewport;
    const touches = new Map<number, { x: number; y: number }>();
    let pinch: { distance: number; scale: number } | undefined;
    let drag: { x: number; y: number; left: number; top: number; moved: boolean } | undefined;
    const distance = (): number => {
      const [a, b] = [...touches.values()];
      return a === undefined || b === undefined ? 0 : Math.hypot(a.x - b.x, a.y - b.y);
    };
    v.addEventListener('pointerdown', (event) => {
      if (event.pointerType === 'touch') {
        touches.set(event.pointerId, { x: event.clientX, y: event.clientY });
        if (touches.size === 2) pinch = { distance: distance(), scale: this.scale };
      } else if (event.button === 0) {
        drag = { x: event.clientX, y: event.clientY, left: v.scrollLeft, top: v.scrollTop, moved: false };
      }
    });
    v.addEventListener('pointermove', (event) => {
      if (touches.has(event.pointerId)) {
        touches.set(event.pointerId, { x: event.clientX, y: event.clientY });
        if (pinch !== undefined && touches.size === 2 && pinch.distance > 0) this.zoom(pinch.scale * (distance() / pinch.distance));
      } else if (drag !== undefined) {
        const dx = event.clientX - drag.x;
        const dy = event.clientY - drag.y;
        if (!drag.moved && Math.hypot(dx, dy) < 4) return;
        drag.moved = true;
        v.scrollLeft = drag.left - dx;
        v.scrollTop = drag.top - dy;
      }
    });
    const end = (event: PointerEvent): void => {
      touches.delete(event.pointerId);
      if (touches.size < 2) pinch = undefined;
      if (drag?.moved) {
        // a drag is not a click on the box it ended over
        v.addEventListener('click', (click) => click.stopPropagation(), { capture: true, once: true });
      }
      drag = undefined;
    };
    v.addEventListener('pointerup', end);
    v.addEventListener('pointercancel', end);
  }

  async #draw(): Promise<void> {
    const graph = this.#graph!;
    const drawing = ++this.#drawn;
    const available = this.#available();
    const narrow = available < 640;
    const layout = await layoutProgram(graph, this.#expanded, this.#measure, { direction: narrow ? 'DOWN' : 'RIGHT', maxBoxWidth: narrow ? available : 360 });
    if (drawing !== this.#drawn) return; // a newer drawing started meanwhile
    this.#layout = layout;
    this.#counts.clear();
    const picture = svg('svg', {
      class: 'program-picture',
      viewBox: `0 0 ${Math.ceil(layout.width)} ${Math.ceil(layout.height)}`,
      role: 'img',
      'aria-label': `${graph.name}: ${graph.partitions.length} partitions, ${graph.edges.length} wire edges`,
    });
    picture.append(
      // the arrowhead keeps its size while the edge's line pulses wider
      svg('defs', {}, svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerUnits: 'userSpaceOnUse', markerWidth: 13, markerHeight: 13, orient: 'auto-start-reverse' }, svg('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#475569' }))),
    );
    for (const group of layout.groups) picture.append(this.#group(graph, group));
    for (const box of layout.boxes) picture.append(this.#box(graph, box));
    for (const edge of layout.edges) picture.append(this.#edge(edge));
    this.#picture = picture;
    this.#viewport.replaceChildren(picture);
    this.#applyScale();
    if (this.#selected !== undefined) this.#select(this.#selected);
    else this.#details.replaceChildren(el('p', { class: 'hint' }, 'Tap a box (or focus it and press Enter) to list everything in it here.'));
  }

  #group(graph: ProgramGraph, placed: PlacedGroup): SVGGElement {
    const titles = placed.group.partitions.map((id) => graph.partitions.find((p) => p.id === id)?.title ?? id);
    const colour = partitionColour(placed.group.peer, graph.partitions.find((p) => p.id === placed.group.partitions[0])?.peerClass ?? '', graph.classes);
    const who = peerWords(placed.group.peer);
    const name = `${who.one} runs ${titles.length === 2 ? 'both' : `all ${titles.length}`}`;
    return svg('g', { class: 'peer-group', 'data-peer-group': placed.group.peer, 'data-partitions': titles.join(' '), transform: `translate(${placed.x},${placed.y})` },
      svg('rect', { width: placed.width, height: placed.height, rx: 12, fill: 'none', stroke: colour, 'stroke-width': 1.5, 'stroke-dasharray': '6 4' }),
      svg('text', { class: 'group-title', x: 10, y: GROUP_HEADER - 8, fill: colour, 'data-tip-title': name, 'data-tip': `${who.one.replace(/^./, (c) => c.toUpperCase())} runs ${titles.join(' and ')} on one node: one peer, one engine, both partitions.`, tabindex: 0 },
        name),
    );
  }

  #box(graph: ProgramGraph, placed: PlacedBox): SVGGElement {
    const { box, rows } = placed;
    const colour = partitionColour(graph.peers.find((g) => g.partitions.includes(box.id))?.peer, box.peerClass, graph.classes);
    const g = svg('g', { class: 'partition', 'data-partition': box.id, 'data-class': box.peerClass, 'data-title': box.title, transform: `translate(${placed.x},${placed.y})` });
    g.append(
      svg('rect', { class: 'box', width: placed.width, height: placed.height, rx: 8, fill: `${colour}14`, stroke: colour, 'stroke-width': 2 }),
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
        g.append(
          svg('text', { class: 'binding', x: PAD, y, 'data-binding': b.slot, 'data-tip-title': `${b.role} slot "${b.slot}" = ${b.type}`, 'data-tip': `${whyBound(b)}. Config: ${b.config || '(none)'}`, tabindex: 0 }, bindingText(b)),
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
      svg('text', { class: 'edge-label', x: label.x + 4, y: label.y + 14, 'data-tip-title': `wire “${edge.name}”`, 'data-tip': edgeTip(edge), tabindex: 0 }, edge.label),
      count,
    );
  }
}

/** How the page speaks of a kind of peer: "the server" (one of it), "each client" (many). */
function peerWords(peer: string): { one: string } {
  if (peer === 'peer') return { one: 'each peer' };
  return { one: peer === 'server' || peer === 'root' ? `the ${peer}` : `each ${peer}` };
}

function whyBound(b: PartitionBox['bindings'][number]): string {
  return b.reach === 'op' ? 'its ops call this slot' : b.reach === 'dependency' ? `a declared dependency of ${b.from}` : `named in ${b.from}'s config`;
}

function edgeTip(edge: ProgramGraph['edges'][number]): string {
  return `Carries ${edge.carries}, from a wire.Send to the wire.Recv “${edge.site}”. Each envelope of this edge names the wire by its id, ${hex(edge.wireId)}, and fills every Recv listening to it.`;
}

/** Everything in a partition, in words: who runs it, its ops, its bindings and its wire edges. */
function detailsOf(graph: ProgramGraph, box: PartitionBox): HTMLElement {
  const title = (id: string): string => graph.partitions.find((p) => p.id === id)?.title ?? id;
  const group = graph.peers.find((g) => g.partitions.includes(box.id));
  const others = group?.partitions.filter((id) => id !== box.id).map(title) ?? [];
  const runs = group === undefined
    ? `Runs on every peer of class ${box.peerClass}.`
    : `${peerWords(group.peer).one.replace(/^./, (c) => c.toUpperCase())} runs it (peer class ${box.peerClass})${others.length > 0 ? `, together with ${others.join(' and ')}` : ''}.`;
  const wires = [
    ...graph.edges.filter((e) => e.to === box.id).map((e) => `receives “${e.label}” (${e.name}) from ${title(e.from)}`),
    ...graph.edges.filter((e) => e.from === box.id).map((e) => `sends “${e.label}” (${e.name}) to ${title(e.to)}`),
  ];
  return el('div', { 'data-details': box.id },
    el('h3', {}, box.title),
    el('p', {}, runs),
    el('ul', { class: 'details-ops' }, ...box.ops.map((op) => el('li', {}, el('code', {}, op.label), ` — ${op.explain}`))),
    box.bindings.length === 0 ? undefined : el('p', {}, 'Uses: ', box.bindings.map((b) => `${bindingText(b)} (${whyBound(b)})`).join('; '), '.'),
    wires.length === 0 ? undefined : el('p', {}, `${wires.join('; ')}.`.replace(/^./, (c) => c.toUpperCase())),
  );
}
