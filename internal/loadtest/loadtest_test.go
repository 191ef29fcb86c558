package loadtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/loadtest"
	"github.com/locklab/locklab/internal/servicetest"
	"github.com/locklab/locklab/internal/versions"
)

// service is one replica of the real service (servicetest), called r1.
func service(t *testing.T) string { return servicetest.Start(t, "r1") }

func TestRunCountsEveryReply(t *testing.T) {
	url := service(t)
	cfg := loadtest.Config{URL: url + "/sale", Requests: 200, Concurrency: 20, Stock: 50}
	for _, lock := range []string{"atomic", "v6"} {
		r, err := loadtest.Run(context.Background(), cfg, lock)
		if err != nil {
			t.Fatal(err)
		}
		if r.Sold != 50 || r.SoldOut != 150 || r.Failed != 0 || r.StockBefore != 50 || r.StockAfter != 0 ||
			r.Oversold != 0 || r.BeyondStock != 0 || r.Replicas["r1"] != 200 || r.Lock != lock {
			t.Fatalf("%s: unexpected result %+v", lock, r)
		}
		if r.Latency.P50 <= 0 || r.Latency.Max < r.Latency.P99 || r.SalesPerSec <= 0 {
			t.Fatalf("%s: implausible figures %+v", lock, r)
		}
	}
}

// Every run carries the checker's verdict on its evidence: the client's
// requests and the replica's history, read through the replica's own route;
// v1 runs on one replica. Into JSON as the issue names the fields.
func TestRunChecksTheEvidence(t *testing.T) {
	url := service(t)
	cfg := loadtest.Config{URL: url + "/sale", Requests: 100, Concurrency: 10, Stock: 30}
	for _, lock := range []string{"v1", "v6", "atomic"} {
		r, err := loadtest.Run(context.Background(), cfg, lock)
		if err != nil {
			t.Fatal(err)
		}
		if !r.HistoryChecked || len(r.Sales) != 100 || len(r.Ops) != 100 || r.TwoHolders != 0 || r.LostUpdates != 0 ||
			!r.Linearizable || r.Unknown != 0 || r.OversoldMin != 0 || r.OversoldMax != 0 {
			t.Fatalf("%s: verdict %+v (note %q, %d sales, %d ops); want the evidence checked and clean", lock, r.Verdict, r.HistoryNote, len(r.Sales), len(r.Ops))
		}
		// Every sale takes the lock (the sold-out check is under it); atomic has none.
		if want := map[bool]int{true: 0, false: 100}[lock == "atomic"]; r.Holds != want {
			t.Fatalf("%s: %d sales held the lock, want %d", lock, r.Holds, want)
		}
		raw, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		for _, field := range []string{`"two_holders":0`, `"lost_updates":0`, `"linearizable":true`, `"unknown":0`, `"oversold_min":0`, `"oversold_max":0`} {
			if !strings.Contains(string(raw), field) {
				t.Fatalf("%s: JSON lacks %s: %s", lock, field, raw)
			}
		}
	}
}

func TestRunNeedsTheSaleEndpoint(t *testing.T) {
	url := service(t)
	for _, u := range []string{url + "/stock", "localhost/sale", url + "/nope/sale"} {
		cfg := loadtest.Config{URL: u, Requests: 1, Concurrency: 1, Stock: 1}
		if _, err := loadtest.Run(context.Background(), cfg, "atomic"); err == nil {
			t.Errorf("-url %s: no error", u)
		}
	}
}

// The report stands alone: no external script, style, font or image.
func TestReportIsSelfContained(t *testing.T) {
	var results []loadtest.Result
	for i, v := range versions.All {
		results = append(results, loadtest.Result{Lock: v.Name, Requests: 10, Sold: 10, Oversold: int64(i), SalesPerSec: float64(i)})
	}
	var b bytes.Buffer
	if err := loadtest.WriteHTML(&b, loadtest.NewReport(loadtest.Config{URL: "http://localhost/sale"}, results, []string{"a note"})); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, banned := range []string{"<script", "src=", "href=", "@import", "url("} {
		if strings.Contains(html, banned) {
			t.Errorf("report contains %q", banned)
		}
	}
	for _, v := range versions.All {
		if !strings.Contains(html, v.Flaw) && !strings.Contains(html, strings.ReplaceAll(v.Flaw, "'", "&#39;")) {
			t.Errorf("report lacks %s's flaw", v.Name)
		}
	}
	if !strings.Contains(html, "a note") {
		t.Error("report lacks the note")
	}
}

func TestReportShowsTheScenarioMatrix(t *testing.T) {
	rep := loadtest.NewReport(loadtest.Config{URL: "http://localhost/sale"}, nil, nil)
	rep.Scenarios = []loadtest.ScenarioInfo{{Name: "crash-holder", Injected: "kill the holder"}}
	rep.Matrix = []loadtest.MatrixRow{
		{Lock: "v3", Cells: []loadtest.MatrixCell{{Applies: true, OK: true, Observed: "deadlock"}}},
		{Lock: "v4", Cells: []loadtest.MatrixCell{{Applies: true, OK: false, Observed: "deadlock", Expected: "resumes"}}},
	}
	var b bytes.Buffer
	if err := loadtest.WriteHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{"crash-holder", "kill the holder", `class="good"`, `class="bad"`, "(expected: resumes)"} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(html, "<h2>Results</h2>") || strings.Contains(html, "src=") {
		t.Error("a scenario report shows load-test results or loads something external")
	}
}

// A plain run (the nginx ceiling, make bench-loadtest) counts every 200 as a
// request served, whatever its body: it is not a sale.
func TestPlainRunCountsEvery200(t *testing.T) {
	url := service(t)
	r, err := loadtest.Run(context.Background(), loadtest.Config{URL: url + "/healthz", Plain: true, Requests: 50, Concurrency: 5}, "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Sold != 50 || r.NotServed() != 0 || r.Requests != 50 {
		t.Fatalf("served %d, not served %d of %d; want all 50 served", r.Sold, r.NotServed(), r.Requests)
	}
}

// With -rate the load test is an open model: requests start on schedule
// whatever the replies do, and a stall counts in every request it delayed.
// Here one worker meets a server whose first reply takes 300 ms: in a closed
// loop only that request would be slow; on a 100/s schedule the ones due
// meanwhile are late too, and their latency says so.
func TestRateMeasuresFromTheSchedule(t *testing.T) {
	var first atomic.Bool
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if first.CompareAndSwap(false, true) {
			time.Sleep(300 * time.Millisecond) // the stall the test is about, not a wait for state
		}
	}))
	defer ts.Close()
	cfg := loadtest.Config{URL: ts.URL, Plain: true, Requests: 20, Concurrency: 1}
	closed, err := loadtest.Run(context.Background(), cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	first.Store(false)
	cfg.Rate = 100
	open, err := loadtest.Run(context.Background(), cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("closed loop p50 %.1f ms, open (100/s) p50 %.1f ms over %.2f s", closed.Latency.P50, open.Latency.P50, open.Seconds)
	switch {
	case open.Sold != 20 || open.Rate != 100:
		t.Fatalf("open run: served %d, rate %v", open.Sold, open.Rate)
	case open.Seconds < 0.19:
		t.Fatalf("20 requests at 100/s took %.3f s: the schedule was not kept", open.Seconds)
	case open.Latency.P50 < 100:
		// Requests 2-20 were due every 10 ms during the 300 ms stall: at
		// least half of them waited over 100 ms past their due time.
		t.Fatalf("open p50 %.1f ms: the stall is hidden (coordinated omission)", open.Latency.P50)
	case closed.Latency.P50 >= 100:
		t.Fatalf("closed-loop p50 %.1f ms: only one request should have been slow", closed.Latency.P50)
	}
}

// A version whose every sale failed (etcd on a replica with no etcd: each a
// 503) oversold nothing, and the old checker called it linearizable "ok":
// it tested nothing. Its result says so (the JSON the lab draws carries
// it), and the table marks the row and counts the requests not served.
func TestRunThatSoldNothingIsMarked(t *testing.T) {
	url := service(t)
	cfg := loadtest.Config{URL: url + "/sale", Requests: 20, Concurrency: 4, Stock: 10}
	r, err := loadtest.Run(context.Background(), cfg, "etcd")
	if err != nil {
		t.Fatal(err)
	}
	if r.Sold != 0 || r.Failed != 20 || r.NotServed() != 20 || r.TooLittle != "sold nothing" || r.Linearizability != "not tested" || r.Linearizable || r.Judged != 0 {
		t.Fatalf("sold %d, failed %d, not served %d, too little %q, linearizability %q (%v), judged %d",
			r.Sold, r.Failed, r.NotServed(), r.TooLittle, r.Linearizability, r.Linearizable, r.Judged)
	}
	// Counted by the status and the reply's code: a replica's 503 is told
	// from nginx's (not_sent) and from a lock's deadline (lock_timeout).
	if len(r.FailedBy) != 1 || r.FailedBy["503 "+api.CodeUnavailable] != 20 {
		t.Fatalf("failed by %v: want 20 by 503 %s", r.FailedBy, api.CodeUnavailable)
	}
	raw, err := json.Marshal(r)
	if err != nil || !strings.Contains(string(raw), `"too_little":"sold nothing"`) || !strings.Contains(string(raw), `"linearizability":"not tested"`) {
		t.Fatalf("JSON %s, %v", raw, err)
	}
	var b bytes.Buffer
	if err := loadtest.WriteTable(&b, []loadtest.Result{r}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "not served") || !strings.Contains(b.String(), "etcd (TESTED TOO LITTLE: sold nothing)") {
		t.Fatalf("table:\n%s", b.String())
	}
	if v := loadtest.Verdict(r.Verdict, ""); !strings.Contains(v, "linearizable: not tested · no request sold (20 requests: 20 failed)") {
		t.Fatalf("verdict line %q", v)
	}
}

// A stopped run stops its requests in flight: they are abandoned at once
// (their connections closed, so the service sees its client go), not left
// to run to the 2-minute request timeout. Here every request meets a server
// that answers only once its client is gone.
func TestStoppedRunAbandonsItsRequests(t *testing.T) {
	const conc = 4
	var inFlight, gone atomic.Int64
	arrived := make(chan struct{}, conc)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight.Add(1)
		arrived <- struct{}{}
		<-r.Context().Done() // net/http ends it when the client's connection closes
		gone.Add(1)
	}))
	defer ts.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var res loadtest.Result
	go func() {
		var err error
		res, err = loadtest.Run(ctx, loadtest.Config{URL: ts.URL, Plain: true, Requests: conc, Concurrency: conc}, "")
		done <- err
	}()
	for range conc { // every request is in flight
		<-arrived
	}
	stopped := time.Now()
	cancel()
	select {
	case err := <-done:
		if err == nil || !errors.Is(err, context.Canceled) {
			t.Fatalf("stopped run: %v, want its context's cancellation", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the run still waits on its requests 10 s after it was stopped")
	}
	t.Logf("the run returned %v after it was stopped", time.Since(stopped))
	if res.Requests != conc || res.NotServed() != conc || res.FailedBy["transport"] != conc {
		t.Fatalf("%d requests, %d not served, failed by %v: want %d abandoned, their outcome unknown", res.Requests, res.NotServed(), res.FailedBy, conc)
	}
	deadline := time.Now().Add(10 * time.Second)
	for gone.Load() < conc && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polls the server's observed state
	}
	if gone.Load() != conc || inFlight.Load() != conc {
		t.Fatalf("the server saw %d of %d requests' clients go (%d arrived)", gone.Load(), conc, inFlight.Load())
	}
}
