// Video quality of a player's output against the sender's reference (docs/testbed.md "Video
// quality"). Inputs are the fixed player/server output contract (docs/player.md):
//   <ref>/reference.y4m   source frames before encode at the top resolution; frame n of the
//                         file is the picture stamped with frame number n
//   <player>/frames.csv   index,frame_number,capture_unix_ns,arrival_unix_ns,decoded_unix_ns,
//                         layers_held,width,height,file,file_index (display order)
//   <player>/video-<seq>-<W>x<H>.y4m   decoded pictures, `file_index` = picture index in `file`
//   <player>/frames.jsonl  one line per frames.csv row, same order: `t` = display time (unix s)
//   <player>/player.jsonl  the exit line's packet and FEC totals
// Per player: PSNR and SSIM (ffmpeg's psnr and ssim filters) of every picture whose stamped
// frame number was read, against reference frame `frame_number` scaled to the picture's size;
// freezes, frame rate and glass-to-glass latency at display time (decode time when the player
// wrote no frames.jsonl); the source's frame rate from the stamps.
//
// The y4m files are read here (header + fixed-size frames) so that the pairs handed to ffmpeg
// are already aligned: for each segment we write the kept decoded pictures and the matching
// reference frames as two small y4m files and run one ffmpeg over them. ffmpeg's own frame
// selection (select=eq(n,…)) would need one expression term per frame.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { esc, svgChart, type Series } from './report.js';

export const FRAMES_CSV_HEADER = 'index,frame_number,capture_unix_ns,arrival_unix_ns,decoded_unix_ns,layers_held,width,height,file,file_index';

/** PSNR of identical pictures is infinite; ffmpeg prints `inf`. We cap it so means stay finite. */
export const PSNR_CAP_DB = 100;

export class QualityError extends Error {}

export interface FrameRow {
  index: number;
  frameNumber: number | null;
  /** Unix times in seconds (ns precision lost below ~0.3 µs: fine for ms-scale latency). */
  captureS: number | null;
  arrivalS: number | null;
  decodedS: number | null;
  /** Display time (frames.jsonl `t`), null when the player wrote no display log. */
  displayS: number | null;
  layersHeld: number;
  width: number;
  height: number;
  /** Segment file, '' when the player logged the picture without pixels (writer overload or
   *  `--no-pictures`): such rows count for timing, not for PSNR/SSIM. */
  file: string;
  fileIndex: number | null;
}

function num(s: string | undefined): number | null {
  if (s === undefined) return null;
  const t = s.trim();
  if (t === '') return null;
  const v = Number(t);
  return Number.isFinite(v) ? v : null;
}

/** Parses `frames.csv`. Throws QualityError on a wrong header; skips malformed rows (counted). */
export function parseFramesCsv(text: string): { rows: FrameRow[]; malformed: number } {
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== '');
  if (!lines.length) throw new QualityError('frames.csv is empty');
  const header = lines[0].trim().split(',');
  const want = FRAMES_CSV_HEADER.split(',');
  const col = new Map<string, number>();
  header.forEach((h, i) => col.set(h.trim(), i));
  for (const w of want) if (!col.has(w)) throw new QualityError(`frames.csv: header lacks column ${w} (have ${header.join(',')})`);
  const rows: FrameRow[] = [];
  let malformed = 0;
  for (const line of lines.slice(1)) {
    const c = line.split(',');
    const g = (k: string) => c[col.get(k)!];
    const index = num(g('index'));
    const width = num(g('width'));
    const height = num(g('height'));
    const fileIndex = num(g('file_index'));
    const file = (g('file') ?? '').trim();
    if (index === null || width === null || height === null || width <= 0 || height <= 0 || (file !== '' && fileIndex === null)) {
      malformed++;
      continue;
    }
    const ns = (k: string) => {
      const v = num(g(k));
      return v === null ? null : v / 1e9;
    };
    const fn = num(g('frame_number'));
    rows.push({
      index,
      frameNumber: fn !== null && fn >= 0 && Number.isInteger(fn) ? fn : null,
      captureS: ns('capture_unix_ns'),
      arrivalS: ns('arrival_unix_ns'),
      decodedS: ns('decoded_unix_ns'),
      displayS: null,
      layersHeld: num(g('layers_held')) ?? 0,
      width,
      height,
      file,
      fileIndex,
    });
  }
  return { rows, malformed };
}

/** Sets each row's `displayS` from `frames.jsonl` (the player writes one line per frames.csv
 *  row, in the same order, `t` = the time the playout buffer shows the picture). Returns false,
 *  leaving rows as they are, when the file is missing or its line count differs from the csv's
 *  (then the analysis falls back to decode times and says so in `timeBase`). */
export function applyDisplayTimes(rows: FrameRow[], jsonlText: string | null, csvRows: number): boolean {
  if (jsonlText === null) return false;
  const ts: (number | null)[] = [];
  for (const l of jsonlText.split('\n')) {
    if (!l.trim()) continue;
    try {
      const t = (JSON.parse(l) as { t?: unknown }).t;
      ts.push(typeof t === 'number' && Number.isFinite(t) ? t : null);
    } catch {
      ts.push(null);
    }
  }
  // A player stopped mid-write may leave one row more in either file.
  if (Math.abs(ts.length - csvRows) > 1) return false;
  for (const r of rows) r.displayS = r.index < ts.length ? ts[r.index] : null;
  return true;
}

/** A y4m file opened for random access to its frames (4:2:0 only, fixed frame size). */
export class Y4m {
  readonly width: number;
  readonly height: number;
  readonly header: string;
  readonly frameBytes: number;
  /** Byte offset of each frame's pixel data. */
  readonly offsets: number[] = [];

  constructor(readonly file: string) {
    const fd = fs.openSync(file, 'r');
    try {
      const size = fs.fstatSync(fd).size;
      const head = Buffer.alloc(Math.min(size, 1024));
      fs.readSync(fd, head, 0, head.length, 0);
      const nl = head.indexOf(0x0a);
      if (nl < 0 || !head.subarray(0, 10).toString('latin1').startsWith('YUV4MPEG2')) throw new QualityError(`${file}: not a y4m file`);
      this.header = head.subarray(0, nl).toString('latin1');
      const params = this.header.split(' ').slice(1);
      const p = (c: string) => params.find((x) => x.startsWith(c))?.slice(1);
      this.width = Number(p('W'));
      this.height = Number(p('H'));
      const cs = p('C') ?? '420jpeg';
      if (!/^420(jpeg|mpeg2|paldv)?$/.test(cs)) throw new QualityError(`${file}: colour space C${cs} not supported (8-bit 4:2:0 only)`);
      if (!(this.width > 0 && this.height > 0)) throw new QualityError(`${file}: bad size in header`);
      const cw = Math.ceil(this.width / 2);
      const ch = Math.ceil(this.height / 2);
      this.frameBytes = this.width * this.height + 2 * cw * ch;
      // Walk the frame headers ("FRAME[ params]\n"); a truncated last frame is ignored.
      let pos = nl + 1;
      const fh = Buffer.alloc(256);
      while (pos < size) {
        const n = fs.readSync(fd, fh, 0, Math.min(fh.length, size - pos), pos);
        const e = fh.subarray(0, n).indexOf(0x0a);
        if (e < 0 || !fh.subarray(0, 5).equals(Buffer.from('FRAME'))) break;
        const data = pos + e + 1;
        if (data + this.frameBytes > size) break;
        this.offsets.push(data);
        pos = data + this.frameBytes;
      }
    } finally {
      fs.closeSync(fd);
    }
  }

  get frames(): number {
    return this.offsets.length;
  }
}

/** Writes a y4m file from frames taken out of other y4m files (all of the same size). */
function writeY4m(out: string, like: Y4m, frames: { src: Y4m; i: number }[]): void {
  const fd = fs.openSync(out, 'w');
  const rd = new Map<string, number>();
  try {
    // Keep the source's header (size, rate, colour space); frame count is implicit.
    fs.writeSync(fd, `${like.header}\n`);
    const buf = Buffer.alloc(like.frameBytes);
    for (const f of frames) {
      if (f.src.frameBytes !== like.frameBytes) throw new QualityError('writeY4m: mixed frame sizes');
      let sfd = rd.get(f.src.file);
      if (sfd === undefined) {
        sfd = fs.openSync(f.src.file, 'r');
        rd.set(f.src.file, sfd);
      }
      fs.readSync(sfd, buf, 0, buf.length, f.src.offsets[f.i]);
      fs.writeSync(fd, 'FRAME\n');
      fs.writeSync(fd, buf);
    }
  } finally {
    fs.closeSync(fd);
    for (const x of rd.values()) fs.closeSync(x);
  }
}

export interface FrameQuality {
  index: number;
  frameNumber: number;
  decodedS: number | null;
  layersHeld: number;
  width: number;
  height: number;
  psnrY: number;
  psnr: number;
  ssimY: number;
  ssim: number;
}

/** Runs ffmpeg in `cwd` (relative names keep paths out of the filter graph's syntax). */
export function ffmpeg(args: string[], cwd: string, timeoutMs = 600_000): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('ffmpeg', ['-hide_banner', '-nostats', '-loglevel', 'error', '-y', ...args], { cwd, timeout: timeoutMs, maxBuffer: 16 << 20, killSignal: 'SIGKILL' }, (err, _o, stderr) =>
      err ? reject(new QualityError(`ffmpeg ${args.join(' ')}: ${String(stderr).trim() || err.message}`)) : resolve(),
    );
  });
}

const cap = (v: number) => (Number.isFinite(v) ? Math.min(v, PSNR_CAP_DB) : PSNR_CAP_DB);

/** Parses ffmpeg's psnr stats_file lines (`n:1 mse_avg:… psnr_avg:… psnr_y:…`). */
export function parsePsnrStats(text: string): { psnr: number; psnrY: number }[] {
  const out: { psnr: number; psnrY: number }[] = [];
  for (const l of text.split('\n')) {
    const m = /psnr_avg:(\S+).*?psnr_y:(\S+)/.exec(l);
    if (m) out.push({ psnr: cap(parseFloat(m[1].replace(/^inf$/, 'Infinity'))), psnrY: cap(parseFloat(m[2].replace(/^inf$/, 'Infinity'))) });
  }
  return out;
}

/** Parses ffmpeg's ssim stats_file lines (`n:1 Y:… U:… V:… All:… (…)`). */
export function parseSsimStats(text: string): { ssim: number; ssimY: number }[] {
  const out: { ssim: number; ssimY: number }[] = [];
  for (const l of text.split('\n')) {
    const m = /\bY:(\S+).*?All:(\S+)/.exec(l);
    if (m) out.push({ ssimY: parseFloat(m[1]), ssim: parseFloat(m[2]) });
  }
  return out;
}

/** PSNR and SSIM of every picture with a readable frame number, per segment one ffmpeg run. */
export async function frameQuality(playerDir: string, reference: string, rows: FrameRow[], tmpDir?: string): Promise<{ frames: FrameQuality[]; skipped: string[] }> {
  const ref = new Y4m(reference);
  const skipped: string[] = [];
  const bySeg = new Map<string, FrameRow[]>();
  for (const r of rows) {
    if (r.frameNumber === null || r.file === '' || r.fileIndex === null) continue;
    if (r.frameNumber >= ref.frames) {
      skipped.push(`picture ${r.index}: frame number ${r.frameNumber} beyond the reference's ${ref.frames} frames`);
      continue;
    }
    if (!bySeg.has(r.file)) bySeg.set(r.file, []);
    bySeg.get(r.file)!.push(r);
  }
  const tmp = tmpDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'lc-quality-'));
  fs.mkdirSync(tmp, { recursive: true });
  const frames: FrameQuality[] = [];
  try {
    let s = 0;
    for (const [file, segRows] of bySeg) {
      const segPath = path.join(playerDir, path.basename(file));
      if (!fs.existsSync(segPath)) {
        skipped.push(`${file}: segment missing (${segRows.length} pictures)`);
        continue;
      }
      const seg = new Y4m(segPath);
      const keep = segRows.filter((r) => {
        const ok = r.fileIndex! < seg.frames && r.width === seg.width && r.height === seg.height;
        if (!ok) skipped.push(`picture ${r.index}: ${file}#${r.fileIndex} absent or of another size`);
        return ok;
      });
      if (!keep.length) continue;
      const dist = path.join(tmp, `d${s}.y4m`);
      const refOut = path.join(tmp, `r${s}.y4m`);
      const pLog = path.join(tmp, `p${s}.log`);
      const sLog = path.join(tmp, `s${s}.log`);
      s++;
      writeY4m(dist, seg, keep.map((r) => ({ src: seg, i: r.fileIndex! })));
      writeY4m(refOut, ref, keep.map((r) => ({ src: ref, i: r.frameNumber! })));
      // The reference goes down to the picture's size by area averaging (box filter, as libvpx
      // scales its lower spatial layers and as docs/codec.md's PSNR reference does); the stats
      // files name no path characters ffmpeg's filter parser would need escaped.
      const graph =
        `[1:v]scale=${seg.width}:${seg.height}:flags=area,format=yuv420p,split[r1][r2];` +
        `[0:v]format=yuv420p,split[d1][d2];` +
        `[d1][r1]psnr=stats_file=p${s - 1}.log[o1];[d2][r2]ssim=stats_file=s${s - 1}.log[o2]`;
      await ffmpeg(['-i', path.basename(dist), '-i', path.basename(refOut), '-filter_complex', graph, '-map', '[o1]', '-f', 'null', '-', '-map', '[o2]', '-f', 'null', '-'], tmp);
      const ps = parsePsnrStats(fs.readFileSync(pLog, 'utf8'));
      const ss = parseSsimStats(fs.readFileSync(sLog, 'utf8'));
      if (ps.length !== keep.length || ss.length !== keep.length) {
        throw new QualityError(`${file}: ffmpeg compared ${ps.length}/${ss.length} of ${keep.length} pictures`);
      }
      keep.forEach((r, i) =>
        frames.push({ index: r.index, frameNumber: r.frameNumber!, decodedS: r.decodedS, layersHeld: r.layersHeld, width: r.width, height: r.height, ...ps[i], ...ss[i] }),
      );
      for (const f of [dist, refOut, pLog, sLog]) fs.rmSync(f, { force: true });
    }
  } finally {
    if (!tmpDir) fs.rmSync(tmp, { recursive: true, force: true });
  }
  frames.sort((a, b) => a.index - b.index);
  return { frames, skipped };
}

export interface TimingStats {
  pictures: number;
  /** Which clock the gaps and the latency are on: 'display' (frames.jsonl `t`, what a viewer
   *  sees) or 'decode' (`decoded_unix_ns`, when the player wrote no display log). */
  timeBase: 'display' | 'decode';
  /** First to last shown picture (s). */
  spanS: number;
  /** Mean interval between displayed pictures (s). */
  meanIntervalS: number;
  /** The freeze threshold at the run's mean interval, max(3 × mean, mean + 150 ms): for
   *  reading only, each gap is judged against its own recent average ({@link freezeGaps}). */
  freezeThresholdS: number;
  freezes: number;
  /** Pictures shown after one captured later (by their stamped frame numbers): the picture on
   *  screen goes back in time (a decoder shown a stale reference frame). 0 when fewer than two
   *  shown pictures carry a stamp. */
  backwards: number;
  /** Freezes per minute of the span. */
  freezesPerMin: number;
  freezeTimeS: number;
  longestFreezeS: number;
  /** Σd / Σd² over display durations d (WebRTC's harmonic frame rate: long gaps weigh more). */
  harmonicFps: number;
  meanFps: number;
  /** Glass-to-glass: shown (display time) minus the stamped capture time. */
  latencyP50Ms: number | null;
  latencyP95Ms: number | null;
  latencyMeanMs: number | null;
  /** Capture to decode (the network, reassembly and decoding, without the playout buffer). */
  decodeLatencyP50Ms: number | null;
  decodeLatencyP95Ms: number | null;
}

function quantile(sorted: number[], q: number): number {
  if (!sorted.length) return NaN;
  const i = (sorted.length - 1) * q;
  const lo = Math.floor(i);
  const hi = Math.ceil(i);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (i - lo);
}

/** Frames whose durations the W3C freeze rule averages over, and the fewest it judges with. */
export const FREEZE_WINDOW_FRAMES = 30;
export const FREEZE_MIN_SAMPLES = 5;

/** The gaps (s) between consecutive shown pictures that are freezes by the W3C `freezeCount`
 *  rule as libwebrtc's VideoQualityObserver (what Chrome's getStats reports) applies it: a gap
 *  is a freeze when it is ≥ max(3 × avg, avg + 150 ms), where avg is the linear average of the
 *  last 30 frame durations including this one, once 5 are known. The average is a recent one, so
 *  a steady low frame rate (a viewer at the base temporal layer) is not a string of freezes,
 *  while a stall in a fast stream is; a whole-run mean judged the first second's 3.75-fps
 *  pictures of a viewer that later reached 15 fps as four freezes. */
export function freezeGaps(gaps: number[]): number[] {
  const out: number[] = [];
  const win: number[] = [];
  let sum = 0;
  for (const d of gaps) {
    win.push(d);
    sum += d;
    if (win.length > FREEZE_WINDOW_FRAMES) sum -= win.shift()!;
    if (win.length < FREEZE_MIN_SAMPLES) continue;
    const avg = sum / win.length;
    if (d >= Math.max(3 * avg, avg + 0.15)) out.push(d);
  }
  return out;
}

/** Freezes, frame rate and glass-to-glass latency from the per-frame log, at display time when
 *  every row has one (`applyDisplayTimes`), else at decode time (the headless player of old
 *  showed a picture when decoded). */
export function timingStats(rows: FrameRow[]): TimingStats {
  const display = rows.length > 0 && rows.every((r) => r.displayS !== null);
  const shown = (r: FrameRow) => (display ? r.displayS : r.decodedS);
  const t = rows.map(shown).filter((x): x is number => x !== null).sort((a, b) => a - b);
  const d: number[] = [];
  for (let i = 1; i < t.length; i++) d.push(t[i] - t[i - 1]);
  const sum = d.reduce((a, b) => a + b, 0);
  const mean = d.length ? sum / d.length : NaN;
  const thr = Math.max(3 * mean, mean + 0.15);
  const fr = freezeGaps(d);
  const sq = d.reduce((a, b) => a + b * b, 0);
  const lat = (end: (r: FrameRow) => number | null) =>
    rows
      .filter((r) => r.captureS !== null && end(r) !== null)
      .map((r) => (end(r)! - r.captureS!) * 1000)
      .sort((a, b) => a - b);
  const g2g = lat(shown);
  const dec = lat((r) => r.decodedS);
  const order = rows
    .filter((r) => r.frameNumber !== null && shown(r) !== null)
    .sort((a, b) => shown(a)! - shown(b)!);
  let backwards = 0;
  let newest = -Infinity;
  for (const r of order) {
    if (r.frameNumber! < newest) backwards++;
    newest = Math.max(newest, r.frameNumber!);
  }
  return {
    pictures: rows.length,
    timeBase: display ? 'display' : 'decode',
    spanS: sum,
    meanIntervalS: mean,
    freezeThresholdS: thr,
    freezes: fr.length,
    backwards,
    freezesPerMin: sum > 0 ? (fr.length * 60) / sum : NaN,
    freezeTimeS: fr.reduce((a, b) => a + b, 0),
    longestFreezeS: fr.reduce((a, b) => Math.max(a, b), 0),
    harmonicFps: sq > 0 ? sum / sq : NaN,
    meanFps: sum > 0 ? d.length / sum : NaN,
    latencyP50Ms: g2g.length ? quantile(g2g, 0.5) : null,
    latencyP95Ms: g2g.length ? quantile(g2g, 0.95) : null,
    latencyMeanMs: g2g.length ? g2g.reduce((a, b) => a + b, 0) / g2g.length : null,
    decodeLatencyP50Ms: dec.length ? quantile(dec, 0.5) : null,
    decodeLatencyP95Ms: dec.length ? quantile(dec, 0.95) : null,
  };
}

/** The source's frame rate and the shown rate against it at the held layer. */
export interface SourceRate {
  /** Frames the sender stamped per second: Δ frame number / Δ capture time between the first
   *  and the last stamped picture the player showed (the encoder's real rate, which on a
   *  loaded host can be below the nominal one). */
  sourceFps: number;
  /** The rate the source produces pictures that carry a held layer, time-weighted over the
   *  run: sourceFps × the share of source frames the held layers reach (`heldFrameShare`). */
  heldLayerFps: number;
  /** Shown pictures over the pictures of the held layers the source produced in the same time
   *  (meanFps / heldLayerFps): 1 when the viewer saw every picture of the layers it held. */
  fpsRatio: number;
}

/** How the server stacks an encode's (spatial, temporal) cells into cumulative layers
 *  (`video.layer_order`, codec::ladder::LayerOrder; docs/server.md "The default ladder"). */
export type LayerOrder = 'size-first' | 'spatial-major';

/** The grid and order of a session's video ladder. */
export interface LadderShape {
  spatial: number;
  temporal: number;
  order: LayerOrder;
}

/** The server's default encode: L3T2, size-first. */
export const DEFAULT_LADDER: LadderShape = { spatial: 3, temporal: 2, order: 'size-first' };

/** The ladder of a session's `video` config (its `spatial`, `temporal`, `layer_order`, with the
 *  server's defaults: size-first at 30 fps or more, spatial-major below,
 *  `config::video::default_order`). */
export function ladderOf(video?: Record<string, unknown>): LadderShape {
  const n = (v: unknown, d: number) => (typeof v === 'number' && v >= 1 ? v : d);
  const lo = video?.layer_order;
  const order = lo === 'spatial-major' || lo === 'size-first' ? lo : n(video?.fps, 30) >= 30 ? 'size-first' : 'spatial-major';
  return { spatial: n(video?.spatial, 3), temporal: n(video?.temporal, 2), order };
}

/** The (spatial, temporal) cell of each layer, layer 0 first: the same rule as the server's
 *  `LayerOrder::cells` (size-first: below the top spatial layer, the lower temporal layers of
 *  every size, then their top temporal layer, then the top spatial layer's cells). */
export function layerCells(l: LadderShape): [number, number][] {
  const out: [number, number][] = [];
  const { spatial: ns, temporal: nt } = l;
  if (l.order === 'spatial-major') {
    for (let s = 0; s < ns; s++) for (let t = 0; t < nt; t++) out.push([s, t]);
    return out;
  }
  for (let s = 0; s < ns - 1; s++) for (let t = 0; t < nt - 1; t++) out.push([s, t]);
  for (let s = 0; s < ns - 1; s++) out.push([s, nt - 1]);
  for (let t = 0; t < nt; t++) out.push([ns - 1, t]);
  return out;
}

/** Share of the source's frames a viewer holding the first `layers` layers of `ladder` is meant
 *  to show: those of its *steady* spatial layer, the highest one whose held temporal layers
 *  reach at least half the frames (the player's `ShowFilter`, docs/player.md "Steady
 *  resolution"); temporal layers 0..=t reach 2^(t+1−T) of the frames (dyadic patterns). When no
 *  layer reaches half (1 layer of L?T3), the base layer is steady and shows what it holds.
 *  Spatial-major L3T3: 5 layers show S1 at TL0-TL1, 7.5 of 15 fps; 4 layers (S1 at TL0 only)
 *  show every frame at S0. Size-first L3T3: 4 layers show S1 at half the frames, 5 too (the
 *  S0 TL2 pictures are decoded, not shown), 6 every frame. */
export function heldFrameShare(layers: number, ladder: LadderShape = DEFAULT_LADDER): number {
  const nt = ladder.temporal;
  if (!(layers >= 1) || !(nt >= 1) || !(ladder.spatial >= 1)) return NaN;
  const maxT = new Map<number, number>();
  for (const [s, t] of layerCells(ladder).slice(0, layers)) maxT.set(s, Math.max(maxT.get(s) ?? -1, t));
  let steady = 0;
  for (let s = ladder.spatial - 1; s >= 0; s--) {
    const t = maxT.get(s);
    if (t !== undefined && t + 2 >= nt) {
      steady = s;
      break;
    }
  }
  return 2 ** (Math.min(maxT.get(steady) ?? 0, nt - 1) + 1 - nt);
}

/** `null` when fewer than 10 shown pictures carry a readable stamp. Display gaps are weighed
 *  by the share of the layers held at the picture that ends them. */
export function sourceRate(rows: FrameRow[], ladder: LadderShape = DEFAULT_LADDER): SourceRate | null {
  const st = rows.filter((r) => r.frameNumber !== null && r.captureS !== null);
  if (st.length < 10) return null;
  const first = st[0];
  const last = st[st.length - 1];
  const dt = last.captureS! - first.captureS!;
  if (!(dt > 0) || !(last.frameNumber! > first.frameNumber!)) return null;
  const sourceFps = (last.frameNumber! - first.frameNumber!) / dt;
  const display = rows.every((r) => r.displayS !== null);
  const shown = rows
    .map((r) => ({ t: display ? r.displayS : r.decodedS, share: heldFrameShare(r.layersHeld, ladder) }))
    .filter((x): x is { t: number; share: number } => x.t !== null && Number.isFinite(x.share))
    .sort((a, b) => a.t - b.t);
  let span = 0;
  let expected = 0;
  for (let i = 1; i < shown.length; i++) {
    const d = shown[i].t - shown[i - 1].t;
    span += d;
    expected += d * sourceFps * shown[i].share;
  }
  if (!(span > 0 && expected > 0)) return null;
  const heldLayerFps = expected / span;
  return { sourceFps, heldLayerFps, fpsRatio: (shown.length - 1) / expected };
}

/** What the player's exit line (player.jsonl, `event: exit`) says about packets: those lost on
 *  the way (sequence gaps, every packet kind of every held layer), and the media packets FEC
 *  recovered. The player does not count lost media packets apart from lost repair and padding
 *  packets, so `unrepaired` = lost − recovered is an upper bound on lost media packets. */
export interface PacketTotals {
  received: number;
  lost: number;
  fecRecovered: number;
  fecRepairs: number;
  /** Retransmitted packets that filled a gap (`rtx.received`; 0 for players before it). */
  retransmitted: number;
  unrepaired: number;
}

/** The player's FEC counters (`fec` in its per-second and exit lines). */
export interface FecCounters {
  repairs?: number;
  recovered?: number;
  lost?: number;
  unrepaired?: number;
}

interface ExitLine {
  event?: string;
  packets_received?: number;
  packets_lost?: number;
  fec?: FecCounters | null;
  rtx?: { received?: number } | null;
  video?: { fec_recovered?: number; fec_repairs?: number } | null;
}

export function packetTotals(playerJsonl: string): PacketTotals | null {
  const lines = playerJsonl.split('\n').filter((l) => l.includes('"exit"'));
  for (const l of lines.reverse()) {
    try {
      const e = JSON.parse(l) as ExitLine;
      if (e.event !== 'exit') continue;
      const lost = Number(e.packets_lost ?? NaN);
      // The Subscriber's `fec` object; players before it put the two counters in `video`.
      const rec = Number(e.fec?.recovered ?? e.video?.fec_recovered ?? NaN);
      const repairs = Number(e.fec?.repairs ?? e.video?.fec_repairs ?? NaN);
      const rtx = Number(e.rtx?.received ?? 0);
      return { received: Number(e.packets_received ?? NaN), lost, fecRecovered: rec, fecRepairs: repairs, retransmitted: rtx, unrepaired: Math.max(0, lost - rec - rtx) };
    } catch {
      /* a torn last line: look further up */
    }
  }
  return null;
}

export interface PlayerQuality extends TimingStats {
  player: string;
  /** Rows in frames.csv (decoded pictures) and those whose QR was read. */
  stamped: number;
  /** Rows logged without pixels (no segment file). */
  withoutPixels: number;
  malformedRows: number;
  compared: number;
  psnrMeanDb: number;
  psnrYMeanDb: number;
  psnrP5Db: number;
  ssimMean: number;
  ssimYMean: number;
  /** Mean PSNR / SSIM per number of layers held, for "PSNR ≥ floor for the layers held". */
  byLayers: { layers: number; width: number; height: number; pictures: number; psnrMeanDb: number; ssimMean: number }[];
  skipped: string[];
  /** The source's rate and the shown rate against it (null: too few stamps read). */
  source: SourceRate | null;
  /** Median of `layers_held` over the shown pictures. */
  layersHeldMedian: number;
  /** Packet and FEC totals from the player's exit line (null: no exit line). */
  packets: PacketTotals | null;
  /** Per-picture values for the report chart (time from the first decoded picture of the run). */
  series: FrameQuality[];
}

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);

/** Analyses one player's output directory against `reference` (a y4m); `ladder`: the session's
 *  encode (the server's default, L3T3 size-first, unless configured otherwise). */
export async function analysePlayer(playerDir: string, reference: string, name = path.basename(playerDir), ladder: LadderShape = DEFAULT_LADDER): Promise<PlayerQuality> {
  const csv = path.join(playerDir, 'frames.csv');
  if (!fs.existsSync(csv)) throw new QualityError(`${csv}: missing`);
  const { rows, malformed } = parseFramesCsv(fs.readFileSync(csv, 'utf8'));
  const readOpt = (f: string) => (fs.existsSync(path.join(playerDir, f)) ? fs.readFileSync(path.join(playerDir, f), 'utf8') : null);
  applyDisplayTimes(rows, readOpt('frames.jsonl'), rows.length + malformed);
  const log = readOpt('player.jsonl');
  const { frames, skipped } = await frameQuality(playerDir, reference, rows);
  const timing = timingStats(rows);
  const held = rows.map((r) => r.layersHeld).sort((a, b) => a - b);
  const groups = new Map<string, FrameQuality[]>();
  for (const f of frames) {
    const k = `${f.layersHeld}|${f.width}x${f.height}`;
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k)!.push(f);
  }
  const psnrs = frames.map((f) => f.psnr).sort((a, b) => a - b);
  return {
    player: name,
    ...timing,
    source: sourceRate(rows, ladder),
    layersHeldMedian: held.length ? quantile(held, 0.5) : NaN,
    packets: log === null ? null : packetTotals(log),
    stamped: rows.filter((r) => r.frameNumber !== null).length,
    withoutPixels: rows.filter((r) => r.file === '').length,
    malformedRows: malformed,
    compared: frames.length,
    psnrMeanDb: mean(frames.map((f) => f.psnr)),
    psnrYMeanDb: mean(frames.map((f) => f.psnrY)),
    psnrP5Db: quantile(psnrs, 0.05),
    ssimMean: mean(frames.map((f) => f.ssim)),
    ssimYMean: mean(frames.map((f) => f.ssimY)),
    byLayers: [...groups.values()]
      .map((g) => ({ layers: g[0].layersHeld, width: g[0].width, height: g[0].height, pictures: g.length, psnrMeanDb: mean(g.map((f) => f.psnr)), ssimMean: mean(g.map((f) => f.ssim)) }))
      .sort((a, b) => a.layers - b.layers || a.width - b.width),
    skipped,
    series: frames,
  };
}

/** Every `player-*` directory under `runDir` with a frames.csv, against `reference`
 *  (default `<runDir>/reference.y4m`, else the first `server-*` directory's). */
export async function analyseRun(runDir: string, reference?: string, ladder: LadderShape = DEFAULT_LADDER): Promise<PlayerQuality[]> {
  const ref = reference ?? findReference(runDir);
  if (!ref) return [];
  const out: PlayerQuality[] = [];
  for (const d of fs.readdirSync(runDir).sort()) {
    const dir = path.join(runDir, d);
    if (!d.startsWith('player-') || !fs.existsSync(path.join(dir, 'frames.csv'))) continue;
    out.push(await analysePlayer(dir, ref, d.replace(/^player-/, ''), ladder));
  }
  return out;
}

/** Quantiles (ms) of a Prometheus histogram `name` in a /metrics scrape, linearly
 *  interpolated within a bucket (as Prometheus' `histogram_quantile`); `null` without the
 *  histogram or any observation. The server's `layercast_video_encode_latency_seconds` (capture
 *  to the picture's packets queued) is what the quality suite reads with it. */
export function histogramQuantilesMs(metrics: string, name: string, qs: number[]): { count: number; ms: number[] } | null {
  const buckets: [number, number][] = [];
  const re = new RegExp(`^${name}_bucket\\{[^}]*le="([^"]+)"\\} (\\d+)`);
  for (const line of metrics.split('\n')) {
    const m = re.exec(line);
    if (m) buckets.push([m[1] === '+Inf' ? Infinity : Number(m[1]), Number(m[2])]);
  }
  buckets.sort((a, b) => a[0] - b[0]);
  const count = buckets.length ? buckets[buckets.length - 1][1] : 0;
  if (!count) return null;
  const ms = qs.map((q) => {
    const target = q * count;
    let [lo, below] = [0, 0];
    for (const [le, c] of buckets) {
      if (c >= target) {
        if (!Number.isFinite(le)) return lo * 1e3;
        return (lo + ((le - lo) * (target - below)) / Math.max(1, c - below)) * 1e3;
      }
      [lo, below] = [le, c];
    }
    return lo * 1e3;
  });
  return { count, ms };
}

export function findReference(runDir: string): string | null {
  const direct = path.join(runDir, 'reference.y4m');
  if (fs.existsSync(direct)) return direct;
  for (const d of fs.existsSync(runDir) ? fs.readdirSync(runDir).sort() : []) {
    const f = path.join(runDir, d, 'reference.y4m');
    if (d.startsWith('server') && fs.existsSync(f)) return f;
  }
  return null;
}

/** The summary's per-player object (no per-picture series). */
export function qualitySummary(q: PlayerQuality): Omit<PlayerQuality, 'series'> {
  const { series: _s, ...rest } = q;
  return rest;
}

/** The report's video section: a table per player and PSNR / SSIM over time (time from the
 *  first decoded picture of any player in the run). */
export function qualityHtml(qs: PlayerQuality[]): string {
  const t0 = Math.min(...qs.flatMap((q) => q.series.map((f) => f.decodedS ?? Infinity)));
  const xMax = Math.max(1, ...qs.flatMap((q) => q.series.map((f) => (f.decodedS ?? t0) - t0)));
  const ser = (k: 'psnr' | 'ssim'): Series[] =>
    qs.map((q) => ({ name: q.player, points: q.series.filter((f) => f.decodedS !== null).map((f) => [f.decodedS! - t0, f[k]] as [number, number]) }));
  const v = (x: number | null, d = 2) => (x === null || !Number.isFinite(x) ? '—' : x.toFixed(d));
  let h = '<h2>Video quality</h2><table><tr><th>player</th><th>pictures</th><th>stamped</th><th>compared</th><th>PSNR dB (Y)</th><th>PSNR p5</th><th>SSIM (Y)</th><th>freezes (/min)</th><th>freeze s (longest)</th><th>fps: shown / source at the held layer</th><th>harmonic fps</th><th>latency p50/p95 ms (to decode)</th><th>lost / FEC-recovered / retransmitted packets</th><th>per layers held: PSNR / SSIM</th></tr>';
  for (const q of qs) {
    h += `<tr><td>${esc(q.player)}</td><td>${q.pictures}</td><td>${q.stamped}</td><td>${q.compared}</td><td>${v(q.psnrMeanDb)} (${v(q.psnrYMeanDb)})</td><td>${v(q.psnrP5Db)}</td><td>${v(q.ssimMean, 4)} (${v(q.ssimYMean, 4)})</td><td>${q.freezes} (${v(q.freezesPerMin, 1)})</td><td>${v(q.freezeTimeS)} (${v(q.longestFreezeS)})</td><td>${v(q.meanFps, 1)} / ${q.source ? `${v(q.source.heldLayerFps, 1)} (${v(q.source.fpsRatio, 3)})` : '—'}</td><td>${v(q.harmonicFps, 1)}</td><td>${v(q.latencyP50Ms, 0)}/${v(q.latencyP95Ms, 0)} (${v(q.decodeLatencyP50Ms, 0)}/${v(q.decodeLatencyP95Ms, 0)}) ${q.timeBase}</td><td>${q.packets ? `${q.packets.lost} / ${q.packets.fecRecovered} / ${q.packets.retransmitted}` : '—'}</td><td>${q.byLayers.map((b) => `${b.layers} (${b.width}x${b.height}, ${b.pictures}): ${v(b.psnrMeanDb)} / ${v(b.ssimMean, 3)}`).join('<br>')}</td></tr>`;
  }
  h += '</table>';
  h += svgChart('PSNR per picture', 'dB', ser('psnr'), xMax);
  h += svgChart('SSIM per picture', 'SSIM', ser('ssim'), xMax);
  return h;
}

/** Inserts `html` before `</body>` of an existing report (or writes a page of its own). */
export function appendToReport(file: string, html: string): void {
  const page = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '<!doctype html><html><head><meta charset="utf-8"></head><body></body></html>\n';
  const i = page.lastIndexOf('</body>');
  fs.writeFileSync(file, i >= 0 ? page.slice(0, i) + html + page.slice(i) : page + html);
}

/** Deletes every y4m file under a run directory (the players' pictures, 5 MB/s per viewer at
 *  640x360, and the server's reference): for runs whose analysis is done. */
export function removePictures(dir: string): void {
  if (!fs.existsSync(dir)) return;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) removePictures(p);
    else if (e.name.endsWith('.y4m')) fs.rmSync(p, { force: true });
  }
}
