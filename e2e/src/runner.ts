// Runs one scenario on the emulated network: build, start flows on schedule, apply link
// changes, poll the emulators, stop by itself, collect, compute the simulator's metrics, write
// outputs and the HTML report, and always tear down.
import fs from 'node:fs';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { Net, cleanup } from './netns.js';
import { buildTopology, type Built, type RouterKind } from './topology.js';
import { collect, nsRun, sleep, waitExit } from './sh.js';
import { findLink, kernelCongestionControl, ladderRates, monitorNames, type CbrFlow, type OnoffFlow, type Scenario, type TcpFlow } from './scenario.js';
import { Monitor, measure, timeseriesCsv, type MeasResult } from './metrics.js';
import { announcementUrl, mediaBins, playerArgs, prefetchesDescription, serverArgs, type PlayerLine } from './media.js';
import type { Snapshot } from './linkemu.js';
import { writeReport } from './report.js';
import { analyseRun, appendToReport, qualityHtml, qualitySummary, type PlayerQuality } from './quality.js';
import {
  playerExitTime,
  playerRid,
  playerSeconds,
  readSenderLog,
  senderPollScript,
  senderPollS,
  tfmccCeilingKbps,
  tfmccDerived,
  pathEvidenceRows,
  tfmccPlayerArgs,
  tfmccServerArgs,
  type DerivedRow,
  type TfmccRecord,
} from './tfmcc.js';

export interface RunOptions {
  outDir: string;
  seed?: number;
  overheadBytes?: number;
  linkMode?: 'auto' | 'linkemu';
  rtPrio?: number;
  router?: RouterKind;
  /** FRR mode: the configuration text (default deploy/router/frr/frr.conf). */
  frrConf?: string;
  /** Multiplies every time in the scenario (a quick look at a long scenario). Default 1. */
  timeScale?: number;
  /** TFMCC receivers (`flow/receiver`) whose stop is a crash (SIGKILL, no leave report)
   *  instead of the player's own exit at its `--duration` (tfrc-tfmcc-pcc.md E13). Receivers
   *  whose name starts with `crash` (and that have a stop_s) are always crashed. */
  kill?: string[];
  log?: (msg: string) => void;
  /** Called once the network is built, with the run's epoch (unix ms): a check's own
   *  instrumentation (packet captures, timed link-emulator rules; src/plm-delay-checks.ts). */
  onBuilt?: (net: Net, built: Built, t0Ms: number) => Promise<void> | void;
}

export interface LinkSample {
  t: number;
  link: string;
  dir: 'ab' | 'ba';
  tx_bytes: number;
  queue_packets: number;
  drops: number;
}

export interface RunResult {
  scenario: string;
  seed: number;
  duration_s: number;
  engine: 'testbed';
  measurements: MeasResult[];
  monitors: {
    name: string;
    kind: string;
    start_s: number | null;
    throughput_kbps: number;
    loss_ratio: number;
    received: number;
    lost: number;
    final_layers: number;
    not_run: string | null;
  }[];
  links: {
    name: string;
    kind: string;
    sent_packets: number;
    utilisation: number;
    drops_overflow: number;
    drops_early: number;
    drops_wire: number;
    release_error_p50_us: number | null;
    release_error_p99_us: number | null;
  }[];
  notes: string[];
  /** Per-player video quality (players with `frames.csv` and a `reference.y4m` in the run). */
  video?: ReturnType<typeof qualitySummary>[];
  /** TFMCC sessions: the sender's sampled state, receiver ids and per-second rates. */
  tfmcc?: TfmccRecord[];
  /** Checks on TFMCC runs the scenario metrics cannot express (e.g. E13, E16). */
  tfmcc_checks?: DerivedRow[];
  /** The run's epoch (scenario time 0), unix seconds: to place player decisions in it. */
  t0_unix_s?: number;
}

/** mulberry32: seeded start jitter, like the simulator's. */
function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Time-scaled copy of a scenario. */
function scaled(sc: Scenario, k: number): Scenario {
  if (k === 1) return sc;
  const s = structuredClone(sc);
  s.duration_s *= k;
  for (const f of s.flows) {
    f.start_s *= k;
    if (f.stop_s != null) f.stop_s *= k;
    if (f.type === 'layered' || f.type === 'tfmcc') for (const r of f.receivers) {
      r.start_s *= k;
      if (r.stop_s != null) r.stop_s *= k;
    }
  }
  for (const x of s.schedule) x.at_s *= k;
  for (const m of s.measurements) {
    if (m.window) m.window = [m.window[0] * k, m.window[1] * k];
    if (m.after_s != null) m.after_s *= k;
  }
  return s;
}

interface UdpSegment {
  flow: string;
  start: number;
  stop: number;
  rateKbps: number;
}

/** What in a scenario the testbed cannot emulate (in-network mechanisms of the active-network
 *  seed), or null. */
export function simulatorOnly(sc: Scenario): string | null {
  const acc = sc.topology.links.find((l) => l.acc);
  if (acc) return `link ${acc.from}-${acc.to} is an ACC TCP active router`;
  for (const f of sc.flows) {
    if (f.type === 'tcp' && f.variant === 'acc-reno') return `flow ${f.name} is an ACC TCP sender (acc-reno)`;
    if (f.type === 'layered' && f.protocol.startsWith('alma')) return `flow ${f.name} uses ALMA active nodes`;
    if (f.type === 'tfrc') return `flow ${f.name} is a TFRC flow with scripted loss`;
    if (f.type === 'web') return `flow ${f.name} is web-like background traffic`;
    if (f.type === 'tfrc-pcc') return `flow ${f.name} is a TFRC/PCC flow (simulator agents only)`;
    if (f.type === 'aer') return `flow ${f.name} is an ${f.protocol} session with active repair servers`;
  }
  return null;
}

export async function runScenario(scIn: Scenario, opts: RunOptions): Promise<RunResult> {
  const simOnly = simulatorOnly(scIn);
  if (simOnly) throw new Error(`scenario ${scIn.name}: ${simOnly}, which exist only in the simulator; run it with layercast-sim`);
  const sc = scaled(scIn, opts.timeScale ?? 1);
  const seed = opts.seed ?? 1;
  const log = opts.log ?? ((m: string) => console.error(`[e2e] ${m}`));
  fs.mkdirSync(opts.outDir, { recursive: true });
  const notes: string[] = [];
  // Leftovers of crashed runs (owner process gone) would collide with nothing, but they hold
  // processes and memory: remove them first.
  const stale = await cleanup();
  if (stale.length) log(`removed ${stale.length} namespaces of dead runs`);
  const net = new Net();
  const rand = rng(seed);
  const iv = sc.interval_s;
  const mons = new Map<string, Monitor>();
  for (const n of monitorNames(sc)) {
    if (n.startsWith('queue:')) {
      // A link's queue (`monitor_queue`): filled from the emulator's counters at every poll.
      const m = new Monitor(n, n, 'queue');
      m.start = 0;
      mons.set(n, m);
      continue;
    }
    const f = sc.flows.find((x) => n === x.name || n.startsWith(`${x.name}/`));
    if (!f) continue;
    if (f.type === 'tfrc' || f.type === 'web' || f.type === 'tfrc-pcc' || f.type === 'aer') continue; // simulator only (refused above)
    const m = new Monitor(n, f.name, f.type);
    if (f.type === 'layered') {
      const rates = ladderRates(f.layers);
      m.ladderKbps = [0];
      for (const r of rates) m.ladderKbps.push(m.ladderKbps[m.ladderKbps.length - 1] + r);
    }
    mons.set(n, m);
  }
  const linkSamples: LinkSample[] = [];
  const tfmccRecs: TfmccRecord[] = [];
  let tfmccT0 = 0;
  const finals = new Map<number, Snapshot>();
  let built: Built | null = null;
  let epochMs: number | undefined;
  const hardLimitMs = (sc.duration_s + 90) * 1000;
  const watchdog = setTimeout(() => {
    log('hard time limit reached: tearing down');
    void net.teardown().finally(() => process.exit(124));
  }, hardLimitMs);
  try {
    log(`building ${sc.name}: ${sc.topology.nodes.length} nodes, ${sc.topology.links.length} links`);
    built = await buildTopology(net, sc, {
      dir: opts.outDir,
      overheadBytes: opts.overheadBytes,
      linkMode: opts.linkMode,
      rtPrio: opts.rtPrio,
      router: opts.router,
      frrConf: opts.frrConf,
      seed,
    });
    const b = built;
    // TCP sinks that ACK every segment (`ack_every_segment`): the route attribute `quickack`
    // on every route of the sink's node turns Linux's delayed ACK off for its connections.
    for (const node of new Set(sc.flows.filter((f) => f.type === 'tcp' && f.ack_every_segment).map((f) => (f as TcpFlow).to))) {
      await nsRun(b.nodeNs.get(node)!, 'sh', ['-c', 'ip -4 route show | while read -r r; do ip route change $r quickack 1 || exit 1; done']);
    }
    const bins = mediaBins();
    const t0 = Date.now() + 1500;
    tfmccT0 = t0;
    epochMs = t0;
    if (opts.onBuilt) await opts.onBuilt(net, b, t0);
    const at = (s: number) => Math.max(0, t0 + s * 1000 - Date.now());
    const timers: NodeJS.Timeout[] = [];
    const later = (s: number, fn: () => Promise<void> | void) =>
      timers.push(
        setTimeout(() => {
          Promise.resolve(fn()).catch((e: Error) => notes.push(`t=${s}: ${e.message}`));
        }, at(s)),
      );
    const pending: Promise<void>[] = [];
    let port = 5201;

    // ---- unicast flows (iperf3)
    const segments: UdpSegment[] = [];
    for (const f of sc.flows) {
      const start = f.start_s + rand() * f.start_jitter_s;
      const stop = Math.min(f.stop_s ?? sc.duration_s, sc.duration_s);
      mons.get(f.name) && (mons.get(f.name)!.start = start);
      if (f.type === 'tcp') {
        const p = port++;
        pending.push(iperfFlow(net, b, f, p, start, stop, null, mons.get(f.name)!, iv, later, opts.outDir));
      } else if (f.type === 'cbr') {
        // A CBR flow's rate can change on the schedule: one iperf3 run per constant-rate piece.
        const changes = sc.schedule.filter((x) => x.flow === f.name && x.rate_kbps != null).sort((x, y) => x.at_s - y.at_s);
        let cur = { start, rate: f.rate_kbps };
        for (const c of changes) {
          if (c.at_s <= cur.start) {
            cur.rate = c.rate_kbps!;
            continue;
          }
          if (c.at_s >= stop) break;
          segments.push({ flow: f.name, start: cur.start, stop: c.at_s, rateKbps: cur.rate });
          cur = { start: c.at_s, rate: c.rate_kbps! };
        }
        segments.push({ flow: f.name, start: cur.start, stop, rateKbps: cur.rate });
      } else if (f.type === 'onoff') {
        // Pareto on and off periods (shape `shape`, the given means), each "on" an iperf3 run.
        const pareto = (mean: number) => {
          const xm = (mean * (f.shape - 1)) / f.shape;
          return xm / Math.pow(1 - rand(), 1 / f.shape);
        };
        let t = start;
        while (t < stop) {
          const on = Math.max(0.2, pareto(f.mean_on_s));
          segments.push({ flow: f.name, start: t, stop: Math.min(stop, t + on), rateKbps: f.rate_kbps });
          t += on + pareto(f.mean_off_s);
        }
        notes.push(`${f.name}: on/off as ${segments.filter((s) => s.flow === f.name).length} iperf3 runs of at least 0.2 s`);
      }
    }
    for (const s of segments) {
      const f = sc.flows.find((x) => x.name === s.flow) as CbrFlow | OnoffFlow;
      if (s.stop - s.start < 0.2) continue;
      const p = port++;
      pending.push(iperfFlow(net, b, f, p, s.start, s.stop, s.rateKbps, mons.get(f.name)!, iv, later));
    }

    // ---- layered sessions (layercast-server / layercast-player)
    let k = 0;
    for (const f of sc.flows) {
      if (f.type !== 'layered') continue;
      const sk = k++;
      if (!bins.server || !bins.player) {
        const why = `layercast-server/layercast-player not built: session ${f.name} not run`;
        notes.push(why);
        for (const r of f.receivers) mons.get(`${f.name}/${r.name}`)!.notRun = why;
        continue;
      }
      const app = b.sourceApp.get(f.from)!;
      const srcNs = app.ns;
      const srcIf = { addr: app.addr };
      const start = f.start_s + rand() * f.start_jitter_s;
      const stop = Math.min(f.stop_s ?? sc.duration_s, sc.duration_s);
      later(start, () => {
        const c = net.procs.spawnIn(srcNs, `server ${f.name}`, bins.server!, serverArgs(f, sk, srcIf.addr));
        pipeTo(c, path.join(opts.outDir, `server-${f.name}.log`));
      });
      later(stop, () => stopNamed(net, `server ${f.name}`));
      // PLM and ERA players start with the description in hand (`prefetchesDescription`): fetched
      // inside the sender's namespace (no packet crosses the emulated links) 0.5 s after the
      // server starts, and again by a starting receiver if that failed; without it a player
      // waits for the multicast SAM as before.
      const infoFile = path.join(opts.outDir, `session-${f.name}.json`);
      let infoP: Promise<string | undefined> | undefined;
      const fetchDescription = async (): Promise<string | undefined> => {
        const res = await nsRun(srcNs, 'curl', ['-sf', '--max-time', '1', announcementUrl(f, srcIf.addr)], { timeoutMs: 2000, allowFail: true });
        if (res.code !== 0) {
          notes.push(`${f.name}: session description not fetched (curl ${res.code}): players wait for the SAM`);
          infoP = undefined;
          return undefined;
        }
        fs.writeFileSync(infoFile, res.stdout);
        return infoFile;
      };
      const description = (): Promise<string | undefined> => {
        if (!prefetchesDescription(f)) return Promise.resolve(undefined);
        infoP ??= fetchDescription();
        return infoP;
      };
      later(start + 0.5, async () => void (await description()));
      for (const r of f.receivers) {
        const mon = mons.get(`${f.name}/${r.name}`)!;
        const rs = r.start_s + rand() * r.start_jitter_s;
        const re = Math.min(r.stop_s ?? stop, stop);
        mon.start = rs;
        const dir = path.join(opts.outDir, `player-${f.name}-${r.name}`);
        fs.mkdirSync(dir, { recursive: true });
        const ifc = b.toward(r.at, f.from);
        pending.push(
          new Promise<void>((resolve) => {
            later(rs, async () => {
              const info = await description();
              const c = net.procs.spawnIn(b.nodeNs.get(r.at)!, `player ${f.name}/${r.name}`, bins.player!, playerArgs(f, r, sk, ifc.addr, dir, re - rs, info));
              pipeTo(c, path.join(dir, 'stderr.log'));
              await waitExit(c, (re - rs + 10) * 1000);
              resolve();
            });
          }),
        );
      }
    }

    // ---- TFMCC sessions (layercast-server in TFMCC mode / layercast-player --controller tfmcc)
    for (const f of sc.flows) {
      if (f.type !== 'tfmcc') continue;
      const sk = k++;
      if (!bins.server || !bins.player) {
        const why = `layercast-server/layercast-player not built: session ${f.name} not run`;
        notes.push(why);
        for (const r of f.receivers) mons.get(`${f.name}/${r.name}`)!.notRun = why;
        mons.get(`${f.name}/sender`)!.notRun = why;
        continue;
      }
      const app = b.sourceApp.get(f.from)!;
      const start = f.start_s + rand() * f.start_jitter_s;
      const stop = Math.min(f.stop_s ?? sc.duration_s, sc.duration_s);
      mons.get(`${f.name}/sender`)!.start = start;
      const rec: TfmccRecord = { flow: f.name, packet_size: f.packet_size, ceiling_kbps: tfmccCeilingKbps(sc, f), poll_s: senderPollS(sc), sender: [], rids: {}, seconds: {}, stops: [], starts: {} };
      tfmccRecs.push(rec);
      const pollFile = path.join(opts.outDir, `tfmcc-sender-${f.name}.jsonl`);
      later(start, () => {
        const c = net.procs.spawnIn(app.ns, `server ${f.name}`, bins.server!, tfmccServerArgs(sc, f, sk, app.addr));
        pipeTo(c, path.join(opts.outDir, `server-${f.name}.log`));
        const poll = net.procs.spawnIn(app.ns, `poll ${f.name}`, 'sh', senderPollScript(app.addr, sk, f.name, rec.poll_s));
        poll.stdout?.pipe(fs.createWriteStream(pollFile));
      });
      later(stop, () => {
        void stopNamed(net, `server ${f.name}`);
        void stopNamed(net, `poll ${f.name}`);
      });
      for (const r of f.receivers) {
        const mname = `${f.name}/${r.name}`;
        const mon = mons.get(mname)!;
        const rs = r.start_s + rand() * r.start_jitter_s;
        const re = Math.min(r.stop_s ?? stop, stop);
        // A receiver named `crash...` (a testbed convention, the simulator ignores names) or
        // listed in opts.kill is ended by SIGKILL at its stop time: no leave report.
        const crash = (opts.kill ?? []).includes(mname) || ((r.crash === true || r.name.startsWith('crash')) && r.stop_s != null);
        mon.start = rs;
        rec.starts![r.name] = rs;
        const dir = path.join(opts.outDir, `player-${f.name}-${r.name}`);
        fs.mkdirSync(dir, { recursive: true });
        const ifc = b.toward(r.at, f.from);
        // A crashing player gets a longer --duration so that the SIGKILL, not its own exit,
        // ends it.
        const dur = re - rs + (crash ? 30 : 0);
        pending.push(
          new Promise<void>((resolve) => {
            later(rs, async () => {
              const c = net.procs.spawnIn(b.nodeNs.get(r.at)!, `player ${mname}`, bins.player!, tfmccPlayerArgs(r, sk, ifc.addr, dir, dur));
              pipeTo(c, path.join(dir, 'stderr.log'));
              if (crash) {
                later(re, () => {
                  rec.stops.push({ receiver: r.name, t: (Date.now() - t0) / 1000, how: 'kill' });
                  c.kill('SIGKILL');
                });
              } else if (r.stop_s != null && r.stop_s < stop) {
                c.once('exit', () => rec.stops.push({ receiver: r.name, t: (Date.now() - t0) / 1000, how: 'exit' }));
              }
              await waitExit(c, (dur + 10) * 1000);
              resolve();
            });
          }),
        );
      }
    }

    // ---- link changes
    for (const s of sc.schedule) {
      if (s.link == null) continue;
      const l = findLink(sc, s.link)!;
      const bl = b.links[l.index];
      later(s.at_s, async () => {
        if (bl.emu) {
          const set: Record<string, number> = {};
          if (s.rate_kbps != null) set.rate_bps = Math.round(s.rate_kbps * 1000);
          if (s.delay_ms != null) set.delay_ms = s.delay_ms;
          if (s.loss != null) set.loss = s.loss;
          await bl.emu.set(l.reverse ? 'ba' : 'ab', set);
        } else if (s.rate_kbps != null) {
          const ns = b.nodeNs.get(l.reverse ? bl.def.to : bl.def.from)!;
          await nsRun(ns, 'tc', ['qdisc', 'change', 'dev', bl.ifName, 'root', 'tbf', 'rate', `${Math.round(s.rate_kbps * 1000)}bit`, 'burst', '1600', 'limit', '151400']);
        }
        log(`t=${s.at_s}s link ${s.link} changed`);
      });
    }

    // ---- poll the emulators every interval
    let polling = true;
    const lastQ = new Map<string, { t: number; tx_bytes: number; tx_packets: number; drops: number }>();
    const poller = (async () => {
      await sleep(at(0));
      while (polling) {
        const t = (Date.now() - t0) / 1000;
        for (const bl of b.links) {
          if (!bl.emu) continue;
          try {
            const s = await bl.emu.get();
            for (const dir of ['ab', 'ba'] as const) {
              const c = s[dir].counters;
              linkSamples.push({ t, link: bl.name, dir, tx_bytes: c.tx_bytes, queue_packets: c.queue_packets, drops: c.drop_overflow + c.drop_early + c.drop_loss });
            }
            // A monitored queue: its sojourn histogram, and the link's output and drops since the
            // last poll (as the simulator's probe: throughput = output, loss = drop ratio).
            const qm = mons.get(`queue:${bl.def.from}-${bl.def.to}`);
            const c = s.ab.counters;
            if (qm && c.sojourn_ms) {
              qm.sojourn.push([t, new Map(Object.entries(c.sojourn_ms).map(([k, v]) => [Number(k), v]))]);
              const drops = c.drop_overflow + c.drop_early + c.drop_loss;
              const prev = lastQ.get(qm.name);
              if (prev && t > prev.t) qm.add(iv, (prev.t + t) / 2, c.tx_bytes - prev.tx_bytes, c.tx_packets - prev.tx_packets, drops - prev.drops);
              lastQ.set(qm.name, { t, tx_bytes: c.tx_bytes, tx_packets: c.tx_packets, drops });
            }
            finals.set(bl.index, s);
          } catch {
            /* emulator busy or gone; next round */
          }
        }
        await sleep(iv * 1000);
      }
    })();

    log(`running for ${sc.duration_s} s`);
    await sleep(at(sc.duration_s));
    await Promise.race([Promise.all(pending), sleep(15_000)]);
    polling = false;
    await poller;
    for (const t of timers) clearTimeout(t);
    for (const bl of b.links) {
      if (!bl.emu) continue;
      try {
        finals.set(bl.index, await bl.emu.get());
      } catch {
        /* keep the last poll */
      }
    }
    // players' logs
    for (const f of sc.flows) {
      if (f.type !== 'layered') continue;
      for (const r of f.receivers) readPlayerLog(path.join(opts.outDir, `player-${f.name}-${r.name}`, 'player.jsonl'), mons.get(`${f.name}/${r.name}`)!, t0, iv, notes);
    }
    for (const rec of tfmccRecs) {
      const f = sc.flows.find((x) => x.name === rec.flow);
      if (f?.type !== 'tfmcc') continue;
      rec.sender = readSenderLog(path.join(opts.outDir, `tfmcc-sender-${f.name}.jsonl`), t0 / 1000);
      const smon = mons.get(`${f.name}/sender`)!;
      if (!rec.sender.length) {
        smon.notRun = smon.notRun ?? `no samples of the TFMCC sender ${f.name} (server API)`;
        notes.push(smon.notRun);
      }
      // The sender's sent rate as a monitor (`<flow>/sender`, as in the simulator): each
      // sample holds for the poll period.
      for (let i = 0; i + 1 < rec.sender.length; i++) {
        const a = rec.sender[i];
        const dt = Math.min(rec.sender[i + 1].t - a.t, 2);
        if (Number.isFinite(a.rate_bps)) smon.add(iv, a.t + dt / 2, (a.rate_bps * dt) / 8, 0, 0);
      }
      for (const r of f.receivers) {
        const file = path.join(opts.outDir, `player-${f.name}-${r.name}`, 'player.jsonl');
        readPlayerLog(file, mons.get(`${f.name}/${r.name}`)!, t0, iv, notes);
        rec.rids[r.name] = playerRid(file);
        rec.seconds[r.name] = playerSeconds(file, t0 / 1000);
        const exit = rec.stops.find((x) => x.receiver === r.name && x.how === 'exit');
        const te = exit ? playerExitTime(file, t0 / 1000) : null;
        if (exit && te !== null) exit.t = te;
      }
    }
  } finally {
    clearTimeout(watchdog);
    await net.teardown();
  }

  const monList = [...mons.values()];
  const measurements: MeasResult[] = [];
  for (const m of sc.measurements) {
    try {
      measurements.push(measure(sc, mons, m));
    } catch (e) {
      notes.push(`measurement ${m.id}: ${(e as Error).message}`);
    }
  }
  const result: RunResult = {
    scenario: sc.name,
    seed,
    duration_s: sc.duration_s,
    engine: 'testbed',
    measurements,
    monitors: monList.map((m) => {
      const t0 = m.start ?? 0;
      const [l, r] = m.lossCounts(iv, 0, sc.duration_s);
      return {
        name: m.name,
        kind: m.kind,
        start_s: m.start,
        throughput_kbps: m.throughputKbps(iv, t0, sc.duration_s),
        loss_ratio: l + r > 0 ? l / (l + r) : 0,
        received: r,
        lost: l,
        final_layers: m.levelAt(sc.duration_s),
        not_run: m.notRun,
      };
    }),
    links: (built?.links ?? []).flatMap((bl) => {
      const s = finals.get(bl.index);
      return (['ab', 'ba'] as const).map((dir) => {
        const d = s?.[dir];
        const rate = (dir === 'ba' && !bl.def.duplex ? 0 : bl.def.rate_kbps) * 1000;
        return {
          name: dir === 'ab' ? bl.name : `${bl.def.to}-${bl.def.from}`,
          kind: bl.kind,
          sent_packets: d?.counters.tx_packets ?? 0,
          utilisation: d && rate > 0 ? (d.counters.tx_bytes * 8) / (rate * sc.duration_s) : 0,
          drops_overflow: d?.counters.drop_overflow ?? 0,
          drops_early: d?.counters.drop_early ?? 0,
          drops_wire: d?.counters.drop_loss ?? 0,
          release_error_p50_us: d?.release_error.p50_us ?? null,
          release_error_p99_us: d?.release_error.p99_us ?? null,
        };
      });
    }),
    notes,
    t0_unix_s: epochMs === undefined ? undefined : epochMs / 1000,
  };
  if (tfmccRecs.length) {
    result.tfmcc = tfmccRecs;
    result.tfmcc_checks = tfmccDerived(sc, tfmccRecs);
    // E9/E10: what loss and RTT TFMCC's receivers and the TCP flows saw (information rows).
    for (const id of ['tfmcc/E9', 'tfmcc/E10']) {
      const m = sc.measurements.find((x) => x.id.startsWith(id));
      if (m) for (const rec of tfmccRecs) result.tfmcc_checks.push(...pathEvidenceRows(opts.outDir, sc, rec, id, m.window?.[0] ?? 0, m.window?.[1] ?? sc.duration_s, tfmccT0 / 1000));
    }
    fs.writeFileSync(path.join(opts.outDir, 'tfmcc.json'), JSON.stringify(tfmccRecs, null, 1));
  }
  let video: PlayerQuality[] = [];
  try {
    video = await analyseRun(opts.outDir);
    if (video.length) result.video = video.map(qualitySummary);
  } catch (e) {
    notes.push(`video quality: ${(e as Error).message}`);
  }
  fs.writeFileSync(path.join(opts.outDir, 'summary.json'), JSON.stringify(result, null, 2));
  fs.writeFileSync(path.join(opts.outDir, 'timeseries.csv'), timeseriesCsv(sc, monList));
  fs.writeFileSync(path.join(opts.outDir, 'links.json'), JSON.stringify({ samples: linkSamples, final: Object.fromEntries(finals) }, null, 1));
  let mc = 'id,metric,value,min,max,pass,published\n';
  for (const m of measurements) mc += `"${m.id.replace(/"/g, "'")}",${m.metric},${m.value},${m.min ?? ''},${m.max ?? ''},${m.pass},"${m.published.replace(/"/g, "'")}"\n`;
  fs.writeFileSync(path.join(opts.outDir, 'measurements.csv'), mc);
  writeReport(path.join(opts.outDir, 'report.html'), sc, result, monList, linkSamples);
  if (video.length) appendToReport(path.join(opts.outDir, 'report.html'), qualityHtml(video));
  return result;
}

function pipeTo(c: ChildProcess, file: string) {
  const w = fs.createWriteStream(file);
  c.stdout?.pipe(w);
  c.stderr?.pipe(w);
}

async function stopNamed(net: Net, name: string) {
  for (const p of net.procs.procs) if (p.name === name && p.child.exitCode === null) p.child.kill('SIGTERM');
}

/** One iperf3 run (TCP, or UDP at `rateKbps`) from f.from to f.to over [start, stop). The
 *  receiver side's per-interval bytes (server JSON) become the monitor's record. */
function iperfFlow(
  net: Net,
  b: Built,
  f: TcpFlow | CbrFlow | OnoffFlow,
  port: number,
  start: number,
  stop: number,
  rateKbps: number | null,
  mon: Monitor,
  iv: number,
  later: (s: number, fn: () => Promise<void> | void) => void,
  outDir?: string,
): Promise<void> {
  const dst = b.toward(f.to, f.from).addr;
  const srvNs = b.nodeNs.get(f.to)!;
  const cliNs = b.nodeNs.get(f.from)!;
  const dur = Math.max(1, Math.round(stop - start));
  return new Promise((resolve) => {
    let server: ChildProcess | null = null;
    let serverOut: Promise<string> = Promise.resolve('');
    // Half a second ahead, so the server listens before the client connects (`at` clamps at
    // the build time, 1.5 s before the epoch, so a flow at t = 0 still gets its head start).
    later(start - 0.5, () => {
      server = net.procs.spawnIn(srvNs, `iperf3-s ${f.name}:${port}`, 'iperf3', ['-s', '-1', '-B', dst, '-p', String(port), '-J', '-i', String(iv)]);
      serverOut = collect(server);
    });
    later(start, async () => {
      // An on/off flow's "on" is a volume (rate x on time; iperf3's -t takes whole seconds,
      // which made every "on" last at least 1 s: plm/E9's 0.2-0.4-s bursts read 1 s).
      const span = f.type === 'onoff' && rateKbps ? ['-n', String(Math.max(1, Math.round((rateKbps * 1000 * (stop - start)) / 8)))] : ['-t', String(dur)];
      const args = ['-c', dst, '-p', String(port), ...span, '-J', '-i', String(iv)];
      if (f.type === 'tcp') {
        args.push('-C', kernelCongestionControl(f.variant));
        // segments sized so that IP packets are packet_size bytes (40 B of headers + 12 of
        // timestamps are taken from MSS by the kernel)
        args.push('-M', String(Math.max(88, f.packet_size - 40)));
      } else {
        args.push('-u', '-b', `${Math.round((rateKbps ?? 0) * 1000)}`, '-l', String(Math.max(16, f.packet_size - 28)));
      }
      const c = net.procs.spawnIn(cliNs, `iperf3-c ${f.name}:${port}`, 'iperf3', args);
      const cliText = await collect(c);
      // The sender side's JSON (TCP: retransmits, cwnd and the kernel's RTT per interval) is
      // kept for analysis (e.g. TFMCC E9: the loss and RTT TCP sees against TFMCC's).
      if (f.type === 'tcp' && outDir) fs.writeFileSync(path.join(outDir, `iperf3-${f.name}-${port}.json`), cliText);
      if (server) await waitExit(server, 5000);
      const text = await serverOut;
      try {
        const j = JSON.parse(text) as { intervals?: { sum: { start: number; end: number; bytes: number; packets?: number; lost_packets?: number } }[] };
        for (const x of j.intervals ?? []) {
          const t = start + (x.sum.start + x.sum.end) / 2;
          const pk = x.sum.packets ?? Math.round(x.sum.bytes / f.packet_size);
          mon.add(iv, t, x.sum.bytes, pk, x.sum.lost_packets ?? 0);
        }
      } catch {
        mon.notRun = mon.notRun ?? `iperf3 output for ${f.name} unreadable`;
      }
      resolve();
    });
  });
}

export function readPlayerLog(file: string, mon: Monitor, t0: number, iv: number, notes: string[]) {
  if (mon.notRun) return;
  if (!fs.existsSync(file)) {
    mon.notRun = `no player log ${file}`;
    notes.push(mon.notRun);
    return;
  }
  let prevElapsed = 0;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    let p: PlayerLine;
    try {
      p = JSON.parse(line) as PlayerLine;
    } catch {
      continue;
    }
    if (typeof p.t !== 'number') continue;
    const t = p.t - t0 / 1000;
    const dt = Math.max(0, (p.elapsed_s ?? 0) - prevElapsed) || 1;
    prevElapsed = p.elapsed_s ?? prevElapsed;
    mon.add(iv, t - dt / 2, ((p.rate_bps ?? 0) * dt) / 8, p.packets_1s ?? 0, p.lost_1s ?? 0);
    // The level changes at the controller's decision times (the line only samples the level
    // once a second: a time to level read from the lines alone comes out up to 1 s late).
    for (const d of p.decisions ?? []) {
      const last = mon.levels[mon.levels.length - 1]?.[0] ?? -Infinity;
      if (typeof d.at_s === 'number' && typeof d.to === 'number') mon.level(Math.min(t, Math.max(last, d.at_s - t0 / 1000)), d.to);
    }
    if (typeof p.layers === 'number') mon.level(t, p.layers);
  }
}

