// The quality suite of issue 20 (`make quality`, `layercast-e2e quality-suite`): what a viewer
// sees on the paths of the issue's targets, with ERA and PLM, over N runs, as mean ± 95 % CI.
//
// One run = one session (the natural clip through the scripted quality test,
// examples/quality-test.ts) with one viewer per case, each behind its own access link from the
// same router: every case sees the same encoded pictures, so a lossy viewer's PSNR is compared
// with the clean viewer's of the same run, at the same picture size. Per case and protocol the
// runs' values are folded into mean ± 95 % CI (Student t, repeat.ts) and one acceptance row
// records them with the issue's targets (scripts/acceptance.mjs `issue20/...`).
import fs from 'node:fs';
import path from 'node:path';
import { qualityTest, SMALL_VIDEO, type Viewer } from '../examples/quality-test.js';
import { DEFAULT_LADDER, histogramQuantilesMs, removePictures, type PlayerQuality } from './quality.js';
import { meanCi95 } from './repeat.js';
import { recordAcceptance } from './acceptance.js';
import { findBinary } from './bins.js';
import { startKeepAwake } from './sh.js';

/** One bound of a case: the metric, the band, and how the runs are judged ('mean': the mean
 *  over the runs is in the band, the rule of repeat.ts; 'every': every run is). */
export interface Target {
  metric: Metric;
  max?: number;
  min?: number;
  over: 'mean' | 'every';
  text: string;
}

export interface SuiteCase {
  id: string;
  title: string;
  viewer: Omit<Viewer, 'name' | 'minPsnrDb'>;
  targets: Target[];
}

/** The per-run numbers the suite folds (one value per run and case). */
export const METRICS = {
  fpsRatio: 'shown fps / source fps at the held layer',
  freezesPerMin: 'freezes per minute',
  frozenSPerMin: 'seconds frozen per minute',
  longestFreezeS: 'longest freeze, s',
  psnrDb: 'PSNR, dB',
  psnrDropDb: 'PSNR below the clean viewer at the same picture size, dB',
  ssim: 'SSIM',
  latencyP50Ms: 'glass-to-glass p50, ms',
  latencyP95Ms: 'glass-to-glass p95, ms',
  decodeLatencyP50Ms: 'capture to decode p50, ms',
  layersHeld: 'layers held (median)',
  sourceFps: 'source fps (the sender)',
  lost: 'packets lost',
  repaired: 'packets FEC recovered',
  retransmitted: 'packets retransmitted into a gap',
  unrepaired: 'lost − recovered − retransmitted packets (upper bound on lost media packets)',
} as const;
export type Metric = keyof typeof METRICS;

/** The viewers' access rates, chosen against the ladder of the suite's encode (SMALL_VIDEO,
 *  the clip, 1200-byte packets: 6 layers (L3T2); at 30 fps the server announces 2.71 Mbit/s with
 *  headroom, repair and padding, docs/testbed.md "Quality suite"): 4 Mbit/s carries every
 *  layer (at ~70 % load), 1 Mbit/s a middle one (spatial layer 1 at 15 fps, 0.70 Mbit/s).
 *  The suite reports the layers each viewer held, so a ladder that moves shows. */
export const ALL_LAYERS_KBPS = 4000;
/** The suite encodes SMALL_VIDEO at the product's frame rate (the server's default encode is
 *  720p30), not the scripted test's cheaper 15 fps: each temporal layer's frame period, which
 *  every picture's time in the sender's layer queues follows, is half as long (docs/testbed.md
 *  "Quality suite"). */
export const SUITE_FPS = 30;
export const MIDDLE_LAYER_KBPS = 1000;

const T = (metric: Metric, over: Target['over'], band: { min?: number; max?: number }, text: string): Target => ({ metric, over, ...band, text });

/** The issue's Targets table, one case per path. */
export const CASES: SuiteCase[] = [
  {
    id: 'clean',
    title: 'clean path that carries every layer',
    viewer: { bottleneckKbps: ALL_LAYERS_KBPS },
    targets: [
      T('freezesPerMin', 'every', { max: 0 }, '0 freezes'),
      T('fpsRatio', 'mean', { min: 0.97 }, 'shown fps ≥ 0.97 × source at the held layer'),
      T('latencyP95Ms', 'mean', { max: 200 }, 'glass-to-glass p95 ≤ 200 ms'),
      T('latencyP50Ms', 'mean', { max: 100 }, 'p50 ≤ 100 ms'),
    ],
  },
  {
    id: 'middle',
    title: 'clean path that carries a middle layer',
    viewer: { bottleneckKbps: MIDDLE_LAYER_KBPS },
    targets: [T('freezesPerMin', 'every', { max: 0 }, '0 freezes'), T('fpsRatio', 'mean', { min: 0.97 }, 'shown fps ≥ 0.97 × source at the held layer')],
  },
  {
    id: 'loss1',
    title: '1 % random loss on the access link (every layer fits)',
    viewer: { bottleneckKbps: ALL_LAYERS_KBPS, lossPct: 1 },
    targets: [T('freezesPerMin', 'mean', { max: 1 }, '≤ 1 freeze per minute'), T('psnrDropDb', 'mean', { max: 1 }, 'PSNR within 1 dB of lossless')],
  },
  {
    id: 'loss5',
    title: '5 % random loss on the access link (every layer fits)',
    viewer: { bottleneckKbps: ALL_LAYERS_KBPS, lossPct: 5 },
    targets: [T('freezesPerMin', 'mean', { max: 4 }, '≤ 4 freezes per minute'), T('longestFreezeS', 'every', { max: 1 }, 'none longer than 1 s')],
  },
  {
    id: 'jitter20',
    title: '20 ms of jitter on the access link (every layer fits)',
    viewer: { bottleneckKbps: ALL_LAYERS_KBPS, jitterMs: 20 },
    targets: [T('freezesPerMin', 'every', { max: 0 }, '0 freezes')],
  },
  {
    id: 'cubic',
    title: 'access link shared with one CUBIC bulk download',
    viewer: { bottleneckKbps: ALL_LAYERS_KBPS, cubicDownload: true },
    targets: [T('freezesPerMin', 'mean', { max: 2 }, '≤ 2 freezes per minute')],
  },
];

/** LCC first: the product's default controller (docs/protocols/lcc.md); ERA and PLM as published. */
export const PROTOCOLS = ['lcc', 'era', 'plm'] as const;

/** Acceptance id of a case: `issue20/<protocol>-<case>`. */
export const checkId = (protocol: string, c: SuiteCase) => `issue20/${protocol}-${c.id}`;

/** Mean PSNR drop of `q` against `clean` over the picture sizes both showed, weighted by `q`'s
 *  pictures at each size (NaN when they share none): quality lost to the path, not to a
 *  lower layer. */
export function psnrDropDb(q: PlayerQuality, clean: PlayerQuality): number {
  const byWidth = (p: PlayerQuality) => {
    const m = new Map<number, { n: number; sum: number }>();
    for (const b of p.byLayers) {
      const e = m.get(b.width) ?? { n: 0, sum: 0 };
      e.n += b.pictures;
      e.sum += b.pictures * b.psnrMeanDb;
      m.set(b.width, e);
    }
    return m;
  };
  const c = byWidth(clean);
  let n = 0;
  let d = 0;
  for (const [w, e] of byWidth(q)) {
    const ce = c.get(w);
    if (!ce || !ce.n || !e.n) continue;
    d += e.n * (ce.sum / ce.n - e.sum / e.n);
    n += e.n;
  }
  return n ? d / n : NaN;
}

/** One run's numbers of one viewer. */
export function runValues(q: PlayerQuality, clean: PlayerQuality | undefined): Record<Metric, number> {
  const perMin = (x: number) => (q.spanS > 0 ? (x * 60) / q.spanS : NaN);
  const nul = (x: number | null | undefined) => (x === null || x === undefined ? NaN : x);
  return {
    fpsRatio: q.source?.fpsRatio ?? NaN,
    freezesPerMin: q.freezesPerMin,
    frozenSPerMin: perMin(q.freezeTimeS),
    longestFreezeS: q.longestFreezeS,
    psnrDb: q.psnrMeanDb,
    psnrDropDb: clean && clean !== q ? psnrDropDb(q, clean) : NaN,
    ssim: q.ssimMean,
    latencyP50Ms: nul(q.latencyP50Ms),
    latencyP95Ms: nul(q.latencyP95Ms),
    decodeLatencyP50Ms: nul(q.decodeLatencyP50Ms),
    layersHeld: q.layersHeldMedian,
    sourceFps: q.source?.sourceFps ?? NaN,
    lost: nul(q.packets?.lost),
    repaired: nul(q.packets?.fecRecovered),
    retransmitted: nul(q.packets?.retransmitted),
    unrepaired: nul(q.packets?.unrepaired),
  };
}

export interface CaseResult {
  protocol: string;
  case: SuiteCase;
  runs: Record<Metric, number>[];
  stats: Record<Metric, { mean: number; ci: number; n: number }>;
  verdicts: { target: Target; pass: boolean; runsInBand: number }[];
  pass: boolean;
}

const inBand = (v: number, t: Target) => Number.isFinite(v) && (t.min === undefined || v >= t.min) && (t.max === undefined || v <= t.max);

/** Folds the runs of one case: mean ± CI per metric, each target judged as it says. A run
 *  that produced no value (the viewer showed nothing) fails every target it would judge. */
export function foldCase(protocol: string, c: SuiteCase, runs: Record<Metric, number>[], expectedRuns: number): CaseResult {
  const stats = Object.fromEntries((Object.keys(METRICS) as Metric[]).map((m) => [m, meanCi95(runs.map((r) => r[m]))])) as CaseResult['stats'];
  const verdicts = c.targets.map((t) => {
    const vals = runs.map((r) => r[t.metric]);
    const runsInBand = vals.filter((v) => inBand(v, t)).length;
    const complete = runs.length === expectedRuns && vals.every(Number.isFinite);
    const pass = complete && (t.over === 'every' ? runsInBand === runs.length : inBand(stats[t.metric].mean, t));
    return { target: t, pass, runsInBand };
  });
  return { protocol, case: c, runs, stats, verdicts, pass: verdicts.every((v) => v.pass) };
}

const f = (x: number, d: number) => (Number.isFinite(x) ? x.toFixed(d) : '—');
const DIGITS: Record<Metric, number> = {
  fpsRatio: 3, freezesPerMin: 1, frozenSPerMin: 2, longestFreezeS: 2, psnrDb: 1, psnrDropDb: 2, ssim: 3,
  latencyP50Ms: 0, latencyP95Ms: 0, decodeLatencyP50Ms: 0, layersHeld: 1, sourceFps: 1, lost: 0, repaired: 0, retransmitted: 0, unrepaired: 0,
};
export const pm = (s: { mean: number; ci: number }, m: Metric) => `${f(s.mean, DIGITS[m])} ± ${f(s.ci, DIGITS[m])}`;

/** The acceptance value: every measured metric (mean ± CI), then each target's verdict. */
export function caseValue(r: CaseResult): string {
  const s = r.stats;
  const n = r.runs.length;
  return (
    `${n} runs: fps ratio ${pm(s.fpsRatio, 'fpsRatio')}, freezes/min ${pm(s.freezesPerMin, 'freezesPerMin')}, frozen s/min ${pm(s.frozenSPerMin, 'frozenSPerMin')}, ` +
    `longest ${pm(s.longestFreezeS, 'longestFreezeS')} s, PSNR ${pm(s.psnrDb, 'psnrDb')} dB` +
    (Number.isFinite(s.psnrDropDb.mean) ? ` (${pm(s.psnrDropDb, 'psnrDropDb')} dB below clean)` : '') +
    `, SSIM ${pm(s.ssim, 'ssim')}, latency p50/p95 ${pm(s.latencyP50Ms, 'latencyP50Ms')} / ${pm(s.latencyP95Ms, 'latencyP95Ms')} ms, ` +
    `layers ${pm(s.layersHeld, 'layersHeld')}, lost ${pm(s.lost, 'lost')}, FEC-recovered ${pm(s.repaired, 'repaired')}, retransmitted ${pm(s.retransmitted, 'retransmitted')}; ` +
    r.verdicts.map((v) => `${v.target.text}: ${v.pass ? 'pass' : 'FAIL'} (${v.runsInBand}/${n} runs)`).join('; ')
  );
}

export interface SuiteOptions {
  runs?: number;
  seconds?: number;
  protocols?: string[];
  /** Extra flags for every player (a comparison, e.g. `--no-retransmission`): such a run is
   *  not the product's configuration and records no acceptance rows. */
  playerArgs?: string[];
  /** Server video settings over the suite's encode (a comparison, e.g. `{ pacer_peak: 4 }`):
   *  such a run records no acceptance rows either. */
  serverVideo?: Record<string, number>;
  outDir: string;
  /** 'small' (SMALL_VIDEO, default) or 'default' (the server's 720p30 encode). */
  video?: 'small' | 'default';
  /** Frame rate of the small encode (default SUITE_FPS). */
  fps?: number;
  /** Keep every run's pictures (GBs); default: only frames.csv, logs and reports stay. */
  keepPictures?: boolean;
  keepAwake?: boolean;
  log?: (s: string) => void;
}

/** Runs the suite; returns the folded results (also written to outDir/summary.{json,md}). */
export async function runQualitySuite(opts: SuiteOptions): Promise<CaseResult[]> {
  const log = opts.log ?? ((s: string) => console.log(`[quality] ${s}`));
  const runs = opts.runs ?? 5;
  const seconds = opts.seconds ?? 60;
  const protocols = opts.protocols ?? [...PROTOCOLS];
  const fps = opts.fps ?? SUITE_FPS;
  fs.mkdirSync(opts.outDir, { recursive: true });
  const viewers: Viewer[] = CASES.map((c) => ({ name: c.id, minPsnrDb: 0, ...c.viewer }));
  const perCase = new Map<string, Record<Metric, number>[]>();
  const notes: string[] = [];
  const stopSpinners = startKeepAwake(opts.keepAwake !== false ? findBinary('layercast-linkemu') : null);
  const t0 = Date.now();
  const total = runs * protocols.length;
  let k = 0;
  try {
    for (let i = 1; i <= runs; i++) {
      for (const p of protocols) {
        k++;
        const dir = path.join(opts.outDir, `${p}-run${i}`);
        const eta = k > 1 ? ` (about ${Math.round((((Date.now() - t0) / (k - 1)) * (total - k + 1)) / 60000)} min left)` : '';
        log(`run ${k}/${total}: ${p}, repetition ${i} of ${runs}, ${seconds} s, ${viewers.length} viewers${eta}`);
        const r = await qualityTest({
          seconds,
          source: 'clip',
          protocol: p as (typeof PROTOCOLS)[number],
          viewers,
          outDir: dir,
          ...(opts.video === 'default'
            ? opts.serverVideo && { video: opts.serverVideo }
            : { video: { ...SMALL_VIDEO, fps, ...opts.serverVideo }, packetSize: 1200 }),
          ...(opts.playerArgs?.length ? { playerArgs: opts.playerArgs } : {}),
          log: (s) => log(`  ${s}`),
        });
        if (r.skipped) throw new Error(`run not measured: ${r.skipped}`);
        // What the source and the encoder add: capture to the picture's packets queued.
        const mfile = path.join(dir, 'server', 'metrics.txt');
        const enc = fs.existsSync(mfile) ? histogramQuantilesMs(fs.readFileSync(mfile, 'utf8'), 'layercast_video_encode_latency_seconds', [0.5, 0.95, 0.99]) : null;
        if (enc) {
          const line = `${p} run ${i}: encode latency (capture to packets queued) p50 ${enc.ms[0].toFixed(1)} ms, p95 ${enc.ms[1].toFixed(1)} ms, p99 ${enc.ms[2].toFixed(1)} ms over ${enc.count} pictures`;
          log(`  ${line}`);
          notes.push(line);
        }
        const clean = r.players.find((q) => q.player === 'clean');
        for (const c of CASES) {
          const q = r.players.find((x) => x.player === c.id);
          const key = `${p}/${c.id}`;
          if (!perCase.has(key)) perCase.set(key, []);
          if (!q) {
            notes.push(`${p} run ${i}: ${c.id} wrote no frames.csv`);
            continue;
          }
          if (q.timeBase !== 'display') notes.push(`${p} run ${i}: ${c.id} has no frames.jsonl display times; decode times used`);
          perCase.get(key)!.push(runValues(q, clean));
        }
        if (!opts.keepPictures) removePictures(dir);
      }
    }
  } finally {
    await stopSpinners();
  }
  const results: CaseResult[] = [];
  for (const p of protocols) for (const c of CASES) results.push(foldCase(p, c, perCase.get(`${p}/${c.id}`) ?? [], runs));
  const cmd = `make quality ARGS='--runs ${runs}${seconds !== 60 ? ` --seconds ${seconds}` : ''}${opts.video === 'default' ? ' --video default' : fps !== SUITE_FPS ? ` --fps ${fps}` : ''}'`;
  const nt = opts.serverVideo?.temporal ?? (opts.video === 'default' ? DEFAULT_LADDER.temporal : SMALL_VIDEO.temporal);
  const encode = opts.video === 'default' ? `server default encode (720p30 L3T${nt})` : `640x360 L${SMALL_VIDEO.spatial}T${nt} at ${fps} fps`;
  const server = Object.entries(opts.serverVideo ?? {}).map(([k, v]) => `video.${k} = ${v}`);
  if (!opts.playerArgs?.length && !server.length) for (const r of results) recordAcceptance(checkId(r.protocol, r.case), `${encode}, ${caseValue(r)}`, r.pass, cmd);
  else if (opts.playerArgs?.length) notes.push(`players ran with ${opts.playerArgs.join(' ')}: a comparison, no acceptance rows recorded`);
  if (server.length) notes.push(`the server ran with ${server.join(', ')}: a comparison, no acceptance rows recorded`);
  const md = suiteMarkdown(results, { runs, seconds, notes, minutes: (Date.now() - t0) / 60000 });
  fs.writeFileSync(path.join(opts.outDir, 'summary.md'), md);
  fs.writeFileSync(path.join(opts.outDir, 'summary.json'), JSON.stringify({ runs, seconds, notes, results: results.map((r) => ({ ...r, case: r.case.id })) }, (_k, v) => (typeof v === 'number' && !Number.isFinite(v) ? null : v), 1));
  return results;
}

/** The suite's table: one row per protocol and case, mean ± 95 % CI over the runs. */
export function suiteMarkdown(results: CaseResult[], meta: { runs: number; seconds: number; notes: string[]; minutes: number }): string {
  const cols: Metric[] = ['fpsRatio', 'freezesPerMin', 'frozenSPerMin', 'longestFreezeS', 'psnrDb', 'psnrDropDb', 'ssim', 'latencyP50Ms', 'latencyP95Ms', 'decodeLatencyP50Ms', 'layersHeld', 'sourceFps', 'lost', 'repaired', 'retransmitted', 'unrepaired'];
  let s = `Quality suite: ${meta.runs} runs × ${meta.seconds} s per protocol, mean ± 95 % CI (Student t), ${meta.minutes.toFixed(1)} min.\n\n`;
  s += `| protocol | case | ${cols.map((c) => METRICS[c]).join(' | ')} | targets |\n|${' --- |'.repeat(cols.length + 3)}\n`;
  for (const r of results) {
    s += `| ${r.protocol} | ${r.case.id} | ${cols.map((c) => pm(r.stats[c], c)).join(' | ')} | ${r.verdicts.map((v) => `${v.target.text}: ${v.pass ? 'pass' : '**FAIL**'} (${v.runsInBand}/${r.runs.length})`).join('; ')} |\n`;
  }
  if (meta.notes.length) s += `\nNotes:\n${meta.notes.map((n) => `- ${n}`).join('\n')}\n`;
  return s;
}

/** `--server-video pacer_peak=4,rate_headroom=1.3`: numeric settings of the server's `video`
 *  section for a comparison run (undefined without the flag). */
export function parseServerVideo(arg: string | undefined): Record<string, number> | undefined {
  if (arg === undefined) return undefined;
  const out: Record<string, number> = {};
  for (const kv of arg.split(',').filter(Boolean)) {
    const m = /^([a-z_]+)=(-?[0-9.]+)$/.exec(kv.trim());
    if (!m) throw new Error(`--server-video wants key=number pairs separated by commas, not ${kv}`);
    out[m[1]] = Number(m[2]);
  }
  return out;
}
