/**
 * Joining from a phone: a QR code and a link to this page as other devices reach it, the
 * live federation's seats, and the buttons to join it or watch it.
 */
import QRCode from 'qrcode';

import { el } from '../ui/dom.js';
import type { LiveConfig } from '../federation/live.js';

export interface JoinActions {
  join(): void;
  watch(): void;
}

interface SeatView {
  readonly index: number;
  readonly state: string;
  readonly peer?: string;
}

/** The address other devices should open: the first LAN address serve.mjs found, else this page's. */
export function shareUrl(config: LiveConfig | undefined): string {
  const lan = config?.urls.find((url) => !/\/\/(localhost|127\.)/.test(url));
  return lan ?? location.href.split('?')[0]!;
}

export class JoinPanel {
  readonly #qr: HTMLElement;
  readonly #link: HTMLAnchorElement;
  readonly #seats: HTMLElement;
  readonly #message: HTMLElement;
  readonly join: HTMLButtonElement;
  readonly watch: HTMLButtonElement;

  constructor(host: HTMLElement, config: LiveConfig | undefined, actions: JoinActions) {
    const url = shareUrl(config);
    this.#qr = el('div', { class: 'qr', role: 'img', 'aria-label': `QR code of ${url}` });
    this.#link = el('a', { href: url, class: 'share-link' }, url);
    this.#seats = el('ol', { class: 'seats', 'data-term': 'seat' });
    this.#message = el('p', { class: 'join-message', 'aria-live': 'polite' });
    this.join = el('button', { type: 'button', id: 'join-live' }, 'Join as a client');
    this.watch = el('button', { type: 'button', id: 'watch-live' }, 'Watch');
    this.join.onclick = () => actions.join();
    this.watch.onclick = () => actions.watch();
    const live = config?.live === true;
    host.replaceChildren(
      el('div', { class: 'join-grid' },
        this.#qr,
        el('div', {},
          el('p', {}, 'Scan the code or open ', this.#link, ' on a phone on the same network.'),
          live
            ? el('p', {}, `This page is served with a live federation: a server and ${config.clients} client seat${config.clients === 1 ? '' : 's'}. The rounds start once ${config.quorum === 1 ? 'one client is' : `${config.quorum} clients are`} in; your phone trains on its own share of the digits.`)
            : el('p', {}, 'This copy of the page has no live federation: host one with ', el('code', {}, 'make web-demo'), '.'),
          live ? el('p', { class: 'buttons' }, this.join, ' ', this.watch) : undefined,
          this.#message,
          live ? this.#seats : undefined,
        ),
      ),
    );
    void QRCode.toString(url, { type: 'svg', margin: 1, errorCorrectionLevel: 'M', color: { dark: '#0f172a', light: '#ffffff' } }).then((markup) => {
      this.#qr.innerHTML = markup; // the library's own SVG markup for a URL we chose
    });
  }

  say(text: string): void {
    this.#message.textContent = text;
  }

  showSeats(seats: readonly SeatView[], me: string | undefined): void {
    this.#seats.replaceChildren(
      ...seats.map((seat) =>
        el('li', { 'data-seat': seat.index, 'data-state': seat.state }, `seat ${seat.index + 1}: ${seat.state === 'free' ? 'free' : `${seat.state}${seat.peer === me ? ' (you)' : ''}`}`),
      ),
    );
  }
}
