// WebRTC edges on the routed network (issue 25 with the edge of issue 22): one
// layercast-server sending the edge suite's VP9 SVC session (its source and audio, so that the
// browsers' numbers compare with that suite's single-edge ones) source-specifically (SSM)
// through FRR PIM routers, layercast-edge on a host behind each of three routers (two second-tier routers two
// hops from the sender, one on the sender's own router), each serving headless Chromium
// browsers on clean paths. First one edge with two browsers, then three edges with two
// browsers on the first and one on each other, the same encode throughout:
//   - every browser plays (framesDecoded rising at the source rate, no freeze);
//   - every edge holds one subscription: each of the session's groups joined once,
//     source-specifically to the sender, on its upstream interface (the kernel's
//     /proc/net/mcfilter and /proc/net/igmp in the edge's namespace), and its router sees the
//     (S,G) IGMPv3 source, no any-source entry;
//   - the routed path loses, reorders and holds back nothing: tcpdump at the sender's interface
//     and at each edge's upstream interface, stream by stream (src/rtp-capture.ts), and the
//     routers' kernel counters (no packet on a wrong interface);
//   - the sender's multicast output (iptables counter) is the same with 1 and 3 edges.
// Each window also logs what tells the sending side from the browser when a browser falls
// short: the encoder's dropped layer frames, the edge's gate and layer counters and its
// estimates, and Chromium's frames arrived / dropped / decode time (docs/testbed.md).
//
//   n-src ── 10.200.x ── n-hub0 ── n-e0 (edge) ── w<j> 10.90.<4i+j>.1/24 ── y ns b<i>-<j> (Chromium)
//         ├─ 10.200.x ── n-hub1 ── n-e1 (edge) ── ...
//         └───────────────────────  n-e2 (edge) ── ...
// Each edge serves HTTP and WebRTC on a /32 service address 10.91.<i>.1 on its loopback.
import fs from 'node:fs';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { requireBinary } from './bins.js';
import { Bed, SSM_GROUP } from './bed.js';
import { CHROMIUM_ARGS, EDGE_SESSION, type PageState } from './edge.js';
import { recordAcceptance } from './acceptance.js';
import { nsRun, run, sleep } from './sh.js';
import { lostBetween, startCapture, type RtpStream } from './rtp-capture.js';

const EDGE_ROUTERS = ['hub0', 'hub1', 'src'];
const HTTP_PORT = 8080;
const CMD = 'npm run cli -w e2e -- pim --only edges';
/** The source's frame rate and the share of it a playing browser must decode. */
const SOURCE_FPS = EDGE_SESSION.video.fps;
const FPS_FLOOR = 27;
/** The sender's output with 3 edges may differ from that with 1 by at most this (the issue's
 *  2 % for viewers spread over the routers). */
const RATE_SPREAD_PCT = 2;
/** How much longer than the sender's own longest pause between two packets of a stream the
 *  longest pause at an edge's input may be: the routers forward, they do not hold back. */
const PATH_SILENCE_SLACK_MS = 50;

type Browser = { edge: number; j: number; ns: string; ctx: import('playwright-core').BrowserContext; page: import('playwright-core').Page };

export interface BrowserRow {
  edge: string;
  browser: number;
  fps: number;
  freezes: number;
  width: number;
  maxGapMs: number;
  /** Chromium's own counts over the window (inbound-rtp): frames that arrived whole, frames it
   *  dropped before decoding, and its decode time per frame. Arrived below the source rate is
   *  the sending side; arrived at it but decoded below is the browser. */
  receivedFps: number;
  droppedFps: number;
  decodeMs: number;
}

export interface JoinRow {
  edge: string;
  router: string;
  /** Session groups the edge is a member of on its upstream interface (/proc/net/igmp). */
  groups: string[];
  /** Of those, joined source-specifically to the sender only (/proc/net/mcfilter, INCLUDE). */
  ssmGroups: string[];
  /** Sockets per group (the Users column): 1 each is one subscription. */
  users: number[];
  /** (S,G) entries the edge's router lists on the edge's link, and any-source ones. */
  routerSG: number;
  routerAny: number;
}

export interface PhaseResult {
  edges: number;
  browsers: number;
  senderKbps: number;
  /** Each edge's upstream video bytes over the window, kbit/s (one copy of the stream each). */
  edgeUpKbps: number[];
  rows: BrowserRow[];
  joins: JoinRow[];
  /** The routed path over the window: RTP streams at the sender and at each edge's input. */
  path: PathRow[];
  /** Each running edge's own counters over the window. */
  edgeCounters: EdgeCounters[];
  /** Kernel multicast forwarding on each router over the window (/proc/net/ip_mr_cache). */
  routerFwd: RouterFwd[];
  /** The machine's CPU busy share over the window, % of all cores (/proc/stat), and the part
   *  of it at a lowered priority (other engineers' niced builds on this machine). */
  cpuBusyPct: number;
  cpuNicePct: number;
  /** The sender over the window: pictures encoded per second and layer frames its encoder's
   *  rate control dropped (server metrics). */
  encodedFps: number;
  layerFramesDropped: number;
}

/** One edge's input compared with the sender's output, stream by stream (the session's
 *  layers and their FEC repair streams). */
export interface PathRow {
  edge: string;
  /** Packets the edge received over the window, all streams, and the sender's packets within
   *  the span of each stream the edge captured that the edge lacks (the path's loss). */
  received: number;
  lost: number;
  /** Sequence numbers missing at the edge and at the sender itself (the encoder side's gaps). */
  missing: number;
  missingAtSender: number;
  reordered: number;
  /** The longest silence of any stream at the edge and at the sender, ms. */
  maxGapMs: number;
  maxGapAtSenderMs: number;
}

export interface EdgeCounters {
  edge: string;
  framesReleased: number;
  framesLost: number;
  fecRecovered: number;
  dropped: number;
  switchesUp: number;
  switchesDown: number;
  /** Pictures the edge forwarded per browser per second (`layercast_edge_pictures`). */
  picturesPerViewerFps: number;
  /** Each viewer's estimate (TWCC) and top spatial layer at the end of the window. */
  estimatesKbps: number[];
  spatial: number[];
  temporal: number[];
  /** Each viewer's loss ratio (from its receiver reports) and RTT, ms, at the end of the window. */
  viewerLoss: number[];
  viewerRttMs: number[];
}

export interface RouterFwd {
  router: string;
  /** (S,G) entries for the session, packets forwarded, and packets that came in on the wrong
   *  interface (an assert or a changed RPF would show here). */
  entries: number;
  packets: number;
  wrongIf: number;
}

/** An address in /proc/net/{igmp,mcfilter} hex (network order as a host-order word on x86). */
const procAddr = (hex: string) => {
  const v = parseInt(hex.replace(/^0x/, '').replace(/\s+/g, ''), 16);
  return [v & 255, (v >>> 8) & 255, (v >>> 16) & 255, v >>> 24].join('.');
};
const mcfilterAddr = (hex: string) => {
  const v = parseInt(hex.replace(/^0x/, ''), 16);
  return [v >>> 24, (v >>> 16) & 255, (v >>> 8) & 255, v & 255].join('.');
};

/** The edge namespace's memberships on `dev`: group → users (/proc/net/igmp) and group →
 *  included sources (/proc/net/mcfilter). */
async function memberships(ns: string, dev: string): Promise<{ users: Map<string, number>; include: Map<string, string[]>; exclude: Map<string, string[]> }> {
  const igmp = (await nsRun(ns, 'cat', ['/proc/net/igmp'])).stdout.split('\n');
  const users = new Map<string, number>();
  let cur = '';
  for (const l of igmp) {
    const head = /^\d+\s+(\S+)\s*:/.exec(l);
    if (head) {
      cur = head[1];
      continue;
    }
    const m = /^\s+([0-9A-Fa-f]{8})\s+(\d+)/.exec(l);
    if (m && cur === dev) users.set(procAddr(m[1]), Number(m[2]));
  }
  const include = new Map<string, string[]>();
  const exclude = new Map<string, string[]>();
  for (const l of (await nsRun(ns, 'cat', ['/proc/net/mcfilter'])).stdout.split('\n').slice(1)) {
    const f = l.trim().split(/\s+/);
    if (f.length < 6 || f[1] !== dev) continue;
    const [g, s, inc, exc] = [mcfilterAddr(f[2]), mcfilterAddr(f[3]), Number(f[4]), Number(f[5])];
    if (inc > 0) include.set(g, [...(include.get(g) ?? []), s]);
    if (exc > 0) exclude.set(g, [...(exclude.get(g) ?? []), s]);
  }
  return { users, include, exclude };
}

export class PimEdgeBed {
  bed!: Bed;
  readonly edges: (ChildProcess | null)[] = [null, null, null];
  readonly browsers: Browser[] = [];
  private readonly log: (m: string) => void;

  constructor(readonly o: { outDir: string; source?: string; keepAwake?: boolean; log?: (m: string) => void }) {
    this.log = o.log ?? (() => {});
  }

  async start(): Promise<void> {
    this.bed = await Bed.start({
      dir: this.o.outDir,
      // The edges are the bed's receiver nodes (their hosts' links 20 Mbit/s, no delay); the
      // players are not started: the edges join instead.
      players: EDGE_ROUTERS.map((at, i) => ({ name: `e${i}`, rateKbps: 20_000, at })),
      startPlayers: false,
      source: 'video',
      video: { ...EDGE_SESSION.video },
      videoSource: this.o.source ?? EDGE_SESSION.source,
      session: { audio: EDGE_SESSION.audio },
      links: 'tbf',
      router: 'frr',
      edges: 2,
      ssm: true,
      keepAwake: this.o.keepAwake,
      log: this.log,
    });
    await this.bed.countSenderMulticast();
  }

  edgeNs(i: number): string {
    return this.bed.b.nodeNs.get(`e${i}`)!;
  }

  svc(i: number): string {
    return `10.91.${i}.1`;
  }

  /** Starts edge `i` on its host, subscribed to the session, and waits for its HTTP. */
  async startEdge(i: number): Promise<void> {
    const ns = this.edgeNs(i);
    await run('ip', ['-n', ns, 'addr', 'add', `${this.svc(i)}/32`, 'dev', 'lo']);
    const server = `http://${this.bed.b.sourceApp.get('src')!.addr}:${HTTP_PORT}`;
    const up = this.bed.b.toward(`e${i}`, 'src');
    const args = [
      '--server', server, '--http', `${this.svc(i)}:8090`, '--webrtc-bind', `${this.svc(i)}:8443`,
      '--interface', up.addr, '--name', `edge${i}`, '--session', 'live',
    ];
    const c = this.bed.net.procs.spawnIn(ns, `edge ${i}`, requireBinary('layercast-edge'), args, { env: { ...process.env, RUST_LOG: process.env.RUST_LOG ?? 'info,str0m=warn' } });
    const out = fs.createWriteStream(path.join(this.o.outDir, `edge-${i}.log`));
    c.stdout?.pipe(out);
    c.stderr?.pipe(out);
    this.edges[i] = c;
    await this.waitFor(`edge ${i} HTTP`, async () => (await this.curl(ns, `http://${this.svc(i)}:8090/healthz`)) === 'ok', 20_000);
  }

  async curl(ns: string, url: string): Promise<string> {
    return (await nsRun(ns, 'curl', ['-s', '--max-time', '5', url], { allowFail: true, timeoutMs: 10_000 })).stdout;
  }

  /** A browser namespace on a clean veth to edge `i`, Chromium in it playing the watch page. */
  async addBrowser(i: number): Promise<Browser> {
    const { chromium } = await import('playwright-core');
    const j = this.browsers.filter((b) => b.edge === i).length;
    const net = this.bed.net;
    const ens = this.edgeNs(i);
    const bns = await net.addNamespace(`b${i}-${j}`);
    const sub = `10.90.${i * 4 + j}`;
    await net.veth(ens, `w${j}`, bns, 'y');
    await run('ip', ['-n', ens, 'addr', 'add', `${sub}.1/24`, 'dev', `w${j}`]);
    await run('ip', ['-n', bns, 'addr', 'add', `${sub}.2/24`, 'dev', 'y']);
    await run('ip', ['-n', bns, 'route', 'add', 'default', 'via', `${sub}.1`]);
    const dir = net.stateDir(`chromium-${i}-${j}`);
    fs.mkdirSync(path.join(dir, 'profile'), { recursive: true });
    const exe = path.join(dir, 'chromium.sh');
    fs.writeFileSync(exe, `#!/bin/sh\nexec ip netns exec ${bns} /usr/bin/chromium "$@"\n`);
    fs.chmodSync(exe, 0o755);
    const ctx = await chromium.launchPersistentContext(path.join(dir, 'profile'), { executablePath: exe, headless: true, args: CHROMIUM_ARGS, viewport: { width: 800, height: 600 } });
    const page = ctx.pages()[0] ?? (await ctx.newPage());
    page.on('pageerror', (e) => this.log(`browser ${i}-${j} page error: ${e.message}`));
    await page.goto(`http://${this.svc(i)}:8090/watch/live`);
    const b = { edge: i, j, ns: bns, ctx, page };
    this.browsers.push(b);
    await this.waitFor(`browser ${i}-${j}'s first picture`, async () => ((await state(b)).stats?.framesDecoded ?? 0) > 0, 30_000, 250);
    return b;
  }

  /** The stats over `windowS` s with the edges and browsers running now. */
  async measure(windowS: number): Promise<PhaseResult> {
    const running = this.edges.map((e, i) => (e ? i : -1)).filter((i) => i >= 0);
    for (const b of this.browsers) await b.page.evaluate(() => (window as unknown as { lc: { markGaps(): void } }).lc.markGaps());
    const prefix = SSM_GROUP.split('.').slice(0, 3).join('.') + '.';
    const tag = `${running.length}e-${Date.now()}`;
    const snd = this.bed.senderIf();
    const caps = await Promise.all([
      startCapture(this.bed.net.procs, snd.ns, snd.ifName, prefix, path.join(this.o.outDir, `sender-${tag}.pcap`)),
      ...running.map((i) => startCapture(this.bed.net.procs, this.edgeNs(i), this.bed.b.toward(`e${i}`, 'src').ifName, prefix, path.join(this.o.outDir, `e${i}-in-${tag}.pcap`))),
    ]);
    const a = await Promise.all(this.browsers.map((b) => state(b)));
    const d0 = await Promise.all(this.browsers.map((b) => decoderStats(b)));
    const m0 = await Promise.all(running.map((i) => this.edgeMetrics(i)));
    const f0 = await this.routerFwd(prefix);
    const v0 = await this.serverMetrics();
    const c0 = cpuTimes();
    const s0 = await this.bed.senderMulticastBytes();
    await sleep(windowS * 1000);
    const c1 = cpuTimes();
    const v1 = await this.serverMetrics();
    const s1 = await this.bed.senderMulticastBytes();
    const f1 = await this.routerFwd(prefix);
    const m1 = await Promise.all(running.map((i) => this.edgeMetrics(i)));
    const z = await Promise.all(this.browsers.map((b) => state(b)));
    const d1 = await Promise.all(this.browsers.map((b) => decoderStats(b)));
    const [atSender, ...atEdges] = await Promise.all(caps.map((c) => c.stop()));
    const up0 = m0.map((m) => m.get('layercast_edge_upstream_bytes') ?? NaN);
    const up1 = m1.map((m) => m.get('layercast_edge_upstream_bytes') ?? NaN);
    const rows = this.browsers.map((b, k) => {
      const [x, y] = [a[k].stats!, z[k].stats!];
      return {
        edge: `e${b.edge}`,
        browser: b.j,
        fps: ((y.framesDecoded - x.framesDecoded) * 1000) / (y.at - x.at),
        freezes: y.freezeCount - x.freezeCount,
        width: y.frameWidth,
        maxGapMs: z[k].gaps.max,
        receivedFps: ((d1[k].framesReceived - d0[k].framesReceived) * 1000) / (d1[k].at - d0[k].at),
        droppedFps: ((d1[k].framesDropped - d0[k].framesDropped) * 1000) / (d1[k].at - d0[k].at),
        decodeMs: (1000 * (d1[k].totalDecodeTime - d0[k].totalDecodeTime)) / Math.max(1, d1[k].framesDecoded - d0[k].framesDecoded),
      };
    });
    const joins: JoinRow[] = [];
    for (const i of running) joins.push(await this.joins(i));
    return {
      edges: running.length,
      browsers: this.browsers.length,
      senderKbps: ((s1 - s0) * 8) / windowS / 1000,
      edgeUpKbps: running.map((_, k) => ((up1[k] - up0[k]) * 8) / windowS / 1000),
      rows,
      joins,
      cpuBusyPct: 100 * (1 - (c1.idle - c0.idle) / (c1.total - c0.total)),
      cpuNicePct: (100 * (c1.nice - c0.nice)) / (c1.total - c0.total),
      encodedFps: ((v1.get('layercast_video_pictures') ?? NaN) - (v0.get('layercast_video_pictures') ?? NaN)) / windowS,
      layerFramesDropped: (v1.get('layercast_video_layer_frames_dropped') ?? NaN) - (v0.get('layercast_video_layer_frames_dropped') ?? NaN),
      path: running.map((i, k) => pathRow(`e${i}`, atSender, atEdges[k])),
      edgeCounters: running.map((i, k) => {
        const d = (n: string) => (m1[k].get(n) ?? 0) - (m0[k].get(n) ?? 0);
        const each = (n: string) => [...m1[k].entries()].filter(([key]) => key.startsWith(`${n}{`)).map(([, v]) => v);
        return {
          edge: `e${i}`,
          framesReleased: d('layercast_edge_upstream_frames_released'),
          framesLost: d('layercast_edge_upstream_frames_lost'),
          fecRecovered: d('layercast_edge_upstream_fec_recovered'),
          dropped: d('layercast_edge_upstream_dropped'),
          switchesUp: d('layercast_edge_layer_switches{direction="up"}'),
          switchesDown: d('layercast_edge_layer_switches{direction="down"}'),
          picturesPerViewerFps: d('layercast_edge_pictures') / windowS / Math.max(1, this.browsers.filter((b) => b.edge === i).length),
          estimatesKbps: each('layercast_edge_viewer_estimate_bps').map((v) => Math.round(v / 1000)),
          spatial: each('layercast_edge_viewer_spatial'),
          temporal: each('layercast_edge_viewer_temporal'),
          viewerLoss: each('layercast_edge_viewer_loss_ratio'),
          viewerRttMs: each('layercast_edge_viewer_rtt_seconds').map((v) => Math.round(v * 1000)),
        };
      }),
      routerFwd: f1.map((r) => {
        const b = f0.find((x) => x.router === r.router);
        return { router: r.router, entries: r.entries, packets: r.packets - (b?.packets ?? 0), wrongIf: r.wrongIf - (b?.wrongIf ?? 0) };
      }),
    };
  }

  /** Edge `i`'s Prometheus samples: each family summed over its labels under its bare name,
   *  and every labelled sample under its full `name{labels}` key. */
  private async edgeMetrics(i: number): Promise<Map<string, number>> {
    return promSamples(await this.curl(this.edgeNs(i), `http://${this.svc(i)}:8090/metrics`));
  }

  private async serverMetrics(): Promise<Map<string, number>> {
    return promSamples(await this.curl(this.bed.senderIf().ns, `http://127.0.0.1:${HTTP_PORT}/metrics`));
  }

  /** The session's (S,G) entries in each router's kernel: count, packets, wrong-interface packets. */
  private async routerFwd(prefix: string): Promise<RouterFwd[]> {
    const rows: RouterFwd[] = [];
    for (const r of this.bed.b.routers) {
      if (!r.frr) continue;
      const text = (await nsRun(r.frr.ns, 'cat', ['/proc/net/ip_mr_cache'])).stdout;
      let [entries, packets, wrongIf] = [0, 0, 0];
      for (const l of text.split('\n').slice(1)) {
        const f = l.trim().split(/\s+/);
        if (f.length < 6 || !procAddr(f[0]).startsWith(prefix)) continue;
        entries++;
        packets += Number(f[3]);
        wrongIf += Number(f[5]);
      }
      rows.push({ router: r.node, entries, packets, wrongIf });
    }
    return rows;
  }

  /** Edge `i`'s memberships and what its router made of them. */
  async joins(i: number): Promise<JoinRow> {
    const name = `e${i}`;
    const up = this.bed.b.toward(name, 'src');
    const m = await memberships(this.edgeNs(i), up.ifName);
    const sender = this.bed.b.sourceApp.get('src')!.addr;
    const prefix = SSM_GROUP.split('.').slice(0, 3).join('.') + '.';
    const groups = [...m.users.keys()].filter((g) => g.startsWith(prefix)).sort();
    const ssmGroups = groups.filter((g) => (m.include.get(g) ?? []).every((s) => s === sender) && (m.include.get(g) ?? []).length > 0 && !m.exclude.has(g));
    const link = this.bed.link(name);
    const at = link.def.from;
    const router = this.bed.b.routers.find((r) => r.node === at)?.frr;
    let routerSG = 0;
    let routerAny = 0;
    if (router) {
      // FRR's JSON (interface → group → sources), not its table, whose columns differ between
      // versions (8.4 has no Address column).
      type Sources = Record<string, Record<string, { sources?: { source: string }[] } | string>>;
      const byIf = (await router.json<Sources>('show ip igmp sources'))[link.ifName] ?? {};
      fs.writeFileSync(path.join(this.o.outDir, `igmp-sources-${at}.json`), JSON.stringify(byIf, null, 1));
      for (const [g, e] of Object.entries(byIf)) {
        if (!g.startsWith(prefix) || typeof e !== 'object') continue;
        const srcs = (e.sources ?? []).map((x) => x.source);
        if (srcs.includes(sender)) routerSG++;
        if (srcs.includes('*') || srcs.includes('0.0.0.0')) routerAny++;
      }
      const diag = await router.vtysh('show ip igmp groups', 'show ip mroute', 'show ip mroute count', 'show ip pim state', 'show ip pim join');
      const kern = (await nsRun(router.ns, 'ip', ['mroute', 'show'], { allowFail: true })).stdout;
      fs.writeFileSync(path.join(this.o.outDir, `router-${at}-${Date.now()}.txt`), diag + '\n--- kernel: ip mroute\n' + kern);
    }
    return { edge: name, router: at, groups, ssmGroups, users: groups.map((g) => m.users.get(g)!), routerSG, routerAny };
  }

  async waitFor(what: string, ok: () => Promise<boolean>, timeoutMs: number, everyMs = 250): Promise<void> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      if (await ok().catch(() => false)) return;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what} (logs: ${this.o.outDir})`);
      await sleep(everyMs);
    }
  }

  async teardown(): Promise<void> {
    for (const b of this.browsers) await b.ctx.close().catch(() => undefined);
    await this.bed?.teardown();
  }
}

/** Prometheus text samples: each family summed over its labels under its bare name, and every
 *  labelled sample under its full `name{labels}` key. */
function promSamples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const l of text.split('\n')) {
    const m = /^([a-z_]+)(\{[^}]*\})?\s+(\S+)/.exec(l);
    if (!m) continue;
    // Counters come as NAME_total (OpenMetrics); keyed here by the name the edge registers.
    const [name, v] = [m[1].replace(/_total$/, ''), Number(m[3])];
    out.set(name, (out.get(name) ?? 0) + v);
    if (m[2]) out.set(name + m[2], v);
  }
  return out;
}

/** The machine's CPU time so far (jiffies): idle (with iowait), niced and total. */
function cpuTimes(): { idle: number; nice: number; total: number } {
  const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  return { idle: f[3] + f[4], nice: f[1], total: f.reduce((s, x) => s + x, 0) };
}

/** The edge's input against the sender's output over the same window. Streams are matched by
 *  group and SSRC; the window's two ends cut the counts by a few packets either way. */
function pathRow(edge: string, sender: RtpStream[], at: RtpStream[]): PathRow {
  const sum = (xs: RtpStream[], f: (x: RtpStream) => number) => xs.reduce((s, x) => s + f(x), 0);
  const max = (xs: RtpStream[], f: (x: RtpStream) => number) => xs.reduce((s, x) => Math.max(s, f(x)), 0);
  const key = (x: RtpStream) => `${x.group}/${x.ssrc}`;
  const sent = new Map(sender.map((x) => [key(x), x]));
  return {
    edge,
    received: sum(at, (x) => x.packets),
    // A stream the edge's capture lacks altogether is lost whole.
    lost: sum(at, (x) => (sent.has(key(x)) ? lostBetween(sent.get(key(x))!, x) : 0)) + sum(sender.filter((x) => !at.some((y) => key(y) === key(x))), (x) => x.packets),
    missing: sum(at, (x) => x.missing),
    missingAtSender: sum(sender, (x) => x.missing),
    reordered: sum(at, (x) => x.reordered),
    maxGapMs: max(at, (x) => x.maxGapMs),
    maxGapAtSenderMs: max(sender, (x) => x.maxGapMs),
  };
}

/** The watch page's peer connection's video inbound-rtp counters (the page's classic script
 *  keeps the connection in its global `pc`). */
const decoderStats = (b: Browser) =>
  b.page.evaluate(`(async () => {
    let v = {};
    (await pc.getStats()).forEach((x) => { if (x.type === 'inbound-rtp' && x.kind === 'video') v = x; });
    return { at: Date.now(), framesReceived: v.framesReceived ?? 0, framesDropped: v.framesDropped ?? 0, framesDecoded: v.framesDecoded ?? 0, totalDecodeTime: v.totalDecodeTime ?? 0 };
  })()`) as Promise<{ at: number; framesReceived: number; framesDropped: number; framesDecoded: number; totalDecodeTime: number }>;

const state = (b: Browser) => b.page.evaluate(() => (window as unknown as { lc: PageState }).lc);

/** Whether a phase passes: every browser at ≥ FPS_FLOOR without a freeze; every edge with its
 *  groups joined once each, source-specifically, and seen as (S,G) by its router; the routed
 *  path lossless and in order to every edge, no pause longer than the sender's own, no packet
 *  on a wrong interface of any router. */
export function judgePhase(p: PhaseResult): { plays: boolean; ssm: boolean; path: boolean } {
  const plays = p.rows.length > 0 && p.rows.every((r) => r.fps >= FPS_FLOOR && r.freezes === 0);
  const ssm = p.joins.length === p.edges && p.joins.every((j) => j.groups.length > 0 && j.ssmGroups.length === j.groups.length && j.users.every((u) => u === 1) && j.routerSG === j.groups.length && j.routerAny === 0);
  const path =
    p.path.length === p.edges &&
    p.path.every((x) => x.received > 0 && x.lost === 0 && x.missing <= x.missingAtSender && x.reordered === 0 && x.maxGapMs <= x.maxGapAtSenderMs + PATH_SILENCE_SLACK_MS) &&
    p.routerFwd.every((r) => r.wrongIf === 0);
  return { plays, ssm, path };
}

const fmt1 = (x: number) => x.toFixed(1);

/** `pim --only edges`: one edge with two browsers, then three edges with four, recorded as
 *  issue25/edges-play, issue25/edges-ssm-join and issue25/edges-sender-rate. */
export async function pimEdges(o: { outDir: string; source?: string; windowS?: number; keepAwake?: boolean; log?: (m: string) => void }): Promise<{ phases: PhaseResult[]; fails: number }> {
  const log = o.log ?? (() => {});
  const windowS = o.windowS ?? 15;
  const dir = path.join(o.outDir, 'edges');
  const pb = new PimEdgeBed({ outDir: dir, source: o.source, keepAwake: o.keepAwake, log });
  const phases: PhaseResult[] = [];
  try {
    await pb.start();
    await pb.startEdge(0);
    await pb.addBrowser(0);
    await pb.addBrowser(0);
    await sleep(6000); // the browsers settle at the top layer
    phases.push(await pb.measure(windowS));
    for (const i of [1, 2]) {
      await pb.startEdge(i);
      await pb.addBrowser(i);
    }
    await sleep(6000);
    phases.push(await pb.measure(windowS));
  } finally {
    await pb.teardown();
  }
  fs.writeFileSync(path.join(dir, 'edges.json'), JSON.stringify(phases, null, 2));
  for (const p of phases) {
    log(`edges: ${p.edges} edge(s), ${p.browsers} browsers: sender ${fmt1(p.senderKbps)} kbit/s, edges' upstream ${p.edgeUpKbps.map(fmt1).join(' / ')} kbit/s, CPU busy ${p.cpuBusyPct.toFixed(0)} % (niced ${p.cpuNicePct.toFixed(0)} %); sender encoded ${fmt1(p.encodedFps)} pictures/s, its encoder dropped ${p.layerFramesDropped} layer frames`);
    for (const r of p.rows) log(`  ${r.edge} browser ${r.browser}: ${fmt1(r.fps)} fps, ${r.width} px, ${r.freezes} freezes, longest gap ${r.maxGapMs.toFixed(0)} ms; arrived ${fmt1(r.receivedFps)} frames/s, dropped ${fmt1(r.droppedFps)}/s, decode ${r.decodeMs.toFixed(1)} ms/frame`);
    for (const x of p.path) log(`  ${x.edge} input: ${x.received} packets, ${x.lost} of the sender's lost on the way, ${x.missing} sequence numbers missing (at the sender ${x.missingAtSender}), ${x.reordered} reordered, longest stream silence ${x.maxGapMs.toFixed(0)} ms (at the sender ${x.maxGapAtSenderMs.toFixed(0)} ms)`);
    for (const c of p.edgeCounters) log(`  ${c.edge} core: frames released ${c.framesReleased}, lost ${c.framesLost}, FEC-recovered packets ${c.fecRecovered}, dropped ${c.dropped}; forwarded ${fmt1(c.picturesPerViewerFps)} pictures/s per browser; layer switches up ${c.switchesUp} down ${c.switchesDown}; viewers' estimates ${c.estimatesKbps.join('/')} kbit/s, spatial ${c.spatial.join('/')}, temporal ${c.temporal.join('/')}, loss ${c.viewerLoss.map((x) => x.toFixed(3)).join('/')}, RTT ${c.viewerRttMs.join('/')} ms`);
    for (const r of p.routerFwd) log(`  router ${r.router}: ${r.entries} (S,G) in the kernel, ${r.packets} packets forwarded, ${r.wrongIf} on a wrong interface`);
    for (const j of p.joins) log(`  ${j.edge} (router ${j.router}): ${j.groups.length} groups, ${j.ssmGroups.length} source-specific, users ${JSON.stringify(j.users)}; router (S,G) ${j.routerSG}, (*,G) ${j.routerAny}`);
  }
  const verdicts = phases.map(judgePhase);
  const plays = phases.length === 2 && verdicts.every((v) => v.plays);
  const ssm = phases.length === 2 && verdicts.every((v) => v.ssm);
  const pathOk = phases.length === 2 && verdicts.every((v) => v.path);
  const all = phases.flatMap((p) => p.rows);
  const last = phases[phases.length - 1];
  recordAcceptance(
    'issue25/edges-play',
    `${all.length} browser windows of ${windowS} s over 1 then 3 edges on 3 FRR routers (2 + 4 browsers): decoded ${fmt1(Math.min(...all.map((r) => r.fps)))}–${fmt1(Math.max(...all.map((r) => r.fps)))} fps (source ${SOURCE_FPS}), ${all.reduce((s, r) => s + r.freezes, 0)} freezes, longest frame gap ${Math.max(...all.map((r) => r.maxGapMs)).toFixed(0)} ms, widths ${[...new Set(all.map((r) => r.width))].join('/')}`,
    plays,
    CMD,
  );
  recordAcceptance(
    'issue25/edges-ssm-join',
    last
      ? last.joins.map((j) => `${j.edge} behind ${j.router}: ${j.ssmGroups.length}/${j.groups.length} groups (S,G) to the sender, ${Math.max(...j.users)} socket per group, router (S,G) ${j.routerSG}, (*,G) ${j.routerAny}`).join('; ')
      : 'no run',
    ssm,
    CMD,
  );
  const paths = phases.flatMap((p) => p.path);
  recordAcceptance(
    'issue25/edges-path',
    paths.length
      ? `${paths.length} edge inputs over 1 then 3 edges (15 s each, tcpdump at the sender and at each edge's upstream interface): ${paths.reduce((s, x) => s + x.received, 0)} packets received, ${paths.reduce((s, x) => s + x.lost, 0)} of the sender's lost on the way, ${paths.reduce((s, x) => s + x.missing, 0)} sequence numbers missing (at the sender ${paths.reduce((s, x) => s + x.missingAtSender, 0)}), ${paths.reduce((s, x) => s + x.reordered, 0)} reordered, longest stream pause ${Math.max(...paths.map((x) => x.maxGapMs)).toFixed(0)} ms (the sender's ${Math.max(...paths.map((x) => x.maxGapAtSenderMs)).toFixed(0)} ms); routers' kernels ${phases.flatMap((p) => p.routerFwd).reduce((s, r) => s + r.wrongIf, 0)} packets on a wrong interface`
      : 'no run',
    pathOk,
    CMD,
  );
  const [r1, r3] = [phases[0]?.senderKbps ?? NaN, phases[1]?.senderKbps ?? NaN];
  const spread = (Math.abs(r3 - r1) / Math.min(r1, r3)) * 100;
  const ratePass = phases.length === 2 && spread <= RATE_SPREAD_PCT;
  recordAcceptance(
    'issue25/edges-sender-rate',
    `sender multicast output with 1 edge (2 browsers) ${fmt1(r1)} kbit/s, with 3 edges (4 browsers) ${fmt1(r3)} kbit/s (differ ${spread.toFixed(2)} %); each edge's upstream ${last ? last.edgeUpKbps.map(fmt1).join(' / ') : '-'} kbit/s of video`,
    ratePass,
    CMD,
  );
  return { phases, fails: Number(!plays) + Number(!ssm) + Number(!pathOk) + Number(!ratePass) };
}
