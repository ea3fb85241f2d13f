/**
 * How the page tells a round: what the server did with it (closed it with k of its n
 * members' updates, or abandoned it at its deadline below the quorum, the model left as it
 * was), and the accuracy of the model it left. Pure text, so that what a visitor reads is
 * tested as it is.
 */
import type { RoundPoint } from './state.js';

/** The round rules a federation runs with (FederationState.info). */
export interface RoundRules {
  readonly quorum?: number;
  readonly target?: number;
  readonly deadlineMs?: number;
}

export function percent(value: number): string {
  return `${(value * 100).toFixed(1)} %`;
}

/** "1 s", "2.8 s", "800 ms" */
export function duration(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${Number((ms / 1000).toFixed(1))} s`;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** With differential privacy, what the rounds up to this one spent: " · privacy spent: ε 1.23 (δ 1e-5)"; '' without. */
export function privacySpent(r: RoundPoint | undefined, delta?: number): string {
  if (r?.epsilon === undefined) return '';
  const at = delta === undefined ? '' : ` at δ ${delta}`;
  return r.epsilon === null ? ' · privacy spent: ε ∞ (clipping without noise)' : ` · privacy spent: ε ${r.epsilon.toPrecision(3)}${at}`;
}

/**
 * With secure aggregation, what the server saw of the round: " · the server saw only the sum
 * of 3 masked updates"; no sum when it was abandoned; the secure rounds that aborted since
 * the previous round. '' without secure aggregation.
 */
export function secureSeen(r: RoundPoint | undefined): string {
  if (r?.secure === undefined) return '';
  const { summed, aborted } = r.secure;
  const abort = aborted > 0 ? ` · ${plural(aborted, 'secure round')} aborted` : '';
  return summed > 0 ? ` · the server saw only the sum of ${plural(summed, 'masked update')}${abort}` : ` · no secure sum: the server saw no update${abort}`;
}

/** The line of the round list for one round. */
export function roundLine(r: RoundPoint, rules: RoundRules, nameOf: (peer: string) => string): string {
  const accuracy = percent(r.accuracy);
  if (r.outcome === undefined) return `round ${r.round}: ${plural(r.contributors.length, 'peer')} reported · mean accuracy ${accuracy}`;
  if (r.outcome === 'start') return `start: the model the rounds begin from, ${accuracy}`;
  const k = r.contributors.length;
  const n = r.members?.length ?? 0;
  const of = n > 0 ? `${k} of ${n}` : `${k}`;
  const late = r.late ? ` · ${plural(r.late, 'update')} for an earlier round came too late and ${r.late === 1 ? 'was' : 'were'} dropped` : '';
  if (r.outcome === 'abandoned') {
    const deadline = rules.deadlineMs === undefined ? 'its deadline' : `its ${duration(rules.deadlineMs)} deadline`;
    const needed = rules.quorum === undefined ? '' : `, ${rules.quorum} needed`;
    // a secure server cannot tell whose updates came: its sum (or none) says what it saw
    if (r.secure !== undefined) return `round ${r.round}: abandoned at ${deadline}${needed}; the model stays as it was (${accuracy})${secureSeen(r)}${late}${privacySpent(r)}`;
    const came = k === 0 ? 'no update came back' : `only ${of} updates came back`;
    return `round ${r.round}: abandoned at ${deadline} — ${came}${needed}; the model stays as it was (${accuracy})${late}${privacySpent(r)}`;
  }
  if (r.secure !== undefined) return `round ${r.round}: closed${n > 0 ? ` (sent to ${n})` : ''} → ${accuracy}${secureSeen(r)}${late}${privacySpent(r)}`;
  const who = k > 0 ? ` (${r.contributors.map(nameOf).join(', ')})` : '';
  return `round ${r.round}: closed with ${of} updates${who} → ${accuracy}${late}${privacySpent(r)}`;
}

/** The rules in a sentence: "a round closes with 4 updates at once, or 3 after its 2.8 s deadline". */
export function rulesLine(rules: RoundRules): string {
  if (rules.quorum === undefined) return '';
  const deadline = rules.deadlineMs === undefined ? 'its deadline' : `its ${duration(rules.deadlineMs)} deadline`;
  const target = rules.target === undefined ? '' : `${rules.target} updates at once, or `;
  return `a round closes with ${target}${rules.quorum} after ${deadline}; with fewer it is abandoned and the model stays`;
}
