// A wall-clock step of one process, not of the machine (the `clock-step` fault, faults.ts):
// e2e/clockstep/clockstep.c, preloaded into the server, adds an offset to its CLOCK_REALTIME
// readings; the offset is 8 bytes in a file that the test rewrites in place. The host clock,
// every other process and the monotonic clock are untouched. docs/reliability.md "Server clock
// step".
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from './bins.js';
import { run } from './sh.js';

const SOURCE = path.join(repoRoot, 'e2e', 'clockstep', 'clockstep.c');

/** Builds the shim (cc, once per source change) and returns the shared object's path. */
export async function clockShim(): Promise<string> {
  const out = path.join(process.env.CARGO_TARGET_DIR ?? path.join(repoRoot, 'target'), 'clockstep', 'liblayercast-clockstep.so');
  const fresh = fs.existsSync(out) && fs.statSync(out).mtimeMs >= fs.statSync(SOURCE).mtimeMs;
  if (!fresh) {
    fs.mkdirSync(path.dirname(out), { recursive: true });
    await run('cc', ['-shared', '-fPIC', '-O2', '-Wall', '-Wextra', '-Werror', '-o', out, SOURCE, '-ldl']);
  }
  return out;
}

/** The offset file of one stepped process. */
export class ClockOffset {
  private constructor(
    readonly file: string,
    readonly shim: string,
  ) {}

  /** A zero offset in `file` (made now, 8 bytes, before the process maps it). */
  static async create(file: string): Promise<ClockOffset> {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, Buffer.alloc(8));
    return new ClockOffset(file, await clockShim());
  }

  /** The environment that makes a process read its wall clock through this offset. */
  env(): Record<string, string> {
    return { LD_PRELOAD: this.shim, LAYERCAST_CLOCK_OFFSET_FILE: this.file };
  }

  /** Sets the offset (seconds, signed): one 8-byte write in place. Never truncates: the file
   *  is mapped, and a mapping past a truncated end faults. */
  set(seconds: number): void {
    const b = Buffer.alloc(8);
    b.writeBigInt64LE(BigInt(Math.round(seconds * 1e9)));
    const fd = fs.openSync(this.file, 'r+');
    try {
      fs.writeSync(fd, b, 0, 8, 0);
    } finally {
      fs.closeSync(fd);
    }
  }
}
