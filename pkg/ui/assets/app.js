// sluice admin page: a client of sluice's own API, with the key kept in
// this tab's sessionStorage only. Plain DOM, no library, no inline script
// (the page's CSP is default-src 'self').
"use strict";

const KEY = "sluice.key";
const state = { key: sessionStorage.getItem(KEY) || "", admin: false, team: null, teams: [], timer: 0 };

// el builds an element: el("td", {class: "mono"}, "text", child...).
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids.flat()) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
  return e;
}
function svg(tag, attrs, ...kids) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids) e.append(k instanceof Node ? k : String(k));
  return e;
}

// ApiError is an answer of the API that is not a 2xx, in its own words.
class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(method, path, body) {
  const opts = { method, headers: { Authorization: "Bearer " + state.key } };
  if (body !== undefined) { opts.headers["Content-Type"] = "application/json"; opts.body = JSON.stringify(body); }
  let resp;
  try { resp = await fetch(path, opts); } catch (e) { throw new ApiError(0, "The gateway did not answer (" + e.message + ")."); }
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!resp.ok) {
    const msg = (data && data.error && data.error.message) || (data && data.message) || resp.statusText || "request failed";
    throw new ApiError(resp.status, msg + " (HTTP " + resp.status + ")");
  }
  return data;
}

function say(msg) { document.getElementById("alert").textContent = msg || ""; }
let statusTimer = 0;
function status(msg) {
  document.getElementById("status").textContent = msg || "";
  clearTimeout(statusTimer);
  statusTimer = setTimeout(() => { document.getElementById("status").textContent = ""; }, 4000);
}
function fail(e) {
  if (e instanceof ApiError && e.status === 401) { signOut("Your key was refused (HTTP 401): sign in again."); return; }
  say(e.message || String(e));
}

const fmt = {
  date: (s) => s ? new Date(typeof s === "number" ? s * 1000 : s).toISOString().slice(0, 16).replace("T", " ") : "—",
  num: (n) => n === null || n === undefined ? "—" : Number(n).toLocaleString("en-US"),
  usd: (n) => n === null || n === undefined ? "—" : "$" + Number(n).toFixed(4),
  models: (m) => m && m.length ? m.join(", ") : "all",
};

function table(headers, rows, empty) {
  if (!rows.length) return el("p", { class: "empty" }, empty);
  return el("div", { class: "tablewrap" }, el("table", {},
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, rows)));
}

function page(title, ...kids) {
  const main = document.getElementById("main");
  main.replaceChildren(el("h1", { id: "title", tabindex: "-1" }, title), ...kids);
}

// --- sign in ---------------------------------------------------------------

async function signIn(key) {
  state.key = key;
  await api("GET", "/v1/models");
  try {
    state.teams = await api("GET", "/team/list");
    state.admin = true;
    state.team = null;
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 403) throw e;
    const info = await api("GET", "/team/info");
    state.admin = false;
    state.team = info.team_info;
    state.teams = [info.team_info];
  }
  sessionStorage.setItem(KEY, key);
  document.getElementById("nav").hidden = false;
  document.getElementById("signout").hidden = false;
  document.getElementById("who").textContent = state.admin ? "master key" : "team " + (state.team.team_alias || state.team.team_id);
  if (!location.hash) location.hash = "#teams";
  route();
}

function signOut(msg) {
  sessionStorage.removeItem(KEY);
  state.key = "";
  clearInterval(state.timer);
  if (msg) sessionStorage.setItem("sluice.msg", msg);
  location.hash = "";
  location.reload();
}

document.getElementById("signin").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  say("");
  const key = document.getElementById("key").value.trim();
  try { await signIn(key); } catch (e) { state.key = ""; say(e.message); }
});
document.getElementById("signout").addEventListener("click", () => signOut());

// --- pages -----------------------------------------------------------------

const pages = { teams: teamsPage, keys: keysPage, spend: spendPage, batches: batchesPage, callbacks: callbacksPage };

function route() {
  if (!state.key) return;
  clearInterval(state.timer);
  say("");
  const name = (location.hash || "#teams").slice(1);
  const f = pages[name] || teamsPage;
  for (const a of document.querySelectorAll("nav a")) {
    if (a.getAttribute("href") === "#" + name) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  f().then(() => { const t = document.getElementById("title"); if (t) t.focus(); }).catch(fail);
}
window.addEventListener("hashchange", route);

async function refreshTeams() {
  if (state.admin) state.teams = await api("GET", "/team/list");
  return state.teams;
}

function teamSelect(id, selected) {
  return el("select", { id }, state.teams.map((t) =>
    el("option", { value: t.team_id, selected: t.team_id === selected }, (t.team_alias || "(no alias)") + " — " + t.team_id)));
}

// spendBar draws a team's spend against its budget; a spend the answer
// does not carry is "spend unknown", never a made-up $0.
function spendBar(spend, budget) {
  const known = spend !== undefined && spend !== null;
  if (budget === undefined || budget === null) return el("span", { class: "muted" }, (known ? fmt.usd(spend) : "spend unknown") + " (no budget)");
  if (!known) return el("span", { class: "muted" }, "spend unknown of " + fmt.usd(budget));
  const pct = budget > 0 ? Math.min(100, (100 * spend) / budget) : 0;
  const fill = el("span");
  fill.style.width = pct.toFixed(1) + "%";
  return el("div", {},
    el("div", { class: "bar" + (pct >= 100 ? " fail" : ""), role: "meter", "aria-valuemin": "0", "aria-valuemax": String(budget), "aria-valuenow": String(spend), "aria-label": "Spend of budget" }, fill),
    el("span", { class: "muted" }, fmt.usd(spend) + " of " + fmt.usd(budget)));
}

async function teamsPage() {
  const teams = await refreshTeams();
  const rows = teams.map((t) => el("tr", {},
    el("td", {}, t.team_alias || "—"), el("td", { class: "mono" }, t.team_id), el("td", {}, fmt.models(t.models)),
    el("td", {}, fmt.num(t.rpm_limit) + " rpm / " + fmt.num(t.tpm_limit) + " tpm"),
    el("td", {}, spendBar(t.spend, t.max_budget))));
  const kids = [table(["Alias", "ID", "Models", "Limits", "Spend vs budget"], rows, "No teams yet.")];
  if (state.admin) {
    const form = el("form", { class: "card", hidden: true, id: "teamform" },
      el("h2", {}, "New team"),
      el("div", { class: "row" },
        el("div", {}, el("label", { for: "t-alias" }, "Team alias"), el("input", { id: "t-alias", required: true })),
        el("div", {}, el("label", { for: "t-models" }, "Models"), el("input", { id: "t-models", placeholder: "comma-separated; empty: all" })),
        el("div", {}, el("label", { for: "t-rpm" }, "RPM limit"), el("input", { id: "t-rpm", type: "number", min: "0" })),
        el("div", {}, el("label", { for: "t-tpm" }, "TPM limit"), el("input", { id: "t-tpm", type: "number", min: "0" })),
        el("div", {}, el("label", { for: "t-budget" }, "Budget (USD)"), el("input", { id: "t-budget", type: "number", min: "0", step: "0.01" }))),
      el("button", { type: "submit" }, "Create"));
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const body = { team_alias: form.querySelector("#t-alias").value.trim() };
      const models = list(form.querySelector("#t-models").value);
      if (models.length) body.models = models;
      numberInto(body, "rpm_limit", form.querySelector("#t-rpm").value);
      numberInto(body, "tpm_limit", form.querySelector("#t-tpm").value);
      numberInto(body, "max_budget", form.querySelector("#t-budget").value, true);
      try { await api("POST", "/team/new", body); status("Team created."); await teamsPage(); } catch (e) { fail(e); }
    });
    kids.unshift(el("button", { type: "button", onclick: () => { form.hidden = false; form.querySelector("input").focus(); } }, "Create team"), form);
  }
  page("Teams", ...kids);
}

function list(s) { return s.split(",").map((x) => x.trim()).filter(Boolean); }
function numberInto(body, name, v, float) {
  if (v === "") return;
  body[name] = float ? parseFloat(v) : parseInt(v, 10);
}

let keysTeam = "";
async function keysPage() {
  await refreshTeams();
  if (!state.teams.length) { page("Keys", el("p", { class: "empty" }, "Create a team first.")); return; }
  if (!state.teams.some((t) => t.team_id === keysTeam)) keysTeam = state.teams[0].team_id;
  const pick = teamSelect("k-listteam", keysTeam);
  pick.addEventListener("change", () => { keysTeam = pick.value; keysPage().catch(fail); });
  const data = await api("GET", "/key/list?size=1000&team_id=" + encodeURIComponent(keysTeam));
  const rows = data.keys.map((k) => {
    const cell = el("td", {});
    const del = el("button", { type: "button", class: "danger", "aria-label": "Delete " + (k.key_alias || k.key_name) }, "Delete");
    del.addEventListener("click", () => {
      const yes = el("button", { type: "button", class: "danger" }, "Confirm delete");
      const no = el("button", { type: "button", class: "quiet" }, "Keep");
      yes.addEventListener("click", async () => {
        try { await api("POST", "/key/delete", { keys: [k.token] }); status("Key deleted."); await keysPage(); } catch (e) { fail(e); }
      });
      no.addEventListener("click", () => cell.replaceChildren(del));
      cell.replaceChildren(el("span", {}, "Delete " + (k.key_alias || k.key_name) + "? "), yes, " ", no);
      yes.focus();
    });
    cell.append(state.admin ? del : "");
    return el("tr", {}, el("td", {}, k.key_alias || "—"), el("td", { class: "mono" }, k.key_name), el("td", {}, fmt.date(k.created_at)),
      el("td", {}, fmt.date(k.expires)), el("td", {}, k.last_used_at ? fmt.date(k.last_used_at) : "not tracked"), el("td", {}, k.spend === undefined || k.spend === null ? "spend unknown" : fmt.usd(k.spend)), cell);
  });
  const kids = [el("label", { for: "k-listteam" }, "Keys of team"), pick,
    table(["Alias", "Key", "Created", "Expires", "Last used", "Spend", ""], rows, "This team has no keys.")];
  if (state.admin) {
    const out = el("div", { id: "newkey" });
    const form = el("form", { class: "card", hidden: true },
      el("h2", {}, "New key"),
      el("div", { class: "row" },
        el("div", {}, el("label", { for: "k-alias" }, "Key alias"), el("input", { id: "k-alias" })),
        el("div", {}, el("label", { for: "k-team" }, "Team"), teamSelect("k-team", keysTeam)),
        el("div", {}, el("label", { for: "k-models" }, "Models"), el("input", { id: "k-models", placeholder: "comma-separated; empty: the team's" })),
        el("div", {}, el("label", { for: "k-duration" }, "Duration"), el("input", { id: "k-duration", placeholder: "e.g. 30d; empty: no expiry" })),
        el("div", {}, el("label", { for: "k-budget" }, "Budget (USD)"), el("input", { id: "k-budget", type: "number", min: "0", step: "0.01" }))),
      el("button", { type: "submit" }, "Create"));
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const body = { team_id: form.querySelector("#k-team").value, key_alias: form.querySelector("#k-alias").value.trim() };
      const models = list(form.querySelector("#k-models").value);
      if (models.length) body.models = models;
      const d = form.querySelector("#k-duration").value.trim();
      if (d) body.duration = d;
      numberInto(body, "max_budget", form.querySelector("#k-budget").value, true);
      try {
        const k = await api("POST", "/key/generate", body);
        keysTeam = body.team_id;
        await keysPage();
        showNewKey(k.key);
      } catch (e) { fail(e); }
    });
    kids.unshift(el("button", { type: "button", onclick: () => { form.hidden = false; form.querySelector("input").focus(); } }, "Create key"), form, out);
  }
  page("Keys", ...kids);
}

// showNewKey shows a key once: it is in no state, only in this field.
function showNewKey(key) {
  const field = el("input", { id: "newkey-value", readonly: true, value: key });
  const copy = el("button", { type: "button" }, "Copy");
  copy.addEventListener("click", async () => {
    field.select();
    try { await navigator.clipboard.writeText(key); status("Copied."); } catch { status("Select the key and copy it."); }
  });
  document.getElementById("newkey").replaceChildren(el("div", { class: "card" },
    el("label", { for: "newkey-value" }, "New key"),
    el("div", { class: "newkey" }, field, copy),
    el("p", { class: "muted" }, "Shown once: only its SHA-256 is stored. Copy it now.")));
  field.focus();
}

// --- spend -------------------------------------------------------------------

let spendGroup = "team";
async function spendPage() {
  const end = new Date();
  const start = new Date(end.getTime() - 29 * 86400e3);
  const day = (d) => d.toISOString().slice(0, 10);
  const pick = el("select", { id: "s-group" }, ["team", "api_key", "model"].map((g) => el("option", { value: g, selected: g === spendGroup }, g)));
  pick.addEventListener("change", () => { spendGroup = pick.value; spendPage().catch(fail); });
  const head = [el("label", { for: "s-group" }, "Group by"), pick];
  let report = null;
  try {
    report = await api("GET", "/global/spend/report?start_date=" + day(start) + "&end_date=" + day(end) + "&group_by=" + spendGroup);
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 404) throw e;
  }
  if (!report || !report.data || !report.data.length) {
    page("Spend", ...head, el("p", { class: "empty", id: "nospend" }, "no spend recorded" + (report ? " from " + day(start) + " to " + day(end) + "." : " (this gateway has no spend report).")));
    return;
  }
  const rows = report.data.map((d) => el("tr", {}, el("td", {}, d.date), el("td", {}, d.group_alias || d.group), el("td", {}, fmt.usd(d.spend)),
    el("td", {}, fmt.num(d.requests)), el("td", {}, fmt.num(d.input_tokens)), el("td", {}, fmt.num(d.output_tokens))));
  const t = report.total || {};
  rows.push(el("tr", {}, el("th", { scope: "row" }, "Total"), el("td", {}), el("td", {}, fmt.usd(t.spend)), el("td", {}, fmt.num(t.requests)),
    el("td", {}, fmt.num(t.input_tokens)), el("td", {}, fmt.num(t.output_tokens))));
  page("Spend", ...head, el("div", { class: "card" }, chart(report.data)), table(["Date", "Group", "Spend", "Requests", "Input tokens", "Output tokens"], rows, ""));
}

const colours = ["#2457d6", "#1d7a46", "#a15c00", "#b3261e", "#7b3fc4", "#00838f", "#c2185b", "#5d6d7e"];

// chart draws spend per day as one line per group, days on the x axis.
function chart(data) {
  const days = [...new Set(data.map((d) => d.date))].sort();
  const groups = [...new Set(data.map((d) => d.group))];
  const alias = {};
  for (const d of data) alias[d.group] = d.group_alias || d.group;
  const max = Math.max(...data.map((d) => d.spend), 0) || 1;
  const W = 800, H = 260, L = 56, R = 12, T = 12, B = 36;
  const x = (i) => L + (days.length === 1 ? (W - L - R) / 2 : (i * (W - L - R)) / (days.length - 1));
  const y = (v) => T + (H - T - B) * (1 - v / max);
  const s = svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "Spend over time" },
    svg("title", {}, "Spend over time"));
  s.append(svg("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }), svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  for (const f of [0, 0.5, 1]) s.append(svg("text", { x: L - 6, y: y(max * f) + 4, "text-anchor": "end" }, "$" + (max * f).toFixed(max * f < 1 ? 4 : 2)));
  const step = Math.max(1, Math.ceil(days.length / 8));
  days.forEach((d, i) => { if (i % step === 0 || i === days.length - 1) s.append(svg("text", { x: x(i), y: H - B + 16, "text-anchor": "middle" }, d.slice(5))); });
  groups.forEach((g, gi) => {
    const by = {};
    for (const d of data) if (d.group === g) by[d.date] = (by[d.date] || 0) + d.spend;
    const pts = days.map((d, i) => `${x(i)},${y(by[d] || 0)}`).join(" ");
    const c = colours[gi % colours.length];
    s.append(svg("polyline", { points: pts, fill: "none", stroke: c, "stroke-width": "2" }));
    days.forEach((d, i) => { if (by[d]) s.append(svg("circle", { cx: x(i), cy: y(by[d]), r: "3", fill: c }, svg("title", {}, `${alias[g]} ${d}: $${by[d].toFixed(4)}`))); });
  });
  const legend = el("div", { class: "legend" }, groups.map((g, gi) => {
    const sw = el("span", { class: "swatch" });
    sw.style.background = colours[gi % colours.length];
    return el("span", {}, sw, alias[g]);
  }));
  return el("div", {}, s, legend);
}

// --- batches -------------------------------------------------------------------

async function batchesPage() {
  const draw = async () => {
    const data = await api("GET", "/v1/batches?limit=100");
    const rows = data.data.map((b) => {
      const n = b.request_counts || { total: 0, completed: 0, failed: 0 };
      const done = n.completed + n.failed;
      const fill = el("span");
      fill.style.width = (n.total ? (100 * done) / n.total : 0).toFixed(1) + "%";
      const bar = el("div", { class: "bar" + (n.failed ? " fail" : ""), role: "progressbar", "aria-valuemin": "0", "aria-valuemax": String(n.total),
        "aria-valuenow": String(done), "aria-label": "Progress of " + b.id, "aria-valuetext": `${done} of ${n.total} (${n.failed} failed)` }, fill);
      const files = el("td", {});
      for (const [label, id] of [["output", b.output_file_id], ["errors", b.error_file_id]]) {
        if (!id) continue;
        const a = el("a", { href: "#batches", "data-file": id }, label);
        a.addEventListener("click", (ev) => { ev.preventDefault(); download(id, b.id + "." + label + ".jsonl").catch(fail); });
        files.append(a, " ");
      }
      const actions = el("td", {});
      if (["validating", "in_progress", "finalizing"].includes(b.status)) {
        actions.append(el("button", { type: "button", class: "danger", "aria-label": "Cancel " + b.id, onclick: async () => {
          try { await api("POST", "/v1/batches/" + encodeURIComponent(b.id) + "/cancel"); status("Cancelling " + b.id + "."); await draw(); } catch (e) { fail(e); }
        } }, "Cancel"));
      }
      return el("tr", {}, el("td", { class: "mono" }, b.id), el("td", {}, b.status), el("td", {}, b.endpoint), el("td", {}, fmt.date(b.created_at)),
        el("td", {}, bar, el("span", { class: "muted" }, `${done}/${n.total}` + (n.failed ? `, ${n.failed} failed` : ""))), files, actions);
    });
    const t = table(["ID", "Status", "Endpoint", "Created", "Progress", "Files", ""], rows, "No batches yet.");
    const holder = document.getElementById("batches");
    if (holder) holder.replaceChildren(t); else page("Batches", el("p", { class: "muted" }, "Refreshed every 2 s while this page is open."), el("div", { id: "batches" }, t));
  };
  await draw();
  state.timer = setInterval(() => draw().catch(fail), 2000);
}

async function download(id, name) {
  const resp = await fetch("/v1/files/" + encodeURIComponent(id) + "/content", { headers: { Authorization: "Bearer " + state.key } });
  if (!resp.ok) throw new ApiError(resp.status, "Could not download " + id + " (HTTP " + resp.status + ").");
  const url = URL.createObjectURL(await resp.blob());
  const a = el("a", { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

// --- callbacks -------------------------------------------------------------------

let callbacksTeam = "";
async function callbacksPage() {
  await refreshTeams();
  if (!state.teams.length) { page("Callbacks", el("p", { class: "empty" }, "Create a team first.")); return; }
  if (!state.teams.some((t) => t.team_id === callbacksTeam)) callbacksTeam = state.teams[0].team_id;
  const pick = teamSelect("c-team", callbacksTeam);
  pick.addEventListener("change", () => { callbacksTeam = pick.value; callbacksPage().catch(fail); });
  const res = await api("GET", "/team/" + encodeURIComponent(callbacksTeam) + "/callback");
  const cbs = (res.data && res.data.callbacks) || [];
  const rows = cbs.map((c) => el("tr", {}, el("td", {}, c.callback_name), el("td", {}, c.callback_type),
    el("td", { class: "mono" }, Object.entries(c.callback_vars || {}).map(([k, v]) => k + "=" + v).join("  "))));
  const health = cbs.map((c) => {
    const d = c.delivery || {};
    const name = c.callback_name + " (" + c.callback_type + ")";
    return el("tr", {}, el("td", {}, name),
      el("td", { class: "num", "data-health": "delivered" }, fmt.num(d.delivered)),
      el("td", { class: "num", "data-health": "retrying" }, fmt.num(d.retrying)),
      el("td", { class: "num", "data-health": "dead_lettered" }, fmt.num(d.dead_lettered)),
      el("td", {}, fmt.date(d.last_delivered_at)),
      el("td", { "data-health": "last_error" }, d.last_error ? d.last_error + " (" + fmt.date(d.last_error_at) + ")" : "none"));
  });
  page("Callbacks", el("label", { for: "c-team" }, "Callbacks of team"), pick,
    table(["Name", "Type", "Variables (secrets masked)"], rows, "This team has no callbacks."),
    el("h2", {}, "Delivery health"),
    table(["Callback", "Delivered", "Retrying", "Dead-lettered", "Last delivered", "Last error (when, UTC)"], health, "No callbacks, no deliveries."),
    el("p", { class: "muted", id: "health" }, "Retrying: events whose delivery failed and waits for redelivery. " +
      "Dead-lettered: events given up on and not delivered since; re-driving them (docs/operations.md) moves them back."));
}

// --- start -------------------------------------------------------------------------

(function start() {
  const msg = sessionStorage.getItem("sluice.msg");
  if (msg) { sessionStorage.removeItem("sluice.msg"); say(msg); }
  if (state.key) signIn(state.key).catch((e) => { sessionStorage.removeItem(KEY); state.key = ""; say(e.message); });
})();
