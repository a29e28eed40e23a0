// A live session on the namespace testbed that a test can disturb: one layercast-server (synthetic
// layers or the VP9 test pattern) with its HTTP API, players with telemetry behind their own
// bottlenecks, the multicast router, and handles to kill and restart each of them, change a link
// through its emulator's control socket, and read what the players and the server say. Used by
// the fault tests (faults.ts), the soak (soak.ts) and the players-per-machine benchmark
// (capacity.ts); docs/reliability.md.
//
// Why not runScenario or runDemo: both own their processes for the whole run. A fault test must
// kill and restart the server, one player and the router in the middle of a session and read the
// API and the logs while it runs. The network itself is buildTopology's, unchanged.
import fs from 'node:fs';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import YAML from 'yaml';
import { Net, listNamespaces } from './netns.js';
import { buildTopology, type Built, type BuiltLink } from './topology.js';
import { nsRun, sleep, waitExit } from './sh.js';
import { parseScenario } from './scenario.js';
import { requireBinary } from './bins.js';
import type { LinkSettings } from './linkemu.js';

export interface BedPlayer {
  name: string;
  /** Bottleneck (link from the source node to the player), kbit/s of UDP payload. */
  rateKbps: number;
  /** One-way delay of the bottleneck, ms (default 10 on emulated links, 0 on tbf). */
  delayMs?: number;
  /** The router node the player hangs off: 'src' (the sender's router) or `hub<j>` (a
   *  second-tier router). Default: with `edges`, the edges in turn; else 'src' (or a hub of
   *  HUB_FANOUT players beyond that many). */
  at?: string;
}

export interface BedOptions {
  /** Logs, player outputs, configs. */
  dir: string;
  players: BedPlayer[];
  /** 'synthetic' (constant-rate padding layers, `ladderKbps`) or 'video' (the server's VP9 test
   *  pattern with `video`). */
  source: 'synthetic' | 'video';
  /** Synthetic ladder, kbit/s per layer (default 8 x 100). */
  ladderKbps?: number[];
  /** The session's `video` object (default VIDEO_SMALL). */
  video?: Record<string, unknown>;
  /** The server's video source for `source: 'video'`: 'testpattern' (default, the server's own
   *  pattern, no GStreamer) or any session source the server takes ('gst-testpattern', a URI). */
  videoSource?: string;
  /** 'linkemu' (default; needed for link faults) or 'tbf' (rate only, cheapest per player). */
  links?: 'linkemu' | 'tbf';
  /** Server's viewer_timeout_s (default: the server's, 5). */
  viewerTimeoutS?: number;
  controller?: string;
  /** UDP payload per packet (default 1000; 1200 for video). */
  packetSize?: number;
  /** Start players at once (default true); else call startPlayer. */
  startPlayers?: boolean;
  /** Extra player flags (e.g. capacity's `--no-pictures --qr-every 75`). */
  playerArgs?: string[];
  /** Start the server and each player in a session of its own (setsid), hence, with the
   *  kernel's session autogrouping, a scheduling group of its own: a diagnosis of the capacity
   *  benchmark on the shared machine (docs/testbed.md "Players per machine"). Default off. */
  ownSessions?: boolean;
  /** Run `layercast-linkemu keep-awake` (one SCHED_IDLE spinner per CPU) for the bed's life:
   *  on this VM an idle vCPU halts and the hypervisor takes milliseconds to wake it for a
   *  tbf timer, which splits packet pairs on an *idle* machine (docs/testbed.md "Players per
   *  machine"). The spinners only use time the CPUs would idle. Default off. */
  keepAwake?: boolean;
  /** Emulator real-time priority (default 10, 0 off). */
  rtPrio?: number;
  /** Extra environment for the server (e.g. MALLOC_ARENA_MAX for a memory diagnosis, or the
   *  clock-step shim's LD_PRELOAD, `clockstep.ts`). */
  serverEnv?: Record<string, string>;
  /** Multicast routers: 'mrouter' (default, the fast-leave router) or 'frr' (FRR PIM, src/frr.ts,
   *  configured from `frrConf` or deploy/router/frr/frr.conf; the RP on the sender's router). */
  router?: 'mrouter' | 'frr';
  frrConf?: string;
  /** Second-tier routers `hub0..hub<edges-1>` behind the sender's router (100 Mbit/s links):
   *  players two routers away from the sender. */
  edges?: number;
  /** Source-specific multicast: the session's groups in 232.255.100.0/24 and the server
   *  announcing its address as the SSM source, so players join (S,G) with IGMPv3. */
  ssm?: boolean;
  /** Extra fields of the session object (e.g. bunch_len). */
  session?: Record<string, unknown>;
  /** The secured configuration (docs/security.md §9.8): the server on its safe defaults (no
   *  `--dev`: HTTPS with the self-signed certificate and the bearer tokens it generates in its
   *  state directory at the first start, a persistent SAM key), an encrypted session, SSM, and
   *  players that pin the certificate and present the player token, so that they fetch the
   *  media key and their report key and send their telemetry as MACed UDP reports
   *  (docs/protocols/reports.md). A restarted server reads the same state directory. */
  secured?: boolean;
  log?: (m: string) => void;
}

/** What a client of the secured bed needs: the generated tokens and the certificate. */
export interface BedCredentials {
  stateDir: string;
  apiToken: string;
  playerToken: string;
  dashboardToken: string;
  /** The server's certificate (PEM file) and its SHA-256 fingerprint, hex. */
  certFile: string;
  fingerprint: string;
}

/** A cheap video encode for fault tests: 320x180 at 15 fps, 2 spatial x 2 temporal layers,
 *  a key picture every second (a restarted sender's stream is decodable at once anyway: the
 *  encoder starts with a key picture). */
export const VIDEO_SMALL = { width: 320, height: 180, fps: 15, spatial: 2, temporal: 2, kbps_scale: 0.5, keyframe_interval_s: 1 };

/** One line of player.jsonl, the fields the fault tests read. */
export interface PLine {
  t: number;
  elapsed_s: number;
  layers: number;
  sockets: number;
  max_layers: number;
  rate_bps: number;
  packets_1s: number;
  lost_1s: number;
  packets_received: number;
  packets_lost: number;
  max_gap_ms: number;
  video?: { frames: number; decoded: number; decoder_errors: number; freezes: number; width: number; height: number } | null;
  decisions?: unknown[];
}

export interface Viewer {
  id: string;
  layers: number;
  max_layers: number;
  rate_bps: number;
  loss_ratio: number;
  frames: number;
  last_seen_s: number;
  gone: boolean;
}

export interface PlayerHandle {
  name: string;
  dir: string;
  node: string;
  child: ChildProcess | null;
  startedAt: number;
}

const HTTP_PORT = 8080;
/** Players per multicast router (the kernel allows 32 vifs per router: one upstream + 30, with
 *  a spare). */
export const HUB_FANOUT = 30;
/** The same with FRR, whose pimd also takes a vif for its register tunnel and one for the
 *  loopback. */
export const FRR_FANOUT = 28;
export const SSM_GROUP = '232.255.100.0';
export const SESSION_ID = 'live';

export function readJsonl<T>(file: string): T[] {
  let text = '';
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  const out: T[] = [];
  for (const l of text.split('\n')) {
    if (!l.trim()) continue;
    try {
      out.push(JSON.parse(l) as T);
    } catch {
      /* a line being written */
    }
  }
  return out;
}

/** A `/proc/<pid>/status` field in KiB (VmRSS, RssAnon, ...), null when the process is gone. */
export function statusKiB(pid: number | undefined, field = 'VmRSS'): number | null {
  if (!pid) return null;
  try {
    const m = new RegExp(`${field}:\\s+(\\d+)\\s+kB`).exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/** Resident set size of a process, KiB (null when it is gone). */
export const rssKiB = (pid: number | undefined) => statusKiB(pid, 'VmRSS');
/** Resident anonymous memory (heap, stacks): what a leak grows. VmRSS also counts the file
 *  pages of the binary and its libraries, which the kernel drops and reloads under memory
 *  pressure from other processes (the server's moved by +-0.8 MB within a minute in the soak). */
export const anonKiB = (pid: number | undefined) => statusKiB(pid, 'RssAnon');
/** Anonymous memory held in transparent huge pages (`AnonHugePages` of /proc/<pid>/smaps_rollup),
 *  KiB; null when the process is gone. Part of RssAnon: a sparse 2-MiB range promoted to a
 *  huge page (at a fault, or later by khugepaged) adds up to 2 MiB at once with no allocation
 *  behind it, which is why the server and player turn THP off (docs/reliability.md "The
 *  steps were huge pages"). */
export function hugeKiB(pid: number | undefined): number | null {
  if (!pid) return null;
  try {
    const m = /AnonHugePages:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

function pipeTo(c: ChildProcess, file: string) {
  const w = fs.createWriteStream(file, { flags: 'a' });
  w.on('error', () => {});
  c.stdout?.pipe(w, { end: false });
  c.stderr?.pipe(w, { end: false });
  c.once('close', () => w.end());
}

export class Bed {
  readonly net = new Net();
  b!: Built;
  server: ChildProcess | null = null;
  serverStartedAt = 0;
  readonly players = new Map<string, PlayerHandle>();
  /** Per-layer rates the server announces, bit/s. */
  ladderBps: number[] = [];
  private serverArgs: string[] = [];
  private appNs = '';
  private appAddr = '';
  private routerChild: ChildProcess | null = null;
  /** Set once the secured server has written its state (null on a `--dev` bed). */
  creds: BedCredentials | null = null;
  private readonly log: (m: string) => void;

  private constructor(readonly opts: BedOptions) {
    this.log = opts.log ?? (() => {});
  }

  static async start(opts: BedOptions): Promise<Bed> {
    const bed = new Bed(opts);
    try {
      await bed.build();
    } catch (e) {
      await bed.teardown();
      throw e;
    }
    return bed;
  }

  private async build() {
    const o = this.opts;
    fs.mkdirSync(o.dir, { recursive: true });
    requireBinary('layercast-linkemu');
    const serverBin = requireBinary('layercast-server');
    requireBinary('layercast-player');
    const emulated = (o.links ?? 'linkemu') === 'linkemu';
    const ladder = o.ladderKbps ?? Array(8).fill(100);
    // The kernel's multicast routing has at most 32 virtual interfaces per router (MAXVIFS), so
    // one router can feed at most 31 players. Beyond HUB_FANOUT players, hub routers sit between
    // the source node and the players (src -> hub<j> -> player), each with up to HUB_FANOUT
    // players, on unlimited-in-practice links (100 Mbit/s tbf, no delay).
    const fanout = o.router === 'frr' ? FRR_FANOUT : HUB_FANOUT;
    const hubs = o.edges ?? (o.players.length > fanout ? Math.ceil(o.players.length / fanout) : 0);
    const hubOf = (i: number) => o.players[i].at ?? (hubs ? `hub${o.edges ? i % hubs : Math.floor(i / fanout)}` : 'src');
    const hubLinks = Array.from({ length: hubs }, (_, j) => ({
      from: 'src',
      to: `hub${j}`,
      rate_kbps: 100_000,
      delay_ms: 0,
      queue: { kind: 'droptail', limit_packets: 1000 },
    }));
    const links = o.players.map((p, i) => {
      const delay = p.delayMs ?? (emulated ? 10 : 0);
      const bdpPkts = Math.ceil((p.rateKbps * 1000 * 0.1) / 8 / (o.packetSize ?? 1000));
      return {
        from: hubOf(i),
        to: p.name,
        rate_kbps: p.rateKbps,
        delay_ms: delay,
        // 100 ms of the link rate, at least 8 packets; the loss entry forces the emulator.
        queue: { kind: 'droptail', limit_packets: Math.max(8, bdpPkts) },
      };
    });
    const doc = {
      name: 'bed',
      duration_s: 3600,
      topology: {
        nodes: ['src', ...hubLinks.map((l) => l.to), ...o.players.map((p) => p.name)],
        links: [...hubLinks, ...links],
        multicast: { fast_leave: true },
      },
      flows: [
        {
          name: SESSION_ID,
          type: 'layered',
          protocol: o.controller ?? 'era',
          from: 'src',
          layers: { rates_kbps: ladder },
          packet_size: o.packetSize ?? 1000,
          receivers: o.players.map((p) => ({ name: p.name, at: p.name })),
        },
      ],
    };
    const sc = parseScenario(YAML.stringify(doc));
    if (o.keepAwake) {
      this.net.procs.spawnIn(null, 'keep-awake', requireBinary('layercast-linkemu'), ['keep-awake']);
      this.log('keep-awake: one SCHED_IDLE spinner per CPU');
    }
    this.log(`building: ${o.players.length} players, ${emulated ? 'emulated' : 'tbf'} links`);
    this.b = await buildTopology(this.net, sc, { dir: o.dir, linkMode: emulated ? 'linkemu' : 'auto', rtPrio: o.rtPrio, router: o.router, frrConf: o.frrConf });
    if (!emulated && this.b.links.some((l) => l.kind !== 'tbf')) throw new Error('tbf links need delay 0');
    if (hubs) this.log(`${hubs} hub routers between the source node and the players (at most ${fanout} players per router)`);
    const app = this.b.sourceApp.get('src')!;
    this.appNs = app.ns;
    this.appAddr = app.addr;
    this.routerChild = this.net.procs.procs.find((p) => p.name === 'mrouter src')?.child ?? null;

    const session: Record<string, unknown> = {
      id: SESSION_ID,
      name: SESSION_ID,
      protocol: o.controller ?? 'era',
      packet_size: o.packetSize ?? (o.source === 'video' ? 1200 : 1000),
      group: o.ssm || o.secured ? SSM_GROUP : '239.255.100.0',
      port: 5004,
      ...(o.secured ? { encrypt: true } : {}),
      ...o.session,
    };
    if (o.source === 'video') Object.assign(session, { source: o.videoSource ?? 'testpattern', video: o.video ?? VIDEO_SMALL });
    else Object.assign(session, { source: 'synthetic', layer_rates_bps: ladder.map((r) => Math.round(r * 1000)) });
    this.serverArgs = [
      // Secured: the safe defaults, with the state (tokens, certificate, SAM key) in the run's
      // directory. Else `--dev`: the bed's private namespaces (docs/security.md §9.8).
      ...(o.secured ? ['--state-dir', path.join(o.dir, 'state')] : ['--dev']),
      '--http-addr', `0.0.0.0:${HTTP_PORT}`,
      '--announce', '239.255.76.1:5000',
      '--interface', this.appAddr,
      '--ttl', '16',
      '--session', JSON.stringify(session),
    ];
    if (o.viewerTimeoutS !== undefined) this.serverArgs.push('--viewer-timeout-s', String(o.viewerTimeoutS));
    if (o.ssm || o.secured) this.serverArgs.push('--ssm-source', this.appAddr);
    void serverBin;
    await this.startServer();
    const ss = (await this.api('/api/sessions')) as { id?: string; layers?: { rate_bps?: number }[] }[];
    const mine = Array.isArray(ss) ? ss.find((x) => x.id === SESSION_ID) : undefined;
    this.ladderBps = (mine?.layers ?? []).map((l) => Number(l.rate_bps ?? 0));
    if (o.startPlayers ?? true) for (const p of o.players) this.startPlayer(p.name);
  }

  /** GET on the server's API from inside the sender's namespace (curl; no root-side link);
   *  on the secured bed over HTTPS against the server's certificate, with the control token. */
  async api(p: string, timeoutS = 2): Promise<unknown> {
    return JSON.parse(await this.apiText(p, timeoutS));
  }

  /** The body of a GET on the API (see `api`), e.g. `/metrics`. */
  async apiText(p: string, timeoutS = 2): Promise<string> {
    return (await this.apiGet(p, timeoutS)).body;
  }

  /** A GET on the API with the response's head: its `Date` header is the server's wall clock. */
  async apiGet(p: string, timeoutS = 2): Promise<{ head: string; body: string }> {
    const c = this.opts.secured ? this.credentials() : null;
    const auth = c ? ['--cacert', c.certFile, '-H', `Authorization: Bearer ${c.apiToken}`] : [];
    const url = `${c ? 'https' : 'http'}://127.0.0.1:${HTTP_PORT}${p}`;
    const r = await nsRun(this.appNs, 'curl', ['-sf', '-D', '-', '-m', String(timeoutS), ...auth, url], {
      timeoutMs: (timeoutS + 3) * 1000,
      allowFail: true,
    });
    if (r.code !== 0) throw new Error(`GET ${p}: curl exit ${r.code}`);
    const i = r.stdout.indexOf('\r\n\r\n');
    return i < 0 ? { head: '', body: r.stdout } : { head: r.stdout.slice(0, i), body: r.stdout.slice(i + 4) };
  }

  /** The secured server's tokens and certificate, read from its state directory (they exist
   *  once its first start has provisioned them; throws before). */
  credentials(): BedCredentials {
    if (this.creds) return this.creds;
    const stateDir = path.join(this.opts.dir, 'state');
    const tok = (n: string) => fs.readFileSync(path.join(stateDir, `${n}.token`), 'utf8').trim();
    const certFile = path.join(stateDir, 'cert.pem');
    const fingerprint = new X509Certificate(fs.readFileSync(certFile)).fingerprint256.replace(/:/g, '').toLowerCase();
    this.creds = { stateDir, apiToken: tok('api'), playerToken: tok('player'), dashboardToken: tok('dashboard'), certFile, fingerprint };
    return this.creds;
  }

  async viewers(): Promise<Viewer[]> {
    const v = await this.api('/api/viewers');
    if (!Array.isArray(v)) return [];
    return v.map((x: Record<string, unknown>) => ({
      id: String(x.id),
      layers: Number(x.layers ?? 0),
      max_layers: Number(x.max_layers ?? 0),
      rate_bps: Number(x.rate_bps ?? 0),
      loss_ratio: Number(x.loss_ratio ?? 0),
      frames: Number(x.frames ?? 0),
      last_seen_s: Number(x.last_seen_s ?? 0),
      gone: x.gone === true,
    }));
  }

  /** Starts the server (again) and waits until its API answers. Returns the spawn time (unix s). */
  async startServer(): Promise<number> {
    const bin = requireBinary('layercast-server');
    const t = Date.now() / 1000;
    const env = this.opts.serverEnv ? { ...process.env, ...this.opts.serverEnv } : undefined;
    const c = this.net.procs.spawnIn(this.appNs, 'server', bin, this.serverArgs, { ...(env ? { env } : {}), ...(this.opts.ownSessions ? { detached: true } : {}) });
    pipeTo(c, path.join(this.opts.dir, 'server.log'));
    this.server = c;
    this.serverStartedAt = t;
    for (let i = 0; i < 150; i++) {
      if (c.exitCode !== null) throw new Error(`layercast-server exited ${c.exitCode}; see ${this.opts.dir}/server.log`);
      try {
        await this.api('/api/sessions', 1);
        return t;
      } catch {
        await sleep(100);
      }
    }
    throw new Error('layercast-server: no API answer within 15 s');
  }

  async killServer(signal: NodeJS.Signals = 'SIGKILL'): Promise<number> {
    const c = this.server;
    if (!c) throw new Error('no server');
    const t = Date.now() / 1000;
    c.kill(signal);
    await waitExit(c, 5000);
    this.server = null;
    return t;
  }

  startPlayer(name: string): PlayerHandle {
    const p = this.opts.players.find((x) => x.name === name);
    if (!p) throw new Error(`no player ${name}`);
    const dir = path.join(this.opts.dir, `player-${name}`);
    fs.mkdirSync(dir, { recursive: true });
    const ifc = this.b.toward(name, 'src');
    const sec = this.opts.secured ? this.credentials() : null;
    const annUrl = `${sec ? 'https' : 'http'}://${this.appAddr}:${HTTP_PORT}/api/sessions/${SESSION_ID}/announcement`;
    // Both the announcement URL (telemetry, the session's id) and the announcement group: a
    // restarted sender's first multicast announcement reaches the player at once, where the URL
    // is polled once a second. The player restarts its video pipeline on the new session, so the
    // sooner it learns of it, the more of the new encode's first key picture it keeps.
    const args = ['--session-url', annUrl, '--announce', '239.255.76.1:5000', '--controller', this.opts.controller ?? 'era', '--interface', ifc.addr, '--out', dir, '--viewer-id', name, '--headless', ...(this.opts.playerArgs ?? [])];
    if (sec) args.push('--token', sec.playerToken, '--tls-fingerprint', sec.fingerprint);
    const c = this.net.procs.spawnIn(this.b.nodeNs.get(name)!, `player ${name}`, requireBinary('layercast-player'), args, this.opts.ownSessions ? { detached: true } : {});
    pipeTo(c, path.join(dir, 'stderr.log'));
    const h = { name, dir, node: name, child: c, startedAt: Date.now() / 1000 };
    this.players.set(name, h);
    return h;
  }

  async killPlayer(name: string, signal: NodeJS.Signals = 'SIGKILL'): Promise<number> {
    const h = this.players.get(name);
    if (!h?.child) throw new Error(`player ${name} not running`);
    const t = Date.now() / 1000;
    h.child.kill(signal);
    await waitExit(h.child, 5000);
    h.child = null;
    return t;
  }

  lines(name: string): PLine[] {
    return readJsonl<PLine>(path.join(this.players.get(name)?.dir ?? path.join(this.opts.dir, `player-${name}`), 'player.jsonl'));
  }

  frames(name: string): { decoded_at: number; t: number; picture_id: number }[] {
    return readJsonl(path.join(this.opts.dir, `player-${name}`, 'frames.jsonl'));
  }

  link(player: string): BuiltLink {
    const l = this.b.links.find((x) => x.def.to === player);
    if (!l) throw new Error(`no link to ${player}`);
    return l;
  }

  /** Changes the player's bottleneck through its emulator's control socket (both directions). */
  async setLink(player: string, s: LinkSettings): Promise<void> {
    const l = this.link(player);
    if (!l.emu) throw new Error(`link to ${player} is not emulated`);
    await l.emu.set('both', s);
  }

  /** Kills the multicast router of the source node and starts a new one with the same
   *  interfaces. Returns { killedAt, startedAt } (unix s; startedAt = when it said ready). */
  async restartRouter(signal: NodeJS.Signals = 'SIGKILL'): Promise<{ killedAt: number; startedAt: number }> {
    const r = this.b.routers.find((x) => x.node === 'src');
    if (!r || r.kind !== 'mrouter') throw new Error('no mrouter on the source node');
    const old = this.routerChild;
    const killedAt = Date.now() / 1000;
    if (old) {
      old.kill(signal);
      await waitExit(old, 5000);
    }
    const ns = this.b.nodeNs.get('src')!;
    const child = this.net.procs.spawnIn(ns, 'mrouter src', requireBinary('layercast-linkemu'), [
      'mrouter', '--upstream', r.upstream.join(','), '--downstream', r.downstream.join(','), '--leave-delay-ms', '0',
    ]);
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('restarted mrouter not ready')), 10_000);
      child.stdout!.once('data', (d) => {
        clearTimeout(t);
        if (String(d).includes('"ready":true')) resolve();
        else reject(new Error(`restarted mrouter: ${String(d)}`));
      });
      child.once('exit', (c) => {
        clearTimeout(t);
        reject(new Error(`restarted mrouter exited ${c}`));
      });
    });
    pipeTo(child, path.join(this.opts.dir, 'mrouter-src-restarted.log'));
    this.routerChild = child;
    return { killedAt, startedAt: Date.now() / 1000 };
  }

  /** Number of layers the player's bottleneck carries: the largest k whose cumulative announced
   *  rate fits the link's payload rate. */
  carries(name: string): number {
    const p = this.opts.players.find((x) => x.name === name)!;
    let cum = 0;
    let k = 0;
    for (const r of this.ladderBps) {
      if (cum + r > p.rateKbps * 1000) break;
      cum += r;
      k++;
    }
    return k;
  }

  /** Starts counting what the sender puts on the wire towards multicast groups: an iptables
   *  rule in its namespace (the sender's output without the HTTP answers to its viewers, which
   *  grow with them). Read with `senderMulticastBytes`. */
  async countSenderMulticast(): Promise<void> {
    await nsRun(this.appNs, 'iptables', ['-w', '-A', 'OUTPUT', '-o', 'up0', '-d', '224.0.0.0/4', '-j', 'ACCEPT']);
  }

  /** The sender's namespace and the interface its multicast leaves on. */
  senderIf(): { ns: string; ifName: string } {
    return { ns: this.appNs, ifName: 'up0' };
  }

  async senderMulticastBytes(): Promise<number> {
    const r = await nsRun(this.appNs, 'iptables', ['-w', '-L', 'OUTPUT', '-v', '-x', '-n']);
    const line = r.stdout.split('\n').find((l) => /224\.0\.0\.0\/4/.test(l));
    if (!line) throw new Error('no multicast counter: call countSenderMulticast first');
    return Number(line.trim().split(/\s+/)[1]);
  }

  /** Bytes sent on an interface of a namespace (kernel counters). */
  async txBytes(ns: string, ifName: string): Promise<number> {
    const r = await nsRun(ns, 'ip', ['-s', '-j', 'link', 'show', ifName]);
    const j = JSON.parse(r.stdout) as { stats64?: { tx?: { bytes?: number } } }[];
    return Number(j[0]?.stats64?.tx?.bytes ?? NaN);
  }

  serverPid(): number | undefined {
    return this.server?.pid;
  }

  async teardown(): Promise<string[]> {
    const created = [...this.net.namespaces];
    await this.net.teardown();
    const left = (await listNamespaces()).filter((n) => n.startsWith(this.net.prefix));
    void created;
    return left;
  }
}
