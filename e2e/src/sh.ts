// Running commands: every call has a timeout, every spawned process is tracked so teardown can
// end it.
import { execFile, spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export class CommandError extends Error {
  constructor(
    public readonly cmd: string,
    public readonly result: RunResult,
  ) {
    super(`${cmd} exited ${result.code}: ${result.stderr.trim() || result.stdout.trim()}`);
  }
}

/** Runs a command to completion (default timeout 30 s). Throws CommandError on failure unless allowFail. */
export function run(
  cmd: string,
  args: string[],
  opts: { timeoutMs?: number; allowFail?: boolean; input?: string } = {},
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      cmd,
      args,
      { timeout: opts.timeoutMs ?? 30_000, maxBuffer: 64 << 20, killSignal: 'SIGKILL' },
      (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0;
        const r = { code, stdout: String(stdout), stderr: String(stderr) };
        if (code !== 0 && !opts.allowFail) reject(new CommandError([cmd, ...args].join(' '), r));
        else resolve(r);
      },
    );
    if (opts.input !== undefined) child.stdin?.end(opts.input);
  });
}

/** Runs a command inside a network namespace. */
export function nsRun(ns: string, cmd: string, args: string[], opts: { timeoutMs?: number; allowFail?: boolean } = {}) {
  return run('ip', ['netns', 'exec', ns, cmd, ...args], opts);
}

/** Long-running processes started by this run, ended at teardown. */
export class ProcessSet {
  readonly procs: { name: string; child: ChildProcess }[] = [];

  spawnIn(ns: string | null, name: string, cmd: string, args: string[], opts: SpawnOptions = {}): ChildProcess {
    const full = ns ? ['netns', 'exec', ns, cmd, ...args] : args;
    const child = spawn(ns ? 'ip' : cmd, full, { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
    this.procs.push({ name, child });
    return child;
  }

  /** SIGTERM everything, then SIGKILL what is left after `graceMs`. */
  async stopAll(graceMs = 2000): Promise<void> {
    const alive = this.procs.filter((p) => p.child.exitCode === null && p.child.signalCode === null);
    for (const p of alive) p.child.kill('SIGTERM');
    const deadline = Date.now() + graceMs;
    while (Date.now() < deadline && alive.some((p) => p.child.exitCode === null && p.child.signalCode === null)) {
      await sleep(50);
    }
    for (const p of alive) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
  }
}

/** Collects a child's stdout as text. */
export function collect(child: ChildProcess): Promise<string> {
  return new Promise((resolve) => {
    let out = '';
    child.stdout?.on('data', (d) => (out += String(d)));
    child.on('close', () => resolve(out));
    child.on('error', () => resolve(out));
  });
}

/** Waits for the process to exit (or the timeout), returns the exit code (null on timeout). */
export function waitExit(child: ChildProcess, timeoutMs: number): Promise<number | null> {
  if (child.exitCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(null), timeoutMs);
    child.on('exit', (code) => {
      clearTimeout(t);
      resolve(code ?? -1);
    });
  });
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Starts `layercast-linkemu keep-awake` (one SCHED_IDLE spinner per CPU: an idle vCPU halts and
 *  wakes late for the links' timers) when `linkemu` is given; the returned function stops it and
 *  waits for it. A Ctrl-C exits from Net's handler: the spinners are killed on exit too. */
export function startKeepAwake(linkemu: string | null | undefined): () => Promise<void> {
  const ka: ChildProcess | null = linkemu ? spawn(linkemu, ['keep-awake'], { stdio: 'ignore' }) : null;
  const kill = () => ka?.kill('SIGTERM');
  process.on('exit', kill);
  return async () => {
    process.off('exit', kill);
    if (ka) {
      ka.kill('SIGTERM');
      await waitExit(ka, 3000);
    }
  };
}
