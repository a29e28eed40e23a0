// Layercast through FRR PIM routers, the fast case (issue 25; docs/testbed.md "PIM"): one
// sender behind the first-hop router (also the RP), a second-tier router, two ERA players
// behind it at 1 Mbit/s and 500 kbit/s: two routers from the sender, source-specific (232/8,
// IGMPv3). The players settle at different levels; the routers' own state shows IGMPv3
// INCLUDE{sender} joins of exactly those layers and the PIM joins upstream; nothing of the run
// (namespaces, FRR daemons, their state directories) is left. About 20 s. Also: how a
// router's config is made from deploy/router/frr/frr.conf.
// The longer measurements: `npm run cli -w e2e -- pim` (src/pim.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { findBinary } from '../src/bins.js';
import { Bed, SSM_GROUP } from '../src/bed.js';
import { stateDirs } from '../src/netns.js';
import { sleep } from '../src/sh.js';
import { recordAcceptance } from '../src/acceptance.js';
import { FRR_CONF, routerConfig, rpAddress, withFrrDefaults } from '../src/frr.js';
import { scratchDir } from './scratch.js';

const skip =
  (!findBinary('layercast-server') || !findBinary('layercast-player') || !findBinary('layercast-linkemu')) && !process.env.LAYERCAST_REQUIRE_BINS
    ? 'layercast-server / layercast-player / layercast-linkemu not built yet'
    : !fs.existsSync('/usr/lib/frr/pimd') && !process.env.LAYERCAST_REQUIRE_BINS
      ? "FRR not installed (Debian's frr; scripts/setup.sh)"
      : false;

const LADDER = Array(8).fill(220);
const base = SSM_GROUP.split('.').map(Number);
const layerOf = (g: string) => Number(g.split('.')[3]) - base[3];
const inSession = (g: string) => g.startsWith(`${base[0]}.${base[1]}.${base[2]}.`);

interface IgmpGroups {
  [ifc: string]: { groups?: { group: string; mode: string; version: number }[] } | number;
}
interface IgmpSources {
  [ifc: string]: Record<string, { group?: string; sources?: { source: string }[] }> ;
}

test("a router's config: frr.conf's global lines, each interface given its role's block", () => {
  const conf = fs.readFileSync(FRR_CONF, 'utf8');
  const out = routerConfig(conf, 'r1', new Map([['app0', 'src'], ['lk0', 'core'], ['lk1', 'host'], ['lk2', 'host']] as const));
  const blockOf = (text: string, name: string) => {
    const m = new RegExp(`^interface ${name}\n((?: .*\n)*)exit$`, 'm').exec(text);
    return m ? m[1].trim().split('\n').map((l) => l.trim()) : null;
  };
  const block = (name: string) => blockOf(out, name);
  assert.deepEqual(block('app0'), ['ip pim']);
  assert.deepEqual(block('lk0'), ['ip pim']);
  for (const i of ['lk1', 'lk2']) {
    assert.deepEqual(block(i), ['ip pim', 'ip igmp', 'ip igmp version 3', 'ip igmp query-interval 10', 'ip igmp query-max-response-time 20', 'ip igmp last-member-query-interval 1', 'ip igmp last-member-query-count 1']);
  }
  assert.deepEqual(block('lo'), ['ip pim']);
  // The role templates themselves are not interfaces of this router.
  for (const t of ['src0', 'core0', 'host0']) assert.equal(block(t), null);
  assert.match(out, /^hostname r1$/m);
  assert.match(out, /^ip pim ssm prefix-list layercast-ssm$/m);
  assert.match(out, /^ip pim spt-switchover infinity-and-beyond$/m);
  assert.equal(rpAddress(conf), '10.255.0.1');
  // The global lines come after the interfaces (pimd takes the RP once it has a PIM interface).
  assert.ok(out.indexOf('ip pim rp ') > out.lastIndexOf('interface '));
  // FRR's defaults: the IGMP timer lines go, nothing else does.
  const d = routerConfig(withFrrDefaults(conf), 'r1', new Map([['lk1', 'host']] as const));
  assert.deepEqual(blockOf(d, 'lk1'), ['ip pim', 'ip igmp', 'ip igmp version 3']);
  assert.throws(() => routerConfig('ip pim rp 10.0.0.1 224.0.0.0/4\n', 'r', new Map([['x', 'host']] as const)), /no block "interface host0"/);
});

test('two ERA players two PIM routers from the sender hold different levels, joined source-specifically', { skip }, async () => {
  const dir = scratchDir('lc-e2e-pim-');
  const bed = await Bed.start({
    dir,
    players: [
      { name: 'fast', rateKbps: 1000, at: 'hub0' },
      { name: 'slow', rateKbps: 500, at: 'hub0' },
    ],
    source: 'synthetic',
    ladderKbps: LADDER,
    controller: 'era',
    router: 'frr',
    edges: 1,
    ssm: true,
    packetSize: 512,
    session: { bunch_len: 2 },
  });
  const daemons = bed.b.routers.flatMap((r) => r.frr?.children ?? []);
  const where = `(logs ${dir})`;
  try {
    assert.equal(bed.b.routers.length, 2, where);
    assert.ok(daemons.length === 4 && daemons.every((c) => c.exitCode === null), `zebra and pimd on both routers ${where}`);
    const want = { fast: bed.carries('fast'), slow: bed.carries('slow') };
    assert.deepEqual(want, { fast: 4, slow: 2 });
    await sleep(14_000);
    for (const [name, k] of Object.entries(want)) {
      const lines = bed.lines(name);
      const last = lines.slice(-5).map((l) => l.layers);
      assert.ok(lines.some((l) => l.layers === k), `${name} never reached ${k} layers: ${JSON.stringify(lines.map((l) => l.layers))} ${where}`);
      // Held: the median of the last 5 s at the level, never above it (a single drop on a
      // pair the loaded host spread may show for a second).
      const sorted = [...last].sort((a, b) => a - b);
      assert.equal(sorted[2], k, `${name} last 5 s ${JSON.stringify(last)} ${where}`);
      assert.ok(Math.max(...last) <= k, `${name} above ${k}: ${JSON.stringify(last)} ${where}`);
    }
    const stderr = fs.readFileSync(path.join(dir, 'player-fast', 'stderr.log'), 'utf8');
    assert.match(stderr, /SSM from 10\.201\.0\.2/, `the player took the SSM source from the description ${where}`);

    // The second-tier router's IGMP state: on each player's interface, IGMPv3 INCLUDE records
    // of exactly the layers the player holds, with the sender as the one source.
    const hub = bed.b.routers.find((r) => r.node === 'hub0')!.frr!;
    const src = bed.b.routers.find((r) => r.node === 'src')!.frr!;
    const ifOf = (p: string) => bed.b.links.find((l) => l.def.to === p)!.ifName;
    let seen: Record<string, number[]> = {};
    for (let i = 0; i < 15; i++) {
      const groups = await hub.json<IgmpGroups>('show ip igmp groups');
      seen = {};
      for (const p of ['fast', 'slow']) {
        const e = groups[ifOf(p)];
        const gs = typeof e === 'object' ? (e.groups ?? []).filter((g) => inSession(g.group)) : [];
        for (const g of gs) assert.ok(g.mode === 'INCLUDE' && g.version === 3, `${p}: ${JSON.stringify(g)} ${where}`);
        seen[p] = gs.map((g) => layerOf(g.group)).sort((a, b) => a - b);
      }
      if (seen.fast.length === want.fast && seen.slow.length === want.slow) break;
      await sleep(200); // a layer being left or joined right now
    }
    assert.deepEqual(seen, { fast: [0, 1, 2, 3], slow: [0, 1] }, `IGMP groups on hub0 ${where}`);
    const sources = await hub.json<IgmpSources>('show ip igmp sources');
    const srcs = new Set(
      Object.entries(sources[ifOf('fast')] ?? {})
        .filter(([g, e]) => inSession(g) && typeof e === 'object')
        .flatMap(([, e]) => (e.sources ?? []).map((s) => s.source)),
    );
    assert.deepEqual([...srcs], ['10.201.0.2'], `IGMPv3 sources on hub0 ${where}`);

    // Upstream: the first-hop router holds PIM (S,G) joins from hub0 for layers 0-3 only
    // (the union of what is behind it); 4-7 stay pruned at the sender's router.
    const joins = await src.json<Record<string, Record<string, Record<string, { state?: string }>>>>('show ip pim join');
    const joined = new Set<number>();
    for (const [, byGroup] of Object.entries(joins)) {
      if (typeof byGroup !== 'object') continue;
      for (const [g, bySource] of Object.entries(byGroup)) {
        if (!inSession(g)) continue;
        const st = bySource['10.201.0.2'];
        if (st && /JOIN/i.test(String(st.state ?? (st as Record<string, unknown>).channelJoinName ?? ''))) joined.add(layerOf(g));
      }
    }
    assert.deepEqual([...joined].sort((a, b) => a - b), [0, 1, 2, 3], `PIM joins at the first-hop router: ${JSON.stringify(joins)} ${where}`);
    recordAcceptance(
      'issue25/pim-fast',
      `2 FRR routers, SSM: fast player last 5 s ${JSON.stringify(bed.lines('fast').slice(-5).map((l) => l.layers))}, slow ${JSON.stringify(bed.lines('slow').slice(-5).map((l) => l.layers))}; hub0 IGMPv3 INCLUDE{10.201.0.2} groups ${JSON.stringify(seen)}; first-hop router PIM (S,G) joins for layers ${[...joined].sort((a, b) => a - b).join(',')}`,
      true,
      'npm test -w e2e (test/pim.test.ts)',
    );
  } finally {
    const left = await bed.teardown();
    assert.deepEqual(left, [], 'namespaces left');
    assert.ok(daemons.every((c) => c.exitCode !== null || c.signalCode !== null), 'FRR daemons still running after teardown');
    assert.deepEqual(stateDirs().filter((d) => d.includes(bed.net.prefix)), [], 'FRR state directories left');
  }
});
