// Fault injection on the testbed (issue 9, docs/reliability.md). The fast set runs three faults
// (about 65 s on the 2-core machine): the sender SIGKILLed and restarted, a player SIGKILLed and
// the multicast router restarted. LAYERCAST_E2E_FAULTS=all adds the 5-s link flap and the 20 %
// loss bursts; `layercast-e2e faults` runs all five and prints the figures. The sender restart
// joined the fast set once players kept the new sender's packets that arrive before its
// announcement is accepted (they hold the first key picture): 0.2-0.5 s against the 2-s bound,
// where it was 0.21-2.8 s (docs/reliability.md). Every fault runs on the secured configuration
// (bed.ts `secured`: generated tokens, HTTPS, encryption, UDP reports, SSM), whose figures are
// part of each verdict. Each records its acceptance measurement (issue9/fault-* and
// issue23/fault-*-secured).
// Skipped while the media binaries are not built.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { findBinary } from '../src/bins.js';
import { listNamespaces, ownerPrefix } from '../src/netns.js';
import { recovery, runFault, type FaultName } from '../src/faults.js';
import { scratchDir } from './scratch.js';

// Under `make test` (LAYERCAST_REQUIRE_BINS=1) missing binaries fail the tests instead.
const skip =
  (!findBinary('layercast-server') || !findBinary('layercast-player') || !findBinary('layercast-linkemu')) && !process.env.LAYERCAST_REQUIRE_BINS
    ? 'layercast-server / layercast-player / layercast-linkemu not built yet'
    : false;
const all = process.env.LAYERCAST_E2E_FAULTS === 'all';
const CMD = 'npm test -w e2e (test/faults.test.ts)';

async function fault(name: FaultName, t: { diagnostic: (m: string) => void }) {
  const dir = scratchDir(`lc-e2e-fault-${name}-`);
  const r = await runFault(name, { dir, record: true, command: `${CMD}; layercast-e2e faults ${name}` });
  t.diagnostic(`${name}: ${r.value}`);
  for (const d of r.details) t.diagnostic(`  ${d}`);
  // Nothing of this process's networks is left behind.
  const left = (await listNamespaces()).filter((n) => n.startsWith(ownerPrefix()));
  assert.deepEqual(left, [], 'namespaces left after the fault');
  return { r, ctx: `${r.value}\n${r.details.join('\n')}\nlogs ${dir}` };
}

test('recovery(): late shed, no shed, not back yet', () => {
  const ls = [5, 5, 5, 3, 2, 2, 4, 5, 5].map((layers, i) => ({ t: i, layers }));
  // disturbance from t=1 to 4: the shed shows at t=3 (late); back at t=7
  assert.deepEqual(recovery(ls, 1, 4, 5), { shed: true, minLayers: 3, backAt: 7 });
  assert.deepEqual(recovery(ls, 0, 3, 5), { shed: false, minLayers: 5, backAt: 0 });
  assert.equal(recovery(ls.slice(0, 6), 1, 6, 5).backAt, null);
});

test('fault: sender killed and restarted: players decode again within 2 s', { skip }, async (t) => {
  const { r, ctx } = await fault('sender-restart', t);
  const worst = r.metrics.worst_s;
  assert.ok(worst !== null && worst !== undefined, `no frame decoded after the restart: ${ctx}`);
  assert.ok(worst <= 2.0, `decoded again after ${worst} s: ${ctx}`);
  assert.ok(r.pass, ctx);
});

test('fault: player SIGKILLed: the server marks it gone, the others are unaffected', { skip }, async (t) => {
  const { r, ctx } = await fault('player-kill', t);
  const gone = r.metrics.gone_after_s;
  assert.ok(gone !== null && gone !== undefined && gone <= 7, `gone after ${gone} s (timeout 5 s): ${ctx}`);
  for (const n of ['pa', 'pb']) {
    assert.ok(Math.abs(r.metrics[`${n}_layers_delta`] ?? NaN) <= 0.5, `${n} layers changed: ${ctx}`);
    assert.ok(Math.abs(r.metrics[`${n}_rate_change`] ?? NaN) <= 0.1, `${n} rate changed: ${ctx}`);
  }
  assert.ok(r.pass, ctx);
});

test('fault: multicast router restarted: players get packets again', { skip }, async (t) => {
  const { r, ctx } = await fault('router-restart', t);
  assert.ok(r.metrics.gap_s !== null && r.metrics.gap_s !== undefined, `no packets after the restart: ${ctx}`);
  assert.ok(r.metrics.gap_s <= 10, `gap ${r.metrics.gap_s} s: ${ctx}`);
  assert.ok(r.pass, ctx);
});

test('fault: 5-s link flap: the player sheds and recovers', { skip: skip || (all ? false : 'set LAYERCAST_E2E_FAULTS=all (or run layercast-e2e faults)') }, async (t) => {
  const { r, ctx } = await fault('link-flap', t);
  assert.ok(r.metrics.recovery_s !== null && (r.metrics.recovery_s ?? Infinity) <= 30, ctx);
  assert.ok(r.pass, ctx);
});

test('fault: 20 % loss bursts: shed, recover, no stuck state', { skip: skip || (all ? false : 'set LAYERCAST_E2E_FAULTS=all (or run layercast-e2e faults)') }, async (t) => {
  const { r, ctx } = await fault('loss-burst', t);
  assert.equal(r.metrics.shed, 1, `did not shed: ${ctx}`);
  assert.ok(r.pass, ctx);
});
