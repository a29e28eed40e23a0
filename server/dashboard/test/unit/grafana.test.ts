// Structure of the checked-in Grafana dashboards (their queries are checked against a live
// Prometheus in test/live): unique ids and uids, the provisioned datasource, non-overlapping
// panels on the 24-column grid, variables used in queries are defined.
import { readdirSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";

const DIR = resolve(__dirname, "../../../../deploy/grafana");
interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: { x: number; y: number; w: number; h: number };
  datasource?: { uid: string };
  targets?: { expr: string; datasource?: { uid: string } }[];
}
const dashboards = readdirSync(resolve(DIR, "dashboards"))
  .filter((f) => f.endsWith(".json"))
  .map((f) => ({ f, d: JSON.parse(readFileSync(resolve(DIR, "dashboards", f), "utf8")) as { uid: string; panels: Panel[]; templating: { list: { name: string }[] } } }));
const dsUid = /uid:\s*(\S+)/.exec(readFileSync(resolve(DIR, "provisioning/datasources/layercast.yml"), "utf8"))![1];

describe("Grafana dashboards", () => {
  it("are the four expected, with unique uids", () => {
    expect(dashboards.map((x) => x.d.uid).sort()).toEqual(["layercast-edges", "layercast-overview", "layercast-session", "layercast-viewer"]);
  });

  for (const { f, d } of dashboards) {
    it(`${f}: ids unique, datasource provisioned, no overlapping panels, variables defined`, () => {
      const ids = d.panels.map((p) => p.id);
      expect(new Set(ids).size).toBe(ids.length);
      const vars = new Set(d.templating.list.map((v) => v.name));
      for (const p of d.panels) {
        expect(p.gridPos.x + p.gridPos.w, p.title).toBeLessThanOrEqual(24);
        if (p.type === "row") continue;
        expect(p.datasource?.uid, p.title).toBe(dsUid);
        for (const t of p.targets ?? []) {
          expect(t.datasource?.uid).toBe(dsUid);
          for (const m of t.expr.matchAll(/\$(\w+)/g)) if (!m[1]!.startsWith("__")) expect(vars.has(m[1]!), `${p.title}: $${m[1]}`).toBe(true);
        }
      }
      for (let i = 0; i < d.panels.length; i++)
        for (let j = i + 1; j < d.panels.length; j++) {
          const a = d.panels[i]!.gridPos;
          const b = d.panels[j]!.gridPos;
          const overlap = a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
          expect(overlap, `${d.panels[i]!.title} overlaps ${d.panels[j]!.title}`).toBe(false);
        }
    });
  }
});
