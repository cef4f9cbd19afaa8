// The resched dashboard: a page of plain DOM code over /dashboard/api (docs/dashboard.md).
// No framework and no build step: what is served is what is here.
"use strict";

const main = document.getElementById("main");
const TOKEN = "resched-token";
const THEME = "resched-theme";
let me = null; // {subject, role, scopes}

// ---- helpers ----------------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// pageListeners are the live listeners of the page shown; a new page drops them.
let pageListeners = [];
function onLive(fn) { pageListeners.push(live.on(fn)); }

// views counts the pages shown: a page read again draws only if no other was shown meanwhile
// (the job page's editor, for one, keeps the job's address).
let views = 0;
function show(...nodes) {
  views++;
  for (const off of pageListeners) off();
  pageListeners = [];
  main.replaceChildren(...nodes.filter((n) => n !== null && n !== undefined && n !== false));
  main.focus({ preventScroll: true });
}

function canWrite() { return me && me.role === "operator"; }

function fmtTime(s) {
  if (!s) return "—";
  // Keep the offset the server gave: it is the job's time zone for previews and runs.
  const m = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})(:\d{2})?(?:\.\d+)?(Z|[+-]\d{2}:\d{2})$/.exec(s);
  return m ? `${m[1]} ${m[2]}${m[3] || ""} ${m[4] === "Z" ? "UTC" : m[4]}` : s;
}

class APIError extends Error {
  constructor(status, body) {
    super((body && body.error && body.error.message) || `HTTP ${status}`);
    this.status = status;
    this.details = (body && body.error && body.error.details) || [];
  }
}

// api calls the dashboard's API. Its URLs are relative to the page (…/dashboard/), so the
// dashboard works where a proxy serves the gateway under a path of its own (/resched/dashboard/).
async function api(path, opts = {}) {
  const headers = Object.assign({ Authorization: "Bearer " + sessionStorage.getItem(TOKEN) }, opts.headers);
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch("api/" + path, {
    method: opts.method || "GET", headers,
    body: opts.body === undefined ? undefined : typeof opts.body === "string" ? opts.body : JSON.stringify(opts.body),
  });
  const body = await resp.json().catch(() => null);
  if (resp.status === 401) { signOut("Your token was refused: " + (body && body.error ? body.error.message : "")); throw new APIError(401, body); }
  if (!resp.ok) throw new APIError(resp.status, body);
  return body;
}

// count is "1 job", "2 jobs": a number with its noun.
function count(n, noun) { return `${n} ${noun}${n === 1 ? "" : "s"}`; }

// outcomeCell shows how a job's latest run ended from its latest history entry. An error action
// runs only once the main action has failed for good, so an entry of the error action is a
// failed run, whatever the error action's own status: "Completed" there would read as success.
function outcomeCell(last) {
  if (!last) return el("td", {}, "—");
  if (last.actionName === "ErrorAction") return el("td", { class: "status-Failed" }, `Failed (error action ${last.status})`);
  return el("td", { class: "status-" + last.status }, last.status);
}

function errorBox(err) { return el("p", { class: "error", role: "alert", text: err.message }); }

function query() {
  const [, q] = location.hash.split("?");
  return new URLSearchParams(q || "");
}

// ---- theme, sign-in ---------------------------------------------------------------------------

function applyTheme() {
  const t = localStorage.getItem(THEME);
  if (t) document.documentElement.dataset.theme = t; else delete document.documentElement.dataset.theme;
}
document.getElementById("theme").addEventListener("click", () => {
  const dark = document.documentElement.dataset.theme === "dark" ||
    (!document.documentElement.dataset.theme && matchMedia("(prefers-color-scheme: dark)").matches);
  localStorage.setItem(THEME, dark ? "light" : "dark");
  applyTheme();
});
document.getElementById("signout").addEventListener("click", () => signOut());

function signOut(message) {
  sessionStorage.removeItem(TOKEN);
  me = null;
  live.stop();
  document.getElementById("signout").hidden = true;
  location.hash = "#/login" + (message ? "?m=" + encodeURIComponent(message) : "");
}

function loginPage() {
  const input = el("input", { id: "token", type: "password", autocomplete: "off", required: true, "aria-describedby": "token-help" });
  const msg = query().get("m");
  const form = el("form", {
    onsubmit: async (e) => {
      e.preventDefault();
      sessionStorage.setItem(TOKEN, input.value.trim());
      try {
        me = await api("me");
        document.getElementById("signout").hidden = false;
        live.start();
        location.hash = "#/";
      } catch (err) { if (err.status !== 401) form.append(errorBox(err)); }
    },
  },
    el("div", { class: "row" }, el("label", { for: "token" }, "Bearer token", input), el("button", { type: "submit" }, "Sign in")),
    el("p", { id: "token-help", class: "muted" }, "A token of the gateway's access file, or a JWT of its OpenID Connect issuer. It stays in this tab only."));
  show(el("h1", {}, "Sign in"), msg ? el("p", { class: "error", role: "alert" }, msg) : null, form);
  input.focus();
}

// ---- live updates -----------------------------------------------------------------------------

const live = {
  ctrl: null, listeners: new Set(), retry: null,
  on(fn) { this.listeners.add(fn); return () => this.listeners.delete(fn); },
  status(on) {
    const s = document.getElementById("live");
    s.textContent = on ? "live" : "offline: reconnecting";
    s.classList.toggle("on", on);
  },
  stop() { if (this.ctrl) this.ctrl.abort(); this.ctrl = null; clearTimeout(this.retry); this.status(false); },
  async start() {
    this.stop();
    const ctrl = new AbortController();
    this.ctrl = ctrl;
    try {
      const resp = await fetch("api/live", { headers: { Authorization: "Bearer " + sessionStorage.getItem(TOKEN) }, signal: ctrl.signal });
      if (resp.status === 401) { // expired or withdrawn: as for any other request
        const body = await resp.json().catch(() => null);
        signOut("Your token was refused: " + (body && body.error ? body.error.message : ""));
        return;
      }
      if (!resp.ok) throw new Error("HTTP " + resp.status);
      this.status(true);
      const reader = resp.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const chunk = buf.slice(0, i); buf = buf.slice(i + 2);
          for (const line of chunk.split("\n")) {
            if (!line.startsWith("data: ")) continue;
            const msg = JSON.parse(line.slice(6));
            for (const fn of this.listeners) fn(msg);
          }
        }
      }
    } catch (err) { if (ctrl.signal.aborted) return; }
    if (this.ctrl !== ctrl) return;
    this.status(false);
    this.retry = setTimeout(() => this.start(), 3000);
  },
};

// debounce calls fn at most once per wait, after the last call.
function debounce(fn, wait) {
  let t = null;
  return (...args) => { clearTimeout(t); t = setTimeout(() => fn(...args), wait); };
}

// throttle calls fn once, wait after the first of the calls made meanwhile: a page that live
// messages ask to read again does so at most once per wait, however often they come. (A debounce
// waits for a quiet moment, which a busy system never has: its page would never read again.)
function throttle(fn, wait) {
  let t = null;
  return () => { if (!t) t = setTimeout(() => { t = null; fn(); }, wait); };
}

// sameRun reports whether a history entry is the run a result message told of. An entry's
// retryCount counts the deliveries before it: the attempt's number, or more for a delivery past
// the retry policy, which runs the last attempt again.
function sameRun(h, r) {
  const second = (t) => Math.floor(Date.parse(t) / 1000);
  return second(h.startTime) === second(r.startTime) && h.actionName === r.actionName &&
    h.retryCount === Math.max(r.attempt, (r.delivery || 0) - 1);
}

// ---- overview ---------------------------------------------------------------------------------

// overviewCollections are the collections the overview read last, and when: read again as
// results come, it asks for the last hour's figures alone (a result changes no collection),
// and for the collections too after a minute or a job's change.
let overviewCollections = null;

// overviewPage shows the overview; read again (again: true), it keeps the old one until the new
// one is read.
async function overviewPage(again, jobsChanged) {
  if (!again) show(el("h1", {}, "Overview"), el("p", { class: "muted" }, "Loading…"));
  const light = again && !jobsChanged && overviewCollections && Date.now() - overviewCollections.at < 60000;
  let o;
  try { o = await api(light ? "overview?collections=none" : "overview"); } catch (err) { if (onOverview()) show(el("h1", {}, "Overview"), errorBox(err)); return; }
  if (!onOverview()) return; // the user went elsewhere meanwhile
  if (light) o = Object.assign({}, overviewCollections.o, o);
  else overviewCollections = { at: Date.now(), o: { collections: o.collections, collectionCount: o.collectionCount, moreCollections: o.moreCollections } };
  const fires = o.minutes.reduce((a, m) => a + m.fires, 0), failed = o.minutes.reduce((a, m) => a + m.failed, 0);
  const top = Math.max(1, ...o.minutes.map((m) => m.fires + m.failed));
  const chart = el("div", { class: "chart", role: "img", "aria-label": `Fires per minute over the last hour: ${count(fires, "fire")}, ${count(failed, "failed attempt")}` },
    o.minutes.map((m) => el("span", { class: m.failed ? "failed" : "", title: `${new Date(m.at * 1000).toLocaleTimeString()}: ${count(m.fires, "fire")}, ${m.failed} failed`, style: null, "data-h": Math.round(100 * (m.fires + m.failed) / top) })));
  for (const s of chart.children) s.style.height = s.dataset.h + "%";
  const sampled = o.minutes.filter((m) => m.backlog !== undefined);
  const btop = Math.max(1, ...sampled.map((m) => m.backlog));
  const backlogChart = el("div", { class: "chart", id: "backlog-chart", role: "img", "aria-label": `Due occurrences waiting for a worker, sampled each minute: at most ${sampled.length ? btop : 0}` },
    o.minutes.map((m) => el("span", { title: m.backlog === undefined ? "not sampled" : `${new Date(m.at * 1000).toLocaleTimeString()}: ${m.backlog} waiting`,
      "data-h": m.backlog === undefined ? 0 : Math.round(100 * m.backlog / btop) })));
  for (const s of backlogChart.children) s.style.height = s.dataset.h + "%";
  const collections = el("div", { class: "table" }, el("table", {},
    el("thead", {}, el("tr", {}, ["Collection", "Scope", "State", "Plan", "Jobs"].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, o.collections.map((c) => el("tr", {},
      el("td", {}, el("a", { href: `#/jobs?collection=${encodeURIComponent(c.name)}` }, c.display)),
      el("td", { class: "muted" }, c.scope || "NATS"),
      el("td", { class: "state-" + c.state }, c.state),
      el("td", {}, c.sku || "—"),
      el("td", {}, c.maxJobs ? `${c.jobCount} / ${c.maxJobs}` : String(c.jobCount)))))));
  const failures = (o.failures || []).length ? el("div", { class: "table" }, el("table", {},
    el("thead", {}, el("tr", {}, ["When", "Job", "Status", "Message"].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, o.failures.map((f) => el("tr", {},
      el("td", {}, fmtTime(f.at)),
      el("td", {}, el("a", { href: `#/job/${encodeURIComponent(f.collection)}/${encodeURIComponent(f.job)}` }, `${f.collection}/${f.job}`)),
      el("td", { class: "status-Failed" }, f.faulted ? "Faulted" : f.status),
      el("td", { class: "muted" }, (f.message || "").slice(0, 120))))))) : el("p", { class: "muted" }, "No failure seen since the gateway started.");
  show(el("h1", {}, "Overview"),
    el("div", { class: "cards" },
      el("div", { class: "card" }, el("b", { id: "stat-collections" }, String(o.collectionCount) + (o.moreCollections ? "+" : "")), "collections"),
      el("div", { class: "card" }, el("b", { id: "stat-fires" }, String(fires)), "fires, last hour"),
      el("div", { class: "card" }, el("b", { id: "stat-failed", class: failed ? "status-Failed" : "" }, String(failed)), "failed attempts, last hour"),
      el("div", { class: "card" }, el("b", {}, o.backlog ? String(o.backlog.waiting) : "—"), "due, waiting for a worker")),
    el("h2", {}, "Fires per minute"), chart,
    el("p", { class: "muted" }, `A bar per minute of the last hour, the latest on the right; the tallest is ${Math.max(0, ...o.minutes.map((m) => m.fires + m.failed))}. Red: a minute with a failed attempt. A bar's title gives its figures.`),
    el("h2", {}, "Due backlog"), backlogChart,
    el("p", { class: "muted" }, sampled.length ? `Occurrences due and not yet taken by a worker, the most seen in each minute (at most ${Math.max(0, ...sampled.map((m) => m.backlog))}).` : "No sample yet. The gateway reads the workers' JetStream consumer every 20 seconds; if no sample comes, its NATS user may not read it (deploy/base/nats.conf allows it)."),
    el("h2", {}, "Collections"), collections,
    o.collectionCount > o.collections.length || o.moreCollections
      ? el("p", { class: "muted", id: "collections-shown" }, `The first ${o.collections.length} by name of ${o.collectionCount}${o.moreCollections ? " counted (the count stops there)" : ""}; the Jobs page goes through all of them.`) : "",
    el("h2", {}, "Recent failures"), failures);
}

// ---- jobs -------------------------------------------------------------------------------------

// collectionPicker is a field for a collection's name whose suggestions are the collections
// that start with what is typed, asked of the gateway as the user types (50 at a time, searched
// from there on): a select of every collection was a page's worth of megabytes with tens of
// thousands, and held only the first 10,000.
function collectionPicker(attrs) {
  const list = el("datalist", { id: attrs.id + "-list" });
  const input = el("input", Object.assign({ list: list.id, autocomplete: "off", pattern: "[A-Za-z0-9_\\-]*" }, attrs));
  let asked = 0; // only the latest answer fills the list
  async function suggest() {
    const mine = ++asked;
    let r;
    try { r = await api("collections?prefix=" + encodeURIComponent(input.value)); } catch (err) { return; }
    if (mine !== asked) return;
    list.replaceChildren(...r.value.map((c) => el("option", { value: c.name }, c.display + (c.scope ? ` (${c.scope.split("/")[4]})` : ""))));
  }
  input.addEventListener("input", suggest);
  suggest();
  return [input, list];
}

async function jobsPage() {
  const q = query();
  const form = el("form", { class: "row", role: "search", onsubmit: (e) => {
    e.preventDefault();
    const p = new URLSearchParams(new FormData(form));
    for (const [k, v] of [...p]) if (!v) p.delete(k);
    location.hash = "#/jobs?" + p.toString();
  } },
    el("label", {}, "Collection", collectionPicker({ id: "f-collection", name: "collection", value: q.get("collection") || "", placeholder: "All" })),
    el("label", {}, "Name starts with", el("input", { name: "q", value: q.get("q") || "", pattern: "[A-Za-z0-9_\\-]*" })),
    el("label", {}, "State", el("select", { name: "state" }, ["", "Enabled", "Disabled", "Paused", "Completed", "Faulted"].map((s) =>
      el("option", { value: s, selected: (q.get("state") || "") === s }, s || "Any")))),
    el("label", {}, "Action", el("select", { name: "type" }, ["", "Http", "Https", "StorageQueue", "ServiceBusQueue", "ServiceBusTopic"].map((s) =>
      el("option", { value: s, selected: (q.get("type") || "") === s }, s || "Any")))),
    el("button", { type: "submit" }, "Filter"));
  const body = el("tbody", {});
  const more = el("button", { type: "button", hidden: true }, "Next page");
  const status = el("p", { class: "muted", role: "status" });
  show(el("h1", {}, "Jobs"), form, el("div", { class: "table" }, el("table", {},
    el("thead", {}, el("tr", {}, ["Job", "State", "Next run", "Last run", "Outcome", "Runs", "Failures", "Action"].map((h) => el("th", { scope: "col" }, h)))), body)), status, more);
  const start = q.get("after") || "";
  let after = start;
  let reads = 0; // the reads begun: only the latest one's answer is shown
  async function load(reset) {
    const from = reset ? start : after;
    const p = new URLSearchParams(q); p.set("top", "50"); if (from) p.set("after", from); else p.delete("after");
    const mine = ++reads;
    let page;
    try { page = await api("jobs?" + p.toString()); } catch (err) { status.replaceChildren(errorBox(err)); return null; }
    if (mine !== reads) return page.value;
    if (reset) body.replaceChildren();
    for (const r of page.value) {
      const st = r.status || {};
      body.append(el("tr", { "data-job": `${r.collection}/${r.name}` },
        el("td", {}, el("a", { href: `#/job/${encodeURIComponent(r.collection)}/${encodeURIComponent(r.name)}` }, q.get("collection") ? r.name : `${r.collection}/${r.name}`)),
        el("td", { class: "state-" + r.state }, r.state),
        el("td", {}, r.state === "Paused" ? "paused" : fmtTime(st.nextExecutionTime)),
        el("td", {}, fmtTime(st.lastExecutionTime)),
        outcomeCell(r.last),
        el("td", {}, String(st.executionCount || 0)),
        el("td", {}, String(st.failureCount || 0)),
        el("td", {}, r.action)));
    }
    const n = body.children.length;
    // A listing over many collections reads a bounded number of pages a request: a filter that
    // few jobs match answers with fewer rows, or none, and where to search on.
    const searched = page.next && page.value.length < 50 ? ` Searched up to ${page.next.replace(/\/$/, "")}: "Next page" searches on.` : "";
    status.textContent = (n ? `${count(n, "job")} shown.` : page.next ? "No job matches yet." : "No job matches.") + searched;
    after = page.next;
    more.hidden = !after;
    return page.value;
  }
  more.addEventListener("click", () => load(false));
  await load(true);
  // A state or a run of a listed job changes: the page reads its jobs again, a second after the
  // message. A result reaches the page from its worker while the planners record it, so the read
  // may not hold it yet: the page reads again each second (for about 15 s) until every job it
  // was told of shows that run, or a later one, as its last.
  const awaited = new Map(); // "collection/job" → the latest result told of and not yet shown
  let tries = 0;
  const reload = throttle(async () => {
    const rows = await load(true);
    if (!rows) { awaited.clear(); return; } // the read failed, and says so
    for (const [key, r] of awaited) {
      const row = rows.find((x) => `${x.collection}/${x.name}` === key);
      if (!row || (row.last && (sameRun(row.last, r) || Date.parse(row.last.startTime) > Date.parse(r.startTime)))) awaited.delete(key);
    }
    if (awaited.size && ++tries < 15 && body.isConnected) reload();
  }, 1000);
  onLive((m) => {
    const key = `${m.collection}/${m.job}`;
    if (!body.querySelector(`tr[data-job="${CSS.escape(key)}"]`)) return;
    if (m.kind === "result") { awaited.set(key, m.data); tries = 0; }
    reload();
  });
}

// ---- one job ----------------------------------------------------------------------------------

// secretFields are the secrets of an action, which the API never returns: the page says
// whether the job has them, from its authentication type.
function secretSummary(action) {
  const out = [];
  const auth = (spec) => spec && spec.request && spec.request.authentication;
  for (const [where, spec] of [["action", action], ["errorAction", action && action.errorAction]]) {
    const a = auth(spec);
    if (a && a.type) {
      const fields = { Basic: ["password"], ClientCertificate: ["pfx", "password"], ActiveDirectoryOAuth: ["secret"] }[a.type] || [];
      for (const f of fields) out.push(`${where}.request.authentication.${f}: set`);
    }
    const sb = spec && (spec.serviceBusQueueMessage || spec.serviceBusTopicMessage);
    if (sb && sb.authentication) out.push(`${where} Service Bus sasKey: set`);
    if (spec && spec.queueMessage) out.push(`${where}.queueMessage.sasToken: set`);
  }
  return out;
}

// onJobPage reports whether the address is still job j of collection c: a read that ends after
// the user went elsewhere must not draw over the page they went to.
function onJobPage(c, j) {
  const parts = addressParts();
  return parts.length === 3 && parts[0] === "job" && parts[1] === c && parts[2] === j;
}

// jobPage shows job j of collection c; view is the page it reads again, if any.
async function jobPage(c, j, view) {
  const current = () => onJobPage(c, j) && (view === undefined || view === views);
  let d;
  try { d = await api(`jobs/${encodeURIComponent(c)}/${encodeURIComponent(j)}`); } catch (err) { if (current()) show(el("h1", {}, j), errorBox(err)); return; }
  if (!current()) return;
  let shownView; // this page, once shown
  const props = d.job.properties || {};
  const title = `${d.collection.display}/${j}`;
  const note = el("p", { role: "status", class: "muted" });
  const act = (label, path, method, confirmText) => el("button", {
    type: "button", class: method === "DELETE" ? "danger" : null, onclick: async () => {
      if (confirmText && !(await confirmDialog(confirmText))) return;
      try {
        await api(`jobs/${encodeURIComponent(c)}/${encodeURIComponent(j)}${path}`, { method, body: method === "DELETE" ? undefined : {} });
        if (method === "DELETE") { location.hash = `#/jobs?collection=${encodeURIComponent(c)}`; return; }
        note.textContent = label + ": done.";
        if (path !== "/run") jobPage(c, j, shownView);
      } catch (err) { note.replaceChildren(errorBox(err)); }
    },
  }, label);
  const actions = canWrite() ? el("div", { class: "row" },
    act("Run now", "/run", "POST"),
    props.state === "Disabled" ? act("Enable", "/enable", "POST") : act("Disable", "/disable", "POST"),
    el("button", { type: "button", onclick: () => editJob(c, j, d.job) }, "Edit"),
    act("Delete", "", "DELETE", `Delete job ${title}? Its history goes with it.`)) : null;
  const shown = JSON.parse(JSON.stringify(d.job));
  delete shown.properties.status;
  const secrets = secretSummary(props.action).concat((d.secrets || []).map((h) => h + ": set"));
  const hist = el("div", {});
  show(el("h1", {}, title), actions, note,
    el("div", { class: "cards" },
      el("div", { class: "card" }, el("b", { class: "state-" + (props.state || "Enabled") }, d.collection.state !== "Enabled" && (props.state || "Enabled") === "Enabled" ? "Paused" : (props.state || "Enabled")), "state"),
      el("div", { class: "card" }, el("b", {}, String((props.status || {}).executionCount || 0)), "executions"),
      el("div", { class: "card" }, el("b", {}, String((props.status || {}).failureCount || 0)), "failures"),
      el("div", { class: "card" }, el("b", {}, String((props.status || {}).faultedCount || 0)), "faulted")),
    el("h2", {}, "Next runs"),
    d.runs && d.runs.length ? el("ol", { id: "runs" }, (d.local || d.runs).map((t) => el("li", {}, fmtTime(t)))) : el("p", { class: "muted" }, "No run left."),
    d.reason ? el("p", { class: "muted" }, "The list ends: " + d.reason) : null,
    calendar(d.runs || [], d.local || d.runs || [], !!d.reason),
    el("h2", {}, "History"), hist,
    el("h2", {}, "Definition"),
    secrets.length ? el("ul", {}, secrets.map((s) => el("li", {}, s))) : null,
    el("pre", {}, JSON.stringify(shown, null, 2)));
  shownView = views;
  historyTable(hist, c, j);
  // Its state changes elsewhere (another page, the end of its series): the page shows it.
  const again = throttle(() => jobPage(c, j, shownView), 500);
  onLive((m) => { if (m.kind === "event" && m.collection === c && m.job === j) again(); });
}

async function historyTable(box, c, j) {
  const filter = el("select", { "aria-label": "Status" }, ["", "Completed", "Failed", "Postponed", "Skipped"].map((s) => el("option", { value: s }, s || "Any status")));
  const body = el("tbody", {});
  const more = el("button", { type: "button", hidden: true }, "Older");
  let after = "";
  let reads = 0; // the reads begun: only the latest one's answer is shown
  async function load(reset) {
    const p = new URLSearchParams();
    if (filter.value) p.set("status", filter.value);
    if (!reset && after) p.set("after", after);
    const mine = ++reads;
    let page;
    try { page = await api(`jobs/${encodeURIComponent(c)}/${encodeURIComponent(j)}/history?${p}`); } catch (err) { box.append(errorBox(err)); return null; }
    if (mine !== reads) return page.value;
    if (reset) body.replaceChildren();
    for (const h of page.value) body.append(el("tr", {},
      el("td", {}, fmtTime(h.startTime)), el("td", {}, fmtTime(h.expectedExecutionTime)),
      el("td", { class: "status-" + h.status }, h.status), el("td", {}, h.actionName),
      el("td", {}, String(h.retryCount)), el("td", { class: "muted" }, (h.message || "").slice(0, 200))));
    after = page.next; more.hidden = !after;
    return page.value;
  }
  // A result reaches the page from its worker while the planners record it: a history read at
  // once may not hold it yet, and no other message follows. The page reads again, later each
  // time, until the entry is there (or for about 15 s; a filter that hides it stops at once).
  async function untilShown(r) {
    for (let wait = 250; box.isConnected; wait *= 2) {
      const rows = await load(true);
      if (!rows) return; // the read failed, and says so: not again and again
      if (filter.value && filter.value !== r.status) return;
      if (rows.some((h) => sameRun(h, r))) return;
      if (wait > 8000) return;
      await new Promise((done) => setTimeout(done, wait));
    }
  }
  filter.addEventListener("change", () => load(true));
  more.addEventListener("click", () => load(false));
  box.replaceChildren(el("div", { class: "row" }, filter), el("div", { class: "table" }, el("table", { id: "history" },
    el("thead", {}, el("tr", {}, ["Started", "Expected", "Status", "Action", "Retry", "Answer"].map((h) => el("th", { scope: "col" }, h)))), body)), more);
  await load(true);
  onLive((m) => { if (m.kind === "result" && m.collection === c && m.job === j) untilShown(m.data); });
}

function confirmDialog(text) {
  return new Promise((resolve) => {
    const d = el("dialog", { "aria-label": "Confirm" }, el("p", {}, text),
      el("div", { class: "row" },
        el("button", { type: "button", class: "danger", onclick: () => { d.close(); resolve(true); } }, "Delete"),
        el("button", { type: "button", onclick: () => { d.close(); resolve(false); } }, "Cancel")));
    d.addEventListener("cancel", () => resolve(false));
    d.addEventListener("close", () => d.remove());
    document.body.append(d);
    d.showModal();
  });
}

// editJob shows the editor of a job's definition in place of its page, at the same address (so a
// link to the job would not leave it: Save and Cancel draw the job's page again).
function editJob(c, j, def) {
  const back = () => { if (onJobPage(c, j)) jobPage(c, j); };
  const copy = JSON.parse(JSON.stringify(def));
  delete copy.properties.status; delete copy.id; delete copy.type; delete copy.name;
  const area = el("textarea", { "aria-label": "Job definition", rows: 20 }, JSON.stringify(copy, null, 2));
  const msg = el("div", { role: "alert" });
  show(el("h1", {}, `Edit ${j}`),
    el("p", { class: "muted" }, "Secrets are never sent to the page: give them again if the action needs them, or the save is refused."),
    area, msg,
    el("div", { class: "row" },
      el("button", { type: "button", onclick: async () => {
        try {
          await api(`jobs/${encodeURIComponent(c)}/${encodeURIComponent(j)}`, { method: "PUT", body: area.value });
          back();
        } catch (err) { msg.replaceChildren(errorBox(err), el("ul", {}, (err.details || []).map((x) => el("li", {}, `${x.path}: ${x.message}`)))); }
      } }, "Save"),
      el("button", { type: "button", onclick: back }, "Cancel")));
}

// ---- calendar ---------------------------------------------------------------------------------

// calendar is a month view of runs (RFC 3339, with the schedule's offsets in local), with the
// days of an offset change (daylight saving) and of the last run of an ending series marked.
function calendar(utc, local, ends) {
  const box = el("div", { class: "calendar" });
  if (!utc.length) return box;
  const runs = local.map((s) => ({ s, day: s.slice(0, 10), off: s.slice(19).replace(/^\.\d+/, "") }));
  let month = runs[0].day.slice(0, 7);
  const render = () => {
    const [y, m] = month.split("-").map(Number);
    const first = new Date(Date.UTC(y, m - 1, 1)), days = new Date(Date.UTC(y, m, 0)).getUTCDate();
    const lead = (first.getUTCDay() + 6) % 7;
    const cells = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"].map((d) => el("div", { class: "head" }, d));
    for (let i = 0; i < lead; i++) cells.push(el("div", { "aria-hidden": "true" }));
    for (let d = 1; d <= days; d++) {
      const day = `${month}-${String(d).padStart(2, "0")}`;
      const on = runs.filter((r) => r.day === day);
      const idx = runs.findIndex((r) => r.day === day);
      const dst = on.some((r) => { const i = runs.indexOf(r); return i > 0 && runs[i - 1].off !== r.off; });
      const end = ends && on.includes(runs[runs.length - 1]);
      const cls = [on.length ? "on" : "", dst ? "dst" : "", end ? "end" : ""].join(" ").trim();
      cells.push(el("div", { class: cls || null, "data-day": day, "aria-label": `${day}: ${count(on.length, "run")}${dst ? ", daylight saving change" : ""}${end ? ", the last run" : ""}` },
        String(d), on.slice(0, 3).map((r) => el("small", {}, r.s.slice(11, 16))), on.length > 3 ? el("small", {}, `+${on.length - 3}`) : null,
        dst ? el("small", {}, "DST " + on[0].off) : null, end ? el("small", {}, "end") : null));
      void idx;
    }
    const shift = (n) => { const dt = new Date(Date.UTC(y, m - 1 + n, 1)); month = dt.toISOString().slice(0, 7); render(); };
    box.replaceChildren(el("div", { class: "row" },
      el("button", { type: "button", "aria-label": "Previous month", onclick: () => shift(-1) }, "‹"),
      el("strong", { "aria-live": "polite" }, month),
      el("button", { type: "button", "aria-label": "Next month", onclick: () => shift(1) }, "›")),
    el("div", { class: "cal" }, cells));
  };
  render();
  return box;
}

// ---- recurrence builder -----------------------------------------------------------------------

const zones = ["UTC", "Europe/London", "Europe/Paris", "Europe/Berlin", "America/New_York", "America/Chicago", "America/Los_Angeles",
  "Asia/Tokyo", "Asia/Kolkata", "Australia/Sydney", "W. Europe Standard Time", "GMT Standard Time", "Eastern Standard Time",
  "Central Standard Time", "Pacific Standard Time", "Tokyo Standard Time", "India Standard Time", "AUS Eastern Standard Time"];
const weekDays = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

// The form's fields and the JSON paths the planner names in its refusals.
const fieldPaths = {
  "f-frequency": "recurrence.frequency", "f-interval": "recurrence.interval", "f-start": "startTime",
  "f-end": "recurrence.endTime", "f-count": "recurrence.count", "f-tz": "recurrence.timeZone",
  "f-hours": "recurrence.schedule.hours", "f-minutes": "recurrence.schedule.minutes",
  "f-weekdays": "recurrence.schedule.weekDays", "f-monthdays": "recurrence.schedule.monthDays",
  "f-monthly": "recurrence.schedule.monthlyOccurrences",
};

function builderPage() {
  const f = (id, label, input) => el("label", { for: id }, label, input, el("span", { class: "field-error", id: id + "-error", "aria-live": "polite" }));
  const inp = (id, attrs) => el("input", Object.assign({ id, name: id, "aria-describedby": id + "-error" }, attrs));
  const form = el("form", { id: "builder-form", onsubmit: (e) => e.preventDefault() },
    el("fieldset", {}, el("legend", {}, "How often"),
      el("div", { class: "row" },
        f("f-frequency", "Frequency", el("select", { id: "f-frequency", name: "f-frequency", "aria-describedby": "f-frequency-error" },
          ["Second", "Minute", "Hour", "Day", "Week", "Month", "Year"].map((x) => el("option", { value: x, selected: x === "Month" }, x)))),
        f("f-interval", "Every", inp("f-interval", { type: "number", min: "1", value: "1" })))),
    el("fieldset", {}, el("legend", {}, "When it starts and ends"),
      el("div", { class: "row" },
        f("f-start", "Start (in the time zone)", inp("f-start", { type: "datetime-local", step: "1" })),
        f("f-end", "End", inp("f-end", { type: "datetime-local", step: "1" })),
        f("f-count", "Or after this many runs", inp("f-count", { type: "number", min: "1" })),
        f("f-tz", "Time zone (IANA or Windows)", inp("f-tz", { list: "zones", value: "W. Europe Standard Time" })),
        el("datalist", { id: "zones" }, zones.map((z) => el("option", { value: z }))))),
    el("fieldset", {}, el("legend", {}, "At"),
      el("div", { class: "row" },
        f("f-hours", "Hours (0–23, comma-separated)", inp("f-hours", { value: "17", inputmode: "numeric" })),
        f("f-minutes", "Minutes (0–59)", inp("f-minutes", { value: "0", inputmode: "numeric" })),
        f("f-monthdays", "Month days (1–31, -1 the last)", inp("f-monthdays", { inputmode: "numeric" })),
        f("f-monthly", "Monthly occurrences (Friday:-1 = last Friday)", inp("f-monthly", { value: "Friday:-1" }))),
      el("div", { class: "days", id: "f-weekdays", role: "group", "aria-label": "Week days", "aria-describedby": "f-weekdays-error" },
        weekDays.map((d) => el("label", {}, el("input", { type: "checkbox", value: d, name: "wd" }), d.slice(0, 3)))),
      el("span", { class: "field-error", id: "f-weekdays-error", "aria-live": "polite" })));
  const json = el("textarea", { id: "builder-json", "aria-label": "The recurrence as Azure JSON", spellcheck: "false" });
  const jsonErr = el("p", { class: "error", id: "builder-json-error", role: "alert" });
  const list = el("ol", { id: "preview" });
  const reason = el("p", { class: "muted", id: "preview-reason" });
  const cal = el("div", { id: "preview-calendar" });
  const save = canWrite() ? saveForm(() => fromForm()) : null;
  show(el("h1", {}, "Recurrence builder"),
    el("p", { class: "muted" }, "Build a schedule with the form or edit its JSON; the next 20 runs are computed by the planners as you type."),
    el("div", { class: "builder" }, form, el("div", {}, json, jsonErr)),
    el("h2", {}, "Next 20 runs"), list, reason, cal, save);

  const split = (s) => s.split(",").map((x) => x.trim()).filter(Boolean);
  const ints = (s) => split(s).map(Number);
  const toLocal = (s) => (s || "").replace(/(Z|[+-]\d{2}:\d{2})$/, "");
  function fromForm() {
    const v = (id) => document.getElementById(id).value.trim();
    const rec = { frequency: v("f-frequency") };
    if (v("f-interval")) rec.interval = Number(v("f-interval"));
    if (v("f-count")) rec.count = Number(v("f-count"));
    if (v("f-end")) rec.endTime = v("f-end");
    if (v("f-tz")) rec.timeZone = v("f-tz");
    const sch = {};
    if (v("f-hours")) sch.hours = ints(v("f-hours"));
    if (v("f-minutes")) sch.minutes = ints(v("f-minutes"));
    if (v("f-monthdays")) sch.monthDays = ints(v("f-monthdays"));
    const wd = [...form.querySelectorAll("input[name=wd]:checked")].map((x) => x.value);
    if (wd.length) sch.weekDays = wd;
    if (v("f-monthly")) sch.monthlyOccurrences = split(v("f-monthly")).map((x) => { const [day, occ] = x.split(":"); return { day, occurrence: Number(occ) }; });
    if (Object.keys(sch).length) rec.schedule = sch;
    const props = { recurrence: rec };
    if (v("f-start")) props.startTime = v("f-start");
    return props;
  }
  function toForm(props) {
    const rec = props.recurrence || {}, sch = rec.schedule || {};
    const set = (id, val) => { document.getElementById(id).value = val === undefined || val === null ? "" : val; };
    set("f-frequency", rec.frequency || "Day"); set("f-interval", rec.interval || ""); set("f-count", rec.count || "");
    set("f-end", toLocal(rec.endTime)); set("f-tz", rec.timeZone || ""); set("f-start", toLocal(props.startTime));
    set("f-hours", (sch.hours || []).join(", ")); set("f-minutes", (sch.minutes || []).join(", "));
    set("f-monthdays", (sch.monthDays || []).join(", "));
    set("f-monthly", (sch.monthlyOccurrences || []).map((o) => `${o.day}:${o.occurrence}`).join(", "));
    for (const c of form.querySelectorAll("input[name=wd]")) c.checked = (sch.weekDays || []).some((d) => d.toLowerCase() === c.value.toLowerCase());
  }
  let previews = 0; // the previews asked for: only the latest one's answer is shown
  const run = debounce(async (props) => {
    if (!form.isConnected) return; // the page changed meanwhile
    const mine = ++previews;
    const job = { properties: Object.assign({ action: { type: "Http", request: { uri: "https://example.com/", method: "GET" } } }, props) };
    try {
      const r = await api("preview", { method: "POST", body: { job, count: 20 } });
      if (!form.isConnected || mine !== previews) return;
      for (const id of Object.keys(fieldPaths)) document.getElementById(id + "-error").textContent = "";
      jsonErr.textContent = "";
      list.replaceChildren(...r.value.map((t, i) => el("li", {}, fmtTime((r.local || r.value)[i]))));
      reason.textContent = r.reason ? "The series ends: " + r.reason : r.value.length ? "" : "No run.";
      cal.replaceChildren(calendar(r.value, r.local || r.value, !!r.reason));
    } catch (err) {
      if (!form.isConnected || mine !== previews) return;
      for (const id of Object.keys(fieldPaths)) document.getElementById(id + "-error").textContent = "";
      jsonErr.textContent = "";
      list.replaceChildren(); cal.replaceChildren(); reason.textContent = "";
      let placed = false;
      for (const d of err.details || []) {
        const path = d.path.replace(/^properties\./, "").replace(/\[\d+\].*$/, "");
        const id = Object.keys(fieldPaths).find((k) => fieldPaths[k] === path || path.startsWith(fieldPaths[k] + "."));
        if (id) { document.getElementById(id + "-error").textContent = d.message; placed = true; }
      }
      if (!placed) jsonErr.textContent = err.message + (err.details || []).map((d) => ` ${d.path}: ${d.message}`).join(";");
    }
  }, 250);
  const fromFormChanged = () => { const p = fromForm(); json.value = JSON.stringify(p, null, 2); run(p); };
  form.addEventListener("input", fromFormChanged);
  form.addEventListener("change", fromFormChanged);
  json.addEventListener("input", () => {
    let p;
    try { p = JSON.parse(json.value); } catch (e) { jsonErr.textContent = "Not JSON yet: " + e.message; return; }
    if (p.properties) p = p.properties;
    toForm(p);
    run(p);
  });
  const start = new Date(Date.now() + 86400000).toISOString().slice(0, 10) + "T00:00:00";
  document.getElementById("f-start").value = start;
  fromFormChanged();
}

// saveForm saves the builder's schedule as a job with an HTTP action, in an existing
// collection or a new one (a grant of every scope only: a new collection has no ARM scope).
function saveForm(schedule) {
  const msg = el("div", { role: "status" });
  const [sel, selList] = collectionPicker({ id: "s-collection", name: "collection", placeholder: "a collection" });
  const newColl = el("input", { id: "s-new", name: "new", pattern: "[A-Za-z0-9_\\-]{1,64}", placeholder: "or a new collection" });
  const name = el("input", { id: "s-name", required: true, pattern: "[A-Za-z0-9_\\-]{1,64}" });
  const uri = el("input", { id: "s-uri", type: "url", required: true, placeholder: "https://example.com/hook" });
  const method = el("select", { id: "s-method" }, ["POST", "GET", "PUT"].map((m) => el("option", { value: m }, m)));
  const everyScope = me && (me.scopes || []).includes("*");
  const form = el("form", { id: "save-form", onsubmit: async (e) => {
    e.preventDefault();
    const c = newColl.value.trim() || sel.value;
    if (!c) { msg.replaceChildren(el("p", { class: "error", role: "alert" }, "Choose a collection" + (everyScope ? ", or name a new one." : "."))); return; }
    try {
      if (newColl.value.trim()) {
        await api(`collections/${encodeURIComponent(c)}`, { method: "PUT", body: {} }).catch((err) => { if (err.status !== 409) throw err; });
      }
      const props = Object.assign(schedule(), { action: { type: uri.value.startsWith("https:") ? "Https" : "Http", request: { uri: uri.value, method: method.value } } });
      // Create only: a job of the same name is not replaced (its action and secrets would go).
      const at = `${encodeURIComponent(c)}/${encodeURIComponent(name.value)}`;
      try {
        await api(`jobs/${at}`, { method: "PUT", body: { properties: props }, headers: { "If-None-Match": "*" } });
      } catch (err) {
        if (err.status !== 409) throw err;
        msg.replaceChildren(el("p", { class: "error", role: "alert" }, `A job ${c}/${name.value} already exists: choose another name, or `,
          el("a", { href: `#/job/${at}` }, "open it"), " to edit it."));
        return;
      }
      location.hash = `#/job/${at}`;
    } catch (err) { msg.replaceChildren(errorBox(err), el("ul", {}, (err.details || []).map((x) => el("li", {}, `${x.path}: ${x.message}`)))); }
  } },
    el("div", { class: "row" },
      el("label", { for: "s-collection" }, "Collection", sel, selList),
      everyScope ? el("label", { for: "s-new" }, "New collection", newColl) : null,
      el("label", { for: "s-name" }, "Job name", name),
      el("label", { for: "s-uri" }, "Calls (HTTP)", uri),
      el("label", { for: "s-method" }, "Method", method),
      el("button", { type: "submit" }, "Save job")), msg);
  return el("section", { "aria-labelledby": "save-title" }, el("h2", { id: "save-title" }, "Save as a job"), form);
}

// ---- routing ----------------------------------------------------------------------------------

// addressParts is the page's address (#/job/<c>/<j>?…) as its decoded parts, without the query.
function addressParts() {
  return location.hash.replace(/^#/, "").split("?")[0].split("/").filter(Boolean).map(decodeURIComponent);
}

async function route() {
  const path = location.hash.replace(/^#/, "").split("?")[0] || "/";
  if (path === "/login") return loginPage();
  if (!sessionStorage.getItem(TOKEN)) { location.hash = "#/login"; return; }
  if (!me) {
    try { me = await api("me"); } catch (err) { return; }
    document.getElementById("signout").hidden = false;
    live.start();
  }
  const parts = addressParts();
  if (parts.length === 0) return overviewPage();
  if (parts[0] === "jobs") return jobsPage();
  if (parts[0] === "job" && parts.length === 3) return jobPage(parts[1], parts[2]);
  if (parts[0] === "builder") return builderPage();
  show(el("h1", {}, "Not found"), el("p", {}, el("a", { href: "#/" }, "Overview")));
}

applyTheme();
window.addEventListener("hashchange", route);
// The overview counts results: it reads them again at most every 2 s while they come, and its
// collections (their job counts) after a job's change.
function onOverview() { return addressParts().length === 0; }
let overviewJobsChanged = false;
const overviewAgain = throttle(() => { if (onOverview()) overviewPage(true, overviewJobsChanged); overviewJobsChanged = false; }, 2000);
live.on((m) => {
  if (!onOverview() || (m.kind !== "result" && m.kind !== "event")) return;
  if (m.kind === "event") overviewJobsChanged = true;
  overviewAgain();
});
route();
