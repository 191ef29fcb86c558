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

// The page's words, in English and 简体中文: one catalogue per language
// (static/i18n/LANG.json), keyed by what a string is for, not by its English,
// {name} marking a number or a name put in. The language is ?lang=, else the
// switch's last choice (kept in localStorage), else English. Commands, code,
// Redis' commands and replies are shown as they are, in no catalogue.
const langs = ["en", "zh"];
const i18n = { lang: "en", words: {}, en: {} };

function pickLang() {
  const asked = new URLSearchParams(location.search).get("lang");
  let kept = null;
  try {
    if (langs.includes(asked)) localStorage.setItem("locklab.lang", asked);
    kept = localStorage.getItem("locklab.lang");
  } catch { /* storage refused (a private window): the address still chooses */ }
  return langs.includes(asked) ? asked : langs.includes(kept) ? kept : "en";
}

// loadWords fetches the chosen language's catalogue and English's, the
// fallback of a key one language lacks (the catalogue test forbids that,
// but a page newer than its catalogue then still says something).
async function loadWords() {
  i18n.lang = pickLang();
  const get = async (l) => {
    const res = await fetch("/lab/static/i18n/" + l + ".json");
    if (!res.ok) throw new Error("the catalogue " + l + ".json: " + res.status);
    return res.json();
  };
  i18n.en = await get("en");
  i18n.words = i18n.lang === "en" ? i18n.en : await get(i18n.lang);
  document.documentElement.lang = i18n.lang === "zh" ? "zh-CN" : "en";
}

// t is the text of key in the page's language, {name} replaced by params'.
function t(key, params) {
  const s = i18n.words[key] ?? i18n.en[key] ?? key;
  return params ? s.replace(/\{(\w+)\}/g, (m, k) => (k in params ? String(params[k]) : m)) : s;
}

// has says whether the catalogue has key: a server's code the page may
// say in its own words, or else shows as the server said it.
function has(key) { return key in i18n.words; }

// translatePage fills the page's fixed text from the catalogue: an element's
// text (data-i18n), its text with markup of our own (data-i18n-html: code,
// links), its title and its aria-label.
function translatePage() {
  for (const e of document.querySelectorAll("[data-i18n]")) e.textContent = t(e.dataset.i18n);
  for (const e of document.querySelectorAll("[data-i18n-html]")) e.innerHTML = t(e.dataset.i18nHtml);
  for (const e of document.querySelectorAll("[data-i18n-title]")) e.title = t(e.dataset.i18nTitle);
  for (const e of document.querySelectorAll("[data-i18n-label]")) e.setAttribute("aria-label", t(e.dataset.i18nLabel));
  document.documentElement.style.setProperty("--more-columns", JSON.stringify(t("table.more")));
  for (const b of document.querySelectorAll("#lang button")) {
    b.setAttribute("aria-pressed", String(b.dataset.lang === i18n.lang));
    // The switch keeps the choice and loads the page again in it: every
    // text, the server's included, is drawn once, in one language.
    b.onclick = () => {
      try { localStorage.setItem("locklab.lang", b.dataset.lang); } catch { /* the address says it */ }
      const url = new URL(location.href);
      url.searchParams.set("lang", b.dataset.lang);
      location.replace(url);
    };
  }
}

// said is a server's words (English) in the page's language: the
// catalogue's key when it has one, else as the server wrote them. English
// shows the server's own words, so the two never drift apart there.
function said(key, text) {
  return i18n.lang === "en" || !has(key) ? text : t(key);
}

// outcomeText is a cell's outcome, expected or observed, in the page's
// language: the lab names each outcome the scenarios say (outcomes: text
// to code).
function outcomeText(text, reasons) {
  const code = state.matrix && state.matrix.outcomes && state.matrix.outcomes[text];
  if (code) return said("outcome." + code, text);
  if (i18n.lang !== "en" && text && text.startsWith("not tested: ")) return t("outcome.notTested", { why: serverText(text.slice(12), reasons) });
  return text;
}

// vText is a version's guard, fixes, flaw or not_copied in the page's
// language: the version catalogue's own words (versions.json's zh).
function vText(v, field) {
  return (i18n.lang !== "en" && v[i18n.lang] && v[i18n.lang][field]) || v[field];
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
  // A code the catalogue knows is said in the page's language; the server's
  // own sentence (English, with its details) then stays in the error's why.
  if (!res.ok) {
    const err = new Error(i18n.lang !== "en" && has("error." + data.code) ? t("error." + data.code) : data.error || res.status + " " + res.statusText);
    err.why = data.error;
    throw err;
  }
  return data;
}

async function init() {
  await loadWords();
  translatePage();
  state.config = await api("GET", "/lab/api/config");
  const locks = $("#locks");
  for (const v of state.config.versions) {
    const box = el("input", { type: "checkbox", name: "lock", value: v.name });
    if (state.config.showcase.includes(v.name)) box.checked = true;
    locks.append(el("label", { title: t("run.lockTitle", { guard: vText(v, "guard"), fixes: vText(v, "fixes"), flaw: vText(v, "flaw") }) }, box, " " + v.name));
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
      $("#" + id).title = $("#nemesis").checked ? t("run.setByNemesis") : "";
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
  window.addEventListener("resize", () => touch("run", "runs"));
  $("#quick-run").textContent = t("start.quickRun", { locks: state.config.showcase.join(t("start.beside")) });
  $("#quick-run").addEventListener("click", () => lessonRun(state.config.showcase));
  buildLessons();
  initSteps();
  listen();
  // A page left for another stays in the browser's back/forward cache,
  // its feed still open and counted among the lab's 8 streams per address
  // for minutes: a few navigations in one tab filled them (TestLab). Closed
  // as the page goes; opened again, with a fresh snapshot, if it comes back.
  window.addEventListener("pagehide", () => { if (feed) feed.close(); feed = null; });
  window.addEventListener("pageshow", (e) => { if (e.persisted && !feed) listen(); });
  loadMatrix().catch(showError);
  initViews();
  requestAnimationFrame(frame);
}

// The views, each at its own address in the manner of pprof's web UI: the
// start page (/, everything on one page, the first screen enough to begin),
// and under /lab/ (nginx sends / and /lab/ to the lab, the rest to the
// replicas) the lessons (/lab/lessons/v4), the runs (/lab/runs/ID: drawn
// again from the run the lab keeps), the faults, the libraries, the stack.
// Back and forward move between them without a reload.
const views = { "": "all", lessons: "lessons", runs: "runs", faults: "faults", libraries: "libraries", stack: "stack" };

// viewAt is the view, and the thing in it (a version, a run), a path names;
// null for a path that names none.
function viewAt(path) {
  if (path === "/") return { view: "all" };
  const m = path.match(/^\/lab\/(lessons|runs|faults|libraries|stack)(?:\/([^/]+))?\/?$/);
  return m && (!m[2] || m[1] === "lessons" || m[1] === "runs") ? { view: views[m[1]], item: m[2] && decodeURIComponent(m[2]) } : null;
}

function initViews() {
  document.addEventListener("click", (e) => {
    const a = e.target.closest && e.target.closest("a[href]");
    if (!a || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey || a.origin !== location.origin) return;
    if (!viewAt(a.pathname) || (a.pathname === location.pathname && a.hash)) return; // a story's #/lesson/ is steps.js's
    e.preventDefault();
    goTo(a.pathname + a.hash);
  });
  window.addEventListener("popstate", () => showView());
  showView();
}

// goTo moves to path as a new entry of the history (replace: in place).
function goTo(path, replace) {
  if (path === location.pathname + location.hash) return;
  history[replace ? "replaceState" : "pushState"](null, "", path);
  showView();
}

// showView shows the view the address names: its sections, and the version or
// run in it. A story of the step-through (#/lesson/NAME) is a lesson's.
function showView() {
  const at = viewAt(location.pathname) || { view: "all" };
  const view = location.hash.startsWith("#/lesson/") && at.view !== "all" ? "lessons" : at.view;
  state.view = view;
  document.body.dataset.view = view;
  for (const s of document.querySelectorAll("main > section[data-views]")) s.hidden = !s.dataset.views.split(" ").includes(view);
  for (const a of document.querySelectorAll("#views a")) {
    if (viewAt(a.pathname).view === view) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  if (view === "lessons" && at.item) {
    const i = state.config.versions.findIndex((v) => v.name === at.item);
    if (i < 0) showError(new Error(t("lessons.noVersion", { name: at.item })));
    else if (state.lesson !== at.item) showLesson(i);
  }
  if (view === "runs" && at.item) openRunByID(at.item);
  touch(); // widths changed with the sections shown
  document.title = "locklab: " + (view === "all" ? t("start.title") : (at.item ? at.item + " · " : "") + t("view." + view));
}

// openRunByID shows a run the lab keeps, whole (its holds too), as its
// address names it: a reload or a shared link draws the same timeline.
async function openRunByID(id) {
  const known = state.runs.find((r) => r.id === id);
  if (known && known.holds.length && known.status !== "running") { state.current = known; touch(); return; }
  try {
    const run = await api("GET", "/lab/api/runs/" + encodeURIComponent(id));
    const r = adopt(run);
    // The live feed's summary of the run (no holds) may be later than this
    // reply and win: the holds are this reply's all the same.
    if (r.holds.length < run.holds.length) r.holds = run.holds;
    state.current = r;
    touch();
  } catch (err) { showError(err); }
}

// The scenario matrix: a row per scenario, a column per version that any
// scenario has a cell for; each cell its expected outcome and a Run button.
async function loadMatrix() {
  const m = await api("GET", "/lab/api/scenarios");
  state.matrix = m;
  state.cells = {};
  for (const c of m.results || []) state.cells[c.scenario + "/" + c.lock] = c;
  const locks = m.locks.filter((l) => m.scenarios.some((s) => l in s.expect));
  $("#matrix thead").replaceChildren(el("tr", {}, el("th", { text: t("faults.scenario") }), ...locks.map((l) => el("th", { text: l }))));
  $("#matrix tbody").replaceChildren(...m.scenarios.map((s) => el("tr", {},
    el("th", { scope: "row", title: (has("injected." + s.name) ? t("injected." + s.name) : s.injected) + (s.needs ? t("faults.needs", { what: serverText(s.needs, m.reasons) }) : ""), text: s.name }),
    ...locks.map((l) => {
      if (!(l in s.expect)) return el("td", { text: "" });
      const b = el("button", { type: "button", text: t("faults.run"), disabled: !m.available });
      b.dataset.scenario = s.name; b.dataset.lock = l;
      b.addEventListener("click", () => runCell(s.name, l));
      return el("td", { "data-cell": s.name + "/" + l }, el("span", { className: "expect", text: outcomeText(s.expect[l]) }), el("span", { className: "observed" }), b);
    }))));
  if (cellsBlocked()) $("#matrix-details").open = false; // what each version is expected to do, still there to read
  buildChoose();
  touch("matrix");
}

// The columns of "what to use": the tutorial's requirements as the
// scenarios test them (each scenario that names one, in the catalogue's
// order), then what the catalogue says of fencing and waiting.
function chooseColumns() {
  return [
    [t("choose.exclusive"), (v) => (v.safe ? t("choose.yesChecker") : t("choose.no"))],
    ...state.matrix.scenarios.filter((s) => s.requirement).map((s) => [said("requirement." + s.name, s.requirement), s.name]),
    [t("choose.fencing"), (v) => (v.no_token ? t("choose.noToken") : v.library ? t("choose.oursBeside") : t("choose.yes"))],
    [t("choose.waiting"), (v) => (v.wait ? t("choose.waitFlag") : v.waits || "-")],
  ];
}

// chooseRows are ours the catalogue sets beside the libraries, then every
// library version.
function chooseRows() {
  return state.config.versions.filter((v) => v.compare || v.library);
}

// buildChoose draws "what to use": a row per lock, a cell per requirement,
// each the scenario's measured outcome (the catalogue's expectation, which
// is what the cells observe); drawMatrix adds what this lab observed.
function buildChoose() {
  const m = state.matrix;
  const expect = Object.fromEntries(m.scenarios.map((s) => [s.name, s.expect]));
  $("#choose thead").replaceChildren(el("tr", {}, el("th", { text: t("choose.lock") }), ...chooseColumns().map(([title]) => el("th", { text: title }))));
  $("#choose tbody").replaceChildren(...chooseRows().map((v) => el("tr", {},
    el("th", { scope: "row", title: t("choose.rowTitle", { guard: vText(v, "guard"), flaw: vText(v, "flaw") }) + (v.lost_wakeup ? t("choose.lostWakeup", { what: v.lost_wakeup }) : "") },
      el("code", { text: v.name }), el("br"), el("small", { text: v.library || t("choose.ours") })),
    ...chooseColumns().map(([, from]) => {
      if (typeof from === "function") return el("td", { text: from(v) });
      const want = (expect[from] || {})[v.name];
      if (!want) return el("td", { className: "absent", text: "-", title: t("choose.noCell", { scenario: from, name: v.name }) });
      return el("td", { "data-cell": from + "/" + v.name, title: from }, el("span", { className: "expect", text: outcomeText(want) }), el("span", { className: "observed" }));
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
  if (state.view === "lessons" && !location.hash) goTo("/lab/lessons/" + v.name);
  for (const [j, b] of [...$("#lesson-tabs").children].entries()) {
    b.setAttribute("aria-selected", String(j === i));
    b.tabIndex = j === i ? 0 : -1;
  }
  $("#lesson").setAttribute("aria-labelledby", "lesson-tab-" + v.name);
  const l = v.lesson || {};
  const buttons = el("div", { className: "buttons" });
  const why = el("span", { className: "why" });
  if (l.run) {
    const b = el("button", { type: "button", className: "flaw", text: t("lesson.showRun", { locks: l.run.join(t("lesson.and")) }) });
    b.addEventListener("click", () => lessonRun(l.run));
    buttons.append(b);
  }
  if (l.scenario) {
    const flaw = el("button", { type: "button", className: "flaw", text: t("lesson.showFlaw", { scenario: l.scenario }) });
    flaw.dataset.cell = l.scenario + "/" + v.name;
    flaw.addEventListener("click", () => lessonCell(l.scenario, v.name));
    buttons.append(flaw);
    if (l.fix) {
      const fix = el("button", { type: "button", className: "fix", text: t("lesson.showFix", { scenario: l.fix }) });
      fix.dataset.cell = l.fix + "/" + v.name;
      fix.addEventListener("click", () => lessonCell(l.fix, v.name));
      buttons.append(fix);
    }
  }
  // Its stories in the step-through, one command at a time (steps.js).
  for (const k of Object.keys(presets).filter((k) => (presets[k].tabs || [presets[k].lock]).includes(v.name))) {
    buttons.append(el("a", { href: "#/lesson/" + k, className: "preset", text: t("lesson.stepThrough", { story: t(presets[k].title) }) }));
  }
  buttons.append(why, el("span", { id: "lesson-error", role: "alert" }));
  const facts = el("dl", {}, el("dt", { text: t("lesson.adds") }), el("dd", { text: vText(v, "fixes") }), el("dt", { text: t("lesson.stillWrong") }), el("dd", { text: vText(v, "flaw") }));
  if (v.not_copied) facts.append(el("dt", { text: t("lesson.notCopied") }), el("dd", { text: vText(v, "not_copied") }));
  const code = el("div", { className: "code" }, el("p", { className: "why", text: t("lesson.loadingCode") }));
  $("#lesson").replaceChildren(el("h3", { text: v.name + ": " + vText(v, "guard") }), facts, buttons, code);
  touch("matrix");
  try {
    state.code = state.code || {};
    const lesson = state.code[v.name] || (state.code[v.name] = await api("GET", "/lab/api/code/" + v.name));
    if (state.lesson !== v.name) return;
    code.replaceChildren(...lessonCode(v.name, lesson));
  } catch (err) { code.replaceChildren(el("p", { className: "why", text: t("lesson.codeFailed", { why: err.message }) })); }
}

// lessonCode draws a version's lesson code: the lines marked in its source
// as what makes it what it is (its acquire and its release), as a diff
// against the version it follows, each line with its place in its file;
// the whole files one click away.
function lessonCode(name, lesson) {
  const removed = lesson.diff.filter((d) => d.op === "-").length, added = lesson.diff.filter((d) => d.op === "+").length;
  const caption = !lesson.base
    ? t("code.first", { name })
    : removed + added === 0
      ? t("code.same", { base: lesson.base })
      : t("code.diff", { name, base: lesson.base, removed: t(removed === 1 ? "code.line" : "code.lines", { n: removed }), added: t(added === 1 ? "code.line" : "code.lines", { n: added }) });
  const diff = el("pre", { className: "diff", "aria-label": caption });
  let where = "";
  for (const d of lesson.diff) {
    if (d.path !== where) diff.append(el("span", { className: "file", text: (where = d.path) }));
    const line = el("span", { className: "line", "data-op": d.op, title: d.path + ":" + d.line },
      el("span", { className: "ln", text: String(d.line) }), el("span", { className: "op", text: d.op === "=" ? " " : d.op }), d.text);
    diff.append(line);
  }
  const files = el("details", { className: "files" }, el("summary", { text: t("code.files", { n: lesson.files.length }) }),
    ...lesson.files.map((f) => el("details", {}, el("summary", { text: t("code.file", { path: f.path, n: f.text.split("\n").length }) }),
      el("pre", {}, el("code", { text: f.text })))));
  return [el("p", { className: "why", text: caption }), diff, files];
}

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
  const m = state.matrix;
  return t("cells.blocked", { why: serverText(why, m.reasons), command: m.command });
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

// followCell keeps a cell's state from the feed's snapshot (no timeline)
// when it is later than the page's: a cell that ended while the page had no
// feed. The one the live panel shows is shown as it is now, and read whole
// for its timeline once it has ended.
function followCell(c) {
  const k = c.scenario + "/" + c.lock, known = state.cells && state.cells[k];
  if (!state.cells || (known && (known.rev || 0) >= (c.rev || 0))) return;
  state.cells[k] = c;
  touch("matrix");
  const shown = state.current && state.current.cell;
  if (!shown || shown.scenario + "/" + shown.lock !== k) return;
  showCell(c);
  if (c.status === "running") return;
  api("GET", "/lab/api/cells/" + encodeURIComponent(c.scenario) + "/" + encodeURIComponent(c.lock)).then((whole) => {
    if (state.current && state.current.cell === c && keepCell(whole)) showCell(whole);
  }).catch(showError);
}

// showCell puts a cell's sales and fault marks on the live timeline.
function showCell(c) {
  state.current = { id: t("cells.id", { scenario: c.scenario, lock: c.lock }), status: c.status, holds: c.holds || [], marks: c.marks || [],
    results: [], counts: [], cell: c, error: c.error };
  touch("run", "matrix");
}

// showError says what went wrong by the form, and by the lesson's buttons.
function showError(err) {
  for (const e of [$("#form-error"), $("#lesson-error")]) {
    if (e) { e.textContent = err.message || String(err); e.title = err.why || ""; }
  }
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
    if (state.view === "runs") goTo("/lab/runs/" + run.id);
  } catch (err) { showError(err); }
}

// openRun shows a run downloaded earlier (its JSON file) as if it had just
// ended: its timeline, verdicts and row, marked as opened from a file.
async function openRun(file) {
  if (!file) return;
  clearError();
  let run;
  try { run = JSON.parse(await file.text()); } catch (err) { throw new Error(t("runs.notJSON", { file: file.name, why: err.message })); }
  if (!run || typeof run.id !== "string" || !Array.isArray(run.results) || !Array.isArray(run.holds)) {
    throw new Error(t("runs.notRun", { file: file.name }));
  }
  adopt(Object.assign(run, { id: run.id + t("runs.fromFile"), file: file.name }));
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

// feedRetryMs is how long the page waits to open its live feed again
// after the lab refused it (429: too many streams from this address, some
// of them pages gone that the lab has not seen close yet; it says
// Retry-After: 5). EventSource gives up for good on any reply but 200, and
// a page with no feed would never hear how its run or cell ended.
const feedRetryMs = 5000;
let feed = null; // the live feed open now (none while the page is away)

function listen() {
  const es = new EventSource("/lab/api/events");
  feed = es;
  es.onerror = () => { // closed for good: opened again, unless the page has gone meanwhile
    if (es.readyState === EventSource.CLOSED) setTimeout(() => { if (feed === es) listen(); }, feedRetryMs);
  };
  es.addEventListener("snapshot", (e) => {
    const snap = JSON.parse(e.data);
    state.stack = snap.stack || [];
    for (const r of snap.runs || []) adoptQuiet(r);
    for (const c of snap.cells || []) followCell(c);
    if (snap.running) adopt(snap.running);
    else if (!state.current && state.runs.length) showLast(state.runs[state.runs.length - 1]);
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
    // Earlier holds a new one overlaps: the server's marks (the checker's).
    const newly = new Set(p.overlaps || []);
    if (newly.size) for (const h of r.holds) if (newly.has(h.id + h.lock)) h.overlaps = true;
    touch("run");
  });
  es.addEventListener("holds", (e) => {
    const p = JSON.parse(e.data);
    const r = runById(p.run);
    if (!r) return;
    r.holds = r.holds.filter((h) => h.lock !== p.lock).concat(p.holds || []);
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

// showLast shows the lab's last run in the live panel when the page opens
// on no run of its own: the feed's summary has no holds, so the whole run is
// read, and drawn unless the page has moved to another run meanwhile.
function showLast(last) {
  state.current = last;
  if (last.holds.length || last.status === "running") return;
  api("GET", "/lab/api/runs/" + encodeURIComponent(last.id)).then((run) => {
    if (state.current !== last || last.holds.length >= (run.holds || []).length) return;
    last.holds = run.holds;
    touch("run");
  }).catch(showError);
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

// frame draws what changed. The next frame is asked for first: a drawing
// that throws loses its frame, not every later one (the page would stop
// following the lab, its buttons frozen as they were).
function frame() {
  requestAnimationFrame(frame);
  const d = state.dirty;
  if (d.size) {
    state.dirty = new Set();
    if (d.has("stack")) drawStack();
    if (d.has("run")) drawRun();
    if (d.has("runs")) drawRuns();
    if (d.has("matrix")) drawMatrix();
    // Which wide tables have columns out of sight (their box says so).
    for (const w of document.querySelectorAll(".scroll-x")) w.dataset.more = String(w.scrollWidth > w.clientWidth + 1);
  }
}

function drawStack() {
  const ul = $("#stack");
  ul.replaceChildren(...state.stack.map((n) => {
    const s = n.settings || {};
    const what = n.kind === "replica"
      ? ["-lock " + (s.lock || "?"), "-wait " + (s.wait || "?"), s.fence === "true" ? "-fence" : "", "-work " + (s.work || "0"), "ttl " + (s.ttl || "?")].filter(Boolean).join(" ")
      : (n.addr || "");
    return el("li", { className: "node", "data-state": n.state, "data-name": n.name, title: n.detail || "" },
      el("b", { text: n.name }), el("span", { className: "state", text: has("state." + n.state) ? t("state." + n.state) : n.state }),
      el("small", { text: (has("kind." + n.kind) ? t("kind." + n.kind) : n.kind) + (what ? ": " + what : "") }));
  }));
}

function drawRun() {
  const r = state.current;
  const running = r && r.status === "running";
  $("#start").disabled = running;
  $("#stop").disabled = !running;
  const nemesis = r && r.settings && r.settings.nemesis ? t("live.nemesis", { seed: r.settings.seed }) + (r.faults ? t("live.faults", { n: r.faults.length }) : t("live.drawingFaults")) : "";
  const status = r && (has("status." + r.status) ? t("status." + r.status) : r.status);
  $("#run-status").textContent = r ? t("live.run", { id: r.id }) + " · " + status + (r.current ? " · " + r.current : "") + nemesis + (r.error && !r.cell ? t("live.stoppedOnError") : "") : "";
  const stock = r && r.settings ? r.settings.stock : 0;
  $("#gauges").replaceChildren(...((r && r.counts) || []).map((c) => {
    const left = c.remaining >= 0 ? c.remaining : stock;
    const bar = el("div", { className: "bar" }, el("span"));
    bar.firstChild.style.width = (stock > 0 ? (100 * left) / stock : 0) + "%";
    return el("div", { className: "gauge", "data-lock": c.lock },
      el("b", { text: t("live.gauge", { lock: c.lock, left, stock }) }), bar,
      el("div", { className: "counts", text: t("live.counts", c) }));
  }));
  drawTimeline(r);
  const cell = r && r.cell;
  // A fault the run or cell could not undo: the node, and the fix by hand.
  const fixes = (cell ? cell.fixes : r && r.fixes) || [];
  $("#fixes").hidden = fixes.length === 0;
  $("#fixes").replaceChildren(...fixes.map((f) => el("p", { className: "fix", "data-node": f.node },
    el("b", { text: t("live.notUndone", { node: f.node, left: f.left }) }), t("live.undoFailed", { why: f.why }),
    ...(f.how ? [t("live.fixByHand"), el("code", { text: f.how })] : []))));
  const words = new Set();
  for (const res of (r && r.results) || []) {
    words.add(word(res)).add("oversold").add("not served");
    if (res.history_checked) words.add("two holders").add("lost updates");
    if (res.linearizability) words.add("linearizable");
    if (res.fenced || (r.settings && r.settings.fence)) words.add("fenced");
  }
  drawGlossary(words);
  $("#verdicts").replaceChildren(...((r && r.results) || []).map(verdict),
    ...(cell && cell.status !== "running" ? [cellVerdict(cell)] : []),
    ...(r && r.error && !cell ? [record(t("live.whyStopped"), r.error)] : []));
}

// record is the raw record behind a sentence, one click away.
function record(title, text) {
  return el("details", { className: "record" }, el("summary", { text: title }), el("pre", { text }));
}

// cellOutcome is a cell's outcome in a word: running, could not run (it
// never started its fault), did not finish, as expected or not as expected.
function cellOutcome(c) {
  if (c.status === "running") return t("cells.running");
  if (c.status === "failed") return (c.reasons || []).some((r) => r.code.startsWith("couldNotRun")) ? t("cells.couldNotRun") : t("cells.didNotFinish");
  return c.ok ? t("cells.asExpected") : t("cells.notAsExpected");
}

// cellVerdict says in a sentence what a cell showed; what the scenario
// recorded (and, when it failed, the error) is one click away.
function cellVerdict(c) {
  const outcome = cellOutcome(c);
  const sentence = c.status === "failed" ? serverText(c.why, c.reasons) || t("cells.didNotFinishLong")
    : c.ok ? t("cells.ok", { scenario: c.scenario, lock: c.lock, observed: outcomeText(c.observed, c.reasons) })
      : t("cells.notOk", { scenario: c.scenario, lock: c.lock, observed: outcomeText(c.observed, c.reasons), expected: outcomeText(c.expected) });
  const rec = [c.detail, c.evidence, c.error].filter(Boolean).join("\n\n");
  return el("div", { className: "verdict", "data-word": c.status === "failed" ? "not tested" : c.ok ? "ok" : "violated", "data-cell": c.scenario + "/" + c.lock },
    el("span", { className: "word", text: outcome }), ...withCommand(sentence), rec ? record(t("cells.recorded"), rec) : null);
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

// glossary is a line for each word the verdicts use, shown where they are
// (a hover on the word, and the words of the verdicts shown listed under
// them), not a docs page away.
const glossary = { ok: "ok", violated: "violated", "not tested": "notTested", oversold: "oversold", "not served": "notServed",
  "two holders": "twoHolders", "lost updates": "lostUpdates", linearizable: "linearizable", fenced: "fenced" };

// term is a word of the verdicts with its line of the glossary on hover.
function term(word) {
  return el("abbr", { className: "term", title: t("glossary." + glossary[word]), text: t("word." + glossary[word]) });
}

// drawGlossary lists under the verdicts the words they use, a line each.
function drawGlossary(words) {
  const used = Object.keys(glossary).filter((w) => words.has(w));
  $("#glossary").hidden = used.length === 0;
  $("#glossary").replaceChildren(...used.flatMap((w) => [el("dt", { text: t("word." + glossary[w]) }), el("dd", { text: t("glossary." + glossary[w]) })]));
}

function verdict(res) {
  const w = word(res);
  // Each part: the word of the glossary it starts with (null: none), then
  // the rest of it.
  const parts = [[null, t("verdict.sold", { sold: res.sold, before: res.stock_before, after: res.stock_after })], ["oversold", " " + res.oversold],
    [null, t("verdict.failed", { n: res.failed || 0 })], ["not served", " " + t("verdict.ofRequests", { n: notServed(res), of: res.requests })]];
  if (res.faults) parts.push([null, t("verdict.faults", { n: res.faults })]); // only under the nemesis
  if (res.too_little) parts.push([null, t("verdict.tooLittle", { why: serverText(res.too_little, res.reasons) })]);
  if (res.history_checked) parts.push(["two holders", " " + res.two_holders], ["lost updates", " " + res.lost_updates]);
  if (res.linearizability) parts.push(["linearizable", t("verdict.colon") + (glossary[res.linearizability] ? t("word." + glossary[res.linearizability]) : res.linearizability)]);
  for (const why of [res.not_linearizable, res.untested, res.history_note]) if (why) parts.push([null, serverText(why, res.reasons)]);
  const kids = parts.flatMap(([k, p], i) => [i ? " · " : "", ...(k ? [term(k), p] : [p])]);
  return el("div", { className: "verdict", "data-word": w, "data-lock": res.lock },
    el("span", { className: "word", title: t("glossary." + glossary[w]), text: t("word." + glossary[w]) }), el("b", { text: (res.lock + " " + (res.wait || "")).trim() + t("verdict.colon") }), ...kids);
}

// serverText is a sentence the server wrote (English, with its numbers
// and request ids) in the page's language. The reply lists each such
// sentence among its reasons: its code (the catalogue's server.CODE) and
// the numbers and names put in it; a name that is itself a listed
// reason's text (a cell's why inside "Could not run: ...") is said too.
// Sentences joined by "; " are said one by one; one the reply does not
// list is shown as the server wrote it.
function serverText(text, reasons) {
  if (!text || i18n.lang === "en") return text;
  const by = new Map((reasons || []).map((r) => [r.text, r]));
  const say = (s) => {
    const r = by.get(s);
    if (!r || !has("server." + r.code)) return s;
    return t("server." + r.code, Object.fromEntries(Object.entries(r.params || {}).map(([k, v]) => [k, say(v)])));
  };
  return by.has(text) ? say(text) : text.split("; ").map(say).join(t("server.join"));
}

// markText is a fault's moment on the timeline in the page's language: its
// code and params (as a reason's), or its label as the server wrote it.
function markText(m) {
  if (i18n.lang === "en" || !m.code || !has("server." + m.code)) return m.label;
  return t("server." + m.code, m.params || {});
}

// marks are the holds the server marked as overlapping another owner's
// (the checker's definition of two holders) and the holds the checker named
// in a lost update: the page draws what it is given.
function marks(r) {
  const overlap = new Set(), lost = new Set();
  for (const h of r.holds) if (h.overlaps) overlap.add(h.id + h.lock);
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
  const left = 96, top = 22, laneH = Math.max(24, Math.min(80, (h - top - 20) / Math.max(1, lanes.length)));
  g.font = "12px system-ui, sans-serif";
  g.fillStyle = "#5b6673";
  lanes.forEach((name, i) => g.fillText(name, 6, top + i * laneH + laneH / 2 + 4));
  const { overlap, lost } = marks(r || { holds: [] });
  // The faults' moments: a cell's, or each version's under the nemesis.
  const faultMarks = (r && (r.marks || (r.results || []).flatMap((x) => x.marks || []))) || [];
  canvas.dataset.holds = holds.length;
  canvas.dataset.overlaps = overlap.size;
  canvas.dataset.lost = lost.size;
  // The marks' labels as drawn (none with no holds), for the browser test.
  canvas.dataset.markLabels = holds.length ? faultMarks.map(markText).join("\n") : "";
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
  drawAxis(g, X, t0, t1, left, width, h);
  // Where a hold outlived the lease, the moment its lease ran out: from
  // then on another sale could take the lock (once a lane, labelled).
  const ttl = leaseMicros();
  g.strokeStyle = "#b3261e"; g.lineWidth = 2;
  const told = new Set();
  let expiries = 0;
  const fixed = new Set(((state.config && state.config.versions) || []).filter((v) => v.lease === "fixed").map((v) => v.name));
  for (const x of ttl ? holds : []) {
    if (x.to - x.from <= ttl || !fixed.has(x.lock)) continue;
    const lane = lanes.indexOf(x.replica), ex = X(x.from + ttl), y = top + lane * laneH;
    g.beginPath(); g.moveTo(ex, y + 1); g.lineTo(ex, y + laneH - 1); g.stroke();
    expiries++;
    if (!told.has(lane)) {
      told.add(lane);
      const label = t("live.leaseRanOut"), lx = Math.min(ex + 3, w - g.measureText(label).width - 6);
      g.fillStyle = "#fff"; g.fillRect(lx - 2, y + 1, g.measureText(label).width + 4, 14);
      g.fillStyle = "#b3261e"; g.fillText(label, lx, y + 12);
    }
  }
  canvas.dataset.expiries = expiries;
  // Each version's stretch, labelled above the lanes: a run of several
  // versions runs them one after another.
  g.strokeStyle = "#5b6673"; g.lineWidth = 1;
  for (const [lock, hs] of Object.entries(Object.groupBy(holds, (x) => x.lock))) {
    const a = X(Math.min(...hs.map((x) => x.from))), b = Math.max(a + 2, X(Math.max(...hs.map((x) => x.to))));
    g.beginPath(); g.moveTo(a, 16); g.lineTo(a, 12); g.lineTo(b, 12); g.lineTo(b, 16); g.stroke();
    g.fillStyle = "#1d232b";
    g.fillText(lock, Math.max(a, Math.min((a + b) / 2 - g.measureText(lock).width / 2, w - 60)), 10);
  }
  // The faults' moments: a dashed line each, labelled.
  g.strokeStyle = "#1d232b"; g.lineWidth = 1; g.setLineDash([4, 3]);
  let labelY = top + 10;
  for (const m of faultMarks) {
    const x = X(new Date(m.at).getTime() * 1000);
    g.beginPath(); g.moveTo(x, top); g.lineTo(x, h - 16); g.stroke();
    g.fillStyle = "#1d232b";
    g.fillText(markText(m), Math.min(x + 3, w - 200), labelY);
    labelY = labelY > h - 40 ? top + 10 : labelY + 13;
  }
  g.setLineDash([]);
  canvas.dataset.marks = faultMarks.length;
}

// leaseMicros is the replicas' lease (their -ttl, as /healthz tells it) in
// microseconds, the holds' unit; 0 when no replica says.
function leaseMicros() {
  const r = state.stack.find((n) => n.kind === "replica" && n.settings && n.settings.ttl);
  let us = 0;
  for (const [, n, u] of ((r && r.settings.ttl) || "").matchAll(/([\d.]+)(h|ms|us|µs|ns|m|s)/g)) {
    us += Number(n) * { h: 3600e6, m: 60e6, s: 1e6, ms: 1e3, us: 1, "µs": 1, ns: 1e-3 }[u];
  }
  return us;
}

// drawAxis draws the time axis under the lanes: ticks at a round step
// (1, 2 or 5 times a power of ten, in ms), about one per 90 px, each
// labelled with the time since the first hold began.
function drawAxis(g, X, t0, t1, left, width, h) {
  const spanMs = (t1 - t0) / 1000, want = spanMs / Math.max(1, Math.floor(width / 90));
  const pow = 10 ** Math.floor(Math.log10(Math.max(want, 0.001)));
  const stepMs = [1, 2, 5, 10].map((m) => m * pow).find((s) => s >= want) || pow * 10;
  const unit = stepMs >= 1000 ? (v) => +(v / 1000).toFixed(3) + " s" : (v) => +v.toFixed(3) + " ms";
  g.strokeStyle = "#d5dbe2"; g.fillStyle = "#5b6673"; g.lineWidth = 1;
  g.beginPath(); g.moveTo(left, h - 15); g.lineTo(left + width, h - 15); g.stroke();
  let n = 0;
  for (let v = 0; v <= spanMs + 1e-9; v += stepMs, n++) {
    const x = X(t0 + v * 1000);
    g.beginPath(); g.moveTo(x, h - 15); g.lineTo(x, h - 11); g.stroke();
    const label = unit(v), lw = g.measureText(label).width;
    g.fillText(label, Math.min(Math.max(x - lw / 2, left), left + width - lw), h - 1);
  }
  g.canvas.dataset.ticks = n;
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
  const lines = [`${x.lock} · ${x.replica} · ${x.id}`, t("tip.held", { ms: ((x.to - x.from) / 1000).toFixed(2) }),
    x.read != null ? t("tip.read", { n: x.read }) : t("tip.readNothing"), x.wrote != null ? t("tip.wrote", { n: x.wrote }) : t("tip.wroteNothing"),
    t("tip.reply", { status: x.status + (x.code ? " " + x.code : "") }) + (x.token ? t("tip.token", { token: x.token }) : "")];
  if (hit[5]) lines.push(t("tip.twoHolders"));
  if (hit[6]) lines.push(t("tip.lost"));
  tip.textContent = lines.join("\n");
  tip.style.left = Math.min(px + 12, $("#timeline").clientWidth - 240) + "px";
  tip.style.top = py + 12 + "px";
  tip.hidden = false;
}

function drawMatrix() {
  const busy = state.current && state.current.status === "running";
  const blocked = cellsBlocked();
  const says = blocked ? blockedText(blocked) : "";
  $("#quick-run").disabled = busy;
  for (const b of document.querySelectorAll("#lesson .buttons button")) {
    const cell = Boolean(b.dataset.cell);
    b.disabled = busy || (cell && Boolean(blocked));
    b.title = cell ? says : "";
  }
  const why = $("#lesson .buttons .why");
  if (why) why.replaceChildren(...(document.querySelector("#lesson .buttons button[data-cell]") && blocked ? withCommand(says) : []));
  $("#faults-why").replaceChildren(...(blocked ? withCommand(says) : []));
  for (const f of document.querySelectorAll("#nemesis-field input")) f.disabled = Boolean(blocked);
  $("#nemesis-field").title = blocked ? t("run.nemesisBlocked", { why: says }) : $("#nemesis-field").dataset.title;
  if (!state.cells) return;
  $("#side-by-side").disabled = busy;
  for (const td of document.querySelectorAll("#choose td[data-cell]")) {
    const c = state.cells[td.dataset.cell];
    const obs = td.querySelector(".observed");
    obs.textContent = c && c.status === "done" ? (c.ok ? t("choose.seenOk") : t("choose.seenBad", { observed: outcomeText(c.observed, c.reasons) })) : "";
    obs.dataset.ok = c && c.status === "done" ? String(c.ok) : "";
  }
  for (const td of document.querySelectorAll("#matrix td[data-cell]")) {
    const c = state.cells[td.dataset.cell];
    const obs = td.querySelector(".observed");
    obs.textContent = c ? (c.status === "done" ? (c.ok ? "✓ " : "✗ ") + outcomeText(c.observed, c.reasons) : cellOutcome(c) + (c.status === "running" ? "..." : "")) : "";
    obs.dataset.ok = c && c.status === "done" ? String(c.ok) : "";
    obs.title = c ? (c.status === "failed" ? serverText(c.why, c.reasons) : c.detail) || "" : "";
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
        el("td", {}, r.file ? r.id : el("a", { href: "/lab/runs/" + r.id, text: r.id })), el("td", { text: res.lock }), el("td", { text: res.wait || "" }),
        el("td", { className: res.too_little ? "bad" : "", text: res.sold, title: res.too_little ? t("verdict.tooLittle", { why: serverText(res.too_little, res.reasons) }) : "" }),
        el("td", { className: bad(res.failed), text: res.failed || 0 }),
        el("td", { className: res.too_little ? "bad" : "", text: notServed(res) }),
        el("td", { className: bad(res.oversold), text: res.oversold }),
        el("td", { className: bad(res.two_holders), text: res.history_checked ? res.two_holders : "-" }),
        el("td", { className: bad(res.lost_updates), text: res.history_checked ? res.lost_updates : "-" }),
        el("td", { className: res.linearizability === "ok" ? "" : "bad", text: glossary[res.linearizability] ? t("word." + glossary[res.linearizability]) : res.linearizability || "-" }),
        el("td", { text: Math.round(res.sales_per_sec) }),
        el("td", { text: res.latency_ms ? res.latency_ms.p99.toFixed(1) : "-" }),
        el("td", {}, ...(r.file ? [el("span", { text: t("runs.openedFrom", { file: r.file }) })] : [
          el("a", { href: "/lab/api/runs/" + r.id + "/report", text: t("runs.report") }), " ",
          el("a", { href: "/lab/api/runs/" + r.id + "?download", text: "json" })]))));
    }
  }
  $("#runs tbody").replaceChildren(...rows);
}

init().catch((err) => showError(err));
