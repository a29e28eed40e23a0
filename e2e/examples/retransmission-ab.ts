// Run: cd e2e && node --import tsx examples/retransmission-ab.ts [RUNS] (as root, under the heavy lock).
// A/B of the scripted quality test's slow viewer (600 kbit/s, testpattern, SMALL_VIDEO, 20 s):
// with and without retransmission, alternating, N runs each.
import { qualityTest, SMALL_VIDEO } from './quality-test.js';
const n = Number(process.argv[2] ?? 4);
for (let i = 0; i < n; i++) {
  for (const rtx of [true, false]) {
    const r = await qualityTest({
      seconds: 20, source: 'testpattern', video: SMALL_VIDEO, packetSize: 1200,
      viewers: [{ name: 'slow', bottleneckKbps: 600, minPsnrDb: 0 }, { name: 'fast', bottleneckKbps: 4000, minPsnrDb: 0 }],
      outDir: `${process.env.OUT ?? 'runs/retransmission-ab'}/${rtx ? 'rtx' : 'base'}-${i}`,
      playerArgs: rtx ? [] : ['--no-retransmission'],
      log: () => {},
    });
    for (const q of r.players) {
      const line = `${rtx ? 'rtx ' : 'base'} run ${i} ${q.player}: fps ${q.source?.fpsRatio.toFixed(3)} freezes ${q.freezes} (${q.freezesPerMin.toFixed(1)}/min, longest ${q.longestFreezeS.toFixed(2)}) PSNR ${q.psnrMeanDb.toFixed(2)} p50/p95 ${q.latencyP50Ms?.toFixed(0)}/${q.latencyP95Ms?.toFixed(0)} lost ${q.packets?.lost} fec ${q.packets?.fecRecovered} rtx ${q.packets?.retransmitted}`;
      console.log(line);
    }
  }
}
