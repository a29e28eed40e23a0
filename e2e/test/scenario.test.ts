import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { parseScenario, loadScenario, expand, findLink, kernelCongestionControl, ScenarioError } from '../src/scenario.js';
import { repoRoot } from '../src/bins.js';

const ERA = `
name: era-exp1
title: ERA Experiment I
duration_s: 20
topology:
  nodes: [src, r1, r2, rcv1, rcv2]
  links:
    - {from: src, to: r1, rate_kbps: 10000, delay_ms: 5}
    - {from: r1, to: r2, rate_kbps: 300, delay_ms: 20, queue: {kind: droptail, limit_packets: 10}}
    - {from: r2, to: rcv1, rate_kbps: 10000, delay_ms: 5}
    - {from: r2, to: rcv2, rate_kbps: 10000, delay_ms: 5}
  multicast: {fast_leave: true}
flows:
  - type: layered
    name: era
    protocol: era
    from: src
    layers: {count: 100, rate_kbps: 20}
    receivers:
      - {name: a, at: rcv1, start_s: 3}
      - {name: b, at: rcv2, start_s: 3}
  - {type: tcp, name: t1, from: src, to: rcv1, start_s: 5}
schedule:
  - {at_s: 10, link: r1-r2, rate_kbps: 200}
measurements:
  - {id: "era/AC-2 throughput", metric: throughput_kbps, of: [era], window: [10, 20], min: 261}
`;

test('parses the simulator format with its defaults', () => {
  const sc = parseScenario(ERA);
  assert.equal(sc.interval_s, 1);
  assert.equal(sc.topology.links[0].duplex, true);
  assert.equal(sc.topology.multicast.leave_latency_ms, 2000);
  const tcp = sc.flows[1];
  assert.equal(tcp.type, 'tcp');
  assert.equal(tcp.type === 'tcp' && tcp.variant, 'reno');
  assert.equal(tcp.packet_size, 512);
  assert.deepEqual(expand(sc, ['era']), ['era/a', 'era/b']);
  assert.deepEqual(expand(sc, ['era/b', 't1']), ['era/b', 't1']);
  assert.deepEqual(findLink(sc, 'r2-r1'), { index: 1, reverse: true });
});

test('TCP variant sack parses and runs as the kernel reno (SACK is on in Linux)', () => {
  const sc = parseScenario(ERA.replace('type: tcp,', 'type: tcp, variant: sack,'));
  const tcp = sc.flows[1];
  assert.equal(tcp.type === 'tcp' && tcp.variant, 'sack');
  assert.deepEqual(['reno', 'newreno', 'sack'].map(kernelCongestionControl), ['reno', 'reno', 'reno']);
});

test('rejects what the simulator rejects', () => {
  const cases: [string, RegExp][] = [
    [ERA.replace('duration_s: 20', 'duration_s: -1'), /duration_s/],
    [ERA.replace('title:', 'titel:'), /unknown field/],
    [ERA.replace('at: rcv2', 'at: nowhere'), /unknown node/],
    [ERA.replace('link: r1-r2', 'link: r1-rcv1'), /unknown link/],
    [ERA.replace('of: [era]', 'of: [nope]'), /unknown flow/],
    [ERA.replace('{count: 100, rate_kbps: 20}', '{count: 100}'), /layers/],
    [ERA.replace('type: tcp', 'type: quic'), /unknown flow type/],
    [ERA.replace('type: tcp,', 'type: tcp, variant: vegas,'), /variant/],
  ];
  for (const [text, re] of cases) assert.throws(() => parseScenario(text), (e: Error) => e instanceof ScenarioError && re.test(e.message), String(re));
});

test('every catalogue scenario loads (the testbed can run what the simulator runs)', () => {
  const dir = path.join(repoRoot, 'research', 'scenarios');
  const files = fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith('.yaml')) : [];
  for (const f of files) assert.doesNotThrow(() => loadScenario(path.join(dir, f)), f);
});

test('the runner names what only the simulator can run (ACC routers, ALMA nodes)', async () => {
  const { simulatorOnly } = await import('../src/runner.js');
  const dir = path.join(repoRoot, 'research', 'scenarios');
  assert.match(simulatorOnly(loadScenario(path.join(dir, 'an-acc-fast.yaml'))) ?? '', /ACC TCP/);
  assert.match(simulatorOnly(loadScenario(path.join(dir, 'alma-m1-heterogeneous-tree.yaml'))) ?? '', /ALMA/);
  assert.match(simulatorOnly(loadScenario(path.join(dir, 'pcc-s11-tcp-friendliness.yaml'))) ?? '', /TFRC\/PCC/);
  assert.match(simulatorOnly(loadScenario(path.join(dir, 'an-s1a-jain.yaml'))) ?? '', /aer-nca session with active repair servers/);
  assert.equal(simulatorOnly(loadScenario(path.join(dir, 'era-exp1-convergence.yaml'))), null);
});
