/**
 * The live federation's seats: a session token gets its seat back (a reload), a seat whose
 * peer left is given back after the grace period (and so is one never used), a full house
 * turns visitors away with a reason, a page that cannot join gives its seat back at once,
 * and a peer id alone proves nothing.
 */
import { expect, test } from 'vitest';

import { SeatBook } from '../live/seats.mjs';

let token = 0;
const book = (seats: number, graceMs = 1000): SeatBook => new SeatBook({ seats, graceMs, randomToken: () => `session-${++token}` });

function claimed(result: ReturnType<SeatBook['claim']>): { index: number; session: string; replaced?: string } {
  if ('error' in result) throw new Error(result.error);
  return result;
}

test('seats are handed out in order, then refused with a reason', () => {
  const seats = book(2);
  expect(claimed(seats.claim('A', undefined, 0)).index).toBe(0);
  expect(claimed(seats.claim('B', undefined, 0)).index).toBe(1);
  const third = seats.claim('C', undefined, 0);
  expect('error' in third && third.error).toMatch(/all 2 client seats are taken/);
  expect(seats.snapshot().map((s) => s.state)).toEqual(['reserved', 'reserved']);
});

test('a reload with the session token keeps the seat, while the old connection still counts', () => {
  const seats = book(2);
  const a = claimed(seats.claim('A', undefined, 0));
  seats.present(new Set(['A']), 10);
  expect(seats.connected()).toEqual(['A']);
  // the page reloads: the room still lists A for a moment, and the page comes back with its token
  const again = claimed(seats.claim('A', a.session, 20));
  expect(again).toMatchObject({ index: a.index, session: a.session });
  expect(seats.snapshot()[0]!.state).toBe('connected');
  // the old socket goes, the new one comes: the seat goes away and back
  seats.present(new Set(), 30);
  expect(seats.snapshot()[0]!.state).toBe('away');
  seats.present(new Set(['A']), 40);
  expect(seats.connected()).toEqual(['A']);
});

test('a seat whose peer left is given back after the grace period, and taken by the next visitor', () => {
  const seats = book(1, 1000);
  claimed(seats.claim('A', undefined, 0));
  seats.present(new Set(['A']), 100);
  seats.present(new Set(), 200);
  expect(seats.present(new Set(), 1100)).toEqual([]); // 900 ms away: still A's
  expect('error' in seats.claim('B', undefined, 1150)).toBe(true);
  expect(seats.present(new Set(), 1300)).toEqual(['A']);
  expect(seats.snapshot()[0]).toMatchObject({ state: 'free' });
  expect(claimed(seats.claim('B', undefined, 1400)).index).toBe(0);
});

test('a seat claimed but never used is given back too', () => {
  const seats = book(1, 500);
  claimed(seats.claim('A', undefined, 0));
  expect(seats.present(new Set(), 400)).toEqual([]);
  expect(seats.present(new Set(), 600)).toEqual(['A']);
});

test('the token proves the seat: a peer id alone gets nothing, a token moves a seat only while its peer is away', () => {
  const seats = book(2);
  const a = claimed(seats.claim('A', undefined, 0));
  expect(seats.claim('A', undefined, 0)).toEqual({ error: expect.stringMatching(/already holds a seat/) });
  expect(seats.claim('A', 'forged', 0)).toEqual({ error: expect.stringMatching(/already holds a seat/) });
  seats.present(new Set(['A']), 10);
  // the same tab with a new identity, while A is connected: refused
  expect(seats.claim('A2', a.session, 20)).toEqual({ error: expect.stringMatching(/in use by another page/) });
  seats.present(new Set(), 30);
  const moved = claimed(seats.claim('A2', a.session, 40));
  expect(moved).toMatchObject({ index: a.index, replaced: 'A' });
  expect(seats.indexOf('A')).toBeUndefined();
  expect(seats.indexOf('A2')).toBe(a.index);
  // status shows no tokens
  expect(JSON.stringify(seats.snapshot())).not.toContain(a.session);
});

test('a page that cannot join gives its seat back at once, with its token; nobody else can', () => {
  const seats = book(2);
  const a = claimed(seats.claim('A', undefined, 0));
  expect(seats.release('A', 'forged', 10)).toBe(false);
  expect(seats.release('B', a.session, 10)).toBe(false);
  expect(seats.snapshot()[a.index]!.state).toBe('reserved');
  expect(seats.release('A', a.session, 10)).toBe(true);
  expect(seats.snapshot()[a.index]!.state).toBe('free');
  // a seat whose peer is in the room is not given back this way
  const b = claimed(seats.claim('B', undefined, 20));
  seats.present(new Set(['B']), 30);
  expect(seats.release('B', b.session, 40)).toBe(false);
  expect(seats.connected()).toEqual(['B']);
});
