//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"html/template"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// stackUnderAttack is what another site's page is pointed at: the stack's
// nginx (base, http://localhost:PORT), and where the stack publishes them,
// each replica's and the lab's own address (the local cluster's loopback
// ports; Compose publishes neither).
type stackUnderAttack struct {
	base     string
	replicas []string // host:port
	lab      string   // host:port, or ""
}

// attackPage is another site's page, served from 127.0.0.2 (another site
// than localhost to the browser): it sends every target an image GET, a
// no-cors POST (the lab's with a run's JSON as text/plain, as a page can)
// and an auto-submitted form, and counts each as done when the browser has
// its answer. The control target (a counter of ours on localhost) shows
// that the browser does send each kind across sites to loopback.
var attackPage = template.Must(template.New("").Parse(`<!doctype html>
<title>another site</title>
<body>
<script>
const targets = {{.}};
const pending = new Set();
window.pending = () => [...pending].join(", ");
const send = (what) => { pending.add(what); return () => { pending.delete(what); window.attackDone = pending.size === 0; }; };
for (const t of targets) {
  const img = new Image();
  img.onload = img.onerror = send("image " + t.url);
  img.src = t.url;
  fetch(t.url, {method: "POST", mode: "no-cors", body: t.body}).then(send("fetch " + t.url), send("fetch " + t.url));
  const frame = document.createElement("iframe");
  frame.name = "f" + pending.size;
  document.body.append(frame);
  frame.onload = send("form " + t.url); // after the append: about:blank's own load is not the form's
  const form = document.createElement("form");
  form.method = "POST";
  form.action = t.url;
  form.target = frame.name;
  form.enctype = "text/plain";
  const field = document.createElement("input");
  field.name = t.body;
  form.append(field);
  document.body.append(form);
  form.submit();
}
</script>`))

type attackTarget struct {
	URL  string `json:"url"`
	Body string `json:"body"`
}

// otherSitesChangeNothing opens a page of another site in a real browser
// and points it at every state-changing endpoint of s, with and without
// ?lock=none: afterwards the stock and the lab's runs are as they were. Then
// a rebound Host (DNS rebinding) is refused, 421, on every port s publishes.
func otherSitesChangeNothing(t *testing.T, s stackUnderAttack) {
	t.Helper()
	stock, runs := readStock(t, s.base), readRuns(t, s.base)

	// The control: what the browser sends us across sites, by kind.
	var mu sync.Mutex
	got := map[string]int{}
	control := serve(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			mu.Lock()
			got[r.Method+" "+r.Header.Get("Sec-Fetch-Mode")]++
			mu.Unlock()
		}
		_, _ = w.Write([]byte("ok")) // not a 204: a form's frame loads no 204, and its load is what the page waits on
	}))
	_, controlPort, _ := net.SplitHostPort(control)
	targets := []attackTarget{{URL: "http://localhost:" + controlPort + "/sale", Body: "x"}}

	sales := []string{s.base}
	for _, name := range replicaNames(t, s.base) {
		sales = append(sales, s.base+"/replica/"+name)
	}
	for _, r := range s.replicas {
		sales = append(sales, "http://"+r)
	}
	for _, b := range sales {
		targets = append(targets, attackTarget{URL: b + "/sale", Body: "x"}, attackTarget{URL: b + "/sale?lock=none", Body: "x"},
			attackTarget{URL: b + "/stock", Body: `{"stock":5}`})
	}
	labs := []string{s.base}
	if s.lab != "" {
		labs = append(labs, "http://"+s.lab)
	}
	for _, b := range labs {
		targets = append(targets, attackTarget{URL: b + "/lab/api/runs", Body: `{"locks":["none"],"requests":10,"concurrency":1,"stock":10}`},
			attackTarget{URL: b + "/lab/api/cells", Body: `{"scenario":"slow-holder","lock":"v6"}`})
	}
	page := serve(t, "127.0.0.2:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = attackPage.Execute(w, targets)
	}))

	ctx, _ := browser(t)
	if err := navigate(ctx, "http://"+page+"/"); err != nil {
		t.Fatalf("opening the other site's page: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool]("window.attackDone === true", chromedp.WithPollingTimeout(time.Minute))); err != nil {
		pending, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("window.pending()"))
		t.Fatalf("the other site's %d requests: %v; still waiting for: %s", 3*len(targets), err, pending)
	}
	mu.Lock()
	for _, kind := range []string{"GET no-cors", "POST no-cors", "POST navigate"} {
		if got[kind] == 0 {
			t.Errorf("the control got no cross-site %s request (%v): the browser did not send that kind, and the test proves nothing of it", kind, got)
		}
	}
	mu.Unlock()
	if after := readStock(t, s.base); after != stock {
		t.Errorf("the stock went from %d to %d while another site's page ran", stock, after)
	}
	if after := readRuns(t, s.base); after != runs {
		t.Errorf("the lab had %d runs before another site's page ran, %d after", runs, after)
	}

	// DNS rebinding: the attacker's name, resolved to this machine, is the
	// Host; nginx, every replica and the lab refuse it, reading and writing.
	ports := append([]string{strings.TrimPrefix(s.base, "http://")}, s.replicas...)
	if s.lab != "" {
		ports = append(ports, s.lab)
	}
	for _, addr := range ports {
		for _, req := range []struct{ method, path, body string }{
			{"GET", "/stock", ""}, {"POST", "/sale?lock=none", ""}, {"PUT", "/stock", `{"stock":5}`},
			{"GET", "/", ""}, {"POST", "/lab/api/runs", `{"locks":["none"],"requests":10,"concurrency":1,"stock":10}`},
		} {
			r, err := http.NewRequest(req.method, "http://"+addr+req.path, strings.NewReader(req.body))
			if err != nil {
				t.Fatal(err)
			}
			r.Host = "rebind.example"
			res, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatalf("%s %s with Host rebind.example: %v", req.method, addr+req.path, err)
			}
			var body struct{ Code string }
			_ = json.NewDecoder(res.Body).Decode(&body)
			res.Body.Close()
			if res.StatusCode != http.StatusMisdirectedRequest || body.Code != "unknown_host" {
				t.Errorf("%s %s with Host rebind.example: %d %q, want 421 unknown_host", req.method, addr+req.path, res.StatusCode, body.Code)
			}
		}
	}
	if after := readStock(t, s.base); after != stock {
		t.Errorf("the stock went from %d to %d under rebound requests", stock, after)
	}
}

// serve serves h on addr until the test ends, and returns its address.
func serve(t *testing.T, addr string, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return ln.Addr().String()
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, res.StatusCode)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

func readStock(t *testing.T, base string) int64 {
	t.Helper()
	var s struct{ Stock int64 }
	getJSON(t, base+"/stock", &s)
	return s.Stock
}

func readRuns(t *testing.T, base string) int {
	t.Helper()
	var runs []json.RawMessage
	getJSON(t, base+"/lab/api/runs", &runs)
	return len(runs)
}

// replicaNames are the replicas the lab knows, by the names nginx routes
// /replica/NAME/ by.
func replicaNames(t *testing.T, base string) []string {
	t.Helper()
	var cfg struct{ Replicas []string }
	getJSON(t, base+"/lab/api/config", &cfg)
	if len(cfg.Replicas) == 0 {
		t.Fatal("the lab knows no replica")
	}
	return cfg.Replicas
}
