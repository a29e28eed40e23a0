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
export function senderPollScript(ifAddr: string, k: number, id: string): string[] {
  const url = `http://${ifAddr}:${tfmccHttpPort(k)}/api/sessions/${encodeURIComponent(id)}`;
  const loop =
    `while :; do t=$(date +%s.%N); b=$(curl -sf -m 1 '${url}' | tr -d '\\n'); ` +
    `[ -n "$b" ] && printf '{"t":%s,"s":%s}\\n' "$t" "$b"; sleep ${SENDER_POLL_S}; done`;
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
        text: `${dt.toFixed(2)} s = ${ratio.toFixed(3)} × 10·T (poll ${SENDER_POLL_S} s)`,
        min: 0.8,
        max: 1.2,
        pass: ratio >= 0.8 && ratio <= 1.2,
      });
    } else {
      // RFC 4654 §3.3 / the spec: after an explicit leave the rate may rise within one RTT and
      // one report. The sender replaces the CLR with the next receiver that reports, and a
      // non-CLR receiver reports once per feedback round: band R_max + T, plus one poll period
      // of the sampling.
      const bound = last.r_max_s + roundLength(last.r_max_s, last.sender_rate_bps, rec.packet_size) + SENDER_POLL_S;
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

/** Which derived rows a scenario gets (by the check ids its measurements name). */
export function tfmccDerived(sc: Scenario, recs: TfmccRecord[]): DerivedRow[] {
  const ids = new Set(sc.measurements.map((m) => m.id.split(/\s+/)[0]));
  const out: DerivedRow[] = [];
  for (const rec of recs) {
    if (ids.has('tfmcc/E13')) out.push(...clrDropRows(rec));
    if (ids.has('tfmcc/E16')) {
      const m = sc.measurements.find((x) => x.id.startsWith('tfmcc/E16'));
      const [a, b] = m?.window ?? [10, sc.duration_s];
      out.push(...pacingRows(rec, a, b));
    }
  }
  return out;
}
