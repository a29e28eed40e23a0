// The per-run HTML report: measurement table with pass/fail, inline SVG charts (rate and
// layers per monitor, queue length per emulated link direction), link counters, notes.
import fs from 'node:fs';
import type { Scenario } from './scenario.js';
import type { Monitor } from './metrics.js';
import type { LinkSample, RunResult } from './runner.js';

const COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];

export const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

export interface Series {
  name: string;
  points: [number, number][];
  step?: boolean;
}

/** A line chart as an SVG string (no scripts, no external resources). */
export function svgChart(title: string, yLabel: string, series: Series[], xMax: number, w = 760, h = 240): string {
  const m = { l: 56, r: 150, t: 24, b: 32 };
  const pw = w - m.l - m.r;
  const ph = h - m.t - m.b;
  let yMax = 0;
  for (const s of series) for (const [, y] of s.points) if (Number.isFinite(y)) yMax = Math.max(yMax, y);
  yMax = yMax > 0 ? niceCeil(yMax * 1.05) : 1;
  xMax = xMax > 0 ? xMax : 1;
  const X = (x: number) => m.l + (x / xMax) * pw;
  const Y = (y: number) => m.t + ph - (y / yMax) * ph;
  let out = `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" font-family="sans-serif" font-size="11">`;
  out += `<text x="${m.l}" y="15" font-weight="bold">${esc(title)}</text>`;
  out += `<rect x="${m.l}" y="${m.t}" width="${pw}" height="${ph}" fill="none" stroke="#999"/>`;
  for (let i = 0; i <= 4; i++) {
    const yv = (yMax * i) / 4;
    out += `<line x1="${m.l}" x2="${m.l + pw}" y1="${Y(yv)}" y2="${Y(yv)}" stroke="#eee"/>`;
    out += `<text x="${m.l - 4}" y="${Y(yv) + 4}" text-anchor="end">${fmt(yv)}</text>`;
    const xv = (xMax * i) / 4;
    out += `<text x="${X(xv)}" y="${m.t + ph + 14}" text-anchor="middle">${fmt(xv)}</text>`;
  }
  out += `<text x="${m.l + pw / 2}" y="${h - 4}" text-anchor="middle">time (s)</text>`;
  out += `<text x="12" y="${m.t + ph / 2}" transform="rotate(-90 12 ${m.t + ph / 2})" text-anchor="middle">${esc(yLabel)}</text>`;
  series.forEach((s, i) => {
    const c = COLOURS[i % COLOURS.length];
    const pts: string[] = [];
    let prev: [number, number] | null = null;
    for (const p of s.points) {
      if (!Number.isFinite(p[1])) continue;
      if (s.step && prev) pts.push(`${X(p[0]).toFixed(1)},${Y(prev[1]).toFixed(1)}`);
      pts.push(`${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`);
      prev = p;
    }
    if (s.step && prev) pts.push(`${X(xMax).toFixed(1)},${Y(prev[1]).toFixed(1)}`);
    out += `<polyline fill="none" stroke="${c}" stroke-width="1.5" points="${pts.join(' ')}"/>`;
    out += `<rect x="${m.l + pw + 10}" y="${m.t + i * 14}" width="10" height="3" fill="${c}"/>`;
    out += `<text x="${m.l + pw + 24}" y="${m.t + i * 14 + 5}">${esc(s.name.slice(0, 20))}</text>`;
  });
  return out + '</svg>';
}

function niceCeil(v: number): number {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const k of [1, 2, 2.5, 5, 10]) if (k * p >= v) return k * p;
  return 10 * p;
}
const fmt = (v: number) => (Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 1 ? v.toFixed(1) : v.toFixed(2));

export function writeReport(file: string, sc: Scenario, r: RunResult, mons: Monitor[], links: LinkSample[]): void {
  const iv = sc.interval_s;
  const rate: Series[] = mons.map((m) => ({
    name: m.name,
    points: m.bytes.map((b, i) => [i * iv + iv / 2, (b * 8) / 1000 / iv] as [number, number]),
  }));
  const layered = mons.filter((m) => m.kind === 'layered');
  const layers: Series[] = layered.map((m) => ({ name: m.name, points: m.levels.map(([t, k]) => [t, k] as [number, number]), step: true }));
  const byLink = new Map<string, LinkSample[]>();
  for (const s of links) {
    const k = `${s.link} ${s.dir}`;
    if (!byLink.has(k)) byLink.set(k, []);
    byLink.get(k)!.push(s);
  }
  const queue: Series[] = [...byLink.entries()].map(([k, v]) => ({ name: k, points: v.map((s) => [s.t, s.queue_packets] as [number, number]) }));
  const util: Series[] = [...byLink.entries()].map(([k, v]) => ({
    name: k,
    points: v.slice(1).map((s, i) => [s.t, ((s.tx_bytes - v[i].tx_bytes) * 8) / 1000 / Math.max(1e-3, s.t - v[i].t)] as [number, number]),
  }));
  const passN = r.measurements.filter((m) => m.pass).length;
  const v = (x: number) => (Number.isFinite(x) ? (Math.abs(x) >= 100 ? x.toFixed(1) : x.toFixed(4)) : String(x));
  let html = `<!doctype html><html><head><meta charset="utf-8"><title>${esc(sc.name)}: testbed run</title>
<style>body{font-family:sans-serif;margin:20px;max-width:1000px}table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}.pass{color:#080}.fail{color:#c00;font-weight:bold}</style></head><body>`;
  html += `<h1>${esc(sc.name)}</h1><p>${esc(sc.title)}</p><p>Source: ${esc(sc.source)}. Engine: namespace testbed, seed ${r.seed}, ${sc.duration_s} s. Measurements: ${passN}/${r.measurements.length} pass.</p>`;
  html += '<h2>Measurements</h2><table><tr><th>id</th><th>metric</th><th>value</th><th>band</th><th>verdict</th><th>published</th></tr>';
  for (const m of r.measurements) {
    html += `<tr><td>${esc(m.id)}</td><td>${esc(m.metric)}</td><td>${v(m.value)}</td><td>[${m.min ?? ''}, ${m.max ?? ''}]</td><td class="${m.pass ? 'pass' : 'fail'}">${m.pass ? 'pass' : 'fail'}${!m.pass && m.known_issue ? ` (known issue: ${esc(m.known_issue)})` : ''}</td><td>${esc(m.published)}</td></tr>`;
  }
  html += '</table><h2>Charts</h2>';
  html += svgChart('Received rate per monitor', 'kbit/s', rate, sc.duration_s);
  if (layers.length) html += svgChart('Layers held', 'layers', layers, sc.duration_s);
  if (util.length) html += svgChart('Link output rate (emulator)', 'kbit/s', util, sc.duration_s);
  if (queue.length) html += svgChart('Queue length (emulator)', 'packets', queue, sc.duration_s);
  html += '<h2>Monitors</h2><table><tr><th>name</th><th>kind</th><th>start s</th><th>kbit/s</th><th>loss ratio</th><th>received</th><th>lost</th><th>final layers</th><th>note</th></tr>';
  for (const m of r.monitors) {
    html += `<tr><td>${esc(m.name)}</td><td>${m.kind}</td><td>${m.start_s?.toFixed(2) ?? ''}</td><td>${v(m.throughput_kbps)}</td><td>${v(m.loss_ratio)}</td><td>${m.received}</td><td>${m.lost}</td><td>${m.final_layers}</td><td>${esc(m.not_run ?? '')}</td></tr>`;
  }
  html += '</table><h2>Links</h2><table><tr><th>direction</th><th>kind</th><th>sent packets</th><th>utilisation</th><th>overflow drops</th><th>early drops</th><th>wire losses</th><th>release error p50/p99 µs</th></tr>';
  for (const l of r.links) {
    html += `<tr><td>${esc(l.name)}</td><td>${l.kind}</td><td>${l.sent_packets}</td><td>${v(l.utilisation)}</td><td>${l.drops_overflow}</td><td>${l.drops_early}</td><td>${l.drops_wire}</td><td>${l.release_error_p50_us ?? ''}/${l.release_error_p99_us ?? ''}</td></tr>`;
  }
  html += '</table>';
  if (r.notes.length) html += `<h2>Notes</h2><ul>${r.notes.map((n) => `<li>${esc(n)}</li>`).join('')}</ul>`;
  html += '</body></html>\n';
  fs.writeFileSync(file, html);
}
