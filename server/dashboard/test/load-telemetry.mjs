#!/usr/bin/env node
// Test helper: N synthetic viewers posting contract telemetry (POST /api/telemetry) to a REAL
// layercast-server, each about every `periodMs`, so the dashboard can be checked at audience
// scale. Runs until killed. Usage: node load-telemetry.mjs BASE_URL N SESSION [periodMs]
const [base, nStr, session, periodStr] = process.argv.slice(2);
const n = Number(nStr);
const period = Number(periodStr ?? "1500");
const workers = 16;
let seed = 7;
const rand = () => ((seed = (seed * 1664525 + 1013904223) >>> 0) / 2 ** 32);
const viewers = Array.from({ length: n }, (_, i) => ({
  id: `load-${String(i).padStart(4, "0")}`,
  cap: 1 + Math.floor(rand() * 5),
  layers: 1,
  received: 0,
  lost: 0,
  frames: 0,
}));
let sent = 0;
let failed = 0;
async function post(v) {
  const now = Date.now() / 1000;
  const decisions = [];
  if (v.layers !== v.cap && rand() < 0.2) {
    const to = v.layers < v.cap ? v.layers + 1 : v.cap;
    decisions.push({ at_s: now, from: v.layers, to, reason: to > v.layers ? "synthetic join" : "synthetic leave", inputs: { cap: v.cap } });
    v.layers = to;
  }
  const rate = v.layers * 200_000;
  const loss = rand() < 0.1 ? rand() * 0.08 : 0;
  v.received += Math.round(rate / 8 / 512);
  v.lost += Math.round((rate / 8 / 512) * loss);
  v.frames += 30;
  const body = {
    viewer_id: v.id, session_id: session, protocol: "era", layers: v.layers, max_layers: 5, rate_bps: rate * (1 - loss),
    estimate_bps: v.cap * 210_000, loss_ratio: loss, packets_received: v.received, packets_lost: v.lost,
    width: 320 * Math.min(4, v.layers), height: 180 * Math.min(4, v.layers), fps: 30, frames: v.frames, freezes: 0, rtt_s: 0.02, decisions,
  };
  try {
    const r = await fetch(`${base}/api/telemetry`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    await r.arrayBuffer();
    if (r.ok) sent++;
    else failed++;
  } catch {
    failed++;
  }
}
async function worker(w) {
  for (;;) {
    const t0 = Date.now();
    for (let i = w; i < n; i += workers) await post(viewers[i]);
    const spare = period - (Date.now() - t0);
    if (spare > 0) await new Promise((r) => setTimeout(r, spare));
  }
}
setInterval(() => console.log(`sent ${sent} failed ${failed}`), 5000);
for (let w = 0; w < workers; w++) void worker(w);
