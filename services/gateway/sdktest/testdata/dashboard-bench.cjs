// The dashboard's jobs page over a large collection, timed in Chromium: from the navigation to
// the first page of 50 jobs on screen, RUNS times. Prints one "first-page-ms N" line per run.
"use strict";
const { chromium } = require("playwright-core");
const { BASE, TOKEN, COLLECTION, CHROMIUM, RUNS } = process.env;

(async () => {
  const browser = await chromium.launch({ executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"] });
  try {
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    await context.addInitScript((t) => sessionStorage.setItem("resched-token", t), TOKEN);
    const page = await context.newPage();
    await page.goto(BASE + "/dashboard/#/"); // assets cached, signed in
    await page.waitForSelector("h1 >> text=Overview");
    for (let i = 0; i < Number(RUNS || 5); i++) {
      await page.goto(BASE + "/dashboard/#/");
      await page.waitForSelector("h1 >> text=Overview");
      const t0 = Date.now();
      await page.evaluate((c) => { location.hash = "#/jobs?collection=" + c; }, COLLECTION);
      await page.waitForSelector("text=50 jobs shown", { timeout: 30000 });
      console.log("first-page-ms " + (Date.now() - t0));
    }
  } finally {
    await browser.close();
  }
})().catch((e) => { console.error(e.stack || String(e)); process.exit(1); });
