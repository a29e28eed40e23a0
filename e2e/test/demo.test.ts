// `make demo` end to end, shortened to 30 s with --duration (docs/demo.md): the demo scenario's
// four viewers behind 0.5, 1.5, 4 and 4 (+TCP) Mbit/s. Asserts what the demo is meant to show,
// read from the server's /api/viewers through the root-namespace dashboard link: every viewer
// reports, the one behind 0.5 Mbit/s holds fewer layers than the one behind 4 Mbit/s; and that
// teardown leaves no namespace and no root interface. Skipped while the media binaries are not
// built.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { findBinary } from '../src/bins.js';
import { listNamespaces } from '../src/netns.js';
import { iperfRateBps, meanLayers, runDemo } from '../src/demo.js';
import { run } from '../src/sh.js';
import { scratchDir } from './scratch.js';

const skip =
  !findBinary('layercast-server') || !findBinary('layercast-player') || !findBinary('layercast-linkemu')
    ? 'layercast-server / layercast-player / layercast-linkemu not built yet'
    : false;

test('iperf3 interval lines parse to bit/s', () => {
  assert.equal(iperfRateBps('[  5]   1.00-2.00   sec   238 KBytes  1.95 Mbits/sec    0   85.5 KBytes'), 1.95e6);
  assert.equal(iperfRateBps('[  5]   0.00-1.00   sec  61.2 KBytes   501 Kbits/sec'), 501e3);
  assert.equal(iperfRateBps('- - - - - - - -'), null);
});

test('demo: 0.5 Mbit/s viewer holds fewer layers than the 4 Mbit/s one; teardown leaves nothing', { skip }, async (t) => {
  const out = scratchDir('lc-e2e-demo-');
  const lines: string[] = [];
  const r = await runDemo({ durationS: 30, statusEveryS: 2, outDir: out, log: () => {}, out: (l) => lines.push(l), display: '' });
  const ctx = `(output:\n${lines.join('\n')}\nlogs ${out})`;

  assert.match(r.url, /^http:\/\/10\.201\.\d+\.2:8080\/$/, ctx);
  assert.ok(lines.some((l) => l.startsWith('dashboard: http://')), ctx);
  if (r.source === 'synthetic') assert.ok(r.sourceNote && /synthetic/i.test(r.sourceNote), 'a synthetic run says so');

  // The last 10 s (after convergence): every viewer reported, and the ordering by bottleneck.
  const tail = r.samples.filter((s) => s.t >= 20);
  assert.ok(tail.length >= 3, `status samples after 20 s: ${tail.length} ${ctx}`);
  const last = tail[tail.length - 1].viewers.map((v) => v.id);
  for (const id of ['v500k', 'v1m5', 'v4m', 'v4m-tcp']) assert.ok(last.includes(id), `viewer ${id} in /api/viewers ${ctx}`);
  const m = meanLayers(r, 20);
  const slow = m.get('v500k')!;
  const fast = m.get('v4m')!;
  t.diagnostic(`source ${r.source}; mean layers over t >= 20 s: ${[...m].map(([k, v]) => `${k} ${v.toFixed(2)}`).join(', ')}`);
  assert.ok(slow >= 1, `the 0.5 Mbit/s viewer holds the base layer: ${slow} ${ctx}`);
  assert.ok(slow < fast, `layers 0.5 Mbit/s ${slow} < 4 Mbit/s ${fast} ${ctx}`);

  // Teardown: none of the run's namespaces, no lc- namespace of this process, no root veth.
  assert.ok(r.namespaces.length >= 6, `namespaces created: ${r.namespaces.join(' ')}`);
  const now = await listNamespaces();
  for (const ns of r.namespaces) assert.ok(!now.includes(ns), `namespace ${ns} still present`);
  assert.deepEqual(r.leftover, []);
  assert.equal((await run('ip', ['link', 'show', `lcd${process.pid % 10_000_000}`], { allowFail: true })).code !== 0, true, 'root veth removed');
  // and the dashboard address no longer answers
  await assert.rejects(fetch(`${r.url}api/viewers`, { signal: AbortSignal.timeout(1000) }));
});
