// PLM (plm.md §9.B) and delay-based (delay-based.md §10.B) emulation checks that the scenario
// metrics cannot express, and the instrumentation some of them need during the run. Used by
// `layercast-e2e full` (src/full.ts): `checkHook(sc, dir)` is passed to runScenario as
// `onBuilt`, `plmDelayDerived(sc, result, dir)` adds rows to the summary after the run.
//
// Everything here keys on the scenario's name (e2e/scenarios/*.yaml): the scenario format is
// shared with the simulator and has no field for a packet capture or a per-packet emulator
// rule, and these checks exist only on the emulated network.
//
// Sources: the players' `player.jsonl` (per-second lines: layers, estimate_bps, pp samples,
// lost packets, and the controller's decisions with their inputs, `at_s` in unix seconds from
// kernel receive timestamps), the emulators' samples (`links.json`), and pcaps taken with
// tcpdump inside the namespaces.
import fs from 'node:fs';
import path from 'node:path';
import type { Net } from './netns.js';
import type { Built } from './topology.js';
import type { RunResult } from './runner.js';
import type { DerivedRow } from './tfmcc.js';
import { findLink, ladderRates, type LayeredFlow, type Scenario } from './scenario.js';
import { sessionAddrs } from './media.js';
import { run } from './sh.js';

type Hook = (net: Net, built: Built, t0Ms: number) => Promise<void>;

/** E10: the emulator drops the second packet of every pair on the bottleneck over [on, off). */
export const E10_PAIR_RULE = { link: 'n1-n2', on_s: 20, off_s: 24 };
/** DE0: sender clock offsets injected on receivers' access links (µs added to the send time). */
export const DE0_OFFSETS: Record<string, number> = { 'r1-hp': 500_000, 'r1-hm': -500_000 };
/** Sender addresses (`10.201.k.2`, docs/testbed.md): everything else a receiver could send. */
const SENDER_NET = '10.201.0.0/16';

// ---------------------------------------------------------------- instrumentation

export function checkHook(sc: Scenario, outDir: string): Hook | undefined {
  if (sc.name === 'plm-e12-no-feedback') return (net, b) => captures(sc, outDir, net, b);
  if (sc.name === 'plm-e10-no-pp') {
    return async (_net, b, t0) => {
      const l = findLink(sc, E10_PAIR_RULE.link)!;
      const emu = b.links[l.index].emu;
      if (!emu) throw new Error(`E10: link ${E10_PAIR_RULE.link} is not emulated`);
      const dir = l.reverse ? 'ba' : 'ab';
      const at = (s: number, fn: () => Promise<void>) => setTimeout(() => void fn().catch(() => undefined), Math.max(0, t0 + s * 1000 - Date.now())).unref();
      at(E10_PAIR_RULE.on_s, () => emu.set(dir, { drop_bunch_pos: 1 }));
      at(E10_PAIR_RULE.off_s, () => emu.set(dir, { drop_bunch_pos: -1 }));
    };
  }
  if (sc.name === 'delay-de1-convergence') return (net, b) => bottleneckCaptures(sc, outDir, net, b);
  if (sc.name === 'delay-de0-delay-step') {
    return async (_net, b) => {
      for (const [name, us] of Object.entries(DE0_OFFSETS)) {
        const l = findLink(sc, name)!;
        const emu = b.links[l.index].emu;
        if (!emu) throw new Error(`DE0: link ${name} is not emulated`);
        await emu.set(l.reverse ? 'ba' : 'ab', { cc_time_shift_us: us });
      }
    };
  }
  return undefined;
}

/** tcpdump in every sender's namespace (everything) and on every receiver node (everything
 *  but the senders' data), stopped by the run's teardown (SIGTERM flushes the file). */
async function captures(sc: Scenario, outDir: string, net: Net, b: Built): Promise<void> {
  const seen = new Set<string>();
  for (const f of sc.flows) {
    if (f.type !== 'layered') continue;
    const app = b.sourceApp.get(f.from)!;
    net.procs.spawnIn(app.ns, `tcpdump sender ${f.name}`, 'tcpdump', ['-i', 'any', '-nn', '-U', '-s', '128', '-w', path.join(outDir, `pcap-sender-${f.name}.pcap`)]);
    for (const r of f.receivers) {
      if (seen.has(r.at)) continue;
      seen.add(r.at);
      net.procs.spawnIn(b.nodeNs.get(r.at)!, `tcpdump node ${r.at}`, 'tcpdump', ['-i', 'any', '-nn', '-U', '-s', '128', '-w', path.join(outDir, `pcap-node-${r.at}.pcap`), `not (udp and src net ${SENDER_NET})`]);
    }
  }
  // tcpdump needs a moment to open its sockets; the flows start 1.5 s after the build.
  await new Promise((r) => setTimeout(r, 300));
}

/** DE3: tcpdump of the session's multicast data on both routers of the bottleneck (the
 *  emulated link's two ends), so each packet's time across the link is measured (its sojourn
 *  in the emulator's queue plus the constant serialisation and propagation). */
async function bottleneckCaptures(sc: Scenario, outDir: string, net: Net, b: Built): Promise<void> {
  const bn = sc.topology.links.reduce((a, x) => (x.rate_kbps < a.rate_kbps ? x : a));
  for (const node of [bn.from, bn.to]) {
    net.procs.spawnIn(b.nodeNs.get(node)!, `tcpdump bottleneck ${node}`, 'tcpdump', ['-i', 'any', '-nn', '-U', '-s', '64', '-w', path.join(outDir, `pcap-bottleneck-${node}.pcap`), 'udp and dst net 224.0.0.0/4']);
  }
  await new Promise((r) => setTimeout(r, 300));
}

/** RTP packets of a capture as (SSRC:seq → first time seen, unix s). Parses the pcap itself
 *  (classic format, µs or ns stamps; link types Linux cooked v1/v2, Ethernet, raw IP): the
 *  first sighting in a router's namespace is its arrival there (forwarding adds an `Out`
 *  copy of the same packet per outgoing interface). */
export function rtpFirstSeen(file: string): Map<string, number> {
  const buf = fs.readFileSync(file);
  const out = new Map<string, number>();
  if (buf.length < 24) return out;
  const magic = buf.readUInt32LE(0);
  const le = magic === 0xa1b2c3d4 || magic === 0xa1b23c4d;
  const nano = magic === 0xa1b23c4d || magic === 0x4d3cb2a1;
  if (!le && magic !== 0xd4c3b2a1 && magic !== 0x4d3cb2a1) throw new Error(`${path.basename(file)}: not a pcap`);
  const u32 = (o: number) => (le ? buf.readUInt32LE(o) : buf.readUInt32BE(o));
  const linktype = u32(20);
  const l2 = linktype === 113 ? 16 : linktype === 276 ? 20 : linktype === 1 ? 14 : linktype === 101 ? 0 : -1;
  if (l2 < 0) throw new Error(`${path.basename(file)}: link type ${linktype}`);
  let o = 24;
  while (o + 16 <= buf.length) {
    const t = u32(o) + u32(o + 4) / (nano ? 1e9 : 1e6);
    const incl = u32(o + 8);
    const p = o + 16 + l2;
    o += 16 + incl;
    if (o > buf.length || p + 20 > o) break;
    if (buf[p] >> 4 !== 4 || buf[p + 9] !== 17) continue;
    const u = p + (buf[p] & 0x0f) * 4;
    if (u + 8 + 12 > o) continue;
    const rtp = u + 8;
    const key = `${buf.readUInt32BE(rtp + 8)}:${buf.readUInt16BE(rtp + 2)}`;
    if (!out.has(key)) out.set(key, t);
  }
  return out;
}

/** Per-packet queueing delay across the bottleneck (ms): time from its arrival at the upstream
 *  router to its arrival at the downstream one, minus the smallest such time (serialisation of
 *  the equal-size packets plus propagation), for packets that reached the upstream router in
 *  [a, b) s of the run. */
export function bottleneckSojournMs(upFile: string, downFile: string, t0: number, a: number, b: number): number[] {
  const up = rtpFirstSeen(upFile);
  const down = rtpFirstSeen(downFile);
  const d: number[] = [];
  for (const [k, tu] of up) {
    const td = down.get(k);
    if (td === undefined || tu - t0 < a || tu - t0 >= b) continue;
    d.push((td - tu) * 1000);
  }
  if (!d.length) return d;
  const min = d.reduce((x, y) => Math.min(x, y));
  return d.map((x) => x - min);
}

// ---------------------------------------------------------------- reading

interface Decision {
  at_s: number;
  from: number;
  to: number;
  reason: string;
  inputs: Record<string, number>;
}
interface PLine {
  t: number;
  layers: number;
  estimate_bps?: number | null;
  pp_samples?: number;
  pp_bps_median_payload?: number | null;
  lost_1s?: number;
  decisions?: Decision[];
}

/** A player's per-second lines with `t` relative to the run's epoch, and its decisions (at_s
 *  relative too). */
export function readPlayer(dir: string, flow: string, rcv: string, t0: number): { lines: PLine[]; decisions: Decision[] } {
  const file = path.join(dir, `player-${flow}-${rcv}`, 'player.jsonl');
  const lines: PLine[] = [];
  const decisions: Decision[] = [];
  if (!fs.existsSync(file)) return { lines, decisions };
  for (const s of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!s.trim()) continue;
    let p: PLine;
    try {
      p = JSON.parse(s) as PLine;
    } catch {
      continue;
    }
    if (typeof p.t !== 'number') continue;
    p.t -= t0;
    lines.push(p);
    for (const d of p.decisions ?? []) decisions.push({ ...d, at_s: d.at_s - t0 });
  }
  decisions.sort((a, b) => a.at_s - b.at_s);
  return { lines, decisions };
}

interface PcapPkt {
  t: number;
  iface: string;
  dir: string;
  proto: string;
  src: string;
  dst: string;
  len: number;
  text: string;
}

/** Packets of a pcap, via `tcpdump -r` (any-interface captures print the direction). */
export async function readPcap(file: string): Promise<PcapPkt[]> {
  if (!fs.existsSync(file)) throw new Error(`no capture ${path.basename(file)}`);
  const r = await run('tcpdump', ['-r', file, '-nn', '-tt'], { timeoutMs: 60_000, allowFail: true });
  const out: PcapPkt[] = [];
  for (const line of r.stdout.split('\n')) {
    const m = /^(\d+\.\d+)\s+(\S+)\s+(In|Out|M|B|P)\s+(IP6?|ARP|\S+)[, ]\s*(.*)$/.exec(line.trim());
    if (!m) continue;
    const [, t, iface, dir, l3, rest] = m;
    let proto = l3;
    let src = '';
    let dst = '';
    let len = 0;
    const ip = /^(\S+) > (\S+?):\s*(.*)$/.exec(rest);
    if (l3 === 'IP' && ip) {
      src = ip[1];
      dst = ip[2];
      const what = ip[3];
      proto = /^igmp/i.test(what) ? 'igmp' : /^UDP/.test(what) ? 'udp' : /^ICMP/.test(what) ? 'icmp' : /^Flags/.test(what) ? 'tcp' : 'ip-other';
      const lm = /length (\d+)/.exec(what);
      len = lm ? Number(lm[1]) : 0;
    } else if (l3 === 'ARP') proto = 'arp';
    out.push({ t: Number(t), iface, dir, proto, src, dst, len, text: line.trim() });
  }
  return out;
}

const quantile = (v: number[], q: number) => {
  if (!v.length) return NaN;
  const s = [...v].sort((a, b) => a - b);
  const i = (s.length - 1) * q;
  const lo = Math.floor(i);
  return s[lo] + (s[Math.min(lo + 1, s.length - 1)] - s[lo]) * (i - lo);
};
const f = (x: number, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : String(x));
const row = (check: string, measurement: string, value: number, text: string, min: number | null, max: number | null): DerivedRow => ({
  check,
  measurement,
  value,
  text,
  min,
  max,
  pass: min == null && max == null ? null : Number.isFinite(value) && (min == null || value >= min) && (max == null || value <= max),
});
const layered = (sc: Scenario) => sc.flows.filter((x): x is LayeredFlow => x.type === 'layered');

// ---------------------------------------------------------------- derived checks

/** The rows this module derives for a finished run (empty for other scenarios). Errors become
 *  a failing row, never an exception. */
export async function plmDelayDerived(sc: Scenario, r: RunResult, dir: string): Promise<DerivedRow[]> {
  const t0 = r.t0_unix_s;
  if (t0 === undefined) return [];
  const fns: Record<string, () => Promise<DerivedRow[]> | DerivedRow[]> = {
    'plm-e12-no-feedback': () => noFeedback(sc, dir, t0),
    'plm-e11-blackhole': () => silence(sc, dir, t0),
    'plm-e10-no-pp': () => noPp(sc, dir, t0),
    'plm-e1-pp-fq': () => ppFidelity(sc, dir, t0, [[1, 5, 20], [3, 20, 40], [9, 40, 60]], false),
    'plm-e1-pp-fifo': () => ppFidelity(sc, dir, t0, [[1, 5, 20]], true),
    'plm-e3-top2-late-joins': () => startTimes(sc, dir, t0, 'plm/E3', 5, 2.17),
    'plm-e9-bursty-c1': () => versusTcpB(r, dir, 1, 0.45),
    'plm-e9-bursty-c5': () => versusTcpB(r, dir, 5, 0.35),
    'plm-e2-top1-fq': () => [...fromFirstPp(sc, dir, t0, 'plm/E2', E2_KSTAR, 2.0 + (sc.topology.multicast?.join_latency_ms ?? 0) / 1000), ...setAside(sc, dir, t0, 'plm/E2')],
    'plm-e4-cbr-fq': () => cbrStop(sc, dir, t0, 60, 8, 1.7),
    'delay-de0-delay-step': () => delaySteps(sc, dir, t0),
    'delay-de8-exit': () => exitRule(sc, dir, t0),
    'delay-de1-convergence': () => queueAndJoins(sc, dir, t0),
    'delay-de7-many': () => agreement(sc, dir, t0, 'delay/DE7', [30, 70]),
  };
  const rows: DerivedRow[] = [];
  const fn = fns[sc.name];
  if (fn) {
    try {
      rows.push(...(await fn()));
    } catch (e) {
      rows.push({ check: sc.measurements[0] ? sc.measurements[0].id.split(/\s+/)[0] : sc.name, measurement: 'derived checks', value: NaN, text: `error: ${(e as Error).message}`, min: 0, max: 0, pass: false });
    }
  }
  // plm.md E7: a change never moves more than one layer, over the measured window (30 s on;
  // §7.6 measures 30-100 s, after the receivers' start-up climb at 20-25 s).
  if (sc.name.startsWith('plm-e7')) rows.push(...oneLayerPerChange(sc, dir, t0, 'plm/E7', 30));
  return rows;
}

/** plm.md E12 and era.md AC-13. */
async function noFeedback(sc: Scenario, dir: string, _t0: number): Promise<DerivedRow[]> {
  const rows: DerivedRow[] = [];
  const nodes = [...new Set(layered(sc).flatMap((x) => x.receivers.map((r) => r.at)))];
  let other = 0;
  let igmp = 0;
  let arp = 0;
  const examples: string[] = [];
  for (const n of nodes) {
    for (const p of await readPcap(path.join(dir, `pcap-node-${n}.pcap`))) {
      if (p.dir !== 'Out') continue;
      if (p.proto === 'igmp') igmp++;
      else if (p.proto === 'arp') arp++;
      else {
        other++;
        if (examples.length < 3) examples.push(p.text);
      }
    }
  }
  const nRecv = layered(sc).reduce((a, x) => a + x.receivers.length, 0);
  const t1 = `${other} (IGMP ${igmp}, ARP ${arp}; ${nRecv} receivers on ${nodes.length} nodes)${examples.length ? ': ' + examples.join(' | ') : ''}`;
  rows.push(row('plm/E12', 'packets sent by the receiver nodes other than IGMP/ARP (pcap)', other, t1, 0, 0));
  rows.push(row('era/AC-13', 'packets sent by the receiver nodes other than IGMP/ARP (pcap)', other, t1, 0, 0));
  // What reached each sender.
  let toSender = 0;
  const senderEx: string[] = [];
  const perSender: Record<string, Map<string, { n: number; lens: Set<number> }>> = {};
  const t = { lo: Infinity };
  for (const [k, fl] of layered(sc).entries()) {
    const pk = await readPcap(path.join(dir, `pcap-sender-${fl.name}.pcap`));
    const out = new Map<string, { n: number; lens: Set<number> }>();
    const base = sessionAddrs(k).group.split('.').slice(0, 3).join('.');
    for (const p of pk) {
      if (p.dir === 'In') {
        // `lo`: the sender's HTTP library connecting to its own listener at shutdown (to
        // wake its accept thread; seen as SYN + RST at teardown), not a receiver's packet.
        if (p.iface !== 'lo' && p.proto !== 'igmp' && p.proto !== 'arp') {
          toSender++;
          if (senderEx.length < 3) senderEx.push(p.text);
        }
        continue;
      }
      if (p.dir !== 'Out' || p.proto !== 'udp' || !p.dst.startsWith(base + '.')) continue;
      const layer = p.dst.split('.')[3];
      t.lo = Math.min(t.lo, p.t);
      const e = out.get(layer) ?? { n: 0, lens: new Set<number>() };
      out.set(layer, e);
      e.lens.add(p.len);
    }
    // Counts over a common window: 5-25 s after the first packet of any session.
    perSender[fl.name] = out;
    (out as unknown as { pkts: PcapPkt[] }).pkts = pk.filter((p) => p.dir === 'Out' && p.proto === 'udp' && p.dst.startsWith(base + '.'));
  }
  const t2 = `${toSender}${toSender ? ': ' + senderEx.join(' | ') : ''}`;
  rows.push(row('plm/E12', 'packets reaching the senders other than IGMP/ARP (pcap, loopback excluded)', toSender, t2, 0, 0));
  rows.push(row('era/AC-13', 'packets reaching the senders other than IGMP/ARP (pcap, loopback excluded)', toSender, t2, 0, 0));
  // AC-13: the ERA senders with 1 and with 20 receivers: per layer (SAM excluded: its text
  // holds the session name), packets in the same 20-s window and packet sizes.
  const eras = layered(sc).filter((x) => x.protocol === 'era');
  if (eras.length === 2) {
    const [a, b] = eras.map((x) => perSender[x.name] as Map<string, { n: number; lens: Set<number> }> & { pkts: PcapPkt[] });
    const w0 = t.lo + 5;
    const w1 = t.lo + 25;
    let maxDiff = 0;
    let sizesEqual = true;
    const parts: string[] = [];
    const layers = [...new Set([...a.keys(), ...b.keys()])].filter((l) => l !== '255').sort((x, y) => Number(x) - Number(y));
    for (const l of layers) {
      const cnt = (m: typeof a) => m.pkts.filter((p) => p.dst.split('.')[3] === l && p.t >= w0 && p.t < w1).length;
      const ca = cnt(a);
      const cb = cnt(b);
      maxDiff = Math.max(maxDiff, Math.abs(ca - cb));
      const la = [...(a.get(l)?.lens ?? [])].sort().join('/');
      const lb = [...(b.get(l)?.lens ?? [])].sort().join('/');
      if (la !== lb) sizesEqual = false;
      parts.push(`L${l} ${ca}/${cb}`);
    }
    const rates = layers.map((l) => a.pkts.filter((p) => p.dst.split('.')[3] === l && p.t >= w0 && p.t < w1).length);
    rows.push(row('era/AC-13', `sender packets per layer over 20 s, ${eras[0].receivers.length} vs ${eras[1].receivers.length} receivers: max |difference|`, layers.length ? maxDiff : NaN, `${maxDiff} (${parts.join(', ')})`, 0, 2));
    rows.push(row('era/AC-13', 'sender packet sizes per layer identical (1 = yes)', sizesEqual ? 1 : 0, `${sizesEqual ? 'yes' : 'no'} (UDP payload ${[...(a.get('0')?.lens ?? [])].join('/')} B; ${rates.length} layers)`, 1, 1));
  }
  return rows;
}

/** plm.md E11: one layer per T_nopkt after the blackhole, re-join T_rejoin = 30 s later. */
function silence(sc: Scenario, dir: string, t0: number): DerivedRow[] {
  const fl = layered(sc)[0];
  const rcv = fl.receivers[0];
  const { decisions, lines } = readPlayer(dir, fl.name, rcv.name, t0);
  const l0 = ladderRates(fl.layers)[0] * 1000;
  const tNopkt = Math.max(1, (4 * fl.bunch * 8 * fl.packet_size) / l0);
  const bh = sc.schedule.find((x) => x.loss === 1)!.at_s;
  const heal = sc.schedule.find((x) => x.loss === 0 && x.at_s > bh)?.at_s ?? sc.duration_s;
  const after = decisions.filter((d) => d.at_s >= bh);
  const rows: DerivedRow[] = [];
  const first = after[0];
  rows.push(
    row(
      'plm/E11',
      `first decision after the blackhole at ${bh} s: silence-drop of one layer, delay (s; T_nopkt = ${f(tNopkt)} s)`,
      first && first.reason === 'silence-drop' && first.from - first.to === 1 ? first.at_s - bh : NaN,
      first ? `${f(first.at_s - bh)} (${first.reason} ${first.from}->${first.to})` : 'no decision',
      tNopkt,
      tNopkt + 0.5,
    ),
  );
  const chain: Decision[] = [];
  for (const d of after) {
    if (d.reason !== 'silence-drop') break;
    chain.push(d);
    if (d.to === 0) break;
  }
  const gaps = chain.slice(1).map((d, i) => d.at_s - chain[i].at_s);
  const oneEach = chain.every((d) => d.from - d.to === 1);
  rows.push(
    row(
      'plm/E11',
      'spacing of successive silence-drops (s), worst deviation from T_nopkt',
      gaps.length && oneEach ? Math.max(...gaps.map((g) => Math.abs(g - tNopkt))) : NaN,
      `${chain.length} drops ${chain.map((d) => `${d.from}->${d.to}`).join(' ')}, gaps ${gaps.map((g) => f(g)).join(' ')}`,
      0,
      0.25,
    ),
  );
  const empty = chain.find((d) => d.to === 0);
  const rejoin = decisions.find((d) => d.reason === 'rejoin' && empty && d.at_s > empty.at_s);
  rows.push(
    row(
      'plm/E11',
      'base layer gone -> re-join (s; T_rejoin 30 s)',
      empty && rejoin ? rejoin.at_s - empty.at_s : NaN,
      empty ? (rejoin ? `${f(rejoin.at_s - empty.at_s)} (empty at ${f(empty.at_s)} s, healed at ${heal} s)` : `no re-join (empty at ${f(empty.at_s)} s)`) : 'never emptied',
      29.5,
      30.5,
    ),
  );
  const end = lines.filter((x) => x.t > sc.duration_s - 3).map((x) => x.layers);
  rows.push(row('plm/E11', 'level at the end, after the re-join (healed path)', end.length ? Math.max(...end) : NaN, end.length ? String(Math.max(...end)) : 'no log', 1, null));
  return rows;
}

/** PP samples the player counted in the per-second lines whose whole interval lies in
 *  [a, b]. A line holds the samples since the previous line (about 1 s, longer when the
 *  player's tick runs late), so selecting lines by their stamp alone (`a < t <= b`) counts
 *  samples from up to a second before `a`: that is how plm/E10 read 2 samples "during 21-24 s"
 *  (the 21.04-s line covered 20.02-21.04 s, i.e. the pairs completed before the emulator's pair
 *  rule took effect at 20 s). Lines that reach back before `a` are returned apart. */
export function ppSamplesWithin(lines: { t: number; pp_samples?: number }[], a: number, b: number): { samples: number; lines: number; straddling: { from: number; t: number; n: number }[] } {
  let samples = 0;
  let n = 0;
  const straddling: { from: number; t: number; n: number }[] = [];
  for (let i = 0; i < lines.length; i++) {
    const x = lines[i];
    const from = i > 0 ? lines[i - 1].t : x.t - 1;
    if (x.t > b || x.t <= a) continue;
    if (from < a) {
      straddling.push({ from, t: x.t, n: x.pp_samples ?? 0 });
      continue;
    }
    samples += x.pp_samples ?? 0;
    n++;
  }
  return { samples, lines: n, straddling };
}

/** plm.md E10: loss-drops one layer per >= 0.5 s while loss > 10 %, none when it is < 10 %. */
function noPp(sc: Scenario, dir: string, t0: number): DerivedRow[] {
  const fl = layered(sc)[0];
  const { decisions, lines } = readPlayer(dir, fl.name, fl.receivers[0].name, t0);
  const { on_s: on, off_s: off } = E10_PAIR_RULE;
  const a = decisions.filter((d) => d.at_s >= on && d.at_s < off + 0.5);
  const lossA = a.filter((d) => d.reason === 'loss-drop');
  const gaps = lossA.slice(1).map((d, i) => d.at_s - lossA[i].at_s);
  // A released pair needs the rule link's propagation delay to reach the receiver: samples
  // taken up to that long after the rule goes off were still cut by it.
  const ruleLink = findLink(sc, E10_PAIR_RULE.link);
  const lag = ruleLink ? (sc.topology.links[ruleLink.index].delay_ms ?? 0) / 1000 : 0;
  const pp = ppSamplesWithin(lines, on + 1, off + lag);
  const rows: DerivedRow[] = [];
  rows.push(
    row(
      'plm/E10',
      `PP samples during ${on + 1}-${off} s (emulator drops every 2nd packet of a pair; per-second lines wholly inside)`,
      pp.samples,
      `${pp.samples} (${pp.lines} lines${pp.straddling.length ? `; not counted, lines reaching back before ${on + 1} s: ${pp.straddling.map((x) => `${f(x.from)}-${f(x.t)} s ${x.n}`).join(', ')}` : ''})`,
      0,
      0,
    ),
  );
  rows.push(
    row(
      'plm/E10',
      `loss-drops during ${on}-${off} s (loss ≈ 60 %)`,
      lossA.length,
      `${lossA.length}: ${a.map((d) => `${f(d.at_s, 2)} ${d.reason} ${d.from}->${d.to}${d.inputs.loss_rate != null ? ` (loss ${f(d.inputs.loss_rate)})` : ''}`).join(', ')}`,
      2,
      null,
    ),
  );
  rows.push(row('plm/E10', 'shortest spacing between loss-drops (s)', gaps.length ? Math.min(...gaps) : NaN, gaps.map((g) => f(g)).join(' ') || 'fewer than 2 drops', 0.5, null));
  rows.push(row('plm/E10', 'layers per loss-drop, most', lossA.length ? Math.max(...lossA.map((d) => d.from - d.to)) : NaN, lossA.map((d) => d.from - d.to).join(' '), 1, 1));
  const b = decisions.filter((d) => d.at_s >= off + 1 && d.reason === 'loss-drop');
  rows.push(row('plm/E10', `loss-drops after ${off + 1} s (5 % loss, < 10 %)`, b.length, `${b.length}${b.length ? ': ' + b.map((d) => `${f(d.at_s)} ${d.from}->${d.to} loss ${f(d.inputs.loss_rate ?? NaN)}`).join(', ') : ''}`, 0, 0));
  const endL = lines.filter((x) => x.t > sc.duration_s - 3).map((x) => x.layers);
  const allB = decisions.filter((d) => d.at_s >= off + 1);
  rows.push(row('plm/E10', 'level at the end (PP back)', endL.length ? Math.max(...endL) : NaN, `${endL.length ? Math.max(...endL) : 'no log'} (${allB.length} decisions after ${off + 1} s: ${[...new Set(allB.map((d) => d.reason))].join(', ')})`, null, null));
  return rows;
}

/** plm.md E3: time from each receiver's scheduled start to its base join and to `level`
 *  layers, from the decision log (kernel receive timestamps), not the per-second lines the
 *  scenario's `time_to_level` reads (1-s steps: 2.3-2.7 s read as 3.0-3.4 s). Receivers that
 *  start together (the first 20) and the later ones are reported apart. */
function startTimes(sc: Scenario, dir: string, t0: number, check: string, level: number, max: number): DerivedRow[] {
  const fl = layered(sc)[0];
  const first = Math.min(...fl.receivers.map((r) => r.start_s));
  const groups: [string, typeof fl.receivers][] = [
    ['first receivers', fl.receivers.filter((r) => r.start_s === first)],
    ['late joiners', fl.receivers.filter((r) => r.start_s !== first)],
  ];
  const rows: DerivedRow[] = [];
  for (const [label, rs] of groups) {
    if (!rs.length) continue;
    const base: string[] = [];
    const spawn: number[] = [];
    const full: number[] = [];
    for (const r of rs) {
      const { lines, decisions } = readPlayer(dir, fl.name, r.name, t0);
      const l0 = lines[0] as (PLine & { elapsed_s?: number }) | undefined;
      if (l0 && typeof l0.elapsed_s === 'number') spawn.push(l0.t - l0.elapsed_s - r.start_s);
      const jb = decisions.find((d) => d.reason === 'join-base');
      const up = decisions.find((d) => d.to >= level);
      base.push(jb ? f(jb.at_s - r.start_s) : 'none');
      full.push(up ? up.at_s - r.start_s : NaN);
    }
    const worst = full.some((x) => !Number.isFinite(x)) ? NaN : Math.max(...full);
    rows.push(row(check, `${label}: at ${level} layers, from the decision log (s after start), worst`, worst, `${full.map((x) => f(x)).join(' ')} (base join at ${base.join(' ')}; process start ${spawn.length ? f(Math.min(...spawn)) + '..' + f(Math.max(...spawn)) : '?'} s after schedule)`, null, max));
  }
  return rows;
}

/** The TCP_b benchmark run of plm.md E9 (same background, TCP_b in place of PLM). */
export const E9_TCPB_RUN = 'plm-e9-bursty-a-tcpb';

/** plm.md E9: PLM's mean rate over TCP_b's, measured under the same background (the TCP_b
 *  run of the same set, `../plm-e9-bursty-a-tcpb/summary.json`, same seed and so the same
 *  on/off schedule; with `full --reps` the run directories end in `-seed<k>` and the TCP_b run
 *  of the same seed is taken). */
function versusTcpB(r: RunResult, dir: string, c: number, min: number): DerivedRow[] {
  const seedSuffix = /-seed\d+$/.exec(path.basename(dir))?.[0] ?? '';
  const file = path.join(dir, '..', E9_TCPB_RUN + seedSuffix, 'summary.json');
  const plm = r.measurements.find((m) => m.id.startsWith(`plm/E9 C = ${c}: PLM rate`));
  const bg = r.measurements.find((m) => m.id.startsWith(`plm/E9 C = ${c}: background rate`));
  let tcpb = NaN;
  let bgT = NaN;
  if (fs.existsSync(file)) {
    const t = JSON.parse(fs.readFileSync(file, 'utf8')) as RunResult;
    tcpb = t.measurements.find((m) => m.id.startsWith('plm/E9 TCP_b rate'))?.value ?? NaN;
    bgT = t.measurements.find((m) => m.id.startsWith('plm/E9 background rate'))?.value ?? NaN;
  }
  const ratio = (plm?.value ?? NaN) / tcpb;
  const text = Number.isFinite(tcpb)
    ? `${f(ratio, 3)} (PLM ${f(plm?.value ?? NaN, 1)} / TCP_b ${f(tcpb, 1)} kbit/s; background ${f(bg?.value ?? NaN, 0)} with PLM, ${f(bgT, 0)} with TCP_b)`
    : `no TCP_b run in this set (${E9_TCPB_RUN})`;
  return [row('plm/E9', `C = ${c}: PLM mean / TCP_b mean, 30-150 s`, ratio, text, min, null)];
}

/** plm.md E2: each receiver's optimal level k* (Top_1 with the ns-2 example values). */
export const E2_KSTAR: Record<string, number> = { r1: 25, r2: 12, r3a: 6, r3b: 6 };

/** plm.md E2: time from each receiver's first PP sample to its first decision at k*, against
 *  "<= 2.0 s + graft latency after its first PP", with where the time from the receiver's
 *  start went: start -> base join (the announcement: with `--session-info` the join is at
 *  once), base join -> first PP (the next pair of the 10 kbit/s base layer: one pair of 500-B
 *  packets every 0.8 s, jittered +-50 %), first PP -> the add decision (C = 1 s and at least
 *  3 samples in the window), then the graft. The first PP's time is the add decision's time
 *  minus its `first_pp_age_s` input (the controller logs it; kernel receive timestamps). */
function fromFirstPp(sc: Scenario, dir: string, t0: number, check: string, kstar: Record<string, number>, max: number): DerivedRow[] {
  const fl = layered(sc)[0];
  const rows: DerivedRow[] = [];
  const parts: string[] = [];
  let worst = 0;
  for (const r of fl.receivers) {
    const k = kstar[r.name];
    if (k == null) continue;
    const { decisions } = readPlayer(dir, fl.name, r.name, t0);
    const jb = decisions.find((d) => d.reason === 'join-base');
    const up = decisions.find((d) => d.to === k);
    const firstAdd = decisions.find((d) => d.reason === 'pp-add' && d.inputs.first_pp_age_s != null);
    const firstPp = firstAdd ? firstAdd.at_s - firstAdd.inputs.first_pp_age_s : NaN;
    const dt = up && Number.isFinite(firstPp) ? up.at_s - firstPp : NaN;
    worst = Number.isFinite(worst) && Number.isFinite(dt) ? Math.max(worst, dt) : NaN;
    const adds = decisions.filter((d) => d.reason === 'pp-add' && up && d.at_s <= up.at_s).length;
    parts.push(
      `${r.name}=${f(dt)} (start->base join ${jb ? f(jb.at_s - r.start_s) : '?'}, ->first PP ${jb ? f(firstPp - jb.at_s) : '?'}, ->k*=${k} ${f(dt)} in ${adds} add${adds === 1 ? '' : 's'}${firstAdd ? ` on ${firstAdd.inputs.pp_count} samples` : ''}; start->k* ${up ? f(up.at_s - r.start_s) : 'never'})`,
    );
  }
  rows.push(row(check, `first PP -> k*, from the decision log (s), worst`, worst, parts.join(' '), null, Math.round(max * 1000) / 1000));
  return rows;
}

/** plm.md E2 (evidence, no band): pair samples the live PLM set aside as stalls
 *  (`PlmConfig::confirm_drop`, decision `pp-set-aside`: a run of samples below B[n] that a
 *  normal sample ended within 200 ms) and drops on confirmed low runs, per receiver, beside
 *  the link emulators' release error (late releases stretch a pair's gap; docs/protocols/plm.md
 *  section 9). */
function setAside(sc: Scenario, dir: string, t0: number, check: string): DerivedRow[] {
  const parts: string[] = [];
  let total = 0;
  for (const fl of layered(sc)) {
    for (const rc of fl.receivers) {
      const { decisions } = readPlayer(dir, fl.name, rc.name, t0);
      const aside = decisions.filter((d) => d.reason === 'pp-set-aside');
      const drops = decisions.filter((d) => d.reason === 'pp-drop' && d.at_s > 5);
      total += aside.length;
      const low = aside.map((d) => d.inputs.pp_sample / 1000);
      parts.push(
        `${rc.name}: ${aside.length} set aside${low.length ? ` (${f(Math.min(...low), 0)}-${f(Math.max(...low), 1)} kbit/s)` : ''}, ${drops.length} pp-drop${drops.length ? ` (${drops.map((d) => `${f(d.at_s)} s ${d.from}->${d.to} on ${f(d.inputs.pp_sample / 1000, 1)}`).join(', ')})` : ''}`,
      );
    }
  }
  const emu: string[] = [];
  sc.topology.links.forEach((l, i) => {
    const file = path.join(dir, `linkemu-${i}.json`);
    if (!fs.existsSync(file)) return;
    try {
      const e = (JSON.parse(fs.readFileSync(file, 'utf8')) as { ab?: { release_error?: { n: number; p99_us: number; p999_us: number; max_us: number } } }).ab?.release_error;
      if (e && e.n > 0) emu.push(`${l.from}-${l.to} ${e.p99_us}/${e.p999_us}/${e.max_us}`);
    } catch {
      // an unreadable snapshot only loses the evidence
    }
  });
  return [row(check, 'pair samples set aside as stalls (live confirm_drop) and pp-drops after 5 s', total, `${parts.join('; ')}; emulator release error p99/p99.9/max (us): ${emu.join(', ') || 'n/a'}`, null, null)];
}

/** plm.md E4: time from the end of the CBR traffic *on the bottleneck* to each PLM session's
 *  first decision at `level` or more layers. The end comes from the emulator's counters on the
 *  CBR receiver's access link (`links.json`, cumulative tx bytes sampled about once a second):
 *  the last sample interval that still carried CBR bytes, plus those bytes at the CBR's own
 *  served rate (measured over the CBR's steady phase). The scenario's row measures from the
 *  scheduled stop instead; iperf3's JSON cannot say better (its time stamps have 1-s
 *  resolution), and the flows' 20-packet fair-queue buffers keep the CBR going ~0.7 s after
 *  the senders stop. */
function cbrStop(sc: Scenario, dir: string, t0: number, scheduled: number, level: number, max: number): DerivedRow[] {
  const cbr = sc.flows.filter((x) => x.type === 'cbr') as { to: string; start_s: number }[];
  if (!cbr.length) throw new Error('no CBR flow');
  const to = cbr[0].to;
  const link = sc.topology.links.find((l) => l.to === to || l.from === to);
  if (!link) throw new Error(`no link to ${to}`);
  const name = `${link.from}-${link.to}`;
  const dirName = link.to === to ? 'ab' : 'ba';
  const j = JSON.parse(fs.readFileSync(path.join(dir, 'links.json'), 'utf8')) as { samples: { t: number; link: string; dir: string; tx_bytes: number }[] };
  const sm = j.samples.filter((x) => x.link === name && x.dir === dirName).sort((a, b) => a.t - b.t);
  const at = (t: number) => sm.reduce((best, x) => (Math.abs(x.t - t) < Math.abs(best.t - t) ? x : best), sm[0]);
  const steadyA = at(cbr[0].start_s + 5);
  const steadyB = at(scheduled - 1);
  const rate = (steadyB.tx_bytes - steadyA.tx_bytes) / Math.max(1e-9, steadyB.t - steadyA.t);
  let end = NaN;
  for (let i = 1; i < sm.length; i++) {
    if (sm[i].t < scheduled - 1) continue;
    const d = sm[i].tx_bytes - sm[i - 1].tx_bytes;
    // CBR intervals only: iperf3's closing control exchange and IGMP/ARP carry a few hundred
    // bytes later, not a tenth of the CBR's rate.
    if (d > 0.1 * rate * (sm[i].t - sm[i - 1].t)) end = sm[i - 1].t + Math.min(sm[i].t - sm[i - 1].t, d / rate);
  }
  if (!Number.isFinite(end) || !(rate > 0)) throw new Error(`${name}: no CBR bytes in the emulator samples`);
  const rows: DerivedRow[] = [row('plm/E4', `CBR end on the bottleneck (s into the run; emulator counters on ${name})`, end, `${f(end)} (scheduled ${scheduled}; CBR served ${f((rate * 8) / 1000, 1)} kbit/s in total, samples every ${f((sm[sm.length - 1].t - sm[0].t) / Math.max(1, sm.length - 1))} s)`, null, null)];
  const delays: string[] = [];
  let worst = 0;
  for (const fl of layered(sc)) {
    const { decisions } = readPlayer(dir, fl.name, fl.receivers[0].name, t0);
    const up = decisions.find((d) => d.at_s > scheduled - 1 && d.to >= level && d.from < level);
    const dt = up ? up.at_s - end : NaN;
    worst = Number.isFinite(dt) && Number.isFinite(worst) ? Math.max(worst, dt) : NaN;
    // Where the time goes: the add decision that reached `level` took the minimum over the
    // samples since the previous decision (plm.md §3.3: W restarts at every decision); a
    // window that began before the end still held samples of the CBR-phase share, so its
    // decision added nothing (or one layer) and the next one came C later.
    const before = up ? decisions.filter((d) => d.at_s > end && d.at_s < up.at_s) : [];
    const prev = up ? [...decisions].filter((d) => d.at_s < up.at_s).pop() : undefined;
    const why = up
      ? `; window of the add from ${prev ? f(prev.at_s - end) : '?'} s after the end, bhat ${f((up.inputs.bhat_e ?? NaN) / 1000, 0)} kbit/s, ${up.from}->${up.to}` +
        (before.length ? `; earlier checks after the end: ${before.map((d) => `${f(d.at_s - end)} ${d.reason} ${d.from}->${d.to}${d.inputs.bhat_e != null ? ` bhat ${f(d.inputs.bhat_e / 1000, 1)}` : ''}`).join(', ')}` : '')
      : '';
    // When the pairs first showed the freed capacity: the first per-second line (1-s steps)
    // whose PP median is at least 1.5 x the CBR-phase share.
    const { lines } = readPlayer(dir, fl.name, fl.receivers[0].name, t0);
    const shareLines = lines.filter((x) => x.t > scheduled - 10 && x.t <= scheduled && x.pp_bps_median_payload);
    const share = quantile(shareLines.map((x) => x.pp_bps_median_payload!), 0.5);
    const seen = lines.find((x) => x.t > end - 1 && (x.pp_bps_median_payload ?? 0) >= 1.5 * share);
    delays.push(`${fl.name}=${f(dt)} (PP median >= 1.5 x share in the line of ${seen ? f(seen.t - end) : '?'} s${why})`);
  }
  rows.push(row('plm/E4', `CBR end on the bottleneck -> >= ${level} layers, from the decision log (s), worst`, worst, delays.join(' '), null, max));
  return rows;
}

/** plm.md E1: per-second PP medians of a fixed-subscription player against R/(k+1). */
function ppFidelity(sc: Scenario, dir: string, t0: number, phases: [number, number, number][], fifo: boolean): DerivedRow[] {
  const fl = layered(sc)[0];
  const { lines } = readPlayer(dir, fl.name, fl.receivers[0].name, t0);
  const link = sc.topology.links.find((l) => l.rate_kbps <= 2000)!;
  const rKbps = link.rate_kbps;
  const rows: DerivedRow[] = [];
  for (const [k, a, b] of phases) {
    const v = lines.filter((x) => x.t >= a + 3 && x.t <= b - 1 && (x.pp_samples ?? 0) > 0 && x.pp_bps_median_payload).map((x) => x.pp_bps_median_payload! / 1000);
    const ideal = fifo ? rKbps : rKbps / (k + 1);
    const med = quantile(v, 0.5);
    const p10 = quantile(v, 0.1);
    const txt = `median ${f(med, 1)} kbit/s, p10 ${f(p10, 1)}, ${v.length} one-second medians, ideal ${f(ideal, 1)}`;
    if (fifo) {
      rows.push(row('plm/E1', `FIFO, k = ${k}: median PP / R`, med / rKbps, `${f(med / rKbps, 3)} (${txt})`, 0.8, null));
    } else {
      rows.push(row('plm/E1', `FQ, k = ${k} (${a + 3}-${b - 1} s): median PP / (R/(k+1))`, med / ideal, `${f(med / ideal, 3)} (${txt})`, 0.95, 1.05));
      rows.push(row('plm/E1', `FQ, k = ${k}: 10th percentile / (R/(k+1))`, p10 / ideal, f(p10 / ideal, 3), 0.9, null));
    }
  }
  return rows;
}

/** delay-based.md DE0: each +20 ms step cuts R_TARGET within 2 epochs (+ the log's 1 s); the
 *  receivers whose packets carry a ±0.5 s sender clock offset decide as the one without. */
function delaySteps(sc: Scenario, dir: string, t0: number): DerivedRow[] {
  const fl = layered(sc)[0];
  const steps = sc.schedule.filter((x) => x.delay_ms != null).map((x) => x.at_s);
  const pps = ladderRates(fl.layers).reduce((a, b) => a + b, 0) * 1000 / 8 / fl.packet_size;
  const epoch = Math.min(1, Math.max(0.2, 16 / pps));
  const bound = Math.round((2 * epoch + 1) * 100) / 100;
  const rows: DerivedRow[] = [];
  const players = fl.receivers.map((r) => ({ name: r.name, ...readPlayer(dir, fl.name, r.name, t0) }));
  for (const p of players) {
    for (const ts of steps) {
      const before = p.lines.filter((x) => x.t >= ts - 5 && x.t < ts && x.estimate_bps).map((x) => x.estimate_bps!);
      const ref = quantile(before, 0.5);
      const hit = p.lines.find((x) => x.t > ts && x.t <= ts + 5 && x.estimate_bps != null && x.estimate_bps <= 0.8 * ref);
      const dec = p.decisions.find((d) => d.at_s >= ts && d.at_s <= ts + 5);
      rows.push(
        row(
          'delay/DE0',
          `${p.name}: +20 ms step at ${ts} s -> R_TARGET cut >= 20 % in the log line of (s; 2 epochs of ${f(epoch)} s + 1 s log)`,
          hit ? hit.t - ts : NaN,
          hit ? `${f(hit.t - ts)} (R_TARGET ${f(ref / 1000, 0)} -> ${f(hit.estimate_bps! / 1000, 0)} kbit/s)${dec ? `; first decision ${f(dec.at_s - ts)} s: ${dec.reason} zone ${dec.inputs.zone ?? '?'} trend ${dec.inputs.trend_d ?? '?'}` : ''}` : `no cut (R_TARGET ${f(ref / 1000, 0)} kbit/s before)`,
          0,
          bound,
        ),
      );
    }
  }
  // Offset receivers against rcv, with a control receiver (no offset) for the agreement two
  // receivers reach anyway.
  const atOf = (name: string) => fl.receivers.find((r) => r.name === name)!.at;
  const offsetOf = (name: string) => DE0_OFFSETS[Object.keys(DE0_OFFSETS).find((l) => l.endsWith(`-${atOf(name)}`)) ?? ''] ?? 0;
  const [base, control] = players.filter((p) => offsetOf(p.name) === 0);
  if (base && control) {
    const levelAt = (p: (typeof players)[0]) => new Map(p.lines.filter((x) => x.t >= 5).map((x) => [Math.round(x.t), x.layers]));
    const bl = levelAt(base);
    const agree = (p: (typeof players)[0]) => {
      const pl = levelAt(p);
      const common = [...bl.keys()].filter((s) => pl.has(s));
      return { frac: common.length ? common.filter((s) => pl.get(s) === bl.get(s)).length / common.length : NaN, n: common.length };
    };
    const meanLevel = (p: (typeof players)[0]) => {
      const v = p.lines.filter((x) => x.t >= 5).map((x) => x.layers);
      return v.reduce((a, b) => a + b, 0) / Math.max(1, v.length);
    };
    const c = agree(control);
    for (const p of players) {
      if (offsetOf(p.name) === 0) continue;
      const a = agree(p);
      rows.push(
        row(
          'delay/DE0',
          `${p.name} (clock offset ${offsetOf(p.name) / 1e6} s): seconds at ${base.name}'s level, minus the control ${control.name}'s (no offset)`,
          a.frac - c.frac,
          `${f(a.frac - c.frac, 3)} (${f(a.frac, 3)} vs control ${f(c.frac, 3)} of ${a.n} s; mean level ${f(meanLevel(p))} vs ${base.name} ${f(meanLevel(base))}, ${control.name} ${f(meanLevel(control))}; decisions ${p.decisions.length} vs ${base.decisions.length}, ${control.decisions.length})`,
          -0.1,
          null,
        ),
      );
    }
  }
  return rows;
}

/** delay-based.md DE8: the session exits before the 15-s squeeze below B_0 ends. */
function exitRule(sc: Scenario, dir: string, t0: number): DerivedRow[] {
  const fl = layered(sc)[0];
  const { decisions } = readPlayer(dir, fl.name, fl.receivers[0].name, t0);
  const sq = sc.schedule.filter((x) => x.rate_kbps != null).sort((a, b) => a.at_s - b.at_s);
  const [s0, s1] = [sq[0].at_s, sq[1]?.at_s ?? sc.duration_s];
  // An exit is a decision to 0 layers whose reason names it (not `slow-start-exit`, which only
  // ends the slow start).
  const isExit = (d: Decision) => d.to === 0 && /exit/.test(d.reason);
  // The player stops on the controller's Exit at once and writes an `exit` event line, but the
  // decisions it had not yet written with a per-second line go with it (player/src/receiver.rs
  // breaks out of its loop before the next line): an exit inside the run without its decision
  // in the log is taken from that event (reason unknown; a run's own end stops every player at
  // the run's duration, later than any squeeze).
  const evAt = playerExitAt(dir, fl.name, fl.receivers[0].name, t0);
  const fromEvent: Decision | undefined = evAt !== undefined && evAt < sc.duration_s - 2 ? { at_s: evAt, from: NaN, to: 0, reason: 'player exit event (decision not logged)', inputs: {} } : undefined;
  const ex = decisions.find(isExit) ?? fromEvent;
  const early = decisions.find((d) => isExit(d) && d.at_s < s0);
  const lastBefore = [...decisions].filter((d) => ex && d.at_s < ex.at_s).pop();
  // Layers held after the squeeze: the per-second lines' levels in [end + 2 s, duration], none
  // once the player has exited (it writes no more lines; with an exit decision logged its
  // level is 0 from then on).
  const [h0, h1] = [s1 + 2, sc.duration_s];
  const { lines } = readPlayer(dir, fl.name, fl.receivers[0].name, t0);
  const held = lines.filter((x) => x.t >= h0 && x.t <= h1 && (evAt === undefined || x.t < evAt)).map((x) => x.layers);
  const heldMax = held.length ? Math.max(...held) : 0;
  return [
    row('delay/DE8', `layers held ${h0}-${h1} s (after the exit, squeeze over)`, heldMax, `${heldMax} (${held.length} per-second lines in the window${evAt !== undefined ? `; player exited at ${f(evAt, 1)} s` : ''})`, null, 0),
    row(
      'delay/DE8',
      `exit after the squeeze below B_0 at ${s0} s (s; squeeze ${s1 - s0} s)`,
      ex && !early ? ex.at_s - s0 : NaN,
      ex ? `${f(ex.at_s - s0)} (${ex.reason}${lastBefore ? `; previous: ${lastBefore.reason} ${lastBefore.from}->${lastBefore.to} at ${f(lastBefore.at_s - s0)} s` : ''}; r_target ${f((ex.inputs.r_target ?? NaN) / 1000, 1)} kbit/s)` : early ? `exit before the squeeze at ${f(early.at_s)} s` : 'no exit',
      0,
      s1 - s0,
    ),
  ];
}

/** When the player's process ended on its own (`{"event":"exit"}` line), in run seconds: its
 *  `elapsed_s` on the clock of the per-second lines (`t` − `elapsed_s` = the player's start). */
export function playerExitAt(dir: string, flow: string, rcv: string, t0: number): number | undefined {
  const file = path.join(dir, `player-${flow}-${rcv}`, 'player.jsonl');
  if (!fs.existsSync(file)) return undefined;
  let start: number | undefined;
  let exitElapsed: number | undefined;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    let j: { t?: number; elapsed_s?: number; event?: string };
    try {
      j = JSON.parse(line);
    } catch {
      continue;
    }
    if (typeof j.elapsed_s !== 'number') continue;
    if (typeof j.t === 'number') start ??= j.t - j.elapsed_s;
    else if (j.event === 'exit') exitElapsed = j.elapsed_s;
  }
  return start !== undefined && exitElapsed !== undefined ? start + exitElapsed - t0 : undefined;
}

/** delay-based.md DE3 (bottleneck queueing delay from the emulator's queue samples) and DE4
 *  (packets lost right after each join) on the DE1 run. */
function queueAndJoins(sc: Scenario, dir: string, t0: number): DerivedRow[] {
  const rows: DerivedRow[] = [];
  const fl = layered(sc)[0];
  const bn = sc.topology.links.reduce((a, b) => (b.rate_kbps < a.rate_kbps ? b : a));
  const name = `${bn.from}-${bn.to}`;
  const lj = JSON.parse(fs.readFileSync(path.join(dir, 'links.json'), 'utf8')) as { samples: { t: number; link: string; dir: string; queue_packets: number }[] };
  const pktMs = (fl.packet_size * 8) / bn.rate_kbps;
  const q = lj.samples.filter((s) => s.link === name && s.dir === 'ab' && s.t >= 10).map((s) => s.queue_packets * pktMs);
  const players = fl.receivers.map((r) => readPlayer(dir, fl.name, r.name, t0));
  const thr = players.flatMap((p) => p.decisions).filter((d) => d.inputs.d1 != null).pop();
  const d1 = thr ? thr.inputs.d1 * 1000 : 10;
  const d2 = thr ? thr.inputs.d2 * 1000 : 25;
  const limitMs = Number((bn.queue as { limit_ms?: number } | null)?.limit_ms ?? NaN);
  const med = quantile(q, 0.5);
  const p99 = quantile(q, 0.99);
  const upF = path.join(dir, `pcap-bottleneck-${bn.from}.pcap`);
  const downF = path.join(dir, `pcap-bottleneck-${bn.to}.pcap`);
  const havePcap = fs.existsSync(upF) && fs.existsSync(downF);
  // With the captures these two rows are informational: a queue length sampled once a second
  // is not the spec's sojourn time (below).
  const band = (lo: number | null, hi: number | null): [number | null, number | null] => (havePcap ? [null, null] : [lo, hi]);
  rows.push(row('delay/DE3', `bottleneck queueing delay median, 10-${sc.duration_s} s (ms; 1-s samples of queue length x packet time)`, med, `${f(med, 1)} (${q.length} samples; d1 ${f(d1, 1)}, d2 ${f(d2, 1)} ms from the controller's last decision)`, ...band(Math.round(d1 * 10) / 10, Math.round(d2 * 10) / 10)));
  rows.push(row('delay/DE3', 'bottleneck queueing delay p99 (ms) < buffer drain time', p99, `${f(p99, 1)} (buffer ${limitMs} ms)`, ...band(null, Number.isFinite(limitMs) ? limitMs : null)));
  // The spec's measure (delay-based.md DE3: "sojourn time (from tc stats or pcap)"): every
  // packet's own wait, from captures on both ends of the bottleneck. The 1-s samples above
  // count packets waiting behind the one in service at one instant a second: below the link
  // rate a CBR mix queues in short bursts (a packet waits for the one in service, 26.7 ms at
  // 300 kbit/s, or one or two more), which an instant sample mostly misses but every packet
  // that arrives in one feels, and which the receivers' daowd measures.
  if (havePcap) {
    const soj = bottleneckSojournMs(upF, downF, t0, 10, sc.duration_s);
    const sm = quantile(soj, 0.5);
    const s99 = quantile(soj, 0.99);
    const mean = soj.length ? soj.reduce((x, y) => x + y, 0) / soj.length : NaN;
    rows.push(row('delay/DE3', `bottleneck sojourn (queueing) median, 10-${sc.duration_s} s (ms; per packet, pcap on both ends)`, sm, `${f(sm, 1)} (${soj.length} packets; mean ${f(mean, 1)}, p90 ${f(quantile(soj, 0.9), 1)}; d1 ${f(d1, 1)}, d2 ${f(d2, 1)} ms)`, Math.round(d1 * 10) / 10, Math.round(d2 * 10) / 10));
    rows.push(row('delay/DE3', 'bottleneck sojourn (queueing) p99 (ms; per packet, pcap) < buffer drain time', s99, `${f(s99, 1)} (buffer ${limitMs} ms)`, null, Number.isFinite(limitMs) ? limitMs : null));
  }
  const perJoin: number[] = [];
  for (const p of players) {
    for (const d of p.decisions.filter((x) => x.to > x.from)) {
      perJoin.push(p.lines.filter((x) => x.t > d.at_s && x.t <= d.at_s + 2).reduce((s, x) => s + (x.lost_1s ?? 0), 0));
    }
  }
  rows.push(row('delay/DE4', 'packets lost within 2 s after a join, worst join', perJoin.length ? Math.max(...perJoin) : NaN, `${perJoin.length ? Math.max(...perJoin) : 'no joins'} (${perJoin.length} joins, ${perJoin.filter((x) => x > 0).length} with loss, ${perJoin.reduce((a, b) => a + b, 0)} packets in all)`, 0, 0));
  return rows;
}

/** Receivers on one node share their bottleneck: the share of seconds they all hold one level. */
function agreement(sc: Scenario, dir: string, t0: number, check: string, [a, b]: [number, number]): DerivedRow[] {
  const fl = layered(sc)[0];
  const groups = new Map<string, string[]>();
  for (const r of fl.receivers) groups.set(r.at, [...(groups.get(r.at) ?? []), r.name]);
  const rows: DerivedRow[] = [];
  for (const [node, names] of groups) {
    if (names.length < 2) continue;
    const lv = names.map((n) => new Map(readPlayer(dir, fl.name, n, t0).lines.filter((x) => x.t >= a && x.t <= b).map((x) => [Math.round(x.t), x.layers])));
    const secs = [...lv[0].keys()].filter((s) => lv.every((m) => m.has(s)));
    const same = secs.filter((s) => lv.every((m) => m.get(s) === lv[0].get(s))).length;
    const levels = [...new Set(secs.flatMap((s) => lv.map((m) => m.get(s)!)))].sort((x, y) => x - y);
    rows.push(row(check, `${node} (${names.length} receivers): seconds all at one level, ${a}-${b} s`, secs.length ? same / secs.length : NaN, `${f(secs.length ? same / secs.length : NaN, 3)} of ${secs.length} s (levels seen ${levels.join(',')})`, 0.95, null));
  }
  return rows;
}

/** plm.md E7: no decision after `from_s` moves more than one layer. */
function oneLayerPerChange(sc: Scenario, dir: string, t0: number, check: string, fromS: number): DerivedRow[] {
  let worst = 0;
  let n = 0;
  for (const fl of layered(sc)) {
    for (const r of fl.receivers) {
      for (const d of readPlayer(dir, fl.name, r.name, t0).decisions) {
        if (d.to === d.from || d.at_s < fromS) continue;
        n++;
        worst = Math.max(worst, Math.abs(d.to - d.from));
      }
    }
  }
  return [row(check, `layers moved by one decision after ${fromS} s, most`, n ? worst : 0, `${worst} (${n} level changes)`, 0, 1)];
}
