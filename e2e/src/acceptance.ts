// Writes one acceptance measurement for scripts/acceptance.mjs (docs/acceptance.md):
// $LAYERCAST_ACCEPTANCE_DIR/<id>.json = { id, value, pass, command, at }.
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from './bins.js';

export function recordAcceptance(id: string, value: string, pass: boolean | null, command: string): void {
  const dir = process.env.LAYERCAST_ACCEPTANCE_DIR ?? path.join(repoRoot, 'target', 'acceptance');
  try {
    fs.mkdirSync(dir, { recursive: true });
    const file = path.join(dir, `${id.replace(/[^A-Za-z0-9_.-]/g, '_')}.json`);
    fs.writeFileSync(file, JSON.stringify({ id, value, pass, command, at: new Date().toISOString() }, null, 1));
  } catch {
    /* measurements are a by-product; never fail a run over them */
  }
}
