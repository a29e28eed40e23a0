#!/usr/bin/env node
// layercast-e2e: run scenarios on the namespace testbed, measure IGMP leave latency, clean up.
import fs from 'node:fs';
import path from 'node:path';
import { cleanup } from './netns.js';
import type { RouterKind } from './topology.js';
import { FRR_CONF, withFrrDefaults } from './frr.js';
import { pimCommand, PIM_USAGE } from './pim.js';
import { loadScenario } from './scenario.js';
import { runScenario } from './runner.js';
import { measureLeaveLatency } from './leave.js';
import { repoRoot } from './bins.js';
import { runDemo } from './demo.js';
import { runFull } from './full.js';
import { compareScenario } from './compare.js';
import { analyseRun, qualitySummary } from './quality.js';
import { reliabilityCommand, RELIABILITY_USAGE } from './reliability-cli.js';
import { tfrcChecksCommand } from './tfrc-checks.js';
import { edgeCommand, EDGE_USAGE } from './edge-suite.js';
import { runQualitySuite, CASES, parseServerVideo } from './quality-suite.js';
import { runLadderCheck } from './ladder-check.js';

const USAGE = `usage:
  layercast-e2e run SCENARIO.yaml [--out DIR] [--seed N] [--time-scale K] [--linkemu-everywhere]
                                  [--overhead-bytes B] [--rt-prio P] [--igmpproxy | --frr [--frr-conf F]]
  layercast-e2e leave-latency [--out DIR] [--cycles N] [--default-timers] [--igmpproxy | --frr]
                              [--hops 1|2] [--ssm] [--frr-conf FILE]
                                        --frr: FRR PIM routers (deploy/router/frr/frr.conf or
                                        FILE, with the same role blocks; --default-timers:
                                        without its IGMP timer settings)
  layercast-e2e full [--out DIR] [--all] [--only NAME,..] [--reps N] [--no-keep-awake]
                                        leave latency, then every scenario of research/scenarios/ and
                                        e2e/scenarios/ naming a check of the full set (--all:
                                        every scenario); one summary table; runs under
                                        keep-awake spinners unless --no-keep-awake; --reps N
                                        runs each scenario N times (seeds 1..N) and reports
                                        mean ± 95% CI (era.md §5 asks for >= 5)
  layercast-e2e compare SCENARIO.yaml [--out DIR] [--seed N]
                                        the scenario in layercast-sim and on the testbed, one table
  layercast-e2e quality RUN_DIR [--reference FILE]
                                        PSNR/SSIM, freezes, frame rate, latency of each player-*/
  layercast-e2e ladder-check [--runs N] [--seconds S] [--protocol lcc|era|plm] [--out DIR]
                                        issue 19: viewers behind 350, 1000 and 3000 kbit/s watch
                                        the server's default encode of the clip, N runs (default
                                        3) of S s (default 60); each must show 320x180, 640x360,
                                        1280x720 or larger at >= 15 fps (issue19/testbed-ladder)
  layercast-e2e quality-suite [--runs N] [--seconds S] [--protocols era,plm] [--video small|default] [--fps N]
                              [--keep-pictures] [--no-keep-awake] [--no-retransmission]
                              [--single-decoder] [--player-args 'ARGS'] [--server-video K=V,..]
                              [--out DIR]
                                        issue 20: one session per run, one viewer per case
                                        (${CASES.map((c) => c.id).join(', ')}), ERA and PLM,
                                        N runs (default 5) of S s (default 60): mean ± 95% CI
                                        of what each viewer sees, acceptance rows issue20/*
                                        (not with --single-decoder, --no-retransmission,
                                        --player-args or --server-video: a comparison)
  layercast-e2e tfrc-checks [--only e1,e2,e3,e4,e5,e8] [--duration-scale K] [--out DIR]
                                        live TFRC flows: the TFRC checks E1-E5, E8 (tfrc-checks.ts)
  layercast-e2e cleanup [--all]         remove lc- namespaces left by dead runs (--all: every lc- namespace)
  layercast-e2e demo [--duration SECS] [--source auto|synthetic|NAME] [--scenario FILE]
                     [--status-every SECS] [--out DIR] [--port P]
                                        the live demo (docs/demo.md); until Ctrl-C without --duration
${PIM_USAGE}
${EDGE_USAGE}
${RELIABILITY_USAGE}`;

function routerFlag(args: string[]): RouterKind {
  return args.includes('--frr') ? 'frr' : args.includes('--igmpproxy') ? 'igmpproxy' : 'mrouter';
}

/** FRR mode: `--frr-conf FILE` (an operator's own config, same role blocks) or frr.conf;
 *  `--default-timers` takes its IGMP timer settings out. */
function frrConfFlag(args: string[], fastLeave: boolean): string {
  const text = fs.readFileSync(flag(args, '--frr-conf') ?? FRR_CONF, 'utf8');
  return fastLeave ? text : withFrrDefaults(text);
}

function flag(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

async function main(argv: string[]): Promise<number> {
  const [cmd, ...args] = argv;
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  switch (cmd) {
    case 'run': {
      const file = args[0];
      if (!file) throw new Error(USAGE);
      const sc = loadScenario(file);
      const out = flag(args, '--out') ?? path.join(repoRoot, 'e2e', 'runs', `${sc.name}-${stamp}`);
      const r = await runScenario(sc, {
        outDir: out,
        seed: Number(flag(args, '--seed') ?? 1),
        timeScale: Number(flag(args, '--time-scale') ?? 1),
        linkMode: args.includes('--linkemu-everywhere') ? 'linkemu' : 'auto',
        overheadBytes: flag(args, '--overhead-bytes') !== undefined ? Number(flag(args, '--overhead-bytes')) : undefined,
        rtPrio: flag(args, '--rt-prio') !== undefined ? Number(flag(args, '--rt-prio')) : undefined,
        router: routerFlag(args),
        frrConf: args.includes('--frr') ? frrConfFlag(args, true) : undefined,
      });
      for (const m of r.measurements) console.log(`${m.pass ? 'pass' : 'FAIL'}  ${m.id}: ${m.metric} = ${m.value}${!m.pass && m.known_issue ? ` (known issue: ${m.known_issue})` : ''}`);
      for (const d of r.tfmcc_checks ?? []) console.log(`${d.pass === null ? 'info' : d.pass ? 'pass' : 'FAIL'}  ${d.check} ${d.measurement}: ${d.text}`);
      for (const n of r.notes) console.log(`note: ${n}`);
      console.log(`report: ${path.join(out, 'report.html')}`);
      return r.measurements.every((m) => m.pass) && (r.tfmcc_checks ?? []).every((d) => d.pass !== false) ? 0 : 1;
    }
    case 'leave-latency': {
      const out = flag(args, '--out') ?? path.join(repoRoot, 'e2e', 'runs', `leave-latency-${stamp}`);
      const router = routerFlag(args);
      const fastLeave = !args.includes('--default-timers');
      const hops = Number(flag(args, '--hops') ?? 2);
      if (hops !== 1 && hops !== 2) throw new Error('--hops is 1 or 2');
      const r = await measureLeaveLatency({
        fastLeave,
        router,
        cycles: Number(flag(args, '--cycles') ?? 5),
        outDir: out,
        hops,
        ssm: args.includes('--ssm'),
        frrConf: router === 'frr' ? frrConfFlag(args, fastLeave) : undefined,
      });
      console.log(JSON.stringify(r, (_k, v) => (v === Infinity ? 'Infinity' : v), 2));
      return 0;
    }
    case 'full': {
      const out = flag(args, '--out') ?? path.join(repoRoot, 'e2e', 'runs', `full-${stamp}`);
      const only = flag(args, '--only');
      const reps = Number(flag(args, '--reps') ?? 1);
      if (!Number.isInteger(reps) || reps < 1) throw new Error(`--reps wants a whole number >= 1, not ${flag(args, '--reps')}`);
      const r = await runFull({ outDir: out, all: args.includes('--all'), only: only ? only.split(',') : undefined, reps, keepAwake: !args.includes('--no-keep-awake') });
      console.log(`reports under ${out}`);
      return r.fails ? 1 : 0;
    }
    case 'compare': {
      const file = args[0];
      if (!file) throw new Error(USAGE);
      const sc = loadScenario(file);
      const out = flag(args, '--out') ?? path.join(repoRoot, 'e2e', 'runs', `compare-${sc.name}-${stamp}`);
      const r = await compareScenario(file, sc, { outDir: out, seed: Number(flag(args, '--seed') ?? 1) });
      console.log(r.text);
      console.log(`report: ${path.join(out, 'report.html')}`);
      return 0;
    }
    case 'quality': {
      const dir = args[0];
      if (!dir) throw new Error(USAGE);
      const qs = await analyseRun(dir, flag(args, '--reference'));
      if (!qs.length) throw new Error(`${dir}: no player-*/frames.csv with a reference.y4m (give --reference FILE)`);
      for (const q of qs) console.log(JSON.stringify(qualitySummary(q)));
      return 0;
    }
    case 'demo': {
      const num = (n: string) => (flag(args, n) !== undefined ? Number(flag(args, n)) : undefined);
      const r = await runDemo({
        durationS: num('--duration') ?? null,
        source: flag(args, '--source'),
        scenarioFile: flag(args, '--scenario'),
        statusEveryS: num('--status-every'),
        outDir: flag(args, '--out'),
        port: num('--port'),
      });
      for (const n of r.notes) console.log(`note: ${n}`);
      console.log(`demo over after ${r.ranS.toFixed(0)} s; ${r.namespaces.length} namespaces removed; logs in ${r.outDir}`);
      return r.leftover.length ? 1 : 0;
    }
    case 'cleanup': {
      const removed = await cleanup({ all: args.includes('--all') });
      console.log(removed.length ? `removed ${removed.join(' ')}` : 'nothing to remove');
      return 0;
    }
    case 'pim': {
      const only = flag(args, '--only');
      return pimCommand({
        outDir: flag(args, '--out') ?? path.join(repoRoot, 'e2e', 'runs', `pim-${stamp}`),
        only: only ? only.split(',') : undefined,
        cycles: Number(flag(args, '--cycles') ?? 5),
        frrDefaults: args.includes('--frr-defaults'),
        edgeSource: flag(args, '--edge-source'),
        keepAwake: !args.includes('--no-keep-awake'),
      });
    }
    case 'quality-suite': {
      const runs = Number(flag(args, '--runs') ?? 5);
      const seconds = Number(flag(args, '--seconds') ?? 60);
      if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs wants a whole number >= 1, not ${flag(args, '--runs')}`);
      if (!(seconds >= 10 && seconds <= 600)) throw new Error(`--seconds wants 10..600, not ${flag(args, '--seconds')}`);
      const video = flag(args, '--video') ?? 'small';
      if (video !== 'small' && video !== 'default') throw new Error(`--video is small or default, not ${video}`);
      const fpsArg = flag(args, '--fps');
      const fps = fpsArg === undefined ? undefined : Number(fpsArg);
      if (fps !== undefined && !(Number.isInteger(fps) && fps >= 5 && fps <= 60)) throw new Error(`--fps wants a whole number 5..60, not ${fpsArg}`);
      if (fps !== undefined && video === 'default') throw new Error('--fps sets the small encode\'s frame rate; --video default is the server\'s own');
      const out = flag(args, '--out') ?? path.join(repoRoot, 'e2e', 'runs', `quality-${stamp}`);
      const serverVideo = parseServerVideo(flag(args, '--server-video'));
      const results = await runQualitySuite({
        serverVideo,
        runs,
        seconds,
        protocols: (flag(args, '--protocols') ?? 'era,plm').split(','),
        video,
        fps,
        outDir: out,
        keepPictures: args.includes('--keep-pictures'),
        keepAwake: !args.includes('--no-keep-awake'),
        // A comparison: the players never ask for lost packets again (no acceptance rows).
        playerArgs: [
          ...(args.includes('--no-retransmission') ? ['--no-retransmission'] : []),
          ...(args.includes('--single-decoder') ? ['--single-decoder'] : []),
          ...(flag(args, '--player-args')?.split(/\s+/).filter(Boolean) ?? []),
        ],
      });
      console.log(fs.readFileSync(path.join(out, 'summary.md'), 'utf8'));
      console.log(`outputs under ${out}`);
      return results.every((r) => r.pass) ? 0 : 1;
    }
    case 'ladder-check': {
      const runs = Number(flag(args, '--runs') ?? 3);
      const seconds = Number(flag(args, '--seconds') ?? 60);
      if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs wants a whole number >= 1, not ${flag(args, '--runs')}`);
      if (!(seconds > 20 && seconds <= 600)) throw new Error(`--seconds wants 21..600, not ${flag(args, '--seconds')}`);
      const protocol = flag(args, '--protocol') ?? 'lcc';
      if (protocol !== 'lcc' && protocol !== 'era' && protocol !== 'plm') throw new Error(`--protocol is lcc, era or plm, not ${protocol}`);
      const out = flag(args, '--out') ?? path.join(repoRoot, 'e2e', 'runs', `ladder-${stamp}`);
      const results = await runLadderCheck({ runs, seconds, protocol, outDir: out, keepAwake: !args.includes('--no-keep-awake') });
      console.log(`outputs under ${out}`);
      return results.every((r) => r.pass) ? 0 : 1;
    }
    case 'tfrc-checks':
      return tfrcChecksCommand(args);
    case 'edge':
      return edgeCommand(args, stamp);
    case 'soak':
    case 'faults':
    case 'capacity':
      return reliabilityCommand(cmd, args);
    default:
      console.log(USAGE);
      return cmd === undefined || cmd === '-h' || cmd === '--help' ? 0 : 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e: Error) => {
    console.error(`layercast-e2e: ${e.message}`);
    process.exit(1);
  },
);

