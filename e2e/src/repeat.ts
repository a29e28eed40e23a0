// Repetitions of the full set (`layercast-e2e full --reps N`): era.md §5 asks every emulation
// check to run at least 5 times and report mean ± 95% CI, as the simulator's catalogue does over
// its seeds. One run of a scenario gives summary rows (full.ts `rowsOf`); this module folds the
// rows of N runs (seeds 1..N) into one row per measurement.
//
// Verdict over the runs, chosen to mean what a single run's verdict means:
// - a row whose verdict is a band on its numbers (a scenario measurement, or a derived row whose
//   pass is exactly "value in band") passes when the mean of every entity (receiver, flow) over
//   the runs lies in the band: the simulator's rule, and the one run's rule applied to the means;
// - a row whose verdict is not a band on one number (e.g. plm/E5's floor, which moves with the
//   PLM rate of the same run) passes only when it passed in every run;
// - a row without a verdict stays `info`.
// The value always says in how many single runs the row passed, so a mean that passes on the
// strength of most runs is visible as such.
import type { Row } from './full.js';
import { inBand } from './metrics.js';

/** One number behind a row: `entity` is the receiver or flow for per-entity measurements,
 *  null for one value per run. `pass` is that number's own verdict (null: no band). */
export interface Sample {
  entity: string | null;
  value: number;
  pass: boolean | null;
}

/** Two-sided 95 % Student t quantiles for 1..30 degrees of freedom. */
const T95 = [
  12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131, 2.12, 2.11, 2.101, 2.093, 2.086, 2.08,
  2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048, 2.045, 2.042,
];

/** Mean and the half-width of its 95 % confidence interval (Student t; 0 for one value).
 *  Non-finite values (a receiver that never reached a level) are left out of both. */
export function meanCi95(v: number[]): { mean: number; ci: number; n: number } {
  const f = v.filter(Number.isFinite);
  const n = f.length;
  if (n === 0) return { mean: NaN, ci: NaN, n };
  const mean = f.reduce((a, b) => a + b, 0) / n;
  if (n === 1) return { mean, ci: 0, n };
  const sd = Math.sqrt(f.reduce((a, b) => a + (b - mean) ** 2, 0) / (n - 1));
  const t = n - 1 <= T95.length ? T95[n - 2] : 1.96;
  return { mean, ci: (t * sd) / Math.sqrt(n), n };
}


const fmt = (x: number) => (!Number.isFinite(x) ? String(x) : Math.abs(x) >= 100 ? x.toFixed(1) : Math.abs(x) >= 1 ? x.toFixed(2) : x.toFixed(4));

/** Fold the rows of several runs of one scenario (`perRun[k]` = the rows of run k) into one row
 *  per (check, measurement), in the order they first appear. ERROR rows are kept one per run
 *  (with the run's number) and also fail the measurement they stand for. */
export function repeatRows(perRun: Row[][]): Row[] {
  const runs = perRun.length;
  const groups = new Map<string, Row[]>();
  const errors: Row[] = [];
  perRun.forEach((rows, k) => {
    for (const r of rows) {
      if (r.verdict === 'ERROR') {
        errors.push({ ...r, measurement: `${r.measurement} (run ${k + 1})` });
        continue;
      }
      const key = `${r.check}\u0000${r.scenario}\u0000${r.measurement}`;
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key)!.push(r);
    }
  });
  const out: Row[] = [];
  for (const rs of groups.values()) {
    const first = rs[0];
    const passed = rs.filter((r) => r.verdict === 'pass').length;
    const info = rs.every((r) => r.verdict === 'info');
    // Per entity, the values of every run, in first-seen order (named only when there are
    // several, as a single run's row does).
    const byEntity = new Map<string | null, number[]>();
    for (const r of rs) for (const s of r.samples ?? []) {
      if (!byEntity.has(s.entity)) byEntity.set(s.entity, []);
      byEntity.get(s.entity)!.push(s.value);
    }
    const stats = [...byEntity.entries()].map(([e, v]) => ({ entity: e, ...meanCi95(v) }));
    const banded = rs.every((r) => r.bandOnValue) && (first.min != null || first.max != null);
    let verdict: Row['verdict'];
    if (info) verdict = 'info';
    else if (rs.length < runs) verdict = 'FAIL'; // a run that produced no such row
    else if (banded) verdict = stats.length > 0 && stats.every((s) => Number.isFinite(s.mean) && inBand(s.mean, first.min, first.max)) ? 'pass' : 'FAIL';
    else verdict = passed === runs ? 'pass' : 'FAIL';
    const numbers = stats.length
      ? stats.map((s) => `${s.entity === null || stats.length === 1 ? '' : `${s.entity}=`}${fmt(s.mean)} ± ${fmt(s.ci)}${s.n < rs.length ? ` (${s.n} finite)` : ''}`).join(' ')
      : rs.map((r) => r.value).join(' | ');
    const bands = [...new Set(rs.map((r) => r.band))];
    out.push({
      ...first,
      value: info ? numbers : `${numbers} (${passed}/${runs} runs pass)`,
      band: bands.length === 1 ? first.band : `per run: ${bands.join(', ')}`,
      verdict,
      samples: undefined,
    });
  }
  return [...out, ...errors];
}
