// The soak (`layercast-e2e soak`, docs/reliability.md): one synthetic layered session, N players
// behind four bottleneck classes for a long time. Samples the resident memory of the server and
// of every player, reads each player's per-second log and the server's /api/viewers, and judges:
//   - memory: growth of the resident anonymous memory (RssAnon: heap and stacks, what a leak
//     grows) from minute 5 (mean of the samples in [ref, ref + 60 s)) to the end (mean of the
//     last 60 s of samples) under 5 % for the server and for every player. VmRSS is sampled and
//     reported too, but not judged: it also counts file pages of the binary and libraries,
//     which the kernel evicts and reloads under other processes' memory pressure (the server's
//     VmRSS moved by 0.8 MB, 7 %, within a minute in the first soak while RssAnon did not);
//   - no player stuck below the layer its path carries: no 60-s window (after the first minute)
//     in which a player never held the number of layers its bottleneck carries;
//   - every player alive and reporting to the server (not `gone`) at the end.
// Also sampled and reported, not judged: the part of RssAnon in transparent huge pages
// (AnonHugePages). The server and player turn THP off; a non-zero figure means that did not
// take, and RssAnon steps of up to 2 MiB are then page promotion, not allocation.
import fs from 'node:fs';
import path from 'node:path';
import { Bed, anonKiB, hugeKiB, rssKiB, type BedPlayer, type PLine } from './bed.js';
import { sleep } from './sh.js';

export interface SoakOptions {
  durationS: number;
  players: number;
  dir: string;
  /** Seconds between RSS / API samples (default 10). */
  sampleEveryS?: number;
  /** Start of the memory reference window, s (default min(300, duration / 6)). */
  refS?: number;
  log?: (m: string) => void;
}

export interface ProcMem {
  name: string;
  refKiB: number;
  endKiB: number;
  maxKiB: number;
  growth: number;
}

export interface PlayerVerdict {
  name: string;
  rateKbps: number;
  carries: number;
  meanLayers: number;
  /** Fraction of seconds (after the first minute) at or above `carries`. */
  atLevel: number;
  /** 60-s windows after the first minute in which the player never reached `carries`. */
  stuckWindows: number;
  lossRatio: number;
  /** Longest gap between two per-second log lines, s. */
  maxLineGapS: number;
  aliveAtEnd: boolean;
  goneAtEnd: boolean;
}

export interface SoakResult {
  durationS: number;
  refS: number;
  /** RssAnon growth (judged). */
  mem: ProcMem[];
  /** VmRSS growth (reported). */
  rss: ProcMem[];
  /** Largest AnonHugePages sample per process, KiB (reported; 0 expected, THP is off). */
  hugeMaxKiB: Record<string, number>;
  players: PlayerVerdict[];
  maxGrowth: number;
  serverGrowth: number;
  stuck: string[];
  pass: boolean;
  notes: string[];
  loadavg: number[];
}

/** Bottleneck classes (kbit/s) for the 10 x 100 kbit/s ladder: 3, 5, 8 and 10 layers fit, using
 *  86, 89, 91 and 80 % of the link. A path "carries" k layers when their cumulative rate fits the
 *  link; ERA holds a level only while its packet-pair estimate exceeds it (it held 9 of 10 behind
 *  exactly 1000 kbit/s in a trial), so no class puts a level at 100 % of its link. */
export const SOAK_CLASSES = [350, 560, 880, 1250];
export const SOAK_LADDER = Array(10).fill(100);

export function soakPlayers(n: number): BedPlayer[] {
  return Array.from({ length: n }, (_, i) => ({ name: `p${String(i + 1).padStart(2, '0')}`, rateKbps: SOAK_CLASSES[i % SOAK_CLASSES.length] }));
}

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);

/** Memory growth from the reference window to the end, from samples (t, KiB). */
export function memGrowth(name: string, samples: [number, number][], refS: number, endS: number): ProcMem {
  const ref = mean(samples.filter(([t]) => t >= refS && t < refS + 60).map(([, v]) => v));
  const end = mean(samples.filter(([t]) => t >= endS - 60).map(([, v]) => v));
  return { name, refKiB: ref, endKiB: end, maxKiB: Math.max(...samples.map(([, v]) => v)), growth: (end - ref) / ref };
}

/** The stuck-below-its-path verdict from one player's per-second lines (t relative to start). */
export function levelVerdict(lines: { rel: number; layers: number }[], carries: number, fromS: number, windowS = 60) {
  const after = lines.filter((l) => l.rel >= fromS);
  const atLevel = after.length ? after.filter((l) => l.layers >= carries).length / after.length : 0;
  let stuck = 0;
  if (after.length) {
    const end = after[after.length - 1].rel;
    for (let w = fromS; w + windowS <= end + 1; w += windowS) {
      const win = after.filter((l) => l.rel >= w && l.rel < w + windowS);
      if (win.length && !win.some((l) => l.layers >= carries)) stuck++;
    }
  }
  return { atLevel, stuck, meanLayers: mean(after.map((l) => l.layers)) };
}

export async function runSoak(o: SoakOptions): Promise<SoakResult> {
  const log = o.log ?? ((m: string) => console.error(`[soak] ${m}`));
  const every = o.sampleEveryS ?? 10;
  const refS = o.refS ?? Math.min(300, o.durationS / 6);
  const notes: string[] = [];
  fs.mkdirSync(o.dir, { recursive: true });
  const bed = await Bed.start({ dir: o.dir, players: soakPlayers(o.players), source: 'synthetic', ladderKbps: SOAK_LADDER, links: 'tbf', log });
  const mem = new Map<string, [number, number][]>();
  const rss = new Map<string, [number, number][]>();
  const hugeMaxKiB: Record<string, number> = {};
  const add = (m: Map<string, [number, number][]>, k: string, t: number, v: number | null) => {
    if (v === null) return;
    if (!m.has(k)) m.set(k, []);
    m.get(k)!.push([t, v]);
  };
  const samplesFile = fs.createWriteStream(path.join(o.dir, 'samples.jsonl'));
  let t0 = Date.now();
  const viewersAtEnd = new Map<string, boolean>();
  let alive = new Map<string, boolean>();
  try {
    t0 = Date.now();
    log(`running ${o.players} players for ${o.durationS} s (ladder ${bed.ladderBps.map((r) => r / 1000).join(',')} kbit/s)`);
    while (Date.now() - t0 < o.durationS * 1000) {
      await sleep(Math.min(every * 1000, o.durationS * 1000 - (Date.now() - t0)));
      const t = (Date.now() - t0) / 1000;
      const row: Record<string, number | null | [number | null, number | null, number | null]> = { t };
      for (const [name, pid] of [['server', bed.serverPid()], ...[...bed.players].map(([n, h]) => [n, h.child?.pid])] as [string, number | undefined][]) {
        const a = anonKiB(pid);
        const r = rssKiB(pid);
        const h = hugeKiB(pid);
        row[name] = [a, r, h];
        if (h !== null) hugeMaxKiB[name] = Math.max(hugeMaxKiB[name] ?? 0, h);
        add(mem, name, t, a);
        add(rss, name, t, r);
      }
      let vs: Awaited<ReturnType<Bed['viewers']>> = [];
      try {
        vs = await bed.viewers();
      } catch (e) {
        notes.push(`t=${t.toFixed(0)} s: /api/viewers: ${(e as Error).message}`);
      }
      samplesFile.write(JSON.stringify({ ...row, viewers: vs.map((v) => [v.id, v.layers, v.gone]) }) + '\n');
      if (Math.round(t) % 60 < every) {
        const srv = row.server as [number | null, number | null, number | null];
        log(`t=${t.toFixed(0)} s server RssAnon ${srv[0]} KiB, VmRSS ${srv[1]} KiB; viewers ${vs.filter((v) => !v.gone).length}/${o.players}; load ${fsLoad()}`);
      }
      if (t >= o.durationS - every - 1) for (const v of vs) viewersAtEnd.set(v.id, v.gone);
    }
  } finally {
    samplesFile.end();
    alive = new Map([...bed.players].map(([n, h]) => [n, !!h.child && h.child.exitCode === null && h.child.signalCode === null]));
    const left = await bed.teardown();
    if (left.length) notes.push(`namespaces left: ${left.join(' ')}`);
  }
  const endS = (Date.now() - t0) / 1000;
  const memRes = [...mem].map(([n, s]) => memGrowth(n, s, refS, Math.min(endS, o.durationS)));
  const rssRes = [...rss].map(([n, s]) => memGrowth(n, s, refS, Math.min(endS, o.durationS)));
  const players: PlayerVerdict[] = [];
  for (const p of soakPlayers(o.players)) {
    const lines = bed.lines(p.name);
    const rel = lines.map((l: PLine) => ({ rel: l.t - t0 / 1000, layers: l.layers }));
    const carries = bed.carries(p.name);
    const v = levelVerdict(rel, carries, 60);
    const last = lines[lines.length - 1];
    let gap = 0;
    for (let i = 1; i < lines.length; i++) gap = Math.max(gap, lines[i].t - lines[i - 1].t);
    players.push({
      name: p.name,
      rateKbps: p.rateKbps,
      carries,
      meanLayers: v.meanLayers,
      atLevel: v.atLevel,
      stuckWindows: v.stuck,
      lossRatio: last ? last.packets_lost / Math.max(1, last.packets_lost + last.packets_received) : NaN,
      maxLineGapS: gap,
      aliveAtEnd: alive.get(p.name) ?? false,
      goneAtEnd: viewersAtEnd.get(p.name) ?? true,
    });
  }
  const serverGrowth = memRes.find((m) => m.name === 'server')?.growth ?? NaN;
  const maxGrowth = Math.max(...memRes.map((m) => m.growth));
  const stuck = players.filter((p) => p.stuckWindows > 0).map((p) => p.name);
  const huge = Object.entries(hugeMaxKiB).filter(([, v]) => v > 0);
  if (huge.length) notes.push(`transparent huge pages in ${huge.map(([n, v]) => `${n} (${v} KiB)`).join(', ')}: RssAnon steps of up to 2 MiB there are page promotion, not allocation`);
  const pass =
    Number.isFinite(maxGrowth) &&
    memRes.every((m) => m.growth < 0.05) &&
    memRes.length === o.players + 1 &&
    stuck.length === 0 &&
    players.every((p) => p.aliveAtEnd && !p.goneAtEnd);
  const res: SoakResult = { durationS: endS, refS, mem: memRes, rss: rssRes, hugeMaxKiB, players, maxGrowth, serverGrowth, stuck, pass, notes, loadavg: loadAvg() };
  fs.writeFileSync(path.join(o.dir, 'soak.json'), JSON.stringify(res, null, 1));
  return res;
}

function loadAvg(): number[] {
  try {
    return fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number);
  } catch {
    return [];
  }
}
const fsLoad = () => loadAvg().join(' ');

export function soakSummary(r: SoakResult): string {
  const pct = (x: number) => `${(x * 100).toFixed(2)}%`;
  const lines = [
    `soak ${r.durationS.toFixed(0)} s, ${r.players.length} players; memory reference from ${r.refS.toFixed(0)} s; load ${r.loadavg.join(' ')}`,
    `server RssAnon ${r.mem.find((m) => m.name === 'server')?.refKiB.toFixed(0)} -> ${r.mem.find((m) => m.name === 'server')?.endKiB.toFixed(0)} KiB (${pct(r.serverGrowth)}); max RssAnon growth over all processes ${pct(r.maxGrowth)}`,
    `  (VmRSS, not judged: server ${pct(r.rss.find((m) => m.name === 'server')?.growth ?? NaN)}, max over all ${pct(Math.max(...r.rss.map((m) => m.growth)))}; largest AnonHugePages ${Math.max(0, ...Object.values(r.hugeMaxKiB))} KiB)`,
  ];
  for (const p of r.players) {
    const m = r.mem.find((x) => x.name === p.name);
    lines.push(
      `  ${p.name} ${p.rateKbps} kbit/s carries ${p.carries}: mean ${p.meanLayers.toFixed(2)} layers, at level ${pct(p.atLevel)}, stuck windows ${p.stuckWindows}, loss ${pct(p.lossRatio)}, RssAnon ${m?.refKiB.toFixed(0)} -> ${m?.endKiB.toFixed(0)} KiB (${m ? pct(m.growth) : '?'})${p.aliveAtEnd ? '' : ' DEAD'}${p.goneAtEnd ? ' GONE' : ''}`,
    );
  }
  lines.push(`${r.pass ? 'PASS' : 'FAIL'}${r.stuck.length ? ` stuck: ${r.stuck.join(' ')}` : ''}`);
  for (const n of r.notes.slice(0, 20)) lines.push(`note: ${n}`);
  return lines.join('\n');
}
