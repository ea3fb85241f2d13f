/**
 * Which digits a client holds when each of them holds `perClient` of the ten: the rule of
 * the package's splitForFederation (client s takes digits s·k … s·k + k − 1, counting round
 * from 9 to 0), so that every digit lives on several clients once there are enough of them.
 * 10 (or more) is every digit.
 */
export const DIGITS = 10;

export function rotationDigits(index: number, perClient: number): number[] {
  const k = Math.min(DIGITS, Math.max(1, perClient));
  return [...new Set(Array.from({ length: k }, (_, j) => (index * k + j) % DIGITS))].sort((a, b) => a - b);
}

/** "0–5", "6 7 8 9 0 1" sorted: "0 1 6 7 8 9", every digit: "all ten". */
export function digitsText(digits: readonly number[]): string {
  return digits.length === DIGITS ? 'all ten' : [...digits].sort((a, b) => a - b).join(' ');
}
