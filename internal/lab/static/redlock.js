// Redlock's story: a node restarts without the key. Redlock holds the lock
// on a majority of three independent Redis nodes; the local cluster runs
// them without persistence, so a node that crashes and starts again has
// forgotten every key. The story stops and starts the nodes only Redlock
// uses through the lab (POST /lab/api/lesson/nodes/NAME/stop|start|restart),
// as the redlock-restart cell does; every node it stopped is started again
// by the story, its end, the reset, the page leaving, the lab's bound (a
// minute) and the lab stopping. Where the lab cannot stop a node (the
// Compose stack) the stories are not offered. Each Redlock attempt is one
// step of its sale; each node's SET is shown under it with its node's name,
// and the store between the lanes reads the key on every node.
"use strict";

// The steps: "stop", "start" and "restart" (killed and started at once,
// empty) act on node (0: the first node only Redlock uses, "{b}" in the
// captions; 1: the second, "{c}"). A's lease is 30 s, not the lesson's 10:
// the story is not about time, and A must still hold its key on the
// stock's node when B asks, however long a reader takes over each step.
const restartStory = (delay) => [
  { who: "A", do: "stop", node: 1, caption: "story.redlock.1" },
  { who: "A", do: "next", caption: "story.redlock.2" },
  { who: "A", do: "next", caption: "story.readA10" },
  delay ? { who: "A", do: "stop", node: 0, caption: "story.redlock-delay.4" }
    : { who: "A", do: "restart", node: 0, caption: "story.redlock.4" },
  { who: "A", do: "start", node: 1, caption: "story.redlock.5" },
  delay ? { who: "B", do: "next", mark: "fix", caption: "story.redlock-delay.6" }
    : { who: "B", do: "next", mark: "flaw", caption: "story.redlock.6" },
  ...(delay ? [
    { who: "A", do: "end", caption: "story.redlock-delay.7" },
    { who: "A", do: "start", node: 0, caption: "story.redlock-delay.8" },
    { who: "B", do: "end", caption: "story.redlock-delay.9" },
  ] : [
    { who: "B", do: "next", caption: "story.redlock.7" },
    { who: "A", do: "end", caption: "story.redlock.8" },
    { who: "B", do: "end", mark: "flaw", markAt: "stock", caption: "story.redlock.9" },
  ]),
];
presets.redlock = {
  lock: "redlock", fence: false, nodes: true, lease: "30s", tabs: ["redlock"], title: "story.redlock.title",
  intro: "story.redlock.intro",
  steps: restartStory(false),
};
presets["redlock-delay"] = {
  lock: "redlock", fence: false, nodes: true, lease: "30s", tabs: ["redlock"], title: "story.redlock-delay.title",
  intro: "story.redlock-delay.intro",
  steps: restartStory(true),
};

// canStopNodes says whether this lab can stop a Redis node (the local
// cluster).
function canStopNodes() { return Boolean(state.config.nodes && state.config.nodes.available); }

// nodeNames are the names a story's captions give the nodes it stops.
function nodeNames() {
  const n = (state.config.nodes && state.config.nodes.names) || [];
  return { b: n[0] || "?", c: n[1] || "?" };
}

// nodeAct stops, starts or restarts the story's node i.
async function nodeAct(i, what) {
  const name = ((state.config.nodes && state.config.nodes.names) || [])[i];
  if (!name) throw new Error(t("steps.noNodes", { command: state.config.nodes ? state.config.nodes.command : "make up" }));
  steps.busy = true;
  drawSteps();
  try {
    const r = await api("POST", "/lab/api/lesson/nodes/" + encodeURIComponent(name) + "/" + what);
    steps.down = steps.down || {};
    if (r.down) steps.down[name] = true;
    else delete steps.down[name];
  } finally { steps.busy = false; }
  await readStore();
  drawSteps();
}

// startNodes starts again every node the story stopped: its end, the
// reset; leaving, the request outlives the page.
async function startNodes(leaving) {
  for (const name of Object.keys(steps.down || {})) {
    const path = "/lab/api/lesson/nodes/" + encodeURIComponent(name) + "/start";
    if (leaving) { fetch(path, { method: "POST", keepalive: true }); continue; }
    await api("POST", path);
    delete steps.down[name];
  }
}

// nodesBox draws the lock key on each of Redlock's nodes, read live: its
// holder and the time its key has left, "no key", or "down".
function nodesBox(nodes) {
  return el("div", { className: "nodes" }, el("small", { text: t("store.nodes") }),
    el("ol", {}, ...nodes.map((n) => {
      const who = n.lock ? ownerOf(n.lock.owner) : "";
      const li = el("li", { "data-node": n.node, "data-down": String(Boolean(n.down)), "data-owner": n.down ? "" : n.lock ? who || "other" : "" },
        el("b", { text: n.node }), " ",
        el("span", { text: n.down ? t("store.nodeDown") : !n.lock ? t("store.nodeEmpty")
          : t("store.nodeHeld", { who: who || t("store.another") }) + (n.lock.pttl_ms >= 0 ? " · " + t("store.left", { s: (n.lock.pttl_ms / 1000).toFixed(1) }) : "") }));
      if (n.down) li.title = n.down;
      return li;
    })));
}

// judgeRedlock is what Redlock's story found, read from the replies: B
// granted while A held its lock (two holders), or refused.
function judgeRedlock(out) {
  const A = steps.sales.A, B = steps.sales.B;
  if (!A || !B || A.lock !== "redlock") return;
  const attempts = (s) => s.s.done.filter((d) => d.phase === "acquire" && /^Redlock: /.test(d.command));
  const aGot = attempts(A).find((d) => d.reply === "OK");
  if (!aGot) return;
  const aEnd = A.s.done[A.s.done.length - 1].end;
  const bGot = attempts(B).find((d) => d.reply === "OK");
  if (bGot && bGot.end < aEnd) out.push({ bad: true, text: t("judge.redlockTwo", { X: "A", Y: "B" }) });
  else if (attempts(B).some((d) => d.reply === "(nil)" && d.end < aEnd)) out.push({ bad: false, text: t("judge.redlockRefused", { X: "A", Y: "B" }) });
}
