// IGMP join and leave latency through igmpproxy (era.md AC-14, plm.md E0): a sender behind a
// multicast router, a receiver behind an emulated bottleneck; the receiver joins, holds, leaves;
// the emulator on the bottleneck records when the group's last packet crossed it. Leave latency
// = last packet on the bottleneck − the receiver's leave; join latency = first packet at the
// receiver − its join.
import fs from 'node:fs';
import path from 'node:path';
import { Net } from './netns.js';
import { buildTopology } from './topology.js';
import { collect, sleep, waitExit } from './sh.js';
import { parseScenario } from './scenario.js';

export interface LeaveResult {
  router: string;
  fast_leave: boolean;
  cycles: { join_ms: number; leave_ms: number; igmp_leave_seen_on_link: boolean }[];
  join_ms_median: number;
  leave_ms_median: number;
  leave_ms_max: number;
}

const GROUP = '239.255.100.0';
const PORT = 5004;

function scenarioYaml(fastLeave: boolean): string {
  return `
name: leave-latency
duration_s: 30
topology:
  nodes: [src, router, rcv]
  links:
    - {from: src, to: router, rate_kbps: 10000, delay_ms: 1}
    - {from: router, to: rcv, rate_kbps: 1000, delay_ms: 5}
  multicast: {fast_leave: ${fastLeave}}
flows:
  - type: layered
    name: s
    protocol: era
    from: src
    layers: {count: 1, rate_kbps: 200}
    receivers: [{name: r1, at: rcv}]
`;
}

const SENDER = `
const d = require('dgram'); const s = d.createSocket('udp4');
const ifa = process.argv[1];
s.bind(0, ifa, () => { s.setMulticastTTL(16); s.setMulticastInterface(ifa);
  const buf = Buffer.alloc(512); let n = 0;
  setInterval(() => { buf.writeUInt32BE(n++, 0); s.send(buf, ${PORT}, '${GROUP}'); }, 5); });
`;

const RECEIVER = `
const d = require('dgram'); const now = () => Math.round((performance.timeOrigin + performance.now()) * 1e6);
// node -e: argv[1] is the first argument
const [ifAddr, cycles, holdMs, gapMs] = [process.argv[1], +process.argv[2], +process.argv[3], +process.argv[4]];
const s = d.createSocket({ type: 'udp4', reuseAddr: true });
let first = 0; s.on('message', () => { if (!first) first = now(); });
s.bind(${PORT}, async () => {
  const out = [];
  for (let i = 0; i < cycles; i++) {
    first = 0; const join = now(); s.addMembership('${GROUP}', ifAddr);
    await new Promise(r => setTimeout(r, holdMs));
    const leave = now(); s.dropMembership('${GROUP}', ifAddr);
    out.push({ join_ns: join, first_ns: first, leave_ns: leave });
    await new Promise(r => setTimeout(r, gapMs));
  }
  console.log(JSON.stringify(out)); s.close();
});
`;

const median = (x: number[]) => {
  const v = [...x].sort((a, b) => a - b);
  return v.length ? v[Math.floor(v.length / 2)] : NaN;
};

/** Runs `cycles` join/hold/leave cycles; between cycles the emulator's per-group record is read. */
export async function measureLeaveLatency(opts: {
  fastLeave: boolean;
  router?: 'mrouter' | 'igmpproxy';
  cycles?: number;
  outDir: string;
  holdMs?: number;
  gapMs?: number;
}): Promise<LeaveResult> {
  const cycles = opts.cycles ?? 5;
  const hold = opts.holdMs ?? 1500;
  // Without fast leave the route lingers (mrouter: leave_latency_ms = 2 s; igmpproxy: until it
  // ages routes, up to tens of seconds): wait longer.
  const gap = opts.gapMs ?? (opts.fastLeave && opts.router !== 'igmpproxy' ? 1500 : opts.router === 'igmpproxy' ? 40000 : 4000);
  fs.mkdirSync(opts.outDir, { recursive: true });
  const sc = parseScenario(scenarioYaml(opts.fastLeave));
  const net = new Net();
  try {
    const b = await buildTopology(net, sc, { dir: opts.outDir, linkMode: 'linkemu', router: opts.router });
    const emu = b.links[1].emu!;
    const app = b.sourceApp.get('src')!;
    const srcAddr = app.addr;
    const rcvAddr = b.toward('rcv', 'router').addr;
    net.procs.spawnIn(app.ns, 'mcast sender', process.execPath, ['-e', SENDER, srcAddr]);
    await sleep(500);
    const results: LeaveResult['cycles'] = [];
    for (let i = 0; i < cycles; i++) {
      const r = net.procs.spawnIn(b.nodeNs.get('rcv')!, 'mcast receiver', process.execPath, ['-e', RECEIVER, rcvAddr, '1', String(hold), String(gap)]);
      let err = '';
      r.stderr?.on('data', (d) => (err += String(d)));
      const out = collect(r);
      await waitExit(r, hold + gap + 10_000);
      const text = (await out).trim();
      if (!text) throw new Error(`receiver printed nothing: ${err}`);
      const [c] = JSON.parse(text) as { join_ns: number; first_ns: number; leave_ns: number }[];
      const snap = await emu.get();
      const g = snap.ab.groups[GROUP];
      const l = snap.ba.groups[GROUP];
      // Still flowing when we looked (last packet within 200 ms of the snapshot): the route was
      // not pruned within the gap; report infinity rather than the time we happened to look.
      const stillFlowing = !!g && snap.time_ns - g.last_ns < 200e6;
      results.push({
        join_ms: c.first_ns ? (c.first_ns - c.join_ns) / 1e6 : NaN,
        leave_ms: !g ? NaN : stillFlowing ? Infinity : (g.last_ns - c.leave_ns) / 1e6,
        igmp_leave_seen_on_link: !!l && l.last_leave_ns >= c.leave_ns - 1e6,
      });
    }
    const res: LeaveResult = {
      router: opts.router ?? 'mrouter',
      fast_leave: opts.fastLeave,
      cycles: results,
      join_ms_median: median(results.map((x) => x.join_ms)),
      leave_ms_median: median(results.map((x) => x.leave_ms)),
      leave_ms_max: Math.max(...results.map((x) => x.leave_ms)),
    };
    fs.writeFileSync(path.join(opts.outDir, `leave-latency-${res.router}-${opts.fastLeave ? 'fast' : 'default'}.json`), JSON.stringify(res, null, 2));
    return res;
  } finally {
    await net.teardown();
  }
}

const MANY_SENDER = `
const d = require('dgram'); const [ifa, n] = [process.argv[1], +process.argv[2]];
const s = d.createSocket('udp4');
s.bind(0, ifa, () => { s.setMulticastTTL(16); s.setMulticastInterface(ifa);
  const buf = Buffer.alloc(64);
  setInterval(() => { for (let k = 0; k < n; k++) s.send(buf, 6000 + 2 * k, '239.255.100.' + k); }, 20); });
`;

const MANY_RECEIVER = `
const d = require('dgram'); const [ifa, n, ms] = [process.argv[1], +process.argv[2], +process.argv[3]];
const counts = new Array(n).fill(0); const socks = [];
for (let k = 0; k < n; k++) {
  const s = d.createSocket({ type: 'udp4', reuseAddr: true });
  s.on('message', () => counts[k]++);
  s.bind(6000 + 2 * k, () => s.addMembership('239.255.100.' + k, ifa));
  socks.push(s);
}
setTimeout(() => { console.log(JSON.stringify(counts)); for (const s of socks) s.close(); }, ms);
`;

/** Joins `groups` groups at once behind two chained routers; returns packets received per
 *  group. Checks that routers carry many groups (a session has up to 255 layers). */
export async function measureGroupReach(opts: { groups: number; outDir: string; router?: 'mrouter' | 'igmpproxy' }): Promise<number[]> {
  fs.mkdirSync(opts.outDir, { recursive: true });
  const sc = parseScenario(`
name: group-reach
duration_s: 30
topology:
  nodes: [src, r0, r1, rcv]
  links:
    - {from: src, to: r0, rate_kbps: 10000, delay_ms: 1}
    - {from: r0, to: r1, rate_kbps: 10000, delay_ms: 2}
    - {from: r1, to: rcv, rate_kbps: 10000, delay_ms: 1}
  multicast: {fast_leave: true}
flows:
  - {type: layered, name: s, protocol: era, from: src, layers: {count: 1, rate_kbps: 20}, receivers: [{name: r, at: rcv}]}
`);
  const net = new Net();
  try {
    const b = await buildTopology(net, sc, { dir: opts.outDir, linkMode: 'linkemu', router: opts.router });
    const app = b.sourceApp.get('src')!;
    net.procs.spawnIn(app.ns, 'mcast sender', process.execPath, ['-e', MANY_SENDER, app.addr, String(opts.groups)]);
    const r = net.procs.spawnIn(b.nodeNs.get('rcv')!, 'mcast receiver', process.execPath, ['-e', MANY_RECEIVER, b.toward('rcv', 'r1').addr, String(opts.groups), '3000']);
    const out = collect(r);
    await waitExit(r, 15_000);
    return JSON.parse((await out).trim()) as number[];
  } finally {
    await net.teardown();
  }
}
