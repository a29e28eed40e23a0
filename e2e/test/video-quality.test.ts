// The scripted quality test of docs/testbed.md (e2e/examples/quality-test.ts) for real: a VP9
// SVC sender with QR-stamped frames and a reference, two players behind 600 kbit/s and 4 Mbit/s,
// PSNR against the reference at each player's resolution. Skipped, with the reason, when the
// media binaries are not built or the server build writes no reference.y4m (a failure instead
// under make test, LAYERCAST_REQUIRE_BINS=1).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { execFileSync } from 'node:child_process';
import { qualityTest, SMALL_VIDEO } from '../examples/quality-test.js';
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

test('scripted quality test: per-player PSNR at the layers each bottleneck carries', { skip: ready ?? false, timeout: 180_000 }, async (t) => {
  // The small encode keeps the suite's cost; e2e/examples/quality-test.ts runs the default.
  const r = await qualityTest({ seconds: 15, source: 'testpattern', video: SMALL_VIDEO, packetSize: 1200 });
  if (r.skipped) {
    // Under make test the media binaries are this tree's: a server without reference output
    // is a regression there, not a reason to skip.
    assert.ok(process.env.LAYERCAST_REQUIRE_BINS !== '1', r.skipped);
    t.skip(r.skipped);
    return;
  }
  const v = r.players.map((q) => `${q.player}: ${q.compared}/${q.pictures} pictures, PSNR ${q.psnrMeanDb.toFixed(2)} dB, SSIM ${q.ssimMean.toFixed(3)}, ${q.freezes} freezes, harmonic ${q.harmonicFps.toFixed(1)} fps, latency p50 ${q.latencyP50Ms?.toFixed(0)} ms`).join('; ');
  recordAcceptance('issue7/video-quality', v, r.failures.length === 0, 'npm test -w e2e (test/video-quality.test.ts)');
  assert.deepEqual(r.failures, [], v);
  // The fast viewer shows the top spatial layer, the slow one less: the bottlenecks matter.
  const fast = r.players.find((q) => q.player === 'fast')!;
  const slow = r.players.find((q) => q.player === 'slow')!;
  assert.ok(Math.max(...fast.byLayers.map((x) => x.width)) > Math.max(...slow.byLayers.map((x) => x.width)), v);
  fs.rmSync(r.outDir, { recursive: true, force: true });
});
