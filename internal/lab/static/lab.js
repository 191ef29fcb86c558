// The lab's page: it draws what the lab sends (a snapshot, then events) and
// sends nothing but the run's settings. The picture is a function of the
// data: runs[id] holds everything, and draw() is called once per animation
// frame when something changed, never per event.
"use strict";

const $ = (sel) => document.querySelector(sel);
const state = { config: null, stack: [], runs: [], current: null, dirty: new Set(["stack", "run", "runs", "matrix"]), hits: [] };

// touch marks parts of the page to draw again at the next frame (none
// named: all): only what changed is redrawn, so following a run live costs
// the timeline and the counters, not the whole page's layout.
function touch(...parts) {
  for (const p of parts.length ? parts : ["stack", "run", "runs", "matrix"]) state.dirty.add(p);
}

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") e.textContent = v; else if (k in e && k !== "list") e[k] = v; else e.setAttribute(k, v);
  }
  for (const k of kids) if (k != null) e.append(k);
  return e;
}

async function api(method, path, body) {
  const headers = { "Content-Type": "application/json" };
  const token = $("#token").value;
  if (token) headers.Authorization = "Bearer " + token;
  const res = await fetch(path, { method, headers, body: body ? JSON.stringify(body) : undefined });
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(data.error || res.status + " " + res.statusText);
  return data;
}

async function init() {
  state.config = await api("GET", "/lab/api/config");
  const locks = $("#locks");
  for (const v of state.config.versions) {
    const box = el("input", { type: "checkbox", name: "lock", value: v.name });
    if (v.name === "v2" || v.name === "v6") box.checked = true;
    locks.append(el("label", { title: v.guard + ". Fixes: " + v.fixes + ". Still wrong: " + v.flaw }, box, " " + v.name));
  }
  for (const w of state.config.waits) $("#wait").append(el("option", { value: w, text: w }));
  $("#token-field").hidden = !state.config.token_required;
  $("#nemesis-field").dataset.title = $("#nemesis-field").title;
  $("#form").addEventListener("submit", start);
  // The nemesis sets the load itself (a steady rate for its duration, the
  // stock to match): the fields it overrides are greyed out while it is on.
  $("#nemesis").addEventListener("change", () => {
    for (const id of ["requests", "stock"]) {
      $("#" + id).disabled = $("#nemesis").checked;
      $("#" + id).title = $("#nemesis").checked ? "set by the nemesis: 30 sales/s for its duration, and stock for each" : "";
    }
  });
  $("#open-run").addEventListener("change", (e) => openRun(e.target.files[0]).catch(showError));
  $("#stop").addEventListener("click", () => api("DELETE", "/lab/api/runs/current").catch(showError));
  const canvas = $("#timeline");
  canvas.addEventListener("mousemove", (e) => hover(e.offsetX, e.offsetY));
  canvas.addEventListener("mouseleave", () => ($("#tip").hidden = true));
  // The keyboard walks the holds in time order, each shown as on hover.
  canvas.addEventListener("keydown", (e) => {
    const step = { ArrowRight: 1, ArrowLeft: -1, Home: 0, End: 0 }[e.key];
    if (step === undefined || !state.hits.length) return;
    e.preventDefault();
    const order = [...state.hits].sort((a, b) => a[0] - b[0]);
    const i = e.key === "Home" ? 0 : e.key === "End" ? order.length - 1 : ((state.focusHold ?? -1) + step + order.length) % order.length;
    state.focusHold = i;
    const h = order[i];
    showTip(h, h[1] + 2, (h[2] + h[3]) / 2);
  });
  canvas.addEventListener("blur", () => { $("#tip").hidden = true; state.focusHold = undefined; });
  window.addEventListener("resize", () => touch("run"));
  buildLessons();
  initSteps();
  listen();
  loadMatrix().catch(showError);
  requestAnimationFrame(frame);
}

// The scenario matrix: a row per scenario, a column per version that any
// scenario has a cell for; each cell its expected outcome and a Run button.
async function loadMatrix() {
  const m = await api("GET", "/lab/api/scenarios");
  state.matrix = m;
  state.cells = {};
  for (const c of m.results || []) state.cells[c.scenario + "/" + c.lock] = c;
  const locks = m.locks.filter((l) => m.scenarios.some((s) => l in s.expect));
  $("#matrix thead").replaceChildren(el("tr", {}, el("th", { text: "scenario" }), ...locks.map((l) => el("th", { text: l }))));
  $("#matrix tbody").replaceChildren(...m.scenarios.map((s) => el("tr", {},
    el("th", { scope: "row", title: s.injected + (s.needs ? " (needs " + s.needs + ")" : ""), text: s.name }),
    ...locks.map((l) => {
      if (!(l in s.expect)) return el("td", { text: "" });
      const b = el("button", { type: "button", text: "Run", disabled: !m.available });
      b.dataset.scenario = s.name; b.dataset.lock = l;
      b.addEventListener("click", () => runCell(s.name, l));
      return el("td", { "data-cell": s.name + "/" + l }, el("span", { className: "expect", text: s.expect[l] }), el("span", { className: "observed" }), b);
    }))));
  if (cellsBlocked()) $("#matrix-details").open = false; // what each version is expected to do, still there to read
  buildChoose();
  touch("matrix");
}

// The columns of "what to use": the tutorial's requirements as the
// scenarios test them, then what the catalogue says of fencing and waiting.
const chooseColumns = [
  ["exclusive under load", (v) => (v.safe ? "yes (the checker)" : "no")],
  ["its node down", "node-down"],
  ["holder killed (no deadlock)", "crash-holder"],
  ["slow holder", "slow-holder"],
  ["its key lost", "lost-lease"],
  ["paused holder (stealing)", "pause-holder"],
  ["fenced, paused", "pause-holder+fence"],
  ["reentrant", "reentry"],
  ["waiters woken, traffic stopped", "lost-wakeup"],
  ["fencing token", (v) => (v.no_token ? "none" : v.library ? "ours, beside the library" : "yes")],
  ["waiting", (v) => (v.wait ? "poll, notify or hand-off (-wait)" : v.waits || "-")],
];

// chooseRows are our v6 and v8, then every library version.
function chooseRows() {
  return state.config.versions.filter((v) => v.name === "v6" || v.name === "v8" || v.library);
}

// buildChoose draws "what to use": a row per lock, a cell per requirement,
// each the scenario's measured outcome (the catalogue's expectation, which
// is what the cells observe); drawMatrix adds what this lab observed.
function buildChoose() {
  const m = state.matrix;
  const expect = Object.fromEntries(m.scenarios.map((s) => [s.name, s.expect]));
  $("#choose thead").replaceChildren(el("tr", {}, el("th", { text: "lock" }), ...chooseColumns.map(([title]) => el("th", { text: title }))));
  $("#choose tbody").replaceChildren(...chooseRows().map((v) => el("tr", {},
    el("th", { scope: "row", title: v.guard + ". Still wrong: " + v.flaw + (v.lost_wakeup ? ". Lost wake-up: " + v.lost_wakeup : "") },
      el("code", { text: v.name }), el("br"), el("small", { text: v.library || "ours" })),
    ...chooseColumns.map(([, from]) => {
      if (typeof from === "function") return el("td", { text: from(v) });
      const want = (expect[from] || {})[v.name];
      if (!want) return el("td", { className: "none", text: "-", title: "no " + from + " cell for " + v.name });
      return el("td", { "data-cell": from + "/" + v.name, title: from }, el("span", { className: "expect", text: want }), el("span", { className: "observed" }));
    }))));
  $("#side-by-side").onclick = () => lessonRun(chooseRows().map((v) => v.name), "handoff");
}

// The lessons: a tab per version in the tutorial's order (arrow keys move
// between them), and the chosen one's text, its flaw's and its fix's
// buttons, and its code, fetched once as the service runs it.
function buildLessons() {
  const tabs = $("#lesson-tabs");
  const versions = state.config.versions;
  tabs.replaceChildren(...versions.map((v, i) => {
    const b = el("button", { type: "button", role: "tab", id: "lesson-tab-" + v.name, text: v.name, tabIndex: -1 });
    b.setAttribute("aria-controls", "lesson");
    b.addEventListener("click", () => showLesson(i));
    b.addEventListener("keydown", (e) => {
      const step = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 }[e.key];
      if (e.key === "Home" || e.key === "End" || step) {
        e.preventDefault();
        const next = e.key === "Home" ? 0 : e.key === "End" ? versions.length - 1 : (i + step + versions.length) % versions.length;
        showLesson(next);
        tabs.children[next].focus();
      }
    });
    return b;
  }));
  showLesson(0);
}

async function showLesson(i) {
  const v = state.config.versions[i];
  state.lesson = v.name;
  for (const [j, b] of [...$("#lesson-tabs").children].entries()) {
    b.setAttribute("aria-selected", String(j === i));
    b.tabIndex = j === i ? 0 : -1;
  }
  $("#lesson").setAttribute("aria-labelledby", "lesson-tab-" + v.name);
  const l = v.lesson || {};
  const buttons = el("div", { className: "buttons" });
  const why = el("span", { className: "why" });
  if (l.run) {
    const b = el("button", { type: "button", className: "flaw", text: "Show it: run " + l.run.join(" and ") });
    b.addEventListener("click", () => lessonRun(l.run));
    buttons.append(b);
  }
  if (l.scenario) {
    const flaw = el("button", { type: "button", className: "flaw", text: "Show the flaw: " + l.scenario });
    flaw.dataset.cell = l.scenario + "/" + v.name;
    flaw.addEventListener("click", () => lessonCell(l.scenario, v.name));
    buttons.append(flaw);
    if (l.fix) {
      const fix = el("button", { type: "button", className: "fix", text: "Show the fix: " + l.fix });
      fix.dataset.cell = l.fix + "/" + v.name;
      fix.addEventListener("click", () => lessonCell(l.fix, v.name));
      buttons.append(fix);
    }
  }
  // Its stories in the step-through, one command at a time (steps.js).
  for (const k of Object.keys(presets).filter((k) => (presets[k].tabs || [presets[k].lock]).includes(v.name))) {
    buttons.append(el("a", { href: "#/lesson/" + k, className: "preset", text: "Step through it: " + presets[k].title }));
  }
  buttons.append(why, el("span", { id: "lesson-error", role: "alert" }));
  const facts = el("dl", {}, el("dt", { text: "Adds" }), el("dd", { text: v.fixes }), el("dt", { text: "Still wrong" }), el("dd", { text: v.flaw }));
  if (v.not_copied) facts.append(el("dt", { text: "Not copied" }), el("dd", { text: v.not_copied }));
  const code = el("div", { className: "code" }, el("p", { className: "why", text: "loading its code..." }));
  $("#lesson").replaceChildren(el("h3", { text: v.name + ": " + v.guard }), facts, buttons, code);
  touch("matrix");
  try {
    state.code = state.code || {};
    const lesson = state.code[v.name] || (state.code[v.name] = await api("GET", "/lab/api/code/" + v.name));
    if (state.lesson !== v.name) return;
    code.replaceChildren(...lessonCode(v.name, lesson));
  } catch (err) { code.replaceChildren(el("p", { className: "why", text: "Its code could not be loaded: " + err.message })); }
}

// lessonCode draws a version's lesson code: the lines marked in its source
// as what makes it what it is (its acquire and its release), as a diff
// against the version it follows, each line with its place in its file;
// the whole files one click away.
function lessonCode(name, lesson) {
  const removed = lesson.diff.filter((d) => d.op === "-").length, added = lesson.diff.filter((d) => d.op === "+").length;
  const caption = !lesson.base
    ? "The lines that make " + name + " what it is, as the service runs them: how it takes the lock and how it lets it go."
    : removed + added === 0
      ? "The same lines as " + lesson.base + "'s: what differs is how it is deployed or set up, not its code."
      : "What " + name + " changes in " + lesson.base + "'s lines: " + plural(removed, "line") + " taken out (red), " + plural(added, "line") + " put in (green).";
  const diff = el("pre", { className: "diff", "aria-label": caption });
  let where = "";
  for (const d of lesson.diff) {
    if (d.path !== where) diff.append(el("span", { className: "file", text: (where = d.path) }));
    const line = el("span", { className: "line", "data-op": d.op, title: d.path + ":" + d.line },
      el("span", { className: "ln", text: String(d.line) }), el("span", { className: "op", text: d.op === "=" ? " " : d.op }), d.text);
    diff.append(line);
  }
  const files = el("details", { className: "files" }, el("summary", { text: "The whole files (" + lesson.files.length + ")" }),
    ...lesson.files.map((f) => el("details", {}, el("summary", { text: f.path + " (" + f.text.split("\n").length + " lines)" }),
      el("pre", {}, el("code", { text: f.text })))));
  return [el("p", { className: "why", text: caption }), diff, files];
}

function plural(n, what) { return n + " " + what + (n === 1 ? "" : "s"); }

// cellsBlocked says why no fault cell can run on this stack ("": they
// can): the lab has no cluster to fault, or the replicas say on /healthz
// (the stack, live) that their fault hooks are off, as make up starts them.
function cellsBlocked() {
  const m = state.matrix;
  if (!m) return "";
  if (!m.available && m.why !== m.why_no_hooks) return m.why;
  const replicas = state.stack.filter((n) => n.kind === "replica" && n.settings);
  if (replicas.some((n) => n.settings.chaos === "false")) return m.why_no_hooks;
  return replicas.length ? "" : m.why || "";
}

// blockedText is what a disabled fault button says: why, and the command.
function blockedText(why) {
  return "Could not run here: " + why + ". Start " + state.matrix.command + " for the fault cells.";
}

// withCommand is text with the lab's command in it set as code.
function withCommand(text) {
  const cmd = (state.matrix && state.matrix.command) || "make lab";
  const parts = text.split(cmd);
  return parts.flatMap((p, i) => (i ? [el("code", { text: cmd }), p] : [p]));
}

async function lessonRun(locks, wait = "") {
  clearError();
  try {
    adopt(await api("POST", "/lab/api/runs", { locks, wait, fence: false, requests: 300, concurrency: 50, stock: 100 }));
    $("#live-panel").scrollIntoView({ behavior: "smooth", block: "start" });
  } catch (err) { showError(err); }
}

async function lessonCell(scenario, lock) {
  await runCell(scenario, lock);
  $("#live-panel").scrollIntoView({ behavior: "smooth", block: "start" });
}

async function runCell(scenario, lock) {
  clearError();
  try {
    const c = await api("POST", "/lab/api/cells", { scenario, lock });
    if (keepCell(c)) showCell(c);
    else showCell(state.cells[scenario + "/" + lock]); // it ended before this reply came
  } catch (err) { showError(err); }
}

// newer says whether b is what the lab said after a (or a is unknown):
// the lab stamps each state of a run or cell with a rising rev, and the
// page keeps the latest, whatever order a reply and the events came in.
function newer(a, b) { return !a || (b.rev || 0) >= (a.rev || 0); }

// keepCell keeps c as its cell's state unless the page knows a later one.
function keepCell(c) {
  const k = c.scenario + "/" + c.lock;
  if (!newer(state.cells[k], c)) return false;
  state.cells[k] = c;
  return true;
}

// showCell puts a cell's sales and fault marks on the live timeline.
function showCell(c) {
  state.current = { id: "cell " + c.scenario + " · " + c.lock, status: c.status, holds: c.holds || [], marks: c.marks || [],
    results: [], counts: [], cell: c, error: c.error };
  touch("run", "matrix");
}

// showError says what went wrong by the form, and by the lesson's buttons.
function showError(err) {
  for (const e of [$("#form-error"), $("#lesson-error")]) if (e) e.textContent = err.message || String(err);
}

function clearError() { for (const e of [$("#form-error"), $("#lesson-error")]) if (e) e.textContent = ""; }

async function start(e) {
  e.preventDefault();
  clearError();
  const locks = [...document.querySelectorAll("input[name=lock]:checked")].map((b) => b.value);
  const settings = {
    locks, wait: $("#wait").value, fence: $("#fence").checked,
    requests: Number($("#requests").value), concurrency: Number($("#concurrency").value), stock: Number($("#stock").value),
  };
  if ($("#nemesis").checked) Object.assign(settings, { nemesis: true, seed: Number($("#seed").value), seconds: Number($("#seconds").value) });
  try {
    const run = await api("POST", "/lab/api/runs", settings);
    adopt(run);
  } catch (err) { showError(err); }
}

// openRun shows a run downloaded earlier (its JSON file) as if it had just
// ended: its timeline, verdicts and row, marked as opened from a file.
async function openRun(file) {
  if (!file) return;
  clearError();
  let run;
  try { run = JSON.parse(await file.text()); } catch (err) { throw new Error(file.name + " is not JSON: " + err.message); }
  if (!run || typeof run.id !== "string" || !Array.isArray(run.results) || !Array.isArray(run.holds)) {
    throw new Error(file.name + " is not a run of the lab (it wants id, results and holds)");
  }
  adopt(Object.assign(run, { id: run.id + " (file)", file: file.name }));
  $("#live-panel").scrollIntoView({ behavior: "smooth", block: "start" });
}

// adopt makes run (a summary or a whole run) the one the live panel shows.
function adopt(run) {
  const known = state.runs.find((r) => r.id === run.id);
  if (known && !newer(known, run)) { // a stale state (a reply after the end): the later one stays
    state.current = known;
    touch();
    return known;
  }
  const r = known || { holds: [] };
  Object.assign(r, run, { holds: run.holds || r.holds || [] });
  if (!known) state.runs.push(r);
  state.current = r;
  touch();
  return r;
}

function listen() {
  const es = new EventSource("/lab/api/events");
  es.addEventListener("snapshot", (e) => {
    const snap = JSON.parse(e.data);
    state.stack = snap.stack || [];
    for (const r of snap.runs || []) adoptQuiet(r);
    if (snap.running) adopt(snap.running);
    else if (!state.current && state.runs.length) state.current = state.runs[state.runs.length - 1];
    touch();
  });
  es.addEventListener("stack", (e) => { state.stack = JSON.parse(e.data); touch("stack", "matrix"); });
  es.addEventListener("progress", (e) => {
    const p = JSON.parse(e.data);
    const r = runById(p.run);
    if (!r) return;
    const i = (r.counts || []).findIndex((c) => c.lock === p.counts.lock);
    r.counts = r.counts || [];
    if (i < 0) r.counts.push(p.counts); else r.counts[i] = p.counts;
    r.current = p.counts.lock;
    for (const h of p.holds || []) r.holds.push(h);
    touch("run");
  });
  es.addEventListener("holds", (e) => {
    const p = JSON.parse(e.data);
    const r = runById(p.run);
    if (!r) return;
    r.holds = r.holds.filter((h) => h.lock !== p.lock).concat(p.holds);
    touch("run");
  });
  es.addEventListener("result", (e) => {
    const p = JSON.parse(e.data), res = p.result;
    const r = runById(p.run);
    if (!res.lock) return;
    r.results = (r.results || []).filter((x) => !(x.lock === res.lock && x.wait === res.wait)).concat([res]);
    touch("run", "runs");
  });
  es.addEventListener("end", (e) => { adopt(JSON.parse(e.data)); });
  es.addEventListener("cell", (e) => {
    const c = JSON.parse(e.data);
    if (!state.cells || !keepCell(c)) return;
    if (!state.current || state.current.cell || c.status === "running") showCell(c);
    touch("run", "matrix");
  });
}

function adoptQuiet(run) {
  const known = state.runs.find((r) => r.id === run.id);
  if (known && newer(known, run)) Object.assign(known, run, { holds: known.holds });
  else if (known) return;
  else state.runs.push(Object.assign({ holds: [] }, run));
}

function runById(id) {
  let r = state.runs.find((x) => x.id === id);
  if (!r) r = adopt({ id, holds: [], status: "running" });
  return r;
}

function frame() {
  const d = state.dirty;
  if (d.size) {
    state.dirty = new Set();
    if (d.has("stack")) drawStack();
    if (d.has("run")) drawRun();
    if (d.has("runs")) drawRuns();
    if (d.has("matrix")) drawMatrix();
  }
  requestAnimationFrame(frame);
}

function drawStack() {
  const ul = $("#stack");
  ul.replaceChildren(...state.stack.map((n) => {
    const s = n.settings || {};
    const what = n.kind === "replica"
      ? ["-lock " + (s.lock || "?"), "-wait " + (s.wait || "?"), s.fence === "true" ? "-fence" : "", "-work " + (s.work || "0"), "ttl " + (s.ttl || "?")].filter(Boolean).join(" ")
      : (n.addr || "");
    return el("li", { className: "node", "data-state": n.state, "data-name": n.name, title: n.detail || "" },
      el("b", { text: n.name }), el("span", { className: "state", text: n.state }), el("small", { text: n.kind + (what ? ": " + what : "") }));
  }));
}

function drawRun() {
  const r = state.current;
  const running = r && r.status === "running";
  $("#start").disabled = running;
  $("#stop").disabled = !running;
  const nemesis = r && r.settings && r.settings.nemesis ? " · nemesis seed " + r.settings.seed + ", " + (r.faults ? r.faults.length + " faults" : "drawing its faults") : "";
  $("#run-status").textContent = r ? "· run " + r.id + " · " + r.status + (r.current ? " · " + r.current : "") + nemesis + (r.error && !r.cell ? " · it stopped on an error (its record is below)" : "") : "";
  const stock = r && r.settings ? r.settings.stock : 0;
  $("#gauges").replaceChildren(...((r && r.counts) || []).map((c) => {
    const left = c.remaining >= 0 ? c.remaining : stock;
    const bar = el("div", { className: "bar" }, el("span"));
    bar.firstChild.style.width = (stock > 0 ? (100 * left) / stock : 0) + "%";
    return el("div", { className: "gauge", "data-lock": c.lock },
      el("b", { text: c.lock + ": stock " + left + " of " + stock }), bar,
      el("div", { className: "counts", text: `sent ${c.sent} · sold ${c.sold} · sold out ${c.sold_out} · fenced ${c.fenced} · failed ${c.failed} · unknown ${c.unknown}` }));
  }));
  drawTimeline(r);
  const cell = r && r.cell;
  // A fault the run or cell could not undo: the node, and the fix by hand.
  const fixes = (cell ? cell.fixes : r && r.fixes) || [];
  $("#fixes").hidden = fixes.length === 0;
  $("#fixes").replaceChildren(...fixes.map((f) => el("p", { className: "fix", "data-node": f.node },
    el("b", { text: "Not undone: " + f.node + " left " + f.left + ". " }), "Its undo failed: " + f.why + ". ",
    ...(f.how ? ["Fix it by hand: ", el("code", { text: f.how })] : []))));
  $("#verdicts").replaceChildren(...((r && r.results) || []).map(verdict),
    ...(cell && cell.status !== "running" ? [cellVerdict(cell)] : []),
    ...(r && r.error && !cell ? [record("Why the run stopped: its record", r.error)] : []));
}

// record is the raw record behind a sentence, one click away.
function record(title, text) {
  return el("details", { className: "record" }, el("summary", { text: title }), el("pre", { text }));
}

// cellOutcome is a cell's outcome in a word: running, could not run (it
// never started its fault), did not finish, as expected or not as expected.
function cellOutcome(c) {
  if (c.status === "running") return "running";
  if (c.status === "failed") return (c.why || "").startsWith("Could not run") ? "could not run" : "did not finish";
  return c.ok ? "as expected" : "not as expected";
}

// cellVerdict says in a sentence what a cell showed; what the scenario
// recorded (and, when it failed, the error) is one click away.
function cellVerdict(c) {
  const outcome = cellOutcome(c);
  const sentence = c.status === "failed" ? c.why || "It did not finish."
    : c.ok ? "Under " + c.scenario + ", " + c.lock + " did what it is expected to do: " + c.observed + "."
      : "Under " + c.scenario + ", " + c.lock + " did not do what it is expected to do: expected " + c.expected + ", seen " + c.observed + ".";
  const rec = [c.detail, c.evidence, c.error].filter(Boolean).join("\n\n");
  return el("div", { className: "verdict", "data-word": c.status === "failed" ? "not tested" : c.ok ? "ok" : "violated", "data-cell": c.scenario + "/" + c.lock },
    el("span", { className: "word", text: outcome }), ...withCommand(sentence), rec ? record("What it recorded", rec) : null);
}

// word is a result's verdict: "violated" when something is wrong in it (a
// unit sold twice, two holders, a lost update, not linearizable), else
// "not tested" when it tested too little to show anything (it sold
// nothing, or served under half its requests: the checker's own "not
// tested" among them), else "ok". Violated outranks not tested, which
// outranks ok: a run that sold nothing is never shown as passing.
function word(res) {
  if (res.oversold > 0 || res.two_holders > 0 || res.lost_updates > 0 || res.linearizability === "violated") return "violated";
  if (res.too_little || res.linearizability === "not tested") return "not tested";
  return "ok";
}

// notServed is the requests that failed or whose outcome is unknown.
function notServed(res) {
  return (res.failed || 0) + (res.unknown || 0);
}

function verdict(res) {
  const w = word(res);
  const parts = [`sold ${res.sold}, stock ${res.stock_before} → ${res.stock_after}`, `oversold ${res.oversold}`,
    `failed ${res.failed || 0}`, `not served ${notServed(res)} of ${res.requests}`];
  if (res.faults) parts.push(`${res.faults} of the nemesis's faults hit what it uses`); // only under the nemesis
  if (res.too_little) parts.push("tested too little: " + res.too_little);
  if (res.history_checked) parts.push(`two holders ${res.two_holders}`, `lost updates ${res.lost_updates}`);
  if (res.linearizability) parts.push("linearizable: " + res.linearizability);
  if (res.not_linearizable) parts.push(res.not_linearizable);
  if (res.untested) parts.push(res.untested);
  if (res.history_note) parts.push(res.history_note);
  return el("div", { className: "verdict", "data-word": w, "data-lock": res.lock },
    el("span", { className: "word", text: w }), el("b", { text: (res.lock + " " + (res.wait || "")).trim() + ": " }), parts.join(" · "));
}

// marks finds, per version, the holds that overlapped another owner's (a
// sweep in start order, remembering the hold that reaches furthest) and
// the holds the checker named in a lost update.
function marks(r) {
  const overlap = new Set(), lost = new Set();
  const byLock = {};
  for (const h of r.holds) (byLock[h.lock] = byLock[h.lock] || []).push(h);
  for (const hs of Object.values(byLock)) {
    hs.sort((a, b) => a.from - b.from);
    let far = null;
    for (const h of hs) {
      if (far && h.from < far.to && h.owner !== far.owner) { overlap.add(h.id + h.lock); overlap.add(far.id + far.lock); }
      if (!far || h.to > far.to) far = h;
    }
  }
  for (const res of r.results || []) for (const p of res.lost || []) { lost.add(p.a.id + res.lock); lost.add(p.b.id + res.lock); }
  return { overlap, lost };
}

function drawTimeline(r) {
  const canvas = $("#timeline");
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth, h = canvas.clientHeight;
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr);
  }
  const g = canvas.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  state.hits = [];
  const holds = (r && r.holds) || [];
  const lanes = [...new Set([...(state.config ? state.config.replicas : []), ...holds.map((x) => x.replica)])].sort();
  const left = 96, top = 8, laneH = Math.max(24, Math.min(80, (h - top - 20) / Math.max(1, lanes.length)));
  g.font = "12px system-ui, sans-serif";
  g.fillStyle = "#5b6673";
  lanes.forEach((name, i) => g.fillText(name, 6, top + i * laneH + laneH / 2 + 4));
  const { overlap, lost } = marks(r || { holds: [] });
  // The faults' moments: a cell's, or each version's under the nemesis.
  const faultMarks = (r && (r.marks || (r.results || []).flatMap((x) => x.marks || []))) || [];
  canvas.dataset.holds = holds.length;
  canvas.dataset.overlaps = overlap.size;
  canvas.dataset.lost = lost.size;
  if (!holds.length) return;
  let t0 = Infinity, t1 = -Infinity;
  for (const x of holds) { t0 = Math.min(t0, x.from); t1 = Math.max(t1, x.to); }
  for (const m of faultMarks) { const t = new Date(m.at).getTime() * 1000; t0 = Math.min(t0, t); t1 = Math.max(t1, t); }
  const span = Math.max(1, t1 - t0), width = w - left - 8;
  const X = (t) => left + ((t - t0) / span) * width;
  const hatch = hatchPattern(g);
  for (const x of holds) {
    const lane = lanes.indexOf(x.replica);
    const x0 = X(x.from), x1 = Math.max(x0 + 1, X(x.to));
    const y = top + lane * laneH + 4, hh = laneH - 8;
    const key = x.id + x.lock;
    const bad = overlap.has(key);
    g.fillStyle = bad ? hatch : "#5a7bb5";
    g.fillRect(x0, y, x1 - x0, hh);
    if (lost.has(key)) { g.strokeStyle = "#000"; g.lineWidth = 2; g.strokeRect(x0, y, x1 - x0, hh); }
    state.hits.push([x0, x1, y, y + hh, x, bad, lost.has(key)]);
  }
  g.fillStyle = "#5b6673";
  g.fillText(((t1 - t0) / 1000).toFixed(0) + " ms", w - 70, h - 4);
  // The faults' moments: a dashed line each, labelled.
  g.strokeStyle = "#1d232b"; g.lineWidth = 1; g.setLineDash([4, 3]);
  let labelY = top + 10;
  for (const m of faultMarks) {
    const x = X(new Date(m.at).getTime() * 1000);
    g.beginPath(); g.moveTo(x, top); g.lineTo(x, h - 16); g.stroke();
    g.fillStyle = "#1d232b";
    g.fillText(m.label, Math.min(x + 3, w - 200), labelY);
    labelY = labelY > h - 40 ? top + 10 : labelY + 13;
  }
  g.setLineDash([]);
  canvas.dataset.marks = faultMarks.length;
}

let hatchCache = null;
function hatchPattern(g) {
  if (hatchCache) return hatchCache;
  const c = document.createElement("canvas");
  c.width = c.height = 6;
  const p = c.getContext("2d");
  p.fillStyle = "#c0392b"; p.fillRect(0, 0, 6, 6);
  p.strokeStyle = "#fff"; p.lineWidth = 1.5;
  p.beginPath(); p.moveTo(0, 6); p.lineTo(6, 0); p.stroke();
  hatchCache = g.createPattern(c, "repeat");
  return hatchCache;
}

function hover(px, py) {
  const hit = state.hits.findLast((h) => px >= h[0] - 1 && px <= h[1] + 1 && py >= h[2] && py <= h[3]);
  if (!hit) { $("#tip").hidden = true; return; }
  showTip(hit, px, py);
}

// showTip tells one hold's record beside it (px, py): what a hover or the
// keyboard chose.
function showTip(hit, px, py) {
  const tip = $("#tip");
  const x = hit[4];
  const lines = [`${x.lock} · ${x.replica} · ${x.id}`, `held ${((x.to - x.from) / 1000).toFixed(2)} ms`,
    x.read != null ? `read ${x.read}` : "read nothing", x.wrote != null ? `wrote ${x.wrote}` : "wrote nothing",
    `reply ${x.status}${x.code ? " " + x.code : ""}${x.token ? " · token " + x.token : ""}`];
  if (hit[5]) lines.push("TWO HOLDERS: held while another owner held the lock");
  if (hit[6]) lines.push("LOST UPDATE: read what another sold sale had read");
  tip.textContent = lines.join("\n");
  tip.style.left = Math.min(px + 12, $("#timeline").clientWidth - 240) + "px";
  tip.style.top = py + 12 + "px";
  tip.hidden = false;
}

function drawMatrix() {
  const busy = state.current && state.current.status === "running";
  const blocked = cellsBlocked();
  const says = blocked ? blockedText(blocked) : "";
  for (const b of document.querySelectorAll("#lesson .buttons button")) {
    const cell = Boolean(b.dataset.cell);
    b.disabled = busy || (cell && Boolean(blocked));
    b.title = cell ? says : "";
  }
  const why = $("#lesson .buttons .why");
  if (why) why.replaceChildren(...(document.querySelector("#lesson .buttons button[data-cell]") && blocked ? withCommand(says) : []));
  $("#faults-why").replaceChildren(...(blocked ? withCommand(says) : []));
  for (const f of document.querySelectorAll("#nemesis-field input")) f.disabled = Boolean(blocked);
  $("#nemesis-field").title = blocked ? "The nemesis faults the stack. " + says : $("#nemesis-field").dataset.title;
  if (!state.cells) return;
  $("#side-by-side").disabled = busy;
  for (const td of document.querySelectorAll("#choose td[data-cell]")) {
    const c = state.cells[td.dataset.cell];
    const obs = td.querySelector(".observed");
    obs.textContent = c && c.status === "done" ? (c.ok ? " ✓ seen here" : " ✗ seen here: " + c.observed) : "";
    obs.dataset.ok = c && c.status === "done" ? String(c.ok) : "";
  }
  for (const td of document.querySelectorAll("#matrix td[data-cell]")) {
    const c = state.cells[td.dataset.cell];
    const obs = td.querySelector(".observed");
    obs.textContent = c ? (c.status === "done" ? (c.ok ? "✓ " : "✗ ") + c.observed : cellOutcome(c) + (c.status === "running" ? "..." : "")) : "";
    obs.dataset.ok = c && c.status === "done" ? String(c.ok) : "";
    obs.title = c ? (c.status === "failed" ? c.why : c.detail) || "" : "";
    const b = td.querySelector("button");
    b.disabled = busy || Boolean(blocked);
    b.title = says;
  }
}

function drawRuns() {
  const rows = [];
  for (const r of [...state.runs].reverse()) {
    for (const res of r.results || []) {
      const bad = (v) => (v > 0 ? "bad" : "");
      rows.push(el("tr", {},
        el("td", { text: r.id }), el("td", { text: res.lock }), el("td", { text: res.wait || "" }),
        el("td", { className: res.too_little ? "bad" : "", text: res.sold, title: res.too_little ? "tested too little: " + res.too_little : "" }),
        el("td", { className: bad(res.failed), text: res.failed || 0 }),
        el("td", { className: res.too_little ? "bad" : "", text: notServed(res) }),
        el("td", { className: bad(res.oversold), text: res.oversold }),
        el("td", { className: bad(res.two_holders), text: res.history_checked ? res.two_holders : "-" }),
        el("td", { className: bad(res.lost_updates), text: res.history_checked ? res.lost_updates : "-" }),
        el("td", { className: res.linearizability === "ok" ? "" : "bad", text: res.linearizability || "-" }),
        el("td", { text: Math.round(res.sales_per_sec) }),
        el("td", { text: res.latency_ms ? res.latency_ms.p99.toFixed(1) : "-" }),
        el("td", {}, ...(r.file ? [el("span", { text: "opened from " + r.file })] : [
          el("a", { href: "/lab/api/runs/" + r.id + "/report", text: "report" }), " ",
          el("a", { href: "/lab/api/runs/" + r.id + "?download", text: "json" })]))));
    }
  }
  $("#runs tbody").replaceChildren(...rows);
}

init().catch((err) => showError(err));
