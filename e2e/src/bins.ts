// Where the project's binaries are: $LAYERCAST_BIN_DIR, else $CARGO_TARGET_DIR/{release,debug},
// else <repo>/target/{release,debug}. Release builds are preferred (timing).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export function findBinary(name: string): string | null {
  const dirs: string[] = [];
  if (process.env.LAYERCAST_BIN_DIR) dirs.push(process.env.LAYERCAST_BIN_DIR);
  for (const base of [process.env.CARGO_TARGET_DIR, path.join(repoRoot, 'target')]) {
    if (base) dirs.push(path.join(base, 'release'), path.join(base, 'debug'));
  }
  for (const d of dirs) {
    const p = path.join(d, name);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {
      /* next */
    }
  }
  return null;
}

export function requireBinary(name: string): string {
  const p = findBinary(name);
  if (!p) {
    throw new Error(
      `${name} not found: build it (cargo build --release -p ${name}) or set LAYERCAST_BIN_DIR`,
    );
  }
  return p;
}
