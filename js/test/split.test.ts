/**
 * splitForFederation with the classes each shard is given (what web-demo's playground
 * hands its clients): a shard holds rows of its classes only, every training row of a
 * class goes to exactly the shards given it, the held-out rows do not depend on how the
 * rest is dealt, and a split that cannot be made is refused with the shard at fault.
 */
import { expect, test } from 'vitest';

import { splitForFederation } from '../src/index.js';

// ten classes of 20 rows each, in class order
const labels = Float32Array.from({ length: 200 }, (_, row) => Math.floor(row / 20));

test('each shard holds the classes it is given, and every row of a class goes to its shards', () => {
  const shardClasses = [[0, 1, 2], [2, 3], [4, 5, 6, 7, 8, 9, 9], []];
  const { test: held, shards } = splitForFederation(labels, { shards: 4, shardClasses, seed: 3 });
  shards.forEach((rows, s) => {
    const classes = new Set(rows.map((row) => labels[row]));
    expect([...classes].sort()).toEqual([...new Set(shardClasses[s])].sort());
  });
  // 25 % of each class is held out; the other 15 rows of class 2 are shared by shards 0 and 1
  expect(held.length).toBe(50);
  const dealt = shards.flat();
  expect(new Set(dealt).size).toBe(dealt.length);
  expect(dealt.length + held.length).toBe(200);
  expect(shards[0]!.filter((row) => labels[row] === 2).length + shards[1]!.filter((row) => labels[row] === 2).length).toBe(15);
  expect(Math.abs(shards[0]!.filter((row) => labels[row] === 2).length - shards[1]!.filter((row) => labels[row] === 2).length)).toBeLessThanOrEqual(1);
  // the held-out rows are those of the same seed dealt any other way
  expect(splitForFederation(labels, { shards: 4, classesPerShard: 3, seed: 3 }).test).toEqual(held);
});

test('a class no shard is given stays out of training', () => {
  const { shards } = splitForFederation(labels, { shards: 2, shardClasses: [[0], [1]], seed: 1 });
  expect(shards.flat().every((row) => labels[row]! <= 1)).toBe(true);
});

test('shard lists that do not fit are refused, naming what is wrong', () => {
  expect(() => splitForFederation(labels, { shards: 3, shardClasses: [[0], [1]] })).toThrow(/lists 2 shards, not 3/);
  expect(() => splitForFederation(labels, { shards: 2, shardClasses: [[0], [11]] })).toThrow(/shard 1 is given class 11, which no row has/);
});
