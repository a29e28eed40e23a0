// Video-quality analysis against fixtures made here with ffmpeg: a reference y4m (testsrc2,
// every frame different) and a "player output" of two segments — frames 0-19 downscaled to
// half size with noise, frames 20-39 untouched at full size — with a frames.csv in the
// player's contract, including unreadable QR codes, a repeated picture and a freeze.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { DEFAULT_LADDER, FRAMES_CSV_HEADER, Y4m, analysePlayer, analyseRun, applyDisplayTimes, ffmpeg, freezeGaps, heldFrameShare, ladderOf, layerCells, histogramQuantilesMs, packetTotals, parseFramesCsv, parsePsnrStats, sourceRate, timingStats, type FrameRow } from '../src/quality.js';

let dir = '';
const T0 = 1_763_000_000; // unix seconds

function haveFfmpeg(): boolean {
  try {
    execFileSync('ffmpeg', ['-version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** frames.csv rows: (frame number or null, segment, index in segment, size, layers, decode time s). */
function csv(rows: [number | null, string, number, number, number, number, number][]): string {
  let s = FRAMES_CSV_HEADER + '\n';
  rows.forEach(([fn, file, fi, w, h, layers, t], i) => {
    const ns = (x: number) => (BigInt(Math.round(x * 1e6)) * 1000n).toString();
    const cap = fn === null ? '' : ns(T0 + fn * 0.04);
    s += `${i},${fn ?? ''},${cap},${ns(T0 + t - 0.01)},${ns(T0 + t)},${layers},${w},${h},${file},${fi}\n`;
  });
  return s;
}

before(async () => {
  if (!haveFfmpeg()) return;
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lc-quality-test-'));
  const run = path.join(dir, 'run');
  const p = path.join(run, 'player-s-r1');
  fs.mkdirSync(p, { recursive: true });
  await ffmpeg(['-f', 'lavfi', '-i', 'testsrc2=size=320x240:rate=25', '-frames:v', '40', '-pix_fmt', 'yuv420p', 'reference.y4m'], run);
  // Segment 0: reference frames 0-19 at 160x120 with temporal noise; segment 1: frames 20-39 as they are.
  await ffmpeg(['-i', 'reference.y4m', '-vf', 'trim=end_frame=20,scale=160:120:flags=bicubic,noise=alls=12:allf=t', '-pix_fmt', 'yuv420p', 'player-s-r1/video-0-160x120.y4m'], run);
  await ffmpeg(['-i', 'reference.y4m', '-vf', 'trim=start_frame=20,setpts=PTS-STARTPTS', '-pix_fmt', 'yuv420p', 'player-s-r1/video-1-320x240.y4m'], run);
  const rows: [number | null, string, number, number, number, number, number][] = [];
  let t = 1.0;
  for (let i = 0; i < 20; i++) {
    // two unreadable QR codes; a freeze of 0.6 s before picture 10
    t += i === 10 ? 0.6 : 0.04;
    rows.push([i === 3 || i === 7 ? null : i, 'video-0-160x120.y4m', i, 160, 120, 2, t]);
  }
  for (let i = 0; i < 20; i++) {
    t += 0.04;
    rows.push([20 + i, 'video-1-320x240.y4m', i, 320, 240, 3, t]);
  }
  fs.writeFileSync(path.join(p, 'frames.csv'), csv(rows));
  // The same pictures with every frame number off by 3: a broken alignment must show.
  const q = path.join(run, 'player-s-shifted');
  fs.mkdirSync(q);
  for (const f of ['video-0-160x120.y4m', 'video-1-320x240.y4m']) fs.copyFileSync(path.join(p, f), path.join(q, f));
  fs.writeFileSync(path.join(q, 'frames.csv'), csv(rows.map((r) => [r[0] === null ? null : (r[0] + 3) % 40, ...r.slice(1)] as typeof r)));
});

after(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('y4m reader finds every frame', { skip: !haveFfmpeg() && 'ffmpeg not installed' }, () => {
  const y = new Y4m(path.join(dir, 'run', 'reference.y4m'));
  assert.equal(y.width, 320);
  assert.equal(y.height, 240);
  assert.equal(y.frames, 40);
  assert.equal(y.frameBytes, 320 * 240 * 3 / 2);
  // Other sample formats are refused, not misread.
  const bad = path.join(dir, 'p10.y4m');
  fs.writeFileSync(bad, 'YUV4MPEG2 W4 H2 F25:1 C420p10\nFRAME\n' + 'x'.repeat(24));
  assert.throws(() => new Y4m(bad), /not supported/);
  fs.writeFileSync(bad, 'not a y4m\n');
  assert.throws(() => new Y4m(bad), /not a y4m/);
});

test('PSNR/SSIM aligned by frame number, per segment at the picture size', { skip: !haveFfmpeg() && 'ffmpeg not installed' }, async () => {
  const run = path.join(dir, 'run');
  const q = await analysePlayer(path.join(run, 'player-s-r1'), path.join(run, 'reference.y4m'));
  assert.equal(q.pictures, 40);
  assert.equal(q.stamped, 38);
  assert.equal(q.compared, 38);
  assert.deepEqual(q.skipped, []);
  const [low, top] = q.byLayers;
  assert.equal(low.layers, 2);
  assert.equal(low.width, 160);
  assert.equal(low.pictures, 18);
  assert.equal(top.layers, 3);
  assert.equal(top.pictures, 20);
  // The full-size segment is the reference itself: identical pictures (PSNR capped at 100).
  assert.equal(top.psnrMeanDb, 100);
  assert.ok(top.ssimMean > 0.9999, `ssim ${top.ssimMean}`);
  // The half-size noisy segment: clearly degraded, but matched to the right frames.
  assert.ok(low.psnrMeanDb > 22 && low.psnrMeanDb < 40, `psnr ${low.psnrMeanDb}`);
  assert.ok(low.ssimMean < 0.98 && low.ssimMean > 0.4, `ssim ${low.ssimMean}`);
  // Misaligned by three frames: both segments lose several dB.
  const s = await analysePlayer(path.join(run, 'player-s-shifted'), path.join(run, 'reference.y4m'));
  assert.ok(s.byLayers[0].psnrMeanDb < low.psnrMeanDb - 2, `${s.byLayers[0].psnrMeanDb} vs ${low.psnrMeanDb}`);
  assert.ok(s.byLayers[1].psnrMeanDb < 40, `${s.byLayers[1].psnrMeanDb}`);
  // analyseRun finds both players and the reference in the run directory.
  const all = await analyseRun(run);
  assert.deepEqual(all.map((x) => x.player).sort(), ['s-r1', 's-shifted']);
});

test('freezes, harmonic frame rate and latency follow their definitions', () => {
  const rows: FrameRow[] = [];
  // 25 fps for 50 pictures, then one 1 s gap, then 49 more at 25 fps.
  let t = 100;
  for (let i = 0; i < 100; i++) {
    t += i === 50 ? 1.0 : 0.04;
    rows.push({ index: i, frameNumber: i, captureS: t - 0.08 - (i % 2) * 0.02, arrivalS: t, decodedS: t, displayS: null, layersHeld: 3, width: 2, height: 2, file: 'x', fileIndex: i });
  }
  const s = timingStats(rows);
  // 99 intervals: 98 of 40 ms and one of 1 s.
  const mean = (98 * 0.04 + 1) / 99;
  assert.ok(Math.abs(s.meanIntervalS - mean) < 1e-9);
  assert.ok(Math.abs(s.freezeThresholdS - Math.max(3 * mean, mean + 0.15)) < 1e-9);
  assert.equal(s.freezes, 1);
  assert.equal(s.backwards, 0);
  assert.equal(s.timeBase, 'decode');
  assert.ok(Math.abs(s.freezeTimeS - 1) < 1e-9);
  assert.ok(Math.abs(s.longestFreezeS - 1) < 1e-9);
  assert.ok(Math.abs(s.freezesPerMin - 60 / 4.92) < 1e-9);
  // Σd/Σd² = (3.92+1)/(98·0.0016+1) ≈ 4.24 fps: far below the 20 fps arithmetic mean.
  assert.ok(Math.abs(s.harmonicFps - 4.92 / (98 * 0.0016 + 1)) < 1e-9);
  assert.ok(Math.abs(s.meanFps - 99 / 4.92) < 1e-9);
  assert.ok(Math.abs(s.latencyP50Ms! - 90) < 1e-6, `p50 ${s.latencyP50Ms}`);
  assert.ok(Math.abs(s.latencyMeanMs! - 90) < 1e-6);
  // The rule judges each gap against the last 30 durations: a steady 4 fps start before 25 fps
  // is no freeze, a 0.3-s gap after 30 pictures at 25 fps is one, fewer than 5 gaps judge none.
  assert.deepEqual(freezeGaps([0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.04, 0.04, 0.04]), []);
  assert.deepEqual(freezeGaps([...Array(30).fill(0.04), 0.3, 0.04]), [0.3]);
  assert.deepEqual(freezeGaps([0.04, 0.04, 0.04, 2]), []);
  // 0.3 s after 4 fps: below 3 × the average and not a freeze; 1 s is.
  assert.deepEqual(freezeGaps([...Array(10).fill(0.25), 0.3, 1]), [1]);
  // Steady 25 fps: no freeze, harmonic = arithmetic = 25.
  const steady = timingStats(rows.slice(0, 50));
  assert.equal(steady.freezes, 0);
  assert.ok(Math.abs(steady.harmonicFps - 25) < 1e-6);
  // Shown by a playout buffer 0.5-1.5 s after decoding, every gap evened out to 40 ms: no freeze,
  // and glass-to-glass latency counts to the display time, not to the decode.
  const jsonl = rows.map((_r, i) => JSON.stringify({ t: 101.5 + i * 0.04, decoded_at: 0 })).join('\n') + '\n';
  const shown = rows.map((r) => ({ ...r }));
  assert.ok(applyDisplayTimes(shown, jsonl, rows.length));
  const v = timingStats(shown);
  assert.equal(v.timeBase, 'display');
  assert.equal(v.freezes, 0);
  assert.ok(Math.abs(v.meanFps - 25) < 1e-6);
  assert.ok(v.latencyP50Ms! > 400, `p50 ${v.latencyP50Ms}`);
  assert.ok(Math.abs(v.decodeLatencyP50Ms! - 90) < 1e-6);
  // A picture whose stamp is older than the one shown before it (a stale reference frame on
  // screen) counts, however many pictures back; unstamped pictures do not.
  const back = rows.slice(0, 20).map((r) => ({ ...r }));
  back[10].frameNumber = 6;
  back[15].frameNumber = null;
  assert.equal(timingStats(back).backwards, 1);
  // A display log that does not match the csv is not used.
  assert.equal(applyDisplayTimes(rows.map((r) => ({ ...r })), jsonl.split('\n').slice(0, 50).join('\n'), rows.length), false);
});

test('source frame rate and shown rate at the held layer come from the stamps and the ladder', () => {
  // A 30 fps source, L3T3. The viewer holds 2 layers (S0T1: half the frames) for 45 pictures,
  // then 3 (S0T2: every frame) for 45 more, every picture shown at the source's pace, except
  // for 10 frames' gap after picture 60; every 7th stamp unreadable.
  const sm = { spatial: 3, temporal: 3, order: 'spatial-major' as const };
  assert.equal(heldFrameShare(1, sm), 0.25);
  assert.equal(heldFrameShare(2, sm), 0.5);
  assert.equal(heldFrameShare(3, sm), 1);
  // Spatial layer 1 at TL0 only (a quarter of the frames) is not steady: spatial layer 0,
  // held whole, shows every frame; at TL0 and TL1 (half) it is, and shows half of them.
  assert.equal(heldFrameShare(4, sm), 1);
  assert.equal(heldFrameShare(5, sm), 0.5);
  assert.equal(heldFrameShare(6, sm), 1);
  assert.equal(heldFrameShare(7, sm), 1);
  assert.equal(heldFrameShare(8, sm), 0.5);
  assert.equal(heldFrameShare(9, sm), 1);
  // Size-first L3T3: (0,0) (0,1) (1,0) (1,1) (0,2) (1,2) (2,0) (2,1) (2,2).
  const sf3 = { spatial: 3, temporal: 3, order: 'size-first' as const };
  assert.deepEqual(layerCells(sf3), [[0, 0], [0, 1], [1, 0], [1, 1], [0, 2], [1, 2], [2, 0], [2, 1], [2, 2]]);
  assert.deepEqual([1, 2, 3, 4, 5, 6, 7, 8, 9].map((k) => heldFrameShare(k, sf3)), [0.25, 0.5, 0.5, 0.5, 0.5, 1, 1, 0.5, 1]);
  // The server's default, size-first L3T2: 180p15, 360p15, (180p30, not shown), 360p30, 720p15, 720p30.
  assert.deepEqual(layerCells(DEFAULT_LADDER), [[0, 0], [1, 0], [0, 1], [1, 1], [2, 0], [2, 1]]);
  assert.deepEqual([1, 2, 3, 4, 5, 6].map((k) => heldFrameShare(k)), [0.5, 0.5, 0.5, 1, 0.5, 1]);
  assert.deepEqual(layerCells({ spatial: 2, temporal: 3, order: 'size-first' }), layerCells({ spatial: 2, temporal: 3, order: 'spatial-major' }));
  assert.deepEqual(ladderOf({ spatial: 2, layer_order: 'spatial-major' }), { spatial: 2, temporal: 2, order: 'spatial-major' });
  assert.deepEqual(ladderOf(undefined), DEFAULT_LADDER);
  // The server's default order follows the frame rate: spatial-major below 30 fps.
  assert.equal(ladderOf({ fps: 15 }).order, 'spatial-major');
  assert.equal(ladderOf({ fps: 15, layer_order: 'size-first' }).order, 'size-first');
  const rows: FrameRow[] = [];
  let fn = 0;
  for (let i = 0; i < 90; i++) {
    fn += i === 0 ? 0 : i < 45 ? 2 : i === 60 ? 11 : 1;
    const cap = 1000 + fn / 30;
    const unread = i % 7 === 3;
    rows.push({ index: i, frameNumber: unread ? null : fn, captureS: unread ? null : cap, arrivalS: null, decodedS: cap + 0.1, displayS: cap + 0.9, layersHeld: i < 45 ? 2 : 3, width: 2, height: 2, file: '', fileIndex: null });
  }
  const s = sourceRate(rows, sm)!;
  assert.ok(Math.abs(s.sourceFps - 30) < 1e-6, `${s.sourceFps}`);
  // 44 gaps of 2/30 s at 15 fps expected, then 45 gaps (one of them 11 frames) at 30: 89
  // shown against 44 + 55 = 99 expected.
  assert.ok(Math.abs(s.fpsRatio - 89 / 99) < 1e-9, `${s.fpsRatio}`);
  assert.ok(s.heldLayerFps > 15 && s.heldLayerFps < 30, `${s.heldLayerFps}`);
  // Too few stamps: no estimate rather than a wrong one.
  assert.equal(sourceRate(rows.slice(0, 10), sm), null);
});

test('packet and FEC totals come from the exit line', () => {
  const log = '{"t":1,"packets_lost":3}\n{"event":"exit","packets_received":1000,"packets_lost":12,"video":{"fec_recovered":9,"fec_repairs":80}}\n';
  assert.deepEqual(packetTotals(log), { received: 1000, lost: 12, fecRecovered: 9, fecRepairs: 80, retransmitted: 0, unrepaired: 3 });
  // The Subscriber's `fec` object in the exit line.
  const log2 = '{"t":1,"packets_lost":3,"fec":{"repairs":1,"recovered":0}}\n{"event":"exit","packets_received":1000,"packets_lost":12,"fec":{"repairs":80,"recovered":9,"lost":12,"unrepaired":3},"video":{"frames":10}}\n';
  assert.deepEqual(packetTotals(log2), { received: 1000, lost: 12, fecRecovered: 9, fecRepairs: 80, retransmitted: 0, unrepaired: 3 });
  // Retransmissions that filled gaps are repairs too.
  const log3 = '{"event":"exit","packets_received":1000,"packets_lost":12,"fec":{"repairs":80,"recovered":5},"rtx":{"requests":9,"asked":20,"received":4}}\n';
  assert.deepEqual(packetTotals(log3), { received: 1000, lost: 12, fecRecovered: 5, fecRepairs: 80, retransmitted: 4, unrepaired: 3 });
  assert.equal(packetTotals('{"t":1}\n{"event":"exit","packets_lost'), null);
});

test('frames.csv parsing: header checked, bad rows counted, empty fields are null', () => {
  assert.throws(() => parseFramesCsv('index,frame_number\n1,2\n'), /header lacks column/);
  const { rows, malformed } = parseFramesCsv(
    `${FRAMES_CSV_HEADER}\n0,,,1763000000000000000,1763000000040000000,1,320,240,video-0-320x240.y4m,0\n1,5,1,2,3,1,abc,240,v.y4m,1\n2,-1,,,,2,320,240,v.y4m,2\n3,7,,,4,2,320,240,,\n4,8,,,5,2,320,240,v.y4m,\n`,
  );
  assert.equal(malformed, 2); // width "abc"; a file without an index
  assert.equal(rows.length, 3);
  assert.equal(rows[2].file, ''); // logged without pixels: kept for timing
  assert.equal(rows[2].fileIndex, null);
  assert.equal(rows[0].frameNumber, null);
  assert.equal(rows[0].captureS, null);
  assert.ok(Math.abs(rows[0].decodedS! - 1763000000.04) < 1e-6);
  assert.equal(rows[1].frameNumber, null); // negative: not a frame number
  assert.deepEqual(parsePsnrStats('n:1 mse_avg:0.00 mse_y:0.00 mse_u:0.00 mse_v:0.00 psnr_avg:inf psnr_y:inf psnr_u:inf psnr_v:inf\nn:2 mse_avg:4.1 mse_y:3 psnr_avg:42.00 psnr_y:43.50 psnr_u:1 psnr_v:1\n'), [
    { psnr: 100, psnrY: 100 },
    { psnr: 42, psnrY: 43.5 },
  ]);
});

test('histogram quantiles interpolate within the bucket, as histogram_quantile does', () => {
  const name = 'layercast_video_encode_latency_seconds';
  const scrape = [
    `# TYPE ${name} histogram`,
    `${name}_bucket{session="s",le="0.01"} 0`,
    `${name}_bucket{session="s",le="0.02"} 50`,
    `${name}_bucket{session="s",le="0.05"} 90`,
    `${name}_bucket{session="s",le="0.1"} 100`,
    `${name}_bucket{session="s",le="+Inf"} 100`,
    `${name}_sum{session="s"} 2.5`,
    `${name}_count{session="s"} 100`,
    'other_bucket{le="+Inf"} 7',
  ].join('\n');
  const h = histogramQuantilesMs(scrape, name, [0.5, 0.95, 0.25]);
  assert.ok(h);
  assert.equal(h.count, 100);
  assert.ok(Math.abs(h.ms[0] - 20) < 1e-9, `p50 ${h.ms[0]}`);
  assert.ok(Math.abs(h.ms[1] - 75) < 1e-9, `p95 ${h.ms[1]}`);
  assert.ok(Math.abs(h.ms[2] - 15) < 1e-9, `p25 ${h.ms[2]}`);
  assert.equal(histogramQuantilesMs('nothing here', name, [0.5]), null);
});

test('--server-video takes numeric video settings for a comparison run, and refuses the rest', async () => {
  const { parseServerVideo } = await import('../src/quality-suite.js');
  assert.equal(parseServerVideo(undefined), undefined);
  assert.deepEqual(parseServerVideo('pacer_peak=4,rate_headroom=1.3'), { pacer_peak: 4, rate_headroom: 1.3 });
  assert.throws(() => parseServerVideo('pacer_peak=fast'), /key=number/);
  assert.throws(() => parseServerVideo('source=file:///etc/passwd'), /key=number/);
});
