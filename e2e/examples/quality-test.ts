// A user's own scripted quality test (docs/testbed.md "Scripting your own quality test"):
// build a topology, start a sender with a clip, put players behind chosen bottlenecks, run,
// and assert on each player's video quality.
//
//   node --import tsx e2e/examples/quality-test.ts [--seconds 20] [--source clip|testpattern]
//        [--viewers 350,1000,3000] [--protocol lcc|era|plm] [--out DIR]
//
// Needs root (namespaces), ffmpeg, and release builds of layercast-server, layercast-player and
// layercast-linkemu (LAYERCAST_BIN_DIR or target/release). Exits 1 when an assertion fails.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Net, buildTopology, findBinary, nsRun, parseScenario, sleep } from '../src/index.js';
import { analyseRun, ladderOf, qualityHtml, appendToReport, type PlayerQuality } from '../src/quality.js';
import { repoRoot } from '../src/bins.js';

/** One viewer: a name, its access bottleneck, and what it must get. */
export interface Viewer {
  name: string;
  bottleneckKbps: number;
  /** Mean PSNR floor (dB) over the pictures it decoded, at its own resolution. */
  minPsnrDb: number;
  /** It must show at least this picture width (the spatial layer its bottleneck carries). */
  minWidth?: number;
  /** Random loss on its access link, percent (the emulator's `loss`). */
  lossPct?: number;
  /** Extra delay uniform in [0, jitterMs) on its access link, order kept (the emulator's). */
  jitterMs?: number;
  /** One CUBIC bulk TCP flow (iperf3, kernel CUBIC) from the sender's router to this viewer's
   *  node for the whole run: the access link is a bottleneck shared with a download. */
  cubicDownload?: boolean;
  /** Bounds on what it sees (docs/testbed.md "Video quality"): at most this many freezes per
   *  minute, at least this share of the source's frame rate at the layer it held, glass-to-glass
   *  latency p95 at most this (ms). */
  maxFreezesPerMin?: number;
  /** No freeze longer than this (s). */
  maxLongestFreezeS?: number;
  minFpsRatio?: number;
  maxLatencyP95Ms?: number;
  /** Glass-to-glass latency p50 at most this (ms). */
  maxLatencyP50Ms?: number;
}

export interface QualityTestOptions {
  seconds?: number;
  /** 'clip' (.cache/media/bigbuckbunny.mp4, looped by the server) or 'testpattern'. */
  source?: 'clip' | 'testpattern';
  viewers?: Viewer[];
  outDir?: string;
  log?: (s: string) => void;
  /** The session's `video` object (default: the server's default encode, 720p30). */
  video?: Record<string, unknown>;
  /** The session's `packet_size` (default: the server's default for video). */
  packetSize?: number;
  /** Congestion control of the session and its players (default 'era'). */
  protocol?: 'lcc' | 'era' | 'plm';
  /** Extra flags for every player (e.g. `['--playout-delay-ms', '300']` to compare settings). */
  playerArgs?: string[];
}

export interface QualityTestResult {
  outDir: string;
  source: string;
  players: PlayerQuality[];
  failures: string[];
  /** Set when the run could not measure (e.g. a server without reference output). */
  skipped: string | null;
}

/** A smaller encode than the server's default (1280x720 at 30 fps, docs/server.md "The
 *  default ladder"): 640x360 L3T2 at 15 fps with 1200-byte packets, for runs that must stay
 *  cheap (the e2e suite's quality test). */
/** The natural clip (scripts/setup.sh fetches it). */
export const CLIP = path.join(repoRoot, '.cache', 'media', 'bigbuckbunny.mp4');

export const SMALL_VIDEO = { width: 640, height: 360, fps: 15, spatial: 3, temporal: 2, kbps_scale: 0.6 };

export const DEFAULT_VIEWERS: Viewer[] = [
  // A 600 kbit/s access link carries the lowest spatial layer; 24 dB is docs/codec.md's floor.
  { name: 'slow', bottleneckKbps: 600, minPsnrDb: 24, minWidth: 160 },
  // 4 Mbit/s carries the top spatial layer (of the default ladder and of SMALL_VIDEO).
  { name: 'fast', bottleneckKbps: 4000, minPsnrDb: 24, minWidth: 640 },
];

export async function qualityTest(opts: QualityTestOptions = {}): Promise<QualityTestResult> {
  const log = opts.log ?? ((s: string) => console.error(`[quality-test] ${s}`));
  const seconds = opts.seconds ?? 20;
  const viewers = opts.viewers ?? DEFAULT_VIEWERS;
  const protocol = opts.protocol ?? 'era';
  const outDir = opts.outDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'lc-quality-run-'));
  const source = (opts.source ?? 'clip') === 'clip' && fs.existsSync(CLIP) ? `file://${CLIP}` : 'testpattern';
  const server = findBinary('layercast-server');
  const player = findBinary('layercast-player');
  if (!server || !player) return { outDir, source, players: [], failures: [], skipped: 'layercast-server/layercast-player not built' };

  // 1. The topology, in the scenario format: src -> router -> one access link per viewer.
  //    The layered flow tells the testbed where the sender is and which nodes route multicast.
  const yaml = `
name: quality-test
duration_s: ${seconds}
topology:
  nodes: [src, r0, ${viewers.map((v) => v.name).join(', ')}]
  multicast: {fast_leave: true}
  links:
    - {from: src, to: r0, rate_kbps: 100000, delay_ms: 2}
${viewers.map((v) => `    - {from: r0, to: ${v.name}, rate_kbps: ${v.bottleneckKbps}, delay_ms: 10, loss: ${(v.lossPct ?? 0) / 100}, jitter_ms: ${v.jitterMs ?? 0}, queue: {kind: droptail, limit_ms: 200}}`).join('\n')}
flows:
  - name: video
    type: layered
    protocol: ${protocol}
    from: src
    layers: {count: 9, rate_kbps: 300}
    receivers: [${viewers.map((v) => `{name: ${v.name}, at: ${v.name}}`).join(', ')}]
`;
  const sc = parseScenario(yaml);
  fs.mkdirSync(outDir, { recursive: true });
  const serverDir = path.join(outDir, 'server');
  fs.mkdirSync(serverDir, { recursive: true });
  const net = new Net(); // tears down on Ctrl-C too
  let skipped: string | null = null;
  try {
    const b = await buildTopology(net, sc, { dir: outDir });
    const app = b.sourceApp.get('src')!;

    // 2. The sender: the clip (or test pattern) into the VP9 SVC encoder, every source frame
    //    stamped with a QR code of its number and capture time, and kept as reference.y4m.
    const session = {
      name: 'video',
      protocol,
      source,
      video: { ...(opts.video ?? {}), qroverlay: true, reference_dir: serverDir },
      ...(opts.packetSize ? { packet_size: opts.packetSize } : {}),
      group: '239.255.100.0',
      port: 5004,
    };
    const srv = net.procs.spawnIn(app.ns, 'server', server, ['--dev', '--http_addr', `${app.addr}:8080`, '--announce', '239.255.76.1:5000', '--interface', app.addr, '--ttl', '16', '--session', JSON.stringify(session)]);
    const srvLog = fs.createWriteStream(path.join(serverDir, 'server.log'));
    // Both outputs into one file, ended once the process has closed both (a pipe would end
    // the file when the first of them ends, and the other's last write would throw).
    srv.stdout?.pipe(srvLog, { end: false });
    srv.stderr?.pipe(srvLog, { end: false });
    srv.once('close', () => srvLog.end());
    await sleep(2000);
    if (srv.exitCode !== null) {
      const text = fs.readFileSync(path.join(serverDir, 'server.log'), 'utf8');
      skipped = `server refused the session (${text.trim().split('\n').pop()})`;
      return { outDir, source, players: [], failures: [], skipped };
    }

    // 3. One headless player per viewer, writing decoded pictures and frames.csv.
    const done: Promise<void>[] = [];
    for (const v of viewers) {
      const dir = path.join(outDir, `player-${v.name}`);
      fs.mkdirSync(dir, { recursive: true });
      const ifc = b.toward(v.name, 'src');
      const c = net.procs.spawnIn(b.nodeNs.get(v.name)!, `player ${v.name}`, player, [
        '--announce', '239.255.76.1:5000', '--controller', protocol, '--interface', ifc.addr,
        '--headless', '--out', dir, '--duration', String(seconds), '--viewer-id', v.name,
        ...(opts.playerArgs ?? []),
      ]);
      const w = fs.createWriteStream(path.join(dir, 'stderr.log'));
      c.stdout?.pipe(w, { end: false });
      c.stderr?.pipe(w, { end: false });
      c.once('close', () => w.end());
      done.push(new Promise((resolve) => c.once('exit', () => resolve())));
    }
    // 3b. A CUBIC download through each access link that asks for one, for the whole run.
    let port = 5201;
    for (const v of viewers.filter((x) => x.cubicDownload)) {
      const p = port++;
      const dst = b.toward(v.name, 'r0').addr;
      // One log per process: a stream two pipes share is ended by the first that ends.
      const s = net.procs.spawnIn(b.nodeNs.get(v.name)!, `iperf3-s ${v.name}`, 'iperf3', ['-s', '-1', '-B', dst, '-p', String(p)]);
      s.stdout?.pipe(fs.createWriteStream(path.join(outDir, `iperf3-server-${v.name}.log`)));
      await sleep(300);
      const c = net.procs.spawnIn(b.nodeNs.get('r0')!, `iperf3-c ${v.name}`, 'iperf3', ['-c', dst, '-p', String(p), '-t', String(seconds), '-C', 'cubic', '-i', '10']);
      c.stdout?.pipe(fs.createWriteStream(path.join(outDir, `iperf3-client-${v.name}.log`)));
    }
    log(`running ${seconds} s, ${protocol}: ${source} to ${viewers.map((v) => `${v.name} behind ${v.bottleneckKbps} kbit/s${v.lossPct ? ` ${v.lossPct} % loss` : ''}${v.jitterMs ? ` ${v.jitterMs} ms jitter` : ''}${v.cubicDownload ? ' + CUBIC' : ''}`).join(', ')}`);
    await Promise.race([Promise.all(done), sleep((seconds + 15) * 1000)]);
    // The sender's counters at the end (frames left out, repair, retransmissions), for
    // looking into what a run's viewers saw; a failed scrape costs nothing but the file.
    const m = await nsRun(app.ns, 'curl', ['-sf', '-m', '3', `http://${app.addr}:8080/metrics`], { timeoutMs: 6000, allowFail: true });
    if (m.code === 0) fs.writeFileSync(path.join(serverDir, 'metrics.txt'), m.stdout);
  } finally {
    await net.teardown();
  }

  // 4. Quality per player against the reference, aligned by the stamped frame numbers.
  const ref = path.join(serverDir, 'reference.y4m');
  if (!fs.existsSync(ref)) return { outDir, source, players: [], failures: [], skipped: 'the server wrote no reference.y4m (a build without reference output)' };
  const players = await analyseRun(outDir, ref, ladderOf(opts.video));
  appendToReport(path.join(outDir, 'report.html'), qualityHtml(players));
  fs.writeFileSync(path.join(outDir, 'quality.json'), JSON.stringify(players.map(({ series: _s, ...q }) => q), null, 1));

  // 5. The assertions.
  const failures: string[] = [];
  for (const v of viewers) {
    const q = players.find((p) => p.player === v.name);
    if (!q) {
      failures.push(`${v.name}: no frames.csv`);
      continue;
    }
    log(`${v.name}: ${q.pictures} pictures, ${q.compared} compared, PSNR ${q.psnrMeanDb.toFixed(2)} dB, SSIM ${q.ssimMean.toFixed(4)}, ` +
      `${q.freezes} freezes (${q.freezesPerMin.toFixed(1)}/min, longest ${q.longestFreezeS.toFixed(2)} s), ${q.backwards} shown out of order, ` +
      `${q.meanFps.toFixed(1)} fps shown${q.source ? ` = ${q.source.fpsRatio.toFixed(3)} of the source's ${q.source.heldLayerFps.toFixed(1)} at the held layer` : ''}, ` +
      `${q.harmonicFps.toFixed(1)} fps (harmonic), latency p50/p95 ${q.latencyP50Ms?.toFixed(0) ?? '—'}/${q.latencyP95Ms?.toFixed(0) ?? '—'} ms (${q.timeBase}); ` +
      q.byLayers.map((x) => `${x.layers} layers ${x.width}x${x.height}: ${x.psnrMeanDb.toFixed(1)} dB`).join(', '));
    if (q.compared === 0) failures.push(`${v.name}: no picture could be compared (no readable QR code)`);
    else if (!(q.psnrMeanDb >= v.minPsnrDb)) failures.push(`${v.name}: PSNR ${q.psnrMeanDb.toFixed(2)} dB < ${v.minPsnrDb}`);
    const widest = Math.max(0, ...q.byLayers.map((x) => x.width));
    if (v.minWidth && widest < v.minWidth) failures.push(`${v.name}: widest picture ${widest} < ${v.minWidth}`);
    if (v.maxFreezesPerMin !== undefined && !(q.freezesPerMin <= v.maxFreezesPerMin)) failures.push(`${v.name}: ${q.freezesPerMin.toFixed(1)} freezes per minute > ${v.maxFreezesPerMin}`);
    if (q.backwards > 0) failures.push(`${v.name}: ${q.backwards} pictures shown after a later one (time went back on screen)`);
    if (v.maxLongestFreezeS !== undefined && !(q.longestFreezeS <= v.maxLongestFreezeS)) failures.push(`${v.name}: a freeze of ${q.longestFreezeS.toFixed(2)} s > ${v.maxLongestFreezeS}`);
    if (v.minFpsRatio !== undefined && !(q.source && q.source.fpsRatio >= v.minFpsRatio))
      failures.push(`${v.name}: shown frame rate ${q.source ? `${q.source.fpsRatio.toFixed(3)} of the source's at the held layer` : 'not measurable (too few stamps read)'} < ${v.minFpsRatio}`);
    if (v.maxLatencyP95Ms !== undefined && !(q.latencyP95Ms !== null && q.latencyP95Ms <= v.maxLatencyP95Ms)) failures.push(`${v.name}: glass-to-glass p95 ${q.latencyP95Ms?.toFixed(0) ?? '—'} ms > ${v.maxLatencyP95Ms}`);
    if (v.maxLatencyP50Ms !== undefined && !(q.latencyP50Ms !== null && q.latencyP50Ms <= v.maxLatencyP50Ms)) failures.push(`${v.name}: glass-to-glass p50 ${q.latencyP50Ms?.toFixed(0) ?? '—'} ms > ${v.maxLatencyP50Ms}`);
  }
  return { outDir, source, players, failures, skipped };
}

// Run as a script.
if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const arg = (n: string) => {
    const i = process.argv.indexOf(n);
    return i >= 0 ? process.argv[i + 1] : undefined;
  };
  // --viewers 350,1000,3000: one viewer per bottleneck (kbit/s), named v<kbps>, no PSNR floor.
  const viewers = arg('--viewers')
    ?.split(',')
    .map((k) => ({ name: `v${k}`, bottleneckKbps: Number(k), minPsnrDb: 0 }));
  const protocol = (arg('--protocol') ?? 'era') as 'lcc' | 'era' | 'plm';
  qualityTest({ seconds: Number(arg('--seconds') ?? 20), source: (arg('--source') as 'clip' | 'testpattern') ?? 'clip', outDir: arg('--out'), viewers, protocol }).then(
    (r) => {
      if (r.skipped) console.log(`not measured: ${r.skipped}`);
      for (const f of r.failures) console.log(`FAIL ${f}`);
      console.log(`outputs in ${r.outDir}`);
      process.exit(r.skipped || r.failures.length ? 1 : 0);
    },
    (e: Error) => {
      console.error(e.message);
      process.exit(1);
    },
  );
}
