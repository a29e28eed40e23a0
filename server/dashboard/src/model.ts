// The dashboard's data model: the latest snapshot plus bounded histories, updated by a pure-ish
// `apply(snapshot)`. Everything the views draw is derived here so it can be unit-tested without
// a browser. One snapshot per second from /api/live; histories keep HISTORY_S seconds.
import { Ring } from "./series";
import type { Decision, Session, Snapshot, Viewer } from "./types";

export const HISTORY_S = 300;
/** A gap longer than this between snapshots breaks the lines in charts (NaN sample). */
export const GAP_S = 5;
/** Per-viewer decision log kept by the dashboard (the server caps its own list at ~50). */
export const DECISION_CAP = 200;

export const VIEWER_KEYS = ["layers", "rate", "estimate", "loss", "fps", "freezes"] as const;
export type ViewerKey = (typeof VIEWER_KEYS)[number];
export const SESSION_KEYS = ["send_bps", "recv_bps_mean", "viewers", "loss_mean", "tfmcc_bps"] as const;
export type SessionKey = (typeof SESSION_KEYS)[number];
export const GLOBAL_KEYS = ["viewers", "active", "rate_p10", "rate_p50", "rate_p90", "loss_mean", "layers_mean"] as const;
export type GlobalKey = (typeof GLOBAL_KEYS)[number];

export interface SessionHistory {
  ring: Ring<SessionKey>;
  /** Viewer counts per layer count over time (index k = holding k+1 layers). */
  byLayer: Ring<string>;
  prevBytes?: number;
  prevT?: number;
}

export interface Aggregates {
  total: number;
  active: number;
  /** index k: active viewers holding exactly k layers (0 = none yet). */
  layersHist: number[];
  /** Loss buckets: [0], (0,1%], (1,5%], (5,10%], (10,20%], >20%. */
  lossHist: number[];
  rateP10: number;
  rateP50: number;
  rateP90: number;
  lossMean: number;
  layersMean: number;
  freezesTotal: number;
}

export const LOSS_BUCKETS = [0, 0.01, 0.05, 0.1, 0.2] as const;
export const LOSS_BUCKET_LABELS = ["0", "≤1%", "≤5%", "≤10%", "≤20%", ">20%"] as const;

export function lossBucket(loss: number): number {
  if (!(loss > 0)) return 0;
  for (let i = 1; i < LOSS_BUCKETS.length; i++) if (loss <= LOSS_BUCKETS[i]!) return i;
  return LOSS_BUCKETS.length;
}

/** Nearest-rank quantile of an already sorted array. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i]!;
}

export function aggregate(viewers: readonly Viewer[]): Aggregates {
  const active = viewers.filter((v) => !v.gone);
  const maxL = active.reduce((m, v) => Math.max(m, v.layers, v.max_layers), 0);
  const layersHist = new Array<number>(maxL + 1).fill(0);
  const lossHist = new Array<number>(LOSS_BUCKETS.length + 1).fill(0);
  let lossSum = 0;
  let layerSum = 0;
  let freezes = 0;
  const rates: number[] = [];
  for (const v of active) {
    layersHist[Math.max(0, Math.min(maxL, Math.round(v.layers)))]!++;
    lossHist[lossBucket(v.loss_ratio)]!++;
    lossSum += v.loss_ratio;
    layerSum += v.layers;
    freezes += v.freezes;
    rates.push(v.rate_bps);
  }
  rates.sort((a, b) => a - b);
  const n = active.length;
  return {
    total: viewers.length,
    active: n,
    layersHist,
    lossHist,
    rateP10: quantile(rates, 0.1),
    rateP50: quantile(rates, 0.5),
    rateP90: quantile(rates, 0.9),
    lossMean: n ? lossSum / n : NaN,
    layersMean: n ? layerSum / n : NaN,
    freezesTotal: freezes,
  };
}

function decisionKey(d: Decision): string {
  return `${d.at_s}|${d.from}|${d.to}|${d.reason}`;
}

/**
 * Merge the server's (capped, most-recent-last) decision list into our longer log `log`
 * (modified in place and returned), keeping time order and dropping duplicates. Works whether
 * the server sends the whole recent list each time (the contract) or only new decisions.
 * It runs for every viewer every second, so it is linear in the incoming list: an entry older
 * than the newest one we hold cannot be new (the server lists decisions in time order); only
 * entries at exactly that time are compared by key.
 */
export function mergeDecisions(log: Decision[], incoming: readonly Decision[], cap = DECISION_CAP): Decision[] {
  if (incoming.length === 0) return log;
  const lastT = log.length ? log[log.length - 1]!.at_s : -Infinity;
  const n0 = log.length;
  let sameT: Set<string> | null = null;
  let ordered = true;
  for (const d of incoming) {
    if (d.at_s < lastT) continue;
    if (d.at_s === lastT) {
      if (!sameT) {
        sameT = new Set();
        for (let i = n0 - 1; i >= 0 && log[i]!.at_s === lastT; i--) sameT.add(decisionKey(log[i]!));
      }
      const k = decisionKey(d);
      if (sameT.has(k)) continue;
      sameT.add(k);
    }
    if (log.length && d.at_s < log[log.length - 1]!.at_s) ordered = false;
    log.push(d);
  }
  if (!ordered) log.sort((a, b) => a.at_s - b.at_s);
  if (log.length > cap) log.splice(0, log.length - cap);
  return log;
}

export class Model {
  t = 0;
  sessions: Session[] = [];
  viewers: Viewer[] = [];
  viewerById = new Map<string, Viewer>();
  sessionById = new Map<string, Session>();
  viewerHist = new Map<string, Ring<ViewerKey>>();
  /** Every decision the server reported (including periodic "hold" decisions, from == to). */
  decisions = new Map<string, Decision[]>();
  /**
   * Only layer changes (from != to). Kept apart because some controllers (ERA) log a decision
   * every adaptation interval; in one shared capped log the holds would push the joins and
   * leaves out within a minute.
   */
  changes = new Map<string, Decision[]>();
  sessionHist = new Map<string, SessionHistory>();
  global = new Ring<GlobalKey>(HISTORY_S, GLOBAL_KEYS);
  agg: Aggregates = aggregate([]);
  /** Snapshots ignored because they were older than or equal to the last one applied. */
  staleSnapshots = 0;
  /** Bumped on every applied snapshot; React subscribes to this. */
  version = 0;

  /** Apply one snapshot. Returns false (and changes nothing) for a stale/duplicate snapshot. */
  apply(s: Snapshot): boolean {
    if (this.version > 0 && s.t <= this.t) {
      this.staleSnapshots++;
      return false;
    }
    const gap = this.version > 0 && s.t - this.t > GAP_S;
    this.t = s.t;
    this.sessions = s.sessions;
    // A delta updates the viewers it names and removes the ones it lists; the others keep
    // their last report.
    const delta = s.full === false;
    let viewers: Viewer[] = s.viewers;
    if (delta) {
      const m = new Map(this.viewerById);
      for (const id of s.removed ?? []) m.delete(id);
      for (const v of s.viewers) m.set(v.id, v);
      viewers = [...m.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    }
    const reported = delta ? new Set(s.viewers.map((v) => v.id)) : null;
    this.viewers = viewers;
    this.sessionById = new Map(s.sessions.map((x) => [x.id, x]));
    this.viewerById = new Map(viewers.map((x) => [x.id, x]));

    // Viewers the server no longer lists are forgotten, with their histories.
    for (const id of [...this.viewerHist.keys()]) {
      if (!this.viewerById.has(id)) {
        this.viewerHist.delete(id);
        this.decisions.delete(id);
        this.changes.delete(id);
      }
    }
    for (const id of [...this.sessionHist.keys()]) {
      if (!this.sessionById.has(id)) this.sessionHist.delete(id);
    }

    for (const v of viewers) {
      let h = this.viewerHist.get(v.id);
      if (!h) {
        h = new Ring(HISTORY_S, VIEWER_KEYS);
        this.viewerHist.set(v.id, h);
      }
      if (gap && h.length > 0) h.push(s.t - 1, {});
      if (!v.gone) {
        h.push(s.t, {
          layers: v.layers,
          rate: v.rate_bps,
          estimate: v.estimate_bps ?? NaN,
          loss: v.loss_ratio,
          fps: v.fps,
          freezes: v.freezes,
        });
      }
      if (reported && !reported.has(v.id)) continue;
      const all = this.decisions.get(v.id) ?? [];
      const before = all.length ? all[all.length - 1] : undefined;
      const n0 = all.length;
      mergeDecisions(all, v.decisions);
      this.decisions.set(v.id, all);
      // New entries are those after `before` (mergeDecisions appends, then may trim the head).
      const start = before === undefined ? 0 : all.lastIndexOf(before) + 1;
      const fresh = all.length !== n0 || all[all.length - 1] !== before ? all.slice(start).filter((d) => d.from !== d.to) : [];
      if (fresh.length || !this.changes.has(v.id)) this.changes.set(v.id, mergeDecisions(this.changes.get(v.id) ?? [], fresh));
    }

    for (const ses of s.sessions) {
      let h = this.sessionHist.get(ses.id);
      if (!h) {
        h = { ring: new Ring(HISTORY_S, SESSION_KEYS), byLayer: new Ring(HISTORY_S, layerKeys(16)) };
        this.sessionHist.set(ses.id, h);
      }
      let send = NaN;
      if (h.prevBytes !== undefined && h.prevT !== undefined && s.t > h.prevT && ses.bytes_sent >= h.prevBytes) {
        send = ((ses.bytes_sent - h.prevBytes) * 8) / (s.t - h.prevT);
      }
      h.prevBytes = ses.bytes_sent;
      h.prevT = s.t;
      const mine = viewers.filter((v) => v.session_id === ses.id && !v.gone);
      const lossMean = mine.length ? mine.reduce((a, v) => a + v.loss_ratio, 0) / mine.length : NaN;
      const recvMean = mine.length ? mine.reduce((a, v) => a + v.rate_bps, 0) / mine.length : NaN;
      if (gap && h.ring.length > 0) {
        h.ring.push(s.t - 1, {});
        h.byLayer.push(s.t - 1, {});
      }
      h.ring.push(s.t, {
        send_bps: send,
        recv_bps_mean: recvMean,
        viewers: mine.length,
        loss_mean: lossMean,
        tfmcc_bps: ses.tfmcc ? ses.tfmcc.rate_bps : NaN,
      });
      const counts: Record<string, number> = {};
      viewersByLayer(ses, mine).forEach((c, k) => (counts[`l${k}`] = c));
      h.byLayer.push(s.t, counts);
    }

    this.agg = aggregate(viewers);
    if (gap && this.global.length > 0) this.global.push(s.t - 1, {});
    this.global.push(s.t, {
      viewers: this.agg.total,
      active: this.agg.active,
      rate_p10: this.agg.rateP10,
      rate_p50: this.agg.rateP50,
      rate_p90: this.agg.rateP90,
      loss_mean: this.agg.lossMean,
      layers_mean: this.agg.layersMean,
    });
    this.version++;
    return true;
  }
}

export function layerKeys(n: number): string[] {
  return Array.from({ length: n }, (_, k) => `l${k}`);
}

/**
 * Viewers by layer count for one session: the server's `viewers_by_layer` when present
 * (authoritative, includes viewers beyond any cap), else counted from the viewer list.
 */
export function viewersByLayer(ses: Session, viewers: readonly Viewer[]): number[] {
  if (ses.viewers_by_layer.length > 0) return ses.viewers_by_layer.slice(0, 16);
  const n = Math.max(ses.layers.length, 1);
  const out = new Array<number>(Math.min(16, n)).fill(0);
  for (const v of viewers) {
    const k = Math.round(v.layers) - 1;
    if (k >= 0 && k < out.length) out[k]!++;
  }
  return out;
}

export type SortKey = "id" | "layers" | "rate" | "loss" | "freezes" | "fps" | "last_change";

export interface ViewerFilter {
  session?: string;
  text?: string;
  hideGone?: boolean;
  sort: SortKey;
  desc: boolean;
}

export function filterSortViewers(m: Model, f: ViewerFilter): Viewer[] {
  const text = (f.text ?? "").trim().toLowerCase();
  const out = m.viewers.filter(
    (v) =>
      (!f.session || v.session_id === f.session) &&
      (!f.hideGone || !v.gone) &&
      (!text || v.id.toLowerCase().includes(text) || v.addr.toLowerCase().includes(text) || v.protocol.includes(text)),
  );
  const lastChange = (v: Viewer) => {
    const d = m.changes.get(v.id);
    return d && d.length ? d[d.length - 1]!.at_s : 0;
  };
  const key: (v: Viewer) => number | string =
    f.sort === "id"
      ? (v) => v.id
      : f.sort === "layers"
        ? (v) => v.layers
        : f.sort === "rate"
          ? (v) => v.rate_bps
          : f.sort === "loss"
            ? (v) => v.loss_ratio
            : f.sort === "freezes"
              ? (v) => v.freezes
              : f.sort === "fps"
                ? (v) => v.fps
                : lastChange;
  const dir = f.desc ? -1 : 1;
  out.sort((a, b) => {
    const ka = key(a);
    const kb = key(b);
    if (ka < kb) return -dir;
    if (ka > kb) return dir;
    return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
  });
  return out;
}
