// The full emulation set (`layercast-e2e full`, `make e2e-full`): the specs' emulation checks on
// the namespace testbed, one summary table (check, measurement, value, band, verdict), each check
// recorded for docs/acceptance.md under its spec id.
//
// Which scenarios: every file in research/scenarios/ (the shared catalogue) and e2e/scenarios/ (checks
// that exist only on the emulated network, e.g. plm.md's E-checks and delay-based.md's DE-checks)
// with a measurement whose id starts with one of FULL_CHECKS; `--all` runs every scenario except
// the simulator's self-tests. A check's verdict is pass when every banded measurement of it
// passes; measurements without a band are reported ("info") and do not decide it.
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { repoRoot, requireBinary } from './bins.js';
import { loadScenario, type Scenario } from './scenario.js';
import { runScenario, type RunResult } from './runner.js';
import { measureLeaveLatency } from './leave.js';
import { recordAcceptance } from './acceptance.js';
import { checkHook, plmDelayDerived } from './plm-delay-checks.js';
import type { DerivedRow } from './tfmcc.js';
import { AGGREGATE, inBand, type MeasResult } from './metrics.js';
import { repeatRows, type Sample } from './repeat.js';

/** The issue-24 checks: each RMCAT case on FIFO and FQ-CoDel, the TCP model scenarios. */
export function ISSUE24_CHECKS(): string[] {
  const cases = ['variable-capacity', 'three-sessions', 'rtt-fairness', 'long-cubic', 'long-bbr', 'short-tcp', 'pause-resume'];
  return [
    ...cases.flatMap((c) => [`issue24/${c}-fifo`, `issue24/${c}-fqcodel`]),
    ...['cubic-1', 'cubic-2', 'bbr-1', 'bbr-2'].map((m) => `issue24/tcp-model-${m}`),
    'issue24/demo-v4m-tcp',
  ];
}

/** The checks the full set must report (issue 7): ERA §5, PLM §9.B with FQ and the FIFO
 *  comparison, the delay-based scheme's §10.B. */
export const FULL_CHECKS = [
  'era/AC-2', 'era/AC-3', 'era/AC-4', 'era/AC-5', 'era/AC-6', 'era/AC-8', 'era/AC-9', 'era/AC-10', 'era/AC-12', 'era/AC-14',
  'plm/E0', 'plm/E2', 'plm/E5', 'plm/E13',
  'delay/DE1', 'delay/DE2', 'delay/DE6',
  // Derived in src/plm-delay-checks.ts (captures, emulator rules, player decisions).
  'era/AC-13', 'plm/E1', 'plm/E3', 'plm/E4', 'plm/E6', 'plm/E7', 'plm/E8', 'plm/E9', 'plm/E10', 'plm/E11', 'plm/E12',
  'delay/DE0', 'delay/DE3', 'delay/DE4', 'delay/DE5', 'delay/DE7', 'delay/DE8',
  'tfmcc/E6', 'tfmcc/E7', 'tfmcc/E9', 'tfmcc/E10', 'tfmcc/E11', 'tfmcc/E12', 'tfmcc/E13', 'tfmcc/E14', 'tfmcc/E15', 'tfmcc/E16',
  // Issue 24: LCC's RMCAT set (research/scenarios/rmcat-*.yaml, `make rmcat`) and the Linux TCP model check.
  ...ISSUE24_CHECKS(),
];

/** Checks of FULL_CHECKS that the simulator's catalogue records under the same id. */
export const SIM_ALSO = ['era/AC-2', 'era/AC-3', 'era/AC-4', 'era/AC-6', 'era/AC-8', 'era/AC-9', 'era/AC-10', 'era/AC-12', ...ISSUE24_CHECKS()];

export const SCENARIO_DIRS = [path.join(repoRoot, 'research', 'scenarios'), path.join(repoRoot, 'e2e', 'scenarios')];

export interface Row {
  check: string;
  scenario: string;
  measurement: string;
  value: string;
  band: string;
  verdict: 'pass' | 'FAIL' | 'info' | 'ERROR';
  note: string;
  /** The numbers behind the row and its band, for folding several runs (src/repeat.ts). */
  samples?: Sample[];
  min?: number | null;
  max?: number | null;
  /** The verdict is exactly "every sample in [min, max]", so a mean over runs can be judged
   *  the same way; false where it depends on more (plm/E5's per-run floor). */
  bandOnValue?: boolean;
}

/** The check id of a measurement: its first word (`era/AC-2 time to 15 layers` → `era/AC-2`). */
export const checkOf = (measurementId: string) => measurementId.trim().split(/\s+/)[0];

/** The scenarios of the set; a file the testbed cannot read is listed in `unreadable` (and
 *  becomes an ERROR row in `runFull`) instead of stopping the whole set. */
export function fullScenarios(all = false, unreadable: string[] = []): { file: string; sc: Scenario }[] {
  const out: { file: string; sc: Scenario }[] = [];
  for (const dir of SCENARIO_DIRS) {
    if (!fs.existsSync(dir)) continue;
    for (const f of fs.readdirSync(dir).filter((x) => x.endsWith('.yaml')).sort()) {
      const file = path.join(dir, f);
      let sc: Scenario;
      try {
        sc = loadScenario(file);
      } catch (e) {
        unreadable.push(`${f}: ${(e as Error).message}`);
        continue;
      }
      if (sc.name.startsWith('sim-')) continue;
      // The catalogue's TFMCC scenarios are simulator experiments (up to 10,000 receivers);
      // the testbed runs the TFMCC files that name an emulation check (tfmcc/E<n>).
      if (sc.flows.some((x) => x.type === 'tfmcc') && !sc.measurements.some((m) => checkOf(m.id).startsWith('tfmcc/E'))) continue;
      if (all || sc.measurements.some((m) => FULL_CHECKS.includes(checkOf(m.id)))) out.push({ file, sc });
    }
  }
  return out;
}

const fmtV = (x: number) => (!Number.isFinite(x) ? String(x) : Math.abs(x) >= 100 ? x.toFixed(1) : Math.abs(x) >= 1 ? x.toFixed(2) : x.toFixed(4));
const band = (min: number | null | undefined, max: number | null | undefined) =>
  min == null && max == null ? '—' : min != null && max != null ? `[${min}, ${max}]` : min != null ? `≥ ${min}` : `≤ ${max}`;

/** Rows of one scenario run. */
export function rowsOf(sc: Scenario, r: RunResult): Row[] {
  const rows: Row[] = r.measurements.map((m) => ({
    check: checkOf(m.id),
    scenario: sc.name,
    measurement: m.id.slice(checkOf(m.id).length).trim(),
    value: m.values.length > 1 ? m.values.map(([n, v]) => `${n.split('/').pop() === 'rcv' ? n.split('/')[0] : n}=${fmtV(v)}`).join(' ') : fmtV(m.value),
    band: band(m.min, m.max),
    verdict: m.min == null && m.max == null ? 'info' : m.pass ? 'pass' : 'FAIL',
    note: m.known_issue ?? '',
    ...measSamples(m),
  }));
  rows.push(...derivedRows(sc, r));
  for (const mon of r.monitors) if (mon.not_run) rows.push({ check: rows[0]?.check ?? sc.name, scenario: sc.name, measurement: `monitor ${mon.name} not run`, value: '', band: '', verdict: 'ERROR', note: mon.not_run });
  return rows;
}

/** The numbers of one scenario measurement: one per entity where the verdict is every
 *  entity's value in band (metrics.ts), else the one aggregate value. */
function measSamples(m: MeasResult): Pick<Row, 'samples' | 'min' | 'max' | 'bandOnValue'> {
  const banded = m.min != null || m.max != null;
  const samples: Sample[] = !AGGREGATE.includes(m.metric) && m.values.length
    ? m.values.map(([n, v]) => ({ entity: n.split('/').pop() === 'rcv' ? n.split('/')[0] : n, value: v, pass: banded ? inBand(v, m.min, m.max) : null }))
    : [{ entity: null, value: m.value, pass: banded ? m.pass : null }];
  return { samples, min: m.min, max: m.max, bandOnValue: true };
}

/** Conditions a spec states that the scenario metrics cannot express. plm.md E5: each TCP's
 *  mean ≥ 0.9 × (300 − PLM rate) / #TCP over the same window (TCP-fairness towards PLM). */
export function derivedRows(sc: Scenario, r: RunResult): Row[] {
  const out: Row[] = [];
  for (const d of r.tfmcc_checks ?? []) {
    out.push(derivedRow(sc, d));
  }
  const plm = r.measurements.find((m) => m.id.startsWith('plm/E5 PLM rate'));
  const tcp = r.measurements.find((m) => m.id.startsWith('plm/E5 TCP rates'));
  if (plm && tcp && tcp.values.length) {
    const floor = (0.9 * (300 - plm.value)) / tcp.values.length;
    const ok = tcp.values.every(([, v]) => v >= floor);
    out.push({
      check: 'plm/E5',
      scenario: sc.name,
      measurement: 'each TCP ≥ 0.9 × (300 − PLM) / #TCP, 65-100 s (kbit/s)',
      value: tcp.values.map(([n, v]) => `${n}=${fmtV(v)}`).join(' '),
      band: `≥ ${fmtV(floor)}`,
      verdict: ok ? 'pass' : 'FAIL',
      note: '',
      samples: tcp.values.map(([n, v]) => ({ entity: n, value: v, pass: v >= floor })),
      bandOnValue: false,
    });
  }
  return out;
}

/** A row derived outside the scenario metrics (src/tfmcc.ts, src/plm-delay-checks.ts). */
export function derivedRow(sc: Scenario, d: DerivedRow): Row {
  return {
    check: d.check,
    scenario: sc.name,
    measurement: d.measurement,
    value: d.text,
    band: band(d.min, d.max),
    verdict: d.pass === null ? 'info' : d.pass ? 'pass' : 'FAIL',
    note: '',
    samples: [{ entity: null, value: d.value, pass: d.pass }],
    min: d.min,
    max: d.max,
    // Some derived checks decide on more than their headline number (tfmcc.ts: a share of
    // samples, a bound from the run); only "value in band" can be judged on a mean.
    bandOnValue: d.pass === null || d.pass === (Number.isFinite(d.value) && inBand(d.value, d.min, d.max)),
  };
}

/** One aligned text table. */
export function summaryTable(rows: Row[]): string {
  const head = ['check', 'scenario', 'measurement', 'value', 'band', 'verdict'];
  const cells = rows.map((r) => [r.check, r.scenario, r.measurement, r.value, r.band, r.verdict + (r.verdict === 'FAIL' && r.note ? ' (known issue)' : '')]);
  const w = head.map((h, i) => Math.min(60, Math.max(h.length, ...cells.map((c) => c[i].length))));
  const line = (c: string[]) => c.map((x, i) => (x.length > w[i] ? x.slice(0, w[i] - 1) + '…' : x.padEnd(w[i]))).join('  ').trimEnd();
  return [line(head), w.map((n) => '-'.repeat(n)).join('  '), ...cells.map(line)].join('\n');
}

/** Per check: pass if every banded row passes (null if it has none), value = the rows joined. */
export function checkVerdicts(rows: Row[], head = 'testbed'): { check: string; value: string; pass: boolean | null }[] {
  const by = new Map<string, Row[]>();
  for (const r of rows) {
    if (!by.has(r.check)) by.set(r.check, []);
    by.get(r.check)!.push(r);
  }
  return [...by.entries()].map(([check, rs]) => {
    const banded = rs.filter((r) => r.verdict !== 'info');
    return {
      check,
      value: `${head}: ` + rs.map((r) => `${r.measurement}: ${r.value}${r.verdict === 'info' ? '' : ` (${r.verdict})`}`).join('; '),
      pass: banded.length ? banded.every((r) => r.verdict === 'pass') : null,
    };
  });
}

/** Options of [`runFull`]. */
export interface FullOptions {
  outDir: string;
  all?: boolean;
  only?: string[];
  /** Run `layercast-linkemu keep-awake` (one SCHED_IDLE spinner per CPU) for the whole run, as
   *  `make test` runs its e2e suite: on this VM an idle vCPU halts and wakes milliseconds late
   *  for the link emulator's release timers, which stretches packet pairs (plm/E2 on the idle
   *  machine: 60 layer changes per minute without, 0 with; docs/testbed.md). The CLI turns it
   *  on unless `--no-keep-awake`. Default off (a caller may run its own spinners). */
  keepAwake?: boolean;
  /** Runs per scenario (seeds 1..reps), folded into mean ± 95% CI (src/repeat.ts); era.md §5
   *  asks for at least 5. Default 1. */
  reps?: number;
  log?: (s: string) => void;
}

export async function runFull(opts: FullOptions): Promise<{ rows: Row[]; fails: number }> {
  if (!opts.keepAwake) return runFullInner(opts);
  const spinner = spawn(requireBinary('layercast-linkemu'), ['keep-awake'], { stdio: 'ignore' });
  try {
    return await runFullInner(opts);
  } finally {
    spinner.kill('SIGTERM');
  }
}

async function runFullInner(opts: FullOptions): Promise<{ rows: Row[]; fails: number }> {
  const log = opts.log ?? ((s: string) => console.log(s));
  if (opts.keepAwake) log('keep-awake: one SCHED_IDLE spinner per CPU for the whole run');
  fs.mkdirSync(opts.outDir, { recursive: true });
  const rows: Row[] = [];
  const t0 = Date.now();
  const lq = await measureLeaveLatency({ fastLeave: true, outDir: path.join(opts.outDir, 'leave') });
  log(`leave latency (mrouter, fast leave): join median ${lq.join_ms_median.toFixed(1)} ms, leave median ${lq.leave_ms_median.toFixed(1)} ms, max ${lq.leave_ms_max.toFixed(1)} ms`);
  rows.push({ check: 'era/AC-14', scenario: 'leave-latency', measurement: 'last leave → last packet on the bottleneck, max (ms)', value: fmtV(lq.leave_ms_max), band: '≤ 200', verdict: lq.leave_ms_max <= 200 ? 'pass' : 'FAIL', note: '' });
  rows.push({ check: 'plm/E0', scenario: 'leave-latency', measurement: 'join → first packet, median (ms)', value: fmtV(lq.join_ms_median), band: '≤ 50', verdict: lq.join_ms_median <= 50 ? 'pass' : 'FAIL', note: '' });
  rows.push({ check: 'plm/E0', scenario: 'leave-latency', measurement: 'leave → traffic stops downstream, max (ms)', value: fmtV(lq.leave_ms_max), band: '≤ 200', verdict: lq.leave_ms_max <= 200 ? 'pass' : 'FAIL', note: '' });
  const unreadable: string[] = [];
  let list = fullScenarios(opts.all, unreadable);
  for (const u of unreadable) rows.push({ check: 'scenario', scenario: u.split(':')[0], measurement: 'load', value: '', band: '', verdict: 'ERROR', note: u });
  if (opts.only?.length) list = list.filter((x) => opts.only!.some((o) => x.sc.name.includes(o)));
  const reps = Math.max(1, Math.floor(opts.reps ?? 1));
  const perRunRows: Record<string, Row[][]> = {};
  for (const { sc } of list) {
    const perRun: Row[][] = [];
    for (let seed = 1; seed <= reps; seed++) {
      log(`== ${sc.name} (${sc.duration_s} s)${reps > 1 ? `, run ${seed}/${reps}` : ''}`);
      try {
        const dir = path.join(opts.outDir, reps > 1 ? `${sc.name}-seed${seed}` : sc.name);
        const r = await runScenario(sc, { outDir: dir, seed, onBuilt: checkHook(sc, dir) });
        const rs = [...rowsOf(sc, r), ...(await plmDelayDerived(sc, r, dir)).map((d) => derivedRow(sc, d))];
        for (const x of rs) log(`${x.verdict.padEnd(5)} ${x.check} ${x.measurement}: ${x.value} ${x.band}`);
        perRun.push(rs);
      } catch (e) {
        const check = sc.measurements.map((m) => checkOf(m.id)).find((c) => FULL_CHECKS.includes(c)) ?? sc.name;
        perRun.push([{ check, scenario: sc.name, measurement: 'run', value: '', band: '', verdict: 'ERROR', note: (e as Error).message }]);
        log(`ERROR ${sc.name}: ${(e as Error).message}`);
      }
    }
    perRunRows[sc.name] = perRun;
    if (reps === 1) rows.push(...perRun[0]);
    else {
      const folded = repeatRows(perRun);
      log(`-- ${sc.name} over ${reps} runs (mean ± 95% CI):`);
      for (const x of folded) log(`${x.verdict.padEnd(5)} ${x.check} ${x.measurement}: ${x.value} ${x.band}`);
      rows.push(...folded);
    }
  }
  const cmd = `npm run full -w e2e${reps > 1 ? ` -- --reps ${reps}` : ''} (make e2e-full)${opts.keepAwake ? ', keep-awake' : ', no keep-awake'}`;
  const verdicts = checkVerdicts(rows, reps > 1 ? `testbed, ${reps} runs (seeds 1-${reps}), mean ± 95% CI` : 'testbed');
  // Checks the simulator's catalogue also measures are recorded as `<id>@testbed`, so that the
  // table keeps both results instead of whichever ran last (scripts/acceptance.mjs shows them
  // as two rows).
  for (const v of verdicts) recordAcceptance(SIM_ALSO.includes(v.check) ? `${v.check}@testbed` : v.check, v.value, v.pass, cmd);
  const missing = FULL_CHECKS.filter((c) => !verdicts.some((v) => v.check === c));
  const table = summaryTable(rows);
  const wall = (Date.now() - t0) / 1000;
  const text = `${table}\n\nchecks: ${verdicts.map((v) => `${v.check} ${v.pass === null ? 'info' : v.pass ? 'pass' : 'FAIL'}`).join(', ')}` +
    (missing.length ? `\nnot measured: ${missing.join(', ')}` : '') + `\nwall time ${wall.toFixed(0)} s\n`;
  fs.writeFileSync(path.join(opts.outDir, 'summary.txt'), text);
  fs.writeFileSync(path.join(opts.outDir, 'summary.json'), JSON.stringify({ reps, rows, verdicts, missing, wall_s: wall, ...(reps > 1 ? { runs: perRunRows } : {}) }, null, 1));
  log('\n' + text);
  return { rows, fails: rows.filter((r) => r.verdict === 'FAIL' || r.verdict === 'ERROR').length };
}
