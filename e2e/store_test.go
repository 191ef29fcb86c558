//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/locklab/locklab/internal/redistest"
)

// queueLine is one entry of the store panel's lock, as the page draws it.
type queueLine struct{ Who, Holds, Key, Text string }

// queue is the store panel's lock as the page draws it now.
func (p stepPage) queue() []queueLine {
	p.t.Helper()
	var q []queueLine
	js := `JSON.stringify([...document.querySelectorAll("#store .queue li")].map((li) => ({Who: li.dataset.who, Holds: li.dataset.holds, Key: li.querySelector("code").textContent, Text: li.textContent})))`
	if err := json.Unmarshal([]byte(p.eval(js)), &q); err != nil {
		p.t.Fatal(err)
	}
	return q
}

// panelShows waits, 30 s at most (the panel is read every 300 ms), until
// expr holds of the page.
func panelShows(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#store").innerText`))
		t.Fatalf("%s: %v\nthe store panel shows:\n%s", what, err, text)
	}
}

// TestLessonStorePanel steps A to hold the etcd lock and B to wait behind
// it, by hand on a stack started as make up starts it, and reads the store
// panel between the lanes (issue 45): etcd's keys under the lock's prefix,
// A's first and holding, its lease counting down, B's second and waiting,
// each key ending with the lease its sale's grant was answered; once A
// releases, B's alone and holding; once B releases, nobody.
func TestLessonStorePanel(t *testing.T) {
	bin := clusterBin(t)
	port := redistest.FreePort(t)
	up(t, bin, port, t.TempDir())
	ctx, problems := browser(t)
	if err := navigate(ctx, fmt.Sprintf("http://localhost:%d/", port)); err != nil {
		t.Fatal(err)
	}
	p := stepPage{t, ctx}

	p.byHand("etcd")
	panelShows(t, ctx, "etcd's lock, free", `document.querySelector("#store .queue[data-lock=etcd]")?.dataset.held === "false"`)
	aLease := mustMatchT(t, "A's grant", p.press("A", "next")[0].Reply, `lease ([0-9a-f]+) ttl=10`)[1]
	p.press("A", "next") // A's Txn: its key, first, holds
	bLease := mustMatchT(t, "B's grant", p.press("B", "next")[0].Reply, `lease ([0-9a-f]+) ttl=10`)[1]
	p.press("B", "next") // B's Txn: its key, behind A's
	// B looks for the key before its own (its Range), finds A's, and waits
	// on it (a watch: no request to show).
	p.eval(`document.querySelector("#lane-B .next").click(), ""`)
	waitFor(t, ctx, "B waiting for A's key to go", `document.querySelector("#lane-B").dataset.state === "running"`)

	panelShows(t, ctx, "A holding, B waiting", `document.querySelectorAll("#store .queue li").length === 2`)
	q := p.queue()
	if q[0].Who != "A" || q[0].Holds != "true" || !strings.HasSuffix(q[0].Key, "/"+aLease) || q[1].Who != "B" || q[1].Holds != "false" || !strings.HasSuffix(q[1].Key, "/"+bLease) {
		t.Fatalf("the store panel's queue is %+v, want A's key (lease %s) holding, then B's (lease %s) waiting", q, aLease, bLease)
	}
	// A's lease counts down, read live: whole seconds, 10 at its grant.
	left := func() string {
		return p.eval(`document.querySelector("#store .queue li[data-who=A] .ttl")?.textContent || ""`)
	}
	first := left()
	mustMatchT(t, "A's time left", first, `(10|[1-9]) s left`)
	panelShows(t, ctx, "A's lease counting down from "+first, `(document.querySelector("#store .queue li[data-who=A] .ttl")?.textContent || "") !== `+fmt.Sprintf("%q", first))
	p.shots("store-etcd")

	p.press("A", "end")
	panelShows(t, ctx, "B alone, holding, once A released", `(() => { const li = [...document.querySelectorAll("#store .queue li")]; return li.length === 1 && li[0].dataset.who === "B" && li[0].dataset.holds === "true"; })()`)
	waitFor(t, ctx, "B woken by A's release", `document.querySelector("#lane-B").dataset.state === "stopped"`)
	p.press("B", "end")
	panelShows(t, ctx, "nobody, once B released", `document.querySelector("#store .queue")?.dataset.held === "false"`)
	if p := problems(); len(p) > 0 {
		t.Fatalf("the page reported errors: %v", p)
	}
}
