// The step-through: two real sales, A on one replica and B on another,
// each stopped before every command it sends (the replica's step gate), and
// between them what the store holds now, read live. The page draws what the
// replicas answer; it computes no state of its own. A preset is data: a
// list of (sale, action) pairs with a caption each, played one click per
// step; its verdict is read from the replies the sales got.
"use strict";

// The stories. Each step: who ("A", "B"), do ("next": one step, "end": to
// the end, "crash": the sale dies where it stands, sending nothing more,
// not even its release; "wait": until the lock key is gone, the lease run
// out for real, or, with ms, that long at most), a caption, and mark:
// "flaw" or "fix" on the step it takes (the step the eye should land on;
// markAt: the last of that phase, as B's last try for the lock). Step 0 of
// each starts both sales (solo: A alone), stock 10. tabs: the lessons that
// link it (default: its lock's). A title, an intro and a caption are keys
// of the catalogues (static/i18n/*.json: story.NAME.title, story.NAME.N
// for step N, or a key shared by the stories that say the same thing): a new
// story adds its keys to en.json and zh.json.
const presets = {
  v2: {
    lock: "v2", fence: false, title: "story.v2.title",
    intro: "story.v2.intro",
    steps: [
      { who: "A", do: "next", caption: "story.readA10" },
      { who: "B", do: "next", caption: "story.v2.2", mark: "flaw" },
      { who: "A", do: "next", caption: "story.v2.3" },
      { who: "B", do: "next", caption: "story.v2.4" },
      { who: "A", do: "end", caption: "story.v2.5" },
      { who: "B", do: "end", caption: "story.v2.6" },
    ],
  },
  v4: {
    lock: "v4", fence: false, title: "story.v4.title",
    intro: "story.v4.intro",
    steps: [
      { who: "A", do: "next", caption: "story.takeA" },
      { who: "A", do: "next", caption: "story.readA10" },
      { who: "A", do: "next", caption: "story.checkA" },
      { who: "A", do: "wait", caption: "story.v4.4" },
      { who: "B", do: "next", caption: "story.expiredB", mark: "flaw" },
      { who: "B", do: "next", caption: "story.v4.6" },
      { who: "A", do: "next", caption: "story.v4.7" },
      { who: "A", do: "next", caption: "story.writeA9" },
      { who: "A", do: "end", caption: "story.v4.9", mark: "flaw" },
      { who: "B", do: "end", caption: "story.v4.10" },
    ],
  },
  v5: {
    lock: "v5", fence: false, title: "story.v5.title",
    intro: "story.v5.intro",
    steps: [
      { who: "A", do: "next", caption: "story.takeA" },
      { who: "A", do: "next", caption: "story.readA10" },
      { who: "A", do: "next", caption: "story.checkA" },
      { who: "A", do: "next", caption: "story.v5.4" },
      { who: "A", do: "next", caption: "story.v5.5" },
      { who: "A", do: "next", caption: "story.v5.6" },
      { who: "A", do: "wait", caption: "story.v5.7" },
      { who: "B", do: "next", caption: "story.expiredB", mark: "flaw" },
      { who: "A", do: "end", caption: "story.v5.9", mark: "flaw" },
      { who: "B", do: "end", caption: "story.v5.10" },
    ],
  },
  v6: {
    lock: "v6", fence: false, title: "story.v6.title",
    intro: "story.v6.intro",
    steps: null, // v4's, with the release marked as the fix
  },
  "v6-fence": {
    lock: "v6", fence: true, title: "story.v6-fence.title",
    intro: "story.v6-fence.intro",
    steps: null,
  },
};
// v3's crash and v4's fix, in the same order: A takes the lock and reads,
// then its sale dies; a lease's time passes; B asks for the lock.
const crashed = (lock) => [
  { who: "A", do: "next", caption: lock === "v3" ? "story.crash.takeV3"
    : "story.crash.takeV4" },
  { who: "A", do: "next", caption: "story.readA10" },
  { who: "A", do: "crash", caption: "story.crash.dies" },
  { who: "A", do: "wait", ms: 10000, caption: lock === "v3" ? "story.crash.waitV3"
    : "story.crash.waitV4" },
  lock === "v3"
    ? { who: "B", do: "next", mark: "flaw", caption: "story.crash.nilV3" }
    : { who: "B", do: "next", mark: "fix", caption: "story.crash.okV4" },
  lock === "v3"
    ? { who: "B", do: "end", mark: "flaw", markAt: "acquire", caption: "story.crash.giveUpV3" }
    : { who: "B", do: "end", caption: "story.crash.sellV4" },
];
presets.v3 = {
  lock: "v3", fence: false, title: "story.v3.title",
  intro: "story.v3.intro",
  steps: crashed("v3"),
};
presets["v3-fix"] = {
  lock: "v4", fence: false, tabs: ["v3", "v4"], title: "story.v3-fix.title",
  intro: "story.v3-fix.intro",
  steps: crashed("v4"),
};
// v6's nested acquisition and v7's fix: one sale, A, takes the lock twice,
// as the tutorial's v7 /sale does.
presets["v6-nested"] = {
  lock: "v6", fence: false, nested: true, solo: true, tabs: ["v6"], title: "story.v6-nested.title",
  intro: "story.v6-nested.intro",
  steps: [
    { who: "A", do: "next", caption: "story.takeA" },
    { who: "A", do: "next", mark: "flaw", caption: "story.v6-nested.2" },
    { who: "A", do: "end", caption: "story.v6-nested.3" },
  ],
};
presets.v7 = {
  lock: "v7", fence: false, nested: true, solo: true, tabs: ["v6", "v7"], title: "story.v7.title",
  intro: "story.v7.intro",
  steps: [
    { who: "A", do: "next", caption: "story.v7.1" },
    { who: "A", do: "next", mark: "fix", caption: "story.v7.2" },
    { who: "A", do: "end", caption: "story.v7.3" },
  ],
};
presets.v6.steps = presets.v4.steps.map((s, i) => i === 8
  ? { who: "A", do: "end", caption: "story.v6.9", mark: "fix" }
  : i === 9 ? { who: "B", do: "end", caption: "story.v6.10" } : s);
// The library people reach for is v6: bsm/redislock's Release is the same
// compare-and-delete script, and nothing renews its lease unless the caller
// calls Refresh. v4's order shows both.
presets.redislock = {
  lock: "redislock", fence: false, tabs: ["redislock"], title: "story.redislock.title",
  intro: "story.redislock.intro",
  steps: presets.v4.steps.map((s, i) => ({
    0: { who: "A", do: "next", caption: "story.redislock.1" },
    8: { who: "A", do: "end", caption: "story.redislock.9" },
    9: { who: "B", do: "end", mark: "flaw", caption: "story.redislock.10" },
  }[i] || s)),
};
presets["v6-fence"].steps = presets.v4.steps.map((s, i) => ({
  0: { who: "A", do: "next", caption: "story.v6-fence.1" },
  1: { who: "A", do: "next", caption: "story.v6-fence.2" },
  4: { who: "B", do: "next", caption: "story.v6-fence.5" },
  5: { who: "B", do: "next", caption: "story.v6-fence.6" },
  7: { who: "A", do: "next", caption: "story.v6-fence.8", mark: "fix" },
  8: { who: "A", do: "end", caption: "story.v6-fence.9" },
  9: { who: "B", do: "end", caption: "story.v6-fence.10" },
}[i] || s));

// v8's paused holder, and fencing's fix in the same order: A is paused
// ("pause": the whole sale frozen, its watchdog's renewals held at the
// gate, as a GC pause or SIGSTOP freezes a process) before its write, after
// its last check of its lease; "resume" wakes it. Time runs for real.
const paused = (fence) => [
  { who: "A", do: "next", caption: "story.v8.1" },
  { who: "A", do: "next", caption: "story.v8.2" },
  { who: "A", do: "next", caption: fence ? "story.v8-fence.3" : "story.v8.3" },
  { who: "A", do: "next", caption: "story.v8.4" },
  { who: "A", do: "next", caption: "story.v8.5" },
  { who: "A", do: "wait", ms: 4000, caption: "story.v8.6" },
  { who: "A", do: "pause", caption: "story.v8.7" },
  { who: "A", do: "wait", caption: "story.v8.8" },
  { who: "B", do: "next", mark: fence ? "" : "flaw", caption: fence ? "story.v8-fence.9" : "story.v8.9" },
  { who: "B", do: "next", caption: "story.v8.10" },
  { who: "B", do: "next", caption: fence ? "story.v8-fence.11" : "story.v8.11" },
  { who: "A", do: "resume", caption: "story.v8.12" },
  { who: "A", do: "next", mark: fence ? "fix" : "flaw", caption: fence ? "story.v8-fence.13" : "story.v8.13" },
  { who: "A", do: "end", caption: "story.v8.14" },
  { who: "B", do: "end", caption: fence ? "story.v8-fence.15" : "story.v8.15" },
];
presets.v8 = {
  lock: "v8", fence: false, tabs: ["v8"], title: "story.v8.title",
  intro: "story.v8.intro",
  steps: paused(false),
};
presets["v8-fence"] = {
  lock: "v8", fence: true, tabs: ["v8"], title: "story.v8-fence.title",
  intro: "story.v8-fence.intro",
  steps: paused(true),
};

const lanes = ["A", "B"];
const steps = { preset: null, at: 0, sales: {}, store: null, storeAt: 0, busy: false, timer: 0, marks: {}, waitFrom: 0 };

// initSteps builds the panel's controls, once the lab's config is known.
function initSteps() {
  const sel = $("#steps-lock");
  for (const v of state.config.versions) sel.append(el("option", { value: v.name, text: v.name }));
  sel.value = "v4";
  $("#steps-presets").replaceChildren(...Object.entries(presets).map(([k, p]) =>
    el("a", { href: "#/lesson/" + k, className: "preset", "data-preset": k, text: t(p.title) })));
  $("#steps-start").onclick = () => { // by hand: no story
    steps.preset = null;
    if (location.hash.startsWith("#/lesson/")) history.replaceState(null, "", location.pathname);
    startSales($("#steps-lock").value, $("#steps-fence").checked).catch(stepError);
  };
  $("#steps-reset").onclick = () => resetSales().catch(stepError);
  $("#preset-next").onclick = () => presetNext().catch(stepError);
  for (const w of lanes) {
    $("#lane-" + w + " .next").onclick = () => act(w, "next").catch(stepError);
    $("#lane-" + w + " .end").onclick = () => act(w, "end").catch(stepError);
  }
  window.addEventListener("hashchange", route);
  window.addEventListener("pagehide", () => { thawAll(true); startNodes(true); for (const w of lanes) cancelSale(w, true); });
  route();
  drawSteps();
}

// route shows the preset the address names (#/lesson/v4): a link
// reproduces the view; nothing starts until the first click.
function route() {
  const m = location.hash.match(/^#\/lesson\/([\w-]+)$/);
  if (!m || !presets[m[1]]) return;
  choosePreset(m[1]).catch(stepError);
  $("#steps-panel").scrollIntoView({ block: "start" });
}

async function choosePreset(name) {
  await resetSales();
  steps.preset = name;
  steps.at = 0;
  $("#steps-lock").value = presets[name].lock;
  $("#steps-fence").checked = presets[name].fence;
  drawSteps();
}

// salesOf are the lanes a story plays (A alone, or A and B).
function salesOf(p) { return p && p.solo ? ["A"] : lanes; }

function stepError(err) { $("#steps-error").textContent = err.message || String(err); }

function replicaOf(w) {
  const r = state.config.replicas || [];
  return w === "A" ? r[0] : r[1] || r[0];
}

// startSales starts A and B (or the story's sales), each stopped before its
// first step, the stock set to 10 first.
async function startSales(lock, fence, p) {
  $("#steps-error").textContent = "";
  await resetSales(true);
  const run = Math.random().toString(36).slice(2, 10);
  for (const w of salesOf(p)) {
    const body = { id: "lesson-" + run + "-" + w, lock, fence, nested: Boolean(p && p.nested) };
    if (w === "A") body.stock = 10;
    if (p && p.lease) body.lease = p.lease; // Redlock's story: A must outlast a reader's clicks
    const s = await api("POST", "/lab/api/lesson/" + encodeURIComponent(replicaOf(w)) + "/sale", body);
    steps.sales[w] = { id: body.id, replica: replicaOf(w), lock, fence, s };
  }
  tick();
}

// resetSales cancels both sales (each releases a lock it holds) and clears
// the lanes; keep keeps the chosen preset.
async function resetSales(keep) {
  await thawAll(); // a frozen replica answers nothing: thawed first (the lab's DELETE thaws it too)
  await startNodes(); // and a stopped node is started again (the lab's DELETE does so too)
  await Promise.all(lanes.map((w) => cancelSale(w)));
  steps.sales = {};
  steps.froze = "";
  steps.marks = {};
  if (!keep) steps.preset = null;
  steps.at = 0;
  drawSteps();
}

// cancelSale cancels sale w; a crashed one's lock, left in Redis, is
// removed by its replica then (if still its own).
async function cancelSale(w, leaving) {
  const s = steps.sales[w];
  if (!s || (s.s.state === "done" && !s.s.left)) return;
  const path = "/lab/api/lesson/" + encodeURIComponent(s.replica) + "/steps/" + encodeURIComponent(s.id);
  if (leaving) { fetch(path, { method: "DELETE", keepalive: true }); return; }
  s.s = await api("DELETE", path);
}

// act takes sale w's next step ("next"), or lets it run to its end.
async function act(w, what) {
  const s = steps.sales[w];
  if (!s) return;
  steps.busy = true;
  s.acts = (s.acts || 0) + 1; // a read sent by tick before this is stale
  drawSteps();
  try {
    const path = "/lab/api/lesson/" + encodeURIComponent(s.replica) + "/steps/" + encodeURIComponent(s.id) + "/" + what;
    s.s = await api("POST", path);
    // Until it stops again or ends (a wait for the lock, the business work).
    // By hand, the other lane stays free meanwhile (tick follows this one):
    // a waiter that waits in its server (etcd's watch, GET_LOCK) is woken
    // only by the holder's release, which the learner must be able to step.
    while (steps.preset && s.s.state === "running") {
      await new Promise((ok) => setTimeout(ok, 200));
      s.s = await api("GET", "/lab/api/lesson/" + encodeURIComponent(s.replica) + "/steps/" + encodeURIComponent(s.id));
    }
  } finally { steps.busy = false; }
  await readStore();
  drawSteps();
}

// presetNext plays the preset's next step: step 0 starts both sales.
async function presetNext() {
  const p = presets[steps.preset];
  if (!p) return;
  if (!steps.sales.A) {
    await startSales(p.lock, p.fence, p);
    steps.at = 0;
    drawSteps();
    return;
  }
  const st = p.steps[steps.at];
  if (!st) return;
  if (st.do === "wait") {
    if (waiting(st)) return; // the button is disabled until then
  } else if (st.do === "freeze" || st.do === "thaw") {
    await freezeLane(st.who, st.do);
  } else if (st.do === "stop" || st.do === "start" || st.do === "restart") {
    await nodeAct(st.node, st.do);
  } else if (st.do === "to") {
    const before = steps.sales[st.who].s.done.length;
    await takeLock(st.who);
    if (st.mark) steps.marks[st.who + ":" + markedStep(st, before)] = st.mark;
  } else {
    const before = steps.sales[st.who].s.done.length;
    await act(st.who, st.do);
    // A script's EVALSHA answered NOSCRIPT is sent again as EVAL by the
    // client: one step of the story, taken as one click.
    let d = steps.sales[st.who].s.done;
    while (st.do === "next" && d.length && /NOSCRIPT/.test(d[d.length - 1].reply) && steps.sales[st.who].s.state === "stopped") {
      await act(st.who, "next");
      d = steps.sales[st.who].s.done;
    }
    if (st.mark) steps.marks[st.who + ":" + markedStep(st, before)] = st.mark;
  }
  steps.at++;
  steps.waitFrom = Date.now();
  if (steps.at >= p.steps.length) { await thawAll(); await startNodes(); } // the story's end: nothing left frozen or stopped
  drawSteps();
}

// waiting says that a wait step is not over: the lock key is still there,
// and, with ms, less than that has passed since the step came up.
function waiting(st) {
  return Boolean(st && st.do === "wait" && storeLock() && !(st.ms && Date.now() - steps.waitFrom >= st.ms));
}

// markedStep is the step a marked preset step points at: the one it took,
// or, for a run to the end, its release's answer (the release is the
// lesson there: its last command, after an EVALSHA answered NOSCRIPT), or
// the last step of phase markAt.
function markedStep(st, before) {
  const d = steps.sales[st.who].s.done;
  if (st.markAt) {
    const i = d.findLastIndex((x, i) => i >= before && x.phase === st.markAt);
    if (i >= 0) return d[i].n;
  }
  if (st.do === "end") {
    const rel = d.findLastIndex((x, i) => i >= before && x.phase === "release");
    if (rel >= 0) return d[rel].n;
  }
  return d[d.length - 1].n;
}

// tick reads the sales and the store while a lesson is open: the lease
// runs out in real time, v8's watchdog renews in the background, and a
// sale nobody reads for 30 s is cancelled by its replica (the page left).
// A crashed sale whose lock is left is read too: its replica removes the
// lock once nobody reads it (the page gone).
function tick() {
  clearTimeout(steps.timer);
  const live = lanes.some((w) => steps.sales[w] && (steps.sales[w].s.state !== "done" || steps.sales[w].s.left));
  if (!steps.sales.A) return;
  Promise.all([readStore(), ...lanes.map(async (w) => {
    const s = steps.sales[w];
    if (!s || (s.s.state === "done" && !s.s.left) || steps.busy || s.frozen) return; // a frozen replica answers nothing
    const acts = s.acts;
    const st = await api("GET", "/lab/api/lesson/" + encodeURIComponent(s.replica) + "/steps/" + encodeURIComponent(s.id));
    // A step taken meanwhile answered a newer state: this read is older.
    if (s.acts === acts && !steps.busy) s.s = st;
  })]).catch(stepError).finally(() => {
    drawSteps();
    if (live) steps.timer = setTimeout(tick, 300);
  });
}

async function readStore() {
  const n = steps.storeReads = (steps.storeReads || 0) + 1;
  // A lock a lock service keeps is read with the store (queue.js draws it).
  const lock = steps.sales.A && steps.sales.A.lock;
  const st = await api("GET", "/lab/api/lesson/store" + (lock ? "?lock=" + encodeURIComponent(lock) : ""));
  if (n < (steps.storeShown || 0)) return; // a later read already answered
  steps.storeShown = n;
  steps.store = st;
  steps.storeAt = performance.now();
}

// storeLock is the lock's holder now: the Redis lock key, or the holding
// entry of the lock a lock service keeps (etcd's key, ZooKeeper's node,
// MariaDB's connection: queue.js draws the whole queue).
function storeLock() {
  if (!steps.store) return null;
  const q = steps.store.queue;
  if (!q) return steps.store.lock;
  const h = (q.entries || []).find((e) => e.holds);
  return h ? { key: h.key, owner: h.owner || h.conn || h.key, pttl_ms: h.pttl_ms == null ? -1 : h.pttl_ms } : null;
}

// ownerOf names the sale whose id is owner: the one whose lock commands
// carry it ("" when neither's do).
function ownerOf(owner) {
  if (!owner) return "";
  for (const w of lanes) {
    const s = steps.sales[w];
    // db-getlock's owner is its connection: its id, asked before GET_LOCK.
    if (s && s.s.done.concat(s.s.next ? [s.s.next] : []).some((d) => d.phase === "acquire" && (d.command.includes(owner) || /^SELECT CONNECTION_ID\(\)/.test(d.command) && d.reply === owner))) return w;
  }
  return "";
}

// judge reads what happened from the replies: each finding a plain
// sentence, bad or not.
function judge() {
  const played = lanes.filter((w) => steps.sales[w]);
  if (!played.length || played.some((w) => steps.sales[w].s.state !== "done")) return null;
  const out = [];
  const A = steps.sales.A.s, B = steps.sales.B && steps.sales.B.s;
  const ra = (A.result || {}).reply || {}, rb = B ? (B.result || {}).reply || {} : {};
  if (B && ra.sold && rb.sold && ra.remaining === rb.remaining) out.push({ bad: true, text: t("judge.soldTwice", { n: ra.remaining }) });
  // A crashed holder: what became of the other sale, and of its lock.
  for (const [x, y, X, Y] of B ? [[A, B, "A", "B"], [B, A, "B", "A"]] : []) {
    if (!x.crashed || !x.done.some(granted)) continue;
    const ry = (y.result || {}).reply || {};
    if (ry.code === "lock_timeout") out.push({ bad: true, text: t("judge.waitedCrashed", { X, Y, n: y.done.filter((d) => d.phase === "acquire").length }) });
    if (ry.sold) out.push({ bad: false, text: t("judge.afterLease", { X, Y }) });
    const lock = storeLock();
    if (lock && ownerOf(lock.owner) === X) out.push({ bad: true, text: t(lock.pttl_ms < 0 ? "judge.lockForever" : "judge.lockLeft", { X }) });
  }
  // A nested acquisition: waited on its own lock, or counted.
  for (const [x, X] of B ? [[A, "A"], [B, "B"]] : [[A, "A"]]) {
    const acq = x.done.filter((d) => d.phase === "acquire"), first = acq.findIndex(granted);
    const r = (x.result || {}).reply || {};
    if (first >= 0 && r.code === "lock_timeout" && !x.crashed) {
      out.push({ bad: true, text: t("judge.waitedSelf", { X, n: acq.length - first - 1 }) });
    }
    // v8 nests as v7 does: said in v7's story, not in a paused holder's.
    const pausedHolder = [A, B].some((y) => y && y.done.some(renewalRefused));
    if (acq.filter(granted).length >= 2 && r.sold && !pausedHolder) {
      out.push({ bad: false, text: t("judge.reentered", { X }) });
    }
  }
  for (const [x, y, X, Y] of B ? [[A, B, "A", "B"], [B, A, "B", "A"]] : []) {
    const got = y.done.filter((d) => d.phase === "acquire").pop();
    // A release's last command is its answer (an EVALSHA answered NOSCRIPT
    // is sent again as EVAL; v5's DEL follows its GET).
    // It counts when it was sent after the other took the lock and before
    // the other began to release: v5's GET may come before, its DEL after.
    const rels = x.done.filter((d) => d.phase === "release"), rel = rels[rels.length - 1];
    const yRel = y.done.find((d) => d.phase === "release");
    if (!got || !rel || !(got.end < rel.start) || (yRel && yRel.start < rel.start)) continue;
    // Only a lock the other took after this one's: a crashed holder's
    // lease ran out before the other took the lock and released its own.
    const mine = x.done.find(granted);
    if (((y.result || {}).reply || {}).code === "lock_timeout") continue; // the other never held it
    if (y.crashed || !mine || !(new Date(mine.end) < new Date(got.end))) continue;
    if (rel.reply === "1") out.push({ bad: true, text: t("judge.deleted", { X, Y }) });
    if (rel.reply === "0") out.push({ bad: false, text: t("judge.survived", { X, Y }) });
  }
  // A paused holder (v8): its watchdog, frozen with it, found on waking
  // that the lease had gone to the other.
  for (const [x, Y, X] of B ? [[A, "B", "A"], [B, "A", "B"]] : []) {
    const r = (x.result || {}).reply || {};
    if (!x.done.some(renewalRefused)) continue;
    out.push({ bad: Boolean(r.sold), text: t(r.sold ? "judge.pausedWrote" : "judge.pausedRefused", { X, Y }) });
  }
  judgeFrozen(out);
  judgeRedlock(out);
  for (const [r, X] of [[ra, "A"], [rb, "B"]]) {
    if (r.code === "fenced") out.push({ bad: false, text: t("judge.fenced", { X }) });
  }
  if (!out.length) out.push({ bad: false, text: t(B ? "judge.once" : "judge.soldOnce") });
  return out;
}

// renewalRefused says that d is v8's watchdog renewing a lease that was no
// longer its own (0); not a Redlock node's release answering 0 (a node
// names it: the key there is another's).
function renewalRefused(d) { return d.phase === "background" && d.reply === "0" && !d.node; }

// granted says that a lock command's reply granted it: OK (SET NX; "OK"
// from a script that returns SET's reply, as redislock's does), 1 (SETNX,
// a script, GET_LOCK), or a fencing token; not db-getlock's connection id,
// a number asked before its GET_LOCK.
function granted(d) { return d.phase === "acquire" && (d.reply === "OK" || d.reply === '"OK"' || /^[1-9][0-9]*$/.test(d.reply)) && !/^SELECT CONNECTION_ID\(\)/.test(d.command); }

// waited is the time from the first of these steps to the end of the last,
// in seconds.
function waited(ds) {
  if (!ds.length) return "0";
  return ((new Date(ds[ds.length - 1].end) - new Date(ds[0].start)) / 1000).toFixed(1);
}

function drawSteps() {
  const p = presets[steps.preset];
  const panel = $("#steps-panel");
  for (const a of document.querySelectorAll("#steps-presets .preset")) a.setAttribute("aria-current", String(a.dataset.preset === steps.preset));
  panel.dataset.preset = steps.preset || "";
  panel.dataset.at = String(steps.at);
  panel.dataset.started = String(Boolean(steps.sales.A));
  panel.dataset.busy = String(steps.busy);
  // The preset's caption and its one button.
  const st = p && steps.sales.A ? p.steps[steps.at] : null;
  const next = $("#preset-next");
  next.hidden = !p;
  if (p) {
    const wait = waiting(st);
    const noFreeze = Boolean(p.freeze) && !canFreeze(); // the Compose stack: no replica to SIGSTOP
    const noNodes = Boolean(p.nodes) && !canStopNodes(); // nor a Redis node to stop
    next.disabled = steps.busy || (Boolean(steps.sales.A) && !st) || wait || noFreeze || noNodes;
    next.textContent = noFreeze ? t("steps.noFreeze", { command: state.config.freeze ? state.config.freeze.command : "make up" })
      : noNodes ? t("steps.noNodes", { command: state.config.nodes ? state.config.nodes.command : "make up" })
      : !steps.sales.A ? t(p.solo ? "steps.startSolo" : "steps.startBoth")
      : !st ? t("steps.theEnd") : st.do === "wait" ? (wait ? (st.ms ? t("steps.waitingFor", { s: Math.ceil((st.ms - (Date.now() - steps.waitFrom)) / 1000) }) : t(p.session ? "steps.waitingSession" : "steps.waitingLease"))
        : storeLock() ? t("steps.nextPassed", { s: st.ms / 1000 }) : t(p.session ? "steps.nextSessionOut" : "steps.nextLeaseOut"))
      : t(st.do === "end" ? "steps.nextEnd" : st.do === "crash" ? "steps.nextCrash" : st.do === "pause" ? "steps.nextPause"
        : st.do === "resume" ? "steps.nextResume" : st.do === "freeze" ? "steps.nextFreeze" : st.do === "thaw" ? "steps.nextThaw"
          : st.do === "stop" ? "steps.nextNodeStop" : st.do === "start" ? "steps.nextNodeStart" : st.do === "restart" ? "steps.nextNodeRestart"
            : st.do === "to" ? "steps.nextTo" : "steps.nextStep", { who: st.who, node: "node" in st ? Object.values(nodeNames())[st.node] : "" });
    // The nodes a story stops are named as this stack names them.
    const names = p.nodes ? nodeNames() : undefined;
    $("#steps-caption").textContent = !steps.sales.A ? t(p.intro, names) : st ? t("steps.stepOf", { n: steps.at + 1, of: p.steps.length }) + t(st.caption, names)
      : t(p.steps[p.steps.length - 1].caption, names);
  } else $("#steps-caption").textContent = t("steps.pick");
  for (const w of lanes) drawLane(w);
  drawStore();
  const v = judge();
  const box = $("#steps-verdict");
  box.hidden = !v;
  if (v) {
    box.dataset.word = v.some((f) => f.bad) ? "violated" : "ok";
    box.replaceChildren(el("span", { className: "word", text: t(box.dataset.word === "violated" ? "steps.broken" : "steps.held") }),
      ...v.map((f) => el("p", { "data-bad": String(f.bad), text: f.text })));
  }
}

function drawLane(w) {
  const s = steps.sales[w];
  const lane = $("#lane-" + w);
  lane.dataset.state = s ? s.s.state : "";
  lane.dataset.paused = String(Boolean(s && s.s.paused));
  lane.dataset.frozen = String(Boolean(s && s.frozen));
  lane.querySelector(".who").textContent = s ? t("steps.on", { replica: s.replica }) + " · " + s.lock + (s.fence ? t("steps.fenced") : "") + " · " + t("steps.state." + (s.frozen ? "frozen" : s.s.paused ? "paused" : s.s.state)) : t("steps.notStarted");
  const list = lane.querySelector("ol");
  const items = s ? runs(s.s.done).map((g) => stepItem(g[0], g.map((d) => steps.marks[w + ":" + d.n]).find(Boolean), false, g)) : [];
  // What a paused sale's background goroutines wait to send (v8's watchdog).
  for (const h of (s && s.s.held) || []) {
    items.push(el("li", { className: "step", "data-phase": "background", "data-held": "true" },
      el("span", { className: "phase", text: "background" }), el("code", { className: "cmd", text: h.command }),
      el("span", { className: "reply", text: t("steps.heldPaused", { who: w }) })));
  }
  if (s && s.s.next) items.push(stepItem(s.s.next, "", true));
  if (s && s.s.state === "done" && s.s.crashed) {
    items.push(el("li", { className: "result", "data-sold": "false", "data-crashed": "true",
      text: t("steps.crashed") + (s.s.left ? t("steps.lockStays") : s.s.forgot === "1" ? t("steps.lockRemoved") : "") }));
  } else if (s && s.s.state === "done") {
    const r = s.s.result || {}, rep = r.reply || {};
    const said = rep.sold ? t("steps.sold", { n: rep.remaining }) + (rep.warning ? t(/not held/.test(rep.warning) ? "steps.notOwnAtRelease" : "steps.releaseFailed") : "")
      : t("steps.notSold", { why: has("code." + rep.code) ? t("code." + rep.code) : rep.code || (s.s.cancelled ? t("code.client_gone") : "?") });
    items.push(el("li", { className: "result", "data-sold": String(Boolean(rep.sold)), text: t("steps.answered", { status: r.status, said }) }));
  }
  list.replaceChildren(...items);
  const stopped = s && s.s.state === "stopped";
  lane.querySelector(".next").disabled = !stopped || steps.busy || s.s.paused || s.frozen;
  lane.querySelector(".end").disabled = !s || s.s.state === "done" || steps.busy || s.s.paused || s.frozen;
}

// runs groups the steps a waiter repeats (the same command to the same
// node, the same reply: B's SET NX answered nil every 20 ms) into one line
// each; Redlock's nodes, each sent the same SET, keep a line each.
function runs(done) {
  const out = [];
  for (const d of done) {
    const last = out[out.length - 1];
    if (last && last[0].phase === d.phase && last[0].node === d.node && last[0].command === d.command && last[0].reply === d.reply) last.push(d);
    else out.push([d]);
  }
  return out;
}

// stepItem is one line of a lane: step d, or a run of the same (group).
function stepItem(d, mark, pending, group) {
  const times = group ? group.length : 1;
  const li = el("li", { className: "step", "data-phase": d.phase || "", "data-mark": mark || "" },
    el("span", { className: "phase", text: d.phase && has("phase." + d.phase) ? t("phase." + d.phase) : d.phase || "" }),
    d.node ? el("span", { className: "on-node", text: d.node + ":" }) : null, el("code", { className: "cmd", text: stepText(d.command) }));
  if (d.node) li.dataset.node = d.node; // a Redlock node's command: which node it went to
  if (times > 1) li.dataset.times = String(times);
  if (pending) {
    li.dataset.next = "true";
    li.append(el("span", { className: "reply", text: t("steps.next") }));
  } else if (/^\(error\) NOSCRIPT/.test(d.reply)) { // go-redis sends the script itself next: not the story
    li.dataset.retry = "true";
    li.append(el("span", { className: "arrow", text: " -> " }), el("span", { className: "reply", title: d.reply, text: t("steps.noscript") }));
  } else li.append(el("span", { className: "arrow", text: " -> " }), el("code", { className: "reply", text: stepText(d.reply) }));
  if (times > 1) li.append(el("span", { className: "times", text: t("steps.times", { n: times, s: waited(group) }) }));
  return li;
}

// stepText is a step as the sale names it: a Redis command or reply as
// sent and received, or one of the sale's own steps (its check, its business
// work), said in the page's language.
const stepForms = [
  [/^check: stock (?<n>-?\d+) > 0$/, "step.check"], [/^yes: write (?<n>-?\d+)$/, "step.yes"], [/^no: sold out$/, "step.no"],
  [/^business work: (?<d>\S+)$/, "step.work"], [/^done$/, "step.done"],
  [/^Redlock: SET (?<key>\S+) (?<owner>\S+) NX, lease (?<lease>\S+), on each of (?<n>\d+) nodes, (?<q>\d+) to hold it$/, "step.redlock"],
];

function stepText(text) {
  for (const [re, key] of i18n.lang === "en" ? [] : stepForms) {
    const m = (text || "").match(re);
    if (m) return t(key, m.groups);
  }
  return text;
}

function drawStore() {
  const s = steps.store;
  const box = $("#store");
  if (!s) { box.replaceChildren(el("p", { className: "why", text: t("store.before") })); return; }
  const lock = s.lock;
  const who = lock ? ownerOf(lock.owner) : "";
  // Who holds it now: the Redis key's owner, or the holding entry of the
  // lock a lock service keeps (queueWho names it as its line does).
  const held = s.queue && (s.queue.entries || []).find((e) => e.holds);
  box.dataset.owner = s.queue ? (held ? queueWho(held) : "") : who;
  // ZooKeeper's node goes with its session, MariaDB's lock with its
  // connection: neither has a lease of its own to count down.
  const ttl = !lock ? "" : lock.type === "zk" ? t("store.session") : lock.type === "db-getlock" ? t("store.connection")
    : lock.pttl_ms < 0 ? t("store.noExpiry") : t("store.left", { s: (lock.pttl_ms / 1000).toFixed(1) });
  const own = { etcd: "store.noLockEtcd", zk: "store.noLockZk", "db-getlock": "store.noLockDb" }[(Object.values(steps.sales)[0] || {}).lock];
  const bar = el("div", { className: "bar" }, el("span"));
  bar.firstChild.style.width = lock && lock.pttl_ms > 0 ? Math.min(100, lock.pttl_ms / 100) + "%" : "0";
  box.replaceChildren(...[
    el("div", { className: "stock" }, el("small", { text: s.stock_key }), el("b", { text: s.stock == null ? t("store.noStock") : s.stock })),
    el("div", { className: "lock", "data-held": String(Boolean(lock)) },
      el("small", { text: t("store.lock") }),
      el("b", { text: lock ? t("store.heldBy", { who: who || t("store.another") }) : t(own || "store.noLock") }),
      lock ? el("code", { text: lock.owner.slice(0, 13) + "…" }) : null,
      // A hash lock (v7, v8): its field is the owner, its value the holds.
      lock && lock.type === "hash" ? el("span", { className: "count", "data-count": lock.count,
        text: t("store.hash", { who: who || t("store.owner"), n: lock.count }) + (lock.count > 1 ? t("store.nested", { n: lock.count }) : "") }) : null,
      lock ? el("span", { className: "ttl", text: ttl }) : null, lock && lock.pttl_ms > 0 ? bar : null),
    // The stock's newest fenced holder, read only by fenced sales: left by
    // an earlier fenced story, it means nothing to unfenced ones.
    s.fence && Object.values(steps.sales).some((x) => x && x.fence) ? el("div", { className: "fence" }, el("small", { text: t("store.newest") }),
      el("b", { text: t("store.token", { token: s.fence.token, who: ownerOf(s.fence.owner) || t("store.another") }) })) : null,
  ].filter(Boolean));
  if (s.queue) box.querySelector(".lock").replaceWith(queueBox(s.queue)); // etcd, ZooKeeper, MariaDB: not a Redis key
  if (s.nodes) box.querySelector(".lock").replaceWith(nodesBox(s.nodes)); // Redlock: the key on each of its nodes
}
