//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/redistest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// handStep is one line of a lane: a done step's command and reply.
type handStep struct{ Phase, Cmd, Reply string }

// byHand starts A and B on lock from the step-through's own controls (no
// story) and waits until both are stopped before their first step.
func (p stepPage) byHand(lock string) {
	p.t.Helper()
	waitFor(p.t, p.ctx, "the step-through's versions listed", `[...document.querySelectorAll("#steps-lock option")].some((o) => o.value === `+fmt.Sprintf("%q", lock)+`)`)
	p.eval(fmt.Sprintf(`document.querySelector("#steps-lock").value = %q, document.querySelector("#steps-start").click(), ""`, lock))
	waitFor(p.t, p.ctx, lock+": A and B started by hand, stopped",
		`document.querySelector("#steps-panel").dataset.started === "true" && document.querySelector("#steps-panel").dataset.busy === "false" && document.querySelector("#lane-A").dataset.state === "stopped" && document.querySelector("#lane-B").dataset.state === "stopped" && document.querySelector("#lane-A .who").textContent.includes(`+fmt.Sprintf("%q", lock)+`)`)
}

// press presses sale w's button (next or end) and waits until the page has
// its answer: w stopped again or done.
func (p stepPage) press(w, what string) []handStep {
	p.t.Helper()
	before := len(p.steps(w))
	waitFor(p.t, p.ctx, w+"'s "+what+" offered", `!document.querySelector("#lane-`+w+` .`+what+`").disabled`)
	p.eval(`document.querySelector("#lane-` + w + ` .` + what + `").click(), ""`)
	waitFor(p.t, p.ctx, w+"'s "+what+" taken",
		fmt.Sprintf(`document.querySelector("#steps-panel").dataset.busy === "false" && ["stopped", "done"].includes(document.querySelector("#lane-%s").dataset.state) && document.querySelectorAll("#lane-%s li.step:not([data-next])").length > %d`, w, w, before))
	return p.steps(w)
}

// steps are sale w's done steps as its lane shows them.
func (p stepPage) steps(w string) []handStep {
	p.t.Helper()
	var st []handStep
	js := `JSON.stringify([...document.querySelectorAll("#lane-` + w + ` li.step:not([data-next])")].map((li) => ({Phase: li.dataset.phase, Cmd: li.querySelector(".cmd").textContent, Reply: li.querySelector(".reply")?.textContent || ""})))`
	if err := json.Unmarshal([]byte(p.eval(js)), &st); err != nil {
		p.t.Fatal(err)
	}
	return st
}

// pending is the step sale w's lane shows next.
func (p stepPage) pending(w string) string {
	return p.eval(`document.querySelector("#lane-` + w + ` li.step[data-next] .cmd")?.textContent || ""`)
}

// last is the last done step of phase in steps.
func last(t *testing.T, steps []handStep, phase string) handStep {
	t.Helper()
	for i := len(steps) - 1; i >= 0; i-- {
		if steps[i].Phase == phase {
			return steps[i]
		}
	}
	t.Fatalf("no %s step in %+v", phase, steps)
	return handStep{}
}

func mustMatchT(t *testing.T, what, got, pattern string) []string {
	t.Helper()
	m := regexp.MustCompile("^" + pattern + "$").FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("%s is %q, want it to match %q", what, got, pattern)
	}
	return m
}

// TestLessonStepGates steps A and B by hand, on a stack started as make up
// starts it, through the etcd lock, the database locks (db, db-getlock)
// and the ZooKeeper lock, whose requests the gates show (issue 45: etcd's
// gRPC interceptors, database/sql's connector, the ZooKeeper recipe's call
// sites): each request is shown before it is sent and done with the
// server's reply, read back from etcd where it tells; a waiter that waits
// in its server is woken by the holder's release, stepped meanwhile.
func TestLessonStepGates(t *testing.T) {
	bin := clusterBin(t)
	port := redistest.FreePort(t)
	c := up(t, bin, port, t.TempDir())
	var eps []string
	for _, m := range c.State.Etcd {
		eps = append(eps, m.Addr)
	}
	ecli, err := clientv3.New(clientv3.Config{Endpoints: eps, Logger: zap.NewNop(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ecli.Close()
	etcdHas := func(suffix string) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := ecli.Get(ctx, "", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range resp.Kvs {
			if strings.HasSuffix(string(kv.Key), "/"+suffix) {
				return true
			}
		}
		return false
	}
	ctx, problems := browser(t)
	base := fmt.Sprintf("http://localhost:%d/", port)
	if err := navigate(ctx, base); err != nil {
		t.Fatal(err)
	}
	p := stepPage{t, ctx}

	// etcd: A takes the lock (its lease, its key in the mutex's queue), B
	// queues behind it, A sells and releases, B finds nobody before it.
	p.byHand("etcd")
	if got := p.pending("A"); got != "LeaseGrant ttl=10" {
		t.Fatalf("A's first step shown is %q, want LeaseGrant ttl=10 (the lesson's lease)", got)
	}
	aLease := mustMatchT(t, "A's grant", p.press("A", "next")[0].Reply, `lease ([0-9a-f]+) ttl=10`)[1]
	mustMatchT(t, "A's next step", p.pending("A"), `Txn if create_rev\((\S+/)`+aLease+`\) = 0 then Put .*`)
	if etcdHas(aLease) {
		t.Fatal("A is stopped before its Txn, yet etcd holds its key")
	}
	aTxn := p.press("A", "next")[1]
	mustMatchT(t, "A's Txn's reply", aTxn.Reply, `then: put at rev \d+; \[\S+/`+aLease+` created \d+\]`)
	if !etcdHas(aLease) {
		t.Fatal("A's Txn let go, yet etcd holds no key of A's lease")
	}
	bLease := mustMatchT(t, "B's grant", p.press("B", "next")[0].Reply, `lease ([0-9a-f]+) ttl=10`)[1]
	bTxn := p.press("B", "next")[1]
	mustMatchT(t, "B's Txn's reply (A's key first in the queue)", bTxn.Reply, `then: put at rev \d+; \[\S+/`+aLease+` created \d+\] of 2 keys`)
	mustMatchT(t, "B's next step", p.pending("B"), `Range \S+\* by create desc limit 1 created<=\d+`)
	// B finds A's key before its own and waits on its deletion (a watch:
	// no request to show), the page free to step A meanwhile.
	p.eval(`document.querySelector("#lane-B .next").click(), ""`)
	waitFor(t, ctx, "B waiting for A's key to go, A's buttons free",
		`document.querySelector("#lane-B").dataset.state === "running" && document.querySelectorAll("#lane-B li.step:not([data-next])").length === 3 && !document.querySelector("#lane-A .end").disabled`)
	mustMatchT(t, "B's Range's reply", p.steps("B")[2].Reply, `\[\S+/`+aLease+` created \d+\]`)
	a := p.press("A", "end")
	if rel := last(t, a, "release"); rel.Cmd != "LeaseRevoke "+aLease || rel.Reply != "OK" {
		t.Fatalf("A's last release step is %+v, want LeaseRevoke %s -> OK", rel, aLease)
	}
	if !strings.Contains(fmt.Sprint(a), "then: deleted 1") || etcdHas(aLease) {
		t.Fatalf("A's release: %+v; etcd holds A's key: %v", a, etcdHas(aLease))
	}
	waitFor(t, ctx, "B woken by A's release, stopped", `document.querySelector("#lane-B").dataset.state === "stopped"`)
	mustMatchT(t, "B's step once woken", p.pending("B"), `Range \S+\* by create desc limit 1 created<=\d+`)
	b := p.press("B", "next")
	if got := b[len(b)-1]; got.Reply != "(none)" {
		t.Fatalf("B, A gone, looked for a key before its own and found %q, want (none)", got.Reply)
	}
	mustMatchT(t, "B's next step", p.pending("B"), `Range \S+/`+bLease)
	b = p.press("B", "end")
	if p.lane("B") != "done" || !strings.Contains(p.eval(`document.querySelector("#lane-B .result").textContent`), "sold") || etcdHas(bLease) {
		t.Fatalf("B ended %s (%s), etcd holds its key: %v; steps %+v", p.lane("B"), p.eval(`document.querySelector("#lane-B .result").textContent`), etcdHas(bLease), b)
	}
	p.shots("etcd-by-hand")

	// db: A's INSERT takes the row; B's finds it held (0 rows) and polls;
	// A sells and its UPDATE frees the row; B's next INSERT takes it over.
	// One sale on db first, not stepped: a fresh stack's first makes the
	// lock's table (its INSERT fails, CREATE TABLE, INSERT again), a story
	// of its own that this one is not.
	res, err := http.Post(base+"sale?lock=db", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("a sale on db answered %d", res.StatusCode)
	}
	p.eval(`document.querySelector("#steps-reset").click(), ""`)
	waitFor(t, ctx, "reset", `document.querySelector("#steps-panel").dataset.started === "false"`)
	p.byHand("db")
	mustMatchT(t, "A's first step", p.pending("A"), `INSERT INTO locklab_locks \(name, owner, expires_at, token\) VALUES \('[^']+', '[^']+', UTC_TIMESTAMP\(6\) \+ INTERVAL 10000000 MICROSECOND, .*`)
	mustMatchT(t, "A's INSERT's reply", p.press("A", "next")[0].Reply, `1 row affected, last insert id \d+|2 rows affected, last insert id \d+`)
	if got := p.press("B", "next")[0].Reply; got != "0 rows affected" {
		t.Fatalf("B's INSERT while A holds answered %q, want 0 rows affected", got)
	}
	a = p.press("A", "end")
	mustMatchT(t, "A's release", last(t, a, "release").Cmd, `UPDATE locklab_locks SET owner = '', .* WHERE name = '[^']+' AND owner = '[^']+' AND .*`)
	if got := last(t, a, "release").Reply; got != "1 row affected" {
		t.Fatalf("A's release answered %q, want 1 row affected", got)
	}
	b = p.press("B", "next")
	mustMatchT(t, "B's INSERT once A released", b[len(b)-1].Reply, `2 rows affected, last insert id \d+`)
	p.press("B", "end")
	if p.lane("B") != "done" || !strings.Contains(p.eval(`document.querySelector("#lane-B .result").textContent`), "sold") {
		t.Fatalf("B ended %s: %s", p.lane("B"), p.eval(`document.querySelector("#lane-B .result").textContent`))
	}
	p.shots("db-by-hand")

	// db-getlock: B's GET_LOCK waits in the server while A holds, the page
	// free to step A; A's RELEASE_LOCK hands the lock to B's wait.
	p.eval(`document.querySelector("#steps-reset").click(), ""`)
	waitFor(t, ctx, "reset", `document.querySelector("#steps-panel").dataset.started === "false"`)
	p.byHand("db-getlock")
	mustMatchT(t, "A's connection id", p.press("A", "next")[0].Reply, `\d+`)
	a = p.press("A", "next")
	if got := a[1]; !strings.HasPrefix(got.Cmd, "SELECT GET_LOCK('locklab:") || got.Reply != "1" {
		t.Fatalf("A's GET_LOCK: %+v, want it answering 1", got)
	}
	p.press("B", "next")
	mustMatchT(t, "B's next step", p.pending("B"), `SELECT GET_LOCK\('locklab:[^']+', \d+(\.\d+)?\)`)
	p.eval(`document.querySelector("#lane-B .next").click(), ""`)
	waitFor(t, ctx, "B waiting in GET_LOCK, A's buttons free",
		`document.querySelector("#lane-B").dataset.state === "running" && document.querySelectorAll("#lane-B li.step:not([data-next])").length === 1 && !document.querySelector("#lane-A .end").disabled`)
	a = p.press("A", "end")
	if rel := last(t, a, "release"); !strings.HasPrefix(rel.Cmd, "SELECT RELEASE_LOCK('locklab:") || rel.Reply != "1" {
		t.Fatalf("A's release: %+v, want RELEASE_LOCK answering 1", rel)
	}
	waitFor(t, ctx, "B's GET_LOCK answered, B stopped", `document.querySelector("#lane-B").dataset.state === "stopped"`)
	if got := p.steps("B")[1]; !strings.HasPrefix(got.Cmd, "SELECT GET_LOCK(") || got.Reply != "1" {
		t.Fatalf("B's GET_LOCK once A released: %+v, want 1", got)
	}
	p.press("B", "end")
	if p.lane("B") != "done" || !strings.Contains(p.eval(`document.querySelector("#lane-B .result").textContent`), "sold") {
		t.Fatalf("B ended %s: %s", p.lane("B"), p.eval(`document.querySelector("#lane-B .result").textContent`))
	}

	// zk: A's node first in the queue; B's node behind it, B watching A's
	// node and waiting; A's delete wakes B, which reads the queue again.
	p.eval(`document.querySelector("#steps-reset").click(), ""`)
	waitFor(t, ctx, "reset", `document.querySelector("#steps-panel").dataset.started === "false"`)
	p.byHand("zk")
	mustMatchT(t, "A's first step", p.pending("A"), `create (/\S+)/[0-9a-f]+-lock- "[^"]+" ephemeral sequential`)
	aNode := mustMatchT(t, "A's create's reply", p.press("A", "next")[0].Reply, `/\S+/([0-9a-f]+-lock-\d{10})`)[1]
	if got := p.press("A", "next")[1]; !strings.HasPrefix(got.Cmd, "getChildren /") || got.Reply != "["+aNode+"]" {
		t.Fatalf("A's queue: %+v, want [%s]", got, aNode)
	}
	bNode := mustMatchT(t, "B's create's reply", p.press("B", "next")[0].Reply, `/\S+/([0-9a-f]+-lock-\d{10})`)[1]
	if got := p.press("B", "next")[1]; got.Reply != "["+aNode+", "+bNode+"]" {
		t.Fatalf("B's queue: %+v, want [%s, %s]", got, aNode, bNode)
	}
	mustMatchT(t, "B's next step", p.pending("B"), `exists /\S+/`+aNode+` watch`)
	p.eval(`document.querySelector("#lane-B .next").click(), ""`)
	waitFor(t, ctx, "B watching A's node, waiting, A's buttons free",
		`document.querySelector("#lane-B").dataset.state === "running" && document.querySelectorAll("#lane-B li.step:not([data-next])").length === 3 && !document.querySelector("#lane-A .end").disabled`)
	if got := p.steps("B")[2].Reply; got != "true, watched" {
		t.Fatalf("B's exists answered %q, want true, watched", got)
	}
	a = p.press("A", "end")
	if rel := last(t, a, "release"); !strings.HasPrefix(rel.Cmd, "delete /") || !strings.HasSuffix(rel.Cmd, aNode) || rel.Reply != "OK" {
		t.Fatalf("A's release: %+v, want the delete of %s answering OK", rel, aNode)
	}
	waitFor(t, ctx, "B woken by A's delete, stopped", `document.querySelector("#lane-B").dataset.state === "stopped"`)
	if got := p.pending("B"); !strings.HasPrefix(got, "getChildren /") {
		t.Fatalf("B woken stops before %q, want getChildren", got)
	}
	p.press("B", "end")
	if b := p.steps("B"); p.lane("B") != "done" || !strings.Contains(p.eval(`document.querySelector("#lane-B .result").textContent`), "sold") || b[3].Reply != "["+bNode+"]" {
		t.Fatalf("B ended %s (%s), its steps %+v", p.lane("B"), p.eval(`document.querySelector("#lane-B .result").textContent`), b)
	}
	p.shots("zk-by-hand")
	if p := problems(); len(p) > 0 {
		t.Fatalf("the page reported errors: %v", p)
	}
}
