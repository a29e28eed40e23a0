// Scratch directories for the e2e tests: each test file's directories are removed when the
// file's tests end, so repeated `make test` runs do not fill /tmp. Set LAYERCAST_KEEP_TMP=1
// to keep them for a post-mortem (the tests print their paths in failure messages).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after } from 'node:test';

const dirs: string[] = [];

after(() => {
  if (process.env.LAYERCAST_KEEP_TMP === '1') return;
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

/** A fresh directory under the system temp dir, named `PREFIX…`, removed after this file's tests. */
export function scratchDir(prefix: string): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  dirs.push(d);
  return d;
}
