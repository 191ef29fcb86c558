//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/locklab/locklab/internal/loadtest"
	"github.com/locklab/locklab/internal/redistest"
)

// BenchmarkLab measures the lab against the command line on the local
// cluster (make bench-lab): v6 run by the lab, with its page open and
// following the run live, and by the load test itself at the same settings,
// in turns (command line, lab, three times each), and the page's first
// paint. It reports lab/cli, the lab's median sales/s over the command
// line's (the target: 0.95 or more), and the first contentful paint of / in
// ms. One measurement whatever b.N: run it with -benchtime 1x.
func BenchmarkLab(b *testing.B) {
	c := up(b, clusterBin(b), redistest.FreePort(b), b.TempDir())
	base := c.State.URL[:len(c.State.URL)-len("/sale")]
	ctx, problems := browser(b)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/")); err != nil {
		b.Fatal(err)
	}
	waitFor(b, ctx, "the stack shown up", `document.querySelectorAll("#stack .node[data-state=up]").length >= 3`)
	paint, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`performance.getEntriesByName("first-contentful-paint")[0]?.startTime ?? -1`))
	if err != nil || paint < 0 {
		b.Fatalf("first contentful paint: %v (%v)", paint, err)
	}

	const requests, concurrency = 3000, 50
	cfg := loadtest.Config{URL: c.State.URL, Requests: requests, Concurrency: concurrency, Stock: requests,
		AdminToken: c.State.AdminToken, Client: loadtest.NewClient(concurrency)}
	var cli, lab []float64
	for round := range 3 {
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		r, err := loadtest.Run(rctx, cfg, "v6")
		cancel()
		if err != nil || r.Failed+r.Unknown > 0 {
			b.Fatalf("command line, round %d: %v, %d failed, %d unknown", round+1, err, r.Failed, r.Unknown)
		}
		cli = append(cli, r.SalesPerSec)
		l := labRun(b, base, fmt.Sprintf(`{"locks":["v6"],"requests":%d,"concurrency":%d,"stock":%d}`, requests, concurrency, requests))
		lab = append(lab, l)
		b.Logf("round %d: command line %.0f sales/s, lab %.0f sales/s", round+1, r.SalesPerSec, l)
	}
	ratio := median(lab) / median(cli)
	b.Logf("lab/cli %.3f (medians %.0f / %.0f sales/s; target >= 0.95); first contentful paint %.0f ms", ratio, median(lab), median(cli), paint)
	b.ReportMetric(ratio, "lab/cli")
	b.ReportMetric(paint, "ms-first-paint")
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

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
