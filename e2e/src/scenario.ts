// The scenario file (YAML), the same one the simulator runs (`research/sim/src/scenario/`,
// `docs/scenarios.md`): topology, flows, schedule and measurements with pass bands. This module
// mirrors its types, defaults and checks so the testbed refuses what the simulator refuses.
import fs from 'node:fs';
import YAML from 'yaml';

export type QdiscConfig = { kind: string; [k: string]: unknown };

export interface LinkDef {
  from: string;
  to: string;
  rate_kbps: number;
  delay_ms: number;
  /** Per-packet extra delay, uniform in [0, jitter_ms), order-preserving. */
  jitter_ms: number;
  queue?: QdiscConfig | null;
  loss: number;
  duplex: boolean;
  reverse_queue?: QdiscConfig | null;
  /** A monitor `queue:FROM-TO` of the from->to queue: the simulator probes the waiting time
   *  every 10 ms, the testbed reads the emulator's per-packet sojourn histogram (metrics
   *  queue_delay_median_ms, queue_delay_p95_ms; the link's output and drops). */
  monitor_queue?: boolean;
  /** ACC TCP active router on this link's from->to queue (simulator only; the runner refuses it). */
  acc?: boolean;
}

export interface MulticastDef {
  join_latency_ms: number;
  leave_latency_ms: number;
  fast_leave: boolean;
}

export interface Ladder {
  count?: number;
  rate_kbps?: number;
  rates_kbps?: number[];
}

export interface ReceiverDef {
  name: string;
  at: string;
  start_s: number;
  start_jitter_s: number;
  stop_s?: number | null;
  protocol?: string | null;
  /** TFMCC: the stop is a crash (SIGKILL, no leave report), as the simulator's `crash: true`. */
  crash?: boolean;
}

interface FlowCommon {
  name: string;
  start_s: number;
  start_jitter_s: number;
  stop_s?: number | null;
  packet_size: number;
}

export interface LayeredFlow extends FlowCommon {
  type: 'layered';
  protocol: string;
  from: string;
  layers: Ladder;
  bunch: number;
  adapt_interval_s: number;
  receivers: ReceiverDef[];
}
export interface TcpFlow extends FlowCommon {
  type: 'tcp';
  from: string;
  to: string;
  variant: string;
  max_cwnd: number;
  /** Testbed only: the sink's node ACKs every segment (no delayed ACK: `quickack 1` on its
   *  routes), as ns-2's TCPSink and the simulator's sink do. Default false (Linux delays ACKs). */
  ack_every_segment?: boolean;
}
export interface CbrFlow extends FlowCommon {
  type: 'cbr';
  from: string;
  to: string;
  rate_kbps: number;
}
export interface OnoffFlow extends FlowCommon {
  type: 'onoff';
  from: string;
  to: string;
  rate_kbps: number;
  mean_on_s: number;
  mean_off_s: number;
  shape: number;
}
/** A single-rate TFMCC session: parsed so the testbed reads every catalogue file, but not yet
 *  run on the testbed (the server has no TFMCC sender yet); the simulator runs it. */
export interface TfmccFlow extends FlowCommon {
  type: 'tfmcc';
  from: string;
  receivers: ReceiverDef[];
}
/** A unicast TFRC flow with scripted periodic loss: simulator only (no TFRC sender on the
 *  testbed); parsed so the testbed reads every catalogue file. */
export interface TfrcFlow extends FlowCommon {
  type: 'tfrc';
  from: string;
  to: string;
  periodic_loss: [number, number][];
  discounting: boolean;
}
/** Web-like background traffic (the simulator's `agents/web.rs`, plm.md §6.3): simulator only;
 *  parsed so the testbed reads every catalogue file. */
export interface WebFlow extends FlowCommon {
  type: 'web';
  servers: string[];
  clients: string[];
}
/** Unicast TFRC (the TFRC/PCC agent), or with `pcc` a PCC on/off flow: parsed so the testbed reads every catalogue
 *  file; simulator only (`simulatorOnly` in runner.ts refuses it). */
export interface TfrcPccFlow extends FlowCommon {
  type: 'tfrc-pcc';
  from: string;
  to: string;
  pcc: { rate_kbps: number; t_s: number; protected_s: number; ali_n: number } | null;
}
/** A single-rate active-network session (the simulator's `agents/aer.rs`: AER/NCA with repair
 *  servers, or PGMCC): simulator only; parsed so the testbed reads every catalogue file. */
export interface AerFlow extends FlowCommon {
  type: 'aer';
  from: string;
  protocol: string;
  repair_servers: string[];
  receivers: ReceiverDef[];
}
export type Flow = LayeredFlow | TcpFlow | CbrFlow | OnoffFlow | TfmccFlow | TfrcFlow | WebFlow | TfrcPccFlow | AerFlow;

export interface ScheduleItem {
  at_s: number;
  link?: string | null;
  flow?: string | null;
  rate_kbps?: number | null;
  delay_ms?: number | null;
  loss?: number | null;
}

export interface Measurement {
  id: string;
  metric: string;
  of: string[];
  versus: string[];
  window?: [number, number] | null;
  after_s?: number | null;
  min_layers?: number | null;
  max_layers?: number | null;
  min_kbps?: number | null;
  max_kbps?: number | null;
  hold_s?: number | null;
  /** A metric's threshold where it needs one (simulator TFMCC metrics, e.g. an R_max bound in s). */
  threshold?: number | null;
  available_kbps?: number | [number, number, number][] | null;
  min?: number | null;
  max?: number | null;
  published: string;
  /** A known, investigated miss: the verdict stays FAIL, reports say why. */
  known_issue?: string | null;
}

export interface Scenario {
  name: string;
  title: string;
  source: string;
  duration_s: number;
  interval_s: number;
  seeds: number;
  fast_seeds: number;
  topology: { nodes: string[]; links: LinkDef[]; multicast: MulticastDef };
  flows: Flow[];
  schedule: ScheduleItem[];
  measurements: Measurement[];
}

export class ScenarioError extends Error {}

const bad = (field: string, reason: string) => new ScenarioError(`${field}: ${reason}`);

function only(obj: Record<string, unknown>, allowed: string[], where: string) {
  for (const k of Object.keys(obj)) if (!allowed.includes(k)) throw bad(where, `unknown field ${JSON.stringify(k)}`);
}
/** A flow's receivers; `count: N` replicates an entry as `name-1` … `name-N`, as the simulator
 *  does (scenario/flow.rs `ReceiverDef::names`). `protocol` overrides are for layered flows only. */
function receiverDefs(recv: Record<string, unknown>[], w: string, withProtocol: boolean): ReceiverDef[] {
  return recv.flatMap((r, j) => {
    const at = `${w}.receivers[${j}]`;
    only(r, ['name', 'at', 'start_s', 'start_jitter_s', 'stop_s', 'count', ...(withProtocol ? ['protocol'] : ['crash'])], at);
    const base: ReceiverDef = {
      name: str(r.name, `${at}.name`),
      at: str(r.at, `${at}.at`),
      start_s: num(r.start_s, 'start_s', 0),
      start_jitter_s: num(r.start_jitter_s, 'start_jitter_s', 0),
      stop_s: r.stop_s == null ? null : num(r.stop_s, 'stop_s'),
      protocol: withProtocol && r.protocol != null ? str(r.protocol, 'protocol') : null,
      crash: r.crash === true,
    };
    const count = num(r.count, `${at}.count`, 1);
    if (!Number.isInteger(count) || count < 1) throw bad(`${at}.count`, `must be a whole number >= 1, got ${count}`);
    if (count === 1) return [base];
    return Array.from({ length: count }, (_, i) => ({ ...base, name: `${base.name}-${i + 1}` }));
  });
}

function num(v: unknown, field: string, dflt?: number): number {
  if (v === undefined || v === null) {
    if (dflt === undefined) throw bad(field, 'missing');
    return dflt;
  }
  if (typeof v !== 'number' || !Number.isFinite(v)) throw bad(field, 'must be a number');
  return v;
}
function str(v: unknown, field: string, dflt?: string): string {
  if (v === undefined || v === null) {
    if (dflt === undefined) throw bad(field, 'missing');
    return dflt;
  }
  if (typeof v !== 'string') throw bad(field, 'must be a string');
  return v;
}

const COMMON = ['name', 'start_s', 'start_jitter_s', 'stop_s', 'packet_size', 'type'];

function parseFlow(f: Record<string, unknown>, i: number): Flow {
  const w = `flows[${i}]`;
  const common = {
    name: str(f.name, `${w}.name`),
    start_s: num(f.start_s, `${w}.start_s`, 0),
    start_jitter_s: num(f.start_jitter_s, `${w}.start_jitter_s`, 0),
    stop_s: f.stop_s == null ? null : num(f.stop_s, `${w}.stop_s`),
    packet_size: num(f.packet_size, `${w}.packet_size`, 512),
  };
  switch (f.type) {
    case 'layered': {
      // burst_jitter: the simulator's ns-2 sender jitter (`random_ 1`); the testbed's server
      // paces with its own schedule, so it is read and not used here.
      only(f, [...COMMON, 'protocol', 'from', 'layers', 'bunch', 'adapt_interval_s', 'receivers', 'burst_jitter'], w);
      const recv = (f.receivers as Record<string, unknown>[] | undefined) ?? [];
      return {
        ...common,
        type: 'layered',
        protocol: str(f.protocol, `${w}.protocol`),
        from: str(f.from, `${w}.from`),
        layers: f.layers as Ladder,
        bunch: num(f.bunch, `${w}.bunch`, 2),
        adapt_interval_s: num(f.adapt_interval_s, `${w}.adapt_interval_s`, 1),
        receivers: receiverDefs(recv, w, true),
      };
    }
    case 'tcp':
      // header_bytes, bug_fix: options of the simulator's ns-2 TCP model (40-B headers on the
      // wire, Reno's bugFix_); the testbed runs the kernel's TCP, whose headers are real.
      only(f, [...COMMON, 'from', 'to', 'variant', 'max_cwnd', 'ack_every_segment', 'header_bytes', 'bug_fix'], w);
      return {
        ...common,
        type: 'tcp',
        from: str(f.from, `${w}.from`),
        to: str(f.to, `${w}.to`),
        variant: str(f.variant, `${w}.variant`, 'reno'),
        max_cwnd: num(f.max_cwnd, `${w}.max_cwnd`, 2000),
        ack_every_segment: f.ack_every_segment === true,
      };
    case 'cbr':
      only(f, [...COMMON, 'from', 'to', 'rate_kbps'], w);
      return { ...common, type: 'cbr', from: str(f.from, 'from'), to: str(f.to, 'to'), rate_kbps: num(f.rate_kbps, `${w}.rate_kbps`) };
    case 'onoff':
      only(f, [...COMMON, 'from', 'to', 'rate_kbps', 'mean_on_s', 'mean_off_s', 'shape'], w);
      return {
        ...common,
        type: 'onoff',
        from: str(f.from, 'from'),
        to: str(f.to, 'to'),
        rate_kbps: num(f.rate_kbps, `${w}.rate_kbps`),
        mean_on_s: num(f.mean_on_s, `${w}.mean_on_s`),
        mean_off_s: num(f.mean_off_s, `${w}.mean_off_s`),
        shape: num(f.shape, `${w}.shape`, 1.5),
      };
    case 'tfmcc': {
      only(f, [...COMMON, 'from', 'receivers'], w);
      const recv = (f.receivers as Record<string, unknown>[] | undefined) ?? [];
      return {
        ...common,
        packet_size: num(f.packet_size, `${w}.packet_size`, 1000),
        type: 'tfmcc',
        from: str(f.from, `${w}.from`),
        receivers: receiverDefs(recv, w, false),
      };
    }
    case 'tfrc':
      only(f, [...COMMON, 'from', 'to', 'periodic_loss', 'discounting'], w);
      return {
        ...common,
        packet_size: num(f.packet_size, `${w}.packet_size`, 1000),
        type: 'tfrc',
        from: str(f.from, `${w}.from`),
        to: str(f.to, `${w}.to`),
        periodic_loss: ((f.periodic_loss as unknown[] | undefined) ?? []).map((p, j) => {
          if (!Array.isArray(p) || p.length !== 2) throw bad(`${w}.periodic_loss[${j}]`, 'must be [t_s, k]');
          return [num(p[0], `${w}.periodic_loss[${j}][0]`), num(p[1], `${w}.periodic_loss[${j}][1]`)] as [number, number];
        }),
        discounting: f.discounting == null ? true : f.discounting === true,
      };
    case 'web': {
      only(f, [...COMMON, 'servers', 'clients', 'virtual_servers', 'virtual_clients', 'sessions', 'pages', 'mean_session_gap_s', 'mean_think_s', 'mean_object_packets', 'shape', 'max_cwnd'], w);
      const list = (v: unknown, field: string) => {
        if (!Array.isArray(v) || v.length === 0) throw bad(field, 'must be a non-empty list of nodes');
        return v.map((x, j) => str(x, `${field}[${j}]`));
      };
      return { ...common, type: 'web', servers: list(f.servers, `${w}.servers`), clients: list(f.clients, `${w}.clients`) };
    }
    case 'tfrc-pcc': {
      only(f, [...COMMON, 'from', 'to', 'pcc'], w);
      const p = f.pcc as Record<string, unknown> | undefined | null;
      if (p) only(p, ['rate_kbps', 't_s', 'protected_s', 'ali_n'], `${w}.pcc`);
      return {
        ...common,
        packet_size: num(f.packet_size, `${w}.packet_size`, 1000),
        type: 'tfrc-pcc',
        from: str(f.from, `${w}.from`),
        to: str(f.to, `${w}.to`),
        pcc: p
          ? {
              rate_kbps: num(p.rate_kbps, `${w}.pcc.rate_kbps`),
              t_s: num(p.t_s, `${w}.pcc.t_s`, 60),
              protected_s: num(p.protected_s, `${w}.pcc.protected_s`, 10),
              ali_n: num(p.ali_n, `${w}.pcc.ali_n`, 8),
            }
          : null,
      };
    }
    case 'aer': {
      only(f, [...COMMON, 'from', 'protocol', 'repair_servers', 'receivers'], w);
      const rs = (f.repair_servers as unknown[] | undefined) ?? [];
      if (!Array.isArray(rs)) throw bad(`${w}.repair_servers`, 'must be a list of nodes');
      return {
        ...common,
        packet_size: num(f.packet_size, `${w}.packet_size`, 1000),
        type: 'aer',
        from: str(f.from, `${w}.from`),
        protocol: f.protocol == null ? 'aer-nca' : str(f.protocol, `${w}.protocol`),
        repair_servers: rs.map((x, j) => str(x, `${w}.repair_servers[${j}]`)),
        receivers: receiverDefs((f.receivers as Record<string, unknown>[] | undefined) ?? [], w, false),
      };
    }
    default:
      throw bad(`${w}.type`, `unknown flow type ${JSON.stringify(f.type)}`);
  }
}

/** Per-layer rates, kbit/s. */
export function ladderRates(l: Ladder): number[] {
  let v: number[];
  if (l.rates_kbps && l.count == null && l.rate_kbps == null) v = l.rates_kbps;
  else if (!l.rates_kbps && l.count != null && l.rate_kbps != null) v = Array(l.count).fill(l.rate_kbps);
  else throw bad('layers', 'give rates_kbps, or count and rate_kbps');
  if (v.length === 0 || v.length > 255 || v.some((r) => !(Number.isFinite(r) && r > 0))) {
    throw bad('layers', '1 to 255 layers with positive rates');
  }
  return v;
}

export function parseScenario(text: string): Scenario {
  const raw = YAML.parse(text) as Record<string, unknown>;
  if (!raw || typeof raw !== 'object') throw new ScenarioError('scenario must be a YAML mapping');
  only(raw, ['name', 'title', 'source', 'duration_s', 'interval_s', 'seeds', 'fast_seeds', 'topology', 'flows', 'schedule', 'measurements'], 'scenario');
  const topo = raw.topology as Record<string, unknown>;
  if (!topo) throw bad('topology', 'missing');
  only(topo, ['nodes', 'links', 'multicast'], 'topology');
  const mc = (topo.multicast as Record<string, unknown>) ?? {};
  only(mc, ['join_latency_ms', 'leave_latency_ms', 'fast_leave'], 'multicast');
  const sc: Scenario = {
    name: str(raw.name, 'name'),
    title: str(raw.title, 'title', ''),
    source: str(raw.source, 'source', ''),
    duration_s: num(raw.duration_s, 'duration_s'),
    interval_s: num(raw.interval_s, 'interval_s', 1),
    seeds: num(raw.seeds, 'seeds', 20),
    fast_seeds: num(raw.fast_seeds, 'fast_seeds', 3),
    topology: {
      nodes: (topo.nodes as string[]) ?? [],
      links: ((topo.links as Record<string, unknown>[]) ?? []).map((l, i) => {
        // `monitor_queue`: the simulator's 10 ms queue probe, monitor `queue:FROM-TO`. The name
        // exists here so measurements parse; the testbed does not fill it (it samples every
        // emulated link's queue into links.json instead), so such measurements end in a note.
        only(l, ['from', 'to', 'rate_kbps', 'delay_ms', 'jitter_ms', 'queue', 'loss', 'duplex', 'reverse_queue', 'monitor_queue', 'acc'], `links[${i}]`);
        return {
          from: str(l.from, `links[${i}].from`),
          to: str(l.to, `links[${i}].to`),
          rate_kbps: num(l.rate_kbps, `links[${i}].rate_kbps`),
          delay_ms: num(l.delay_ms, `links[${i}].delay_ms`),
          jitter_ms: num(l.jitter_ms, `links[${i}].jitter_ms`, 0),
          queue: (l.queue as QdiscConfig) ?? null,
          loss: num(l.loss, `links[${i}].loss`, 0),
          duplex: l.duplex === undefined ? true : Boolean(l.duplex),
          reverse_queue: (l.reverse_queue as QdiscConfig) ?? null,
          monitor_queue: Boolean(l.monitor_queue ?? false),
          acc: Boolean(l.acc ?? false),
        };
      }),
      multicast: {
        join_latency_ms: num(mc.join_latency_ms, 'join_latency_ms', 10),
        leave_latency_ms: num(mc.leave_latency_ms, 'leave_latency_ms', 2000),
        fast_leave: Boolean(mc.fast_leave ?? false),
      },
    },
    flows: ((raw.flows as Record<string, unknown>[]) ?? []).map(parseFlow),
    schedule: ((raw.schedule as Record<string, unknown>[]) ?? []).map((s, i) => {
      only(s, ['at_s', 'link', 'flow', 'rate_kbps', 'delay_ms', 'loss'], `schedule[${i}]`);
      return s as unknown as ScheduleItem;
    }),
    measurements: ((raw.measurements as Record<string, unknown>[]) ?? []).map((m, i) => {
      only(
        m,
        ['id', 'metric', 'of', 'versus', 'window', 'windows', 'after_s', 'min_layers', 'max_layers', 'min_kbps', 'max_kbps', 'hold_s', 'threshold', 'available_kbps', 'min', 'max', 'published', 'known_issue'],
        `measurements[${i}]`,
      );
      return { versus: [], published: '', ...m } as unknown as Measurement;
    }),
  };
  validate(sc);
  return sc;
}

/** TCP variants of the scenario format: the simulator's ns-2-style ones (`agents::tcp`) and
 *  Linux's `cubic` and `bbr` (the kernel modules here; the simulator's `agents::linux_tcp`). */
export const TCP_VARIANTS = ['reno', 'newreno', 'sack', 'acc-reno', 'cubic', 'bbr'] as const;

/**
 * The kernel congestion control (`iperf3 -C`) that runs a scenario's TCP variant on the
 * testbed. Linux has no separate NewReno or SACK module: its `reno` is NewReno-style
 * recovery, and SACK is on by default (`net.ipv4.tcp_sack = 1`, negotiated in the SYN), so
 * the kernel's reno with SACK-based loss recovery stands for `reno`, `newreno` and `sack`
 * alike. `acc-reno` needs active routers and is refused by the runner.
 */
export function kernelCongestionControl(variant: string): string {
  return variant === 'newreno' || variant === 'sack' ? 'reno' : variant;
}

export function loadScenario(path: string): Scenario {
  return parseScenario(fs.readFileSync(path, 'utf8'));
}

export function validate(sc: Scenario): void {
  if (!(sc.duration_s > 0 && sc.duration_s <= 1e6)) throw bad('duration_s', 'must be in (0, 1e6]');
  if (!(sc.interval_s >= 0.001)) throw bad('interval_s', 'must be >= 0.001');
  const nodes = new Set(sc.topology.nodes);
  if (nodes.size !== sc.topology.nodes.length) throw bad('nodes', 'names must be unique');
  const node = (n: string) => {
    if (!nodes.has(n)) throw bad('node', `unknown node ${JSON.stringify(n)}`);
  };
  for (const l of sc.topology.links) {
    node(l.from);
    node(l.to);
    if (!(l.rate_kbps > 0)) throw bad('rate_kbps', 'must be positive');
    if (!(l.delay_ms >= 0)) throw bad('delay_ms', 'must be >= 0');
    if (!(l.jitter_ms >= 0)) throw bad('jitter_ms', 'must be >= 0');
    if (!(l.loss >= 0 && l.loss <= 1)) throw bad('loss', 'must be in [0, 1]');
  }
  const names = new Set<string>();
  for (const f of sc.flows) {
    if (names.has(f.name)) throw bad('flows', `duplicate name ${f.name}`);
    names.add(f.name);
    if (f.type === 'web') {
      for (const n of [...f.servers, ...f.clients]) node(n);
      continue;
    }
    node(f.from);
    if (f.type === 'layered') {
      ladderRates(f.layers);
      for (const r of f.receivers) node(r.at);
    } else if (f.type === 'tfmcc') {
      for (const r of f.receivers) node(r.at);
    } else if (f.type === 'aer') {
      for (const n of [...f.receivers.map((r) => r.at), ...f.repair_servers]) node(n);
    } else node(f.to);
    if (f.type === 'tcp' && !(TCP_VARIANTS as readonly string[]).includes(f.variant)) {
      throw bad('variant', `must be one of ${TCP_VARIANTS.join(', ')}`);
    }
  }
  for (const s of sc.schedule) {
    if ((s.link == null) === (s.flow == null)) throw bad('schedule', 'give exactly one of link and flow');
    if (s.link != null && !findLink(sc, s.link)) throw bad('schedule', `unknown link ${s.link}`);
  }
  for (const m of sc.measurements) expand(sc, m.of);
}

/** Monitor names: `flow/receiver` for each layered receiver, the flow name otherwise. */
export function monitorNames(sc: Scenario): string[] {
  const v: string[] = [];
  for (const f of sc.flows) {
    if (f.type === 'layered' || f.type === 'tfmcc' || f.type === 'aer') for (const r of f.receivers) v.push(`${f.name}/${r.name}`);
    else if (f.type === 'tfrc-pcc') v.push(`${f.name}/receiver`);
    else v.push(f.name);
    // The simulator monitors a TFMCC sender's own rate as `<flow>/sender` (S21's peak).
    if (f.type === 'tfmcc' || f.type === 'tfrc-pcc') v.push(`${f.name}/sender`);
  }
  for (const l of sc.topology.links) if (l.monitor_queue) v.push(`queue:${l.from}-${l.to}`);
  return v;
}

/** Expands `flow` and `flow/receiver` references into monitor names. */
export function expand(sc: Scenario, refs: string[]): string[] {
  const all = monitorNames(sc);
  const out: string[] = [];
  for (const r of refs) {
    const hits = all.filter((m) => m === r || m.startsWith(`${r}/`));
    if (hits.length === 0) throw bad('measurement', `unknown flow or receiver ${JSON.stringify(r)}`);
    out.push(...hits);
  }
  return out;
}

/** A link named `from-to` (either orientation): the index and whether it is the reverse. */
export function findLink(sc: Scenario, name: string): { index: number; reverse: boolean } | null {
  for (const [i, l] of sc.topology.links.entries()) {
    if (`${l.from}-${l.to}` === name) return { index: i, reverse: false };
    if (`${l.to}-${l.from}` === name) return { index: i, reverse: true };
  }
  return null;
}
