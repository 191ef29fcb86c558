//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/locklab/locklab/internal/lab"
	"github.com/locklab/locklab/internal/scenario"
	"github.com/locklab/locklab/internal/servicetest"
)

// labWithout serves a lab, in this process, in front of one real replica
// that reports settings on /healthz, whose cells fail as on replicas without
// fault hooks; each reply to a POST /lab/api/cells is held until release
// is closed. It needs no local cluster: no flock.
func labWithout(t *testing.T, settings map[string]string, release <-chan struct{}) string {
	t.Helper()
	sale := servicetest.StartWith(t, "r1", settings) + "/sale"
	l := lab.New(lab.Config{SaleURL: sale, Replicas: []string{"r1"}, Cells: func(context.Context) (scenario.Env, error) {
		return scenario.Env{}, fmt.Errorf("%w (make scenarios starts them so)", scenario.ErrNoFaultHooks)
	}})
	h := l.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/lab/api/cells" {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		<-release
		maps.Copy(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(func() { l.Close(); ts.Close() }) // the lab first: it ends the page's live stream
	return strings.Replace(ts.URL, "127.0.0.1", "localhost", 1) + "/"
}

// The page follows the server's last word: a cell run from the matrix fails
// at once, and its failure's event reaches the page before the reply to the
// click (held until the page has the event). The stale "running" of that
// reply does not stay: the cell says it could not run, why, and the command,
// and every button is free again. Then, on replicas that say their fault
// hooks are off (make up's), the lessons' fault buttons and the matrix's are
// disabled, each saying why and make lab; the run buttons stay enabled.
func TestLabFollowsLastWord(t *testing.T) {
	release := make(chan struct{})
	url := labWithout(t, nil, release)
	ctx, problems := browser(t)
	if err := navigate(ctx, url); err != nil {
		t.Fatal(err)
	}
	cell := `#matrix td[data-cell="slow-holder/v6"]`
	if err := chromedp.Do(ctx, chromedp.Click(cell+" button", chromedp.NodeEnabled)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the failure's event on the page, the reply still held", `state.cells["slow-holder/v6"]?.status === "failed" &&
		!performance.getEntriesByType("resource").some((e) => e.name.endsWith("/lab/api/cells") && e.responseEnd > 0)`)
	close(release)
	waitFor(t, ctx, "the held reply received, and the failure still shown", `performance.getEntriesByType("resource").some((e) => e.name.endsWith("/lab/api/cells") && e.responseEnd > 0) &&
		state.cells["slow-holder/v6"].status === "failed" && document.querySelector('`+cell+` .observed').textContent === "could not run" &&
		document.querySelector('.verdict[data-cell="slow-holder/v6"] .word')?.textContent === "could not run" &&
		document.querySelector('.verdict[data-cell="slow-holder/v6"]').textContent.includes("Could not run: the replicas run without their fault hooks (make up starts them so), start make lab.") &&
		!document.querySelector("#start").disabled && !document.querySelector('`+cell+` button').disabled`)
	time.Sleep(300 * time.Millisecond) // a frame or more: nothing brings "running" back
	waitFor(t, ctx, "still not running", `state.current.status === "failed" && !document.querySelector("#start").disabled`)
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(p, "\n"))
	}

	// make up's replicas: no fault hooks.
	url = labWithout(t, map[string]string{"chaos": "false"}, nil)
	if err := navigate(ctx, url); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click("#lesson-tab-v4", chromedp.NodeVisible)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "v4's fault buttons and the matrix's disabled, saying why and make lab; its code the two lines against v3",
		`[...document.querySelectorAll("#lesson button[data-cell]")].length === 2 &&
		[...document.querySelectorAll("#lesson button[data-cell], #matrix td button")].every((b) => b.disabled && b.title.includes("the replicas run without their fault hooks") && b.title.includes("make lab")) &&
		document.querySelector("#lesson .buttons .why").textContent.includes("Start make lab") &&
		document.querySelector("#nemesis").disabled && !document.querySelector("#start").disabled &&
		document.querySelectorAll('#lesson pre.diff .line[data-op="+"]').length === 2 && document.querySelectorAll('#lesson pre.diff .line[data-op="-"]').length === 2`)
	for _, w := range []int{1280, 390} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(int64(w), 900)); err != nil {
			t.Fatal(err)
		}
		png, err := chromedp.Run(ctx, chromedp.Screenshot("#lessons-panel", chromedp.NodeVisible))
		if err != nil {
			t.Fatal(err)
		}
		if dir := os.Getenv("LAB_SCREENSHOTS"); dir != "" {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("lab-lesson-v4-make-up-%d.png", w)), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(p, "\n"))
	}
}
