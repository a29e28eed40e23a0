// The TFMCC emulation checks (tfrc-tfmcc-pcc.md §7.3) with repetitions: runs each
// e2e/scenarios/tfmcc-e*.yaml N times (seeds 1..N), reports every measurement as mean ± sd over
// the runs and records one acceptance entry per check (tfmcc/E<n>) for docs/acceptance.md.
//
//   node --import tsx e2e/src/tfmcc-checks.ts [--reps N] [--only e6,e16] [--out DIR]
//
// Verdict of a check: every banded measurement's mean over the runs lies in its band (the spec
// asks for mean ± sd over repetitions); the value string also says how many single runs were
// in band. `make e2e-full` runs the same files once each (full.ts).
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from './bins.js';
import { loadScenario, type Scenario } from './scenario.js';
import { runScenario, type RunResult } from './runner.js';
import { recordAcceptance } from './acceptance.js';
import { checkOf } from './full.js';

export interface Agg {
  check: string;
  measurement: string;
  values: number[];
  mean: number;
  sd: number;
  min: number | null;
  max: number | null;
  runsInBand: number;
  pass: boolean | null;
}

const inBand = (v: number, min: number | null, max: number | null) => Number.isFinite(v) && (min == null || v >= min) && (max == null || v <= max);

export function meanSd(v: number[]): [number, number] {
  const f = v.filter(Number.isFinite);
  if (!f.length) return [NaN, NaN];
  const m = f.reduce((a, b) => a + b, 0) / f.length;
  const sd = f.length > 1 ? Math.sqrt(f.reduce((a, b) => a + (b - m) ** 2, 0) / (f.length - 1)) : 0;
  return [m, sd];
}

/** Per measurement (and derived row), the values of every run aggregated. */
export function aggregate(runs: RunResult[]): Agg[] {
  const by = new Map<string, { check: string; values: number[]; min: number | null; max: number | null }>();
  const put = (check: string, name: string, v: number, min: number | null, max: number | null) => {
    const k = `${check}\u0000${name}`;
    if (!by.has(k)) by.set(k, { check, values: [], min, max });
    by.get(k)!.values.push(v);
  };
  for (const r of runs) {
    for (const m of r.measurements) {
      const c = checkOf(m.id);
      put(c, m.id.slice(c.length).trim(), m.value, m.min, m.max);
    }
    for (const d of r.tfmcc_checks ?? []) put(d.check, d.measurement.replace(/\(10·T = [^)]*\)/, '').trim(), d.value, d.min, d.max);
  }
  return [...by.entries()].map(([k, x]) => {
    const [mean, sd] = meanSd(x.values);
    const banded = x.min != null || x.max != null;
    return {
      check: x.check,
      measurement: k.split('\u0000')[1],
      values: x.values,
      mean,
      sd,
      min: x.min,
      max: x.max,
      runsInBand: x.values.filter((v) => inBand(v, x.min, x.max)).length,
      pass: banded ? inBand(mean, x.min, x.max) : null,
    };
  });
}

const f3 = (x: number) => (!Number.isFinite(x) ? String(x) : Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 1 ? x.toFixed(2) : x.toFixed(3));
const bandText = (a: Agg) => (a.min == null && a.max == null ? '' : ` [${a.min ?? '-inf'}, ${a.max ?? 'inf'}] ${a.runsInBand}/${a.values.length} runs in band`);

export function checkValue(sc: Scenario, aggs: Agg[], runs: number, timeScale: number): string {
  const head = `testbed, ${runs} run${runs > 1 ? 's' : ''} (mean ± sd), ${sc.duration_s * timeScale} s${timeScale !== 1 ? ` (time scale ${timeScale})` : ''}`;
  return `${head}: ` + aggs.map((a) => `${a.measurement}: ${f3(a.mean)} ± ${f3(a.sd)}${bandText(a)}`).join('; ');
}

export async function runTfmccChecks(opts: { reps: number; only?: string[]; outDir: string; timeScale?: number; log?: (s: string) => void }) {
  const log = opts.log ?? ((s: string) => console.log(s));
  const dir = path.join(repoRoot, 'e2e', 'scenarios');
  let files = fs.readdirSync(dir).filter((f) => /^tfmcc-e\d+.*\.yaml$/.test(f)).sort();
  if (opts.only?.length) files = files.filter((f) => opts.only!.some((o) => f.startsWith(`tfmcc-${o.toLowerCase()}-`)));
  const out: { scenario: string; aggs: Agg[] }[] = [];
  const done: { sc: Scenario; aggs: Agg[]; runs: number }[] = [];
  for (const f of files) {
    const sc = loadScenario(path.join(dir, f));
    const runs: RunResult[] = [];
    for (let seed = 1; seed <= opts.reps; seed++) {
      log(`== ${sc.name} run ${seed}/${opts.reps} (${sc.duration_s} s)`);
      try {
        const r = await runScenario(sc, { outDir: path.join(opts.outDir, `${sc.name}-${seed}`), seed, timeScale: opts.timeScale });
        for (const m of r.measurements) log(`  ${m.pass ? 'pass' : 'FAIL'} ${m.id}: ${f3(m.value)}`);
        for (const d of r.tfmcc_checks ?? []) log(`  ${d.pass === null ? 'info' : d.pass ? 'pass' : 'FAIL'} ${d.check} ${d.measurement}: ${d.text}`);
        for (const n of r.notes) log(`  note: ${n}`);
        runs.push(r);
      } catch (e) {
        log(`  ERROR ${(e as Error).message}`);
      }
    }
    const aggs = aggregate(runs);
    out.push({ scenario: sc.name, aggs });
    done.push({ sc, aggs, runs: runs.length });
  }
  // One acceptance record per check, over every scenario that measures it (E13 has a crash
  // and a leave file).
  const checks = [...new Set(done.flatMap((d) => d.aggs.map((a) => a.check)))].filter((c) => c.startsWith('tfmcc/E'));
  for (const c of checks) {
    const parts = done.filter((d) => d.aggs.some((a) => a.check === c));
    const banded = parts.flatMap((d) => d.aggs.filter((a) => a.check === c && a.pass !== null));
    const pass = parts.some((d) => d.runs === 0) ? false : banded.length ? banded.every((a) => a.pass) : null;
    const value = parts.map((d) => `${parts.length > 1 ? `${d.sc.name}: ` : ''}${checkValue(d.sc, d.aggs.filter((a) => a.check === c), d.runs, opts.timeScale ?? 1)}`).join(' | ');
    const only = [...new Set(parts.map((d) => d.sc.name.split('-')[1]))].join(',');
    const cmd = `node --import tsx e2e/src/tfmcc-checks.ts --reps ${opts.reps} --only ${only}${opts.timeScale && opts.timeScale !== 1 ? ` --time-scale ${opts.timeScale}` : ''}`;
    recordAcceptance(c, value, pass, cmd);
    log(`${pass === null ? 'info' : pass ? 'PASS' : 'FAIL'} ${c}: ${value}`);
  }
  fs.mkdirSync(opts.outDir, { recursive: true });
  fs.writeFileSync(path.join(opts.outDir, 'tfmcc-checks.json'), JSON.stringify(out, null, 1));
  return out;
}

function flag(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname)) {
  const args = process.argv.slice(2);
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const only = flag(args, '--only');
  runTfmccChecks({
    reps: Number(flag(args, '--reps') ?? 3),
    only: only ? only.split(',') : undefined,
    timeScale: flag(args, '--time-scale') ? Number(flag(args, '--time-scale')) : undefined,
    outDir: flag(args, '--out') ?? path.join(repoRoot, 'e2e', 'runs', `tfmcc-checks-${stamp}`),
  }).then(
    () => process.exit(0),
    (e: Error) => {
      console.error(`tfmcc-checks: ${e.message}`);
      process.exit(1);
    },
  );
}
