// Side by side: one scenario in the simulator (`layercast-sim run`) and on the testbed, one
// table (metric, sim, testbed, band, verdict). Both engines write summary.json with the same
// measurement ids and metric names (e2e/src/metrics.ts mirrors research/sim/src/metrics.rs),
// so the table is a join on the measurement id, plus each monitor's throughput and loss ratio.
import fs from 'node:fs';
import path from 'node:path';
import { findBinary } from './bins.js';
import { run } from './sh.js';
import { esc } from './report.js';
import type { Scenario } from './scenario.js';
import { runScenario, type RunOptions } from './runner.js';
import { appendToReport } from './quality.js';

/** The parts of either engine's summary.json the comparison reads. */
export interface EngineSummary {
  measurements: { id: string; metric: string; value: number | null; values?: [string, number | null][]; min?: number | null; max?: number | null; pass: boolean }[];
  monitors: { name: string; throughput_kbps: number | null; loss_ratio: number | null; final_layers?: number }[];
}

export interface CompareRow {
  id: string;
  metric: string;
  sim: number | null;
  testbed: number | null;
  band: string;
  simPass: boolean | null;
  testbedPass: boolean | null;
  /** both pass / both fail / sim only / testbed only / — (no band). */
  verdict: string;
}

const bandOf = (min?: number | null, max?: number | null) =>
  min == null && max == null ? '—' : min != null && max != null ? `[${min}, ${max}]` : min != null ? `≥ ${min}` : `≤ ${max}`;

/** serde writes NaN/inf as null; keep null as "no value". */
const val = (v: number | null | undefined) => (typeof v === 'number' ? v : null);

export function compareSummaries(sim: EngineSummary, tb: EngineSummary): CompareRow[] {
  const rows: CompareRow[] = [];
  const ids = [...sim.measurements.map((m) => m.id), ...tb.measurements.map((m) => m.id).filter((id) => !sim.measurements.some((s) => s.id === id))];
  for (const id of ids) {
    const s = sim.measurements.find((m) => m.id === id);
    const t = tb.measurements.find((m) => m.id === id);
    const ref = s ?? t!;
    const banded = ref.min != null || ref.max != null;
    const sp = s && banded ? s.pass : null;
    const tp = t && banded ? t.pass : null;
    rows.push({
      id,
      metric: ref.metric,
      sim: val(s?.value),
      testbed: val(t?.value),
      band: bandOf(ref.min, ref.max),
      simPass: sp,
      testbedPass: tp,
      verdict: !banded ? '—' : sp === null || tp === null ? 'missing' : sp && tp ? 'both pass' : !sp && !tp ? 'both fail' : sp ? 'sim only' : 'testbed only',
    });
  }
  for (const m of sim.monitors) {
    const t = tb.monitors.find((x) => x.name === m.name);
    for (const k of ['throughput_kbps', 'loss_ratio'] as const) {
      rows.push({ id: `monitor ${m.name}`, metric: k, sim: val(m[k]), testbed: val(t?.[k]), band: '—', simPass: null, testbedPass: null, verdict: '—' });
    }
  }
  return rows;
}

const f = (v: number | null) => (v === null ? 'n/a' : Math.abs(v) >= 100 ? v.toFixed(1) : Math.abs(v) >= 1 ? v.toFixed(3) : v.toFixed(4));

export function compareText(rows: CompareRow[]): string {
  const head = ['measurement', 'metric', 'sim', 'testbed', 'band', 'verdict'];
  const cells = rows.map((r) => [r.id, r.metric, f(r.sim), f(r.testbed), r.band, r.verdict]);
  const w = head.map((h, i) => Math.min(56, Math.max(h.length, ...cells.map((c) => c[i].length))));
  const line = (c: string[]) => c.map((x, i) => (x.length > w[i] ? x.slice(0, w[i] - 1) + '…' : x.padEnd(w[i]))).join('  ').trimEnd();
  return [line(head), w.map((n) => '-'.repeat(n)).join('  '), ...cells.map(line)].join('\n');
}

export function compareHtml(rows: CompareRow[], simDir: string): string {
  let h = `<h2>Simulator vs testbed</h2><p>Same scenario in <code>layercast-sim run</code> (outputs in ${esc(simDir)}) and on the testbed; same metric definitions.</p>`;
  h += '<table><tr><th>measurement</th><th>metric</th><th>sim</th><th>testbed</th><th>band</th><th>verdict</th></tr>';
  for (const r of rows) {
    const cls = r.verdict === 'both pass' ? 'pass' : r.verdict === '—' ? '' : 'fail';
    h += `<tr><td>${esc(r.id)}</td><td>${esc(r.metric)}</td><td>${f(r.sim)}</td><td>${f(r.testbed)}</td><td>${esc(r.band)}</td><td class="${cls}">${esc(r.verdict)}</td></tr>`;
  }
  return h + '</table>';
}

/** Runs the simulator on the scenario file, seed `seed`, into `outDir`/sim. */
export async function runSim(file: string, seed: number, outDir: string): Promise<EngineSummary> {
  const bin = findBinary('layercast-sim');
  if (!bin) throw new Error('layercast-sim not built (cargo build --release -p layercast-sim)');
  fs.mkdirSync(outDir, { recursive: true });
  // exit code 1 = some measurement out of band: still a result
  const r = await run(bin, ['run', file, '--seed', String(seed), '--out', outDir], { timeoutMs: 600_000, allowFail: true });
  const summary = path.join(outDir, 'summary.json');
  if (!fs.existsSync(summary)) throw new Error(`layercast-sim run ${file} wrote no summary: ${r.stderr.trim() || r.stdout.trim()}`);
  return JSON.parse(fs.readFileSync(summary, 'utf8')) as EngineSummary;
}

/** `layercast-e2e compare`: the simulator, then the testbed, then the table (printed, written
 *  to compare.txt/compare.json and appended to the testbed run's report.html). */
export async function compareScenario(file: string, sc: Scenario, opts: RunOptions): Promise<{ rows: CompareRow[]; text: string }> {
  const seed = opts.seed ?? 1;
  const simDir = path.join(opts.outDir, 'sim');
  const sim = await runSim(file, seed, simDir);
  const tb = await runScenario(sc, { ...opts, seed });
  const rows = compareSummaries(sim, tb as unknown as EngineSummary);
  const text = compareText(rows);
  fs.writeFileSync(path.join(opts.outDir, 'compare.txt'), text + '\n');
  fs.writeFileSync(path.join(opts.outDir, 'compare.json'), JSON.stringify(rows, null, 1));
  appendToReport(path.join(opts.outDir, 'report.html'), compareHtml(rows, simDir));
  return { rows, text };
}
