// The client in headless Chromium: test/browser/index.html creates an order
// while the proxy loses every answer, is reloaded in the middle of its
// retries, and finishes with the same ID once answers come through.
// tests/typescript_test.go serves the page from the proxy's origin, runs
// this file with its URL, then counts the order's rows in the database.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { it } from "node:test";

import { chromium, type Page } from "playwright-core";

const env = process.env;
const base = env.RETRYSAFE_BROWSER;

/** attemptsAtLeast waits until the page has made n attempts. */
async function attemptsAtLeast(page: Page, n: number) {
  await page.waitForFunction((n) => Number(document.getElementById("attempts")?.textContent) >= n, n);
}

it("a page creates one order across a reload while answers are lost", { skip: !base && "RETRYSAFE_BROWSER is not set: tests/typescript_test.go runs this file" }, async () => {
  const browser = await chromium.launch({
    executablePath: env.RETRYSAFE_CHROMIUM || "/usr/bin/chromium",
    chromiumSandbox: false,
    args: ["--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  try {
    const page = await browser.newPage();
    page.on("console", (m) => console.log(`page console: ${m.text()}`));
    page.on("pageerror", (e) => console.log(`page error: ${e.message}`));
    page.setDefaultTimeout(120_000);
    await page.goto(`${base}/client-test/?token=${encodeURIComponent(env.RETRYSAFE_TOKEN ?? "")}`);
    await attemptsAtLeast(page, 2);
    const id = await page.textContent("#id");
    assert.match(id ?? "", /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);

    // The page is reloaded while its retries go on; the answers are still lost.
    await page.reload();
    await attemptsAtLeast(page, 1);
    assert.equal(await page.textContent("#id"), id, "the reloaded page made a new ID");

    const healed = await fetch(`${base}/client-test/heal`, { method: "POST" });
    assert.equal(healed.status, 204);
    await page.waitForFunction(() => document.getElementById("result")?.textContent !== "");
    const result = JSON.parse((await page.textContent("#result")) ?? "");
    assert.equal(result.error, undefined, result.error);
    assert.equal(result.id, id);
    assert.equal(result.status, 201);
    assert.equal(result.replayed, true, "the creation of the first page load was lost, so this answer is its replay");
    assert.equal(await page.evaluate(() => localStorage.length), 0, "the ID is forgotten once the outcome is known");
    if (env.RETRYSAFE_REPORT) writeFileSync(env.RETRYSAFE_REPORT, JSON.stringify(result));
  } finally {
    await browser.close();
  }
});
