// Test fixture: builds a small topology, says so, then waits to be interrupted.
import { Net } from '../src/netns.js';
import { buildTopology } from '../src/topology.js';
import { parseScenario } from '../src/scenario.js';

const sc = parseScenario(`
name: hold
duration_s: 10
topology:
  nodes: [a, b]
  links:
    - {from: a, to: b, rate_kbps: 1000, delay_ms: 5}
flows: []
`);
const net = new Net();
await buildTopology(net, sc, { dir: process.argv[2] });
console.log('built');
await new Promise((r) => setTimeout(r, 60_000));
await net.teardown();
