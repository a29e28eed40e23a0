import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Monitor, jain, minMaxRatio, sumBinned } from '../src/metrics.js';

test('binned sums count partial intervals pro rata', () => {
  assert.equal(sumBinned([10, 10, 10], 1, 0.5, 2), 15);
  assert.equal(sumBinned([10, 10, 10], 1, 2, 1), 0);
});

test('throughput, loss and levels follow the simulator definitions', () => {
  const m = new Monitor('s/r1', 's', 'layered');
  m.ladderKbps = [0, 20, 40, 60];
  for (let t = 0; t < 10; t++) m.add(1, t + 0.5, 2500, 5, t === 3 ? 1 : 0);
  assert.equal(m.throughputKbps(1, 0, 10), 20);
  assert.deepEqual(m.lossCounts(1, 0, 10), [1, 50]);
  assert.equal(m.maxIntervalLoss(1, 0, 10), 1 / 6);
  m.level(1, 1);
  m.level(2, 3);
  m.level(2.5, 3); // no change: not a new level
  m.level(6, 2);
  assert.equal(m.levels.length, 3);
  assert.equal(m.levelAt(5), 3);
  assert.equal(m.changesIn(0, 10), 3);
  assert.equal(m.timeUntil(0, 10, (k) => k >= 3), 2);
  assert.equal(m.timeUntil(0, 10, (_k, r) => r >= 60), 2);
  assert.equal(m.timeUntil(0, 10, (k) => k >= 9), Infinity);
  assert.deepEqual(m.levelRange(3, 10), [2, 3]);
  // mean over [0,10]: 0 for 1 s, 1 for 1 s, 3 for 4 s, 2 for 4 s = 21/10
  assert.equal(m.meanLayers(0, 10), 2.1);
  // final level 2; levels 1, 3, 2 from t=1 on are all within one layer of it
  assert.equal(m.convergenceTime(0, 10, 5), 1);
  // with a final level of 3 (window end 5), level 1 is two away: the run starts at t=2
  assert.equal(m.convergenceTime(0, 5, 2), 2);
});

test('Jain and min/max fairness', () => {
  assert.equal(jain([1, 1, 1]), 1);
  assert.equal(jain([1, 0]), 0.5);
  assert.ok(Number.isNaN(jain([])));
  assert.equal(minMaxRatio([100, 50]), 0.5);
  assert.ok(Number.isNaN(minMaxRatio([0, 0])));
});
