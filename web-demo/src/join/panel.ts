/**
 * Joining the live federation. At the top of the page (the first thing a phone shows): Join
 * and Watch, what this page can do — a page that cannot be a client (no https, no WebRTC,
 * no storage) says why in plain words and offers watching — and, once joined, "You are
 * client N". Further down: the QR code and the link other devices open (it joins at
 * once), and the seats with their state.
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

/** The address other devices should open (the first LAN address serve.mjs found, else this page's); with a live federation it joins at once. */
export function shareUrl(config: LiveConfig | undefined): string {
  const lan = config?.urls.find((url) => !/\/\/(localhost|127\.)/.test(url));
  const page = lan ?? location.href.split(/[?#]/)[0]!;
  return config?.live === true ? `${page}?run=join` : page;
}

/** What the shared link does on a phone: joins over https; over plain http a phone may only watch. */
function joinsAtOnce(url: string): string {
  return new URL(url).protocol === 'https:'
    ? ': it joins at once'
    : '. It is plain http, so a phone will watch but cannot join: browsers give a client\'s cryptography only to https pages of other machines (make web-demo TLS_CERT=… TLS_KEY=… serves https)';
}

export class JoinPanel {
  readonly #bar: HTMLElement;
  readonly #qr: HTMLElement;
  readonly #link: HTMLAnchorElement;
  readonly #seats: HTMLElement;
  readonly #message: HTMLElement;
  readonly #you: HTMLElement;
  readonly join: HTMLButtonElement;
  readonly watch: HTMLButtonElement;
  /** Why this page cannot join, when it cannot. */
  readonly blocked: string | undefined;

  constructor(bar: HTMLElement, host: HTMLElement, config: LiveConfig | undefined, actions: JoinActions, blocked?: string) {
    this.#bar = bar;
    this.blocked = blocked;
    const url = shareUrl(config);
    this.#qr = el('div', { class: 'qr', role: 'img', 'aria-label': `QR code of ${url}` });
    this.#link = el('a', { href: url, class: 'share-link' }, url);
    this.#seats = el('ol', { class: 'seats', 'data-term': 'seat' });
    this.#message = el('p', { class: 'join-message', role: 'status' });
    this.#you = el('p', { class: 'you', hidden: true });
    this.join = el('button', { type: 'button', id: 'join-live', class: 'primary' }, 'Join as a client');
    this.watch = el('button', { type: 'button', id: 'watch-live' }, 'Watch');
    this.join.onclick = () => actions.join();
    this.watch.onclick = () => actions.watch();
    const live = config?.live === true;
    if (live) {
      const quorum = config.quorum === 1 ? 'one client is' : `${config.quorum} clients are`;
      bar.hidden = false;
      bar.replaceChildren(
        this.#you,
        el('p', { class: 'join-line' },
          el('span', {}, `A live federation runs here: a server and ${config.clients} client seat${config.clients === 1 ? '' : 's'}; its rounds run while ${quorum} in. `),
          el('span', { class: 'buttons' }, this.join, ' ', this.watch)),
        this.#message,
      );
      if (blocked !== undefined) {
        this.join.disabled = true;
        this.join.title = blocked;
        this.say(`${blocked} You can watch.`);
      }
    }
    host.replaceChildren(
      el('div', { class: 'join-grid' },
        this.#qr,
        el('div', {},
          el('p', {}, 'Scan the code or open ', this.#link, ` on a phone on the same network${live ? joinsAtOnce(url) : ''}.`),
          live
            ? el('p', {}, `Each phone that joins becomes a client: it trains on its own share of the digits and sends its updates to the server; Join and Watch are at the top of the page.`)
            : el('p', {}, 'This copy of the page has no live federation: host one with ', el('code', {}, 'make web-demo'), '.'),
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

  /** "You are client N", on top. */
  you(seat: number, text: string): void {
    this.#you.hidden = false;
    this.#you.setAttribute('data-seat', String(seat));
    this.#you.replaceChildren(el('strong', {}, `You are client ${seat + 1}.`), ` ${text}`);
    this.#bar.classList.add('joined');
    this.join.hidden = this.watch.hidden = true;
  }

  showSeats(seats: readonly SeatView[], me: string | undefined): void {
    this.#seats.replaceChildren(
      ...seats.map((seat) =>
        el('li', { 'data-seat': seat.index, 'data-state': seat.state }, `seat ${seat.index + 1}: ${seat.state === 'free' ? 'free' : `${seat.state}${seat.peer === me ? ' (you)' : ''}`}`),
      ),
    );
  }
}
