// Namespace plumbing: topology build, emulator and tbf links, iperf3 flows, metrics and report,
// IGMP join/leave through igmpproxy, teardown and cleanup. Needs root, iproute2, ethtool,
// iperf3, igmpproxy, ping and a built layercast-linkemu.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Net, cleanup, listNamespaces, ownerPrefix } from '../src/netns.js';
import { buildTopology } from '../src/topology.js';
import { parseScenario } from '../src/scenario.js';
import { runScenario } from '../src/runner.js';
import { measureGroupReach, measureLeaveLatency } from '../src/leave.js';
import { nsRun, run } from '../src/sh.js';
import { recordAcceptance } from '../src/acceptance.js';
import { cpuSteal, stealBetween } from '../src/steal.js';
import { scratchDir } from './scratch.js';

const tmp = () => scratchDir('lc-e2e-');
const ours = async () => (await listNamespaces()).filter((n) => n.startsWith(ownerPrefix()));

const LINE = `
name: plumbing
duration_s: 10
topology:
  nodes: [a, r, b]
  links:
    - {from: a, to: r, rate_kbps: 10000, delay_ms: 0}
    - {from: r, to: b, rate_kbps: 2000, delay_ms: 10, queue: {kind: droptail, limit_packets: 30}}
flows:
  - {type: tcp, name: bulk, from: a, to: b, variant: reno, packet_size: 1500, start_s: 0, stop_s: 10}
measurements:
  - {id: "plumbing tcp rate", metric: throughput_kbps, of: [bulk], window: [3, 9], min: 1800, max: 2000}
`;

test('ping across a built topology: RTT is twice the emulated delay, tbf and emulator links both carry it', async (t) => {
  const sc = parseScenario(LINE);
  const net = new Net();
  try {
    const b = await buildTopology(net, sc, { dir: tmp() });
    assert.equal(b.links[0].kind, 'tbf');
    assert.equal(b.links[1].kind, 'linkemu');
    const dst = b.toward('b', 'a').addr;
    // The median of 25 pings over 1.25 s. A window in which the host took a vCPU away (steal)
    // delays every release on it and measures the host, not the emulator (CI once read 22.8 ms
    // here; idle runs read 20.5-20.7). Such an attempt is reported and measured again, at most
    // three times; an attempt that misses without steal fails at once.
    let med = NaN;
    let last = '';
    for (let attempt = 1; attempt <= 3; attempt++) {
      const s0 = cpuSteal();
      const out = await nsRun(b.nodeNs.get('a')!, 'ping', ['-c', '25', '-i', '0.05', '-W', '2', dst], { timeoutMs: 20_000 });
      const steal = Math.max(0, ...(stealBetween(s0, cpuSteal()) ?? [0]));
      const rtts = out.stdout
        .split('\n')
        .map((l) => /time=([\d.]+)/.exec(l)?.[1])
        .filter((x): x is string => !!x)
        .map(Number)
        .sort((x, y) => x - y);
      assert.ok(rtts.length >= 20, out.stdout);
      med = rtts[Math.floor(rtts.length / 2)];
      last = `median RTT ${med} ms for 2 x 10 ms (attempt ${attempt}, hypervisor steal up to ${steal.toFixed(1)} % of a vCPU; RTTs ${rtts.join(' ')})`;
      if (Math.abs(med - 20) < 1 || steal < 5) break;
      t.diagnostic(`host steal during the measurement, measuring again: ${last}`);
    }
    assert.ok(Math.abs(med - 20) < 1, last);
    const snap = await b.links[1].emu!.get();
    assert.ok(snap.ab.counters.tx_packets >= 25 && snap.ba.counters.tx_packets >= 25);
  } finally {
    await net.teardown();
  }
  assert.deepEqual(await ours(), []);
});

test('a scenario run: TCP through the bottleneck at the link rate, summary and report written, namespaces gone', async () => {
  const out = tmp();
  const r = await runScenario(parseScenario(LINE), { outDir: out, log: () => {} });
  const m = r.measurements[0];
  assert.ok(m.pass, `TCP throughput ${m.value} kbit/s outside [1800, 2000]; notes: ${r.notes.join('; ')}`);
  const bott = r.links.find((l) => l.name === 'r-b')!;
  assert.equal(bott.kind, 'linkemu');
  assert.ok(bott.utilisation > 0.6, `bottleneck utilisation ${bott.utilisation}`);
  const html = fs.readFileSync(path.join(out, 'report.html'), 'utf8');
  assert.match(html, /<svg/);
  assert.match(html, /plumbing tcp rate/);
  const csv = fs.readFileSync(path.join(out, 'timeseries.csv'), 'utf8');
  assert.match(csv, /^t_s,monitor,kind,rate_kbps,layers,received,lost,loss_ratio\n/);
  assert.deepEqual(await ours(), []);
});

test('IGMP through the fast-leave mrouter: traffic arrives after a join and stops on the bottleneck after the leave', async () => {
  const r = await measureLeaveLatency({ fastLeave: true, cycles: 3, holdMs: 1000, gapMs: 1500, outDir: tmp() });
  for (const c of r.cycles) {
    assert.ok(Number.isFinite(c.join_ms) && c.join_ms > 0, `join ${c.join_ms}`);
    // pruned: the group's last packet crossed the bottleneck after the leave and well before
    // the next look (a route left in place shows as Infinity)
    assert.ok(Number.isFinite(c.leave_ms) && c.leave_ms > 0 && c.leave_ms < 1000, `leave ${c.leave_ms}`);
    assert.ok(c.igmp_leave_seen_on_link);
  }
  const cmd = 'npm test -w e2e (test/plumbing.test.ts) or layercast-e2e leave-latency';
  const v = `leave median ${r.leave_ms_median.toFixed(1)} ms, max ${r.leave_ms_max.toFixed(1)} ms; join median ${r.join_ms_median.toFixed(1)} ms (layercast-linkemu mrouter, 3 cycles)`;
  recordAcceptance('issue7/leave-latency', v, null, cmd);
  recordAcceptance('era/AC-14', v, r.leave_ms_max <= 200, cmd);
  recordAcceptance('plm/E0', v, r.leave_ms_max <= 200 && r.join_ms_median <= 50, cmd);
  assert.deepEqual(await ours(), []);
});

test('chained routers carry 40 groups joined at once (sessions have up to 255 layers)', async () => {
  const counts = await measureGroupReach({ groups: 40, outDir: tmp() });
  const missing = counts.flatMap((c, k) => (c > 0 ? [] : [k]));
  assert.deepEqual(missing, [], `groups never received: ${missing.join(', ')}`);
  assert.deepEqual(await ours(), []);
});

test('igmpproxy, for comparison: joins work; the leave crosses the bottleneck', async () => {
  const r = await measureLeaveLatency({ fastLeave: true, router: 'igmpproxy', cycles: 1, holdMs: 1000, gapMs: 1500, outDir: tmp() });
  for (const c of r.cycles) {
    assert.ok(Number.isFinite(c.join_ms) && c.join_ms > 0, `join ${c.join_ms}`);
    // igmpproxy 0.3 prunes only when it ages routes, seconds later (Infinity within 1.5 s)
    assert.ok(c.leave_ms > 0, `leave ${c.leave_ms}`);
    assert.ok(c.igmp_leave_seen_on_link);
  }
  assert.deepEqual(await ours(), []);
});

test('Ctrl-C tears everything down', async () => {
  const { spawn } = await import('node:child_process');
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(import.meta.dirname, 'fixtures-hold.ts'), tmp()], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const prefix = `lc-e${child.pid}-`;
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('fixture did not build in 30 s')), 30_000);
    child.stdout!.on('data', (d) => {
      if (String(d).includes('built')) {
        clearTimeout(t);
        resolve();
      }
    });
  });
  const before = (await listNamespaces()).filter((n) => n.startsWith(prefix));
  assert.equal(before.length, 3, `namespaces while running: ${before.join(' ')}`);
  child.kill('SIGINT');
  const code = await new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
  assert.equal(code, 130);
  assert.deepEqual((await listNamespaces()).filter((n) => n.startsWith(prefix)), []);
});

test('cleanup removes namespaces of dead runs only, unless told all', async () => {
  const dead = 'lc-e4194300-cleanup-test'; // above pid_max: no live owner
  const live = `${ownerPrefix()}cleanup-test`;
  await run('ip', ['netns', 'add', dead]);
  await run('ip', ['netns', 'add', live]);
  try {
    const removed = await cleanup();
    assert.ok(removed.includes(dead));
    assert.ok(!removed.includes(live));
    assert.ok((await listNamespaces()).includes(live));
    assert.deepEqual(await cleanup({ prefix: live }), [live]);
  } finally {
    await run('ip', ['netns', 'del', dead], { allowFail: true });
    await run('ip', ['netns', 'del', live], { allowFail: true });
  }
});
