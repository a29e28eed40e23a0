// Starting a link emulator (`layercast-linkemu`) inside its namespace and talking to its
// control socket (JSON lines over a Unix socket; see docs/linkemu.md).
import net from 'node:net';
import readline from 'node:readline';
import type { ChildProcess } from 'node:child_process';
import { requireBinary } from './bins.js';
import type { ProcessSet } from './sh.js';

/** Settings of one direction, as the emulator's JSON takes them. */
export interface LinkSettings {
  rate_bps?: number;
  delay_ms?: number;
  jitter_ms?: number;
  loss?: number | { model: 'bernoulli'; p: number } | { model: 'gilbert'; p: number; r: number; loss_good?: number; loss_bad?: number };
  queue?: Record<string, unknown>;
  overhead_bytes?: number;
  flow?: { mcast_prefix_len?: number; udp_port_block?: number };
  /** Drop every Layercast data packet at this bunch position (1 = second of a pair); < 0 off. */
  drop_bunch_pos?: number;
  /** Added to every Layercast data packet's cc send time, µs (a sender clock offset). */
  cc_time_shift_us?: number;
}

export interface DirCounters {
  rx_packets: number;
  rx_bytes: number;
  tx_packets: number;
  tx_bytes: number;
  drop_overflow: number;
  drop_early: number;
  drop_loss: number;
  drop_in_flight: number;
  drop_send: number;
  drop_kernel: number;
  queue_packets: number;
  queue_bytes: number;
  queue_max_packets: number;
  in_flight: number;
  /** Queueing delay histogram, cumulative: whole milliseconds -> frames (absent from old
   *  emulator builds). */
  sojourn_ms?: Record<string, number>;
}

export interface GroupStats {
  packets: number;
  bytes: number;
  first_ns: number;
  last_ns: number;
  reports: number;
  leaves: number;
  last_report_ns: number;
  last_leave_ns: number;
}

export interface DirSnapshot {
  params: Record<string, unknown>;
  counters: DirCounters;
  release_error: { n: number; p50_us: number; p99_us: number; p999_us: number; mean_us: number; max_us: number };
  groups: Record<string, GroupStats>;
}

export interface Snapshot {
  ok: true;
  time_ns: number;
  ab: DirSnapshot;
  ba: DirSnapshot;
}

/** Sends one request line and reads one reply line. */
export function ctlRequest(sockPath: string, req: object, timeoutMs = 5000): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const s = net.createConnection(sockPath);
    const t = setTimeout(() => {
      s.destroy();
      reject(new Error(`linkemu control ${sockPath}: timeout`));
    }, timeoutMs);
    s.on('error', (e) => {
      clearTimeout(t);
      reject(e);
    });
    s.on('connect', () => s.write(JSON.stringify(req) + '\n'));
    const rl = readline.createInterface({ input: s });
    rl.once('line', (line) => {
      clearTimeout(t);
      s.end();
      try {
        resolve(JSON.parse(line) as Record<string, unknown>);
      } catch (e) {
        reject(e);
      }
    });
  });
}

export class LinkEmu {
  private constructor(
    readonly ns: string,
    readonly ctl: string,
    readonly child: ChildProcess,
  ) {}

  /** Starts an emulator between `ifA` and `ifB` in `ns`; resolves when it reports ready. */
  static async start(
    procs: ProcessSet,
    ns: string,
    ifA: string,
    ifB: string,
    ab: LinkSettings,
    ba: LinkSettings,
    opts: { seed?: number; rtPrio?: number; statsOut?: string } = {},
  ): Promise<LinkEmu> {
    const bin = requireBinary('layercast-linkemu');
    const ctl = `/tmp/${ns}.sock`;
    const args = ['--a', ifA, '--b', ifB, '--ctl', ctl, '--ab', JSON.stringify(ab), '--ba', JSON.stringify(ba)];
    args.push('--seed', String(opts.seed ?? 1));
    if (opts.rtPrio) args.push('--rt-prio', String(opts.rtPrio));
    if (opts.statsOut) args.push('--stats-out', opts.statsOut);
    const child = procs.spawnIn(ns, `linkemu ${ns}`, bin, args);
    let stderr = '';
    child.stderr?.on('data', (d) => (stderr += String(d)));
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`linkemu in ${ns} not ready: ${stderr}`)), 10_000);
      const rl = readline.createInterface({ input: child.stdout! });
      rl.once('line', (l) => {
        clearTimeout(t);
        if (l.includes('"ready":true')) resolve();
        else reject(new Error(`linkemu in ${ns}: ${l} ${stderr}`));
      });
      child.once('exit', (c) => {
        clearTimeout(t);
        reject(new Error(`linkemu in ${ns} exited ${c}: ${stderr}`));
      });
    });
    return new LinkEmu(ns, ctl, child);
  }

  async set(dir: 'ab' | 'ba' | 'both', s: LinkSettings): Promise<void> {
    const r = await ctlRequest(this.ctl, { cmd: 'set', dir, ...s });
    if (r.ok !== true) throw new Error(`linkemu set: ${String(r.error)}`);
  }

  async get(): Promise<Snapshot> {
    const r = await ctlRequest(this.ctl, { cmd: 'get' });
    if (r.ok !== true) throw new Error(`linkemu get: ${String(r.error)}`);
    return r as unknown as Snapshot;
  }
}
