// FRR routers (zebra + pimd, Debian's `frr` 8.4) inside testbed namespaces: the configuration
// comes from deploy/router/frr/frr.conf, the file docs/deploy.md tells operators to use, with
// each interface given the block of its role. Every daemon runs in the foreground as a child
// of this process (so the run's teardown ends it), with its own state directory (sockets, pid
// files), logging to the run directory; nothing touches /etc/frr or /var/run/frr.
import fs from 'node:fs';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { repoRoot } from './bins.js';
import { run, sleep, type ProcessSet } from './sh.js';

export const FRR_CONF = path.join(repoRoot, 'deploy', 'router', 'frr', 'frr.conf');
const FRR_BIN = '/usr/lib/frr';

/** What an interface of a PIM router faces; each role has its block in frr.conf. */
export type IfRole = 'src' | 'core' | 'host';
const ROLE_BLOCK: Record<IfRole, string> = { src: 'src0', core: 'core0', host: 'host0' };

/** The RP address frr.conf names (`ip pim rp A.B.C.D ...`). */
export function rpAddress(conf: string): string {
  const m = /^ip pim rp (\d+\.\d+\.\d+\.\d+)/m.exec(conf);
  if (!m) throw new Error('frr.conf names no RP (ip pim rp A.B.C.D ...)');
  return m[1];
}

/** Splits an FRR config into its global lines and its `interface NAME` blocks. */
function parse(conf: string): { global: string[]; blocks: Map<string, string[]> } {
  const global: string[] = [];
  const blocks = new Map<string, string[]>();
  let cur: string[] | null = null;
  for (const line of conf.split('\n')) {
    const m = /^interface (\S+)\s*$/.exec(line);
    if (m) {
      cur = [];
      blocks.set(m[1], cur);
      continue;
    }
    if (cur && (/^\s/.test(line) || line.trim() === '')) {
      if (line.trim()) cur.push(line);
      continue;
    }
    cur = null;
    if (line.trim() && !line.startsWith('!')) global.push(line);
  }
  return { global, blocks };
}

/** The configuration one router loads: frr.conf's global part, then for each interface the
 *  block of its role (the `lo` block as written). Throws if frr.conf lacks a role's block. */
export function routerConfig(conf: string, hostname: string, ifs: Map<string, IfRole>): string {
  const { global, blocks } = parse(conf);
  const out = [`hostname ${hostname}`];
  const perRole = (role: IfRole) => {
    const b = blocks.get(ROLE_BLOCK[role]);
    if (!b) throw new Error(`${FRR_CONF}: no block "interface ${ROLE_BLOCK[role]}" for ${role} interfaces`);
    return b;
  };
  // Interfaces first: pimd takes `ip pim rp` only once it can reach the RP through a PIM
  // interface (or is the RP, with the address on its PIM-enabled loopback).
  if (blocks.has('lo')) out.push('interface lo', ...blocks.get('lo')!, 'exit');
  for (const [ifName, role] of ifs) out.push(`interface ${ifName}`, ...perRole(role), 'exit');
  out.push(...global);
  return out.join('\n') + '\n';
}

/** frr.conf without the IGMP timer settings (query interval, query response time, last-member
 *  query interval and count): FRR's defaults, to measure what the tuning buys (docs/deploy.md). */
export function withFrrDefaults(conf: string): string {
  return conf
    .split('\n')
    .filter((l) => !/^\s*ip igmp (query-interval|query-max-response-time|last-member-query-interval|last-member-query-count)\b/.test(l))
    .join('\n');
}

export interface FrrRouterOptions {
  procs: ProcessSet;
  ns: string;
  name: string;
  /** State directory (sockets, pid files); created, owned by the `frr` user, removed by the caller. */
  stateDir: string;
  /** Where zebra's and pimd's output goes. */
  logDir: string;
  config: string;
}

/** One router: zebra and pimd in a namespace, configured through vtysh like a booting router. */
export class FrrRouter {
  private constructor(
    readonly name: string,
    readonly ns: string,
    readonly stateDir: string,
    readonly children: ChildProcess[],
  ) {}

  static async start(o: FrrRouterOptions): Promise<FrrRouter> {
    for (const b of ['zebra', 'pimd']) {
      if (!fs.existsSync(`${FRR_BIN}/${b}`)) throw new Error(`${FRR_BIN}/${b} missing: install Debian's frr (scripts/setup.sh)`);
    }
    fs.mkdirSync(o.stateDir, { recursive: true, mode: 0o755 });
    // The daemons drop to the `frr` user: their sockets and pid files live in a directory it owns.
    await run('chown', ['frr:frr', o.stateDir]);
    const conf = path.join(o.stateDir, 'frr.conf');
    fs.writeFileSync(path.join(o.logDir, `frr-${o.name}.conf`), o.config);
    const zsock = path.join(o.stateDir, 'zserv.api');
    const common = (d: string) => ['-i', path.join(o.stateDir, `${d}.pid`), '-z', zsock, '--vty_socket', o.stateDir, '-f', '/dev/null', '-P', '0', '--log', 'stdout', '--log-level', 'info'];
    const children: ChildProcess[] = [];
    const log = fs.createWriteStream(path.join(o.logDir, `frr-${o.name}.log`), { flags: 'a' });
    log.on('error', () => {});
    const spawn = (d: string) => {
      const c = o.procs.spawnIn(o.ns, `${d} ${o.name}`, `${FRR_BIN}/${d}`, common(d));
      c.stdout?.pipe(log, { end: false });
      c.stderr?.pipe(log, { end: false });
      children.push(c);
      return c;
    };
    const r = new FrrRouter(o.name, o.ns, o.stateDir, children);
    const zebra = spawn('zebra');
    await r.waitFor(() => fs.existsSync(zsock), zebra, 'zebra socket', 10_000);
    const pimd = spawn('pimd');
    await r.waitFor(() => fs.existsSync(path.join(o.stateDir, 'pimd.vty')), pimd, 'pimd vty', 10_000);
    // pimd learns interfaces, addresses and routes from zebra: configure it once registered.
    await r.waitFor(async () => /\bpim\b/.test(await r.vtysh('show zebra client summary')), pimd, 'pimd registered with zebra', 10_000);
    // vtysh -f hands each line to the daemon that owns it, as `vtysh -b` does at boot; it
    // exits 0 even when a line is refused, and prints the refusal: any output is an error.
    // `ip pim rp` is refused ("No Path to RP address") until pimd's synchronous route lookup
    // connection to zebra is up, which comes a moment after pimd registered: those lines go
    // in once that answers (at most 10 s).
    const rpLines = o.config.split('\n').filter((l) => /^ip pim rp /.test(l));
    const apply = async (file: string) => {
      const res = await run('vtysh', ['--vty_socket', o.stateDir, '-f', file], { timeoutMs: 15_000, allowFail: true });
      return res.code !== 0 ? `vtysh exit ${res.code}: ${res.stderr}` : (res.stdout + res.stderr).trim();
    };
    fs.writeFileSync(conf, o.config.split('\n').filter((l) => !/^ip pim rp /.test(l)).join('\n'), { mode: 0o644 });
    const said = await apply(conf);
    if (said) throw new Error(`router ${o.name}: configuration refused: ${said}`);
    const rpConf = path.join(o.stateDir, 'rp.conf');
    fs.writeFileSync(rpConf, rpLines.join('\n') + '\n', { mode: 0o644 });
    const end = Date.now() + 10_000;
    for (;;) {
      const rpSaid = rpLines.length ? await apply(rpConf) : '';
      if (!rpSaid) break;
      if (!/No Path to RP/.test(rpSaid) || Date.now() > end) throw new Error(`router ${o.name}: configuration refused: ${rpSaid}`);
      await sleep(200);
    }
    return r;
  }

  /** Polls `cond` until it holds; fails when the daemon exits first or after `ms`. */
  private async waitFor(cond: () => boolean | Promise<boolean>, child: ChildProcess, what: string, ms: number) {
    const end = Date.now() + ms;
    while (!(await Promise.resolve().then(cond).catch(() => false))) {
      if (child.exitCode !== null) throw new Error(`router ${this.name}: ${what}: daemon exited ${child.exitCode}`);
      if (Date.now() > end) throw new Error(`router ${this.name}: no ${what} within ${ms} ms`);
      await sleep(50);
    }
  }

  /** Runs show commands through vtysh (bounded to 10 s). */
  async vtysh(...cmds: string[]): Promise<string> {
    const args = ['--vty_socket', this.stateDir];
    for (const c of cmds) args.push('-c', c);
    return (await run('vtysh', args, { timeoutMs: 10_000 })).stdout;
  }

  async json<T = unknown>(cmd: string): Promise<T> {
    const out = await this.vtysh(`${cmd} json`);
    return JSON.parse(out) as T;
  }

  /** PIM neighbours by interface. */
  async neighbors(): Promise<Map<string, string[]>> {
    const j = await this.json<Record<string, Record<string, unknown>>>('show ip pim neighbor');
    return new Map(Object.entries(j).map(([ifc, ns]) => [ifc, Object.keys(ns)]));
  }
}

/** Waits until every router has a PIM neighbour on each of its `core` interfaces. */
export async function waitForAdjacencies(routers: { router: FrrRouter; core: string[] }[], ms = 15_000): Promise<number> {
  const t0 = Date.now();
  for (;;) {
    let missing = '';
    for (const r of routers) {
      const n = await r.router.neighbors();
      const lack = r.core.filter((i) => !(n.get(i)?.length));
      if (lack.length) missing = `${r.router.name}: ${lack.join(',')}`;
    }
    if (!missing) return Date.now() - t0;
    if (Date.now() - t0 > ms) throw new Error(`PIM adjacencies not up within ${ms} ms (${missing})`);
    await sleep(200);
  }
}
