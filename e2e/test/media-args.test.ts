// The testbed's per-protocol sender and player arguments (no network): ERA players start with
// the session description, ERA senders announce every ANNOUNCE_RAIS adaptation intervals
// (docs/testbed.md, "ERA checks, fourth pass").
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseScenario, type LayeredFlow } from '../src/scenario.js';
import { ANNOUNCE_RAIS, announceIntervalArgs, playerArgs, prefetchesDescription, serverArgs } from '../src/media.js';

const flow = (protocol: string, adapt = 1): LayeredFlow => {
  const sc = parseScenario(`
name: m
title: m
duration_s: 10
topology:
  nodes: [src, rcv]
  links:
    - {from: src, to: rcv, rate_kbps: 300, delay_ms: 5}
flows:
  - type: layered
    name: s
    protocol: ${protocol}
    from: src
    adapt_interval_s: ${adapt}
    layers: {count: 100, rate_kbps: 20}
    receivers:
      - {name: a, at: rcv, start_s: 3}
measurements: []
`);
  return sc.flows[0] as LayeredFlow;
};

test('ERA and PLM players get the description at start; the others wait for the SAM', () => {
  for (const p of ['era', 'era-thesis', 'era-rtt-join', 'plm']) assert.equal(prefetchesDescription(flow(p)), true, p);
  for (const p of ['rlm', 'flid-dl', 'delay']) assert.equal(prefetchesDescription(flow(p)), false, p);
  const f = flow('era');
  const args = playerArgs(f, f.receivers[0], 0, '10.0.0.2', '/tmp/x', 7, '/tmp/x/session.json');
  assert.deepEqual(args.slice(args.indexOf('--session-info'), args.indexOf('--session-info') + 2), ['--session-info', '/tmp/x/session.json']);
});

test('ERA senders announce every ANNOUNCE_RAIS RAIs, the others every second (server default)', () => {
  assert.equal(ANNOUNCE_RAIS, 10);
  assert.deepEqual(announceIntervalArgs(flow('era')), ['--announce_interval_ms', '10000']);
  assert.deepEqual(announceIntervalArgs(flow('era-rtt-join', 0.5)), ['--announce_interval_ms', '5000']);
  assert.deepEqual(announceIntervalArgs(flow('plm')), []);
  const a = serverArgs(flow('era'), 0, '10.0.0.1');
  assert.equal(a[a.indexOf('--announce_interval_ms') + 1], '10000');
  assert.equal(serverArgs(flow('plm'), 0, '10.0.0.1').includes('--announce_interval_ms'), false);
});
