// IGMP join and leave latency through a multicast router (era.md AC-14, plm.md E0): a sender
// behind one or two routers (the fast-leave mrouter, igmpproxy or FRR's PIM), a receiver behind
// an emulated bottleneck; the receiver joins (any-source, or source-specific for SSM), holds,
// leaves; the emulators record when the group's last packet crossed each link. Leave latency =
// last packet on the bottleneck − the receiver's leave; join latency = first packet at the
// receiver − its join. With two routers the link between them shows the upstream prune (PIM's
// triggered prune with FRR).
import fs from 'node:fs';
import path from 'node:path';
import { Net } from './netns.js';
import { buildTopology, type Built, type RouterKind } from './topology.js';
import { collect, sleep, waitExit } from './sh.js';
import { parseScenario } from './scenario.js';

export interface LeaveCycle {
  join_ms: number;
  leave_ms: number;
  /** Two routers: last packet on the link between them − the leave (the upstream prune). */
  upstream_leave_ms?: number;
  /** The emulator saw the receiver's leave on the bottleneck (IGMPv2 leave or an IGMPv3
   *  record to INCLUDE{}); null for SSM, whose leave is a BLOCK record the emulator does not
   *  count as one. */
  igmp_leave_seen_on_link: boolean | null;
}

export interface LeaveResult {
  router: string;
  fast_leave: boolean;
  /** Routers between the sender and the receiver. */
  hops: number;
  ssm: boolean;
  cycles: LeaveCycle[];
  join_ms_median: number;
  leave_ms_median: number;
  leave_ms_max: number;
  upstream_leave_ms_median?: number;
  /** FRR: the last-hop router's IGMP state for the group while the receiver held it. */
  igmp_state?: unknown;
}

const GROUP = '239.255.100.0';
const SSM_GROUP = '232.255.100.0';
const PORT = 5004;

function scenarioYaml(fastLeave: boolean, hops: number): string {
  const links =
    hops === 1
      ? '    - {from: src, to: rcv, rate_kbps: 1000, delay_ms: 5}\n'
      : '    - {from: src, to: router, rate_kbps: 10000, delay_ms: 1}\n    - {from: router, to: rcv, rate_kbps: 1000, delay_ms: 5}\n';
  return `
name: leave-latency
duration_s: 30
topology:
  nodes: [src, ${hops === 1 ? '' : 'router, '}rcv]
  links:
${links}  multicast: {fast_leave: ${fastLeave}}
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
const [ifa, group] = [process.argv[1], process.argv[2]];
s.bind(0, ifa, () => { s.setMulticastTTL(16); s.setMulticastInterface(ifa);
  const buf = Buffer.alloc(512); let n = 0;
  setInterval(() => { buf.writeUInt32BE(n++, 0); s.send(buf, ${PORT}, group); }, 5); });
`;

// Joins any-source, or source-specifically (IGMPv3 INCLUDE{source}) when a source is given.
// Prints "joined" once the first packet arrived, so the caller can look at the routers' state.
const RECEIVER = `
const d = require('dgram'); const now = () => Math.round((performance.timeOrigin + performance.now()) * 1e6);
// node -e: argv[1] is the first argument
const [ifAddr, cycles, holdMs, gapMs, group, source] = [process.argv[1], +process.argv[2], +process.argv[3], +process.argv[4], process.argv[5], process.argv[6]];
const join = () => source ? s.addSourceSpecificMembership(source, group, ifAddr) : s.addMembership(group, ifAddr);
const drop = () => source ? s.dropSourceSpecificMembership(source, group, ifAddr) : s.dropMembership(group, ifAddr);
const s = d.createSocket({ type: 'udp4', reuseAddr: true });
let first = 0; s.on('message', () => { if (!first) { first = now(); console.error('joined'); } });
s.bind(${PORT}, async () => {
  const out = [];
  for (let i = 0; i < cycles; i++) {
    first = 0; const t = now(); join();
    await new Promise(r => setTimeout(r, holdMs));
    const leave = now(); drop();
    out.push({ join_ns: t, first_ns: first, leave_ns: leave });
    await new Promise(r => setTimeout(r, gapMs));
  }
  console.log(JSON.stringify(out)); s.close();
});
`;

const median = (x: number[]) => {
  const v = [...x].sort((a, b) => a - b);
  return v.length ? v[Math.floor(v.length / 2)] : NaN;
};

/** Runs `cycles` join/hold/leave cycles; between cycles the emulators' per-group records are read. */
export async function measureLeaveLatency(opts: {
  fastLeave: boolean;
  router?: RouterKind;
  cycles?: number;
  outDir: string;
  holdMs?: number;
  gapMs?: number;
  /** Routers between sender and receiver: 2 (default: the sender's router, then the
   *  receiver's) or 1. */
  hops?: 1 | 2;
  /** Source-specific join of a 232/8 group (IGMPv3 INCLUDE{sender}). */
  ssm?: boolean;
  /** FRR: the configuration text (default deploy/router/frr/frr.conf). */
  frrConf?: string;
  /** Name of the result file's variant (default: `fast` or `default` by fastLeave). */
  label?: string;
}): Promise<LeaveResult> {
  const cycles = opts.cycles ?? 5;
  const hold = opts.holdMs ?? 1500;
  const hops = opts.hops ?? 2;
  const router = opts.router ?? 'mrouter';
  const group = opts.ssm ? SSM_GROUP : GROUP;
  if (opts.ssm && router !== 'frr') throw new Error('SSM joins need a router that knows IGMPv3 sources (--frr)');
  // Without fast leave the route lingers (mrouter: leave_latency_ms = 2 s; igmpproxy: until it
  // ages routes, up to tens of seconds; FRR with its default timers: 2 x 1 s): wait longer.
  const gap = opts.gapMs ?? (router === 'igmpproxy' ? 40000 : opts.fastLeave ? 1500 : 4000);
  fs.mkdirSync(opts.outDir, { recursive: true });
  const sc = parseScenario(scenarioYaml(opts.fastLeave, hops));
  const net = new Net();
  try {
    const b = await buildTopology(net, sc, { dir: opts.outDir, linkMode: 'linkemu', router, frrConf: opts.frrConf });
    const emu = b.links[hops - 1].emu!;
    const upEmu = hops === 2 ? b.links[0].emu! : null;
    const app = b.sourceApp.get('src')!;
    const srcAddr = app.addr;
    const rcvAddr = b.toward('rcv', 'src').addr;
    net.procs.spawnIn(app.ns, 'mcast sender', process.execPath, ['-e', SENDER, srcAddr, group]);
    await sleep(500);
    const results: LeaveCycle[] = [];
    let igmpState: unknown;
    for (let i = 0; i < cycles; i++) {
      const args = ['-e', RECEIVER, rcvAddr, '1', String(hold), String(gap), group, ...(opts.ssm ? [srcAddr] : [])];
      const r = net.procs.spawnIn(b.nodeNs.get('rcv')!, 'mcast receiver', process.execPath, args);
      let err = '';
      r.stderr?.on('data', (d) => {
        err += String(d);
        // Once, while the receiver holds the group: what the last-hop router made of its join.
        if (i === 0 && igmpState === undefined && err.includes('joined')) igmpState = lastHopIgmp(b, group).catch((e: Error) => ({ error: e.message }));
      });
      const out = collect(r);
      await waitExit(r, hold + gap + 10_000);
      const text = (await out).trim();
      if (!text) throw new Error(`receiver printed nothing: ${err}`);
      const [c] = JSON.parse(text) as { join_ns: number; first_ns: number; leave_ns: number }[];
      const leaveOn = async (e: NonNullable<typeof upEmu>) => {
        const snap = await e.get();
        const g = snap.ab.groups[group];
        // Still flowing when we looked (last packet within 200 ms of the snapshot): the route was
        // not pruned within the gap; report infinity rather than the time we happened to look.
        const stillFlowing = !!g && snap.time_ns - g.last_ns < 200e6;
        return { ms: !g ? NaN : stillFlowing ? Infinity : (g.last_ns - c.leave_ns) / 1e6, snap };
      };
      const down = await leaveOn(emu);
      const l = down.snap.ba.groups[group];
      results.push({
        join_ms: c.first_ns ? (c.first_ns - c.join_ns) / 1e6 : NaN,
        leave_ms: down.ms,
        ...(upEmu ? { upstream_leave_ms: (await leaveOn(upEmu)).ms } : {}),
        igmp_leave_seen_on_link: opts.ssm ? null : !!l && l.last_leave_ns >= c.leave_ns - 1e6,
      });
    }
    const res: LeaveResult = {
      router,
      fast_leave: opts.fastLeave,
      hops,
      ssm: !!opts.ssm,
      cycles: results,
      join_ms_median: median(results.map((x) => x.join_ms)),
      leave_ms_median: median(results.map((x) => x.leave_ms)),
      leave_ms_max: Math.max(...results.map((x) => x.leave_ms)),
      ...(hops === 2 ? { upstream_leave_ms_median: median(results.map((x) => x.upstream_leave_ms ?? NaN)) } : {}),
      ...(igmpState !== undefined ? { igmp_state: await igmpState } : {}),
    };
    const label = opts.label ?? (opts.fastLeave ? 'fast' : 'default');
    // Infinity (still flowing when looked at) is written as the string "Infinity".
    fs.writeFileSync(path.join(opts.outDir, `leave-latency-${router}-${hops}hop${opts.ssm ? '-ssm' : ''}-${label}.json`), JSON.stringify(res, (_k, v) => (v === Infinity ? 'Infinity' : v), 2));
    return res;
  } finally {
    await net.teardown();
  }
}

/** FRR: the receiver's router's IGMP view of `group` (`show ip igmp groups` and `sources`). */
async function lastHopIgmp(b: Built, group: string): Promise<unknown> {
  const r = b.routers.find((x) => x.roles && [...x.roles.values()].includes('host'));
  if (!r?.frr) return null;
  const [groups, sources] = await Promise.all([r.frr.json('show ip igmp groups'), r.frr.json('show ip igmp sources')]);
  return { router: r.node, group, groups, sources };
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
export async function measureGroupReach(opts: { groups: number; outDir: string; router?: RouterKind }): Promise<number[]> {
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
