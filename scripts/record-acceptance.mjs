// Records one acceptance measurement from a shell script, in the same form testkit::record and
// e2e's recordAcceptance write: node scripts/record-acceptance.mjs ID VALUE true|false|null COMMAND
import fs from 'node:fs';
import path from 'node:path';

const [id, value, pass, command] = process.argv.slice(2);
if (!id || value === undefined || !['true', 'false', 'null'].includes(pass) || !command) {
  console.error('usage: record-acceptance.mjs ID VALUE true|false|null COMMAND');
  process.exit(2);
}
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const dir = process.env.LAYERCAST_ACCEPTANCE_DIR || path.join(root, 'target', 'acceptance');
fs.mkdirSync(dir, { recursive: true });
const body = { id, value, pass: JSON.parse(pass), command, at: new Date().toISOString() };
fs.writeFileSync(path.join(dir, `${id.replace(/[^A-Za-z0-9_.-]/g, '_')}.json`), JSON.stringify(body, null, 1));
