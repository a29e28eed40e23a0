// Live check of deploy/prometheus and deploy/grafana against REAL processes: Debian's
// Prometheus (in the test network namespace, on loopback) scrapes a real layercast-server and
// real layercast-player processes; then every alert expression (its left-hand side, i.e. the
// quantity compared with the threshold, plus the full expression for errors) and every Grafana
// panel query must return data. Skips loudly ONLY when the layercast binaries do not exist.
// Run alone: deploy/prometheus/live-test.sh
import { existsSync, readdirSync, readFileSync, writeFileSync, copyFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findBinaries, loudSkip, PLAYER_NET, recordAcceptance, SERVER_ADDR, sh, sleep, Stack } from "../stack";
import { alertExpressions, grafanaQueries, substitute, thresholdOperand } from "./promql";

const bins = findBinaries();
const missing = "missing" in bins ? bins.missing : existsSync("/usr/bin/prometheus") ? null : "/usr/bin/prometheus (apt-get install prometheus)";
if (missing) loudSkip("the live Prometheus/Grafana query test (test/live)", `not found: ${missing}`);

const DEPLOY = resolve(__dirname, "../../../../deploy");

interface PromResult {
  status: string;
  error?: string;
  data?: { resultType: string; result: { metric: Record<string, string>; value?: [number, string] }[] };
}

describe.skipIf(missing !== null)("Prometheus rules and Grafana panels against a live server and players", () => {
  let stack: Stack;

  beforeAll(async () => {
    if ("missing" in bins) return;
    stack = new Stack(bins, {
      name: "prometheus-live",
      controller: process.env.LAYERCAST_TEST_CONTROLLER ?? "era",
      sessions: [
        { id: "main", name: "main", protocol: "era", layers: 4, layer_rate_bps: 200_000 },
        { id: "tf", name: "tf", protocol: "tfmcc", layers: 1, layer_rate_bps: 300_000 },
        // A real encode with sound, so the source, picture and audio counters behind the
        // LayercastVideoStalled alert and the audio panels exist (small, to keep the CPU free).
        {
          id: "av",
          name: "av",
          protocol: "era",
          source: "gst-testpattern",
          video: { width: 320, height: 180, fps: 15, spatial: 1, temporal: 1 },
          audio: { kbps: 32 },
        },
      ],
      players: [
        { id: "pa", ns: "p1", metricsPort: 9181 },
        { id: "pb", ns: "p2", metricsPort: 9182 },
        // Real TFMCC receivers for the TFMCC session: the sender's rate, CLR and report
        // counters come from their feedback.
        { id: "ta", ns: "p1", metricsPort: 9183, session: "tf", mode: ["--controller", "tfmcc"] },
        { id: "tb", ns: "p2", metricsPort: 9184, session: "tf", mode: ["--controller", "tfmcc"] },
      ],
      p2Kbit: 500, // one player behind a narrow path so loss and layer changes exist
    });
    await stack.start();
    await sleep(2000);
    const errs = stack.playerStartupErrors();
    if (errs.length) throw new Error(`players did not start:\n${errs.join("\n")}`);

    // Our real prometheus.yml and alerts.yml, with the lab's target addresses.
    const dir = stack.tmp;
    copyFileSync(join(DEPLOY, "prometheus/alerts.yml"), join(dir, "alerts.yml"));
    const cfg = readFileSync(join(DEPLOY, "prometheus/prometheus.yml"), "utf8").replace('"127.0.0.1:8080"', `"${SERVER_ADDR}:8080"`);
    writeFileSync(join(dir, "prometheus.yml"), cfg);
    writeFileSync(join(dir, "players.json"), JSON.stringify([{ targets: [`${PLAYER_NET.p1}:9181`, `${PLAYER_NET.p2}:9182`, `${PLAYER_NET.p1}:9183`, `${PLAYER_NET.p2}:9184`], labels: { site: "lab" } }]));
    stack.spawnLogged(stack.ns.s, "prometheus", "prometheus", [
      `--config.file=${join(dir, "prometheus.yml")}`,
      `--storage.tsdb.path=${join(dir, "tsdb")}`,
      "--web.listen-address=127.0.0.1:9090",
      "--log.level=warn",
    ]);
    await stack.waitFor("Prometheus ready", () => sh("curl", ["-s", "http://127.0.0.1:9090/-/ready"], { ns: stack.ns.s, allowFail: true }).includes("Ready"), 30_000);
    // Every target up, then enough samples for rate() over 1 m windows and rule evaluation.
    await stack.waitFor(
      "all scrape targets up",
      () => {
        const r = query('up{job=~"layercast-.*"} == 1');
        return (r.data?.result.length ?? 0) === 5;
      },
      40_000,
      1000,
    );
    await sleep(30_000);
  });

  afterAll(async () => {
    await stack?.stop();
  });

  function query(q: string): PromResult {
    const out = sh("curl", ["-s", "--max-time", "10", "--data-urlencode", `query=${q}`, "http://127.0.0.1:9090/api/v1/query"], { ns: stack.ns.s, allowFail: true });
    try {
      return JSON.parse(out) as PromResult;
    } catch {
      return { status: "error", error: `not JSON: ${out.slice(0, 200)}` };
    }
  }

  function labelValues(name: string): string[] {
    const out = sh("curl", ["-s", `http://127.0.0.1:9090/api/v1/label/${name}/values`], { ns: stack.ns.s, allowFail: true });
    return (JSON.parse(out) as { data: string[] }).data ?? [];
  }

  it("has every rule group evaluating without errors", () => {
    const out = JSON.parse(sh("curl", ["-s", "http://127.0.0.1:9090/api/v1/rules"], { ns: stack.ns.s })) as {
      data: { groups: { name: string; rules: { name: string; health: string; lastError?: string }[] }[] };
    };
    const rules = out.data.groups.flatMap((g) => g.rules);
    expect(rules.length).toBeGreaterThan(10);
    const bad = rules.filter((r) => r.health !== "ok").map((r) => `${r.name}: ${r.health} ${r.lastError ?? ""}`);
    expect(bad).toEqual([]);
  });

  it("returns data for the quantity behind every alert", () => {
    const alerts = alertExpressions(readFileSync(join(DEPLOY, "prometheus/alerts.yml"), "utf8"));
    expect(alerts.length).toBeGreaterThanOrEqual(6);
    const empty: string[] = [];
    for (const a of alerts) {
      const full = query(a.expr);
      expect(full.status, `${a.name}: ${full.error}`).toBe("success");
      const lhs = thresholdOperand(a.expr);
      const r = query(lhs);
      expect(r.status, `${a.name} (${lhs}): ${r.error}`).toBe("success");
      if ((r.data?.result.length ?? 0) === 0) empty.push(`${a.name}: ${lhs}`);
    }
    expect(empty, "alert quantities with no data").toEqual([]);
  });

  it("returns data for every Grafana panel query", () => {
    const dir = join(DEPLOY, "grafana/dashboards");
    const sessions = labelValues("session");
    const viewers = labelValues("viewer");
    expect(sessions).toEqual(expect.arrayContaining(["main", "tf"]));
    expect(viewers).toEqual(expect.arrayContaining(["pa", "pb"]));
    const empty: string[] = [];
    let n = 0;
    // The edges' dashboard needs a running layercast-edge, which this stack does not have:
    // e2e/test/edge.test.ts checks its metrics against a real edge instead.
    for (const f of readdirSync(dir).filter((x) => x.endsWith(".json") && x !== "layercast-edges.json")) {
      for (const q of grafanaQueries(JSON.parse(readFileSync(join(dir, f), "utf8")))) {
        n++;
        // A panel works if it shows data for some value of its variables (e.g. the TFMCC
        // panel for the TFMCC session, not the ERA one).
        let ok = false;
        let err = "";
        for (const session of sessions)
          for (const viewer of q.expr.includes("$viewer") ? viewers : ["-"]) {
            if (ok) break;
            const r = query(substitute(q.expr, { session, viewer, __rate_interval: "30s", __interval: "5s" }));
            if (r.status !== "success") err = r.error ?? "error";
            else if ((r.data?.result.length ?? 0) > 0) ok = true;
          }
        if (!ok) empty.push(`${f} / ${q.panel}: ${q.expr} ${err}`);
      }
    }
    expect(n).toBeGreaterThan(30);
    expect(empty, "panel queries with no data").toEqual([]);
    const tf = query('layercast_tfmcc_rate_bps{session="tf"}');
    const rate = Number(tf.data?.result[0]?.value?.[1] ?? NaN);
    const reports = Number(query('layercast_tfmcc_reports_total{session="tf"}').data?.result[0]?.value?.[1] ?? NaN);
    expect(reports, "TFMCC reports received from the real players").toBeGreaterThan(0);
    recordAcceptance(
      "issue8/live-prometheus",
      `${n} Grafana panel queries and every alert quantity returned data from Prometheus scraping a real server (ERA + TFMCC sessions) and 4 players; layercast_tfmcc_rate_bps{session="tf"} = ${rate.toFixed(0)}, ${reports} TFMCC reports`,
      true,
      "npm run test:live -w server/dashboard",
    );
  });
});
