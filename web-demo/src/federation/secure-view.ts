/**
 * What the server of a secure federation saw of its last round, drawn: one client's masked
 * vector as it came over the wire (uniform noise to anyone without the masks) beside the
 * model step the round's unmasked sum gave, at the same sampled parameters — both real
 * (serve.mjs reads them off its server's envelopes and model; shared/secure-view.js).
 * The colours are pure functions, so what is drawn is tested as it is.
 */
import type { SecureView } from '../../shared/rounds.js';
import { el } from '../ui/dom.js';

/** A masked ring element over the modulus (in [0, 1)) as a grey: 0 black, 1 white. */
export function maskedColour(value: number): [number, number, number] {
  const g = Math.round(Math.min(1, Math.max(0, value)) * 255);
  return [g, g, g];
}

/** A step element against the largest step's size: blue down, red up, white none. */
export function stepColour(value: number, largest: number): [number, number, number] {
  const t = largest > 0 ? Math.min(1, Math.abs(value) / largest) : 0;
  const fade = Math.round(255 * (1 - t));
  return value >= 0 ? [255, fade, fade] : [fade, fade, 255];
}

/** The words under the drawing. */
export function secureCaption(view: SecureView, nameOf: (peer: string) => string): string {
  return `round ${view.round}, what the server saw: ${nameOf(view.from)}'s masked update (left, ${view.masked.length} of its numbers) looks like noise; only the sum of the round's masked updates, unmasked, gives the model's step (right, the same ${view.step.length} parameters; red up, blue down)`;
}

/** Draws `values` as a square grid of cells on a canvas. */
function paint(canvas: HTMLCanvasElement, values: readonly number[], colour: (v: number) => [number, number, number]): void {
  const side = Math.ceil(Math.sqrt(values.length));
  canvas.width = side;
  canvas.height = side;
  const context = canvas.getContext('2d');
  if (context === null) return;
  const image = context.createImageData(side, side);
  values.forEach((v, i) => {
    const [r, g, b] = colour(v);
    image.data.set([r, g, b, 255], i * 4);
  });
  context.putImageData(image, 0, 0);
}

export class SecurePanel {
  readonly root: HTMLElement;
  readonly #masked = el('canvas', { class: 'secure-masked', 'aria-label': 'one client\'s masked update, as the server got it' });
  readonly #step = el('canvas', { class: 'secure-step', 'aria-label': 'the model step the unmasked sum gave' });
  readonly #caption = el('figcaption');
  #round = -1;

  constructor() {
    this.root = el('figure', { class: 'secure-view', hidden: true }, el('div', { class: 'secure-pair' }, this.#masked, this.#step), this.#caption);
  }

  show(view: SecureView | undefined, nameOf: (peer: string) => string): void {
    if (view === undefined || view.round === this.#round) return;
    this.#round = view.round;
    const largest = Math.max(0, ...view.step.map(Math.abs));
    paint(this.#masked, view.masked, maskedColour);
    paint(this.#step, view.step, (v) => stepColour(v, largest));
    this.#caption.textContent = secureCaption(view, nameOf);
    this.root.setAttribute('data-round', String(view.round));
    this.root.hidden = false;
  }
}
