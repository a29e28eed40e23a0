// TFMCC on the testbed (issue 7; tfrc-tfmcc-pcc.md §7.3): how a `type: tfmcc` flow is started
// (one layercast-server session in TFMCC mode with a synthetic source, players with
// `--controller tfmcc`), how the sender's state is sampled (its HTTP API, polled from inside
// its namespace by a small shell loop so Node never needs a route into the namespaces), and the
// checks that the scenario metrics cannot express (E13's CLR timeout, E16's pacing accuracy).
import fs from 'node:fs';
import type { ReceiverDef, Scenario, TfmccFlow } from './scenario.js';
import { sessionAddrs } from './media.js';

/** HTTP port of TFMCC session k's server (several servers can share the source's namespace). */
export const tfmccHttpPort = (k: number) => 8080 + k;

/** Sender API poll period, s. Fine enough for E13 (10·T is several seconds). */
export const SENDER_POLL_S = 0.2;
/** E15 times no-feedback halvings to ±1 R_max (≈ 0.2 s on its path): it polls every 50 ms
 *  (the server refreshes its snapshot every 100 ms, which then bounds the resolution). */
export const SENDER_POLL_FINE_S = 0.05;

/** The poll period a scenario needs (finer only where a check times the sender's steps). */
export function senderPollS(sc: Scenario): number {
  return sc.measurements.some((m) => m.id.startsWith('tfmcc/E15')) ? SENDER_POLL_FINE_S : SENDER_POLL_S;
}

/** The session's rate ceiling, kbit/s. The scenario format (shared with the simulator, whose
 *  TFMCC sender has no ceiling) has no field for it; the live server needs one (it never sends
 *  above the session's configured rate). The testbed uses 90 % of the rate of the source's
 *  first link, so the ceiling alone can never overrun the sender's own access link and any
 *  real bottleneck further on is what limits the session. */
export function tfmccCeilingKbps(sc: Scenario, f: TfmccFlow): number {
  const l = sc.topology.links.find((x) => x.from === f.from || (x.to === f.from && x.duplex));
  return Math.round(0.9 * (l?.rate_kbps ?? 10_000));
}

export function tfmccServerArgs(sc: Scenario, f: TfmccFlow, k: number, ifAddr: string): string[] {
  const a = sessionAddrs(k);
  const session = {
    id: f.name,
    name: f.name,
    protocol: 'tfmcc',
    source: 'synthetic',
    packet_size: f.packet_size,
    layer_rates_bps: [Math.round(tfmccCeilingKbps(sc, f) * 1000)],
    group: a.group,
    port: a.port,
  };
  return [
    '--dev', // the bed's private namespaces: docs/security.md §9.8
    '--http-addr', `${ifAddr}:${tfmccHttpPort(k)}`,
    '--announce', a.announce,
    '--announce-interval-ms', '500',
    '--interface', ifAddr,
    '--ttl', '16',
    '--session', JSON.stringify(session),
  ];
}

export function tfmccPlayerArgs(r: ReceiverDef, k: number, ifAddr: string, outDir: string, durationS: number): string[] {
  return [
    '--announce', sessionAddrs(k).announce,
    '--controller', 'tfmcc',
    '--interface', ifAddr,
    '--headless',
    '--out', outDir,
    '--duration', durationS.toFixed(3),
    '--viewer-id', r.name,
  ];
}

/** A shell loop (inside the sender's namespace) that appends one JSON line per poll:
 *  `{"t": unix seconds, "s": <the Session object's tfmcc member or the whole object>}`. */
export function senderPollScript(ifAddr: string, k: number, id: string, periodS = SENDER_POLL_S): string[] {
  const url = `http://${ifAddr}:${tfmccHttpPort(k)}/api/sessions/${encodeURIComponent(id)}`;
  const loop =
    `while :; do t=$(date +%s.%N); b=$(curl -sf -m 1 '${url}' | tr -d '\\n'); ` +
    `[ -n "$b" ] && printf '{"t":%s,"s":%s}\\n' "$t" "$b"; sleep ${periodS}; done`;
  return ['-c', loop];
}

/** One sample of the sender's state (times in run seconds). */
export interface SenderSample {
  t: number;
  rate_bps: number;
  sender_rate_bps: number;
  clr_rid: number | null;
  r_max_s: number;
  slow_start: boolean;
  round: number;
  reports_per_round: number;
  receivers_heard: number;
  /** Reports accepted since the start (all receivers). */
  reports_received: number;
  /** The last completed round: number, non-CLR and CLR reports, length (s); null from a
   *  server without these fields. */
  last_round: { round: number; non_clr_reports: number; clr_reports: number; duration_s: number } | null;
  /** When the server took the snapshot this poll read, on the same clock as `t` (null from a
   *  server without the field). A poll sees a snapshot up to 0.1 s old. */
  snap_t?: number | null;
}

export function readSenderLog(file: string, t0s: number): SenderSample[] {
  if (!fs.existsSync(file)) return [];
  const out: SenderSample[] = [];
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    try {
      const j = JSON.parse(line) as { t: number; s: { tfmcc?: Record<string, unknown> } };
      const tf = j.s.tfmcc;
      if (!tf) continue;
      out.push({
        t: j.t - t0s,
        rate_bps: Number(tf.rate_bps ?? NaN),
        sender_rate_bps: Number(tf.sender_rate_bps ?? NaN),
        clr_rid: typeof tf.clr_rid === 'number' ? tf.clr_rid : null,
        r_max_s: Number(tf.r_max_s ?? NaN),
        slow_start: Boolean(tf.slow_start),
        round: Number(tf.round ?? 0),
        reports_per_round: Number(tf.reports_per_round ?? 0),
        receivers_heard: Number(tf.receivers_heard ?? 0),
        reports_received: Number(tf.reports_received ?? 0),
        last_round: tf.last_round && typeof tf.last_round === 'object' ? (tf.last_round as SenderSample['last_round']) : null,
        snap_t: typeof tf.snapshot_unix_s === 'number' && tf.snapshot_unix_s > 0 ? tf.snapshot_unix_s - t0s : null,
      });
    } catch {
      /* a line cut by the teardown */
    }
  }
  return out;
}

/** The receiver id a TFMCC player put in its reports (first log line that names it). */
export function playerRid(file: string): number | null {
  if (!fs.existsSync(file)) return null;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    try {
      const rid = (JSON.parse(line) as { tfmcc?: { rid?: number } }).tfmcc?.rid;
      if (typeof rid === 'number') return rid;
    } catch {
      /* next */
    }
  }
  return null;
}

/** Per-second receive rate from a player log: [run time of the bin's end, bit/s, dt]. */
export function playerSeconds(file: string, t0s: number): [number, number, number][] {
  if (!fs.existsSync(file)) return [];
  const out: [number, number, number][] = [];
  let prev: number | null = null;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    try {
      const p = JSON.parse(line) as { t?: number; elapsed_s?: number; rate_bps?: number };
      if (typeof p.t !== 'number' || typeof p.elapsed_s !== 'number') continue;
      if (prev !== null) out.push([p.t - t0s, p.rate_bps ?? 0, p.elapsed_s - prev]);
      prev = p.elapsed_s;
    } catch {
      /* next */
    }
  }
  return out;
}

/** When a player that ended by itself left (run seconds): its start (first line's `t` minus
 *  `elapsed_s`) plus the `elapsed_s` of its `exit` line. The leave report goes out just
 *  before that line is written. */
export function playerExitTime(file: string, t0s: number): number | null {
  if (!fs.existsSync(file)) return null;
  let start: number | null = null;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    try {
      const p = JSON.parse(line) as { t?: number; elapsed_s?: number; event?: string };
      if (start === null && typeof p.t === 'number' && typeof p.elapsed_s === 'number') start = p.t - p.elapsed_s;
      if (p.event === 'exit' && start !== null && typeof p.elapsed_s === 'number') return start + p.elapsed_s - t0s;
    } catch {
      /* next */
    }
  }
  return null;
}

/** What the runner keeps of a TFMCC session for the derived checks. */
export interface TfmccRecord {
  flow: string;
  packet_size: number;
  ceiling_kbps: number;
  sender: SenderSample[];
  /** receiver name → receiver id, and → per-second receive rate. */
  rids: Record<string, number | null>;
  seconds: Record<string, [number, number, number][]>;
  /** receivers ended by SIGKILL (crash) or by their own clean exit, with the run time. */
  stops: { receiver: string; t: number; how: 'kill' | 'exit' }[];
  /** Sender poll period used, s (default SENDER_POLL_S). */
  poll_s?: number;
  /** receiver name → run time its player was started. */
  starts?: Record<string, number>;
}

export interface DerivedRow {
  check: string;
  measurement: string;
  value: number;
  text: string;
  min: number | null;
  max: number | null;
  pass: boolean | null;
}

const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / Math.max(v.length, 1);

/** TFMCC's feedback-round length as the sender has it: T = b·max(R_max, (c+1)s/X), b = 4, c = 3
 *  (congestion::tfmcc defaults, docs/protocols/tfmcc.md). */
export function roundLength(rMaxS: number, xBps: number, packetSize: number): number {
  return 4 * Math.max(rMaxS, (4 * 8 * packetSize) / Math.max(xBps, 1));
}

/** E13: for each receiver that was the CLR when it stopped, how long until the sender named
 *  another CLR (or none), against 10·T with T from the last sample before the stop. */
export function clrDropRows(rec: TfmccRecord): DerivedRow[] {
  const rows: DerivedRow[] = [];
  for (const st of rec.stops) {
    const rid = rec.rids[st.receiver];
    if (rid == null) continue;
    const before = rec.sender.filter((s) => s.t <= st.t);
    const last = before[before.length - 1];
    if (!last || last.clr_rid !== rid) {
      rows.push({ check: 'tfmcc/E13', measurement: `${st.receiver} (${st.how}) was not the CLR when it stopped`, value: NaN, text: 'not CLR', min: null, max: null, pass: null });
      continue;
    }
    const after = rec.sender.find((s) => s.t > st.t && s.clr_rid !== rid);
    const dt = after ? after.t - st.t : Infinity;
    const tenT = 10 * roundLength(last.r_max_s, last.sender_rate_bps, rec.packet_size);
    if (st.how === 'kill') {
      const ratio = dt / tenT;
      rows.push({
        check: 'tfmcc/E13',
        measurement: `kill -9 of the CLR ${st.receiver}: CLR dropped after (s) / 10·T (10·T = ${tenT.toFixed(2)} s from R_max ${last.r_max_s.toFixed(3)} s, X ${(last.sender_rate_bps / 1e3).toFixed(0)} kbit/s)`,
        value: ratio,
        text: `${dt.toFixed(2)} s = ${ratio.toFixed(3)} × 10·T (poll ${rec.poll_s ?? SENDER_POLL_S} s)`,
        min: 0.8,
        max: 1.2,
        pass: ratio >= 0.8 && ratio <= 1.2,
      });
    } else {
      // RFC 4654 §3.3 / the spec: after an explicit leave the rate may rise within one RTT and
      // one report. The sender replaces the CLR with the next receiver that reports, and a
      // non-CLR receiver reports once per feedback round: band R_max + T, plus one poll period
      // of the sampling.
      const bound = last.r_max_s + roundLength(last.r_max_s, last.sender_rate_bps, rec.packet_size) + (rec.poll_s ?? SENDER_POLL_S);
      rows.push({
        check: 'tfmcc/E13',
        measurement: `explicit leave of the CLR ${st.receiver}: CLR replaced after (s) (10·T = ${tenT.toFixed(2)} s, bound R_max + T + poll = ${bound.toFixed(2)} s)`,
        value: dt,
        text: `${dt.toFixed(2)} s (bound ${bound.toFixed(2)} s; a crash waits 10·T = ${tenT.toFixed(2)} s)`,
        min: null,
        max: bound,
        pass: dt <= bound,
      });
    }
  }
  return rows;
}

/** E16: per 1-s bin of each receiver, the receive rate against the sender's sent rate
 *  (X_send, capped by the ceiling) sampled over the same second, over [from, to). Value: the
 *  share of bins within ±2 %; also the worst and the mean deviation. */
export function pacingRows(rec: TfmccRecord, from: number, to: number): DerivedRow[] {
  const rows: DerivedRow[] = [];
  for (const [name, secs] of Object.entries(rec.seconds)) {
    const devs: number[] = [];
    for (const [tEnd, bps, dt] of secs) {
      const tStart = tEnd - dt;
      if (tStart < from || tEnd > to || dt <= 0) continue;
      const xs = rec.sender.filter((s) => s.t >= tStart && s.t <= tEnd).map((s) => s.rate_bps);
      if (!xs.length) continue;
      const x = mean(xs);
      // The player counts UDP payload bytes; the sender's X counts packets of packet_size
      // bytes (the whole UDP payload), so they are the same unit.
      devs.push(bps / x - 1);
    }
    if (!devs.length) continue;
    const within = devs.filter((d) => Math.abs(d) <= 0.02).length / devs.length;
    const worst = devs.reduce((a, b) => (Math.abs(b) > Math.abs(a) ? b : a), 0);
    rows.push({
      check: 'tfmcc/E16',
      measurement: `${name}: share of 1-s bins within ±2 % of X_send, ${from}-${to} s`,
      value: within,
      text: `${(100 * within).toFixed(1)} % of ${devs.length} bins; mean ${(100 * mean(devs)).toFixed(2)} %, worst ${(100 * worst).toFixed(2)} %`,
      min: 0.95,
      max: null,
      pass: within >= 0.95,
    });
  }
  return rows;
}

/** How bad a receiver's own access link is (the link into its node): lower rate first, then
 *  higher wire loss. E11/E12 name "the worst present receiver" by this (in their topologies
 *  each receiver's path differs only in that link). */
export function receiverBadness(sc: Scenario, at: string): [number, number] {
  const l = sc.topology.links.find((x) => x.to === at) ?? sc.topology.links.find((x) => x.from === at && x.duplex);
  return [l?.rate_kbps ?? Infinity, l?.loss ?? 0];
}

/** E11/E12: for each receiver that joins after the session started (start ≥ 1 s), how long
 *  after its player started until the sender names it the CLR, when it is then the worst
 *  present receiver. */
export function clrJoinRows(sc: Scenario, f: TfmccFlow, rec: TfmccRecord, check: string, boundS: number): DerivedRow[] {
  const rows: DerivedRow[] = [];
  for (const r of f.receivers) {
    const tj = rec.starts?.[r.name] ?? r.start_s;
    if (tj < 1) continue;
    const present = f.receivers.filter((x) => (rec.starts?.[x.name] ?? x.start_s) <= tj && (x.stop_s ?? Infinity) > tj);
    if (worstOf(sc, present)?.name !== r.name) continue;
    const rid = rec.rids[r.name];
    const hit = rid == null ? undefined : rec.sender.find((x) => x.t >= tj && x.clr_rid === rid);
    const dt = hit ? hit.t - tj : Infinity;
    rows.push({
      check,
      measurement: `${r.name} joins at ${tj.toFixed(1)} s: CLR after (s)`,
      value: dt,
      text: hit ? `${dt.toFixed(2)} s (poll ${rec.poll_s ?? SENDER_POLL_S} s)` : `never the CLR${rid == null ? ' (no receiver id in its log)' : ''}`,
      min: null,
      max: boundS,
      pass: dt <= boundS,
    });
  }
  return rows;
}

function worstOf(sc: Scenario, rs: ReceiverDef[]): ReceiverDef | null {
  let worst: ReceiverDef | null = null;
  let tie = false;
  for (const r of rs) {
    if (!worst) {
      worst = r;
      continue;
    }
    const [ra, la] = receiverBadness(sc, r.at);
    const [rb, lb] = receiverBadness(sc, worst.at);
    if (ra < rb || (ra === rb && la > lb)) {
      worst = r;
      tie = false;
    } else if (ra === rb && la === lb) tie = true;
  }
  return tie ? null : worst;
}

/** E11: the phases between receiver joins and leaves (each starting `settleS` after its
 *  event, as S17 excludes 5 s): the share of sender samples in which the CLR is the worst
 *  present receiver. Phases whose worst receiver is not unique are skipped. */
export function clrPhaseRows(sc: Scenario, f: TfmccFlow, rec: TfmccRecord, check: string, settleS: number, minShare: number): DerivedRow[] {
  const events = new Set<number>([0]);
  for (const r of f.receivers) {
    const t = rec.starts?.[r.name] ?? r.start_s;
    if (t >= 1) events.add(t);
    if (r.stop_s != null) events.add(r.stop_s);
  }
  const ev = [...events].sort((a, b) => a - b);
  ev.push(sc.duration_s);
  const rows: DerivedRow[] = [];
  for (let i = 0; i + 1 < ev.length; i++) {
    const [a, b] = [ev[i] + settleS, ev[i + 1]];
    if (b - a < 1) continue;
    const mid = (a + b) / 2;
    // A receiver started in the first second is there from the session's start.
    const present = f.receivers.filter((x) => ((rec.starts?.[x.name] ?? x.start_s) < 1 || (rec.starts?.[x.name] ?? x.start_s) <= ev[i] + 0.01) && (x.stop_s ?? Infinity) > mid);
    const w = worstOf(sc, present);
    if (!w) continue;
    const rid = rec.rids[w.name];
    const xs = rec.sender.filter((x) => x.t >= a && x.t < b);
    const share = xs.length && rid != null ? xs.filter((x) => x.clr_rid === rid).length / xs.length : 0;
    rows.push({
      check,
      measurement: `${a.toFixed(0)}-${b.toFixed(0)} s: share of samples with the CLR = the worst present receiver (${w.name})`,
      value: share,
      text: `${(100 * share).toFixed(1)} % of ${xs.length} samples`,
      min: minShare,
      max: null,
      pass: share >= minShare,
    });
  }
  return rows;
}

/** E12: the lowest sampled sending rate (kbit/s) over [from, to): "TFMCC rate > 0 throughout". */
export function minRateRow(rec: TfmccRecord, check: string, from: number, to: number): DerivedRow {
  const xs = rec.sender.filter((x) => x.t >= from && x.t < to && Number.isFinite(x.rate_bps));
  const v = xs.length ? Math.min(...xs.map((x) => x.rate_bps / 1e3)) : NaN;
  return { check, measurement: `lowest sampled sending rate ${from}-${to} s (kbit/s)`, value: v, text: `${v.toFixed(1)} kbit/s over ${xs.length} samples`, min: 1, max: null, pass: Number.isFinite(v) && v >= 1 };
}

/** E14: feedback volume over [from, to): the sender's completed rounds (one sample per round
 *  number), the non-CLR reports in each (mean and 99th percentile), and the report bytes
 *  against the data bytes sent, both with 28 B of IP + UDP header per packet (report payload
 *  38 B, congestion::wire::tfmcc::TfmccReport::MIN_LEN; data payload = packet_size). */
export function feedbackRows(rec: TfmccRecord, check: string, from: number, to: number): DerivedRow[] {
  const xs = rec.sender.filter((x) => x.t >= from && x.t < to);
  const byRound = new Map<number, number>();
  for (const x of xs) if (x.last_round) byRound.set(x.last_round.round, x.last_round.non_clr_reports);
  const per = [...byRound.values()].sort((a, b) => a - b);
  const rows: DerivedRow[] = [];
  const m = mean(per);
  const p99 = per.length ? per[Math.min(per.length - 1, Math.ceil(0.99 * per.length) - 1)] : NaN;
  rows.push({ check, measurement: `mean non-CLR reports per round, ${from}-${to} s`, value: per.length ? m : NaN, text: `${m.toFixed(2)} over ${per.length} rounds (max ${per.length ? per[per.length - 1] : NaN})`, min: null, max: 20, pass: per.length > 0 && m <= 20 });
  rows.push({ check, measurement: `99th percentile of non-CLR reports per round, ${from}-${to} s`, value: p99, text: `${p99} over ${per.length} rounds`, min: null, max: 60, pass: per.length > 0 && p99 <= 60 });
  if (xs.length >= 2) {
    const a = xs[0];
    const b = xs[xs.length - 1];
    const reports = b.reports_received - a.reports_received;
    let dataPkts = 0;
    for (let i = 0; i + 1 < xs.length; i++) dataPkts += (xs[i].rate_bps * (xs[i + 1].t - xs[i].t)) / (8 * rec.packet_size);
    const share = (reports * (38 + 28)) / (dataPkts * (rec.packet_size + 28));
    const rate = (8 * dataPkts * rec.packet_size) / (b.t - a.t) / 1e3;
    rows.push({ check, measurement: `report bytes / data bytes, ${from}-${to} s`, value: share, text: `${(100 * share).toFixed(2)} %: ${reports} reports against ${dataPkts.toFixed(0)} data packets (mean rate ${rate.toFixed(0)} kbit/s)`, min: null, max: 0.05, pass: share <= 0.05 });
  }
  return rows;
}

/** The sender samples timed by the server's snapshot (one sample per snapshot; polls that
 *  read the same snapshot again are dropped), or as polled when the server has no snapshot
 *  time. E15 times rate steps over one R_max (0.1-1 s), where the poll's lag of up to 0.15 s
 *  behind the snapshot would be most of the error. */
export function bySnapshot(st: SenderSample[]): SenderSample[] {
  const timed = (x: SenderSample) => typeof x.snap_t === 'number' && Number.isFinite(x.snap_t);
  // Polls before the server's first snapshot carry no time: dropped, not a reason to fall back.
  if (!st.some(timed)) return st;
  const out: SenderSample[] = [];
  for (const x of st) if (timed(x) && (!out.length || x.snap_t! > out[out.length - 1].t)) out.push({ ...x, t: x.snap_t! });
  return out;
}

/** X halvings in the sender samples over [from, to]: samples whose X is half the previous
 *  sample's (±0.1 %), with the R_max in force before. */
export function halvings(rec: TfmccRecord, from: number, to: number): { t: number; rMax: number; x: number }[] {
  const out: { t: number; rMax: number; x: number }[] = [];
  const st = bySnapshot(rec.sender);
  for (let i = 1; i < st.length; i++) {
    const [a, b] = [st[i - 1], st[i]];
    if (b.t < from || b.t > to) continue;
    if (Math.abs(b.sender_rate_bps - 0.5 * a.sender_rate_bps) <= 1e-3 * a.sender_rate_bps) out.push({ t: b.t, rMax: a.r_max_s, x: b.sender_rate_bps });
  }
  return out;
}

/** E15: reports dropped on the reverse path over [from, to). Rows: the first no-feedback
 *  halving interval in R_max (the halving after the CLR-silence one, RFC 4654 §3.3, is skipped
 *  as in the simulator's S27), band 10 ± 1 R_max; the mean interval over the blackout, band
 *  10 ± 1 R_max as well (the spec: "halves every 10·R_max"); the lowest X against the floor of one
 *  packet per 64 s; and the largest increase over one R_max after the reports return, against
 *  the bound s/R_max per R_max (integrated with the sampled R_max), over [to, to + recoverS). */
export function blackoutRows(rec: TfmccRecord, check: string, from: number, to: number, recoverS: number): DerivedRow[] {
  const rows: DerivedRow[] = [];
  const h = halvings(rec, from, to + 0.5);
  const iv: number[] = [];
  for (let i = 2; i < h.length; i++) iv.push((h[i].t - h[i - 1].t) / h[i].rMax);
  const first = iv.length ? iv[0] : NaN;
  const poll = rec.poll_s ?? SENDER_POLL_S;
  rows.push({
    check,
    measurement: `first no-feedback halving interval (R_max units), blackout ${from}-${to} s`,
    value: first,
    text: `${first.toFixed(2)} R_max (R_max ${h[2]?.rMax.toFixed(3) ?? '?'} s; ${h.length} halvings: ${h.map((x) => `${x.t.toFixed(2)} s→${(x.x / 1e3).toFixed(1)}`).join(', ')} kbit/s; poll ${poll} s, server snapshot 0.1 s)`,
    min: 9,
    max: 11,
    pass: first >= 9 && first <= 11,
  });
  const meanIv = iv.length ? mean(iv) : NaN;
  rows.push({ check, measurement: `mean no-feedback halving interval (R_max units)`, value: meanIv, text: iv.map((x) => x.toFixed(1)).join(', '), min: 9, max: 11, pass: meanIv >= 9 && meanIv <= 11 });
  const inB = bySnapshot(rec.sender).filter((x) => x.t >= from && x.t < to);
  const lowest = inB.length ? Math.min(...inB.map((x) => x.sender_rate_bps)) : NaN;
  const floor = (8 * rec.packet_size) / 64;
  rows.push({ check, measurement: `lowest X in the blackout (bit/s) against the floor 1 packet/64 s`, value: lowest, text: `${lowest.toFixed(0)} bit/s (floor ${floor} bit/s)`, min: floor, max: null, pass: lowest >= floor });
  // Recovery: X(t + R) − X(t) against ∫ s/R_max(u)² du over [t, t + R], R = R_max at t, on
  // the snapshots' own times.
  const st = bySnapshot(rec.sender);
  let worst = 0;
  let where = '';
  for (let i = 0; i < st.length; i++) {
    const x = st[i];
    if (x.t < to || x.t >= to + recoverS || !(x.r_max_s > 0)) continue;
    const end = x.t + x.r_max_s;
    let j = i;
    let allowed = 0;
    while (j + 1 < st.length && st[j + 1].t <= end) {
      allowed += ((st[j + 1].t - st[j].t) * rec.packet_size) / st[j].r_max_s ** 2;
      j++;
    }
    allowed += ((end - st[j].t) * rec.packet_size) / st[j].r_max_s ** 2;
    const inc = (st[j].sender_rate_bps - x.sender_rate_bps) / 8;
    if (allowed > 0 && inc / allowed > worst) {
      worst = inc / allowed;
      where = `at ${x.t.toFixed(1)} s, ${(x.sender_rate_bps / 1e3).toFixed(1)} → ${(st[j].sender_rate_bps / 1e3).toFixed(1)} kbit/s in ${(st[j].t - x.t).toFixed(2)} s, R_max ${x.r_max_s.toFixed(3)} s`;
    }
  }
  rows.push({ check, measurement: `largest increase per R_max after the reports return / (s/R_max per R_max), ${to}-${to + recoverS} s`, value: worst, text: `${worst.toFixed(3)} (${where || 'no increase'})`, min: null, max: 1, pass: worst <= 1 });
  return rows;
}

/** E9/E10 evidence (information rows): over [from, to), what the TFMCC receivers see (packet
 *  loss, loss event rate p, RTT, their equation rate) against what the TCP flows see (the
 *  kernel's retransmitted segments over segments sent, and its smoothed RTT, from the iperf3
 *  clients' JSON the runner keeps as `iperf3-<flow>-<port>.json`). */
export function pathEvidenceRows(outDir: string, sc: Scenario, rec: TfmccRecord, check: string, from: number, to: number, t0s: number): DerivedRow[] {
  const rows: DerivedRow[] = [];
  const f = sc.flows.find((x) => x.name === rec.flow && x.type === 'tfmcc') as TfmccFlow | undefined;
  if (!f) return rows;
  const ps: number[] = [];
  const rtts: number[] = [];
  const calc: number[] = [];
  let lost = 0;
  let got = 0;
  for (const r of f.receivers) {
    const file = `${outDir}/player-${f.name}-${r.name}/player.jsonl`;
    if (!fs.existsSync(file)) continue;
    for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
      try {
        const p = JSON.parse(line) as { t?: number; packets_1s?: number; lost_1s?: number; tfmcc?: { loss_event_rate?: number; rtt_s?: number; rate_bps?: number } };
        if (typeof p.t !== 'number' || p.t - t0s < from || p.t - t0s >= to || !p.tfmcc) continue;
        lost += p.lost_1s ?? 0;
        got += p.packets_1s ?? 0;
        if (p.tfmcc.loss_event_rate! > 0) ps.push(p.tfmcc.loss_event_rate!);
        if (p.tfmcc.rtt_s! > 0) rtts.push(p.tfmcc.rtt_s!);
        if (p.tfmcc.rate_bps! > 0) calc.push(p.tfmcc.rate_bps!);
      } catch {
        /* next */
      }
    }
  }
  rows.push({
    check,
    measurement: `TFMCC receivers ${from}-${to} s: packet loss, loss event rate p, RTT, equation rate`,
    value: got + lost > 0 ? lost / (got + lost) : NaN,
    text: `loss ${(100 * lost / Math.max(1, got + lost)).toFixed(2)} %, p ${(100 * mean(ps)).toFixed(2)} %, RTT ${(1e3 * mean(rtts)).toFixed(0)} ms, X(p, RTT) ${(mean(calc) / 1e3).toFixed(0)} kbit/s`,
    min: null,
    max: null,
    pass: null,
  });
  let retr = 0;
  let segs = 0;
  let tcpBytes = 0;
  let tcpSecs = 0;
  let mss = 0;
  const trtt: number[] = [];
  let nflows = 0;
  for (const fl of sc.flows) {
    if (fl.type !== 'tcp') continue;
    const file = fs.existsSync(outDir) ? fs.readdirSync(outDir).find((x) => x.startsWith(`iperf3-${fl.name}-`) && x.endsWith('.json')) : undefined;
    if (!file) continue;
    try {
      const j = JSON.parse(fs.readFileSync(`${outDir}/${file}`, 'utf8')) as { start?: { timestamp?: { timesecs?: number } }; intervals?: { sum: { start: number; bytes: number }; streams: { retransmits?: number; rtt?: number }[] }[] };
      const base = (j.start?.timestamp?.timesecs ?? 0) - t0s;
      nflows++;
      for (const iv of j.intervals ?? []) {
        const t = base + iv.sum.start;
        if (t < from || t >= to) continue;
        segs += iv.sum.bytes / Math.max(1, fl.packet_size - 52);
        tcpBytes += iv.sum.bytes;
        tcpSecs += 1;
        mss = Math.max(1, fl.packet_size - 52);
        retr += iv.streams[0]?.retransmits ?? 0;
        if (iv.streams[0]?.rtt) trtt.push(iv.streams[0].rtt / 1e3);
      }
    } catch {
      /* unreadable: skipped */
    }
  }
  if (nflows) {
    rows.push({
      check,
      measurement: `TCP flows ${from}-${to} s: retransmitted / sent segments, smoothed RTT`,
      value: segs > 0 ? retr / segs : NaN,
      text: `${nflows} flows: retransmits ${(100 * retr / Math.max(1, segs)).toFixed(2)} % of ${segs.toFixed(0)} segments, RTT ${mean(trtt).toFixed(0)} ms`,
      min: null,
      max: null,
      pass: null,
    });
    // TFMCC / TCP as a product of three factors: the session's rate over its receivers' mean
    // equation rate (the worst-of-n choice of the CLR: the dissertation's ~0.7 for n = 8),
    // the receivers' mean equation rate over the mean TCP goodput per flow, and the TCP
    // goodput over the equation at the TCP's own retransmission rate, RTT and segment
    // payload (above 1: the kernel's TCP beats the model the equation is, at that loss rate).
    const session = mean(bySnapshot(rec.sender).filter((x) => x.t >= from && x.t < to && Number.isFinite(x.rate_bps)).map((x) => x.rate_bps));
    const tcpRate = tcpSecs > 0 ? (8 * tcpBytes) / tcpSecs : NaN;
    const xRecv = mean(calc);
    const xTcp = segs > 0 ? tcpThroughputBps(mss, mean(trtt) / 1e3, retr / segs) : NaN;
    rows.push({
      check,
      measurement: `TFMCC / TCP decomposed, ${from}-${to} s: session / receivers' X(p, RTT) x receivers' X / TCP; TCP / X(TCP's retransmission rate, RTT)`,
      value: session / tcpRate,
      text: `${(session / tcpRate).toFixed(3)} = ${(session / xRecv).toFixed(3)} (session ${(session / 1e3).toFixed(0)} / receivers' mean ${(xRecv / 1e3).toFixed(0)} kbit/s) x ${(xRecv / tcpRate).toFixed(3)} (/ TCP ${(tcpRate / 1e3).toFixed(0)} kbit/s per flow); TCP / X(${(100 * retr / Math.max(1, segs)).toFixed(2)} %, ${mean(trtt).toFixed(0)} ms, ${mss} B) = ${(tcpRate / xTcp).toFixed(2)}`,
      min: null,
      max: null,
      pass: null,
    });
  }
  return rows;
}

/** The TCP throughput equation (RFC 5348 §3.1, b = 1, t_RTO = 4R), bit/s, for `s`-byte
 *  segments, RTT `r` seconds and loss event rate `p`. */
export function tcpThroughputBps(s: number, r: number, p: number): number {
  if (!(p > 0) || !(r > 0)) return Infinity;
  return (8 * s) / (r * Math.sqrt((2 * p) / 3) + 4 * r * (3 * Math.sqrt((3 * p) / 8)) * p * (1 + 32 * p * p));
}

/** Which derived rows a scenario gets (by the check ids its measurements name). */
export function tfmccDerived(sc: Scenario, recs: TfmccRecord[]): DerivedRow[] {
  const ids = new Set(sc.measurements.map((m) => m.id.split(/\s+/)[0]));
  const out: DerivedRow[] = [];
  const win = (id: string, def: [number, number]): [number, number] => (sc.measurements.find((x) => x.id.startsWith(id))?.window as [number, number] | undefined) ?? def;
  for (const rec of recs) {
    const f = sc.flows.find((x) => x.name === rec.flow && x.type === 'tfmcc') as TfmccFlow | undefined;
    if (ids.has('tfmcc/E13')) out.push(...clrDropRows(rec));
    if (f && ids.has('tfmcc/E11')) out.push(...clrJoinRows(sc, f, rec, 'tfmcc/E11', 3), ...clrPhaseRows(sc, f, rec, 'tfmcc/E11', 5, 0.9));
    if (f && ids.has('tfmcc/E12')) {
      out.push(...clrJoinRows(sc, f, rec, 'tfmcc/E12', 5));
      // While the late joiners are there (from the first join to the last of their stops).
      const late = f.receivers.filter((r) => (rec.starts?.[r.name] ?? r.start_s) >= 1);
      if (late.length) out.push(minRateRow(rec, 'tfmcc/E12', Math.min(...late.map((r) => rec.starts?.[r.name] ?? r.start_s)), Math.max(...late.map((r) => r.stop_s ?? sc.duration_s))));
    }
    if (ids.has('tfmcc/E14')) {
      const [a, b] = win('tfmcc/E14', [30, sc.duration_s]);
      out.push(...feedbackRows(rec, 'tfmcc/E14', a, b));
    }
    if (ids.has('tfmcc/E15')) {
      // The blackout is the schedule's loss = 1 on a link, until its loss returns to < 1.
      const on = sc.schedule.find((x) => x.link != null && x.loss === 1);
      const off = on && sc.schedule.find((x) => x.link === on.link && x.at_s > on.at_s && (x.loss ?? 1) < 1);
      if (on && off) out.push(...blackoutRows(rec, 'tfmcc/E15', on.at_s, off.at_s, Math.min(30, sc.duration_s - off.at_s)));
    }
    if (ids.has('tfmcc/E16')) {
      const m = sc.measurements.find((x) => x.id.startsWith('tfmcc/E16'));
      const [a, b] = m?.window ?? [10, sc.duration_s];
      out.push(...pacingRows(rec, a, b));
    }
  }
  return out;
}
