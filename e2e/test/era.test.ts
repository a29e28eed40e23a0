// One ERA scenario end to end on the emulated network (era.md AC-2 shape, shortened to 25 s):
// layercast-server with synthetic layers, two layercast-player receivers behind a 300 kbit/s
// bottleneck with the link emulator, igmpproxy routers. Skipped until the media binaries exist.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { parseScenario } from '../src/scenario.js';
import { runScenario } from '../src/runner.js';
import { mediaBins } from '../src/media.js';
import fs from 'node:fs';
import { scratchDir } from './scratch.js';

const ERA = `
name: e2e-era-convergence
title: ERA Experiment I, shortened (e2e fast set)
source: era.md AC-2
duration_s: 25
topology:
  nodes: [src, r1, r2, rcv1, rcv2]
  links:
    - {from: src, to: r1, rate_kbps: 10000, delay_ms: 5}
    - {from: r1, to: r2, rate_kbps: 300, delay_ms: 20, queue: {kind: droptail, limit_ms: 120}}
    - {from: r2, to: rcv1, rate_kbps: 10000, delay_ms: 5}
    - {from: r2, to: rcv2, rate_kbps: 10000, delay_ms: 5}
  multicast: {fast_leave: true}
flows:
  - type: layered
    name: era
    protocol: era
    from: src
    layers: {count: 100, rate_kbps: 20}
    receivers:
      - {name: a, at: rcv1, start_s: 3}
      - {name: b, at: rcv2, start_s: 3}
measurements:
  - {id: "e2e era reaches 12 layers", metric: time_to_level, of: [era], min_layers: 12, max: 10}
  - {id: "e2e era throughput", metric: throughput_kbps, of: [era], window: [13, 25], min: 200, max: 330}
`;

const bins = mediaBins();
const skip = !bins.server || !bins.player ? 'layercast-server / layercast-player not built yet' : false;

test('ERA session through a 300 kbit/s emulated bottleneck: players receive, climb, and measure the bottleneck', { skip }, async () => {
  const out = scratchDir('lc-e2e-era-');
  const r = await runScenario(parseScenario(ERA), { outDir: out, log: () => {} });
  const where = `(report ${out}/report.html; notes: ${r.notes.join('; ')})`;
  for (const name of ['era/a', 'era/b']) {
    const mon = r.monitors.find((m) => m.name === name)!;
    assert.equal(mon.not_run, null, where);
    assert.ok(mon.received > 100, `${name} received ${mon.received} ${where}`);
    const rcv = name.split('/')[1];
    const lines = fs
      .readFileSync(path.join(out, `player-era-${rcv}`, 'player.jsonl'), 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { layers?: number; pp_bps_median_payload?: number | null });
    const maxLayers = Math.max(...lines.map((l) => l.layers ?? 0));
    assert.ok(maxLayers >= 5, `${name} never held more than ${maxLayers} layers ${where}`);
    // The emulated bottleneck serialises: packet-pair dispersion gives its rate (payload bits,
    // the unit the testbed's links count), within 5% (era.md AC-1, repeated at 300 kbit/s).
    const pp = lines.map((l) => l.pp_bps_median_payload).filter((x): x is number => typeof x === 'number').sort((a, b) => a - b);
    assert.ok(pp.length >= 5, `${name}: ${pp.length} packet-pair estimates ${where}`);
    const med = pp[Math.floor(pp.length / 2)];
    assert.ok(Math.abs(med / 300_000 - 1) < 0.05, `${name}: median packet-pair estimate ${med} bit/s for 300 kbit/s ${where}`);
  }
  // The protocol's own pass bands (AC-2 shape) are reported, not asserted here: they judge
  // ERA and the sender, and belong to the full set (npm run full -w e2e).
  for (const m of r.measurements) console.error(`${m.pass ? 'pass' : 'FAIL'} ${m.id}: ${m.value}`);
});
