package lab_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/lab"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/internal/scenario"
	"github.com/locklab/locklab/internal/servicetest"
)

// start serves a lab in front of one real replica (servicetest) and returns
// its URL.
func start(t *testing.T, cfg lab.Config) string {
	t.Helper()
	if cfg.SaleURL == "" {
		cfg.SaleURL = servicetest.Start(t, "r1") + "/sale"
		cfg.Replicas = []string{"r1"}
	}
	cfg.Tick = 20 * time.Millisecond
	l := lab.New(cfg)
	ts := httptest.NewServer(l.Handler())
	t.Cleanup(func() { ts.Close(); l.Close() })
	return ts.URL
}

// do sends method path with body and headers, and returns the status and
// the decoded JSON reply.
func do(t *testing.T, method, url, body string, header map[string]string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var reply map[string]any
	_ = json.NewDecoder(res.Body).Decode(&reply)
	return res.StatusCode, reply
}

// Every field is checked, and a bad one is a 400 that says what is wrong.
func TestSettingsAreValidated(t *testing.T) {
	u := start(t, lab.Config{})
	for body, want := range map[string]string{
		`{"locks":[],"requests":10,"concurrency":1,"stock":5}`:            "at least one version",
		`{"locks":["v9"],"requests":10,"concurrency":1,"stock":5}`:        `version "v9"`,
		`{"locks":["v6","v6"],"requests":10,"concurrency":1,"stock":5}`:   "twice",
		`{"locks":["v6"],"requests":0,"concurrency":1,"stock":5}`:         "requests 0",
		`{"locks":["v6","v2"],"requests":5000,"concurrency":1,"stock":5}`: "at most 8000",
		`{"locks":["v6","v2"],"requests":4001,"concurrency":1,"stock":5}`: "at most 8000",
		// 2^62 sales for each of two versions: their product wraps to 0.
		`{"locks":["v6","v2"],"requests":4611686018427387904,"concurrency":1,"stock":5}`: "at most 8000",
		`{"locks":["v6"],"requests":10,"concurrency":0,"stock":5}`:                       "concurrency 0",
		`{"locks":["v6"],"requests":10,"concurrency":257,"stock":5}`:                     "concurrency 257",
		`{"locks":["v6"],"requests":10,"concurrency":1,"stock":-1}`:                      "stock -1",
		`{"locks":["v6"],"requests":10,"concurrency":1,"stock":5,"wait":"spin"}`:         `wait "spin"`,
		`{"locks":["v6"],"requests":10,"concurrency":1,"stock":5,"colour":"red"}`:        "unknown field",
		`{"locks":["v6"],"requests":10,"concurrency":1,"stock":5} {}`:                    "more after",
		`not json`: "not the expected JSON",
		`{"locks":["v6"],"requests":10,"concurrency":1,"stock":5,"nemesis":true,"seconds":2}`:            "the nemesis for 2 s",
		`{"locks":["v6"],"requests":10,"concurrency":1,"stock":5,"nemesis":true,"seconds":121}`:          "want 5-120 s",
		`{"locks":["v6","v7","v8"],"requests":1,"concurrency":1,"stock":5,"nemesis":true,"seconds":100}`: "9000 requests",
		`{"locks":["v6"],"requests":10,"concurrency":1,"stock":5,"nemesis":true,"seconds":20}`:           "the nemesis needs a cluster to fault, and this lab has no local cluster to fault",
		`{"locks":["v6","db"],"requests":10,"concurrency":1,"stock":5}`:                                  "db: the replicas have no database (-db)",
		`{"locks":["zk","v6"],"requests":10,"concurrency":1,"stock":5}`:                                  "zk: the replicas have no ZooKeeper ensemble (-zk)",
		// Every sale would be refused (400), the old lab ran it: sold 0, "ok".
		`{"locks":["atomic"],"requests":10,"concurrency":1,"stock":5,"fence":true}`:         "fencing: atomic hands out no fencing token",
		`{"locks":["v6","redislock"],"requests":10,"concurrency":1,"stock":5,"fence":true}`: "fencing: redislock hands out no fencing token",
	} {
		status, reply := do(t, http.MethodPost, u+"/lab/api/runs", body, nil)
		if status != http.StatusBadRequest || !strings.Contains(reply["error"].(string), want) {
			t.Errorf("%s: %d %v, want 400 saying %q", body, status, reply, want)
		}
	}
}

// An unknown Host is refused (DNS rebinding), a state-changing request from
// another site too, and with a token set, a start without it.
func TestHostOriginAndToken(t *testing.T) {
	u := start(t, lab.Config{Token: "secret", Hosts: []string{"lab.example"}})
	body := `{"locks":[],"requests":1,"concurrency":1,"stock":1}` // valid enough to reach validation: 400
	cases := []struct {
		name, method, path string
		header             map[string]string
		want               int
	}{
		{"an unknown host", http.MethodGet, "/", map[string]string{"Host": "evil.example"}, http.StatusMisdirectedRequest},
		{"an unknown host, API", http.MethodGet, "/lab/api/runs", map[string]string{"Host": "evil.example:80"}, http.StatusMisdirectedRequest},
		{"a host added", http.MethodGet, "/lab/api/runs", map[string]string{"Host": "lab.example"}, http.StatusOK},
		{"an IP address", http.MethodGet, "/", map[string]string{"Host": "192.0.2.7:8080"}, http.StatusOK},
		{"an IPv6 address", http.MethodGet, "/", map[string]string{"Host": "[2001:db8::1]"}, http.StatusOK},
		{"a .localhost name", http.MethodGet, "/", map[string]string{"Host": "lab.localhost"}, http.StatusOK},
		{"a name ending like an address", http.MethodGet, "/", map[string]string{"Host": "127.0.0.1.evil.example"}, http.StatusMisdirectedRequest},
		{"another site's page", http.MethodPost, "/lab/api/runs", map[string]string{"Origin": "http://evil.example", "Authorization": "Bearer secret"}, http.StatusForbidden},
		{"a cross-site fetch", http.MethodPost, "/lab/api/runs", map[string]string{"Sec-Fetch-Site": "cross-site", "Authorization": "Bearer secret"}, http.StatusForbidden},
		{"no token", http.MethodPost, "/lab/api/runs", nil, http.StatusUnauthorized},
		{"a wrong token", http.MethodPost, "/lab/api/runs", map[string]string{"Authorization": "Bearer nope"}, http.StatusUnauthorized},
		{"no token to stop", http.MethodDelete, "/lab/api/runs/current", nil, http.StatusUnauthorized},
		{"the token", http.MethodPost, "/lab/api/runs", map[string]string{"Authorization": "Bearer secret"}, http.StatusBadRequest},
		{"its own page", http.MethodPost, "/lab/api/runs", map[string]string{"Origin": u, "Sec-Fetch-Site": "same-origin", "Authorization": "Bearer secret"}, http.StatusBadRequest},
		{"reading needs no token", http.MethodGet, "/lab/api/config", nil, http.StatusOK},
	}
	for _, c := range cases {
		status, reply := do(t, c.method, u+c.path, body, c.header)
		if status != c.want {
			t.Errorf("%s: %d %v, want %d", c.name, status, reply, c.want)
		}
		if status >= 400 && (reply["error"] == nil || reply["code"] == nil) {
			t.Errorf("%s: %d without a JSON error: %v", c.name, status, reply)
		}
	}
}

// One run at a time: a second start while one runs is a 409 naming it; a
// stop cancels it, and it ends as cancelled with what it did kept.
func TestOneRunAtATime(t *testing.T) {
	u := start(t, lab.Config{})
	status, first := do(t, http.MethodPost, u+"/lab/api/runs", `{"locks":["v6"],"requests":8000,"concurrency":2,"stock":100000}`, nil)
	if status != http.StatusAccepted {
		t.Fatalf("start: %d %v", status, first)
	}
	id := first["id"].(string)
	status, second := do(t, http.MethodPost, u+"/lab/api/runs", `{"locks":["v6"],"requests":10,"concurrency":1,"stock":5}`, nil)
	if status != http.StatusConflict || second["running"] != id || !strings.Contains(second["error"].(string), id) {
		t.Fatalf("a second start while %s runs: %d %v, want 409 naming it", id, status, second)
	}
	// Its report is written once, when it ends: asked for while it still
	// runs (it does if it runs after the reply), a 409.
	status, rep := do(t, http.MethodGet, u+"/lab/api/runs/"+id+"/report", "", nil)
	if _, run := do(t, http.MethodGet, u+"/lab/api/runs/"+id, "", nil); run["status"] == "running" && (status != http.StatusConflict || rep["code"] != "running") {
		t.Fatalf("the report of a running run: %d %v, want 409 running", status, rep)
	}
	if status, reply := do(t, http.MethodDelete, u+"/lab/api/runs/current", "", nil); status != http.StatusAccepted {
		t.Fatalf("stop: %d %v", status, reply)
	}
	var run map[string]any
	locktest.WaitFor(t, 30*time.Second, "the run to end", func() bool {
		_, run = do(t, http.MethodGet, u+"/lab/api/runs/"+id, "", nil)
		return run["status"] != "running"
	})
	if run["status"] != "cancelled" {
		t.Fatalf("stopped run: %v, want cancelled", run["status"])
	}
	if status, reply := do(t, http.MethodDelete, u+"/lab/api/runs/current", "", nil); status != http.StatusConflict {
		t.Fatalf("stop with nothing running: %d %v, want 409", status, reply)
	}
	if status, _ := do(t, http.MethodPost, u+"/lab/api/runs", `{"locks":["v6"],"requests":5,"concurrency":1,"stock":5}`, nil); status != http.StatusAccepted {
		t.Fatalf("a start once the run ended: %d", status)
	}
}

// event is one Server-Sent Event.
type event struct{ kind, data string }

// stream reads the lab's live feed into a channel until the test ends.
func stream(t *testing.T, u string) <-chan event {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u+"/lab/api/events", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("feed Content-Type %q", ct)
	}
	ch := make(chan event, 1024)
	go func() {
		defer res.Body.Close()
		defer close(ch)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		var e event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				e.kind = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				e.data = strings.TrimPrefix(line, "data: ")
			case line == "" && e.kind != "":
				select {
				case ch <- e:
				case <-ctx.Done():
					return
				}
				e = event{}
			}
		}
	}()
	return ch
}

// A run of two versions, followed live: the feed starts with a snapshot,
// then progress with holds, each version's result with the checker's
// verdict (none oversells; v6 holds the lock, none does not), and the end;
// the run's JSON has every hold, and its report opens.
func TestRunIsFollowedAndJudged(t *testing.T) {
	u := start(t, lab.Config{})
	feed := stream(t, u)
	if e := <-feed; e.kind != "snapshot" {
		t.Fatalf("first event %q, want the snapshot", e.kind)
	}
	status, reply := do(t, http.MethodPost, u+"/lab/api/runs", `{"locks":["v6","atomic"],"requests":300,"concurrency":8,"stock":200}`, nil)
	if status != http.StatusAccepted {
		t.Fatalf("start: %d %v", status, reply)
	}
	id := reply["id"].(string)
	liveHolds, results := 0, map[string]map[string]any{}
	timeout := time.After(60 * time.Second)
	for done := false; !done; {
		select {
		case e, ok := <-feed:
			if !ok {
				t.Fatal("the feed ended")
			}
			if e.kind == "stack" {
				continue
			}
			var v map[string]any
			if err := json.Unmarshal([]byte(e.data), &v); err != nil {
				t.Fatalf("%s: %v", e.kind, err)
			}
			switch e.kind {
			case "progress":
				holds, _ := v["holds"].([]any)
				liveHolds += len(holds)
			case "holds": // atomic holds no lock: [], not null (the page drew a null hold and stopped drawing)
				if _, ok := v["holds"].([]any); !ok {
					t.Errorf("holds event for %v: %s, want a list", v["lock"], e.data)
				}
			case "result":
				r := v["result"].(map[string]any)
				results[r["lock"].(string)] = r
			case "end":
				done = v["id"] == id
			}
		case <-timeout:
			t.Fatal("no end of the run within 60 s")
		}
	}
	if liveHolds == 0 {
		t.Error("no hold reached the page while the run went")
	}
	for lock, holds := range map[string]float64{"v6": 300, "atomic": 0} {
		r := results[lock]
		if r == nil || r["sold"] != 200.0 || r["oversold"] != 0.0 || r["two_holders"] != 0.0 || r["linearizability"] != "ok" || r["holds"] != holds {
			t.Errorf("%s: result %v, want 200 sold, none oversold, linearizable, %v holds", lock, r, holds)
		}
	}
	_, run := do(t, http.MethodGet, u+"/lab/api/runs/"+id, "", nil)
	if holds, _ := run["holds"].([]any); run["status"] != "done" || len(holds) != 300 {
		t.Fatalf("run: status %v, %d holds, want done and v6's 300", run["status"], len(holds))
	}
	var first []byte
	for range 2 { // written once: the second GET answers the same bytes
		res, err := http.Get(u + "/lab/api/runs/" + id + "/report")
		if err != nil || res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("report: %v %v", res, err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || len(b) == 0 || first != nil && !bytes.Equal(first, b) {
			t.Fatalf("report: %d bytes (%v), the first GET's %d", len(b), err, len(first))
		}
		first = b
	}
}

// The live stream is capped per client and in all (each one opens with a
// snapshot of the running run): one more is a JSON 429, and a stream closed
// makes room again.
func TestLiveStreamsAreCapped(t *testing.T) {
	u := start(t, lab.Config{})
	open := func(client string) (*http.Response, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u+"/lab/api/events", nil)
		req.Header.Set("X-Real-IP", client)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Body.Close() })
		return res, cancel
	}
	refused := func(res *http.Response) bool {
		var reply struct{ Error, Code string }
		return res.StatusCode == http.StatusTooManyRequests && json.NewDecoder(res.Body).Decode(&reply) == nil && reply.Code == "too_many_streams"
	}
	var cancels []context.CancelFunc
	for i := range lab.MaxStreamsPerClient {
		res, cancel := open("192.0.2.1")
		if res.StatusCode != http.StatusOK {
			t.Fatalf("stream %d of one client: %d", i+1, res.StatusCode)
		}
		cancels = append(cancels, cancel)
	}
	if res, _ := open("192.0.2.1"); !refused(res) {
		t.Fatalf("one stream over the client's cap: %d, want 429 too_many_streams", res.StatusCode)
	}
	if res, _ := open("192.0.2.2"); res.StatusCode != http.StatusOK {
		t.Fatalf("another client: %d, want 200", res.StatusCode)
	}
	cancels[0]() // closed: room again once the lab sees it gone
	locktest.WaitFor(t, 10*time.Second, "a closed stream to make room", func() bool {
		res, _ := open("192.0.2.1")
		return res.StatusCode == http.StatusOK
	})
	for i := 0; ; i++ { // the total: clients of their own until one is refused
		res, _ := open(fmt.Sprintf("198.51.100.%d", i))
		if res.StatusCode != http.StatusOK {
			if !refused(res) || i+lab.MaxStreamsPerClient+1 != lab.MaxStreams {
				t.Fatalf("stream %d in all: %d, want 429 at %d in all", i+lab.MaxStreamsPerClient+2, res.StatusCode, lab.MaxStreams+1)
			}
			break
		}
	}
}

// The stack's health: a Redis node that answers is up, a closed port down,
// a listener that accepts and never answers frozen.
func TestStackHealth(t *testing.T) {
	rdb := redistest.Start(t)
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()
	silent, _ := net.Listen("tcp", "127.0.0.1:0")
	t.Cleanup(func() { silent.Close() })
	go func() {
		var held []net.Conn
		for {
			c, err := silent.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	u := start(t, lab.Config{Nodes: []lab.Node{{Name: "up", Kind: "redis", Addr: rdb.Addr},
		{Name: "down", Kind: "redis", Addr: closedAddr}, {Name: "frozen", Kind: "redis", Addr: silent.Addr().String()}}})
	feed := stream(t, u)
	want := map[string]string{"up": "up", "down": "down", "frozen": "frozen", "r1": "up", "nginx": "up"}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e := <-feed:
			var nodes []lab.NodeHealth
			if e.kind == "stack" {
				_ = json.Unmarshal([]byte(e.data), &nodes)
			} else if e.kind == "snapshot" {
				var s struct{ Stack []lab.NodeHealth }
				_ = json.Unmarshal([]byte(e.data), &s)
				nodes = s.Stack
			}
			got := map[string]string{}
			for _, n := range nodes {
				got[n.Name] = n.State
			}
			if len(got) == len(want) && func() bool {
				for k, v := range want {
					if got[k] != v {
						return false
					}
				}
				return true
			}() {
				return
			}
		case <-deadline:
			t.Fatal("the stack's states never read up, down, frozen as they are")
		}
	}
}

// A cell is asked for by scenario and version, both checked; a lab with no
// cluster to fault says so (503) instead of trying.
func TestCellsAreValidated(t *testing.T) {
	u := start(t, lab.Config{})
	for body, want := range map[string]int{
		`{"scenario":"no-such","lock":"v6"}`:           http.StatusBadRequest,
		`{"scenario":"slow-holder","lock":"v3"}`:       http.StatusBadRequest, // slow-holder has no v3 cell
		`{"scenario":"slow-holder"}`:                   http.StatusBadRequest,
		`{"scenario":"slow-holder","lock":"v6","x":1}`: http.StatusBadRequest,
		`{"scenario":"slow-holder","lock":"v6"}`:       http.StatusServiceUnavailable,
	} {
		if status, reply := do(t, http.MethodPost, u+"/lab/api/cells", body, nil); status != want || reply["error"] == nil {
			t.Errorf("%s: %d %v, want %d with an error", body, status, reply, want)
		}
	}
	status, m := do(t, http.MethodGet, u+"/lab/api/scenarios", "", nil)
	if status != http.StatusOK || m["available"] != false || len(m["scenarios"].([]any)) < 20 {
		t.Fatalf("scenarios: %d, available %v, %d scenarios", status, m["available"], len(m["scenarios"].([]any)))
	}
}

// Each version's lesson shows its code as the service runs it: the lines
// marked as its acquire and release, as a diff against the version before
// (v4 against v3: the two lines the tutorial changes), and the whole files,
// the lock package's Go code first, then its scripts; the sale's script for
// atomic, its read-check-write for none; 404 for a version that does not
// exist.
func TestLessonCode(t *testing.T) {
	u := start(t, lab.Config{})
	for _, c := range []struct {
		version, first, has string
	}{
		{"v6", "internal/locks/v6_lua/lua.go", "internal/locks/v6_lua/release.lua"},
		{"v4", "internal/locks/v3_setnx/setnx.go", "internal/locks/v3_setnx/try.lua"},
		{"redlock", "internal/locks/redlock/redlock.go", ""},
		{"atomic", "internal/sale/decrement.lua", ""},
		{"none", "internal/sale/sale.go", ""},
	} {
		status, reply := do(t, http.MethodGet, u+"/lab/api/code/"+c.version, "", nil)
		files, _ := reply["files"].([]any)
		if status != http.StatusOK || len(files) == 0 {
			t.Fatalf("%s: %d %v", c.version, status, reply)
		}
		var paths []string
		for _, f := range files {
			m := f.(map[string]any)
			if m["text"] == "" {
				t.Errorf("%s: %s is empty", c.version, m["path"])
			}
			paths = append(paths, m["path"].(string))
		}
		if paths[0] != c.first || (c.has != "" && !slices.Contains(paths, c.has)) {
			t.Errorf("%s: files %v, want %s first and %q among them", c.version, paths, c.first, c.has)
		}
	}
	_, v4 := do(t, http.MethodGet, u+"/lab/api/code/v4", "", nil)
	ops := map[string]int{}
	for _, l := range v4["diff"].([]any) {
		ops[l.(map[string]any)["op"].(string)]++
	}
	if v4["base"] != "v3" || ops["-"] != 2 || ops["+"] != 2 || ops["="] == 0 {
		t.Errorf("v4's lesson: base %v, diff %v; want v3, 2 lines changed for 2, the rest the same", v4["base"], ops)
	}
	if status, reply := do(t, http.MethodGet, u+"/lab/api/code/v9", "", nil); status != http.StatusNotFound || reply["code"] != api.CodeUnknownLock {
		t.Errorf("v9: %d %v, want 404 unknown_lock", status, reply)
	}
}

// heldReplies serves h, holding each reply to a POST to path until release
// is closed: the test decides that the live events reach it first.
func heldReplies(h http.Handler, path string, release <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != path {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		<-release
		maps.Copy(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// next waits for the feed's first event of kind whose data has field
// equal to want (field "": any), and decodes it.
func next(t *testing.T, feed <-chan event, kind, field, want string) map[string]any {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e, ok := <-feed:
			if !ok {
				t.Fatalf("the feed ended before a %s event with %s %s", kind, field, want)
			}
			var m map[string]any
			if e.kind != kind || json.Unmarshal([]byte(e.data), &m) != nil || (field != "" && m[field] != want) {
				continue
			}
			return m
		case <-timeout:
			t.Fatalf("no %s event with %s %s within 30 s", kind, field, want)
		}
	}
}

// The page follows the server's last word: a cell that fails at once (the
// replicas run without their fault hooks) and a nemesis run that does,
// each with its failure's event sent before the reply to the request
// that started it. The reply still says "running", and carries a lower Rev
// than the failure: the page keeps the higher, so a stale "running" cannot
// stay. The failure says why in words, with the command, its record apart.
func TestTheLastWordWins(t *testing.T) {
	release := make(chan struct{})
	sale := servicetest.Start(t, "r1") + "/sale"
	noHooks := func(context.Context) (scenario.Env, error) {
		return scenario.Env{}, fmt.Errorf("%w (make scenarios starts them so)", scenario.ErrNoFaultHooks)
	}
	l := lab.New(lab.Config{SaleURL: sale, Replicas: []string{"r1"}, Tick: 20 * time.Millisecond, Cells: noHooks})
	mux := http.NewServeMux()
	mux.Handle("/lab/api/cells", heldReplies(l.Handler(), "/lab/api/cells", release))
	mux.Handle("/lab/api/runs", heldReplies(l.Handler(), "/lab/api/runs", release))
	mux.Handle("/", l.Handler())
	ts := httptest.NewServer(mux)
	t.Cleanup(func() { ts.Close(); l.Close() })
	feed := stream(t, ts.URL)

	type reply struct {
		status int
		body   map[string]any
	}
	post := func(path, body string) <-chan reply {
		out := make(chan reply, 1)
		go func() {
			res, err := http.Post(ts.URL+path, "application/json", strings.NewReader(body))
			if err != nil {
				out <- reply{}
				return
			}
			defer res.Body.Close()
			var m map[string]any
			_ = json.NewDecoder(res.Body).Decode(&m)
			out <- reply{res.StatusCode, m}
		}()
		return out
	}
	cellReply := post("/lab/api/cells", `{"scenario":"slow-holder","lock":"v6"}`)
	failed := next(t, feed, "cell", "status", "failed")
	runReply := post("/lab/api/runs", `{"locks":["v6"],"requests":10,"concurrency":1,"stock":5,"nemesis":true,"seconds":5}`)
	ended := next(t, feed, "end", "status", "failed")
	close(release) // only now the replies
	cell, run := <-cellReply, <-runReply
	if cell.status != http.StatusAccepted || cell.body["status"] != "running" || run.status != http.StatusAccepted || run.body["status"] != "running" {
		t.Fatalf("the replies: cell %d %v, run %d %v; want 202 running, each", cell.status, cell.body, run.status, run.body)
	}
	if cell.body["rev"].(float64) >= failed["rev"].(float64) || run.body["rev"].(float64) >= ended["rev"].(float64) {
		t.Errorf("revs: the cell's reply %v, its failure %v; the run's reply %v, its end %v: each reply must be older",
			cell.body["rev"], failed["rev"], run.body["rev"], ended["rev"])
	}
	want := "Could not run: the replicas run without their fault hooks (make up starts them so), start make lab."
	if failed["why"] != want || !strings.Contains(failed["error"].(string), "-chaos") {
		t.Errorf("the failed cell says %q (record %q); want %q, the record apart", failed["why"], failed["error"], want)
	}
	// Its why as reasons, for the page: the sentence's code, and the why
	// inside it, each found by its text.
	if got, _ := json.Marshal(failed["reasons"]); string(got) != `[{"code":"noHooks","text":"the replicas run without their fault hooks (make up starts them so)"},`+
		`{"code":"couldNotRunStart","params":{"command":"make lab","why":"the replicas run without their fault hooks (make up starts them so)"},"text":"`+want+`"}]` {
		t.Errorf("the failed cell's reasons: %s", got)
	}
	// What the lab says now is the failure, as the page shows it.
	if _, now := do(t, http.MethodGet, ts.URL+"/lab/api/cells/slow-holder/v6", "", nil); now["status"] != "failed" || now["rev"] != failed["rev"] {
		t.Errorf("the cell now: %v, want the failure", now)
	}
}

// A page whose live feed opens only after its cell ended (refused at first,
// 429, while closed pages' streams still counted; or dropped and
// reconnected) hears how it ended: the feed's snapshot carries each cell's
// last state, rev and all, the timeline left to GET. The cell's reply said
// "running"; without it the page would say so for ever (TestLab's cells in
// 简体中文, in a browser opened after the others' quick navigations).
func TestAFeedOpenedLateHearsTheCell(t *testing.T) {
	noHooks := func(context.Context) (scenario.Env, error) {
		return scenario.Env{}, fmt.Errorf("%w (make scenarios starts them so)", scenario.ErrNoFaultHooks)
	}
	u := start(t, lab.Config{Cells: noHooks})
	status, reply := do(t, http.MethodPost, u+"/lab/api/cells", `{"scenario":"slow-holder","lock":"v6"}`, nil)
	if status != http.StatusAccepted || reply["status"] != "running" {
		t.Fatalf("the cell's reply: %d %v", status, reply)
	}
	var now map[string]any
	locktest.WaitFor(t, 10*time.Second, "the cell to fail", func() bool {
		_, now = do(t, http.MethodGet, u+"/lab/api/cells/slow-holder/v6", "", nil)
		return now["status"] == "failed"
	})
	snap := next(t, stream(t, u), "snapshot", "", "")
	cells, _ := snap["cells"].([]any)
	if len(cells) != 1 {
		t.Fatalf("the snapshot's cells: %v; want the failed one", snap["cells"])
	}
	c := cells[0].(map[string]any)
	if c["scenario"] != "slow-holder" || c["lock"] != "v6" || c["status"] != "failed" || c["rev"] != now["rev"] || c["why"] != now["why"] {
		t.Errorf("the snapshot's cell: %v; want %v", c, now)
	}
	if c["ended"] == nil {
		t.Errorf("the failed cell has no end: %v", c)
	}
	if _, ok := c["holds"]; ok {
		t.Errorf("the snapshot's cell carries its timeline: %v", c)
	}
}

// On replicas that say their fault hooks are off (make up's), no cell is
// offered: the matrix says why and names make lab, and a cell asked for
// anyway is refused (503) with the same words, never started to fail.
func TestNoCellsWithoutFaultHooks(t *testing.T) {
	sale := servicetest.StartWith(t, "r1", map[string]string{"chaos": "false"}) + "/sale"
	u := start(t, lab.Config{SaleURL: sale, Replicas: []string{"r1"},
		Cells: func(context.Context) (scenario.Env, error) { t.Error("a cell was started"); return scenario.Env{}, nil }})
	var m map[string]any
	locktest.WaitFor(t, 10*time.Second, "the matrix to say the cells cannot run", func() bool {
		_, m = do(t, http.MethodGet, u+"/lab/api/scenarios", "", nil)
		return m["available"] == false
	})
	if m["why"] != "the replicas run without their fault hooks (make up starts them so)" || m["command"] != "make lab" {
		t.Errorf("the matrix says %q, command %q", m["why"], m["command"])
	}
	status, reply := do(t, http.MethodPost, u+"/lab/api/cells", `{"scenario":"slow-holder","lock":"v6"}`, nil)
	if status != http.StatusServiceUnavailable || !strings.HasPrefix(reply["error"].(string), "Could not run: the replicas run without their fault hooks") || !strings.HasSuffix(reply["error"].(string), "start make lab.") {
		t.Errorf("a cell asked for: %d %v", status, reply)
	}
}

// The step-through's calls reach the sale's own replica by its route:
// a stepped sale starts stopped before its lock's SET (the lesson's 10 s
// lease), steps, is read with the store between, and is reset; a replica
// the stack does not have, or a step that is neither next nor end, is 404.
func TestLessonSteps(t *testing.T) {
	u := start(t, lab.Config{})
	status, r := do(t, "POST", u+"/lab/api/lesson/r1/sale", `{"id":"t-A","lock":"v4","stock":10}`, nil)
	next, _ := r["next"].(map[string]any)
	if status != http.StatusAccepted || r["state"] != "stopped" || next == nil || !strings.HasSuffix(next["command"].(string), " ex 10 nx") {
		t.Fatalf("starting A: %d %v, want 202, stopped before SET ... ex 10 nx", status, r)
	}
	if status, r = do(t, "GET", u+"/lab/api/lesson/store", "", nil); status != http.StatusOK || r["stock"] != "10" || r["lock"] != nil {
		t.Fatalf("the store before A's SET: %d %v, want stock 10, no lock", status, r)
	}
	if status, r = do(t, "POST", u+"/lab/api/lesson/r1/steps/t-A/next", "", nil); status != http.StatusOK || r["phase"] != "stock" {
		t.Fatalf("A's next: %d %v", status, r)
	}
	status, r = do(t, "GET", u+"/lab/api/lesson/store", "", nil)
	if lock, _ := r["lock"].(map[string]any); status != http.StatusOK || lock == nil || lock["pttl_ms"].(float64) <= 0 {
		t.Fatalf("the store after A's SET: %d %v, want the lock with its lease running", status, r)
	}
	for _, c := range []struct{ method, path string }{{"POST", "/lab/api/lesson/r1/steps/t-A/skip"}, {"GET", "/lab/api/lesson/r9/steps/t-A"}} {
		if status, r = do(t, c.method, u+c.path, "", nil); status != http.StatusNotFound {
			t.Errorf("%s %s: %d %v, want 404", c.method, c.path, status, r)
		}
	}
	if status, r = do(t, "POST", u+"/lab/api/lesson/r1/sale", `{"id":"t-B","lock":"v4","stock":5000}`, nil); status != http.StatusBadRequest {
		t.Errorf("a stock of 5000: %d %v, want 400", status, r)
	}
	if status, r = do(t, "DELETE", u+"/lab/api/lesson/r1/steps/t-A", "", nil); status != http.StatusOK || r["state"] != "done" {
		t.Fatalf("resetting A: %d %v", status, r)
	}
	if status, r = do(t, "GET", u+"/lab/api/lesson/store", "", nil); r["lock"] != nil || r["stock"] != "10" {
		t.Fatalf("the store after the reset: %d %v, want no lock and stock 10", status, r)
	}
}

// The store's read passes ?lock= on to the replica, which reads the lock
// where the version keeps it: a Redis version adds nothing to the store, a
// version whose service the replica has not (ZooKeeper, as in the Compose
// stack) answers 503 as its sales do, and a name no version has is a 400.
func TestLessonStoreLock(t *testing.T) {
	u := start(t, lab.Config{})
	if status, r := do(t, "GET", u+"/lab/api/lesson/store?lock=v4", "", nil); status != http.StatusOK || r["queue"] != nil || r["stock_key"] == nil {
		t.Fatalf("the store with v4's lock: %d %v, want the store, no queue", status, r)
	}
	if status, r := do(t, "GET", u+"/lab/api/lesson/store?lock=zk", "", nil); status != http.StatusServiceUnavailable || r["code"] != "unavailable" {
		t.Fatalf("the store with zk's lock, no ZooKeeper: %d %v, want 503 unavailable", status, r)
	}
	if status, r := do(t, "GET", u+"/lab/api/lesson/store?lock=nope", "", nil); status != http.StatusBadRequest || r["code"] != "unknown_lock" {
		t.Fatalf("the store with a lock no version has: %d %v, want 400 unknown_lock", status, r)
	}
}

// Each view of the page has its own address, served the page (lab.js draws
// the view it names); an address that names none is a 404; the favicon is
// served, so no browser logs its 404.
func TestViewAddresses(t *testing.T) {
	u := start(t, lab.Config{})
	for _, path := range []string{"/", "/lab/lessons", "/lab/lessons/v4", "/lab/runs", "/lab/runs/r1", "/lab/faults", "/lab/libraries", "/lab/stack"} {
		res, err := http.Get(u + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `<nav id="views"`) || res.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("GET %s: %d, %d bytes, CSP %q; want the page", path, res.StatusCode, len(body), res.Header.Get("Content-Security-Policy"))
		}
	}
	for _, path := range []string{"/lab/nothing", "/lab/faults/v4", "/lessons/v4"} {
		if status, _ := do(t, http.MethodGet, u+path, "", nil); status != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, status)
		}
	}
	for _, path := range []string{"/favicon.ico", "/lab/static/favicon.svg"} {
		res, err := http.Get(u + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "image/svg+xml" {
			t.Errorf("GET %s: %d %q, want an SVG", path, res.StatusCode, res.Header.Get("Content-Type"))
		}
	}
}
