// A user's own scripted quality test (docs/testbed.md "Scripting your own quality test"):
// build a topology, start a sender with a clip, put players behind chosen bottlenecks, run,
// and assert on each player's video quality.
//
//   node --import tsx e2e/examples/quality-test.ts [--seconds 20] [--source clip|testpattern]
//        [--viewers 350,1000,3000] [--controller lcc|era|...] [--out DIR]
//
// Needs root (namespaces), ffmpeg, and release builds of layercast-server, layercast-player and
// layercast-linkemu (LAYERCAST_BIN_DIR or target/release). Exits 1 when an assertion fails.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Net, buildTopology, findBinary, parseScenario, sleep } from '../src/index.js';
import { analyseRun, qualityHtml, appendToReport, type PlayerQuality } from '../src/quality.js';
import { repoRoot } from '../src/bins.js';

/** One viewer: a name, its access bottleneck, and what it must get. */
export interface Viewer {
  name: string;
  bottleneckKbps: number;
  /** Mean PSNR floor (dB) over the pictures it decoded, at its own resolution. */
  minPsnrDb: number;
  /** It must show at least this picture width (the spatial layer its bottleneck carries). */
  minWidth?: number;
}

export interface QualityTestOptions {
  seconds?: number;
  /** 'clip' (.cache/media/bigbuckbunny.mp4, looped by the server) or 'testpattern'. */
  source?: 'clip' | 'testpattern';
  viewers?: Viewer[];
  /** The players' controller (default `lcc`, the product default; `era` for a comparison). */
  controller?: string;
  outDir?: string;
  log?: (s: string) => void;
  /** The session's `video` object (default: the server's default encode, 720p30). */
  video?: Record<string, unknown>;
  /** The session's `packet_size` (default: the server's default for video). */
  packetSize?: number;
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
 *  default ladder"): 640x360 L3T3 at 15 fps with 1200-byte packets, for runs that must stay
 *  cheap (the e2e suite's quality test). */
export const SMALL_VIDEO = { width: 640, height: 360, fps: 15, spatial: 3, temporal: 3, kbps_scale: 0.6 };

export const DEFAULT_VIEWERS: Viewer[] = [
  // A 600 kbit/s access link carries the lowest spatial layer; 24 dB is docs/codec.md's floor.
  { name: 'slow', bottleneckKbps: 600, minPsnrDb: 24, minWidth: 160 },
  // 4 Mbit/s carries the top spatial layer (of the default ladder and of SMALL_VIDEO).
  { name: 'fast', bottleneckKbps: 4000, minPsnrDb: 24, minWidth: 640 },
];

export async function qualityTest(opts: QualityTestOptions = {}): Promise<QualityTestResult> {
  const log = opts.log ?? ((s: string) => console.error(`[quality-test] ${s}`));
  const seconds = opts.seconds ?? 20;
  const controller = opts.controller ?? 'lcc';
  const viewers = opts.viewers ?? DEFAULT_VIEWERS;
  const outDir = opts.outDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'lc-quality-run-'));
  const clip = path.join(repoRoot, '.cache', 'media', 'bigbuckbunny.mp4');
  const source = (opts.source ?? 'clip') === 'clip' && fs.existsSync(clip) ? `file://${clip}` : 'testpattern';
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
${viewers.map((v) => `    - {from: r0, to: ${v.name}, rate_kbps: ${v.bottleneckKbps}, delay_ms: 10, queue: {kind: droptail, limit_ms: 200}}`).join('\n')}
flows:
  - name: video
    type: layered
    protocol: ${controller}
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
      protocol: controller.split('-')[0],
      source,
      video: { ...(opts.video ?? {}), qroverlay: true, reference_dir: serverDir },
      ...(opts.packetSize ? { packet_size: opts.packetSize } : {}),
      group: '239.255.100.0',
      port: 5004,
    };
    const srv = net.procs.spawnIn(app.ns, 'server', server, ['--http_addr', `${app.addr}:8080`, '--announce', '239.255.76.1:5000', '--interface', app.addr, '--ttl', '16', '--session', JSON.stringify(session)]);
    const srvLog = fs.createWriteStream(path.join(serverDir, 'server.log'));
    srv.stdout?.pipe(srvLog);
    srv.stderr?.pipe(srvLog);
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
        '--announce', '239.255.76.1:5000', '--controller', controller, '--interface', ifc.addr,
        '--headless', '--out', dir, '--duration', String(seconds), '--viewer-id', v.name,
      ]);
      const w = fs.createWriteStream(path.join(dir, 'stderr.log'));
      c.stdout?.pipe(w);
      c.stderr?.pipe(w);
      done.push(new Promise((resolve) => c.once('exit', () => resolve())));
    }
    log(`running ${seconds} s: ${source} to ${viewers.map((v) => `${v.name} behind ${v.bottleneckKbps} kbit/s`).join(', ')}`);
    await Promise.race([Promise.all(done), sleep((seconds + 15) * 1000)]);
  } finally {
    await net.teardown();
  }

  // 4. Quality per player against the reference, aligned by the stamped frame numbers.
  const ref = path.join(serverDir, 'reference.y4m');
  if (!fs.existsSync(ref)) return { outDir, source, players: [], failures: [], skipped: 'the server wrote no reference.y4m (a build without reference output)' };
  const players = await analyseRun(outDir, ref);
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
      `${q.freezes} freezes, ${q.harmonicFps.toFixed(1)} fps (harmonic), latency p50 ${q.latencyP50Ms?.toFixed(0) ?? '—'} ms; ` +
      q.byLayers.map((x) => `${x.layers} layers ${x.width}x${x.height}: ${x.psnrMeanDb.toFixed(1)} dB`).join(', '));
    if (q.compared === 0) failures.push(`${v.name}: no picture could be compared (no readable QR code)`);
    else if (!(q.psnrMeanDb >= v.minPsnrDb)) failures.push(`${v.name}: PSNR ${q.psnrMeanDb.toFixed(2)} dB < ${v.minPsnrDb}`);
    const widest = Math.max(0, ...q.byLayers.map((x) => x.width));
    if (v.minWidth && widest < v.minWidth) failures.push(`${v.name}: widest picture ${widest} < ${v.minWidth}`);
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
  qualityTest({ seconds: Number(arg('--seconds') ?? 20), source: (arg('--source') as 'clip' | 'testpattern') ?? 'clip', controller: arg('--controller'), outDir: arg('--out'), viewers }).then(
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
