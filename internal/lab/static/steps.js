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
// link it (default: its lock's).
const presets = {
  v2: {
    lock: "v2", fence: false, title: "v2: both read 10, both write 9",
    intro: "A and B are two buyers, each served by its own replica. v2 locks a mutex inside each process: the two replicas do not share it.",
    steps: [
      { who: "A", do: "next", caption: "A reads the stock: 10." },
      { who: "B", do: "next", caption: "B reads the stock too, at the same moment: 10. A's mutex lives in another process, so nothing held B back.", mark: "flaw" },
      { who: "A", do: "next", caption: "A checks: 10 is more than 0, so it will write 9." },
      { who: "B", do: "next", caption: "B checks the same 10: it will write 9 as well." },
      { who: "A", do: "end", caption: "A does its business work and writes 9: one unit sold." },
      { who: "B", do: "end", caption: "B writes 9 too: a second unit sold, but the stock went down by one." },
    ],
  },
  v4: {
    lock: "v4", fence: false, title: "v4: A's DEL deletes B's lock",
    intro: "v4 takes the lock with one command, SET NX with a lease (the lesson's is 10 s), and releases it with DEL.",
    steps: [
      { who: "A", do: "next", caption: "A takes the lock: the key now holds A's id, for 10 s." },
      { who: "A", do: "next", caption: "A reads the stock: 10." },
      { who: "A", do: "next", caption: "A checks: 10 is more than 0." },
      { who: "A", do: "wait", caption: "A's business work takes longer than the lease. Watch the lock's time run out between the lanes: nothing renews it." },
      { who: "B", do: "next", caption: "The lock has expired, so B takes it: the key now holds B's id.", mark: "flaw" },
      { who: "B", do: "next", caption: "B reads the stock: still 10, since A has not written yet." },
      { who: "A", do: "next", caption: "A's work ends. It does not know that its lease is gone." },
      { who: "A", do: "next", caption: "A writes 9." },
      { who: "A", do: "end", caption: "A releases with DEL, which deletes whatever the key holds: B's lock. B still works, unprotected.", mark: "flaw" },
      { who: "B", do: "end", caption: "B checks, writes 9 and releases: its DEL finds nothing left to delete." },
    ],
  },
  v5: {
    lock: "v5", fence: false, title: "v5: A's GET matches, then its DEL deletes B's lock",
    intro: "v5 releases only its own lock: it reads the key (GET), compares it with its id, and only then deletes it (DEL). Two commands, with time between them.",
    steps: [
      { who: "A", do: "next", caption: "A takes the lock: the key now holds A's id, for 10 s." },
      { who: "A", do: "next", caption: "A reads the stock: 10." },
      { who: "A", do: "next", caption: "A checks: 10 is more than 0." },
      { who: "A", do: "next", caption: "A does its business work." },
      { who: "A", do: "next", caption: "A writes 9: its unit is sold, inside its lease." },
      { who: "A", do: "next", caption: "A begins to release: it reads the key and finds its own id, so it decides to delete it." },
      { who: "A", do: "wait", caption: "Before A's DEL goes out, A stalls (a pause, a slow network). Watch the lease run out between the lanes." },
      { who: "B", do: "next", caption: "The lock has expired, so B takes it: the key now holds B's id.", mark: "flaw" },
      { who: "A", do: "end", caption: "A sends the DEL its GET decided on. It deletes whatever the key holds now: B's lock. The check and the delete were two commands.", mark: "flaw" },
      { who: "B", do: "end", caption: "B reads 9, writes 8 and releases: it worked without a lock since A's DEL." },
    ],
  },
  v6: {
    lock: "v6", fence: false, title: "v6 in v4's order: A's release returns 0",
    intro: "The same order as v4's story, against v6: its release is one script that deletes the key only if it still holds the caller's id.",
    steps: null, // v4's, with the release marked as the fix
  },
  "v6-fence": {
    lock: "v6", fence: true, title: "v6 with fencing: A's write refused",
    intro: "v4's order again, v6 with fencing: each holder gets a rising token, and the stock refuses a holder older than the newest it has seen.",
    steps: null,
  },
};
// v3's crash and v4's fix, in the same order: A takes the lock and reads,
// then its sale dies; a lease's time passes; B asks for the lock.
const crashed = (lock) => [
  { who: "A", do: "next", caption: lock === "v3" ? "A takes the lock with SET NX and no expiry (the tutorial's SETNX): the key now holds A's id, for good."
    : "A takes the lock with SET NX and a lease: the key now holds A's id, for 10 s." },
  { who: "A", do: "next", caption: "A reads the stock: 10." },
  { who: "A", do: "crash", caption: "A's sale dies here, holding the lock, before its write and before its release. Its replica stays up (a lesson on make up cannot kill one): only A's sale stops, and it sends nothing more, as a dead process would." },
  { who: "A", do: "wait", ms: 10000, caption: lock === "v3" ? "Let a lesson's lease, 10 s, go by. Watch the lock between the lanes: it has no expiry, and nobody is left to delete it."
    : "Wait: A is gone, but its lock has a lease. Watch it run out between the lanes: nothing renews it, nothing needs to delete it." },
  lock === "v3"
    ? { who: "B", do: "next", mark: "flaw", caption: "B asks for the lock: SET NX answers nil. The key still holds A's id, 10 s after A died." }
    : { who: "B", do: "next", mark: "fix", caption: "B asks for the lock: A's lease has run out, so SET NX answers OK. B holds the lock." },
  lock === "v3"
    ? { who: "B", do: "end", mark: "flaw", markAt: "acquire", caption: "B asks again every 20 ms, until its deadline (5 s in a lesson): it gives up and sells nothing. Every later sale would wait the same way." }
    : { who: "B", do: "end", caption: "B reads 10, writes 9 and releases: the unit is sold." },
];
presets.v3 = {
  lock: "v3", fence: false, title: "v3: A crashes holding the lock, B waits in vain",
  intro: "v3 takes the lock with SETNX, with no expiry, and releases it with DEL. Here A's sale dies while it holds the lock, as a process that crashes would.",
  steps: crashed("v3"),
};
presets["v3-fix"] = {
  lock: "v4", fence: false, tabs: ["v3", "v4"], title: "v4 in v3's order: A's lease runs out, B sells",
  intro: "v3's story again, against v4: its SET NX gives the lock a lease (the lesson's, 10 s), so a crashed holder's lock runs out by itself.",
  steps: crashed("v4"),
};
// v6's nested acquisition and v7's fix: one sale, A, takes the lock twice,
// as the tutorial's v7 /sale does.
presets["v6-nested"] = {
  lock: "v6", fence: false, nested: true, solo: true, tabs: ["v6"], title: "v6 nested: A waits on its own lock",
  intro: "The tutorial's v7 /sale takes the lock twice, nested (a locked function calling another that locks). One buyer, A, against v6: its SET NX cannot tell A's second call from another buyer's.",
  steps: [
    { who: "A", do: "next", caption: "A takes the lock: the key now holds A's id, for 10 s." },
    { who: "A", do: "next", mark: "flaw", caption: "A asks for the lock again, nested, with the same id. SET NX answers nil: the key is taken, by A itself." },
    { who: "A", do: "end", caption: "A keeps asking every 20 ms, waiting on itself, until its deadline (5 s in a lesson). It gives up, sells nothing, and releases its lock." },
  ],
};
presets.v7 = {
  lock: "v7", fence: false, nested: true, solo: true, tabs: ["v6", "v7"], title: "v7 nested: the lock counts A's second hold",
  intro: "v6's nested story against v7: the lock is a hash whose field is the owner's id and whose value counts its holds.",
  steps: [
    { who: "A", do: "next", caption: "A takes the lock: v7's script makes the key a hash, field A's id, count 1." },
    { who: "A", do: "next", mark: "fix", caption: "A asks again, nested: the script finds A's own field and counts 2. A holds the lock twice; nobody waits." },
    { who: "A", do: "end", caption: "A reads 10, writes 9, and releases twice: the count goes to 1, then to 0, and the key is deleted." },
  ],
};
presets.v6.steps = presets.v4.steps.map((s, i) => i === 8
  ? { who: "A", do: "end", caption: "A releases with the script: the key holds B's id, not A's, so it deletes nothing and answers 0. B's lock survives.", mark: "fix" }
  : i === 9 ? { who: "B", do: "end", caption: "B writes 9 and releases its own lock. The release is fixed; the write A made after its lease ran out is not." } : s);
presets["v6-fence"].steps = presets.v4.steps.map((s, i) => ({
  0: { who: "A", do: "next", caption: "A takes the lock and gets token 1." },
  1: { who: "A", do: "next", caption: "A reads the stock through the fenced script: 10. The stock notes token 1 as its newest holder." },
  4: { who: "B", do: "next", caption: "The lock has expired, so B takes it, with token 2." },
  5: { who: "B", do: "next", caption: "B reads the stock: 10. The stock now knows token 2." },
  7: { who: "A", do: "next", caption: "A tries to write 9 with token 1. The stock has seen token 2: it refuses the write.", mark: "fix" },
  8: { who: "A", do: "end", caption: "A gives up without selling and releases: the script finds B's id, deletes nothing, answers 0." },
  9: { who: "B", do: "end", caption: "B writes 9 and releases its lock: the unit is sold once." },
}[i] || s));

// v8's paused holder, and fencing's fix in the same order: A is paused
// ("pause": the whole sale frozen, its watchdog's renewals held at the
// gate, as a GC pause or SIGSTOP freezes a process) before its write, after
// its last check of its lease; "resume" wakes it. Time runs for real.
const paused = (fence) => [
  { who: "A", do: "next", caption: "A takes the lock: v8's script makes the key a hash holding A's id, for 10 s, and A's watchdog starts renewing it every 3.3 s." },
  { who: "A", do: "next", caption: "A takes it again, nested, as the tutorial's /sale does: the count goes to 2." },
  { who: "A", do: "next", caption: fence ? "A reads the stock through the fenced script: 10. The stock notes A's token as its newest holder." : "A reads the stock: 10." },
  { who: "A", do: "next", caption: "A checks: 10 is more than 0." },
  { who: "A", do: "next", caption: "A does its business work, then checks that its lease is still valid: it is. A is stopped before its write." },
  { who: "A", do: "wait", ms: 4000, caption: "A is stopped, but its watchdog is not: watch the lock's time between the lanes jump back up to 10 s at each renewal." },
  { who: "A", do: "pause", caption: "A's whole process freezes now, as a long GC pause or a SIGSTOP would: its watchdog runs inside it, so it freezes too. Its next renewal waits, unsent." },
  { who: "A", do: "wait", caption: "Nothing renews the lease any more. Watch it run out between the lanes, in real time." },
  { who: "B", do: "next", mark: fence ? "" : "flaw", caption: fence ? "The lock is free, so B takes it, with a higher token than A's." : "The lock is free, so B takes it: the key now holds B's id, while A, frozen, still believes it holds the lock." },
  { who: "B", do: "next", caption: "B takes it again, nested: the count goes to 2." },
  { who: "B", do: "next", caption: fence ? "B reads the stock: 10. The stock now knows B's token, newer than A's." : "B reads the stock: still 10, since A has not written." },
  { who: "A", do: "resume", caption: "A wakes up. The renewal its watchdog held since the freeze goes out now and finds B's lock: it answers 0, too late to stop the write A is about to make." },
  fence
    ? { who: "A", do: "next", mark: "fix", caption: "A tries to write 9 with its old token. The stock has seen B's newer one: it refuses the write." }
    : { who: "A", do: "next", mark: "flaw", caption: "A writes 9. It checked its lease before the freeze and does not check again: the write lands while B holds the lock." },
  { who: "A", do: "end", caption: "A releases: the script finds no hold of A's in the key and deletes nothing." },
  { who: "B", do: "end", caption: fence ? "B checks, writes 9 and releases its lock: the unit is sold once." : "B checks its 10, writes 9 and releases: a second unit sold, but the stock went down by one." },
];
presets.v8 = {
  lock: "v8", fence: false, tabs: ["v8"], title: "v8: a paused holder writes after B took the lock",
  intro: "v8 renews its lease with a watchdog for as long as its holder runs. Here A's whole process is paused, as a long GC pause or a SIGSTOP would pause it: the watchdog inside it stops too. The lesson's lease is 10 s, and time runs for real.",
  steps: paused(false),
};
presets["v8-fence"] = {
  lock: "v8", fence: true, tabs: ["v8"], title: "v8 with fencing: the paused holder's write refused",
  intro: "v8's paused holder again, with fencing: each holder gets a rising token, and the stock refuses a holder older than the newest it has seen.",
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
    el("a", { href: "#/lesson/" + k, className: "preset", "data-preset": k, text: p.title })));
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
  window.addEventListener("pagehide", () => { for (const w of lanes) cancelSale(w, true); });
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
    const s = await api("POST", "/lab/api/lesson/" + encodeURIComponent(replicaOf(w)) + "/sale", body);
    steps.sales[w] = { id: body.id, replica: replicaOf(w), lock, fence, s };
  }
  tick();
}

// resetSales cancels both sales (each releases a lock it holds) and clears
// the lanes; keep keeps the chosen preset.
async function resetSales(keep) {
  await Promise.all(lanes.map((w) => cancelSale(w)));
  steps.sales = {};
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
    if (!s || (s.s.state === "done" && !s.s.left) || steps.busy) return;
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
  const st = await api("GET", "/lab/api/lesson/store");
  if (n < (steps.storeShown || 0)) return; // a later read already answered
  steps.storeShown = n;
  steps.store = st;
  steps.storeAt = performance.now();
}

function storeLock() { return steps.store && steps.store.lock; }

// ownerOf names the sale whose id is owner: the one whose lock commands
// carry it ("" when neither's do).
function ownerOf(owner) {
  if (!owner) return "";
  for (const w of lanes) {
    const s = steps.sales[w];
    if (s && s.s.done.concat(s.s.next ? [s.s.next] : []).some((d) => d.phase === "acquire" && d.command.includes(owner))) return w;
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
  if (B && ra.sold && rb.sold && ra.remaining === rb.remaining) out.push({ bad: true, text: "One unit sold twice: both sales sold, and both left " + ra.remaining + " in stock." });
  // A crashed holder: what became of the other sale, and of its lock.
  for (const [x, y, X, Y] of B ? [[A, B, "A", "B"], [B, A, "B", "A"]] : []) {
    if (!x.crashed || !x.done.some(granted)) continue;
    const ry = (y.result || {}).reply || {};
    if (ry.code === "lock_timeout") out.push({ bad: true, text: Y + " sold nothing: it asked for the lock " + y.done.filter((d) => d.phase === "acquire").length + " times and gave up at its deadline, while " + X + ", crashed, still held it." });
    if (ry.sold) out.push({ bad: false, text: Y + " took the lock once " + X + "'s lease had run out, and sold: " + X + "'s crash held " + Y + " up only until then." });
    const lock = storeLock();
    if (lock && ownerOf(lock.owner) === X) out.push({ bad: true, text: X + "'s lock is still in Redis" + (lock.pttl_ms < 0 ? ", with no expiry: nobody is left to delete it, and every later sale would wait the same way." : ".") });
  }
  // A nested acquisition: waited on its own lock, or counted.
  for (const [x, X] of B ? [[A, "A"], [B, "B"]] : [[A, "A"]]) {
    const acq = x.done.filter((d) => d.phase === "acquire"), first = acq.findIndex(granted);
    const r = (x.result || {}).reply || {};
    if (first >= 0 && r.code === "lock_timeout" && !x.crashed) {
      out.push({ bad: true, text: X + " waited on its own lock: its nested acquisition found the key held by " + X + " itself, asked " + (acq.length - first - 1) + " times and gave up at its deadline. Nothing sold." });
    }
    // v8 nests as v7 does: said in v7's story, not in a paused holder's.
    const pausedHolder = [A, B].some((y) => y && y.done.some((d) => d.phase === "background" && d.reply === "0"));
    if (acq.filter(granted).length >= 2 && r.sold && !pausedHolder) {
      out.push({ bad: false, text: X + " took its own lock a second time, the lock counting it, and sold: the nested acquisition did not wait on itself." });
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
    if (y.crashed || !mine || !(new Date(mine.end) < new Date(got.end))) continue;
    if (rel.reply === "1") out.push({ bad: true, text: Y + "'s lock deleted by " + X + ": " + X + "'s release removed the key while " + Y + " still held it." });
    if (rel.reply === "0") out.push({ bad: false, text: X + "'s release answered 0: " + Y + "'s lock survived." });
  }
  // A paused holder (v8): its watchdog, frozen with it, found on waking
  // that the lease had gone to the other.
  for (const [x, Y, X] of B ? [[A, "B", "A"], [B, "A", "B"]] : []) {
    const r = (x.result || {}).reply || {};
    if (!x.done.some((d) => d.phase === "background" && d.reply === "0")) continue;
    if (r.sold) out.push({ bad: true, text: "Two holders: " + X + " was paused, its watchdog with it, its lease ran out and " + Y + " took the lock; " + X + " woke and wrote anyway, having checked its lease before the pause." });
    else out.push({ bad: false, text: X + " was paused, its watchdog with it, its lease ran out and " + Y + " took the lock; " + X + " woke, but its stale write did not land." });
  }
  for (const [r, X] of [[ra, "A"], [rb, "B"]]) {
    if (r.code === "fenced") out.push({ bad: false, text: X + "'s write was refused by the stock: a newer holder had touched it. Nothing was sold twice." });
  }
  if (!out.length) out.push({ bad: false, text: B ? "Each unit sold once: the lock kept the two sales apart." : "Sold once." });
  return out;
}

// granted says that a lock command's reply granted it: OK (SET NX), 1
// (SETNX, a script, GET_LOCK), or a fencing token; not db-getlock's
// connection id, a number asked before its GET_LOCK.
function granted(d) { return d.phase === "acquire" && (d.reply === "OK" || /^[1-9][0-9]*$/.test(d.reply)) && !/^SELECT CONNECTION_ID\(\)/.test(d.command); }

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
    next.disabled = steps.busy || (Boolean(steps.sales.A) && !st) || wait;
    next.textContent = !steps.sales.A ? (p.solo ? "Start: stock 10, A stopped before its first step" : "Start: stock 10, A and B stopped before their first step")
      : !st ? "The end" : st.do === "wait" ? (wait ? (st.ms ? "Waiting: " + Math.ceil((st.ms - (Date.now() - steps.waitFrom)) / 1000) + " s to go..." : "Waiting for the lease to run out...")
        : storeLock() ? "Next: " + st.ms / 1000 + " s have passed" : "Next: the lease has run out")
      : "Next: " + st.who + (st.do === "end" ? " to the end" : st.do === "crash" ? "'s sale crashes" : st.do === "pause" ? " is paused"
        : st.do === "resume" ? " resumes" : "'s next step");
    $("#steps-caption").textContent = !steps.sales.A ? p.intro : st ? (steps.at + 1) + " of " + p.steps.length + ". " + st.caption
      : p.steps[p.steps.length - 1].caption;
  } else $("#steps-caption").textContent = "Pick a story above, or a version below and start A and B, then step them by hand.";
  for (const w of lanes) drawLane(w);
  drawStore();
  const v = judge();
  const box = $("#steps-verdict");
  box.hidden = !v;
  if (v) {
    box.dataset.word = v.some((f) => f.bad) ? "violated" : "ok";
    box.replaceChildren(el("span", { className: "word", text: box.dataset.word === "violated" ? "broken" : "held" }),
      ...v.map((f) => el("p", { "data-bad": String(f.bad), text: f.text })));
  }
}

function drawLane(w) {
  const s = steps.sales[w];
  const lane = $("#lane-" + w);
  lane.dataset.state = s ? s.s.state : "";
  lane.dataset.paused = String(Boolean(s && s.s.paused));
  lane.querySelector(".who").textContent = s ? "on " + s.replica + " · " + s.lock + (s.fence ? " fenced" : "") + " · " + (s.s.paused ? "paused" : s.s.state) : "not started";
  const list = lane.querySelector("ol");
  const items = s ? runs(s.s.done).map((g) => stepItem(g[0], g.map((d) => steps.marks[w + ":" + d.n]).find(Boolean), false, g)) : [];
  // What a paused sale's background goroutines wait to send (v8's watchdog).
  for (const h of (s && s.s.held) || []) {
    items.push(el("li", { className: "step", "data-phase": "background", "data-held": "true" },
      el("span", { className: "phase", text: "background" }), el("code", { className: "cmd", text: h.command }),
      el("span", { className: "reply", text: "held: " + w + " is paused" })));
  }
  if (s && s.s.next) items.push(stepItem(s.s.next, "", true));
  if (s && s.s.state === "done" && s.s.crashed) {
    items.push(el("li", { className: "result", "data-sold": "false", "data-crashed": "true",
      text: "crashed: it sent nothing more, not even its release" + (s.s.left ? "; its lock stays in Redis until the reset" : s.s.forgot === "1" ? "; its lock was removed at the reset" : "") }));
  } else if (s && s.s.state === "done") {
    const r = s.s.result || {}, rep = r.reply || {};
    const said = rep.sold ? "sold, " + rep.remaining + " left" + (rep.warning ? (/not held/.test(rep.warning) ? "; its lock was no longer its own at release" : "; releasing its lock failed") : "")
      : "not sold: " + (words[rep.code] || rep.code || (s.s.cancelled ? "stopped by the reset" : "?"));
    items.push(el("li", { className: "result", "data-sold": String(Boolean(rep.sold)), text: "answered " + r.status + ", " + said }));
  }
  list.replaceChildren(...items);
  const stopped = s && s.s.state === "stopped";
  lane.querySelector(".next").disabled = !stopped || steps.busy || s.s.paused;
  lane.querySelector(".end").disabled = !s || s.s.state === "done" || steps.busy || s.s.paused;
}

// words are the result codes a lesson can end on, in plain words.
const words = { fenced: "the stock refused its write (fenced)", sold_out: "sold out", lock_timeout: "it gave up waiting for the lock",
  client_gone: "stopped by the reset", lease_lost: "it knew its lock was lost" };

// runs groups the steps a waiter repeats (the same command, the same reply:
// B's SET NX answered nil every 20 ms) into one line each.
function runs(done) {
  const out = [];
  for (const d of done) {
    const last = out[out.length - 1];
    if (last && last[0].phase === d.phase && last[0].command === d.command && last[0].reply === d.reply) last.push(d);
    else out.push([d]);
  }
  return out;
}

// stepItem is one line of a lane: step d, or a run of the same (group).
function stepItem(d, mark, pending, group) {
  const times = group ? group.length : 1;
  const li = el("li", { className: "step", "data-phase": d.phase || "", "data-mark": mark || "" },
    el("span", { className: "phase", text: d.phase || "" }), el("code", { className: "cmd", text: d.command }));
  if (times > 1) li.dataset.times = String(times);
  if (pending) {
    li.dataset.next = "true";
    li.append(el("span", { className: "reply", text: "next" }));
  } else if (/^\(error\) NOSCRIPT/.test(d.reply)) { // go-redis sends the script itself next: not the story
    li.dataset.retry = "true";
    li.append(el("span", { className: "arrow", text: " -> " }), el("span", { className: "reply", title: d.reply, text: "script not loaded yet: sent again as EVAL" }));
  } else li.append(el("span", { className: "arrow", text: " -> " }), el("code", { className: "reply", text: d.reply }));
  if (times > 1) li.append(el("span", { className: "times", text: " ×" + times + " in " + waited(group) + " s" }));
  return li;
}

function drawStore() {
  const s = steps.store;
  const box = $("#store");
  if (!s) { box.replaceChildren(el("p", { className: "why", text: "read live once A and B start" })); return; }
  const lock = s.lock;
  const who = lock ? ownerOf(lock.owner) : "";
  box.dataset.owner = who;
  const ttl = lock ? (lock.pttl_ms < 0 ? "no expiry" : (lock.pttl_ms / 1000).toFixed(1) + " s left") : "";
  const bar = el("div", { className: "bar" }, el("span"));
  bar.firstChild.style.width = lock && lock.pttl_ms > 0 ? Math.min(100, lock.pttl_ms / 100) + "%" : "0";
  box.replaceChildren(...[
    el("div", { className: "stock" }, el("small", { text: s.stock_key }), el("b", { text: s.stock == null ? "no stock key" : s.stock })),
    el("div", { className: "lock", "data-held": String(Boolean(lock)) },
      el("small", { text: "the lock" }),
      el("b", { text: lock ? "held by " + (who || "another sale") : "no lock key in Redis" }),
      lock ? el("code", { text: lock.owner.slice(0, 13) + "…" }) : null,
      // A hash lock (v7, v8): its field is the owner, its value the holds.
      lock && lock.type === "hash" ? el("span", { className: "count", "data-count": lock.count,
        text: "a hash: field " + (who || "owner") + "'s id, count " + lock.count + (lock.count > 1 ? " (held " + lock.count + " times, nested)" : "") }) : null,
      lock ? el("span", { className: "ttl", text: ttl }) : null, lock && lock.pttl_ms > 0 ? bar : null),
    s.fence ? el("div", { className: "fence" }, el("small", { text: "the stock's newest holder" }),
      el("b", { text: "token " + s.fence.token + " (" + (ownerOf(s.fence.owner) || "another sale") + ")" })) : null,
  ].filter(Boolean));
}
