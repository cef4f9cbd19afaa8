// The dashboard in Chromium, driven by playwright-core: run by TestDashboardInChromium with
// BASE (the gateway, which the Go test serves under a proxy's path), OPERATOR and READER
// (tokens), COLLECTION (the planners' name of the test's collection) and CHROMIUM. Any failed
// check exits 1 with what was wrong.
"use strict";
const { chromium } = require("playwright-core");

const { BASE, OPERATOR, READER, COLLECTION, CHROMIUM, TARGET, SCREENSHOTS } = process.env;
const path = require("path");
// shot writes a screenshot of the page as it is now (SCREENSHOTS: where).
async function shot(page, name) { await page.screenshot({ path: path.join(SCREENSHOTS, name + ".png"), fullPage: true }); }
function check(cond, what) { if (!cond) throw new Error("check failed: " + what); }
const step = (name) => console.log("step: " + name);
const consoleErrors = [];

(async () => {
  const browser = await chromium.launch({ executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"] });
  try {
    const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1200, height: 900 } });
    const page = await context.newPage();
    const outside = [];
    page.on("request", (r) => { if (!r.url().startsWith(BASE)) outside.push(r.url()); });
    page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
    page.on("pageerror", (e) => consoleErrors.push(e.message));

    step("sign in");
    await page.goto(BASE + "/dashboard"); // redirected to dashboard/, under BASE's path
    await page.waitForSelector("#token");
    check(page.url().startsWith(BASE + "/dashboard/"), "/dashboard leads to the dashboard: " + page.url());
    check(page.url().endsWith("#/login"), "an unsigned page goes to the sign-in: " + page.url());
    await page.fill("#token", "not-a-token");
    await page.press("#token", "Enter");
    await page.waitForSelector("[role=alert] >> text=refused");
    await shot(page, "sign-in");
    await page.fill("#token", OPERATOR);
    await page.press("#token", "Enter");
    await page.waitForSelector("h1 >> text=Overview");
    await page.waitForSelector("#live.on", { timeout: 10000 });

    step("overview");
    await page.waitForSelector("text=orders");
    const cells = await page.$$eval("table tbody tr", (rows) => rows.map((r) => r.textContent));
    check(cells.some((t) => t.includes("orders") && t.includes("Standard") && t.includes("/ 50")), "the collection with its plan and quota use: " + cells);
    await shot(page, "overview");

    step("jobs, search and filters");
    await page.goto(BASE + "/dashboard/#/jobs?collection=" + COLLECTION);
    await page.waitForSelector("text=3 jobs shown");
    await page.fill("input[name=q]", "http-");
    await page.click("button >> text=Filter");
    await page.waitForSelector("text=2 jobs shown");
    await page.selectOption("select[name=state]", "Disabled");
    await page.click("button >> text=Filter");
    await page.waitForSelector("text=No job matches.");
    await page.goto(BASE + "/dashboard/#/jobs?type=Https");
    await page.waitForSelector("text=1 job shown");
    await page.goto(BASE + "/dashboard/#/jobs");
    await page.waitForSelector("text=3 jobs shown");
    await shot(page, "jobs");
    await page.goto(BASE + "/dashboard/#/jobs?type=Https");
    await page.waitForSelector("text=1 job shown");
    check((await page.textContent("tbody")).includes("report"), "across collections, filtered by action type");

    step("the collection field suggests the collections that start with what is typed");
    await page.goto(BASE + "/dashboard/#/jobs");
    await page.waitForSelector("text=3 jobs shown");
    await page.fill("#f-collection", "ord");
    await page.waitForFunction((c) => [...document.querySelectorAll("#f-collection-list option")].some((o) => o.value === c), COLLECTION);
    const suggested = await page.$$eval("#f-collection-list option", (os) => os.map((o) => `${o.value} ${o.textContent}`));
    check(suggested.length === 1 && suggested[0] === `${COLLECTION} orders (rg-a)`, "one suggestion for ord, the orders collection with its group: " + suggested);
    await page.fill("#f-collection", COLLECTION);
    await page.click("button >> text=Filter");
    await page.waitForSelector("text=3 jobs shown");
    check(page.url().endsWith("#/jobs?collection=" + COLLECTION), "filtered by the collection picked: " + page.url());
    check((await page.inputValue("#f-collection")) === COLLECTION, "the field keeps the collection of the address");

    step("a job: definition, next runs, calendar");
    await page.goto(BASE + `/dashboard/#/job/${COLLECTION}/report`);
    await page.waitForSelector("h1 >> text=orders/report");
    check((await page.$$("#runs li")).length === 20, "20 next runs");
    check((await page.textContent("main")).includes("action.request.authentication.password: set"), "a secret shown as set");
    check((await page.textContent("main")).includes("action.request.headers.x-functions-key: set"), "a secret header shown as set");
    check(!(await page.textContent("main")).includes("report-secret"), "the secret itself never reaches the page");
    check((await page.textContent("main")).includes("action.request.uri ?code: set"), "a secret query parameter shown as set");
    check(!(await page.content()).includes("report-function-key"), "the header's key never reaches the page");
    check(!(await page.content()).includes("report-function-code"), "the URL's code never reaches the page");
    check((await page.$$(".cal .on")).length > 0, "the month view marks the runs");
    check(!(await page.evaluate(() => [...document.querySelectorAll("main > :not(pre)")].map((e) => e.textContent).join(" "))).includes("null"),
      "no stray null on the job page");
    await shot(page, "job");

    step("run now, history live");
    await page.goto(BASE + `/dashboard/#/job/${COLLECTION}/http-ok`);
    await page.waitForSelector("#history");
    check((await page.$$("#history tbody tr")).length === 0, "no history yet");
    // The worker's result reaches the page as the planner records it; the first history read
    // after it answers as a planner that has not recorded it yet would: the page reads again.
    let early = 0;
    const history = `**/dashboard/api/jobs/${encodeURIComponent(COLLECTION)}/http-ok/history*`;
    await page.route(history, (route) => {
      early++;
      return route.fulfill({ status: 200, contentType: "application/json", body: JSON.stringify({ value: [] }) });
    }, { times: 1 });
    await page.click("button >> text=Run now");
    await page.waitForSelector("#history tbody tr td.status-Completed", { timeout: 20000 });
    check(early === 1, "a history read answered before the result was recorded: " + early);

    step("disable, enable, delete with confirmation");
    await page.click("button >> text=Disable");
    await page.waitForSelector("button >> text=Enable");
    await page.click("button >> text=Enable");
    await page.waitForSelector("button >> text=Disable");
    await page.goto(BASE + `/dashboard/#/job/${COLLECTION}/http-fail`);
    await page.waitForSelector("h1 >> text=orders/http-fail"); // not the page before it, still shown

    step("a run whose error action succeeded is listed as failed");
    await page.click("button >> text=Run now");
    await page.waitForSelector("#history tbody tr td.status-Completed", { timeout: 20000 }); // the error action's entry
    await page.goto(BASE + `/dashboard/#/jobs?collection=${COLLECTION}`);
    const outcome = `tr[data-job="${COLLECTION}/http-fail"] td:nth-child(5)`;
    await page.waitForSelector(outcome);
    check((await page.textContent(outcome)) === "Failed (error action Completed)", "the outcome of a run whose error action ran: " + await page.textContent(outcome));
    await page.goto(BASE + `/dashboard/#/job/${COLLECTION}/http-fail`);
    await page.waitForSelector("h1 >> text=orders/http-fail");
    await page.click("button >> text=Delete");
    await page.click("dialog button >> text=Cancel");
    await page.waitForTimeout(300);
    check(page.url().includes("/job/"), "a cancelled delete leaves the job");
    await page.click("main button >> text=Delete");
    await page.click("dialog button >> text=Delete");
    await page.waitForSelector("h1 >> text=Jobs");
    await page.waitForSelector("text=2 jobs shown");

    step("the jobs list shows a run without reload");
    // As for the history above: the list's first read after the result answers as a planner
    // that has not recorded it yet would (the list as it was before the run); the page reads again.
    const runsCell = `tr[data-job="${COLLECTION}/http-ok"] td:nth-child(6)`;
    const runsBefore = Number(await page.textContent(runsCell));
    const staleList = await page.evaluate(async (c) => (await fetch(`api/jobs?collection=${c}&top=50`,
      { headers: { Authorization: "Bearer " + sessionStorage.getItem("resched-token") } })).text(), COLLECTION);
    check(staleList.includes('"http-ok"'), "the list before the run: " + staleList.slice(0, 200));
    let staleReads = 0;
    await page.route((url) => url.pathname.endsWith("/dashboard/api/jobs"), (route) => {
      staleReads++;
      return route.fulfill({ status: 200, contentType: "application/json", body: staleList });
    }, { times: 1 });
    const ran = await page.evaluate(async (c) => (await fetch(`api/jobs/${c}/http-ok/run`, { method: "POST",
      headers: { Authorization: "Bearer " + sessionStorage.getItem("resched-token") } })).status, COLLECTION);
    check(ran === 200, "run now through the API: " + ran);
    await page.waitForFunction(([sel, n]) => Number((document.querySelector(sel) || {}).textContent) === n, [runsCell, runsBefore + 1], { timeout: 20000 });
    check(staleReads === 1, "a list read answered before the result was recorded: " + staleReads);

    step("edit a job: a change elsewhere keeps the editor, a bad field is named, a good edit saves");
    await page.goto(BASE + `/dashboard/#/job/${COLLECTION}/http-ok`);
    await page.waitForSelector("h1 >> text=orders/http-ok");
    await page.click("main button >> text=Edit");
    await page.waitForSelector("h1 >> text=Edit http-ok");
    await page.click("main button >> text=Cancel");
    await page.waitForSelector("h1 >> text=orders/http-ok");
    // The job changes elsewhere just before the editor opens: its event reaches the page, which
    // reads the job again half a second later; that read must not draw over the editor, which
    // has the job's own address.
    const disabled = await page.evaluate(async (c) => (await fetch(`api/jobs/${c}/http-ok/disable`, { method: "POST",
      headers: { Authorization: "Bearer " + sessionStorage.getItem("resched-token") } })).status, COLLECTION);
    check(disabled === 200, "disable through the API: " + disabled);
    await page.click("main button >> text=Edit");
    await page.waitForSelector("h1 >> text=Edit http-ok");
    const area = "textarea[aria-label='Job definition']";
    const edited = JSON.parse(await page.inputValue(area));
    check(edited.properties.recurrence.interval === 1, "the editor holds the definition: " + JSON.stringify(edited));
    edited.properties.recurrence.interval = 0;
    await page.fill(area, JSON.stringify(edited, null, 2));
    await page.waitForTimeout(1500);
    check(await page.isVisible("h1 >> text=Edit http-ok"), "the editor stays while the job changes elsewhere");
    check(JSON.parse(await page.inputValue(area)).properties.recurrence.interval === 0, "the text typed stays");
    await page.click("main button >> text=Save");
    await page.waitForSelector("[role=alert] li >> text=interval");
    const named = await page.textContent("[role=alert] li");
    check(named.includes("recurrence") && named.includes("interval"), "the bad field named: " + named);
    edited.properties.recurrence.interval = 2;
    await page.fill(area, JSON.stringify(edited, null, 2));
    await page.click("main button >> text=Save");
    await page.waitForSelector("h1 >> text=orders/http-ok");
    await page.waitForSelector("main pre >> text=\"interval\": 2");
    check((await page.textContent(".card b")).trim() === "Enabled", "the saved definition's state (Enabled, as in the editor)");

    step("recurrence builder");
    await page.goto(BASE + "/dashboard/#/builder");
    await page.waitForFunction(() => document.querySelectorAll("#preview li").length === 20);
    await shot(page, "builder");
    const first = await page.textContent("#preview li");
    check(/17:00(:00)? \+0[12]:00$/.test(first.trim()), "the last Friday at 17:00 in W. Europe time: " + first);
    check(!(await page.textContent("main")).includes("null"), "no stray null on the page");
    // 20 monthly runs cross daylight-saving changes: the month views show them marked.
    let dst = 0;
    for (let i = 0; i < 24 && dst === 0; i++) {
      dst = (await page.$$("#preview-calendar .cal .dst")).length;
      if (!dst) await page.click("#preview-calendar button[aria-label='Next month']");
    }
    check(dst > 0, "a daylight-saving change marked");
    await page.fill("#f-hours", "25");
    await page.waitForFunction(() => document.getElementById("f-hours-error").textContent.length > 0);
    await page.fill("#f-hours", "9");
    await page.waitForFunction(() => document.getElementById("f-hours-error").textContent === "" && document.querySelectorAll("#preview li").length === 20);
    // Two previews in flight: the older answer, coming last, does not replace the newer one.
    let release;
    const held = new Promise((r) => { release = r; });
    let previewsAsked = 0;
    await page.route("**/dashboard/api/preview", async (route) => {
      if (++previewsAsked === 1) await held;
      await route.continue();
    });
    await page.fill("#f-hours", "10");
    while (previewsAsked < 1) await page.waitForTimeout(20);
    await page.fill("#f-hours", "11");
    await page.waitForFunction(() => /11:00/.test(document.querySelector("#preview li").textContent));
    release();
    await page.waitForTimeout(1000);
    const latest = await page.textContent("#preview li");
    check(/11:00/.test(latest), "the latest preview stays when an older answer comes after it: " + latest);
    await page.unroute("**/dashboard/api/preview");
    const json = JSON.parse(await page.inputValue("#builder-json"));
    json.recurrence.frequency = "Week";
    json.recurrence.schedule = { weekDays: ["Monday"], hours: [8], minutes: [30] };
    await page.fill("#builder-json", JSON.stringify(json));
    await page.waitForFunction(() => document.getElementById("f-frequency").value === "Week" &&
      document.querySelector("input[value=Monday]").checked);
    await page.waitForFunction(() => /08:30/.test(document.querySelector("#preview li").textContent));
    await page.fill("#f-count", "3");
    await page.waitForFunction(() => document.querySelectorAll("#preview li").length === 3 && document.getElementById("preview-reason").textContent.length > 0);
    let ends = 0;
    for (let i = 0; i < 3 && ends === 0; i++) {
      ends = (await page.$$("#preview-calendar .cal .end")).length;
      if (!ends) await page.click("#preview-calendar button[aria-label='Next month']");
    }
    check(ends === 1, "the end of the series marked");

    step("the builder saves a job in a new collection; it fires, its history shows without reload");
    await page.fill("#builder-json", JSON.stringify({ recurrence: { frequency: "Second", interval: 1 } }));
    await page.waitForFunction(() => document.getElementById("f-frequency").value === "Second" && document.querySelectorAll("#preview li").length === 20);
    await page.fill("#f-tz", "W. Europe Standard Time");
    await page.fill("#f-hours", "");
    await page.fill("#f-minutes", "");
    await page.fill("#s-new", "made-here");
    await page.fill("#s-name", "from-builder");
    await page.fill("#s-uri", TARGET + "/builder");
    await page.click("button >> text=Save job");
    await page.waitForSelector("h1 >> text=made-here/from-builder");
    await page.waitForSelector("#history tbody tr td.status-Completed", { timeout: 20000 });
    check(early === 1, "a history read answered before the result was recorded: " + early);

    step("the builder does not replace a job of the same name");
    await page.goto(BASE + "/dashboard/#/builder");
    await page.fill("#builder-json", JSON.stringify({ recurrence: { frequency: "Hour", interval: 1 } }));
    await page.waitForFunction(() => document.getElementById("f-frequency").value === "Hour");
    await page.fill("#s-new", "made-here");
    await page.fill("#s-name", "from-builder");
    await page.fill("#s-uri", TARGET + "/replaced");
    await page.click("button >> text=Save job");
    await page.waitForSelector("text=A job made-here/from-builder already exists");
    const kept = await page.evaluate(async () => (await fetch("api/jobs/made-here/from-builder",
      { headers: { Authorization: "Bearer " + sessionStorage.getItem("resched-token") } })).json());
    check(kept.job.properties.action.request.uri === TARGET + "/builder" && kept.job.properties.recurrence.frequency === "Second",
      "the existing job is unchanged: " + JSON.stringify(kept.job.properties).slice(0, 200));
    await page.click("a >> text=open it");
    await page.waitForSelector("h1 >> text=made-here/from-builder");

    step("the overview follows a system that never pauses: a result every second");
    await page.goto(BASE + "/dashboard/#/");
    await page.waitForSelector("#stat-fires");
    const firesBefore = Number(await page.textContent("#stat-fires"));
    await page.waitForFunction((n) => Number(document.getElementById("stat-fires").textContent) >= n + 3, firesBefore, { timeout: 15000 });
    await page.goto(BASE + "/dashboard/#/job/made-here/from-builder");
    await page.waitForSelector("h1 >> text=made-here/from-builder");
    await page.click("button >> text=Run now");
    await page.waitForSelector("text=Run now: done.");
    await page.click("button >> text=Disable");
    await page.waitForSelector("button >> text=Enable");
    check((await page.textContent(".card b")).trim() === "Disabled", "the job shows Disabled");
    await page.click("main button >> text=Delete");
    await page.click("dialog button >> text=Delete");
    await page.waitForSelector("h1 >> text=Jobs");

    step("paging: the jobs list's next page, the history's older entries and its status filter");
    // 55 jobs (a page is 50) and 27 runs of one of them (a history page is 25), through the API.
    const made = await page.evaluate(async (target) => {
      const call = async (method, path, body) => (await fetch("api/" + path, { method,
        headers: { Authorization: "Bearer " + sessionStorage.getItem("resched-token"), "Content-Type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body) })).status;
      const codes = [await call("PUT", "collections/many", {})];
      const start = new Date(Date.now() + 86400000).toISOString().slice(0, 13) + ":00:00Z";
      for (let i = 0; i < 55; i++) {
        codes.push(await call("PUT", `jobs/many/j${String(i).padStart(2, "0")}`, { properties: { startTime: start,
          action: { type: "Http", request: { uri: target + "/ok", method: "POST" } }, recurrence: { frequency: "Hour" } } }));
      }
      for (let i = 0; i < 27; i++) codes.push(await call("POST", "jobs/many/j00/run", {}));
      return codes;
    }, TARGET);
    check(made.every((c) => c === 200 || c === 201), "55 jobs and 27 runs made: " + made.join(","));
    await page.goto(BASE + "/dashboard/#/jobs?collection=many");
    await page.waitForSelector("text=50 jobs shown");
    await page.click("button >> text=Next page");
    await page.waitForSelector("text=55 jobs shown");
    const listed = await page.$$eval("tr[data-job]", (rs) => rs.map((r) => r.dataset.job));
    check(new Set(listed).size === 55 && listed[54] === "many/j54", "each job once, in order: " + listed.slice(48).join(","));
    check(await page.isHidden("button >> text=Next page"), "no next page after the last");

    step("a filter over many collections searches a part a request, and says where to go on");
    // More collections than one request reads (500 planner pages, or 1 s), 20 at a time.
    const madeColls = await page.evaluate(async () => {
      const codes = [];
      for (let i = 0; i < 520; i += 20) {
        codes.push(...await Promise.all(Array.from({ length: 20 }, async (_, k) => (await fetch(`api/collections/spread${String(i + k).padStart(3, "0")}`, { method: "PUT",
          headers: { Authorization: "Bearer " + sessionStorage.getItem("resched-token"), "Content-Type": "application/json" }, body: "{}" })).status)));
      }
      return codes;
    });
    check(madeColls.length === 520 && madeColls.every((c) => c === 200 || c === 201), "520 collections made: " + [...new Set(madeColls)].join(","));
    await page.goto(BASE + "/dashboard/#/jobs?type=ServiceBusTopic");
    await page.waitForSelector("text=No job matches yet.");
    const said = () => page.textContent("main p[role=status]");
    let before = await said();
    check(before.includes("Searched up to"), "the page says how far it searched: " + before);
    let searches = 1;
    while (await page.isVisible("button >> text=Next page")) {
      await page.click("button >> text=Next page");
      check(++searches < 10, "the search ends");
      await page.waitForFunction((b) => document.querySelector("main p[role=status]").textContent !== b, before);
      before = await said();
    }
    check(searches >= 2, "more than one request over " + searches);
    console.log(`  ${searches} requests searched more than 520 collections`);
    await page.waitForSelector("text=No job matches.");
    await page.goto(BASE + "/dashboard/#/job/many/j00");
    await page.waitForSelector("h1 >> text=many/j00");
    await page.waitForFunction(() => document.querySelectorAll("#history tbody tr").length === 25, null, { timeout: 30000 });
    await page.click("button >> text=Older");
    await page.waitForFunction(() => document.querySelectorAll("#history tbody tr").length === 27, null, { timeout: 30000 });
    const started = await page.$$eval("#history tbody tr td:first-child", (tds) => tds.map((td) => td.textContent));
    check(started.every((t, i) => i === 0 || t <= started[i - 1]), "newest first across both pages: " + started.join(" | "));
    await page.selectOption("select[aria-label=Status]", "Failed");
    await page.waitForFunction(() => document.querySelectorAll("#history tbody tr").length === 0);
    await page.selectOption("select[aria-label=Status]", "Completed");
    await page.waitForFunction(() => document.querySelectorAll("#history tbody tr td.status-Completed").length === 25);

    step("live connection lost");
    await page.route("**/dashboard/api/live", (r) => r.abort());
    await page.evaluate(() => live.start());
    await page.waitForSelector("#live:not(.on)");
    check((await page.textContent("#live")).includes("offline"), "the page says it lost the connection");
    await page.unroute("**/dashboard/api/live");
    await page.waitForSelector("#live.on", { timeout: 10000 });

    step("reader");
    await page.click("#signout");
    await page.fill("#token", READER);
    await page.press("#token", "Enter");
    await page.waitForSelector("h1 >> text=Overview");
    await page.goto(BASE + `/dashboard/#/job/${COLLECTION}/report`);
    await page.waitForSelector("h1 >> text=orders/report");
    check((await page.$$("button >> text=Run now")).length === 0, "a reader gets no run button");
    const status = await page.evaluate(async (c) => (await fetch(`api/jobs/${c}/report/run`, { method: "POST",
      headers: { Authorization: "Bearer " + sessionStorage.getItem("resched-token") } })).status, COLLECTION);
    check(status === 403, "a reader's run is refused: " + status);
    check((await page.$$("main button >> text=Delete")).length === 0 && (await page.$$("main button >> text=Edit")).length === 0, "no change buttons for a reader");
    const putStatus = await page.evaluate(async (c) => (await fetch(`api/jobs/${c}/report`, { method: "PUT",
      headers: { Authorization: "Bearer " + sessionStorage.getItem("resched-token"), "Content-Type": "application/json" }, body: "{}" })).status, COLLECTION);
    check(putStatus === 403, "a reader's edit is refused: " + putStatus);
    await page.goto(BASE + "/dashboard/#/builder");
    await page.waitForFunction(() => document.querySelectorAll("#preview li").length === 20);
    check((await page.$$("#save-form")).length === 0, "no save in the builder for a reader");

    step("phone width, keyboard, dark");
    await page.setViewportSize({ width: 375, height: 800 });
    await page.goto(BASE + "/dashboard/#/jobs");
    await page.waitForSelector("text=jobs shown");
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    await shot(page, "jobs-phone");
    check(overflow <= 0, "no sideways scrolling at phone width: " + overflow);
    // The first focusable element skips to the content, and shows when focused; the next tab
    // stops are the navigation.
    check(await page.evaluate(() => document.querySelector("a[href], button, input, select, textarea").className) === "skip",
      "the first tab stop skips to the content");
    await page.focus("a.skip");
    check(await page.evaluate(() => document.activeElement.getBoundingClientRect().left >= 0), "the skip link shows when focused");
    await page.keyboard.press("Tab");
    await page.keyboard.press("Tab");
    check(await page.evaluate(() => document.activeElement.textContent) === "Overview", "the navigation by keyboard");
    await page.keyboard.press("Enter");
    await page.waitForSelector("h1 >> text=Overview");
    await page.emulateMedia({ colorScheme: "dark" });
    const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    check(bg === "rgb(15, 20, 25)", "dark when the system is: " + bg);
    await page.setViewportSize({ width: 1200, height: 900 });
    await page.goto(BASE + "/dashboard/#/builder");
    await page.waitForFunction(() => document.querySelectorAll("#preview li").length === 20);
    await shot(page, "builder-dark");

    step("a token refused on the live stream (expired) signs the page out");
    await page.route("**/dashboard/api/live", (r) => r.fulfill({ status: 401, contentType: "application/json",
      body: JSON.stringify({ error: { code: "Unauthorized", message: "token expired" } }) }));
    await page.evaluate(() => live.start());
    await page.waitForSelector("#token");
    check((await page.textContent("[role=alert]")).includes("token expired"), "the page says why it signed out");
    check(await page.evaluate(() => sessionStorage.getItem("resched-token")) === null, "the token is forgotten");

    check(outside.length === 0, "requests outside the gateway: " + outside.join(", "));
    check(consoleErrors.filter((e) => !e.includes("net::ERR_FAILED") && !e.includes("Failed to load resource")).length === 0,
      "console errors: " + consoleErrors.join(" | "));
    console.log("dashboard: all checks passed");
  } finally {
    await browser.close();
  }
})().catch((e) => {
  console.error(e.stack || String(e));
  if (consoleErrors.length) console.error("the page's console errors: " + consoleErrors.join(" | "));
  process.exit(1);
});
