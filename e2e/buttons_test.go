//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/locklab/locklab/internal/redistest"
)

// buttonsPage is the lab's page, open on a stack started as make up starts
// it, pressed button by button.
type buttonsPage struct {
	t        *testing.T
	ctx      context.Context
	problems func() []string // the console's errors and uncaught exceptions
	requests func() []string // the requests that failed
	pressed  []string
	seen     [2]int // problems and failed requests already reported
}

// findButtons is the page's buttons in scope, each as a selector that finds
// it again and its label: taken from the DOM, so a new button is pressed
// without a change here. Links that act as buttons (a story's) count.
const findButtons = `((scope) => {
	const path = (e) => e.id ? "#" + CSS.escape(e.id) : path(e.parentElement) + " > " + e.localName + ":nth-child(" + ([...e.parentElement.children].indexOf(e) + 1) + ")";
	return [...document.querySelectorAll(scope)].filter((b) => b.offsetParent !== null || b.closest("#matrix")).map((b) => ({
		sel: path(b), label: b.textContent.trim(), disabled: Boolean(b.disabled), title: b.title || "", cell: Boolean(b.dataset.cell || b.closest("#matrix")),
	}));
})`

// quiet is true when nothing the page started is still going: no request
// in flight (counted, see countFetches), no step of the step-through
// being taken and no stepped sale on its way to its next stop (a sale just
// started runs to its first), no run or cell running.
const quiet = `window.__inflight === 0 && !steps.busy && ![...document.querySelectorAll(".lane")].some((l) => l.dataset.state === "running") &&
	!(state.current && state.current.status === "running") &&
	!document.querySelector("#start").disabled && ![...document.querySelectorAll("#matrix .observed")].some((o) => o.textContent.includes("running"))`

// countFetches counts the page's requests in flight (window.__inflight):
// each call of its api() until the reply is read and parsed (a fetch alone
// resolves with the headers, and the page acts on the body after: a window
// in which nothing would seem to be going), and any fetch of its own.
const countFetches = `(() => {
	if (window.__inflight === undefined) {
		window.__inflight = 0;
		const count = (f) => (...a) => { window.__inflight++; return f(...a).finally(() => window.__inflight--); };
		window.fetch = count(window.fetch.bind(window));
		window.api = count(window.api);
	}
	return true;
})()`

// pageErrors is what the page shows of an error now: the error lines by the
// lessons, the form and the step-through; a run that stopped on an error, or
// that left requests not served (a library's known lost wake-up aside); a
// cell that did not run; a fault not undone; a stepped sale answered 5xx
// (but the lock timeout, a sale's own answer);
// anything still running.
const pageErrors = `(() => {
	const out = [];
	for (const id of ["#form-error", "#lesson-error", "#steps-error"]) {
		const e = document.querySelector(id);
		if (e && e.textContent.trim()) out.push(id + ": " + e.textContent.trim());
	}
	const r = state.current;
	if (r && r.status === "running") out.push("still running: " + r.id);
	if (r && r.status && r.status !== "running" && r.status !== "done") out.push(r.id + " ended " + r.status + ": " + (r.cell ? r.cell.why || r.cell.error : r.error || ""));
	if (r && r.error) out.push(r.id + ": " + r.error);
	const lostWakeup = Object.fromEntries(state.config.versions.map((v) => [v.name, Boolean(v.lost_wakeup)]));
	for (const res of (r && r.results) || []) {
		if (notServed(res) > 0 && !lostWakeup[res.lock]) out.push(r.id + ": " + res.lock + " left " + notServed(res) + " of " + res.requests + " requests not served: " + JSON.stringify(res.failed_by || {}));
	}
	for (const o of document.querySelectorAll("#matrix .observed")) if (o.textContent.includes("running")) out.push(o.closest("td").dataset.cell + ": " + o.textContent);
	if (!document.querySelector("#fixes").hidden) out.push("not undone: " + document.querySelector("#fixes").textContent);
	for (const w of ["A", "B"]) {
		const s = steps.sales[w];
		// A lock not obtained in time (503 lock_timeout) is a sale's own
		// answer, the one v3's and v6-nested's stories end on; any other 5xx
		// is a failure.
		const res = (s && s.s.result) || {};
		if (s && s.s.state === "done" && (res.status || 0) >= 500 && (res.reply || {}).code !== "lock_timeout") out.push("sale " + w + " answered " + JSON.stringify(res));
	}
	return out;
})()`

type button struct {
	Sel, Label, Title string
	Disabled          bool
	Cell              bool // a fault cell's: the matrix's, or a lesson's flaw or fix
}

func (p *buttonsPage) eval(js string) {
	p.t.Helper()
	if _, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](js)); err != nil {
		p.t.Fatalf("%s: %v", js, err)
	}
}

// buttons lists the buttons in scope (a CSS selector), as findButtons.
func (p *buttonsPage) buttons(scope string) []button {
	p.t.Helper()
	bs, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]button](fmt.Sprintf("%s(%q)", findButtons, scope)))
	if err != nil {
		p.t.Fatalf("listing %s: %v", scope, err)
	}
	return bs
}

// press clicks b, lets the page react (two frames: it draws on
// requestAnimationFrame, and a link's hashchange comes as a task), waits
// until it is quiet again, and checks that nothing went wrong: nothing
// shown as an error, nothing logged, no request failed.
func (p *buttonsPage) press(where string, b button) {
	p.t.Helper()
	start := time.Now()
	got, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](fmt.Sprintf(`(async () => {
		const b = document.querySelector(%q);
		if (!b) return "gone";
		if (b.disabled) return "disabled";
		if (b.textContent.trim() !== %q) return "now labelled " + b.textContent.trim();
		b.click();
		await new Promise((ok) => requestAnimationFrame(() => requestAnimationFrame(ok)));
		return "";
	})()`, b.Sel, b.Label), chromedp.EvalAwaitPromise))
	if err != nil || got != "" {
		p.t.Fatalf("pressing %s %q (%s): %s %v", where, b.Label, b.Sel, got, err)
	}
	waitFor(p.t, p.ctx, fmt.Sprintf("the page quiet after %s %q", where, b.Label), quiet)
	p.pressed = append(p.pressed, where+": "+b.Label)
	p.t.Logf("pressed %s: %q, quiet %s later", where, b.Label, time.Since(start).Round(time.Millisecond))
	p.check(where + " " + b.Label)
}

// check fails the test with whatever went wrong since the last check.
func (p *buttonsPage) check(after string) {
	p.t.Helper()
	shown, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](pageErrors))
	if err != nil {
		p.t.Fatal(err)
	}
	logged, failed := p.problems(), p.requests()
	if len(shown) > 0 || len(logged) > p.seen[0] || len(failed) > p.seen[1] {
		p.t.Errorf("after %s: the page shows %q; logged %q; requests failed %q", after, shown, logged[p.seen[0]:], failed[p.seen[1]:])
	}
	p.seen = [2]int{len(logged), len(failed)}
}

// faultButtonsSayWhy checks that each disabled fault button in scope (a
// cell's) says why it cannot run here and the command that can; it returns
// how many there were.
func (p *buttonsPage) faultButtonsSayWhy(scope string) int {
	p.t.Helper()
	why, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](`[cellsBlocked(), state.matrix.command]`))
	if err != nil {
		p.t.Fatal(err)
	}
	n := 0
	for _, b := range p.buttons(scope) {
		if !b.Disabled {
			continue
		}
		n++
		if why[0] == "" || !strings.Contains(b.Title, why[0]) || !strings.Contains(b.Title, why[1]) {
			p.t.Errorf("%s %q is disabled, titled %q: want why (%q) and the command (%q)", scope, b.Label, b.Title, why[0], why[1])
		}
	}
	return n
}

// playStory plays the story open in the step-through to its end, pressing
// its one button as the page offers it (it is disabled while the story
// waits for a lease to run out, for real), and checks that it ends with a
// verdict.
func (p *buttonsPage) playStory(name string) {
	p.t.Helper()
	next := button{Sel: "#preset-next"}
	for n := 0; ; n++ {
		waitFor(p.t, p.ctx, fmt.Sprintf("story %s: its step %d offered, or its end", name, n),
			quiet+` && (!document.querySelector("#preset-next").disabled || document.querySelector("#preset-next").textContent === "The end")`)
		label, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.querySelector("#preset-next").textContent`))
		if err != nil {
			p.t.Fatal(err)
		}
		if label == "The end" {
			break
		}
		next.Label = label
		p.press("story "+name, next)
	}
	waitFor(p.t, p.ctx, "story "+name+" judged", `!document.querySelector("#steps-verdict").hidden && document.querySelector("#steps-verdict").dataset.word !== ""`)
}

// failedRequests collects the page's requests answered 4xx or 5xx, and
// those that failed without an answer (not those the page cancelled, as
// its event stream is when it is left).
func failedRequests(t *testing.T, ctx context.Context) func() []string {
	t.Helper()
	var mu sync.Mutex
	var failed []string
	urls := map[network.RequestID]string{}
	sent := chromedp.Events(ctx, network.RequestWillBeSent)
	answered := chromedp.Events(ctx, network.ResponseReceived)
	lost := chromedp.Events(ctx, network.LoadingFailed)
	go func() {
		for ev, err := range sent {
			if err != nil {
				return
			}
			mu.Lock()
			urls[ev.RequestID] = ev.Request.Method + " " + ev.Request.URL
			mu.Unlock()
		}
	}()
	go func() {
		for ev, err := range answered {
			if err != nil {
				return
			}
			if ev.Response.Status >= 400 {
				mu.Lock()
				failed = append(failed, fmt.Sprintf("%s %s: %d", urls[ev.RequestID], ev.Response.URL, ev.Response.Status))
				mu.Unlock()
			}
		}
	}()
	go func() {
		for ev, err := range lost {
			if err != nil {
				return
			}
			if !ev.Canceled {
				mu.Lock()
				failed = append(failed, fmt.Sprintf("%s: %s", urls[ev.RequestID], ev.ErrorText))
				mu.Unlock()
			}
		}
	}()
	return func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), failed...) }
}

// TestButtons presses every enabled button of the lab's page on a stack
// started as make up starts it (no -chaos, no admin token: what a learner
// gets first), each found in the page itself: every lesson's tab and its
// buttons (its runs; its stories, each played to its end), the
// step-through by hand, the matrix's Run buttons, the libraries side by
// side and the form's Start. After each it waits until the page is quiet
// and checks that none ended in an error: nothing shown as one, nothing in
// the console, no request answered 4xx or 5xx, nothing left running. The
// fault buttons are disabled on make up: each must say why and which
// command runs them.
//
// About 95 s on 2 cores: 30 s the stack's start, 40 s the four stories
// whose lease runs out for real (10 s each), 10 s the runs.
func TestButtons(t *testing.T) {
	began := time.Now()
	bin := clusterBin(t)
	port := redistest.FreePort(t)
	up(t, bin, port, t.TempDir())
	ctx, problems := browser(t)
	p := &buttonsPage{t: t, ctx: ctx, problems: problems, requests: failedRequests(t, ctx)}
	url := fmt.Sprintf("http://localhost:%d/", port)
	if err := navigate(ctx, url); err != nil {
		t.Fatal(err)
	}
	p.eval(countFetches)
	waitFor(t, ctx, "the stack shown up, the matrix and the first lesson loaded",
		`document.querySelectorAll("#stack .node[data-state=up]").length >= 3 && state.stack.some((n) => n.kind === "replica" && n.settings) &&
		state.cells !== undefined && document.querySelector("#lesson pre.diff") !== null && `+quiet)
	t.Logf("the stack up and the page loaded in %s", time.Since(began).Round(time.Millisecond))
	p.check("loading the page")

	disabled := p.faultButtonsSayWhy("#matrix td button")
	stories := map[string]bool{}
	playLinked := func(where string, b button) {
		p.press(where, b)
		name, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#steps-panel").dataset.preset`))
		if err != nil || name == "" {
			t.Fatalf("%s %q opened no story (%v)", where, b.Label, err)
		}
		if !stories[name] {
			stories[name] = true
			p.playStory(name)
		}
	}

	// The lessons: each tab, then its buttons as they are when it opens.
	for _, tab := range p.buttons("#lesson-tabs button") {
		p.press("lesson tab", tab)
		waitFor(t, ctx, "lesson "+tab.Label+" shown with its code", fmt.Sprintf(`state.lesson === %q && document.querySelector("#lesson .code pre.diff") !== null`, tab.Label))
		disabled += p.faultButtonsSayWhy("#lesson button[data-cell]")
		for _, b := range p.buttons("#lesson .buttons button, #lesson .buttons a") {
			switch {
			case b.Disabled && !b.Cell:
				t.Errorf("lesson %s: %q is disabled with nothing running", tab.Label, b.Label)
			case b.Disabled: // said why, above
			case strings.Contains(b.Sel, "> a:nth-child"):
				playLinked("lesson "+tab.Label, b)
				// The story's link scrolled the page to the step-through;
				// the lesson is still the one chosen.
			default:
				p.press("lesson "+tab.Label, b)
			}
		}
	}

	// The stories as the step-through lists them: those no lesson links
	// to are played, the others opened again.
	for _, b := range p.buttons("#steps-presets a") {
		playLinked("story", b)
	}

	// The step-through by hand: its start, then each lane's buttons in
	// turn, each once (A's next step and A to its end, then B's: none
	// waits for the other), then its reset.
	for _, sel := range []string{"#steps-start", "#steps-board button", "#steps-reset"} {
		for _, b := range p.buttons(sel) {
			cur := p.buttons(b.Sel)
			if len(cur) != 1 || cur[0].Disabled {
				t.Errorf("the step-through by hand: %q is not offered at its turn: %+v", b.Label, cur)
				continue
			}
			p.press("step-through", cur[0])
		}
	}

	// The rest of the page: every other enabled button (the form's Start,
	// the libraries side by side, any matrix cell make up can run).
	for _, b := range p.buttons(`main button:not(#lesson-tabs button):not(#lesson button):not(#steps-panel button)`) {
		if !b.Disabled {
			p.press("page", b)
		}
	}

	if disabled == 0 {
		t.Errorf("no fault button is disabled on make up: its cells need make lab's fault hooks")
	}
	t.Logf("pressed %d buttons (%d stories played to their end); %d fault buttons disabled, each saying why and the command; %s in all",
		len(p.pressed), len(stories), disabled, time.Since(began).Round(time.Second))
	t.Logf("pressed:\n%s", strings.Join(p.pressed, "\n"))
}
