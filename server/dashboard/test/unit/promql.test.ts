import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { alertExpressions, grafanaQueries, substitute, thresholdOperand } from "../live/promql";

const DEPLOY = resolve(__dirname, "../../../../deploy");

describe("PromQL helpers used by the live Prometheus test", () => {
  it("splits an alert expression at its top-level comparison", () => {
    expect(thresholdOperand('up{job="x"} == 0')).toBe('up{job="x"}');
    expect(thresholdOperand("a < 0.25 * max_over_time(a[10m])")).toBe("a");
    expect(thresholdOperand('sum by (r) (rate(x{what=~"a|b"}[5m])) > 1')).toBe('sum by (r) (rate(x{what=~"a|b"}[5m]))');
    expect(thresholdOperand("rate(x[1m])")).toBe("rate(x[1m])");
  });

  it("reads every alert of deploy/prometheus/alerts.yml, including block scalars", () => {
    const a = alertExpressions(readFileSync(resolve(DEPLOY, "prometheus/alerts.yml"), "utf8"));
    expect(a.map((x) => x.name)).toEqual(
      expect.arrayContaining(["LayercastServerDown", "LayercastSenderStalled", "LayercastViewerLossHigh", "LayercastLayerOscillation", "LayercastTfmccRateCollapse"]),
    );
    for (const x of a) expect(x.expr.length).toBeGreaterThan(5);
    const y = alertExpressions("  - alert: X\n    expr: |\n      a\n        / b\n    for: 1m\n");
    expect(y).toEqual([{ name: "X", expr: "a / b" }]);
  });

  it("finds the queries of all three Grafana dashboards", () => {
    for (const f of ["layercast-overview", "layercast-session", "layercast-viewer"]) {
      const q = grafanaQueries(JSON.parse(readFileSync(resolve(DEPLOY, `grafana/dashboards/${f}.json`), "utf8")));
      expect(q.length).toBeGreaterThan(8);
    }
    expect(substitute('x{session="$session"}[$__rate_interval] ${viewer}', { session: "s", __rate_interval: "30s", viewer: "v" })).toBe('x{session="s"}[30s] v');
  });
});
