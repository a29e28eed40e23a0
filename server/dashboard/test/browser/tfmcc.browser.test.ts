// Browser test of a TFMCC session against a REAL layercast-server and REAL players running
// `--controller tfmcc` (network: ../stack.ts). One player on a wide path (P1, 20 Mbit/s),
// one behind 1 Mbit/s (P2); the session's ceiling is 3 Mbit/s. What a person must see on
// the session card: the TFMCC rate, and the slow player named as the limiting receiver (its
// loss makes its TCP-equation rate the lowest report). Screenshot: test-artifacts/browser-tfmcc/.
// Skips (loudly) ONLY if the binaries are missing.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync } from "node:fs";
import { join, resolve } from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ARTIFACTS, findBinaries, loudSkip, recordAcceptance, SERVER_HTTP, sleep, Stack } from "../stack";

const bins = findBinaries();
const missing = "missing" in bins ? bins.missing : null;
if (missing) loudSkip("the TFMCC browser test (test/browser)", `layercast binaries not found (looked for ${missing})`);

const SHOTS = join(ARTIFACTS, "browser-tfmcc");

describe.skipIf(missing !== null)("dashboard shows a live TFMCC session's limiting receiver and rate", () => {
  let stack: Stack;
  let ctx: BrowserContext;
  let page: Page;

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    execFileSync("npx", ["vite", "build", "--logLevel", "warn"], { cwd: resolve(__dirname, "../.."), stdio: "inherit", env: { ...process.env, NODE_ENV: "production" } });
    if ("missing" in bins) return;
    stack = new Stack(bins, {
      name: "browser-tfmcc",
      sessions: [{ id: "tf", name: "tf", protocol: "tfmcc", layer_rates_bps: [3_000_000], packet_size: 1000 }],
      players: [
        { id: "tf-wide", ns: "p1", metricsPort: 9181, mode: ["--controller", "tfmcc"] },
        { id: "tf-narrow", ns: "p2", metricsPort: 9182, mode: ["--controller", "tfmcc"] },
      ],
      p1Kbit: 20_000,
      p2Kbit: 1_000,
    });
    await stack.start();
    await sleep(2000);
    const errs = stack.playerStartupErrors();
    if (errs.length) throw new Error(`players did not start:\n${errs.join("\n")}`);
    ctx = await chromium.launchPersistentContext(mkdtempSync(join(stack.tmp, "chromium-")), {
      executablePath: stack.wrapper(stack.ns.s, "/usr/bin/chromium"),
      headless: true,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
      viewport: { width: 1440, height: 900 },
    });
    page = ctx.pages()[0] ?? (await ctx.newPage());
    page.on("pageerror", (e) => console.error("page error:", e.message));
  });

  afterAll(async () => {
    await ctx?.close().catch(() => undefined);
    await stack?.stop();
  });

  it("names the narrow-path player as limiting receiver and shows the rate", async () => {
    await page.goto(`${SERVER_HTTP}/#/sessions`);
    const box = page.locator('[data-session-id="tf"] [data-testid="tfmcc"]');
    // Past slow start (the initial rate is one packet per 0.5 s = 16 kb/s), the narrow
    // player must be named in three consecutive looks, with a rate of at least 300 kb/s.
    const rateOf = (t: string): number => {
      const m = /rate\s+([\d.]+)\s*([kMG]?)b\/s/.exec(t);
      if (!m) return NaN;
      return Number(m[1]) * ({ "": 1, k: 1e3, M: 1e6, G: 1e9 }[m[2] as "" | "k" | "M" | "G"] ?? NaN);
    };
    const end = Date.now() + 150_000;
    let text = "";
    let streak = 0;
    for (;;) {
      text = (await box.innerText({ timeout: 5000 }).catch(() => "")) ?? "";
      const ok = /limiting receiver\s+tf-narrow/.test(text) && rateOf(text) >= 300e3;
      streak = ok ? streak + 1 : 0;
      if (streak >= 3) break;
      if (Date.now() > end) {
        await page.screenshot({ path: join(SHOTS, "timeout.png"), fullPage: true });
        throw new Error(`the TFMCC box never named tf-narrow at >= 300 kb/s: "${text}"; server: ${stack.curl("/api/sessions/tf")}`);
      }
      await sleep(1000);
    }
    // The rate a person reads is a number with a unit, below the 3 Mb/s ceiling (the narrow
    // path carries 1 Mb/s).
    const rate = rateOf(text);
    expect(rate, text).toBeGreaterThanOrEqual(300e3);
    expect(rate, text).toBeLessThan(3e6);
    await page.waitForTimeout(1500);
    await page.screenshot({ path: join(SHOTS, "01-tfmcc-session.png"), fullPage: true });
    // The detail view of the CLR says so.
    await page.goto(`${SERVER_HTTP}/#/viewer/tf-narrow`);
    await expect.poll(async () => page.locator(".tag.clr").count(), { timeout: 15_000 }).toBeGreaterThan(0);
    await page.screenshot({ path: join(SHOTS, "02-clr-detail.png"), fullPage: true });
    recordAcceptance(
      "issue8/browser-tfmcc",
      `Chromium: TFMCC session card shows "${text.replace(/\s+/g, " ").slice(0, 120)}" (narrow 1 Mbit/s player named CLR), CLR tag on its detail view`,
      true,
      "npm test -w server/dashboard",
    );
  });
});
