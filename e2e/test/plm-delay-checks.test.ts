// The derived PLM / delay-based checks (src/plm-delay-checks.ts) on hand-made player logs and
// emulator samples (no network): what passes, and that a wrong behaviour fails.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { loadScenario } from '../src/scenario.js';
import { plmDelayDerived, ppSamplesWithin, rtpFirstSeen } from '../src/plm-delay-checks.js';
import type { RunResult } from '../src/runner.js';
import { scratchDir } from './scratch.js';

const T0 = 1_000_000;
const scenario = (name: string) => loadScenario(path.join(import.meta.dirname, '..', 'scenarios', `${name}.yaml`));
const result = (name: string) => ({ scenario: name, t0_unix_s: T0 }) as unknown as RunResult;

/** Writes player-<flow>-<rcv>/player.jsonl: one line per second, decisions at their times. */
function player(dir: string, flow: string, rcv: string, secs: { t: number; layers: number; extra?: Record<string, unknown> }[], decisions: [number, number, number, string, Record<string, number>?][]) {
  const d = path.join(dir, `player-${flow}-${rcv}`);
  fs.mkdirSync(d, { recursive: true });
  const lines = secs.map((s) => ({
    t: T0 + s.t,
    layers: s.layers,
    ...s.extra,
    decisions: decisions.filter(([at]) => at > s.t - 1 && at <= s.t).map(([at, from, to, reason, inputs]) => ({ at_s: T0 + at, from, to, reason, inputs: inputs ?? {} })),
  }));
  fs.writeFileSync(path.join(d, 'player.jsonl'), lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
}
const tmp = () => scratchDir('lc-pdc-');
const secs = (a: number, b: number, layers: (t: number) => number, extra?: (t: number) => Record<string, unknown>) =>
  Array.from({ length: b - a + 1 }, (_, i) => ({ t: a + i, layers: layers(a + i), extra: extra?.(a + i) }));

test('E11: one layer per T_nopkt after the blackhole and a re-join 30 s later pass; a late first drop fails', async () => {
  const sc = scenario('plm-e11-blackhole');
  const good = tmp();
  const chain: [number, number, number, string][] = [26.05, 27.05, 28.05, 29.05, 30.05].map((t, i) => [t, 5 - i, 4 - i, 'silence-drop']);
  player(good, 'plm', 'rcv', secs(1, 72, (t) => (t < 26 ? 5 : t < 60 ? 0 : 5)), [[3.2, 0, 1, 'join-base'], ...chain, [60.05, 0, 1, 'rejoin']]);
  const rows = await plmDelayDerived(sc, result(sc.name), good);
  assert.equal(rows.length, 4);
  assert.ok(rows.every((r) => r.pass), JSON.stringify(rows));
  const late = tmp();
  player(late, 'plm', 'rcv', secs(1, 72, () => 0), [[28.5, 5, 4, 'silence-drop'], [60.05, 0, 1, 'rejoin']]);
  const bad = await plmDelayDerived(sc, result(sc.name), late);
  assert.equal(bad[0].pass, false, 'first drop 3.5 s after the blackhole');
  assert.equal(bad[2].pass, false, 'never emptied');
});

test('E10: loss-drops 0.5 s apart while pairs are gone pass; a loss-drop at 5 % loss fails', async () => {
  const sc = scenario('plm-e10-no-pp');
  const dir = tmp();
  const drops: [number, number, number, string, Record<string, number>][] = [20.7, 21.5, 22.4, 23.3].map((t, i) => [t, 14 - i, 13 - i, 'loss-drop', { loss_rate: 0.55 }]);
  player(dir, 'plm', 'rcv', secs(1, 45, () => 12, (t) => ({ pp_samples: t > 21 && t <= 24 ? 0 : 10 })), [...drops, [30.2, 12, 11, 'loss-drop', { loss_rate: 0.17 }]]);
  const rows = await plmDelayDerived(sc, result(sc.name), dir);
  const by = (s: string) => rows.find((r) => r.measurement.includes(s))!;
  assert.equal(by('PP samples').pass, true);
  assert.equal(by('loss-drops during').pass, true);
  assert.ok(Math.abs(by('shortest spacing').value - 0.8) < 1e-6, String(by('shortest spacing').value));
  assert.equal(by('shortest spacing').pass, true);
  assert.equal(by('layers per loss-drop').pass, true);
  assert.equal(by('loss-drops after').pass, false);
  assert.equal(by('loss-drops after').value, 1);
});

test('E10: PP samples count only lines wholly inside the window (the 2 samples of the 21.04-s line were taken before 21 s)', async () => {
  // The testbed run that read "2": lines at 20.017 (34 samples) and 21.043 (2 samples, taken
  // while the emulator's pair rule was being set at 20 s), then none until the rule went off.
  const lines = [
    { t: 19.02, pp_samples: 35 },
    { t: 20.017, pp_samples: 34 },
    { t: 21.043, pp_samples: 2 },
    { t: 22.022, pp_samples: 0 },
    { t: 23.113, pp_samples: 0 },
    { t: 24.018, pp_samples: 0 },
    { t: 25.02, pp_samples: 21 },
  ];
  const w = ppSamplesWithin(lines, 21, 24.02);
  assert.equal(w.samples, 0);
  assert.equal(w.lines, 3);
  assert.deepEqual(w.straddling, [{ from: 20.017, t: 21.043, n: 2 }]);
  // A sample inside the window still counts (and fails the check below).
  const leak = lines.map((x) => (x.t === 23.113 ? { ...x, pp_samples: 1 } : x));
  assert.equal(ppSamplesWithin(leak, 21, 24.02).samples, 1);
  // Through the derived check: the same log passes, the leaking one fails.
  const sc = scenario('plm-e10-no-pp');
  for (const [ls, pass] of [[lines, true], [leak, false]] as const) {
    const dir = tmp();
    const d = path.join(dir, 'player-plm-rcv');
    fs.mkdirSync(d, { recursive: true });
    const all = [...Array.from({ length: 18 }, (_, i) => ({ t: i + 1, pp_samples: 30 })), ...ls, ...Array.from({ length: 20 }, (_, i) => ({ t: 26 + i, pp_samples: 30 }))];
    fs.writeFileSync(path.join(d, 'player.jsonl'), all.map((x) => JSON.stringify({ ...x, t: T0 + x.t, layers: 12, decisions: [] })).join('\n') + '\n');
    const rows = await plmDelayDerived(sc, result(sc.name), dir);
    const r = rows.find((x) => x.measurement.includes('PP samples'))!;
    assert.equal(r.pass, pass, r.text);
  }
});

test('E2: first PP -> k* from the add decision and its first_pp_age_s; a second add past 2 s fails', async () => {
  const sc = scenario('plm-e2-top1-fq');
  const kstar: Record<string, number> = { r1: 25, r2: 12, r3a: 6, r3b: 6 };
  const write = (dir: string, secondAdd: boolean) => {
    for (const [name, k] of Object.entries(kstar)) {
      const adds: [number, number, number, string, Record<string, number>][] = secondAdd
        ? [[7.1, 1, k - 2, 'pp-add', { first_pp_age_s: 1.6, pp_count: 3 }], [8.2, k - 2, k, 'pp-add', { first_pp_age_s: 2.7, pp_count: 12 }]]
        : [[7.1, 1, k, 'pp-add', { first_pp_age_s: 1.6, pp_count: 3 }], [8.2, k, k, 'pp-add', { first_pp_age_s: 2.7, pp_count: 30 }]];
      player(dir, 'plm', name, secs(1, 20, (t) => (t < 5 ? 0 : k)), [[5.02, 0, 1, 'join-base'], ...adds]);
    }
  };
  const good = tmp();
  write(good, false);
  const rows = await plmDelayDerived(sc, result(sc.name), good);
  const r = rows.find((x) => x.measurement.startsWith('first PP -> k*'))!;
  assert.ok(Math.abs(r.value - 1.6) < 1e-9, r.text);
  assert.equal(r.pass, true, r.text);
  assert.match(r.text, /r1=1\.60 \(start->base join 0\.02, ->first PP 0\.48/);
  const bad = tmp();
  write(bad, true);
  const rb = (await plmDelayDerived(sc, result(sc.name), bad)).find((x) => x.measurement.startsWith('first PP -> k*'))!;
  assert.ok(Math.abs(rb.value - 2.7) < 1e-9, rb.text);
  assert.equal(rb.pass, false);
});

test('E9: PLM / TCP_b from the TCP_b run of the same set; a missing benchmark run fails', async () => {
  const set = tmp();
  const tcpDir = path.join(set, 'plm-e9-bursty-a-tcpb');
  fs.mkdirSync(tcpDir);
  fs.writeFileSync(path.join(tcpDir, 'summary.json'), JSON.stringify({ scenario: 'plm-e9-bursty-a-tcpb', measurements: [{ id: 'plm/E9 TCP_b rate 30-150 s (kbit/s)', value: 2000 }, { id: 'plm/E9 background rate 30-150 s with TCP_b (kbit/s)', value: 600 }] }));
  const dir = path.join(set, 'plm-e9-bursty-c1');
  fs.mkdirSync(dir);
  const run = (plmKbps: number) => ({ scenario: 'plm-e9-bursty-c1', t0_unix_s: T0, measurements: [{ id: 'plm/E9 C = 1: PLM rate 30-150 s (kbit/s)', value: plmKbps }, { id: 'plm/E9 C = 1: background rate 30-150 s (kbit/s)', value: 610 }] }) as unknown as RunResult;
  const sc = scenario('plm-e9-bursty-c1');
  const [ok] = await plmDelayDerived(sc, run(1000), dir);
  assert.equal(ok.value, 0.5);
  assert.equal(ok.pass, true, ok.text);
  const [low] = await plmDelayDerived(sc, run(800), dir);
  assert.equal(low.pass, false, 'PLM at 0.40 x TCP_b');
  const lone = path.join(tmp(), 'plm-e9-bursty-c1');
  fs.mkdirSync(lone);
  const [none] = await plmDelayDerived(sc, run(1000), lone);
  assert.equal(none.pass, false);
  assert.match(none.text, /no TCP_b run/);
  // With `full --reps` the runs are `<name>-seed<k>`: the TCP_b run of the same seed is read.
  for (const [seed, tcpb] of [[1, 2000], [2, 1600]]) {
    const d = path.join(set, `plm-e9-bursty-a-tcpb-seed${seed}`);
    fs.mkdirSync(d);
    fs.writeFileSync(path.join(d, 'summary.json'), JSON.stringify({ scenario: 'plm-e9-bursty-a-tcpb', measurements: [{ id: 'plm/E9 TCP_b rate 30-150 s (kbit/s)', value: tcpb }] }));
  }
  const seed2 = path.join(set, 'plm-e9-bursty-c1-seed2');
  fs.mkdirSync(seed2);
  const [s2] = await plmDelayDerived(sc, run(800), seed2);
  assert.equal(s2.value, 0.5, s2.text);
});

test('DE3/DE4 on the DE1 run: queue samples to delay, loss after a join', async () => {
  const sc = scenario('delay-de1-convergence');
  const dir = tmp();
  // 300 kbit/s, 1000 B: one packet = 26.67 ms. Queue of 0 or 1 packets: median 13.3 ms.
  const samples = Array.from({ length: 70 }, (_, i) => ({ t: 10 + i, link: 'r0-r1', dir: 'ab', queue_packets: i % 2, tx_bytes: 0, drops: 0 }));
  fs.writeFileSync(path.join(dir, 'links.json'), JSON.stringify({ samples }));
  const dec: [number, number, number, string, Record<string, number>][] = [[3.1, 0, 1, 'start', {}], [10.2, 5, 6, 'join-timer', { d1: 0.01, d2: 0.025 }]];
  player(dir, 'dlm', 'rcv1', secs(1, 80, () => 6, (t) => ({ lost_1s: t === 11 ? 3 : 0 })), dec);
  player(dir, 'dlm', 'rcv2', secs(1, 80, () => 6, () => ({ lost_1s: 0 })), [[3.1, 0, 1, 'start', {}]]);
  const rows = await plmDelayDerived(sc, result(sc.name), dir);
  const med = rows.find((r) => r.measurement.includes('median'))!;
  assert.ok(Math.abs(med.value - 13.33) < 0.1, String(med.value));
  assert.equal(med.pass, true);
  const joins = rows.find((r) => r.check === 'delay/DE4')!;
  assert.equal(joins.value, 3);
  assert.equal(joins.pass, false);
});

test('E2: the set-aside row counts pp-set-aside decisions per receiver and lists the emulator release error', async () => {
  const sc = scenario('plm-e2-top1-fq');
  const dir = tmp();
  const conv: [number, number, number, string, Record<string, number>?][] = [[5.05, 0, 1, 'join-base']];
  player(dir, 'plm', 'r1', secs(1, 60, (t) => (t < 8 ? 1 : 25)), [
    ...conv,
    [7.4, 1, 25, 'pp-add', { bhat_e: 255_900, first_pp_age_s: 1.6 }],
    [20.5, 25, 25, 'pp-set-aside', { pp_sample: 241_000, next_sample: 255_800 }],
    [31.2, 25, 25, 'pp-set-aside', { pp_sample: 249_600, next_sample: 256_000 }],
  ]);
  for (const r of ['r2', 'r3a', 'r3b']) player(dir, 'plm', r, secs(1, 60, (t) => (t < 8 ? 1 : 6)), [...conv]);
  fs.writeFileSync(path.join(dir, 'linkemu-1.json'), JSON.stringify({ ab: { release_error: { n: 3000, p99_us: 76, p999_us: 366, max_us: 1931 } } }));
  const rows = await plmDelayDerived(sc, result(sc.name), dir);
  const r = rows.find((x) => x.measurement.startsWith('pair samples set aside'))!;
  assert.equal(r.value, 2);
  assert.equal(r.pass, null, 'evidence only, no band');
  assert.match(r.text, /r1: 2 set aside \(241-249\.6 kbit\/s\), 0 pp-drop/);
  assert.match(r.text, /n1-r1 76\/366\/1931/);
});

/** A classic pcap (µs stamps, Linux cooked v1) of RTP/UDP/IPv4 packets: [unix s, ssrc, seq]. */
function pcap(file: string, pkts: [number, number, number][]) {
  const head = Buffer.alloc(24);
  head.writeUInt32LE(0xa1b2c3d4, 0);
  head.writeUInt16LE(2, 4);
  head.writeUInt16LE(4, 6);
  head.writeUInt32LE(64, 16);
  head.writeUInt32LE(113, 20);
  const recs = pkts.map(([t, ssrc, seq]) => {
    const data = Buffer.alloc(16 + 20 + 8 + 12);
    data[16] = 0x45;
    data[16 + 9] = 17;
    data.writeUInt16BE(seq, 16 + 28 + 2);
    data.writeUInt32BE(ssrc, 16 + 28 + 8);
    const rh = Buffer.alloc(16);
    rh.writeUInt32LE(Math.floor(t), 0);
    rh.writeUInt32LE(Math.round((t - Math.floor(t)) * 1e6), 4);
    rh.writeUInt32LE(data.length, 8);
    rh.writeUInt32LE(1000, 12);
    return Buffer.concat([rh, data]);
  });
  fs.writeFileSync(file, Buffer.concat([head, ...recs]));
}

test('DE3 from captures on both ends of the bottleneck: per-packet sojourn, the 1-s queue samples only informational', async () => {
  const sc = scenario('delay-de1-convergence');
  const dir = tmp();
  const samples = Array.from({ length: 70 }, (_, i) => ({ t: 10 + i, link: 'r0-r1', dir: 'ab', queue_packets: 0, tx_bytes: 0, drops: 0 }));
  fs.writeFileSync(path.join(dir, 'links.json'), JSON.stringify({ samples }));
  player(dir, 'dlm', 'rcv1', secs(1, 80, () => 6, () => ({ lost_1s: 0 })), [[10.2, 5, 6, 'join-timer', { d1: 0.01, d2: 0.025 }]]);
  player(dir, 'dlm', 'rcv2', secs(1, 80, () => 6, () => ({ lost_1s: 0 })), []);
  // 1000 packets from 10 s, every 70 ms; across the link 46.67 ms + a wait of 0, 10, 20, 30 ms
  // in turn (median 15 ms). The downstream router also logs each packet's forwarded copy
  // later: only the first sighting counts. One more packet (at 79.96 s) never arrives.
  const up: [number, number, number][] = [];
  const down: [number, number, number][] = [];
  for (let i = 0; i <= 1000; i++) {
    const t = T0 + 10 + Math.min(i * 0.07, 69.96);
    up.push([t, 7, i]);
    if (i === 1000) continue;
    const at = t + 0.04667 + (i % 4) * 0.01;
    down.push([at, 7, i], [at + 0.0001, 7, i]);
  }
  pcap(path.join(dir, 'pcap-bottleneck-r0.pcap'), up);
  pcap(path.join(dir, 'pcap-bottleneck-r1.pcap'), down);
  assert.equal(rtpFirstSeen(path.join(dir, 'pcap-bottleneck-r1.pcap')).size, 1000);
  const rows = await plmDelayDerived(sc, result(sc.name), dir);
  const sampled = rows.find((r) => r.measurement.includes('1-s samples'))!;
  assert.equal(sampled.value, 0);
  assert.equal(sampled.pass, null);
  const soj = rows.find((r) => r.measurement.includes('sojourn (queueing) median'))!;
  assert.ok(Math.abs(soj.value - 15) < 0.01, String(soj.value));
  assert.equal(soj.pass, true);
  assert.match(soj.text, /1000 packets/);
  const p99 = rows.find((r) => r.measurement.includes('sojourn (queueing) p99'))!;
  assert.ok(Math.abs(p99.value - 30) < 0.01, String(p99.value));
  assert.equal(p99.pass, true);
});

test('DE8: an exit whose decision the player could not log is taken from its exit event line', async () => {
  const sc = scenario('delay-de8-exit');
  const dir = tmp();
  // Player started at T0 + 1 (elapsed 0); lines to 34 s, then the exit event at elapsed 35.
  player(dir, 'dlm', 'rcv', secs(2, 34, (t) => (t < 26 ? 10 : 1), (t) => ({ elapsed_s: t - 1 })), [[25.5, 10, 9, 'leave-timer', {}]]);
  const file = path.join(dir, 'player-dlm-rcv', 'player.jsonl');
  fs.appendFileSync(file, JSON.stringify({ event: 'exit', elapsed_s: 35, packets_received: 1, packets_lost: 1 }) + '\n');
  const rows = await plmDelayDerived(sc, result(sc.name), dir);
  const ex = rows.find((r) => r.measurement.startsWith('exit after'))!;
  assert.ok(Math.abs(ex.value - (36 - 25)) < 1e-6, String(ex.value));
  assert.equal(ex.pass, true);
  assert.match(ex.text, /exit event/);
  // The last line (34 s, 1 layer) is before the window: nothing held after the exit.
  const held = rows.find((r) => r.measurement.startsWith('layers held'))!;
  assert.equal(held.value, 0);
  assert.equal(held.pass, true);
  // Without the event line: no exit.
  fs.writeFileSync(file, fs.readFileSync(file, 'utf8').split('\n').filter((l) => !l.includes('"event"')).join('\n'));
  const none = (await plmDelayDerived(sc, result(sc.name), dir)).find((r) => r.measurement.startsWith('exit after'))!;
  assert.equal(none.pass, false);
  assert.match(none.text, /no exit/);
});
