// `make demo` end to end, shortened to 30 s with --duration (docs/demo.md): the demo scenario's
// four viewers behind 0.5, 1.5, 4 and 4 (+TCP) Mbit/s. Asserts what the demo is meant to show,
// read from the server's /api/viewers through the root-namespace dashboard link: every viewer
// reports, the one behind 0.5 Mbit/s holds fewer layers than the one behind 4 Mbit/s; and that
// teardown leaves no namespace and no root interface. Skipped while the media binaries are not
// built.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { findBinary } from '../src/bins.js';
import { listNamespaces } from '../src/netns.js';
import { iperfRateBps, meanLayers, runDemo } from '../src/demo.js';
import { run } from '../src/sh.js';
import { CHROMIUM_ARGS } from '../src/edge.js';
import { scratchDir } from './scratch.js';

const skip =
  !findBinary('layercast-server') || !findBinary('layercast-player') || !findBinary('layercast-linkemu')
    ? 'layercast-server / layercast-player / layercast-linkemu not built yet'
    : false;

const chromium = fs.existsSync('/usr/bin/chromium');

interface BrowserSeen {
  framesDecoded: number;
  width: number;
  height: number;
  audioPackets: number;
  error?: string;
}

/** Opens the watch page in headless Chromium and reads what it shows 15 s later. */
async function watch(url: string): Promise<BrowserSeen> {
  const { chromium: c } = await import('playwright-core');
  const b = await c.launch({ executablePath: '/usr/bin/chromium', headless: true, args: CHROMIUM_ARGS });
  try {
    const page = await b.newPage();
    await page.goto(url);
    await new Promise((res) => setTimeout(res, 15_000));
    return await page.evaluate(() => {
      const v = document.querySelector('video');
      const s = (window as unknown as { lc?: { stats?: { framesDecoded?: number; audioPacketsReceived?: number } } }).lc?.stats;
      return { framesDecoded: s?.framesDecoded ?? 0, width: v?.videoWidth ?? 0, height: v?.videoHeight ?? 0, audioPackets: s?.audioPacketsReceived ?? 0 };
    });
  } catch (e) {
    return { framesDecoded: 0, width: 0, height: 0, audioPackets: 0, error: String(e) };
  } finally {
    await b.close();
  }
}

test('iperf3 interval lines parse to bit/s', () => {
  assert.equal(iperfRateBps('[  5]   1.00-2.00   sec   238 KBytes  1.95 Mbits/sec    0   85.5 KBytes'), 1.95e6);
  assert.equal(iperfRateBps('[  5]   0.00-1.00   sec  61.2 KBytes   501 Kbits/sec'), 501e3);
  assert.equal(iperfRateBps('- - - - - - - -'), null);
});

test('demo: 0.5 Mbit/s viewer holds fewer layers than the 4 Mbit/s one; teardown leaves nothing', { skip }, async (t) => {
  const out = scratchDir('lc-e2e-demo-');
  const lines: string[] = [];
  // A browser viewer: headless Chromium on this machine opens the edge's watch page as soon
  // as the demo prints it, and reads the page's WebRTC stats 15 s later.
  let browser: Promise<BrowserSeen> | null = null;
  const onLine = (l: string) => {
    lines.push(l);
    const m = /^browser viewer: (\S+)/.exec(l);
    if (m && chromium && !browser) browser = watch(m[1]!);
  };
  const r = await runDemo({ durationS: 30, statusEveryS: 2, outDir: out, log: () => {}, out: onLine, display: '' });
  const ctx = `(output:\n${lines.join('\n')}\nlogs ${out})`;

  assert.match(r.url, /^http:\/\/10\.201\.\d+\.2:8080\/$/, ctx);
  assert.ok(lines.some((l) => l.startsWith('dashboard: http://')), ctx);
  if (r.source === 'synthetic') assert.ok(r.sourceNote && /synthetic/i.test(r.sourceNote), 'a synthetic run says so');

  // The last 10 s (after convergence): every viewer reported, and the ordering by bottleneck.
  const tail = r.samples.filter((s) => s.t >= 20);
  assert.ok(tail.length >= 3, `status samples after 20 s: ${tail.length} ${ctx}`);
  const last = tail[tail.length - 1].viewers.map((v) => v.id);
  for (const id of ['v500k', 'v1m5', 'v4m', 'v4m-tcp']) assert.ok(last.includes(id), `viewer ${id} in /api/viewers ${ctx}`);
  const m = meanLayers(r, 20);
  const slow = m.get('v500k')!;
  const fast = m.get('v4m')!;
  t.diagnostic(`source ${r.source}; mean layers over t >= 20 s: ${[...m].map(([k, v]) => `${k} ${v.toFixed(2)}`).join(', ')}`);
  assert.ok(slow >= 1, `the 0.5 Mbit/s viewer holds the base layer: ${slow} ${ctx}`);
  assert.ok(slow < fast, `layers 0.5 Mbit/s ${slow} < 4 Mbit/s ${fast} ${ctx}`);

  // The browser viewer, with a video source: pictures decoded at 320x180 or more, and sound.
  if (r.source !== 'synthetic') {
    assert.match(r.watchUrl ?? '', /^http:\/\/10\.201\.\d+\.2:\d+\/watch\/live$/, `the edge's watch page ${ctx}`);
    if (chromium) {
      const seen = await browser!;
      t.diagnostic(`browser viewer: ${JSON.stringify(seen)}`);
      assert.ok(seen.framesDecoded >= 150 && seen.height >= 180, `the browser shows the session: ${JSON.stringify(seen)} ${ctx}`);
      if (r.source === 'gst-testpattern') assert.ok(seen.audioPackets > 0, `the browser gets the sound: ${JSON.stringify(seen)}`);
    }
  }

  // Teardown: none of the run's namespaces, no lc- namespace of this process, no root veth.
  assert.ok(r.namespaces.length >= 6, `namespaces created: ${r.namespaces.join(' ')}`);
  const now = await listNamespaces();
  for (const ns of r.namespaces) assert.ok(!now.includes(ns), `namespace ${ns} still present`);
  assert.deepEqual(r.leftover, []);
  assert.equal((await run('ip', ['link', 'show', `lcd${process.pid % 10_000_000}`], { allowFail: true })).code !== 0, true, 'root veth removed');
  // and the dashboard address no longer answers
  await assert.rejects(fetch(`${r.url}api/viewers`, { signal: AbortSignal.timeout(1000) }));
});
