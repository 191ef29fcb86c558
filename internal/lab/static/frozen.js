// The frozen holder: the stories of the etcd, ZooKeeper and database
// families. Their lease is kept alive by the replica's client for all its
// sales (etcd's session keep-alives on one shared stream, ZooKeeper's
// pings), not through the sale's step gate: a sale stopped at a step keeps
// its lease for ever. So these stories freeze A's whole replica (SIGSTOP,
// through the lab: POST /lab/api/lesson/NAME/freeze), as a long GC pause
// would, and its lease runs out for real; "thaw" (SIGCONT) wakes it. A
// frozen replica is always thawed: by the story, its end, the reset, the
// page leaving, the lab's bound (25 s) and the lab stopping. Where the lab
// cannot signal a replica (the Compose stack) the stories are not offered.
"use strict";

// The steps: "to" steps the sale until it has taken its lock (its next step
// is no longer the acquire's, or it ended: a wait that gave up); "freeze"
// and "thaw" act on the sale's replica; "wait" ends when the lock is gone
// from its own store (etcd's key with its lease, ZooKeeper's node with its
// session), ms at most.
const frozenStory = (lock, fence) => {
  const k = "story." + lock + (fence ? "-fence" : "") + ".";
  const own = "story." + lock + ".";
  return [
    { who: "A", do: "to", caption: own + "1" },
    { who: "A", do: "next", caption: "story.readA10" },
    { who: "A", do: "next", caption: "story.checkA" },
    { who: "A", do: "next", caption: "story.frozen.work" },
    { who: "A", do: "freeze", caption: own + "5" },
    { who: "A", do: "wait", ms: lock === "zk" ? 24000 : 15000, caption: own + "6" },
    { who: "B", do: "to", mark: fence ? "" : "flaw", caption: own + "7" },
    { who: "B", do: "next", caption: fence ? k + "8" : "story.frozen.readB10" },
    { who: "A", do: "thaw", caption: "story.frozen.thaw" },
    { who: "A", do: "next", mark: fence ? "fix" : "flaw", caption: fence ? k + "10" : own + "10" },
    { who: "A", do: "end", caption: own + "11" },
    { who: "B", do: "end", caption: fence ? k + "12" : own + "12" },
  ];
};
presets.etcd = {
  lock: "etcd", fence: false, freeze: true, tabs: ["etcd"], title: "story.etcd.title",
  intro: "story.etcd.intro",
  steps: frozenStory("etcd", false),
};
presets["etcd-fence"] = {
  lock: "etcd", fence: true, freeze: true, tabs: ["etcd"], title: "story.etcd-fence.title",
  intro: "story.etcd-fence.intro",
  steps: frozenStory("etcd", true),
};
// ZooKeeper has no lease: its session expires (the wait's button says so).
presets.zk = {
  lock: "zk", fence: false, freeze: true, session: true, tabs: ["zk"], title: "story.zk.title",
  intro: "story.zk.intro",
  steps: frozenStory("zk", false),
};
// db-getlock has no lease: nothing runs out while A is frozen, and B waits
// in GET_LOCK until its deadline. No oversell: every other sale blocked.
presets["db-getlock"] = {
  lock: "db-getlock", fence: false, freeze: true, tabs: ["db-getlock"], title: "story.db-getlock.title",
  intro: "story.db-getlock.intro",
  steps: [
    { who: "A", do: "to", caption: "story.db-getlock.1" },
    { who: "A", do: "next", caption: "story.readA10" },
    { who: "A", do: "next", caption: "story.checkA" },
    { who: "A", do: "next", caption: "story.frozen.work" },
    { who: "A", do: "freeze", caption: "story.db-getlock.5" },
    { who: "B", do: "to", mark: "flaw", markAt: "acquire", caption: "story.db-getlock.6" },
    { who: "A", do: "thaw", caption: "story.frozen.thaw" },
    { who: "A", do: "end", caption: "story.db-getlock.8" },
  ],
};

// canFreeze says whether this lab can freeze a replica (the local cluster).
function canFreeze() { return Boolean(state.config.freeze && state.config.freeze.available); }

// freezeLane freezes ("freeze") or thaws ("thaw") sale w's replica.
async function freezeLane(w, what) {
  const s = steps.sales[w];
  if (!s) return;
  steps.busy = true;
  drawSteps();
  try {
    await api("POST", "/lab/api/lesson/" + encodeURIComponent(s.replica) + "/" + what);
    s.frozen = what === "freeze";
    if (s.frozen) steps.froze = w;
    if (!s.frozen) s.s = await api("GET", "/lab/api/lesson/" + encodeURIComponent(s.replica) + "/steps/" + encodeURIComponent(s.id));
  } finally { steps.busy = false; }
  await readStore();
  drawSteps();
}

// thawAll thaws every frozen lane's replica: the story's end, the reset;
// leaving, the request outlives the page.
async function thawAll(leaving) {
  for (const w of lanes) {
    const s = steps.sales[w];
    if (!s || !s.frozen) continue;
    const path = "/lab/api/lesson/" + encodeURIComponent(s.replica) + "/thaw";
    if (leaving) { fetch(path, { method: "POST", keepalive: true }); continue; }
    await api("POST", path);
    s.frozen = false;
  }
}

// takeLock steps sale w until it holds its lock (its next step is past the
// acquire) or has ended (a waiter that gave up at its deadline).
async function takeLock(w) {
  const s = steps.sales[w];
  do await act(w, "next");
  while (s.s.state === "stopped" && s.s.next && s.s.next.phase === "acquire");
}

// judgeFrozen is what the frozen holder's story found, read from the
// replies: two holders (the thawed one wrote), its write refused, or the
// other sale turned away while it was frozen (no lease: db-getlock).
function judgeFrozen(out) {
  const X = steps.froze, Y = X === "A" ? "B" : "A";
  if (!X || !steps.sales[Y]) return;
  const rx = (steps.sales[X].s.result || {}).reply || {}, ry = (steps.sales[Y].s.result || {}).reply || {};
  if (ry.code === "lock_timeout") out.push({ bad: true, text: t("judge.frozenBlocked", { X, Y }) });
  else if (rx.sold && ry.sold) out.push({ bad: true, text: t("judge.frozenWrote", { X, Y }) });
  else if (rx.code === "fenced") out.push({ bad: false, text: t("judge.frozenRefused", { X, Y }) });
}
