// The dashboard at audience scale, against the REAL layercast-server: the 3 real players of
// the stack plus 1,000 synthetic viewers posting contract telemetry (test/load-telemetry.mjs,
// run inside the server's namespace). Checks what a person sees: the viewer count, a list that
// scrolls to the last viewer while keeping only a window of rows in the DOM, filtering, and
// the layers histogram covering everyone. Long tasks are printed for information only (no
// timed assertions). Skips loudly ONLY if the binaries do not exist.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync } from "node:fs";
import { join, resolve } from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ARTIFACTS, findBinaries, loudSkip, SERVER_HTTP, sleep, Stack } from "../stack";

const bins = findBinaries();
const missing = "missing" in bins ? bins.missing : null;
if (missing) loudSkip("the real-server scale browser test (test/browser/scale)", `layercast binaries not found (looked for ${missing})`);

const SHOTS = join(ARTIFACTS, "scale");
const LOAD = 1000;
const TOTAL = LOAD + 3;

describe.skipIf(missing !== null)("dashboard with 1,000 viewers on a real server", () => {
  let stack: Stack;
  let ctx: BrowserContext;
  let page: Page;

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    execFileSync("npx", ["vite", "build", "--logLevel", "warn"], { cwd: resolve(__dirname, "../.."), stdio: "inherit", env: { ...process.env, NODE_ENV: "production" } });
    if ("missing" in bins) return;
    stack = new Stack(bins, {
      name: "scale",
      controller: process.env.LAYERCAST_TEST_CONTROLLER ?? "era",
      sessions: [{ id: "main", name: "main", protocol: "era", layers: 5, layer_rate_bps: 200_000 }],
      players: [
        { id: "fast-1", ns: "p1", metricsPort: 9181 },
        { id: "slow-1", ns: "p2", metricsPort: 9182 },
        { id: "slow-2", ns: "p2", metricsPort: 9183 },
      ],
      // The 1,000 synthetic viewers all post from the server namespace's one address: lift the
      // per-address telemetry limit (20/s by default, docs/security.md) that would otherwise
      // refuse most of them; the per-viewer limit still applies.
      serverArgs: ["--telemetry-per-addr-per-sec", "2000"],
    });
    await stack.start();
    stack.spawnLogged(stack.ns.s, "load-telemetry", process.execPath, [resolve(__dirname, "../load-telemetry.mjs"), SERVER_HTTP, String(LOAD), "main", "1500"]);
    await stack.waitFor(
      `the server lists ${TOTAL} live viewers`,
      () => (stack.json<{ gone: boolean }[]>("/api/viewers") ?? []).filter((v) => !v.gone).length === TOTAL,
      60_000,
      1000,
    );
    ctx = await chromium.launchPersistentContext(mkdtempSync(join(stack.tmp, "chromium-")), {
      executablePath: stack.wrapper(stack.ns.s, "/usr/bin/chromium"),
      headless: true,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
      viewport: { width: 1366, height: 768 },
    });
    page = ctx.pages()[0] ?? (await ctx.newPage());
  });

  afterAll(async () => {
    await ctx?.close().catch(() => undefined);
    await stack?.stop();
  });

  it("shows all viewers in a virtualised list that scrolls to the last one", async () => {
    await page.goto(`${SERVER_HTTP}/#/viewers`);
    await expect.poll(async () => Number(await page.locator('[data-testid="active-count"]').textContent()), { timeout: 30_000, interval: 1000 }).toBe(TOTAL);
    await page.evaluate(() => {
      const w = window as unknown as { __lt: number[] };
      w.__lt = [];
      new PerformanceObserver((l) => {
        for (const e of l.getEntries()) w.__lt.push(e.duration);
      }).observe({ type: "longtask" });
    });
    // Only a window of rows is in the DOM.
    const domRows = await page.locator('[data-testid="viewer-row"]').count();
    expect(domRows).toBeGreaterThan(5);
    expect(domRows).toBeLessThan(60);
    await page.screenshot({ path: join(SHOTS, "01-viewers-1003.png") });

    // Scroll to the end: the last viewer by id (slow-2) is shown.
    await page.locator('[data-testid="viewer-list"]').evaluate((el) => (el.scrollTop = el.scrollHeight));
    await expect.poll(async () => page.locator('[data-viewer-id="slow-2"]').count(), { timeout: 10_000 }).toBe(1);
    expect(await page.locator('[data-testid="viewer-row"]').count()).toBeLessThan(60);
    await page.screenshot({ path: join(SHOTS, "02-scrolled-to-end.png") });

    // The layers histogram counts everybody.
    const counts = (await page.locator('[data-testid="layers-histogram"] .count').allInnerTexts()).map(Number);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(TOTAL);

    // Filtering finds the two real slow players among 1,003.
    await page.getByLabel("filter viewers").fill("slow-");
    await expect.poll(async () => page.locator('[data-testid="viewer-row"]').count(), { timeout: 10_000 }).toBe(2);
    await page.getByLabel("filter viewers").fill("");

    await sleep(10_000); // ten live snapshots of 1,003 viewers
    const lt = await page.evaluate(() => (window as unknown as { __lt: number[] }).__lt);
    console.log(`[scale] long tasks (>50 ms) during ~12 s at ${TOTAL} viewers: ${lt.length}, max ${Math.round(Math.max(0, ...lt))} ms (information only)`);
    await page.goto(`${SERVER_HTTP}/#/sessions`);
    await sleep(3000);
    await page.screenshot({ path: join(SHOTS, "03-session-1003.png"), fullPage: true });
  });

  it("caps per-viewer metric labels while the aggregate counts everyone", () => {
    const m = stack.curl("/metrics");
    const labelled = m.split("\n").filter((l) => l.startsWith("layercast_viewer_layers{")).length;
    expect(labelled).toBeLessThanOrEqual(200);
    expect(labelled).toBeGreaterThan(0);
    const total = m
      .split("\n")
      .filter((l) => l.startsWith("layercast_viewers{"))
      .reduce((a, l) => a + Number(l.split(" ").pop()), 0);
    expect(total).toBe(TOTAL);
  });
});
