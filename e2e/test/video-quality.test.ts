// The scripted quality test of docs/testbed.md (e2e/examples/quality-test.ts) for real: a VP9
// SVC sender with QR-stamped frames and a reference, players behind 600 kbit/s, 4 Mbit/s, and
// 4 Mbit/s with 1 % random loss: the 20-s version of issue 20's clean-path and 1 %-loss cases,
// on the quality suite's encode (the natural clip, 640x360 L3T2 at 30 fps, 1200-byte packets),
// asserting on what each viewer sees: PSNR and picture size, shown frame rate against the
// source's, freezes, PSNR lost to the path and glass-to-glass latency (bounds and why:
// docs/testbed.md "Bounds of the fast quality test"). Skipped, with the reason, when the media
// binaries or the clip are missing or the server build writes no reference.y4m (a failure
// instead under make test, LAYERCAST_REQUIRE_BINS=1).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { execFileSync } from 'node:child_process';
import { qualityTest, CLIP, SMALL_VIDEO, DEFAULT_VIEWERS, type Viewer } from '../examples/quality-test.js';
import { psnrDropDb, SUITE_FPS } from '../src/quality-suite.js';
import { findBinary } from '../src/bins.js';
import { recordAcceptance } from '../src/acceptance.js';

const ready = (() => {
  if (process.getuid?.() !== 0) return 'needs root (network namespaces)';
  for (const b of ['layercast-server', 'layercast-player', 'layercast-linkemu']) if (!findBinary(b)) return `${b} not built`;
  try {
    execFileSync('ffmpeg', ['-version'], { stdio: 'ignore' });
  } catch {
    return 'ffmpeg not installed';
  }
  return null;
})();

// make test sets LAYERCAST_REQUIRE_BINS=1: there a missing binary is a failure, not a skip.
test('media binaries are there when make test requires them', { skip: process.env.LAYERCAST_REQUIRE_BINS !== '1' }, () => {
  assert.ok(!ready || ready.startsWith('needs root'), ready ?? '');
});

// What the viewers must see (docs/testbed.md "Bounds of the fast quality test"): issue 20's
// targets (the clean 4 Mbit/s viewer: no freeze, at least 0.97 of the source's frame rate,
// glass-to-glass p50 at most 100 ms and p95 at most 200; the 1 %-loss one: at most one freeze a
// minute, which in 20 s is none, and PSNR within 1 dB of the clean one's at the same picture
// size), floors under today's values for the rest: the lossy viewer's latency (no target) and
// the 600 kbit/s viewer, which is no case of the issue.
const BOUNDS: Record<string, Pick<Viewer, 'minFpsRatio' | 'maxFreezesPerMin' | 'maxLongestFreezeS' | 'maxLatencyP95Ms' | 'maxLatencyP50Ms'>> = {
  slow: { minFpsRatio: 0.8, maxFreezesPerMin: 30, maxLongestFreezeS: 2, maxLatencyP95Ms: 500 },
  fast: { minFpsRatio: 0.97, maxFreezesPerMin: 0, maxLongestFreezeS: 0, maxLatencyP95Ms: 200, maxLatencyP50Ms: 100 },
  loss1: { minFpsRatio: 0.5, maxFreezesPerMin: 1, maxLongestFreezeS: 2, maxLatencyP95Ms: 500 },
};
/** PSNR the 1 %-loss viewer may lose to its path, against the clean one at the same size. */
const MAX_LOSS1_PSNR_DROP_DB = 1;

test('scripted quality test: what each viewer sees behind each bottleneck', { skip: ready ?? false, timeout: 180_000 }, async (t) => {
  // The small encode keeps the suite's cost; e2e/examples/quality-test.ts runs the default.
  const viewers: Viewer[] = [
    ...DEFAULT_VIEWERS.map((v) => ({ ...v, ...BOUNDS[v.name] })),
    { name: 'loss1', bottleneckKbps: 4000, lossPct: 1, minPsnrDb: 24, minWidth: 320, ...BOUNDS.loss1 },
  ];
  if (!fs.existsSync(CLIP)) {
    // scripts/setup.sh fetches it; without it the run would be the test pattern's, which the
    // bounds are not about.
    assert.ok(process.env.LAYERCAST_REQUIRE_BINS !== '1', `${CLIP} missing (scripts/setup.sh fetches it)`);
    t.skip(`${CLIP} missing (scripts/setup.sh fetches it)`);
    return;
  }
  const r = await qualityTest({ seconds: 20, source: 'clip', video: { ...SMALL_VIDEO, fps: SUITE_FPS }, packetSize: 1200, viewers });
  if (r.skipped) {
    // Under make test the media binaries are this tree's: a server without reference output
    // is a regression there, not a reason to skip.
    assert.ok(process.env.LAYERCAST_REQUIRE_BINS !== '1', r.skipped);
    t.skip(r.skipped);
    return;
  }
  let v = r.players
    .map(
      (q) =>
        `${q.player}: ${q.compared}/${q.pictures} pictures, PSNR ${q.psnrMeanDb.toFixed(2)} dB, SSIM ${q.ssimMean.toFixed(3)}, ` +
        `fps ${q.meanFps.toFixed(1)} = ${q.source?.fpsRatio.toFixed(3) ?? '—'} of the source's at the held layer, ` +
        `${q.freezes} freezes (${q.freezesPerMin.toFixed(1)}/min, longest ${q.longestFreezeS.toFixed(2)} s), ${q.backwards} shown out of order, harmonic ${q.harmonicFps.toFixed(1)} fps, ` +
        `latency p50/p95 ${q.latencyP50Ms?.toFixed(0)}/${q.latencyP95Ms?.toFixed(0)} ms (${q.timeBase}), lost ${q.packets?.lost ?? '—'}, FEC-recovered ${q.packets?.fecRecovered ?? '—'}`,
    )
    .join('; ');
  const fast = r.players.find((q) => q.player === 'fast');
  const loss1 = r.players.find((q) => q.player === 'loss1');
  const drop = fast && loss1 ? psnrDropDb(loss1, fast) : NaN;
  const failures = [...r.failures];
  if (!(drop <= MAX_LOSS1_PSNR_DROP_DB)) failures.push(`loss1: PSNR ${drop.toFixed(2)} dB below the clean viewer's at the same size (bound ${MAX_LOSS1_PSNR_DROP_DB} dB)`);
  v += `; loss1 PSNR ${drop.toFixed(2)} dB below fast at the same size`;
  const cmd = 'npm test -w e2e (test/video-quality.test.ts)';
  // issue7's check is the two original viewers' PSNR and picture size.
  const widthFails = r.failures.filter((f) => /^(slow|fast): .*(PSNR|widest|compared|frames.csv)/.test(f));
  recordAcceptance('issue7/video-quality', v, widthFails.length === 0, cmd);
  recordAcceptance('issue20/fast-clean-loss1', v, failures.length === 0, cmd);
  assert.deepEqual(failures, [], v);
  // The fast viewer shows the top spatial layer, the slow one less: the bottlenecks matter.
  const slow = r.players.find((q) => q.player === 'slow')!;
  assert.ok(Math.max(...fast!.byLayers.map((x) => x.width)) > Math.max(...slow.byLayers.map((x) => x.width)), v);
  fs.rmSync(r.outDir, { recursive: true, force: true });
});
