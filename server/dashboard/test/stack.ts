// A real Layercast stack for the browser and Prometheus tests: the real layercast-server with
// a synthetic source and real layercast-player processes, in network namespaces this file
// creates and always deletes. The network is a LAN with an IGMP-snooping switch, the setup
// docs/deploy.md recommends:
//
//   ns S (server, Chromium, Prometheus)  s0 10.77.0.1 ──┐
//   ns P1 (fast players)                 p0 10.77.0.2 ──┤ ns R: bridge br0, IGMP snooping +
//   ns P2 (slow players)                 p0 10.77.0.3 ──┘ querier, fast leave, no flooding of
//                                                         unjoined groups to player ports;
//                                                         tbf on the ports towards P1 and P2
//
// The switch forwards a group to a player port only while a player there holds it, so the
// tbf towards P2 carries exactly the layers the P2 players hold, and a leave takes effect at
// once (fast leave). (igmpproxy was tried first: in this version a downstream leave does not
// remove the route for minutes, so left layers kept congesting the bottleneck.)
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

export const REPO_ROOT = resolve(__dirname, "../../..");
export const ARTIFACTS = resolve(__dirname, "../test-artifacts");

/** Where the binaries are: $LAYERCAST_BIN_DIR, else <repo>/target/{release,debug}, else
 *  $CARGO_TARGET_DIR/{release,debug} (the same order as the e2e testbed's bins.ts). */
export function findBinaries(): { server: string; player: string; dir: string } | { missing: string } {
  const bases = [join(REPO_ROOT, "target"), process.env.CARGO_TARGET_DIR].filter((d): d is string => !!d);
  const dirs = [process.env.LAYERCAST_BIN_DIR, ...bases.flatMap((b) => [join(b, "release"), join(b, "debug")])].filter(
    (d): d is string => !!d,
  );
  for (const dir of dirs) {
    const server = join(dir, "layercast-server");
    const player = join(dir, "layercast-player");
    if (existsSync(server) && existsSync(player)) return { server, player, dir };
  }
  return { missing: dirs.map((d) => join(d, "layercast-{server,player}")).join(", ") };
}

/** Writes one acceptance measurement for scripts/acceptance.mjs (docs/acceptance.md). */
export function recordAcceptance(id: string, value: string, pass: boolean | null, command: string): void {
  const dir = process.env.LAYERCAST_ACCEPTANCE_DIR ?? join(REPO_ROOT, "target", "acceptance");
  mkdirSync(dir, { recursive: true });
  const at = new Date().toISOString();
  writeFileSync(join(dir, `${id.replace(/[^A-Za-z0-9_.-]/g, "_")}.json`), JSON.stringify({ id, value, pass, command, at }));
}

/** Print the reason a real-stack test is skipped so nobody mistakes a skip for a pass. Under
 *  `make test` (LAYERCAST_REQUIRE_BINS=1) the binaries are always built, so a skip is an error. */
export function loudSkip(what: string, why: string): void {
  if (process.env.LAYERCAST_REQUIRE_BINS === "1") throw new Error(`${what} cannot run: ${why}`);
  const bar = "!".repeat(100);
  console.warn(`\n${bar}\n!!! SKIPPING ${what}: ${why}\n!!! Build them (cargo build -p layercast-server -p layercast-player) or set LAYERCAST_BIN_DIR.\n${bar}\n`);
}

export function sh(cmd: string, args: string[], opts: { ns?: string; allowFail?: boolean } = {}): string {
  const full = opts.ns ? ["ip", ["netns", "exec", opts.ns, cmd, ...args]] : [cmd, args];
  try {
    return execFileSync(full[0] as string, full[1] as string[], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  } catch (e) {
    if (opts.allowFail) return "";
    const err = e as { stderr?: string; message: string };
    throw new Error(`${full[0]} ${(full[1] as string[]).join(" ")}: ${err.stderr || err.message}`);
  }
}

export interface PlayerSpec {
  id: string;
  ns: "p1" | "p2";
  metricsPort: number;
  /** Replaces `--controller <c>` (e.g. ["--fixed-layers", "3"]). */
  mode?: string[];
  /** Session id to join [default: the first session's]. */
  session?: string;
}

export interface StackOptions {
  name: string; // for log file names
  sessions: object[]; // --session JSON objects
  players: PlayerSpec[];
  controller?: string;
  /** Initial tbf rates on the router's downstream links, kbit/s. */
  p1Kbit?: number;
  p2Kbit?: number;
  /** More server flags (e.g. a higher `--telemetry-per-addr-per-sec` for a load generator). */
  serverArgs?: string[];
}

export const SERVER_ADDR = "10.77.0.1";
export const SERVER_HTTP = `http://${SERVER_ADDR}:8080`;
export const PLAYER_NET = { p1: "10.77.0.2", p2: "10.77.0.3" } as const;

export class Stack {
  readonly suffix = `${process.pid.toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
  readonly ns = { s: `lc-d${this.suffix}-s`, r: `lc-d${this.suffix}-r`, p1: `lc-d${this.suffix}-p1`, p2: `lc-d${this.suffix}-p2` };
  readonly tmp = mkdtempSync(join(tmpdir(), "lc-dash-"));
  readonly logDir: string;
  private procs: { name: string; p: ChildProcess }[] = [];
  private created: string[] = [];

  constructor(
    readonly bins: { server: string; player: string },
    readonly opts: StackOptions,
  ) {
    this.logDir = join(ARTIFACTS, opts.name);
    mkdirSync(this.logDir, { recursive: true });
  }

  private spawnIn(ns: string, name: string, cmd: string, args: string[]): ChildProcess {
    const out = openSync(join(this.logDir, `${name}.log`), "w");
    const p = spawn("ip", ["netns", "exec", ns, cmd, ...args], { stdio: ["ignore", out, out] });
    this.procs.push({ name, p });
    return p;
  }

  /** Build the namespaces, router and bottlenecks, then start the server and the players. */
  async start(): Promise<void> {
    const { s, r, p1, p2 } = this.ns;
    for (const n of [s, r, p1, p2]) {
      sh("ip", ["netns", "add", n]);
      this.created.push(n);
      sh("ip", ["link", "set", "lo", "up"], { ns: n });
    }
    // The switch: a bridge with IGMP snooping and a querier (so memberships are learned and
    // refreshed), fast leave and no flooding of unregistered groups on the player ports.
    sh("ip", ["link", "add", "br0", "type", "bridge", "mcast_snooping", "1", "mcast_querier", "1", "mcast_igmp_version", "2", "mcast_query_interval", "1000"], { ns: r });
    sh("ip", ["link", "add", "s0", "netns", s, "type", "veth", "peer", "name", "r0", "netns", r]);
    sh("ip", ["link", "add", "p0", "netns", p1, "type", "veth", "peer", "name", "r1", "netns", r]);
    sh("ip", ["link", "add", "p0", "netns", p2, "type", "veth", "peer", "name", "r2", "netns", r]);
    for (const dev of ["r0", "r1", "r2"]) {
      sh("ip", ["link", "set", dev, "master", "br0"], { ns: r });
      sh("ip", ["link", "set", dev, "up"], { ns: r });
    }
    for (const dev of ["r1", "r2"]) sh("bridge", ["link", "set", "dev", dev, "fastleave", "on", "mcast_flood", "off"], { ns: r });
    sh("ip", ["link", "set", "br0", "up"], { ns: r });
    const addr = (ns: string, dev: string, a: string) => {
      sh("ip", ["addr", "add", a, "dev", dev], { ns });
      sh("ip", ["link", "set", dev, "up"], { ns });
    };
    addr(s, "s0", `${SERVER_ADDR}/24`);
    addr(p1, "p0", `${PLAYER_NET.p1}/24`);
    addr(p2, "p0", `${PLAYER_NET.p2}/24`);
    sh("ip", ["route", "add", "239.0.0.0/8", "dev", "s0"], { ns: s });
    for (const n of [p1, p2]) {
      sh("ip", ["route", "add", "239.0.0.0/8", "dev", "p0"], { ns: n });
      // IGMPv2 so that a leave is one message the switch acts on at once.
      sh("sysctl", ["-qw", "net.ipv4.conf.all.force_igmp_version=2"], { ns: n });
      sh("sysctl", ["-qw", "net.ipv4.conf.p0.force_igmp_version=2"], { ns: n });
    }
    this.setBottleneck("p1", this.opts.p1Kbit ?? 20_000);
    this.setBottleneck("p2", this.opts.p2Kbit ?? 20_000);

    this.startServer();
    await this.waitFor("server HTTP", () => this.curl("/api/sessions").startsWith("["));
    for (const pl of this.opts.players) this.startPlayer(pl);
  }

  private server: ChildProcess | null = null;

  startServer(): void {
    const sargs = ["--dev", "--http-addr", `${SERVER_ADDR}:8080`, "--interface", SERVER_ADDR, "--loop", "false", "--ttl", "4", "--dashboard-dir", resolve(__dirname, "../dist"), "--announce", "", ...(this.opts.serverArgs ?? [])];
    for (const ses of this.opts.sessions) sargs.push("--session", JSON.stringify(ses));
    this.serverStarts++;
    this.server = this.spawnIn(this.ns.s, `server-${this.serverStarts}`, this.bins.server, sargs);
  }
  private serverStarts = 0;

  /** Stop the server (SIGTERM) and wait for it to exit; players keep running. */
  async stopServer(): Promise<void> {
    const p = this.server;
    if (!p || p.exitCode !== null) return;
    const exited = new Promise<void>((r) => p.once("exit", () => r()));
    p.kill("SIGTERM");
    await Promise.race([exited, sleep(5000)]);
    if (p.exitCode === null) p.kill("SIGKILL");
  }

  /** Fail fast with the player's own words if it refused to start (e.g. unknown controller). */
  playerStartupErrors(): string[] {
    const errs: string[] = [];
    for (const { name, p } of this.procs) {
      if (name.startsWith("player-") && p.exitCode !== null) {
        let log = "";
        try {
          log = readFileSync(join(this.logDir, `${name}.log`), "utf8").trim().split("\n").slice(-3).join(" | ");
        } catch {
          /* no log */
        }
        errs.push(`${name} exited with ${p.exitCode}: ${log}`);
      }
    }
    return errs;
  }

  startPlayer(pl: PlayerSpec): void {
    const ns = this.ns[pl.ns];
    const sessionId = pl.session ?? (this.opts.sessions[0] as { id?: string }).id ?? "s0";
    this.spawnIn(ns, `player-${pl.id}`, this.bins.player, [
      "--session-url",
      `${SERVER_HTTP}/api/sessions/${sessionId}/announcement`,
      ...(pl.mode ?? ["--controller", this.opts.controller ?? "era"]),
      "--interface",
      PLAYER_NET[pl.ns],
      "--headless",
      "--viewer-id",
      pl.id,
      "--metrics-addr",
      `${PLAYER_NET[pl.ns]}:${pl.metricsPort}`,
    ]);
  }

  /** Set (or change) the rate of the switch port towards a player namespace. */
  setBottleneck(which: "p1" | "p2", kbit: number): void {
    const dev = which === "p1" ? "r1" : "r2";
    // burst of about one MTU so packet pairs are serialised (DESIGN: emulated network rules);
    // queue of 100 ms.
    sh("tc", ["qdisc", "replace", "dev", dev, "root", "tbf", "rate", `${kbit}kbit`, "burst", "1600", "latency", "100ms"], { ns: this.ns.r });
  }

  /** GET a server path from inside the server namespace. */
  curl(path: string): string {
    return sh("curl", ["-s", "--max-time", "3", SERVER_HTTP + path], { ns: this.ns.s, allowFail: true });
  }

  json<T>(path: string): T | null {
    try {
      return JSON.parse(this.curl(path)) as T;
    } catch {
      return null;
    }
  }

  async waitFor(what: string, ok: () => boolean | Promise<boolean>, timeoutMs = 30_000, everyMs = 500): Promise<void> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      if (await ok()) return;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what} (logs: ${this.logDir})`);
      await sleep(everyMs);
    }
  }

  /** An executable that runs a program inside namespace `ns` (used as Chromium's path). */
  wrapper(ns: string, program: string): string {
    const path = join(this.tmp, `in-${ns}-${program.replace(/\W/g, "_")}.sh`);
    writeFileSync(path, `#!/bin/sh\nexec ip netns exec ${ns} ${program} "$@"\n`);
    chmodSync(path, 0o755);
    return path;
  }

  spawnLogged(ns: string, name: string, cmd: string, args: string[]): ChildProcess {
    return this.spawnIn(ns, name, cmd, args);
  }

  async stop(): Promise<void> {
    for (const { p } of [...this.procs].reverse()) if (p.exitCode === null) p.kill("SIGTERM");
    await sleep(700);
    for (const { p } of this.procs) if (p.exitCode === null) p.kill("SIGKILL");
    // Anything still inside our namespaces (e.g. Chromium helpers) goes with them.
    for (const n of this.created) {
      const pids = sh("ip", ["netns", "pids", n], { allowFail: true }).split(/\s+/).filter(Boolean);
      for (const pid of pids) sh("kill", ["-9", pid], { allowFail: true });
    }
    for (const n of this.created.reverse()) sh("ip", ["netns", "del", n], { allowFail: true });
    this.created = [];
    // Logs, wrapper scripts and browser profiles live under tmp; LAYERCAST_KEEP_TMP=1 keeps them.
    if (process.env.LAYERCAST_KEEP_TMP !== "1") rmSync(this.tmp, { recursive: true, force: true });
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
