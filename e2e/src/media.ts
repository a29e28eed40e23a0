// How the testbed starts the project's own sender and receivers. Kept in one place so the
// command lines can follow the media binaries as they evolve (server/src/config/ and
// player/src/main.rs are the reference).
import { findBinary } from './bins.js';
import type { LayeredFlow, ReceiverDef } from './scenario.js';
import { ladderRates } from './scenario.js';

export interface MediaBins {
  server: string | null;
  player: string | null;
}

export function mediaBins(): MediaBins {
  return { server: findBinary('layercast-server'), player: findBinary('layercast-player') };
}

/** Groups of session k: 239.255.(100+k).0/24, layer j on .j, announcements on .255:5000 (a
 *  ladder has at most 255 layers). One /24 per session is what makes the link emulator's fair
 *  queue count the session as one flow, and the announcements must be inside it: on their own
 *  group (they were on 239.255.76.x) the fair queue served each 622-byte SAM as another flow's
 *  packet between the two packets of a pair, and PLM dropped to half the link every 4 s (plm/E2
 *  on the testbed, docs/testbed.md). */
export function sessionAddrs(k: number) {
  return { group: `239.255.${100 + k}.0`, port: 5004 + 200 * k, announce: `239.255.${100 + k}.255:5000` };
}

export function serverArgs(f: LayeredFlow, k: number, ifAddr: string): string[] {
  const a = sessionAddrs(k);
  const rates = ladderRates(f.layers);
  const equal = rates.every((r) => r === rates[0]);
  const session: Record<string, unknown> = {
    name: f.name,
    // The server knows protocol families (era, plm, delay, ...); a variant of a controller
    // (`era-rtt-join`, `era-thesis`, `delay-printed`) is the receivers' choice.
    protocol: f.protocol.split('-')[0],
    source: 'synthetic',
    packet_size: f.packet_size,
    bunch_len: f.bunch,
    adapt_interval_ms: Math.round(f.adapt_interval_s * 1000),
    group: a.group,
    port: a.port,
  };
  if (equal) {
    session.layers = rates.length;
    session.layer_rate_bps = Math.round(rates[0] * 1000);
  } else session.layer_rates_bps = rates.map((r) => Math.round(r * 1000));
  return [
    '--dev', // the bed's private namespaces: docs/security.md §9.8
    '--http_addr', `${ifAddr}:8080`,
    '--announce', a.announce,
    ...announceIntervalArgs(f),
    '--interface', ifAddr,
    '--ttl', '16',
    '--session', JSON.stringify(session),
  ];
}

/** SAMs of an ERA session every ANNOUNCE_RAIS adaptation intervals (era.md §1.1.5:
 *  t_announce = n·RAI, n unspecified by the thesis); other protocols keep the server's 1 s.
 *
 *  Why: a SAM of a 100-layer session is 1517 bytes (14 bytes a layer plus the signature; two
 *  IP fragments), 12.1 kbit/s at one a second, and it crosses the bottleneck like the layers.
 *  The thesis' exact fits (Exp. I: 15 × 20 = 300 kbit/s, Exp. V: 20 × 20 = 400) then load the
 *  link to 104% / 103%: the drop-tail queue overflows about 3 packets a second whenever the
 *  receivers hold the fitting level, and each loss lets E15 believe the next low sample
 *  (docs/testbed.md, "ERA checks, fourth pass"). The simulator carries no SAM bytes at all;
 *  one SAM every 10 RAIs costs 1.2 kbit/s (0.3–0.4% of those links). Players get the
 *  description at start (`prefetchesDescription`), so no join waits for a SAM, and each SAM
 *  still re-phases every receiver's RAI grid (lock-step, §1.1.14). */
export const ANNOUNCE_RAIS = 10;

export function announceIntervalArgs(f: LayeredFlow): string[] {
  if (!(f.protocol === 'era' || f.protocol.startsWith('era-'))) return [];
  return ['--announce_interval_ms', String(Math.round(f.adapt_interval_s * 1000 * ANNOUNCE_RAIS))];
}

/** Whether the runner hands this session's players the description at start
 *  (`--session-info`, fetched once from the server's HTTP API inside the sender's namespace):
 *  PLM sessions, whose join-to-full-quality time plm.md E3 bounds at 2 s, and ERA sessions
 *  (every `era*` receiver variant), whose convergence checks (era/AC-2, AC-3, AC-10's late
 *  joiners) count from the receiver's start as the simulator does, which hands a starting
 *  receiver the SAM at once. Waiting for the first multicast SAM cost up to one announcement
 *  interval (1 s) plus the announcement group's graft before the base join: on the testbed
 *  the receivers of ERA Exp. I start at 3.0 s, just as the sender's SAM of 3.0x s passes, and
 *  joined at 4.10 s on the next one (docs/testbed.md, "ERA checks, fourth pass"; plm/E3).
 *  A player started by a user with `--session-url` gets the description the same way. The
 *  multicast SAMs still arrive and re-phase the RAI grid (era.md §1.1.14). LCC sessions too:
 *  the product's player starts from the description (`--session-url`). */
export function prefetchesDescription(f: LayeredFlow): boolean {
  return f.protocol === 'plm' || f.protocol === 'lcc' || f.protocol === 'era' || f.protocol.startsWith('era-');
}

/** The server's announcement of session `f` (the JSON `--session-info` reads). */
export function announcementUrl(f: LayeredFlow, ifAddr: string): string {
  return `http://${ifAddr}:8080/api/sessions/${encodeURIComponent(f.name)}/announcement`;
}

export function playerArgs(f: LayeredFlow, r: ReceiverDef, k: number, ifAddr: string, outDir: string, durationS: number, sessionInfo?: string): string[] {
  // A receiver protocol `fixed-N` holds layers 0..N-1 without a controller (`--fixed-layers`;
  // plm.md E1 measures the packet-pair estimator on a fixed subscription).
  const fixed = /^fixed-(\d+)$/.exec(r.protocol ?? f.protocol);
  return [
    '--announce', sessionAddrs(k).announce,
    ...(sessionInfo ? ['--session-info', sessionInfo] : []),
    ...(fixed ? ['--fixed-layers', fixed[1]] : ['--controller', r.protocol ?? f.protocol]),
    '--interface', ifAddr,
    '--headless',
    '--out', outDir,
    '--duration', durationS.toFixed(3),
    '--viewer-id', r.name,
  ];
}

/** One line of `player.jsonl` (the fields the testbed reads). */
export interface PlayerLine {
  t: number;
  elapsed_s: number;
  layers: number;
  rate_bps: number;
  packets_1s: number;
  lost_1s: number;
  /** The controller's decisions of that second: time (Unix s) and layers held after it. */
  decisions?: { at_s: number; to: number }[];
}
