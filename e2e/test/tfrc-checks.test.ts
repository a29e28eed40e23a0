// The TFRC testbed checks (src/tfrc-checks.ts, tfrc-tfmcc-pcc.md §7.3 E1-E5): the derived rows'
// arithmetic on hand-made logs, and that every check's scenario parses. The live runs take
// minutes each: `node --import tsx e2e/src/tfrc-checks.ts` (docs/testbed.md, "TFRC on the
// testbed"); the live sender and receiver loops have loopback tests in their crates.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checks, cov, e1Rows, e2Rows, e3Row, e4Rows, e5Rows, PACKET, type FlowSeries, type SenderLine } from '../src/tfrc-checks.js';

const series = (tfrc: number[][], tcp: number[][]): FlowSeries => ({
  tfrc: new Map(tfrc.map((v, i) => [`tfrc${i}`, v])),
  tcp: new Map(tcp.map((v, i) => [`tcp${i}`, v])),
});

test('every check builds a scenario with the spec path', () => {
  const cs = checks();
  assert.deepEqual(cs.map((c) => c.key), ['e1', 'e2-4', 'e2-8', 'e4', 'e5', 'e8']);
  const e1 = cs[0].scenario;
  const bn = e1.topology.links.find((l) => l.from === 'r0' && l.to === 'r1')!;
  assert.equal(bn.rate_kbps, 10_000);
  assert.equal(bn.delay_ms * 2, 40, 'base RTT 40 ms');
  assert.equal(bn.queue?.limit_ms, 40, '1 BDP');
  assert.equal(cs[2].tfrc.length, 8);
  assert.equal(cs[2].scenario.flows.filter((f) => f.type === 'tcp').length, 8);
  assert.ok(cs[5].scenario.flows.some((f) => f.type === 'tfmcc'));
  assert.deepEqual(cs[4].blackout, [30, 50]);
});

test('E1/E2/E3 rows: ratios, utilization, Jain, CoV', () => {
  const s = series([[5e6, 5e6, 5e6]], [[4e6, 6e6, 5e6]]);
  const [ratio, use] = e1Rows(s, [60, 180], 10e6);
  assert.equal(ratio.value, 1);
  assert.equal(ratio.pass, true);
  assert.equal(use.value, 1);
  const e3 = e3Row(s, [60, 180], 'x');
  assert.equal(e3.value, 0, 'a constant TFRC rate has CoV 0');
  assert.equal(e3.pass, true);
  assert.ok(Math.abs(cov([4, 6, 5]) - 0.2) < 1e-12);
  // 2 + 2 on 4 Mbit/s: TCP gets half of its fair share.
  const [norm, j] = e2Rows(series([[1.5e6], [1.5e6]], [[0.5e6], [0.5e6]]), [0, 1], 4e6, 2);
  assert.equal(norm.value, 0.5);
  assert.equal(norm.pass, false);
  assert.ok(Math.abs(j.value - 16 / 20) < 1e-12);
});

const state = (t: number, x: number): SenderLine => ({ t, x_bps: x, send_rate_bps: x });

test('E4 rows: peak and the rate 10 s after the first loss report', () => {
  const log: SenderLine[] = [state(1, 1e6), state(1.5, 21e6), { t: 2, ev: 'fb', p: 1e-3, x_bps: 10e6 }];
  for (let t = 2.1; t < 14; t += 0.1) log.push(state(t, 9e6));
  const [peak, after] = e4Rows(log, 10e6);
  assert.equal(peak.value, 2.1);
  assert.equal(peak.pass, true);
  assert.ok(Math.abs(after.value - 0.9) < 1e-12);
  assert.equal(after.pass, true);
  log[1] = state(1.5, 23e6);
  assert.equal(e4Rows(log, 10e6)[0].pass, false, 'peak above 2.2 x');
});

test('E5 rows: halvings on schedule pass; a rise in the blackout or a wrong interval fails', () => {
  const r = 0.05;
  const mk = (rise: boolean, skew: number) => {
    const log: SenderLine[] = [];
    for (let t = 20; t < 30; t += 0.1) log.push(state(t, 8e6));
    let x = 8e6;
    let t = 30 + 4 * r;
    while (t < 50) {
      const interval = Math.max(4 * r, (2 * 8 * PACKET) / x);
      log.push({ t, ev: 'nofeedback', x_before_bps: x, x_after_bps: x / 2, interval_s: interval * skew, expected_interval_s: interval });
      x /= 2;
      log.push(state(t + 0.01, x));
      t += (2 * 8 * PACKET) / x > 4 * r ? (2 * 8 * PACKET) / x : 4 * r;
    }
    log.push({ t: 50.2, ev: 'fb', p: 1e-3, x_bps: x });
    // A sample in the blackout above the one before it: X rose with no feedback.
    if (rise) log.push(state(45.05, 1e6));
    return e5Rows(log.sort((a, b) => a.t - b.t), 30, 50);
  };
  const ok = mk(false, 1);
  assert.deepEqual(ok.slice(0, 4).map((x) => x.pass), [true, true, true, true], JSON.stringify(ok, null, 1));
  assert.ok(ok[0].text.includes('of'), ok[0].text);
  assert.equal(mk(true, 1)[2].pass, false, 'X rose without feedback');
  assert.equal(mk(false, 1.2)[1].pass, false, 'intervals 20 % long');
});
