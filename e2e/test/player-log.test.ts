// Layered monitors from a player's log: the level changes at the controller's decision times,
// not at the once-a-second line that reports it (a time to level read from the lines alone
// came out up to 1 s late: era/AC-3, docs/testbed.md "ERA checks, third pass").
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Monitor } from '../src/metrics.js';
import { readPlayerLog } from '../src/runner.js';

test('a layered monitor takes the level from the decisions, at their own times', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lc-playerlog-'));
  const file = path.join(dir, 'player.jsonl');
  const t0 = 1_000_000; // ms: the run's epoch
  const at = (s: number) => t0 / 1000 + s;
  const line = (s: number, layers: number, decisions: { at_s: number; to: number }[]) =>
    JSON.stringify({ t: at(s), elapsed_s: s, layers, rate_bps: 20000 * layers, packets_1s: 5, lost_1s: 0, decisions });
  fs.writeFileSync(
    file,
    [
      line(1, 1, [{ at_s: at(0.3), to: 1 }]),
      line(2, 1, []),
      // The climb to 15 at 2.30 s and a step-1 drop to 14 at 2.70 s, reported by the 3-s line.
      line(3, 14, [{ at_s: at(2.3), to: 15 }, { at_s: at(2.7), to: 14 }]),
      line(4, 14, []),
    ].join('\n') + '\n',
  );
  const mon = new Monitor('era/rcv', 'era', 'layered');
  const notes: string[] = [];
  readPlayerLog(file, mon, t0, 1, notes);
  assert.deepEqual(notes, []);
  const to15 = mon.timeUntil(0, 4, (k) => k >= 15);
  assert.ok(Math.abs(to15 - 2.3) < 1e-6, `time to 15 layers ${to15}`);
  assert.equal(mon.levelAt(2.5), 15);
  assert.equal(mon.levelAt(3.5), 14);
  // A log without decisions keeps the line times.
  const plain = path.join(dir, 'plain.jsonl');
  fs.writeFileSync(plain, [line(1, 1, []), line(3, 15, [])].map((l) => l.replace(/,"decisions":\[\]/, '')).join('\n') + '\n');
  const m2 = new Monitor('era/rcv', 'era', 'layered');
  readPlayerLog(plain, m2, t0, 1, notes);
  assert.ok(Math.abs(m2.timeUntil(0, 4, (k) => k >= 15) - 3) < 1e-6);
  fs.rmSync(dir, { recursive: true, force: true });
});
