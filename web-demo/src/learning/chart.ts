/**
 * Learning curves with uPlot: held-out accuracy and loss per round, the global model as a
 * bold line and every peer's own model as a thin one. Sized to its container (and
 * resized with it), drawn at the screen's pixel ratio, with a legend that wraps on a
 * phone instead of overflowing.
 */
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

import { el } from '../ui/dom.js';
import type { FederationState } from '../federation/state.js';

/** Rounds kept on the charts (the most recent). */
const MAX_ROUNDS = 300;
const REDRAW_MS = 250;

const GLOBAL_COLOUR = '#0f172a';
const PEER_COLOURS = ['#2563eb', '#ea580c', '#059669', '#9333ea', '#ca8a04', '#db2777', '#0891b2', '#65a30d', '#dc2626', '#4f46e5'];

type Metric = 'accuracy' | 'loss';

interface Panel {
  readonly metric: Metric;
  readonly host: HTMLElement;
  plot: uPlot | undefined;
  seriesKey: string;
}

export class LearningCharts {
  readonly #state: FederationState;
  readonly #panels: Panel[];
  readonly #legend: HTMLElement;
  readonly #caption: HTMLElement;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #last = 0;

  constructor(host: HTMLElement, state: FederationState) {
    this.#state = state;
    this.#caption = el('p', { class: 'chart-caption', 'aria-live': 'polite' });
    this.#legend = el('div', { class: 'chart-legend' });
    const accuracy = el('div', { class: 'chart', 'data-metric': 'accuracy' });
    const loss = el('div', { class: 'chart', 'data-metric': 'loss' });
    host.replaceChildren(this.#caption, accuracy, loss, this.#legend);
    this.#panels = [
      { metric: 'accuracy', host: accuracy, plot: undefined, seriesKey: '' },
      { metric: 'loss', host: loss, plot: undefined, seriesKey: '' },
    ];
    state.subscribe(() => this.#schedule());
    new ResizeObserver(() => {
      for (const panel of this.#panels) panel.plot?.setSize(this.#size(panel.host));
    }).observe(host);
    this.#draw();
  }

  #schedule(): void {
    if (this.#timer !== undefined) return;
    const wait = Math.max(0, this.#last + REDRAW_MS - performance.now());
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#last = performance.now();
      this.#draw();
    }, wait);
  }

  #size(host: HTMLElement): { width: number; height: number } {
    const width = Math.max(240, Math.floor(host.clientWidth || host.parentElement?.clientWidth || 320));
    return { width, height: width < 500 ? 180 : 220 };
  }

  #draw(): void {
    const s = this.#state;
    const rounds = s.rounds.slice(-MAX_ROUNDS);
    const first = rounds[0]?.round ?? 0;
    const peerPoints = s.peerPoints.filter((p) => p.round >= first);
    const peers = [...new Set(peerPoints.map((p) => p.peer))];
    const xs = [...new Set([...rounds.map((r) => r.round), ...peerPoints.map((p) => p.round)])].sort((a, b) => a - b);
    const index = new Map(xs.map((x, i) => [x, i]));
    const last = rounds.at(-1);
    this.#caption.textContent =
      last === undefined
        ? 'No rounds yet: start a federation.'
        : `round ${last.round}: held-out accuracy ${(last.accuracy * 100).toFixed(1)} %${last.loss === undefined ? '' : `, loss ${last.loss.toFixed(3)}`}`;
    this.#caption.setAttribute('data-round', String(last?.round ?? 0));
    this.#caption.setAttribute('data-accuracy', String(last?.accuracy ?? 0));
    for (const panel of this.#panels) {
      const global = new Array<number | null>(xs.length).fill(null);
      for (const r of rounds) {
        const v = panel.metric === 'accuracy' ? r.accuracy : r.loss;
        if (v !== undefined && Number.isFinite(v)) global[index.get(r.round)!] = v;
      }
      const perPeer = peers.map((peer) => {
        const line = new Array<number | null>(xs.length).fill(null);
        for (const p of peerPoints) {
          if (p.peer !== peer) continue;
          const v = panel.metric === 'accuracy' ? p.accuracy : p.loss;
          if (v !== undefined && Number.isFinite(v)) line[index.get(p.round)!] = v;
        }
        return line;
      });
      const data: uPlot.AlignedData = [xs, global, ...perPeer];
      const key = peers.join(',');
      if (panel.plot === undefined || panel.seriesKey !== key) {
        panel.plot?.destroy();
        panel.plot = new uPlot(this.#options(panel, peers), data, panel.host);
        panel.seriesKey = key;
      } else panel.plot.setData(data);
    }
    this.#legend.replaceChildren(
      el('span', { class: 'chip global' }, el('i', { style: `background:${GLOBAL_COLOUR}` }), s.info.mode.includes('gossip') ? 'mean of the peers' : 'global model'),
      ...peers.map((peer, i) => el('span', { class: 'chip' }, el('i', { style: `background:${PEER_COLOURS[i % PEER_COLOURS.length]}` }), s.peers.get(peer)?.label ?? peer.slice(-6))),
    );
  }

  #options(panel: Panel, peers: readonly string[]): uPlot.Options {
    const axisFont = '12px system-ui, sans-serif';
    const accuracy = panel.metric === 'accuracy';
    return {
      ...this.#size(panel.host),
      title: accuracy ? 'held-out accuracy' : 'loss (cross-entropy)',
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: false }, y: accuracy ? { range: [0, 1] } : { range: (_u, min, max) => [0, Math.max(0.5, Number.isFinite(max) ? max * 1.1 : 2.5, min)] } },
      axes: [
        { label: 'round', font: axisFont, labelFont: axisFont, size: 34, labelSize: 18, stroke: '#334155' },
        {
          font: axisFont,
          labelFont: axisFont,
          size: 52,
          stroke: '#334155',
          values: accuracy ? (_u, ticks) => ticks.map((t) => `${Math.round(t * 100)}%`) : (_u, ticks) => ticks.map((t) => t.toFixed(1)),
        },
      ],
      series: [
        { label: 'round' },
        { label: 'global', stroke: GLOBAL_COLOUR, width: 2.5, spanGaps: true, points: { show: false } },
        ...peers.map((peer, i) => ({ label: peer.slice(-6), stroke: PEER_COLOURS[i % PEER_COLOURS.length]!, width: 1, spanGaps: true, alpha: 0.8, points: { show: false } })),
      ],
    };
  }
}
