// Network namespaces, veth pairs and their teardown. Every namespace this package creates is
// named `lc-e<pid>-<name>`: `lc-` marks Layercast, `e<pid>` the testbed process that owns it, so
// `cleanup` can tell a crashed run's leftovers (owner dead) from a live run's.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { run, nsRun, ProcessSet } from './sh.js';

export const NS_PREFIX = 'lc-';

export function ownerPrefix(pid = process.pid): string {
  return `${NS_PREFIX}e${pid}-`;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export async function listNamespaces(): Promise<string[]> {
  const r = await run('ip', ['netns', 'list'], { allowFail: true });
  return r.stdout
    .split('\n')
    .map((l) => l.trim().split(/\s+/)[0])
    .filter((n): n is string => !!n);
}

/** Kills every process inside `ns`, then deletes it. */
export async function deleteNamespace(ns: string): Promise<void> {
  const pids = await run('ip', ['netns', 'pids', ns], { allowFail: true });
  for (const p of pids.stdout.split(/\s+/).filter(Boolean)) {
    try {
      process.kill(Number(p), 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  await run('ip', ['netns', 'del', ns], { allowFail: true });
}

/** State directories of daemons run inside a run's namespaces (FRR's sockets and pid files):
 *  `<tmp>/lc-e<pid>-<name>`, named like the namespaces so `cleanup` finds a dead run's. */
export function stateDirs(): string[] {
  try {
    return fs
      .readdirSync(os.tmpdir())
      .filter((n) => /^lc-e\d+-/.test(n))
      .map((n) => path.join(os.tmpdir(), n));
  } catch {
    return [];
  }
}

/**
 * Removes `lc-` namespaces (and the state directories of their daemons). Default: only those
 * of testbed runs whose owning process is gone (safe while other runs and other tests are
 * live). `all`: every `lc-` namespace.
 */
export async function cleanup(opts: { all?: boolean; prefix?: string } = {}): Promise<string[]> {
  const removed: string[] = [];
  for (const dir of stateDirs()) {
    const name = path.basename(dir);
    if (opts.prefix ? !name.startsWith(opts.prefix) : !opts.all && alive(Number(/^lc-e(\d+)-/.exec(name)![1]))) continue;
    fs.rmSync(dir, { recursive: true, force: true });
  }
  for (const ns of await listNamespaces()) {
    if (opts.prefix) {
      if (!ns.startsWith(opts.prefix)) continue;
    } else if (!ns.startsWith(NS_PREFIX)) continue;
    else if (!opts.all) {
      const m = /^lc-e(\d+)-/.exec(ns);
      if (!m || alive(Number(m[1]))) continue;
    }
    await deleteNamespace(ns);
    removed.push(ns);
  }
  return removed;
}

/** The namespaces and processes of one run, with always-teardown. */
export class Net {
  readonly namespaces: string[] = [];
  /** Directories removed at teardown, after the processes that use them are gone. */
  readonly dirs: string[] = [];
  readonly procs = new ProcessSet();
  private teardownP: Promise<void> | null = null;
  private readonly onSignal: (sig: NodeJS.Signals) => void;

  constructor(readonly prefix = ownerPrefix()) {
    this.onSignal = (sig) => {
      // Ctrl-C or kill: tear down, then die of the same signal's exit code.
      void this.teardown().finally(() => process.exit(sig === 'SIGINT' ? 130 : 143));
    };
    process.once('SIGINT', this.onSignal);
    process.once('SIGTERM', this.onSignal);
  }

  ns(name: string): string {
    return `${this.prefix}${name}`;
  }

  /** A state directory for daemons of this run (`<tmp>/lc-e<pid>-<name>`), removed at teardown. */
  stateDir(name: string): string {
    const d = path.join(os.tmpdir(), this.ns(name));
    this.dirs.push(d);
    return d;
  }

  async addNamespace(name: string): Promise<string> {
    if (this.teardownP) throw new Error('network is being torn down');
    const ns = this.ns(name);
    // Registered before it exists, so a teardown that starts meanwhile removes it too.
    this.namespaces.push(ns);
    await run('ip', ['netns', 'add', ns]);
    if (this.teardownP) {
      await deleteNamespace(ns);
      throw new Error('network is being torn down');
    }
    await run('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    for (const kv of [
      'net.ipv6.conf.all.disable_ipv6=1',
      'net.ipv6.conf.default.disable_ipv6=1',
      'net.ipv4.conf.all.rp_filter=0',
      'net.ipv4.conf.default.rp_filter=0',
      'net.ipv4.ip_forward=1',
      // One socket may hold only 20 group memberships by default; igmpproxy joins every routed
      // group upstream on one socket (a session has up to 255 layers).
      'net.ipv4.igmp_max_memberships=1024',
      // Raise the socket buffer ceilings: window must never limit TCP (era.md §5, max cwnd).
      'net.core.rmem_max=16777216',
      'net.core.wmem_max=16777216',
      'net.ipv4.tcp_rmem=4096 131072 16777216',
      'net.ipv4.tcp_wmem=4096 131072 16777216',
    ]) {
      await nsRun(ns, 'sysctl', ['-qw', kv], { allowFail: true });
    }
    return ns;
  }

  /** A veth pair from `nsA`/`ifA` to `nsB`/`ifB`, offloads off, up. */
  async veth(nsA: string, ifA: string, nsB: string, ifB: string): Promise<void> {
    await run('ip', ['-n', nsA, 'link', 'add', ifA, 'type', 'veth', 'peer', 'name', ifB, 'netns', nsB]);
    for (const [ns, ifc] of [
      [nsA, ifA],
      [nsB, ifB],
    ] as const) {
      await offloadsOff(ns, ifc);
      await run('ip', ['-n', ns, 'link', 'set', 'dev', ifc, 'up']);
    }
  }

  /** Idempotent; concurrent callers (a signal handler and a `finally`) all wait for the same
   *  teardown, so nobody exits while namespaces are still being deleted. */
  teardown(): Promise<void> {
    if (!this.teardownP) {
      this.teardownP = (async () => {
        process.removeListener('SIGINT', this.onSignal);
        process.removeListener('SIGTERM', this.onSignal);
        await this.procs.stopAll();
        // Until none is left: a build still in flight may register one more meanwhile.
        while (this.namespaces.length) await deleteNamespace(this.namespaces.pop()!);
        for (const d of this.dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
      })();
    }
    return this.teardownP;
  }
}

/** Checksum and segmentation offloads off (DESIGN.md "Emulated network rules"). */
export async function offloadsOff(ns: string, ifc: string): Promise<void> {
  await nsRun(ns, 'ethtool', ['-K', ifc, 'tx', 'off', 'rx', 'off', 'gso', 'off', 'gro', 'off', 'tso', 'off']);
}
