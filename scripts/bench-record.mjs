#!/usr/bin/env node
// Turns the criterion results of `make bench` (target/criterion/<group>/<bench>/new/) into
// acceptance records (target/acceptance/*.json, the format testkit::record writes), so that
// docs/acceptance.md shows the benchmark figures the issues ask for. Only benches that ran are
// recorded; a missing one is reported and left as it was.
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const crit = path.join(process.env.CARGO_TARGET_DIR ?? path.join(root, 'target'), 'criterion');
const out = process.env.LAYERCAST_ACCEPTANCE_DIR ?? path.join(root, 'target', 'acceptance');

/** Mean time per iteration (ns, with its 95 % CI) and elements per iteration of one bench. */
function result(group, bench) {
  const dir = path.join(crit, group, bench, 'new');
  try {
    const est = JSON.parse(fs.readFileSync(path.join(dir, 'estimates.json'), 'utf8'));
    const meta = JSON.parse(fs.readFileSync(path.join(dir, 'benchmark.json'), 'utf8'));
    const m = est.mean;
    return {
      ns: m.point_estimate,
      lo: m.confidence_interval.lower_bound,
      hi: m.confidence_interval.upper_bound,
      elements: meta.throughput?.Elements ?? 1,
    };
  } catch {
    return null;
  }
}

const load = os.loadavg()[0].toFixed(1);
const cores = os.cpus().length;
const fmt = (x, d = 2) => Number(x).toFixed(d);

/** One record per check: [id, group, bench, command, describe(r) -> [value, pass]]. */
const CHECKS = [
  ['issue3/bench-era', 'handle_packet', 'era', 'cargo bench -p layercast-congestion --bench controllers', (r) => {
    const pps = r.elements / (r.ns * 1e-9);
    return [`${fmt(pps / 1e6)} M packets/s on one core (${fmt(r.ns / r.elements, 1)} ns per packet, 95 % CI ${fmt(r.lo / r.elements, 1)}-${fmt(r.hi / r.elements, 1)}; ${r.elements} packets per iteration, 100 layers held)`, pps >= 5e6];
  }],
  ['issue3/bench-plm', 'handle_packet', 'plm', 'cargo bench -p layercast-congestion --bench controllers', (r) => {
    const pps = r.elements / (r.ns * 1e-9);
    return [`${fmt(pps / 1e6)} M packets/s on one core (${fmt(r.ns / r.elements, 1)} ns per packet, 95 % CI ${fmt(r.lo / r.elements, 1)}-${fmt(r.hi / r.elements, 1)}; ${r.elements} packets per iteration, 100 layers held)`, pps >= 5e6];
  }],
  ['issue3/bench-tfmcc', 'tfmcc_sender_handle_report', null, 'cargo bench -p layercast-congestion --bench tfmcc', (r) =>
    [`${fmt(r.ns, 0)} ns per receiver report at the sender (95 % CI ${fmt(r.lo, 0)}-${fmt(r.hi, 0)})`, null]],
  ['issue5/bench-encode', 'encode', '720p30_l3t3_1thread_speed9', 'cargo bench -p layercast-codec --bench codec', (r) => {
    const fps = 1e9 / r.ns;
    return [`${fmt(fps, 1)} fps, 1280x720 L3T3, one thread, cpu-used 9 (${fmt(r.ns / 1e6, 2)} ms per picture, 95 % CI ${fmt(r.lo / 1e6, 2)}-${fmt(r.hi / 1e6, 2)})`, fps >= 60];
  }],
  ['issue5/bench-decode', 'decode', '720p_full_60_pictures_1thread', 'cargo bench -p layercast-codec --bench codec', (r) => {
    const fps = r.elements / (r.ns * 1e-9);
    return [`${fmt(fps, 1)} fps, 1280x720 all layers, one thread (${fmt(r.ns / r.elements / 1e6, 2)} ms per picture)`, null];
  }],
];

fs.mkdirSync(out, { recursive: true });
let n = 0;
for (const [id, group, bench, command, describe] of CHECKS) {
  const r = bench === null ? result(group, '') ?? result(group, 'base') : result(group, bench);
  if (!r) {
    console.log(`bench-record: ${id}: no criterion result under ${path.join(crit, group, bench ?? '')} (run ${command})`);
    continue;
  }
  const [value, pass] = describe(r);
  const rec = {
    at: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    command,
    id,
    pass,
    value: `${value}; ${cores} cores, load ${load}`,
  };
  fs.writeFileSync(path.join(out, `${id.replace(/\//g, '_')}.json`), JSON.stringify(rec));
  console.log(`bench-record: ${id}: ${rec.value}${pass === null ? '' : pass ? ' PASS' : ' FAIL'}`);
  n += 1;
}
console.log(`bench-record: ${n} of ${CHECKS.length} benchmark checks recorded in ${out}`);
