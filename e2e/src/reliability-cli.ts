// `layercast-e2e soak | faults | capacity` (docs/reliability.md). Kept out of cli.ts so the
// reliability commands live in their own files.
import path from 'node:path';
import { repoRoot } from './bins.js';
import { recordAcceptance } from './acceptance.js';
import { runSoak, soakSummary } from './soak.js';
import { FAULTS, runFault, type FaultName } from './faults.js';
import { runCapacity, capacitySummary } from './capacity.js';

export const RELIABILITY_USAGE = `  layercast-e2e soak [--duration SECS] [--players N] [--out DIR]
                                        long run: memory growth and stuck players (default 1800 s, 20)
  layercast-e2e faults [NAME...] [--dev] [--out DIR]
                                        fault injection (${Object.keys(FAULTS).join(' ')}), on the secured
                                        configuration (--dev: the open server instead)
  layercast-e2e capacity [--mode synthetic|video|both] [--max N] [--step N] [--hold SECS] [--out DIR]
                                        players one machine carries (ramp until the criterion fails)`;

function flag(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

export async function reliabilityCommand(cmd: string, args: string[]): Promise<number> {
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const out = flag(args, '--out') ?? path.join(repoRoot, 'e2e', 'runs', `${cmd}-${stamp}`);
  switch (cmd) {
    case 'soak': {
      const durationS = Number(flag(args, '--duration') ?? 1800);
      const players = Number(flag(args, '--players') ?? 20);
      if (!(durationS >= 60) || !(players >= 1)) throw new Error('soak: --duration >= 60 and --players >= 1');
      const r = await runSoak({ durationS, players, dir: out });
      console.log(soakSummary(r));
      console.log(`details: ${path.join(out, 'soak.json')}`);
      // Only a run of the size the issue names is the acceptance figure.
      if (durationS >= 1800 && players >= 20) {
        const srv = r.mem.find((m) => m.name === 'server');
        recordAcceptance(
          'issue9/soak',
          `${(r.durationS / 60).toFixed(1)} min, ${players} players: resident anonymous memory growth from min ${(r.refS / 60).toFixed(0)}: server ${(r.serverGrowth * 100).toFixed(2)}% (${srv?.refKiB.toFixed(0)}→${srv?.endKiB.toFixed(0)} KiB), max over all ${(r.maxGrowth * 100).toFixed(2)}% (VmRSS: server ${((r.rss.find((m) => m.name === 'server')?.growth ?? NaN) * 100).toFixed(2)}%, max ${(Math.max(...r.rss.map((m) => m.growth)) * 100).toFixed(2)}%); stuck players ${r.stuck.length}; min time at path level ${(Math.min(...r.players.map((p) => p.atLevel)) * 100).toFixed(1)}% (load ${r.loadavg.join(' ')})`,
          r.pass,
          `layercast-e2e soak --duration ${durationS} --players ${players}`,
        );
      }
      return r.pass ? 0 : 1;
    }
    case 'faults': {
      const names = args.filter((a, i) => !a.startsWith('--') && !(i > 0 && args[i - 1].startsWith('--'))) as FaultName[];
      const list = names.length ? names : (Object.keys(FAULTS) as FaultName[]);
      let fails = 0;
      for (const n of list) {
        if (!(n in FAULTS)) throw new Error(`unknown fault ${n}; one of ${Object.keys(FAULTS).join(' ')}`);
        const secured = !args.includes('--dev');
        const r = await runFault(n, { dir: path.join(out, n), record: true, secured, command: `layercast-e2e faults ${n}${secured ? '' : ' --dev'}` });
        console.log(`${r.pass ? 'pass' : 'FAIL'}  ${n}: ${r.value}`);
        for (const d of r.details) console.log(`      ${d}`);
        if (!r.pass) fails++;
      }
      console.log(`logs under ${out}`);
      return fails ? 1 : 0;
    }
    case 'capacity': {
      const mode = flag(args, '--mode') ?? 'both';
      let ok = true;
      for (const m of mode === 'both' ? (['synthetic', 'video'] as const) : [mode as 'synthetic' | 'video']) {
        if (m !== 'synthetic' && m !== 'video') throw new Error('--mode synthetic|video|both');
        const r = await runCapacity({
          mode: m,
          dir: path.join(out, m),
          max: flag(args, '--max') !== undefined ? Number(flag(args, '--max')) : undefined,
          step: flag(args, '--step') !== undefined ? Number(flag(args, '--step')) : undefined,
          holdS: flag(args, '--hold') !== undefined ? Number(flag(args, '--hold')) : undefined,
          record: true,
        });
        console.log(capacitySummary(r));
        ok &&= r.pass;
      }
      return ok ? 0 : 1;
    }
    default:
      return 2;
  }
}
