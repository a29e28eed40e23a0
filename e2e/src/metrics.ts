// The simulator's metrics (research/sim/src/metrics.rs and report.rs), computed from what
// the testbed measured. Same names, same definitions (era.md §2.1), so a scenario's summary
// from either engine can be compared field by field.
import { expand, type Measurement, type Scenario } from './scenario.js';

export type MonKind = 'layered' | 'tcp' | 'cbr' | 'onoff' | 'tfmcc' | 'queue';

/** One receiver's (or unicast flow's) binned record, like the simulator's Monitor. */
export class Monitor {
  bytes: number[] = [];
  received: number[] = [];
  lost: number[] = [];
  /** (time s, layers held), in time order. */
  levels: [number, number][] = [];
  /** Cumulative nominal rate of k layers, index k (0 = nothing). */
  ladderKbps: number[] = [];
  start: number | null = null;
  /** Set when the flow could not be run (e.g. a binary is missing). */
  notRun: string | null = null;
  /** Queue monitors: the emulator's cumulative sojourn histogram (ms -> frames) at each poll. */
  sojourn: [number, Map<number, number>][] = [];

  constructor(
    readonly name: string,
    readonly flow: string,
    readonly kind: MonKind,
  ) {}

  add(interval: number, t: number, bytes: number, received: number, lost: number): void {
    if (t < 0) return;
    const i = Math.floor(t / interval);
    for (const arr of [this.bytes, this.received, this.lost]) while (arr.length <= i) arr.push(0);
    this.bytes[i] += bytes;
    this.received[i] += received;
    this.lost[i] += lost;
  }

  level(t: number, k: number): void {
    const last = this.levels[this.levels.length - 1];
    if (!last || last[1] !== k) this.levels.push([t, k]);
  }

  throughputKbps(iv: number, t0: number, t1: number): number {
    if (t1 <= t0) return NaN;
    return (sumBinned(this.bytes, iv, t0, t1) * 8) / 1000 / (t1 - t0);
  }

  lossCounts(iv: number, t0: number, t1: number): [number, number] {
    return [sumBinned(this.lost, iv, t0, t1), sumBinned(this.received, iv, t0, t1)];
  }

  levelAt(t: number): number {
    let l = 0;
    for (const [at, k] of this.levels) {
      if (at > t) break;
      l = k;
    }
    return l;
  }

  rateOf(k: number): number {
    return this.ladderKbps[k] ?? this.ladderKbps[this.ladderKbps.length - 1] ?? 0;
  }

  private segments(t0: number, t1: number): [number, number, number][] {
    const out: [number, number, number][] = [];
    let curT = t0;
    let cur = this.levelAt(t0);
    for (const [at, k] of this.levels) {
      if (at <= t0) continue;
      if (at >= t1) break;
      out.push([curT, at, cur]);
      curT = at;
      cur = k;
    }
    out.push([curT, t1, cur]);
    return out;
  }

  meanLayers(t0: number, t1: number): number {
    if (t1 <= t0) return NaN;
    return this.segments(t0, t1).reduce((s, [a, b, k]) => s + (b - a) * k, 0) / (t1 - t0);
  }

  /** Share of [t0, t1] spent holding at least `min` layers (0..1). */
  timeAtLevel(t0: number, t1: number, min: number): number {
    if (t1 <= t0) return NaN;
    return this.segments(t0, t1).reduce((s, [a, b, k]) => s + (k >= min ? b - a : 0), 0) / (t1 - t0);
  }

  levelRange(t0: number, t1: number): [number, number] {
    const s = this.segments(t0, t1).map((x) => x[2]);
    return [Math.min(...s), Math.max(...s)];
  }

  changesIn(t0: number, t1: number): number {
    let prev = this.levelAt(t0);
    let n = 0;
    for (const [at, k] of this.levels) {
      if (at > t0 && at <= t1 && k !== prev) {
        n++;
        prev = k;
      }
    }
    return n;
  }

  timeUntil(after: number, end: number, cond: (k: number, kbps: number) => boolean): number {
    for (const [a, , k] of this.segments(after, end)) if (cond(k, this.rateOf(k))) return a - after;
    return Infinity;
  }

  /** era.md §2.1 [R]: first time from which the level stays within one layer of the final level for `hold` s. */
  convergenceTime(after: number, end: number, hold: number): number {
    const fin = this.levelAt(end);
    let runStart: number | null = null;
    for (const [a, b, k] of this.segments(after, end)) {
      if (Math.abs(k - fin) <= 1) {
        if (runStart === null) runStart = a;
        if (b - runStart >= hold || b >= end) return runStart - after;
      } else runStart = null;
    }
    return Infinity;
  }

  /** Quantile `q` of the per-frame queueing delay in [t0, t1] (ms), from the difference of
   *  the cumulative histograms polled last at or before t0 and t1; a bucket counts at its
   *  middle (ms + 0.5). NaN without frames. */
  queueDelayQuantile(t0: number, t1: number, q: number): number {
    const at = (t: number) => {
      let h: Map<number, number> | null = null;
      for (const [ts, m] of this.sojourn) {
        if (ts > t) break;
        h = m;
      }
      return h;
    };
    const end = at(t1);
    if (!end) return NaN;
    const start = at(t0) ?? new Map<number, number>();
    const diff = [...end.entries()].map(([ms, n]) => [ms, n - (start.get(ms) ?? 0)] as [number, number]).filter(([, n]) => n > 0).sort((a, b) => a[0] - b[0]);
    const total = diff.reduce((s, [, n]) => s + n, 0);
    if (total === 0) return NaN;
    let acc = 0;
    for (const [ms, n] of diff) {
      acc += n;
      if (acc >= q * total) return ms + 0.5;
    }
    return diff[diff.length - 1][0] + 0.5;
  }

  maxIntervalLoss(iv: number, t0: number, t1: number): number {
    const i0 = Math.floor(t0 / iv);
    const i1 = Math.min(Math.ceil(t1 / iv), this.lost.length);
    let m = 0;
    for (let i = i0; i < i1; i++) {
      const l = this.lost[i];
      const r = this.received[i];
      if (l + r > 0) m = Math.max(m, l / (l + r));
    }
    return m;
  }
}

export function sumBinned(v: number[], iv: number, t0: number, t1: number): number {
  if (t1 <= t0 || v.length === 0) return 0;
  const i0 = Math.floor(t0 / iv);
  const i1 = Math.min(Math.ceil(t1 / iv), v.length);
  let s = 0;
  for (let i = i0; i < i1; i++) {
    const a = i * iv;
    const b = a + iv;
    s += (v[i] * Math.max(0, Math.min(b, t1) - Math.max(a, t0))) / iv;
  }
  return s;
}

/** Jain's index Q (era.md Eq. 4-1). */
export function jain(x: number[]): number {
  const n = x.length;
  const s = x.reduce((a, b) => a + b, 0);
  const s2 = x.reduce((a, b) => a + b * b, 0);
  if (n === 0 || s2 === 0) return NaN;
  return (s * s) / (n * s2);
}

/** Widmer's I = min/max (era.md Eq. 4-2). */
export function minMaxRatio(x: number[]): number {
  if (x.length === 0) return NaN;
  const mx = Math.max(...x);
  if (mx <= 0) return NaN;
  return Math.min(...x) / mx;
}

export interface MeasResult {
  id: string;
  metric: string;
  value: number;
  values: [string, number][];
  min: number | null;
  max: number | null;
  pass: boolean;
  published: string;
  known_issue: string | null;
}

/** Metrics that give one value over all their monitors (no per-entity values). */
export const AGGREGATE = ['sum_throughput_kbps', 'jain', 'fairness_i', 'tcp_friendliness'];

export const inBand = (v: number, min?: number | null, max?: number | null) =>
  !Number.isNaN(v) && (min == null || v >= min) && (max == null || v <= max);

function availableMean(a: number | [number, number, number][], t0: number, t1: number): number {
  if (typeof a === 'number') return a;
  let s = 0;
  let w = 0;
  for (const [x, y, r] of a) {
    const o = Math.max(0, Math.min(y, t1) - Math.max(x, t0));
    s += o * r;
    w += o;
  }
  return w > 0 ? s / w : NaN;
}

export function measure(sc: Scenario, mons: Map<string, Monitor>, m: Measurement): MeasResult {
  const end = sc.duration_s;
  const iv = sc.interval_s;
  const list = expand(sc, m.of).map((n) => {
    const x = mons.get(n);
    if (!x) throw new Error(`no monitor ${n}`);
    return x;
  });
  const win = (mon: Monitor): [number, number] => (m.window ? [m.window[0], Math.min(m.window[1], end)] : [mon.start ?? 0, end]);
  const after = (mon: Monitor) => m.after_s ?? mon.start ?? 0;
  const per = (f: (mon: Monitor) => number): [string, number][] => list.map((mon) => [mon.name, mon.notRun ? NaN : f(mon)]);
  const thr = (mon: Monitor) => mon.throughputKbps(iv, ...win(mon));
  let values: [string, number][] = [];
  switch (m.metric) {
    case 'throughput_kbps':
      values = per(thr);
      break;
    case 'efficiency':
      values = per((mon) => thr(mon) / (m.available_kbps == null ? NaN : availableMean(m.available_kbps, ...win(mon))));
      break;
    case 'loss_ratio':
      values = per((mon) => {
        const [l, r] = mon.lossCounts(iv, ...win(mon));
        return l + r > 0 ? l / (l + r) : 0;
      });
      break;
    case 'lost_packets':
      values = per((mon) => mon.lossCounts(iv, ...win(mon))[0]);
      break;
    case 'max_interval_loss_ratio':
      values = per((mon) => mon.maxIntervalLoss(iv, ...win(mon)));
      break;
    case 'time_to_level':
      values = per((mon) =>
        mon.timeUntil(after(mon), end, (k, r) =>
          (m.min_layers == null || k >= m.min_layers) &&
          (m.max_layers == null || k <= m.max_layers) &&
          (m.min_kbps == null || r >= m.min_kbps) &&
          (m.max_kbps == null || r <= m.max_kbps),
        ),
      );
      break;
    case 'convergence_time':
      values = per((mon) => mon.convergenceTime(after(mon), end, m.hold_s ?? 5));
      break;
    case 'mean_layers':
      values = per((mon) => mon.meanLayers(...win(mon)));
      break;
    case 'time_at_level':
      values = per((mon) => mon.timeAtLevel(...win(mon), m.min_layers ?? 1));
      break;
    case 'min_level':
      values = per((mon) => mon.levelRange(...win(mon))[0]);
      break;
    case 'max_level':
      values = per((mon) => mon.levelRange(...win(mon))[1]);
      break;
    case 'layer_changes':
      values = per((mon) => mon.changesIn(...win(mon)));
      break;
    case 'queue_delay_median_ms':
    case 'queue_delay_p95_ms':
      values = per((mon) => mon.queueDelayQuantile(...win(mon), m.metric === 'queue_delay_p95_ms' ? 0.95 : 0.5));
      break;
    case 'layer_changes_per_min':
      values = per((mon) => {
        const [a, b] = win(mon);
        return (mon.changesIn(a, b) * 60) / (b - a);
      });
      break;
    default:
      if (!AGGREGATE.includes(m.metric)) throw new Error(`unknown metric ${m.metric}`);
  }
  let value: number;
  let pass: boolean;
  if (!AGGREGATE.includes(m.metric)) {
    value = values.reduce((s, x) => s + x[1], 0) / Math.max(values.length, 1);
    pass = values.length > 0 && values.every((x) => inBand(x[1], m.min, m.max));
  } else {
    const x = list.map((mon) => (mon.notRun ? NaN : thr(mon)));
    switch (m.metric) {
      case 'sum_throughput_kbps':
        value = x.reduce((a, b) => a + b, 0);
        break;
      case 'jain':
        value = jain(x);
        break;
      case 'fairness_i':
        value = minMaxRatio(x);
        break;
      default: {
        const t = expand(sc, m.versus).map((n) => {
          const mon = mons.get(n)!;
          return mon.notRun ? NaN : thr(mon);
        });
        const tm = x.reduce((a, b) => a + b, 0) / x.length;
        const tt = t.reduce((a, b) => a + b, 0) / t.length;
        value = tm > 0 && tt > 0 ? tm / tt : NaN;
      }
    }
    pass = inBand(value, m.min, m.max);
  }
  return { id: m.id, metric: m.metric, value, values, min: m.min ?? null, max: m.max ?? null, pass, published: m.published, known_issue: m.known_issue ?? null };
}

/** One CSV row per (interval, monitor), the simulator's `timeseries.csv` columns. */
export function timeseriesCsv(sc: Scenario, mons: Monitor[]): string {
  const iv = sc.interval_s;
  const n = Math.ceil(sc.duration_s / iv);
  let out = 't_s,monitor,kind,rate_kbps,layers,received,lost,loss_ratio\n';
  for (let i = 0; i < n; i++) {
    const t = i * iv;
    for (const m of mons) {
      const b = m.bytes[i] ?? 0;
      const r = m.received[i] ?? 0;
      const l = m.lost[i] ?? 0;
      const lr = r + l > 0 ? l / (r + l) : 0;
      out += `${t.toFixed(3)},${m.name},${m.kind},${((b * 8) / 1000 / iv).toFixed(3)},${m.levelAt(t + iv)},${r},${l},${lr.toFixed(6)}\n`;
    }
  }
  return out;
}
