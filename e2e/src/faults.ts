// Fault injection on the namespace testbed (issue 9, docs/reliability.md): each fault builds a
// small live session (bed.ts), lets the players settle on the layers their paths carry, injects
// the fault, and measures the figure the issue asks for from the players' per-second logs
// (player.jsonl), their per-frame logs (frames.jsonl) and the server's /api/viewers.
//
//   sender-restart  server SIGKILLed, restarted 3 s later: time from the restart (spawn) to each
//                   player's first decoded frame; pass <= 2 s
//   player-kill     one of three players SIGKILLed: time until /api/viewers says gone (pass <=
//                   viewer timeout + 2 s); the other two hold the same layers and rate (pass:
//                   mean layers within 0.5, rate within 10 %)
//   link-flap       the emulated bottleneck of one player drops everything for 5 s (loss 1 in
//                   both directions), then comes back: what the player does during the flap,
//                   time from link-up to packets and to its path's level again; pass: back at the
//                   level within 30 s and the other player undisturbed
//   loss-burst      three 4-s bursts of 20 % random loss, 10 s apart: the player sheds in a burst
//                   and recovers after each; pass: shed in at least one burst, every recovery
//                   within 30 s, and at the level for the last 10 s (no stuck state)
//   router-restart  the multicast router (mrouter) SIGKILLed and started again: the longest gap
//                   between packets at the players and the time to their level again; pass:
//                   packets resume within 10 s of the restart, level within 30 s
import fs from 'node:fs';
import path from 'node:path';
import { Bed, type BedOptions, type PLine, VIDEO_SMALL } from './bed.js';
import { sleep } from './sh.js';
import { recordAcceptance } from './acceptance.js';

export interface FaultResult {
  name: FaultName;
  pass: boolean;
  /** One line: the figure(s) for docs/acceptance.md. */
  value: string;
  details: string[];
  /** Machine load when the fault ran (1-min average). */
  load: number;
  metrics: Record<string, number | null>;
}

export interface FaultOptions {
  dir: string;
  /** Record the acceptance measurement (issue9/fault-<name>). */
  record?: boolean;
  command?: string;
  log?: (m: string) => void;
}

const now = () => Date.now() / 1000;
const load1 = () => {
  try {
    return Number(fs.readFileSync('/proc/loadavg', 'utf8').split(' ')[0]);
  } catch {
    return NaN;
  }
};
const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);
const f1 = (x: number | null | undefined) => (x === null || x === undefined || !Number.isFinite(x) ? 'n/a' : x.toFixed(1));
const f2 = (x: number | null | undefined) => (x === null || x === undefined || !Number.isFinite(x) ? 'n/a' : x.toFixed(2));

async function waitFor(pred: () => boolean | Promise<boolean>, timeoutS: number, pollMs = 200): Promise<boolean> {
  const end = Date.now() + timeoutS * 1000;
  while (Date.now() < end) {
    if (await pred()) return true;
    await sleep(pollMs);
  }
  return pred();
}

/** Waits until every named player's last `holdS` log lines are all at its path's level. */
async function settle(bed: Bed, names: string[], timeoutS = 40, holdS = 3): Promise<boolean> {
  return waitFor(() => names.every((n) => {
    const ls = bed.lines(n).slice(-holdS);
    return ls.length === holdS && ls.every((l) => l.layers >= bed.carries(n));
  }), timeoutS, 500);
}

/** Lines of a player within [from, to) (unix s, by the line's own time). */
const between = (ls: PLine[], from: number, to: number) => ls.filter((l) => l.t >= from && l.t < to);

/** First line at or after `from` at or above `level` (its time, or null). */
function firstAtLevel(ls: PLine[], from: number, level: number): number | null {
  const l = ls.find((x) => x.t >= from && x.layers >= level);
  return l ? l.t : null;
}

/**
 * How a player came through a disturbance that began at `from`: the lines in [from, until) are
 * the disturbed stretch; `backAt` is the time of the first line at `level` after the last line
 * below it in that stretch (the same `from` when it never left the level), null if it has not
 * come back yet. Robust to a controller that reacts late (sheds after the fault has ended).
 */
export function recovery(ls: { t: number; layers: number }[], from: number, until: number, level: number) {
  const win = ls.filter((l) => l.t >= from && l.t < until);
  const minLayers = win.length ? Math.min(...win.map((l) => l.layers)) : NaN;
  let lastBelow = -1;
  for (let i = 0; i < ls.length; i++) if (ls[i].t >= from && ls[i].t < until && ls[i].layers < level) lastBelow = i;
  if (lastBelow < 0) return { shed: false, minLayers, backAt: win.length ? from : null };
  const back = ls.slice(lastBelow + 1).find((l) => l.layers >= level);
  return { shed: true, minLayers, backAt: back ? back.t : null };
}

function pctChange(a: number, b: number) {
  return a > 0 ? (b - a) / a : NaN;
}

async function withBed<T>(opts: BedOptions, body: (bed: Bed) => Promise<T>): Promise<T> {
  const bed = await Bed.start(opts);
  try {
    return await body(bed);
  } finally {
    const left = await bed.teardown();
    if (left.length) throw new Error(`namespaces left after teardown: ${left.join(' ')}`);
  }
}

// ---------------------------------------------------------------------------------------------

async function senderRestart(o: FaultOptions): Promise<FaultResult> {
  const players = [
    { name: 'va', rateKbps: 2500 },
    { name: 'vb', rateKbps: 2500 },
  ];
  return withBed({ dir: o.dir, players, source: 'video', video: VIDEO_SMALL, log: o.log }, async (bed) => {
    const details: string[] = [`ladder ${bed.ladderBps.map((r) => Math.round(r / 1000)).join(',')} kbit/s (VP9 ${VIDEO_SMALL.width}x${VIDEO_SMALL.height} L${VIDEO_SMALL.spatial}T${VIDEO_SMALL.temporal})`];
    const decoding = await waitFor(() => players.every((p) => bed.frames(p.name).length >= 15), 40, 500);
    if (!decoding) {
      return { name: 'sender-restart', pass: false, value: 'players never decoded before the fault', details, load: load1(), metrics: {} };
    }
    const killedAt = await bed.killServer('SIGKILL');
    await sleep(3000);
    const restartAt = await bed.startServer();
    const upAt = now();
    // Frames reach frames.jsonl at display time (playout delay 800 ms): give them time.
    // Only pictures decoded after the restart count: pictures already in flight at the kill are
    // still decoded in the next moments (one run measured "-3.01 s" by counting them).
    await waitFor(() => players.every((p) => bed.frames(p.name).some((f) => f.decoded_at > restartAt)), 10, 250);
    await sleep(3000);
    const per: Record<string, number | null> = {};
    for (const p of players) {
      const fr = bed.frames(p.name).filter((f) => f.decoded_at > restartAt);
      const first = fr.length ? Math.min(...fr.map((f) => f.decoded_at)) : null;
      // Cross-check on the per-second counter (resolution 1 s: the line's time bounds it). The
      // player starts a new video pipeline for the restarted session, so the counter restarts
      // from 0: the first line after the restart whose count moved away from the one at the
      // restart and is not 0.
      const ls = bed.lines(p.name).filter((l) => typeof l.t === 'number');
      const before = ls.filter((l) => l.t <= restartAt).pop()?.video?.decoded ?? 0;
      const rise = ls.find((l) => l.t > restartAt && (l.video?.decoded ?? 0) > 0 && l.video?.decoded !== before);
      per[p.name] = first === null ? null : first - restartAt;
      const last = ls[ls.length - 1];
      // The player holds the new sender's packets that arrive before its announcement is
      // accepted and feeds them to the new video path (player/src/receiver.rs `Limbo`).
      const rs = (last as PLine & { restart?: { held: number; replayed: number; flushed: number; dropped: number } } | undefined)?.restart;
      details.push(
        `${p.name}: first frame decoded ${f2(per[p.name])} s after the restart (counter rose by the line at +${f2(rise ? rise.t - restartAt : null)} s); ` +
          `${fr.length} frames shown since, decoder errors ${last?.video?.decoder_errors ?? '?'}, freezes ${last?.video?.freezes ?? '?'}; ` +
          `packets held before the new announcement ${rs?.held ?? '?'} (replayed ${rs?.replayed ?? '?'}, flushed ${rs?.flushed ?? '?'}, dropped ${rs?.dropped ?? '?'})`,
      );
    }
    details.push(`server down ${f2(restartAt - killedAt)} s; API answered ${f2(upAt - restartAt)} s after the spawn`);
    const worst = Math.max(...Object.values(per).map((v) => (v === null ? Infinity : v)));
    const pass = Number.isFinite(worst) && worst <= 2.0;
    return {
      name: 'sender-restart',
      pass,
      value: `decode again ${f2(worst)} s after the restart (worst of ${players.length} players; server API up after ${f2(upAt - restartAt)} s)`,
      details,
      load: load1(),
      metrics: { worst_s: Number.isFinite(worst) ? worst : null, ...per },
    };
  });
}

/** One lowering decision as `reason from->to (pp_sample / step1_target / r_pp kbit/s)`. */
function describeCut(d: Record<string, unknown>): string {
  const inp = (d.inputs ?? {}) as Record<string, unknown>;
  const k = (x: unknown) => (typeof x === 'number' && x >= 0 ? `${(x / 1e3).toFixed(1)}` : '-');
  return `${String(d.reason)} ${String(d.from)}->${String(d.to)} (sample ${k(inp.pp_sample)}, r_pp ${k(inp.r_pp)}, plr ${String(inp.plr ?? '-')})`;
}

async function playerKill(o: FaultOptions): Promise<FaultResult> {
  const players = [
    { name: 'pa', rateKbps: 560 },
    { name: 'pb', rateKbps: 560 },
    { name: 'pk', rateKbps: 560 },
  ];
  const timeoutS = 5;
  // Emulated links, not tbf: a token bucket whose burst exceeds one packet lets the second
  // packet of a pair out early after the link idled, so a player knocked below its level (the
  // kill's moment of host load) read pairs at up to 2.5x the link rate and ERA climbed past
  // what fits (5 -> 7 on a 5-layer link), then cut back, for several seconds: the one failure
  // of this test (docs/reliability.md "player SIGKILLed"). The emulator serialises every pair.
  return withBed({ dir: o.dir, players, source: 'synthetic', viewerTimeoutS: timeoutS, log: o.log }, async (bed) => {
    const details: string[] = [];
    const settled = await settle(bed, players.map((p) => p.name));
    details.push(settled ? 'settled' : 'did not settle within 40 s (measuring anyway)');
    await sleep(8000);
    await settle(bed, players.map((p) => p.name), 20);
    const killedAt = await bed.killPlayer('pk', 'SIGKILL');
    let goneAt: number | null = null;
    let how = '';
    await waitFor(async () => {
      try {
        const v = (await bed.viewers()).find((x) => x.id === 'pk');
        if (!v || v.gone) {
          goneAt = now();
          how = v ? 'gone: true' : 'removed';
          return true;
        }
      } catch {
        /* next poll */
      }
      return false;
    }, timeoutS + 15, 200);
    await sleep(Math.max(0, 8000 - (now() - killedAt) * 1000));
    const others = ['pa', 'pb'];
    let ok = true;
    const m: Record<string, number | null> = {};
    for (const n of others) {
      const ls = bed.lines(n);
      const pre = between(ls, killedAt - 8, killedAt);
      const post = between(ls, killedAt + 0.5, killedAt + 8.5);
      const lb = mean(pre.map((l) => l.layers));
      const la = mean(post.map((l) => l.layers));
      const rb = mean(pre.map((l) => l.rate_bps));
      const ra = mean(post.map((l) => l.rate_bps));
      const lost = post.reduce((a, l) => a + l.lost_1s, 0);
      const dr = pctChange(rb, ra);
      const same = pre.length >= 5 && post.length >= 5 && Math.abs(la - lb) <= 0.5 && Math.abs(dr) <= 0.1;
      ok &&= same;
      m[`${n}_layers_delta`] = la - lb;
      m[`${n}_rate_change`] = dr;
      details.push(`${n}: layers ${f2(lb)} -> ${f2(la)}, rate ${f1(rb / 1e3)} -> ${f1(ra / 1e3)} kbit/s (${f1(dr * 100)} %), lost after ${lost} (${pre.length}/${post.length} s)${same ? '' : '  <- changed'}`);
      // Why a level changed: the controller's own decisions that lowered it (reason, pair sample).
      const cuts = post.flatMap((l) => (l.decisions ?? []) as Array<Record<string, unknown>>).filter((d) => Number(d.to) < Number(d.from));
      if (cuts.length) details.push(`${n}: cuts after the kill: ${cuts.map(describeCut).join('; ')}`);
    }
    const goneAfter = goneAt === null ? null : (goneAt as number) - killedAt;
    details.push(`server: pk ${goneAt === null ? 'never marked gone' : `${how} ${f2(goneAfter)} s after the kill`} (viewer_timeout_s ${timeoutS}, telemetry every 1 s)`);
    const pass = ok && goneAfter !== null && goneAfter <= timeoutS + 2;
    return {
      name: 'player-kill',
      pass,
      value: `killed player marked gone ${f2(goneAfter)} s after SIGKILL (timeout ${timeoutS} s); others: layers Δ ${others.map((n) => f2(m[`${n}_layers_delta`])).join('/')}, rate Δ ${others.map((n) => `${f1((m[`${n}_rate_change`] ?? NaN) * 100)}%`).join('/')}`,
      details,
      load: load1(),
      metrics: { gone_after_s: goneAfter, ...m },
    };
  });
}

async function linkFlap(o: FaultOptions): Promise<FaultResult> {
  const players = [
    { name: 'fa', rateKbps: 560 },
    { name: 'ctl', rateKbps: 560 },
  ];
  return withBed({ dir: o.dir, players, source: 'synthetic', log: o.log }, async (bed) => {
    const details: string[] = [];
    const level = bed.carries('fa');
    const settled = await settle(bed, ['fa', 'ctl']);
    details.push(`level ${level} layers; ${settled ? 'settled' : 'did not settle within 40 s'}`);
    await sleep(3000);
    await settle(bed, ['fa', 'ctl'], 20); // at the level right before the fault, not in a dip
    const downAt = now();
    await bed.setLink('fa', { loss: 1 });
    await sleep(5000);
    await bed.setLink('fa', { loss: 0 });
    const upAt = now();
    // The disturbed stretch: from link-down to 1.5 s after link-up (the player cannot be back
    // before packets are); back = the first line at the level after its last line below it.
    const recov = () => recovery(bed.lines('fa'), downAt, upAt + 1.5, level);
    await waitFor(() => recov().backAt !== null, 45, 500);
    await sleep(5000);
    const ls = bed.lines('fa');
    const during = between(ls, downAt + 1, upAt + 1);
    const minDuring = Math.min(...during.map((l) => l.layers));
    const after = ls.filter((l) => l.t > upAt);
    const minAfter = after.length ? Math.min(...after.slice(0, 10).map((l) => l.layers)) : NaN;
    const firstPkt = after.find((l) => l.packets_1s > 0);
    const rec = recov();
    const recoveryS = rec.backAt === null ? null : Math.max(0, rec.backAt - upAt);
    // the packet gap the player saw across the flap
    const gap = Math.max(0, ...ls.filter((l) => l.t > downAt && l.t < upAt + 5).map((l) => l.max_gap_ms ?? 0));
    const cl = between(bed.lines('ctl'), downAt, upAt + 10);
    const ctlOk = cl.length > 0 && cl.every((l) => l.layers >= level);
    details.push(`during the flap: layers min ${minDuring} (held ${during.map((l) => l.layers).join(' ')})`);
    details.push(`after link-up: first packets by the line at +${f2(firstPkt ? firstPkt.t - upAt : null)} s, layers min ${minAfter} in the next 10 s, back at ${level} layers +${f2(recoveryS)} s (1-s log resolution)`);
    details.push(`longest packet gap ${f1(gap / 1000)} s; control player ${ctlOk ? 'stayed at its level' : `left its level: ${cl.map((l) => l.layers).join(' ')}`}`);
    const shed = Math.min(minDuring, minAfter) < level;
    const pass = recoveryS !== null && recoveryS <= 30 && ctlOk;
    return {
      name: 'link-flap',
      pass,
      value: `5-s flap: ${shed ? `shed to ${Math.min(minDuring, minAfter)}` : 'no shed'} of ${level} layers; back at ${level} layers ${f1(recoveryS)} s after link-up; packet gap ${f1(gap / 1000)} s; control player ${ctlOk ? 'undisturbed' : 'disturbed'}`,
      details,
      load: load1(),
      metrics: { recovery_s: recoveryS, gap_s: gap / 1000, min_layers: Math.min(minDuring, minAfter) },
    };
  });
}

async function lossBurst(o: FaultOptions): Promise<FaultResult> {
  const players = [
    { name: 'la', rateKbps: 560 },
    { name: 'ctl', rateKbps: 560 },
  ];
  return withBed({ dir: o.dir, players, source: 'synthetic', log: o.log }, async (bed) => {
    const details: string[] = [];
    const level = bed.carries('la');
    const settled = await settle(bed, ['la', 'ctl']);
    details.push(`level ${level} layers; ${settled ? 'settled' : 'did not settle within 40 s'}`);
    await sleep(3000);
    await settle(bed, ['la', 'ctl'], 20);
    const bursts: { start: number; end: number }[] = [];
    for (let i = 0; i < 3; i++) {
      const start = now();
      await bed.setLink('la', { loss: 0.2 });
      await sleep(4000);
      await bed.setLink('la', { loss: 0 });
      bursts.push({ start, end: now() });
      if (i < 2) await sleep(10_000);
    }
    const lastEnd = bursts[2].end;
    // A burst's disturbed stretch: its start to 2 s after its end (the controller reacts once per
    // adaptation interval, so a shed can come just after the burst).
    const recov = (b: { start: number; end: number }) => recovery(bed.lines('la'), b.start, b.end + 2, level);
    await waitFor(() => recov(bursts[2]).backAt !== null, 35, 500);
    // the "no stuck state" window: 10 s at the level after the recovery
    const backAt = recov(bursts[2]).backAt;
    if (backAt !== null) await sleep(Math.max(0, (backAt + 11 - now()) * 1000));
    const ls = bed.lines('la');
    let shedAny = false;
    const rec: (number | null)[] = [];
    for (const [i, b] of bursts.entries()) {
      const inB = between(ls, b.start + 0.5, b.end + 1.5);
      const minL = Math.min(...inB.map((l) => l.layers));
      const lossB = inB.reduce((a, l) => a + l.lost_1s, 0) / Math.max(1, inB.reduce((a, l) => a + l.lost_1s + l.packets_1s, 0));
      const rb = recov(b);
      if (rb.shed) shedAny = true;
      const r = rb.backAt === null ? null : Math.max(0, rb.backAt - b.end);
      rec.push(r);
      details.push(`burst ${i + 1}: loss seen ${f1(lossB * 100)} % (seconds overlapping the burst), layers ${inB.map((l) => l.layers).join(' ')} (min ${Math.min(minL, rb.minLayers)}); ${rb.shed ? `back at ${level} ${f1(r)} s after its end` : 'did not shed'}`);
    }
    // "Stuck" = below the level for good: after the recovery, no run of more than 3 seconds
    // below the level and at the level at the end. A single late packet pair on this loaded
    // machine makes ERA cut one layer (a `pp-drop` decision) and climb back within 2 s: that is
    // the controller's documented reaction to a low pair sample, not a stuck state; such dips
    // are counted and printed.
    const tail = backAt === null ? [] : between(ls, backAt, backAt + 10);
    let run = 0;
    let longestBelow = 0;
    for (const l of tail) {
      run = l.layers < level ? run + 1 : 0;
      longestBelow = Math.max(longestBelow, run);
    }
    const ppDrops = tail.reduce((a, l) => a + ((l.decisions ?? []) as { reason?: string }[]).filter((d) => d?.reason === 'pp-drop').length, 0);
    const noStuck = tail.length >= 8 && longestBelow <= 3 && tail[tail.length - 1].layers >= level;
    const cl = between(bed.lines('ctl'), bursts[0].start, lastEnd + 5);
    const ctlOk = cl.length > 0 && cl.every((l) => l.layers >= level);
    details.push(`10 s after the recovery: layers ${tail.map((l) => l.layers).join(' ')} (longest run below ${level}: ${longestBelow} s; pp-drop decisions ${ppDrops}); control player ${ctlOk ? 'undisturbed' : `disturbed: ${cl.map((l) => l.layers).join(' ')}`}`);
    const worst = Math.max(...rec.map((r) => (r === null ? Infinity : r)));
    const pass = shedAny && Number.isFinite(worst) && worst <= 30 && noStuck;
    return {
      name: 'loss-burst',
      pass,
      value: `3 × 4 s of 20% loss: ${shedAny ? 'shed' : 'did NOT shed'}; recovered to ${level} layers within ${f1(worst)} s of each burst's end (${rec.map(f1).join('/')} s); ${noStuck ? 'no stuck state' : 'not at its level afterwards'}`,
      details,
      load: load1(),
      metrics: { worst_recovery_s: Number.isFinite(worst) ? worst : null, shed: shedAny ? 1 : 0 },
    };
  });
}

async function routerRestart(o: FaultOptions): Promise<FaultResult> {
  const players = [
    { name: 'ra', rateKbps: 560 },
    { name: 'rb', rateKbps: 880 },
  ];
  return withBed({ dir: o.dir, players, source: 'synthetic', log: o.log }, async (bed) => {
    const details: string[] = [];
    const settled = await settle(bed, players.map((p) => p.name));
    details.push(settled ? 'settled' : 'did not settle within 40 s');
    await sleep(3000);
    await settle(bed, players.map((p) => p.name), 20);
    const { killedAt, startedAt } = await bed.restartRouter('SIGKILL');
    details.push(`router down ${f2(startedAt - killedAt)} s (kill to ready)`);
    // Watch 15 s, then until every player is at its level again (at most 35 s in all).
    await sleep(15_000);
    await waitFor(() => players.every((p) => (bed.lines(p.name).pop()?.layers ?? 0) >= bed.carries(p.name)), 20, 500);
    await sleep(2000);
    let worstGap = 0;
    let worstResume = 0;
    let worstLevel = 0;
    for (const p of players) {
      const ls = bed.lines(p.name).filter((l) => typeof l.t === 'number');
      const level = bed.carries(p.name);
      const after = ls.filter((l) => l.t > killedAt);
      // The silence across the restart, as the player measured it (longest gap between two
      // packets, reported in the second it ended).
      const gap = Math.max(0, ...after.map((l) => l.max_gap_ms ?? 0)) / 1000;
      // No packets at all in the seconds after the restart: the gap is still open.
      const open = !after.some((l) => l.t > startedAt + 1.5 && l.packets_1s > 0);
      const resume = open ? Infinity : Math.max(0, killedAt + gap - startedAt);
      const rec = recovery(ls, killedAt, startedAt + 15, level);
      const lvl = rec.backAt === null ? Infinity : Math.max(0, rec.backAt - startedAt);
      worstGap = Math.max(worstGap, open ? Infinity : gap);
      worstResume = Math.max(worstResume, resume);
      worstLevel = Math.max(worstLevel, lvl);
      details.push(
        `${p.name}: ${open ? 'NO packets since the restart' : `longest packet gap ${f2(gap)} s`}; ` +
          `layers ${after.slice(0, 12).map((l) => l.layers).join(' ')}; ${rec.shed ? `shed to ${rec.minLayers}, back at ${level} +${f1(lvl)} s after the restart (1-s log resolution)` : `stayed at ${level}`}`,
      );
    }
    const pass = Number.isFinite(worstGap) && worstResume <= 10 && worstLevel <= 30;
    return {
      name: 'router-restart',
      pass,
      value: Number.isFinite(worstGap)
        ? `packets again after a gap of ${f2(worstGap)} s (router down ${f2(startedAt - killedAt)} s); players at their level ${f1(worstLevel)} s after the restart`
        : 'players got NO packets after the router restart',
      details,
      load: load1(),
      metrics: { gap_s: Number.isFinite(worstGap) ? worstGap : null, level_s: Number.isFinite(worstLevel) ? worstLevel : null },
    };
  });
}

export const FAULTS = {
  'sender-restart': senderRestart,
  'player-kill': playerKill,
  'link-flap': linkFlap,
  'loss-burst': lossBurst,
  'router-restart': routerRestart,
} as const;
export type FaultName = keyof typeof FAULTS;

export async function runFault(name: FaultName, o: FaultOptions): Promise<FaultResult> {
  fs.mkdirSync(o.dir, { recursive: true });
  const r = await FAULTS[name](o);
  r.details.push(`load average (1 min) ${f1(r.load)}`);
  fs.writeFileSync(path.join(o.dir, 'result.json'), JSON.stringify(r, null, 1));
  if (o.record) recordAcceptance(`issue9/fault-${name}`, `${r.value} (load ${f1(r.load)})`, r.pass, o.command ?? `layercast-e2e faults ${name}`);
  return r;
}
