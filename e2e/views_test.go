//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// checkViews opens every view of the lab at its own address, at 1280 and
// 390 px, in a browser of its own: each shows its view, logs no error, has
// no request fail and does not scroll sideways; the run view of runID,
// opened by its address, draws every hold the lab keeps of that run (the
// count from the canvas's data, against the run's JSON); Back returns to the
// view before. base is the lab's address through nginx, ending in "/".
func checkViews(t *testing.T, base, runID string) {
	t.Helper()
	res, err := http.Get(base + "lab/api/runs/" + runID)
	if err != nil {
		t.Fatal(err)
	}
	var run struct {
		Holds []json.RawMessage `json:"holds"`
	}
	err = json.NewDecoder(res.Body).Decode(&run)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK || len(run.Holds) == 0 {
		t.Fatalf("run %s: %d, %d holds, %v", runID, res.StatusCode, len(run.Holds), err)
	}

	ctx, problems := browser(t)
	var mu sync.Mutex
	var failed []string
	go func() {
		for ev, err := range chromedp.Events(ctx, network.ResponseReceived) {
			if err != nil {
				return
			}
			if ev.Response.Status >= 400 {
				mu.Lock()
				failed = append(failed, fmt.Sprintf("%d %s", ev.Response.Status, ev.Response.URL))
				mu.Unlock()
			}
		}
	}()
	go func() {
		for ev, err := range chromedp.Events(ctx, network.LoadingFailed) {
			if err != nil {
				return
			}
			if !ev.Canceled { // the live feed, cut by the next navigation
				mu.Lock()
				failed = append(failed, fmt.Sprintf("%s: %s", ev.Type, ev.ErrorText))
				mu.Unlock()
			}
		}
	}()

	views := []struct{ path, view, ready string }{
		{"", "all", `document.querySelector("#lesson h3")`},
		{"lab/lessons/v4", "lessons", `document.querySelector("#lesson h3")?.textContent.startsWith("v4") && document.querySelector("#lesson-tab-v4").getAttribute("aria-selected") === "true" && document.querySelector("#lesson pre.diff") !== null`},
		{"lab/runs/" + runID, "runs", fmt.Sprintf(`Number(document.querySelector("#timeline").dataset.holds) === %d`, len(run.Holds))},
		{"lab/faults", "faults", `document.querySelectorAll("#matrix tbody tr").length > 0`},
		{"lab/libraries", "libraries", `document.querySelectorAll("#choose tbody tr").length > 0`},
		{"lab/stack", "stack", `document.querySelectorAll("#stack .node[data-state=up]").length >= 3`},
	}
	for _, width := range []int64{1280, 390} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 800)); err != nil {
			t.Fatal(err)
		}
		for _, v := range views {
			if err := navigate(ctx, base+v.path); err != nil {
				t.Fatalf("opening /%s: %v", v.path, err)
			}
			waitFor(t, ctx, fmt.Sprintf("/%s at %d px shows its view", v.path, width),
				fmt.Sprintf(`document.body.dataset.view === %q && document.querySelector("#views a[aria-current=page]") !== null && Boolean(%s)`, v.view, v.ready))
			wide, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
				const d = document.documentElement;
				return d.scrollWidth > d.clientWidth ? d.scrollWidth + " px wide in " + d.clientWidth : "";
			})()`))
			if err != nil || wide != "" {
				t.Errorf("/%s at %d px scrolls sideways: %s %v", v.path, width, wide, err)
			}
			screenshot(t, ctx, fmt.Sprintf("view-%s-%d", v.view, width))
		}
	}
	// Back and forward move between views without a reload: the lessons'
	// tab clicked, then Back, shows the stack view again.
	if err := navigate(ctx, base+"lab/lessons/v4"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "v4's lesson", `document.querySelector("#lesson h3")?.textContent.startsWith("v4")`)
	if err := chromedp.Do(ctx, chromedp.Click("#lesson-tab-v6", chromedp.NodeVisible)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "v6's lesson at its address", `location.pathname === "/lab/lessons/v6" && document.querySelector("#lesson h3")?.textContent.startsWith("v6")`)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(history.back(), true)`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "Back: v4's lesson again", `location.pathname === "/lab/lessons/v4" && document.querySelector("#lesson h3")?.textContent.startsWith("v4")`)
	if err := chromedp.Do(ctx, chromedp.Click(`#views a[href="/lab/stack"]`, chromedp.NodeVisible)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the stack view from its link", `location.pathname === "/lab/stack" && document.body.dataset.view === "stack" && document.querySelector("#lessons-panel").hidden`)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(history.back(), true)`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "Back: the lessons view again", `document.body.dataset.view === "lessons" && !document.querySelector("#lessons-panel").hidden`)

	mu.Lock()
	defer mu.Unlock()
	if len(failed) > 0 {
		t.Errorf("requests failed on the views:\n%s", strings.Join(failed, "\n"))
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the views logged errors:\n%s", strings.Join(p, "\n"))
	}
}
