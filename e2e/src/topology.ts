// Builds a scenario's topology out of namespaces: one namespace per node, one veth path per
// link (through a link-emulator namespace, or a direct veth with tbf for rate-only links),
// static unicast routes, and multicast routers along each session's tree: the project's fast-leave
// mrouter, igmpproxy, or FRR's PIM-SM/SSM (zebra + pimd, src/frr.ts).
import fs from 'node:fs';
import path from 'node:path';
import { Net } from './netns.js';
import { run, nsRun } from './sh.js';
import { LinkEmu, type LinkSettings } from './linkemu.js';
import { requireBinary } from './bins.js';
import type { LinkDef, QdiscConfig, Scenario } from './scenario.js';
import { FRR_CONF, FrrRouter, routerConfig, rpAddress, waitForAdjacencies, type IfRole } from './frr.js';

export interface BuildOptions {
  /** Bytes added to each packet's IP length for rate accounting. Default -28: rates count UDP
   *  payload, the unit the simulator's packet_size and the server's layer rates use. */
  overheadBytes?: number;
  /** 'auto' (default): tbf for links with no delay, no loss and a drop-tail queue; the link
   *  emulator otherwise. 'linkemu': the emulator everywhere. */
  linkMode?: 'auto' | 'linkemu';
  /** SCHED_FIFO priority for the emulators' two wire threads (default 10; 0 = off). Real-time
   *  scheduling keeps release timing within tens of µs on a loaded machine; the threads sleep
   *  between packets, so they cost little. */
  rtPrio?: number;
  seed?: number;
  /** Multicast router: 'mrouter' (default: `layercast-linkemu mrouter`, immediate leave, or the
   *  scenario's leave_latency_ms without fast_leave), 'igmpproxy' (the packaged igmpproxy 0.3,
   *  with quickleave when fast_leave; it prunes only on its route-ageing cycle, seconds late) or
   *  'frr' (FRR zebra + pimd on every router node, PIM between routers, IGMPv3 towards receiver
   *  nodes, the RP on the first layered source's node; configured from `frrConf`). */
  router?: RouterKind;
  /** FRR mode: the configuration text (default: deploy/router/frr/frr.conf). */
  frrConf?: string;
  /** Directory for configs and logs. */
  dir: string;
}

export interface BuiltLink {
  index: number;
  def: LinkDef;
  name: string;
  kind: 'linkemu' | 'tbf';
  ifName: string;
  addrFrom: string;
  addrTo: string;
  emu?: LinkEmu;
  emuNs?: string;
}

export type RouterKind = 'mrouter' | 'igmpproxy' | 'frr';

export interface Router {
  node: string;
  kind: RouterKind;
  upstream: string[];
  downstream: string[];
  conf: string | null;
  /** FRR mode: the running router (vtysh queries) and each PIM interface's role. */
  frr?: FrrRouter;
  roles?: Map<string, IfRole>;
}

export interface Built {
  nodeNs: Map<string, string>;
  /** The namespace and address a layered source's sender runs in (behind the source node). */
  sourceApp: Map<string, { ns: string; addr: string }>;
  links: BuiltLink[];
  routers: Router[];
  /** The address of `node` on its first link (what flows to it target). */
  addrOf(node: string): string;
  /** The interface and address `node` uses toward `toward` (next hop on the shortest path). */
  toward(node: string, toward: string): { ifName: string; addr: string };
}

/** Sim default queue where a scenario names none (crates/netmodel `QdiscConfig::default`). */
export const DEFAULT_QUEUE: QdiscConfig = { kind: 'droptail', limit_packets: 100 };

const sanitize = (s: string) => s.replace(/[^A-Za-z0-9_.-]/g, '_');

function settings(def: LinkDef, queue: QdiscConfig | null | undefined, overhead: number, reverseOfSimplex = false): LinkSettings {
  if (reverseOfSimplex) {
    // A simplex link in the simulator has no reverse path; on a real wire ACKs and IGMP still
    // need one: same delay, unlimited rate, no loss.
    return { rate_bps: 0, delay_ms: def.delay_ms, loss: 0, overhead_bytes: overhead };
  }
  // The simulator's jitter is an extra delay uniform in [0, J); the emulator's is delay ± j:
  // centre it at delay + J/2 with j = J/2.
  return {
    rate_bps: Math.round(def.rate_kbps * 1000),
    delay_ms: def.delay_ms + def.jitter_ms / 2,
    jitter_ms: def.jitter_ms / 2,
    loss: def.loss,
    queue: queue ?? DEFAULT_QUEUE,
    overhead_bytes: overhead,
  };
}

function queueLimitBytes(q: QdiscConfig, rateBps: number): number {
  if (typeof q.limit_bytes === 'number') return q.limit_bytes;
  if (typeof q.limit_packets === 'number') return q.limit_packets * 1514;
  if (typeof q.limit_ms === 'number') return Math.max(1514, Math.round((q.limit_ms / 1000) * rateBps / 8));
  return 100 * 1514;
}

/** Shortest paths by hop count: parent[n] for a BFS from `src`. */
function bfs(adj: Map<string, { peer: string; link: number }[]>, src: string): Map<string, { parent: string; link: number } | null> {
  const seen = new Map<string, { parent: string; link: number } | null>([[src, null]]);
  const q = [src];
  while (q.length) {
    const n = q.shift()!;
    for (const e of adj.get(n) ?? []) {
      if (!seen.has(e.peer)) {
        seen.set(e.peer, { parent: n, link: e.link });
        q.push(e.peer);
      }
    }
  }
  return seen;
}

export async function buildTopology(net: Net, sc: Scenario, opts: BuildOptions): Promise<Built> {
  const overhead = opts.overheadBytes ?? -28;
  if (sc.topology.links.length > 250) throw new Error('at most 250 links');
  const nodeNs = new Map<string, string>();
  for (const n of sc.topology.nodes) nodeNs.set(n, await net.addNamespace(`n-${sanitize(n)}`));

  const links: BuiltLink[] = [];
  const adj = new Map<string, { peer: string; link: number }[]>();
  for (const [i, def] of sc.topology.links.entries()) {
    const ifName = `lk${i}`;
    const a = nodeNs.get(def.from)!;
    const b = nodeNs.get(def.to)!;
    const q = def.queue ?? DEFAULT_QUEUE;
    const rq = def.reverse_queue ?? q;
    // A monitored queue needs the emulator's sojourn histogram.
    const rateOnly = def.delay_ms === 0 && def.jitter_ms === 0 && def.loss === 0 && q.kind === 'droptail' && rq.kind === 'droptail' && def.duplex && !def.monitor_queue;
    const kind = opts.linkMode !== 'linkemu' && rateOnly ? 'tbf' : 'linkemu';
    const bl: BuiltLink = {
      index: i,
      def,
      name: `${def.from}-${def.to}`,
      kind,
      ifName,
      addrFrom: `10.200.${i}.1`,
      addrTo: `10.200.${i}.2`,
    };
    if (kind === 'linkemu') {
      const e = await net.addNamespace(`L${i}`);
      await net.veth(a, ifName, e, 'emua');
      await net.veth(e, 'emub', b, ifName);
      bl.emuNs = e;
      bl.emu = await LinkEmu.start(
        net.procs,
        e,
        'emua',
        'emub',
        settings(def, q, overhead),
        settings(def, rq, overhead, !def.duplex),
        { seed: (opts.seed ?? 1) * 1000 + i, rtPrio: opts.rtPrio ?? 10, statsOut: `${opts.dir}/linkemu-${i}.json` },
      );
    } else {
      await net.veth(a, ifName, b, ifName);
      const rate = Math.round(def.rate_kbps * 1000);
      for (const [ns, qq] of [
        [a, q],
        [b, rq],
      ] as const) {
        // burst of about one MTU so the bottleneck serialises (DESIGN.md); the size table makes
        // tbf count the same bytes as the emulator (tbf sees Ethernet frames: IP + 14).
        await nsRun(ns, 'tc', [
          'qdisc', 'add', 'dev', ifName, 'root', 'stab', 'overhead', String(overhead - 14),
          'tbf', 'rate', `${rate}bit`, 'burst', '1600', 'limit', String(queueLimitBytes(qq, rate)),
        ]);
      }
    }
    await run('ip', ['-n', a, 'addr', 'add', `${bl.addrFrom}/24`, 'dev', ifName]);
    await run('ip', ['-n', b, 'addr', 'add', `${bl.addrTo}/24`, 'dev', ifName]);
    links.push(bl);
    if (!adj.has(def.from)) adj.set(def.from, []);
    if (!adj.has(def.to)) adj.set(def.to, []);
    adj.get(def.from)!.push({ peer: def.to, link: i });
    adj.get(def.to)!.push({ peer: def.from, link: i });
  }

  const endOf = (link: number, node: string) => {
    const l = links[link];
    return l.def.from === node ? { ifName: l.ifName, addr: l.addrFrom, peerAddr: l.addrTo } : { ifName: l.ifName, addr: l.addrTo, peerAddr: l.addrFrom };
  };

  // First hop from `node` toward `dst`.
  const trees = new Map<string, ReturnType<typeof bfs>>();
  const tree = (root: string) => {
    if (!trees.has(root)) trees.set(root, bfs(adj, root));
    return trees.get(root)!;
  };
  const firstHop = (node: string, dst: string): number | null => {
    const t = tree(dst); // parents point toward dst
    const p = t.get(node);
    return p ? p.link : null;
  };

  // Static routes: every link subnet not attached to a node, via the first hop toward the
  // nearer endpoint of that link.
  for (const n of sc.topology.nodes) {
    const ns = nodeNs.get(n)!;
    for (const l of links) {
      if (l.def.from === n || l.def.to === n) continue;
      const dFrom = tree(l.def.from).has(n) ? hopCount(tree(l.def.from), n) : Infinity;
      const dTo = tree(l.def.to).has(n) ? hopCount(tree(l.def.to), n) : Infinity;
      const target = dFrom <= dTo ? l.def.from : l.def.to;
      const hop = firstHop(n, target);
      if (hop === null) continue;
      const e = endOf(hop, n);
      await run('ip', ['-n', ns, 'route', 'replace', `10.200.${l.index}.0/24`, 'via', e.peerAddr, 'dev', e.ifName]);
    }
  }

  // Multicast. The sender of a layered session runs in its own namespace ("app") behind the
  // source node, and the source node is a router: layers nobody downstream holds are pruned
  // there, before the source's first link, as the simulator prunes up to the source. (A
  // sender on the node itself would put every layer on its access link.) Every node of a
  // session's shortest-path tree with children is a router: upstream towards the source,
  // downstream towards its children.
  const sourceApp = new Map<string, { ns: string; addr: string }>();
  const routerIfs = new Map<string, { up: Set<string>; down: Set<string> }>();
  const addRouter = (node: string, up: string, down: string) => {
    // Where several sessions' trees meet, a node has one upstream per source direction.
    const cur = routerIfs.get(node) ?? { up: new Set<string>(), down: new Set<string>() };
    cur.up.add(up);
    cur.down.add(down);
    routerIfs.set(node, cur);
  };
  for (const f of sc.flows) {
    if (f.type !== 'layered' && f.type !== 'tfmcc') continue;
    if (!sourceApp.has(f.from)) {
      const idx = sourceApp.size;
      if (idx > 250) throw new Error('at most 250 layered sources');
      const appNs = await net.addNamespace(`a-${sanitize(f.from)}`);
      const srcNs = nodeNs.get(f.from)!;
      await net.veth(appNs, 'up0', srcNs, 'app0');
      await run('ip', ['-n', appNs, 'addr', 'add', `10.201.${idx}.2/24`, 'dev', 'up0']);
      await run('ip', ['-n', srcNs, 'addr', 'add', `10.201.${idx}.1/24`, 'dev', 'app0']);
      await run('ip', ['-n', appNs, 'route', 'add', 'default', 'via', `10.201.${idx}.1`]);
      await run('ip', ['-n', appNs, 'route', 'replace', '224.0.0.0/4', 'dev', 'up0']);
      // everyone else reaches the sender through the source node
      for (const n of sc.topology.nodes) {
        if (n === f.from) continue;
        const hop = firstHop(n, f.from);
        if (hop === null) continue;
        const e = endOf(hop, n);
        await run('ip', ['-n', nodeNs.get(n)!, 'route', 'replace', `10.201.${idx}.0/24`, 'via', e.peerAddr, 'dev', e.ifName]);
      }
      sourceApp.set(f.from, { ns: appNs, addr: `10.201.${idx}.2` });
    }
    const t = tree(f.from);
    for (const r of f.receivers) {
      let n = r.at;
      if (!t.has(n)) throw new Error(`receiver ${r.name} at ${n} is not reachable from ${f.from}`);
      while (n !== f.from) {
        const p = t.get(n)!;
        const parent = p.parent;
        const up = parent === f.from ? 'app0' : endOf(t.get(parent)!.link, parent).ifName;
        addRouter(parent, up, endOf(p.link, parent).ifName);
        n = parent;
      }
    }
  }
  const routers: Router[] = [];
  const kind = opts.router ?? 'mrouter';
  if (kind === 'frr') {
    const rp = sourceApp.size ? sc.flows.find((f) => f.type === 'layered' || f.type === 'tfmcc')!.from : null;
    routers.push(...(await startFrr(net, sc, opts, nodeNs, routerIfs, rp, links, firstHop, endOf)));
  }
  for (const [node, r] of kind === 'frr' ? [] : routerIfs) {
    const ns = nodeNs.get(node)!;
    for (const u of r.up) r.down.delete(u); // an interface is upstream for some session: never downstream
    const log = fs.createWriteStream(`${opts.dir}/${kind}-${sanitize(node)}.log`);
    if (kind === 'mrouter') {
      const mc = sc.topology.multicast;
      const delay = mc.fast_leave ? 0 : Math.round(mc.leave_latency_ms);
      const child = net.procs.spawnIn(ns, `mrouter ${node}`, requireBinary('layercast-linkemu'), [
        'mrouter', '--upstream', [...r.up].join(','), '--downstream', [...r.down].join(','), '--leave-delay-ms', String(delay),
      ]);
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`mrouter on ${node} not ready`)), 10_000);
        child.stdout!.once('data', (d) => {
          clearTimeout(t);
          if (String(d).includes('"ready":true')) resolve();
          else reject(new Error(`mrouter on ${node}: ${String(d)}`));
        });
        child.once('exit', (c) => {
          clearTimeout(t);
          reject(new Error(`mrouter on ${node} exited ${c}`));
        });
      });
      child.stdout!.pipe(log);
      child.stderr!.pipe(log);
      routers.push({ node, kind, upstream: [...r.up], downstream: [...r.down], conf: null });
      continue;
    }
    if (r.up.size > 1) throw new Error(`node ${node}: sessions arrive on several interfaces; igmpproxy has one upstream (use the default mrouter)`);
    const up = [...r.up][0];
    const conf = `${opts.dir}/igmpproxy-${sanitize(node)}.conf`;
    const quick = sc.topology.multicast.fast_leave ? 'quickleave\n' : '';
    const allIfs = (await run('ip', ['-n', ns, '-o', 'link', 'show'])).stdout
      .split('\n')
      .map((l) => /^\d+:\s+([^:@]+)/.exec(l)?.[1])
      .filter((x): x is string => !!x);
    let text = `# generated by @layercast/e2e for node ${node}\n${quick}`;
    // altnet: sources live beyond the upstream link's own subnet (chained routers).
    text += `phyint ${up} upstream ratelimit 0 threshold 1\n  altnet 10.0.0.0/8\n`;
    for (const d of r.down) text += `phyint ${d} downstream ratelimit 0 threshold 1\n`;
    for (const i of allIfs) if (i !== up && !r.down.has(i)) text += `phyint ${i} disabled\n`;
    fs.writeFileSync(conf, text);
    const child = net.procs.spawnIn(ns, `igmpproxy ${node}`, 'igmpproxy', ['-d', '-v', conf]);
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    routers.push({ node, kind, upstream: [up], downstream: [...r.down], conf });
  }

  return {
    nodeNs,
    sourceApp,
    links,
    routers,
    addrOf(node: string) {
      const l = links.find((x) => x.def.from === node || x.def.to === node);
      if (!l) throw new Error(`node ${node} has no link`);
      return l.def.from === node ? l.addrFrom : l.addrTo;
    },
    toward(node: string, to: string) {
      if (node === to) return { ifName: 'lo', addr: '127.0.0.1' };
      const hop = firstHop(node, to);
      if (hop === null) throw new Error(`no path from ${node} to ${to}`);
      const e = endOf(hop, node);
      return { ifName: e.ifName, addr: e.addr };
    },
  };
}

/** FRR on every router node: interface roles from the links (towards the sender's namespace:
 *  `src`; towards another router node: `core`; towards any other node: `host`), the RP address
 *  of frr.conf on the RP node's loopback and routed to from every node, the daemons started and
 *  configured, and every router-to-router adjacency up before the run goes on. */
async function startFrr(
  net: Net,
  sc: Scenario,
  opts: BuildOptions,
  nodeNs: Map<string, string>,
  routerIfs: Map<string, { up: Set<string>; down: Set<string> }>,
  rpNode: string | null,
  links: BuiltLink[],
  firstHop: (node: string, dst: string) => number | null,
  endOf: (link: number, node: string) => { ifName: string; addr: string; peerAddr: string },
): Promise<Router[]> {
  const conf = opts.frrConf ?? fs.readFileSync(FRR_CONF, 'utf8');
  const rp = rpAddress(conf);
  if (rpNode) {
    await run('ip', ['-n', nodeNs.get(rpNode)!, 'addr', 'add', `${rp}/32`, 'dev', 'lo']);
    for (const n of sc.topology.nodes) {
      if (n === rpNode) continue;
      const hop = firstHop(n, rpNode);
      if (hop === null) continue;
      const e = endOf(hop, n);
      await run('ip', ['-n', nodeNs.get(n)!, 'route', 'replace', `${rp}/32`, 'via', e.peerAddr, 'dev', e.ifName]);
    }
  }
  const receiverNodes = new Set(sc.flows.flatMap((f) => (f.type === 'layered' || f.type === 'tfmcc' ? f.receivers.map((r) => r.at) : [])));
  const out: Router[] = [];
  const started: Promise<void>[] = [];
  for (const [node, r] of routerIfs) {
    if (receiverNodes.has(node)) throw new Error(`node ${node} is a router and has receivers: with FRR, receivers sit on host nodes behind a router`);
    const roles = new Map<string, IfRole>();
    for (const ifName of [...r.up, ...r.down]) {
      if (ifName === 'app0') {
        roles.set(ifName, 'src');
        continue;
      }
      const l = links.find((x) => x.ifName === ifName && (x.def.from === node || x.def.to === node))!;
      const peer = l.def.from === node ? l.def.to : l.def.from;
      roles.set(ifName, routerIfs.has(peer) ? 'core' : 'host');
    }
    const router: Router = { node, kind: 'frr', upstream: [...r.up], downstream: [...r.down], conf: path.join(opts.dir, `frr-${sanitize(node)}.conf`), roles };
    out.push(router);
    started.push(
      FrrRouter.start({
        procs: net.procs,
        ns: nodeNs.get(node)!,
        name: sanitize(node),
        stateDir: net.stateDir(`frr-${sanitize(node)}`),
        logDir: opts.dir,
        config: routerConfig(conf, sanitize(node), roles),
      }).then((f) => void (router.frr = f)),
    );
  }
  await Promise.all(started);
  await waitForAdjacencies(out.map((r) => ({ router: r.frr!, core: [...r.roles!].filter(([, x]) => x === 'core').map(([i]) => i) })));
  return out;
}

function hopCount(t: Map<string, { parent: string; link: number } | null>, n: string): number {
  let c = 0;
  let cur = n;
  while (t.get(cur)) {
    cur = t.get(cur)!.parent;
    c++;
  }
  return c;
}
