/**
 * The model a split cuts, drawn above the program: the clients' layers, the cut, the
 * server's layers, and across the cut the two wires of a step — activations up, gradients
 * down — each with the envelopes and bytes that took it, a dot running along it whenever
 * more did.
 */
import { formatBytes, el } from '../ui/dom.js';
import type { EdgeCount } from '../federation/state.js';
import type { Layer, SplitSides, SplitTraffic } from './split.js';

/** "Conv conv1 (416 parameters)": the op, the layer's name when it has one of its own. */
export function layerLabel(layer: Layer): string {
  const parts = layer.name.split('/').filter((p) => p !== '');
  const own = parts.length > 1 ? ` ${parts[0]}` : '';
  return `${layer.op}${own}${layer.parameters > 0 ? ` (${layer.parameters.toLocaleString('en-US')} parameters)` : ''}`;
}

function countText(count: EdgeCount): string {
  return `${count.envelopes} envelope${count.envelopes === 1 ? '' : 's'}, ${formatBytes(count.bytes)}`;
}

export class SplitView {
  readonly #root: HTMLElement;
  #seen = { up: 0, down: 0 };

  constructor(root: HTMLElement) {
    this.#root = root;
  }

  /** Draws the model cut in two, or hides the view (undefined: the program is no split). */
  show(sides: SplitSides | undefined): void {
    this.#seen = { up: 0, down: 0 };
    this.#root.hidden = sides === undefined;
    if (sides === undefined) return this.#root.replaceChildren();
    const side = (which: 'client' | 'server', title: string, layers: readonly Layer[], parameters: number): HTMLElement =>
      el('div', { class: `split-side split-${which}`, 'data-side': which },
        el('h3', {}, `${title} · ${parameters.toLocaleString('en-US')} parameters`),
        el('ol', {}, ...layers.map((l) => el('li', { 'data-op': l.op }, layerLabel(l)))));
    this.#root.replaceChildren(
      side('client', 'on each client', sides.client, sides.clientParameters),
      el('div', { class: 'split-cut', 'data-cut': sides.cut },
        el('span', { class: 'split-cut-name' }, `cut at ${sides.cut}`),
        el('div', { class: 'split-wire split-up', 'data-direction': 'up' }, el('span', {}, 'activations →'), el('span', { class: 'split-count' }, countText({ envelopes: 0, bytes: 0 }))),
        el('div', { class: 'split-wire split-down', 'data-direction': 'down' }, el('span', {}, '← gradients'), el('span', { class: 'split-count' }, countText({ envelopes: 0, bytes: 0 })))),
      side('server', 'on the server', sides.server, sides.serverParameters),
    );
  }

  /** The counts of a running split; a wire whose count grew runs its dot again. */
  update(traffic: SplitTraffic | undefined): void {
    if (traffic === undefined || this.#root.hidden) return;
    for (const [direction, count] of [['up', traffic.activations], ['down', traffic.gradients]] as const) {
      const wire = this.#root.querySelector<HTMLElement>(`.split-wire[data-direction="${direction}"]`);
      if (wire === null) continue;
      wire.querySelector('.split-count')!.textContent = countText(count);
      wire.title = `${direction === 'up' ? 'to the server' : 'to the clients'}, every wire: ${countText(direction === 'up' ? traffic.up : traffic.down)}`;
      if (count.envelopes > this.#seen[direction]) {
        wire.classList.remove('moving');
        void wire.offsetWidth; // restarts the animation
        wire.classList.add('moving');
      }
      this.#seen[direction] = count.envelopes;
    }
  }
}
