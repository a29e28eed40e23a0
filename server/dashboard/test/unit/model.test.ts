import { describe, expect, it } from "vitest";
import { aggregate, DECISION_CAP, filterSortViewers, HISTORY_S, lossBucket, mergeDecisions, Model, quantile, viewersByLayer } from "../../src/model";
import { session, snap, viewer } from "./fixtures";
import type { Decision } from "../../src/types";

const dec = (at_s: number, from: number, to: number, reason = "r"): Decision => ({ at_s, from, to, reason, inputs: {} });

describe("Model.apply", () => {
  it("keeps a per-viewer history and tracks layer changes", () => {
    const m = new Model();
    for (let t = 1; t <= 4; t++) m.apply(snap(t, [session()], [viewer("a", { layers: t <= 2 ? 1 : 3 })]));
    const h = m.viewerHist.get("a")!;
    expect(h.times()).toEqual([1, 2, 3, 4]);
    expect(h.values("layers")).toEqual([1, 1, 3, 3]);
    expect(m.version).toBe(4);
  });

  it("applies deltas: named viewers change, removed ones go, the others stay", () => {
    const m = new Model();
    m.apply(snap(1, [session()], [viewer("a"), viewer("b", { layers: 2 })]));
    const d = (t: number, vs: ReturnType<typeof viewer>[], removed: string[] = []) => ({ ...snap(t, [session()], vs), full: false, removed });
    m.apply(d(2, [viewer("a", { layers: 3, decisions: [dec(1.5, 1, 3)] })]));
    expect(m.viewers.map((v) => v.id)).toEqual(["a", "b"]);
    expect(m.viewerById.get("a")!.layers).toBe(3);
    expect(m.viewerById.get("b")!.layers).toBe(2);
    expect(m.viewerHist.get("b")!.values("layers")).toEqual([2, 2]);
    expect(m.changes.get("a")!.map((x) => x.to)).toEqual([3]);
    m.apply(d(3, [viewer("c")], ["b"]));
    expect(m.viewers.map((v) => v.id)).toEqual(["a", "c"]);
    expect(m.viewerHist.has("b")).toBe(false);
    // "a" did not report in this delta: its decisions are kept, not cleared.
    expect(m.decisions.get("a")!.length).toBe(1);
    expect(m.agg.total).toBe(2);
  });

  it("ignores stale and duplicate snapshots (e.g. after reconnect)", () => {
    const m = new Model();
    expect(m.apply(snap(10, [session()], [viewer("a")]))).toBe(true);
    expect(m.apply(snap(10, [session()], [viewer("a", { layers: 3 })]))).toBe(false);
    expect(m.apply(snap(9, [session()], [viewer("a", { layers: 3 })]))).toBe(false);
    expect(m.viewerById.get("a")!.layers).toBe(1);
    expect(m.staleSnapshots).toBe(2);
  });

  it("breaks chart lines across a gap in the stream", () => {
    const m = new Model();
    m.apply(snap(1, [session()], [viewer("a")]));
    m.apply(snap(20, [session()], [viewer("a")]));
    const h = m.viewerHist.get("a")!;
    expect(h.times()).toEqual([1, 19, 20]);
    expect(Number.isNaN(h.values("rate")[1]!)).toBe(true);
  });

  it("bounds history to HISTORY_S samples", () => {
    const m = new Model();
    for (let t = 1; t <= HISTORY_S + 50; t++) m.apply(snap(t, [session()], [viewer("a", { rate_bps: t })]));
    const h = m.viewerHist.get("a")!;
    expect(h.length).toBe(HISTORY_S);
    expect(h.times()[0]).toBe(51);
    expect(h.values("rate").at(-1)).toBe(HISTORY_S + 50);
  });

  it("forgets viewers the server stops listing, keeps gone ones without new samples", () => {
    const m = new Model();
    m.apply(snap(1, [session()], [viewer("a"), viewer("b")]));
    m.apply(snap(2, [session()], [viewer("a", { gone: true })]));
    expect(m.viewerHist.has("b")).toBe(false);
    expect(m.viewerHist.get("a")!.length).toBe(1);
    expect(m.agg.active).toBe(0);
    expect(m.agg.total).toBe(1);
  });

  it("derives the sender rate from bytes_sent deltas and skips counter resets", () => {
    const m = new Model();
    m.apply(snap(1, [session({ bytes_sent: 0 })], []));
    m.apply(snap(3, [session({ bytes_sent: 250_000 })], []));
    m.apply(snap(4, [session({ bytes_sent: 100 })], []));
    const r = m.sessionHist.get("s1")!.ring.values("send_bps");
    expect(Number.isNaN(r[0]!)).toBe(true);
    expect(r[1]).toBe(1_000_000);
    expect(Number.isNaN(r[2]!)).toBe(true);
  });

  it("keeps layer changes apart from periodic hold decisions", () => {
    const m = new Model();
    const holds = (t: number) => Array.from({ length: 50 }, (_, i) => dec(t - 50 + i + 1, 2, 2, "rai"));
    m.apply(snap(1, [session()], [viewer("a", { decisions: [dec(0.5, 1, 2, "join"), dec(0.9, 2, 2, "rai")] })]));
    // 300 s of one hold per second, the server re-sending its last 50 each time.
    for (let t = 2; t <= 300; t++) m.apply(snap(t, [session()], [viewer("a", { decisions: holds(t) })]));
    expect(m.decisions.get("a")!.length).toBe(DECISION_CAP);
    expect(m.decisions.get("a")!.some((d) => d.reason === "join")).toBe(false);
    expect(m.changes.get("a")!.map((d) => d.reason)).toEqual(["join"]);
    m.apply(snap(301, [session()], [viewer("a", { decisions: [...holds(300).slice(1), dec(301, 2, 1, "loss")] })]));
    expect(m.changes.get("a")!.map((d) => d.reason)).toEqual(["join", "loss"]);
  });

  it("merges decision logs across snapshots without duplicates", () => {
    const m = new Model();
    m.apply(snap(1, [session()], [viewer("a", { decisions: [dec(0.5, 0, 1)] })]));
    m.apply(snap(2, [session()], [viewer("a", { decisions: [dec(0.5, 0, 1), dec(1.5, 1, 2)] })]));
    expect(m.decisions.get("a")!.map((d) => d.to)).toEqual([1, 2]);
  });
});

describe("mergeDecisions", () => {
  it("orders by time, dedups and caps", () => {
    const log = mergeDecisions([dec(1, 0, 1)], [dec(3, 2, 1), dec(2, 1, 2), dec(1, 0, 1)]);
    expect(log.map((d) => d.at_s)).toEqual([1, 2, 3]);
    const big = Array.from({ length: DECISION_CAP + 10 }, (_, i) => dec(i, 0, 1));
    const capped = mergeDecisions([], big);
    expect(capped).toHaveLength(DECISION_CAP);
    expect(capped[0]!.at_s).toBe(10);
  });

  it("keeps distinct decisions that share a timestamp and ignores re-sent older ones", () => {
    const log = mergeDecisions([dec(5, 1, 2, "a")], [dec(4, 0, 1), dec(5, 1, 2, "a"), dec(5, 2, 1, "b")]);
    expect(log.map((d) => `${d.at_s}${d.reason}`)).toEqual(["5a", "5b"]);
    // The server re-sends its recent list every second: nothing changes.
    expect(mergeDecisions(log, [dec(4, 0, 1), dec(5, 1, 2, "a"), dec(5, 2, 1, "b")])).toHaveLength(2);
  });
});

describe("aggregates", () => {
  it("histograms layers and loss for active viewers only", () => {
    const a = aggregate([
      viewer("a", { layers: 0 }),
      viewer("b", { layers: 2, loss_ratio: 0.03 }),
      viewer("c", { layers: 3, loss_ratio: 0.5 }),
      viewer("d", { layers: 3, gone: true }),
    ]);
    expect(a.active).toBe(3);
    expect(a.layersHist).toEqual([1, 0, 1, 1]);
    expect(a.lossHist).toEqual([1, 0, 1, 0, 0, 1]);
    expect(a.layersMean).toBeCloseTo(5 / 3);
  });

  it("quantile is nearest-rank", () => {
    const xs = Array.from({ length: 10 }, (_, i) => i + 1);
    expect(quantile(xs, 0.1)).toBe(1);
    expect(quantile(xs, 0.5)).toBe(5);
    expect(quantile(xs, 0.9)).toBe(9);
    expect(quantile([], 0.5)).toBeNaN();
  });

  it("loss buckets have closed upper bounds", () => {
    expect([0, 0.01, 0.0100001, 0.05, 0.2, 0.21].map(lossBucket)).toEqual([0, 1, 2, 2, 4, 5]);
  });

  it("viewersByLayer prefers the server's counts, else counts the list", () => {
    expect(viewersByLayer(session({ viewers_by_layer: [5, 0, 2] }), [])).toEqual([5, 0, 2]);
    expect(viewersByLayer(session(), [viewer("a", { layers: 1 }), viewer("b", { layers: 3 }), viewer("c", { layers: 0 })])).toEqual([1, 0, 1]);
  });

  it("handles 1,000 viewers", () => {
    const vs = Array.from({ length: 1000 }, (_, i) => viewer(`v${i}`, { layers: (i % 3) + 1, rate_bps: i }));
    const m = new Model();
    m.apply(snap(1, [session()], vs));
    expect(m.agg.layersHist).toEqual([0, 334, 333, 333]);
    expect(m.agg.rateP50).toBe(499);
    const s = filterSortViewers(m, { sort: "rate", desc: true });
    expect(s[0]!.id).toBe("v999");
  });
});

describe("filterSortViewers", () => {
  it("filters by text, session and gone, sorts with id tie-break", () => {
    const m = new Model();
    m.apply(
      snap(1, [session(), session({ id: "s2" })], [
        viewer("b", { layers: 2 }),
        viewer("a", { layers: 2 }),
        viewer("c", { layers: 1, session_id: "s2", addr: "10.9.9.9:1" }),
        viewer("d", { gone: true }),
      ]),
    );
    expect(filterSortViewers(m, { sort: "layers", desc: true }).map((v) => v.id)).toEqual(["a", "b", "c", "d"]);
    expect(filterSortViewers(m, { sort: "id", desc: false, hideGone: true }).map((v) => v.id)).toEqual(["a", "b", "c"]);
    expect(filterSortViewers(m, { sort: "id", desc: false, session: "s2" }).map((v) => v.id)).toEqual(["c"]);
    expect(filterSortViewers(m, { sort: "id", desc: false, text: "10.9" }).map((v) => v.id)).toEqual(["c"]);
  });
});
