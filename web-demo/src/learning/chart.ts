/**
 * Learning curves with uPlot: held-out accuracy and loss per round, the global model as a
 * bold line and every peer's own model as a thin one in that peer's colour. A round the
 * server abandoned is a hollow grey dot on the global line (its model is the one before),
 * and what happened between rounds — a peer paused, resumed, killed, joined or left, the
 * live rounds waiting for a quorum — is a dashed line where it happened, named under the
 * charts. Sized to its container (and resized with it), drawn at the screen's pixel ratio,
 * with a legend that wraps on a phone instead of overflowing.
 */
import '../ui/locale.js';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

import { clientColour, GLOBAL_COLOUR, peerColour } from '../ui/colours.js';
import { el } from '../ui/dom.js';
import type { FederationState, Mark } from '../federation/state.js';
import { percent, privacySpent, secureSeen } from '../federation/words.js';

/** Rounds kept on the charts (the most recent). */
const MAX_ROUNDS = 300;
const REDRAW_MS = 250;
const MARK_COLOUR = '#64748b';
const ABANDONED_COLOUR = '#94a3b8';
/** What a mark is drawn with above the plot. */
const MARK_SIGNS: Readonly<Record<Mark['kind'], string>> = { pause: 'II', resume: '▶', kill: '✕', join: '+', leave: '−', wait: '…', go: '▶' };

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
  readonly #marks: HTMLElement;
  readonly #caption: HTMLElement;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #last = 0;
  /** x positions of abandoned rounds and of marks, for the draw hook. */
  #abandoned: { x: number; y: Record<Metric, number | undefined> }[] = [];

  constructor(host: HTMLElement, state: FederationState) {
    this.#state = state;
    this.#caption = el('p', { class: 'chart-caption', 'aria-live': 'polite' });
    this.#legend = el('div', { class: 'chart-legend' });
    this.#marks = el('ul', { class: 'chart-marks' });
    const accuracy = el('div', { class: 'chart', 'data-metric': 'accuracy' });
    const loss = el('div', { class: 'chart', 'data-metric': 'loss' });
    host.replaceChildren(this.#caption, accuracy, loss, this.#legend, this.#marks);
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

  /** The peers with points, clients in their number's order (so the legend reads the same each run). */
  #peersOf(points: readonly { peer: string }[]): string[] {
    const s = this.#state;
    const peers = [...new Set(points.map((p) => p.peer))];
    const order = (peer: string): number => s.nameOf(peer).index ?? Number.MAX_SAFE_INTEGER;
    return peers.sort((a, b) => order(a) - order(b) || a.localeCompare(b));
  }

  #colourOf(peer: string): string {
    const known = this.#state.peers.get(peer);
    if (known !== undefined) return peerColour(known);
    const index = this.#state.nameOf(peer).index;
    return index === undefined ? MARK_COLOUR : clientColour(index);
  }

  #draw(): void {
    const s = this.#state;
    const rounds = s.rounds.slice(-MAX_ROUNDS);
    const first = rounds[0]?.round ?? 0;
    const peerPoints = s.peerPoints.filter((p) => p.round >= first);
    const peers = this.#peersOf(peerPoints);
    const xs = [...new Set([...rounds.map((r) => r.round), ...peerPoints.map((p) => p.round)])].sort((a, b) => a - b);
    const index = new Map(xs.map((x, i) => [x, i]));
    const last = rounds.at(-1);
    this.#caption.textContent =
      last === undefined
        ? 'No rounds yet.'
        : last.outcome === 'abandoned'
          ? `round ${last.round} was abandoned: the model stays at ${percent(last.accuracy)} held-out accuracy`
          : `${last.outcome === 'start' ? 'the starting model' : `round ${last.round}`}: held-out accuracy ${percent(last.accuracy)}${last.loss === undefined ? '' : `, loss ${last.loss.toFixed(3)}`}`;
    this.#caption.textContent += secureSeen(last) + privacySpent(last);
    if (last?.secure !== undefined) this.#caption.setAttribute('data-summed', String(last.secure.summed));
    if (last?.epsilon !== undefined) this.#caption.setAttribute('data-epsilon', String(last.epsilon));
    this.#caption.setAttribute('data-round', String(last?.round ?? 0));
    this.#caption.setAttribute('data-accuracy', String(last?.accuracy ?? 0));
    this.#abandoned = rounds.filter((r) => r.outcome === 'abandoned').map((r) => ({ x: r.round, y: { accuracy: r.accuracy, loss: r.loss } }));
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
      const key = peers.map((p) => `${p}:${this.#colourOf(p)}`).join(',');
      if (panel.plot === undefined || panel.seriesKey !== key) {
        panel.plot?.destroy();
        panel.plot = new uPlot(this.#options(panel, peers), data, panel.host);
        panel.seriesKey = key;
      } else panel.plot.setData(data);
    }
    const gossip = s.info.mode.includes('gossip');
    this.#legend.replaceChildren(
      el('span', { class: 'chip global' }, el('i', { style: `background:${GLOBAL_COLOUR}` }), gossip ? 'mean of the peers' : 'global model'),
      ...peers.map((peer) => {
        const name = s.nameOf(peer);
        const left = !s.peers.has(peer) || s.peers.get(peer)!.state === 'gone';
        const colour = this.#colourOf(peer);
        return el('span', { class: 'chip', 'data-peer': peer, 'data-colour': colour }, el('i', { style: `background:${colour}` }), `${name.label}${left ? ' (gone)' : ''}`);
      }),
      ...(this.#abandoned.length > 0 ? [el('span', { class: 'chip abandoned' }, el('b', {}, '○'), 'round abandoned: model unchanged')] : []),
    );
    const marks = s.marks.filter((m) => m.round >= first - 1);
    this.#marks.replaceChildren(...marks.slice(-8).map((m) => el('li', { 'data-mark': m.kind, 'data-x': m.round }, `${MARK_SIGNS[m.kind]} ${m.text} (${m.round < 0 ? 'before the first round' : `after round ${Math.floor(m.round)}`})`)));
  }

  /** Dashed lines where something happened, hollow dots on abandoned rounds. */
  #decorate(metric: Metric): (u: uPlot) => void {
    return (u) => {
      const ctx = u.ctx;
      const { left, top, width, height } = u.bbox;
      const ratio = devicePixelRatio || 1;
      ctx.save();
      ctx.font = `${Math.round(11 * ratio)}px system-ui, sans-serif`;
      ctx.textAlign = 'center';
      // marks at one place are signed one beside the other above their line
      const at = new Map<number, Mark[]>();
      for (const mark of this.#state.marks) at.set(mark.round, [...(at.get(mark.round) ?? []), mark]);
      for (const [round, marks] of at) {
        const x = u.valToPos(round, 'x', true);
        if (!(x >= left && x <= left + width)) continue;
        ctx.strokeStyle = MARK_COLOUR;
        ctx.fillStyle = MARK_COLOUR;
        ctx.setLineDash([4 * ratio, 4 * ratio]);
        ctx.lineWidth = ratio;
        ctx.beginPath();
        ctx.moveTo(x, top + 16 * ratio);
        ctx.lineTo(x, top + height);
        ctx.stroke();
        ctx.fillText(marks.map((m) => MARK_SIGNS[m.kind]).join(' '), x, top + 10 * ratio);
      }
      ctx.setLineDash([]);
      ctx.strokeStyle = ABANDONED_COLOUR;
      ctx.fillStyle = 'white';
      ctx.lineWidth = 2 * ratio;
      for (const a of this.#abandoned) {
        const value = a.y[metric];
        if (value === undefined) continue;
        const x = u.valToPos(a.x, 'x', true);
        const y = u.valToPos(value, 'y', true);
        if (!(x >= left && x <= left + width)) continue;
        ctx.beginPath();
        ctx.arc(x, y, 4 * ratio, 0, 2 * Math.PI);
        ctx.fill();
        ctx.stroke();
      }
      ctx.restore();
    };
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
        { label: 'round', font: axisFont, labelFont: axisFont, size: 34, labelSize: 18, stroke: '#334155', values: (_u, ticks) => ticks.map((t) => (Number.isInteger(t) ? String(t) : '')) },
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
        ...peers.map((peer) => ({ label: this.#state.nameOf(peer).label, stroke: this.#colourOf(peer), width: 1, spanGaps: true, alpha: 0.8, points: { show: false } })),
      ],
      hooks: { draw: [this.#decorate(panel.metric)] },
    };
  }
}
