/**
 * Draws the federation live: every peer as a node in its class's colour with its state;
 * every envelope as a dot travelling from its sender to its receiver, from the moment the
 * sender's engine produced it to the moment the receiver's engine took it (or it was
 * lost); counts and bytes per peer; the rounds and the updates that closed them. Peers
 * running in this page can be paused, killed and revived from their cards.
 */
import { peerColour } from '../ui/colours.js';
import { el, formatBytes, svg } from '../ui/dom.js';
import type { ProgramGraph } from '../program/model.js';
import type { FederationState, Flight, Peer } from './state.js';
import { SecurePanel } from './secure-view.js';
import { roundLine, rulesLine } from './words.js';

/** Shortest time a dot is on screen, so that envelopes that arrive at once are still seen. */
const MIN_FLIGHT_MS = 350;
/** How long a dot takes when its end is not known yet. */
const EXPECTED_MS = 600;
const FADE_MS = 250;
const WIDTH = 360;
const HEIGHT = 300;

export type PeerAction = 'pause' | 'resume' | 'kill';

export interface PeerControls {
  /** Which actions apply to this peer now (none for peers not in this page). */
  actions(peer: Peer): readonly PeerAction[];
  act(peer: Peer, action: PeerAction): void;
}

interface Point {
  x: number;
  y: number;
}

const STATE_WORDS: Readonly<Record<Peer['state'], string>> = {
  starting: 'starting',
  connecting: 'connecting',
  waiting: 'waiting',
  training: 'training',
  sending: 'sending',
  aggregating: 'aggregating',
  paused: 'paused',
  away: 'away (seat kept)',
  gone: 'gone',
};

export class FederationView {
  readonly #state: FederationState;
  readonly #picture: SVGSVGElement;
  readonly #links: SVGGElement;
  readonly #nodes: SVGGElement;
  readonly #dots: SVGGElement;
  readonly #cards: HTMLElement;
  readonly #summary: HTMLElement;
  readonly #rounds: HTMLElement;
  readonly #secure = new SecurePanel();
  readonly #empty: SVGTextElement;
  #graph: ProgramGraph | undefined;
  #controls: PeerControls | undefined;
  readonly #positions = new Map<string, Point>();
  readonly #dotOf = new Map<number, SVGCircleElement>();
  readonly #nodeOf = new Map<string, { group: SVGGElement; circle: SVGCircleElement; label: SVGTextElement; count: SVGTextElement }>();
  readonly #cardOf = new Map<string, { root: HTMLElement; label: HTMLElement; place: HTMLElement; state: HTMLElement; counts: HTMLElement; buttons: HTMLElement; actions: string }>();
  #frame = 0;
  #layoutKey = '';
  /** Dots drawn so far: the test reads it to see animations advance. */
  animated = 0;

  constructor(host: HTMLElement, state: FederationState) {
    this.#state = state;
    this.#picture = svg('svg', { class: 'federation-picture', viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-label': 'the peers and the envelopes between them' });
    this.#links = svg('g', { class: 'links' });
    this.#nodes = svg('g', { class: 'peers' });
    this.#dots = svg('g', { class: 'envelopes' });
    this.#empty = svg('text', { class: 'empty', x: WIDTH / 2, y: HEIGHT / 2, 'text-anchor': 'middle' }, 'Press Start, join or watch: the peers appear here');
    this.#picture.append(this.#links, this.#dots, this.#nodes, this.#empty);
    this.#summary = el('p', { class: 'federation-summary', 'aria-live': 'polite' });
    const legend = el(
      'p',
      { class: 'federation-legend' },
      el('span', { 'data-term': 'wireEdge' }, el('i', { class: 'dot data' }), 'a value on a wire edge, in its sender\'s colour'),
      el('span', { 'data-term': 'protocol' }, el('i', { class: 'dot protocol' }), 'a protocol message'),
      el('span', { 'data-term': 'envelope' }, el('i', { class: 'dot lost' }), 'lost'),
    );
    this.#rounds = el('ul', { class: 'round-strip' });
    this.#cards = el('div', { class: 'peer-cards' });
    host.replaceChildren(this.#picture, legend, this.#summary, this.#rounds, this.#secure.root, this.#cards);
    state.subscribe(() => this.#render());
    this.#cards.addEventListener('click', (event) => {
      const button = event.target instanceof Element ? event.target.closest('button[data-action]') : null;
      if (button === null || this.#controls === undefined) return;
      const peer = this.#state.peers.get(button.getAttribute('data-peer')!);
      if (peer !== undefined) this.#controls.act(peer, button.getAttribute('data-action') as PeerAction);
    });
  }

  /** The program the peers run (for colours and edge names), and who may control them. */
  setContext(graph: ProgramGraph | undefined, controls: PeerControls | undefined): void {
    this.#graph = graph;
    this.#controls = controls;
    this.#layoutKey = '';
    for (const card of this.#cardOf.values()) card.actions = '\u0000'; // redraw the buttons
    this.#render();
  }

  #colour(peer: { readonly peerClass: string; readonly index?: number | undefined }): string {
    return peerColour(peer, this.#graph?.classes);
  }

  /** What a peer runs: its class's partitions, and those its host installs with them. */
  #runs(peer: Peer): string {
    const graph = this.#graph;
    if (graph === undefined) return `the ${peer.peerClass} partition`;
    const own = graph.partitions.filter((p) => p.peerClass === peer.peerClass).map((p) => p.id);
    const group = graph.peers.find((g) => own.some((id) => g.partitions.includes(id)));
    const titles = (group?.partitions ?? own).map((id) => graph.partitions.find((p) => p.id === id)?.title ?? id);
    return titles.length === 1 ? `the ${titles[0]} partition` : `the partitions ${titles.join(' and ')}, on one node`;
  }

  #render(): void {
    this.#layout();
    this.#drawNodes();
    this.#drawCards();
    this.#drawSummary();
    if (this.#frame === 0) this.#frame = requestAnimationFrame(() => this.#animate());
  }

  /** The server (the one peer of class @self), or a lone peer, in the middle; the rest on a circle. */
  #layout(): void {
    const peers = [...this.#state.peers.values()];
    const key = peers.map((p) => p.id).join(',');
    if (key === this.#layoutKey) return;
    this.#layoutKey = key;
    this.#positions.clear();
    const hub = peers.length === 1 ? peers[0] : peers.filter((p) => p.peerClass === '@self').length === 1 ? peers.find((p) => p.peerClass === '@self') : undefined;
    const ring = peers.filter((p) => p !== hub);
    const cx = WIDTH / 2;
    const cy = HEIGHT / 2;
    if (hub !== undefined) this.#positions.set(hub.id, { x: cx, y: cy });
    const radius = Math.min(WIDTH, HEIGHT) / 2 - 38;
    ring.forEach((p, i) => {
      const angle = -Math.PI / 2 + (2 * Math.PI * i) / Math.max(1, ring.length);
      this.#positions.set(p.id, { x: cx + radius * Math.cos(angle), y: cy + radius * Math.sin(angle) });
    });
    this.#links.replaceChildren();
    const pairs: [string, string][] = hub !== undefined ? ring.map((p) => [hub.id, p.id]) : ring.flatMap((a, i) => ring.slice(i + 1).map((b): [string, string] => [a.id, b.id]));
    for (const [a, b] of pairs) {
      const p = this.#positions.get(a)!;
      const q = this.#positions.get(b)!;
      this.#links.append(svg('line', { x1: p.x, y1: p.y, x2: q.x, y2: q.y, class: 'link', 'data-link': `${a} ${b}` }));
    }
  }

  /** Nodes are updated in place, so that the one under the pointer keeps its tooltip. */
  #drawNodes(): void {
    this.#empty.style.display = this.#state.peers.size === 0 ? '' : 'none';
    const seen = new Set<string>();
    for (const peer of this.#state.peers.values()) {
      const at = this.#positions.get(peer.id);
      if (at === undefined) continue;
      seen.add(peer.id);
      let node = this.#nodeOf.get(peer.id);
      if (node === undefined) {
        node = { group: svg('g', { 'data-peer': peer.id }), circle: svg('circle', { r: 17 }), label: svg('text', { class: 'peer-label', y: 31, 'text-anchor': 'middle' }), count: svg('text', { class: 'peer-state', y: 4, 'text-anchor': 'middle' }) };
        node.group.append(node.circle, node.label, node.count);
        this.#nodes.append(node.group);
        this.#nodeOf.set(peer.id, node);
      }
      const colour = this.#colour(peer);
      const gone = peer.state === 'gone' || peer.state === 'away';
      const g = node.group;
      g.setAttribute('class', `peer state-${peer.state}`);
      g.setAttribute('data-state', peer.state);
      g.setAttribute('transform', `translate(${at.x},${at.y})`);
      g.setAttribute('data-tip-title', `${peer.label} (${peer.place})`);
      g.setAttribute('data-colour', colour);
      g.setAttribute('data-tip', `runs ${this.#runs(peer)}; ${peer.sent} envelopes sent, ${peer.received} received (${formatBytes(peer.bytesOut)} out, ${formatBytes(peer.bytesIn)} in)${peer.lost ? `; ${peer.lost} lost on the way to it` : ''}.`);
      node.circle.setAttribute('fill', gone ? '#e2e8f0' : colour);
      node.circle.setAttribute('stroke', gone ? '#94a3b8' : colour);
      node.circle.setAttribute('stroke-dasharray', gone ? '4 3' : 'none');
      node.circle.setAttribute('fill-opacity', peer.state === 'paused' ? '0.35' : '1');
      node.label.textContent = peer.label;
      node.count.setAttribute('fill', gone ? '#475569' : 'white');
      node.count.textContent = peer.state === 'paused' ? 'II' : gone ? '✕' : String(peer.sent);
    }
    for (const [id, node] of this.#nodeOf) {
      if (seen.has(id)) continue;
      node.group.remove();
      this.#nodeOf.delete(id);
    }
  }

  /** Cards are updated in place, so that a button under the pointer is not replaced mid-click. */
  #drawCards(): void {
    const seen = new Set<string>();
    for (const peer of this.#state.peers.values()) {
      seen.add(peer.id);
      let card = this.#cardOf.get(peer.id);
      if (card === undefined) {
        card = {
          root: el('div', { class: 'peer-card', 'data-peer': peer.id }),
          label: el('strong'),
          place: el('span', { class: 'place' }),
          state: el('span', { class: 'state' }),
          counts: el('span', { class: 'counts' }),
          buttons: el('span', { class: 'actions' }),
          actions: '',
        };
        card.root.append(card.label, card.place, card.state, card.counts, card.buttons);
        this.#cardOf.set(peer.id, card);
        this.#cards.append(card.root);
      }
      card.root.className = `peer-card state-${peer.state}`;
      card.root.style.borderLeftColor = this.#colour(peer);
      card.root.setAttribute('data-colour', this.#colour(peer));
      card.label.textContent = peer.label;
      card.place.textContent = peer.holds === undefined ? peer.place : `${peer.place} · digits ${peer.holds}`;
      card.state.textContent = STATE_WORDS[peer.state];
      card.state.setAttribute('data-state', peer.state);
      card.counts.textContent = `↑${peer.sent} ↓${peer.received}${peer.lost ? ` ✕${peer.lost}` : ''}`;
      card.counts.setAttribute('data-tip', `${peer.sent} envelopes sent (${formatBytes(peer.bytesOut)}), ${peer.received} received (${formatBytes(peer.bytesIn)})${peer.lost ? `, ${peer.lost} lost on the way to it` : ''}`);
      const actions = this.#controls?.actions(peer) ?? [];
      if (actions.join() !== card.actions) {
        card.actions = actions.join();
        card.buttons.replaceChildren(...actions.map((action) => el('button', { type: 'button', 'data-action': action, 'data-peer': peer.id }, action)));
      }
    }
    for (const [id, card] of this.#cardOf) {
      if (seen.has(id)) continue;
      card.root.remove();
      this.#cardOf.delete(id);
    }
  }

  #drawSummary(): void {
    const s = this.#state;
    const t = s.totals;
    const rules = rulesLine(s.info);
    const quorum = rules === '' ? '' : ` · ${rules}`;
    this.#summary.replaceChildren(
      el('span', { 'data-term': 'envelope' }, `${t.envelopes} envelopes`),
      ` (${formatBytes(t.bytes)}) · ${t.delivered} delivered · ${t.lost} lost${quorum}`,
      ...(s.info.note ? [el('span', { class: 'note' }, ` — ${s.info.note}`)] : []),
    );
    // the last rounds, newest first, with what happened between them (pauses, kills, ...)
    const rounds = s.rounds.slice(-5);
    const since = rounds[0]?.round ?? 0;
    const marks = s.marks.filter((m) => m.round > since);
    const items = [
      ...rounds.map((r) => ({ at: r.round, item: el('li', { 'data-round': r.round, 'data-outcome': r.outcome ?? 'gossip', 'data-updates': r.contributors.length, 'data-members': r.members?.length ?? 0, 'data-term': 'round' }, roundLine(r, s.info, (id) => s.nameOf(id).label)) })),
      ...marks.map((m) => ({ at: m.round, item: el('li', { class: 'mark', 'data-mark': m.kind }, `— ${m.text}`) })),
    ].sort((a, b) => b.at - a.at);
    this.#rounds.replaceChildren(...items.slice(0, 6).map((i) => i.item));
    this.#secure.show(s.secureView, (id) => s.nameOf(id).label);
  }

  /** A value on a wire edge in its sender's colour; protocol messages grey. */
  #colourOf(flight: Flight): string {
    if (flight.kind === 'protocol') return '#94a3b8';
    const sender = this.#state.peers.get(flight.from);
    if (flight.edge === undefined || sender === undefined) return '#334155';
    return this.#colour(sender);
  }

  #animate(): void {
    this.#frame = 0;
    const now = performance.now();
    const live = new Set<number>();
    for (const flight of this.#state.flights) {
      const end = flight.endAt === undefined ? undefined : Math.max(flight.endAt, flight.sentAt + MIN_FLIGHT_MS);
      if (end !== undefined && now > end + FADE_MS) continue;
      const from = this.#positions.get(flight.from);
      const to = this.#positions.get(flight.to);
      if (from === undefined || to === undefined || now < flight.sentAt) continue;
      const progress = end === undefined ? Math.min(0.9, (now - flight.sentAt) / EXPECTED_MS) : Math.min(1, (now - flight.sentAt) / (end - flight.sentAt));
      live.add(flight.id);
      let dot = this.#dotOf.get(flight.id);
      if (dot === undefined) {
        dot = svg('circle', { r: flight.kind === 'protocol' ? 3 : 5, class: `envelope kind-${flight.kind}`, fill: this.#colourOf(flight), 'data-flight': flight.id, 'data-edge': flight.edge?.id });
        this.#dots.append(dot);
        this.#dotOf.set(flight.id, dot);
        this.animated++;
      }
      // a little off the straight line, to each side by direction, so that both ways are seen
      const nx = -(to.y - from.y);
      const ny = to.x - from.x;
      const length = Math.hypot(nx, ny) || 1;
      const bend = Math.sin(Math.PI * progress) * 8;
      dot.setAttribute('cx', String(from.x + (to.x - from.x) * progress + (nx / length) * bend));
      dot.setAttribute('cy', String(from.y + (to.y - from.y) * progress + (ny / length) * bend));
      if (flight.outcome === 'lost' && end !== undefined && now > end) dot.setAttribute('class', 'envelope lost');
      dot.setAttribute('opacity', end !== undefined && now > end ? String(Math.max(0, 1 - (now - end) / FADE_MS)) : '1');
    }
    for (const [id, dot] of this.#dotOf) {
      if (live.has(id)) continue;
      dot.remove();
      this.#dotOf.delete(id);
    }
    if (live.size > 0) this.#frame = requestAnimationFrame(() => this.#animate());
  }
}
