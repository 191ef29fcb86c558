//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/locklab/locklab/internal/loadtest"
	"github.com/locklab/locklab/internal/redistest"
)

// BenchmarkLab measures the lab against the command line on the local
// cluster (make bench-lab): v6 run by the lab and by the load test itself at
// the same settings, in turns (command line, lab, five times each), first
// with no page open, then with the lab's page following each run live (in
// chromium, on the same machine); and the page: its first
// paint, its longest frame while it follows the lab's runs live, and one
// redraw and one hover of a timeline of 10,000 holds (a run file opened in
// the page). It reports lab/cli, the lab's median sales/s over the command
// line's (the target: 0.95 or more), and those times in ms. One
// measurement whatever b.N: run it with -benchtime 1x.
func BenchmarkLab(b *testing.B) {
	c := up(b, clusterBin(b), redistest.FreePort(b), b.TempDir())
	base := c.State.URL[:len(c.State.URL)-len("/sale")]
	const requests, concurrency = 3000, 50
	cfg := loadtest.Config{URL: c.State.URL, Requests: requests, Concurrency: concurrency, Stock: requests,
		AdminToken: c.State.AdminToken}
	settings := fmt.Sprintf(`{"locks":["v6"],"requests":%d,"concurrency":%d,"stock":%d}`, requests, concurrency, requests)
	// rounds runs the command line and the lab in turns, five times, and
	// returns the lab's median sales/s over the command line's.
	rounds := func(what string) float64 {
		var cli, lab []float64
		for round := range 5 {
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			r, err := loadtest.Run(rctx, cfg, "v6")
			cancel()
			if err != nil || r.Failed+r.Unknown > 0 {
				b.Fatalf("command line, round %d: %v, %d failed, %d unknown", round+1, err, r.Failed, r.Unknown)
			}
			cli = append(cli, r.SalesPerSec)
			l := labRun(b, base, settings)
			lab = append(lab, l)
			b.Logf("%s, round %d: command line %.0f sales/s, lab %.0f sales/s", what, round+1, r.SalesPerSec, l)
		}
		b.Logf("%s: lab/cli %.3f (medians %.0f / %.0f sales/s)", what, median(lab)/median(cli), median(lab), median(cli))
		return median(lab) / median(cli)
	}
	alone := rounds("no page open")

	ctx, problems := browser(b)
	if err := navigate(ctx, base+"/"); err != nil {
		b.Fatal(err)
	}
	waitFor(b, ctx, "the stack shown up", `document.querySelectorAll("#stack .node[data-state=up]").length >= 3`)
	paint, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`performance.getEntriesByName("first-contentful-paint")[0]?.startTime ?? -1`))
	if err != nil || paint < 0 {
		b.Fatalf("first contentful paint: %v (%v)", paint, err)
	}
	// Every frame's gap from the one before, while the page follows the runs.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		window.benchGaps = []; let last = performance.now();
		const f = (t) => { window.benchGaps.push(t - last); last = t; requestAnimationFrame(f); };
		requestAnimationFrame(f);
		return true;
	})()`)); err != nil {
		b.Fatal(err)
	}
	watched := rounds("the page following")
	frame, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`Math.max(...window.benchGaps.slice(1))`))
	if err != nil {
		b.Fatal(err)
	}
	draw, tip := drawMany(b, ctx, 10000)
	b.Logf("lab/cli %.3f with no page open, %.3f with the page following (target >= 0.95); first contentful paint %.0f ms; longest frame while following %.0f ms; 10,000 holds: a redraw %.1f ms, a hover %.2f ms",
		alone, watched, paint, frame, draw, tip)
	b.ReportMetric(alone, "lab/cli")
	b.ReportMetric(watched, "lab/cli-watched")
	b.ReportMetric(paint, "ms-first-paint")
	b.ReportMetric(frame, "ms-longest-frame")
	b.ReportMetric(draw, "ms-redraw-10k")
	b.ReportMetric(tip, "ms-hover-10k")
	if p := problems(); len(p) > 0 {
		b.Errorf("the page logged errors: %v", p)
	}
}

// labRun starts a run in the lab through nginx, waits for its end, and
// returns its sales/s.
func labRun(b *testing.B, base, settings string) float64 {
	b.Helper()
	res, err := http.Post(base+"/lab/api/runs", "application/json", bytes.NewBufferString(settings))
	if err != nil {
		b.Fatal(err)
	}
	var run struct {
		ID      string `json:"id"`
		Status  string `json:"status"`
		Error   string `json:"error"`
		Results []struct {
			SalesPerSec float64 `json:"sales_per_sec"`
		} `json:"results"`
	}
	err = json.NewDecoder(res.Body).Decode(&run)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusAccepted {
		b.Fatalf("starting a lab run: %d %v", res.StatusCode, err)
	}
	for deadline := time.Now().Add(2 * time.Minute); run.Status == "running"; {
		if time.Now().After(deadline) {
			b.Fatalf("lab run %s still running after 2 minutes", run.ID)
		}
		time.Sleep(100 * time.Millisecond) // polling the lab's own state: it says when the run ended
		res, err := http.Get(base + "/lab/api/runs/" + run.ID)
		if err != nil {
			b.Fatal(err)
		}
		err = json.NewDecoder(res.Body).Decode(&run)
		res.Body.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
	if run.Status != "done" || len(run.Results) != 1 {
		b.Fatalf("lab run %s: %s %s", run.ID, run.Status, run.Error)
	}
	return run.Results[0].SalesPerSec
}

// drawMany opens a run of n holds from a file in the page (two replicas, a
// hold every 100 µs, a tenth of them overlapping) and times one redraw of
// its timeline and one hover, each the median of 20, in ms.
func drawMany(b *testing.B, ctx context.Context, n int) (draw, hover float64) {
	b.Helper()
	type hold struct {
		Lock    string `json:"lock"`
		ID      string `json:"id"`
		Replica string `json:"replica"`
		Owner   string `json:"owner"`
		From    int64  `json:"from"`
		To      int64  `json:"to"`
		Status  int    `json:"status"`
	}
	holds := make([]hold, n)
	t0 := time.Now().UnixMicro()
	for i := range holds {
		from := t0 + int64(i)*100
		to := from + 80
		if i%10 == 0 {
			to += 150 // overlaps the next two
		}
		holds[i] = hold{Lock: "v2", ID: fmt.Sprint(i), Replica: []string{"inventory-1", "inventory-2"}[i%2], Owner: fmt.Sprint(i), From: from, To: to, Status: 200}
	}
	raw, err := json.Marshal(map[string]any{"id": "bench", "status": "done", "results": []any{}, "holds": holds})
	if err != nil {
		b.Fatal(err)
	}
	file := filepath.Join(b.TempDir(), "bench-run.json")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		b.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.SetUploadFiles("#open-run", []string{file})); err != nil {
		b.Fatal(err)
	}
	waitFor(b, ctx, "the run of many holds drawn", fmt.Sprintf(`Number(document.querySelector("#timeline").dataset.holds) === %d`, n))
	times, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(() => {
		const med = (f) => { const xs = []; for (let i = 0; i < 20; i++) { const t = performance.now(); f(); xs.push(performance.now() - t); } return xs.sort((a, b) => a - b)[10]; };
		const c = document.querySelector("#timeline");
		return [med(() => drawRun()), med(() => hover(c.clientWidth / 2, 30))];
	})()`))
	if err != nil || len(times) != 2 {
		b.Fatalf("timing the page: %v %v", times, err)
	}
	return times[0], times[1]
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
