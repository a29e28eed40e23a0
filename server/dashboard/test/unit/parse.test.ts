import { describe, expect, it } from "vitest";
import { parseList, parseSnapshot, parseViewer, ParseError } from "../../src/parse";

describe("parseSnapshot", () => {
  it("parses a contract-shaped snapshot", () => {
    const text = JSON.stringify({
      type: "snapshot",
      t: 1700000000.5,
      sessions: [
        {
          id: "a",
          name: "cam",
          protocol: "tfmcc",
          source: "testpattern",
          codec: "VP9 L3T3 1280x720@30",
          layers: [{ index: 0, rate_bps: 1e5, cumulative_bps: 1e5, group: "239.1.1.1", port: 5000, label: "S0T0" }],
          viewers_by_layer: [3],
          tfmcc: { rate_bps: 5e5, clr: "v9", reports_per_round: 1.5 },
          started_at: 1699999000,
          packets_sent: 10,
          bytes_sent: 12000,
        },
      ],
      viewers: [{ id: "v1", session_id: "a", layers: 2, max_layers: 3, rate_bps: 3e5, estimate_bps: null, decisions: [{ at_s: 1, from: 1, to: 2, reason: "probe ok", inputs: { r: 2.5, bad: "x" } }] }],
    });
    const { snapshot, stats } = parseSnapshot(text);
    expect(snapshot.t).toBe(1700000000.5);
    expect(snapshot.sessions[0]!.tfmcc).toEqual({ rate_bps: 5e5, clr: "v9", reports_per_round: 1.5 });
    expect(snapshot.sessions[0]!.layers[0]!.group).toBe("239.1.1.1");
    const v = snapshot.viewers[0]!;
    expect(v.estimate_bps).toBeNull();
    expect(v.rtt_s).toBeNull();
    expect(v.gone).toBe(false);
    // non-numeric decision inputs are dropped, numeric ones kept
    expect(v.decisions[0]!.inputs).toEqual({ r: 2.5 });
    expect(stats).toEqual({ droppedSessions: 0, droppedViewers: 0 });
  });

  it("drops malformed entries and counts them instead of failing", () => {
    const { snapshot, stats } = parseSnapshot(JSON.stringify({ type: "snapshot", t: 5, sessions: [null, { name: "no id" }], viewers: [1, { id: "ok" }, { id: 7 }] }));
    expect(snapshot.sessions).toHaveLength(0);
    expect(snapshot.viewers.map((v) => v.id)).toEqual(["ok"]);
    expect(stats).toEqual({ droppedSessions: 2, droppedViewers: 2 });
  });

  it("replaces non-finite or wrongly typed numbers with defaults", () => {
    const v = parseViewer({ id: "x", rate_bps: "fast", loss_ratio: null, fps: 29.97, estimate_bps: "n/a" })!;
    expect(v.rate_bps).toBe(0);
    expect(v.loss_ratio).toBe(0);
    expect(v.fps).toBe(29.97);
    expect(v.estimate_bps).toBeNull();
  });

  it("rejects non-JSON and non-snapshot frames with ParseError", () => {
    expect(() => parseSnapshot("{nope")).toThrow(ParseError);
    expect(() => parseSnapshot(JSON.stringify({ type: "hello" }))).toThrow(ParseError);
    expect(() => parseSnapshot("[]")).toThrow(ParseError);
    expect(() => parseList({}, parseViewer)).toThrow(ParseError);
  });
});
