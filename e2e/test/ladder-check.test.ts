// The ladder check's per-viewer judgement (src/ladder-check.ts) on made-up pictures: the start
// is left out, the share counts pictures at the target width or wider, the frame rate is the
// run's shown rate.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ladderRun, SETTLE_S } from '../src/ladder-check.js';
import type { FrameQuality, PlayerQuality } from '../src/quality.js';

function viewer(widths: [number, number][], meanFps: number): PlayerQuality {
  // (decoded s from the first picture, width) pairs; the player logs unix times.
  const T0 = 1_796_000_000;
  const series: FrameQuality[] = widths.map(([s, w], i) => ({ index: i, frameNumber: i, decodedS: T0 + s, layersHeld: 3, width: w, height: (w * 9) / 16, psnrY: 30, psnr: 30, ssimY: 0.9, ssim: 0.9 }));
  return { series, meanFps } as unknown as PlayerQuality;
}

test('the start is left out and wider pictures count', () => {
  const pics: [number, number][] = [];
  // The first 10 s at 320 (the climb), then 640 and 1280 alternating with one 320 in ten.
  for (let i = 0; i < 300; i++) pics.push([i / 30, 320]);
  for (let i = 0; i < 600; i++) pics.push([SETTLE_S + i / 30, i % 10 === 0 ? 320 : i % 2 ? 640 : 1280]);
  const r = ladderRun(viewer(pics, 29.9), 640);
  assert.equal(r.share, 540 / 600);
  assert.equal(r.fps, 29.9);
  assert.deepEqual(r.widths, { 320: 60, 640: 300, 1280: 240 });
  assert.equal(ladderRun(viewer(pics, 29.9), 1280).share, 240 / 600);
});

test('a viewer with nothing after the start shows nothing', () => {
  const r = ladderRun(viewer([[1, 640], [2, 640]], 2), 320);
  assert.equal(r.share, 0);
});
