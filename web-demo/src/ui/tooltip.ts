/**
 * One tooltip for the whole page: any element with `data-term` (a glossary entry) or
 * `data-tip` (a sentence, titled by `data-tip-title`) explains itself on hover, on focus
 * from the keyboard, or on one tap (phones have no hover; a tap on it again or elsewhere
 * closes it). A tap also focuses what it lands on: that focus is the tap's, and the tap
 * alone decides, so one tap opens the explanation and a second closes it.
 */
import { TERMS } from '../program/glossary.js';

function textOf(target: Element): { title: string; text: string } | undefined {
  const term = target.getAttribute('data-term');
  if (term !== null && TERMS[term] !== undefined) return TERMS[term];
  const tip = target.getAttribute('data-tip');
  if (tip !== null) return { title: target.getAttribute('data-tip-title') ?? '', text: tip };
  return undefined;
}

export function installTooltips(root: HTMLElement = document.body): void {
  const box = document.createElement('div');
  box.id = 'tooltip';
  box.setAttribute('role', 'tooltip');
  box.hidden = true;
  root.append(box);
  let current: Element | null = null;
  /** A pointer is down: the focus it moves is not a keyboard's. */
  let pointing = false;

  const show = (target: Element, x: number, y: number): void => {
    const content = textOf(target);
    if (content === undefined) return;
    current = target;
    box.replaceChildren();
    if (content.title) {
      const title = document.createElement('strong');
      title.textContent = content.title;
      box.append(title, document.createElement('br'));
    }
    box.append(content.text);
    box.hidden = false;
    // keep it on screen: at most the viewport's width, left of the pointer near the right edge
    const width = Math.min(320, window.innerWidth - 16);
    box.style.maxWidth = `${width}px`;
    const left = Math.max(8, Math.min(x + 12, window.innerWidth - width - 8));
    box.style.left = `${left + window.scrollX}px`;
    box.style.top = `${y + 16 + window.scrollY}px`;
  };
  const hide = (): void => {
    current = null;
    box.hidden = true;
  };
  const explained = (event: Event): Element | null => (event.target instanceof Element ? event.target.closest('[data-term],[data-tip]') : null);

  // a tap's focus comes between its pointerdown and its click; the keyboard's after a key
  root.addEventListener('pointerdown', () => (pointing = true), { capture: true });
  root.addEventListener('keydown', () => (pointing = false), { capture: true });
  root.addEventListener('pointerover', (event) => {
    if (event.pointerType === 'touch') return;
    const target = explained(event);
    if (target !== null && target !== current) show(target, event.clientX, event.clientY);
  });
  root.addEventListener('pointerout', (event) => {
    if (event.pointerType === 'touch') return;
    const target = explained(event);
    if (target !== null && !(event.relatedTarget instanceof Node && target.contains(event.relatedTarget))) hide();
  });
  root.addEventListener('click', (event) => {
    const target = explained(event);
    if (target === null || target.closest('button,a,select,input,[data-toggle]') !== null) {
      if (target === null) hide();
      return;
    }
    if (target === current) hide();
    else show(target, event.clientX, event.clientY);
  });
  root.addEventListener('click', () => (pointing = false));
  root.addEventListener('focusin', (event) => {
    const target = explained(event);
    if (target === null || pointing) return;
    const rect = target.getBoundingClientRect();
    show(target, rect.left, rect.bottom - 8);
  });
  root.addEventListener('focusout', () => {
    if (!pointing) hide();
  });
  window.addEventListener('scroll', () => current !== null && hide(), { passive: true });
}
