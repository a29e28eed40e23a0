// The WebRTC edge on the testbed: a real layercast-server sending a VP9 SVC session by
// multicast, a real layercast-edge subscribed to it, and headless Chromium browsers playing
// the edge's watch page (WHEP), each behind its own emulated path (layercast-linkemu: rate,
// queue, loss). Namespaces are created here and always deleted.
//
//   ns s (server) s0 10.80.0.1/24 ── e0 10.80.0.2/24 ns e (edge; service address 10.82.0.1/32)
//   ns e  x<i> 10.81.<i>.1/24 ── [ns l<i>: linkemu wa <-> wb] ── y 10.81.<i>.2/24 ns b<i> (Chromium)
//
// The edge binds its one WebRTC socket and its HTTP to the service address, which every
// browser reaches through its own path; the path's edge-to-browser direction is the emulated
// bottleneck.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { repoRoot, requireBinary } from './bins.js';
import { LinkEmu, type LinkSettings } from './linkemu.js';
import { Net } from './netns.js';
import { nsRun, run } from './sh.js';

export const SERVER_IP = '10.80.0.1';
export const EDGE_UP_IP = '10.80.0.2';
export const EDGE_IP = '10.82.0.1';
export const EDGE_HTTP = `http://${EDGE_IP}:8090`;
export const SERVER_HTTP = `http://${SERVER_IP}:8080`;

/** The session the bed serves: 640x360 at 30 fps, L3T3, the default 720p30 ladder's shape
 *  (codec::ladder) scaled to 1.58 Mbit/s of media at the top, the server's video defaults
 *  otherwise (600-byte packets, FEC repair in the padding slots), keys every 2 s, and an Opus
 *  track (64 kbit/s stereo, its own group, joined with layer 0). 640x360
 *  rather than 720p keeps the server's encoder and two Chromium decoders within a shared
 *  2-core machine; the scale keeps the top layer where a 4 Mbit/s browser path holds it. */
export const EDGE_SESSION = {
  id: 'main',
  name: 'main',
  protocol: 'era',
  source: 'gst-testpattern',
  video: { width: 640, height: 360, fps: 30, spatial: 3, temporal: 3, kbps_scale: 0.55 },
  audio: { kbps: 64, channels: 2 },
  group: '239.80.0.0',
  port: 5004,
};

/** A source that fills the ladder's rates, for the suite's rate-dependent checks: the
 *  moving test pattern above compresses to about a quarter of the announced rates (the whole
 *  L3T3 stream fits in 450 kbit/s), so a 600 kbit/s or 1 Mbit/s path would carry every layer
 *  and there would be nothing for the edge to choose. Temporal noise over ffmpeg's testsrc2
 *  makes every picture cost what the encoder's rate control allows, as natural video with
 *  motion does. 640x360 at 30 fps with a 440 Hz stereo tone, 200 s (longer than the suite,
 *  so the server's end-of-file loop never falls inside a measurement), MJPEG in Matroska (fast
 *  to make and to decode), made once into .cache/media (16 s, 140 MB). */
export async function noisyClip(): Promise<string> {
  const f = path.join(repoRoot, '.cache', 'media', 'edge-noise-640x360-200s.mkv');
  if (fs.existsSync(f) && fs.statSync(f).size > 0) return f;
  fs.mkdirSync(path.dirname(f), { recursive: true });
  const tmp = `${f}.${process.pid}.tmp.mkv`;
  await run('ffmpeg', [
    '-v', 'error', '-y',
    '-f', 'lavfi', '-i', 'testsrc2=size=640x360:rate=30,noise=alls=12:allf=t',
    '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000',
    '-ac', '2', '-t', '200', '-c:v', 'mjpeg', '-q:v', '8', '-c:a', 'libopus', '-b:a', '64k', tmp,
  ], { timeoutMs: 300_000 });
  fs.renameSync(tmp, f);
  return f;
}

export interface PathSpec {
  rateBps: number;
  delayMs?: number;
  loss?: number;
}

export interface EdgeBedOptions {
  outDir: string;
  paths: PathSpec[];
  session?: object;
  edgeArgs?: string[];
  serverArgs?: string[];
}

/** What the watch page exposes as `window.lc`. */
export interface PageState {
  state: string;
  error: string | null;
  resource: string | null;
  stats: null | {
    at: number;
    framesDecoded: number;
    framesPerSecond: number;
    frameWidth: number;
    frameHeight: number;
    packetsReceived: number;
    packetsLost: number;
    nackCount: number;
    pliCount: number;
    freezeCount: number;
    totalFreezesDuration: number;
    keyFramesDecoded: number;
    audioPacketsReceived: number;
    rateBps?: number;
    lossRatio?: number;
    framesReceived?: number;
    framesDropped?: number;
    retransmittedPacketsReceived?: number;
    jitterBufferDelay?: number;
    jitterBufferTargetDelay?: number;
    jitterBufferMinimumDelay?: number;
    jitterBufferEmittedCount?: number;
  };
  edge: null | {
    spatial: number;
    temporal: number;
    width: number;
    estimate_bps: number | null;
    rate_bps: number;
    nacks: number;
    rtx_packets: number;
    plis: number;
    latency_p50_ms: number | null;
    /** Encoder fillers the edge left out at the top of this browser's pictures. */
    fillers_left_out?: number;
  };
  gaps: { max: number; over500: number; frames: number };
  gapLog: { at: number; ms: number; rtpBefore: number | null; rtp: number | null }[];
}

/** What the jump-back detector ([`watchJumpsBack`]) saw in a page. */
export interface JumpsBack {
  /** Pictures presented and hashed. */
  frames: number;
  /** Pictures equal to one presented before the previous picture (within the last 60). */
  jumps: number;
  /** The first few: how many pictures back each went. */
  log: number[];
}

/** Installs, in a watch page, a detector of pictures shown again out of order: every presented
 *  picture (requestVideoFrameCallback) is drawn at 160x90 and hashed, and one equal to a
 *  picture before the previous one, within the last 60, is a jump back: what an encoder's
 *  filler decoded at the top of a picture shows (its layer's older reference picture, docs/edge.md
 *  "Fillers"). Only meaningful on a source whose every picture differs (the suite's noisy clip;
 *  the QR-stamped test pattern). Read it with [`jumpsBack`]. */
export async function watchJumpsBack(page: { evaluate<R>(f: string): Promise<R> }): Promise<void> {
  await page.evaluate(JUMPS_BACK_SCRIPT);
}

/** The page side of [`watchJumpsBack`], as source text: a function passed to `page.evaluate`
 *  would carry the TypeScript loader's name helpers (`__name`), which the page does not have. */
const JUMPS_BACK_SCRIPT = `(() => {
  if (window.lcJumps) return;
  const video = document.querySelector('video');
  if (!video || !('requestVideoFrameCallback' in video)) throw new Error('no video element with requestVideoFrameCallback');
  const canvas = document.createElement('canvas');
  canvas.width = 160;
  canvas.height = 90;
  const g = canvas.getContext('2d', { willReadFrequently: true });
  const state = { frames: 0, jumps: 0, log: [] };
  window.lcJumps = state;
  const recent = [];
  function onFrame() {
    g.drawImage(video, 0, 0, 160, 90);
    const d = g.getImageData(0, 0, 160, 90).data;
    let h = 2166136261;
    for (let i = 0; i < d.length; i += 4) h = Math.imul(h ^ (d[i] | (d[i + 1] << 8) | (d[i + 2] << 16)), 16777619);
    state.frames++;
    const at = recent.lastIndexOf(h);
    if (at >= 0 && at < recent.length - 1) {
      state.jumps++;
      if (state.log.length < 20) state.log.push(recent.length - at);
    }
    recent.push(h);
    if (recent.length > 60) recent.shift();
    video.requestVideoFrameCallback(onFrame);
  }
  video.requestVideoFrameCallback(onFrame);
})()`;

/** What [`watchJumpsBack`] has seen so far. */
export async function jumpsBack(page: { evaluate<R>(f: string): Promise<R> }): Promise<JumpsBack> {
  return page.evaluate('window.lcJumps ? { frames: window.lcJumps.frames, jumps: window.lcJumps.jumps, log: [...window.lcJumps.log] } : { frames: 0, jumps: 0, log: [] }');
}

const linkSettings = (p: PathSpec): LinkSettings => ({
  rate_bps: p.rateBps,
  delay_ms: p.delayMs ?? 10,
  // 100 ms of queue at the bottleneck, like a tbf with latency 100ms.
  queue: { kind: 'droptail', limit_bytes: Math.max(8 * 1514, Math.round(p.rateBps / 8 / 10)) },
  overhead_bytes: 14,
  ...(p.loss ? { loss: p.loss } : {}),
});

export class EdgeBed {
  readonly net = new Net();
  readonly links: LinkEmu[] = [];
  readonly browserNs: string[] = [];
  server: ChildProcess | null = null;
  edge: ChildProcess | null = null;
  private tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'lc-edge-'));

  constructor(readonly opts: EdgeBedOptions) {
    fs.mkdirSync(opts.outDir, { recursive: true });
    this.net.dirs.push(this.tmp);
  }

  async start(): Promise<void> {
    const net = this.net;
    const s = await net.addNamespace('s');
    const e = await net.addNamespace('e');
    await net.veth(s, 's0', e, 'e0');
    await run('ip', ['-n', s, 'addr', 'add', `${SERVER_IP}/24`, 'dev', 's0']);
    await run('ip', ['-n', e, 'addr', 'add', `${EDGE_UP_IP}/24`, 'dev', 'e0']);
    await run('ip', ['-n', s, 'route', 'add', '239.0.0.0/8', 'dev', 's0']);
    await run('ip', ['-n', e, 'route', 'add', '239.0.0.0/8', 'dev', 'e0']);
    await run('ip', ['-n', e, 'addr', 'add', `${EDGE_IP}/32`, 'dev', 'lo']);
    for (const [i, p] of this.opts.paths.entries()) {
      const l = await net.addNamespace(`l${i}`);
      const b = await net.addNamespace(`b${i}`);
      await net.veth(e, `x${i}`, l, 'wa');
      await net.veth(l, 'wb', b, 'y');
      await run('ip', ['-n', e, 'addr', 'add', `10.81.${i}.1/24`, 'dev', `x${i}`]);
      await run('ip', ['-n', b, 'addr', 'add', `10.81.${i}.2/24`, 'dev', 'y']);
      await run('ip', ['-n', b, 'route', 'add', 'default', 'via', `10.81.${i}.1`]);
      const link = await LinkEmu.start(net.procs, l, 'wa', 'wb', linkSettings(p), { rate_bps: 0, delay_ms: p.delayMs ?? 10 }, { seed: 17 + i, rtPrio: 10 });
      this.links.push(link);
      this.browserNs.push(b);
    }
    const serverArgs = [
      '--dev', '--http-addr', `${SERVER_IP}:8080`, '--interface', SERVER_IP, '--loop', 'false', '--ttl', '4',
      '--announce', '', '--session', JSON.stringify(this.opts.session ?? EDGE_SESSION),
      ...(this.opts.serverArgs ?? []),
    ];
    this.server = this.spawn(s, 'server', requireBinary('layercast-server'), serverArgs);
    await this.waitFor('server HTTP', async () => (await this.curl(s, `${SERVER_HTTP}/api/sessions`)).startsWith('['), 20_000);
    const edgeArgs = [
      '--server', SERVER_HTTP, '--http', `${EDGE_IP}:8090`, '--webrtc-bind', `${EDGE_IP}:8443`,
      '--interface', EDGE_UP_IP, '--name', 'edge1', '--session', 'main',
      ...(this.opts.edgeArgs ?? []),
    ];
    this.edge = this.spawn(e, 'edge', requireBinary('layercast-edge'), edgeArgs);
    await this.waitFor('edge HTTP', async () => (await this.curl(e, `${EDGE_HTTP}/healthz`)) === 'ok', 20_000);
  }

  private spawn(ns: string, name: string, bin: string, args: string[]): ChildProcess {
    const c = this.net.procs.spawnIn(ns, name, bin, args, { env: { ...process.env, RUST_LOG: process.env.RUST_LOG ?? 'info,str0m=warn' } });
    const out = fs.createWriteStream(path.join(this.opts.outDir, `${name}.log`));
    c.stdout?.pipe(out);
    c.stderr?.pipe(out);
    return c;
  }

  /** GET (or another method) from inside a namespace; the body, '' on failure. */
  async curl(ns: string, url: string, extra: string[] = []): Promise<string> {
    const r = await nsRun(ns, 'curl', ['-s', '--max-time', '5', ...extra, url], { allowFail: true, timeoutMs: 10_000 });
    return r.stdout;
  }

  /** An HTTP request from the browser namespace 0: status, headers and body. */
  async http(method: string, url: string, opts: { body?: string; type?: string; token?: string } = {}): Promise<{ status: number; headers: string; body: string }> {
    const f = path.join(this.tmp, `body-${Date.now()}-${Math.random()}`);
    const args = ['-s', '-X', method, '-D', '-', '--max-time', '5'];
    if (opts.body !== undefined) {
      fs.writeFileSync(f, opts.body);
      args.push('--data-binary', `@${f}`);
    }
    if (opts.type) args.push('-H', `Content-Type: ${opts.type}`);
    if (opts.token) args.push('-H', `Authorization: Bearer ${opts.token}`);
    const r = await nsRun(this.browserNs[0] ?? this.net.ns('e'), 'curl', [...args, url], { allowFail: true, timeoutMs: 10_000 });
    const [head, ...rest] = r.stdout.split('\r\n\r\n');
    const status = Number(/HTTP\/[\d.]+ (\d+)/.exec(head ?? '')?.[1] ?? 0);
    return { status, headers: head ?? '', body: rest.join('\r\n\r\n') };
  }

  /** A GET from the server's namespace: the raw body ('' on failure, so a caller can show it). */
  async serverText(p: string): Promise<string> {
    return this.curl(this.net.ns('s'), `${SERVER_HTTP}${p}`);
  }

  async edgeText(p: string, token?: string): Promise<string> {
    return this.curl(this.net.ns('e'), `${EDGE_HTTP}${p}`, token ? ['-H', `Authorization: Bearer ${token}`] : []);
  }

  async setPath(i: number, p: PathSpec): Promise<void> {
    await this.links[i]!.set('ab', linkSettings(p));
  }

  /** An executable that runs Chromium inside browser namespace `i` (Playwright's executable). */
  chromiumIn(i: number): string {
    const f = path.join(this.tmp, `chromium-${i}.sh`);
    fs.writeFileSync(f, `#!/bin/sh\nexec ip netns exec ${this.browserNs[i]} /usr/bin/chromium "$@"\n`);
    fs.chmodSync(f, 0o755);
    return f;
  }

  /** A fresh profile directory for a browser. */
  profileDir(i: number): string {
    const d = path.join(this.tmp, `profile-${i}`);
    fs.mkdirSync(d, { recursive: true });
    return d;
  }

  async waitFor(what: string, ok: () => Promise<boolean>, timeoutMs: number, everyMs = 250): Promise<void> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      if (await ok().catch(() => false)) return;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what} (logs: ${this.opts.outDir})`);
      await new Promise((r) => setTimeout(r, everyMs));
    }
  }

  async teardown(): Promise<void> {
    await this.net.teardown();
  }
}

/** Chromium's flags for the tests (as the dashboard's browser tests, plus autoplay). */
export const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--autoplay-policy=no-user-gesture-required',
];
