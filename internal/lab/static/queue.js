// The store panel's lock when a lock service keeps it (etcd, ZooKeeper,
// MariaDB): the replica reads it live (GET /store?lock=NAME, builder's
// Queues) and answers its entries, the holder first, then the waiters in
// the order they will be served. The page draws them, naming each A or B
// by what that sale's own steps were answered: etcd's lease (its
// LeaseGrant's reply), ZooKeeper's node (its create's reply) or the owner in
// its create, the row's owner, GET_LOCK's connection (its CONNECTION_ID()).
"use strict";

// queueWords are each lock service's heading and the line that says how
// its waiters wait.
const queueWords = {
  etcd: ["queue.etcd", "queue.etcdWhy"],
  zk: ["queue.zk", "queue.zkWhy"],
  db: ["queue.db", "queue.dbWhy"],
  "db-seed": ["queue.db", "queue.seedWhy"],
  "db-getlock": ["queue.getlock", "queue.getlockWhy"],
};

// queueWho names the sale an entry is: "A", "B", or "" (neither's).
function queueWho(e) {
  for (const w of lanes) {
    const s = steps.sales[w];
    if (!s) continue;
    const ds = s.s.done;
    if (e.lease && ds.some((d) => (d.reply || "").startsWith("lease " + e.lease + " "))) return w;
    if (e.conn && ds.some((d) => /^SELECT CONNECTION_ID\(\)/.test(d.command) && d.reply === e.conn)) return w;
    if (e.session && ds.some((d) => (d.reply || "").includes(e.key))) return w;
  }
  return e.owner ? ownerOf(e.owner) : "";
}

// queueBox is the lock's box in the store panel: its heading, then one
// line per entry (who, its key, what identifies it, its time left), then
// how its waiters wait.
function queueBox(q) {
  const [head, why] = queueWords[q.lock] || ["queue.etcd", ""];
  const items = (q.entries || []).map((e) => {
    const who = queueWho(e);
    const name = who || t("store.another");
    const role = e.holds ? t("queue.holds", { who: name }) : e.pttl_ms != null && !e.session && !e.lease ? t("queue.expired", { who: name }) : t("queue.waits", { who: name });
    const facts = [
      e.lease ? t("queue.lease", { lease: e.lease }) : "",
      e.session ? t("queue.session", { session: e.session }) : "",
      e.conn ? t("queue.conn", { conn: e.conn }) : "",
      e.revision ? t(q.lock === "zk" ? "queue.zxid" : "queue.rev", { rev: e.revision }) : "",
      e.waited_ms ? t("queue.waited", { s: (e.waited_ms / 1000).toFixed(1) }) : "",
    ].filter(Boolean).join(" · ");
    const li = el("li", { "data-who": who, "data-holds": String(Boolean(e.holds)) },
      el("b", { text: role }), el("code", { text: e.key }), facts ? el("span", { className: "facts", text: facts }) : null);
    if (e.pttl_ms != null) {
      li.append(el("span", { className: "ttl", text: t("store.left", { s: (e.pttl_ms / 1000).toFixed(e.pttl_ms % 1000 ? 1 : 0) }) }));
      const bar = el("div", { className: "bar" }, el("span"));
      bar.firstChild.style.width = Math.max(0, Math.min(100, e.pttl_ms / 100)) + "%";
      li.append(bar);
    }
    return li;
  });
  const held = items.length > 0;
  return el("div", { className: "lock queue", "data-held": String(held), "data-lock": q.lock },
    el("small", { text: t(head, { where: q.where }) }),
    held ? el("ol", {}, ...items) : el("b", { text: t("queue.free") }),
    why ? el("p", { className: "why", text: t(why) }) : null);
}
