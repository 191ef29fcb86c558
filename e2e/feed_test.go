//go:build e2e

package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// checkFeedRefused walks one tab through the views more times than the lab
// keeps streams per address, and then finds a stream free: no page left
// keeps its own. It opens the faults view in that tab while the
// lab refuses this address any more live streams (429: the test holds the
// rest of them, as closed pages not yet seen gone do after quick
// navigations), runs failover-sentinel for v6 from it (it fails at once on
// this cluster: no Sentinel), and then gives the streams back: the page,
// which heard nothing of the failure and still says "running", must open
// its feed again and show the failure. EventSource alone gives up on a 429
// for good, and the feed's snapshot alone did not carry the cells: the
// page said "running" for ever (TestLab's cells in 简体中文, twice).
func checkFeedRefused(t *testing.T, base string) {
	t.Helper()
	ctx, problems := browser(t)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatal(err)
	}
	// One tab through the views, more times than the lab's streams per
	// address: each page left closes its feed as it goes (the browser's
	// back/forward cache kept it open for minutes, filling the lab's 8).
	const walks = 10
	for i := range walks {
		view := []string{"faults", "stack"}[i%2]
		if err := navigate(ctx, base+"lab/"+view); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the "+view+" view", `document.body.dataset.view === "`+view+`"`)
	}
	// The tab's page has its own feed open before the test takes the rest:
	// the page left last may still hold its stream for a moment (its close
	// on its way through nginx), so the new page's was refused and is
	// retried; the test taking that slot meanwhile would leave the tab
	// nothing to give back below.
	waitFor(t, ctx, "the tab's own feed open", `feed !== null && feed.readyState === EventSource.OPEN`)
	var streams held
	defer streams.release()
	for deadline := time.Now().Add(30 * time.Second); streams.grab(t, base) == 0; time.Sleep(500 * time.Millisecond) { // a closed stream reaches the lab through nginx
		if time.Now().After(deadline) {
			t.Fatalf("after %d navigations in one tab the lab refuses this address any stream: the pages left kept theirs open", walks)
		}
	}
	// The tab's own stream too, once its page is gone: then the lab has
	// none left for this address, and no close on its way to free one.
	n := len(streams.bodies)
	if err := navigate(ctx, "about:blank"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); streams.grab(t, base) < n+1; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the tab's stream was not closed as its page went: holding %d", len(streams.bodies))
		}
	}
	t.Logf("holding %d of the lab's streams for this address", len(streams.bodies))
	if err := navigate(ctx, base+"lab/faults"); err != nil {
		t.Fatal(err)
	}
	const cell = "failover-sentinel/v6"
	waitFor(t, ctx, "the faults view with no live feed", `document.body.dataset.view === "faults" && document.querySelector('#matrix td[data-cell="`+cell+`"] button:enabled') !== null`)
	if err := chromedp.Do(ctx, chromedp.Click(`#matrix td[data-cell="`+cell+`"] button`, chromedp.NodeEnabled)); err != nil {
		t.Fatal(err)
	}
	var ended struct{ Status string }
	for deadline := time.Now().Add(time.Minute); ended.Status != "failed"; time.Sleep(100 * time.Millisecond) { // the lab's state, polled
		if time.Now().After(deadline) {
			t.Fatalf("%s never failed on the lab: %q", cell, ended.Status)
		}
		if res, err := http.Get(base + "lab/api/cells/" + cell); err == nil {
			_ = json.NewDecoder(res.Body).Decode(&ended)
			res.Body.Close()
		}
	}
	// Still "running" on the page: it had no feed to hear the failure by.
	running, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('.verdict[data-cell="`+cell+`"]') === null && document.querySelector("#start").disabled`))
	if err != nil || !running {
		t.Fatalf("the page heard the cell end with its feed refused (%v): the test holds no stream", err)
	}
	streams.release()
	waitFor(t, ctx, cell+"'s failure shown once the feed opens again", `document.querySelector('.verdict[data-cell="`+cell+`"] .word')?.textContent === "could not run" && !document.querySelector("#start").disabled`)
	if p := problems(); len(p) > 0 {
		t.Errorf("the page with its feed refused logged errors:\n%v", p)
	}
}

// held are live streams of the lab's that the test keeps open.
type held struct{ bodies []*http.Response }

// grab opens the lab's live feed through nginx until the lab refuses one
// (429, over its streams per client), keeping the others, and says how many
// it holds in all.
func (h *held) grab(t *testing.T, base string) int {
	t.Helper()
	for range 64 {
		res, err := http.Get(base + "lab/api/events")
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusOK {
			res.Body.Close()
			if res.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("the live feed: %d", res.StatusCode)
			}
			return len(h.bodies)
		}
		h.bodies = append(h.bodies, res)
	}
	t.Fatal("the lab never refused a stream")
	return 0
}

// release closes every stream held.
func (h *held) release() {
	for _, b := range h.bodies {
		b.Body.Close()
	}
	h.bodies = nil
}
