#!/usr/bin/env node
// DEV TOOL ONLY: record snapshots from a running layercast-server as JSON lines for
// replay-server.mjs. Polls /api/sessions and /api/viewers once a second (same data as /api/live).
//   node dev/record.mjs http://127.0.0.1:8080 60 > dev/sample-recording.jsonl
const base = process.argv[2] ?? "http://127.0.0.1:8080";
const seconds = Number(process.argv[3] ?? "60");
for (let i = 0; i < seconds; i++) {
  const [s, v] = await Promise.all([fetch(`${base}/api/sessions`), fetch(`${base}/api/viewers`)]);
  const snap = { type: "snapshot", t: Date.now() / 1000, sessions: await s.json(), viewers: await v.json() };
  process.stdout.write(JSON.stringify(snap) + "\n");
  await new Promise((r) => setTimeout(r, 1000));
}
