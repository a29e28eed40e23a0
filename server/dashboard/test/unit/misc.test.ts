import { describe, expect, it } from "vitest";
import { backoffDelay, BACKOFF_BASE_MS, BACKOFF_MAX_MS } from "../../src/backoff";
import { linePath, niceMax, stack } from "../../src/chartmath";
import { fmtBps, fmtPct } from "../../src/format";
import { tokenFromLocation, withToken, wsUrl } from "../../src/live";
import { parseRoute } from "../../src/route";
import { Ring } from "../../src/series";
import { virtualWindow } from "../../src/virtual";

describe("backoff", () => {
  it("doubles from the base, caps, and jitters within [exp/2, exp]", () => {
    expect(backoffDelay(0, () => 0)).toBe(BACKOFF_BASE_MS / 2);
    expect(backoffDelay(0, () => 1)).toBe(BACKOFF_BASE_MS);
    expect(backoffDelay(3, () => 1)).toBe(BACKOFF_BASE_MS * 8);
    expect(backoffDelay(100, () => 1)).toBe(BACKOFF_MAX_MS);
    expect(backoffDelay(100, () => 0)).toBe(BACKOFF_MAX_MS / 2);
  });
});

describe("virtualWindow", () => {
  it("renders only the visible rows plus overscan", () => {
    const w = virtualWindow(1000, 44, 44 * 500, 440, 5);
    expect(w.start).toBe(495);
    expect(w.end).toBe(500 + 11 + 5);
    expect(w.offsetTop).toBe(495 * 44);
    expect(w.totalHeight).toBe(44_000);
  });
  it("clamps at both ends and handles empty lists", () => {
    expect(virtualWindow(10, 44, -100, 440, 2)).toMatchObject({ start: 0, end: 10 });
    const end = virtualWindow(1000, 44, 1e9, 440, 0);
    expect(end.end).toBe(1000);
    expect(end.start).toBe(990);
    expect(virtualWindow(0, 44, 0, 440)).toEqual({ start: 0, end: 0, offsetTop: 0, totalHeight: 0 });
  });
});

describe("Ring", () => {
  it("wraps and returns oldest first", () => {
    const r = new Ring(3, ["a"] as const);
    for (let i = 1; i <= 5; i++) r.push(i, { a: i * 10 });
    expect(r.times()).toEqual([3, 4, 5]);
    expect(r.values("a")).toEqual([30, 40, 50]);
    expect(r.last("a")).toBe(50);
    r.push(6, {});
    expect(r.last("a")).toBeNaN();
  });
});

describe("chart math", () => {
  it("niceMax picks 1/2/2.5/5 x 10^k", () => {
    expect([0, 0.7, 1, 3, 2400, 7e6].map(niceMax)).toEqual([1, 1, 1, 5, 2500, 1e7]);
  });
  it("linePath breaks at NaN and steps when asked", () => {
    const id = (v: number) => v;
    expect(linePath([0, 1, 2, 3], [1, NaN, 2, 3], id, id)).toBe("M0.0,1.0M2.0,2.0L3.0,3.0");
    expect(linePath([0, 1], [1, 2], id, id, true)).toBe("M0.0,1.0H1.0V2.0");
  });
  it("stack accumulates and treats NaN as 0", () => {
    expect(stack([[1, 2], [NaN, 3]])).toEqual([[1, 2], [1, 5]]);
  });
});

describe("format and routing", () => {
  it("formats rates and ratios", () => {
    expect(fmtBps(1_500_000)).toBe("1.50 Mb/s");
    expect(fmtBps(250_000)).toBe("250 kb/s");
    expect(fmtBps(null)).toBe("–");
    expect(fmtPct(0.0123)).toBe("1.2%");
  });
  it("parses hash routes", () => {
    expect(parseRoute("")).toEqual({ view: "sessions" });
    expect(parseRoute("#/viewers")).toEqual({ view: "viewers" });
    expect(parseRoute("#/viewers/s1")).toEqual({ view: "viewers", session: "s1" });
    expect(parseRoute("#/viewer/v%2F1")).toEqual({ view: "viewer", id: "v/1" });
  });
  it("builds the live URL from the page or a base", () => {
    expect(wsUrl("", { protocol: "https:", host: "x:1" })).toBe("wss://x:1/api/live");
    expect(wsUrl("http://127.0.0.1:8080/", { protocol: "http:", host: "y" })).toBe("ws://127.0.0.1:8080/api/live");
  });
  it("carries the read-only token from the page to the API URLs", () => {
    expect(tokenFromLocation("?a=1&access_token=t%2B1")).toBe("t+1");
    expect(tokenFromLocation("")).toBeNull();
    expect(withToken("/api/live", "t+1")).toBe("/api/live?access_token=t%2B1");
    expect(withToken("/api/x?y=1", "t")).toBe("/api/x?y=1&access_token=t");
    expect(withToken("/api/live", null)).toBe("/api/live");
  });
});
