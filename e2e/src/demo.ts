// The `make demo` live session (docs/demo.md): the demo scenario's network built by the testbed
// library, one layercast-server with its HTTP API and dashboard reachable from the root namespace
// over a veth of our own, one layercast-player per receiver, iperf3 for the scenario's TCP flows,
// a status line from /api/viewers every few seconds, until Ctrl-C or --duration, then teardown.
//
// Why not runScenario: a scenario run starts players on the multicast announcement only (no
// telemetry, so /api/viewers stays empty), binds the server's HTTP to one link address and stops
// at duration_s. The demo needs telemetry, an address reachable from the root namespace, and no
// end. The network itself is buildTopology's, unchanged.
import fs from 'node:fs';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { Net, listNamespaces } from './netns.js';
import { buildTopology, type Built } from './topology.js';
import { run, sleep, waitExit } from './sh.js';
import { kernelCongestionControl, loadScenario, ladderRates, type LayeredFlow, type TcpFlow } from './scenario.js';
import { repoRoot, requireBinary } from './bins.js';

export interface DemoOptions {
  /** Scenario file (default research/scenarios/demo.yaml). */
  scenarioFile?: string;
  /** Stop after this many seconds; null/undefined: run until SIGINT/SIGTERM. */
  durationS?: number | null;
  /** Seconds between status lines (default 5). */
  statusEveryS?: number;
  /** 'auto' (default: a VP9 test-pattern source when the server has one, else synthetic),
   *  'synthetic', or a source name passed to the server as is. */
  source?: string;
  /** Logs and player outputs (default e2e/runs/demo-<time>). */
  outDir?: string;
  /** X display for player windows (default $DISPLAY). */
  display?: string;
  /** Server HTTP port (default 8080). */
  port?: number;
  /** Progress and warnings (default: stderr). */
  log?: (m: string) => void;
  /** The URL and status lines (default: stdout). */
  out?: (m: string) => void;
}

export interface ViewerRow {
  id: string;
  layers: number;
  max_layers: number;
  rate_bps: number;
  loss_ratio: number;
  gone: boolean;
}

export interface DemoResult {
  url: string;
  /** The edge's watch page (a browser viewer), when the edge started (not with the synthetic source). */
  watchUrl: string | null;
  /** The source the server ran. */
  source: string;
  /** Why it is not VP9, when it is not. */
  sourceNote: string | null;
  /** Seconds the session ran (first status to teardown). */
  ranS: number;
  /** One /api/viewers snapshot per status line. */
  samples: { t: number; viewers: ViewerRow[]; tcpBps: Record<string, number> }[];
  /** Namespaces the run created (all deleted by the time runDemo returns). */
  namespaces: string[];
  /** Of those, the ones still present after teardown (should be empty). */
  leftover: string[];
  notes: string[];
  outDir: string;
}

/** The server's VP9 test-pattern source ('auto' tries it first; a server build without it
 *  refuses the name at start-up with a config error, and the demo falls back to synthetic). */
export const VP9_TEST_SOURCE = 'testpattern';

/** The same picture through the server's in-process GStreamer source, with sound: a tone with
 *  a beep at every white flash, carried as the session's Opus track (docs/protocols/audio.md).
 *  'auto' tries it first, so the demo has sound wherever the server's GStreamer has the
 *  elements; without them it falls back to the silent VP9 test pattern. */
export const GST_TEST_SOURCE = 'gst-testpattern';

/** The WebRTC edge's HTTP (watch page, WHEP) and UDP ports on the dashboard link. */
const EDGE_PORT = 8090;
const EDGE_WEBRTC_PORT = 8443;

/** The demo's audio track (64 kbit/s Opus, counted in layer 0's announced rate). */
export const DEMO_AUDIO = { kbps: 64 };

/** The test-pattern encode: the server's default video (1280x720 at 30 fps, L3T2, the codec's
 *  default ladder in size-first order; docs/server.md "The default ladder"). With the scenario's
 *  600-byte packets (the server's default for video) the server announces per-layer rates of
 *  245, 494, 269, 239, 1343 and 791 kbit/s: exactly research/scenarios/demo.yaml's ladder, so
 *  the synthetic fallback and the simulator run the same ladder (0.5 Mbit/s: 320x180 at 15 fps,
 *  1.5 Mbit/s: 640x360 at 30 fps, 4 Mbit/s: 1280x720 at 30 fps). */
export const DEMO_VIDEO = { width: 1280, height: 720, fps: 30, spatial: 3, temporal: 2 };

/** The earlier demo encode's size (640x360 at 15 fps, L3T3, about 1.7 Mbit/s of budget), kept
 *  for runs whose cost must not grow with the product default (the capacity benchmark). */
export const SMALL_DEMO_VIDEO = { width: 640, height: 360, fps: 15, spatial: 3, temporal: 3, kbps_scale: 0.6 };

const fmtRate = (bps: number) =>
  bps >= 1e6 ? `${(bps / 1e6).toFixed(2)}M` : `${Math.round(bps / 1e3)}k`;

/** Root-side veth name, unique per process (at most 15 characters). */
const rootIf = (pid: number) => `lcd${pid % 10_000_000}`;

/** A free 10.201.y.0/30 in the root namespace (starting from the pid, so concurrent demos differ). */
async function freeSubnet(pid: number): Promise<number> {
  const used = (await run('ip', ['-4', '-o', 'addr'])).stdout + (await run('ip', ['-4', 'route'])).stdout;
  for (let i = 0; i < 250; i++) {
    const y = (pid + i) % 250;
    if (!used.includes(`10.201.${y}.`)) return y;
  }
  throw new Error('no free 10.201.y.0/30 subnet for the dashboard link');
}

async function getJson(url: string, timeoutMs = 2000): Promise<unknown> {
  const r = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return r.json();
}

function parseViewers(v: unknown): ViewerRow[] {
  if (!Array.isArray(v)) return [];
  return v
    .filter((x): x is Record<string, unknown> => !!x && typeof x === 'object')
    .map((x) => ({
      id: String(x.id ?? '?'),
      layers: Number(x.layers ?? 0),
      max_layers: Number(x.max_layers ?? 0),
      rate_bps: Number(x.rate_bps ?? 0),
      loss_ratio: Number(x.loss_ratio ?? 0),
      gone: x.gone === true,
    }))
    .sort((a, b) => a.id.localeCompare(b.id));
}

/** Last "N Kbits/sec" / "Mbits/sec" on an iperf3 text line. */
export function iperfRateBps(line: string): number | null {
  const m = /([\d.]+)\s+([KMG]?)bits\/sec/.exec(line);
  if (!m) return null;
  const k = { '': 1, K: 1e3, M: 1e6, G: 1e9 }[m[2] as '' | 'K' | 'M' | 'G'];
  return Number(m[1]) * k;
}

function pipeTo(c: ChildProcess, file: string, onLine?: (l: string) => void) {
  // Two sources into one file: neither may end it (the second would write after end).
  const w = fs.createWriteStream(file);
  w.on('error', () => {});
  c.stdout?.pipe(w, { end: false });
  c.stderr?.pipe(w, { end: false });
  c.once('close', () => w.end());
  if (onLine) {
    let buf = '';
    c.stdout?.on('data', (d) => {
      buf += String(d);
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        onLine(buf.slice(0, i));
        buf = buf.slice(i + 1);
      }
    });
  }
}

export async function runDemo(opts: DemoOptions = {}): Promise<DemoResult> {
  const log = opts.log ?? ((m: string) => console.error(`[demo] ${m}`));
  const out = opts.out ?? ((m: string) => console.log(m));
  const scFile = opts.scenarioFile ?? path.join(repoRoot, 'research', 'scenarios', 'demo.yaml');
  const sc = loadScenario(scFile);
  const flow = sc.flows.find((f): f is LayeredFlow => f.type === 'layered');
  if (!flow) throw new Error(`${scFile}: no layered flow`);
  const tcpFlows = sc.flows.filter((f): f is TcpFlow => f.type === 'tcp');
  const duration = opts.durationS ?? null;
  if (duration !== null && !(duration > 0)) throw new Error('--duration must be a positive number of seconds');
  const every = opts.statusEveryS ?? 5;
  const port = opts.port ?? 8080;
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const outDir = opts.outDir ?? path.join(repoRoot, 'e2e', 'runs', `demo-${stamp}`);
  fs.mkdirSync(outDir, { recursive: true });
  const serverBin = requireBinary('layercast-server');
  const playerBin = requireBinary('layercast-player');
  const edgeBin = requireBinary('layercast-edge');
  requireBinary('layercast-linkemu');

  const notes: string[] = [];
  const samples: DemoResult['samples'] = [];
  const net = new Net();
  // One teardown for everyone: Net's own SIGINT handler, this function's finally and the
  // watchdog all await the same promise, so nobody exits while namespaces still exist.
  // The root-side veth goes first and explicitly: the kernel dismantles a deleted namespace
  // (and with it the veth pair) asynchronously, which under load can take a long while.
  const rif = rootIf(process.pid);
  const netTeardown = net.teardown.bind(net);
  let tearing: Promise<void> | null = null;
  net.teardown = () =>
    (tearing ??= (async () => {
      const n = net.namespaces.length;
      await run('ip', ['link', 'del', rif], { allowFail: true });
      await netTeardown();
      if (n) log(`network removed (${n} namespaces, ${rif})`);
    })());
  let stop = false;
  let wake: (() => void) | null = null;
  const onSignal = () => {
    if (!stop) log('stopping: tearing the network down');
    stop = true;
    wake?.();
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  // An exception outside the awaited path (a stream or child-process event) still tears down.
  const onCrash = (e: unknown) => {
    log(`internal error: ${(e as Error)?.stack ?? String(e)}; tearing down`);
    void net.teardown().finally(() => process.exit(1));
  };
  process.on('uncaughtException', onCrash);
  process.on('unhandledRejection', onCrash);
  const watchdog =
    duration !== null
      ? setTimeout(() => {
          log('hard time limit reached: tearing down');
          void net.teardown().finally(() => process.exit(124));
        }, (duration + 120) * 1000)
      : null;
  let url = '';
  let watchUrl: string | null = null;
  let source = 'synthetic';
  let sourceNote: string | null = null;
  let t0 = Date.now();
  let created: string[] = [];
  try {
    log(`building ${sc.name}: ${sc.topology.nodes.length} nodes, ${sc.topology.links.length} links`);
    const b: Built = await buildTopology(net, sc, { dir: outDir });
    const srcNs = b.nodeNs.get(flow.from)!;
    const firstRecv = flow.receivers[0]?.at;
    if (!firstRecv) throw new Error('the layered flow has no receivers');
    const srcAddr = b.toward(flow.from, firstRecv).addr;

    // ---- the dashboard link: root namespace <-> source namespace
    const y = await freeSubnet(process.pid);
    await run('ip', ['link', 'add', rif, 'type', 'veth', 'peer', 'name', 'dash', 'netns', srcNs]);
    await run('ip', ['addr', 'add', `10.201.${y}.1/30`, 'dev', rif]);
    await run('ip', ['link', 'set', rif, 'up']);
    await run('ip', ['-n', srcNs, 'addr', 'add', `10.201.${y}.2/30`, 'dev', 'dash']);
    await run('ip', ['-n', srcNs, 'link', 'set', 'dash', 'up']);
    const base = `http://10.201.${y}.2:${port}`;
    url = `${base}/`;

    // ---- the server
    const rates = ladderRates(flow.layers);
    const session = (src: string) => ({
      id: flow.name,
      name: flow.name,
      protocol: flow.protocol,
      source: src,
      ...(src === 'synthetic' ? { layer_rates_bps: rates.map((r) => Math.round(r * 1000)) } : { video: DEMO_VIDEO }),
      ...(src === GST_TEST_SOURCE ? { audio: DEMO_AUDIO } : {}),
      packet_size: flow.packet_size,
      bunch_len: flow.bunch,
      adapt_interval_ms: Math.round(flow.adapt_interval_s * 1000),
      group: '239.255.100.0',
      port: 5004,
    });
    const dist = path.join(repoRoot, 'server', 'dashboard', 'dist');
    if (!fs.existsSync(path.join(dist, 'index.html'))) {
      notes.push('dashboard not built (npm run build -w server/dashboard): the URL serves the API only');
      log(notes[notes.length - 1]);
    }
    const startServer = async (src: string): Promise<{ child: ChildProcess | null; err: string }> => {
      const args = [
        '--dev', // the demo's private namespaces, dashboard without a token: docs/security.md §9.8
        '--http-addr', `0.0.0.0:${port}`,
        '--announce', '239.255.76.1:5000',
        '--interface', srcAddr,
        '--ttl', '16',
        '--dashboard-dir', dist,
        '--session', JSON.stringify(session(src)),
      ];
      const c = net.procs.spawnIn(srcNs, `server ${src}`, serverBin, args);
      let err = '';
      c.stderr?.on('data', (d) => (err += String(d)));
      pipeTo(c, path.join(outDir, `server-${src}.log`));
      for (let i = 0; i < 100; i++) {
        if (c.exitCode !== null) return { child: null, err };
        try {
          await getJson(`${base}/api/sessions`, 500);
          return { child: c, err };
        } catch {
          await sleep(100);
        }
      }
      c.kill('SIGTERM');
      await waitExit(c, 3000);
      return { child: null, err: `${err}\nno answer on ${base} within 10 s` };
    };
    const wanted = opts.source ?? 'auto';
    const tries = wanted === 'auto' ? [GST_TEST_SOURCE, VP9_TEST_SOURCE, 'synthetic'] : [wanted];
    let server: ChildProcess | null = null;
    const refusals: string[] = [];
    for (const s of tries) {
      const r = await startServer(s);
      if (r.child) {
        server = r.child;
        source = s;
        break;
      }
      refusals.push(`${s}: ${r.err.trim().split('\n').pop()}`);
    }
    if (!server) throw new Error(`layercast-server did not start (${refusals.join('; ')})`);
    if (source === 'synthetic') {
      sourceNote =
        wanted === 'synthetic'
          ? 'synthetic layered source (asked for with --source synthetic): constant-rate padding layers, no picture'
          : `this server build has no VP9 test-pattern source (${refusals[0] ?? 'refused'}); ` +
            'running the SYNTHETIC layered source: constant-rate padding layers with the same ladder, no picture';
    }

    // The ladder the server announces (a video encode sets its own) against the scenario's.
    // The sound rides in layer 0 (its rate counts in layer 0's), the scenario's ladder is the
    // video's: the comparison leaves the sound out.
    let ladder = rates.map((r) => r * 1000);
    let audioBps = 0;
    try {
      const ss = (await getJson(`${base}/api/sessions`)) as {
        id?: string;
        layers?: { rate_bps?: number }[];
        audio_rate_bps?: number | null;
      }[];
      const mine = Array.isArray(ss) ? ss.find((x) => x.id === flow.name) : undefined;
      if (mine?.layers?.length) ladder = mine.layers.map((l) => Number(l.rate_bps ?? 0));
      audioBps = Number(mine?.audio_rate_bps ?? 0);
    } catch {
      /* keep the scenario's */
    }
    const video = ladder.map((r, i) => (i === 0 ? r - audioBps : r));
    const off = video.length !== rates.length || video.some((r, i) => Math.abs(r - rates[i] * 1000) > 0.02 * rates[i] * 1000);
    if (off) {
      notes.push(`the server announces ${ladder.length} layers (${ladder.map((r) => Math.round(r / 1000)).join(', ')} kbit/s), not the scenario's ladder`);
      log(notes[notes.length - 1]);
    }
    let cum = 0;
    const cumulative = ladder.map((r) => (cum += r));

    // ---- TCP cross traffic (iperf3), whole run
    const tcpBps: Record<string, number> = {};
    let iport = 5201;
    for (const f of tcpFlows) {
      const dst = b.toward(f.to, f.from).addr;
      const p = iport++;
      pipeTo(
        net.procs.spawnIn(b.nodeNs.get(f.to)!, `iperf3-s ${f.name}`, 'iperf3', ['-s', '-B', dst, '-p', String(p)]),
        path.join(outDir, `iperf3-s-${f.name}.log`),
      );
      await sleep(300);
      // -t: the run's length (plus slack), or a day when it runs until Ctrl-C.
      const secs = duration !== null ? Math.ceil(duration) + 5 : 86_400;
      const args = ['-c', dst, '-p', String(p), '-t', String(secs), '-i', '1', '--forceflush'];
      args.push('-C', kernelCongestionControl(f.variant), '-M', String(Math.max(88, f.packet_size - 40)));
      const c = net.procs.spawnIn(b.nodeNs.get(f.from)!, `iperf3-c ${f.name}`, 'iperf3', args);
      pipeTo(c, path.join(outDir, `iperf3-c-${f.name}.log`), (l) => {
        const r = iperfRateBps(l);
        if (r !== null && !/sender|receiver/.test(l)) tcpBps[f.name] = r;
      });
    }

    // ---- the WebRTC edge (docs/edge.md): a browser on this machine watches the session
    // through it. It runs in the source's namespace, so it receives the groups by multicast
    // loopback (the server's `loop` default) and browsers reach it over the dashboard link.
    if (source !== 'synthetic') {
      const dashAddr = `10.201.${y}.2`;
      const edgePort = port === EDGE_PORT ? EDGE_PORT + 1 : EDGE_PORT;
      const edgeArgs = [
        '--server', `http://127.0.0.1:${port}`,
        '--http', `0.0.0.0:${edgePort}`, // the namespace's only outside link is the dashboard's
        '--webrtc-bind', `${dashAddr}:${EDGE_WEBRTC_PORT}`,
        '--interface', srcAddr,
        '--name', 'demo-edge',
        '--session', flow.name,
      ];
      const edge = net.procs.spawnIn(srcNs, 'edge', edgeBin, edgeArgs);
      pipeTo(edge, path.join(outDir, 'edge.log'));
      const edgeBase = `http://${dashAddr}:${edgePort}`;
      for (let i = 0; i < 100 && edge.exitCode === null && !watchUrl; i++) {
        const ok = await fetch(`${edgeBase}/healthz`, { signal: AbortSignal.timeout(500) })
          .then((r) => r.ok)
          .catch(() => false);
        if (ok) watchUrl = `${edgeBase}/watch/${flow.name}`;
        else await sleep(100);
      }
      if (!watchUrl) {
        notes.push(`the WebRTC edge did not start (log: ${path.join(outDir, 'edge.log')}): no browser viewer`);
        log(notes[notes.length - 1]);
      }
    }

    // ---- players
    const display = opts.display ?? process.env.DISPLAY;
    const help = (await run(playerBin, ['--help'], { allowFail: true })).stdout;
    const windowed = !!display && /window/i.test(help);
    log(
      windowed
        ? `players: windows on ${display}`
        : display
          ? 'players: headless (this player build has no window; status lines in the player logs)'
          : 'players: headless (no $DISPLAY)',
    );
    const annUrl = `http://${srcAddr}:${port}/api/sessions/${flow.name}/announcement`;
    const players: { name: string; child: ChildProcess }[] = [];
    for (const r of flow.receivers) {
      const dir = path.join(outDir, `player-${r.name}`);
      fs.mkdirSync(dir, { recursive: true });
      const ifc = b.toward(r.at, flow.from);
      const args = ['--session-url', annUrl, '--controller', r.protocol ?? flow.protocol, '--interface', ifc.addr, '--out', dir, '--viewer-id', r.name];
      if (!windowed) args.push('--headless');
      if (duration !== null) args.push('--duration', String(duration));
      const env = windowed ? { ...process.env, DISPLAY: display } : process.env;
      const c = net.procs.spawnIn(b.nodeNs.get(r.at)!, `player ${r.name}`, playerBin, args, { env });
      pipeTo(c, path.join(dir, 'stderr.log'));
      players.push({ name: r.name, child: c });
    }

    const bottleneck = (node: string) => {
      const l = sc.topology.links.find((x) => x.to === node || x.from === node);
      return l ? `${l.rate_kbps >= 1000 ? `${l.rate_kbps / 1000} Mbit/s` : `${l.rate_kbps} kbit/s`}` : '?';
    };
    out(
      `Layercast demo: session "${flow.name}", ${ladder.length} layers (${flow.protocol}), source ${source}` +
        (source === VP9_TEST_SOURCE || source === GST_TEST_SOURCE ? ` (VP9 SVC L${DEMO_VIDEO.spatial}T${DEMO_VIDEO.temporal}, ${DEMO_VIDEO.width}x${DEMO_VIDEO.height} @ ${DEMO_VIDEO.fps} fps)` : ''),
    );
    out(`  cumulative layer rates (kbit/s): ${cumulative.map((r) => Math.round(r / 1000)).join(' ')}`);
    if (source === GST_TEST_SOURCE)
      out(
        `  sound: Opus ${DEMO_AUDIO.kbps} kbit/s on its own group, joined with layer 0 (a tone, a beep at every white flash)` +
          (audioBps ? `; ${Math.round(audioBps / 1000)} kbit/s with headers and repair, counted in layer 0's rate` : ''),
      );
    if (sourceNote) out(`NOTE: ${sourceNote}`);
    for (const r of flow.receivers) {
      const shared = tcpFlows.filter((f) => f.to === r.at || f.from === r.at).map((f) => ` shared with TCP flow "${f.name}"`).join('');
      out(`  viewer ${r.name}: behind ${bottleneck(r.at)}${shared}`);
    }
    out(`dashboard: ${url}   (API: ${base}/api/viewers)`);
    if (watchUrl) out(`browser viewer: ${watchUrl}   (WebRTC through the edge; open it in a browser on this machine)`);
    out(duration !== null ? `running for ${duration} s` : 'running until Ctrl-C');

    // ---- status loop
    t0 = Date.now();
    const end = duration !== null ? t0 + duration * 1000 : Infinity;
    while (!stop && Date.now() < end) {
      const wait = Math.min(every * 1000, end - Date.now());
      await new Promise<void>((res) => {
        const t = setTimeout(res, Math.max(0, wait));
        wake = () => {
          clearTimeout(t);
          res();
        };
      });
      wake = null;
      if (stop) break;
      if (server.exitCode !== null || server.signalCode !== null) throw new Error(`layercast-server exited (${server.exitCode ?? server.signalCode}); see ${outDir}`);
      const t = (Date.now() - t0) / 1000;
      let viewers: ViewerRow[] = [];
      try {
        // In the scenario's receiver order (slowest path first in the demo), others after.
        const order = (id: string) => {
          const i = flow.receivers.findIndex((r) => r.name === id);
          return i < 0 ? flow.receivers.length : i;
        };
        viewers = parseViewers(await getJson(`${base}/api/viewers`)).sort((a, b) => order(a.id) - order(b.id));
      } catch (e) {
        out(`[${t.toFixed(0).padStart(4)}s] /api/viewers: ${(e as Error).message}`);
        continue;
      }
      samples.push({ t, viewers, tcpBps: { ...tcpBps } });
      const parts = viewers.map((v) => `${v.id} ${v.layers}/${v.max_layers} ${fmtRate(v.rate_bps)}${v.loss_ratio > 0.005 ? ` loss ${(v.loss_ratio * 100).toFixed(1)}%` : ''}${v.gone ? ' (gone)' : ''}`);
      for (const p of players) if (p.child.exitCode !== null && duration === null) parts.push(`${p.name} exited`);
      const tcp = Object.entries(tcpBps).map(([k, v]) => `${k} ${fmtRate(v)}`);
      out(`[${t.toFixed(0).padStart(4)}s] ${parts.join(' | ') || 'no viewers yet'}${tcp.length ? `  || ${tcp.join(' ')}` : ''}`);
    }
  } finally {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
    process.removeListener('uncaughtException', onCrash);
    process.removeListener('unhandledRejection', onCrash);
    if (watchdog) clearTimeout(watchdog);
    created = [...net.namespaces];
    await net.teardown();
  }
  const leftover = (await listNamespaces()).filter((n) => n.startsWith(net.prefix));
  const rootLeft = (await run('ip', ['link', 'show', rif], { allowFail: true })).code === 0;
  if (rootLeft) notes.push(`root interface ${rif} still present`);
  if (leftover.length) notes.push(`namespaces left: ${leftover.join(' ')}`);
  return {
    url,
    watchUrl,
    source,
    sourceNote,
    ranS: (Date.now() - t0) / 1000,
    samples,
    namespaces: created,
    leftover,
    notes,
    outDir,
  };
}

/** Mean layers per viewer over the samples with t >= fromS. */
export function meanLayers(r: DemoResult, fromS: number): Map<string, number> {
  const acc = new Map<string, { s: number; n: number }>();
  for (const s of r.samples) {
    if (s.t < fromS) continue;
    for (const v of s.viewers) {
      const a = acc.get(v.id) ?? { s: 0, n: 0 };
      a.s += v.layers;
      a.n += 1;
      acc.set(v.id, a);
    }
  }
  return new Map([...acc].map(([k, a]) => [k, a.s / a.n]));
}
